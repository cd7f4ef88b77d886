//! The streaming sealer stage: accepted envelopes and receipts in, durable sealed
//! epochs out (on disk), and their seals on `audita.epochs`
//! ([`audita_topics::EpochSeal`]: header, checkpoint, the ids and receipt digests
//! sealed, and how far it read each `audita.accepted` partition — not the bytes,
//! which readers take from `audita.accepted` once: the `audita-join` crate).
//!
//! Design constraints:
//! - Idempotent by message id: a message already sealed or pending is never sealed
//!   again, so re-delivery after a crash changes nothing. The set of sealed ids is
//!   rebuilt from the record directory on start ([`SealerStage::open`]).
//! - Bounded memory: sealed ids (and receipt digests) are remembered for a dedupe
//!   horizon of record time behind the event-time watermark
//!   ([`SealerStage::with_horizon`], default [`DEFAULT_DEDUPE_HORIZON_MS`]) —
//!   re-delivery after a crash comes from uncommitted offsets, far younger than that.
//!   The remembered digests are keyed hash sets forgotten by whole seconds of record
//!   time (at most a second later than the horizon asks).
//!   An envelope older than the forgotten range cannot be told apart from a
//!   re-delivered one, so it is not sealed but quarantined to `audita.suspect` with
//!   reason `late` (published before its offset is committed: nothing is lost). The
//!   log itself is kept as a compact range: keepers' consistency proofs come from the
//!   previous checkpoint's compact range and the new epoch's leaves.
//! - Offsets are committed only after the epoch holding the records is on disk
//!   (every file written atomically) and published: a SIGKILL at any point loses no
//!   accepted message and seals none twice.
//! - Envelopes written to disk but not yet covered by an epoch (a crash between the
//!   two writes) are taken back into the open window on restart, not rewritten.
//! - An epoch closes when it holds `epoch_messages` messages and receipts, when they
//!   hold [`EPOCH_MAX_BYTES`] (so a published epoch stays far below the bus's record
//!   limit whatever the payloads), or when the oldest pending message waited
//!   `epoch_age` — at the end of the `audita.accepted` record that made it due: a
//!   record (a batch of ingest's, [`audita_topics::accepted`]) is taken whole, so an
//!   epoch may hold up to one batch more than `epoch_messages` (and
//!   [`audita_topics::accepted::MAX_BATCH_BYTES`] more than [`EPOCH_MAX_BYTES`]), and
//!   every seal's positions name records wholly taken; epochs are numbered and
//!   chained by the pure [`audita_evidence::Sealer`].
//! - Few files per epoch: its envelope and receipt segments, header and checkpoint
//!   (each written atomically and synced), the tiles, and the sealer's watermark file
//!   at most once per [`WATERMARK_EVERY`] (an older watermark read at restart only
//!   makes the sealer forget less).
//! - Each checkpoint is offered to the deployment's keepers ([`crate::witness`]) with
//!   a consistency proof from each keeper's last co-signed size; an epoch with fewer
//!   than the quorum of valid co-signatures is sealed and published all the same,
//!   counted as under-witnessed, and keepers that come back co-sign every checkpoint
//!   they missed, oldest first, whose notes on disk then carry their lines.
//! - The record's static tiled log (`audita_record::tiles`: `checkpoint`, `tile/`)
//!   is appended after each epoch and its checkpoint are on disk, so tiles never
//!   lead the record; on open it is caught up with (or rebuilt from) the record.

