//! Shared by the Kafka tests: the ingest stage over a broker, and draining a topic.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use audita_bus::kafka::KafkaBus;
use audita_bus::testing::unique_name;
use audita_bus::{Consumer as _, TopicSpec};
use audita_evidence::KeyRegistry;
use audita_topics::names as topics;

/// Up to `want` records of `topic`, from the start, waiting at most `within`.
pub fn drain(bus: &KafkaBus, topic: &str, want: usize, within: Duration) -> Vec<Vec<u8>> {
    let mut c = bus.consumer(&unique_name("drain"), &[topic]).unwrap();
    let mut out = Vec::new();
    let deadline = Instant::now() + within;
    while Instant::now() < deadline && out.len() < want {
        if let Some(d) = c.poll(Duration::from_millis(200)).unwrap() {
            out.push(d.payload);
        }
    }
    out
}

/// Creates the source and output topics of `prefix` (one partition each).
pub fn topics_of(bus: &KafkaBus, prefix: &str) {
    bus.ensure_topics(
        &[
            topics::ENVELOPES,
            topics::RECEIPTS,
            topics::ACCEPTED,
            topics::SUSPECT,
        ]
        .map(|t| TopicSpec {
            name: format!("{prefix}{t}"),
            partitions: 1,
        }),
    )
    .unwrap();
}

/// Runs the ingest stage over `prefix`'s topics with `registry` until idle, then
/// returns (accepted frames without their tag byte, the first `quarantined`
/// quarantine records).
pub fn ingest(
    bus: &KafkaBus,
    prefix: &str,
    registry: &KeyRegistry,
    quarantined: usize,
) -> (BTreeSet<Vec<u8>>, Vec<audita_topics::Quarantined>) {
    let name = |t: &str| format!("{prefix}{t}");
    let mut input = bus
        .consumer(
            &unique_name("ingest"),
            &[&name(topics::ENVELOPES), &name(topics::RECEIPTS)],
        )
        .unwrap();
    let mut out = bus.producer().unwrap();
    let layout = audita_ingest::Layout {
        names: audita_ingest::Topics {
            prefix: prefix.to_string(),
        },
        source_partitions: 2,
        accepted_partitions: 1,
        watermark_every: Duration::from_millis(200),
    };
    audita_ingest::run(
        &mut input,
        &mut out,
        registry,
        &layout,
        &AtomicBool::new(false),
        Some(Duration::from_secs(8)),
        |_, _| {},
    )
    .unwrap();
    let frames = drain(
        bus,
        &name(topics::ACCEPTED),
        usize::MAX,
        Duration::from_secs(8),
    );
    // Ingest publishes batches: one record of many frames per batch and partition.
    let accepted_set: BTreeSet<Vec<u8>> = frames
        .iter()
        .flat_map(|r| audita_topics::accepted::frames(r).map(<[u8]>::to_vec))
        .filter(|f| f.first() != Some(&audita_topics::accepted::FRAME_WATERMARK))
        .map(|f| f[1..].to_vec())
        .collect();
    let suspect = drain(
        bus,
        &name(topics::SUSPECT),
        quarantined,
        Duration::from_secs(20),
    )
    .iter()
    .map(|b| serde_json::from_slice(b).unwrap())
    .collect();
    (accepted_set, suspect)
}
