//! The slicer stage: sealed epochs and adverse declarations in, self-contained
//! incident slices out.
//!
//! Design constraints:
//! - The citation graph grows only from sealed epochs (`audita.epochs` joined with
//!   the bytes of `audita.accepted`, [`audita_join`]): a message enters the graph
//!   when an epoch seals it, so slices hold sealed messages only.
//! - A message's committed effect counts as realised when a sealed actuation report
//!   (`tool_output` of tool `actuator`) cites it.
//! - An adverse declaration (`audita.adverse`, the JSON of `audita-verdict`'s
//!   `AdverseDecl`) waits until every anchor it names, and every message its facts
//!   cite as evidence, is sealed, then its slice is emitted once, keyed by the
//!   incident name. Declarations whose anchors are never
//!   sealed are reported by [`SlicerStage::waiting`].
//! - A `SliceBundle` (`audita_topics`) is self-contained: the declaration and a
//!   [`ProvenSlice`] — the slice's signed envelopes and receipts, each envelope's
//!   inclusion proof against the co-signed root of the epoch that sealed it, those
//!   epochs' headers and checkpoints, and the latest epoch's (the record root). An
//!   engine worker verifies it from scratch with public keys, and its size does not
//!   grow with the log.
//! - With the duty registry ([`SlicerStage::with_registry`]) a bundle carries the
//!   anchors' citation closure and what the verdict reads of the time window
//!   ([`audita_verdict::Slice::reads`], computed here over the held messages exactly
//!   as the engine will over the bundle), not the whole window: in a fleet, one
//!   cell's traffic instead of the warehouse's. Cited ids left out but held travel
//!   as proofs of sealing only (`ProvenSlice::elsewhere`), so the engine reads them
//!   as outside the slice, not missing; scoping changes no verdict. The bundle also
//!   carries what the monitor reads to re-derive the declaration
//!   ([`audita_monitor::reads`]: the window's telemetry of its targets' sites,
//!   with the predicate file ([`SlicerStage::with_predicates`]; every site's
//!   without), actuating commands and actuation reports of its targets), so an
//!   engine worker can check it.
//! - Computing that scope reads a narrowed window, not the warehouse's: each held
//!   message keeps, from its one decoding on arrival, hashes of its author and
//!   targets and whether every scope keeps it ([`Scoping::Narrowed`]); an incident
//!   decodes its closure, computes the scope from it, picks the window messages the
//!   scope could keep and their window parents, and reads the slice over those —
//!   provably the same reads as over the whole window while no citation or anchor
//!   is missing (otherwise the whole window is read, and counted).
//! - Epochs carry the log's compact range before them, so the stage can start at
//!   any epoch: with `audita.epochs` retention set to a little over the horizon plus
//!   the hold, a restart replays a bounded stretch, not the whole history.
//! - Memory is bounded by a retention horizon in record time
//!   ([`SlicerStage::with_horizon`]): messages older than the horizon before both
//!   the event-time watermark and every waiting declaration's window start are
//!   evicted once they have also been held for a minimum wall time (a replayed or
//!   bursty stream moves record time far faster than declarations arrive, so record
//!   time alone would evict a window before its declaration is read). Their
//!   citations are retracted from the dataflow, epochs whose messages are all gone
//!   are dropped, receipts whose message never came leave with them, and emitted
//!   incidents are retracted. A citation reaching past
//!   the horizon is counted ([`SlicerStage::unresolved_citations`]) and its parent
//!   is judged missing, so the horizon must exceed the oldest citation a fleet makes
//!   and the longest a declaration arrives after its window.
//! - The bytes of held messages and receipts live on disk ([`crate::spill`]:
//!   anonymous segment files, written once per epoch, deleted as the horizon
//!   releases them); memory keeps indexes, the dataflow and a 12-byte locator per
//!   message, so it no longer grows with the bytes of horizon × rate. A spill that
//!   cannot be written keeps the bytes in memory (counted); one that cannot be
//!   read back fails the stage rather than a message judged missing.

use crate::spill::{Spill, Spilled};
use crate::{EpochBatch, IncidentId, NodeId, Slicer};
use audita_bus::{BusError, Producer};
use audita_evidence::merkle::{leaf_hash, CompactRange};
use audita_evidence::{EpochProofs, MessageId, Payload, ProvenSlice, SignedEnvelope};
use audita_join::{Grace, Input, SealedInput};
use audita_monitor::predicate::site_of;
use audita_topics::names as topics;
use audita_topics::{EpochMessage, SliceBundle, VerdictRecord};
use audita_verdict::slice::{Evidence, MissingEvidence, Node, Outside};
use audita_verdict::{Adverse, AdverseDecl, DutyRegistry, KeptInEveryScope, Slice};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// An adverse declaration waiting for its anchors to be sealed.
struct Waiting {
    incident: IncidentId,
    /// `[window_start_ms, window_end_ms]` of the declaration.
    window: (u64, u64),
    name: String,
    declaration: Vec<u8>,
    anchors: Vec<NodeId>,
    /// Every message the declaration's facts name as their evidence (and the
    /// messages they are about): the slice is not complete before each is held.
    evidence: Vec<NodeId>,
    arrived: Instant,
    anchored_at: Option<Instant>,
}

/// Most evidence ids of one declaration's facts the slicer waits for (a declaration
/// naming more is waited for on these; the engine checks all of it).
pub const MAX_DECLARED_EVIDENCE: usize = 10_000;

/// A step of the run loop longer than this is logged with where it went.
const STALL: Duration = Duration::from_millis(200);

/// Wall time without a new epoch after which the stream counts as quiet.
pub const QUIET: Duration = Duration::from_secs(1);

/// Default retention horizon: two minutes of record time — eight times the longest
/// incident window of the facility scenarios, far beyond the age of what fleet
/// commands cite (the latest pose report, the command they refine). The slicer
/// holds about 0.9 KB of memory per message (indexes and the dataflow's
/// arrangements; the bytes are spilled to disk, about 0.5 KB more; measured in
/// BENCHMARKS.md), so its memory is about `0.9 KB × rate × (horizon + hold)`:
/// about 2.3 GB at the 14k msg/s one 2-core machine seals.
pub const DEFAULT_HORIZON_MS: u64 = 120_000;

/// Default minimum wall time a message is held before it may be evicted.
pub const DEFAULT_HOLD: Duration = Duration::from_secs(60);

/// A sealed message as the slicer keeps it.
struct Sealed {
    epoch: u64,
    leaf: u64,
    timestamp: u64,
    /// An actuation report (`tool_output` of tool `actuator`): its citations are
    /// realised effects (retracted with it at eviction, without decoding it again).
    actuation: bool,
    bytes: Held,
}

/// What [`SlicerStage::scoped`] reads of a held message without decoding it: keyed
/// 32-bit hashes of its author, of the target its payload names and of the target
/// the monitor's derivation reads it for and of the site whose declarations read
/// it as telemetry ([`audita_monitor::read_key`]; 0 for none), and whether every
/// scope keeps it ([`KeptInEveryScope`], or telemetry the monitor always reads).
/// A hash collision only adds a message to a narrowed window, which changes
/// nothing it reads (see [`SlicerStage::narrowed`]).
#[derive(Clone, Copy, Default)]
struct Facets {
    author: u32,
    target: u32,
    monitor: u32,
    site: u32,
    always: bool,
}

/// Which facet of a message a [`SlicerStage`] facet index entry is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Role {
    Author,
    Target,
    /// The monitor-read target, indexed only where it is neither the author nor
    /// the target (a query for it asks all three).
    Monitor,
    Site,
}

impl Facets {
    /// The facet index entries of a message with these facets.
    fn entries(&self) -> impl Iterator<Item = (Role, u32)> {
        let monitor = if self.monitor == self.author || self.monitor == self.target {
            0
        } else {
            self.monitor
        };
        [
            (Role::Author, self.author),
            (Role::Target, self.target),
            (Role::Monitor, monitor),
            (Role::Site, self.site),
        ]
        .into_iter()
        .filter(|(_, f)| *f != 0)
    }
}

