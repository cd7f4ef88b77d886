//! Certification by replay (SPEC §3 "Certify by replay"): no cause is reported until
//! re-executed.
//!
//! Design constraints:
//! - For each proposed cause `(X, W)` the engine asks a [`Replayer`] to re-run the slice
//!   with `X` set to its counterfactual values and `W` frozen at actual values, and
//!   compares the risk of the outcome with the factual arm (no intervention).
//! - **Exact mode** (pinned stack): one run per arm; the factual arm is run twice and
//!   must reproduce itself and the recorded actuation trace exactly, otherwise
//!   certification aborts with an integrity error. A cause is certified iff
//!   `q0 − q1 ≥ δ` with `q ∈ {0, 1}`.
//! - **Statistical mode** (hosted stack): `n` runs per arm, `ε = sqrt(ln(4/α)/(2n))`,
//!   certified iff `q̂0 − q̂1 ≥ δ + 2ε` (Hoeffding plus a union bound: a cause whose true
//!   risk reduction is below δ is certified with probability at most α). The
//!   action-match score (mean fraction of index-aligned actuation events of the
//!   factual runs agreeing with the recorded trace in kind, target and parameters
//!   within tolerance) is reported with every receipt.
//! - **Minimality under replay**: a confirmed cause with more than one member is
//!   re-run once per member with that member left at its actual value (same `W`); if
//!   any such strict subset already passes the same test, `X` is not minimal in the
//!   world and is withheld. On a model that describes the world this never fires (the
//!   engine's causes are minimal); it fires when the record misses coordination
//!   (off-bus links, issue 19), where crediting the extra member would blame a
//!   principal the world does not depend on.
//! - A cause that fails is withheld with a note (abstention); ρ is recomputed over the
//!   certified causes only. Certification never adds a cause.

use crate::attribution::{Attribution, Cause};
use crate::model::{Model, VarId};

/// One actuation event of a (recorded or replayed) trajectory.
#[derive(Debug, Clone, PartialEq)]
pub struct ActuationEvent {
    /// Event type (e.g. `move_to`, `set_speed`, `halt`).
    pub kind: String,
    /// The actuated target (robot, batch, zone).
    pub target: String,
    /// Numeric parameters, compared within the configured tolerance.
    pub params: Vec<f64>,
}

/// A replay request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Intervention {
    /// Variables set to counterfactual values (the cause `X`).
    pub set: Vec<(String, bool)>,
    /// Variables frozen at their actual values (the witness `W`).
    pub freeze: Vec<(String, bool)>,
}

impl Intervention {
    /// The factual arm: no intervention.
    pub fn factual() -> Self {
        Self::default()
    }

    /// Whether this is the factual arm.
    pub fn is_factual(&self) -> bool {
        self.set.is_empty() && self.freeze.is_empty()
    }
}

/// The result of one replay.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayRun {
    /// Whether the adverse outcome occurred.
    pub adverse: bool,
    /// The actuation trace of the run.
    pub actions: Vec<ActuationEvent>,
}

/// A replay failed to run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("replay failed: {message}")]
pub struct ReplayError {
    /// What went wrong.
    pub message: String,
    /// Whether running the replay again can help (e.g. a busy server).
    pub transient: bool,
}

/// Re-executes the incident slice under an intervention.
pub trait Replayer {
    /// The recorded actuation trace that the factual replay must reproduce.
    fn recorded(&self) -> Vec<ActuationEvent>;
    /// Runs replay number `run` (0-based within its arm) of `intervention`.
    fn replay(&mut self, intervention: &Intervention, run: u32) -> Result<ReplayRun, ReplayError>;
}

/// How replays are judged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CertifyMode {
    /// Deterministic replay: one run per arm, risk 0 or 1.
    Exact,
    /// Non-deterministic replay: `n` runs per arm at confidence `1 − alpha`.
    Statistical {
        /// Runs per arm (≥ 1).
        n: u32,
        /// Error probability per reported cause, in (0, 1).
        alpha: f64,
    },
}

