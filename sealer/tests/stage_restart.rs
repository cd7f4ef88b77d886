//! The streaming sealer over the embedded bus: every accepted message is sealed
//! exactly once — also across a crash (the stage dropped mid-window without closing)
//! and re-delivery of everything not committed — and the directory verifies clean.

use audita_bus::embedded::EmbeddedBus;
use audita_bus::Bus;
use audita_evidence::sample::{sample_record, SAMPLE_KEEPERS, SAMPLE_ORIGIN};
use audita_evidence::SignedEnvelope;
use audita_evidence::{derive_signing_key, verify_record};
use audita_record::read_record;
use audita_record::tiles::check_tiles;
use audita_sealer::stage::{SealerConfig, SealerStage};
use audita_topics::accepted::{FRAME_ENVELOPE, FRAME_RECEIPT};
use audita_topics::names as topics;
use audita_topics::Watermark;
use std::collections::BTreeSet;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

fn config(dir: &std::path::Path, keys: audita_evidence::KeyRegistry) -> SealerConfig {
    SealerConfig {
        dir: dir.to_path_buf(),
        origin: SAMPLE_ORIGIN.to_string(),
        log_key: derive_signing_key(7, SAMPLE_ORIGIN),
        keepers: SAMPLE_KEEPERS
            .iter()
            .map(|k| (k.to_string(), derive_signing_key(7, k)))
            .collect(),
        keys,
        epoch_messages: 16,
        epoch_age: Duration::from_secs(3600),
        topic_prefix: String::new(),
        input_partitions: 4,
        registry: None,
    }
}

fn publish(bus: &Bus, seed: u64, n: usize) -> (Vec<Vec<u8>>, audita_evidence::KeyRegistry) {
    let s = sample_record(seed, n);
    let mut p = bus.producer().unwrap();
    for (e, r) in s.envelopes.iter().zip(&s.receipts) {
        let mut f = vec![FRAME_ENVELOPE];
        f.extend_from_slice(e.as_bytes());
        p.send(
            topics::ACCEPTED,
            e.envelope().author.as_str().as_bytes(),
            &f,
        )
        .unwrap();
        // Duplicates as a re-delivering producer would send them.
        p.send(
            topics::ACCEPTED,
            e.envelope().author.as_str().as_bytes(),
            &f,
        )
        .unwrap();
        let mut f = vec![FRAME_RECEIPT];
        f.extend_from_slice(r.as_bytes());
        p.send(topics::ACCEPTED, r.recipient().as_str().as_bytes(), &f)
            .unwrap();
    }
    let mut keys = s.keys.clone();
    let _ = keys.add_log(
        SAMPLE_ORIGIN,
        derive_signing_key(7, SAMPLE_ORIGIN).verifying_key(),
    );
    for k in SAMPLE_KEEPERS {
        let _ = keys.add_keeper(k, derive_signing_key(7, k).verifying_key());
    }
    (
        s.envelopes.iter().map(|e| e.as_bytes().to_vec()).collect(),
        keys,
    )
}

/// Runs the stage as the "sealer" group until its input stays quiet for 300 ms.
fn run_to_idle(stage: &mut SealerStage, bus: &Bus) {
    let mut c = bus.consumer("sealer", &[topics::ACCEPTED]).unwrap();
    let mut p = bus.producer().unwrap();
    stage
        .run(
            c.as_mut(),
            p.as_mut(),
            &AtomicBool::new(false),
            Some(Duration::from_millis(300)),
        )
        .unwrap();
}

/// The record's tiled log holds exactly its leaves, at its latest checkpoint.
fn assert_tiles_agree(dir: &std::path::Path) {
    let (record, keys) = read_record(dir).unwrap();
    let report = check_tiles(dir, &record, &keys);
    assert!(report.present, "the sealer writes tiles");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.size, report.record_size, "tiles are current");
    assert_eq!(
        std::fs::read(dir.join("checkpoint")).unwrap(),
        *record.checkpoints.last().unwrap()
    );
}

fn sealed_ids(dir: &std::path::Path) -> Vec<Vec<u8>> {
    let (record, _) = read_record(dir).unwrap();
    record
        .epochs
        .iter()
        .flat_map(|e| e.leaves.clone())
        .collect()
}

