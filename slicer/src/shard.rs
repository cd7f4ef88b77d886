//! One worker's share of the held messages: the messages it owns ([`crate::wire::owner`]),
//! their bytes, their time and facet indexes, their completeness, and their eviction.
//!
//! Design constraints:
//! - A message enters its owner's shard when an epoch seals it; it leaves when the
//!   retention horizon passes it ([`Shard::evict`]). Whatever the shard takes or
//!   evicts it says to the rest of the dataflow as it does: citation edges (+1/−1),
//!   [`Link`]s to the owners of the messages it cites, live counts to the epochs'
//!   proof keepers, its eviction point and the lateness it saw.
//! - Lean per message (the slicer holds minutes of a warehouse's traffic): one slot
//!   in a chunked slab (no table ever moves all its entries at once, so no step
//!   stalls at a doubling), a 16-byte key in one incrementally resized map, 4-byte
//!   slot numbers in per-second buckets for time and facets, the bytes and receipts
//!   on disk ([`crate::spill`]). Facet buckets are pruned by whole seconds behind the
//!   eviction point; an entry they keep for a slot reused since is never read, since
//!   only windows at or after the eviction point are queried.
//! - Completeness is kept incrementally: a message is *settled* once each message
//!   it cites is held (its owner says so, [`Link::Held`]), and *pending* until it is
//!   settled and its receipt is held. Windows and closures are judged complete from
//!   these sets, never by scanning.
//! - Facet hashes are keyed per shard (an author cannot aim names at a collision);
//!   an emitter asks by name, and each shard hashes the names itself. A collision only
//!   picks a message a scope does not keep, which the scope then reads nothing of.

use crate::spill::{Spill, Spilled};
use crate::wire::{Asked, Control, Key, Link, Record, Window, WindowCheck};
use audita_evidence::SignedEnvelope;
use audita_monitor::predicate::site_of;
use audita_verdict::KeptInEveryScope;
use smallvec::SmallVec;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::{Duration, Instant};

/// Record time per time and facet bucket (ms).
pub const BUCKET_MS: u64 = 1_000;

/// Messages per slab chunk (a chunk is allocated whole and never moves).
const CHUNK: usize = 1 << 14;

/// Where the shard keeps the bytes of a held message or receipt: in the spill, or in
/// memory when the spill could not take them (a full disk costs memory, never a
/// message).
#[derive(Clone, Copy, Debug)]
enum Held {
    Disk(Spilled),
    Memory(u32),
}

/// A receipt of a held message: (epoch, index among the epoch's receipts, bytes).
type Receipt = (u64, u32, Held);

/// A held message.
struct Msg {
    key: [u64; 2],
    timestamp: u64,
    leaf: u64,
    epoch: u64,
    bytes: Held,
    /// The messages it cites (distinct keys).
    parents: Box<[Key]>,
    receipts: SmallVec<[Receipt; 1]>,
    /// Parents not yet known to be held.
    missing: u32,
}

impl Msg {
    fn key(&self) -> Key {
        (u128::from(self.key[0]) << 64) | u128::from(self.key[1])
    }
}

fn split(k: Key) -> [u64; 2] {
    [(k >> 64) as u64, k as u64]
}

/// Slots that never move: a slab of fixed-size chunks with a free list.
#[derive(Default)]
struct Slab {
    chunks: Vec<Vec<Option<Msg>>>,
    free: Vec<u32>,
    len: usize,
}

impl Slab {
    fn insert(&mut self, m: Msg) -> u32 {
        self.len += 1;
        if let Some(slot) = self.free.pop() {
            self.chunks[slot as usize / CHUNK][slot as usize % CHUNK] = Some(m);
            return slot;
        }
        if self.chunks.last().is_none_or(|c| c.len() == CHUNK) {
            self.chunks.push(Vec::with_capacity(CHUNK));
        }
        let n = self.chunks.len() - 1;
        let chunk = &mut self.chunks[n];
        chunk.push(Some(m));
        (n * CHUNK + chunk.len() - 1) as u32
    }

