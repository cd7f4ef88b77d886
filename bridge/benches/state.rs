//! VDA 5050 `state` through the bridge at 1,000 vehicles, beside raw Ed25519 signing
//! and the schema-validation cost alone, measured in one run:
//! 1. raw Ed25519 signing of the same envelope bodies (no JSON, no I/O);
//! 2. intake alone: bound, topic, JSON with the duplicate-key check, the official
//!    2.1.0 `state` schema, vehicle and timestamp checks;
//! 3. the bridge's work without I/O: intake + mapping + signing, through the
//!    sidecar cores of 1,000 vehicle principals (one key each);
//! 4. end to end: a real Mosquitto and a real Kafka broker, one process serving the
//!    1,000 vehicle principals (`audita_bridge::run_many`: keys distinct, but in one
//!    process — a benchmark arrangement, not the deployment's one sidecar per
//!    vehicle), from the first MQTT publish until Kafka acknowledged every
//!    envelope; every message fsync'd into the spool before its MQTT ack.
//!
//! `cargo bench -p audita-bridge --bench state` (optional `-- VEHICLES ROUNDS`,
//! default 1000 5: 5,000 messages published in one burst, which once stalled the
//! bridge — issue 14, see BENCHMARKS.md). Uses the Kafka broker of
//! `AUDITA_KAFKA_BOOTSTRAP` or starts one; needs mosquitto installed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use audita_bridge::check::{Intake, DEFAULT_MAX_PAYLOAD};
use audita_bridge::map::{self, VehicleNames};
use audita_bridge::peers::Peers;
use audita_bridge::schema::Schemas;
use audita_bridge::sidecar::{Core, Outcome};
use audita_bridge::testing::{self, Mosquitto, MqttPublisher};
use audita_bridge::topic::Interface;
use audita_bridge::{BridgeConfig, Counters, Role};
use audita_bus::kafka::KafkaBus;
use audita_bus::testing::{unique_name, KafkaBroker};
use audita_bus::TopicSpec;
use audita_client::Principal;
use audita_evidence::{KeyRegistry, PrincipalId, SigningKey};
use audita_topics::names as topics;

fn serial(v: usize) -> String {
    format!("{v:04}")
}

