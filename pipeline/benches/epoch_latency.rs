//! The sealer's epoch latency with 0, 1 and 3 keepers over loopback HTTP, in one run.
//!
//! `cargo bench -p audita-pipeline --bench epoch_latency` (optional: `-- E` epochs
//! per row, default 200). Each row seals the same envelopes and receipts (frames of
//! the sample fleet record, 256 per epoch, as the deployed sealer closes them) into
//! a fresh record directory on the target directory's disk; the time measured is
//! `SealerStage::close` alone — segments and the epoch written and fsync'd, the
//! checkpoint signed, every keeper asked for its `cosignature/v1` with the
//! consistency proof from its last size (`audita_pipeline::witness::HttpWitness`,
//! the sealer's deployed client), the co-signed note written, the epoch published
//! on the embedded bus and offsets committed. Keepers are `audita_keeper::serve`
//! (the code of `audita keeper serve`) in this process, each with its own key and
//! its state on disk (fsync before it answers). The "0 keepers" row is the same
//! close with no witness: its difference to the others is what witnessing costs.

use std::time::{Duration, Instant};

use audita_bus::embedded::EmbeddedBus;
use audita_bus::{Bus, TopicSpec};
use audita_evidence::sample::{sample_record, SAMPLE_ORIGIN};
use audita_evidence::{derive_signing_key, KeyRegistry};
use audita_keeper::{log_vkey, KeeperConfig, KeeperHandle};
use audita_pipeline::witness::HttpWitness;
use audita_sealer::stage::{SealerConfig, SealerStage};
use audita_sealer::witness::Witness;
use audita_topics::accepted::{FRAME_ENVELOPE, FRAME_RECEIPT};
use audita_topics::names as topics;

const EPOCH: usize = 256;

fn frames(epochs: usize) -> (KeyRegistry, Vec<Vec<u8>>) {
    // The sample record has about as many receipts as envelopes.
    let s = sample_record(3, epochs * EPOCH / 2 + EPOCH);
    let mut out = Vec::new();
    for (e, r) in s.envelopes.iter().zip(&s.receipts) {
        let mut f = vec![FRAME_ENVELOPE];
        f.extend_from_slice(e.as_bytes());
        out.push(f);
        let mut f = vec![FRAME_RECEIPT];
        f.extend_from_slice(r.as_bytes());
        out.push(f);
    }
    out.truncate(epochs * EPOCH);
    (s.keys, out)
}

fn keeper(name: &str, state: &std::path::Path) -> KeeperHandle {
    let log = derive_signing_key(7, SAMPLE_ORIGIN).verifying_key();
    let config = KeeperConfig::new(
        name,
        derive_signing_key(11, name),
        &[log_vkey(SAMPLE_ORIGIN, &log)],
        state,
    )
    .expect("keeper config");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    audita_keeper::serve(&config, listener).expect("keeper serves")
}

/// Close latencies (one per epoch) with `n` keepers.
fn row(
    n: usize,
    keys: &KeyRegistry,
    frames: &[Vec<u8>],
    scratch: &std::path::Path,
) -> Vec<Duration> {
    let base = scratch.join(format!("keepers-{n}"));
    let mut keys = keys.clone();
    keys.add_log(
        SAMPLE_ORIGIN,
        derive_signing_key(7, SAMPLE_ORIGIN).verifying_key(),
    )
    .expect("log key");
    let mut handles = Vec::new();
    let mut witnesses: Vec<Box<dyn Witness>> = Vec::new();
    for i in 0..n {
        let name = format!("keeper-{i}.example/witness");
        keys.add_keeper(&name, derive_signing_key(11, &name).verifying_key())
            .expect("keeper key");
        let h = keeper(&name, &base.join(format!("state-{i}")));
        witnesses.push(Box::new(HttpWitness::new(&name, &h.url())));
        handles.push(h);
    }
    let bus = Bus::Embedded(EmbeddedBus::new(1));
    bus.ensure_topics(&[
        TopicSpec {
            name: topics::ACCEPTED.into(),
            partitions: 1,
        },
        TopicSpec {
            name: topics::EPOCHS.into(),
            partitions: 1,
        },
    ])
    .expect("topics");
    let mut producer = bus.producer().expect("producer");
    for f in frames {
        producer.send(topics::ACCEPTED, b"k", f).expect("send");
    }
    producer.flush().expect("flush");
    let mut input = bus
        .consumer("sealer", &[topics::ACCEPTED])
        .expect("consumer");
    let mut out = bus.producer().expect("producer");
    let mut sealer = SealerStage::open(SealerConfig {
        dir: base.join("record"),
        origin: SAMPLE_ORIGIN.to_string(),
        log_key: derive_signing_key(7, SAMPLE_ORIGIN),
        keepers: Vec::new(),
        keys,
        epoch_messages: EPOCH,
        epoch_age: Duration::from_secs(3600),
        topic_prefix: String::new(),
        input_partitions: 1,
        registry: None,
    })
    .expect("sealer opens")
    .with_witnesses(witnesses, n);
    let mut took = Vec::new();
    let mut seen = 0;
    while seen < frames.len() {
        let Some(d) = input.poll(Duration::from_millis(200)).expect("poll") else {
            break;
        };
        seen += 1;
        sealer.accept(d);
        if sealer.due() {
            let t = Instant::now();
            sealer.close(out.as_mut(), input.as_mut()).expect("close");
            took.push(t.elapsed());
        }
    }
    let stats = sealer.stats();
    assert_eq!(
        stats.under_witnessed, 0,
        "every epoch met its quorum of {n}"
    );
    assert_eq!(stats.cosignatures, (n * took.len()) as u64);
    for h in handles {
        h.shutdown();
    }
    took
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let epochs: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(200);
    let (keys, frames) = frames(epochs);
    // On the target directory's disk, like a record directory.
    let scratch = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch dir");
    println!(
        "epoch latency, {} epochs of {EPOCH} frames per row",
        frames.len() / EPOCH
    );
    println!("| keepers (quorum = all) | epochs | p50 ms | p99 ms | mean ms | mean vs 0 keepers |");
    println!("| ---: | ---: | ---: | ---: | ---: | ---: |");
    let mut base_mean = None;
    for n in [0usize, 1, 3] {
        let mut took = row(n, &keys, &frames, scratch.path());
        took.sort();
        let mean = took.iter().map(|d| ms(*d)).sum::<f64>() / took.len() as f64;
        let pct = |p: f64| ms(took[((took.len() - 1) as f64 * p).round() as usize]);
        let base = *base_mean.get_or_insert(mean);
        println!(
            "| {n} | {} | {:.2} | {:.2} | {:.2} | {:.2}× |",
            took.len(),
            pct(0.50),
            pct(0.99),
            mean,
            mean / base
        );
    }
}
