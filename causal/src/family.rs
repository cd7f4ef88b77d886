//! Antichains of sets ("families") as flat arrays of sparse bitsets.
//!
//! Design constraints:
//! - A set is a sorted run of `(word index, nonzero 64-bit word)` pairs, so its size is
//!   proportional to the words it touches, not to the universe: a singleton over a
//!   million candidates is one pair (a dense universe-wide bitset per family made a
//!   disjunction of 100k variables take 2.6 GB).
//! - A [`Family`] stores its sets back to back (`idx`/`bits`, with `starts` marking
//!   where each set begins) and a sparse superset of their union (`support`).
//! - Operations that build families ([`Family::union_min`], [`Family::cross_min`])
//!   return antichains: no member is a superset of another, no duplicates.
//! - Sizes are bounded by a caller-supplied limit on the bytes a result may hold, and
//!   work by a [`Work`] budget of elementary steps (words merged, subset tests) that
//!   also polls the caller's deadline every 65,536 steps; exceeding either is reported
//!   as a [`TooLarge`] naming which, never silently truncated. (Minimising a product is
//!   quadratic: without a work bound a 1,000-node DAG of shared disjunctions ran two
//!   minutes past a 20 s deadline inside one variable's family.)

/// An antichain of sets of candidate bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Family {
    idx: Vec<u32>,
    bits: Vec<u64>,
    /// `starts[i]..starts[i+1]` is set `i` (one more entry than sets).
    starts: Vec<u32>,
    /// Sorted sparse superset of the union of the member sets.
    support: Vec<(u32, u64)>,
}

use crate::deadline::Deadline;

/// Why a family operation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TooLarge {
    /// The result would outgrow the byte limit.
    Bytes,
    /// The work budget is spent.
    Work,
    /// The caller's deadline passed.
    Deadline,
}

/// The work family operations may still do: elementary steps, and the caller's
/// deadline (polled every 65,536 steps).
pub(crate) struct Work<'d> {
    left: u64,
    tick: u64,
    deadline: &'d dyn Deadline,
}

impl<'d> Work<'d> {
    pub(crate) fn new(budget: u64, deadline: &'d dyn Deadline) -> Self {
        Work {
            left: budget,
            tick: 0,
            deadline,
        }
    }

    fn spend(&mut self, steps: u64) -> Result<(), TooLarge> {
        if steps > self.left {
            self.left = 0;
            return Err(TooLarge::Work);
        }
        self.left -= steps;
        self.tick += steps;
        if self.tick >= 1 << 16 {
            self.tick = 0;
            if self.deadline.expired() {
                return Err(TooLarge::Deadline);
            }
        }
        Ok(())
    }
}

/// One set: word indices and words.
type Set<'a> = (&'a [u32], &'a [u64]);

impl Family {
    /// The empty family (no set: the event cannot happen).
    pub(crate) fn none() -> Self {
        Family {
            idx: Vec::new(),
            bits: Vec::new(),
            starts: vec![0],
            support: Vec::new(),
        }
    }

    /// The family holding only the empty set (the event already holds).
    pub(crate) fn unit() -> Self {
        Family {
            idx: Vec::new(),
            bits: Vec::new(),
            starts: vec![0, 0],
            support: Vec::new(),
        }
    }

    pub(crate) fn singleton(bit: usize) -> Self {
        let w = (bit / 64) as u32;
        let b = 1u64 << (bit % 64);
        Family {
            idx: vec![w],
            bits: vec![b],
            starts: vec![0, 1],
            support: vec![(w, b)],
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.starts.len() - 1
    }

    /// Bytes held (for the caller's memory bound).
    pub(crate) fn bytes(&self) -> usize {
        self.idx.len() * 4 + self.bits.len() * 8 + self.starts.len() * 4 + self.support.len() * 16
    }

    pub(crate) fn is_unit(&self) -> bool {
        self.len() == 1 && self.idx.is_empty()
    }

    fn set(&self, i: usize) -> Set<'_> {
        let (a, b) = (self.starts[i] as usize, self.starts[i + 1] as usize);
        (&self.idx[a..b], &self.bits[a..b])
    }

