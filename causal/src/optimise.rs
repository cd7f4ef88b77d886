//! The optimisation path: minimal causes in order of grade on an incremental SAT solver
//! (CaDiCaL), so ρ per principal is exact without enumerating every minimal cause.
//!
//! `ρ_p = 1 / min { |X| + |W| : X a minimal cause holding a variable of p, W a smallest
//! witness of X }` is an optimisation problem (Ibrahim & Pretschner, "From Checking to
//! Inference: Actual Causality Computations as Optimization Problems", ATVA 2020). This
//! module answers it with one solver instance per query.
//!
//! Design constraints:
//! - **Encoding.** One counterfactual copy of the model's circuit (Tseitin, constants
//!   folded). Each relevant candidate `v` has a selector `x_v` (flip it: `v' = ¬v*`),
//!   each endogenous variable whose counterfactual value can move has a selector `w_v`
//!   (freeze it: `v' = v*`); otherwise `v' = f_v(parents')`. The outcome is asserted
//!   false. A model of the formula is exactly a pair `(X, W)` satisfying AC2; the cost
//!   `|X| + |W|` is bounded by a totalizer over the selectors (assumption `cost ≤ k`).
//! - **Minimality (AC3), exactly.** A candidate `X` is checked by one call: some
//!   nonempty `X' ⊊ X` with some `W'` falsifying the outcome (selectors outside `X`
//!   assumed off, "not all of `X`" activated). If one exists, `X` is shrunk to a minimal
//!   cause `M` by repeating the call, and every strict superset of `M` is blocked.
//! - **Order.** A core-guided search (`Oll`, the OLL algorithm of Andres et al. 2012
//!   as implemented in RC2) returns a cheapest unblocked `(X, W)`: each unsatisfiable
//!   core of the assumptions "no selector on" raises a proven lower bound and is relaxed
//!   by a totalizer over the core, so a cost of `n` proven by `n` disjoint reasons costs
//!   `n` cheap calls, not `n` cardinality refutations (the linear search `cost ≤ k` it
//!   replaces needed minutes on a preemption chain of 50). The state stays valid while
//!   clauses are only added and the assumed context only strengthens. When `X` is
//!   minimal it is the next cause in order of cost (a cheaper unblocked minimal cause
//!   would contradict optimality; blocking only removes non-minimal sets), its `W` is a
//!   smallest witness, and it is blocked with all its supersets. So the first cause
//!   listed that holds a variable of `p` gives `ρ_p` exactly. The cost of every answer
//!   is recomputed from the solver's model and must equal the proven bound.
//! - **Causes on demand.** At most `max_causes` causes are listed in order of cost; then
//!   the search is restricted to causes holding a variable of a key (a principal, or
//!   any label the caller gives variables) not yet resolved, which resolves each
//!   remaining key exactly. The list is complete iff
//!   the solver proves no unblocked AC2 set remains.
//! - **Bounds.** Solver work is counted in termination polls (deterministic for a given
//!   input); the caller's [`Deadline`] is polled at the same points; the encoding's
//!   literals are bounded. Hitting a bound is a [`Halt`], never a guess.
//! - Every reported `(X, W)` is re-evaluated on the model itself before it is returned.

use crate::deadline::Deadline;
use crate::model::{Model, Node};

/// Why the optimisation path stopped without an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Halt {
    /// The caller's deadline passed.
    Deadline,
    /// The solver used its step budget.
    Steps,
    /// The encoding grew beyond its literal budget.
    Memory,
    /// A solver model failed to replay on the model (an internal fault; never reported
    /// as a cause).
    Inconsistent,
}

/// Limits of one optimisation query.
#[derive(Clone, Copy)]
pub(crate) struct Limits<'d> {
    pub max_causes: usize,
    pub max_steps: u64,
    pub max_literals: u64,
    pub deadline: &'d dyn Deadline,
}

/// The solver's termination hook: counts polls against the step budget and polls the
/// caller's deadline.
struct Poll<'d> {
    deadline: &'d dyn Deadline,
    steps: u64,
    budget: u64,
    halt: Option<Halt>,
}

impl cadical::Callbacks for Poll<'_> {
    fn terminate(&mut self) -> bool {
        self.steps += 1;
        if self.steps > self.budget {
            self.halt = Some(Halt::Steps);
            return true;
        }
        if self.deadline.expired() {
            self.halt = Some(Halt::Deadline);
            return true;
        }
        false
    }
}

