//! The monotone fast path: minimal causes as minimal cut sets.
//!
//! Design constraints:
//! - A variable is *live* when it is a candidate or its equation reads a live variable;
//!   non-live variables keep their actual value under every intervention (a witness
//!   freezes at actual values), so they act as constants.
//! - The model is *monotone* when every live ancestor of the outcome can be given a sign
//!   (±) such that every occurrence of it in a live mechanism (or the outcome) has the
//!   polarity that sign demands. Renaming negative variables then makes every mechanism
//!   positive, and (Lemma 3.8 of the paper) witnesses are vacuous: every minimal cause
//!   has `W = ∅` and grade `1/|X|`. The analysis is structural and done once per model.
//! - Minimal causes are the minimal sets of actually-true (renamed) candidate literals
//!   whose falsification falsifies the outcome: the minimal cut sets of the outcome
//!   DAG. They are computed bottom-up in topological order with memoised antichains
//!   (conjunction: union of the children's cut sets; disjunction: minimised cross
//!   product), so a conjunction of 16 disjunctions of 4 costs 16 small sets, never 4^16
//!   prime implicants.
//! - Memory is bounded: the families held for later reads plus the one being built
//!   never exceed the caller's byte bound (`Stop::Memory`); so is work, in elementary
//!   steps of the family operations (`Stop::Work`), and the caller's deadline is polled
//!   once per variable and every 65,536 steps inside one (`Stop::Deadline`).

use crate::deadline::Deadline;
use crate::family::{Family, TooLarge, Work};
use crate::model::{Model, Node, Signs};

/// Why the cut-set computation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The families outgrew the memory bound.
    Memory,
    /// The families took more than their work budget to build.
    Work,
    /// The caller's deadline passed.
    Deadline,
}

impl From<TooLarge> for Stop {
    fn from(t: TooLarge) -> Stop {
        match t {
            TooLarge::Bytes => Stop::Memory,
            TooLarge::Work => Stop::Work,
            TooLarge::Deadline => Stop::Deadline,
        }
    }
}

fn constrain(node: &Node, pol: i8, live: &[bool], sign: &mut [i8]) -> bool {
    match node {
        Node::Const(_) => true,
        Node::Var(u) => {
            let u = *u as usize;
            if !live[u] {
                return true;
            }
            if sign[u] == 0 {
                sign[u] = pol;
                true
            } else {
                sign[u] == pol
            }
        }
        Node::Not(e) => constrain(e, -pol, live, sign),
        Node::And(es) | Node::Or(es) => es.iter().all(|e| constrain(e, pol, live, sign)),
    }
}

/// Decides monotonicity (after sign renaming); `None` when some live variable is used
/// with both polarities.
pub(crate) fn analyse(model: &Model) -> Option<Signs> {
    let n = model.vars.len();
    let mut live = vec![false; n];
    for &v in &model.order {
        let var = &model.vars[v as usize];
        let mut l = var.candidate;
        if let Some(eq) = &var.eq {
            eq.for_each_var(&mut |u| l |= live[u as usize]);
        }
        live[v as usize] = l;
    }
    let mut sign = vec![0i8; n];
    if !constrain(&model.outcome, 1, &live, &mut sign) {
        return None;
    }
    for &v in model.order.iter().rev() {
        let v = v as usize;
        if !live[v] || sign[v] == 0 {
            continue;
        }
        if let Some(eq) = &model.vars[v].eq {
            if !constrain(eq, sign[v], &live, &mut sign) {
                return None;
            }
        }
    }
    Some(Signs { sign, live })
}