    fn get(&self, slot: u32) -> Option<&Msg> {
        self.chunks
            .get(slot as usize / CHUNK)?
            .get(slot as usize % CHUNK)?
            .as_ref()
    }

    fn get_mut(&mut self, slot: u32) -> Option<&mut Msg> {
        self.chunks
            .get_mut(slot as usize / CHUNK)?
            .get_mut(slot as usize % CHUNK)?
            .as_mut()
    }

    fn remove(&mut self, slot: u32) -> Option<Msg> {
        let m = self
            .chunks
            .get_mut(slot as usize / CHUNK)?
            .get_mut(slot as usize % CHUNK)?
            .take()?;
        self.len -= 1;
        self.free.push(slot);
        Some(m)
    }
}

/// Slot numbers by second of record time.
type Buckets = BTreeMap<u64, Vec<u32>>;

/// Which facet of a message a facet index entry is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Role {
    Author,
    Target,
    /// The monitor-read target, indexed only where it is neither the author nor
    /// the target (a query for it asks all three).
    Monitor,
    Site,
}

/// Point lookups by key only (never iterated into an output): foldhash seeded per
/// map from the process's random seed (an author grinding ids cannot aim them at
/// one bucket), in a griddle map, which moves its entries to a doubled table a few
/// per insert instead of all at once.
type ById<V> = griddle::HashMap<Key, V, foldhash::fast::RandomState>;

/// What the shard says to the rest of the dataflow while it takes or evicts.
#[derive(Default)]
pub struct Said {
    /// Citation edges `(child, parent)` with their multiplicity.
    pub edges: Vec<((Key, Key), isize)>,
    /// Completeness links to other owners.
    pub links: Vec<Link>,
    /// Live counts for the epochs' keepers.
    pub live: BTreeMap<u64, i64>,
    /// What every worker hears.
    pub control: Vec<Control>,
}

/// What every worker said ([`Control`]), as of the last turn completed: a record of
/// a later turn (another worker already in it) waits in `later` until that turn is
/// over, so every worker reads the same values after the same turn.
#[derive(Clone, Debug, Default)]
pub struct Globals {
    /// Records of turns not completed yet here, with their turn.
    later: Vec<(u64, Control)>,
    /// Per worker: the earliest window start of its waiting declarations.
    pub holds: BTreeMap<u32, u64>,
    /// Per worker: idle past the stage's idle limit.
    pub idle: BTreeMap<u32, bool>,
    /// Per worker: its shard's eviction point.
    pub evicted: BTreeMap<u32, u64>,
    /// Per worker: the last epoch it fed, and the watermark after it.
    pub fed: BTreeMap<u32, (Option<u64>, u64)>,
    /// Per epoch: the largest lateness any shard saw in it.
    pub late: BTreeMap<u64, u64>,
}

impl Globals {
    /// Takes one broadcast said in `turn` (applied once that turn is over,
    /// [`Globals::settle`]).
    pub fn hear_at(&mut self, turn: u64, c: Control) {
        self.later.push((turn, c));
    }

    /// Applies what was said in every turn up to `turn` (just completed).
    pub fn settle(&mut self, turn: u64) {
        let mut now: Vec<(u64, Control)> = Vec::new();
        self.later.retain(|(t, c)| {
            if *t <= turn {
                now.push((*t, *c));
                false
            } else {
                true
            }
        });
        now.sort_by_key(|(t, _)| *t);
        for (_, c) in now {
            self.hear(c);
        }
    }

    /// Takes one broadcast.
    fn hear(&mut self, c: Control) {
        match c {
            Control::Fed {
                from,
                epoch,
                watermark,
            } => {
                self.fed.insert(from, (epoch, watermark));
            }
            Control::Hold { from, start, idle } => {
                self.holds.insert(from, start);
                self.idle.insert(from, idle);
            }
            Control::Evicted { from, before } => {
                self.evicted.insert(from, before);
            }
            Control::Late { epoch, worst } => {
                let w = self.late.entry(epoch).or_insert(0);
                *w = (*w).max(worst);
            }
        }
    }