use crate::log::SealedLog;
use crate::parts::{Dedupe, Marks, Window};
use crate::witness::{LocalWitness, Witness, Witnesses};
use audita_bus::{Consumer, Delivery, Producer};
use audita_evidence::checkpoint::SignedCheckpoint;
use audita_evidence::merkle::{leaf_hash, CompactRange};
use audita_evidence::{
    EpochHeader, Hash, Keeper, KeyRegistry, MessageId, Receipt, Sealer, SignedEnvelope, SigningKey,
};
use audita_record::tiles::TileLog;
use audita_record::{self as disk, ReadError, RecordWriter};
use audita_topics::accepted::{FRAME_ENVELOPE, FRAME_RECEIPT, FRAME_WATERMARK};
use audita_topics::names as topics;
use audita_topics::{EpochSeal, Quarantined, Watermark};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Default dedupe horizon: ten minutes of record time. It bounds how late a
/// re-delivered or straggling envelope may arrive and still be told apart from a
/// duplicate. The sealer keeps about 280 bytes per id with its receipt (so about
/// 1.2 GB for a 10-minute horizon at 7k msg/s), so set it to what re-deliveries
/// need.
pub const DEFAULT_DEDUPE_HORIZON_MS: u64 = 600_000;
/// Bytes of pending envelopes and receipts at which an epoch closes, however few
/// messages it holds (ingest refuses envelopes over
/// `audita_ingest::MAX_ENVELOPE_BYTES`, so a published epoch stays below a quarter of
/// [`audita_bus::MAX_RECORD_BYTES`]).
pub const EPOCH_MAX_BYTES: usize = 4 << 20;

/// How often at most the sealer keeps its event-time watermark on disk
/// ([`WATERMARK_FILE`]); it is also kept when the stage stops.
pub const WATERMARK_EVERY: Duration = Duration::from_secs(1);

pub use crate::error::StageError;

/// Configuration of the sealer stage.
#[derive(Clone)]
pub struct SealerConfig {
    /// The record directory.
    pub dir: PathBuf,
    /// Log origin (checkpoint origin line).
    pub origin: String,
    /// The log's signing key.
    pub log_key: SigningKey,
    /// Keepers that co-sign every checkpoint (name, key).
    pub keepers: Vec<(String, SigningKey)>,
    /// Public keys of principals, keepers and the log.
    pub keys: KeyRegistry,
    /// Close an epoch at this many messages and receipts.
    pub epoch_messages: usize,
    /// Close a non-empty epoch once its oldest message waited this long.
    pub epoch_age: Duration,
    /// Prefix of topic names.
    pub topic_prefix: String,
    /// Partitions of the accepted topic this sealer reads (for the event-time watermark).
    pub input_partitions: usize,
    /// The public principal registry in force: stored in the record and its digest
    /// bound into every epoch header sealed from now on (`None`: headers name none).
    pub registry: Option<audita_evidence::PrincipalRegistry>,
}

/// The sealer stage's state.
pub struct SealerStage {
    config: SealerConfig,
    /// The record being sealed: writer, tiles, Merkle state and keepers (built once
    /// the log is known).
    log: SealedLog,
    /// The latest checkpoint read back at open: keepers held in-process resume from it.
    latest: Option<SignedCheckpoint>,
    /// What must never be sealed again (within the horizon).
    dedupe: Dedupe,
    /// Quarantine records for late envelopes, published at the next close.
    late: Vec<Vec<u8>>,
    /// What the next epoch seals.
    window: Window,
    /// Per partition of `audita.accepted`, the offset of the last record taken from
    /// and the index of the last frame taken in it (published with each seal: see
    /// [`EpochSeal::positions`]).
    positions: BTreeMap<u32, (u64, u32)>,
    /// A record taken in part (an epoch became due in its middle): the delivery and
    /// the index of its next frame. Its offset is not committed until it is done.
    current: Option<(Delivery, usize)>,
    /// Last delivery per partition not yet committed.
    uncommitted: std::collections::BTreeMap<(String, u32), Delivery>,
    last_size: u64,
    clock_ms: u64,
    stats: SealerStats,
    /// The event-time marks.
    marks: Marks,
    /// The last epoch on disk, published again after a restart.
    republish: Option<EpochSeal>,
    /// Called after every closed epoch (live metrics).
    observer: Option<Observer>,
}

/// A callback seeing the sealer's counters and watermark after every epoch.
pub type Observer = Box<dyn FnMut(&SealerStats, u64) + Send>;

