//! Verification of a whole record into the partition certified / suspect / missing.
//!
//! Design constraints:
//! - Input is raw stored bytes ([`Record`]); every decode happens here, so a
//!   corrupted item becomes a typed finding, never an error of the whole run and
//!   never a panic. Output order is deterministic (record order, or id order).
//! - A message is **certified** iff all of these hold:
//!   1. it decodes, its author is registered and its signature verifies over the
//!      stored bytes; it obeys the citation rule;
//!   2. it is the first copy of its id in the record;
//!   3. a valid receipt signed by its destination names its id;
//!   4. its id is a leaf of an **intact** epoch (see below); membership is proved
//!      by recomputing the signed roots from the sealed leaves, which implies
//!      every per-leaf inclusion proof;
//!   5. every citation resolves: the cited message is certified, or it is absent
//!      from the record (then it is reported **missing** with this message among
//!      its certified citers). Citing a *present* message that is not certified
//!      makes the citer suspect ([`SuspectReason::CitesSuspect`]).
//! - A message that fails any check is **suspect** with every failed check as a
//!   typed [`SuspectReason`].
//! - An id is **missing** when it is cited by a certified message, named by a
//!   signature-valid receipt, or sealed in an intact epoch, and no decodable item
//!   of the record hashes to it. The id carries its author, so a deletion is always
//!   attributed.
//! - An epoch is **intact** iff its header decodes and is signed by the log, its
//!   number, `prev` hash and `start` continue the previous header, its leaves
//!   decode, are unique, and reproduce both signed roots, and a log-signed
//!   checkpoint with the same origin, size and root carries co-signatures of the
//!   required keepers ([`Policy::required_keepers`], default: every registered
//!   keeper). Every checkpoint must match an epoch header and carry only lines
//!   that verify. Equivocating checkpoints are reported as [`Equivocation`]s.

use std::collections::{BTreeMap, BTreeSet};

use crate::checkpoint::{
    find_equivocations, Checkpoint, Equivocation, SignatureLine, SignedCheckpoint,
};
use crate::dsse::{self, ENVELOPE_TYPE, RECEIPT_TYPE};
use crate::envelope::{Hash, MessageCheck, MessageId, Payload, SignedEnvelope, Verified};
use crate::epoch::{EpochHeader, SealedEpoch};
use crate::error::{DecodeError, EnvelopeError, NoteError, SignatureError};
use crate::merkle::{leaf_hash, root_from_leaf_hashes, CompactRange, InclusionProof};
use crate::principal::{KeyRegistry, PrincipalId};
use crate::receipt::Receipt;
use crate::sig;
use crate::store::{PayloadStatus, PayloadStore};
use crate::VerifyingKey;

/// One sealed epoch as stored: header bytes and leaf bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawEpoch {
    /// Signed header bytes.
    pub header: Vec<u8>,
    /// Leaves ([`MessageId::leaf_bytes`]) in log order.
    pub leaves: Vec<Vec<u8>>,
}

/// A record as stored: envelopes, receipts, epochs and checkpoint notes, all raw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Record {
    /// Signed envelope bytes.
    pub envelopes: Vec<Vec<u8>>,
    /// Signed receipt bytes.
    pub receipts: Vec<Vec<u8>>,
    /// Epochs in chain order.
    pub epochs: Vec<RawEpoch>,
    /// Checkpoint notes (text bytes).
    pub checkpoints: Vec<Vec<u8>>,
}

impl Record {
    /// An empty record.
    pub fn new() -> Self {
        Self::default()
    }
    /// Appends an envelope's stored bytes.
    pub fn push_envelope(&mut self, env: &SignedEnvelope) {
        self.envelopes.push(env.as_bytes().to_vec());
    }
    /// Appends a receipt's stored bytes.
    pub fn push_receipt(&mut self, r: &Receipt) {
        self.receipts.push(r.as_bytes().to_vec());
    }
    /// The record as it stood when the epoch with log root `root` was sealed: that
    /// epoch and the ones before it, the envelopes their leaves name, the receipts
    /// naming those, and the checkpoint notes of at most that tree size. Items that
    /// do not decode, and everything sealed later, are left out. `None` when no
    /// decodable epoch header has that root. This is how a verdict that names the
    /// root it was judged at is re-checked on a record that has grown since.
    pub fn as_of_root(&self, root: &Hash) -> Option<Record> {
        let (last, size) = self.epochs.iter().enumerate().find_map(|(i, e)| {
            EpochHeader::decode(e.header.clone())
                .ok()
                .filter(|h| h.log_root == *root)
                .map(|h| (i, h.size))
        })?;
        let epochs = self.epochs[..=last].to_vec();
        let sealed: BTreeSet<MessageId> = epochs
            .iter()
            .flat_map(|e| e.leaves.iter())
            .filter_map(|l| MessageId::from_leaf_bytes(l).ok())
            .collect();
        let envelopes = self
            .envelopes
            .iter()
            .filter(|b| SignedEnvelope::decode(b.to_vec()).is_ok_and(|e| sealed.contains(e.id())))
            .cloned()
            .collect();
        let receipts = self
            .receipts
            .iter()
            .filter(|b| Receipt::decode(b.to_vec()).is_ok_and(|r| sealed.contains(r.message())))
            .cloned()
            .collect();
        let checkpoints = self
            .checkpoints
            .iter()
            .filter(|b| SignedCheckpoint::parse(b).is_ok_and(|c| c.checkpoint().size <= size))
            .cloned()
            .collect();
        Some(Record {
            envelopes,
            receipts,
            epochs,
            checkpoints,
        })
    }
    /// Appends a sealed epoch and its checkpoint (with whatever co-signatures it has).
    pub fn push_epoch(&mut self, e: &SealedEpoch) {
        self.epochs.push(RawEpoch {
            header: e.header.as_bytes().to_vec(),
            leaves: e.leaves.iter().map(MessageId::leaf_bytes).collect(),
        });
        self.checkpoints.push(e.checkpoint.to_text().into_bytes());
    }
}

/// Verification policy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// Keepers that must co-sign each epoch's checkpoint; `None` = every keeper in
    /// the registry.
    pub required_keepers: Option<Vec<String>>,
    /// How many of the required keepers must co-sign (a quorum); `None` = all of
    /// them. A checkpoint short of the quorum names every required keeper that did
    /// not co-sign it.
    pub keeper_quorum: Option<usize>,
    /// Verify envelope and receipt signatures with one Ed25519 batch each first
    /// (falls back to single strict verification on failure). Off by default: batch
    /// verification may accept edge-case signatures (small-order components made
    /// by the key holder) that strict verification rejects.
    pub batch_signatures: bool,
    /// Threads for strict signature checks (0 or 1 = the calling thread only).
    /// The partition does not depend on it.
    pub threads: usize,
    /// Checkpoint notes held outside the record (a keeper's or an auditor's latest
    /// copy). The record must reproduce each: its log reaches the note's size and its
    /// first that many leaves have the note's root. This is what catches a record cut
    /// short together with its last epochs and checkpoints, which is otherwise a
    /// consistent (shorter) record.
    pub held_checkpoints: Vec<Vec<u8>>,
}

