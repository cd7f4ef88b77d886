//! A statistical anomaly detector: names the author of the most anomalous message.
//!
//! Guarantees: each message is scored by the largest absolute z-score of its features
//! among the incident's messages (a feature with zero spread contributes 0); the author
//! of the highest-scoring message (earliest on ties) gets grade 1, everyone else 0. It
//! always names someone when there is a message — including on accidents nobody caused.

use crate::incident::{Incident, Profile};

/// Anomaly score per message.
pub fn scores(inc: &dyn Incident) -> Vec<f64> {
    let msgs = inc.messages();
    let n = msgs.len() as f64;
    if msgs.is_empty() {
        return Vec::new();
    }
    let mut mean = [0.0f64; 4];
    let mut sd = [0.0f64; 4];
    for f in 0..4 {
        mean[f] = msgs.iter().map(|m| m.features[f]).sum::<f64>() / n;
        sd[f] = (msgs
            .iter()
            .map(|m| (m.features[f] - mean[f]).powi(2))
            .sum::<f64>()
            / n)
            .sqrt();
    }
    msgs.iter()
        .map(|m| {
            (0..4)
                .map(|f| {
                    if sd[f] > 1e-12 {
                        ((m.features[f] - mean[f]) / sd[f]).abs()
                    } else {
                        0.0
                    }
                })
                .fold(0.0, f64::max)
        })
        .collect()
}

/// Names the most anomalous message's author.
pub fn score(inc: &dyn Incident) -> Profile {
    let mut prof = inc.zero_profile();
    let s = scores(inc);
    let mut best: Option<(usize, f64)> = None;
    for (i, v) in s.iter().enumerate() {
        let better = match best {
            None => true,
            Some((_, b)) => *v > b,
        };
        if better {
            best = Some((i, *v));
        }
    }
    if let Some((i, _)) = best {
        prof.insert(inc.messages()[i].author.clone(), 1.0);
    }
    prof
}
