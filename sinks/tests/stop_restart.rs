//! The sink's stop/restart contract (issue 31; docs/design-notes.md, "Stopping and
//! restarting a stage"): a record is journaled (fsync) before its offset is
//! committed, so a sink stopped (SIGTERM: the stop flag) or killed (SIGKILL: no
//! destructor runs, the open Parquet files stay hidden temporaries) at the worst
//! moments — right after its first journaled verdict, before the offset commit, and
//! with verdicts whose rows are only in its open file — loses no verdict, writes no
//! row twice and changes nothing, once restarted on the same directory and topic.
//! Each case is compared with an uninterrupted run over the same records.

mod common;

use audita_bus::embedded::EmbeddedBus;
use audita_bus::{Consumer, Producer};
use audita_sinks::report::Build;
use audita_sinks::sink::{run, Collected, VerdictSink};
use audita_sinks::tables::{incidents_in, RecordOrigin, Rotation};
use audita_topics::VerdictRecord;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const TOPIC: &str = "audita.verdicts";

/// Verdicts on two dates and an abstention, as the engine workers publish them.
fn records() -> Vec<VerdictRecord> {
    let day = 86_400_000;
    vec![
        common::verdict(
            "a",
            1_000,
            &[("p1", "culpable", 1.0, 1.0), ("p2", "exonerated", 0.0, 0.0)],
        ),
        common::verdict("b", 2_000, &[("p1", "causal", 0.5, 0.5)]),
        common::abstention("c", Some(3_000)),
        common::verdict("d", day + 4_000, &[("p3", "culpable", 1.0, 1.0)]),
        common::verdict("e", day + 5_000, &[]),
        common::verdict(
            "f",
            day + 6_000,
            &[("p1", "culpable", 0.5, 1.0), ("p4", "causal", 0.5, 0.5)],
        ),
    ]
}

fn bus_with_records() -> EmbeddedBus {
    let bus = EmbeddedBus::new(1);
    let mut p = bus.producer();
    for r in records() {
        p.send(
            TOPIC,
            r.incident.as_bytes(),
            &serde_json::to_vec(&r).unwrap(),
        )
        .unwrap();
    }
    p.flush().unwrap();
    bus
}

fn origin() -> RecordOrigin {
    RecordOrigin::parse("2026-11-20T08:00:00Z").unwrap()
}

fn open(dir: &Path) -> VerdictSink {
    VerdictSink::open(
        dir,
        Some(origin()),
        Rotation::default(),
        Build::current("test"),
    )
    .unwrap()
}

fn consumer(bus: &EmbeddedBus) -> audita_bus::embedded::EmbeddedConsumer {
    bus.consumer("sinks", &[TOPIC]).unwrap()
}

/// A whole run to the end (every record collected), as a restarted sink runs.
fn run_to_end(dir: &Path, bus: &EmbeddedBus) -> Collected {
    run(
        open(dir),
        &mut consumer(bus),
        Some(records().len()),
        &AtomicBool::new(false),
        Some(Duration::from_secs(5)),
        |_, _| {},
    )
    .unwrap()
}

/// What a directory holds: incidents collected, abstentions, and the rows of each
/// table per incident.
type Outcome = (
    Vec<String>,
    Vec<String>,
    BTreeMap<String, usize>,
    BTreeMap<String, usize>,
);

fn outcome(dir: &Path, got: &Collected) -> Outcome {
    (
        got.verdicts.keys().cloned().collect(),
        got.abstained.keys().cloned().collect(),
        incidents_in(&dir.join("verdicts/incidents")).unwrap(),
        incidents_in(&dir.join("verdicts/findings")).unwrap(),
    )
}

fn uninterrupted() -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let got = run_to_end(dir.path(), &bus_with_records());
    let o = outcome(dir.path(), &got);
    assert_eq!(o.0.len() + o.1.len(), records().len());
    assert!(o.2.values().all(|n| *n == 1), "{:?}", o.2);
    o
}

/// A SIGKILL: the sink's destructors never run (open Parquet files stay hidden
/// temporaries, nothing is flushed or closed); the journal holds what was taken.
#[allow(clippy::mem_forget)] // the point: no destructor runs, as under SIGKILL
fn kill(sink: VerdictSink) {
    std::mem::forget(sink);
}

#[test]
fn a_sink_stopped_right_after_its_first_journaled_verdict_loses_nothing_on_restart() {
    let want = uninterrupted();
    let dir = tempfile::tempdir().unwrap();
    let bus = bus_with_records();
    // SIGTERM sets the stop flag; here it is set the moment the first record is
    // journaled (the sink's own callback runs after the journal's fsync).
    let stop = AtomicBool::new(false);
    let first = run(
        open(dir.path()),
        &mut consumer(&bus),
        Some(records().len()),
        &stop,
        None,
        |_, _| stop.store(true, Ordering::SeqCst),
    )
    .unwrap();
    assert_eq!(first.len(), 1, "stopped after one record");
    let journal = std::fs::read_to_string(dir.path().join("journal.jsonl")).unwrap();
    assert_eq!(journal.lines().count(), 1);
    let got = run_to_end(dir.path(), &bus);
    assert_eq!(outcome(dir.path(), &got), want);
}

#[test]
fn a_sink_killed_right_after_its_first_journaled_verdict_before_the_commit_loses_nothing() {
    let want = uninterrupted();
    let dir = tempfile::tempdir().unwrap();
    let bus = bus_with_records();
    let mut sink = open(dir.path());
    assert!(sink.replay().unwrap().is_empty());
    let mut c = consumer(&bus);
    let d = c.poll(Duration::from_secs(1)).unwrap().expect("a record");
    sink.take(&d.payload).unwrap();
    // Killed between the journal's fsync and the offset commit: the bus delivers
    // the record again, and the journal's copy is replayed; it is taken once.
    kill(sink);
    drop(c);
    let got = run_to_end(dir.path(), &bus);
    assert_eq!(outcome(dir.path(), &got), want);
}

#[test]
fn a_sink_killed_with_verdicts_only_in_its_open_file_writes_each_row_once() {
    let want = uninterrupted();
    let dir = tempfile::tempdir().unwrap();
    let bus = bus_with_records();
    // First instance: four records taken and committed; their rows are in the open
    // (not yet completed) Parquet files when it dies.
    let mut sink = open(dir.path());
    let mut c = consumer(&bus);
    for _ in 0..4 {
        let d = c.poll(Duration::from_secs(1)).unwrap().expect("a record");
        sink.take(&d.payload).unwrap();
        c.commit(&d).unwrap();
    }
    kill(sink);
    drop(c);
    assert!(
        incidents_in(&dir.path().join("verdicts/incidents"))
            .unwrap()
            .is_empty(),
        "no completed file yet"
    );
    // Second instance: stopped as soon as it has taken its first record (a
    // journaled one, replayed: its rows written again), closing its files.
    let stop = AtomicBool::new(false);
    run(
        open(dir.path()),
        &mut consumer(&bus),
        Some(records().len()),
        &stop,
        None,
        |_, _| stop.store(true, Ordering::SeqCst),
    )
    .unwrap();
    // Third instance, to the end.
    let got = run_to_end(dir.path(), &bus);
    assert_eq!(outcome(dir.path(), &got), want);
}
