//! Configuration formats, error paths, the completion cap and the replay hook.

use crate::common;

use audita_causal::certify::{ActuationEvent, Intervention, ReplayError, ReplayRun};
use audita_causal::Replayer;
use audita_verdict::{
    verdict, verdict_with, Adverse, DutyRegistry, FindingStatus, Flag, Options, Status,
    VerdictError,
};
use common::*;

#[test]
fn registry_rejects_unknown_fields_duplicates_and_bad_ids() {
    assert!(DutyRegistry::from_json(r#"{"principals": {}, "extra": 1}"#).is_err());
    assert!(DutyRegistry::from_json(
        r#"{"principals": {"a": {"duties": [{"kind": "review_required", "id": "r", "reviewer": "b", "oops": 1}]}}}"#
    )
    .is_err());
    assert!(DutyRegistry::from_json(
        r#"{"principals": {"a": {"duties": [{"kind": "review_required", "id": "r", "reviewer": "b"}]},
                           "c": {"duties": [{"kind": "review_required", "id": "r", "reviewer": "b"}]}}}"#
    )
    .is_err());
    assert!(DutyRegistry::from_json(
        r#"{"principals": {"a": {"duties": [{"kind": "review_required", "id": "bad id", "reviewer": "b"}]}}}"#
    )
    .is_err());
    assert!(DutyRegistry::from_json(r#"{"standard": "vibes"}"#).is_err());
    let ok = DutyRegistry::from_json(r#"{"standard": "reasonable_agent"}"#).unwrap();
    assert_eq!(ok.standard, audita_verdict::Standard::ReasonableAgent);
}

#[test]
fn adverse_declaration_is_validated() {
    assert!(Adverse::from_json(
        r#"{"incident": "i", "outcome": "y", "t_star_ms": 5, "anchors": ["nope"]}"#
    )
    .is_err());
    assert!(Adverse::from_json(
        r#"{"incident": "i", "outcome": "y", "t_star_ms": 5, "bogus": true}"#
    )
    .is_err());
    assert!(
        Adverse::from_json(r#"{"incident": "i", "outcome": "y", "t_star_ms": 5, "delta": 0}"#)
            .is_err()
    );
    let a = Adverse::from_json(
        r#"{"incident": "i", "outcome": "y", "t_star_ms": 5, "severity": {"mass_kg": 100, "speed_m_per_s": 2}}"#,
    )
    .unwrap();
    assert_eq!(a.severity_j(), 200.0);
}

#[test]
fn exogenous_outcome_exonerates_everyone() {
    let mut f = Fleet::new();
    let o = f.order("operator", 0, "shift");
    let m = f.cmd(
        "planner-1",
        "dispatcher",
        10,
        slow("agv-1"),
        &[&o],
        "origin",
        None,
    );
    f.cmd(
        "dispatcher",
        "agv-1",
        20,
        slow("agv-1"),
        &[&m],
        "relay-any",
        None,
    );
    let (rec, keys) = f.seal(4);
    let v = judge(
        &rec,
        &keys,
        &envelope_registry(&["planner-1"], "specification"),
        &adverse(&[], 1000, &[]),
    );
    for (p, fnd) in &v.principals {
        assert_eq!(fnd.status, FindingStatus::Exonerated, "{p}");
        assert!(fnd.flags.contains(&Flag::Exonerated));
        assert!(!fnd.culpable);
    }
}

#[test]
fn too_many_missing_items_is_a_clear_abstention_error() {
    let (a, rec, keys) = eighteen_deleted_relays();
    let p = verify(&rec, &keys);
    assert_eq!(p.missing.len(), 18);
    let err = verdict(
        &rec,
        &p,
        &DutyRegistry::default(),
        &adverse(&[&a], 1000, &[]),
    )
    .unwrap_err();
    // Eighteen touching items with at least three choices each (absent, external,
    // origin) already exceed the cap, so the search for their possible inputs stops
    // there (it is quadratic in the items): the error says at least that much.
    let floor = (18.0 * 3f64.log2() - 1e-9).ceil() as usize;
    assert!(
        matches!(err, VerdictError::TooManyCompletions { bits, max } if bits >= floor && bits > max),
        "{err}"
    );
}

struct Broken;
impl Replayer for Broken {
    fn recorded(&self) -> Vec<ActuationEvent> {
        Vec::new()
    }
    fn replay(&mut self, _: &Intervention, _: u32) -> Result<ReplayRun, ReplayError> {
        Err(ReplayError {
            message: "simulator unavailable".into(),
            transient: true,
        })
    }
}

/// A replay that never sees the outcome drop (the cause does not replicate).
struct Stubborn;
impl Replayer for Stubborn {
    fn recorded(&self) -> Vec<ActuationEvent> {
        Vec::new()
    }
    fn replay(&mut self, _: &Intervention, _: u32) -> Result<ReplayRun, ReplayError> {
        Ok(ReplayRun {
            adverse: true,
            actions: Vec::new(),
        })
    }
}

#[test]
fn failed_replay_abstains_and_never_accuses() {
    let mut f = Fleet::new();
    let o = f.order("operator", 0, "shift");
    let m = f.cmd(
        "planner-1",
        "controller",
        10,
        fast("agv-1"),
        &[&o],
        "origin",
        None,
    );
    let a = f.cmd(
        "controller",
        "agv-1",
        20,
        fast("agv-1"),
        &[&m],
        "relay-any",
        None,
    );
    let (rec, keys) = f.seal(4);
    let p = verify(&rec, &keys);
    let duties = envelope_registry(&["planner-1"], "specification");
    let adv = adverse(&[&a], 1000, &[]);
    let clean = verdict(&rec, &p, &duties, &adv).unwrap();
    assert!(clean.finding("planner-1").unwrap().culpable);
    let v = verdict_with(
        &rec,
        &p,
        &duties,
        &adv,
        &Options::default(),
        Some(&mut Broken),
    )
    .unwrap();
    assert_eq!(v.status, Status::Abstained);
    let f1 = v.finding("planner-1").unwrap();
    assert!(!f1.culpable && f1.rho_lo == 0.0 && f1.flags.contains(&Flag::Abstained));
    let v = verdict_with(
        &rec,
        &p,
        &duties,
        &adv,
        &Options::default(),
        Some(&mut Stubborn),
    )
    .unwrap();
    let f1 = v.finding("planner-1").unwrap();
    assert!(!f1.culpable, "uncertified cause must not accuse");
    assert!(v.replay.iter().all(|r| !r.certified));
}
