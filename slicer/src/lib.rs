//! Slicer stage: timely + differential-dataflow keep the citation graph of the
//! retention horizon across epochs, on one process or a cluster of processes, and
//! put each adverse declaration's self-contained, proven slice together.
//!
//! The rooms, from the bottom:
//! - [`wire`]: what workers send each other, and the owner of every message
//!   (`key mod peers`), epoch (`epoch mod peers`) and incident (`incident mod peers`).
//! - [`shard`]: one worker's held messages — bytes on disk ([`spill`]), time and
//!   facet indexes, completeness, eviction.
//! - [`epochs`]: the inclusion proofs of the epochs a worker keeps.
//! - [`dataflow`]: the dataflow every worker runs — shards, the citation graph
//!   arranged by child, each incident's closure (`iterate` over the graph from its
//!   anchors), and the questions emitters ask, exchanged by key.
//! - [`view`] and [`emit`]: an emitter's declarations, the rounds in which it
//!   gathers a slice, and the bundle computed from what came back.
//! - [`cluster`]: the members' connections, handed to timely's networking.
//! - [`stage`]: the stage — turns, the join and detectors on threads of their own,
//!   the run loop.
//!
//! Design constraints:
//! - A slice is a function of the record and the declaration: the same members,
//!   proofs and receipts whether one process or several hold the messages (checked
//!   in `cli/tests/it/slicer_cluster.rs` against one process on the same input).
//! - The closure after each turn equals a from-scratch recompute over the live
//!   citation edges ([`recompute`], checked in `tests/incremental.rs`).
//! - The production gate is not the slicer's: the engine gates production from the
//!   bundle it verifies (the slicer's own production set was computed and never read,
//!   and is gone with its arrangement).

#![warn(missing_docs)]
#![warn(clippy::too_many_lines)]

pub mod cluster;
pub mod dataflow;
pub mod emit;
pub mod epochs;
pub mod graph;
pub mod shard;
pub mod spill;
pub mod stage;
pub mod view;
pub mod wire;

pub use graph::Graph;
pub use wire::{IncidentId, Key};

use std::collections::{BTreeMap, BTreeSet};

/// The closure of every incident, from scratch: every key with a citation path into
/// one of the incident's anchors (the anchors included) over the edges `cites`
/// (`(child, parent)`) — the reference the incremental dataflow is tested against.
pub fn recompute(
    cites: &BTreeSet<(Key, Key)>,
    anchors: &BTreeSet<(IncidentId, Key)>,
) -> BTreeMap<IncidentId, BTreeSet<Key>> {
    let mut parents: BTreeMap<Key, Vec<Key>> = BTreeMap::new();
    for (c, p) in cites {
        parents.entry(*c).or_default().push(*p);
    }
    let mut by_incident: BTreeMap<IncidentId, Vec<Key>> = BTreeMap::new();
    for (i, a) in anchors {
        by_incident.entry(*i).or_default().push(*a);
    }
    by_incident
        .into_iter()
        .map(|(i, starts)| {
            let mut seen: BTreeSet<Key> = starts.iter().copied().collect();
            let mut stack = starts;
            while let Some(n) = stack.pop() {
                for p in parents.get(&n).into_iter().flatten() {
                    if seen.insert(*p) {
                        stack.push(*p);
                    }
                }
            }
            (i, seen)
        })
        .collect()
}