/// A literal or a folded constant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum L {
    C(bool),
    V(i32),
}

impl std::ops::Not for L {
    type Output = L;
    fn not(self) -> L {
        match self {
            L::C(b) => L::C(!b),
            L::V(v) => L::V(-v),
        }
    }
}

struct Sat<'d> {
    s: cadical::Solver<Poll<'d>>,
    next: i32,
    literals: u64,
    max_literals: u64,
    deadline: &'d dyn Deadline,
}

impl<'d> Sat<'d> {
    fn new(limits: &Limits<'d>) -> Self {
        let mut s = cadical::Solver::new();
        s.set_callbacks(Some(Poll {
            deadline: limits.deadline,
            steps: 0,
            budget: limits.max_steps,
            halt: None,
        }));
        Sat {
            s,
            next: 0,
            literals: 0,
            max_literals: limits.max_literals,
            deadline: limits.deadline,
        }
    }

    fn var(&mut self) -> i32 {
        self.next += 1;
        self.next
    }

    fn clause(&mut self, c: &[i32]) -> Result<(), Halt> {
        self.literals += c.len() as u64;
        if self.literals > self.max_literals {
            return Err(Halt::Memory);
        }
        self.s.add_clause(c.iter().copied());
        Ok(())
    }

    fn solve(&mut self, assume: &[i32]) -> Result<bool, Halt> {
        if self.deadline.expired() {
            return Err(Halt::Deadline);
        }
        match self.s.solve_with(assume.iter().copied()) {
            Some(b) => Ok(b),
            None => Err(self
                .s
                .get_callbacks()
                .and_then(|p| p.halt)
                .unwrap_or(Halt::Steps)),
        }
    }

    fn val(&self, lit: i32) -> bool {
        self.s.value(lit) == Some(true)
    }

    fn and(&mut self, ops: &[L]) -> Result<L, Halt> {
        let mut vs = Vec::with_capacity(ops.len());
        for &o in ops {
            match o {
                L::C(false) => return Ok(L::C(false)),
                L::C(true) => {}
                L::V(v) => vs.push(v),
            }
        }
        vs.sort_unstable();
        vs.dedup();
        if has_complement(&vs) {
            return Ok(L::C(false));
        }
        match vs.len() {
            0 => Ok(L::C(true)),
            1 => Ok(L::V(vs[0])),
            _ => {
                let g = self.var();
                let mut long = Vec::with_capacity(vs.len() + 1);
                long.push(g);
                for &v in &vs {
                    self.clause(&[-g, v])?;
                    long.push(-v);
                }
                self.clause(&long)?;
                Ok(L::V(g))
            }
        }
    }

    fn or(&mut self, ops: &[L]) -> Result<L, Halt> {
        let neg: Vec<L> = ops.iter().map(|&o| !o).collect();
        Ok(!self.and(&neg)?)
    }

    fn tseitin(&mut self, node: &Node, cf: &[L]) -> Result<L, Halt> {
        Ok(match node {
            Node::Const(b) => L::C(*b),
            Node::Var(u) => cf[*u as usize],
            Node::Not(e) => !self.tseitin(e, cf)?,
            Node::And(es) | Node::Or(es) => {
                let mut ops = Vec::with_capacity(es.len());
                for e in es {
                    ops.push(self.tseitin(e, cf)?);
                }
                if matches!(node, Node::And(_)) {
                    self.and(&ops)?
                } else {
                    self.or(&ops)?
                }
            }
        })
    }
}

fn has_complement(sorted: &[i32]) -> bool {
    sorted
        .iter()
        .any(|&v| v < 0 && sorted.binary_search(&-v).is_ok())
}

fn totalize(sat: &mut Sat<'_>, lits: &[i32], cap: usize) -> Result<Vec<i32>, Halt> {
    if lits.len() == 1 {
        return Ok(vec![lits[0]]);
    }
    let (a, b) = lits.split_at(lits.len() / 2);
    let a = totalize(sat, a, cap)?;
    let b = totalize(sat, b, cap)?;
    let n = (a.len() + b.len()).min(cap);
    let r: Vec<i32> = (0..n).map(|_| sat.var()).collect();
    for i in 0..=a.len() {
        for j in 0..=b.len() {
            if i + j == 0 {
                continue;
            }
            let s = (i + j).min(n);
            let mut c = Vec::with_capacity(3);
            if i > 0 {
                c.push(-a[i - 1]);
            }
            if j > 0 {
                c.push(-b[j - 1]);
            }
            c.push(r[s - 1]);
            sat.clause(&c)?;
        }
    }
    Ok(r)
}

