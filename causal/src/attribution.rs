//! Attribution: every minimal cause with its smallest witness, grades and ρ.
//!
//! Design constraints:
//! - `X` is a cause when the outcome holds, some witness `W` frozen at actual values
//!   lets the flip of `X` falsify the outcome, and no strict subset of `X` can (modified
//!   Halpern–Pearl). Causes contain only candidates; witnesses may contain any
//!   endogenous variable, candidates or not.
//! - Grade `ρ(X) = 1/(|X| + |W|)` with the smallest `W`, computed after canonical
//!   contraction of same-author conjunctive groups (see [`crate::contract`]); the
//!   responsibility of a principal is the maximum grade over the minimal causes holding
//!   one of its variables, 0.0 when there is none. Every non-null principal of the
//!   model is listed.
//! - The monotone fast path is chosen automatically when the model is monotone; the
//!   general path otherwise (or when forced through [`AttributeOptions`]). Both give the
//!   same answer on monotone models.
//! - Output is deterministic: variables inside a cause and witness are sorted by name,
//!   causes by (size, names); floating-point grades are exact reciprocals.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::general::{Exhausted, Search};
use crate::model::{Model, VarId};

/// Which search produced an attribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Path {
    /// Monotone path if the model is monotone, general path otherwise.
    #[default]
    Auto,
    /// Minimal cut sets (witnesses are empty).
    Monotone,
    /// Exact search over cause and witness sets.
    General,
}

/// Knobs of an attribution query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttributeOptions {
    /// Contract same-author conjunctive groups before grading (default true).
    pub contract: bool,
    /// Which search to run (default [`Path::Auto`]).
    pub path: Path,
    /// Upper bound on the number of minimal causes (and intermediate cut-set families).
    pub max_causes: usize,
    /// Upper bound on model evaluations of the general path.
    pub max_evaluations: u64,
}

impl Default for AttributeOptions {
    fn default() -> Self {
        AttributeOptions {
            contract: true,
            path: Path::Auto,
            max_causes: 1 << 20,
            max_evaluations: 50_000_000,
        }
    }
}

/// Why an attribution query could not be answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttributeError {
    /// An override names an endogenous variable (only exogenous values can be set).
    #[error("variable `{0}` is endogenous; only exogenous values can be overridden")]
    NotExogenous(String),
    /// An override names a variable of another model.
    #[error("variable index {0} is out of range")]
    UnknownVar(usize),
    /// More minimal causes than [`AttributeOptions::max_causes`].
    #[error("more than {0} minimal causes, or cut-set families beyond the memory bound (raise max_causes or split the slice)")]
    TooManyCauses(usize),
    /// The general search exceeded [`AttributeOptions::max_evaluations`].
    #[error("exact search exceeded {0} model evaluations (raise max_evaluations)")]
    BudgetExhausted(u64),
    /// [`Path::Monotone`] was forced on a non-monotone model.
    #[error("the model is not monotone in its candidates")]
    NotMonotone,
}

/// One minimal cause.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cause {
    /// The cause set `X`, sorted by name.
    pub vars: Vec<String>,
    /// A smallest witness `W`, sorted by name.
    pub witness: Vec<String>,
    /// `1/(|X| + |W|)` (contracted sizes).
    pub grade: f64,
}

/// The answer to an attribution query (serialises to the SPEC §7 output).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Attribution {
    /// Whether the outcome holds actually.
    pub outcome: bool,
    /// Every minimal cause with its smallest witness.
    pub causes: Vec<Cause>,
    /// ρ per non-null principal.
    pub responsibility: BTreeMap<String, f64>,
    /// The path that produced it.
    #[serde(skip)]
    pub path: Path,
    #[serde(skip)]
    principal_of: BTreeMap<String, Option<String>>,
}

impl Attribution {
    /// The SPEC §7 JSON text (compact, deterministic).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// ρ of a principal (0.0 when it owns no cause or is unknown).
    pub fn responsibility_of(&self, principal: &str) -> f64 {
        self.responsibility.get(principal).copied().unwrap_or(0.0)
    }

    /// The causes holding a variable owned by `principal`.
    pub fn causes_of<'a>(&'a self, principal: &'a str) -> impl Iterator<Item = &'a Cause> + 'a {
        self.causes.iter().filter(move |c| {
            c.vars
                .iter()
                .any(|v| self.principal_of.get(v).and_then(|p| p.as_deref()) == Some(principal))
        })
    }

    /// The highest-graded cause of `principal` (first in output order on ties).
    pub fn best_cause_of<'a>(&'a self, principal: &'a str) -> Option<&'a Cause> {
        let mut best: Option<&Cause> = None;
        for c in self.causes_of(principal) {
            if !matches!(best, Some(b) if c.grade <= b.grade) {
                best = Some(c);
            }
        }
        best
    }

    /// The principals owning a variable of `cause` (sorted, no duplicates).
    pub fn principals_of<'a>(&'a self, cause: &'a Cause) -> Vec<&'a str> {
        let mut ps: Vec<&str> = cause
            .vars
            .iter()
            .filter_map(|v| self.principal_of.get(v).and_then(|p| p.as_deref()))
            .collect();
        ps.sort_unstable();
        ps.dedup();
        ps
    }

    /// Whether `var` belongs to some minimal cause.
    pub fn is_cause_member(&self, var: &str) -> bool {
        self.causes.iter().any(|c| c.vars.iter().any(|v| v == var))
    }

    /// Principals with ρ = 0 (exonerated at the level of causation).
    pub fn exonerated(&self) -> impl Iterator<Item = &str> {
        self.responsibility
            .iter()
            .filter(|(_, r)| **r == 0.0)
            .map(|(p, _)| p.as_str())
    }

    /// Keeps only the causes accepted by `keep` and recomputes ρ.
    pub fn retain_causes(&mut self, mut keep: impl FnMut(&Cause) -> bool) {
        self.causes.retain(|c| keep(c));
        let causes = std::mem::take(&mut self.causes);
        for r in self.responsibility.values_mut() {
            *r = 0.0;
        }
        for c in &causes {
            for v in &c.vars {
                if let Some(Some(p)) = self.principal_of.get(v) {
                    if let Some(r) = self.responsibility.get_mut(p) {
                        if c.grade > *r {
                            *r = c.grade;
                        }
                    }
                }
            }
        }
        self.causes = causes;
    }
}

