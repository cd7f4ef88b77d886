//! Exact Shapley-value attribution over messages.
//!
//! Guarantees: players are the recorded messages; `v(S) = 1` iff the adverse outcome
//! occurs when only the messages in `S` are kept; the Shapley value of each message is
//! computed exactly over all `2^k` coalitions (refused above [`MAX_PLAYERS`]). A
//! principal's grade is the sum of its messages' values, clamped at 0 (efficiency makes
//! the grades sum to `v(N) − v(∅)`). The game knows nothing of duties.

use std::collections::BTreeSet;

use crate::incident::{Incident, Profile};

/// Largest number of messages valued exactly.
pub const MAX_PLAYERS: usize = 16;

/// Too many players for the exact computation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0} messages exceed the exact Shapley limit of {MAX_PLAYERS}")]
pub struct TooManyPlayers(pub usize);

/// Exact Shapley values per message.
pub fn values(inc: &dyn Incident) -> Result<Vec<f64>, TooManyPlayers> {
    let k = inc.messages().len();
    if k > MAX_PLAYERS {
        return Err(TooManyPlayers(k));
    }
    let full = (1u64 << k) - 1;
    let v: Vec<f64> = (0..=full)
        .map(|keep| {
            let absent: BTreeSet<usize> = (0..k).filter(|i| keep & (1 << i) == 0).collect();
            if inc.adverse_without(&absent) {
                1.0
            } else {
                0.0
            }
        })
        .collect();
    // weight[s] = s!(k-s-1)!/k!
    let mut fact = vec![1.0f64; k + 1];
    for i in 1..=k {
        fact[i] = fact[i - 1] * i as f64;
    }
    let mut phi = vec![0.0; k];
    for (i, p) in phi.iter_mut().enumerate() {
        for s in 0..=full {
            if s & (1 << i) != 0 {
                continue;
            }
            let size = s.count_ones() as usize;
            let w = fact[size] * fact[k - size - 1] / fact[k];
            *p += w * (v[(s | (1 << i)) as usize] - v[s as usize]);
        }
    }
    Ok(phi)
}

/// Shapley attribution per principal.
pub fn score(inc: &dyn Incident) -> Result<Profile, TooManyPlayers> {
    let phi = values(inc)?;
    let mut prof = inc.zero_profile();
    for (m, p) in inc.messages().iter().zip(phi) {
        *prof.entry(m.author.clone()).or_insert(0.0) += p;
    }
    for v in prof.values_mut() {
        if *v < 1e-12 {
            *v = 0.0;
        }
    }
    Ok(prof)
}