    /// The last epoch every one of `peers` workers has fed (and so every shard has
    /// taken once the turn it was said in is over), with the watermark after it.
    pub fn fed_by_all(&self, peers: usize) -> Option<(u64, u64)> {
        if self.fed.len() < peers {
            return None;
        }
        let mut least: Option<(u64, u64)> = None;
        for (epoch, watermark) in self.fed.values() {
            let epoch = (*epoch)?;
            if least.is_none_or(|(e, _)| epoch < e) {
                least = Some((epoch, *watermark));
            }
        }
        least
    }

    /// Whether a worker already said something in `turn` or later (it is in a turn
    /// this worker has not fed yet, and waits for it).
    pub fn said_in_or_after(&self, turn: u64) -> bool {
        self.later.iter().any(|(t, _)| *t >= turn)
    }

    /// Every one of `peers` workers said it is idle.
    pub fn all_idle(&self, peers: usize) -> bool {
        self.idle.len() >= peers && self.idle.values().all(|i| *i)
    }

    /// The latest eviction point of any shard: a parent stamped at or after it is
    /// held wherever it lives, if it ever arrived.
    pub fn evicted_max(&self) -> u64 {
        self.evicted.values().copied().max().unwrap_or(0)
    }
}

/// Counters of a shard.
#[derive(Clone, Copy, Debug, Default)]
pub struct ShardStats {
    /// Messages held.
    pub held: usize,
    /// Messages evicted so far.
    pub evicted: u64,
    /// Bytes in the spill's files.
    pub spill_bytes: u64,
    /// Messages and receipts kept in memory because the spill failed, so far.
    pub spill_fallbacks: u64,
    /// Messages awaiting a parent (not settled).
    pub unsettled: usize,
    /// Messages not yet complete.
    pub pending: usize,
}

/// One worker's held messages.
pub struct Shard {
    slab: Slab,
    index: ById<u32>,
    by_time: Buckets,
    by_facet: HashMap<(Role, u32), Buckets>,
    always: Buckets,
    /// Held messages not every parent of which is held yet, by (time, key).
    unsettled: BTreeSet<(u64, Key)>,
    /// Held messages not complete yet (a parent or their receipt not held).
    pending: BTreeSet<(u64, Key)>,
    /// Per bucket, the oldest parent timestamp a held message of the bucket cites.
    oldest_cited: BTreeMap<u64, u64>,
    /// Unheld parent → held messages (of other shards too) citing it.
    awaited: ById<SmallVec<[Key; 2]>>,
    /// Receipts taken before their message, by (receipt time, message).
    orphans: BTreeSet<(u64, Key)>,
    orphan_receipts: ById<SmallVec<[Receipt; 1]>>,
    spill: Spill,
    /// Bytes kept in memory because the spill failed.
    memory: Vec<Option<Box<[u8]>>>,
    spill_fallbacks: u64,
    /// The first failure to read the spill back since the last answer.
    spill_error: Option<std::io::Error>,
    horizon_ms: u64,
    hold: Duration,
    /// Epoch shares taken within `hold`: (arrival, earliest message timestamp).
    recent: VecDeque<(Instant, u64)>,
    evicted_before: u64,
    evicted: u64,
    kept_always: Option<KeptInEveryScope>,
    predicates: Option<audita_monitor::Predicates>,
    facet_hasher: std::hash::RandomState,
    me: u32,
}

