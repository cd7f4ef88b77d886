//! Client throughput: sign + publish messages per second through the spool to a real
//! broker, Rust (`BlockingPublisher` one at a time, and the async `Publisher` with
//! 256 in flight) and Python (the installed `audita` wheel, one at a time), next to
//! raw Ed25519 signing of the same bodies in the same run.
//!
//! `cargo bench -p audita-client --bench publish` (optional `-- N` messages per row,
//! default 2000). Uses the broker of `AUDITA_KAFKA_BOOTSTRAP` or starts one; the
//! Python row needs the wheel installed (`.ci/run` does) and is reported as missing
//! otherwise.

use std::time::Instant;

use audita_bus::testing::{unique_name, KafkaBroker};
use audita_client::{BlockingPublisher, Payload, Principal, Publisher, PublisherConfig};

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(2000);
    let broker = KafkaBroker::start().expect("a Kafka broker");
    let key = audita_keys::generate();
    let sensor = Principal::from_key("lidar-1", key.clone()).unwrap();
    let report = |i: usize| Payload::SensorReport {
        sensor: "lidar-1".into(),
        reading: format!("human@{},{} seq {i}", i % 5000, 2 * i % 7000),
    };

    // Raw Ed25519 signing over the same PAE bodies.
    let bodies: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            sensor
                .message("supervisor", i as u64, report(i))
                .unwrap()
                .encode_body()
        })
        .collect();
    let t = Instant::now();
    for b in &bodies {
        std::hint::black_box(audita_evidence::dsse::sign(
            &key,
            audita_evidence::dsse::ENVELOPE_TYPE,
            b,
        ));
    }
    let raw = n as f64 / t.elapsed().as_secs_f64();

    let prefix = unique_name("bench.") + ".";
    let spool = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let config = |dir: &str| {
        let mut c = PublisherConfig::new(broker.bootstrap(), spool.path().join(dir));
        c.topic_prefix = prefix.clone();
        c
    };
    // Blocking: sign, spool (fsync), publish, wait for the acknowledgement, unspool.
    let p = BlockingPublisher::open(config("blocking")).unwrap();
    let t = Instant::now();
    for i in 0..n {
        let e = sensor
            .sign(sensor.message("supervisor", i as u64, report(i)).unwrap())
            .unwrap();
        p.publish(&e).unwrap();
    }
    let blocking = n as f64 / t.elapsed().as_secs_f64();
    drop(p);

    // Async, 256 in flight.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let pipelined = rt.block_on(async {
        let p = std::sync::Arc::new(Publisher::new(config("async")).unwrap());
        let t = Instant::now();
        let mut inflight = Vec::new();
        for i in 0..n {
            let e = sensor
                .sign(
                    sensor
                        .message("supervisor", (n + i) as u64, report(i))
                        .unwrap(),
                )
                .unwrap();
            let p = p.clone();
            inflight.push(tokio::spawn(async move { p.publish(&e).await.map(|_| ()) }));
            if inflight.len() >= 256 {
                for h in inflight.drain(..) {
                    h.await.unwrap().unwrap();
                }
            }
        }
        for h in inflight {
            h.await.unwrap().unwrap();
        }
        n as f64 / t.elapsed().as_secs_f64()
    });

    let python = std::process::Command::new("python3")
        .args([
            "-c",
            PY,
            broker.bootstrap(),
            &prefix,
            spool.path().join("py").to_str().unwrap(),
            &n.to_string(),
        ])
        .output();
    let python = match python {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .trim()
            .parse::<f64>()
            .ok(),
        _ => None,
    };

    println!("client sign + publish, {n} sensor reports per row, broker on loopback");
    println!("| what | msg/s | vs raw Ed25519 signing |");
    println!("| --- | ---: | ---: |");
    println!("| raw Ed25519 sign (PAE body, no encoding, no I/O) | {raw:.0} | 1.000× |");
    println!("| Rust, blocking: sign + spool fsync + publish + ack, one at a time | {blocking:.0} | {:.3}× |", blocking / raw);
    println!(
        "| Rust, async: same, 256 in flight | {pipelined:.0} | {:.3}× |",
        pipelined / raw
    );
    match python {
        Some(py) => println!(
            "| Python (`audita` wheel), blocking, one at a time | {py:.0} | {:.3}× |",
            py / raw
        ),
        None => println!("| Python (`audita` wheel) | not installed | — |"),
    }
}

const PY: &str = r#"
import sys, time, audita
bootstrap, prefix, spool, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
p = audita.Principal.generate("lidar-2")
with audita.Publisher(bootstrap, spool, topic_prefix=prefix) as pub:
    t = time.perf_counter()
    for i in range(n):
        pub.publish(p.sign("supervisor", i, audita.sensor_report("lidar-2", f"human@{i % 5000},{2 * i % 7000} seq {i}")))
    print(n / (time.perf_counter() - t))
"#;