    /// The members of every set, as bit positions in increasing order.
    pub(crate) fn sets(&self) -> impl Iterator<Item = Vec<usize>> + '_ {
        (0..self.len()).map(|i| {
            let (idx, bits) = self.set(i);
            let mut out = Vec::new();
            for (&w, &word) in idx.iter().zip(bits) {
                let mut word = word;
                while word != 0 {
                    let b = word.trailing_zeros() as usize;
                    word &= word - 1;
                    out.push(w as usize * 64 + b);
                }
            }
            out
        })
    }

    fn push_set(&mut self, idx: &[u32], bits: &[u64]) {
        self.idx.extend_from_slice(idx);
        self.bits.extend_from_slice(bits);
        self.starts.push(self.idx.len() as u32);
    }

    fn disjoint(&self, other: &Family) -> bool {
        let (mut i, mut j) = (0, 0);
        let (a, b) = (&self.support, &other.support);
        while i < a.len() && j < b.len() {
            match a[i].0.cmp(&b[j].0) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    if a[i].1 & b[j].1 != 0 {
                        return false;
                    }
                    i += 1;
                    j += 1;
                }
            }
        }
        true
    }

    fn joint_support(&self, other: &Family) -> Vec<(u32, u64)> {
        let mut out = Vec::with_capacity(self.support.len() + other.support.len());
        merge_pairs(&self.support, &other.support, |w, b| out.push((w, b)));
        out
    }

    /// Minimal sets of `self ∪ other`.
    ///
    /// Two antichains over disjoint supports, neither holding the empty set, unite into
    /// an antichain: no minimisation is needed (the read-once case).
    /// Consumes `self`, appending in place in the disjoint case.
    pub(crate) fn union_min(
        mut self,
        other: &Family,
        limit: usize,
        work: &mut Work<'_>,
    ) -> Result<Family, TooLarge> {
        if self.is_unit() || other.is_unit() {
            return Ok(Family::unit());
        }
        if self.bytes() + other.bytes() > limit {
            return Err(TooLarge::Bytes);
        }
        work.spend((other.idx.len() + other.len()) as u64)?;
        let disjoint = self.disjoint(other);
        for i in 0..other.len() {
            let (idx, bits) = other.set(i);
            self.push_set(idx, bits);
        }
        self.support = self.joint_support(other);
        if disjoint {
            return Ok(self);
        }
        minimize(self, limit, work)
    }

    /// Minimal sets of `{a ∪ b : a ∈ self, b ∈ other}`.
    ///
    /// Over disjoint supports the product of two antichains is an antichain
    /// (`a1 ∪ b1 ⊆ a2 ∪ b2` forces `a1 ⊆ a2` and `b1 ⊆ b2`): no minimisation.
    pub(crate) fn cross_min(
        &self,
        other: &Family,
        limit: usize,
        work: &mut Work<'_>,
    ) -> Result<Family, TooLarge> {
        if self.is_unit() {
            return Ok(other.clone());
        }
        if other.is_unit() {
            return Ok(self.clone());
        }
        let disjoint = self.disjoint(other);
        // Bytes of the product before minimisation (each pair at most both sets).
        let pairs = self.len().saturating_mul(other.len());
        let words = self
            .idx
            .len()
            .saturating_mul(other.len())
            .saturating_add(other.idx.len().saturating_mul(self.len()));
        let estimate = words
            .saturating_mul(12)
            .saturating_add(pairs.saturating_mul(4));
        if estimate > limit.saturating_mul(if disjoint { 1 } else { 4 }) {
            return Err(TooLarge::Bytes);
        }
        work.spend(words.saturating_add(pairs) as u64)?;
        let mut out = Family::none();
        out.idx.reserve(words);
        out.bits.reserve(words);
        out.starts.reserve(pairs);
        for i in 0..self.len() {
            let (ai, ab) = self.set(i);
            for j in 0..other.len() {
                let (bi, bb) = other.set(j);
                let (idx, bits) = (&mut out.idx, &mut out.bits);
                merge_pairs_slices(ai, ab, bi, bb, |w, b| {
                    idx.push(w);
                    bits.push(b);
                });
                out.starts.push(out.idx.len() as u32);
            }
        }
        out.support = self.joint_support(other);
        if disjoint {
            return Ok(out);
        }
        minimize(out, limit, work)
    }
}

/// Merges two sorted pair lists, OR-ing words with equal index.
fn merge_pairs(a: &[(u32, u64)], b: &[(u32, u64)], mut f: impl FnMut(u32, u64)) {
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if j == b.len() || (i < a.len() && a[i].0 < b[j].0) {
            f(a[i].0, a[i].1);
            i += 1;
        } else if i == a.len() || b[j].0 < a[i].0 {
            f(b[j].0, b[j].1);
            j += 1;
        } else {
            f(a[i].0, a[i].1 | b[j].1);
            i += 1;
            j += 1;
        }
    }
}

fn merge_pairs_slices(ai: &[u32], ab: &[u64], bi: &[u32], bb: &[u64], mut f: impl FnMut(u32, u64)) {
    let (mut i, mut j) = (0, 0);
    while i < ai.len() || j < bi.len() {
        if j == bi.len() || (i < ai.len() && ai[i] < bi[j]) {
            f(ai[i], ab[i]);
            i += 1;
        } else if i == ai.len() || bi[j] < ai[i] {
            f(bi[j], bb[j]);
            j += 1;
        } else {
            f(ai[i], ab[i] | bb[j]);
            i += 1;
            j += 1;
        }
    }
}

fn popcount(s: Set<'_>) -> u32 {
    s.1.iter().map(|w| w.count_ones()).sum()
}