impl Shard {
    /// The shard of worker `me`, holding `horizon_ms` of record time for at least
    /// `hold` of wall time, with its spill in `spill_dir` (default: the system's
    /// temporary directory).
    pub fn new(
        me: u32,
        horizon_ms: u64,
        hold: Duration,
        spill_dir: Option<std::path::PathBuf>,
    ) -> Shard {
        Shard {
            slab: Slab::default(),
            index: ById::default(),
            by_time: Buckets::new(),
            by_facet: HashMap::new(),
            always: Buckets::new(),
            unsettled: BTreeSet::new(),
            pending: BTreeSet::new(),
            oldest_cited: BTreeMap::new(),
            awaited: ById::default(),
            orphans: BTreeSet::new(),
            orphan_receipts: ById::default(),
            spill: Spill::new(spill_dir),
            memory: Vec::new(),
            spill_fallbacks: 0,
            spill_error: None,
            horizon_ms,
            hold,
            recent: VecDeque::new(),
            evicted_before: 0,
            evicted: 0,
            kept_always: None,
            predicates: None,
            facet_hasher: std::hash::RandomState::new(),
            me,
        }
    }

    /// Classifies messages with the duty registry's scope-independent keeping rule
    /// and (when given) the predicate file's sites; set before the first message
    /// arrives.
    pub fn classify_with(
        &mut self,
        kept_always: Option<KeptInEveryScope>,
        predicates: Option<Option<audita_monitor::Predicates>>,
    ) {
        if kept_always.is_some() {
            self.kept_always = kept_always;
        }
        if let Some(p) = predicates {
            self.predicates = p;
        }
    }

    /// Sets the retention horizon (record-time ms) and the least wall time a message
    /// is held.
    pub fn set_horizon(&mut self, horizon_ms: u64, hold: Duration) {
        self.horizon_ms = horizon_ms;
        self.hold = hold;
    }

    /// Keeps the spill's files under `dir` (set before the first message arrives).
    pub fn set_spill_dir(&mut self, dir: std::path::PathBuf) {
        self.spill = Spill::new(Some(dir));
    }

    /// The timestamp of a held message (0 when not held).
    pub fn time_of(&self, key: Key) -> u64 {
        self.index
            .get(&key)
            .and_then(|s| self.slab.get(*s))
            .map_or(0, |m| m.timestamp)
    }

    /// The shard's counters now.
    pub fn stats(&self) -> ShardStats {
        ShardStats {
            held: self.slab.len,
            evicted: self.evicted,
            spill_bytes: self.spill.disk_bytes(),
            spill_fallbacks: self.spill_fallbacks,
            unsettled: self.unsettled.len(),
            pending: self.pending.len(),
        }
    }

    /// Messages whose receipts are held (held messages with one, and receipts taken
    /// before their message, until the horizon passes them).
    pub fn receipts_held(&self) -> usize {
        let held = self
            .slab
            .chunks
            .iter()
            .flatten()
            .flatten()
            .filter(|m| !m.receipts.is_empty())
            .count();
        held + self.orphan_receipts.len()
    }

    /// Whether `key` is held.
    pub fn holds(&self, key: Key) -> bool {
        self.index.contains_key(&key)
    }

    /// The first spill read failure since the last call.
    pub fn take_spill_error(&mut self) -> Option<std::io::Error> {
        self.spill_error.take()
    }