/// One relaxed core of the core-guided search: a totalizer over its literals, built up
/// to `out.len()` outputs (`out[j]`: at least `j + 1` of `inputs` are true).
struct Sum {
    inputs: Vec<i32>,
    out: Vec<i32>,
}

impl Sum {
    /// Output `j` (at least `j + 1` inputs true), extending the totalizer if needed.
    /// Outputs of different extensions are each implied by the count of the inputs,
    /// which is all the search relies on.
    fn output(&mut self, sat: &mut Sat<'_>, j: usize) -> Result<i32, Halt> {
        if j >= self.out.len() {
            let cap = (self.out.len() * 2)
                .max(j + 1)
                .max(4)
                .min(self.inputs.len());
            let fresh = totalize(sat, &self.inputs, cap)?;
            self.out.extend_from_slice(&fresh[self.out.len()..]);
        }
        Ok(self.out[j])
    }
}

/// Core-guided minimisation of `Σ weight · [lit]` over a solver's models (OLL, as in
/// RC2): the assumptions say every soft literal is false; an unsatisfiable core raises
/// the lower bound by its least weight and is relaxed by a totalizer whose next output
/// becomes a soft literal of that weight. Satisfiable under all soft assumptions means
/// the model's cost equals the bound, which is then the optimum.
///
/// Valid while clauses are only added and every `context` passed to
/// [`Oll::minimize`] implies the earlier ones (cores stay cores of the stronger
/// formula).
struct Oll {
    /// Soft literals (cost when true) with their remaining weights.
    softs: Vec<(i32, u64)>,
    /// The soft index of a literal.
    index: std::collections::BTreeMap<i32, usize>,
    /// For a soft literal that is output `j` of a sum: (sum, j).
    sum_of: std::collections::BTreeMap<i32, (usize, usize)>,
    sums: Vec<Sum>,
    /// Proven lower bound of the cost.
    lb: u64,
}

impl Oll {
    fn new(softs: &[(i32, u64)]) -> Oll {
        let mut oll = Oll {
            softs: Vec::with_capacity(softs.len()),
            index: Default::default(),
            sum_of: Default::default(),
            sums: Vec::new(),
            lb: 0,
        };
        for &(l, w) in softs {
            oll.add_soft(l, w);
        }
        oll
    }

    fn add_soft(&mut self, l: i32, w: u64) {
        if w == 0 {
            return;
        }
        match self.index.get(&l) {
            Some(&i) => self.softs[i].1 += w,
            None => {
                self.index.insert(l, self.softs.len());
                self.softs.push((l, w));
            }
        }
    }

    fn assumptions(&self, context: &[i32]) -> Vec<i32> {
        let mut a = context.to_vec();
        a.extend(self.softs.iter().filter(|s| s.1 > 0).map(|s| -s.0));
        a
    }

    /// A cheapest model under `context`: `Some(cost)` with the solver holding the model,
    /// or `None` when `context` has no model at all.
    fn minimize(&mut self, sat: &mut Sat<'_>, context: &[i32]) -> Result<Option<u64>, Halt> {
        loop {
            let assume = self.assumptions(context);
            if sat.solve(&assume)? {
                return Ok(Some(self.lb));
            }
            let mut core: Vec<usize> = (0..self.softs.len())
                .filter(|&i| self.softs[i].1 > 0 && sat.s.failed(-self.softs[i].0))
                .collect();
            if core.is_empty() {
                return Ok(None);
            }
            // Trim: re-solve under the core alone while that shrinks it.
            for _ in 0..3 {
                if core.len() <= 2 {
                    break;
                }
                let mut a = context.to_vec();
                a.extend(core.iter().map(|&i| -self.softs[i].0));
                if sat.solve(&a)? {
                    break;
                }
                let smaller: Vec<usize> = core
                    .iter()
                    .copied()
                    .filter(|&i| sat.s.failed(-self.softs[i].0))
                    .collect();
                if smaller.is_empty() || smaller.len() >= core.len() {
                    break;
                }
                core = smaller;
            }
            let wmin = core.iter().map(|&i| self.softs[i].1).min().unwrap_or(1);
            self.lb += wmin;
            let mut next = Vec::new();
            for &i in &core {
                self.softs[i].1 -= wmin;
                if let Some(&(t, j)) = self.sum_of.get(&self.softs[i].0) {
                    if j + 1 < self.sums[t].inputs.len() {
                        next.push((t, j + 1));
                    }
                }
            }
            for (t, j) in next {
                let o = self.sums[t].output(sat, j)?;
                self.sum_of.insert(o, (t, j));
                self.add_soft(o, wmin);
            }
            if core.len() > 1 {
                let inputs: Vec<i32> = core.iter().map(|&i| self.softs[i].0).collect();
                let t = self.sums.len();
                self.sums.push(Sum {
                    inputs,
                    out: Vec::new(),
                });
                let o = self.sums[t].output(sat, 1)?;
                self.sum_of.insert(o, (t, 1));
                self.add_soft(o, wmin);
            }
        }
    }
}