impl SealerStage {
    /// Opens (or creates) the record directory and rebuilds the sealer's state from it.
    pub fn open(config: SealerConfig) -> Result<SealerStage, StageError> {
        let dir = config.dir.clone();
        let fresh = !dir.join("FORMAT").exists();
        let writer = if fresh {
            RecordWriter::create(&dir, &config.keys)?
        } else {
            RecordWriter::open(&dir)?
        };
        let (tiles, _) = TileLog::open(&dir)?;
        let sealer = Sealer::new(&config.origin, config.log_key.clone())
            .map_err(|e| StageError::Inconsistent(dir.clone(), e.to_string()))?;
        let mut stage = SealerStage {
            log: SealedLog::resume(&dir, &config.keys, writer, tiles, sealer),
            latest: None,
            dedupe: Dedupe::new(DEFAULT_DEDUPE_HORIZON_MS),
            late: Vec::new(),
            window: Window::default(),
            positions: BTreeMap::new(),
            current: None,
            uncommitted: Default::default(),
            last_size: 0,
            clock_ms: 0,
            stats: SealerStats::default(),
            marks: Marks::new(config.input_partitions),
            republish: None,
            observer: None,
            config,
        };
        if !fresh {
            stage.recover()?;
        }
        // Keepers held in this process resume from their co-signature on the latest
        // checkpoint (if it carries one): they never co-sign a fork of what they saw.
        let mut local: Vec<Box<dyn Witness>> = Vec::new();
        for (name, key) in &stage.config.keepers {
            let keeper = match &stage.latest {
                Some(cp) => Keeper::resume(name, key.clone(), cp, &stage.config.keys),
                None => Keeper::new(name, key.clone()),
            }
            .map_err(|e| StageError::Inconsistent(dir.clone(), e.to_string()))?;
            local.push(Box::new(LocalWitness::new(
                keeper,
                stage.config.keys.clone(),
            )));
        }
        let quorum = local.len();
        stage.log.witnesses = Witnesses::new(local, quorum, stage.log.sealer.sealed().clone());
        // The registry in force from the next epoch on (after a restart too: a rotated
        // key's registry applies to what is sealed after it).
        if let Some(reg) = stage.config.registry.clone() {
            stage.log.writer.write_registry(&reg)?;
            stage.log.sealer.set_registry(reg.digest());
        }
        Ok(stage)
    }

    /// Rebuilds the state from the record directory, one file at a time: the log's
    /// compact range from the epochs, the ids and receipt digests of the last horizon,
    /// the envelopes written after the last epoch (back into the open window), and
    /// the last epoch, published again (a crash may have come between writing it and
    /// publishing it). Envelope segments hold exactly the sealed envelopes in log
    /// order, then the unsealed ones; anything else is an inconsistent directory.
    fn recover(&mut self) -> Result<(), StageError> {
        let dir = self.config.dir.clone();
        let bad = |what: String| StageError::Inconsistent(dir.clone(), what);
        let mut epochs = disk::Stream::segments(&dir, "epochs", "epoch-", b'H')?;
        let mut envelopes = disk::Stream::segments(&dir, "segments", "envelopes-", b'E')?;
        let mut log = CompactRange::new();
        // What may be forgotten on restart is what was forgettable before it: the
        // horizon behind the event-time watermark the sealer last published (kept in
        // WATERMARK_FILE), never behind the newest timestamp read back — partitions
        // are consumed independently, so a later cell's receipts can be sealed before
        // an earlier cell's envelopes arrive, and those must not become `late`.
        let cutoff = read_watermark(&dir).saturating_sub(self.dedupe.horizon_ms);
        // The last epoch read: header, leaves, the log's compact range before it.
        type LastEpoch = (EpochHeader, Vec<Vec<u8>>, Vec<Hash>);
        let mut last: Option<LastEpoch> = None;
        while let Some(frames) = epochs.next_file() {
            let mut frames = frames?.into_iter();
            let header = EpochHeader::decode(frames.next().unwrap_or_default())
                .map_err(|e| bad(format!("epoch header: {e}")))?;
            let leaves: Vec<Vec<u8>> = frames.collect();
            let prefix = log.nodes();
            for leaf in &leaves {
                let id = MessageId::from_leaf_bytes(leaf).map_err(|e| bad(format!("leaf: {e}")))?;
                log.append(leaf_hash(leaf));
                let bytes = envelopes
                    .next()
                    .ok_or_else(|| bad(format!("sealed message {id} has no stored envelope")))??;
                let env = SignedEnvelope::decode(bytes)
                    .map_err(|e| bad(format!("stored envelope: {e}")))?;
                if env.id() != &id {
                    return Err(bad(format!(
                        "stored envelopes are not in log order at leaf {}",
                        log.size() - 1
                    )));
                }
                self.remember_sealed(id.digest, env.envelope().timestamp);
            }
            self.prune(cutoff);
            last = Some((header, leaves, prefix));
        }
        if let Some((header, leaves, prefix)) = last {
            self.log.sealer =
                Sealer::resume_range(self.config.log_key.clone(), log.clone(), &header)
                    .map_err(|e| bad(format!("seals do not reproduce: {e}")))?;
            self.last_size = header.size;
            self.clock_ms = header.closed_at;
            let checkpoint = disk::last_checkpoint(&dir)?.unwrap_or_default();
            self.latest = SignedCheckpoint::parse(&checkpoint).ok();
            self.republish = Some(EpochSeal {
                header: header.as_bytes().to_vec(),
                checkpoint,
                prefix,
                leaves,
                receipts: disk::last_receipts(&dir)?
                    .iter()
                    .map(|r| audita_evidence::sha256(r))
                    .collect(),
                positions: Vec::new(),
                watermark: 0,
            });
        }
        for r in disk::Stream::segments(&dir, "segments", "receipts-", b'R')? {
            let r = r?;
            let t = Receipt::decode(r.clone())
                .map(|r| r.timestamp())
                .unwrap_or(0);
            self.remember_receipt(audita_evidence::sha256(&r), t);
            if self.dedupe.receipts.len().is_multiple_of(4096) {
                self.prune(cutoff);
            }
        }
        // Envelopes on disk that no epoch covers: back into the open window.
        for bytes in envelopes {
            let env =
                SignedEnvelope::decode(bytes?).map_err(|e| bad(format!("stored envelope: {e}")))?;
            if !self.window.holds(&env.id().digest) {
                self.log.sealer.append_envelope(&env);
                self.window.push_envelope(env);
                self.window.on_disk += 1;
            }
        }
        self.prune(cutoff);
        Ok(())
    }

