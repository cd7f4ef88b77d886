//! The certification hook against replayers that are the model itself (exact) and a
//! seeded noisy version of it (statistical).

use audita_causal::certify::{
    action_match, attribute_certified, hoeffding_epsilon, ActuationEvent, CertifyConfig,
    CertifyError, CertifyMode, Intervention, ModelReplayer, ReplayError, ReplayRun, Replayer,
};
use audita_causal::{attribute, Model};

const LATE_PREEMPTION: &str = r#"{"variables": {
  "suzy_throws": {"principal": "suzy", "value": true},
  "billy_throws": {"principal": "billy", "value": true},
  "suzy_hits": {"principal": null, "eq": "suzy_throws", "candidate": false},
  "billy_hits": {"principal": null, "eq": "billy_throws & !suzy_hits", "candidate": false}},
 "outcome": "suzy_hits | billy_hits"}"#;

const REDUNDANCY: &str = r#"{"variables": {
  "a": {"principal": "p1", "value": true},
  "b": {"principal": "p2", "value": true},
  "c": {"principal": "p3", "value": true}},
 "outcome": "(a | b) & c"}"#;

fn exact() -> CertifyConfig {
    CertifyConfig {
        delta: 0.5,
        mode: CertifyMode::Exact,
        tolerance: 0.0,
    }
}

#[test]
fn exact_replay_of_the_model_certifies_every_cause() {
    for src in [LATE_PREEMPTION, REDUNDANCY] {
        let m = Model::from_json(src).unwrap();
        let mut r = ModelReplayer::exact(m.clone());
        let c = attribute_certified(&m, &[], &mut r, &exact()).unwrap();
        assert_eq!(c.attribution, attribute(&m).unwrap());
        assert_eq!(c.abstentions().count(), 0);
        assert!(c
            .receipts
            .iter()
            .all(|r| r.q0 == 1.0 && r.q1 == 0.0 && r.action_match == 1.0));
    }
}

#[test]
fn the_witness_is_frozen_during_replay() {
    // Suzy's throw only falsifies the outcome with billy_hits frozen: a replayer that
    // ignored the freeze would see Billy's rock hit and abstain.
    let m = Model::from_json(LATE_PREEMPTION).unwrap();
    let c = attribute_certified(&m, &[], &mut ModelReplayer::exact(m.clone()), &exact()).unwrap();
    assert_eq!(c.receipts.len(), 1);
    assert_eq!(c.receipts[0].cause.witness, vec!["billy_hits".to_string()]);
    assert!(c.receipts[0].certified);
}

/// Replays a different world: `c` has no effect there.
struct Disagreeing(ModelReplayer);

impl Replayer for Disagreeing {
    fn recorded(&self) -> Vec<ActuationEvent> {
        self.0.recorded()
    }
    fn replay(&mut self, iv: &Intervention, run: u32) -> Result<ReplayRun, ReplayError> {
        let mut out = self.0.replay(iv, run)?;
        if iv.set.iter().any(|(v, _)| v == "c") {
            out.adverse = true;
        }
        Ok(out)
    }
}

#[test]
fn a_cause_failing_replay_is_withheld_not_reported() {
    let m = Model::from_json(REDUNDANCY).unwrap();
    let mut r = Disagreeing(ModelReplayer::exact(m.clone()));
    let c = attribute_certified(&m, &[], &mut r, &exact()).unwrap();
    let withheld: Vec<_> = c.abstentions().map(|r| r.cause.vars.clone()).collect();
    assert_eq!(withheld, vec![vec!["c".to_string()]]);
    assert!(c.abstentions().all(|r| r.note.starts_with("abstained")));
    assert_eq!(c.attribution.responsibility_of("p3"), 0.0);
    assert_eq!(c.attribution.responsibility_of("p1"), 0.5);
    // Certification never raises a grade.
    let plain = attribute(&m).unwrap();
    for (p, rho) in &c.attribution.responsibility {
        assert!(*rho <= plain.responsibility_of(p));
    }
}

