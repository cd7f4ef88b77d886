//! An emitter: the adverse declarations one worker owns (`incident mod peers`), how
//! long each waits, and the rounds in which it gathers a slice from the shards and
//! publishes the bundle.
//!
//! Design constraints:
//! - A declaration waits until every anchor it names, and every message its facts
//!   cite as evidence, is held by its shard; then its anchors enter the dataflow and
//!   its closure follows. Its slice is emitted once complete (every closure member
//!   and window message settled with its receipt, at every shard) and settled (the
//!   sealer's event-time watermark, as far as every worker has fed, past the window's
//!   end by the grace in force) — or, after `max_wait`, on the rules the slicer has
//!   always had for quiet streams and incomplete windows ([`Emitter::ready`]).
//! - Then three rounds, one turn each: **fetch** the closure and anchors (with every
//!   shard's word on the window's completeness), **pick** the window messages the
//!   scope reads (or all of them), **prove** the members and what they cite. The
//!   bundle is built from what came back alone ([`crate::view`]), so it is the same
//!   however many workers hold the messages.
//! - The grace follows the lateness every shard saw in each epoch, observed in
//!   epoch order once every worker has fed the epoch: the same grace one process
//!   computes from the epoch's timestamps.

use crate::view::{self, Gathered, NodeId, Proofs};
use crate::wire::{key, AnchorUpdate, Answer, Ask, Asked, IncidentId, Key, Query, Reply, Window};
use audita_bus::{BusError, Producer};
use audita_join::Grace;
use audita_topics::names as topics;
use audita_topics::VerdictRecord;
use audita_verdict::{Adverse, AdverseDecl, DutyRegistry};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Most evidence ids of one declaration's facts the slicer waits for (a declaration
/// naming more is waited for on these; the engine checks all of it).
pub const MAX_DECLARED_EVIDENCE: usize = 10_000;

/// Wall time without a new epoch after which the stream counts as quiet.
pub const QUIET: Duration = Duration::from_secs(1);

/// How often a waiting declaration's completeness is asked about while input flows.
pub const STATUS_EVERY: Duration = Duration::from_millis(50);

/// How a bundle's scope is computed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scoping {
    /// Narrow the window by the messages' facets first, then compute the reads
    /// over what is left; fall back to the whole window when the narrowed one
    /// cannot be shown to read the same ([`crate::view`]).
    #[default]
    Narrowed,
    /// Gather the whole window every time (the reference the narrowed path is
    /// tested against).
    Exhaustive,
}

/// Where a declaration is in its emission.
enum Step {
    /// Waiting to be complete and settled.
    Waiting,
    /// Its anchors enter the dataflow in the coming turn: fetch once the closure
    /// followed them.
    Anchoring,
    /// Fetching the closure and anchors.
    Fetch,
    /// Picking the window: by the names of a narrowed scope, or every message
    /// (with the records of their parents when missing citations must be read).
    Picks { asked: Option<Asked>, parents: bool },
    /// Proving the members.
    Prove { members: BTreeSet<NodeId> },
}

/// An adverse declaration this worker owns.
struct Waiting {
    incident: IncidentId,
    window: Window,
    name: String,
    declaration: Vec<u8>,
    anchors: Vec<Key>,
    /// Every message the declaration's facts name as their evidence.
    evidence: Vec<Key>,
    arrived: Instant,
    anchored_at: Option<Instant>,
    step: Step,
    /// The last completeness answer.
    status: Option<Status>,
    /// The last completeness question covered the closure (its anchors were in
    /// the dataflow a turn before).
    asked_closure: bool,
    gathered: Gathered,
    proofs: Proofs,
}

/// Completeness as every shard answered it.
#[derive(Default)]
struct Status {
    held: BTreeSet<Key>,
    pending: BTreeSet<Key>,
    window_pending: bool,
}

