//! A sealer restart changes no declaration (issue 31). A restarted sealer republishes
//! the last epoch it sealed (`sealer::stage`: the epoch read back from disk, watermark
//! 0), so `audita.epochs` holds that epoch twice. The monitor stage read it twice:
//! every actuation report in it became a second `realised` fact of the declaration,
//! the engine worker's re-derivation over the slice (which holds the report once)
//! refused the declaration, and the incident's verdict became an abstention — the
//! rows that went missing from the SIGTERM/SIGKILL interruption tests of
//! `pipeline.rs` whenever a stopped sealer's last epoch held such a report.
//!
//! Deterministic: the epochs of an uninterrupted embedded run, each followed by its
//! republication exactly as a sealer restarted after every epoch sends it (checked
//! against the republication of a real sealer reopened on the run's record), are read
//! by the monitor stage; its declarations must equal the uninterrupted run's, and
//! every one must pass the engine's check against the whole record.

use audita_bus::embedded::EmbeddedBus;
use audita_bus::Bus;
use audita_load_tests::fleet::{self, DEMO_MIX};
use audita_pipeline::metrics::Metrics;
use audita_pipeline::Deployment;
use audita_topics::names as topics;
use audita_topics::EpochSeal;
use audita_verdict::AdverseDecl;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Every record of `topic` on `bus`, in order.
fn drain(bus: &Bus, topic: &str) -> Vec<Vec<u8>> {
    records(bus, topic).into_iter().map(|d| d.payload).collect()
}

/// Every delivery of `topic` on `bus`, in order per partition.
fn records(bus: &Bus, topic: &str) -> Vec<audita_bus::Delivery> {
    let mut c = bus
        .consumer(
            &format!("drain-{}", audita_bus::testing::unique_name("t")),
            &[topic],
        )
        .unwrap();
    let mut out = Vec::new();
    while let Some(d) = c.poll(Duration::from_millis(300)).unwrap() {
        out.push(d);
    }
    out
}

fn declarations(bus: &Bus, d: &Deployment) -> Vec<AdverseDecl> {
    let mut decls: Vec<AdverseDecl> = drain(bus, &d.topic(topics::ADVERSE))
        .iter()
        .map(|b| serde_json::from_slice(b).unwrap())
        .collect();
    decls.sort_by(|a, b| a.incident.cmp(&b.incident));
    decls
}

/// The monitor stage alone over `epochs` and the `accepted` records they seal; its
/// declarations.
fn monitor_over(
    d: &Arc<Deployment>,
    epochs: &[Vec<u8>],
    accepted: &[audita_bus::Delivery],
) -> Vec<AdverseDecl> {
    let bus = Bus::Embedded(EmbeddedBus::new(4));
    d.ensure_topics(&bus).unwrap();
    let mut p = bus.producer().unwrap();
    for a in accepted {
        p.send_to(&d.topic(topics::ACCEPTED), a.partition, &a.key, &a.payload)
            .unwrap();
    }
    for e in epochs {
        p.send(&d.topic(topics::EPOCHS), b"log", e).unwrap();
    }
    p.flush().unwrap();
    audita_pipeline::monitor::run_monitor(
        d,
        &bus,
        Duration::from_millis(200),
        &AtomicBool::new(false),
        Some(Duration::from_millis(1500)),
        &Metrics::new(),
    )
    .unwrap();
    declarations(&bus, d)
}

#[test]
fn a_republished_epoch_changes_no_declaration_and_every_one_passes_the_engines_check() {
    let fleet = fleet::build(&DEMO_MIX, 8, 3);
    let prefix = "republish.";
    let mut d = Deployment::ephemeral(
        fleet.keys.clone(),
        fleet.duties().expect("duties"),
        prefix,
        &["keeper.test/k1"],
    )
    .expect("deployment");
    // Small epochs: many boundaries, so actuation reports land in epochs of their own.
    d.epoch_messages = 16;
    d.predicates =
        Some(audita_monitor::Predicates::from_json(&fleet.predicates_json).expect("predicates"));
    let file = d.predicates.clone().unwrap();
    let d = Arc::new(d);
    let bus = Bus::Embedded(EmbeddedBus::new(4));
    let dir = tempfile::tempdir().unwrap();
    let collected = audita_pipeline::run_all(
        d.clone(),
        &bus,
        dir.path(),
        1,
        &Metrics::new(),
        |bus| {
            let mut p = bus.producer()?;
            fleet.publish(p.as_mut(), prefix, None, |_| {})?;
            p.flush()?;
            Ok(fleet.cells.iter().filter(|c| c.adverse.is_some()).count())
        },
        |_| {},
    )
    .expect("uninterrupted run");
    assert!(
        collected.abstained.is_empty(),
        "uninterrupted run abstained: {:?}",
        collected.abstained
    );
    let uninterrupted = declarations(&bus, &d);
    assert!(!uninterrupted.is_empty());
    let epochs = drain(&bus, &d.topic(topics::EPOCHS));
    let accepted = records(&bus, &d.topic(topics::ACCEPTED));
    assert!(epochs.len() > 8, "{} epochs", epochs.len());

    // What a real sealer sends when it restarts on this record: its last epoch again.
    let again = Bus::Embedded(EmbeddedBus::new(4));
    d.ensure_topics(&again).unwrap();
    audita_pipeline::run_sealer(
        &d,
        &again,
        &dir.path().join("record"),
        &AtomicBool::new(false),
        Some(Duration::from_millis(300)),
        &Metrics::new(),
    )
    .unwrap();
    let republished = drain(&again, &d.topic(topics::EPOCHS));
    assert_eq!(
        republished.len(),
        1,
        "a reopened sealer republishes one epoch"
    );
    let (real, last) = (
        EpochSeal::decode(&republished[0]).unwrap(),
        EpochSeal::decode(epochs.last().unwrap()).unwrap(),
    );
    assert_eq!(
        (&real.header, &real.leaves, &real.receipts, real.watermark),
        (&last.header, &last.leaves, &last.receipts, 0),
        "the republication is the last epoch again, with watermark 0"
    );
    assert!(
        real.positions.is_empty(),
        "a republication names no positions"
    );

    // A sealer restarted after every epoch: each epoch followed by its republication.
    let restarted: Vec<Vec<u8>> = epochs
        .iter()
        .flat_map(|e| {
            let mut r = EpochSeal::decode(e).unwrap();
            r.watermark = 0;
            r.positions.clear();
            [e.clone(), r.encode()]
        })
        .collect();
    let with_restarts = monitor_over(&d, &restarted, &accepted);
    assert_eq!(
        with_restarts, uninterrupted,
        "declarations after sealer restarts differ from the uninterrupted run's"
    );

    // Each passes the engine's check against the whole record (what a slice holds
    // of it is re-derived the same way).
    let (record, _) = audita_record::read_record(&dir.path().join("record")).unwrap();
    let part = audita_evidence::verify_record(&record, &d.keys);
    let derived = audita_monitor::derive(&part, &file);
    for decl in &with_restarts {
        audita_monitor::check(decl, &file, &derived)
            .unwrap_or_else(|e| panic!("{}: {e}", decl.incident));
    }
}