    /// Takes one sealed envelope. Returns false for one it cannot read or holds
    /// already.
    pub fn take_envelope(
        &mut self,
        key: Key,
        epoch: u64,
        leaf: u64,
        before: u64,
        bytes: Vec<u8>,
        said: &mut Said,
    ) -> bool {
        if self.index.contains_key(&key) {
            return false;
        }
        let Ok(env) = SignedEnvelope::decode(bytes) else {
            return false;
        };
        let e = env.envelope();
        let timestamp = e.timestamp;
        let mut parents: Vec<Key> = e
            .citations
            .iter()
            .map(|c| crate::wire::key(&c.digest))
            .collect();
        parents.sort_unstable();
        parents.dedup();
        let facets = self.facets(e);
        let held = self.keep(env.as_bytes());
        let late = before.saturating_sub(timestamp);
        if before > 0 && late > 0 {
            said.control.push(Control::Late { epoch, worst: late });
        }
        for p in &parents {
            said.edges.push(((key, *p), 1));
            said.links.push(Link::Await {
                parent: *p,
                child: key,
            });
        }
        let mut receipts = SmallVec::new();
        if let Some(early) = self.orphan_receipts.remove(&key) {
            receipts = early;
        }
        let slot = self.slab.insert(Msg {
            key: split(key),
            timestamp,
            leaf,
            epoch,
            bytes: held,
            missing: parents.len() as u32,
            parents: parents.into_boxed_slice(),
            receipts,
        });
        self.index.insert(key, slot);
        self.by_time
            .entry(timestamp / BUCKET_MS)
            .or_default()
            .push(slot);
        self.index_facets(timestamp, slot, facets);
        *said.live.entry(epoch).or_insert(0) += 1;
        let at = (timestamp, key);
        self.pending.insert(at);
        self.unsettled.insert(at);
        // Messages of any shard that waited for this one.
        for child in self.awaited.remove(&key).unwrap_or_default() {
            said.links.push(Link::Held {
                child,
                parent: key,
                time: timestamp,
            });
        }
        self.recheck(key);
        true
    }

    /// Takes one sealed receipt of message `of`.
    pub fn take_receipt(&mut self, of: Key, epoch: u64, index: u32, time: u64, bytes: &[u8]) {
        let receipt = |shard: &mut Shard| -> Receipt { (epoch, index, shard.keep(bytes)) };
        match self.index.get(&of).copied() {
            Some(slot) => {
                // An old receipt sealed again brings the same bytes.
                let existing: Vec<Held> = self
                    .slab
                    .get(slot)
                    .map(|m| m.receipts.iter().map(|r| r.2).collect())
                    .unwrap_or_default();
                if existing
                    .iter()
                    .any(|h| self.read(*h).as_deref() == Some(bytes))
                {
                    return;
                }
                let r = receipt(self);
                if let Some(m) = self.slab.get_mut(slot) {
                    m.receipts.push(r);
                }
                self.recheck(of);
            }
            None => {
                let r = receipt(self);
                self.orphans.insert((time, of));
                self.orphan_receipts.entry(of).or_default().push(r);
            }
        }
    }

    /// Takes one completeness link addressed to this shard.
    pub fn take_link(&mut self, link: Link, said: &mut Said) {
        match link {
            Link::Await { parent, child } => match self.index.get(&parent).copied() {
                Some(slot) => {
                    let time = self.slab.get(slot).map_or(0, |m| m.timestamp);
                    said.links.push(Link::Held {
                        child,
                        parent,
                        time,
                    });
                }
                None => {
                    let list = self.awaited.entry(parent).or_default();
                    if !list.contains(&child) {
                        list.push(child);
                    }
                }
            },
            Link::Forget { parent, child } => {
                if let Some(list) = self.awaited.get_mut(&parent) {
                    list.retain(|c| *c != child);
                    if list.is_empty() {
                        self.awaited.remove(&parent);
                    }
                }
            }
            Link::Held {
                child,
                parent: _,
                time,
            } => {
                let Some(slot) = self.index.get(&child).copied() else {
                    return;
                };
                let Some(m) = self.slab.get_mut(slot) else {
                    return;
                };
                m.missing = m.missing.saturating_sub(1);
                let bucket = m.timestamp / BUCKET_MS;
                let cited = self.oldest_cited.entry(bucket).or_insert(u64::MAX);
                *cited = (*cited).min(time);
                self.recheck(child);
            }
        }
    }

    /// Re-reads whether a held message is settled and complete.
    fn recheck(&mut self, key: Key) {
        let Some(slot) = self.index.get(&key).copied() else {
            return;
        };
        let Some(m) = self.slab.get(slot) else {
            return;
        };
        let at = (m.timestamp, key);
        if m.missing == 0 {
            self.unsettled.remove(&at);
            if !m.receipts.is_empty() {
                self.pending.remove(&at);
            }
        }
    }