/// Whether `a ⊆ b`.
fn subset(a: Set<'_>, b: Set<'_>) -> bool {
    if a.0.len() > b.0.len() {
        return false;
    }
    let mut j = 0;
    for (&w, &word) in a.0.iter().zip(a.1) {
        while j < b.0.len() && b.0[j] < w {
            j += 1;
        }
        if j == b.0.len() || b.0[j] != w || word & !b.1[j] != 0 {
            return false;
        }
        j += 1;
    }
    true
}

fn minimize(fam: Family, limit: usize, work: &mut Work<'_>) -> Result<Family, TooLarge> {
    let n = fam.len() as u64;
    work.spend(n.saturating_mul(64 - n.leading_zeros() as u64 + 1))?;
    let mut order: Vec<(u32, usize)> = (0..fam.len()).map(|i| (popcount(fam.set(i)), i)).collect();
    order.sort_by(|x, y| {
        x.0.cmp(&y.0)
            .then_with(|| fam.set(x.1).0.cmp(fam.set(y.1).0))
            .then_with(|| fam.set(x.1).1.cmp(fam.set(y.1).1))
    });
    let mut out = Family::none();
    let mut kept: Vec<usize> = Vec::new();
    for (_, i) in order {
        let s = fam.set(i);
        work.spend(kept.len() as u64 + 1)?;
        if kept.iter().any(|&k| subset(fam.set(k), s)) {
            continue;
        }
        kept.push(i);
        out.push_set(s.0, s.1);
        if out.bytes() > limit {
            return Err(TooLarge::Bytes);
        }
    }
    out.support = fam.support;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn work() -> Work<'static> {
        Work::new(u64::MAX, &crate::deadline::NoDeadline)
    }

    fn fam(sets: &[&[usize]]) -> Family {
        let mut f = Family::none();
        for s in sets {
            let mut g = Family::unit();
            for &b in *s {
                g = g
                    .cross_min(&Family::singleton(b), 1 << 20, &mut work())
                    .unwrap();
            }
            f = f.union_min(&g, 1 << 20, &mut work()).unwrap();
        }
        f
    }

    fn members(f: &Family) -> Vec<Vec<usize>> {
        let mut v: Vec<Vec<usize>> = f.sets().collect();
        v.sort();
        v
    }

    #[test]
    fn union_drops_supersets() {
        let f = fam(&[&[0, 1], &[0], &[2]]);
        assert_eq!(f.len(), 2);
    }

    #[test]
    fn shared_variables_are_minimised() {
        // Overlapping supports go through minimisation; disjoint ones do not need it.
        let a = fam(&[&[0, 1]]);
        let b = fam(&[&[0, 2]]);
        let u = a.union_min(&b, 1 << 20, &mut work()).unwrap();
        assert_eq!(u.len(), 2);
        let c = fam(&[&[0], &[1]])
            .cross_min(&fam(&[&[0], &[2]]), 1 << 20, &mut work())
            .unwrap();
        assert_eq!(c.len(), 2);
        let d = fam(&[&[0], &[1]])
            .cross_min(&fam(&[&[2], &[3]]), 1 << 20, &mut work())
            .unwrap();
        assert_eq!(d.len(), 4);
    }

    #[test]
    fn cross_of_disjunctions() {
        let a = fam(&[&[0], &[1]]);
        let b = fam(&[&[0], &[2]]);
        let c = a.cross_min(&b, 1 << 20, &mut work()).unwrap();
        // {0}, {1,2}  ({0,2} and {0,1} are supersets of {0})
        assert_eq!(members(&c), vec![vec![0], vec![1, 2]]);
    }

    #[test]
    fn sets_spanning_many_words_stay_sparse() {
        let a = fam(&[&[3, 70_000], &[64 * 900]]);
        let b = fam(&[&[70_000, 5], &[1_000_000]]);
        let c = a.cross_min(&b, 1 << 20, &mut work()).unwrap();
        assert_eq!(
            members(&c),
            vec![
                vec![3, 5, 70_000],
                vec![3, 70_000, 1_000_000],
                vec![5, 57_600, 70_000],
                vec![57_600, 1_000_000]
            ]
        );
        assert!(c.bytes() < 400, "{}", c.bytes());
        let sub = fam(&[&[3, 70_000]]);
        assert!(subset(sub.set(0), a.set(0)));
        assert!(!subset(a.set(1), sub.set(0)));
    }

    #[test]
    fn limit_is_reported() {
        let a = fam(&[&[0], &[1], &[2]]);
        let b = fam(&[&[3], &[4], &[5]]);
        assert_eq!(a.cross_min(&b, 64, &mut work()), Err(TooLarge::Bytes));
        let mut none = Work::new(0, &crate::deadline::NoDeadline);
        assert_eq!(a.cross_min(&b, 1 << 20, &mut none), Err(TooLarge::Work));
    }
}
