//! The sealer stage's state in named parts: the open window (what the next epoch
//! seals), the dedupe memory (what it must never seal again) and the event-time
//! marks (how far every source has been read). `crate::stage` composes them with
//! the pure `audita_evidence::Sealer`, which owns the log's one compact range.

use audita_evidence::{Hash, SignedEnvelope};
use audita_topics::Watermark;
use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

/// What the next epoch will seal: envelopes and receipts taken since the last one.
#[derive(Default)]
pub(crate) struct Window {
    /// The envelopes, in the order taken.
    pub(crate) envelopes: Vec<SignedEnvelope>,
    /// Digests of `envelopes` (the SHA-256 of the signed bytes names the message
    /// alone).
    pub(crate) ids: HashSet<Hash>,
    /// How many of `envelopes` (from the first) are on disk already (taken back
    /// after a restart).
    pub(crate) on_disk: usize,
    /// The receipts' bytes.
    pub(crate) receipts: Vec<Vec<u8>>,
    /// SHA-256 of each of `receipts` (what the seal names).
    pub(crate) receipt_digests: Vec<Hash>,
    /// Bytes of `envelopes` and `receipts`.
    pub(crate) bytes: usize,
    /// When the oldest item was taken.
    pub(crate) oldest: Option<Instant>,
}

impl Window {
    /// Whether it holds an envelope with this digest.
    pub(crate) fn holds(&self, digest: &Hash) -> bool {
        self.ids.contains(digest)
    }

    /// Takes an envelope not held yet (`false` if it was).
    pub(crate) fn push_envelope(&mut self, env: SignedEnvelope) -> bool {
        if !self.ids.insert(env.id().digest) {
            return false;
        }
        self.bytes += env.as_bytes().len();
        self.envelopes.push(env);
        self.started();
        true
    }

    /// Takes a receipt's bytes with their digest.
    pub(crate) fn push_receipt(&mut self, bytes: &[u8], digest: Hash) {
        self.bytes += bytes.len();
        self.receipts.push(bytes.to_vec());
        self.receipt_digests.push(digest);
        self.started();
    }

    fn started(&mut self) {
        if self.oldest.is_none() {
            self.oldest = Some(Instant::now());
        }
    }

    /// Whether it holds nothing.
    pub(crate) fn is_empty(&self) -> bool {
        self.envelopes.is_empty() && self.receipts.is_empty()
    }

    /// Whether it should close: `max_items` messages and receipts, `max_bytes`, or
    /// its oldest item waited `max_age`.
    pub(crate) fn due(&self, max_items: usize, max_bytes: usize, max_age: Duration) -> bool {
        self.envelopes.len() + self.receipts.len() >= max_items
            || self.bytes >= max_bytes
            || self.oldest.is_some_and(|t| t.elapsed() >= max_age)
    }

    /// Empties it (its epoch is sealed): the envelopes, to be remembered as sealed.
    pub(crate) fn sealed(&mut self) -> Vec<SignedEnvelope> {
        let taken = std::mem::take(self);
        taken.envelopes
    }
}

/// Digests remembered for the dedupe horizon: a keyed hash set (an author cannot
/// aim digests at one bucket), and the digests by second of record time, so the
/// horizon forgets whole seconds at once. A second is forgotten once all of it is
/// before the cutoff, so the set holds at most a second more than the horizon asks:
/// remembering more only makes the sealer refuse a re-delivery it could not have
/// told apart anyway.
#[derive(Default)]
pub(crate) struct Seen {
    set: HashSet<Hash>,
    by_second: BTreeMap<u64, Vec<Hash>>,
}

impl Seen {
    pub(crate) fn contains(&self, digest: &Hash) -> bool {
        self.set.contains(digest)
    }

    /// Remembers `digest` stamped `timestamp`; `false` if it was remembered already.
    pub(crate) fn insert(&mut self, digest: Hash, timestamp: u64) -> bool {
        if !self.set.insert(digest) {
            return false;
        }
        self.by_second
            .entry(timestamp / 1000)
            .or_default()
            .push(digest);
        true
    }

    /// Forgets the seconds that end at or before `cutoff` (ms).
    fn prune(&mut self, cutoff: u64) {
        while let Some(entry) = self.by_second.first_entry() {
            if entry.key().saturating_add(1).saturating_mul(1000) > cutoff {
                break;
            }
            for d in entry.remove() {
                self.set.remove(&d);
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.set.len()
    }
}

/// What the sealer must never seal again: sealed ids and receipt digests within
/// the horizon of record time; anything older was forgotten.
pub(crate) struct Dedupe {
    /// Sealed ids by digest, with their timestamps.
    pub(crate) sealed: Seen,
    /// Receipt digests.
    pub(crate) receipts: Seen,
    /// Everything older than this (record time) was forgotten.
    pub(crate) forgotten_before: u64,
    /// How much record time behind the watermark is remembered.
    pub(crate) horizon_ms: u64,
}

impl Dedupe {
    pub(crate) fn new(horizon_ms: u64) -> Dedupe {
        Dedupe {
            sealed: Seen::default(),
            receipts: Seen::default(),
            forgotten_before: 0,
            horizon_ms,
        }
    }

    /// Forgets sealed ids and receipt digests stamped before `cutoff`.
    pub(crate) fn prune(&mut self, cutoff: u64) {
        if cutoff <= self.forgotten_before {
            return;
        }
        self.forgotten_before = cutoff;
        self.sealed.prune(cutoff);
        self.receipts.prune(cutoff);
    }

    /// Forgets what lies more than the horizon behind `watermark`.
    pub(crate) fn forget_behind(&mut self, watermark: u64) {
        self.prune(watermark.saturating_sub(self.horizon_ms));
    }
}

/// The event-time marks: ingest's watermarks per source partition and accepted
/// partition, and what of them the sealer published and kept on disk.
pub(crate) struct Marks {
    /// Per source partition, the latest time per accepted partition.
    by_source: BTreeMap<(String, u32), BTreeMap<u32, u64>>,
    /// Source partitions the watermarks announce.
    sources_expected: u32,
    /// Input partitions of the accepted topic.
    partitions_expected: usize,
    /// When the watermark file was last written (and what it holds).
    pub(crate) saved: Option<(Instant, u64)>,
    /// The watermark of the last epoch published.
    pub(crate) published: u64,
}

impl Marks {
    pub(crate) fn new(partitions_expected: usize) -> Marks {
        Marks {
            by_source: BTreeMap::new(),
            sources_expected: 0,
            partitions_expected,
            saved: None,
            published: 0,
        }
    }

    /// Takes ingest's watermark `w`, read on accepted partition `partition`.
    pub(crate) fn take(&mut self, partition: u32, w: Watermark) {
        self.sources_expected = self.sources_expected.max(w.sources);
        let t = self
            .by_source
            .entry((w.source, w.partition))
            .or_default()
            .entry(partition)
            .or_insert(w.time_ms);
        *t = (*t).max(w.time_ms);
    }

    /// The event-time low watermark: the smallest ingest watermark, once every
    /// source partition's has arrived on every accepted partition (0 before).
    pub(crate) fn low(&self) -> u64 {
        let complete = self.sources_expected > 0
            && self.by_source.len() >= self.sources_expected as usize
            && self
                .by_source
                .values()
                .all(|m| m.len() >= self.partitions_expected);
        if !complete {
            return 0;
        }
        self.by_source
            .values()
            .flat_map(|m| m.values().copied())
            .min()
            .unwrap_or(0)
    }
}