/// Held messages by time (a window is a range of it).
type TimeSet = BTreeSet<(u64, NodeId)>;

/// Record time per bucket of [`SlicerStage::oldest_cited`] (ms).
const CITED_BUCKET_MS: u64 = 1_000;

/// How [`SlicerStage::scoped`] finds what a verdict reads of a window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scoping {
    /// Narrow the window by the messages' facets first, then compute the reads
    /// over what is left; fall back to the whole window when a completion item
    /// (a missing citation or anchor) makes the verdict read beyond its scope.
    #[default]
    Narrowed,
    /// Decode the whole window every time (the reference the narrowed path is
    /// tested against).
    Exhaustive,
}

/// Where the stage keeps the bytes of a held message or receipt: in the spill
/// ([`crate::spill`]), or in memory when the spill could not take them (a full
/// disk costs memory, never a message).
enum Held {
    Disk(Spilled),
    Memory(Box<[u8]>),
}

/// Point lookups by message id only (never iterated, so their order reaches no
/// output): hashed with foldhash seeded per map from the process's random seed, so
/// an author grinding ids cannot aim them at one bucket without that seed (a tenth
/// of the cost of SipHash on these 32-byte keys, which are uniform already); a
/// griddle map, which moves its entries to a doubled table a few per insert: a
/// standard map rehashed all of them at once, holding the input (and the detectors'
/// alerts) for 1.2 s at 917,504 held messages and 1.8 s at 1,835,008.
type ById<V> = griddle::HashMap<NodeId, V, foldhash::fast::RandomState>;

/// The slicer stage's state.
pub struct SlicerStage {
    slicer: Slicer,
    /// Sealed messages: (timestamp, epoch number, leaf index, signed bytes).
    envelopes: ById<Sealed>,
    /// Sealed messages by (timestamp, id), for window queries, with their [`Facets`].
    by_time: BTreeMap<(u64, NodeId), Facets>,
    /// Held messages by facet and time: a narrowed window is the union of the
    /// ranges of the facets its scope asks for ([`SlicerStage::narrowed`]).
    by_facet: HashMap<(Role, u32), TimeSet>,
    /// Held messages every scope keeps ([`Facets::always`]), by time.
    always: TimeSet,
    /// Held messages not every parent of which is held yet, by time.
    unsettled: TimeSet,
    /// Per [`CITED_BUCKET_MS`] of record time, the oldest parent timestamp of a
    /// held message of the bucket once all its parents were held: a window whose
    /// buckets all stay at or above the eviction point has every parent held (a
    /// bucket below it is checked message by message).
    oldest_cited: BTreeMap<u64, u64>,
    /// Citations of each sealed message.
    parents: ById<Vec<NodeId>>,
    /// Held messages not yet complete (a cited parent or their receipt not yet
    /// sealed), by (timestamp, id): what a declaration's window waits for.
    pending: BTreeSet<(u64, NodeId)>,
    /// Unsealed parent → held messages citing it, to complete them when it comes.
    awaited: ById<Vec<NodeId>>,
    /// Receipts taken before (or without) their message, by (receipt time, message):
    /// dropped with the horizon unless the message came.
    orphans: BTreeSet<(u64, NodeId)>,
    /// Number of the last epoch taken.
    last_epoch: Option<u64>,
    /// Event-time low watermark from the sealer: every message earlier is sealed.
    watermark: u64,
    /// The grace past a window's end, adapted to the lateness of sealed messages.
    grace: Grace,
    /// Wall time after which an incomplete declaration is emitted as it stands.
    max_wait: Duration,
    /// When the last epoch was taken.
    last_epoch_at: Option<Instant>,
    receipts: ById<Vec<Held>>,
    /// The bytes of held messages and receipts.
    spill: Spill,
    /// The first failure to read the spill back since the last bundle: the bundle
    /// is not published (the stage stops and is rebuilt from its topics).
    spill_error: RefCell<Option<std::io::Error>>,
    /// Messages and receipts kept in memory because the spill failed.
    spill_fallbacks: u64,
    /// Retained epochs by number, with their live message counts.
    epochs: BTreeMap<u64, (EpochProofs, usize)>,
    /// The log's compact range after the last epoch taken.
    log: CompactRange,
    /// Retention horizon in record time (ms).
    horizon_ms: u64,
    /// Minimum wall time a message is held.
    hold: Duration,
    /// Epochs taken within `hold`: (arrival, earliest message timestamp).
    recent: std::collections::VecDeque<(Instant, u64)>,
    /// Messages older than this were evicted.
    evicted_before: u64,
    evicted: u64,
    unresolved: u64,
    waiting: Vec<Waiting>,
    /// Emitted incidents, with the incident id whose anchors are still to retract.
    emitted: BTreeSet<String>,
    to_retract: Vec<(IncidentId, Vec<NodeId>)>,
    next_incident: IncidentId,
    topic_prefix: String,
    /// Slices emitted, with the time their declaration waited.
    pub emitted_latencies: Vec<Duration>,
    observer: Option<Observer>,
    /// Largest bundle published; a larger slice is an abstention.
    max_record: usize,
    /// The duty registry: with it, a bundle carries the incident's scope, not the
    /// whole time window.
    registry: Option<DutyRegistry>,
    /// The registry's scope-independent keeping rule, for [`Facets`].
    kept_always: Option<KeptInEveryScope>,
    /// The deployment's predicate file, whose entity registry places telemetry in
    /// sites ([`audita_monitor::reads`]): a bundle then carries its targets' sites'
    /// telemetry only.
    predicates: Option<audita_monitor::Predicates>,
    scoping: Scoping,
    /// Keys [`Facets`]' hashes (per stage: an author cannot aim names at a collision).
    facet_hasher: std::hash::RandomState,
    /// Incidents scoped over a narrowed window, and over the whole window.
    narrowed_scopes: std::cell::Cell<u64>,
    exhaustive_scopes: std::cell::Cell<u64>,
    /// The input's join: bytes held ahead of their seals, items missing so far.
    join: (usize, u64),
}

/// A snapshot of the slicer stage for live metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlicerStats {
    /// Messages in the citation graph.
    pub graph_messages: usize,
    /// Epochs retained for proofs.
    pub retained_epochs: usize,
    /// Messages evicted past the horizon so far.
    pub evicted: u64,
    /// Slices emitted so far.
    pub emitted: usize,
    /// Declarations waiting.
    pub waiting: usize,
    /// Citations emitted slices could not resolve, so far.
    pub unresolved: u64,
    /// Event-time watermark taken from the sealer.
    pub watermark: u64,
    /// The grace past a window's end in force (ms of record time).
    pub grace_ms: u64,
    /// Bytes of held messages and receipts in the spill's files.
    pub spill_bytes: u64,
    /// Messages and receipts kept in memory because the spill failed, so far.
    pub spill_fallbacks: u64,
    /// Incidents scoped over their whole window (a completion item, i.e. a missing
    /// citation or anchor, made the narrowed window unusable; see
    /// [`Scoping::Narrowed`]), so far.
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
}

fn parse_anchor(s: &str) -> Option<NodeId> {
    let (_, hex_digest) = s.rsplit_once(':')?;
    let bytes = hex::decode(hex_digest).ok()?;
    bytes.try_into().ok()
}

