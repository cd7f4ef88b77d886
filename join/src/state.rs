//! The join of `audita.accepted` (the bytes, read once) with `audita.epochs` (the
//! seals): what a stage downstream of the sealer reads to get each sealed epoch
//! with the bytes of its messages ([`EpochMessage`]), in epoch order.
//!
//! Design constraints:
//! - Only what a seal names leaves the join: a message accepted but never sealed (a
//!   re-delivered duplicate, a `late` envelope) is held until a seal's positions
//!   pass its offset, then dropped ([`JoinStats::unsealed_dropped`]); it never
//!   reaches a slice or a detector.
//! - Epochs leave in the order their seals arrive, each number once: a seal at or
//!   below the last one taken (a restarted sealer's republication) is skipped, so
//!   nothing it names is read twice.
//! - A seal waits at the head until the bytes of everything it names were read;
//!   then the bytes move out of the join (one copy kept per distinct message,
//!   however often it was accepted). If the reader has read every accepted
//!   partition past the seal's positions and a sealed message's bytes are still
//!   absent, they are gone from the topic (its retention): the epoch leaves without
//!   them, counted ([`JoinStats::missing`]), and a stage downstream then judges the
//!   message missing, never present. The same happens when the caller gives up on a
//!   seal that names no positions (a republication) or that the accepted topic never
//!   catches up with ([`Join::next`]'s `give_up`).
//! - Bounded work per frame: each accepted frame (one of a batch record's,
//!   [`audita_topics::accepted::frames`]) costs one SHA-256 of its bytes and a few hash-map
//!   operations, each seal a lookup per item it names; nothing is decoded beyond the
//!   kind byte and the leaves' ids. A frame's place is (partition, record offset,
//!   index in the record), and a seal's positions name the last frame the sealer
//!   took (an epoch may close in the middle of a batch record). Memory is the bytes read
//!   ahead of their seal ([`Join::held_bytes`]) — a caller bounds it by reading
//!   `audita.accepted` only while it is below a limit or the head seal waits.
//! - Pure: no clock, no transport; the caller feeds records and decides when to
//!   give up.

use audita_evidence::{sha256, Hash, MessageId};
use audita_topics::accepted::{frames, FRAME_ENVELOPE, FRAME_RECEIPT};
use audita_topics::{EpochMessage, EpochSeal};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

/// Which kind of accepted bytes a digest names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Envelope,
    Receipt,
}

/// Where a frame lies in `audita.accepted`: partition, record offset, index.
type Place = (u32, u64, u32);

/// One partition's frames: (record offset, index) → the held item a copy there is of.
type Slots = BTreeMap<(u64, u32), (Kind, Hash)>;

/// Accepted bytes not yet joined: the frame as read (kind byte first) and where
/// each copy of it lies in `audita.accepted`.
struct Held {
    frame: Vec<u8>,
    copies: Vec<Place>,
}

/// What [`Join::take_seal`] did with a seal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Taken {
    /// Queued; it leaves once the bytes it names are read.
    Queued,
    /// Its number is at or below the last seal taken (a republication): skipped.
    Repeated,
    /// Its header does not decode: skipped.
    Undecodable,
}

/// Counters of a [`Join`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JoinStats {
    /// Epochs joined and handed out.
    pub epochs: u64,
    /// Seals skipped as republications of an epoch already taken.
    pub repeated: u64,
    /// Sealed messages and receipts whose bytes were gone when their epoch left.
    pub missing: u64,
    /// Accepted records never sealed (duplicates, `late` envelopes), dropped once
    /// a seal's positions passed them.
    pub unsealed_dropped: u64,
}

/// One joined epoch with where each of its items sits in the seal: the leaf (index
/// among the epoch's leaves) of each envelope and the place of each receipt among
/// the receipts the seal names, for a reader that routes them one by one.
#[derive(Clone, Debug)]
pub struct Share {
    /// The epoch, with the bytes this join holds.
    pub message: EpochMessage,
    /// Per envelope of `message.envelopes`, its index among `message.leaves`.
    pub envelope_leaves: Vec<u32>,
    /// Per receipt of `message.receipts`, its index among the seal's receipts.
    pub receipt_indices: Vec<u32>,
}

