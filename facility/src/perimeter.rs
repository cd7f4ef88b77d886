//! The perimeter of the record: coordination that travels off the bus.
//!
//! The guarantees of the verdict hold "on the certified evidence": a principal is
//! cleared only for coordination that went through the recorded bus. This module
//! measures the residual instead of assuming it small (paper, "recorded channel"
//! assumption): a seeded fraction of the causal links between principals travels
//! through an unrecorded side channel — the effect happens in the world, but the
//! message and every citation of it do not exist on the bus
//! ([`crate::record::sign_record_off_bus`]).
//!
//! Design constraints:
//! - A **link** is a recorded command addressed to another principal
//!   (`Destination::Principal`): a proposal, a delegation, a veto. Commands to
//!   actuators are never off-bus (an actuation is always recorded by its actuator).
//! - Off-bus links are drawn with common random numbers: each link of a draw gets one
//!   uniform number from a ChaCha8 stream seeded by the draw's seed, and is off-bus at
//!   fraction `f` iff that number is below `f`. The off-bus sets are therefore nested
//!   as `f` grows, and the realised fraction over many draws converges to `f`.
//! - Truth never changes: the world (and so the oracle's profile) is the same with or
//!   without the side channel. Only the record, and so what the verdict can see,
//!   shrinks.
//! - Metrics compare a seen profile (the verdict's ρ_lo) with the true profile, both
//!   zero-filled over the same principals:
//!   * **invisible responsibility** — `Σ_p max(0, ρ_p − seen_p) / Σ_p ρ_p`, the share
//!     of the true profile's ℓ1 mass the verdict does not see (0 when the truth has no
//!     mass);
//!   * **over-attribution** — `Σ_{p : ρ_p = 0} seen_p`, mass on principals whose true
//!     ρ is 0 (the guarantee: exactly 0);
//!   * **raised** — `Σ_{p : ρ_p > 0} max(0, seen_p − ρ_p)`, grade above the truth on
//!     principals who are truly involved (a hidden co-cause makes its visible partner
//!     look sole).

use std::collections::{BTreeMap, BTreeSet};

use audita_evidence::{MessageId, Payload, SignedEnvelope};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::world::{CommandId, Destination, WorldSpec};

/// The causal links between principals of a world: commands addressed to another
/// principal (reference counterparts excluded), in index order.
pub fn links(spec: &WorldSpec) -> Vec<CommandId> {
    spec.commands
        .iter()
        .enumerate()
        .filter(|(_, c)| !c.is_reference() && matches!(c.destination, Destination::Principal(_)))
        .map(|(i, _)| CommandId(i as u32))
        .collect()
}

/// The links of `spec` that travel off-bus at `fraction` (see the module's design
/// constraints: one uniform number per link from `seed`, nested in `fraction`).
pub fn off_bus(spec: &WorldSpec, fraction: f64, seed: u64) -> BTreeSet<CommandId> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x0FF_B005_5EED_u64.rotate_left(17));
    links(spec)
        .into_iter()
        .filter(|_| rng.gen::<f64>() < fraction)
        .collect()
}

/// What the verdict sees of a true profile.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Visibility {
    /// Share of the true profile's ℓ1 mass not seen.
    pub invisible: f64,
    /// Mass seen on principals whose true grade is 0.
    pub over_attribution: f64,
    /// Grade seen above the truth on truly involved principals.
    pub raised: f64,
}

/// Compares a seen profile with the true one (missing principals count as 0).
pub fn visibility(truth: &BTreeMap<String, f64>, seen: &BTreeMap<String, f64>) -> Visibility {
    let names: BTreeSet<&String> = truth.keys().chain(seen.keys()).collect();
    let mut total = 0.0;
    let mut hidden = 0.0;
    let mut v = Visibility::default();
    for p in names {
        let t = truth.get(p).copied().unwrap_or(0.0);
        let s = seen.get(p).copied().unwrap_or(0.0);
        total += t;
        if t == 0.0 {
            v.over_attribution += s;
        } else {
            hidden += (t - s).max(0.0);
            v.raised += (s - t).max(0.0);
        }
    }
    v.invisible = if total > 0.0 { hidden / total } else { 0.0 };
    v
}

/// Recorded relays with no recorded upstream: messages pinned
/// `policy@relay-any|relay-all` none of whose citations resolves (among `envelopes`)
/// to a derived message — they consume only roots (the shift order, sensor reports).
/// On a complete record every relay consumes a recorded command; a relay of nothing is
/// a derived command whose upstream is not on the bus, the record-side trace an
/// off-bus link leaves. Read from the signed envelopes only.
pub fn unexplained_relays(envelopes: &[SignedEnvelope]) -> Vec<MessageId> {
    let derived: BTreeSet<&MessageId> = envelopes
        .iter()
        .filter(|e| {
            !matches!(
                e.envelope().payload,
                Payload::ExternalInput { .. } | Payload::SensorReport { .. }
            )
        })
        .map(|e| e.id())
        .collect();
    envelopes
        .iter()
        .filter(|e| {
            let env = e.envelope();
            let relay = env
                .pins
                .tools
                .iter()
                .any(|t| t.name == "policy" && t.version.starts_with("relay"));
            relay && !env.citations.iter().any(|c| derived.contains(c))
        })
        .map(|e| e.id().clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn visibility_splits_hidden_over_and_raised_mass() {
        let truth = p(&[("a", 0.5), ("b", 0.5), ("d", 1.0), ("z", 0.0)]);
        let seen = p(&[("a", 0.0), ("b", 1.0), ("d", 1.0), ("z", 0.0)]);
        let v = visibility(&truth, &seen);
        assert_eq!(v.invisible, 0.25);
        assert_eq!(v.over_attribution, 0.0);
        assert_eq!(v.raised, 0.5);
        let v = visibility(&truth, &p(&[("z", 0.5)]));
        assert_eq!(v.over_attribution, 0.5);
        assert_eq!(v.invisible, 1.0);
    }

    #[test]
    fn off_bus_sets_are_nested_in_the_fraction() {
        let sc = crate::scenario::generate(crate::scenario::Family::Chain, 3);
        let mut prev = BTreeSet::new();
        for f in [0.0, 0.1, 0.2, 0.3, 0.5, 1.0] {
            let s = off_bus(&sc.spec, f, 9);
            assert!(prev.is_subset(&s));
            prev = s;
        }
        assert_eq!(prev.len(), links(&sc.spec).len());
        assert!(off_bus(&sc.spec, 0.0, 9).is_empty());
    }
}