/// Why an externally held checkpoint is not reproduced by the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeldFault {
    /// The note does not parse.
    Unparseable(NoteError),
    /// The note carries no valid signature of a registered log.
    NoLogSignature,
    /// The record's log is shorter than the note: sealed history was cut off.
    Truncated {
        /// Leaves in the record.
        record_size: u64,
        /// Leaves the note commits to.
        held_size: u64,
    },
    /// The record's first `size` leaves have another root: the log forked.
    Forked {
        /// The note's tree size.
        size: u64,
    },
}

impl HeldFault {
    /// One line for humans.
    pub fn detail(&self) -> String {
        match self {
            HeldFault::Unparseable(e) => format!("held checkpoint does not parse: {e}"),
            HeldFault::NoLogSignature => "held checkpoint has no valid log signature".into(),
            HeldFault::Truncated {
                record_size,
                held_size,
            } => format!(
                "record truncated: the log has {record_size} leaves, a held checkpoint commits to {held_size}"
            ),
            HeldFault::Forked { size } => {
                format!("log forked: its first {size} leaves do not have the held checkpoint's root")
            }
        }
    }
}

/// A held checkpoint the record does not reproduce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldFinding {
    /// Position in [`Policy::held_checkpoints`].
    pub index: usize,
    /// What is wrong.
    pub fault: HeldFault,
}

/// A certified message: the precondition type for attribution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Certified {
    /// The verified envelope.
    pub envelope: Verified<SignedEnvelope>,
    /// Epoch that seals it.
    pub epoch: u64,
    /// Its leaf index in the log.
    pub leaf_index: u64,
    /// Position in [`Record::envelopes`].
    pub record_index: usize,
}

/// What a suspect finding is about.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum SuspectItem {
    /// A decodable message.
    Message {
        /// Its id.
        id: MessageId,
        /// Position in [`Record::envelopes`].
        record_index: usize,
    },
    /// Bytes that do not decode as an envelope.
    Undecodable {
        /// Position in [`Record::envelopes`].
        record_index: usize,
    },
}

/// A failed check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SuspectReason {
    /// The bytes do not decode.
    Undecodable(DecodeError),
    /// Unknown author or bad signature.
    Signature(SignatureError),
    /// A rule violation (e.g. uncited derived command).
    Rule(EnvelopeError),
    /// Another copy of the same id appears earlier in the record.
    Duplicate,
    /// No valid receipt signed by the destination.
    Unreceipted,
    /// Not a leaf of any epoch.
    Unsealed,
    /// Sealed only in an epoch whose seal is broken.
    SealBroken {
        /// Epoch number (or record position if the header is unreadable).
        epoch: u64,
    },
    /// Cites a message that is present but not certified.
    CitesSuspect(MessageId),
}

impl SuspectReason {
    /// A short stable code for summaries.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Undecodable(_) => "undecodable",
            Self::Signature(SignatureError::UnknownSigner(_)) => "unknown_author",
            Self::Signature(SignatureError::BadSignature(_)) => "bad_signature",
            Self::Signature(SignatureError::KeyNotValid { validity, .. }) => match validity {
                crate::principal::KeyValidity::NotYetValid { .. } => "key_not_yet_valid",
                crate::principal::KeyValidity::Expired { .. } => "key_retired",
                crate::principal::KeyValidity::Revoked { .. } => "key_revoked",
            },
            Self::Rule(_) => "rule_violation",
            Self::Duplicate => "duplicate",
            Self::Unreceipted => "unreceipted",
            Self::Unsealed => "unsealed",
            Self::SealBroken { .. } => "seal_broken",
            Self::CitesSuspect(_) => "cites_suspect",
        }
    }
    /// Human-readable detail.
    pub fn detail(&self) -> String {
        match self {
            Self::Undecodable(e) => e.to_string(),
            Self::Signature(e) => e.to_string(),
            Self::Rule(e) => e.to_string(),
            Self::Duplicate => "duplicate copy of an earlier message".into(),
            Self::Unreceipted => "no valid delivery receipt from the destination".into(),
            Self::Unsealed => "not sealed in any epoch".into(),
            Self::SealBroken { epoch } => format!("sealed only in broken epoch {epoch}"),
            Self::CitesSuspect(id) => format!("cites suspect message {id}"),
        }
    }
}

/// A present item that failed at least one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suspect {
    /// The item.
    pub item: SuspectItem,
    /// Every failed check.
    pub reasons: Vec<SuspectReason>,
}

/// An id the record attests to but does not contain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// The absent message id (its author included).
    pub id: MessageId,
    /// Certified messages citing it.
    pub certified_citers: Vec<MessageId>,
    /// Recipients whose valid receipts name it.
    pub receipted_by: Vec<PrincipalId>,
    /// The delivery times those receipts state (record time, ms; each the
    /// recipient's signed claim), in the order of `receipted_by`.
    pub receipted_at: Vec<u64>,
    /// Intact epoch that seals it, if any.
    pub sealed_in: Option<u64>,
}

impl Missing {
    /// The author of the absent message.
    pub fn author(&self) -> &PrincipalId {
        &self.id.author
    }
}

/// Why a receipt is not usable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReceiptFault {
    /// Bytes do not decode.
    Undecodable(DecodeError),
    /// Unknown recipient or bad signature.
    Signature(SignatureError),
    /// Signed by someone other than the message's destination.
    WrongRecipient {
        /// The destination.
        expected: PrincipalId,
        /// The signer.
        got: PrincipalId,
    },
    /// Same bytes appear earlier.
    Duplicate,
}

impl ReceiptFault {
    /// The fault's stable code (`audita.verify/v1`'s `problem_codes.receipt_problems`).
    pub fn code(&self) -> &'static str {
        match self {
            ReceiptFault::Undecodable(_) => "undecodable",
            ReceiptFault::Signature(_) => "signature",
            ReceiptFault::WrongRecipient { .. } => "wrong_recipient",
            ReceiptFault::Duplicate => "duplicate",
        }
    }

    /// What failed, in words.
    pub fn detail(&self) -> String {
        match self {
            ReceiptFault::Undecodable(e) => format!("undecodable: {e}"),
            ReceiptFault::Signature(e) => e.to_string(),
            ReceiptFault::WrongRecipient { expected, got } => {
                format!("signed by {got}, destination is {expected}")
            }
            ReceiptFault::Duplicate => "duplicate".into(),
        }
    }
}