/// The join state: accepted bytes waiting for their seal, seals waiting for their
/// bytes.
#[derive(Default)]
pub struct Join {
    /// Reading a share of the accepted partitions only (a cluster member): a seal
    /// leaves once these are read past its positions, with the bytes found there.
    share: Option<std::collections::BTreeSet<u32>>,
    held: HashMap<(Kind, Hash), Held>,
    /// Per accepted partition, where each held copy lies.
    by_offset: HashMap<u32, Slots>,
    /// Per accepted partition, the highest offset read.
    read: HashMap<u32, u64>,
    seals: VecDeque<EpochSeal>,
    /// The number of the last seal queued.
    last: Option<u64>,
    /// What the head seal still waits for (computed when it becomes the head).
    need: Option<HashSet<(Kind, Hash)>>,
    held_bytes: usize,
    stats: JoinStats,
}

impl Join {
    /// An empty join.
    pub fn new() -> Join {
        Join::default()
    }

    /// An empty join of the accepted partitions `own` only: a seal leaves once each
    /// of them was read past the seal's position for it, with the items found there
    /// (the others are read by the other members of the cluster). Nothing is
    /// counted missing: which partition a leaf was on is not known here.
    pub fn of_partitions(own: impl IntoIterator<Item = u32>) -> Join {
        Join {
            share: Some(own.into_iter().collect()),
            ..Join::default()
        }
    }

    /// Takes one record of `audita.accepted`: a batch of frames, or a single frame
    /// ([`audita_topics::accepted::frames`]); watermarks and unknown kinds only advance the
    /// position read. Returns the number of frames taken (a damaged batch yields
    /// those before the damage).
    pub fn take_accepted(&mut self, partition: u32, offset: u64, record: &[u8]) -> usize {
        let read = self.read.entry(partition).or_insert(offset);
        *read = (*read).max(offset);
        let mut n = 0;
        for (index, frame) in frames(record).enumerate() {
            self.take_frame((partition, offset, index as u32), frame);
            n += 1;
        }
        n
    }

    fn take_frame(&mut self, at: Place, frame: &[u8]) {
        let kind = match frame.first() {
            Some(&FRAME_ENVELOPE) => Kind::Envelope,
            Some(&FRAME_RECEIPT) => Kind::Receipt,
            _ => return,
        };
        let key = (kind, sha256(&frame[1..]));
        if let Some(need) = self.need.as_mut() {
            need.remove(&key);
        }
        let slot = self.by_offset.entry(at.0).or_default();
        if slot.insert((at.1, at.2), key).is_some() {
            // The same record read twice (a re-read partition): one copy.
            return;
        }
        match self.held.get_mut(&key) {
            Some(h) => h.copies.push(at),
            None => {
                self.held_bytes += frame.len();
                self.held.insert(
                    key,
                    Held {
                        frame: frame.to_vec(),
                        copies: vec![at],
                    },
                );
            }
        }
    }

    /// Takes one seal of `audita.epochs`.
    pub fn take_seal(&mut self, seal: EpochSeal) -> Taken {
        let Some(number) = seal.number() else {
            return Taken::Undecodable;
        };
        if self.last.is_some_and(|last| number <= last) {
            self.stats.repeated += 1;
            return Taken::Repeated;
        }
        self.last = Some(number);
        self.seals.push_back(seal);
        Taken::Queued
    }

    /// Whether a seal is queued whose bytes are not all read yet (the caller should
    /// read `audita.accepted`).
    pub fn waiting(&mut self) -> bool {
        !self.seals.is_empty() && !self.head_complete()
    }

    /// Seals queued.
    pub fn queued(&self) -> usize {
        self.seals.len()
    }