impl SlicerStage {
    /// A slicer stage with `workers` dataflow workers. `max_wait` bounds how long a
    /// declaration waits for the event-time watermark when the stream goes quiet
    /// (it must exceed the time a crashed upstream stage takes to come back, or a
    /// quiet stream's last windows are judged before they are complete).
    pub fn new(workers: usize, topic_prefix: &str, max_wait: Duration) -> SlicerStage {
        SlicerStage {
            slicer: Slicer::new(workers),
            envelopes: ById::default(),
            by_time: BTreeMap::new(),
            by_facet: HashMap::new(),
            always: TimeSet::new(),
            unsettled: TimeSet::new(),
            oldest_cited: BTreeMap::new(),
            parents: ById::default(),
            pending: BTreeSet::new(),
            awaited: ById::default(),
            orphans: BTreeSet::new(),
            last_epoch: None,
            watermark: 0,
            grace: Grace::new(),
            max_wait,
            last_epoch_at: None,
            receipts: ById::default(),
            spill: Spill::default(),
            spill_error: RefCell::new(None),
            spill_fallbacks: 0,
            epochs: BTreeMap::new(),
            log: CompactRange::new(),
            horizon_ms: DEFAULT_HORIZON_MS,
            hold: DEFAULT_HOLD,
            recent: std::collections::VecDeque::new(),
            evicted_before: 0,
            evicted: 0,
            unresolved: 0,
            waiting: Vec::new(),
            emitted: BTreeSet::new(),
            to_retract: Vec::new(),
            next_incident: 0,
            topic_prefix: topic_prefix.to_string(),
            emitted_latencies: Vec::new(),
            observer: None,
            max_record: audita_bus::MAX_RECORD_BYTES,
            registry: None,
            kept_always: None,
            predicates: None,
            scoping: Scoping::default(),
            facet_hasher: std::hash::RandomState::new(),
            narrowed_scopes: Default::default(),
            exhaustive_scopes: Default::default(),
            join: (0, 0),
        }
    }

    /// Declarations still waiting for anchors: (incident name, unsealed anchor count).
    pub fn waiting(&self) -> Vec<(String, usize)> {
        self.waiting
            .iter()
            .map(|w| {
                (
                    w.name.clone(),
                    w.anchors
                        .iter()
                        .filter(|a| !self.envelopes.contains_key(*a))
                        .count(),
                )
            })
            .collect()
    }

    /// Sets the retention horizon (record-time ms) and the minimum wall time a
    /// message is held (see the module docs).
    pub fn with_horizon(mut self, horizon_ms: u64, hold: Duration) -> SlicerStage {
        self.horizon_ms = horizon_ms;
        self.hold = hold;
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
        self.max_record = bytes;
        self
    }

    /// Keeps the bytes of held messages in spill files under `dir` instead of the
    /// system's temporary directory ([`crate::spill`]).
    pub fn with_spill_dir(mut self, dir: std::path::PathBuf) -> SlicerStage {
        self.spill = Spill::new(Some(dir));
        self
    }

    /// Scopes bundles with the deployment's duty registry (the one the engine workers
    /// judge with): a bundle then carries what the verdict reads of the window
    /// ([`Slice::reads`]) instead of every message of it. Without a registry the
    /// whole time window is shipped.
    pub fn with_registry(mut self, duties: DutyRegistry) -> SlicerStage {
        self.kept_always = Some(KeptInEveryScope::new(&duties));
        self.registry = Some(duties);
        self.reclassify();
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
        self.predicates = predicates;
        self.reclassify();
        self
    }

    /// Recomputes the [`Facets`] of every held message (they were computed with
    /// another registry or predicate file).
    fn reclassify(&mut self) {
        if self.by_time.is_empty() {
            return;
        }
        let held: Vec<(u64, NodeId)> = self.by_time.keys().copied().collect();
        for key in held {
            let facets = self
                .envelopes
                .get(&key.1)
                .and_then(|m| self.read(&m.bytes))
                .and_then(|b| SignedEnvelope::decode(b).ok())
                .map(|env| self.facets(env.envelope()));
            if let Some(f) = facets {
                if let Some(old) = self.by_time.insert(key, f) {
                    self.index(key, old, false);
                }
                self.index(key, f, true);
            }
        }
    }

    /// Adds a held message to (or removes it from) the facet indexes.
    fn index(&mut self, key: (u64, NodeId), f: Facets, add: bool) {
        let apply = |set: &mut TimeSet| {
            if add {
                set.insert(key);
            } else {
                set.remove(&key);
            }
        };
        if f.always {
            apply(&mut self.always);
        }
        for entry in f.entries() {
            if add {
                apply(self.by_facet.entry(entry).or_default());
            } else if let Some(set) = self.by_facet.get_mut(&entry) {
                apply(set);
                if set.is_empty() {
                    self.by_facet.remove(&entry);
                }
            }
        }
    }

    /// Chooses how a bundle's scope is computed (default [`Scoping::Narrowed`]; both
    /// ship the same messages).
    pub fn with_scoping(mut self, scoping: Scoping) -> SlicerStage {
        self.scoping = scoping;
        self
    }

    /// Incidents whose scope was computed over a narrowed window, and over the whole
    /// window, so far.
    pub fn scopes(&self) -> (u64, u64) {
        (self.narrowed_scopes.get(), self.exhaustive_scopes.get())
    }

    /// The stage's counters now.
    pub fn stats(&self) -> SlicerStats {
        SlicerStats {
            graph_messages: self.envelopes.len(),
            retained_epochs: self.epochs.len(),
            evicted: self.evicted,
            emitted: self.emitted.len(),
            waiting: self.waiting.len(),
            unresolved: self.unresolved,
            watermark: self.watermark,
            grace_ms: self.grace.ms(),
            spill_bytes: self.spill.disk_bytes(),
            spill_fallbacks: self.spill_fallbacks,
            whole_window_scopes: self.exhaustive_scopes.get(),
            join_held_bytes: self.join.0,
            join_missing: self.join.1,
        }
    }

    /// Messages whose receipts are held (those of held messages, and receipts taken
    /// before their message, until the horizon passes them).
    pub fn receipts_held(&self) -> usize {
        self.receipts.len()
    }

    /// Messages in the citation graph.
    pub fn graph_messages(&self) -> usize {
        self.envelopes.len()
    }

    /// Epochs retained for proofs.
    pub fn retained_epochs(&self) -> usize {
        self.epochs.len()
    }

    /// Messages evicted past the retention horizon so far.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// Citations that emitted slices could not resolve (evidence never sealed, or
    /// a parent evicted past the horizon; see the module docs).
    pub fn unresolved_citations(&self) -> u64 {
        self.unresolved
    }