/// A receipt that failed a check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptProblem {
    /// Position in [`Record::receipts`].
    pub record_index: usize,
    /// The message it names, if decodable.
    pub message: Option<MessageId>,
    /// The failure.
    pub fault: ReceiptFault,
}

/// A failed epoch check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EpochFault {
    /// Header bytes do not decode.
    HeaderUndecodable(DecodeError),
    /// Header signature.
    Signature(SignatureError),
    /// Header number is not the next one.
    NumberOutOfOrder {
        /// Expected.
        expected: u64,
        /// Found.
        got: u64,
    },
    /// `prev` is not the hash of the previous header.
    ChainBroken,
    /// `start` is not the previous size, or `size - start` is not the leaf count.
    RangeMismatch,
    /// A leaf does not decode.
    LeafUndecodable {
        /// Leaf position within the epoch.
        index: usize,
    },
    /// A leaf repeats an earlier leaf of the log.
    DuplicateLeaf {
        /// Leaf position within the epoch.
        index: usize,
    },
    /// The leaves do not reproduce `window_root`.
    WindowRootMismatch,
    /// The log does not reproduce `log_root`.
    LogRootMismatch,
    /// Header origin is not a registered log.
    WrongOrigin,
    /// No log-signed checkpoint matches this header.
    NoCheckpoint,
    /// The matching checkpoint lacks required co-signatures.
    NotWitnessed {
        /// Keepers whose valid co-signature is absent.
        missing: Vec<String>,
    },
}

impl EpochFault {
    /// The fault's stable code (`audita.verify/v1`'s `problem_codes.epoch_faults`).
    pub fn code(&self) -> &'static str {
        match self {
            EpochFault::HeaderUndecodable(_) => "header_undecodable",
            EpochFault::Signature(_) => "header_signature",
            EpochFault::NumberOutOfOrder { .. } => "number_out_of_order",
            EpochFault::ChainBroken => "chain_broken",
            EpochFault::RangeMismatch => "range_mismatch",
            EpochFault::LeafUndecodable { .. } => "leaf_undecodable",
            EpochFault::DuplicateLeaf { .. } => "duplicate_leaf",
            EpochFault::WindowRootMismatch => "window_root_mismatch",
            EpochFault::LogRootMismatch => "log_root_mismatch",
            EpochFault::WrongOrigin => "wrong_origin",
            EpochFault::NoCheckpoint => "no_checkpoint",
            EpochFault::NotWitnessed { .. } => "not_witnessed",
        }
    }

    /// What failed, in words.
    pub fn detail(&self) -> String {
        match self {
            EpochFault::HeaderUndecodable(e) => format!("header undecodable: {e}"),
            EpochFault::Signature(e) => format!("header signature: {e}"),
            EpochFault::NumberOutOfOrder { expected, got } => {
                format!("number {got}, expected {expected}")
            }
            EpochFault::ChainBroken => "prev hash does not match the previous header".into(),
            EpochFault::RangeMismatch => "start/size do not match the log".into(),
            EpochFault::LeafUndecodable { index } => format!("leaf {index} undecodable"),
            EpochFault::DuplicateLeaf { index } => {
                format!("leaf {index} duplicates an earlier leaf")
            }
            EpochFault::WindowRootMismatch => "window root does not match the leaves".into(),
            EpochFault::LogRootMismatch => "log root does not match the leaves".into(),
            EpochFault::WrongOrigin => "origin is not a registered log".into(),
            EpochFault::NoCheckpoint => "no log-signed checkpoint matches".into(),
            EpochFault::NotWitnessed { missing } => {
                format!("not co-signed by {}", missing.join(", "))
            }
        }
    }
}

/// Status of one epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpochStatus {
    /// Position in [`Record::epochs`].
    pub record_index: usize,
    /// Decoded header, if any.
    pub header: Option<EpochHeader>,
    /// Number of leaves.
    pub leaves: usize,
    /// Failed checks; empty = intact.
    pub faults: Vec<EpochFault>,
}

impl EpochStatus {
    /// Whether the seal is intact.
    pub fn intact(&self) -> bool {
        self.faults.is_empty()
    }
}

/// A failed checkpoint check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckpointFault {
    /// The note does not parse.
    Unparseable(NoteError),
    /// No valid log signature.
    NoLogSignature,
    /// A line names no registered key.
    UnknownSigner(String),
    /// A line's signature does not verify.
    InvalidSignature(String),
    /// A required keeper did not co-sign.
    MissingCosignature(String),
    /// No epoch header has this origin, size and root.
    NoMatchingEpoch,
    /// Takes part in an equivocation.
    Equivocating,
}

impl CheckpointFault {
    /// The fault's stable code (`audita.verify/v1`'s `problem_codes.checkpoint_faults`).
    pub fn code(&self) -> &'static str {
        match self {
            CheckpointFault::Unparseable(_) => "unparseable",
            CheckpointFault::NoLogSignature => "no_log_signature",
            CheckpointFault::UnknownSigner(_) => "unknown_signer",
            CheckpointFault::InvalidSignature(_) => "invalid_signature",
            CheckpointFault::MissingCosignature(_) => "missing_cosignature",
            CheckpointFault::NoMatchingEpoch => "no_matching_epoch",
            CheckpointFault::Equivocating => "equivocating",
        }
    }

    /// What failed, in words.
    pub fn detail(&self) -> String {
        match self {
            CheckpointFault::Unparseable(e) => e.to_string(),
            CheckpointFault::NoLogSignature => "no valid log signature".into(),
            CheckpointFault::UnknownSigner(n) => format!("signature line by unknown key {n}"),
            CheckpointFault::InvalidSignature(n) => format!("signature by {n} does not verify"),
            CheckpointFault::MissingCosignature(n) => format!("missing co-signature of {n}"),
            CheckpointFault::NoMatchingEpoch => "matches no epoch header".into(),
            CheckpointFault::Equivocating => "equivocates with another checkpoint".into(),
        }
    }
}

/// Status of one checkpoint note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointStatus {
    /// Position in [`Record::checkpoints`].
    pub record_index: usize,
    /// Parsed statement.
    pub checkpoint: Option<Checkpoint>,
    /// Keepers with valid co-signatures.
    pub cosigned_by: Vec<String>,
    /// Failed checks; empty = valid.
    pub faults: Vec<CheckpointFault>,
}