    /// Bytes read from `audita.accepted` and not yet joined.
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// Counters since start.
    pub fn stats(&self) -> JoinStats {
        self.stats
    }

    /// The next epoch, if its seal is at the head and its bytes are all read — or
    /// every accepted partition was read past the seal's positions, or `give_up`:
    /// then it leaves with what was read and the rest is counted missing.
    pub fn next(&mut self, give_up: bool) -> Option<EpochMessage> {
        self.next_share(give_up).map(|s| s.message)
    }

    /// [`Join::next`], with where each item sits in the seal.
    pub fn next_share(&mut self, give_up: bool) -> Option<Share> {
        let head = self.seals.front()?;
        let covered = match &self.share {
            // A member's share: its partitions read past the seal's positions (a
            // seal naming none of them takes nothing from them).
            Some(own) => head
                .positions
                .iter()
                .filter(|(p, _, _)| own.contains(p))
                .all(|(p, o, _)| self.read.get(p).is_some_and(|r| r >= o)),
            None => {
                !head.positions.is_empty()
                    && head
                        .positions
                        .iter()
                        .all(|(p, o, _)| self.read.get(p).is_some_and(|r| r >= o))
            }
        };
        // A republication names no positions: a member waits for the give-up.
        let covered = covered && !head.positions.is_empty();
        let complete = self.share.is_none() && self.head_complete();
        if !(complete || covered || give_up) {
            return None;
        }
        let seal = self.seals.pop_front()?;
        self.need = None;
        let whole = self.share.is_none();
        let mut envelopes = Vec::with_capacity(seal.leaves.len());
        let mut envelope_leaves = Vec::with_capacity(seal.leaves.len());
        for (i, leaf) in seal.leaves.iter().enumerate() {
            let digest = MessageId::from_leaf_bytes(leaf).ok().map(|id| id.digest);
            match digest.and_then(|d| self.consume((Kind::Envelope, d))) {
                Some(bytes) => {
                    envelopes.push(bytes);
                    envelope_leaves.push(i as u32);
                }
                None if whole => self.stats.missing += 1,
                None => {}
            }
        }
        let mut receipts: Vec<Vec<u8>> = Vec::with_capacity(seal.receipts.len());
        let mut receipt_indices = Vec::with_capacity(seal.receipts.len());
        // A receipt named twice in one epoch (an old one sealed again) may have
        // been accepted once: the second names the bytes the first took.
        let mut named: HashMap<Hash, usize> = HashMap::new();
        for (j, digest) in seal.receipts.iter().enumerate() {
            if let Some(&i) = named.get(digest) {
                receipts.push(receipts[i].clone());
                receipt_indices.push(j as u32);
                continue;
            }
            match self.consume((Kind::Receipt, *digest)) {
                Some(bytes) => {
                    named.insert(*digest, receipts.len());
                    receipts.push(bytes);
                    receipt_indices.push(j as u32);
                }
                None if whole => self.stats.missing += 1,
                None => {}
            }
        }
        for (p, o, i) in &seal.positions {
            self.drop_unsealed(*p, *o, *i);
        }
        self.stats.epochs += 1;
        Some(Share {
            message: EpochMessage {
                header: seal.header,
                checkpoint: seal.checkpoint,
                prefix: seal.prefix,
                leaves: seal.leaves,
                envelopes,
                receipts,
                watermark: seal.watermark,
            },
            envelope_leaves,
            receipt_indices,
        })
    }

    /// Whether every item the head seal names is held.
    fn head_complete(&mut self) -> bool {
        let Some(head) = self.seals.front() else {
            return false;
        };
        let need = self.need.get_or_insert_with(|| {
            let leaves = head.leaves.iter().filter_map(|l| {
                MessageId::from_leaf_bytes(l)
                    .ok()
                    .map(|id| (Kind::Envelope, id.digest))
            });
            let receipts = head.receipts.iter().map(|d| (Kind::Receipt, *d));
            leaves
                .chain(receipts)
                .filter(|k| !self.held.contains_key(k))
                .collect()
        });
        need.is_empty()
    }

