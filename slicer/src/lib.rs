//! Slicer stage: timely + differential-dataflow maintain the citation graph and the
//! production paths across epochs, and fan incident slices out on adverse events.
//!
//! The dataflow holds three input collections, each versioned by epoch number:
//! - `cites`: `(child, parent)` — certified message `child` cites `parent`;
//! - `realised`: message ids whose committed effect was realised in recorded state;
//! - `anchors`: `(incident, message)` — the actuation events an adverse predicate
//!   `Y` references.
//!
//! and maintains two outputs incrementally:
//! - the **incident slice** `S(Y)`: every message with a citation path into an anchor
//!   of the incident (the anchors included), across all epochs seen so far;
//! - the **production set**: the messages of the slice whose path into the anchor runs
//!   through realised links only — the production gate's candidates. Production can be
//!   created by citation: citing a message puts it on a path.
//!
//! Design constraints:
//! - Every update (insert or retraction) is applied at the epoch it arrives in; the
//!   outputs after epoch `e` equal a from-scratch recompute over the inputs of epochs
//!   `0..=e` (checked in `tests/incremental.rs` against [`recompute`]).
//! - Output order is deterministic: slices are `BTreeSet`s of ids.
//! - The dataflow runs on its own threads (`workers` timely workers); the [`Slicer`]
//!   handle is the only way in and out, one epoch at a time.

#![warn(missing_docs)]
#![warn(clippy::too_many_lines)]

mod dataflow;
pub mod spill;
pub mod stage;

pub use dataflow::Slicer;

use std::collections::{BTreeMap, BTreeSet};

/// A message id (the SHA-256 digest part of an evidence `MessageId`).
pub type NodeId = [u8; 32];
/// An incident number, assigned by the stage that declares the adverse outcome.
pub type IncidentId = u64;

/// The input updates of one epoch. A diff of `+1` inserts, `-1` retracts.
#[derive(Clone, Debug, Default)]
pub struct EpochBatch {
    /// `((child, parent), diff)` citation updates.
    pub cites: Vec<((NodeId, NodeId), isize)>,
    /// `(message, diff)` realised-effect updates.
    pub realised: Vec<(NodeId, isize)>,
    /// `((incident, anchor message), diff)` adverse-event anchors.
    pub anchors: Vec<((IncidentId, NodeId), isize)>,
}

/// The slice and production set of one incident.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IncidentSlice {
    /// Messages with a citation path into the incident's anchors (anchors included).
    pub slice: BTreeSet<NodeId>,
    /// The subset whose path runs through realised links only.
    pub produced: BTreeSet<NodeId>,
}

/// The state of every incident after some epoch: incident → slice.
pub type Slices = BTreeMap<IncidentId, IncidentSlice>;

/// Recomputes every incident slice from scratch out of the accumulated inputs — the
/// reference the incremental dataflow is tested against, and the fallback for a
/// one-off query.
pub fn recompute(
    cites: &BTreeSet<(NodeId, NodeId)>,
    realised: &BTreeSet<NodeId>,
    anchors: &BTreeSet<(IncidentId, NodeId)>,
) -> Slices {
    let mut parents: BTreeMap<NodeId, Vec<NodeId>> = BTreeMap::new();
    for (c, p) in cites {
        parents.entry(*c).or_default().push(*p);
    }
    let closure = |start: &[NodeId], through: &dyn Fn(&NodeId) -> bool| {
        let mut seen: BTreeSet<NodeId> = start.iter().copied().collect();
        let mut stack: Vec<NodeId> = start.to_vec();
        while let Some(n) = stack.pop() {
            for p in parents.get(&n).into_iter().flatten() {
                if through(p) && seen.insert(*p) {
                    stack.push(*p);
                }
            }
        }
        seen
    };
    let mut by_incident: BTreeMap<IncidentId, Vec<NodeId>> = BTreeMap::new();
    for (i, a) in anchors {
        by_incident.entry(*i).or_default().push(*a);
    }
    by_incident
        .into_iter()
        .map(|(i, starts)| {
            let slice = closure(&starts, &|_| true);
            let produced = closure(&starts, &|p| realised.contains(p));
            (i, IncidentSlice { slice, produced })
        })
        .collect()
}
