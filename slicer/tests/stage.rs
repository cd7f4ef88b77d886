//! The slicer stage over a sealed sample stream: memory stays bounded by the
//! retention horizon, and the proof-carrying bundles it emits verify from scratch
//! against the co-signed epoch roots — also for epochs whose predecessors were
//! evicted long ago.

use audita_bus::embedded::EmbeddedBus;
use audita_bus::Bus;
use audita_evidence::sample::sample_record;
use audita_evidence::{verify_proven, MessageId, Policy, SignedEnvelope};
use audita_slicer::stage::SlicerStage;
use audita_topics::names as topics;
use audita_topics::EpochMessage;
use audita_topics::SliceBundle;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The log's compact range before epoch `i` of the sample.
fn prefix_nodes(s: &audita_evidence::sample::Sample, i: usize) -> Vec<audita_evidence::Hash> {
    let mut log = audita_evidence::merkle::CompactRange::new();
    for e in &s.epochs[..i] {
        for id in &e.leaves {
            log.append(audita_evidence::merkle::leaf_hash(&id.leaf_bytes()));
        }
    }
    log.nodes()
}

/// Feeds the sample's epochs as the sealer publishes them; returns the peak graph size.
fn feed(stage: &mut SlicerStage, s: &audita_evidence::sample::Sample, last: u64) -> usize {
    feed_from(stage, s, last, 0)
}

/// [`feed`] from epoch `from` on (the older ones gone from the topic).
fn feed_from(
    stage: &mut SlicerStage,
    s: &audita_evidence::sample::Sample,
    last: u64,
    from: usize,
) -> usize {
    let mut peak = 0;
    for i in from..s.epochs.len() {
        let last_epoch = i + 1 == s.epochs.len();
        // After the last epoch the record has moved on: the window is settled.
        let watermark = last_epoch.then_some(last + 1_500);
        stage.add_epoch(epoch_message(s, i, &[i], watermark));
        peak = peak.max(stage.graph_messages());
    }
    peak
}

/// Epoch `i` of the sample as the sealer publishes it, carrying the receipts of the
/// messages of epochs `receipts_of`, with `watermark` (default: the epoch's earliest
/// timestamp).
fn epoch_message(
    s: &audita_evidence::sample::Sample,
    i: usize,
    receipts_of: &[usize],
    watermark: Option<u64>,
) -> EpochMessage {
    let by_id: BTreeMap<MessageId, &SignedEnvelope> =
        s.envelopes.iter().map(|e| (e.id().clone(), e)).collect();
    let e = &s.epochs[i];
    let envelopes: Vec<&SignedEnvelope> = e.leaves.iter().map(|id| by_id[id]).collect();
    let earliest = envelopes
        .iter()
        .map(|x| x.envelope().timestamp)
        .min()
        .unwrap_or(0);
    EpochMessage {
        header: e.header.as_bytes().to_vec(),
        prefix: prefix_nodes(s, i),
        checkpoint: s.record.checkpoints[i].clone(),
        leaves: e.leaves.iter().map(MessageId::leaf_bytes).collect(),
        envelopes: envelopes.iter().map(|x| x.as_bytes().to_vec()).collect(),
        receipts: s
            .receipts
            .iter()
            .filter(|r| {
                receipts_of
                    .iter()
                    .any(|k| s.epochs[*k].leaves.contains(r.message()))
            })
            .map(|r| r.as_bytes().to_vec())
            .collect(),
        watermark: watermark.unwrap_or(earliest),
    }
}

#[test]
fn receipts_of_messages_that_never_come_leave_with_the_horizon() {
    let s = sample_record(12, 400);
    let times: Vec<u64> = s.envelopes.iter().map(|e| e.envelope().timestamp).collect();
    let (first, last) = (times[0], *times.last().unwrap());
    assert!(last - first > 20_000, "the sample spans enough record time");
    let mut stage = SlicerStage::new("", Duration::ZERO).with_horizon(5_000, Duration::ZERO);
    // Epoch 0 also seals receipts of messages nobody ever sends.
    let key = audita_evidence::derive_signing_key(1, "stranger");
    let mut e0 = epoch_message(&s, 0, &[0], None);
    for i in 0..50u8 {
        let ghost = MessageId {
            author: audita_evidence::PrincipalId::new("ghost").unwrap(),
            digest: [i; 32],
        };
        let r = audita_evidence::Receipt::sign(
            ghost,
            audita_evidence::PrincipalId::new("stranger").unwrap(),
            first,
            &key,
        );
        e0.receipts.push(r.as_bytes().to_vec());
    }
    stage.add_epoch(e0);
    assert!(stage.receipts_held() >= 50);
    for i in 1..s.epochs.len() {
        stage.add_epoch(epoch_message(&s, i, &[i], None));
    }
    assert!(stage.evicted() > 0);
    assert!(
        stage.receipts_held() <= stage.graph_messages(),
        "{} receipts held for {} messages",
        stage.receipts_held(),
        stage.graph_messages()
    );
}

