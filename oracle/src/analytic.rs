//! The analytic oracle for monotone models: satisfied prime implicants, then their
//! minimal transversals (SPEC §5's ground truth).
//!
//! Over the actually-true candidates `T`, a set `S ⊆ T` is an implicant when the outcome
//! still holds after every candidate of `T \ S` is set to false; the prime implicants
//! are the minimal such `S`. The minimal causes are the minimal sets of `T` meeting
//! every prime implicant, each with grade `1/|X|` and an empty witness. Both steps
//! enumerate all subsets: meant for at most about 16 true candidates.
//! Only valid on models whose mechanisms are monotone in the candidates.

use crate::model::OracleModel;
use crate::{report, OracleCause, OracleReport};

/// Minimal causes of a monotone model.
pub fn attribute(model: &OracleModel) -> Result<OracleReport, String> {
    let n = model.len();
    let (actual, y) = model.solve(&vec![None; n])?;
    if !y {
        return Ok(report(model, false, Vec::new()));
    }
    let t: Vec<usize> = (0..n)
        .filter(|&i| model.candidate[i] && actual[i])
        .collect();
    if t.len() > 20 {
        return Err("analytic oracle is limited to 20 true candidates".into());
    }
    let k = t.len();
    let holds = |s: u32| -> Result<bool, String> {
        let mut fixed = vec![None; n];
        for (j, &v) in t.iter().enumerate() {
            if s >> j & 1 == 0 {
                fixed[v] = Some(false);
            }
        }
        Ok(model.solve(&fixed)?.1)
    };
    let mut implicant = vec![false; 1 << k];
    for s in 0..(1u32 << k) {
        implicant[s as usize] = holds(s)?;
    }
    let primes: Vec<u32> = (0..(1u32 << k))
        .filter(|&s| {
            implicant[s as usize]
                && (0..k).all(|j| s >> j & 1 == 0 || !implicant[(s & !(1 << j)) as usize])
        })
        .collect();
    let hits = |x: u32| primes.iter().all(|p| p & x != 0);
    let mut causes = Vec::new();
    for x in 1..(1u32 << k) {
        if hits(x) && (0..k).all(|j| x >> j & 1 == 0 || !hits(x & !(1 << j))) {
            let mut vars: Vec<String> = (0..k)
                .filter(|j| x >> j & 1 == 1)
                .map(|j| model.names[t[j]].clone())
                .collect();
            vars.sort();
            let grade = 1.0 / vars.len() as f64;
            causes.push(OracleCause {
                vars,
                witness: Vec::new(),
                grade,
            });
        }
    }
    Ok(report(model, true, causes))
}

/// The satisfied prime implicants (sorted names), for inspection.
pub fn prime_implicants(model: &OracleModel) -> Result<Vec<Vec<String>>, String> {
    let n = model.len();
    let (actual, _) = model.solve(&vec![None; n])?;
    let t: Vec<usize> = (0..n)
        .filter(|&i| model.candidate[i] && actual[i])
        .collect();
    let k = t.len().min(20);
    let mut implicant = vec![false; 1 << k];
    for s in 0..(1u32 << k) {
        let mut fixed = vec![None; n];
        for (j, &v) in t.iter().enumerate().take(k) {
            if s >> j & 1 == 0 {
                fixed[v] = Some(false);
            }
        }
        implicant[s as usize] = model.solve(&fixed)?.1;
    }
    Ok((0..(1u32 << k))
        .filter(|&s| {
            implicant[s as usize]
                && (0..k).all(|j| s >> j & 1 == 0 || !implicant[(s & !(1 << j)) as usize])
        })
        .map(|s| {
            let mut v: Vec<String> = (0..k)
                .filter(|j| s >> j & 1 == 1)
                .map(|j| model.names[t[j]].clone())
                .collect();
            v.sort();
            v
        })
        .collect())
}