fn intake() -> Intake {
    Intake {
        interface: Interface::parse("uagv/v2").unwrap(),
        schemas: Schemas::load().unwrap(),
        max_payload: DEFAULT_MAX_PAYLOAD,
    }
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let vehicles = args.first().copied().unwrap_or(1000);
    let rounds = args.get(1).copied().unwrap_or(5);
    let n = vehicles * rounds;
    let keys: Vec<SigningKey> = (0..vehicles).map(|_| audita_keys::generate()).collect();
    let master = PrincipalId::new("master-control").unwrap();
    let names = VehicleNames::default();
    // Round-robin over the vehicles, as a fleet reports.
    let msgs: Vec<(String, String, usize)> = (0..rounds)
        .flat_map(|r| {
            (0..vehicles).map(move |v| {
                (
                    format!("uagv/v2/acme/{}/state", serial(v)),
                    testing::state(
                        "2.1.0",
                        "acme",
                        &serial(v),
                        r as u64,
                        v as f64 * 0.5,
                        r as f64 * 0.2,
                        0.8,
                    ),
                    v,
                )
            })
        })
        .collect();
    let bytes: usize = msgs.iter().map(|m| m.1.len()).sum();
    eprintln!(
        "{n} state messages ({vehicles} vehicles × {rounds} rounds), {} bytes each on average",
        bytes / n
    );
    let intake = intake();

    // 1. Raw Ed25519 signing of the envelope bodies.
    let bodies: Vec<(usize, Vec<u8>)> = msgs
        .iter()
        .map(|(t, s, v)| {
            let m = intake.check(t, s.as_bytes()).unwrap();
            let agv = names.principal("acme", &serial(*v)).unwrap();
            (
                *v,
                map::vehicle_report(&m, &agv, &master, m.timestamp_ms.unwrap()).encode_body(),
            )
        })
        .collect();
    let t = Instant::now();
    for (v, b) in &bodies {
        std::hint::black_box(audita_evidence::dsse::sign(
            &keys[*v],
            audita_evidence::dsse::ENVELOPE_TYPE,
            b,
        ));
    }
    let raw = n as f64 / t.elapsed().as_secs_f64();

    // 2. Intake alone.
    let t = Instant::now();
    for (topic, s, _) in &msgs {
        std::hint::black_box(intake.check(topic, s.as_bytes()).unwrap());
    }
    let checked = n as f64 / t.elapsed().as_secs_f64();

    // 3. Intake + mapping + signing through 1,000 vehicle cores, no I/O.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let shared = Arc::new(intake);
    let peers = Arc::new(Peers::new(1 << 16));
    let counters = Arc::new(Counters::default());
    let mut cores: Vec<Core> = (0..vehicles)
        .map(|v| {
            let agv = names.principal("acme", &serial(v)).unwrap();
            Core::new(
                shared.clone(),
                Role::Vehicle {
                    manufacturer: "acme".into(),
                    serial: serial(v),
                },
                Principal::from_key(agv.as_str(), keys[v].clone()).unwrap(),
                master.clone(),
                names.clone(),
                peers.clone(),
                Duration::from_millis(0),
                counters.clone(),
            )
            .unwrap()
        })
        .collect();
    let t = Instant::now();
    rt.block_on(async {
        for (topic, s, v) in &msgs {
            match cores[*v].decide(topic, s.as_bytes()).await {
                Outcome::Evidence(e, _) => {
                    std::hint::black_box(e);
                }
                o => panic!("{o:?}"),
            }
        }
    });
    let mapped = n as f64 / t.elapsed().as_secs_f64();
    drop(cores);

    // 4. End to end over Mosquitto and Kafka.
    let broker = KafkaBroker::start().expect("a Kafka broker");
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mq = Mosquitto::start(tmp.path()).expect("mosquitto");
    let prefix = unique_name("bench.") + ".";
    let bus = KafkaBus::new(broker.bootstrap()).unwrap();
    bus.ensure_topics(&[topics::ENVELOPES, topics::SUSPECT].map(|t| TopicSpec {
        name: format!("{prefix}{t}"),
        partitions: 1,
    }))
    .unwrap();
    let principal = |v: usize| {
        Principal::from_key(
            names.principal("acme", &serial(v)).unwrap().as_str(),
            keys[v].clone(),
        )
        .unwrap()
    };
    let config = BridgeConfig {
        mqtt_host: "127.0.0.1".into(),
        mqtt_port: mq.port(),
        client_id: unique_name("bench-bridge"),
        keep_alive: Duration::from_secs(10),
        interface: Interface::parse("uagv/v2").unwrap(),
        max_payload: DEFAULT_MAX_PAYLOAD,
        role: Role::Vehicle {
            manufacturer: "acme".into(),
            serial: serial(0),
        },
        principal: principal(0),
        master: master.clone(),
        vehicles: names.clone(),
        bootstrap: broker.bootstrap().into(),
        topic_prefix: prefix.clone(),
        kafka: Vec::new(),
        spool_dir: tmp.path().join("spool"),
        delivery_timeout: Duration::from_secs(30),
        registry: KeyRegistry::new(),
        cite_wait: Duration::from_millis(0),
        index_lookback: Duration::from_secs(1),
        index_cap: 1 << 16,
    };
    let also: Vec<(Role, Principal)> = (1..vehicles)
        .map(|v| {
            (
                Role::Vehicle {
                    manufacturer: "acme".into(),
                    serial: serial(v),
                },
                principal(v),
            )
        })
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let counters = Arc::new(Counters::default());
    let (e2e, summary) = rt.block_on(async {
        let bridge = tokio::spawn(audita_bridge::run_many(
            config,
            also,
            stop.clone(),
            counters.clone(),
        ));
        while counters.subscribed.load(Ordering::Relaxed) == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let fleet = MqttPublisher::connect(mq.port(), &unique_name("fleet"));
        let t = Instant::now();
        for (topic, s, _) in &msgs {
            fleet.publish(topic, s.clone()).await;
        }
        while counters.delivered.load(Ordering::Relaxed) < n as u64 {
            tokio::time::sleep(Duration::from_millis(5)).await;
            assert!(
                t.elapsed() < Duration::from_secs(600),
                "{:?}",
                counters.summary()
            );
        }
        let e2e = n as f64 / t.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        let summary = bridge.await.unwrap().unwrap();
        (e2e, summary)
    });
    assert_eq!(summary.recorded, n as u64, "{summary:?}");
    assert_eq!(summary.quarantined, 0, "{summary:?}");
    eprintln!(
        "end to end: {} MQTT connection errors, {} subscription(s), backlog peak {} messages",
        summary.mqtt_errors, summary.subscribed, summary.backlog_peak
    );

    println!("| what | msg/s | vs raw Ed25519 signing |");
    println!("| --- | ---: | ---: |");
    for (what, v) in [
        (
            "raw Ed25519 sign (PAE body of the state envelope, no JSON, no I/O)",
            raw,
        ),
        (
            "intake alone: JSON + duplicate keys + official 2.1.0 `state` schema + checks",
            checked,
        ),
        (
            "bridge without I/O: intake + mapping + signing, 1,000 vehicle keys",
            mapped,
        ),
        (
            "end to end: Mosquitto → bridge (spool fsync, then MQTT ack) → Kafka ack",
            e2e,
        ),
    ] {
        println!("| {what} | {v:.0} | {:.3}× |", v / raw);
    }
}