    /// The signed bytes of `key`, taking its earliest copy out of the join (the
    /// bytes stay while other copies do, for a later seal naming it again).
    fn consume(&mut self, key: (Kind, Hash)) -> Option<Vec<u8>> {
        let held = self.held.get_mut(&key)?;
        let first = held
            .copies
            .iter()
            .enumerate()
            .min_by_key(|(_, c)| **c)
            .map(|(i, _)| i)?;
        let (p, o, i) = held.copies.swap_remove(first);
        if let Some(slot) = self.by_offset.get_mut(&p) {
            slot.remove(&(o, i));
        }
        if held.copies.is_empty() {
            let held = self.held.remove(&key)?;
            self.held_bytes -= held.frame.len();
            let mut bytes = held.frame;
            bytes.remove(0);
            Some(bytes)
        } else {
            Some(held.frame[1..].to_vec())
        }
    }

    /// Drops the copies at or before frame `index` of record `offset` of
    /// `partition` that no seal named.
    fn drop_unsealed(&mut self, partition: u32, offset: u64, index: u32) {
        let Some(slot) = self.by_offset.get_mut(&partition) else {
            return;
        };
        let next = match index.checked_add(1) {
            Some(i) => Some((offset, i)),
            None => offset.checked_add(1).map(|o| (o, 0)),
        };
        let rest = match next {
            Some(next) => slot.split_off(&next),
            None => BTreeMap::new(),
        };
        let passed = std::mem::replace(slot, rest);
        for ((o, i), key) in passed {
            self.stats.unsealed_dropped += 1;
            if let Some(held) = self.held.get_mut(&key) {
                held.copies.retain(|c| *c != (partition, o, i));
                if held.copies.is_empty() {
                    if let Some(h) = self.held.remove(&key) {
                        self.held_bytes -= h.frame.len();
                    }
                }
            }
        }
    }
}

/// Joins whole topics read to their end: every accepted record (partition, offset,
/// record bytes), then every seal in order. An epoch whose bytes are absent leaves
/// without them, counted in the stats. For tools and tests that read a finished run.
pub fn join_all(
    accepted: impl IntoIterator<Item = (u32, u64, Vec<u8>)>,
    seals: impl IntoIterator<Item = EpochSeal>,
) -> (Vec<EpochMessage>, JoinStats) {
    let mut join = Join::new();
    for (p, o, record) in accepted {
        join.take_accepted(p, o, &record);
    }
    let mut out = Vec::new();
    for seal in seals {
        join.take_seal(seal);
        while let Some(e) = join.next(true) {
            out.push(e);
        }
    }
    (out, join.stats())
}

#[cfg(test)]
mod tests {
    use super::*;
    use audita_evidence::{derive_signing_key, PrincipalId, Sealer};

    /// Accepted frames (envelope bytes are opaque to the join: only their digest
    /// matters) and the seals of a sealer that took them `per_epoch` at a time,
    /// with receipts for every other message; positions as the sealer reports them
    /// (one partition per author).
    struct Run {
        /// (partition, offset, frame) in publication order per partition.
        accepted: Vec<(u32, u64, Vec<u8>)>,
        seals: Vec<EpochSeal>,
        /// The epochs the join must hand out.
        expect: Vec<EpochMessage>,
    }