#[test]
fn a_slice_waits_for_the_receipts_of_its_window() {
    // Receipts are sealed apart from their envelopes: here those of the second-last
    // epoch come with the last. A declaration on the second-last epoch, settled by
    // the watermark, waits for them instead of shipping unreceipted (suspect)
    // messages.
    let s = sample_record(16, 200);
    let n = s.epochs.len();
    assert!(n >= 3);
    let by_id: BTreeMap<MessageId, &SignedEnvelope> =
        s.envelopes.iter().map(|e| (e.id().clone(), e)).collect();
    let anchor = by_id[s.epochs[n - 2].leaves.last().unwrap()];
    let at = anchor.envelope().timestamp;
    let mut stage = SlicerStage::new("", Duration::from_secs(600));
    for i in 0..n - 2 {
        stage.add_epoch(epoch_message(&s, i, &[i], None));
    }
    stage.add_epoch(epoch_message(&s, n - 2, &[], Some(at + 1_500)));
    let decl = serde_json::json!({
        "incident": "receipts-late",
        "anchors": [anchor.id().to_string()],
        "t_star_ms": at,
        "window_start_ms": at.saturating_sub(3_000),
        "window_end_ms": at,
    });
    stage.declare(decl.to_string().into_bytes()).unwrap();
    let bus = Bus::Embedded(EmbeddedBus::new(1));
    let mut out = bus.producer().unwrap();
    assert_eq!(
        stage.emit_ready(out.as_mut()).unwrap(),
        0,
        "emitted without receipts"
    );
    // The last epoch's messages arrive after the watermark passed them (an artefact
    // of this hand-built stream), which raises the adaptive grace
    // (`audita_join::grace`) to cover them: the watermark moves past it.
    stage.add_epoch(epoch_message(
        &s,
        n - 1,
        &[n - 2, n - 1],
        Some(at + audita_join::grace::GRACE_MAX_MS + 1),
    ));
    assert_eq!(stage.emit_ready(out.as_mut()).unwrap(), 1);
    let bundle = SliceBundle::decode(&first(&bus, topics::SLICES).payload).unwrap();
    let p = verify_proven(&bundle.evidence, &s.keys, &Policy::default());
    assert!(p.suspect.is_empty(), "{:?}", p.suspect);
    assert!(p.certified.contains_key(anchor.id()));
}

#[test]
fn a_burst_is_held_for_the_minimum_wall_time() {
    let s = sample_record(12, 300);
    let last = s.envelopes.last().unwrap().envelope().timestamp;
    let mut stage =
        SlicerStage::new("", Duration::ZERO).with_horizon(1_000, Duration::from_secs(60));
    feed(&mut stage, &s, last);
    assert_eq!(
        stage.evicted(),
        0,
        "record time alone must not evict a fresh burst"
    );
    assert_eq!(stage.graph_messages(), s.envelopes.len());
}

