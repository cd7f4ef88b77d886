//! The general exact path of the modified Halpern–Pearl definition.
//!
//! Design constraints:
//! - Cause sets `X` are searched by increasing size over the candidate ancestors of the
//!   outcome; a set containing an already found cause is skipped (AC3 minimality), so
//!   every reported set is minimal and every minimal cause is reported.
//! - Intervening on binary variables, the counterfactual setting of a minimal cause is
//!   the flip of every member (a member kept at its actual value could move to `W`).
//! - For each `X` the smallest witness `W` is found by iterative deepening over the
//!   endogenous descendants of `X` that are ancestors of the outcome, in topological
//!   order, adding a variable only if the intervention currently moves it off its
//!   actual value: freezing a variable that already has its actual value changes
//!   nothing, so no smallest witness is missed. Exogenous variables never need freezing.
//! - Before and during the witness search a three-valued (Kleene) evaluation, with the
//!   still-undecided witness variables unknown, bounds the outcome: when it is surely
//!   true no completion of the witness can falsify it and the branch is cut. The bound
//!   is sound, so exactness is kept.
//! - Evaluation runs compiled postfix programs over 64 lanes; the `W = ∅` test of 64
//!   cause sets is done in one pass.
//! - The search stops at the first size whose sets all contain a found cause (every
//!   larger set contains one of them).
//! - Work is bounded by an evaluation budget (model evaluations, and one unit per 64
//!   enumerated sets) and a cap on the causes found; the caller's deadline is polled
//!   every 1,024 units. Stopping is a [`Stop`], never a guess.

use crate::deadline::Deadline;
use crate::model::{Model, Op};

/// A cause set with one smallest witness, as variable indices.
pub(crate) type CauseWitness = (Vec<u32>, Vec<u32>);

/// Why the general search stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The evaluation budget is spent.
    Budget,
    /// More causes than the cap.
    TooMany,
    /// The caller's deadline passed.
    Deadline,
}

pub(crate) struct Search<'a> {
    model: &'a Model,
    exo: &'a [bool],
    actual_word: Vec<u64>,
    topo_pos: Vec<usize>,
    budget: u64,
    spent: u64,
    cap: usize,
    deadline: &'a dyn Deadline,
    mask: Vec<u64>,
    val: Vec<u64>,
    vals: Vec<u64>,
    stack: Vec<u64>,
    free: Vec<bool>,
    tri: Vec<u8>,
    tri_stack: Vec<u8>,
    parents: Vec<Vec<u32>>,
    lane_t: Vec<u64>,
    lane_f: Vec<u64>,
    lane_stack: Vec<(u64, u64)>,
}

impl<'a> Search<'a> {
    pub(crate) fn new(
        model: &'a Model,
        exo: &'a [bool],
        actual: Vec<bool>,
        budget: u64,
        cap: usize,
        deadline: &'a dyn Deadline,
    ) -> Self {
        let n = model.vars.len();
        let mut topo_pos = vec![0; n];
        for (i, &v) in model.order.iter().enumerate() {
            topo_pos[v as usize] = i;
        }
        let actual_word = actual.iter().map(|&b| if b { !0 } else { 0 }).collect();
        Search {
            model,
            exo,
            actual_word,
            topo_pos,
            budget,
            spent: 0,
            cap,
            deadline,
            mask: vec![0; n],
            val: vec![0; n],
            vals: vec![0; n],
            stack: Vec::new(),
            free: vec![false; n],
            tri: vec![0; n],
            tri_stack: Vec::new(),
            parents: model
                .vars
                .iter()
                .map(|v| {
                    let mut p = Vec::new();
                    if let Some(eq) = &v.eq {
                        eq.for_each_var(&mut |u| p.push(u));
                    }
                    p.sort_unstable();
                    p.dedup();
                    p
                })
                .collect(),
            lane_t: vec![0; n],
            lane_f: vec![0; n],
            lane_stack: Vec::new(),
        }
    }

    fn charge(&mut self) -> Result<(), Stop> {
        if self.spent >= self.budget {
            return Err(Stop::Budget);
        }
        self.spent += 1;
        if self.spent & 1023 == 0 && self.deadline.expired() {
            return Err(Stop::Deadline);
        }
        Ok(())
    }