    fn run(messages: usize, per_epoch: usize) -> Run {
        let mut sealer = Sealer::new("audita.test/log", derive_signing_key(1, "log")).unwrap();
        let mut next = [0u64; 3];
        let (mut accepted, mut seals, mut expect) = (Vec::new(), Vec::new(), Vec::new());
        let mut positions: BTreeMap<u32, u64> = BTreeMap::new();
        let (mut envs, mut receipts, mut receipt_digests) = (vec![], vec![], vec![]);
        let mut prefix = audita_evidence::merkle::CompactRange::new();
        for i in 0..messages {
            let p = (i % 3) as u32;
            let author = PrincipalId::new(format!("agv-{p}")).unwrap();
            let bytes = format!("envelope {i}").into_bytes();
            let id = MessageId {
                author,
                digest: sha256(&bytes),
            };
            sealer.append(id);
            let mut frame = vec![FRAME_ENVELOPE];
            frame.extend(&bytes);
            accepted.push((p, next[p as usize], frame));
            positions.insert(p, next[p as usize]);
            next[p as usize] += 1;
            envs.push(bytes);
            if i % 2 == 0 {
                let r = format!("receipt {i}").into_bytes();
                let mut frame = vec![FRAME_RECEIPT];
                frame.extend(&r);
                accepted.push((p, next[p as usize], frame));
                positions.insert(p, next[p as usize]);
                next[p as usize] += 1;
                receipt_digests.push(sha256(&r));
                receipts.push(r);
            }
            if (i + 1) % per_epoch == 0 || i + 1 == messages {
                let epoch = sealer.close_epoch(i as u64);
                let leaves: Vec<Vec<u8>> = epoch.leaves.iter().map(MessageId::leaf_bytes).collect();
                let nodes = prefix.nodes();
                for l in &leaves {
                    prefix.append(audita_evidence::merkle::leaf_hash(l));
                }
                let seal = EpochSeal {
                    header: epoch.header.as_bytes().to_vec(),
                    checkpoint: epoch.checkpoint.to_text().into_bytes(),
                    prefix: nodes.clone(),
                    leaves: leaves.clone(),
                    receipts: std::mem::take(&mut receipt_digests),
                    positions: positions
                        .iter()
                        .map(|(p, o)| (*p, *o, audita_topics::WHOLE_RECORD))
                        .collect(),
                    watermark: i as u64,
                };
                expect.push(EpochMessage {
                    header: seal.header.clone(),
                    checkpoint: seal.checkpoint.clone(),
                    prefix: nodes,
                    leaves,
                    envelopes: std::mem::take(&mut envs),
                    receipts: std::mem::take(&mut receipts),
                    watermark: seal.watermark,
                });
                seals.push(seal);
            }
        }
        Run {
            accepted,
            seals,
            expect,
        }
    }

    /// Feeds `items` (accepted records, seals) in the order given, handing out what
    /// is ready after each.
    fn feed(join: &mut Join, items: Vec<Item>) -> Vec<EpochMessage> {
        let mut out = Vec::new();
        for item in items {
            match item {
                Item::Accepted(p, o, f) => {
                    join.take_accepted(p, o, &f);
                }
                Item::Seal(s) => {
                    join.take_seal(s);
                }
            }
            while let Some(e) = join.next(false) {
                out.push(e);
            }
        }
        out
    }

    enum Item {
        Accepted(u32, u64, Vec<u8>),
        Seal(EpochSeal),
    }

    /// A deterministic interleaving: per-partition order of accepted records and the
    /// order of seals kept, everything else shuffled by `seed`.
    fn interleave(r: &Run, seed: u64) -> Vec<Item> {
        let mut queues: Vec<VecDeque<Item>> = (0..4).map(|_| VecDeque::new()).collect();
        for (p, o, f) in &r.accepted {
            queues[*p as usize].push_back(Item::Accepted(*p, *o, f.clone()));
        }
        for s in &r.seals {
            queues[3].push_back(Item::Seal(s.clone()));
        }
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut out = Vec::new();
        while queues.iter().any(|q| !q.is_empty()) {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let live: Vec<usize> = (0..4).filter(|i| !queues[*i].is_empty()).collect();
            let q = live[(x >> 33) as usize % live.len()];
            out.extend(queues[q].pop_front());
        }
        out
    }