    /// Takes one sealed epoch into the graph. An epoch number already taken (the
    /// sealer republishes its last epoch after a restart) is ignored; so is an epoch
    /// that does not continue the log (a gap would make every later proof wrong).
    pub fn add_epoch(&mut self, msg: EpochMessage) {
        let Ok(header) = audita_evidence::EpochHeader::decode(msg.header.clone()) else {
            tracing::warn!("slicer skipped an epoch with an undecodable header");
            return;
        };
        if self.last_epoch.is_some_and(|last| header.number <= last) {
            return;
        }
        if header.size != header.start + msg.leaves.len() as u64 {
            tracing::error!(
                epoch = header.number,
                "slicer skipped an epoch whose leaves do not fill its range"
            );
            return;
        }
        if header.start != self.log.size() {
            // The first epoch after a start (older ones retained no more) or after a
            // gap: the epoch's own prefix continues the log. A wrong prefix can only
            // make proofs fail verification downstream, never pass.
            match CompactRange::from_nodes(header.start, &msg.prefix) {
                Some(range) => {
                    if self.log.size() > 0 {
                        tracing::warn!(
                            epoch = header.number,
                            start = header.start,
                            have = self.log.size(),
                            "slicer continues after a gap in the epochs"
                        );
                    }
                    self.log = range;
                }
                None => {
                    tracing::error!(
                        epoch = header.number,
                        "slicer skipped an epoch without a usable prefix"
                    );
                    return;
                }
            }
        }
        self.last_epoch = Some(header.number);
        self.last_epoch_at = Some(Instant::now());
        let started = Instant::now();
        let hashes: Vec<audita_evidence::Hash> = msg.leaves.iter().map(|l| leaf_hash(l)).collect();
        let proofs = EpochProofs::new(&self.log, msg.header, msg.checkpoint, hashes.clone());
        for h in hashes {
            self.log.append(h);
        }
        let mut index: BTreeMap<NodeId, u64> = BTreeMap::new();
        for (i, leaf) in msg.leaves.iter().enumerate() {
            if let Ok(id) = MessageId::from_leaf_bytes(leaf) {
                index.insert(id.digest, header.start + i as u64);
            }
        }
        let mut batch = EpochBatch::default();
        let mut live = 0;
        let mut earliest = u64::MAX;
        let mut arrived: Vec<NodeId> = Vec::new();
        let mut stamped: Vec<u64> = Vec::with_capacity(msg.envelopes.len());
        for bytes in msg.envelopes {
            let Ok(env) = SignedEnvelope::decode(bytes) else {
                continue;
            };
            let child = env.id().digest;
            let Some(&leaf) = index.get(&child) else {
                continue;
            };
            let actuation = is_actuation(env.envelope());
            let facets = self.facets(env.envelope());
            let cited: Vec<NodeId> = env.envelope().citations.iter().map(|c| c.digest).collect();
            for (edge, d) in edges(child, &cited, actuation, 1) {
                batch_push(&mut batch, edge, d);
            }
            let timestamp = env.envelope().timestamp;
            stamped.push(timestamp);
            earliest = earliest.min(timestamp);
            if let Some(old) = self.by_time.insert((timestamp, child), facets) {
                self.index((timestamp, child), old, false);
            }
            self.index((timestamp, child), facets, true);
            self.unsettled.insert((timestamp, child));
            self.parents.insert(child, cited);
            let bytes = self.keep(env.as_bytes());
            let replaced = self.envelopes.insert(
                child,
                Sealed {
                    epoch: header.number,
                    leaf,
                    timestamp,
                    actuation,
                    bytes,
                },
            );
            if let Some(old) = replaced {
                self.forget(old.bytes);
            }
            self.pending.insert((timestamp, child));
            arrived.push(child);
            live += 1;
        }
        for r in msg.receipts {
            if let Ok(receipt) = audita_evidence::Receipt::decode(r.clone()) {
                // A republished epoch may carry receipts already taken.
                let digest = receipt.message().digest;
                if !self.envelopes.contains_key(&digest) {
                    self.orphans.insert((receipt.timestamp(), digest));
                }
                let taken = self.receipts.get(&digest).is_some_and(|held| {
                    held.iter()
                        .any(|h| self.read(h).as_deref() == Some(r.as_slice()))
                });
                if !taken {
                    let h = self.keep(&r);
                    self.receipts.entry(digest).or_default().push(h);
                }
                arrived.push(digest);
            }
        }
        let taken = started.elapsed();
        // Messages this epoch may complete: its own, those awaiting one of them as a
        // parent, those whose receipt it brought.
        let mut check: Vec<NodeId> = Vec::new();
        for n in arrived {
            check.extend(self.awaited.remove(&n).unwrap_or_default());
            check.push(n);
        }
        for n in check {
            self.settle(n);
        }
        let settled = started.elapsed();
        if let Err(e) = self.spill.flush() {
            // The bytes stay in the spill's buffer (read from there) and the write
            // is retried at the next epoch.
            tracing::warn!(error = %e, "slicer could not write its spill");
        }
        self.grace.observe(stamped, msg.watermark);
        self.watermark = self.watermark.max(msg.watermark);
        self.epochs.insert(header.number, (proofs, live));
        self.recent.push_back((Instant::now(), earliest));
        let flushed = started.elapsed();
        self.slicer.apply(batch);
        let applied = started.elapsed();
        self.evict();
        let took = started.elapsed();
        if took >= STALL {
            tracing::info!(
                take_ms = taken.as_millis() as u64,
                settle_ms = (settled - taken).as_millis() as u64,
                spill_ms = (flushed - settled).as_millis() as u64,
                dataflow_ms = (applied - flushed).as_millis() as u64,
                evict_ms = (took - applied).as_millis() as u64,
                held = self.envelopes.len(),
                "slicer epoch took long"
            );
        }
    }

    /// Re-checks a held message: complete once every parent is held and its receipt
    /// is; otherwise it stays pending and awaits its first missing parent.
    fn settle(&mut self, n: NodeId) {
        let Some(m) = self.envelopes.get(&n) else {
            return;
        };
        let key = (m.timestamp, n);
        if !self.pending.contains(&key) {
            return;
        }
        let missing_parent = self
            .parents
            .get(&n)
            .and_then(|ps| ps.iter().find(|p| !self.envelopes.contains_key(*p)))
            .copied();
        if missing_parent.is_none() {
            let oldest = self
                .parents
                .get(&n)
                .into_iter()
                .flatten()
                .filter_map(|p| self.envelopes.get(p))
                .map(|p| p.timestamp)
                .min()
                .unwrap_or(u64::MAX);
            if self.unsettled.remove(&key) && oldest != u64::MAX {
                let cited = self
                    .oldest_cited
                    .entry(key.0 / CITED_BUCKET_MS)
                    .or_insert(u64::MAX);
                *cited = (*cited).min(oldest);
            }
        }
        match missing_parent {
            Some(p) => {
                let list = self.awaited.entry(p).or_default();
                if !list.contains(&n) {
                    list.push(n);
                }
            }
            None if self.receipts.contains_key(&n) => {
                self.pending.remove(&key);
            }
            // Waits for its receipt (re-checked when a receipt for it arrives).
            None => {}
        }
    }

    /// Evicts messages older than the horizon before both the watermark and every
    /// waiting declaration's window end, and epochs left without live messages
    /// (never the latest, which fixes the record root).
    fn evict(&mut self) {
        while self
            .recent
            .front()
            .is_some_and(|(at, _)| at.elapsed() >= self.hold)
        {
            self.recent.pop_front();
        }
        let held = self
            .recent
            .iter()
            .map(|(_, t)| *t)
            .min()
            .unwrap_or(u64::MAX);
        let keep_from = self
            .waiting
            .iter()
            .map(|w| w.window.0)
            .chain(std::iter::once(self.watermark))
            .min()
            .unwrap_or(self.watermark)
            .saturating_sub(self.horizon_ms)
            .min(held);
        if keep_from <= self.evicted_before {
            return;
        }
        self.evicted_before = keep_from;
        // A receipt is signed after its message: one older than the horizon whose
        // message never came names a message that would be evicted on arrival.
        while let Some(&(t, n)) = self.orphans.first() {
            if t >= keep_from {
                break;
            }
            self.orphans.pop_first();
            if !self.envelopes.contains_key(&n) {
                self.drop_receipts(&n);
            }
        }
        let old: Vec<(u64, NodeId)> = self
            .by_time
            .range(..(keep_from, [0u8; 32]))
            .map(|(k, _)| *k)
            .collect();
        if old.is_empty() {
            return;
        }
        let mut batch = EpochBatch::default();
        // Buckets wholly before the eviction point.
        self.oldest_cited = self.oldest_cited.split_off(&(keep_from / CITED_BUCKET_MS));
        for key in old {
            if let Some(f) = self.by_time.remove(&key) {
                self.index(key, f, false);
            }
            self.unsettled.remove(&key);
            self.pending.remove(&key);
            let parents = self.parents.remove(&key.1).unwrap_or_default();
            for p in &parents {
                if let Some(list) = self.awaited.get_mut(p) {
                    list.retain(|c| *c != key.1);
                    if list.is_empty() {
                        self.awaited.remove(p);
                    }
                }
            }
            self.drop_receipts(&key.1);
            let Some(sealed) = self.envelopes.remove(&key.1) else {
                continue;
            };
            if let Held::Disk(at) = &sealed.bytes {
                self.spill.release(*at);
            }
            self.evicted += 1;
            // The edges it was inserted with, from what was kept of it.
            for (edge, d) in edges(key.1, &parents, sealed.actuation, -1) {
                batch_push(&mut batch, edge, d);
            }
            let last = self.last_epoch;
            if let Some((_, live)) = self.epochs.get_mut(&sealed.epoch) {
                *live -= 1;
                if *live == 0 && Some(sealed.epoch) != last {
                    self.epochs.remove(&sealed.epoch);
                }
            }
        }
        // Epochs that sealed nothing the graph kept (and are not the latest).
        let last = self.last_epoch;
        self.epochs
            .retain(|n, (_, live)| *live > 0 || Some(*n) == last);
        self.slicer.apply(batch);
    }