    /// Notes one epoch share taken at `earliest` record time (for the hold).
    pub fn note_share(&mut self, earliest: u64) {
        if let Err(e) = self.spill.flush() {
            // The bytes stay in the spill's buffer (read from there) and the write
            // is retried at the next share.
            tracing::warn!(error = %e, "slicer could not write its spill");
        }
        self.recent.push_back((Instant::now(), earliest));
    }

    /// Evicts messages older than the horizon before both the watermark and every
    /// waiting declaration's window start, once they were held for `hold`.
    pub fn evict(&mut self, watermark: u64, globals: &Globals, said: &mut Said) {
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
        let keep_from = globals
            .holds
            .values()
            .copied()
            .chain(std::iter::once(watermark))
            .min()
            .unwrap_or(watermark)
            .saturating_sub(self.horizon_ms)
            .min(held);
        if keep_from <= self.evicted_before {
            return;
        }
        self.evicted_before = keep_from;
        said.control.push(Control::Evicted {
            from: self.me,
            before: keep_from,
        });
        // A receipt is signed after its message: one older than the horizon whose
        // message never came names a message that would be evicted on arrival.
        while let Some(&(t, n)) = self.orphans.first() {
            if t >= keep_from {
                break;
            }
            self.orphans.pop_first();
            if !self.index.contains_key(&n) {
                for (_, _, h) in self.orphan_receipts.remove(&n).unwrap_or_default() {
                    self.forget(h);
                }
            }
        }
        let first_kept = keep_from / BUCKET_MS;
        self.oldest_cited = self.oldest_cited.split_off(&first_kept);
        for facet in self.by_facet.values_mut() {
            *facet = facet.split_off(&first_kept);
        }
        self.by_facet.retain(|_, b| !b.is_empty());
        self.always = self.always.split_off(&first_kept);
        let mut kept = self.by_time.split_off(&first_kept);
        let mut old: Vec<u32> = std::mem::take(&mut self.by_time)
            .into_values()
            .flatten()
            .collect();
        if let Some(boundary) = kept.get_mut(&first_kept) {
            let slab = &self.slab;
            boundary.retain(|s| {
                let evict = slab.get(*s).is_some_and(|m| m.timestamp < keep_from);
                if evict {
                    old.push(*s);
                }
                !evict
            });
        }
        self.by_time = kept;
        for slot in old {
            self.evict_slot(slot, said);
        }
    }

    fn evict_slot(&mut self, slot: u32, said: &mut Said) {
        let Some(m) = self.slab.remove(slot) else {
            return;
        };
        let key = m.key();
        self.index.remove(&key);
        let at = (m.timestamp, key);
        self.unsettled.remove(&at);
        self.pending.remove(&at);
        for p in m.parents.iter() {
            said.edges.push(((key, *p), -1));
            if m.missing > 0 {
                said.links.push(Link::Forget {
                    parent: *p,
                    child: key,
                });
            }
        }
        *said.live.entry(m.epoch).or_insert(0) -= 1;
        self.forget(m.bytes);
        for (_, _, h) in m.receipts {
            self.forget(h);
        }
        self.evicted += 1;
    }

    /// Of `keys`, those held, and those of them still pending; whether any message of
    /// `window` is pending.
    pub fn status(&self, window: Window, keys: &[Key]) -> (Vec<Key>, Vec<Key>, bool) {
        let mut held = Vec::new();
        let mut pending = Vec::new();
        for k in keys {
            let Some(m) = self.index.get(k).and_then(|s| self.slab.get(*s)) else {
                continue;
            };
            held.push(*k);
            if self.pending.contains(&(m.timestamp, *k)) {
                pending.push(*k);
            }
        }
        let window_pending = self
            .pending
            .range((window.0, 0)..=(window.1, Key::MAX))
            .next()
            .is_some();
        (held, pending, window_pending)
    }