    /// Calls `f` with the counters and the watermark after every closed epoch.
    pub fn with_observer(mut self, f: Observer) -> SealerStage {
        self.observer = Some(f);
        self
    }

    /// Sets the dedupe horizon (record-time ms; see the module docs).
    pub fn with_horizon(mut self, horizon_ms: u64) -> SealerStage {
        self.dedupe.horizon_ms = horizon_ms;
        self
    }

    /// Sealed ids remembered for deduplication (those within the horizon).
    pub fn sealed_count(&self) -> usize {
        self.dedupe.sealed.len()
    }

    fn take_watermark(&mut self, d: &Delivery, bytes: &[u8]) -> bool {
        let Ok(w) = serde_json::from_slice::<Watermark>(bytes) else {
            return false;
        };
        self.marks.take(d.partition, w);
        true
    }

    fn remember_sealed(&mut self, digest: Hash, timestamp: u64) {
        self.dedupe.sealed.insert(digest, timestamp);
    }

    fn remember_receipt(&mut self, digest: Hash, timestamp: u64) -> bool {
        self.dedupe.receipts.insert(digest, timestamp)
    }

    /// The event-time low watermark: the smallest ingest watermark, once every
    /// source partition's has arrived on every accepted partition (0 before).
    pub fn watermark(&self) -> u64 {
        self.marks.low()
    }

    /// Forgets sealed ids and receipt digests older than the horizon behind the
    /// watermark.
    fn forget(&mut self) {
        self.dedupe.forget_behind(self.marks.low());
    }

    /// Forgets sealed ids and receipt digests stamped before `cutoff`.
    fn prune(&mut self, cutoff: u64) {
        self.dedupe.prune(cutoff);
    }

    fn quarantine_late(&mut self, d: &Delivery, index: usize, frame: &[u8], timestamp: u64) {
        let record = Quarantined::of(
            &d.topic,
            d.partition,
            d.offset,
            "late",
            &format!(
                "frame {index} of the record: timestamp {timestamp} ms is older than the \
                 sealer's dedupe horizon ({} ms); it cannot be told apart from a re-delivery, \
                 so it is not sealed",
                self.dedupe.forgotten_before
            ),
            frame,
        );
        self.late
            .push(serde_json::to_vec(&record).unwrap_or_default());
        self.stats.late += 1;
    }