    /// Takes one adverse declaration (JSON). Returns an error line for a malformed one.
    pub fn declare(&mut self, declaration: Vec<u8>) -> Result<(), String> {
        let v: serde_json::Value = serde_json::from_slice(&declaration)
            .map_err(|e| format!("adverse declaration is not JSON: {e}"))?;
        let name = v
            .get("incident")
            .and_then(|n| n.as_str())
            .ok_or("adverse declaration without incident name")?
            .to_string();
        let anchors = v
            .get("anchors")
            .and_then(|a| a.as_array())
            .map(|a| {
                a.iter()
                    .map(|s| {
                        s.as_str()
                            .and_then(parse_anchor)
                            .ok_or(format!("bad anchor {s}"))
                    })
                    .collect()
            })
            .unwrap_or(Ok(Vec::new()))?;
        if self.emitted.contains(&name) || self.waiting.iter().any(|w| w.name == name) {
            return Ok(()); // re-delivered declaration
        }
        // The messages its facts rest on (the telemetry establishing t*, the actuation
        // reports realising the anchors): a monitor declares only after reading them
        // sealed, but `audita.epochs` and `audita.adverse` interleave freely, and a
        // source partition out of time order lets the watermark pass a window before
        // all of it is sealed. Ids that do not parse are left to the engine's check.
        let mut evidence: Vec<NodeId> = v
            .get("facts")
            .and_then(|f| f.as_array())
            .into_iter()
            .flatten()
            .flat_map(|f| {
                let listed = f
                    .get("evidence")
                    .and_then(|e| e.as_array())
                    .into_iter()
                    .flatten();
                listed.chain(f.get("message"))
            })
            .filter_map(|s| s.as_str().and_then(parse_anchor))
            .take(MAX_DECLARED_EVIDENCE)
            .collect();
        evidence.sort_unstable();
        evidence.dedup();
        let t_star = v
            .get("t_star_ms")
            .and_then(|t| t.as_u64())
            .ok_or("adverse declaration without t_star_ms")?;
        let start = v
            .get("window_start_ms")
            .and_then(|t| t.as_u64())
            .unwrap_or(0);
        let end = v
            .get("window_end_ms")
            .and_then(|t| t.as_u64())
            .unwrap_or(t_star);
        let incident = self.next_incident;
        self.next_incident += 1;
        self.waiting.push(Waiting {
            incident,
            window: (start, end),
            name,
            declaration,
            anchors,
            evidence,
            arrived: Instant::now(),
            anchored_at: None,
        });
        Ok(())
    }

    /// The messages a declaration's bundle carries: the citation closure of its
    /// anchors, and of its time window either what the verdict reads (with a
    /// registry, [`Self::scoped`]) or every sealed message.
    fn members(&self, w: &Waiting) -> BTreeSet<NodeId> {
        let mut ids: BTreeSet<NodeId> = self.slicer.incident(w.incident).slice;
        match self.scoped(w, &ids) {
            Some(scoped) => ids.extend(scoped),
            None => ids.extend(self.in_window(w)),
        }
        ids
    }