/// Stored payload findings for certified messages (only with a payload store).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayloadFinding {
    /// Message carrying the commitment.
    pub message: MessageId,
    /// The commitment.
    pub digest: Hash,
    /// What the store says; `Shredded` is a normal, clean outcome.
    pub status: PayloadStatus,
    /// The payload is present with its key but fails decryption or its commitment.
    pub corrupted: bool,
}

impl PayloadFinding {
    /// The payload's status code (`audita.verify/v1`): `available`, `shredded`,
    /// `missing_key`, `absent`, or `corrupted` whatever the store says.
    pub fn code(&self) -> &'static str {
        if self.corrupted {
            return "corrupted";
        }
        match self.status {
            PayloadStatus::Available => "available",
            PayloadStatus::Shredded => "shredded",
            PayloadStatus::KeyMissing => "missing_key",
            PayloadStatus::Absent => "absent",
        }
    }
}

/// The result of verifying a record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Partition {
    /// Certified messages by id.
    pub certified: BTreeMap<MessageId, Certified>,
    /// Suspect items in record order.
    pub suspect: Vec<Suspect>,
    /// Missing ids in id order.
    pub missing: Vec<Missing>,
    /// Receipts that failed a check.
    pub receipt_problems: Vec<ReceiptProblem>,
    /// Per-epoch status in chain order.
    pub epochs: Vec<EpochStatus>,
    /// Per-checkpoint status in record order.
    pub checkpoints: Vec<CheckpointStatus>,
    /// Equivocation evidence.
    pub equivocations: Vec<Equivocation>,
    /// Payload-store findings (empty without a store).
    pub payloads: Vec<PayloadFinding>,
    /// Held checkpoints the record does not reproduce ([`Policy::held_checkpoints`]).
    pub held: Vec<HeldFinding>,
    /// Proven slices only: ids the slice leaves out but proves sealed in an intact
    /// epoch (outside the slice, not missing; see `proven`). Empty for a whole record.
    pub elsewhere: BTreeSet<MessageId>,
}

impl Partition {
    /// True when everything certifies: no suspect, missing, broken seal,
    /// bad receipt or checkpoint, equivocation or corrupted/absent payload or
    /// payload whose key is missing (a shredded payload is clean).
    pub fn is_clean(&self) -> bool {
        self.suspect.is_empty()
            && self.missing.is_empty()
            && self.receipt_problems.is_empty()
            && self.epochs.iter().all(EpochStatus::intact)
            && self.checkpoints.iter().all(|c| c.faults.is_empty())
            && self.equivocations.is_empty()
            && self.held.is_empty()
            && self
                .payloads
                .iter()
                .all(|p| !p.corrupted && p.status.is_clean())
    }
    /// An inclusion proof for a certified message against its epoch's log root,
    /// given the record it was verified from.
    pub fn inclusion_proof(&self, record: &Record, id: &MessageId) -> Option<InclusionProof> {
        let c = self.certified.get(id)?;
        let status = self
            .epochs
            .iter()
            .find(|e| e.header.as_ref().is_some_and(|h| h.number == c.epoch))?;
        let size = status.header.as_ref()?.size as usize;
        let leaves: Vec<Hash> = record
            .epochs
            .iter()
            .flat_map(|e| e.leaves.iter())
            .take(size)
            .map(|l| leaf_hash(l))
            .collect();
        InclusionProof::generate(&leaves, c.leaf_index).ok()
    }
}

/// Verifies a record with the default [`Policy`].
pub fn verify_record(record: &Record, keys: &KeyRegistry) -> Partition {
    verify_record_with(record, keys, &Policy::default(), None)
}

struct Present {
    env: SignedEnvelope,
    record_index: usize,
    reasons: Vec<SuspectReason>,
}

/// Verifies a record under `policy`, optionally checking stored payloads.
pub fn verify_record_with(
    record: &Record,
    keys: &KeyRegistry,
    policy: &Policy,
    store: Option<&PayloadStore>,
) -> Partition {
    let (mut out, required, parsed_cps) = begin(&record.checkpoints, keys, policy);

    // Epochs.
    let mut log = CompactRange::new();
    let mut seen_leaves: BTreeSet<Hash> = BTreeSet::new();
    let mut sealed: Sealed = BTreeMap::new();
    let mut prev_hash: Hash = [0; 32];
    let mut prev_size: u64 = 0;
    let mut matched_cps: BTreeSet<usize> = BTreeSet::new();
    for (ei, raw) in record.epochs.iter().enumerate() {
        let mut st = EpochStatus {
            record_index: ei,
            header: None,
            leaves: raw.leaves.len(),
            faults: Vec::new(),
        };
        let header = EpochHeader::decode(raw.header.clone());
        let mut window = Vec::with_capacity(raw.leaves.len());
        let mut ids = Vec::with_capacity(raw.leaves.len());
        for (li, leaf) in raw.leaves.iter().enumerate() {
            let h = leaf_hash(leaf);
            if !seen_leaves.insert(h) {
                st.faults.push(EpochFault::DuplicateLeaf { index: li });
            }
            log.append(h);
            window.push(h);
            match MessageId::from_leaf_bytes(leaf) {
                Ok(id) => ids.push((log.size() - 1, id)),
                Err(_) => st.faults.push(EpochFault::LeafUndecodable { index: li }),
            }
        }
        let number = match header {
            Err(e) => {
                st.faults.push(EpochFault::HeaderUndecodable(e));
                prev_hash = [0xff; 32];
                ei as u64
            }
            Ok(h) => {
                st.faults.extend(header_signature(&h, keys));
                if h.number != ei as u64 {
                    st.faults.push(EpochFault::NumberOutOfOrder {
                        expected: ei as u64,
                        got: h.number,
                    });
                }
                if h.prev != prev_hash {
                    st.faults.push(EpochFault::ChainBroken);
                }
                if h.start != prev_size
                    || h.size != log.size()
                    || h.size.checked_sub(h.start) != Some(raw.leaves.len() as u64)
                {
                    st.faults.push(EpochFault::RangeMismatch);
                }
                if root_from_leaf_hashes(&window) != h.window_root {
                    st.faults.push(EpochFault::WindowRootMismatch);
                }
                if log.root() != h.log_root {
                    st.faults.push(EpochFault::LogRootMismatch);
                }
                if let Some(f) = witness(
                    &h,
                    &parsed_cps,
                    &out.checkpoints,
                    keys,
                    &required,
                    &mut matched_cps,
                ) {
                    st.faults.push(f);
                }
                prev_hash = h.hash();
                let n = h.number;
                st.header = Some(h);
                n
            }
        };
        prev_size = log.size();
        let intact = st.faults.is_empty();
        for (leaf_index, id) in ids {
            let e = sealed.entry(id).or_insert((number, leaf_index, intact));
            if !e.2 && intact {
                *e = (number, leaf_index, intact);
            }
        }
        out.epochs.push(st);
    }
    for (i, st) in out.checkpoints.iter_mut().enumerate() {
        if st.checkpoint.is_some() && !matched_cps.contains(&i) {
            st.faults.push(CheckpointFault::NoMatchingEpoch);
        }
    }

    out.held = check_held(record, keys, &policy.held_checkpoints);
    check_messages(
        &record.envelopes,
        &record.receipts,
        &sealed,
        keys,
        policy,
        store,
        &mut out,
    );
    out
}