/// Minimal causes of a monotone model (as variable indices; witnesses are empty).
/// `actual` holds the actual value of every variable; the outcome must be true.
pub(crate) fn minimal_causes(
    model: &Model,
    signs: &Signs,
    actual: &[bool],
    max_bytes: u64,
    max_work: u64,
    deadline: &dyn Deadline,
) -> Result<Vec<Vec<u32>>, Stop> {
    let n = model.vars.len();
    let mut work = Work::new(max_work, deadline);
    // Bit positions for the candidates whose renamed literal is actually true.
    let mut bit_of = vec![usize::MAX; n];
    let mut var_of_bit = Vec::new();
    for v in 0..n {
        if model.vars[v].candidate && signs.sign[v] != 0 && lit(actual[v], signs.sign[v]) {
            bit_of[v] = var_of_bit.len();
            var_of_bit.push(v as u32);
        }
    }
    let max_bytes = usize::try_from(max_bytes).unwrap_or(usize::MAX);
    let mut held = 0usize;
    let mut fam: Vec<Option<Family>> = vec![None; n];
    // Remaining reads of each variable's family: the last read moves it (a chain of
    // relays costs linear, not quadratic, time and memory).
    let mut uses = vec![0u32; n];
    model.outcome.for_each_var(&mut |u| uses[u as usize] += 1);
    for (v, var) in model.vars.iter().enumerate() {
        if signs.sign[v] != 0 && lit(actual[v], signs.sign[v]) {
            if let Some(eq) = &var.eq {
                eq.for_each_var(&mut |u| uses[u as usize] += 1);
            }
        }
    }
    for &v in &model.order {
        let v = v as usize;
        if signs.sign[v] == 0 {
            continue;
        }
        if deadline.expired() {
            return Err(Stop::Deadline);
        }
        let f = if !lit(actual[v], signs.sign[v]) {
            Family::unit()
        } else {
            let base = match &model.vars[v].eq {
                Some(eq) => {
                    let mut ctx = Ctx {
                        signs,
                        actual,
                        fam: &mut fam,
                        uses: &mut uses,
                        held: &mut held,
                        max_bytes,
                        work: &mut work,
                    };
                    ctx.cuts(eq, signs.sign[v])?
                }
                None => Family::none(),
            };
            if bit_of[v] != usize::MAX {
                base.union_min(
                    &Family::singleton(bit_of[v]),
                    max_bytes.saturating_sub(held),
                    &mut work,
                )?
            } else {
                base
            }
        };
        if uses[v] > 0 {
            held += f.bytes();
            if held > max_bytes {
                return Err(Stop::Memory);
            }
            fam[v] = Some(f);
        }
    }
    let mut ctx = Ctx {
        signs,
        actual,
        fam: &mut fam,
        uses: &mut uses,
        held: &mut held,
        max_bytes,
        work: &mut work,
    };
    let top = ctx.cuts(&model.outcome, 1)?;
    Ok(top
        .sets()
        .map(|bits| bits.into_iter().map(|b| var_of_bit[b]).collect())
        .collect())
}

fn lit(value: bool, sign: i8) -> bool {
    value == (sign > 0)
}

struct Ctx<'a, 'd> {
    signs: &'a Signs,
    actual: &'a [bool],
    fam: &'a mut [Option<Family>],
    uses: &'a mut [u32],
    /// Bytes of the families held in `fam`.
    held: &'a mut usize,
    max_bytes: usize,
    work: &'a mut Work<'d>,
}

impl Ctx<'_, '_> {
    fn constant(&self, b: bool, pol: i8) -> Family {
        if lit(b, pol) {
            Family::none()
        } else {
            Family::unit()
        }
    }

    /// Bytes a family under construction may take.
    fn room(&self) -> usize {
        self.max_bytes.saturating_sub(*self.held)
    }

    /// Minimal candidate sets whose falsification makes the literal `(node, pol)` false.
    fn cuts(&mut self, node: &Node, pol: i8) -> Result<Family, TooLarge> {
        Ok(match node {
            Node::Const(b) => self.constant(*b, pol),
            Node::Var(u) => {
                let u = *u as usize;
                if !self.signs.live[u] || self.fam[u].is_none() {
                    return Ok(self.constant(self.actual[u], pol));
                }
                self.uses[u] = self.uses[u].saturating_sub(1);
                let f = if self.uses[u] == 0 {
                    let f = self.fam[u].take();
                    *self.held -= f.as_ref().map_or(0, Family::bytes);
                    f
                } else {
                    self.fam[u].clone()
                };
                f.unwrap_or_else(Family::none)
            }
            Node::Not(e) => self.cuts(e, -pol)?,
            Node::And(es) | Node::Or(es) => {
                let union = matches!(node, Node::And(_)) == (pol > 0);
                let mut acc = if union {
                    Family::none()
                } else {
                    Family::unit()
                };
                for e in es {
                    let f = self.cuts(e, pol)?;
                    let room = self.room().saturating_sub(f.bytes());
                    acc = if union {
                        acc.union_min(&f, room, self.work)?
                    } else {
                        if f.len() == 0 {
                            return Ok(Family::none());
                        }
                        acc.cross_min(&f, room, self.work)?
                    };
                    if union && acc.is_unit() {
                        break;
                    }
                }
                acc
            }
        })
    }
}
