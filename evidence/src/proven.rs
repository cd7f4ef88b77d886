//! Proven slices: a subset of a record's messages that verifies on its own, without
//! the rest of the log.
//!
//! Design constraints:
//! - A [`ProvenSlice`] carries signed envelopes with their receipts, and for each
//!   envelope an RFC 9162 inclusion proof against the log root of the epoch that
//!   sealed it; the epoch headers those proofs name (plus, typically, the latest
//!   epoch's header, which fixes the record root), and each header's checkpoint note
//!   with the keepers' co-signatures. Its size grows with the slice and
//!   logarithmically with the log, never with the log itself.
//! - [`verify_proven`] certifies exactly like whole-record verification, with one
//!   substitution: "its id is a leaf of an intact epoch" becomes "its inclusion proof
//!   verifies against the log root of a header that is log-signed and witnessed by
//!   the required keepers". Epoch chaining and the leaf lists are the whole record's
//!   business; a keeper's co-signature on each epoch's root is what makes one epoch
//!   stand alone. Missing ids are those the slice's certified messages cite (or its
//!   receipts name) without carrying them and without proving them sealed.
//! - A slice need not carry every message its members cite: an id it leaves out can
//!   come with its own inclusion proof (of the leaf `MessageId::leaf_bytes`, which is
//!   what the log seals) instead of its envelope. A verified one is **sealed
//!   elsewhere** ([`Partition::elsewhere`]): attested by the log, outside the slice,
//!   not missing. Only an intact, witnessed epoch makes that claim, so a slice cannot
//!   hide a deletion behind it.
//! - The wire form ([`ProvenSlice::encode`]) is canonical varints and length-prefixed
//!   byte strings; [`ProvenSlice::decode`] is total and never allocates more than its
//!   input, since the bytes cross a trust boundary.

use std::collections::{BTreeMap, BTreeSet};

use crate::codec::{Reader, Writer};
use crate::envelope::{MessageId, SignedEnvelope};
use crate::epoch::EpochHeader;
use crate::error::DecodeError;
use crate::merkle::{leaf_hash, CompactRange, InclusionProof, TailProver};
use crate::principal::KeyRegistry;
use crate::verify::{
    begin, check_messages, header_signature, witness, CheckpointFault, EpochFault, EpochStatus,
    Partition, Policy, Record, Sealed,
};

/// Wire format version of [`ProvenSlice`].
pub const PROVEN_SLICE_VERSION: u8 = 2;

/// Messages with their own proofs of sealing; see the module docs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProvenSlice {
    /// Signed envelope bytes.
    pub envelopes: Vec<Vec<u8>>,
    /// Encoded [`InclusionProof`] of each envelope (same order; the proof's tree size
    /// names the epoch header it is against).
    pub proofs: Vec<Vec<u8>>,
    /// Signed receipt bytes.
    pub receipts: Vec<Vec<u8>>,
    /// Signed epoch header bytes.
    pub headers: Vec<Vec<u8>>,
    /// Checkpoint notes with co-signatures.
    pub checkpoints: Vec<Vec<u8>>,
    /// Ids cited by the slice but not carried, as sealed leaves
    /// ([`MessageId::leaf_bytes`]).
    pub elsewhere: Vec<Vec<u8>>,
    /// Encoded [`InclusionProof`] of each `elsewhere` leaf (same order).
    pub elsewhere_proofs: Vec<Vec<u8>>,
}

fn write_list(w: &mut Writer, items: &[Vec<u8>]) {
    w.varint(items.len() as u64);
    for it in items {
        w.varint(it.len() as u64);
        w.bytes(it);
    }
}

fn read_list(r: &mut Reader<'_>) -> Result<Vec<Vec<u8>>, DecodeError> {
    // Each item takes at least its one-byte length prefix.
    let n = r.count(1)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let len = r.len()?;
        out.push(r.bytes(len)?.to_vec());
    }
    Ok(out)
}