#[test]
fn statistical_mode_certifies_under_mild_noise() {
    let m = Model::from_json(REDUNDANCY).unwrap();
    let cfg = CertifyConfig {
        delta: 0.5,
        mode: CertifyMode::Statistical {
            n: 400,
            alpha: 0.05,
        },
        tolerance: 0.0,
    };
    let mut r = ModelReplayer::noisy(m.clone(), 0.05, 7);
    let c = attribute_certified(&m, &[], &mut r, &cfg).unwrap();
    let eps = hoeffding_epsilon(400, 0.05);
    assert!((eps - ((4.0f64 / 0.05).ln() / 800.0).sqrt()).abs() < 1e-12);
    for rec in &c.receipts {
        assert_eq!(rec.epsilon, eps);
        assert!(rec.q0 > 0.9 && rec.q1 < 0.1, "{rec:?}");
        assert!(rec.certified);
    }
    assert_eq!(c.attribution, attribute(&m).unwrap());
}

#[test]
fn statistical_mode_abstains_under_heavy_noise() {
    let m = Model::from_json(REDUNDANCY).unwrap();
    let cfg = CertifyConfig {
        delta: 0.5,
        mode: CertifyMode::Statistical {
            n: 200,
            alpha: 0.05,
        },
        tolerance: 0.0,
    };
    let mut r = ModelReplayer::noisy(m.clone(), 0.3, 11);
    let c = attribute_certified(&m, &[], &mut r, &cfg).unwrap();
    // True reduction 0.4 < δ: every cause withheld, nobody accused.
    assert_eq!(c.abstentions().count(), c.receipts.len());
    assert!(c.attribution.causes.is_empty());
    assert!(c.attribution.responsibility.values().all(|r| *r == 0.0));
}

#[test]
fn exact_mode_rejects_a_noisy_stack() {
    let m = Model::from_json(REDUNDANCY).unwrap();
    // A stack that flips half the runs cannot pass as pinned.
    let mut errors = 0;
    for seed in 0..8 {
        let mut r = ModelReplayer::noisy(m.clone(), 0.5, seed);
        if let Err(e) = attribute_certified(&m, &[], &mut r, &exact()) {
            assert_eq!(e, CertifyError::NonDeterministic);
            errors += 1;
        }
    }
    assert!(errors > 0);
}

/// Replays faithfully but claims a different recorded trajectory.
struct WrongRecord(ModelReplayer);

impl Replayer for WrongRecord {
    fn recorded(&self) -> Vec<ActuationEvent> {
        vec![ActuationEvent {
            kind: "move_to".into(),
            target: "agv-1".into(),
            params: vec![1.0, 2.0],
        }]
    }
    fn replay(&mut self, iv: &Intervention, run: u32) -> Result<ReplayRun, ReplayError> {
        self.0.replay(iv, run)
    }
}

#[test]
fn exact_mode_aborts_when_factual_replay_misses_the_record() {
    let m = Model::from_json(REDUNDANCY).unwrap();
    let err = attribute_certified(
        &m,
        &[],
        &mut WrongRecord(ModelReplayer::exact(m.clone())),
        &exact(),
    )
    .unwrap_err();
    assert!(
        matches!(err, CertifyError::FactualMismatch { .. }),
        "{err:?}"
    );
}

#[test]
fn action_match_counts_aligned_agreeing_events() {
    let ev = |k: &str, t: &str, p: f64| ActuationEvent {
        kind: k.into(),
        target: t.into(),
        params: vec![p],
    };
    let rec = vec![
        ev("move_to", "agv-1", 1.0),
        ev("halt", "agv-1", 0.0),
        ev("set_speed", "arm-2", 0.5),
    ];
    let rep = vec![
        ev("move_to", "agv-1", 1.05),
        ev("halt", "agv-2", 0.0),
        ev("set_speed", "arm-2", 0.9),
        ev("halt", "arm-2", 0.0),
    ];
    assert_eq!(action_match(&rec, &rep, 0.1), 0.25);
    assert_eq!(action_match(&rec, &rec, 0.0), 1.0);
    assert_eq!(action_match(&[], &[], 0.0), 1.0);
}

#[test]
fn invalid_statistical_settings_are_rejected() {
    let m = Model::from_json(REDUNDANCY).unwrap();
    let cfg = CertifyConfig {
        delta: 0.5,
        mode: CertifyMode::Statistical { n: 0, alpha: 0.05 },
        tolerance: 0.0,
    };
    let err = attribute_certified(&m, &[], &mut ModelReplayer::exact(m.clone()), &cfg).unwrap_err();
    assert!(matches!(err, CertifyError::Config(_)));
}