    /// Takes one record of `audita.accepted`, whole: every frame of a batch
    /// ([`audita_topics::accepted::frames`]), or a single frame. Returns whether any
    /// of its messages or receipts was new (not a duplicate of one sealed or
    /// pending, nor a watermark). The stage's own loop ([`Self::run`]) takes records
    /// frame by frame instead and closes an epoch in the middle of one when it is due.
    pub fn accept(&mut self, d: Delivery) -> bool {
        self.finish_current();
        self.current = Some((d, 0));
        self.take_current(false)
    }

    /// Takes what is left of a record taken in part.
    fn finish_current(&mut self) {
        if self.current.is_some() {
            self.take_current(false);
        }
    }

    /// Takes the frames of the current record from its next one on, stopping after a
    /// fresh one when `until_due` and the window is due; a record taken to its end
    /// joins the deliveries to commit. Returns whether any frame taken was fresh.
    fn take_current(&mut self, until_due: bool) -> bool {
        let Some((d, next)) = self.current.take() else {
            return false;
        };
        let mut any = false;
        let mut frames = audita_topics::accepted::frames(&d.payload);
        let mut index = next;
        for frame in frames.by_ref().skip(next) {
            let fresh = self.accept_frame(&d, index, frame);
            self.positions.insert(
                d.partition,
                (d.offset, u32::try_from(index).unwrap_or(u32::MAX - 1)),
            );
            any |= fresh;
            index += 1;
            if until_due && fresh && self.due() {
                let more = audita_topics::accepted::frames(&d.payload)
                    .nth(index)
                    .is_some();
                if more {
                    self.current = Some((d, index));
                    return any;
                }
                break;
            }
        }
        if frames.damaged() {
            tracing::error!(
                partition = d.partition,
                offset = d.offset,
                "damaged batch record on audita.accepted: the frames after the damage are lost"
            );
        }
        self.positions
            .insert(d.partition, (d.offset, audita_topics::WHOLE_RECORD));
        self.uncommitted.insert((d.topic.clone(), d.partition), d);
        any
    }

    /// Takes frame `index` of record `d`.
    fn accept_frame(&mut self, d: &Delivery, index: usize, frame: &[u8]) -> bool {
        if let Some((&FRAME_WATERMARK, bytes)) = frame.split_first() {
            self.take_watermark(d, bytes);
            return false;
        }
        let fresh = match frame.split_first() {
            Some((&FRAME_ENVELOPE, bytes)) => match SignedEnvelope::decode(bytes.to_vec()) {
                Ok(env)
                    if !self.dedupe.sealed.contains(&env.id().digest)
                        && !self.window.holds(&env.id().digest) =>
                {
                    let t = env.envelope().timestamp;
                    if t < self.dedupe.forgotten_before {
                        self.quarantine_late(d, index, frame, t);
                        return false;
                    }
                    self.log.sealer.append_envelope(&env);
                    self.window.push_envelope(env)
                }
                _ => false,
            },
            Some((&FRAME_RECEIPT, bytes)) => match Receipt::decode(bytes.to_vec()) {
                Ok(r) => {
                    let digest = audita_evidence::sha256(bytes);
                    // A receipt older than the horizon is taken again: its message
                    // is outside every slice still being cut; a duplicate of it
                    // would be harmless anyway.
                    let fresh = r.timestamp() < self.dedupe.forgotten_before
                        || self.remember_receipt(digest, r.timestamp());
                    if fresh {
                        self.window.push_receipt(bytes, digest);
                    }
                    fresh
                }
                Err(_) => false,
            },
            _ => false,
        };
        if fresh {
            self.stats.accepted += 1;
        } else {
            self.stats.duplicates += 1;
        }
        fresh
    }

    /// Whether the open window should close now.
    pub fn due(&self) -> bool {
        self.window.due(
            self.config.epoch_messages,
            EPOCH_MAX_BYTES,
            self.config.epoch_age,
        )
    }