    /// Fifty interleavings of `r`'s records and seals each join to its epochs,
    /// leaving nothing held and nothing missing.
    fn joins_in_every_interleaving(r: &Run) {
        for seed in 0..50 {
            let mut join = Join::new();
            let got = feed(&mut join, interleave(r, seed));
            assert_eq!(got, r.expect, "seed {seed}");
            assert_eq!(join.held_bytes(), 0, "seed {seed}: nothing left behind");
            assert_eq!(join.stats().missing, 0);
        }
    }

    #[test]
    fn every_interleaving_joins_to_the_same_epochs() {
        joins_in_every_interleaving(&run(200, 17));
    }

    /// The run as ingest publishes it in batches: per partition, the frames up to
    /// each seal's position form one record (the sealer takes records whole), and
    /// the seals name record offsets.
    fn batched(r: &Run) -> Run {
        let mut out = Run {
            accepted: Vec::new(),
            seals: r.seals.clone(),
            expect: r.expect.clone(),
        };
        for p in 0..3u32 {
            let mut frames: Vec<(u64, &Vec<u8>)> = r
                .accepted
                .iter()
                .filter(|a| a.0 == p)
                .map(|a| (a.1, &a.2))
                .collect();
            frames.sort_by_key(|f| f.0);
            let mut record = 0u64;
            for (e, seal) in r.seals.iter().enumerate() {
                let Some(&(_, upto, _)) = seal.positions.iter().find(|(q, _, _)| *q == p) else {
                    continue;
                };
                let (mine, rest): (Vec<_>, Vec<_>) = frames.iter().partition(|f| f.0 <= upto);
                frames = rest;
                if !mine.is_empty() {
                    let parts: Vec<&[u8]> = mine.iter().map(|f| f.1.as_slice()).collect();
                    out.accepted
                        .push((p, record, audita_topics::accepted::encode_batch(&parts)));
                    record += 1;
                }
                for (q, o, _) in &mut out.seals[e].positions {
                    if *q == p {
                        *o = record.saturating_sub(1);
                    }
                }
            }
        }
        out
    }

    /// The run in batch records of `k` frames per partition, whatever the epochs:
    /// a seal's position then names the record and the index of the last frame the
    /// sealer took, often in the middle of a record.
    fn batched_across(r: &Run, k: usize) -> Run {
        let mut out = Run {
            accepted: Vec::new(),
            seals: r.seals.clone(),
            expect: r.expect.clone(),
        };
        // (partition, old offset) → (record offset, index)
        let mut place: BTreeMap<(u32, u64), (u64, u32)> = BTreeMap::new();
        for p in 0..3u32 {
            let mut frames: Vec<&(u32, u64, Vec<u8>)> =
                r.accepted.iter().filter(|a| a.0 == p).collect();
            frames.sort_by_key(|a| a.1);
            for (n, chunk) in frames.chunks(k).enumerate() {
                let parts: Vec<&[u8]> = chunk.iter().map(|a| a.2.as_slice()).collect();
                out.accepted
                    .push((p, n as u64, audita_topics::accepted::encode_batch(&parts)));
                for (i, a) in chunk.iter().enumerate() {
                    place.insert((p, a.1), (n as u64, i as u32));
                }
            }
        }
        for seal in &mut out.seals {
            for (p, o, i) in &mut seal.positions {
                let (ro, ri) = place[&(*p, *o)];
                *o = ro;
                *i = ri;
            }
        }
        out
    }

    #[test]
    fn records_that_span_epochs_join_to_the_same_epochs_in_every_interleaving() {
        for k in [1, 5, 16, 64] {
            let r = batched_across(&run(200, 17), k);
            for seed in 0..25 {
                let mut join = Join::new();
                let got = feed(&mut join, interleave(&r, seed));
                assert_eq!(got, r.expect, "k {k} seed {seed}");
                assert_eq!(
                    join.held_bytes(),
                    0,
                    "k {k} seed {seed}: nothing left behind"
                );
                assert_eq!(join.stats().missing, 0);
                assert_eq!(join.stats().unsealed_dropped, 0);
            }
        }
    }

