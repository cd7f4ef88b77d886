//! The slicer stage: sealed epochs and adverse declarations in, self-contained
//! incident slices out — on one process, or on a cluster of processes in timely
//! dataflow's own cluster mode ([`crate::cluster`]).
//!
//! Design constraints:
//! - The citation graph grows only from sealed epochs (`audita.epochs` joined with
//!   the bytes of `audita.accepted`, [`audita_join`]): a message enters the graph
//!   when an epoch seals it, so slices hold sealed messages only. A cluster member
//!   joins the seals with its share of the accepted partitions; every member reads
//!   every seal and every declaration.
//! - The stage runs in **turns** ([`crate::dataflow`]): each worker feeds what its
//!   reader joined since the last turn, advances, and steps until everything said
//!   in the turn was taken everywhere. A single process is a cluster of one: the
//!   same dataflow, the same turns.
//! - An adverse declaration (`audita.adverse`, the JSON of `audita-verdict`'s
//!   `AdverseDecl`) is owned by one worker ([`crate::emit`]): it waits until every
//!   anchor it names, and every message its facts cite as evidence, is sealed, then
//!   its slice is gathered from the shards and emitted once, keyed by the incident
//!   name. Declarations whose anchors are never sealed are reported by
//!   [`SlicerStage::waiting`].
//! - A `SliceBundle` (`audita_topics`) is self-contained: the declaration and a
//!   [`audita_evidence::ProvenSlice`] — the slice's signed envelopes and receipts,
//!   each envelope's inclusion proof against the co-signed root of the epoch that
//!   sealed it, those epochs' headers and checkpoints, and the latest epoch every
//!   worker has fed (the record root). An engine worker verifies it from scratch with
//!   public keys, and its size does not grow with the log. With the duty registry
//!   ([`SlicerStage::with_registry`]) it carries the anchors' citation closure and
//!   what the verdict and the monitor's check read of the window ([`crate::view`]),
//!   not the whole window; cited ids left out but held travel as proofs of sealing
//!   only.
//! - Memory is bounded by a retention horizon in record time
//!   ([`SlicerStage::with_horizon`], [`crate::shard`]); the bytes of held messages
//!   live on disk ([`crate::spill`]).
//! - The monitor's detectors, when the stage runs them ([`SlicerStage::run_with`]),
//!   run on a thread of their own over the same join: an alert never waits for a
//!   slicer turn. The join runs on a third thread, so a long turn holds neither.
//! - A cluster is fail-stop, as timely is: a member that cannot reach the others
//!   within [`crate::cluster::STALL`] (or whose connections fail) stops with
//!   [`SlicerError::Cluster`], a fault a wait heals; its supervisor opens the stage
//!   again, from the beginning of its topics, and the cluster reforms once every
//!   member is back. Slices emitted again are identical, and the sinks keep one
//!   verdict per incident.

use crate::cluster::{self, Cluster};
use crate::dataflow::{self, Handles, Shared, Turn};
use crate::emit::{EmitStats, Emitter};
pub use crate::emit::{Scoping, MAX_DECLARED_EVIDENCE, QUIET};
use crate::epochs::Epochs;
use crate::shard::{Globals, Shard};
use crate::wire::{key, AnchorUpdate, Arrival, Control};
use audita_bus::{BusError, Producer};
use audita_evidence::merkle::CompactRange;
use audita_evidence::{MessageId, Receipt};
use audita_join::{Input, SealedInput, Share};
use audita_topics::names as topics;
use audita_topics::EpochMessage;
use audita_verdict::{DutyRegistry, KeptInEveryScope};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};
use timely::worker::Worker;

/// A turn longer than this is logged with where it went.
const STALL: Duration = Duration::from_millis(200);

/// Default retention horizon: two minutes of record time — eight times the longest
/// incident window of the facility scenarios, far beyond the age of what fleet
/// commands cite (the latest pose report, the command they refine). Memory per held
/// message is measured in BENCHMARKS.md ("A lean graph").
pub const DEFAULT_HORIZON_MS: u64 = 120_000;

/// Default minimum wall time a message is held before it may be evicted.
pub const DEFAULT_HOLD: Duration = Duration::from_secs(60);

/// Bytes of joined epochs queued for the slicer's turns before its reader waits.
pub const QUEUED_BYTES: usize = 64 << 20;

/// Records of merge work per operator step while an arrangement is not compact.
const IDLE_MERGE_EFFORT: isize = 1_000;

/// How long an idle cluster member waits for input before it turns anyway (it
/// turns at once when another member waits for it).
const CLUSTER_IDLE_TURN: Duration = Duration::from_millis(100);

/// How often the stage logs its memory per component ([`SlicerStage::memory`]).
const MEMORY_LOG: Duration = Duration::from_secs(10);

/// Bytes one update of the edge arrangement takes: the child and parent keys (16
/// each), its time and difference (8 each), and an offset into the values (8; the
/// keys' offsets are shared by a child's edges).
pub const EDGE_UPDATE_BYTES: usize = 56;