/// What one turn of an emitter produces for the dataflow.
#[derive(Default)]
pub struct Turned {
    /// Questions to ask.
    pub queries: Vec<Query>,
    /// `((anchor, incident), ±1)`: anchors to enter or retract.
    pub anchors: Vec<AnchorUpdate>,
}

/// The counters of an emitter.
#[derive(Clone, Copy, Debug, Default)]
pub struct EmitStats {
    /// Slices emitted (or published as abstentions for size).
    pub emitted: usize,
    /// Declarations waiting.
    pub waiting: usize,
    /// Citations emitted slices could not resolve.
    pub unresolved: u64,
    /// Incidents scoped over a narrowed window.
    pub narrowed: u64,
    /// Incidents scoped over their whole window.
    pub whole_window: u64,
    /// The watermark as far as every worker has fed.
    pub watermark: u64,
    /// The grace in force (ms).
    pub grace_ms: u64,
}

/// One worker's declarations.
pub struct Emitter {
    me: u32,
    peers: usize,
    waiting: Vec<Waiting>,
    emitted: BTreeSet<String>,
    next: u64,
    closures: BTreeMap<(IncidentId, Key), isize>,
    grace: Grace,
    /// The last epoch observed into the grace.
    graced: Option<u64>,
    watermark: u64,
    /// The last epoch every worker has fed (the record root of a bundle).
    fed: Option<u64>,
    last_epoch_at: Option<Instant>,
    status_at: Option<Instant>,
    max_wait: Duration,
    topic_prefix: String,
    max_record: usize,
    registry: Option<DutyRegistry>,
    predicates: Option<audita_monitor::Predicates>,
    scoping: Scoping,
    narrowed: u64,
    whole_window: u64,
    unresolved: u64,
    /// Slices emitted since the last [`Emitter::take_latencies`], with the time their
    /// declaration waited.
    latencies: Vec<Duration>,
    /// Moves of declarations so far ([`Emitter::progress`]).
    moves: u64,
}

fn parse_anchor(s: &str) -> Option<NodeId> {
    let (_, hex_digest) = s.rsplit_once(':')?;
    let bytes = hex::decode(hex_digest).ok()?;
    bytes.try_into().ok()
}

/// The emitter of incident `name` among `peers` workers.
pub fn emitter_of(name: &str, peers: usize) -> u32 {
    let d = audita_evidence::sha256(name.as_bytes());
    (u64::from_be_bytes(d[..8].try_into().unwrap_or([0; 8])) % peers.max(1) as u64) as u32
}

impl Emitter {
    /// The emitter of worker `me` of `peers`.
    pub fn new(me: u32, peers: usize, topic_prefix: &str, max_wait: Duration) -> Emitter {
        Emitter {
            me,
            peers: peers.max(1),
            waiting: Vec::new(),
            emitted: BTreeSet::new(),
            next: 0,
            closures: BTreeMap::new(),
            grace: Grace::new(),
            graced: None,
            watermark: 0,
            fed: None,
            last_epoch_at: None,
            status_at: None,
            max_wait,
            topic_prefix: topic_prefix.to_string(),
            max_record: audita_bus::MAX_RECORD_BYTES,
            registry: None,
            predicates: None,
            scoping: Scoping::default(),
            narrowed: 0,
            whole_window: 0,
            unresolved: 0,
            latencies: Vec::new(),
            moves: 0,
        }
    }

    /// Sets the largest bundle published.
    pub fn max_record(&mut self, bytes: usize) {
        self.max_record = bytes;
    }

    /// Sets the duty registry bundles are scoped with.
    pub fn registry(&mut self, registry: Option<DutyRegistry>) {
        self.registry = registry;
    }

    /// Sets the predicate file the monitor's reads are scoped with.
    pub fn predicates(&mut self, predicates: Option<audita_monitor::Predicates>) {
        self.predicates = predicates;
    }

    /// Sets how a bundle's scope is computed.
    pub fn scoping(&mut self, scoping: Scoping) {
        self.scoping = scoping;
    }

    /// A number that changes whenever a declaration moves on (for a caller running
    /// turns to a fixed point).
    pub fn progress(&self) -> u64 {
        self.moves
    }

