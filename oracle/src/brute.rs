//! Brute force of the modified Halpern–Pearl definition, straight from the text.
//!
//! For every nonempty set `X` of candidates and every set `W` of other variables
//! (any variables, exogenous included), test whether holding `W` at actual values and
//! flipping `X` falsifies the outcome (AC2); keep the `X` with no AC2 strict subset
//! (AC3) and, for each, a smallest `W` (the first in order of size). Exponential in the
//! number of variables: meant for models of about ten variables.

use crate::model::OracleModel;
use crate::{report, OracleCause, OracleReport};

/// Whether flipping `xs` with `ws` frozen at actual values falsifies the outcome.
pub fn falsifies(
    model: &OracleModel,
    actual: &[bool],
    xs: &[usize],
    ws: &[usize],
) -> Result<bool, String> {
    let mut fixed = vec![None; model.len()];
    for &w in ws {
        fixed[w] = Some(actual[w]);
    }
    for &x in xs {
        fixed[x] = Some(!actual[x]);
    }
    Ok(!model.solve(&fixed)?.1)
}

/// Whether the named `(X, W)` pair passes AC2 (for checking another engine's witness).
pub fn check_witness(model: &OracleModel, xs: &[String], ws: &[String]) -> Result<bool, String> {
    let (actual, y) = model.solve(&vec![None; model.len()])?;
    if !y {
        return Ok(false);
    }
    let ix = |v: &String| model.index(v).ok_or(format!("unknown {v}"));
    let xs: Vec<usize> = xs.iter().map(ix).collect::<Result<_, _>>()?;
    let ws: Vec<usize> = ws.iter().map(ix).collect::<Result<_, _>>()?;
    falsifies(model, &actual, &xs, &ws)
}

fn members(mask: u64) -> Vec<usize> {
    (0..64).filter(|b| mask >> b & 1 == 1).collect()
}

/// Every minimal cause with a smallest witness.
pub fn attribute(model: &OracleModel) -> Result<OracleReport, String> {
    let n = model.len();
    if n > 20 {
        return Err("brute force is limited to 20 variables".into());
    }
    let (actual, y) = model.solve(&vec![None; n])?;
    if !y {
        return Ok(report(model, false, Vec::new()));
    }
    let cand_mask: u64 = (0..n)
        .filter(|&i| model.candidate[i])
        .fold(0, |m, i| m | 1 << i);
    let all: u64 = if n == 64 { !0 } else { (1u64 << n) - 1 };
    // AC2 with smallest witness, for every candidate subset.
    let mut ac2: Vec<Option<Vec<usize>>> = vec![None; 1 << n];
    let mut x = cand_mask;
    // enumerate submasks of cand_mask
    loop {
        if x != 0 {
            let xs = members(x);
            let rest = all & !x;
            let mut best: Option<Vec<usize>> = None;
            let mut w = rest;
            loop {
                let ws = members(w);
                if match &best {
                    None => true,
                    Some(b) => ws.len() < b.len(),
                } && falsifies(model, &actual, &xs, &ws)?
                {
                    best = Some(ws);
                }
                if w == 0 {
                    break;
                }
                w = (w - 1) & rest;
            }
            ac2[x as usize] = best;
        }
        if x == 0 {
            break;
        }
        x = (x - 1) & cand_mask;
    }
    let mut causes = Vec::new();
    for x in 1..(1u64 << n) {
        if x & !cand_mask != 0 {
            continue;
        }
        let Some(w) = &ac2[x as usize] else { continue };
        // AC3: no strict nonempty subset satisfies AC2.
        let mut s = (x - 1) & x;
        let mut minimal = true;
        while s != 0 {
            if ac2[s as usize].is_some() {
                minimal = false;
                break;
            }
            s = (s - 1) & x;
        }
        if !minimal {
            continue;
        }
        let mut vars: Vec<String> = members(x)
            .into_iter()
            .map(|i| model.names[i].clone())
            .collect();
        let mut witness: Vec<String> = w.iter().map(|&i| model.names[i].clone()).collect();
        vars.sort();
        witness.sort();
        let grade = 1.0 / (vars.len() + witness.len()) as f64;
        causes.push(OracleCause {
            vars,
            witness,
            grade,
        });
    }
    Ok(report(model, true, causes))
}
