//! The sealed log on disk: the one path by which signed messages become a sealed
//! record — their envelope and receipt segments, the epoch the log key signs, its
//! checkpoint co-signed by the keepers, the static tiled log.
//!
//! The sealer stage closes every epoch through [`SealedLog::close`]; what seals a
//! record without a bus (`audita trace seal`, `audita sample-record`) opens a new
//! directory with [`SealedLog::create`] and seals each batch with
//! [`SealedLog::seal`], so every record on disk is written the same way and read
//! back by the same verifier.
//!
//! Design constraints:
//! - **Order on disk.** Segments first, then the epoch and its checkpoint, then the
//!   tiles: an epoch is never on disk before the envelopes it seals, and the tiles
//!   are caught up from the epochs after a crash (`TileLog::open`).
//! - **Offline records are a function of their input.** The keepers of an offline
//!   log co-sign at the POSIX second of the epoch's close (or one the caller names),
//!   not at their wall clock's, so sealing the same messages twice writes the same
//!   bytes.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use audita_evidence::merkle::{leaf_hash, CompactRange};
use audita_evidence::{
    Hash, Keeper, KeyRegistry, MessageId, PayloadStore, PrincipalRegistry, SealedEpoch, Sealer,
    SignedEnvelope, SigningKey,
};
use audita_record::tiles::TileLog;
use audita_record::RecordWriter;

use crate::error::StageError;
use crate::witness::{LocalWitness, Pending, Witness, Witnesses};

/// A record directory being sealed: its writer, its tiles, the log's Merkle state
/// and its keepers.
pub struct SealedLog {
    pub(crate) dir: PathBuf,
    pub(crate) keys: KeyRegistry,
    pub(crate) writer: RecordWriter,
    pub(crate) tiles: TileLog,
    pub(crate) sealer: Sealer,
    pub(crate) witnesses: Witnesses,
    /// The second the keepers of an offline log co-sign at.
    clock: Option<Arc<AtomicU64>>,
}

/// One epoch as it was sealed and written.
pub struct Closed {
    /// The epoch, with its checkpoint as the keepers left it.
    pub epoch: SealedEpoch,
    /// The log's compact range before the epoch.
    pub prefix: Vec<Hash>,
    /// The epoch's leaves (message ids' leaf bytes).
    pub leaves: Vec<Vec<u8>>,
    /// Its checkpoint note as written.
    pub checkpoint: Vec<u8>,
    /// Whether the checkpoint carries the keepers' quorum.
    pub quorum_met: bool,
    /// Older checkpoints that gained co-signatures (rewritten on disk).
    pub older: usize,
}

/// What a new offline log is made of.
pub struct Offline<'a> {
    /// Log origin (the checkpoint's first line).
    pub origin: &'a str,
    /// The log's signing key.
    pub log_key: SigningKey,
    /// Public keys of principals, keepers and the log.
    pub keys: &'a KeyRegistry,
    /// The principal registry bound into every epoch header (`None`: none named).
    pub registry: Option<&'a PrincipalRegistry>,
    /// The keepers whose keys are at hand (name, key); every one must co-sign.
    pub keepers: &'a [(String, SigningKey)],
}

impl SealedLog {
    /// Starts a new record in `dir` (which must not hold one) for sealing offline.
    pub fn create(dir: &Path, o: Offline<'_>) -> Result<SealedLog, StageError> {
        let inconsistent = |e: String| StageError::Inconsistent(dir.to_path_buf(), e);
        if dir.join("FORMAT").exists() {
            return Err(inconsistent("already holds a record".into()));
        }
        let mut writer = RecordWriter::create(dir, o.keys)?;
        let (tiles, _) = TileLog::open(dir)?;
        let mut sealer =
            Sealer::new(o.origin, o.log_key).map_err(|e| inconsistent(e.to_string()))?;
        if let Some(reg) = o.registry {
            writer.write_registry(reg)?;
            sealer.set_registry(reg.digest());
        }
        let clock = Arc::new(AtomicU64::new(0));
        let mut local: Vec<Box<dyn Witness>> = Vec::new();
        for (name, key) in o.keepers {
            let keeper = Keeper::new(name, key.clone()).map_err(|e| inconsistent(e.to_string()))?;
            local.push(Box::new(
                LocalWitness::new(keeper, o.keys.clone()).with_clock(clock.clone()),
            ));
        }
        let quorum = local.len();
        Ok(SealedLog {
            dir: dir.to_path_buf(),
            keys: o.keys.clone(),
            writer,
            tiles,
            sealer,
            witnesses: Witnesses::new(local, quorum, CompactRange::new()),
            clock: Some(clock),
        })
    }