impl ProvenSlice {
    /// Canonical wire encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u8(PROVEN_SLICE_VERSION);
        for list in [
            &self.envelopes,
            &self.proofs,
            &self.receipts,
            &self.headers,
            &self.checkpoints,
            &self.elsewhere,
            &self.elsewhere_proofs,
        ] {
            write_list(&mut w, list);
        }
        w.buf
    }

    /// Parses [`Self::encode`]'s output (total).
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        let version = r.u8()?;
        if version != PROVEN_SLICE_VERSION {
            return Err(DecodeError::UnknownVersion(version));
        }
        let out = ProvenSlice {
            envelopes: read_list(&mut r)?,
            proofs: read_list(&mut r)?,
            receipts: read_list(&mut r)?,
            headers: read_list(&mut r)?,
            checkpoints: read_list(&mut r)?,
            elsewhere: read_list(&mut r)?,
            elsewhere_proofs: read_list(&mut r)?,
        };
        r.finish()?;
        Ok(out)
    }

    /// The slice of a whole record holding the envelopes whose ids are in `ids` (and
    /// their receipts), each proved against its own epoch, the ids they cite that the
    /// record seals but `ids` leaves out (proved sealed elsewhere), plus the record's
    /// latest epoch. For tests and one-off exports; a streaming slicer builds the same
    /// thing from per-epoch state with [`EpochProofs`].
    pub fn from_record(record: &Record, ids: &BTreeSet<MessageId>) -> ProvenSlice {
        let mut epochs: Vec<EpochProofs> = Vec::new();
        let mut log = CompactRange::new();
        for e in &record.epochs {
            let ep = EpochProofs::new(
                &log,
                e.header.clone(),
                Vec::new(),
                e.leaves.iter().map(|l| leaf_hash(l)).collect(),
            );
            for l in &e.leaves {
                log.append(leaf_hash(l));
            }
            epochs.push(ep);
        }
        let mut where_sealed: BTreeMap<MessageId, (usize, u64)> = BTreeMap::new();
        for (ei, e) in record.epochs.iter().enumerate() {
            for (li, l) in e.leaves.iter().enumerate() {
                if let Ok(id) = MessageId::from_leaf_bytes(l) {
                    where_sealed
                        .entry(id)
                        .or_insert((ei, epochs[ei].start + li as u64));
                }
            }
        }
        let mut out = ProvenSlice::default();
        let mut used: BTreeSet<usize> = BTreeSet::new();
        // One prover per epoch: it shares subtree roots between the epoch's proofs.
        let mut provers: BTreeMap<usize, TailProver<'_>> = BTreeMap::new();
        {
            let mut prove = |id: &MessageId| {
                where_sealed.get(id).and_then(|&(ei, index)| {
                    used.insert(ei);
                    provers
                        .entry(ei)
                        .or_insert_with(|| epochs[ei].prover())
                        .prove(index)
                        .ok()
                })
            };
            let mut cited: BTreeSet<MessageId> = BTreeSet::new();
            for raw in &record.envelopes {
                let Ok(env) = SignedEnvelope::decode(raw.clone()) else {
                    continue;
                };
                if !ids.contains(env.id()) {
                    continue;
                }
                out.envelopes.push(raw.clone());
                let proof = prove(env.id());
                out.proofs
                    .push(proof.map(|p| p.encode()).unwrap_or_default());
                cited.extend(env.envelope().citations.iter().cloned());
            }
            for id in cited.iter().filter(|c| !ids.contains(*c)) {
                if let Some(proof) = prove(id) {
                    out.elsewhere.push(id.leaf_bytes());
                    out.elsewhere_proofs.push(proof.encode());
                }
            }
        }
        for raw in &record.receipts {
            if let Ok(r) = crate::receipt::Receipt::decode(raw.clone()) {
                if ids.contains(r.message()) {
                    out.receipts.push(raw.clone());
                }
            }
        }
        if !record.epochs.is_empty() {
            used.insert(record.epochs.len() - 1);
        }
        for ei in used {
            let header = &record.epochs[ei].header;
            out.headers.push(header.clone());
            let stmt = EpochHeader::decode(header.clone())
                .ok()
                .map(|h| h.checkpoint());
            for note in &record.checkpoints {
                let matches = crate::checkpoint::SignedCheckpoint::parse(note)
                    .is_ok_and(|cp| Some(cp.checkpoint()) == stmt.as_ref());
                if matches {
                    out.checkpoints.push(note.clone());
                }
            }
        }
        out
    }
}

/// One sealed epoch as a streaming slicer keeps it to prove its messages later: the
/// log's compact range at the epoch's start, the epoch's leaf hashes, its header and
/// checkpoint note. Memory is 32 bytes per leaf plus `O(log n)`.
#[derive(Debug, Clone)]
pub struct EpochProofs {
    prefix: CompactRange,
    /// Index of the epoch's first leaf.
    pub start: u64,
    /// Signed header bytes.
    pub header: Vec<u8>,
    /// Checkpoint note bytes.
    pub checkpoint: Vec<u8>,
    leaves: Vec<crate::Hash>,
}

impl EpochProofs {
    /// Keeps an epoch whose first leaf follows `log_before`'s last.
    pub fn new(
        log_before: &CompactRange,
        header: Vec<u8>,
        checkpoint: Vec<u8>,
        leaves: Vec<crate::Hash>,
    ) -> Self {
        EpochProofs {
            prefix: log_before.clone(),
            start: log_before.size(),
            header,
            checkpoint,
            leaves,
        }
    }
    /// Log size at the epoch's end.
    pub fn end(&self) -> u64 {
        self.start + self.leaves.len() as u64
    }
    /// The inclusion proof of leaf `index` (in this epoch) against the epoch's log root.
    pub fn prove(&self, index: u64) -> Result<InclusionProof, crate::ProofError> {
        TailProver::new(&self.prefix, &self.leaves).prove(index)
    }
    /// A prover for several leaves of this epoch (shares work between proofs).
    pub fn prover(&self) -> TailProver<'_> {
        TailProver::new(&self.prefix, &self.leaves)
    }
}