    /// What this shard knows of `window`'s completeness.
    pub fn check(&self, window: Window) -> WindowCheck {
        let unsettled = self
            .unsettled
            .range((window.0, 0)..=(window.1, Key::MAX))
            .next()
            .is_some();
        let oldest_cited = self
            .oldest_cited
            .range(window.0 / BUCKET_MS..=window.1 / BUCKET_MS)
            .map(|(_, t)| *t)
            .min()
            .unwrap_or(u64::MAX);
        WindowCheck {
            unsettled,
            oldest_cited,
        }
    }

    /// The record of a held message (its bytes read back).
    pub fn record(&mut self, key: Key) -> Option<Record> {
        let slot = *self.index.get(&key)?;
        let m = self.slab.get(slot)?;
        let (epoch, leaf, bytes) = (m.epoch, m.leaf, m.bytes);
        let receipts: Vec<Receipt> = m.receipts.to_vec();
        let bytes = self.read(bytes)?;
        let receipts = receipts
            .into_iter()
            .filter_map(|(e, i, h)| Some((e, i, self.read(h)?)))
            .collect();
        Some(Record {
            epoch,
            leaf,
            bytes,
            receipts,
        })
    }

    /// The epoch and leaf of a held message.
    pub fn position(&self, key: Key) -> Option<(u64, u64)> {
        let m = self.slab.get(*self.index.get(&key)?)?;
        Some((m.epoch, m.leaf))
    }

    /// The parents of a held message.
    pub fn parents(&self, key: Key) -> &[Key] {
        self.index
            .get(&key)
            .and_then(|s| self.slab.get(*s))
            .map_or(&[], |m| &m.parents)
    }

    /// Every held message of `window`.
    pub fn in_window(&self, window: Window) -> Vec<Key> {
        self.slots_in(&self.by_time, window)
    }

    /// The held messages of `window` the names pick: every one a scope could keep
    /// or the monitor's derivation could read ([`Asked`]).
    pub fn picks(&self, window: Window, asked: &Asked) -> Vec<Key> {
        let hash = |names: &[String]| -> Vec<u32> { names.iter().map(|t| self.facet(t)).collect() };
        let mut wanted: Vec<(Role, u32)> = Vec::new();
        wanted.extend(hash(&asked.targets).into_iter().map(|h| (Role::Target, h)));
        wanted.extend(
            hash(&asked.principals)
                .into_iter()
                .map(|h| (Role::Author, h)),
        );
        let declared = hash(&asked.declared);
        for role in [Role::Monitor, Role::Author, Role::Target] {
            wanted.extend(declared.iter().map(|h| (role, *h)));
        }
        let mut sets: Vec<&Buckets> = vec![&self.always];
        sets.extend(wanted.iter().filter_map(|k| self.by_facet.get(k)));
        if asked.every_site {
            sets.extend(
                self.by_facet
                    .iter()
                    .filter(|((role, _), _)| *role == Role::Site)
                    .map(|(_, b)| b),
            );
        } else {
            sets.extend(asked.sites.iter().filter_map(|s| {
                self.by_facet
                    .get(&(Role::Site, self.site_facet(s.as_deref())))
            }));
        }
        let mut out: BTreeSet<Key> = BTreeSet::new();
        for set in sets {
            out.extend(self.slots_in(set, window));
        }
        out.into_iter().collect()
    }

    /// The held messages of `buckets` stamped within `window`.
    fn slots_in(&self, buckets: &Buckets, window: Window) -> Vec<Key> {
        let mut out = Vec::new();
        for slots in buckets
            .range(window.0 / BUCKET_MS..=window.1 / BUCKET_MS)
            .map(|(_, s)| s)
        {
            for s in slots {
                if let Some(m) = self.slab.get(*s) {
                    if m.timestamp >= window.0 && m.timestamp <= window.1 {
                        out.push(m.key());
                    }
                }
            }
        }
        out
    }