/// Checks the record against checkpoints held outside it.
fn check_held(record: &Record, keys: &KeyRegistry, held: &[Vec<u8>]) -> Vec<HeldFinding> {
    if held.is_empty() {
        return Vec::new();
    }
    let hashes: Vec<Hash> = record
        .epochs
        .iter()
        .flat_map(|e| e.leaves.iter())
        .map(|l| leaf_hash(l))
        .collect();
    let mut out = Vec::new();
    for (index, raw) in held.iter().enumerate() {
        let fault = match SignedCheckpoint::parse(raw) {
            Err(e) => Some(HeldFault::Unparseable(e)),
            Ok(cp) if cp.verify_log(keys).is_err() => Some(HeldFault::NoLogSignature),
            Ok(cp) => {
                let c = cp.checkpoint();
                if c.size > hashes.len() as u64 {
                    Some(HeldFault::Truncated {
                        record_size: hashes.len() as u64,
                        held_size: c.size,
                    })
                } else if root_from_leaf_hashes(&hashes[..c.size as usize]) != c.root {
                    Some(HeldFault::Forked { size: c.size })
                } else {
                    None
                }
            }
        };
        if let Some(fault) = fault {
            out.push(HeldFinding { index, fault });
        }
    }
    out
}

/// Where each sealed id sits: (epoch number, leaf index, epoch intact).
pub(crate) type Sealed = BTreeMap<MessageId, (u64, u64, bool)>;

/// The message half of verification, shared by whole records and proven slices:
/// envelopes, receipts, seal and citation checks, the partition, missing ids and
/// payloads, given where each id is sealed.
pub(crate) fn check_messages(
    envelopes: &[Vec<u8>],
    receipts: &[Vec<u8>],
    sealed: &Sealed,
    keys: &KeyRegistry,
    policy: &Policy,
    store: Option<&PayloadStore>,
    out: &mut Partition,
) {
    let (mut present, extra_suspects) = decode_envelopes(envelopes);
    check_envelopes(&mut present, keys, policy);
    let receipted = check_receipts(receipts, &present, keys, policy, out);

    // Receipt and seal checks per message.
    for (id, p) in present.iter_mut() {
        if !receipted.by.contains_key(id) {
            p.reasons.push(SuspectReason::Unreceipted);
        }
        match sealed.get(id) {
            None => p.reasons.push(SuspectReason::Unsealed),
            Some(&(epoch, _, false)) => p.reasons.push(SuspectReason::SealBroken { epoch }),
            Some(_) => {}
        }
    }
    propagate_suspicion(&mut present);
    partition_present(&present, extra_suspects, sealed, out);
    out.missing = find_missing(&present, &receipted, sealed, &out.certified);

    // Payloads.
    if let Some(store) = store {
        for (id, c) in &out.certified {
            if let Payload::Stored { digest, .. } = &c.envelope.envelope().payload {
                let status = store.status(digest);
                let corrupted = status == PayloadStatus::Available && store.get(digest).is_err();
                out.payloads.push(PayloadFinding {
                    message: id.clone(),
                    digest: *digest,
                    status,
                    corrupted,
                });
            }
        }
    }
}

/// Decodes the envelopes: the first of each id is present; an undecodable one or a
/// later duplicate is suspect (with its record index).
fn decode_envelopes(
    envelopes: &[Vec<u8>],
) -> (BTreeMap<MessageId, Present>, Vec<(usize, Suspect)>) {
    let mut present: BTreeMap<MessageId, Present> = BTreeMap::new();
    let mut extra_suspects: Vec<(usize, Suspect)> = Vec::new();
    for (i, raw) in envelopes.iter().enumerate() {
        match SignedEnvelope::decode(raw.clone()) {
            Err(e) => extra_suspects.push((
                i,
                Suspect {
                    item: SuspectItem::Undecodable { record_index: i },
                    reasons: vec![SuspectReason::Undecodable(e)],
                },
            )),
            Ok(env) => {
                let id = env.id().clone();
                match present.entry(id) {
                    std::collections::btree_map::Entry::Occupied(o) => extra_suspects.push((
                        i,
                        Suspect {
                            item: SuspectItem::Message {
                                id: o.key().clone(),
                                record_index: i,
                            },
                            reasons: vec![SuspectReason::Duplicate],
                        },
                    )),
                    std::collections::btree_map::Entry::Vacant(v) => {
                        v.insert(Present {
                            env,
                            record_index: i,
                            reasons: Vec::new(),
                        });
                    }
                }
            }
        }
    }
    (present, extra_suspects)
}

/// Checks each present envelope's signature (in one batch when the policy says so,
/// else one by one) and rules, noting the failures as reasons.
fn check_envelopes(
    present: &mut BTreeMap<MessageId, Present>,
    keys: &KeyRegistry,
    policy: &Policy,
) {
    let batched = if policy.batch_signatures {
        batch_verify(
            present.values().map(|p| {
                (
                    p.env.envelope().author.as_str(),
                    p.env.envelope().timestamp,
                    ENVELOPE_TYPE,
                    p.env.body(),
                    p.env.signature(),
                )
            }),
            keys,
        )
    } else {
        vec![false; present.len()]
    };
    let envs: Vec<(&SignedEnvelope, bool)> =
        present.values().map(|p| &p.env).zip(batched).collect();
    let checks = par_map(&envs, policy.threads, |(env, batched)| {
        if *batched {
            env.envelope().validate().map_err(MessageCheck::Envelope)
        } else {
            env.check(keys)
        }
    });
    for (p, check) in present.values_mut().zip(checks) {
        match check {
            Ok(()) => {}
            Err(MessageCheck::Signature(e)) => p.reasons.push(SuspectReason::Signature(e)),
            Err(MessageCheck::Envelope(e)) => p.reasons.push(SuspectReason::Rule(e)),
        }
    }
}

