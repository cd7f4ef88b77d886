//! Antichains of small sets ("families") as flat bitset arrays.
//!
//! Design constraints:
//! - A [`Family`] over `bits` elements stores each set as `words = ceil(bits/64)` u64s.
//! - Operations that build families ([`Family::union_min`], [`Family::cross_min`])
//!   return antichains: no member is a superset of another, no duplicates.
//! - Sizes are bounded by a caller-supplied limit; exceeding it is reported, never
//!   silently truncated.

/// An antichain of sets over `0..bits`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Family {
    words: usize,
    data: Vec<u64>,
    /// Superset of the union of the member sets.
    support: Vec<u64>,
}

/// Upper bound on the u64 words held by one family (128 MiB).
pub(crate) const WORD_BUDGET: usize = 1 << 24;

/// A family grew beyond the configured limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooLarge;

impl Family {
    pub(crate) fn words_for(bits: usize) -> usize {
        bits.div_ceil(64).max(1)
    }

    /// The largest number of sets a family over `words` words may hold under a set
    /// limit and the memory bound [`WORD_BUDGET`].
    pub(crate) fn set_limit(words: usize, limit: usize) -> usize {
        limit.min(WORD_BUDGET / words.max(1)).max(1)
    }

    /// The empty family (no set: the event cannot happen).
    pub(crate) fn none(words: usize) -> Self {
        Family {
            words,
            data: Vec::new(),
            support: vec![0; words],
        }
    }

    /// The family holding only the empty set (the event already holds).
    pub(crate) fn unit(words: usize) -> Self {
        Family {
            words,
            data: vec![0; words],
            support: vec![0; words],
        }
    }

    pub(crate) fn singleton(words: usize, bit: usize) -> Self {
        let mut data = vec![0; words];
        data[bit / 64] |= 1 << (bit % 64);
        Family {
            words,
            support: data.clone(),
            data,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.data.len() / self.words
    }

    pub(crate) fn is_unit(&self) -> bool {
        self.len() == 1 && self.data.iter().all(|w| *w == 0)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &[u64]> {
        self.data.chunks_exact(self.words)
    }

    fn disjoint(&self, other: &Family) -> bool {
        self.support
            .iter()
            .zip(&other.support)
            .all(|(a, b)| a & b == 0)
    }

    fn joint_support(&self, other: &Family) -> Vec<u64> {
        self.support
            .iter()
            .zip(&other.support)
            .map(|(a, b)| a | b)
            .collect()
    }

    /// Minimal sets of `self ∪ other`.
    ///
    /// Two antichains over disjoint supports, neither holding the empty set, unite into
    /// an antichain: no minimisation is needed (the read-once case).
    /// Consumes `self`, appending in place in the disjoint case.
    pub(crate) fn union_min(mut self, other: &Family, limit: usize) -> Result<Family, TooLarge> {
        if self.is_unit() || other.is_unit() {
            return Ok(Family::unit(self.words));
        }
        if self.len() + other.len() > limit {
            return Err(TooLarge);
        }
        let disjoint = self.disjoint(other);
        self.data.extend_from_slice(&other.data);
        for (s, o) in self.support.iter_mut().zip(&other.support) {
            *s |= o;
        }
        if disjoint {
            return Ok(self);
        }
        minimize(self.words, self.data, self.support, limit)
    }

    /// Minimal sets of `{a ∪ b : a ∈ self, b ∈ other}`.
    ///
    /// Over disjoint supports the product of two antichains is an antichain
    /// (`a1 ∪ b1 ⊆ a2 ∪ b2` forces `a1 ⊆ a2` and `b1 ⊆ b2`): no minimisation.
    pub(crate) fn cross_min(&self, other: &Family, limit: usize) -> Result<Family, TooLarge> {
        if self.is_unit() {
            return Ok(other.clone());
        }
        if other.is_unit() {
            return Ok(self.clone());
        }
        let disjoint = self.disjoint(other);
        let product = self.len().saturating_mul(other.len());
        if product > limit.saturating_mul(if disjoint { 1 } else { 64 }) {
            return Err(TooLarge);
        }
        let mut data = Vec::with_capacity(self.data.len() * other.len());
        for a in self.iter() {
            for b in other.iter() {
                data.extend(a.iter().zip(b).map(|(x, y)| x | y));
            }
        }
        let support = self.joint_support(other);
        if disjoint {
            return Ok(Family {
                words: self.words,
                data,
                support,
            });
        }
        minimize(self.words, data, support, limit)
    }
}

fn popcount(s: &[u64]) -> u32 {
    s.iter().map(|w| w.count_ones()).sum()
}

fn subset(a: &[u64], b: &[u64]) -> bool {
    a.iter().zip(b).all(|(x, y)| x & !y == 0)
}

fn minimize(
    words: usize,
    data: Vec<u64>,
    support: Vec<u64>,
    limit: usize,
) -> Result<Family, TooLarge> {
    let mut sets: Vec<&[u64]> = data.chunks_exact(words).collect();
    sets.sort_by(|a, b| popcount(a).cmp(&popcount(b)).then_with(|| a.cmp(b)));
    let mut kept: Vec<&[u64]> = Vec::new();
    for s in sets {
        if kept.iter().any(|k| subset(k, s)) {
            continue;
        }
        kept.push(s);
        if kept.len() > limit {
            return Err(TooLarge);
        }
    }
    let mut out = Vec::with_capacity(kept.len() * words);
    for k in kept {
        out.extend_from_slice(k);
    }
    Ok(Family {
        words,
        data: out,
        support,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fam(sets: &[&[usize]]) -> Family {
        let mut f = Family::none(1);
        for s in sets {
            let mut g = Family::unit(1);
            for &b in *s {
                g = g.cross_min(&Family::singleton(1, b), 1000).unwrap();
            }
            f = f.union_min(&g, 1000).unwrap();
        }
        f
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
        let u = a.union_min(&b, 1000).unwrap();
        assert_eq!(u.len(), 2);
        let c = fam(&[&[0], &[1]])
            .cross_min(&fam(&[&[0], &[2]]), 1000)
            .unwrap();
        assert_eq!(c.len(), 2);
        let d = fam(&[&[0], &[1]])
            .cross_min(&fam(&[&[2], &[3]]), 1000)
            .unwrap();
        assert_eq!(d.len(), 4);
    }

    #[test]
    fn cross_of_disjunctions() {
        let a = fam(&[&[0], &[1]]);
        let b = fam(&[&[0], &[2]]);
        let c = a.cross_min(&b, 1000).unwrap();
        // {0}, {1,2}  ({0,2} and {0,1} are supersets of {0})
        assert_eq!(c, fam(&[&[0], &[1, 2]]));
    }

    #[test]
    fn limit_is_reported() {
        let a = fam(&[&[0], &[1], &[2]]);
        let b = fam(&[&[3], &[4], &[5]]);
        assert_eq!(a.cross_min(&b, 4), Err(TooLarge));
    }
}