    /// The counters now.
    pub fn stats(&self) -> EmitStats {
        EmitStats {
            emitted: self.emitted.len(),
            waiting: self.waiting.len(),
            unresolved: self.unresolved,
            narrowed: self.narrowed,
            whole_window: self.whole_window,
            watermark: self.watermark,
            grace_ms: self.grace.ms(),
        }
    }

    /// Wait times of the slices emitted since the last call.
    pub fn take_latencies(&mut self) -> Vec<Duration> {
        std::mem::take(&mut self.latencies)
    }

    /// Declarations waiting, with how many of their anchors are not held yet (as
    /// last answered).
    pub fn waiting(&self) -> Vec<(String, usize)> {
        self.waiting
            .iter()
            .map(|w| {
                let unheld = match &w.status {
                    Some(s) => w.anchors.iter().filter(|a| !s.held.contains(a)).count(),
                    None => w.anchors.len(),
                };
                (w.name.clone(), unheld)
            })
            .collect()
    }

    /// Whether a declaration is being gathered (its rounds must run to the end).
    pub fn busy(&self) -> bool {
        self.waiting
            .iter()
            .any(|w| !matches!(w.step, Step::Waiting))
    }

    /// The earliest window start of the waiting declarations (`u64::MAX`: none).
    pub fn hold(&self) -> u64 {
        self.waiting
            .iter()
            .map(|w| w.window.0)
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Takes one adverse declaration (JSON); one this worker does not own is
    /// ignored. Returns an error line for a malformed one.
    pub fn declare(&mut self, declaration: Vec<u8>) -> Result<(), String> {
        let v: serde_json::Value = serde_json::from_slice(&declaration)
            .map_err(|e| format!("adverse declaration is not JSON: {e}"))?;
        let name = v
            .get("incident")
            .and_then(|n| n.as_str())
            .ok_or("adverse declaration without incident name")?
            .to_string();
        let anchors: Vec<NodeId> = v
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
        let t_star = v
            .get("t_star_ms")
            .and_then(|t| t.as_u64())
            .ok_or("adverse declaration without t_star_ms")?;
        if emitter_of(&name, self.peers) != self.me {
            return Ok(());
        }
        if self.emitted.contains(&name) || self.waiting.iter().any(|w| w.name == name) {
            return Ok(()); // re-delivered declaration
        }
        // The messages its facts rest on (the telemetry establishing t*, the actuation
        // reports realising the anchors): a monitor declares only after reading them
        // sealed, but `audita.epochs` and `audita.adverse` interleave freely, and a
        // source partition out of time order lets the watermark pass a window before
        // all of it is sealed. Ids that do not parse are left to the engine's check.
        let mut evidence: Vec<Key> = v
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
            .map(|d| key(&d))
            .collect();
        evidence.sort_unstable();
        evidence.dedup();
        let start = v
            .get("window_start_ms")
            .and_then(|t| t.as_u64())
            .unwrap_or(0);
        let end = v
            .get("window_end_ms")
            .and_then(|t| t.as_u64())
            .unwrap_or(t_star);
        let incident = self.next * self.peers as u64 + u64::from(self.me);
        self.next += 1;
        self.waiting.push(Waiting {
            incident,
            window: (start, end),
            name,
            declaration,
            anchors: anchors.iter().map(key).collect(),
            evidence,
            arrived: Instant::now(),
            anchored_at: None,
            step: Step::Waiting,
            status: None,
            asked_closure: false,
            gathered: Gathered::default(),
            proofs: Proofs::default(),
        });
        Ok(())
    }

    /// Takes what every worker said up to the last turn: the last epoch every
    /// worker has fed, the watermark of each epoch this worker took up to it
    /// (`observed`, in epoch order) and the largest lateness any shard saw in each.
    pub fn hear(&mut self, fed: u64, observed: &[(u64, u64)], late: &BTreeMap<u64, u64>) {
        if self.fed.is_some_and(|f| f >= fed) {
            return;
        }
        self.fed = Some(fed);
        self.last_epoch_at = Some(Instant::now());
        for (epoch, watermark) in observed {
            if self.graced.is_some_and(|g| g >= *epoch) {
                continue;
            }
            self.grace
                .observe_lateness(late.get(epoch).copied().unwrap_or(0), *watermark);
            self.graced = Some(*epoch);
            self.watermark = self.watermark.max(*watermark);
        }
    }

    /// Changes to this worker's incidents' closures.
    pub fn closure_changed(&mut self, changes: Vec<AnchorUpdate>) {
        if !changes.is_empty() {
            self.moves += 1;
        }
        for ((node, incident), d) in changes {
            let c = self.closures.entry((incident, node)).or_insert(0);
            *c += d;
            if *c == 0 {
                self.closures.remove(&(incident, node));
            }
        }
    }

    fn closure(&self, incident: IncidentId) -> BTreeSet<Key> {
        self.closures
            .range((incident, 0)..=(incident, Key::MAX))
            .filter(|(_, c)| **c > 0)
            .map(|((_, k), _)| *k)
            .collect()
    }

    /// The questions and anchor updates of this turn; `force` asks every waiting
    /// declaration's completeness now (the input is idle, or a caller waits for it).
    pub fn turn(&mut self, force: bool) -> Turned {
        let mut t = Turned::default();
        let asking = force || self.status_at.is_none_or(|at| at.elapsed() >= STATUS_EVERY);
        if asking {
            self.status_at = Some(Instant::now());
        }
        let me = self.me;
        for i in 0..self.waiting.len() {
            let closure = self.closure(self.waiting[i].incident);
            let w = &mut self.waiting[i];
            let ask = |ask| Query {
                asker: me,
                incident: w.incident,
                ask,
            };
            match &w.step {
                Step::Waiting if asking => {
                    let mut keys: Vec<Key> = w.anchors.clone();
                    keys.extend(&w.evidence);
                    // The closure follows the anchors within the turn they enter:
                    // once it holds them (or there are none), it is whole.
                    w.asked_closure =
                        w.anchored_at.is_some() && (w.anchors.is_empty() || !closure.is_empty());
                    keys.extend(&closure);
                    t.queries.push(ask(Ask::Status {
                        window: w.window,
                        keys,
                    }));
                }
                Step::Waiting | Step::Anchoring => {}
                Step::Fetch => {
                    let mut keys: BTreeSet<Key> = closure;
                    keys.extend(&w.anchors);
                    t.queries.push(ask(Ask::Fetch {
                        window: w.window,
                        keys: keys.into_iter().collect(),
                    }));
                }
                Step::Picks { asked, parents } => {
                    t.queries.push(ask(Ask::Picks {
                        window: w.window,
                        exhaustive: asked.is_none(),
                        asked: asked.clone().unwrap_or_default(),
                        parents: *parents,
                    }));
                }
                Step::Prove { members } => {
                    t.queries.push(ask(Ask::Prove {
                        keys: view::to_prove(&w.gathered, members),
                        root: self.fed.unwrap_or(0),
                    }));
                }
            }
        }
        t
    }

    /// Takes the answers of the last turn, moves each declaration on, and publishes
    /// what is complete. Returns the anchor updates for the next turn and the number
    /// of slices emitted.
    pub fn answered(
        &mut self,
        answers: Vec<Answer>,
        evicted: u64,
        out: &mut dyn Producer,
    ) -> Result<(Vec<AnchorUpdate>, usize), BusError> {
        let mut statuses: BTreeMap<IncidentId, Status> = BTreeMap::new();
        for a in answers {
            let Some(w) = self.waiting.iter_mut().find(|w| w.incident == a.incident) else {
                continue;
            };
            match a.reply {
                Reply::Status {
                    held,
                    pending,
                    window_pending,
                } => {
                    let s = statuses.entry(a.incident).or_default();
                    s.held.extend(held);
                    s.pending.extend(pending);
                    s.window_pending |= window_pending;
                }
                Reply::Records { records, check } => w.gathered.add(records, check),
                Reply::Proof { key, epoch, proof } => {
                    w.proofs.by_key.insert(key, (epoch, proof));
                }
                Reply::Epoch {
                    number,
                    header,
                    checkpoint,
                } => {
                    w.proofs.epochs.insert(number, (header, checkpoint));
                }
            }
        }
        let mut anchors = Vec::new();
        let mut emitted = 0;
        for i in (0..self.waiting.len()).rev() {
            let status = statuses.remove(&self.waiting[i].incident);
            let step = std::mem::replace(&mut self.waiting[i].step, Step::Waiting);
            let next = match step {
                Step::Waiting => match status {
                    Some(s) => self.waited(i, s, &mut anchors),
                    None => Step::Waiting,
                },
                // The anchors entered in the turn just taken: their closure is whole.
                Step::Anchoring => Step::Fetch,
                Step::Fetch => self.fetched(i, evicted),
                Step::Picks { asked, .. } => self.picked(i, asked.is_some()),
                Step::Prove { members } => {
                    let w = self.waiting.remove(i);
                    self.publish(w, &members, &mut anchors, out)?;
                    emitted += 1;
                    continue;
                }
            };
            if !matches!(next, Step::Waiting) {
                self.moves += 1;
            }
            self.waiting[i].step = next;
        }
        if emitted > 0 {
            out.flush()?;
        }
        Ok((anchors, emitted))
    }

    /// A waiting declaration's new completeness: enter its anchors once held, and
    /// start gathering once ready.
    fn waited(&mut self, i: usize, s: Status, anchors: &mut Vec<AnchorUpdate>) -> Step {
        let grace = self.grace.ms();
        let quiet = self.last_epoch_at.is_none_or(|t| t.elapsed() >= QUIET);
        let long_quiet = self
            .last_epoch_at
            .is_some_and(|t| t.elapsed() >= self.max_wait);
        let watermark = self.watermark;
        let max_wait = self.max_wait;
        let closure = self.closure(self.waiting[i].incident);
        let w = &mut self.waiting[i];
        let anchors_held = w.anchors.iter().all(|a| s.held.contains(a));
        let mut entered = false;
        if w.anchored_at.is_none() && anchors_held {
            anchors.extend(w.anchors.iter().map(|a| ((*a, w.incident), 1)));
            w.anchored_at = Some(Instant::now());
            self.moves += 1;
            entered = true;
        }
        let waited_out = w.arrived.elapsed() >= max_wait;
        let settled = watermark >= w.window.1.saturating_add(grace);
        // Complete: anchors and evidence held, nothing of the window pending, no
        // closure member pending (asked once the closure followed the anchors).
        let closed = w.anchored_at.is_some()
            && w.asked_closure
            && w.evidence.iter().all(|e| s.held.contains(e))
            && !s.window_pending
            && closure.iter().all(|k| !s.pending.contains(k));
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
        let stale = w.arrived.elapsed() >= 4 * max_wait;
        let ready = (settled && (closed || waited_out))
            || (closed && ((waited_out && (quiet || stale)) || long_quiet));
        w.status = Some(s);
        if !ready {
            return Step::Waiting;
        }
        tracing::debug!(
            incident = %w.name,
            waited_ms = w.arrived.elapsed().as_millis() as u64,
            grace_ms = grace,
            watermark_past_end_ms = watermark.saturating_sub(w.window.1),
            settled,
            closed,
            "slice ready"
        );
        if w.anchored_at.is_none() {
            // Anchors never sealed: slice what the record holds (the verdict layer
            // reports the anchors as missing).
            anchors.extend(w.anchors.iter().map(|a| ((*a, w.incident), 1)));
            w.anchored_at = Some(Instant::now());
            return Step::Anchoring;
        }
        if entered {
            // Entered in this very turn: the closure follows in the next.
            return Step::Anchoring;
        }
        Step::Fetch
    }

    /// The closure came back: narrow the window if that reads the same.
    fn fetched(&mut self, i: usize, evicted: u64) -> Step {
        let closure = self.closure(self.waiting[i].incident);
        let w = &self.waiting[i];
        let Some(duties) = self.registry.as_ref() else {
            // No registry: the whole window is shipped.
            return Step::Picks {
                asked: None,
                parents: false,
            };
        };
        let adverse = serde_json::from_slice::<AdverseDecl>(&w.declaration)
            .ok()
            .and_then(|d| Adverse::new(d).ok());
        let asked = match (&adverse, self.scoping) {
            (Some(a), Scoping::Narrowed) => view::narrow(
                &w.gathered,
                a,
                duties,
                self.predicates.as_ref(),
                &closure,
                evicted,
            ),
            _ => None,
        };
        // The window parents of every pick are read with it; over the whole window,
        // the parents also tell which citations are missing.
        let parents = adverse.is_some();
        Step::Picks { asked, parents }
    }

    /// The window's messages came back: compute what the verdict reads. Narrowed,
    /// nothing is missing (every parent of the window and the closure is held,
    /// [`view::narrow`]); over the whole window, what no shard returned is.
    fn picked(&mut self, i: usize, narrowed: bool) -> Step {
        let closure_keys = self.closure(self.waiting[i].incident);
        let w = &self.waiting[i];
        let (lo, hi) = w.window;
        let closure: BTreeSet<NodeId> = closure_keys
            .iter()
            .filter_map(|k| w.gathered.by_key(*k).map(|r| r.id.digest))
            .collect();
        let mut members = closure.clone();
        let window = w.gathered.in_time(lo, hi);
        let adverse = serde_json::from_slice::<AdverseDecl>(&w.declaration)
            .ok()
            .and_then(|d| Adverse::new(d).ok());
        match (self.registry.as_ref(), adverse) {
            (Some(duties), Some(adverse)) => {
                let started = Instant::now();
                let (decoded, reads) = view::reads_among(
                    &w.gathered,
                    &adverse,
                    duties,
                    self.predicates.as_ref(),
                    &closure,
                    window,
                    !narrowed,
                );
                if narrowed {
                    self.narrowed += 1;
                } else {
                    self.whole_window += 1;
                }
                tracing::debug!(
                    incident = %w.name,
                    narrowed,
                    decoded,
                    shipped = reads.len(),
                    took_ms = started.elapsed().as_millis() as u64,
                    "slice scoped"
                );
                members.extend(reads);
            }
            // Without a registry, or with an unreadable declaration (the engine
            // reports it), the whole time window is shipped.
            _ => members.extend(window),
        }
        Step::Prove { members }
    }

    /// Publishes a gathered slice (or the abstention of one too large for a record)
    /// and retracts its anchors.
    fn publish(
        &mut self,
        w: Waiting,
        members: &BTreeSet<NodeId>,
        anchors: &mut Vec<AnchorUpdate>,
        out: &mut dyn Producer,
    ) -> Result<(), BusError> {
        let root = self.fed.unwrap_or(0);
        let (bundle, unresolved) =
            view::bundle(&w.declaration, &w.gathered, members, &w.proofs, root);
        self.unresolved += unresolved;
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
            out.send(
                &format!("{}{}", self.topic_prefix, topics::SLICES),
                w.name.as_bytes(),
                &bytes,
            )?;
        }
        tracing::debug!(
            incident = %w.name,
            waited_ms = w.arrived.elapsed().as_millis() as u64,
            members = members.len(),
            "slice emitted"
        );
        self.latencies.push(w.arrived.elapsed());
        self.emitted.insert(w.name);
        // The emitted incident leaves the dataflow.
        anchors.extend(w.anchors.iter().map(|a| ((*a, w.incident), -1)));
        self.closures
            .retain(|(incident, _), _| *incident != w.incident);
        Ok(())
    }
}