/// The valid receipts per message id.
struct Receipted {
    /// Recipients, in record order.
    by: BTreeMap<MessageId, Vec<PrincipalId>>,
    /// Receipt timestamps, in record order.
    times: BTreeMap<MessageId, Vec<u64>>,
}

/// Checks the receipts: each is decoded, unique, validly signed and (when its
/// message is present) by the message's destination, else a receipt problem in
/// `out`; the valid ones are returned.
fn check_receipts(
    receipts: &[Vec<u8>],
    present: &BTreeMap<MessageId, Present>,
    keys: &KeyRegistry,
    policy: &Policy,
    out: &mut Partition,
) -> Receipted {
    let mut receipted = Receipted {
        by: BTreeMap::new(),
        times: BTreeMap::new(),
    };
    let mut seen_receipts: BTreeSet<Hash> = BTreeSet::new();
    for (i, (decoded, signature)) in decode_receipts(receipts, keys, policy)
        .into_iter()
        .enumerate()
    {
        let r = match decoded {
            Err(e) => {
                out.receipt_problems.push(ReceiptProblem {
                    record_index: i,
                    message: None,
                    fault: ReceiptFault::Undecodable(e),
                });
                continue;
            }
            Ok(r) => r,
        };
        let fault = if !seen_receipts.insert(r.digest()) {
            Some(ReceiptFault::Duplicate)
        } else if let Err(e) = signature {
            Some(ReceiptFault::Signature(e))
        } else {
            present
                .get(r.message())
                .map(|p| &p.env.envelope().destination)
                .filter(|dest| *dest != r.recipient())
                .map(|dest| ReceiptFault::WrongRecipient {
                    expected: dest.clone(),
                    got: r.recipient().clone(),
                })
        };
        if let Some(fault) = fault {
            out.receipt_problems.push(ReceiptProblem {
                record_index: i,
                message: Some(r.message().clone()),
                fault,
            });
            continue;
        }
        receipted
            .by
            .entry(r.message().clone())
            .or_default()
            .push(r.recipient().clone());
        receipted
            .times
            .entry(r.message().clone())
            .or_default()
            .push(r.timestamp());
    }
    receipted
}

/// Decodes the receipts and checks their signatures (in one batch when the policy
/// says so, else one by one); aligned with `receipts`.
fn decode_receipts(
    receipts: &[Vec<u8>],
    keys: &KeyRegistry,
    policy: &Policy,
) -> Vec<(Result<Receipt, DecodeError>, Result<(), SignatureError>)> {
    let decoded: Vec<Result<Receipt, DecodeError>> = receipts
        .iter()
        .map(|raw| Receipt::decode(raw.clone()))
        .collect();
    let mut receipts_batched = if policy.batch_signatures {
        batch_verify(
            decoded.iter().flatten().map(|r| {
                (
                    r.recipient().as_str(),
                    r.timestamp(),
                    RECEIPT_TYPE,
                    r.body(),
                    r.signature(),
                )
            }),
            keys,
        )
        .into_iter()
    } else {
        Vec::new().into_iter()
    };
    // Aligned with `decoded`: whether a batch verified the receipt (undecodable ones
    // are reported as such, unchecked).
    let decoded: Vec<(Result<Receipt, DecodeError>, bool)> = decoded
        .into_iter()
        .map(|d| {
            let batched = d.is_ok() && receipts_batched.next().unwrap_or(false);
            (d, batched)
        })
        .collect();
    let receipt_sigs = par_map(&decoded, policy.threads, |(d, batched)| match d {
        Ok(r) if !batched => r.verify(keys),
        _ => Ok(()),
    });
    decoded
        .into_iter()
        .map(|(d, _)| d)
        .zip(receipt_sigs)
        .collect()
}

/// Citations: a message citing a suspect one is suspect too (the greatest fixed
/// point, propagated through a worklist).
fn propagate_suspicion(present: &mut BTreeMap<MessageId, Present>) {
    let mut citers: BTreeMap<MessageId, Vec<MessageId>> = BTreeMap::new();
    for (id, p) in present.iter() {
        for c in &p.env.envelope().citations {
            citers.entry(c.clone()).or_default().push(id.clone());
        }
    }
    let mut work: Vec<MessageId> = present
        .iter()
        .filter(|(_, p)| !p.reasons.is_empty())
        .map(|(id, _)| id.clone())
        .collect();
    while let Some(bad) = work.pop() {
        for citer in citers.get(&bad).into_iter().flatten() {
            if let Some(p) = present.get_mut(citer) {
                // Each id enters the worklist at most once (when it first turns
                // suspect) and a citer lists each citation once (citations are a
                // sorted set), so every (citer, cited) pair is seen once: no
                // duplicate check, linear in the citations.
                let was_ok = p.reasons.is_empty();
                p.reasons.push(SuspectReason::CitesSuspect(bad.clone()));
                if was_ok {
                    work.push(citer.clone());
                }
            }
        }
    }
}

/// The partition of the present messages: those without a reason are certified,
/// the others suspect (with `extra_suspects`, in record order).
fn partition_present(
    present: &BTreeMap<MessageId, Present>,
    extra_suspects: Vec<(usize, Suspect)>,
    sealed: &Sealed,
    out: &mut Partition,
) {
    let mut suspects: Vec<(usize, Suspect)> = extra_suspects;
    for (id, p) in present.iter() {
        if p.reasons.is_empty() {
            let (epoch, leaf_index, _) = sealed[id];
            out.certified.insert(
                id.clone(),
                Certified {
                    envelope: Verified::new_unchecked(p.env.clone()),
                    epoch,
                    leaf_index,
                    record_index: p.record_index,
                },
            );
        } else {
            suspects.push((
                p.record_index,
                Suspect {
                    item: SuspectItem::Message {
                        id: id.clone(),
                        record_index: p.record_index,
                    },
                    reasons: p.reasons.clone(),
                },
            ));
        }
    }
    suspects.sort_by_key(|(i, _)| *i);
    out.suspect = suspects.into_iter().map(|(_, s)| s).collect();
}