    fn eval(&mut self) -> Result<u64, Stop> {
        self.charge()?;
        Ok(self.model.eval_into(
            self.exo,
            &self.mask,
            &self.val,
            &mut self.vals,
            &mut self.stack,
        ))
    }

    /// Every minimal cause with one smallest witness, as variable indices.
    pub(crate) fn run(mut self) -> Result<Vec<CauseWitness>, Stop> {
        let model = self.model;
        let cands: Vec<u32> = (0..model.vars.len() as u32)
            .filter(|&v| model.vars[v as usize].candidate && model.relevant[v as usize])
            .collect();
        let m = cands.len();
        let words = m.div_ceil(64).max(1);
        let mut found: Vec<Vec<u64>> = Vec::new();
        let mut out = Vec::new();
        let mut bits = vec![0u64; words];
        for size in 1..=m {
            // Collect the non-pruned combinations of this size.
            let mut batch: Vec<Vec<usize>> = Vec::new();
            let mut comb: Vec<usize> = (0..size).collect();
            let mut alive = 0u64;
            let mut enumerated = 0u64;
            loop {
                bits.iter_mut().for_each(|w| *w = 0);
                for &c in &comb {
                    bits[c / 64] |= 1 << (c % 64);
                }
                if !found
                    .iter()
                    .any(|f| f.iter().zip(&bits).all(|(a, b)| a & !b == 0))
                {
                    alive += 1;
                    batch.push(comb.clone());
                    if batch.len() == 64 {
                        self.test_batch(&cands, &mut batch, &mut found, &mut out, words)?;
                    }
                }
                enumerated += 1;
                if enumerated & 63 == 0 {
                    self.charge()?;
                }
                if !next_comb(&mut comb, m) {
                    break;
                }
            }
            self.test_batch(&cands, &mut batch, &mut found, &mut out, words)?;
            // Every set of the next size contains one of this size; if all of those
            // contain a cause, no larger set can be minimal.
            if alive == 0 {
                break;
            }
        }
        Ok(out)
    }

    fn test_batch(
        &mut self,
        cands: &[u32],
        batch: &mut Vec<Vec<usize>>,
        found: &mut Vec<Vec<u64>>,
        out: &mut Vec<CauseWitness>,
        words: usize,
    ) -> Result<(), Stop> {
        if batch.is_empty() {
            return Ok(());
        }
        // Lane j intervenes on batch[j] with an empty witness.
        self.mask.iter_mut().for_each(|w| *w = 0);
        for (lane, comb) in batch.iter().enumerate() {
            for &c in comb {
                let v = cands[c] as usize;
                self.mask[v] |= 1 << lane;
            }
        }
        for v in 0..self.val.len() {
            self.val[v] = !self.actual_word[v];
        }
        let y = self.eval()?;
        let hopeless = self.lanes_surely_true()?;
        let combs = std::mem::take(batch);
        for (lane, comb) in combs.into_iter().enumerate() {
            let xs: Vec<u32> = comb.iter().map(|&c| cands[c]).collect();
            let witness = if (y >> lane) & 1 == 0 {
                Some(Vec::new())
            } else if (hopeless >> lane) & 1 == 1 {
                None
            } else {
                self.smallest_witness(&xs)?
            };
            if let Some(w) = witness {
                found.push(to_bits(&comb, words));
                out.push((xs, w));
                if out.len() > self.cap {
                    return Err(Stop::TooMany);
                }
            }
        }
        Ok(())
    }