#[test]
fn each_message_is_sealed_once_and_the_record_verifies() {
    let bus = Bus::Embedded(EmbeddedBus::new(4));
    let (envs, keys) = publish(&bus, 7, 100);
    let dir = tempfile::tempdir().unwrap();
    let mut stage = SealerStage::open(config(dir.path(), keys)).unwrap();
    run_to_idle(&mut stage, &bus);
    let leaves = sealed_ids(dir.path());
    assert_eq!(
        leaves.len(),
        envs.len(),
        "every envelope sealed exactly once"
    );
    assert_eq!(
        leaves.iter().collect::<BTreeSet<_>>().len(),
        leaves.len(),
        "no leaf twice"
    );
    assert_eq!(
        stage.stats().duplicates,
        envs.len() as u64,
        "each duplicate recognised"
    );
    let (record, reg) = read_record(dir.path()).unwrap();
    let partition = verify_record(&record, &reg);
    assert!(
        partition.is_clean(),
        "record written by the stage must verify clean: {partition:?}"
    );
    assert_tiles_agree(dir.path());
}

#[test]
fn a_crash_mid_window_loses_nothing_and_seals_nothing_twice() {
    let bus = Bus::Embedded(EmbeddedBus::new(4));
    let (envs, keys) = publish(&bus, 11, 120);
    let dir = tempfile::tempdir().unwrap();
    {
        let mut stage = SealerStage::open(config(dir.path(), keys.clone())).unwrap();
        let mut c = bus.consumer("sealer", &[topics::ACCEPTED]).unwrap();
        let mut p = bus.producer().unwrap();
        // Take part of the input, closing a few epochs, then "crash" with an open window.
        let mut taken = 0;
        while taken < 150 {
            if let Some(d) = c.poll(Duration::from_millis(50)).unwrap() {
                stage.accept(d);
                taken += 1;
                if stage.due() {
                    stage.close(p.as_mut(), c.as_mut()).unwrap();
                }
            }
        }
        assert!(stage.stats().epochs >= 1);
        // dropped here without closing: uncommitted input will be re-delivered
    }
    let mut stage = SealerStage::open(config(dir.path(), keys)).unwrap();
    run_to_idle(&mut stage, &bus);
    let leaves = sealed_ids(dir.path());
    assert_eq!(
        leaves.iter().collect::<BTreeSet<_>>().len(),
        leaves.len(),
        "a message was sealed twice"
    );
    assert_eq!(leaves.len(), envs.len(), "an accepted message was lost");
    let (record, reg) = read_record(dir.path()).unwrap();
    let partition = verify_record(&record, &reg);
    assert!(
        partition.is_clean(),
        "record after restart must verify clean: {partition:?}"
    );
    assert_tiles_agree(dir.path());
    assert_prefixes_are_the_log_before_each_epoch(&bus, &leaves);
}

/// Every seal published (before and after a restart) carries the log's compact
/// range before its epoch: a reader starting at any epoch extends the true log.
fn assert_prefixes_are_the_log_before_each_epoch(bus: &Bus, leaves: &[Vec<u8>]) {
    use audita_evidence::merkle::{leaf_hash, CompactRange};
    let mut log = vec![CompactRange::new()];
    for leaf in leaves {
        let mut next = log.last().unwrap().clone();
        next.append(leaf_hash(leaf));
        log.push(next);
    }
    let mut c = bus.consumer("prefix-check", &[topics::EPOCHS]).unwrap();
    let mut seals = 0;
    while let Some(d) = c.poll(Duration::from_millis(200)).unwrap() {
        let seal = audita_topics::EpochSeal::decode(&d.payload).expect("a seal");
        let header = audita_evidence::EpochHeader::decode(seal.header.clone()).unwrap();
        let prefix = CompactRange::from_nodes(header.start, &seal.prefix)
            .expect("the prefix is a compact range of the epoch's start");
        assert_eq!(
            prefix.root(),
            log[header.start as usize].root(),
            "epoch {}",
            header.number
        );
        seals += 1;
    }
    assert!(seals >= 2, "{seals} seals");
}