/// The ids not present that the record attests: cited by a certified message,
/// receipted, or sealed in an intact epoch.
fn find_missing(
    present: &BTreeMap<MessageId, Present>,
    receipted: &Receipted,
    sealed: &Sealed,
    certified: &BTreeMap<MessageId, Certified>,
) -> Vec<Missing> {
    let mut missing: BTreeMap<MessageId, Missing> = BTreeMap::new();
    fn entry<'m>(
        missing: &'m mut BTreeMap<MessageId, Missing>,
        present: &BTreeMap<MessageId, Present>,
        id: &MessageId,
    ) -> Option<&'m mut Missing> {
        if present.contains_key(id) {
            return None;
        }
        Some(missing.entry(id.clone()).or_insert_with(|| Missing {
            id: id.clone(),
            certified_citers: Vec::new(),
            receipted_by: Vec::new(),
            receipted_at: Vec::new(),
            sealed_in: None,
        }))
    }
    for (id, c) in certified {
        for cited in &c.envelope.envelope().citations {
            if let Some(m) = entry(&mut missing, present, cited) {
                m.certified_citers.push(id.clone());
            }
        }
    }
    for (id, who) in &receipted.by {
        if let Some(m) = entry(&mut missing, present, id) {
            m.receipted_by.extend(who.iter().cloned());
            m.receipted_at
                .extend(receipted.times.get(id).into_iter().flatten().copied());
        }
    }
    for (id, &(epoch, _, intact)) in sealed {
        if intact {
            if let Some(m) = entry(&mut missing, present, id) {
                m.sealed_in = Some(epoch);
            }
        }
    }
    missing.into_values().collect()
}

/// The keepers whose co-signatures an epoch needs, and how many of them.
#[derive(Debug, Clone)]
pub(crate) struct Witnesses {
    /// Required keepers (sorted, unique).
    names: BTreeSet<String>,
    /// How many of them must co-sign (at most `names.len()`).
    quorum: usize,
}

impl Witnesses {
    /// The required keepers of `have` missing, if fewer than the quorum co-signed.
    fn short_of_quorum(&self, have: &BTreeSet<&str>) -> Option<Vec<String>> {
        let signed = self
            .names
            .iter()
            .filter(|k| have.contains(k.as_str()))
            .count();
        (signed < self.quorum).then(|| {
            self.names
                .iter()
                .filter(|k| !have.contains(k.as_str()))
                .cloned()
                .collect()
        })
    }
}

/// The start shared by record and slice verification: the keepers required by
/// `policy`, and a partition holding the checked checkpoint notes and equivocations.
pub(crate) fn begin(
    notes: &[Vec<u8>],
    keys: &KeyRegistry,
    policy: &Policy,
) -> (Partition, Witnesses, Notes) {
    let names: BTreeSet<String> = match &policy.required_keepers {
        Some(list) => list.iter().cloned().collect(),
        None => keys.keepers().map(|(n, _)| n.clone()).collect(),
    };
    let quorum = policy
        .keeper_quorum
        .map_or(names.len(), |q| q.min(names.len()));
    let required = Witnesses { names, quorum };
    let (statuses, notes, equivocations) = check_checkpoints(notes, keys, &required);
    let out = Partition {
        checkpoints: statuses,
        equivocations,
        ..Partition::default()
    };
    (out, required, notes)
}

/// The header's own signature check: the registered log of its origin signed it.
pub(crate) fn header_signature(h: &EpochHeader, keys: &KeyRegistry) -> Option<EpochFault> {
    h.verify(keys).err().map(|e| {
        if keys.log(&h.origin).is_none() {
            EpochFault::WrongOrigin
        } else {
            EpochFault::Signature(e)
        }
    })
}

/// The parsed checkpoint notes with their positions, indexed by statement so
/// matching a header is a lookup (linear in headers plus notes, not their product).
#[derive(Debug, Default)]
pub(crate) struct Notes {
    parsed: Vec<(usize, SignedCheckpoint)>,
    by_statement: BTreeMap<Checkpoint, Vec<usize>>,
}

/// Parses and checks checkpoint notes: statuses in input order, the parsed notes
/// with their positions, and equivocations among them.
pub(crate) type CheckedCheckpoints = (Vec<CheckpointStatus>, Notes, Vec<Equivocation>);

pub(crate) fn check_checkpoints(
    raw_notes: &[Vec<u8>],
    keys: &KeyRegistry,
    required: &Witnesses,
) -> CheckedCheckpoints {
    let mut statuses: Vec<CheckpointStatus> = Vec::new();
    let mut notes = Notes::default();
    for (i, raw) in raw_notes.iter().enumerate() {
        let mut st = CheckpointStatus {
            record_index: i,
            checkpoint: None,
            cosigned_by: Vec::new(),
            faults: Vec::new(),
        };
        match SignedCheckpoint::parse(raw) {
            Err(e) => st.faults.push(CheckpointFault::Unparseable(e)),
            Ok(cp) => {
                st.checkpoint = Some(cp.checkpoint().clone());
                let mut has_log = false;
                for line in cp.classify(keys) {
                    match line {
                        SignatureLine::Log => has_log = true,
                        SignatureLine::Cosigned(c) => st.cosigned_by.push(c.keeper),
                        SignatureLine::Unknown { name } => {
                            st.faults.push(CheckpointFault::UnknownSigner(name))
                        }
                        SignatureLine::Invalid { name } => {
                            st.faults.push(CheckpointFault::InvalidSignature(name))
                        }
                    }
                }
                if !has_log {
                    st.faults.push(CheckpointFault::NoLogSignature);
                }
                let have: BTreeSet<&str> = st.cosigned_by.iter().map(String::as_str).collect();
                if let Some(missing) = required.short_of_quorum(&have) {
                    st.faults
                        .extend(missing.into_iter().map(CheckpointFault::MissingCosignature));
                }
                notes
                    .by_statement
                    .entry(cp.checkpoint().clone())
                    .or_default()
                    .push(notes.parsed.len());
                notes.parsed.push((i, cp));
            }
        }
        statuses.push(st);
    }
    let cps: Vec<SignedCheckpoint> = notes.parsed.iter().map(|(_, c)| c.clone()).collect();
    let equivocations = find_equivocations(&cps, keys);
    for e in &equivocations {
        for cp in [&e.first, &e.second] {
            for &j in notes
                .by_statement
                .get(cp.checkpoint())
                .into_iter()
                .flatten()
            {
                let (i, parsed) = &notes.parsed[j];
                if parsed == cp {
                    let f = &mut statuses[*i].faults;
                    if !f.contains(&CheckpointFault::Equivocating) {
                        f.push(CheckpointFault::Equivocating);
                    }
                }
            }
        }
    }

    (statuses, notes, equivocations)
}