/// Verifies a proven slice under `policy`; see the module docs.
pub fn verify_proven(slice: &ProvenSlice, keys: &KeyRegistry, policy: &Policy) -> Partition {
    let (mut out, required, parsed_cps) = begin(&slice.checkpoints, keys, policy);

    // Headers, by the tree size their proofs name.
    let mut matched: BTreeSet<usize> = BTreeSet::new();
    let mut by_size: BTreeMap<u64, usize> = BTreeMap::new();
    for (i, raw) in slice.headers.iter().enumerate() {
        let mut st = EpochStatus {
            record_index: i,
            header: None,
            leaves: 0,
            faults: Vec::new(),
        };
        match EpochHeader::decode(raw.clone()) {
            Err(e) => st.faults.push(EpochFault::HeaderUndecodable(e)),
            Ok(h) => {
                st.faults.extend(header_signature(&h, keys));
                if h.start > h.size {
                    st.faults.push(EpochFault::RangeMismatch);
                }
                if let Some(f) = witness(
                    &h,
                    &parsed_cps,
                    &out.checkpoints,
                    keys,
                    &required,
                    &mut matched,
                ) {
                    st.faults.push(f);
                }
                // Two headers for one tree size: only the first counts; the other is
                // reported (a log signing two statements for one size equivocates,
                // which the checkpoints show).
                match by_size.entry(h.size) {
                    std::collections::btree_map::Entry::Occupied(_) => {
                        st.faults.push(EpochFault::RangeMismatch)
                    }
                    std::collections::btree_map::Entry::Vacant(v) => {
                        v.insert(i);
                    }
                }
                st.header = Some(h);
            }
        }
        out.epochs.push(st);
    }
    for (i, st) in out.checkpoints.iter_mut().enumerate() {
        if st.checkpoint.is_some() && !matched.contains(&i) {
            st.faults.push(CheckpointFault::NoMatchingEpoch);
        }
    }

    // Where each envelope is sealed, from its proof.
    let mut sealed: Sealed = BTreeMap::new();
    for (i, raw) in slice.envelopes.iter().enumerate() {
        let Ok(env) = SignedEnvelope::decode(raw.clone()) else {
            continue;
        };
        let Some(proof) = slice
            .proofs
            .get(i)
            .and_then(|p| InclusionProof::decode(p).ok())
        else {
            continue;
        };
        let Some(&ei) = by_size.get(&proof.size) else {
            continue;
        };
        let st = &mut out.epochs[ei];
        let Some(h) = &st.header else { continue };
        if proof.index < h.start || proof.index >= h.size {
            continue;
        }
        if proof
            .verify(&leaf_hash(&env.id().leaf_bytes()), &h.log_root)
            .is_err()
        {
            continue;
        }
        st.leaves += 1;
        let intact = st.faults.is_empty();
        let e = sealed
            .entry(env.id().clone())
            .or_insert((h.number, proof.index, intact));
        if !e.2 && intact {
            *e = (h.number, proof.index, intact);
        }
    }
    // Ids proved sealed elsewhere: only an intact epoch attests them.
    for (leaf, proof) in slice.elsewhere.iter().zip(&slice.elsewhere_proofs) {
        let (Ok(id), Ok(proof)) = (
            MessageId::from_leaf_bytes(leaf),
            InclusionProof::decode(proof),
        ) else {
            continue;
        };
        let Some(h) = by_size
            .get(&proof.size)
            .map(|&ei| &out.epochs[ei])
            .filter(|st| st.faults.is_empty())
            .and_then(|st| st.header.as_ref())
        else {
            continue;
        };
        if proof.index >= h.start
            && proof.index < h.size
            && proof.verify(&leaf_hash(leaf), &h.log_root).is_ok()
        {
            out.elsewhere.insert(id);
        }
    }
    check_messages(
        &slice.envelopes,
        &slice.receipts,
        &sealed,
        keys,
        policy,
        None,
        &mut out,
    );
    let carried: BTreeSet<&MessageId> = out.certified.keys().collect();
    let elsewhere = std::mem::take(&mut out.elsewhere);
    out.elsewhere = elsewhere
        .into_iter()
        .filter(|id| !carried.contains(id))
        .collect();
    out.missing.retain(|m| !out.elsewhere.contains(&m.id));
    out
}