/// Certification settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CertifyConfig {
    /// Declared margin: required drop of the risk of the outcome.
    pub delta: f64,
    /// Exact or statistical.
    pub mode: CertifyMode,
    /// Absolute tolerance for comparing actuation parameters.
    pub tolerance: f64,
}

/// Certification could not be carried out at all.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CertifyError {
    /// The replayer failed.
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// Exact mode: the factual replay does not reproduce the recorded trace (an
    /// integrity finding in itself).
    #[error(
        "factual replay does not reproduce the recorded trajectory (action match {action_match})"
    )]
    FactualMismatch {
        /// Fraction of aligned events that agreed.
        action_match: f64,
    },
    /// Exact mode: two factual replays differ.
    #[error("replay is not deterministic: two factual runs differ")]
    NonDeterministic,
    /// Invalid settings.
    #[error("invalid certification config: {0}")]
    Config(String),
}

/// The replay evidence for one proposed cause.
#[derive(Debug, Clone, PartialEq)]
pub struct Receipt {
    /// The proposed cause.
    pub cause: Cause,
    /// Risk of the outcome in the factual arm.
    pub q0: f64,
    /// Risk of the outcome under the intervention.
    pub q1: f64,
    /// Hoeffding half-width (0 in exact mode).
    pub epsilon: f64,
    /// Runs per arm.
    pub runs: u32,
    /// Action-match score of the factual arm against the recorded trace.
    pub action_match: f64,
    /// Whether the cause passed.
    pub certified: bool,
    /// Human-readable justification.
    pub note: String,
}

/// An attribution restricted to certified causes, with all receipts.
#[derive(Debug, Clone, PartialEq)]
pub struct Certified {
    /// Certified causes only; ρ recomputed over them.
    pub attribution: Attribution,
    /// One receipt per proposed cause, in the proposal order.
    pub receipts: Vec<Receipt>,
}

impl Certified {
    /// Receipts of the causes withheld (abstentions).
    pub fn abstentions(&self) -> impl Iterator<Item = &Receipt> {
        self.receipts.iter().filter(|r| !r.certified)
    }
}

/// The Hoeffding half-width `sqrt(ln(4/α)/(2n))`.
pub fn hoeffding_epsilon(n: u32, alpha: f64) -> f64 {
    ((4.0 / alpha).ln() / (2.0 * f64::from(n.max(1)))).sqrt()
}

/// Fraction of index-aligned events agreeing in kind, target and parameters (within
/// `tolerance`); 1.0 when both traces are empty.
pub fn action_match(
    recorded: &[ActuationEvent],
    replayed: &[ActuationEvent],
    tolerance: f64,
) -> f64 {
    let total = recorded.len().max(replayed.len());
    if total == 0 {
        return 1.0;
    }
    let agree = recorded
        .iter()
        .zip(replayed)
        .filter(|(a, b)| {
            a.kind == b.kind
                && a.target == b.target
                && a.params.len() == b.params.len()
                && a.params
                    .iter()
                    .zip(&b.params)
                    .all(|(x, y)| (x - y).abs() <= tolerance)
        })
        .count();
    agree as f64 / total as f64
}

/// The intervention that tests `cause` on `model` (with exogenous `overrides`).
pub fn intervention_for(model: &Model, overrides: &[(VarId, bool)], cause: &Cause) -> Intervention {
    let actual = model.evaluate(overrides);
    let value = |name: &str| {
        model
            .var(name)
            .map(|id| actual[id.index()])
            .unwrap_or(false)
    };
    Intervention {
        set: cause.vars.iter().map(|v| (v.clone(), !value(v))).collect(),
        freeze: cause
            .witness
            .iter()
            .map(|v| (v.clone(), value(v)))
            .collect(),
    }
}