    /// Closes the open window (if it holds anything): writes segments, the epoch and
    /// the co-signed checkpoint to disk, publishes the epoch, then commits offsets.
    pub fn close(
        &mut self,
        out: &mut dyn Producer,
        input: &mut dyn Consumer,
    ) -> Result<Option<u64>, StageError> {
        self.publish_late(out)?;
        if self.window.is_empty() {
            self.commit(input)?;
            return Ok(None);
        }
        // Epoch time: monotone, derived from the sealed messages' own timestamps so
        // the record is a function of its input.
        let newest = self
            .window
            .envelopes
            .iter()
            .map(|e| e.envelope().timestamp)
            .max()
            .unwrap_or(self.clock_ms);
        self.clock_ms = self.clock_ms.max(newest);
        let frames: Vec<&[u8]> = self.window.envelopes[self.window.on_disk..]
            .iter()
            .map(|e| e.as_bytes())
            .collect();
        let receipts: Vec<&[u8]> = self.window.receipts.iter().map(Vec::as_slice).collect();
        let closed = self.log.close(&frames, &receipts, self.clock_ms)?;
        let epoch = &closed.epoch;
        if !closed.quorum_met {
            self.stats.under_witnessed += 1;
            tracing::warn!(
                epoch = epoch.header.number,
                size = epoch.header.size,
                quorum = self.log.witnesses.quorum(),
                "epoch under-witnessed: sealed and published without the keepers' quorum"
            );
        }
        self.stats.keepers_behind = self.log.witnesses.behind() as u64;
        self.stats.cosignatures = self.log.witnesses.collected();
        let number = epoch.header.number;
        let msg = EpochSeal {
            header: epoch.header.as_bytes().to_vec(),
            checkpoint: closed.checkpoint,
            prefix: closed.prefix,
            leaves: closed.leaves,
            receipts: std::mem::take(&mut self.window.receipt_digests),
            positions: self
                .positions
                .iter()
                .map(|(p, (o, i))| (*p, *o, *i))
                .collect(),
            watermark: self.watermark(),
        };
        let topic = format!("{}{}", self.config.topic_prefix, topics::EPOCHS);
        out.send(&topic, epoch.header.origin.as_bytes(), &msg.encode())?;
        out.flush()?;
        self.marks.published = msg.watermark;
        if self
            .marks
            .saved
            .is_none_or(|(at, _)| at.elapsed() >= WATERMARK_EVERY)
        {
            self.save_watermark(msg.watermark)?;
        }
        self.last_size = closed.epoch.header.size;
        self.stats.sealed += closed.epoch.leaves.len() as u64;
        self.stats.epochs += 1;
        for env in self.window.sealed() {
            self.remember_sealed(env.id().digest, env.envelope().timestamp);
        }
        self.forget();
        let watermark = self.watermark();
        if let Some(f) = self.observer.as_mut() {
            f(&self.stats, watermark);
        }
        self.commit(input)?;
        Ok(Some(number))
    }

    /// Keeps `watermark` in [`WATERMARK_FILE`] unless it is already there.
    fn save_watermark(&mut self, watermark: u64) -> Result<(), StageError> {
        if self.marks.saved.is_none_or(|(_, w)| w != watermark) {
            write_watermark(&self.config.dir, watermark)?;
        }
        self.marks.saved = Some((Instant::now(), watermark));
        Ok(())
    }

    /// Publishes quarantine records of late envelopes (before their offsets commit).
    fn publish_late(&mut self, out: &mut dyn Producer) -> Result<(), StageError> {
        if self.late.is_empty() {
            return Ok(());
        }
        let topic = format!("{}{}", self.config.topic_prefix, topics::SUSPECT);
        for r in &self.late {
            out.send(&topic, b"late", r)?;
        }
        out.flush()?;
        self.late.clear();
        Ok(())
    }

    fn commit(&mut self, input: &mut dyn Consumer) -> Result<(), StageError> {
        let done = std::mem::take(&mut self.uncommitted);
        input.commit_all(&done.values().collect::<Vec<_>>())?;
        Ok(())
    }

    /// Adds keepers reached through another transport (a tlog-witness service's
    /// client) and sets the quorum of valid co-signatures an epoch needs (a quorum
    /// above the number of keepers reachable is never met: every epoch is then
    /// under-witnessed, as it is).
    pub fn with_witnesses(mut self, remote: Vec<Box<dyn Witness>>, quorum: usize) -> SealerStage {
        for w in remote {
            self.log.witnesses.add(w);
        }
        self.log.witnesses.set_quorum(quorum);
        self
    }

