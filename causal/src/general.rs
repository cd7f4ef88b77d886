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
//! - Evaluation runs compiled postfix programs over 64 lanes; the `W = ∅` test of 64
//!   cause sets is done in one pass.
//! - Work is bounded by an evaluation budget; exhausting it is an error, never a guess.

use crate::model::Model;

/// The general search ran out of its evaluation budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Exhausted;

pub(crate) struct Search<'a> {
    model: &'a Model,
    exo: &'a [bool],
    actual_word: Vec<u64>,
    topo_pos: Vec<usize>,
    budget: u64,
    mask: Vec<u64>,
    val: Vec<u64>,
    vals: Vec<u64>,
    stack: Vec<u64>,
}

impl<'a> Search<'a> {
    pub(crate) fn new(model: &'a Model, exo: &'a [bool], actual: Vec<bool>, budget: u64) -> Self {
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
            mask: vec![0; n],
            val: vec![0; n],
            vals: vec![0; n],
            stack: Vec::new(),
        }
    }

    fn eval(&mut self) -> Result<u64, Exhausted> {
        if self.budget == 0 {
            return Err(Exhausted);
        }
        self.budget -= 1;
        Ok(self.model.eval_into(
            self.exo,
            &self.mask,
            &self.val,
            &mut self.vals,
            &mut self.stack,
        ))
    }

    /// Every minimal cause with one smallest witness, as variable indices.
    pub(crate) fn run(mut self) -> Result<Vec<(Vec<u32>, Vec<u32>)>, Exhausted> {
        let model = self.model;
        let cands: Vec<u32> = (0..model.vars.len() as u32)
            .filter(|&v| model.vars[v as usize].candidate && model.relevant[v as usize])
            .collect();
        let m = cands.len();
        let words = m.div_ceil(64).max(1);
        let mut found: Vec<Vec<u64>> = Vec::new();
        let mut out = Vec::new();
        for size in 1..=m {
            // Collect the non-pruned combinations of this size.
            let mut batch: Vec<Vec<usize>> = Vec::new();
            let mut comb: Vec<usize> = (0..size).collect();
            loop {
                let bits = to_bits(&comb, words);
                if !found
                    .iter()
                    .any(|f| f.iter().zip(&bits).all(|(a, b)| a & !b == 0))
                {
                    batch.push(comb.clone());
                    if batch.len() == 64 {
                        self.test_batch(&cands, &mut batch, &mut found, &mut out, words)?;
                    }
                }
                if !next_comb(&mut comb, m) {
                    break;
                }
            }
            self.test_batch(&cands, &mut batch, &mut found, &mut out, words)?;
            if found.iter().any(|f| f.iter().all(|w| *w == 0)) {
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
        out: &mut Vec<(Vec<u32>, Vec<u32>)>,
        words: usize,
    ) -> Result<(), Exhausted> {
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
        let combs = std::mem::take(batch);
        for (lane, comb) in combs.into_iter().enumerate() {
            let xs: Vec<u32> = comb.iter().map(|&c| cands[c]).collect();
            let witness = if (y >> lane) & 1 == 0 {
                Some(Vec::new())
            } else {
                self.smallest_witness(&xs)?
            };
            if let Some(w) = witness {
                found.push(to_bits(&comb, words));
                out.push((xs, w));
            }
        }
        Ok(())
    }

    fn smallest_witness(&mut self, xs: &[u32]) -> Result<Option<Vec<u32>>, Exhausted> {
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
        for size in 1..=pool.len() {
            if self.dfs(&pool, 0, size, &mut chosen)? {
                self.clear_mask(xs);
                return Ok(Some(chosen));
            }
        }
        self.clear_mask(xs);
        Ok(None)
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
    ) -> Result<bool, Exhausted> {
        if left == 0 {
            let y = self.eval()?;
            return Ok(y & 1 == 0);
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