    /// The sealed messages of a declaration's time window.
    fn in_window<'s>(&'s self, w: &Waiting) -> impl Iterator<Item = NodeId> + 's {
        self.by_time
            .range((w.window.0, [0u8; 32])..=(w.window.1, [0xffu8; 32]))
            .map(|((_, n), _)| *n)
    }

    /// A sealed message decoded: id, envelope, leaf index.
    fn decoded(&self, n: &NodeId) -> Option<(MessageId, audita_evidence::Envelope, u64)> {
        let m = self.envelopes.get(n)?;
        let env = SignedEnvelope::decode(self.read(&m.bytes)?).ok()?;
        Some((env.id().clone(), env.envelope().clone(), m.leaf))
    }

    /// What the verdict of `w` reads of its time window ([`Slice::reads`]), computed
    /// from the sealed messages the stage holds exactly as an engine worker will
    /// build the slice from the bundle (see [`Self::reads_among`]), over the window
    /// narrowed by the messages' facets ([`Self::narrowed`]) when that provably reads
    /// the same, else over the whole window. `None` without a registry or with an
    /// unreadable declaration (the whole window is shipped; the engine reports the
    /// latter).
    fn scoped(&self, w: &Waiting, closure: &BTreeSet<NodeId>) -> Option<BTreeSet<NodeId>> {
        let duties = self.registry.as_ref()?;
        let started = Instant::now();
        let decl: AdverseDecl = serde_json::from_slice(&w.declaration).ok()?;
        let adverse = Adverse::new(decl).ok()?;
        let narrowed = match self.scoping {
            Scoping::Narrowed => self.narrowed(&adverse, duties, closure),
            Scoping::Exhaustive => None,
        };
        let counter = match narrowed {
            Some(_) => &self.narrowed_scopes,
            None => &self.exhaustive_scopes,
        };
        counter.set(counter.get() + 1);
        let (lo, hi) = (adverse.decl.window_start_ms, adverse.decl.window_end());
        let (decoded, reads) = match &narrowed {
            Some(ids) => self.reads_among(&adverse, duties, closure, ids.iter()),
            None => self.reads_among(
                &adverse,
                duties,
                closure,
                self.by_time
                    .range((lo, [0u8; 32])..=(hi, [0xffu8; 32]))
                    .map(|((_, n), _)| n),
            ),
        };
        tracing::debug!(
            incident = %w.name,
            narrowed = narrowed.is_some(),
            decoded,
            shipped = reads.len(),
            took_ms = started.elapsed().as_millis() as u64,
            "slice scoped"
        );
        Some(reads)
    }

    /// What the verdict of `adverse` reads, computed over the window messages
    /// `among` (with the anchors and the citation `closure`): every one of them in
    /// the time window (and the anchors) is certified evidence, a citation of an id
    /// not held is missing (with its citers among them), and held messages outside
    /// the window are looked up — exactly as an engine worker builds the slice from
    /// the bundle. Also what the monitor reads to re-derive the declaration. Returns
    /// the number of window messages decoded, and the reads.
    fn reads_among<'n>(
        &self,
        adverse: &Adverse,
        duties: &DutyRegistry,
        closure: &'n BTreeSet<NodeId>,
        among: impl Iterator<Item = &'n NodeId>,
    ) -> (usize, BTreeSet<NodeId>) {
        let (lo, hi) = (adverse.decl.window_start_ms, adverse.decl.window_end());
        let anchors: BTreeSet<NodeId> = adverse.anchors.iter().map(|a| a.digest).collect();
        let mut around: BTreeSet<&NodeId> = among.chain(closure).collect();
        around.extend(&anchors);
        let mut window = BTreeMap::new();
        let mut missing: BTreeMap<MessageId, BTreeSet<MessageId>> = BTreeMap::new();
        // The window's messages, decoded once here: the monitor's reads below need
        // them again.
        let mut decoded: Vec<(MessageId, audita_evidence::Envelope)> = Vec::new();
        for n in around {
            let Some((id, env, leaf)) = self.decoded(n) else {
                continue;
            };
            for c in &env.citations {
                if !self.envelopes.contains_key(&c.digest) {
                    missing.entry(c.clone()).or_default().insert(id.clone());
                }
            }
            let in_time = env.timestamp >= lo && env.timestamp <= hi;
            if anchors.contains(n) || in_time {
                window.insert(id.clone(), Node::of(id.clone(), &env, leaf));
            }
            if in_time {
                decoded.push((id, env));
            }
        }
        let evidence = self.evidence(window, missing);
        let slice = Slice::from_evidence(&evidence, duties, adverse);
        let mut reads: BTreeSet<NodeId> = slice
            .reads(&evidence)
            .into_iter()
            .map(|id| id.digest)
            .collect();
        // And what the monitor reads to re-derive the declaration (telemetry,
        // actuating commands and actuation reports of the window), so an engine
        // worker can check it against the bundle.
        reads.extend(
            audita_monitor::reads(
                decoded.iter().map(|(id, env)| (id, env)),
                &adverse.decl,
                self.predicates.as_ref(),
            )
            .into_iter()
            .map(|id| id.digest),
        );
        (decoded.len(), reads)
    }

    /// The slice's evidence from certified window messages and missing ids (with
    /// their citers); held messages outside the window are looked up.
    fn evidence(
        &self,
        window: BTreeMap<MessageId, Node>,
        missing: BTreeMap<MessageId, BTreeSet<MessageId>>,
    ) -> Evidence<'_> {
        Evidence {
            window,
            outside: Box::new(|id: &MessageId| {
                self.decoded(&id.digest).map(|(_, env, leaf)| Outside {
                    leaf,
                    target: env.payload.target().map(str::to_string),
                })
            }),
            suspect: Vec::new(),
            missing: missing
                .into_iter()
                .map(|(id, citers)| MissingEvidence {
                    id,
                    citers: citers.into_iter().collect(),
                    receipted_by: Vec::new(),
                    delivered_at: Vec::new(),
                    sealed: false,
                })
                .collect(),
            suspect_nodes: BTreeMap::new(),
        }
    }

    /// The window of `adverse` narrowed, from the facets of its messages and without
    /// decoding them, to a set over which [`Self::reads_among`] reads exactly what it
    /// reads over the whole window; `None` when that cannot be shown (the caller
    /// then reads the whole window).
    ///
    /// Why it is exact. When every anchor is held and no message of the window or
    /// the closure cites an id the stage does not hold, the slice has no completion
    /// items, and then [`Slice::from_evidence`] reads the window only through its
    /// scope: the messages [`audita_verdict::slice::Scope`] keeps (the closure; those
    /// naming a target in scope or authored by a principal in scope; halt triggers;
    /// deviations realising the outcome) and their window parents, while the region
    /// of possible inputs and the item rules, which read every window message, are
    /// empty. The scope itself depends only on the closure (its members and their
    /// parents' targets, looked up alike in or out of the window), so it is computed
    /// first from the closure alone. A window message is then picked when its facets
    /// say scope could keep it (its target or author hashes to one in scope, or
    /// [`KeptInEveryScope`]) or the monitor's derivation could
    /// read it; the window parents of every picked message are added. Every message
    /// kept over the whole window is picked, and a picked message that is not kept
    /// (a hash collision, a halt duty out of scope) is read by nothing.
    ///
    /// The picks are not found by scanning the window: every held message is in
    /// the time-ordered index of each of its facets (`by_facet`, `always`), and the
    /// window's picks are the union of the ranges of the facets the scope asks for
    /// — work in proportion to the scope's traffic, not the warehouse's. Whether
    /// every window message has its parents held is read off two indexes kept as
    /// messages arrive and settle (`unsettled`, `oldest_cited`), and a window
    /// second whose messages cite below the eviction point is checked message by
    /// message.
    fn narrowed(
        &self,
        adverse: &Adverse,
        duties: &DutyRegistry,
        closure: &BTreeSet<NodeId>,
    ) -> Option<BTreeSet<NodeId>> {
        let (lo, hi) = (adverse.decl.window_start_ms, adverse.decl.window_end());
        let in_time = |t: u64| t >= lo && t <= hi;
        let anchors: Vec<NodeId> = adverse.anchors.iter().map(|a| a.digest).collect();
        let complete = |n: &NodeId| {
            self.envelopes.contains_key(n)
                && self
                    .parents
                    .get(n)
                    .is_none_or(|ps| ps.iter().all(|p| self.envelopes.contains_key(p)))
        };
        // The anchors' held ancestors, walked here rather than taken from the
        // dataflow, so the argument above does not rest on its progress.
        let mut ancestry: BTreeSet<NodeId> = BTreeSet::new();
        let mut stack: Vec<NodeId> = anchors.iter().chain(closure).copied().collect();
        while let Some(n) = stack.pop() {
            if !ancestry.insert(n) {
                continue;
            }
            if !complete(&n) {
                return None;
            }
            for p in self.parents.get(&n).into_iter().flatten() {
                if !ancestry.contains(p) {
                    stack.push(*p);
                }
            }
        }
        // The scope, from the closure alone: its members in the window (and the
        // anchors) are what the slice's own closure walk can enter.
        let mut core = BTreeMap::new();
        for n in &ancestry {
            let entered =
                anchors.contains(n) || self.envelopes.get(n).is_some_and(|m| in_time(m.timestamp));
            if entered {
                let (id, env, leaf) = self.decoded(n)?;
                core.insert(id.clone(), Node::of(id, &env, leaf));
            }
        }
        let scope =
            Slice::from_evidence(&self.evidence(core, BTreeMap::new()), duties, adverse).scope;
        if scope.unknown_anchor {
            return None;
        }
        let hashed = |names: &BTreeSet<String>| -> std::collections::HashSet<u32> {
            names.iter().map(|t| self.facet(t)).collect()
        };
        let targets = hashed(&scope.targets);
        let principals = hashed(&scope.principals);
        let declared: std::collections::HashSet<u32> =
            adverse.decl.targets.iter().map(|t| self.facet(t)).collect();
        // The sites whose telemetry the monitor reads (every site's, without targets).
        let every_site = adverse.decl.targets.is_empty();
        let sites: std::collections::HashSet<u32> = adverse
            .decl
            .targets
            .iter()
            .map(|t| self.site_facet(site_of(self.predicates.as_ref(), t)))
            .collect();
        // Every parent of every window message held: none unsettled, and none
        // whose citations may reach past the eviction point.
        let window = (lo, [0u8; 32])..=(hi, [0xffu8; 32]);
        if self.unsettled.range(window.clone()).next().is_some() {
            return None;
        }
        let suspect: Vec<u64> = self
            .oldest_cited
            .range(lo / CITED_BUCKET_MS..=hi / CITED_BUCKET_MS)
            .filter(|(_, oldest)| **oldest < self.evicted_before)
            .map(|(b, _)| *b)
            .collect();
        for b in suspect {
            // A message of this bucket cited one now evicted: is it in the window?
            let from = (b * CITED_BUCKET_MS).max(lo);
            let to = (b * CITED_BUCKET_MS + CITED_BUCKET_MS - 1).min(hi);
            let dangling = self
                .by_time
                .range((from, [0u8; 32])..=(to, [0xffu8; 32]))
                .filter_map(|((_, n), _)| self.parents.get(n))
                .flatten()
                .any(|p| !self.envelopes.contains_key(p));
            if dangling {
                return None;
            }
        }
        let scan = Instant::now();
        let mut picked: BTreeSet<NodeId> = ancestry
            .iter()
            .filter(|n| self.envelopes.get(*n).is_some_and(|m| in_time(m.timestamp)))
            .copied()
            .collect();
        // The facets the scope asks for: targets and principals in scope, the
        // declared targets (as the monitor reads them), their sites' telemetry.
        let mut asked: Vec<(Role, u32)> = Vec::new();
        asked.extend(targets.iter().map(|h| (Role::Target, *h)));
        asked.extend(principals.iter().map(|h| (Role::Author, *h)));
        for role in [Role::Monitor, Role::Author, Role::Target] {
            asked.extend(declared.iter().map(|h| (role, *h)));
        }
        let mut ranges: Vec<&TimeSet> = vec![&self.always];
        ranges.extend(asked.iter().filter_map(|k| self.by_facet.get(k)));
        if every_site {
            ranges.extend(
                self.by_facet
                    .iter()
                    .filter(|((role, _), _)| *role == Role::Site)
                    .map(|(_, set)| set),
            );
        } else {
            ranges.extend(
                sites
                    .iter()
                    .filter_map(|h| self.by_facet.get(&(Role::Site, *h))),
            );
        }
        let mut scanned = 0usize;
        for set in ranges {
            for (_, n) in set.range(window.clone()) {
                scanned += 1;
                picked.insert(*n);
            }
        }
        let parents: Vec<NodeId> = picked
            .iter()
            .filter_map(|n| self.parents.get(n))
            .flatten()
            .filter(|p| self.envelopes.get(*p).is_some_and(|m| in_time(m.timestamp)))
            .copied()
            .collect();
        picked.extend(parents);
        tracing::debug!(
            scanned,
            picked = picked.len(),
            scan_us = scan.elapsed().as_micros() as u64,
            "window narrowed"
        );
        Some(picked)
    }

    /// The [`Facets`] of a message as it arrives.
    fn facets(&self, env: &audita_evidence::Envelope) -> Facets {
        use audita_monitor::ReadKey;
        let read = audita_monitor::read_key(env, self.predicates.as_ref());
        let (monitor, site) = match read {
            Some(ReadKey::IfTarget(t)) => (self.facet(t), 0),
            Some(ReadKey::Site(s)) => (0, self.site_facet(s)),
            _ => (0, 0),
        };
        Facets {
            author: self.facet(env.author.as_str()),
            target: env.payload.target().map_or(0, |t| self.facet(t)),
            monitor,
            site,
            always: read == Some(ReadKey::Always)
                || self.kept_always.as_ref().is_some_and(|k| k.keeps(env)),
        }
    }

    /// The facet hash of a name (never 0, which stands for none).
    fn facet(&self, name: &str) -> u32 {
        use std::hash::BuildHasher;
        (self.facet_hasher.hash_one(name) as u32).max(1)
    }

    /// The facet hash of a site (`None`: the default site; never 0).
    fn site_facet(&self, site: Option<&str>) -> u32 {
        use std::hash::BuildHasher;
        (self.facet_hasher.hash_one(("site", site)) as u32).max(1)
    }

    /// Emits the slice of every declaration that is complete: its anchors and every
    /// message its facts name as evidence are sealed, every citation of every member
    /// resolves to a sealed message, every member's
    /// receipt is sealed, and the record has
    /// moved past its window (the sealer's event-time watermark passed
    /// `window_end` + the grace in force ([`audita_join::grace`]), so every message
    /// of the window is sealed).
    /// Upstream partitions may seal a parent after its child, so completeness is
    /// waited for. After `max_wait` of wall time, a complete slice is emitted if the
    /// stream went quiet ([`QUIET`]; a stream still flowing is waited for up to
    /// `4 × max_wait`; one quiet for `max_wait` already is not waited for again),
    /// and an incomplete one once the record has moved past its
    /// window (what never arrived is then judged as missing); an incomplete slice of a
    /// window the record has not passed waits, however long a stage is down.
    pub fn emit_ready(&mut self, out: &mut dyn Producer) -> Result<usize, SlicerError> {
        let mut batch = EpochBatch::default();
        for w in &mut self.waiting {
            if w.anchored_at.is_none() && w.anchors.iter().all(|a| self.envelopes.contains_key(a)) {
                for a in &w.anchors {
                    batch.anchors.push(((w.incident, *a), 1));
                }
                w.anchored_at = Some(Instant::now());
            }
        }
        if !batch.anchors.is_empty() {
            self.slicer.apply(batch);
        }
        let topic = format!("{}{}", self.topic_prefix, topics::SLICES);
        let mut emitted = 0;
        let before = self.emitted_latencies.len();
        let quiet = self.last_epoch_at.is_none_or(|t| t.elapsed() >= QUIET);
        for i in (0..self.waiting.len()).rev() {
            let w = &self.waiting[i];
            let waited_out = w.arrived.elapsed() >= self.max_wait;
            let settled = self.watermark >= w.window.1.saturating_add(self.grace.ms());
            // Completeness is judged over the whole window and the closure from the
            // pending index (a range query, kept up to date as epochs arrive; the
            // scoped members are computed once, at emission): every citation resolves
            // and every message has its receipt (receipts are sealed apart from their
            // envelopes, often in a later epoch; one still on its way would make its
            // message unreceipted, i.e. suspect).
            let closed = w.anchored_at.is_some()
                && w.evidence.iter().all(|e| self.envelopes.contains_key(e))
                && self
                    .pending
                    .range((w.window.0, [0u8; 32])..=(w.window.1, [0xffu8; 32]))
                    .next()
                    .is_none()
                && self.slicer.incident(w.incident).slice.iter().all(|n| {
                    self.envelopes
                        .get(n)
                        .is_none_or(|m| !self.pending.contains(&(m.timestamp, *n)))
                });
            // Complete and settled: emit. Complete but the stream went quiet (no epoch
            // for QUIET, so nothing will move the watermark): emit after max_wait; a
            // stream that still flows is behind, not quiet, and its watermark will
            // pass the window (uncited window messages may still be on their way),
            // but never wait past 4 x max_wait for it. Incomplete although
            // the record moved past the window: the rest is missing evidence, emit
            // after max_wait. Incomplete and not settled (e.g. the sealer is down):
            // keep waiting — a delay must never turn into a different verdict.
            // A stream already quiet for max_wait when the declaration comes (the
            // monitor declares a quiet stream's last incidents after that long) has
            // been waited for: no epoch came in that time, waiting again brings none.
            let stale = w.arrived.elapsed() >= 4 * self.max_wait;
            let long_quiet = self
                .last_epoch_at
                .is_some_and(|t| t.elapsed() >= self.max_wait);
            let ready = (settled && (closed || waited_out))
                || (closed && ((waited_out && (quiet || stale)) || long_quiet));
            if !ready {
                continue;
            }
            if w.anchored_at.is_none() {
                // Anchors never sealed: emit what the record holds (the verdict layer
                // reports the anchors as missing).
                let anchors: Vec<((IncidentId, NodeId), isize)> =
                    w.anchors.iter().map(|a| ((w.incident, *a), 1)).collect();
                self.slicer.apply(EpochBatch {
                    anchors,
                    ..Default::default()
                });
            }
            let w = self.waiting.remove(i);
            let bundle = self.bundle(&w)?;
            let bytes = bundle.encode();
            if bytes.len() > self.max_record {
                // Too large for one record: never crash on it (a restart would read
                // the same declaration again), publish the abstention with the reason.
                let reason = format!(
                    "slice of {} messages ({} bytes) exceeds the {}-byte record limit",
                    bundle.evidence.envelopes.len(),
                    bytes.len(),
                    self.max_record
                );
                tracing::error!(incident = %w.name, %reason, "abstaining");
                let abstain = VerdictRecord::abstention(
                    &w.name,
                    &reason,
                    serde_json::from_slice(&w.declaration).ok(),
                );
                out.send(
                    &format!("{}{}", self.topic_prefix, topics::VERDICTS),
                    w.name.as_bytes(),
                    &serde_json::to_vec(&abstain).unwrap_or_default(),
                )?;
            } else {
                out.send(&topic, w.name.as_bytes(), &bytes)?;
            }
            tracing::debug!(
                incident = %w.name,
                waited_ms = w.arrived.elapsed().as_millis() as u64,
                grace_ms = self.grace.ms(),
                watermark_past_end_ms = self.watermark.saturating_sub(w.window.1),
                settled,
                closed,
                "slice emitted"
            );
            self.emitted_latencies.push(w.arrived.elapsed());
            self.emitted.insert(w.name);
            self.to_retract.push((w.incident, w.anchors));
            emitted += 1;
        }
        if emitted > 0 {
            out.flush()?;
            // The emitted incidents leave the dataflow.
            let anchors = std::mem::take(&mut self.to_retract)
                .into_iter()
                .flat_map(|(i, a)| a.into_iter().map(move |n| ((i, n), -1)))
                .collect();
            self.slicer.apply(EpochBatch {
                anchors,
                ..Default::default()
            });
        }
        if self.observer.is_some() {
            let stats = self.stats();
            let waits = self.emitted_latencies[before..].to_vec();
            if let Some(f) = self.observer.as_mut() {
                f(&stats, &waits);
            }
        }
        Ok(emitted)
    }

    /// The bundle of a declaration: its members in canonical (message-id) order, so
    /// it does not depend on the interleaving of partitions upstream, each with its
    /// proof against its epoch; those epochs and the latest one.
    fn bundle(&mut self, w: &Waiting) -> Result<SliceBundle, SlicerError> {
        let ids = self.members(w);
        let mut evidence = ProvenSlice::default();
        let mut provers: BTreeMap<u64, audita_evidence::merkle::TailProver<'_>> = BTreeMap::new();
        let mut used: BTreeSet<u64> = self.last_epoch.into_iter().collect();
        let mut unresolved = 0;
        for n in &ids {
            if let Some(ps) = self.parents.get(n) {
                unresolved += ps
                    .iter()
                    .filter(|p| !self.envelopes.contains_key(*p))
                    .count();
            }
            let Some(m) = self.envelopes.get(n) else {
                continue;
            };
            let Some(bytes) = self.read(&m.bytes) else {
                continue;
            };
            evidence.envelopes.push(bytes);
            let proof = match self.epochs.get(&m.epoch) {
                Some((p, _)) => provers
                    .entry(m.epoch)
                    .or_insert_with(|| p.prover())
                    .prove(m.leaf)
                    .ok(),
                None => None,
            };
            used.insert(m.epoch);
            evidence
                .proofs
                .push(proof.map(|p| p.encode()).unwrap_or_default());
            for h in self.receipts.get(n).into_iter().flatten() {
                evidence.receipts.extend(self.read(h));
            }
        }
        // Cited ids the bundle leaves out but the stage holds: proved sealed
        // elsewhere, so the engine reads them as outside the slice, not missing.
        let cited: BTreeSet<MessageId> = evidence
            .envelopes
            .iter()
            .filter_map(|b| SignedEnvelope::decode(b.clone()).ok())
            .flat_map(|env| env.envelope().citations.clone())
            .filter(|c| !ids.contains(&c.digest))
            .collect();
        for c in cited {
            let Some(m) = self.envelopes.get(&c.digest) else {
                continue;
            };
            let Some((p, _)) = self.epochs.get(&m.epoch) else {
                continue;
            };
            if let Ok(proof) = provers
                .entry(m.epoch)
                .or_insert_with(|| p.prover())
                .prove(m.leaf)
            {
                used.insert(m.epoch);
                evidence.elsewhere.push(c.leaf_bytes());
                evidence.elsewhere_proofs.push(proof.encode());
            }
        }
        for e in used {
            if let Some((p, _)) = self.epochs.get(&e) {
                evidence.headers.push(p.header.clone());
                evidence.checkpoints.push(p.checkpoint.clone());
            }
        }
        drop(provers);
        if let Some(e) = self.spill_error.borrow_mut().take() {
            return Err(SlicerError::Spill(e));
        }
        self.unresolved += unresolved as u64;
        Ok(SliceBundle {
            declaration: w.declaration.clone(),
            evidence,
        })
    }

    /// Keeps the bytes of a held message or receipt: in the spill, or in memory
    /// when the spill cannot take them.
    fn keep(&mut self, bytes: &[u8]) -> Held {
        match self.spill.put(bytes) {
            Ok(at) => Held::Disk(at),
            Err(e) => {
                if self.spill_fallbacks == 0 {
                    tracing::warn!(error = %e, "slicer keeps message bytes in memory: its spill failed");
                }
                self.spill_fallbacks += 1;
                Held::Memory(bytes.into())
            }
        }
    }

    /// The bytes kept by [`Self::keep`]; a spill read failure is remembered and
    /// fails the bundle being built ([`Self::bundle`]).
    fn read(&self, held: &Held) -> Option<Vec<u8>> {
        match held {
            Held::Memory(b) => Some(b.to_vec()),
            Held::Disk(at) => match self.spill.get(*at) {
                Ok(b) => Some(b),
                Err(e) => {
                    tracing::error!(error = %e, "slicer could not read its spill");
                    self.spill_error.borrow_mut().get_or_insert(e);
                    None
                }
            },
        }
    }

    /// Releases the bytes of a held message or receipt.
    fn forget(&mut self, held: Held) {
        if let Held::Disk(at) = held {
            self.spill.release(at);
        }
    }

    /// Drops the receipts held for message `n`.
    fn drop_receipts(&mut self, n: &NodeId) {
        for h in self.receipts.remove(n).unwrap_or_default() {
            self.forget(h);
        }
    }

    /// Handles one input: a sealed epoch, or a declaration from `audita.adverse`.
    pub fn handle(&mut self, input: Input) -> Result<(), String> {
        match input {
            Input::Epoch(epoch) => {
                self.add_epoch(epoch);
                Ok(())
            }
            Input::Record(d) if d.topic.ends_with(topics::ADVERSE) => self.declare(d.payload),
            Input::Record(d) => Err(format!("slicer does not read topic {}", d.topic)),
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
        self.run_with(input, out, stop, max_idle, &mut NoTap)
    }

    /// [`Self::run`], handing every joined epoch to `tap` first (before the slicer
    /// takes it) and calling the tap when no input is ready: other operators over
    /// the same join (the monitor's detectors), so the bytes are fetched and joined
    /// once per process.
    pub fn run_with(
        &mut self,
        input: &mut SealedInput,
        out: &mut dyn Producer,
        stop: &AtomicBool,
        max_idle: Option<Duration>,
        tap: &mut dyn EpochTap,
    ) -> Result<(), SlicerError> {
        let mut idle_since = Instant::now();
        let mut checked = Instant::now();
        while !stop.load(Ordering::SeqCst) {
            match input.poll(Duration::from_millis(20))? {
                Some(got) => {
                    idle_since = Instant::now();
                    self.join = (input.backlog().0, input.stats().missing);
                    let started = Instant::now();
                    if let Input::Epoch(epoch) = &got {
                        tap.epoch(epoch, input.stats().missing, out)?;
                    }
                    let tapped = started.elapsed();
                    if let Err(e) = self.handle(got) {
                        tracing::warn!(error = %e, "slicer skipped a record");
                    }
                    let taken = started.elapsed();
                    // Under sustained input the queue never runs dry: check the
                    // waiting declarations every 50 ms regardless.
                    let mut emitted = 0;
                    if checked.elapsed() >= Duration::from_millis(50) {
                        emitted = self.emit_ready(out)?;
                        checked = Instant::now();
                    }
                    // One step holds up the detectors' next epoch (and so alerts):
                    // say where a long one went.
                    let took = started.elapsed();
                    if took >= STALL {
                        tracing::info!(
                            tap_ms = tapped.as_millis() as u64,
                            add_ms = (taken - tapped).as_millis() as u64,
                            emit_ms = (took - taken).as_millis() as u64,
                            emitted,
                            "slicer step held the input"
                        );
                    }
                }
                None => {
                    tap.idle(out)?;
                    self.emit_ready(out)?;
                    if max_idle.is_some_and(|m| idle_since.elapsed() >= m) {
                        break;
                    }
                }
            }
        }
        // Stopped (SIGTERM) or idle: emit what is complete and deliver it before exit.
        self.emit_ready(out)?;
        out.flush()?;
        Ok(())
    }
}

