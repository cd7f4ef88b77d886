//! Separation pairs observations that are fresh relative to each other, whichever
//! order a stream sealed across partitions delivers them in.

use audita_evidence::{derive_signing_key, Envelope, KeyRegistry, Payload, PrincipalId};
use audita_monitor::{AlertKind, Monitor, Predicates};

const FILE: &str = r#"{"version": 1, "stale_after_ms": 1000, "predicates": [
  {"name": "sep", "kind": "separation", "a": {"class": "robot"}, "b": {"class": "human"},
   "below_mm": 500}]}"#;

fn report(
    keys: &mut KeyRegistry,
    author: &str,
    t: u64,
    entity: &str,
    class: &str,
    x: i64,
) -> audita_evidence::Verified<audita_evidence::SignedEnvelope> {
    let key = derive_signing_key(1, author);
    let pid = PrincipalId::new(author).unwrap();
    keys.add_principal(pid.clone(), key.verifying_key());
    let reading = format!(
        r#"{{"telemetry": 1, "observations": [{{"entity": "{entity}", "class": "{class}", "fields": {{"x_mm": {x}, "y_mm": 0}}}}]}}"#
    );
    Envelope::new(
        pid.clone(),
        pid,
        t,
        Payload::SensorReport {
            sensor: author.into(),
            reading,
        },
    )
    .sign(&key)
    .unwrap()
    .verify(keys)
    .unwrap()
}

#[test]
fn a_report_delivered_ahead_of_the_stream_does_not_pair_with_the_present() {
    let mut keys = KeyRegistry::new();
    let mut m = Monitor::new(Predicates::from_json(FILE).unwrap());
    // Another cell's robot, reported 50 s ahead, arrives first.
    let ahead = report(&mut keys, "c2.rtls", 50_000, "c2.agv-1", "robot", 0);
    assert!(m.observe(&ahead).is_empty());
    // This cell's worker at the same coordinates, now: no pairing with the future.
    let now = report(&mut keys, "c1.tags", 1_000, "c1.worker-1", "human", 100);
    assert!(
        m.observe(&now).is_empty(),
        "paired with a report 49 s ahead"
    );
    // This cell's robot next to it, now: fires.
    let robot = report(&mut keys, "c1.rtls", 1_200, "c1.agv-1", "robot", 300);
    let alerts = m.observe(&robot);
    assert_eq!(alerts.len(), 1);
    assert_eq!(alerts[0].kind, AlertKind::Fired);
    assert_eq!(alerts[0].entities, vec!["c1.agv-1", "c1.worker-1"]);
    // A stale worker (more than stale_after_ms before) no longer pairs.
    let late = report(&mut keys, "c1.rtls", 2_500, "c1.agv-2", "robot", 150);
    assert!(
        m.observe(&late).is_empty(),
        "paired with a report 1.5 s old"
    );
}

/// Two sites with their own coordinate frames (two cells of a load, two buildings):
/// a robot of one at the coordinates of a worker of the other is no separation, in
/// either order of arrival; within one site it is.
#[test]
fn entities_of_different_sites_never_pair() {
    const SITES: &str = r#"{"version": 1, "stale_after_ms": 1000,
      "entities": {"c1.agv-1": {"class": "robot", "site": "c1"},
                   "c1.worker-1": {"class": "human", "site": "c1"},
                   "c2.worker-1": {"class": "human", "site": "c2"}},
      "predicates": [{"name": "sep", "kind": "separation", "a": {"class": "robot"},
                      "b": {"class": "human"}, "below_mm": 500}]}"#;
    let mut keys = KeyRegistry::new();
    let mut m = Monitor::new(Predicates::from_json(SITES).unwrap());
    let other = report(&mut keys, "c2.tags", 1_000, "c2.worker-1", "human", 100);
    assert!(m.observe(&other).is_empty());
    let robot = report(&mut keys, "c1.rtls", 1_100, "c1.agv-1", "robot", 120);
    assert!(
        m.observe(&robot).is_empty(),
        "paired a robot with another site's worker"
    );
    let own = report(&mut keys, "c1.tags", 1_200, "c1.worker-1", "human", 140);
    let alerts = m.observe(&own);
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    assert_eq!(alerts[0].entities, vec!["c1.agv-1", "c1.worker-1"]);
}

