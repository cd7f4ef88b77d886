//! Single-site counterfactual scoring (CAR / CausalFlow style): delete one message at a
//! time; a message scores 1 if its deletion alone removes the adverse outcome.
//!
//! Guarantees: a principal's grade is the maximum score of its messages, so the
//! profile is 0/1-valued; with no adverse outcome every grade is 0. Structural limits
//! (kept on purpose): overdetermined causes each score 0, omissions have no message.

use std::collections::BTreeSet;

use crate::incident::{Incident, Profile};

/// Scores an incident.
pub fn score(inc: &dyn Incident) -> Profile {
    let mut prof = inc.zero_profile();
    if !inc.adverse_without(&BTreeSet::new()) {
        return prof;
    }
    for (i, m) in inc.messages().iter().enumerate() {
        if !inc.adverse_without(&BTreeSet::from([i])) {
            prof.insert(m.author.clone(), 1.0);
        }
    }
    prof
}