/// Certifies every cause of `attribution` by replay; uncertified causes are withheld.
pub fn certify(
    model: &Model,
    overrides: &[(VarId, bool)],
    attribution: Attribution,
    replayer: &mut dyn Replayer,
    cfg: &CertifyConfig,
) -> Result<Certified, CertifyError> {
    let (runs, epsilon) = match cfg.mode {
        CertifyMode::Exact => (1, 0.0),
        CertifyMode::Statistical { n, alpha } => {
            if n == 0 || !(alpha > 0.0 && alpha < 1.0) {
                return Err(CertifyError::Config(format!(
                    "need n >= 1 and 0 < alpha < 1, got n={n}, alpha={alpha}"
                )));
            }
            (n, hoeffding_epsilon(n, alpha))
        }
    };
    if !cfg.delta.is_finite() || !cfg.tolerance.is_finite() {
        return Err(CertifyError::Config(
            "delta and tolerance must be finite".into(),
        ));
    }
    let recorded = replayer.recorded();
    let factual = Intervention::factual();
    let mut adverse0 = 0u32;
    let mut matches = 0.0;
    let mut first: Option<ReplayRun> = None;
    for r in 0..runs {
        let run = replayer.replay(&factual, r)?;
        adverse0 += u32::from(run.adverse);
        matches += action_match(&recorded, &run.actions, cfg.tolerance);
        if first.is_none() {
            first = Some(run);
        }
    }
    let am = matches / f64::from(runs);
    if cfg.mode == CertifyMode::Exact {
        let again = replayer.replay(&factual, 1)?;
        if Some(&again) != first.as_ref() {
            return Err(CertifyError::NonDeterministic);
        }
        if am < 1.0 {
            return Err(CertifyError::FactualMismatch { action_match: am });
        }
    }
    let q0 = f64::from(adverse0) / f64::from(runs);
    let mut receipts = Vec::with_capacity(attribution.causes.len());
    for cause in &attribution.causes {
        let iv = intervention_for(model, overrides, cause);
        let mut adverse1 = 0u32;
        for r in 0..runs {
            adverse1 += u32::from(replayer.replay(&iv, r)?.adverse);
        }
        let q1 = f64::from(adverse1) / f64::from(runs);
        let needed = cfg.delta + 2.0 * epsilon;
        let mut certified = q0 - q1 >= needed;
        let mut note = if certified {
            format!(
                "risk dropped {q0:.4} -> {q1:.4} (needed {needed:.4}) over {runs} run(s) per arm"
            )
        } else {
            format!("abstained: risk dropped {q0:.4} -> {q1:.4}, short of {needed:.4} over {runs} run(s) per arm")
        };
        // Minimality under replay (AC3 on the world, with the same witness frozen): the
        // model derives X from the record, and when the record does not describe the
        // world (coordination off the bus) a strict subset may already falsify Y; then
        // X is no cause of the world and its extra members must not be credited.
        if certified && cause.vars.len() > 1 {
            for v in &cause.vars {
                let sub = Cause {
                    vars: cause.vars.iter().filter(|x| *x != v).cloned().collect(),
                    witness: cause.witness.clone(),
                    grade: cause.grade,
                };
                let iv = intervention_for(model, overrides, &sub);
                let mut adverse_sub = 0u32;
                for r in 0..runs {
                    adverse_sub += u32::from(replayer.replay(&iv, r)?.adverse);
                }
                let q_sub = f64::from(adverse_sub) / f64::from(runs);
                if q0 - q_sub >= needed {
                    certified = false;
                    note = format!(
                        "abstained: not minimal under replay: without {v} the risk still drops {q0:.4} -> {q_sub:.4} (needed {needed:.4}) over {runs} run(s) per arm"
                    );
                    break;
                }
            }
        }
        receipts.push(Receipt {
            cause: cause.clone(),
            q0,
            q1,
            epsilon,
            runs,
            action_match: am,
            certified,
            note,
        });
    }
    let mut att = attribution;
    let passed: Vec<bool> = receipts.iter().map(|r| r.certified).collect();
    let mut i = 0;
    att.retain_causes(|_| {
        let keep = passed[i];
        i += 1;
        keep
    });
    Ok(Certified {
        attribution: att,
        receipts,
    })
}