    /// Offers the checkpoints keepers missed to those due again (the log is idle, so
    /// no new epoch would carry them); their co-signatures are added to the
    /// checkpoint notes on disk.
    pub fn catch_up(&mut self) -> Result<(), StageError> {
        let changed = self.log.catch_up()?;
        self.stats.cosignatures = self.log.witnesses.collected();
        if let Some(p) = changed.last() {
            tracing::info!(
                size = p.checkpoint.checkpoint().size,
                checkpoints = changed.len(),
                "keepers caught up"
            );
        }
        self.stats.keepers_behind = self.log.witnesses.behind() as u64;
        Ok(())
    }

    /// Counters since start.
    pub fn stats(&self) -> SealerStats {
        self.stats
    }

    /// Runs until `stop` is set (then seals what is pending) or, with `max_idle`,
    /// until no input arrived for that long.
    pub fn run(
        &mut self,
        input: &mut dyn Consumer,
        out: &mut dyn Producer,
        stop: &AtomicBool,
        max_idle: Option<Duration>,
    ) -> Result<(), StageError> {
        if let Some(msg) = self.republish.take() {
            let topic = format!("{}{}", self.config.topic_prefix, topics::EPOCHS);
            let origin = self.config.origin.clone();
            out.send(&topic, origin.as_bytes(), &msg.encode())?;
            out.flush()?;
        }
        let mut idle_since = Instant::now();
        while !stop.load(Ordering::SeqCst) {
            if self.current.is_some() {
                // The rest of a record an epoch closed in the middle of.
                self.take_current(true);
            } else {
                match input.poll(Duration::from_millis(20))? {
                    Some(d) => {
                        idle_since = Instant::now();
                        self.current = Some((d, 0));
                        self.take_current(true);
                    }
                    None if max_idle.is_some_and(|m| idle_since.elapsed() >= m) => break,
                    None => {}
                }
            }
            if self.due() {
                self.close(out, input)?;
            } else if self.log.witnesses.catch_up_due(Instant::now()) {
                self.catch_up()?;
            }
        }
        // A record taken in part is finished before the last epoch closes: its
        // offset then commits with it.
        self.finish_current();
        self.close(out, input)?;
        // The watermark of the last epoch published, kept on the way out.
        if self.stats.epochs > 0 {
            self.save_watermark(self.marks.published)?;
        }
        Ok(())
    }
}

/// The sealer's own state file in the record directory (not part of the record):
/// the event-time watermark of the last published epoch, decimal.
pub const WATERMARK_FILE: &str = "sealer.watermark";

/// The watermark the sealer last published (0 when none was kept).
fn read_watermark(dir: &Path) -> u64 {
    std::fs::read_to_string(dir.join(WATERMARK_FILE))
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0)
}

/// Keeps `watermark` (atomically and durably: [`audita_files::write_atomic`]).
fn write_watermark(dir: &Path, watermark: u64) -> Result<(), StageError> {
    let path = dir.join(WATERMARK_FILE);
    // An I/O failure (a full disk): a fault a wait can heal, like the record's own.
    audita_files::write_atomic(&path, format!("{watermark}\n").as_bytes()).map_err(|e| {
        StageError::Disk(ReadError::Write {
            path: path.clone(),
            source: e.source,
        })
    })
}

/// Counters of the sealer stage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SealerStats {
    /// Fresh envelopes and receipts taken in.
    pub accepted: u64,
    /// Re-delivered items recognised and not sealed twice.
    pub duplicates: u64,
    /// Messages sealed.
    pub sealed: u64,
    /// Epochs sealed with fewer valid keeper co-signatures than the quorum.
    pub under_witnessed: u64,
    /// Keeper co-signatures collected (at sealing and on catch-up).
    pub cosignatures: u64,
    /// Keepers behind the log's head after the last offer.
    pub keepers_behind: u64,
    /// Epochs closed.
    pub epochs: u64,
    /// Envelopes older than the dedupe horizon, quarantined as `late`.
    pub late: u64,
}