#[test]
fn memory_is_bounded_by_the_horizon_and_bundles_verify_from_scratch() {
    let s = sample_record(11, 600);
    let times: Vec<u64> = s.envelopes.iter().map(|e| e.envelope().timestamp).collect();
    let (first, last) = (times[0], *times.last().unwrap());
    assert!(last - first > 40_000, "the sample spans enough record time");

    let mut stage = SlicerStage::new("", Duration::ZERO).with_horizon(5_000, Duration::ZERO);
    let peak = feed(&mut stage, &s, last);
    assert!(stage.evicted() > 0, "nothing was evicted");
    assert!(
        peak < s.envelopes.len() / 2,
        "graph held {peak} of {} messages",
        s.envelopes.len()
    );
    assert!(stage.retained_epochs() < s.epochs.len());

    // An incident anchored on the newest message, window the last 3 s.
    let anchor = s.envelopes.last().unwrap();
    let decl = serde_json::json!({
        "incident": "tail",
        "anchors": [anchor.id().to_string()],
        "t_star_ms": last,
        "window_start_ms": last - 3_000,
        "window_end_ms": last,
        "outcome": "test",
    });
    stage.declare(decl.to_string().into_bytes()).unwrap();
    let bus = Bus::Embedded(EmbeddedBus::new(1));
    let mut out = bus.producer().unwrap();
    assert_eq!(stage.emit_ready(out.as_mut()).unwrap(), 1);
    let mut c = bus.consumer("t", &[topics::SLICES]).unwrap();
    let d = c
        .poll(Duration::from_millis(500))
        .unwrap()
        .expect("a slice");
    let bundle = SliceBundle::decode(&d.payload).expect("bundle decodes");
    assert_eq!(bundle.declaration, decl.to_string().into_bytes());

    let p = verify_proven(&bundle.evidence, &s.keys, &Policy::default());
    let carried: BTreeSet<MessageId> = bundle
        .evidence
        .envelopes
        .iter()
        .map(|b| SignedEnvelope::decode(b.clone()).unwrap().id().clone())
        .collect();
    let certified: BTreeSet<MessageId> = p.certified.keys().cloned().collect();
    assert_eq!(
        certified, carried,
        "every carried message certifies: {:?}",
        p.suspect
    );
    assert!(
        certified.contains(anchor.id()),
        "carried {} certified {} anchor carried {} sealed {}",
        carried.len(),
        certified.len(),
        carried.contains(anchor.id()),
        s.epochs.iter().any(|e| e.leaves.contains(anchor.id()))
    );
    let in_window = times.iter().filter(|t| **t >= last - 3_000).count();
    assert!(
        certified.len() >= in_window,
        "the window's messages are all there"
    );
    assert!(p.epochs.iter().all(|e| e.intact()));
    // What a certified message cites and the bundle lacks is older than the
    // retained range: missing, attributed to its author, never silently dropped.
    for m in &p.missing {
        assert!(!m.certified_citers.is_empty());
    }
    // The bundle is a small fraction of the log's seal data.
    let whole: usize = s
        .record
        .epochs
        .iter()
        .map(|e| e.header.len() + e.leaves.iter().map(Vec::len).sum::<usize>())
        .sum::<usize>()
        + s.record.envelopes.iter().map(Vec::len).sum::<usize>();
    assert!(
        d.payload.len() * 3 < whole,
        "{} vs {whole}",
        d.payload.len()
    );

    // The emitted incident left the dataflow; a re-delivered declaration is ignored.
    stage.declare(decl.to_string().into_bytes()).unwrap();
    assert_eq!(stage.emit_ready(out.as_mut()).unwrap(), 0);
}

/// Declares an incident anchored on the sample's newest message with a window of
/// `window_ms` before it, runs one emission check, and returns the bus it emitted on
/// (and the declaration).
fn declare_tail(
    stage: &mut SlicerStage,
    s: &audita_evidence::sample::Sample,
    name: &str,
    window_ms: u64,
) -> (Bus, serde_json::Value) {
    let anchor = s.envelopes.last().unwrap();
    let last = anchor.envelope().timestamp;
    let decl = serde_json::json!({
        "incident": name,
        "anchors": [anchor.id().to_string()],
        "t_star_ms": last,
        "window_start_ms": last - window_ms,
        "window_end_ms": last,
    });
    stage.declare(decl.to_string().into_bytes()).unwrap();
    let bus = Bus::Embedded(EmbeddedBus::new(1));
    let mut out = bus.producer().unwrap();
    assert_eq!(stage.emit_ready(out.as_mut()).unwrap(), 1);
    (bus, decl)
}

fn first(bus: &Bus, topic: &str) -> audita_bus::Delivery {
    let mut c = bus.consumer("t", &[topic]).unwrap();
    c.poll(Duration::from_millis(500))
        .unwrap()
        .expect("a record")
}

#[test]
fn a_stage_started_mid_log_proves_what_it_holds() {
    let s = sample_record(14, 300);
    let last = s.envelopes.last().unwrap().envelope().timestamp;
    let from = s.epochs.len() / 2;
    assert!(from > 0);
    let mut stage = SlicerStage::new("", Duration::ZERO);
    feed_from(&mut stage, &s, last, from);
    let anchor = s.envelopes.last().unwrap();
    let (bus, _) = declare_tail(&mut stage, &s, "late-start", 2_000);
    let d = first(&bus, topics::SLICES);
    let bundle = SliceBundle::decode(&d.payload).unwrap();
    let p = verify_proven(&bundle.evidence, &s.keys, &Policy::default());
    assert_eq!(
        p.certified.len(),
        bundle.evidence.envelopes.len(),
        "{:?}",
        p.suspect
    );
    assert!(p.certified.contains_key(anchor.id()));
}