/// A crash after epochs were written but before the tiles' checkpoint moved on
/// (tiles of the later epochs partly on disk, `checkpoint` still an old one): the
/// reopened stage catches the tiles up from the record and keeps them current.
#[test]
fn tiles_left_behind_by_a_crash_catch_up_on_restart() {
    let bus = Bus::Embedded(EmbeddedBus::new(4));
    let (envs, keys) = publish(&bus, 13, 300);
    let dir = tempfile::tempdir().unwrap();
    {
        let mut stage = SealerStage::open(config(dir.path(), keys.clone())).unwrap();
        let mut c = bus.consumer("sealer", &[topics::ACCEPTED]).unwrap();
        let mut p = bus.producer().unwrap();
        let mut taken = 0;
        while taken < 600 {
            if let Some(d) = c.poll(Duration::from_millis(50)).unwrap() {
                stage.accept(d);
                taken += 1;
                if stage.due() {
                    stage.close(p.as_mut(), c.as_mut()).unwrap();
                }
            }
        }
        assert!(stage.stats().epochs >= 3);
    }
    let (record, _) = read_record(dir.path()).unwrap();
    std::fs::write(dir.path().join("checkpoint"), &record.checkpoints[1]).unwrap();
    let mut stage = SealerStage::open(config(dir.path(), keys)).unwrap();
    assert_tiles_agree(dir.path());
    run_to_idle(&mut stage, &bus);
    assert_eq!(sealed_ids(dir.path()).len(), envs.len());
    assert!(
        sealed_ids(dir.path()).len() > 256,
        "crosses a tile boundary"
    );
    assert_tiles_agree(dir.path());
}

#[test]
fn dedupe_memory_is_bounded_by_the_horizon_and_late_envelopes_are_quarantined() {
    let bus = Bus::Embedded(EmbeddedBus::new(4));
    let (envs, keys) = publish(&bus, 5, 200);
    let dir = tempfile::tempdir().unwrap();
    let mut stage = SealerStage::open(config(dir.path(), keys))
        .unwrap()
        .with_horizon(3_000);
    let mut c = bus.consumer("sealer", &[topics::ACCEPTED]).unwrap();
    let mut p = bus.producer().unwrap();
    // Ingest's watermark after everything: the one source partition is done.
    let last = envs
        .iter()
        .map(|e| {
            SignedEnvelope::decode(e.clone())
                .unwrap()
                .envelope()
                .timestamp
        })
        .max()
        .unwrap();
    let mark = Watermark {
        source: "fleet".into(),
        partition: 0,
        sources: 1,
        time_ms: last,
    };
    for part in 0..4 {
        p.send_to(topics::ACCEPTED, part, b"w", &mark.frame())
            .unwrap();
    }
    assert_eq!(stage.watermark(), 0, "no watermark before ingest's arrives");
    let idle = Some(Duration::from_millis(300));
    let stop = AtomicBool::new(false);
    stage.run(c.as_mut(), p.as_mut(), &stop, idle).unwrap();
    let leaves = sealed_ids(dir.path());
    assert_eq!(leaves.len(), envs.len(), "every envelope sealed");
    assert_eq!(leaves.iter().collect::<BTreeSet<_>>().len(), leaves.len());
    assert_eq!(stage.stats().duplicates, envs.len() as u64);
    assert_eq!(stage.watermark(), last);
    // ~25 s of record time behind a 3 s horizon: most ids are forgotten.
    assert!(
        stage.sealed_count() < envs.len() / 3,
        "{} of {} ids still remembered",
        stage.sealed_count(),
        envs.len()
    );

    // The first envelope again, long after its id was forgotten: it cannot be told
    // apart from a re-delivery, so it is quarantined as late, not sealed twice.
    let mut f = vec![FRAME_ENVELOPE];
    f.extend_from_slice(&envs[0]);
    p.send(topics::ACCEPTED, b"again", &f).unwrap();
    p.flush().unwrap();
    stage.run(c.as_mut(), p.as_mut(), &stop, idle).unwrap();
    assert_eq!(stage.stats().late, 1);
    assert_eq!(sealed_ids(dir.path()).len(), envs.len(), "sealed twice");
    let mut s = bus.consumer("check", &[topics::SUSPECT]).unwrap();
    let d = s
        .poll(Duration::from_millis(500))
        .unwrap()
        .expect("late envelope quarantined");
    let q: serde_json::Value = serde_json::from_slice(&d.payload).unwrap();
    assert_eq!(q["reason"], "late");
    assert_eq!(q["bytes_hex"], hex::encode(&f));
    let (record, reg) = read_record(dir.path()).unwrap();
    assert!(verify_record(&record, &reg).is_clean());
}

/// A producer whose epoch publications fail: the crash between writing an epoch to
/// disk and publishing it.
struct EpochsDown(Box<dyn audita_bus::Producer>);