/// This process's resident set (0 where `/proc` cannot say).
fn resident_bytes() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<usize>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// A snapshot of the slicer stage for live metrics (this process's share).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlicerStats {
    /// Messages this process holds.
    pub graph_messages: usize,
    /// Epochs this process keeps the proofs of.
    pub retained_epochs: usize,
    /// Messages evicted past the horizon so far.
    pub evicted: u64,
    /// Slices emitted so far (by this process).
    pub emitted: usize,
    /// Declarations waiting (owned by this process).
    pub waiting: usize,
    /// Citations emitted slices could not resolve, so far.
    pub unresolved: u64,
    /// Event-time watermark as far as every process has fed.
    pub watermark: u64,
    /// The grace past a window's end in force (ms of record time).
    pub grace_ms: u64,
    /// Bytes of held messages and receipts in the spill's files.
    pub spill_bytes: u64,
    /// Messages and receipts kept in memory because the spill failed, so far.
    pub spill_fallbacks: u64,
    /// Incidents scoped over their whole window (the narrowed window could not be
    /// shown to read the same, [`crate::view`]), so far.
    pub whole_window_scopes: u64,
    /// Accepted bytes held ahead of their seals ([`audita_join::input`]).
    pub join_held_bytes: usize,
    /// Sealed items whose bytes were gone when their epoch was joined, so far.
    pub join_missing: u64,
}

/// A callback seeing [`SlicerStats`] after every emission check.
pub type Observer = Box<dyn FnMut(&SlicerStats, &[Duration]) + Send>;