/// The counterfactual encoding of one model at one actual world.
pub(crate) struct Encoding<'m, 'd> {
    model: &'m Model,
    actual: &'m [bool],
    sat: Sat<'d>,
    /// Selector `x_v` per variable (0: not selectable).
    x: Vec<i32>,
    /// Selector `w_v` per variable (0: freezing cannot matter).
    w: Vec<i32>,
    /// Variables with an `x` selector, in index order.
    cands: Vec<u32>,
    /// Variables with a `w` selector, in index order.
    freezable: Vec<u32>,
    /// The cost as soft literals: `x_v` with the weight of `v`, `w_v` with weight 1.
    cost: Vec<(i32, u64)>,
    /// The cost of flipping each variable.
    weight: Vec<u64>,
    /// The core-guided search over `cost` (created on first use).
    oll: Option<Oll>,
    /// The outcome holds under every intervention (no cause can exist).
    hopeless: bool,
}

impl<'m, 'd> Encoding<'m, 'd> {
    /// Encodes `model` at `actual` (values of every variable). Relevant candidates are
    /// selectable, and so is every variable of `extra` (for checking a given set).
    /// Flipping `v` costs `weights[v]` (1 when `weights` is empty or says 0).
    pub(crate) fn new(
        model: &'m Model,
        actual: &'m [bool],
        extra: &[u32],
        weights: &[u64],
        limits: &Limits<'d>,
    ) -> Result<Self, Halt> {
        let n = model.vars.len();
        let mut sat = Sat::new(limits);
        let mut is_extra = vec![false; n];
        for &e in extra {
            if let Some(slot) = is_extra.get_mut(e as usize) {
                *slot = true;
            }
        }
        let mut x = vec![0i32; n];
        let mut w = vec![0i32; n];
        let mut cf = vec![L::C(false); n];
        for &v in &model.order {
            let i = v as usize;
            let a = actual[i];
            let var = &model.vars[i];
            let selectable = is_extra[i] || (var.candidate && model.relevant[i]);
            if !model.relevant[i] {
                if selectable {
                    x[i] = sat.var();
                }
                cf[i] = L::C(a);
                continue;
            }
            let mut l = match &var.eq {
                None => L::C(a),
                Some(eq) => {
                    let f = sat.tseitin(eq, &cf)?;
                    if f == L::C(a) {
                        f
                    } else {
                        let wv = sat.var();
                        w[i] = wv;
                        if a {
                            sat.or(&[L::V(wv), f])?
                        } else {
                            sat.and(&[L::V(-wv), f])?
                        }
                    }
                }
            };
            if selectable {
                let xv = sat.var();
                x[i] = xv;
                l = if a {
                    sat.and(&[L::V(-xv), l])?
                } else {
                    sat.or(&[L::V(xv), l])?
                };
            }
            cf[i] = l;
        }
        let y = sat.tseitin(&model.outcome, &cf)?;
        let hopeless = match y {
            L::C(b) => b,
            L::V(v) => {
                sat.clause(&[-v])?;
                false
            }
        };
        let cands: Vec<u32> = (0..n as u32).filter(|&v| x[v as usize] != 0).collect();
        let freezable: Vec<u32> = (0..n as u32).filter(|&v| w[v as usize] != 0).collect();
        for &v in &cands {
            if w[v as usize] != 0 {
                // A member of X is not also frozen.
                sat.clause(&[-x[v as usize], -w[v as usize]])?;
            }
        }
        let weight: Vec<u64> = (0..n)
            .map(|v| weights.get(v).copied().unwrap_or(1).max(1))
            .collect();
        let cost: Vec<(i32, u64)> = cands
            .iter()
            .map(|&v| (x[v as usize], weight[v as usize]))
            .chain(freezable.iter().map(|&v| (w[v as usize], 1)))
            .collect();
        Ok(Encoding {
            model,
            actual,
            sat,
            x,
            w,
            cands,
            freezable,
            cost,
            weight,
            oll: None,
            hopeless,
        })
    }