#[test]
fn a_slice_too_large_for_one_record_is_an_abstention_not_a_crash() {
    let s = sample_record(15, 200);
    let last = s.envelopes.last().unwrap().envelope().timestamp;
    let mut stage = SlicerStage::new("", Duration::ZERO).with_max_record(2_000);
    feed(&mut stage, &s, last);
    let (bus, _) = declare_tail(&mut stage, &s, "huge", 20_000);
    let d = first(&bus, topics::VERDICTS);
    let j: serde_json::Value = serde_json::from_slice(&d.payload).unwrap();
    assert_eq!(j["incident"], "huge");
    assert!(j["abstained"].as_str().unwrap().contains("exceeds"), "{j}");
    let mut slices = bus.consumer("s", &[topics::SLICES]).unwrap();
    assert!(slices.poll(Duration::from_millis(100)).unwrap().is_none());
}

mod untrusted {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Bytes off the bus never panic the decoders of epochs and slice bundles, and
        /// a decoded bundle re-encodes to the same bytes.
        #[test]
        fn decoders_are_total(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            if let Some(s) = audita_topics::EpochSeal::decode(&bytes) {
                prop_assert_eq!(audita_topics::EpochSeal::decode(&s.encode()), Some(s));
            }
            if let Some(b) = SliceBundle::decode(&bytes) {
                prop_assert_eq!(SliceBundle::decode(&b.encode()), Some(b));
            }
        }

        /// A real bundle with any one byte changed decodes to something else or not at
        /// all, and whatever decodes verifies without panicking.
        #[test]
        fn flipped_bundles_fail_closed(at in any::<usize>(), bit in 0u8..8) {
            let s = sample_record(5, 40);
            let ids = s.envelopes.iter().map(|e| e.id().clone()).collect();
            let bundle = SliceBundle {
                declaration: b"{}".to_vec(),
                evidence: audita_evidence::ProvenSlice::from_record(&s.record, &ids),
            };
            let mut bytes = bundle.encode();
            let i = at % bytes.len();
            bytes[i] ^= 1 << bit;
            if let Some(b) = SliceBundle::decode(&bytes) {
                prop_assert!(b != bundle);
                let _ = verify_proven(&b.evidence, &s.keys, &Policy::default());
            }
        }
    }
}

/// The bundle a stage emits for a declaration on the sample's second-last epoch,
/// and the stage's stats after it.
fn bundle_of(mut stage: SlicerStage) -> (Vec<u8>, audita_slicer::stage::SlicerStats) {
    let s = sample_record(16, 200);
    let n = s.epochs.len();
    let anchor = s
        .envelopes
        .iter()
        .find(|e| e.id() == s.epochs[n - 2].leaves.last().unwrap())
        .unwrap();
    let at = anchor.envelope().timestamp;
    for i in 0..n {
        let watermark = (i + 1 == n).then_some(at + 1_500);
        stage.add_epoch(epoch_message(&s, i, &[i], watermark));
    }
    let decl = serde_json::json!({
        "incident": "spilled",
        "anchors": [anchor.id().to_string()],
        "t_star_ms": at,
        "window_start_ms": at.saturating_sub(3_000),
        "window_end_ms": at,
    });
    stage.declare(decl.to_string().into_bytes()).unwrap();
    let bus = Bus::Embedded(EmbeddedBus::new(1));
    let mut out = bus.producer().unwrap();
    assert_eq!(stage.emit_ready(out.as_mut()).unwrap(), 1);
    let bundle = first(&bus, topics::SLICES).payload;
    let b = SliceBundle::decode(&bundle).unwrap();
    let p = verify_proven(&b.evidence, &s.keys, &Policy::default());
    assert!(p.suspect.is_empty(), "{:?}", p.suspect);
    assert!(p.certified.contains_key(anchor.id()));
    (bundle, stage.stats())
}

#[test]
fn message_bytes_live_in_the_spill_and_a_failing_spill_costs_memory_not_messages() {
    let (spilled, stats) = bundle_of(SlicerStage::new("", Duration::from_secs(600)));
    assert!(stats.spill_bytes > 0, "{stats:?}");
    assert_eq!(stats.spill_fallbacks, 0);
    // A spill directory that does not exist: every message is kept in memory, and
    // the bundle is byte for byte the same.
    let gone = tempfile::tempdir().unwrap().path().join("gone");
    let (kept, stats) =
        bundle_of(SlicerStage::new("", Duration::from_secs(600)).with_spill_dir(gone));
    assert_eq!(stats.spill_bytes, 0);
    assert!(stats.spill_fallbacks > 0, "{stats:?}");
    assert_eq!(spilled, kept);
}