/// An operator that reads the slicer's join alongside it ([`SlicerStage::run_with`]).
pub trait EpochTap {
    /// One joined epoch, before the slicer takes it (`missing`: the join's count of
    /// sealed items whose bytes were gone, so far).
    fn epoch(
        &mut self,
        epoch: &EpochMessage,
        missing: u64,
        out: &mut dyn Producer,
    ) -> Result<(), BusError>;
    /// No input was ready within the poll.
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

/// A citation (+1) or realisation edge of one sealed message.
enum Edge {
    Cites(NodeId, NodeId),
    Realised(NodeId),
}

/// Whether `env` is an actuation report: a `tool_output` of tool `actuator`, whose
/// citations are the commands it realised.
fn is_actuation(env: &audita_evidence::Envelope) -> bool {
    matches!(&env.payload, Payload::ToolOutput { tool, .. } if tool == "actuator")
}

/// The dataflow updates (multiplicity `d`) of message `child` citing `parents`:
/// one citation edge per parent, and each parent realised when `child` is an
/// actuation report.
fn edges(child: NodeId, parents: &[NodeId], actuation: bool, d: isize) -> Vec<(Edge, isize)> {
    let mut out: Vec<(Edge, isize)> = parents
        .iter()
        .map(|p| (Edge::Cites(child, *p), d))
        .collect();
    if actuation {
        out.extend(parents.iter().map(|p| (Edge::Realised(*p), d)));
    }
    out
}

fn batch_push(batch: &mut EpochBatch, edge: Edge, d: isize) {
    match edge {
        Edge::Cites(c, p) => batch.cites.push(((c, p), d)),
        Edge::Realised(n) => batch.realised.push((n, d)),
    }
}