    /// A cheapest `(X, W)` under `context` (assumption literals that only ever
    /// strengthen between calls): its cost, with the solver holding the model.
    fn cheapest(&mut self, context: &[i32]) -> Result<Option<u64>, Halt> {
        let oll = self.oll.get_or_insert_with(|| Oll::new(&self.cost));
        oll.minimize(&mut self.sat, context)
    }

    /// Solver steps used so far.
    fn steps(&mut self) -> u64 {
        self.sat.s.get_callbacks().map_or(0, |p| p.steps)
    }

    /// The cost of `(xs, ws)` under the encoding's weights.
    fn cost_of(&self, xs: &[u32], ws: &[u32]) -> u64 {
        let wx: u64 = xs.iter().map(|&v| self.weight[v as usize]).sum();
        wx + ws.len() as u64
    }

    fn model_x(&self) -> Vec<u32> {
        self.cands
            .iter()
            .copied()
            .filter(|&v| self.sat.val(self.x[v as usize]))
            .collect()
    }

    fn model_w(&self, xs: &[u32]) -> Vec<u32> {
        self.freezable
            .iter()
            .copied()
            .filter(|&v| self.sat.val(self.w[v as usize]) && xs.binary_search(&v).is_err())
            .collect()
    }

    /// Some nonempty strict subset of `xs` satisfying AC2, if any.
    fn smaller(&mut self, xs: &[u32]) -> Result<Option<Vec<u32>>, Halt> {
        if xs.len() <= 1 {
            return Ok(None);
        }
        let act = self.sat.var();
        let mut c: Vec<i32> = Vec::with_capacity(xs.len() + 1);
        c.push(-act);
        c.extend(xs.iter().map(|&v| -self.x[v as usize]));
        self.sat.clause(&c)?;
        let mut assume = vec![act];
        for &u in &self.cands {
            if xs.binary_search(&u).is_err() {
                assume.push(-self.x[u as usize]);
            }
        }
        let found = self.sat.solve(&assume)?;
        let out = found.then(|| self.model_x());
        self.sat.clause(&[-act])?;
        Ok(out)
    }

    /// A minimal cause inside `xs` (which satisfies AC2).
    fn shrink(&mut self, mut xs: Vec<u32>) -> Result<Vec<u32>, Halt> {
        while let Some(s) = self.smaller(&xs)? {
            xs = s;
        }
        Ok(xs)
    }

    /// Forbids `xs` and every superset of it.
    fn block_supersets(&mut self, xs: &[u32]) -> Result<(), Halt> {
        let c: Vec<i32> = xs.iter().map(|&v| -self.x[v as usize]).collect();
        self.sat.clause(&c)
    }

    /// Forbids every strict superset of the minimal cause `m` (but not `m`).
    fn block_strict_supersets(&mut self, m: &[u32]) -> Result<(), Halt> {
        let a = self.sat.var();
        let mut c: Vec<i32> = Vec::with_capacity(m.len() + 1);
        c.push(a);
        c.extend(m.iter().map(|&v| -self.x[v as usize]));
        self.sat.clause(&c)?;
        let others: Vec<u32> = self
            .cands
            .iter()
            .copied()
            .filter(|u| m.binary_search(u).is_err())
            .collect();
        for u in others {
            self.sat.clause(&[-a, -self.x[u as usize]])?;
        }
        Ok(())
    }

    /// Whether flipping `xs` with `ws` frozen falsifies the outcome, on the model itself.
    fn falsifies(&self, xs: &[u32], ws: &[u32]) -> bool {
        falsifies(self.model, self.actual, xs, ws)
    }