    fn smallest_witness(&mut self, xs: &[u32]) -> Result<Option<Vec<u32>>, Stop> {
        let model = self.model;
        let n = model.vars.len();
        let mut desc = vec![false; n];
        for &x in xs {
            desc[x as usize] = true;
        }
        let mut pool = Vec::new();
        for &v in &model.order {
            let v = v as usize;
            if desc[v] {
                continue;
            }
            if let Some(eq) = &model.vars[v].eq {
                let mut d = false;
                eq.for_each_var(&mut |u| d |= desc[u as usize]);
                if d {
                    desc[v] = true;
                    if model.relevant[v] {
                        pool.push(v as u32);
                    }
                }
            }
        }
        pool.sort_by_key(|&v| self.topo_pos[v as usize]);
        // Scalar mode: all lanes equal.
        self.mask.iter_mut().for_each(|w| *w = 0);
        for &x in xs {
            self.mask[x as usize] = !0;
            self.val[x as usize] = !self.actual_word[x as usize];
        }
        let mut chosen = Vec::new();
        if !self.may_falsify(&pool)? {
            self.clear_mask(xs);
            return Ok(None);
        }
        for size in 1..=pool.len() {
            if self.dfs(&pool, 0, size, &mut chosen)? {
                self.clear_mask(xs);
                return Ok(Some(chosen));
            }
        }
        self.clear_mask(xs);
        Ok(None)
    }

    /// The lane-parallel form of [`Self::may_falsify`] for the cause sets of a batch
    /// (given by `mask`, with every endogenous descendant undecided): the lanes whose
    /// outcome is surely true under every witness.
    fn lanes_surely_true(&mut self) -> Result<u64, Stop> {
        self.charge()?;
        let model = self.model;
        // Descendants of X per lane (X itself excluded from the free set).
        let mut desc = std::mem::take(&mut self.lane_f);
        for &v in &model.order {
            let i = v as usize;
            let mut d = 0u64;
            for &p in &self.parents[i] {
                d |= desc[p as usize] | self.mask[p as usize];
            }
            desc[i] = d & !self.mask[i];
        }
        let mut t = std::mem::take(&mut self.lane_t);
        let mut f = vec![0u64; model.vars.len()];
        for &v in &model.order {
            let i = v as usize;
            let actual = self.actual_word[i];
            let (ct, cf) = match model.vars[i].value {
                Some(_) => (actual, !actual),
                None => run_kleene(&model.progs[i], &t, &f, &mut self.lane_stack),
            };
            // Forced lanes take the intervention value.
            let m = self.mask[i];
            let (mut vt, mut vf) = (
                (ct & !m) | (self.val[i] & m),
                (cf & !m) | (!self.val[i] & m),
            );
            // Undecided lanes (endogenous descendants of X): unknown unless surely actual.
            if model.vars[i].value.is_none() && model.relevant[i] {
                let sure_actual = (vt & actual) | (vf & !actual);
                let free = desc[i] & !sure_actual;
                vt &= !free;
                vf &= !free;
            }
            t[i] = vt;
            f[i] = vf;
        }
        let (yt, _) = run_kleene(&model.outcome_prog, &t, &f, &mut self.lane_stack);
        self.lane_t = t;
        self.lane_f = desc;
        Ok(yt)
    }

    /// Three-valued (Kleene) bound: with the current interventions and freezes fixed,
    /// each variable of `undecided` may still be frozen or not, so where its computed
    /// value is not surely its actual value it is unknown. Returns false when the
    /// outcome is surely true, i.e. no completion of the witness can falsify it.
    fn may_falsify(&mut self, undecided: &[u32]) -> Result<bool, Stop> {
        self.charge()?;
        for &u in undecided {
            self.free[u as usize] = true;
        }
        let model = self.model;
        for &v in &model.order {
            let i = v as usize;
            let t = if self.mask[i] != 0 {
                (self.val[i] & 1) as u8
            } else if model.vars[i].value.is_some() {
                (self.actual_word[i] & 1) as u8
            } else {
                let computed = run3(&model.progs[i], &self.tri, &mut self.tri_stack);
                let actual = (self.actual_word[i] & 1) as u8;
                if self.free[i] && computed != actual {
                    UNKNOWN
                } else {
                    computed
                }
            };
            self.tri[i] = t;
        }
        let y = run3(&model.outcome_prog, &self.tri, &mut self.tri_stack);
        for &u in undecided {
            self.free[u as usize] = false;
        }
        Ok(y != 1)
    }

    fn clear_mask(&mut self, xs: &[u32]) {
        for &x in xs {
            self.mask[x as usize] = 0;
        }
    }