/// A command older than every window a declaration can have is dropped once the
/// watermark has left it behind (memory follows rate × lookback); one inside the
/// window of the incident stays a fact of it. Without a lookback (windows from 0)
/// nothing is dropped.
#[test]
fn commands_older_than_every_window_are_dropped() {
    const LOOKBACK: &str = r#"{"version": 1, "stale_after_ms": 1000, "predicates": [
      {"name": "sep", "kind": "separation", "a": {"class": "robot"}, "b": {"class": "human"},
       "below_mm": 500, "lookback_ms": 5000}]}"#;
    let realised = |file: &str| -> (bool, usize) {
        let mut keys = KeyRegistry::new();
        let mut m = Monitor::new(Predicates::from_json(file).unwrap());
        realised_move(&mut keys, &mut m, 1_000);
        assert_eq!(m.commands_held(), 1);
        // The watermark moves far past it: nothing fired, nothing pending.
        assert!(m.advance(200_000).is_empty());
        let pruned = m.commands_held() == 0;
        realised_move(&mut keys, &mut m, 200_500);
        let worker = report(&mut keys, "tags", 200_900, "worker-1", "human", 100);
        m.observe(&worker);
        let agv = report(&mut keys, "rtls", 201_000, "agv-1", "robot", 300);
        assert_eq!(m.observe(&agv).len(), 1);
        let decls = m.advance(201_000);
        assert_eq!(decls.len(), 1);
        let facts = decls[0]
            .facts
            .iter()
            .filter(|f| f.fact == audita_verdict::FactKind::Realised)
            .count();
        (pruned, facts)
    };
    assert_eq!(
        realised(LOOKBACK),
        (true, 1),
        "dropped; the command inside the window stays"
    );
    assert_eq!(realised(FILE), (false, 2), "a window from 0 reads both");
}

/// A move of `agv-1` to (300, 0) commanded by `planner` at `t` (citing the robot's
/// position just before) and realised by the robot's actuation report at `t + 10`.
fn realised_move(keys: &mut KeyRegistry, m: &mut Monitor, t: u64) {
    let planner = derive_signing_key(1, "planner");
    let robot = derive_signing_key(1, "agv-1");
    let (pp, rp) = (
        PrincipalId::new("planner").unwrap(),
        PrincipalId::new("agv-1").unwrap(),
    );
    keys.add_principal(pp.clone(), planner.verifying_key());
    keys.add_principal(rp.clone(), robot.verifying_key());
    let seen = report(keys, "rtls", t - 5, "agv-1", "robot", 5_000);
    m.observe(&seen);
    let cmd = Envelope::new(
        pp.clone(),
        rp.clone(),
        t,
        Payload::MoveTo {
            target: "agv-1".into(),
            x_mm: 300,
            y_mm: 0,
        },
    )
    .cite([seen.id().clone()])
    .with_effect(audita_evidence::Effect::AtPosition {
        target: "agv-1".into(),
        x_mm: 300,
        y_mm: 0,
        tolerance_mm: 50,
    })
    .sign(&planner)
    .unwrap()
    .verify(keys)
    .unwrap();
    let act = Envelope::new(
        rp,
        pp,
        t + 10,
        Payload::ToolOutput {
            tool: "actuator".into(),
            output: "move_to realised".into(),
        },
    )
    .cite([cmd.id().clone()])
    .sign(&robot)
    .unwrap()
    .verify(keys)
    .unwrap();
    m.observe(&cmd);
    m.observe(&act);
}

/// A stream that goes quiet (a paused sealer, a restarted broker) has its pending
/// incidents declared without a watermark; when it resumes, a later incident whose
/// anchor is a command issued before the quiet still names it. (The quiet path once
/// declared with `advance(u64::MAX)`, which forgot every command: at 400 robots under
/// faults, an incident after a broker restart lost its anchor and was refused.)
#[test]
fn declaring_a_quiet_streams_incidents_forgets_no_command() {
    const LOOKBACK: &str = r#"{"version": 1, "stale_after_ms": 1000, "predicates": [
      {"name": "sep", "kind": "separation", "a": {"class": "robot"}, "b": {"class": "human"},
       "below_mm": 500, "lookback_ms": 60000}]}"#;
    let mut keys = KeyRegistry::new();
    let mut m = Monitor::new(Predicates::from_json(LOOKBACK).unwrap());
    realised_move(&mut keys, &mut m, 1_000);
    // A worker comes near: fires; then the stream goes quiet before the watermark
    // passes t*.
    m.observe(&report(&mut keys, "tags", 1_900, "worker-1", "human", 100));
    assert_eq!(
        m.observe(&report(&mut keys, "rtls", 2_000, "agv-1", "robot", 300))
            .len(),
        1
    );
    let first = m.declare_pending();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].anchors.len(), 1, "{:?}", first[0]);
    assert_eq!(m.commands_held(), 1, "the quiet forgot the command");
    // The stream resumes: the worker leaves (re-arms) and another comes near the
    // robot, still where the same command put it.
    m.observe(&report(
        &mut keys, "tags", 5_000, "worker-1", "human", 9_000,
    ));
    m.observe(&report(&mut keys, "rtls", 5_100, "agv-1", "robot", 300));
    assert_eq!(
        m.observe(&report(&mut keys, "tags", 6_000, "worker-2", "human", 200))
            .len(),
        1
    );
    let second = m.advance(6_000);
    assert_eq!(second.len(), 1);
    assert_eq!(
        second[0].anchors, first[0].anchors,
        "the command establishing the robot's position at t* is still the anchor"
    );
}