    /// A log over an open record (the sealer stage's): `sealer` holds its Merkle
    /// state, `witnesses` its keepers.
    pub(crate) fn resume(
        dir: &Path,
        keys: &KeyRegistry,
        writer: RecordWriter,
        tiles: TileLog,
        sealer: Sealer,
    ) -> SealedLog {
        SealedLog {
            dir: dir.to_path_buf(),
            keys: keys.clone(),
            writer,
            tiles,
            sealer,
            witnesses: Witnesses::new(Vec::new(), 0, CompactRange::new()),
            clock: None,
        }
    }

    /// Seals `envelopes` (in log order) and the receipt frames `receipts` as one
    /// epoch closed at `closed_at` (ms), its keepers co-signing at that second.
    pub fn seal(
        &mut self,
        envelopes: &[SignedEnvelope],
        receipts: &[&[u8]],
        closed_at: u64,
    ) -> Result<Closed, StageError> {
        self.seal_at(envelopes, receipts, closed_at, closed_at / 1000)
    }

    /// [`Self::seal`], the keepers co-signing at the POSIX second `cosigned_at`.
    pub fn seal_at(
        &mut self,
        envelopes: &[SignedEnvelope],
        receipts: &[&[u8]],
        closed_at: u64,
        cosigned_at: u64,
    ) -> Result<Closed, StageError> {
        for env in envelopes {
            self.sealer.append_envelope(env);
        }
        if let Some(c) = &self.clock {
            c.store(cosigned_at, Ordering::Relaxed);
        }
        let frames: Vec<&[u8]> = envelopes.iter().map(SignedEnvelope::as_bytes).collect();
        self.close(&frames, receipts, closed_at)
    }

    /// Closes the epoch of what the log's Merkle state holds pending: writes the
    /// envelope frames not on disk yet (`unwritten`) and the receipt frames, signs
    /// the epoch at `closed_at` (ms), has the keepers co-sign it (and offers them
    /// what they missed), writes the epoch and its checkpoint, then the tiles.
    pub fn close(
        &mut self,
        unwritten: &[&[u8]],
        receipts: &[&[u8]],
        closed_at: u64,
    ) -> Result<Closed, StageError> {
        if !unwritten.is_empty() {
            self.writer.write_envelopes(unwritten)?;
        }
        if !receipts.is_empty() {
            self.writer.write_receipts(receipts)?;
        }
        // The log's compact range before this epoch (readers starting at it extend
        // it); the sealer's range moves past the epoch as it closes.
        let prefix = self.sealer.sealed().nodes();
        let mut epoch = self.sealer.close_epoch(closed_at);
        let hashes: Vec<Hash> = epoch
            .leaves
            .iter()
            .map(|id| leaf_hash(&id.leaf_bytes()))
            .collect();
        // The keepers: each gets the proof from its own last size (C2SP
        // tlog-witness), for this checkpoint and any it missed.
        let (older, head) = self.witnesses.seal(
            epoch.header.number,
            &hashes,
            &epoch.checkpoint,
            &self.keys,
            &self.dir,
        );
        epoch.checkpoint = head.checkpoint;
        self.writer.write_epoch(&epoch)?;
        self.rewrite_checkpoints(&older, epoch.header.number)?;
        let leaves: Vec<Vec<u8>> = epoch.leaves.iter().map(MessageId::leaf_bytes).collect();
        let checkpoint = epoch.checkpoint.to_text().into_bytes();
        self.tiles
            .append_epoch(epoch.header.start, &leaves, &checkpoint)?;
        Ok(Closed {
            epoch,
            prefix,
            leaves,
            checkpoint,
            quorum_met: head.quorum_met,
            older: older.len(),
        })
    }

    /// Offers the checkpoints keepers missed to those due again; writes those that
    /// gained co-signatures and returns them.
    pub fn catch_up(&mut self) -> Result<Vec<Pending>, StageError> {
        let changed = self.witnesses.run(&self.keys, &self.dir);
        self.rewrite_checkpoints(&changed, u64::MAX)?;
        Ok(changed)
    }

    /// Writes again the checkpoint notes that gained co-signatures (all but the one of
    /// epoch `skip`, just written with its own).
    fn rewrite_checkpoints(&mut self, changed: &[Pending], skip: u64) -> Result<(), StageError> {
        for p in changed.iter().filter(|p| p.index != skip) {
            let note = p.checkpoint.to_text();
            self.writer.replace_checkpoint(p.index, note.as_bytes())?;
            // The tiled log's `checkpoint` gains the lines too when it is this tree.
            self.tiles.update_checkpoint(note.as_bytes())?;
        }
        Ok(())
    }

    /// Writes a payload store beside the log (ciphertexts, keys not yet shredded).
    pub fn write_payloads(&mut self, store: &PayloadStore) -> Result<(), StageError> {
        Ok(self.writer.write_payloads(store)?)
    }

    /// The keepers and what the log knows of each.
    pub fn witnesses(&self) -> &Witnesses {
        &self.witnesses
    }
}