/// The witness check of one epoch header: a log-signed checkpoint with the header's
/// statement co-signed by the quorum of the required keepers (the best such note
/// counts). Marks every matching note in `matched`.
pub(crate) fn witness(
    h: &EpochHeader,
    notes: &Notes,
    statuses: &[CheckpointStatus],
    keys: &KeyRegistry,
    required: &Witnesses,
    matched: &mut BTreeSet<usize>,
) -> Option<EpochFault> {
    let want = h.checkpoint();
    let mut best: Option<Vec<String>> = None;
    for &j in notes.by_statement.get(&want).into_iter().flatten() {
        let (ci, cp) = &notes.parsed[j];
        if cp.verify_log(keys).is_ok() {
            matched.insert(*ci);
            let have: BTreeSet<&str> = statuses[*ci]
                .cosigned_by
                .iter()
                .map(String::as_str)
                .collect();
            let missing = required.short_of_quorum(&have).unwrap_or_default();
            if best.as_ref().is_none_or(|b| b.len() > missing.len()) {
                best = Some(missing);
            }
        }
    }
    match best {
        None => Some(EpochFault::NoCheckpoint),
        Some(m) if !m.is_empty() => Some(EpochFault::NotWitnessed { missing: m }),
        Some(_) => None,
    }
}

/// Maps `f` over `items` on up to `threads` scoped threads, preserving order.
fn par_map<T: Sync, R: Send>(items: &[T], threads: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    if threads <= 1 || items.len() < 2 * threads {
        return items.iter().map(f).collect();
    }
    let chunk = items.len().div_ceil(threads);
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|c| s.spawn(move || c.iter().map(f).collect::<Vec<R>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

/// Signature and rule checks of many envelopes with Ed25519 batch verification
/// ([`batch_verify`]: a failing batch is bisected, so one bad signature costs about
/// two batches' worth, not every item's strict check); the items no batch vouched for
/// (bad signatures, unknown signers, keys not valid at the time) are checked one by
/// one, strictly, which gives the reason. Same results as [`SignedEnvelope::check`]
/// on each, except that a batch may accept the edge-case signatures strict
/// verification rejects (see [`Policy::batch_signatures`]); a record verified
/// strictly then reports such a message as suspect.
pub fn check_envelopes_batch(
    envs: &[&SignedEnvelope],
    keys: &KeyRegistry,
) -> Vec<Result<(), MessageCheck>> {
    let batched = batch_verify(
        envs.iter().map(|e| {
            (
                e.envelope().author.as_str(),
                e.envelope().timestamp,
                ENVELOPE_TYPE,
                e.body(),
                e.signature(),
            )
        }),
        keys,
    );
    envs.iter()
        .zip(batched)
        .map(|(e, batched)| {
            if batched {
                e.envelope().validate().map_err(MessageCheck::Envelope)
            } else {
                e.check(keys)
            }
        })
        .collect()
}

/// [`check_envelopes_batch`] for receipts ([`Receipt::verify`] on each).
pub fn check_receipts_batch(
    receipts: &[&Receipt],
    keys: &KeyRegistry,
) -> Vec<Result<(), SignatureError>> {
    let batched = batch_verify(
        receipts.iter().map(|r| {
            (
                r.recipient().as_str(),
                r.timestamp(),
                RECEIPT_TYPE,
                r.body(),
                r.signature(),
            )
        }),
        keys,
    );
    receipts
        .iter()
        .zip(batched)
        .map(|(r, batched)| if batched { Ok(()) } else { r.verify(keys) })
        .collect()
}

/// Items per Ed25519 batch: a longer list is verified in chunks of this size.
const BATCH_CHUNK: usize = 1024;
/// A failing batch this small is not split further: its items are left to the
/// one-by-one check.
const BATCH_LEAF: usize = 4;

/// Ed25519 batch verification of `(signer, signing time, payload type, body,
/// signature)` items: whether a passing batch vouched for each. An item whose signer
/// has no key valid at the signing time is left out (no cryptography is spent on
/// it). A failing batch is bisected: its first half is verified, and a half known to
/// fail (its sibling passed) is split without being verified itself, down to
/// [`BATCH_LEAF`] items, which are left `false`. So `k` bad signatures among `n`
/// cost about `2k` batches of shrinking size (a single bad one about two batches'
/// worth) instead of `n` strict verifications, and a forger cannot make the verifier
/// check a whole batch one by one. Callers check every `false` item one by one,
/// strictly (which names the reason).
fn batch_verify<'a>(
    items: impl Iterator<Item = (&'a str, u64, &'static str, &'a [u8], [u8; 64])>,
    keys: &KeyRegistry,
) -> Vec<bool> {
    let mut verified = Vec::new();
    let mut msgs = Vec::new();
    let mut sigs = Vec::new();
    let mut vks = Vec::new();
    let mut at = Vec::new();
    for (i, (signer, at_ms, payload_type, body, sig)) in items.enumerate() {
        verified.push(false);
        // The key valid at the signing time; none (or a signature under a retired
        // key) is left to the one-by-one check, which gives the reason.
        let Some(k) = keys.principal_at(signer, at_ms) else {
            continue;
        };
        msgs.push(dsse::pae(payload_type, body));
        sigs.push(sig);
        vks.push(*k);
        at.push(i);
    }
    let batch = Batch {
        msgs: &msgs,
        sigs: &sigs,
        vks: &vks,
    };
    let all: Vec<usize> = (0..msgs.len()).collect();
    for chunk in all.chunks(BATCH_CHUNK) {
        batch.bisect(chunk, false, &mut |j| verified[at[j]] = true);
    }
    verified
}

/// The prepared items of [`batch_verify`].
struct Batch<'b> {
    msgs: &'b [Vec<u8>],
    sigs: &'b [[u8; 64]],
    vks: &'b [VerifyingKey],
}

impl Batch<'_> {
    fn verify(&self, idx: &[usize]) -> bool {
        let refs: Vec<&[u8]> = idx.iter().map(|&j| self.msgs[j].as_slice()).collect();
        let sigs: Vec<[u8; 64]> = idx.iter().map(|&j| self.sigs[j]).collect();
        let vks: Vec<VerifyingKey> = idx.iter().map(|&j| self.vks[j]).collect();
        sig::verify_batch(&refs, &sigs, &vks)
    }

    /// Marks (through `pass`) every item of `idx` some passing batch vouches for;
    /// `failing`: `idx` as a whole is known to fail (its sibling passed, its parent
    /// failed), so it is split without being verified.
    fn bisect(&self, idx: &[usize], failing: bool, pass: &mut dyn FnMut(usize)) {
        if idx.is_empty() {
            return;
        }
        if !failing && self.verify(idx) {
            idx.iter().for_each(|&j| pass(j));
            return;
        }
        if idx.len() <= BATCH_LEAF {
            return;
        }
        let (a, b) = idx.split_at(idx.len() / 2);
        if self.verify(a) {
            a.iter().for_each(|&j| pass(j));
            self.bisect(b, true, pass);
        } else {
            self.bisect(a, true, pass);
            self.bisect(b, false, pass);
        }
    }
}