/// Why the slicer stage stopped.
#[derive(Debug, thiserror::Error)]
pub enum SlicerError {
    /// The bus failed.
    #[error(transparent)]
    Bus(#[from] BusError),
    /// A held message could not be read back from the spill.
    #[error("slicer spill: {0}")]
    Spill(#[from] std::io::Error),
    /// The cluster lost a member (a connection failed, or no progress from the
    /// others for a while): the members reform once every one is back.
    #[error("slicer cluster: {0}")]
    Cluster(String),
}

/// An operator that reads the slicer's join alongside it ([`SlicerStage::run_with`]).
pub trait EpochTap {
    /// One joined epoch (`missing`: the join's count of sealed items whose bytes
    /// were gone, so far).
    fn epoch(
        &mut self,
        epoch: &EpochMessage,
        missing: u64,
        out: &mut dyn Producer,
    ) -> Result<(), BusError>;
    /// No epoch came within a poll.
    fn idle(&mut self, out: &mut dyn Producer) -> Result<(), BusError>;
}

/// The tap of a slicer without other operators.
pub struct NoTap;

impl EpochTap for NoTap {
    fn epoch(&mut self, _: &EpochMessage, _: u64, _: &mut dyn Producer) -> Result<(), BusError> {
        Ok(())
    }

    fn idle(&mut self, _: &mut dyn Producer) -> Result<(), BusError> {
        Ok(())
    }
}

/// The slicer stage of one process.
pub struct SlicerStage {
    worker: Option<Worker>,
    handles: std::mem::ManuallyDrop<Handles>,
    shared: Shared,
    emitter: Emitter,
    turn: Turn,
    me: u32,
    peers: usize,
    /// The last epoch this worker took.
    last_epoch: Option<u64>,
    /// The largest seal watermark this worker took.
    watermark: u64,
    /// Per epoch taken and not yet observed into the grace: its seal's watermark.
    seal_watermarks: BTreeMap<u64, u64>,
    /// Anchor updates the last turn's answers called for.
    anchors: Vec<AnchorUpdate>,
    observer: Option<Observer>,
    /// Slices emitted, with the time their declaration waited.
    pub emitted_latencies: Vec<Duration>,
    /// How long a turn may wait for the other members (a cluster only).
    stall: Option<Duration>,
    /// The cluster's communication threads (never joined: see [`Drop`]).
    comms: Option<Box<dyn std::any::Any + Send>>,
    failed: bool,
    /// This worker's input has been idle past the stage's idle limit.
    idle: bool,
    /// The input's join: bytes held ahead of their seals, items missing so far.
    join: (usize, u64),
    /// When [`Self::memory`] was last logged.
    memory_logged: Instant,
}

/// The worker configuration: arrangements merge while stepping, not only when new
/// data forces it (a retraction cancels its insertion only once their batches
/// merge, so without it a sliding window's traces hold several windows of cancelled
/// updates).
fn worker_config() -> timely::WorkerConfig {
    let mut config = timely::WorkerConfig::default();
    differential_dataflow::configure(
        &mut config,
        &differential_dataflow::Config::default().idle_merge_effort(Some(IDLE_MERGE_EFFORT)),
    );
    config
}

impl SlicerStage {
    /// A slicer of one process. `max_wait` bounds how long a declaration waits for
    /// the event-time watermark when the stream goes quiet (it must exceed the time
    /// a crashed upstream stage takes to come back, or a quiet stream's last windows
    /// are judged before they are complete).
    pub fn new(topic_prefix: &str, max_wait: Duration) -> SlicerStage {
        let allocator = timely::communication::Allocator::Thread(
            timely::communication::allocator::thread::Thread::default(),
        );
        let worker = Worker::new(worker_config(), allocator, Some(Instant::now()));
        SlicerStage::on(worker, None, None, topic_prefix, max_wait)
    }

    /// This process's member of the slicer cluster `cluster`: connects to the
    /// other members (waiting for them, or until `stop` is set) and builds the
    /// dataflow on the cluster.
    pub fn cluster(
        cluster: &Cluster,
        topic_prefix: &str,
        max_wait: Duration,
        stop: &AtomicBool,
    ) -> Result<SlicerStage, SlicerError> {
        let (allocator, comms) = cluster::connect(cluster, stop)?;
        let worker = Worker::new(worker_config(), allocator, Some(Instant::now()));
        Ok(SlicerStage::on(
            worker,
            Some(comms),
            Some(cluster.stall),
            topic_prefix,
            max_wait,
        ))
    }

    fn on(
        mut worker: Worker,
        comms: Option<Box<dyn std::any::Any + Send>>,
        stall: Option<Duration>,
        topic_prefix: &str,
        max_wait: Duration,
    ) -> SlicerStage {
        let me = worker.index() as u32;
        let peers = worker.peers();
        let shared = Shared {
            shard: Rc::new(RefCell::new(Shard::new(
                me,
                DEFAULT_HORIZON_MS,
                DEFAULT_HOLD,
                None,
            ))),
            epochs: Rc::new(RefCell::new(Epochs::default())),
            globals: Rc::new(RefCell::new(Globals::default())),
            answers: Rc::new(RefCell::new(Vec::new())),
            closures: Rc::new(RefCell::new(Vec::new())),
            watermark: Rc::new(Cell::new(0)),
            edges: Rc::new(RefCell::new(None)),
        };
        let handles = dataflow::build(&mut worker, &shared);
        SlicerStage {
            worker: Some(worker),
            handles: std::mem::ManuallyDrop::new(handles),
            shared,
            emitter: Emitter::new(me, peers, topic_prefix, max_wait),
            turn: 0,
            me,
            peers,
            last_epoch: None,
            watermark: 0,
            seal_watermarks: BTreeMap::new(),
            anchors: Vec::new(),
            observer: None,
            emitted_latencies: Vec::new(),
            stall,
            comms,
            failed: false,
            idle: false,
            join: (0, 0),
            memory_logged: Instant::now(),
        }
    }

    /// This process's index in the cluster, and the cluster's size.
    pub fn member(&self) -> (usize, usize) {
        (self.me as usize, self.peers)
    }

    /// Declarations still waiting for anchors: (incident name, unsealed anchor count).
    pub fn waiting(&self) -> Vec<(String, usize)> {
        self.emitter.waiting()
    }

    /// Sets the retention horizon (record-time ms) and the minimum wall time a
    /// message is held (see [`crate::shard`]).
    pub fn with_horizon(self, horizon_ms: u64, hold: Duration) -> SlicerStage {
        self.shared.shard.borrow_mut().set_horizon(horizon_ms, hold);
        self
    }

    /// Calls `f` after every emission check with the stage's stats and the wait
    /// times of the slices emitted by that check.
    pub fn with_observer(mut self, f: Observer) -> SlicerStage {
        self.observer = Some(f);
        self
    }

    /// Sets the largest bundle published (default [`audita_bus::MAX_RECORD_BYTES`]);
    /// a larger slice is published as an abstention on `audita.verdicts`.
    pub fn with_max_record(mut self, bytes: usize) -> SlicerStage {
        self.emitter.max_record(bytes);
        self
    }

    /// Keeps the bytes of held messages in spill files under `dir` instead of the
    /// system's temporary directory ([`crate::spill`]).
    pub fn with_spill_dir(self, dir: std::path::PathBuf) -> SlicerStage {
        self.shared.shard.borrow_mut().set_spill_dir(dir);
        self
    }

    /// Scopes bundles with the deployment's duty registry (the one the engine workers
    /// judge with): a bundle then carries what the verdict reads of the window
    /// ([`audita_verdict::Slice::reads`]) instead of every message of it. Without a
    /// registry the whole time window is shipped.
    pub fn with_registry(mut self, duties: DutyRegistry) -> SlicerStage {
        self.shared
            .shard
            .borrow_mut()
            .classify_with(Some(KeptInEveryScope::new(&duties)), None);
        self.emitter.registry(Some(duties));
        self
    }

    /// Scopes what a bundle carries for the monitor with the deployment's predicate
    /// file (the one the engine workers check declarations with): of the window's
    /// telemetry, the reports observing an entity of a target's site
    /// ([`audita_monitor::reads`]). Without it, every telemetry report of the window
    /// is shipped (a superset: the check derives the same declaration). With another
    /// file than the engine's, a bundle may lack telemetry its check needs (the
    /// declaration is then refused, never judged on a partial view).
    pub fn with_predicates(
        mut self,
        predicates: Option<audita_monitor::Predicates>,
    ) -> SlicerStage {
        self.shared
            .shard
            .borrow_mut()
            .classify_with(None, Some(predicates.clone()));
        self.emitter.predicates(predicates);
        self
    }

    /// Chooses how a bundle's scope is computed (default [`Scoping::Narrowed`]; both
    /// ship the same messages).
    pub fn with_scoping(mut self, scoping: Scoping) -> SlicerStage {
        self.emitter.scoping(scoping);
        self
    }

    /// Incidents whose scope was computed over a narrowed window, and over the whole
    /// window, so far.
    pub fn scopes(&self) -> (u64, u64) {
        let s = self.emitter.stats();
        (s.narrowed, s.whole_window)
    }

    /// The stage's counters now.
    pub fn stats(&self) -> SlicerStats {
        let shard = self.shared.shard.borrow().stats();
        let e: EmitStats = self.emitter.stats();
        SlicerStats {
            graph_messages: shard.held,
            retained_epochs: self.shared.epochs.borrow().kept(),
            evicted: shard.evicted,
            emitted: e.emitted,
            waiting: e.waiting,
            unresolved: e.unresolved,
            watermark: e.watermark,
            grace_ms: e.grace_ms,
            spill_bytes: shard.spill_bytes,
            spill_fallbacks: shard.spill_fallbacks,
            whole_window_scopes: e.whole_window,
            join_held_bytes: self.join.0,
            join_missing: self.join.1,
        }
    }

    /// Approximate bytes of memory per component of this process's state, the
    /// dataflow's arrangement of the citation edges counted by its updates
    /// ([`EDGE_UPDATE_BYTES`] each).
    pub fn memory(&self) -> Vec<(&'static str, usize)> {
        let mut out = self.shared.shard.borrow().memory();
        out.push((
            "epoch proofs (leaf hashes)",
            self.shared.epochs.borrow().memory(),
        ));
        let updates = self
            .shared
            .edges
            .borrow()
            .as_ref()
            .map_or(0, dataflow::updates);
        out.push(("citation edges (arrangement)", updates * EDGE_UPDATE_BYTES));
        out
    }

    /// Logs [`Self::memory`] as one line: bytes per component and per held
    /// message, and the process's resident set.
    fn log_memory(&self) {
        let parts = self.memory();
        let held = self.shared.shard.borrow().stats().held;
        let total: usize = parts.iter().map(|(_, b)| b).sum();
        let per = |b: usize| b.checked_div(held).unwrap_or(0);
        let components = parts
            .iter()
            .map(|(name, b)| format!("{name}: {} B/msg", per(*b)))
            .collect::<Vec<_>>()
            .join("; ");
        tracing::info!(
            member = self.me,
            turns = self.turn,
            held,
            counted_mib = total >> 20,
            counted_bytes_per_message = per(total),
            rss_mib = resident_bytes() >> 20,
            components = %components,
            "slicer memory"
        );
    }

    /// Messages whose receipts are held (those of held messages, and receipts taken
    /// before their message, until the horizon passes them).
    pub fn receipts_held(&self) -> usize {
        self.shared.shard.borrow().receipts_held()
    }

    /// Messages this process holds.
    pub fn graph_messages(&self) -> usize {
        self.shared.shard.borrow().stats().held
    }

    /// Epochs this process keeps the proofs of.
    pub fn retained_epochs(&self) -> usize {
        self.shared.epochs.borrow().kept()
    }

    /// Messages evicted past the retention horizon so far.
    pub fn evicted(&self) -> u64 {
        self.shared.shard.borrow().stats().evicted
    }

    /// Citations that emitted slices could not resolve (evidence never sealed, or
    /// a parent evicted past the horizon).
    pub fn unresolved_citations(&self) -> u64 {
        self.emitter.stats().unresolved
    }

    /// Takes one joined epoch (this process's share of it) into the next turn. An
    /// epoch number already taken (the sealer republishes its last epoch after a
    /// restart) is ignored; so is one whose leaves do not fill its range or whose
    /// prefix is unusable (a gap would make every later proof wrong).
    pub fn take(&mut self, share: Share) {
        let msg = share.message;
        let Ok(header) = audita_evidence::EpochHeader::decode(msg.header.clone()) else {
            tracing::warn!("slicer skipped an epoch with an undecodable header");
            return;
        };
        let number = header.number;
        if self.last_epoch.is_some_and(|last| number <= last) {
            return;
        }
        if header.size != header.start + msg.leaves.len() as u64 {
            tracing::error!(
                epoch = number,
                "slicer skipped an epoch whose leaves do not fill its range"
            );
            return;
        }
        if CompactRange::from_nodes(header.start, &msg.prefix).is_none() {
            tracing::error!(
                epoch = number,
                "slicer skipped an epoch without a usable prefix"
            );
            return;
        }
        self.last_epoch = Some(number);
        if number % self.peers as u64 == u64::from(self.me) {
            self.shared.epochs.borrow_mut().keep(
                number,
                header.start,
                &msg.prefix,
                msg.header.clone(),
                msg.checkpoint.clone(),
                &msg.leaves,
            );
        }
        let before = self.watermark;
        for (bytes, i) in msg.envelopes.into_iter().zip(share.envelope_leaves) {
            let Some(leaf) = msg.leaves.get(i as usize) else {
                continue;
            };
            let Ok(id) = MessageId::from_leaf_bytes(leaf) else {
                continue;
            };
            self.handles.arrivals.send(Arrival::Envelope {
                key: key(&id.digest),
                epoch: number,
                leaf: header.start + u64::from(i),
                before,
                bytes,
            });
        }
        for (bytes, index) in msg.receipts.into_iter().zip(share.receipt_indices) {
            let Ok(r) = Receipt::decode(bytes.clone()) else {
                continue;
            };
            self.handles.arrivals.send(Arrival::Receipt {
                of: key(&r.message().digest),
                epoch: number,
                index,
                time: r.timestamp(),
                bytes,
            });
        }
        self.watermark = self.watermark.max(msg.watermark);
        self.shared.watermark.set(self.watermark);
        self.seal_watermarks.insert(number, msg.watermark);
    }

    /// Takes one sealed epoch as the sealer published it (every item this process's
    /// own: a single process, or a tool replaying a record) and runs a turn.
    pub fn add_epoch(&mut self, msg: EpochMessage) {
        let by_digest: BTreeMap<[u8; 32], u32> = msg
            .leaves
            .iter()
            .enumerate()
            .filter_map(|(i, l)| Some((MessageId::from_leaf_bytes(l).ok()?.digest, i as u32)))
            .collect();
        let mut envelopes = Vec::new();
        let mut envelope_leaves = Vec::new();
        for e in &msg.envelopes {
            if let Some(i) = by_digest.get(&audita_evidence::sha256(e)) {
                envelopes.push(e.clone());
                envelope_leaves.push(*i);
            }
        }
        let receipt_indices = (0..msg.receipts.len() as u32).collect();
        self.take(Share {
            message: EpochMessage { envelopes, ..msg },
            envelope_leaves,
            receipt_indices,
        });
        if let Err(e) = self.turn_once(None, false) {
            tracing::error!(error = %e, "slicer turn failed");
        }
    }

    /// Takes one adverse declaration (JSON). Returns an error line for a malformed one.
    pub fn declare(&mut self, declaration: Vec<u8>) -> Result<(), String> {
        self.emitter.declare(declaration)
    }

    /// Handles one input: a sealed epoch, or a declaration from `audita.adverse`.
    pub fn handle(&mut self, input: Input) -> Result<(), String> {
        match input {
            Input::Epoch(share) => {
                self.take(share);
                Ok(())
            }
            Input::Record(d) if d.topic.ends_with(topics::ADVERSE) => self.declare(d.payload),
            Input::Record(d) => Err(format!("slicer does not read topic {}", d.topic)),
        }
    }

    /// Runs turns until no waiting declaration can move on, emitting every slice
    /// that is complete (see [`crate::emit`]); returns how many were emitted.
    pub fn emit_ready(&mut self, out: &mut dyn Producer) -> Result<usize, SlicerError> {
        let mut emitted = 0;
        // Fed arrivals are taken first, then anchors enter, closures follow, and
        // every declaration that is ready runs its rounds to the end: a fixed point
        // (two turns in a row in which nothing moved) within a handful of turns.
        let mut still = 0;
        for _ in 0..64 {
            let before = self.emitter.progress();
            emitted += self.turn_once(Some(out), true)?;
            let moved = self.emitter.busy()
                || !self.anchors.is_empty()
                || self.emitter.progress() != before;
            still = if moved { 0 } else { still + 1 };
            if still >= 2 {
                break;
            }
        }
        Ok(emitted)
    }

    /// One turn: feeds what this worker says, advances, steps until the turn is
    /// taken everywhere, and hands the emitter what came back. Without `out` the
    /// emitter asks nothing (feeding only). Returns the slices emitted.
    fn turn_once(
        &mut self,
        out: Option<&mut dyn Producer>,
        force: bool,
    ) -> Result<usize, SlicerError> {
        let started = Instant::now();
        self.handles.control.send(Control::Fed {
            from: self.me,
            epoch: self.last_epoch,
            watermark: self.watermark,
        });
        self.handles.control.send(Control::Hold {
            from: self.me,
            start: self.emitter.hold(),
            idle: self.idle,
        });
        for (x, d) in self.anchors.drain(..) {
            self.handles.anchors.update(x, d);
        }
        if out.is_some() {
            let turned = self.emitter.turn(force);
            for q in turned.queries {
                self.handles.queries.send(q);
            }
            for (x, d) in turned.anchors {
                self.handles.anchors.update(x, d);
            }
        }
        self.turn += 1;
        self.handles.advance_to(self.turn);
        let fed = started.elapsed();
        self.step_until(self.turn)?;
        // Everything said in the turns up to this one is in, everywhere.
        self.shared.globals.borrow_mut().settle(self.turn - 1);
        if let Some(t) = self.shared.edges.borrow_mut().as_mut() {
            use differential_dataflow::trace::TraceReader;
            let now = [self.turn];
            t.set_logical_compaction(timely::progress::frontier::AntichainRef::new(&now));
            t.set_physical_compaction(timely::progress::frontier::AntichainRef::new(&now));
        }
        let stepped = started.elapsed();
        let changes = std::mem::take(&mut *self.shared.closures.borrow_mut());
        self.emitter.closure_changed(changes);
        let (fed_by_all, evicted) = {
            let g = self.shared.globals.borrow();
            (g.fed_by_all(self.peers), g.evicted_max())
        };
        if let Some((epoch, _)) = fed_by_all {
            let observed: Vec<(u64, u64)> = self
                .seal_watermarks
                .range(..=epoch)
                .map(|(e, w)| (*e, *w))
                .collect();
            {
                let g = self.shared.globals.borrow();
                self.emitter.hear(epoch, &observed, &g.late);
            }
            self.seal_watermarks = self.seal_watermarks.split_off(&(epoch + 1));
            let mut g = self.shared.globals.borrow_mut();
            g.late = g.late.split_off(&(epoch + 1));
            drop(g);
            self.shared.epochs.borrow_mut().prune(epoch);
        }
        let answers = std::mem::take(&mut *self.shared.answers.borrow_mut());
        if let Some(e) = self.shared.shard.borrow_mut().take_spill_error() {
            return Err(SlicerError::Spill(e));
        }
        let mut emitted = 0;
        if let Some(out) = out {
            let (anchors, n) = self.emitter.answered(answers, evicted, out)?;
            self.anchors = anchors;
            emitted = n;
            let waits = self.emitter.take_latencies();
            self.emitted_latencies.extend(&waits);
            if self.observer.is_some() {
                let stats = self.stats();
                if let Some(f) = self.observer.as_mut() {
                    f(&stats, &waits);
                }
            }
        }
        if self.memory_logged.elapsed() >= MEMORY_LOG {
            self.memory_logged = Instant::now();
            self.log_memory();
        }
        let took = started.elapsed();
        if took >= STALL {
            tracing::info!(
                turn = self.turn,
                feed_ms = fed.as_millis() as u64,
                step_ms = (stepped - fed).as_millis() as u64,
                emit_ms = (took - stepped).as_millis() as u64,
                held = self.shared.shard.borrow().stats().held,
                "slicer turn took long"
            );
        }
        Ok(emitted)
    }

    /// Steps the worker until the probe passes `turn`; in a cluster, no progress
    /// within the stall limit is a [`SlicerError::Cluster`].
    fn step_until(&mut self, turn: Turn) -> Result<(), SlicerError> {
        let started = Instant::now();
        let Some(worker) = self.worker.as_mut() else {
            return Err(SlicerError::Cluster("the stage failed before".into()));
        };
        while self.handles.probe.less_than(&turn) {
            worker.step_or_park(Some(Duration::from_millis(1)));
            if self.stall.is_some_and(|limit| started.elapsed() >= limit) {
                return Err(SlicerError::Cluster(format!(
                    "no progress from the other members for {} s",
                    started.elapsed().as_secs()
                )));
            }
        }
        Ok(())
    }

    /// Runs `f` on the stage; in a cluster, a connection failure (timely's
    /// communication threads panic and poison the worker's channels, so the next
    /// push or step panics too) is a [`SlicerError::Cluster`], and the stage is
    /// failed for good.
    fn guarded<T>(
        &mut self,
        f: impl FnOnce(&mut SlicerStage) -> Result<T, SlicerError>,
    ) -> Result<T, SlicerError> {
        if self.failed {
            return Err(SlicerError::Cluster("the stage failed before".into()));
        }
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(self))) {
            Ok(Ok(t)) => Ok(t),
            Ok(Err(e)) => {
                if matches!(e, SlicerError::Cluster(_)) {
                    self.failed = true;
                }
                Err(e)
            }
            Err(panic) => {
                self.failed = true;
                let why = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "a dataflow worker failed".into());
                Err(SlicerError::Cluster(why))
            }
        }
    }

    /// Runs until `stop` is set or, with `max_idle`, until no input arrived for that
    /// long. The slicer commits no offsets: its state is a function of the epochs and
    /// declarations, so a restarted slicer re-reads its topics from the start and
    /// rebuilds it; slices it emits again are identical, and the sinks keep one verdict
    /// per incident.
    pub fn run(
        &mut self,
        input: &mut SealedInput,
        out: &mut dyn Producer,
        stop: &AtomicBool,
        max_idle: Option<Duration>,
    ) -> Result<(), SlicerError> {
        self.run_with(input, out, stop, max_idle, None)
    }

    /// [`Self::run`], with the join on a thread of its own and, with `tap`, other
    /// operators over the same join (the monitor's detectors) on a third thread with
    /// their own producer: the bytes are fetched and joined once per process, and
    /// neither the join nor the detectors wait for a slicer turn.
    pub fn run_with(
        &mut self,
        input: &mut SealedInput,
        out: &mut dyn Producer,
        stop: &AtomicBool,
        max_idle: Option<Duration>,
        tap: Option<(&mut (dyn EpochTap + Send), &mut dyn Producer)>,
    ) -> Result<(), SlicerError> {
        let done = AtomicBool::new(false);
        let queued = AtomicUsize::new(0);
        let missing = AtomicU64::new(0);
        let held = AtomicUsize::new(0);
        let tap_failed: Mutex<Option<BusError>> = Mutex::new(None);
        let together = std::thread::scope(|scope| {
            let (tx, rx) = mpsc::sync_channel::<Result<Input, BusError>>(4096);
            let (tap_tx, tap_rx) = mpsc::sync_channel::<Arc<EpochMessage>>(4096);
            let has_tap = tap.is_some();
            if let Some((tap, tap_out)) = tap {
                let (done, missing, tap_failed) = (&done, &missing, &tap_failed);
                std::thread::Builder::new()
                    .name("detectors".into())
                    .spawn_scoped(scope, move || {
                        detect(tap_rx, tap, tap_out, done, missing, tap_failed)
                    })
                    .map_err(|e| SlicerError::Cluster(format!("starting the detectors: {e}")))?;
            } else {
                drop(tap_rx);
            }
            {
                let (done, queued, missing, held) = (&done, &queued, &missing, &held);
                std::thread::Builder::new()
                    .name("slicer-join".into())
                    .spawn_scoped(scope, move || {
                        read(
                            input,
                            tx,
                            has_tap.then_some(tap_tx),
                            stop,
                            done,
                            queued,
                            missing,
                            held,
                        )
                    })
                    .map_err(|e| SlicerError::Cluster(format!("starting the join: {e}")))?;
            }
            let result = self.guarded(|stage| {
                stage.turns(
                    &rx,
                    out,
                    stop,
                    max_idle,
                    &queued,
                    &tap_failed,
                    (&missing, &held),
                )
            });
            done.store(true, Ordering::SeqCst);
            drop(rx);
            result
        })?;
        self.log_memory();
        // Stopped (SIGTERM) or idle: emit what is complete and deliver it before exit.
        // A cluster that stopped together has nothing left to move (and its
        // members may already be gone: another turn would wait for them).
        if !together {
            self.emit_ready(out)?;
        }
        out.flush()?;
        Ok(())
    }

    /// The slicer's side of [`Self::run_with`]: takes what the join read, one turn
    /// at a time. Returns true when a cluster stopped together on idle (every
    /// declaration has moved as far as it can everywhere).
    #[allow(clippy::too_many_arguments)]
    fn turns(
        &mut self,
        rx: &mpsc::Receiver<Result<Input, BusError>>,
        out: &mut dyn Producer,
        stop: &AtomicBool,
        max_idle: Option<Duration>,
        queued: &AtomicUsize,
        tap_failed: &Mutex<Option<BusError>>,
        join: (&AtomicU64, &AtomicUsize),
    ) -> Result<bool, SlicerError> {
        let mut idle_since = Instant::now();
        while !stop.load(Ordering::SeqCst) {
            let busy = self.emitter.busy();
            let mut took = 0;
            let mut next = if busy {
                rx.recv_timeout(Duration::ZERO)
            } else if self.peers > 1 {
                self.await_input(rx, CLUSTER_IDLE_TURN)?
            } else {
                rx.recv_timeout(Duration::from_millis(20))
            };
            let deadline = Instant::now() + Duration::from_millis(50);
            loop {
                match next {
                    Ok(Ok(input)) => {
                        took += 1;
                        if let Input::Epoch(s) = &input {
                            queued.fetch_sub(share_bytes(s), Ordering::SeqCst);
                        }
                        if let Err(e) = self.handle(input) {
                            tracing::warn!(error = %e, "slicer skipped a record");
                        }
                    }
                    Ok(Err(e)) => return Err(e.into()),
                    Err(mpsc::RecvTimeoutError::Timeout) => break,
                    // The join stops when `stop` is set; otherwise only by a panic.
                    Err(mpsc::RecvTimeoutError::Disconnected) if stop.load(Ordering::SeqCst) => {
                        return Ok(false)
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        return Err(SlicerError::Cluster(
                            "the slicer's join thread failed".into(),
                        ))
                    }
                }
                if Instant::now() >= deadline {
                    break;
                }
                next = rx.recv_timeout(Duration::ZERO);
            }
            if let Some(e) = tap_failed.lock().unwrap_or_else(|e| e.into_inner()).take() {
                return Err(e.into());
            }
            self.join = (join.1.load(Ordering::SeqCst), join.0.load(Ordering::SeqCst));
            if took > 0 {
                idle_since = Instant::now();
            }
            self.turn_once(Some(out), took == 0)?;
            self.idle = took == 0
                && max_idle.is_some_and(|m| idle_since.elapsed() >= m)
                && !self.emitter.busy();
            // A cluster stops when every member said it is idle, read as of the
            // same completed turn everywhere, so all members leave after the same
            // turn (one leaving alone would stall the others' next turn).
            if self.peers == 1 && self.idle {
                break;
            }
            if self.peers > 1 && self.shared.globals.borrow().all_idle(self.peers) {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

impl SlicerStage {
    /// A cluster member with nothing to do waits for its join's next input for up
    /// to `limit`, stepping its worker meanwhile, and turns at once when another
    /// member is already in the next turn (it waits for this one): the cluster
    /// turns as often as its members have input, not at a fixed idle rate (each
    /// turn costs every member a round of progress messages).
    fn await_input(
        &mut self,
        rx: &mpsc::Receiver<Result<Input, BusError>>,
        limit: Duration,
    ) -> Result<Result<Result<Input, BusError>, mpsc::RecvTimeoutError>, SlicerError> {
        let until = Instant::now() + limit;
        loop {
            match rx.try_recv() {
                Ok(got) => return Ok(Ok(got)),
                Err(mpsc::TryRecvError::Disconnected) => {
                    return Ok(Err(mpsc::RecvTimeoutError::Disconnected))
                }
                Err(mpsc::TryRecvError::Empty) => {}
            }
            if Instant::now() >= until || self.shared.globals.borrow().said_in_or_after(self.turn) {
                return Ok(Err(mpsc::RecvTimeoutError::Timeout));
            }
            let Some(worker) = self.worker.as_mut() else {
                return Err(SlicerError::Cluster("the stage failed before".into()));
            };
            worker.step_or_park(Some(Duration::from_millis(2)));
        }
    }
}

/// Bytes a joined share holds (for the queue's bound).
fn share_bytes(s: &Share) -> usize {
    s.message.envelopes.iter().map(Vec::len).sum::<usize>()
        + s.message.receipts.iter().map(Vec::len).sum::<usize>()
}

/// The join thread of [`SlicerStage::run_with`]: polls the input and passes epochs
/// (to the detectors first) and declarations on, holding at most
/// [`QUEUED_BYTES`] for the slicer.
#[allow(clippy::too_many_arguments)]
fn read(
    input: &mut SealedInput,
    tx: mpsc::SyncSender<Result<Input, BusError>>,
    tap: Option<mpsc::SyncSender<Arc<EpochMessage>>>,
    stop: &AtomicBool,
    done: &AtomicBool,
    queued: &AtomicUsize,
    missing: &AtomicU64,
    held: &AtomicUsize,
) {
    let mut blocked: Option<Instant> = None;
    while !stop.load(Ordering::SeqCst) && !done.load(Ordering::SeqCst) {
        if queued.load(Ordering::SeqCst) >= QUEUED_BYTES {
            blocked.get_or_insert_with(Instant::now);
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        if let Some(since) = blocked.take() {
            if since.elapsed() >= STALL {
                tracing::info!(
                    waited_ms = since.elapsed().as_millis() as u64,
                    "the slicer's join waited for its turns (queue full)"
                );
            }
        }
        let got = match input.poll(Duration::from_millis(20)) {
            Ok(Some(got)) => got,
            Ok(None) => continue,
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        };
        missing.store(input.stats().missing, Ordering::SeqCst);
        held.store(input.backlog().0, Ordering::SeqCst);
        if let (Input::Epoch(share), Some(tap)) = (&got, &tap) {
            if tap.send(Arc::new(share.message.clone())).is_err() {
                return;
            }
        }
        if let Input::Epoch(s) = &got {
            queued.fetch_add(share_bytes(s), Ordering::SeqCst);
        }
        if tx.send(Ok(got)).is_err() {
            return;
        }
    }
}

/// The detectors' thread of [`SlicerStage::run_with`].
fn detect(
    rx: mpsc::Receiver<Arc<EpochMessage>>,
    tap: &mut (dyn EpochTap + Send),
    out: &mut dyn Producer,
    done: &AtomicBool,
    missing: &AtomicU64,
    failed: &Mutex<Option<BusError>>,
) {
    let result = (|| -> Result<(), BusError> {
        loop {
            match rx.recv_timeout(Duration::from_millis(20)) {
                Ok(epoch) => {
                    let started = Instant::now();
                    tap.epoch(&epoch, missing.load(Ordering::SeqCst), out)?;
                    if started.elapsed() >= STALL {
                        tracing::info!(
                            took_ms = started.elapsed().as_millis() as u64,
                            envelopes = epoch.envelopes.len(),
                            "the detectors' epoch took long"
                        );
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if done.load(Ordering::SeqCst) {
                        return Ok(());
                    }
                    tap.idle(out)?
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
            }
        }
    })();
    if let Err(e) = result {
        *failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
    }
}

impl Drop for SlicerStage {
    fn drop(&mut self) {
        // The dataflow's state (arrangements, shards) is freed; the inputs and a
        // worker whose peers failed may panic while they are torn down (their
        // channels are poisoned), which is contained here.
        let handles = std::mem::replace(&mut *self.handles, dataflow::Handles::detached());
        let worker = self.worker.take();
        let edges = self.shared.edges.borrow_mut().take();
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            drop(edges);
            drop(handles);
            drop(worker);
        }));
        // timely's communication threads are never joined: a receive thread waits
        // for the peer to close its side, which a live peer does only when it stops
        // itself. They end with their sockets; joining them could block a stopping
        // member on a running one (or panic on a failed one).
        if let Some(comms) = self.comms.take() {
            Box::leak(comms);
        }
        let _ = self.failed;
    }
}