    fn index_facets(&mut self, timestamp: u64, slot: u32, f: Facets) {
        let bucket = timestamp / BUCKET_MS;
        if f.always {
            self.always.entry(bucket).or_default().push(slot);
        }
        for entry in f.entries() {
            self.by_facet
                .entry(entry)
                .or_default()
                .entry(bucket)
                .or_default()
                .push(slot);
        }
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

    /// The site of a declared target under the shard's predicate file.
    pub fn site_of<'a>(&'a self, target: &'a str) -> Option<&'a str> {
        site_of(self.predicates.as_ref(), target)
    }

    fn keep(&mut self, bytes: &[u8]) -> Held {
        match self.spill.put(bytes) {
            Ok(at) => Held::Disk(at),
            Err(e) => {
                if self.spill_fallbacks == 0 {
                    tracing::warn!(error = %e, "slicer keeps message bytes in memory: its spill failed");
                }
                self.spill_fallbacks += 1;
                let i = match self.memory.iter().position(Option::is_none) {
                    Some(i) => {
                        self.memory[i] = Some(bytes.into());
                        i
                    }
                    None => {
                        self.memory.push(Some(bytes.into()));
                        self.memory.len() - 1
                    }
                };
                Held::Memory(i as u32)
            }
        }
    }

    /// The bytes kept by [`Self::keep`]; a spill read failure is remembered (the
    /// answer being built is then not used: the stage stops and is rebuilt).
    fn read(&mut self, held: Held) -> Option<Vec<u8>> {
        match held {
            Held::Memory(i) => self.memory.get(i as usize)?.as_ref().map(|b| b.to_vec()),
            Held::Disk(at) => match self.spill.get(at) {
                Ok(b) => Some(b),
                Err(e) => {
                    tracing::error!(error = %e, "slicer could not read its spill");
                    self.spill_error.get_or_insert(e);
                    None
                }
            },
        }
    }

    fn forget(&mut self, held: Held) {
        match held {
            Held::Disk(at) => self.spill.release(at),
            Held::Memory(i) => {
                if let Some(slot) = self.memory.get_mut(i as usize) {
                    *slot = None;
                }
            }
        }
    }

    /// Approximate bytes of memory per component (see BENCHMARKS.md, "A lean graph").
    pub fn memory(&self) -> Vec<(&'static str, usize)> {
        let msg = std::mem::size_of::<Option<Msg>>();
        let slab = self.slab.chunks.len() * CHUNK * msg;
        let parents: usize = self
            .slab
            .chunks
            .iter()
            .flatten()
            .flatten()
            .map(|m| m.parents.len() * 16 + m.receipts.spilled() as usize * 32)
            .sum();
        // A hashbrown table: key + value + one control byte per bucket.
        let index = self.index.capacity() * (16 + 4 + 1);
        let buckets = |b: &Buckets| -> usize { b.values().map(|v| v.capacity() * 4 + 48).sum() };
        let times = buckets(&self.by_time);
        let facets: usize =
            self.by_facet.values().map(buckets).sum::<usize>() + buckets(&self.always);
        let sets = (self.pending.len() + self.unsettled.len() + self.orphans.len()) * 40;
        let awaited = self.awaited.capacity() * (16 + 32 + 1);
        vec![
            ("slab (message slots)", slab),
            ("parents and receipts (heap)", parents),
            ("key index", index),
            ("time buckets", times),
            ("facet buckets", facets),
            ("pending / unsettled / orphans", sets),
            ("awaited parents", awaited),
        ]
    }
}

/// What the narrowed window reads of a held message without decoding it: keyed 32-bit
/// hashes of its author, of the target its payload names, of the target the
/// monitor's derivation reads it for and of the site whose declarations read it as
/// telemetry ([`audita_monitor::read_key`]; 0 for none), and whether every scope
/// keeps it ([`KeptInEveryScope`], or telemetry the monitor always reads).
#[derive(Clone, Copy, Default)]
struct Facets {
    author: u32,
    target: u32,
    monitor: u32,
    site: u32,
    always: bool,
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