    #[test]
    fn batched_records_join_to_the_same_epochs_in_every_interleaving() {
        let r = batched(&run(200, 17));
        assert!(r.accepted.len() < 60, "batches, not one record per frame");
        joins_in_every_interleaving(&r);
    }

    #[test]
    fn a_seal_waits_for_its_bytes_and_a_republication_is_skipped() {
        let r = run(30, 10);
        let mut join = Join::new();
        assert_eq!(join.take_seal(r.seals[0].clone()), Taken::Queued);
        assert!(join.waiting());
        assert_eq!(join.next(false), None, "no bytes read yet");
        let mut items: Vec<Item> = r
            .accepted
            .iter()
            .map(|(p, o, f)| Item::Accepted(*p, *o, f.clone()))
            .collect();
        items.push(Item::Seal(r.seals[0].clone()));
        items.push(Item::Seal(r.seals[1].clone()));
        items.push(Item::Seal(r.seals[1].clone()));
        items.push(Item::Seal(r.seals[2].clone()));
        let got = feed(&mut join, items);
        assert_eq!(got, r.expect);
        assert_eq!(join.stats().repeated, 2, "epoch 0 and 1 named again");
    }

    #[test]
    fn duplicates_and_unsealed_records_never_leave_and_are_dropped() {
        let r = run(30, 10);
        let mut join = Join::new();
        let mut items: Vec<Item> = Vec::new();
        // Every record accepted twice (a re-delivery right after), plus one record
        // that is never sealed, before the seals.
        for (p, o, f) in &r.accepted {
            items.push(Item::Accepted(*p, o * 2, f.clone()));
            items.push(Item::Accepted(*p, o * 2 + 1, f.clone()));
        }
        let mut seals = r.seals.clone();
        for s in &mut seals {
            for (_, o, _) in &mut s.positions {
                *o = *o * 2 + 1;
            }
        }
        items.push(Item::Accepted(
            0,
            10_000,
            [&[FRAME_ENVELOPE][..], b"never sealed"].concat(),
        ));
        items.extend(seals.into_iter().map(Item::Seal));
        let got = feed(&mut join, items);
        assert_eq!(got, r.expect, "each sealed message once");
        assert_eq!(
            join.held_bytes(),
            b"never sealed".len() + 1,
            "only the record past every position is still held"
        );
        assert_eq!(join.stats().unsealed_dropped, r.accepted.len() as u64);
    }

    #[test]
    fn bytes_gone_from_the_topic_are_counted_missing_never_invented() {
        let r = run(30, 10);
        let mut join = Join::new();
        // The first message's bytes were dropped by retention; the reader starts
        // later on its partition.
        let gone = &r.accepted[0];
        let items: Vec<Item> = r
            .accepted
            .iter()
            .filter(|a| a.1 != gone.1 || a.0 != gone.0)
            .map(|(p, o, f)| Item::Accepted(*p, *o, f.clone()))
            .chain(r.seals.iter().cloned().map(Item::Seal))
            .collect();
        let got = feed(&mut join, items);
        assert_eq!(
            got.len(),
            3,
            "the epochs leave once the reader passed their positions"
        );
        assert_eq!(join.stats().missing, 1);
        let mut expect = r.expect.clone();
        expect[0].envelopes.remove(0);
        assert_eq!(got, expect);

        // A republished seal names no positions: it leaves only when the caller
        // gives up.
        let mut join = Join::new();
        let mut seal = r.seals[0].clone();
        seal.positions.clear();
        join.take_seal(seal);
        assert_eq!(join.next(false), None);
        let partial = join.next(true).expect("given up");
        assert!(partial.envelopes.is_empty());
        assert_eq!(
            join.stats().missing as usize,
            r.seals[0].leaves.len() + r.seals[0].receipts.len()
        );
    }
}
