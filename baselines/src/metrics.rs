//! Responsibility metrics (SPEC §6).
//!
//! Definitions (the contract of every number in BENCHMARKS.md):
//! - A profile maps every non-sensor principal to a grade in [0, 1].
//! - **Responsibility error** between a reported profile `r` and a true profile `t` is
//!   the ℓ1 distance of the unit-mass normalisations, halved:
//!   `½ Σ_p |r_p/Σr − t_p/Σt|` (total variation), in [0, 1]. If both profiles are all
//!   zero the error is 0; if exactly one is all zero it is 1. The normalisation is
//!   what lets a single-culprit answer and a graded answer be compared on one scale;
//!   it is the convention under which the paper's Table 2 is reported (e.g. a method
//!   naming both conduits instead of the two ½-planners of redundancy scores 1.0).
//! - **Exact match**: error below 1e-9 (same normalised profile, hence the same set of
//!   responsible principals with the same relative grades).
//! - **Manufactured culprit** (no-cause controls): the method gives some principal a
//!   positive grade.

use crate::incident::Profile;

fn mass(p: &Profile) -> f64 {
    p.values().filter(|v| **v > 0.0).sum()
}

/// Responsibility error (see module docs).
pub fn error(reported: &Profile, truth: &Profile) -> f64 {
    let (mr, mt) = (mass(reported), mass(truth));
    match (mr > 0.0, mt > 0.0) {
        (false, false) => 0.0,
        (true, false) | (false, true) => 1.0,
        (true, true) => {
            let keys: std::collections::BTreeSet<&String> =
                reported.keys().chain(truth.keys()).collect();
            0.5 * keys
                .into_iter()
                .map(|k| {
                    let r = reported.get(k).copied().unwrap_or(0.0).max(0.0) / mr;
                    let t = truth.get(k).copied().unwrap_or(0.0).max(0.0) / mt;
                    (r - t).abs()
                })
                .sum::<f64>()
        }
    }
}

/// Whether the reported profile matches the truth exactly.
pub fn exact(reported: &Profile, truth: &Profile) -> bool {
    error(reported, truth) < 1e-9
}

/// Whether a profile names anyone.
pub fn names_someone(p: &Profile) -> bool {
    mass(p) > 0.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pairs: &[(&str, f64)]) -> Profile {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn conduits_instead_of_split_scores_one() {
        let truth = p(&[("a1", 0.5), ("a2", 0.5), ("d", 0.0), ("r", 0.0)]);
        let single = p(&[("a1", 0.0), ("a2", 0.0), ("d", 1.0), ("r", 1.0)]);
        assert!((error(&single, &truth) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn shapley_on_redundancy_matches_paper_cell() {
        // Y = (a1 | a2) & d & r: Shapley gives 1/12, 1/12, 5/12, 5/12.
        let truth = p(&[("a1", 0.5), ("a2", 0.5), ("d", 0.0), ("r", 0.0)]);
        let sh = p(&[
            ("a1", 1.0 / 12.0),
            ("a2", 1.0 / 12.0),
            ("d", 5.0 / 12.0),
            ("r", 5.0 / 12.0),
        ]);
        assert!((error(&sh, &truth) - 5.0 / 6.0).abs() < 1e-12);
    }

    #[test]
    fn zero_cases() {
        let z = p(&[("a", 0.0)]);
        assert_eq!(error(&z, &z), 0.0);
        assert_eq!(error(&p(&[("a", 1.0)]), &z), 1.0);
        assert!(exact(&z, &z));
        assert!(!names_someone(&z));
    }
}