/// Attributes the outcome of `model` at its declared values with default options.
pub fn attribute(model: &Model) -> Result<Attribution, AttributeError> {
    attribute_with(model, &[], &AttributeOptions::default())
}

/// Attributes with exogenous values overridden (e.g. one completion of a missing set).
pub fn attribute_with(
    model: &Model,
    overrides: &[(VarId, bool)],
    opts: &AttributeOptions,
) -> Result<Attribution, AttributeError> {
    for &(id, _) in overrides {
        let Some(v) = model.vars.get(id.index()) else {
            return Err(AttributeError::UnknownVar(id.index()));
        };
        if v.value.is_none() {
            return Err(AttributeError::NotExogenous(v.name.clone()));
        }
    }
    let exo = model.exogenous_values(overrides);
    let (work, work_exo) = match (&model.groups.contracted, opts.contract) {
        (Some(c), true) => (c.as_ref(), model.groups.contracted_values(&exo)),
        _ => (model, exo.clone()),
    };
    let lanes = work.eval_lanes(&work_exo, &[], &[]);
    let actual: Vec<bool> = lanes.iter().map(|w| *w & 1 == 1).collect();
    let mut stack = Vec::new();
    let outcome = crate::model::run(&work.outcome_prog, &lanes, &mut stack) & 1 == 1;

    let use_monotone = match opts.path {
        Path::Auto => work.signs.is_some(),
        Path::Monotone => {
            if work.signs.is_none() {
                return Err(AttributeError::NotMonotone);
            }
            true
        }
        Path::General => false,
    };
    let path = if use_monotone {
        Path::Monotone
    } else {
        Path::General
    };

    let mut raw: Vec<(Vec<u32>, Vec<u32>)> = Vec::new();
    if outcome {
        if let (true, Some(signs)) = (use_monotone, &work.signs) {
            let cuts = crate::monotone::minimal_causes(work, signs, &actual, opts.max_causes)
                .map_err(|_| AttributeError::TooManyCauses(opts.max_causes))?;
            raw = cuts.into_iter().map(|x| (x, Vec::new())).collect();
        } else {
            raw = Search::new(work, &work_exo, actual, opts.max_evaluations)
                .run()
                .map_err(|Exhausted| AttributeError::BudgetExhausted(opts.max_evaluations))?;
        }
    }

    let lifted = opts.contract && model.groups.contracted.is_some();
    // Work on variable ids (name order) and convert to names last: sorting id vectors
    // orders the name vectors identically.
    let mut sets: Vec<(Vec<u32>, Vec<u32>, usize)> = Vec::with_capacity(raw.len());
    for (xs, mut ws) in raw {
        let size = xs.len() + ws.len();
        ws.sort_unstable();
        if lifted {
            for set in model.groups.lift(&xs, &exo) {
                sets.push((set, ws.clone(), size));
            }
        } else {
            let mut xs = xs;
            xs.sort_unstable();
            sets.push((xs, ws, size));
        }
        if sets.len() > opts.max_causes {
            return Err(AttributeError::TooManyCauses(opts.max_causes));
        }
    }
    sets.sort_unstable_by(|a, b| {
        a.0.len()
            .cmp(&b.0.len())
            .then_with(|| a.0.cmp(&b.0))
            .then_with(|| a.1.cmp(&b.1))
    });
    sets.dedup_by(|a, b| a.0 == b.0);

    let principal_ix: Vec<Option<usize>> = model
        .vars
        .iter()
        .map(|v| {
            v.principal
                .as_ref()
                .and_then(|p| model.principals.binary_search(p).ok())
        })
        .collect();
    let mut rho = vec![0.0f64; model.principals.len()];
    let names = |ids: &[u32]| -> Vec<String> {
        ids.iter()
            .map(|&i| model.vars[i as usize].name.clone())
            .collect()
    };
    let mut causes = Vec::with_capacity(sets.len());
    for (xs, ws, size) in sets {
        let grade = 1.0 / size as f64;
        for &x in &xs {
            if let Some(p) = principal_ix[x as usize] {
                if grade > rho[p] {
                    rho[p] = grade;
                }
            }
        }
        causes.push(Cause {
            vars: names(&xs),
            witness: names(&ws),
            grade,
        });
    }

    let principal_of: BTreeMap<String, Option<String>> = model
        .vars
        .iter()
        .map(|v| (v.name.clone(), v.principal.clone()))
        .collect();
    let responsibility = model.principals.iter().cloned().zip(rho).collect();
    let att = Attribution {
        outcome,
        causes,
        responsibility,
        path,
        principal_of,
    };
    Ok(att)
}
