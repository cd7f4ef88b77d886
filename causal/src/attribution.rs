//! Attribution: minimal causes with their smallest witnesses, grades and ρ.
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
//! - **Paths, all exact, all giving the same ρ.** Monotone models take the cut-set fast
//!   path ([`crate::monotone`]). Other models take the general search
//!   ([`crate::general`]) within [`AttributeOptions::probe_work`] (model evaluations ×
//!   variables: about what the optimisation path costs, measured in BENCHMARKS.md).
//!   Beyond it, and for a monotone model whose cut-set families exceed the memory bound
//!   (16 MiB, or past 16 × `max_causes` sets, when the model decomposes), a model with a module
//!   below the outcome takes the modular path (`crate::modular`: one exactly solved
//!   local model per module, composed along the module tree), any other model the
//!   optimisation path ([`crate::optimise`], CaDiCaL). [`Path`] forces one path.
//! - **Causes on demand.** At most [`AttributeOptions::max_causes`] causes are listed
//!   (the cheapest first; on the modular path the cheapest one); each principal's best
//!   cause is always listed, so ρ computed from the list is exact. A shortened list has
//!   `causes_complete: false` (the modular path says complete only when it has counted
//!   every cause).
//! - **Bounded.** Every query has a deadline ([`Deadline`], supplied by the caller: the
//!   engine has no clock), an evaluation budget, a solver step budget and a memory
//!   bound; hitting one is an [`AttributeError`] naming the bound, never an approximate
//!   answer. Budgets are counted in deterministic units, so an answer that finishes is
//!   the same on every run.
//! - Output is deterministic: variables inside a cause and witness are sorted by name,
//!   causes by (size, names); floating-point grades are exact reciprocals.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::deadline::{Deadline, NoDeadline};
use crate::general::{Search, Stop};
use crate::model::{Model, VarId};

/// Which search produced an attribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Path {
    /// Monotone path if the model is monotone (while its cut sets fit the memory
    /// bound); otherwise the general search within its probe budget; then the modular
    /// path if the model has a module below the outcome, else the optimisation path.
    #[default]
    Auto,
    /// Minimal cut sets (witnesses are empty).
    Monotone,
    /// Exact search over cause and witness sets.
    General,
    /// Minimal causes in order of grade on a SAT solver.
    Optimisation,
    /// Decomposition along the model's modules (variables whose ancestors are read
    /// only through them), each local model solved exactly and the answers composed:
    /// each principal's best cause, or every cause when few.
    Modular,
}

/// Knobs of an attribution query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttributeOptions {
    /// Contract same-author conjunctive groups before grading (default true).
    pub contract: bool,
    /// Which search to run (default [`Path::Auto`]).
    pub path: Path,
    /// Most minimal causes listed (default 10,000); beyond it the list is shortened to
    /// the cheapest causes plus each principal's best, and ρ stays exact.
    pub max_causes: usize,
    /// Causes the optimisation path lists in order of grade before it only looks for
    /// the best cause of each principal not yet resolved (default 64).
    pub max_solver_causes: usize,
    /// Model evaluations of the general path when it is forced (default 5·10^7).
    pub max_evaluations: u64,
    /// Work the automatic choice grants the general search before the optimisation path
    /// takes over, in model evaluations × variables (default 300,000: about a
    /// millisecond, the optimisation path's cost on models of 40–200 variables).
    pub probe_work: u64,
    /// Solver steps (termination polls, about ten propagation rounds each) of the
    /// optimisation path (default 5·10^6).
    pub max_solver_steps: u64,
    /// Memory bound in bytes for cut-set families and the solver encoding
    /// (default 1 GiB).
    pub max_memory_bytes: u64,
}