    /// Tries to extend `chosen` by `left` variables from `pool[start..]`.
    fn dfs(
        &mut self,
        pool: &[u32],
        start: usize,
        left: usize,
        chosen: &mut Vec<u32>,
    ) -> Result<bool, Stop> {
        if left == 0 {
            let y = self.eval()?;
            return Ok(y & 1 == 0);
        }
        if start > 0 && !self.may_falsify(&pool[start..])? {
            return Ok(false);
        }
        self.eval()?;
        let current: Vec<u64> = self.vals.clone();
        for j in start..pool.len() {
            if pool.len() - j < left {
                break;
            }
            let w = pool[j] as usize;
            if (current[w] ^ self.actual_word[w]) & 1 == 0 {
                continue;
            }
            self.mask[w] = !0;
            self.val[w] = self.actual_word[w];
            chosen.push(w as u32);
            let ok = self.dfs(pool, j + 1, left - 1, chosen)?;
            if ok {
                self.mask[w] = 0;
                return Ok(true);
            }
            chosen.pop();
            self.mask[w] = 0;
        }
        Ok(false)
    }
}

/// Lane-parallel Kleene evaluation: `(surely true, surely false)` masks.
fn run_kleene(ops: &[Op], t: &[u64], f: &[u64], stack: &mut Vec<(u64, u64)>) -> (u64, u64) {
    stack.clear();
    for op in ops {
        match *op {
            Op::Const(b) => stack.push(if b { (!0, 0) } else { (0, !0) }),
            Op::Load(v) => stack.push((t[v as usize], f[v as usize])),
            Op::Not => {
                if let Some(top) = stack.last_mut() {
                    *top = (top.1, top.0);
                }
            }
            Op::And(n) | Op::Or(n) => {
                let is_and = matches!(op, Op::And(_));
                let base = stack.len().saturating_sub(n as usize);
                let (mut at, mut af) = if is_and { (!0u64, 0u64) } else { (0u64, !0u64) };
                for &(xt, xf) in &stack[base..] {
                    if is_and {
                        at &= xt;
                        af |= xf;
                    } else {
                        at |= xt;
                        af &= xf;
                    }
                }
                stack.truncate(base);
                stack.push((at, af));
            }
        }
    }
    stack.pop().unwrap_or((0, !0))
}

const UNKNOWN: u8 = 2;

/// Kleene evaluation of a postfix program over 0 / 1 / [`UNKNOWN`].
fn run3(ops: &[Op], vals: &[u8], stack: &mut Vec<u8>) -> u8 {
    stack.clear();
    for op in ops {
        match *op {
            Op::Const(b) => stack.push(u8::from(b)),
            Op::Load(v) => stack.push(vals[v as usize]),
            Op::Not => {
                if let Some(top) = stack.last_mut() {
                    *top = match *top {
                        0 => 1,
                        1 => 0,
                        u => u,
                    };
                }
            }
            Op::And(n) | Op::Or(n) => {
                let (absorbing, identity) = if matches!(op, Op::And(_)) {
                    (0, 1)
                } else {
                    (1, 0)
                };
                let base = stack.len().saturating_sub(n as usize);
                let mut acc = identity;
                for &w in &stack[base..] {
                    if w == absorbing {
                        acc = absorbing;
                        break;
                    }
                    if w == UNKNOWN {
                        acc = UNKNOWN;
                    }
                }
                stack.truncate(base);
                stack.push(acc);
            }
        }
    }
    stack.pop().unwrap_or(0)
}

fn to_bits(comb: &[usize], words: usize) -> Vec<u64> {
    let mut b = vec![0u64; words];
    for &c in comb {
        b[c / 64] |= 1 << (c % 64);
    }
    b
}

fn next_comb(comb: &mut [usize], m: usize) -> bool {
    let k = comb.len();
    let mut i = k;
    while i > 0 {
        i -= 1;
        if comb[i] < m - k + i {
            comb[i] += 1;
            for j in i + 1..k {
                comb[j] = comb[j - 1] + 1;
            }
            return true;
        }
    }
    false
}