/// Attributes and certifies in one call (the engine reports certified causes only).
pub fn attribute_certified(
    model: &Model,
    overrides: &[(VarId, bool)],
    replayer: &mut dyn Replayer,
    cfg: &CertifyConfig,
) -> Result<Certified, CertifyError> {
    let att = crate::attribution::attribute_with(model, overrides, &Default::default())
        .map_err(|e| CertifyError::Config(e.to_string()))?;
    certify(model, overrides, att, replayer, cfg)
}

/// A replayer that re-evaluates a structural model: exact, or with the outcome flipped
/// at a fixed rate by a seeded generator (a stand-in for a hosted, noisy stack).
#[derive(Debug, Clone)]
pub struct ModelReplayer {
    model: Model,
    overrides: Vec<(VarId, bool)>,
    flip_rate: f64,
    seed: u64,
}

impl ModelReplayer {
    /// Deterministic replay of `model`.
    pub fn exact(model: Model) -> Self {
        Self::noisy(model, 0.0, 0)
    }

    /// Replay whose adverse flag is flipped with probability `flip_rate`.
    pub fn noisy(model: Model, flip_rate: f64, seed: u64) -> Self {
        ModelReplayer {
            model,
            overrides: Vec::new(),
            flip_rate,
            seed,
        }
    }

    /// Uses exogenous overrides for every run.
    pub fn with_overrides(mut self, overrides: Vec<(VarId, bool)>) -> Self {
        self.overrides = overrides;
        self
    }

    fn trace(&self, vals: &[bool]) -> Vec<ActuationEvent> {
        self.model
            .variables()
            .zip(vals)
            .filter(|(_, v)| **v)
            .map(|(var, _)| ActuationEvent {
                kind: "present".into(),
                target: var.name,
                params: Vec::new(),
            })
            .collect()
    }

    fn run_once(&self, iv: &Intervention) -> (bool, Vec<bool>) {
        let m = &self.model;
        let n = m.vars.len();
        let exo = m.exogenous_values(&self.overrides);
        let mut mask = vec![0u64; n];
        let mut val = vec![0u64; n];
        for (name, b) in iv.set.iter().chain(&iv.freeze) {
            if let Some(id) = m.var(name) {
                mask[id.index()] = !0;
                val[id.index()] = if *b { !0 } else { 0 };
            }
        }
        let mut vals = vec![0u64; n];
        let mut stack = Vec::new();
        let y = m.eval_into(&exo, &mask, &val, &mut vals, &mut stack) & 1 == 1;
        (y, vals.iter().map(|w| *w & 1 == 1).collect())
    }
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

impl Replayer for ModelReplayer {
    fn recorded(&self) -> Vec<ActuationEvent> {
        let (_, vals) = self.run_once(&Intervention::factual());
        self.trace(&vals)
    }

    fn replay(&mut self, iv: &Intervention, run: u32) -> Result<ReplayRun, ReplayError> {
        let (mut y, vals) = self.run_once(iv);
        if self.flip_rate > 0.0 {
            let mut h = self.seed ^ u64::from(run).wrapping_mul(0x1000_0000_01B3);
            for (name, b) in iv.set.iter().chain(&iv.freeze) {
                for byte in name.bytes() {
                    h = splitmix(h ^ u64::from(byte));
                }
                h = splitmix(h ^ u64::from(*b));
            }
            let u = (splitmix(h) >> 11) as f64 / (1u64 << 53) as f64;
            if u < self.flip_rate {
                y = !y;
            }
        }
        Ok(ReplayRun {
            adverse: y,
            actions: self.trace(&vals),
        })
    }
}
