//! The epochs whose inclusion proofs one worker keeps: epoch `e` is kept by worker
//! `e mod peers`, which builds its proofs from the seal (the log's compact range
//! before it, its leaves, header and checkpoint) and proves its messages for every
//! emitter.
//!
//! Design constraints:
//! - 32 bytes per sealed leaf, kept once in the cluster, not per process: the
//!   keeper is the only worker that hashes the epoch's leaves.
//! - An epoch is kept while any shard holds one of its messages (live counts the
//!   shards send as they take and evict, [`crate::wire::Live`]), and the most recent
//!   [`KEEP_RECENT`] epochs every worker fed are kept regardless: the latest is the
//!   record root every bundle carries; epochs not yet fed by every worker may still
//!   have counts on their way, and are kept too.

use crate::wire::Key;
use audita_evidence::merkle::{leaf_hash, CompactRange};
use audita_evidence::EpochProofs;
use std::collections::BTreeMap;

/// The most recent epochs kept (up to the last one every worker fed, the record
/// root of the next bundle), whatever their live counts.
pub const KEEP_RECENT: u64 = 2;

/// One worker's kept epochs.
#[derive(Default)]
pub struct Epochs {
    proofs: BTreeMap<u64, EpochProofs>,
    live: BTreeMap<u64, i64>,
}

impl Epochs {
    /// Keeps epoch `number` from its seal: the compact range before it, its header,
    /// checkpoint and leaves. Returns false when the prefix does not describe a
    /// range (the epoch is then not kept, and its messages are proved by nobody: a
    /// bundle carrying them fails verification, never passes).
    pub fn keep(
        &mut self,
        number: u64,
        start: u64,
        prefix: &[audita_evidence::Hash],
        header: Vec<u8>,
        checkpoint: Vec<u8>,
        leaves: &[Vec<u8>],
    ) -> bool {
        let Some(before) = CompactRange::from_nodes(start, prefix) else {
            return false;
        };
        let hashes = leaves.iter().map(|l| leaf_hash(l)).collect();
        self.proofs.insert(
            number,
            EpochProofs::new(&before, header, checkpoint, hashes),
        );
        true
    }

    /// A shard took (`delta > 0`) or evicted messages of `epoch`.
    pub fn count(&mut self, epoch: u64, delta: i64) {
        let live = self.live.entry(epoch).or_insert(0);
        *live += delta;
        if *live == 0 {
            self.live.remove(&epoch);
        }
    }

    /// Drops the epochs no shard holds a message of, older than the recent ones
    /// up to `fed` (the last epoch every worker fed: every shard's count for it
    /// and the ones before arrived within the turn it was fed in).
    pub fn prune(&mut self, fed: u64) {
        let recent = fed.saturating_sub(KEEP_RECENT - 1);
        let live = &self.live;
        self.proofs
            .retain(|n, _| *n >= recent || live.get(n).is_some_and(|c| *c > 0));
        self.live.retain(|n, c| *n >= recent || *c != 0);
    }

    /// The encoded inclusion proofs of `leaves` (message, leaf index in the log) of
    /// `epoch`; an empty proof where the epoch is not kept or the leaf is not in it.
    pub fn prove(&self, epoch: u64, leaves: &[(Key, u64)]) -> Vec<(Key, Vec<u8>)> {
        let Some(p) = self.proofs.get(&epoch) else {
            return leaves.iter().map(|(k, _)| (*k, Vec::new())).collect();
        };
        let mut prover = p.prover();
        leaves
            .iter()
            .map(|(k, leaf)| {
                let proof = prover
                    .prove(*leaf)
                    .map(|proof| proof.encode())
                    .unwrap_or_default();
                (*k, proof)
            })
            .collect()
    }

    /// The header and checkpoint of a kept epoch.
    pub fn header(&self, epoch: u64) -> Option<(Vec<u8>, Vec<u8>)> {
        let p = self.proofs.get(&epoch)?;
        Some((p.header.clone(), p.checkpoint.clone()))
    }

    /// Epochs kept.
    pub fn kept(&self) -> usize {
        self.proofs.len()
    }

    /// Approximate bytes held (32 per leaf).
    pub fn memory(&self) -> usize {
        self.proofs
            .values()
            .map(|p| (p.end() - p.start) as usize * 32 + p.header.len() + p.checkpoint.len())
            .sum()
    }
}