    /// A smallest witness `W` such that flipping exactly `flip` (all selectable) and
    /// holding `hold` at actual values falsifies the outcome, if there is one (`hold`
    /// is not counted in `W`).
    pub(crate) fn witness_for(
        &mut self,
        flip: &[u32],
        hold: &[u32],
    ) -> Result<Option<Vec<u32>>, Halt> {
        if self.hopeless || flip.iter().any(|&v| self.x[v as usize] == 0) {
            return Ok(None);
        }
        let mut fix: Vec<i32> = Vec::with_capacity(self.cands.len() + hold.len());
        for &u in &self.cands {
            let on = flip.binary_search(&u).is_ok();
            fix.push(if on { 1 } else { -1 } * self.x[u as usize]);
        }
        let mut held = Vec::new();
        for &h in hold {
            let w = self.w[h as usize];
            if w != 0 {
                fix.push(w);
                held.push(h);
            }
        }
        if !self.sat.solve(&fix)? {
            return Ok(None);
        }
        held.sort_unstable();
        let softs: Vec<(i32, u64)> = self
            .freezable
            .iter()
            .filter(|v| held.binary_search(v).is_err() && flip.binary_search(v).is_err())
            .map(|&v| (self.w[v as usize], 1))
            .collect();
        let mut oll = Oll::new(&softs);
        let Some(cost) = oll.minimize(&mut self.sat, &fix)? else {
            return Ok(None);
        };
        let mut ws = self.model_w(flip);
        let mut frozen = ws.clone();
        frozen.extend_from_slice(&held);
        frozen.sort_unstable();
        frozen.dedup();
        if !self.falsifies(flip, &frozen) {
            return Err(Halt::Inconsistent);
        }
        ws.retain(|w| held.binary_search(w).is_err());
        if ws.len() as u64 != cost {
            return Err(Halt::Inconsistent);
        }
        Ok(Some(ws))
    }

    /// Whether flipping exactly `flip` (all selectable) with `hold` frozen satisfies AC2
    /// with some witness.
    pub(crate) fn ac2(&mut self, flip: &[u32], hold: &[u32]) -> Result<bool, Halt> {
        if self.hopeless || flip.iter().any(|&v| self.x[v as usize] == 0) {
            return Ok(false);
        }
        let mut fix: Vec<i32> = Vec::with_capacity(self.cands.len() + hold.len());
        for &u in &self.cands {
            let on = flip.binary_search(&u).is_ok();
            fix.push(if on { 1 } else { -1 } * self.x[u as usize]);
        }
        fix.extend(hold.iter().map(|&h| self.w[h as usize]).filter(|&w| w != 0));
        self.sat.solve(&fix)
    }

    /// A minimal cause strictly inside `xs` (AC3 fails) or `None` (no strict subset
    /// satisfies AC2).
    pub(crate) fn smaller_cause(&mut self, xs: &[u32]) -> Result<Option<Vec<u32>>, Halt> {
        if self.hopeless {
            return Ok(None);
        }
        match self.smaller(xs)? {
            Some(s) => Ok(Some(self.shrink(s)?)),
            None => Ok(None),
        }
    }
}

/// Whether flipping `xs` with `ws` frozen at actual values falsifies the outcome.
pub(crate) fn falsifies(model: &Model, actual: &[bool], xs: &[u32], ws: &[u32]) -> bool {
    all_falsify(model, actual, &[(xs.to_vec(), ws.to_vec())])
}

/// Whether every `(X, W)` of `sets` falsifies the outcome (flip `X`, freeze `W` at
/// actual values), 64 of them per evaluation of the model.
pub(crate) fn all_falsify(model: &Model, actual: &[bool], sets: &[(Vec<u32>, Vec<u32>)]) -> bool {
    let n = model.vars.len();
    let exo: Vec<bool> = model
        .vars
        .iter()
        .enumerate()
        .map(|(i, v)| v.value.map(|_| actual[i]).unwrap_or(false))
        .collect();
    let mut mask = vec![0u64; n];
    let mut val = vec![0u64; n];
    let mut vals = vec![0u64; n];
    let mut stack = Vec::new();
    for batch in sets.chunks(64) {
        mask.iter_mut().for_each(|m| *m = 0);
        for (lane, (xs, ws)) in batch.iter().enumerate() {
            let bit = 1u64 << lane;
            for &x in xs {
                mask[x as usize] |= bit;
                if !actual[x as usize] {
                    val[x as usize] |= bit;
                } else {
                    val[x as usize] &= !bit;
                }
            }
            for &w in ws {
                mask[w as usize] |= bit;
                if actual[w as usize] {
                    val[w as usize] |= bit;
                } else {
                    val[w as usize] &= !bit;
                }
            }
        }
        let y = model.eval_into(&exo, &mask, &val, &mut vals, &mut stack);
        let used = if batch.len() == 64 {
            !0u64
        } else {
            (1u64 << batch.len()) - 1
        };
        if y & used != 0 {
            return false;
        }
    }
    true
}