impl audita_bus::Producer for EpochsDown {
    fn send_record(
        &mut self,
        topic: &str,
        partition: Option<u32>,
        key: &[u8],
        payload: &[u8],
    ) -> Result<(), audita_bus::BusError> {
        if topic == topics::EPOCHS {
            return Err(audita_bus::BusError::Transient("broker away".into()));
        }
        self.0.send_record(topic, partition, key, payload)
    }
    fn flush(&mut self) -> Result<(), audita_bus::BusError> {
        self.0.flush()
    }
}

#[test]
fn an_epoch_written_but_not_published_is_published_after_restart() {
    let bus = Bus::Embedded(EmbeddedBus::new(4));
    let (envs, keys) = publish(&bus, 13, 60);
    let dir = tempfile::tempdir().unwrap();
    {
        let mut stage = SealerStage::open(config(dir.path(), keys.clone())).unwrap();
        let mut c = bus.consumer("sealer", &[topics::ACCEPTED]).unwrap();
        let mut p = EpochsDown(bus.producer().unwrap());
        let mut failed = false;
        while !failed {
            let d = c
                .poll(Duration::from_millis(50))
                .unwrap()
                .expect("input left");
            stage.accept(d);
            if stage.due() {
                failed = stage.close(&mut p, c.as_mut()).is_err();
            }
        }
        // The epoch is on disk; its publication failed; the stage dies.
    }
    let first_epoch = sealed_ids(dir.path()).len();
    assert!(first_epoch > 0, "one epoch on disk");
    let mut stage = SealerStage::open(config(dir.path(), keys)).unwrap();
    run_to_idle(&mut stage, &bus);
    assert_eq!(sealed_ids(dir.path()).len(), envs.len());
    let mut e = bus.consumer("check", &[topics::EPOCHS]).unwrap();
    let got = audita_bus::drain(e.as_mut(), 1000, Duration::from_millis(500)).unwrap();
    let numbers: Vec<u64> = got
        .iter()
        .map(|d| {
            let m = audita_topics::EpochSeal::decode(&d.payload).unwrap();
            audita_evidence::EpochHeader::decode(m.header)
                .unwrap()
                .number
        })
        .collect();
    let expect: Vec<u64> = (0..numbers.len() as u64).collect();
    assert_eq!(
        numbers, expect,
        "every epoch published once, in order, none skipped"
    );
    let first = audita_topics::EpochSeal::decode(&got[0].payload).unwrap();
    assert_eq!(
        first.leaves.len(),
        first_epoch,
        "the republished epoch names its messages"
    );
}

/// Regression (a SIGTERM run lost a whole cell): a later message's receipt sealed
/// before earlier envelopes arrive (they travel on other partitions) must not make
/// those envelopes `late` after a restart. What a restart forgets follows the
/// event-time watermark the sealer published, not the newest timestamp it reads back.
#[test]
fn a_restart_after_an_early_receipt_does_not_make_earlier_envelopes_late() {
    let s = sample_record(9, 60);
    let mut keys = s.keys.clone();
    let _ = keys.add_log(
        SAMPLE_ORIGIN,
        derive_signing_key(7, SAMPLE_ORIGIN).verifying_key(),
    );
    for k in SAMPLE_KEEPERS {
        let _ = keys.add_keeper(k, derive_signing_key(7, k).verifying_key());
    }
    let bus = Bus::Embedded(EmbeddedBus::new(4));
    let mut p = bus.producer().unwrap();
    // The newest receipt first, alone: an epoch of one receipt.
    let newest = s.receipts.last().unwrap();
    let mut f = vec![FRAME_RECEIPT];
    f.extend_from_slice(newest.as_bytes());
    p.send(topics::ACCEPTED, b"r", &f).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut stage = SealerStage::open(config(dir.path(), keys.clone()))
        .unwrap()
        .with_horizon(1);
    run_to_idle(&mut stage, &bus);
    assert_eq!(stage.stats().sealed, 0);
    drop(stage);
    // Restart (an orderly stop sealed that epoch), then the envelopes arrive.
    for e in &s.envelopes {
        let mut f = vec![FRAME_ENVELOPE];
        f.extend_from_slice(e.as_bytes());
        p.send(
            topics::ACCEPTED,
            e.envelope().author.as_str().as_bytes(),
            &f,
        )
        .unwrap();
    }
    let mut stage = SealerStage::open(config(dir.path(), keys))
        .unwrap()
        .with_horizon(1);
    run_to_idle(&mut stage, &bus);
    assert_eq!(stage.stats().late, 0, "no envelope quarantined as late");
    assert_eq!(sealed_ids(dir.path()).len(), s.envelopes.len());
}