impl Default for AttributeOptions {
    fn default() -> Self {
        AttributeOptions {
            contract: true,
            path: Path::Auto,
            max_causes: 10_000,
            max_solver_causes: 64,
            max_evaluations: 50_000_000,
            probe_work: 300_000,
            max_solver_steps: 5_000_000,
            max_memory_bytes: 1 << 30,
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
    /// The query needed more memory than [`AttributeOptions::max_memory_bytes`].
    #[error("memory bound of {0} bytes reached (raise max_memory_bytes, `--max-memory-mb` on the command line, or split the slice)")]
    MemoryBound(u64),
    /// The general search exceeded [`AttributeOptions::max_evaluations`].
    #[error("exact search exceeded {0} model evaluations (raise max_evaluations, `--max-evaluations` on the command line, or let the engine choose the path)")]
    BudgetExhausted(u64),
    /// The optimisation path exceeded [`AttributeOptions::max_solver_steps`].
    #[error("optimisation path exceeded {0} solver steps (raise max_solver_steps, `--max-solver-steps` on the command line)")]
    SolverBudgetExhausted(u64),
    /// The caller's [`Deadline`] expired.
    #[error("deadline passed during the {0} (give the query more time, `--timeout-ms` on the command line)")]
    DeadlineExceeded(&'static str),
    /// [`Path::Monotone`] was forced on a non-monotone model.
    #[error("the model is not monotone in its candidates")]
    NotMonotone,
    /// A cause check holds members at values they do not have and has too many members
    /// to try every subset.
    #[error("--check with {0} members, some stated at values they do not have: at most 16 such members are supported")]
    CheckTooLarge(usize),
    /// An internal consistency check failed (a bug; nothing is reported).
    #[error("internal check failed: {0}")]
    Internal(&'static str),
}

impl AttributeError {
    /// Whether giving the query more resources (time, budget, memory) can help.
    pub fn is_bound(&self) -> bool {
        matches!(
            self,
            AttributeError::MemoryBound(_)
                | AttributeError::BudgetExhausted(_)
                | AttributeError::SolverBudgetExhausted(_)
                | AttributeError::DeadlineExceeded(_)
        )
    }
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
    /// Minimal causes with their smallest witnesses: every one of them, or (when
    /// `causes_complete` is false) the cheapest ones and each principal's best.
    pub causes: Vec<Cause>,
    /// Whether `causes` lists every minimal cause (serialised only when false).
    #[serde(skip_serializing_if = "is_true")]
    pub causes_complete: bool,
    /// ρ per non-null principal (exact whether or not the list is complete).
    pub responsibility: BTreeMap<String, f64>,
    /// The path that produced it.
    #[serde(skip)]
    pub path: Path,
    #[serde(skip)]
    principal_of: BTreeMap<String, Option<String>>,
}

fn is_true(b: &bool) -> bool {
    *b
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

    /// Keeps only the causes accepted by `keep` and recomputes ρ from the causes kept.
    /// With a shortened list (`causes_complete` false) a principal whose listed best
    /// cause is dropped falls to its best remaining listed cause: a lower bound of the
    /// exact value over the kept causes, never a higher one.
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
    attribute_until(model, overrides, opts, &NoDeadline)
}

/// Attributes with overrides, stopping with [`AttributeError::DeadlineExceeded`] when
/// `deadline` expires (polled every few thousand model evaluations or solver steps).
pub fn attribute_until(
    model: &Model,
    overrides: &[(VarId, bool)],
    opts: &AttributeOptions,
    deadline: &dyn Deadline,
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

    let monotone = match opts.path {
        Path::Auto => work.signs.is_some(),
        Path::Monotone => {
            if work.signs.is_none() {
                return Err(AttributeError::NotMonotone);
            }
            true
        }
        Path::General | Path::Optimisation | Path::Modular => false,
    };
    let mut path = if monotone {
        Path::Monotone
    } else if matches!(opts.path, Path::Optimisation | Path::Modular) {
        opts.path
    } else {
        Path::General
    };
    let mut raw: RawCauses = Vec::new();
    let mut complete = true;
    if outcome {
        let view = Work {
            model: work,
            exo: &work_exo,
            actual: &actual,
            opts,
            deadline,
        };
        match view.cheap_causes(monotone, path)? {
            Some(found) => raw = found,
            None => match view.modular_causes()? {
                Some(answer) => {
                    path = Path::Modular;
                    raw = answer.causes;
                    complete = answer.complete;
                }
                None => {
                    path = Path::Optimisation;
                    let listing = view.optimised_causes()?;
                    raw = listing.causes;
                    complete = listing.complete;
                }
            },
        }
    }

    let lifted = opts.contract && model.groups.contracted.is_some();
    let (mut sets, all_lifted) = lift_causes(model, raw, &exo, lifted, opts.max_causes);
    complete &= all_lifted;
    let principal_ix = model.principal_index();
    if sets.len() > opts.max_causes {
        let before = sets.len();
        sets = shorten(sets, opts.max_causes, &principal_ix, model.principals.len());
        complete &= sets.len() == before;
    }
    sets.sort_unstable_by(|a, b| {
        a.0.len()
            .cmp(&b.0.len())
            .then_with(|| a.0.cmp(&b.0))
            .then_with(|| a.1.cmp(&b.1))
    });
    sets.dedup_by(|a, b| a.0 == b.0);

    let (causes, rho) = grade(model, sets, &principal_ix);

    let principal_of: BTreeMap<String, Option<String>> = model
        .vars
        .iter()
        .map(|v| (v.name.clone(), v.principal.clone()))
        .collect();
    let responsibility = model.principals.iter().cloned().zip(rho).collect();
    Ok(Attribution {
        outcome,
        causes,
        causes_complete: complete,
        responsibility,
        path,
        principal_of,
    })
}

/// The causes `sets` named and graded `1/(|X|+|W|)`, and ρ per principal (index
/// into the model's principals): the best grade of a cause holding one of its
/// variables.
fn grade(
    model: &Model,
    sets: SizedCauses,
    principal_ix: &[Option<usize>],
) -> (Vec<Cause>, Vec<f64>) {
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
    (causes, rho)
}

/// Minimal causes as variable ids: `(X, W)`, one smallest witness each.
type RawCauses = Vec<(Vec<u32>, Vec<u32>)>;

/// Causes as variable ids with their size: `(X, W, |X|+|W|)`.
type SizedCauses = Vec<(Vec<u32>, Vec<u32>, usize)>;

/// The model the causes are listed on (the contraction, when contracting) at its
/// exogenous values and actual values, with the query's options and deadline.
struct Work<'a> {
    model: &'a Model,
    exo: &'a [bool],
    actual: &'a [bool],
    opts: &'a AttributeOptions,
    deadline: &'a dyn Deadline,
}

impl Work<'_> {
    /// Minimal causes `(X, W)` on a cheap exact path: the cut sets of a monotone
    /// model, or the exact search on `path` General (within the probe budget unless
    /// forced). `None` sends the listing to the optimisation path: it was asked for,
    /// or a cheap path that was not forced outgrew its bounds.
    fn cheap_causes(
        &self,
        monotone: bool,
        path: Path,
    ) -> Result<Option<RawCauses>, AttributeError> {
        let (work, opts) = (self.model, self.opts);
        if let (true, Some(signs)) = (monotone, &work.signs) {
            // When the model decomposes, the modular path is the fallback: a cut-set
            // family past a small bound, or hundreds of thousands of cut sets (which
            // cost more to sort and shorten than the modular path costs whole), go there.
            let decomposes = opts.path == Path::Auto && crate::modular::decomposes(work);
            let bound = if decomposes {
                opts.max_memory_bytes.min(CUT_SETS_BEFORE_MODULAR)
            } else {
                opts.max_memory_bytes
            };
            return match crate::monotone::minimal_causes(
                work,
                signs,
                self.actual,
                bound,
                opts.max_evaluations
                    .saturating_mul(CUT_SET_STEPS_PER_EVALUATION),
                self.deadline,
            ) {
                Ok(cuts) if decomposes && cuts.len() / MONOTONE_LIST_FACTOR > opts.max_causes => {
                    Ok(None)
                }
                Ok(cuts) => Ok(Some(cuts.into_iter().map(|x| (x, Vec::new())).collect())),
                Err(crate::monotone::Stop::Deadline) => {
                    Err(AttributeError::DeadlineExceeded("cut-set computation"))
                }
                Err(crate::monotone::Stop::Memory) if opts.path == Path::Monotone => {
                    Err(AttributeError::MemoryBound(opts.max_memory_bytes))
                }
                Err(crate::monotone::Stop::Work) if opts.path == Path::Monotone => {
                    Err(AttributeError::BudgetExhausted(opts.max_evaluations))
                }
                Err(crate::monotone::Stop::Memory | crate::monotone::Stop::Work) => Ok(None),
            };
        }
        if path != Path::General {
            return Ok((!matches!(path, Path::Optimisation | Path::Modular)).then(Vec::new));
        }
        let forced = opts.path == Path::General;
        let budget = if forced {
            opts.max_evaluations
        } else {
            let per_eval = work.vars.len().max(1) as u64;
            opts.max_evaluations.min(opts.probe_work / per_eval)
        };
        let cap = if forced { usize::MAX } else { opts.max_causes };
        let search = Search::new(
            work,
            self.exo,
            self.actual.to_vec(),
            budget,
            cap,
            self.deadline,
        );
        match search.run() {
            Ok(found) => Ok(Some(found)),
            Err(Stop::Deadline) => Err(AttributeError::DeadlineExceeded("exact search")),
            Err(Stop::Budget) if forced => {
                Err(AttributeError::BudgetExhausted(opts.max_evaluations))
            }
            Err(Stop::Budget | Stop::TooMany) => Ok(None),
        }
    }

    /// Each principal's best cause (or every cause) on the modular path; `None` when
    /// the optimisation path is forced, or the model has no module below the outcome
    /// and the modular path is not forced.
    fn modular_causes(&self) -> Result<Option<crate::modular::Answer>, AttributeError> {
        let opts = self.opts;
        if opts.path == Path::Optimisation {
            return Ok(None);
        }
        let bounds = crate::modular::Bounds {
            max_causes: opts.max_causes,
            max_solver_causes: opts.max_solver_causes.min(opts.max_causes),
            probe_work: opts.probe_work,
            max_evaluations: opts.max_evaluations,
            cut_set_work: opts
                .max_evaluations
                .saturating_mul(CUT_SET_STEPS_PER_EVALUATION)
                / 8,
            max_steps: opts.max_solver_steps,
            max_memory_bytes: opts.max_memory_bytes,
            literal_bytes: LITERAL_BYTES,
            deadline: self.deadline,
        };
        let force = opts.path == Path::Modular;
        crate::modular::attribute(self.model, self.actual, &bounds, force).map_err(|s| match s {
            crate::modular::Stop::Deadline => AttributeError::DeadlineExceeded("modular path"),
            crate::modular::Stop::Steps => {
                AttributeError::SolverBudgetExhausted(opts.max_solver_steps)
            }
            crate::modular::Stop::Memory => AttributeError::MemoryBound(opts.max_memory_bytes),
            crate::modular::Stop::Inconsistent => {
                AttributeError::Internal("a composed cause failed to replay on the model")
            }
        })
    }

    /// Minimal causes in order of grade on the optimisation path, within the
    /// solver's cause, step and memory bounds.
    fn optimised_causes(&self) -> Result<crate::optimise::Listing, AttributeError> {
        let opts = self.opts;
        let limits = crate::optimise::Limits {
            max_causes: opts.max_solver_causes.min(opts.max_causes),
            max_steps: opts.max_solver_steps,
            max_literals: opts.max_memory_bytes / LITERAL_BYTES,
            deadline: self.deadline,
        };
        let key = self.model.principal_index();
        let keys = crate::optimise::Keys {
            key: &key,
            count: self.model.principals.len(),
            weight: &[],
        };
        crate::optimise::list(self.model, self.actual, &keys, &limits).map_err(|h| match h {
            crate::optimise::Halt::Deadline => {
                AttributeError::DeadlineExceeded("optimisation path")
            }
            crate::optimise::Halt::Steps => {
                AttributeError::SolverBudgetExhausted(opts.max_solver_steps)
            }
            crate::optimise::Halt::Memory => AttributeError::MemoryBound(opts.max_memory_bytes),
            crate::optimise::Halt::Inconsistent => {
                AttributeError::Internal("a solver model failed to replay on the model")
            }
        })
    }
}

/// The causes `raw` as `(X, W, |X|+|W|)` on the model's variables (ids sorted),
/// lifted from the contraction when `lifted`, and whether every lifted alternative
/// is listed. Past `max_causes` one lifted alternative per cause suffices: all of
/// them hold the same principals at the same grade.
fn lift_causes(
    model: &Model,
    raw: RawCauses,
    exo: &[bool],
    lifted: bool,
    max_causes: usize,
) -> (SizedCauses, bool) {
    let mut complete = true;
    // Work on variable ids (name order) and convert to names last: sorting id vectors
    // orders the name vectors identically.
    let mut sets: Vec<(Vec<u32>, Vec<u32>, usize)> = Vec::with_capacity(raw.len());
    for (xs, mut ws) in raw {
        let size = xs.len() + ws.len();
        ws.sort_unstable();
        if lifted {
            // Past the listing bound one lifted alternative suffices: all of them hold
            // the same principals at the same grade.
            let room = max_causes.saturating_sub(sets.len()).max(1);
            let (alts, more) = model.groups.lift(&xs, exo, room);
            complete &= !more;
            for set in alts {
                sets.push((set, ws.clone(), size));
            }
        } else {
            let mut xs = xs;
            xs.sort_unstable();
            sets.push((xs, ws, size));
        }
    }
    (sets, complete)
}

/// Past `MONOTONE_LIST_FACTOR × max_causes` cut sets the automatic choice prefers the
/// modular path on a model that decomposes (measured: 458k cut sets of binary_tree_5
/// cost 0.32 s to sort and shorten, its modular path 0.2 ms).
const MONOTONE_LIST_FACTOR: usize = 16;

/// Memory the automatic choice grants the cut-set families of a model that decomposes
/// before it takes the modular path (measured: a depth-12 binary tree fills 1 GiB in
/// 0.45 s, 64 MiB in 26 ms and 16 MiB in 1 ms; binary_tree_5's 458k cut sets fit in
/// 16 MiB).
const CUT_SETS_BEFORE_MODULAR: u64 = 16 << 20;

/// Elementary steps of the cut-set families (words merged, subset tests) granted per
/// model evaluation of [`AttributeOptions::max_evaluations`]: the default grants
/// 2·10^8 steps, about half a second (HP2SAT's monotone models need at most 1.4·10^6;
/// a 1,000-node DAG of shared disjunctions ran two minutes past a 20 s deadline inside
/// one family before the bound).
pub(crate) const CUT_SET_STEPS_PER_EVALUATION: u64 = 4;

/// Bytes of solver memory counted per encoded literal (clause storage, watches and
/// occurrence lists, measured on CaDiCaL with a margin).
const LITERAL_BYTES: u64 = 64;

/// The `keep` cheapest causes (by cost, then size and names) plus the cheapest cause of
/// every principal that none of those holds.
fn shorten(
    mut sets: Vec<(Vec<u32>, Vec<u32>, usize)>,
    keep: usize,
    principal_ix: &[Option<usize>],
    principals: usize,
) -> Vec<(Vec<u32>, Vec<u32>, usize)> {
    sets.sort_unstable_by(|a, b| {
        a.2.cmp(&b.2)
            .then_with(|| a.0.len().cmp(&b.0.len()))
            .then_with(|| a.0.cmp(&b.0))
            .then_with(|| a.1.cmp(&b.1))
    });
    let mut held = vec![false; principals];
    let mut out = Vec::with_capacity(keep + principals);
    for (i, set) in sets.into_iter().enumerate() {
        let new_principal = set
            .0
            .iter()
            .any(|&x| principal_ix[x as usize].is_some_and(|p| !held[p]));
        if i < keep || new_principal {
            for &x in &set.0 {
                if let Some(p) = principal_ix[x as usize] {
                    held[p] = true;
                }
            }
            out.push(set);
        }
    }
    out
}
