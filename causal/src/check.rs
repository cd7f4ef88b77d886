//! Checking one given set: is `X` a cause, with which smallest witness (the query that
//! HP2SAT answers), so the engine can be compared with SAT-based checkers head to head.
//!
//! Design constraints:
//! - The definition is the engine's (SPEC §3): AC1 — the outcome holds and every member
//!   of `X` has its stated value actually; AC2 — setting every member of `X` to the
//!   negation of its stated value, with some `W` frozen at actual values, falsifies the
//!   outcome; AC3 — no nonempty strict subset of `X` satisfies AC2. The three are
//!   decided independently, as HP2SAT reports them: a member stated at a value it does
//!   not have is "set" to its actual value (held), and an outcome that is actually false
//!   is falsified by holding things as they are. `X` may name any variable (the
//!   candidate flag restricts the engine's own search, not a question asked of it).
//! - With every member at its actual value AC3 is decided by one solver query plus
//!   shrinking; with members held at other values, subsets are tried one by one (at
//!   most [`MAX_HELD_SUBSETS`] of them).
//! - AC2 and AC3 are decided exactly on the optimisation path's encoding
//!   ([`crate::optimise`]); a given witness is checked by evaluating the model itself.
//! - The grade of a cause counts same-author conjunctive groups once when contraction
//!   is on (as [`crate::attribute`] does).

use crate::attribution::{AttributeError, AttributeOptions};
use crate::deadline::Deadline;
use crate::model::{Model, VarId};
use crate::optimise::{falsifies, Encoding, Halt, Limits};

/// The answer to one cause check.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CauseCheck {
    /// The outcome holds and every member of `X` has its stated value actually.
    pub ac1: bool,
    /// Some witness lets the flip of `X` falsify the outcome.
    pub ac2: bool,
    /// No nonempty strict subset of `X` satisfies AC2.
    pub ac3: bool,
    /// AC1, AC2 and AC3 together.
    pub is_cause: bool,
    /// A smallest witness (sorted names) when AC2 holds.
    pub witness: Option<Vec<String>>,
    /// Whether the given witness (if one was given) satisfies AC2 for `X`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub given_witness_valid: Option<bool>,
    /// A minimal cause strictly inside `X` when AC3 fails.
    pub smaller_cause: Option<Vec<String>>,
    /// `1/(|X| + |W|)` with the smallest `W` when `X` is a cause.
    pub grade: Option<f64>,
}

/// Checks whether `cause` (variables with their stated values) is a cause of the
/// model's outcome at its declared values, and with which smallest witness; `witness`,
/// if given, is checked as well.
pub fn check_cause(
    model: &Model,
    cause: &[(VarId, bool)],
    witness: Option<&[VarId]>,
    opts: &AttributeOptions,
    deadline: &dyn Deadline,
) -> Result<CauseCheck, AttributeError> {
    let named = cause.iter().map(|(id, _)| id).chain(witness.unwrap_or(&[]));
    for id in named {
        if id.index() >= model.vars.len() {
            return Err(AttributeError::UnknownVar(id.index()));
        }
    }
    let actual = model.evaluate(&[]);
    let mut stack = Vec::new();
    let lanes: Vec<u64> = actual.iter().map(|&b| if b { !0 } else { 0 }).collect();
    let outcome = crate::model::run(&model.outcome_prog, &lanes, &mut stack) & 1 == 1;
    let mut xs: Vec<u32> = cause.iter().map(|(id, _)| id.0).collect();
    xs.sort_unstable();
    xs.dedup();
    let ac1 = outcome && !xs.is_empty() && cause.iter().all(|&(id, v)| actual[id.index()] == v);
    let names = |ids: &[u32]| -> Vec<String> {
        ids.iter()
            .map(|&i| model.vars[i as usize].name.clone())
            .collect()
    };
    let (flip, hold): (Vec<u32>, Vec<u32>) = {
        let stated = |x: u32| {
            cause
                .iter()
                .find(|(id, _)| id.0 == x)
                .is_none_or(|&(_, v)| v)
        };
        let mut flip = Vec::new();
        let mut hold = Vec::new();
        for &x in &xs {
            if stated(x) == actual[x as usize] {
                flip.push(x);
            } else {
                hold.push(x);
            }
        }
        (flip, hold)
    };
    let given_witness_valid = witness.map(|ws| {
        let mut frozen: Vec<u32> = ws.iter().map(|w| w.0).collect();
        frozen.extend_from_slice(&hold);
        frozen.retain(|f| flip.binary_search(f).is_err());
        falsifies(model, &actual, &flip, &frozen)
    });
    let limits = Limits {
        max_causes: 0,
        max_steps: opts.max_solver_steps,
        max_literals: opts.max_memory_bytes / 64,
        deadline,
    };
    let halt = |h: Halt| match h {
        Halt::Deadline => AttributeError::DeadlineExceeded("cause check"),
        Halt::Steps => AttributeError::SolverBudgetExhausted(opts.max_solver_steps),
        Halt::Memory => AttributeError::MemoryBound(opts.max_memory_bytes),
        Halt::Inconsistent => AttributeError::Internal("a solver model failed to replay"),
    };
    let mut enc = Encoding::new(model, &actual, &flip, &[], &limits).map_err(halt)?;
    let w = enc.witness_for(&flip, &hold).map_err(halt)?;
    let smaller = if hold.is_empty() {
        enc.smaller_cause(&flip).map_err(halt)?
    } else {
        // Nonempty strict subsets, smallest first.
        let n = xs.len();
        if n > 20 || (1u64 << n) > MAX_HELD_SUBSETS {
            return Err(AttributeError::CheckTooLarge(n));
        }
        let mut masks: Vec<u64> = (1..(1u64 << n) - 1).collect();
        masks.sort_by_key(|m| (m.count_ones(), *m));
        let mut found = None;
        for m in masks {
            let sub: Vec<u32> = (0..n).filter(|i| m >> i & 1 == 1).map(|i| xs[i]).collect();
            let (f, h): (Vec<u32>, Vec<u32>) =
                sub.iter().partition(|v| flip.binary_search(v).is_ok());
            if enc.ac2(&f, &h).map_err(halt)? {
                found = Some(sub);
                break;
            }
        }
        found
    };
    let ac2 = w.is_some();
    let ac3 = smaller.is_none();
    let is_cause = ac1 && ac2 && ac3;
    let grade = match (&w, is_cause) {
        (Some(ws), true) => {
            let size = if opts.contract {
                contracted_size(model, &xs)
            } else {
                xs.len()
            };
            Some(1.0 / (size + ws.len()) as f64)
        }
        _ => None,
    };
    Ok(CauseCheck {
        ac1,
        ac2,
        ac3,
        is_cause,
        witness: w.as_deref().map(names),
        given_witness_valid,
        smaller_cause: smaller.as_deref().map(names),
        grade,
    })
}

/// Subsets tried one by one when members of `X` are held at values they do not have.
pub const MAX_HELD_SUBSETS: u64 = 1 << 16;

/// `|X|` with the members of one same-author conjunctive group counted once.
fn contracted_size(model: &Model, xs: &[u32]) -> usize {
    let mut keys: Vec<u32> = xs
        .iter()
        .map(|&x| {
            model
                .groups
                .groups
                .iter()
                .find(|g| g.members.contains(&x))
                .map_or(x, |g| g.members[0])
        })
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys.len()
}
