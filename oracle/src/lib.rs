//! Independent oracles for the causal engine: an analytic oracle (prime implicants to
//! minimal transversals) and a brute-force checker of the modified Halpern–Pearl
//! definition. Shares no code with `audita-causal` by design: its own model type, its
//! own reading of the SPEC §7 JSON and grammar, its own evaluator.
//!
//! Guarantees: obviously-correct, exponential algorithms meant for small models
//! (a few candidates, about ten variables); results use variable names, sorted.
#![warn(missing_docs)]
#![warn(clippy::too_many_lines)]

pub mod analytic;
pub mod brute;
pub mod model;

pub use model::{OracleModel, Term};

/// One minimal cause as the oracle sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct OracleCause {
    /// Sorted names of the cause set.
    pub vars: Vec<String>,
    /// Sorted names of one smallest witness.
    pub witness: Vec<String>,
    /// `1/(|vars| + |witness|)`.
    pub grade: f64,
}

/// The oracle's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct OracleReport {
    /// Whether the outcome holds actually.
    pub outcome: bool,
    /// Every minimal cause, sorted by (size, names).
    pub causes: Vec<OracleCause>,
    /// ρ per non-null principal.
    pub responsibility: std::collections::BTreeMap<String, f64>,
}

pub(crate) fn report(
    model: &OracleModel,
    outcome: bool,
    mut causes: Vec<OracleCause>,
) -> OracleReport {
    causes.sort_by(|a, b| (a.vars.len(), &a.vars).cmp(&(b.vars.len(), &b.vars)));
    let mut responsibility = std::collections::BTreeMap::new();
    for p in model.principal.iter().flatten() {
        responsibility.insert(p.clone(), 0.0f64);
    }
    for c in &causes {
        for v in &c.vars {
            let i = model
                .names
                .iter()
                .position(|n| n == v)
                .unwrap_or(usize::MAX);
            if let Some(Some(p)) = model.principal.get(i) {
                let r = responsibility.entry(p.clone()).or_insert(0.0);
                if c.grade > *r {
                    *r = c.grade;
                }
            }
        }
    }
    OracleReport {
        outcome,
        causes,
        responsibility,
    }
}