/// The causes listed by the optimisation path.
pub(crate) struct Listing {
    /// Minimal causes with one smallest witness each, in order of cost.
    pub causes: Vec<(Vec<u32>, Vec<u32>)>,
    /// The cost of each cause (`Σ weight(X) + |W|`).
    pub costs: Vec<u64>,
    /// Whether every minimal cause is listed.
    pub complete: bool,
    /// Solver steps used.
    pub steps: u64,
}

/// What a listing resolves, and what flipping costs.
pub(crate) struct Keys<'a> {
    /// Per variable: the key whose best cause it resolves (a principal, or any label).
    pub key: &'a [Option<usize>],
    /// Number of keys.
    pub count: usize,
    /// Per variable: the cost of flipping it (empty: 1 each).
    pub weight: &'a [u64],
}

/// Lists minimal causes of `model` (outcome actually true) in order of cost, at most
/// `limits.max_causes` of them plus, for each key not yet holding a listed cause, its
/// cheapest one.
pub(crate) fn list(
    model: &Model,
    actual: &[bool],
    keys: &Keys<'_>,
    limits: &Limits<'_>,
) -> Result<Listing, Halt> {
    let mut enc = Encoding::new(model, actual, &[], keys.weight, limits)?;
    if enc.hopeless || enc.cands.is_empty() {
        return Ok(Listing {
            causes: Vec::new(),
            costs: Vec::new(),
            complete: true,
            steps: enc.steps(),
        });
    }
    let key_of = |v: u32| keys.key.get(v as usize).copied().flatten();
    // Keys owning a selectable candidate; the others have no cause outright.
    let mut open = vec![false; keys.count];
    for &v in &enc.cands {
        if let Some(p) = key_of(v) {
            open[p] = true;
        }
    }
    let mut out: Vec<(Vec<u32>, Vec<u32>)> = Vec::new();
    let mut costs: Vec<u64> = Vec::new();
    // Restrictions to causes of the still-open keys: each activation implies the earlier
    // ones (the open set only shrinks), so all stay assumed and the core-guided search
    // keeps its bounds.
    let mut context: Vec<i32> = Vec::new();
    let mut restricted_to: Option<Vec<bool>> = None;
    let complete;
    loop {
        if out.len() >= limits.max_causes {
            if !open.iter().any(|&o| o) {
                complete = !enc.sat.solve(&[])?;
                break;
            }
            if restricted_to.as_ref() != Some(&open) {
                let act = enc.sat.var();
                let mut c = vec![-act];
                for &v in &enc.cands {
                    if key_of(v).is_some_and(|p| open[p]) {
                        c.push(enc.x[v as usize]);
                    }
                }
                enc.sat.clause(&c)?;
                context.push(act);
                restricted_to = Some(open.clone());
            }
        }
        let Some(cost) = enc.cheapest(&context)? else {
            complete = context.is_empty() || !enc.sat.solve(&[])?;
            break;
        };
        let xs = enc.model_x();
        let ws = enc.model_w(&xs);
        if enc.cost_of(&xs, &ws) != cost {
            // The search's bound and its model disagree: never report it.
            return Err(Halt::Inconsistent);
        }
        match enc.smaller(&xs)? {
            None => {
                if !enc.falsifies(&xs, &ws) {
                    // The solver's model does not replay on the model: never report it.
                    return Err(Halt::Inconsistent);
                }
                enc.block_supersets(&xs)?;
                for &v in &xs {
                    if let Some(p) = key_of(v) {
                        open[p] = false;
                    }
                }
                out.push((xs, ws));
                costs.push(cost);
            }
            Some(s) => {
                let m = enc.shrink(s)?;
                enc.block_strict_supersets(&m)?;
            }
        }
    }
    Ok(Listing {
        causes: out,
        costs,
        complete,
        steps: enc.steps(),
    })
}
