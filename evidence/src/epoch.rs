//! Epochs: windows of message ids sealed into the log, chained by header hash.
//!
//! Design constraints (epoch header wire format v2, integers varints):
//! ```text
//! signed = body || signature[64]   ; log key's Ed25519 over PAE(EPOCH_TYPE, body)
//! body   = 0x02 origin:str number:varint prev[32] start:varint size:varint
//!          window_root[32] log_root[32] closed_at:varint registry[32]
//! ```
//! - `registry` is the digest of the registry in force when the epoch was sealed
//!   (SHA-256 of the canonical principal registry, `crate::registry`; zeros when the
//!   sealer was given none), so an offline verifier knows which keys applied to every
//!   epoch. Version-1 headers (no `registry` field) still decode, with zeros.
//! - The log is one append-only RFC 9162 tree over [`MessageId::leaf_bytes`] of
//!   every sealed message. Epoch `n` covers leaves `start..size`; `window_root`
//!   is the root over just those leaves and `log_root` the root over `0..size`,
//!   which is also what the epoch's C2SP checkpoint signs.
//! - `prev` is SHA-256 of the previous header's signed bytes (all zeros for epoch
//!   0), `number` counts from 0 and `start` equals the previous `size`: a header
//!   cannot be dropped, reordered or replaced without breaking the chain.
//! - [`Sealer`] is pure and incremental: it holds `O(log n)` state for the log
//!   root plus the open window, never reorders what it is given, and closes an
//!   epoch only when asked (by count or time, the caller decides).

use ed25519_dalek::SigningKey;

use crate::checkpoint::{Checkpoint, SignedCheckpoint};
use crate::codec::{Reader, Writer};
use crate::dsse::{self, EPOCH_TYPE};
use crate::envelope::{
    sha256, signed_body, Hash, MessageId, SignedEnvelope, Verified, SIGNATURE_LEN,
};
use crate::error::{DecodeError, SignatureError};
use crate::merkle::{leaf_hash, root_from_leaf_hashes, CompactRange};
use crate::principal::{check_name, KeyRegistry};

/// Epoch header format version written.
pub const EPOCH_VERSION: u8 = 2;

/// The signed header of a sealed epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpochHeader {
    bytes: Vec<u8>,
    /// Log origin (the log's key name).
    pub origin: String,
    /// Epoch number, from 0.
    pub number: u64,
    /// SHA-256 of the previous header's signed bytes (zeros for epoch 0).
    pub prev: Hash,
    /// Index of the first leaf of this epoch.
    pub start: u64,
    /// Log size after this epoch.
    pub size: u64,
    /// Root over this epoch's leaves.
    pub window_root: Hash,
    /// Root over all leaves `0..size` (the checkpoint root).
    pub log_root: Hash,
    /// Caller-supplied closing time.
    pub closed_at: u64,
    /// Digest of the registry in force (zeros: none declared).
    pub registry: Hash,
}

impl EpochHeader {
    #[allow(clippy::too_many_arguments)]
    fn sign(
        origin: &str,
        number: u64,
        prev: Hash,
        start: u64,
        size: u64,
        window_root: Hash,
        log_root: Hash,
        closed_at: u64,
        registry: Hash,
        key: &SigningKey,
    ) -> Self {
        let mut w = Writer::new();
        w.u8(EPOCH_VERSION);
        w.str(origin);
        w.varint(number);
        w.bytes(&prev);
        w.varint(start);
        w.varint(size);
        w.bytes(&window_root);
        w.bytes(&log_root);
        w.varint(closed_at);
        w.bytes(&registry);
        let sig = dsse::sign(key, EPOCH_TYPE, &w.buf);
        let mut bytes = w.buf;
        bytes.extend_from_slice(&sig);
        Self {
            bytes,
            origin: origin.to_owned(),
            number,
            prev,
            start,
            size,
            window_root,
            log_root,
            closed_at,
            registry,
        }
    }
    /// Decodes stored bytes (total). Does not check the signature.
    pub fn decode(bytes: Vec<u8>) -> Result<Self, DecodeError> {
        let mut r = Reader::new(signed_body(&bytes)?);
        let v = r.u8()?;
        if v != 1 && v != EPOCH_VERSION {
            return Err(DecodeError::UnknownVersion(v));
        }
        let at = r.position();
        let origin = r.string()?;
        check_name(&origin).map_err(|reason| DecodeError::InvalidName { offset: at, reason })?;
        let number = r.varint()?;
        let prev = r.array32()?;
        let start = r.varint()?;
        let size = r.varint()?;
        let window_root = r.array32()?;
        let log_root = r.array32()?;
        let closed_at = r.varint()?;
        let registry = if v >= 2 { r.array32()? } else { [0; 32] };
        r.finish()?;
        Ok(Self {
            bytes,
            origin,
            number,
            prev,
            start,
            size,
            window_root,
            log_root,
            closed_at,
            registry,
        })
    }
    /// The exact stored bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }
    /// SHA-256 of the stored bytes: what the next header's `prev` must equal.
    pub fn hash(&self) -> Hash {
        sha256(&self.bytes)
    }
    /// Checks the log's signature over the stored bytes.
    pub fn verify(&self, keys: &KeyRegistry) -> Result<(), SignatureError> {
        let key = keys
            .log(&self.origin)
            .ok_or_else(|| SignatureError::UnknownSigner(self.origin.clone()))?;
        let (body, sig) = self.bytes.split_at(self.bytes.len() - SIGNATURE_LEN);
        let mut s = [0u8; 64];
        s.copy_from_slice(sig);
        if dsse::verify(key, EPOCH_TYPE, body, &s) {
            Ok(())
        } else {
            Err(SignatureError::BadSignature(self.origin.clone()))
        }
    }
    /// The checkpoint statement this header commits to.
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            origin: self.origin.clone(),
            size: self.size,
            root: self.log_root,
        }
    }
}

/// Why a published epoch could not be opened by [`open_sealed`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealedEpochError {
    /// The header does not decode.
    #[error("epoch header: {0}")]
    Header(DecodeError),
    /// The header is not signed by a log key of the registry.
    #[error("epoch header signature: {0}")]
    Signature(SignatureError),
    /// The leaves do not fill the header's range, or do not hash to its window root.
    #[error(
        "epoch {number}: {leaves} leaves do not reproduce the header's window {start}..{size}"
    )]
    Leaves {
        /// Epoch number.
        number: u64,
        /// Leaves given.
        leaves: usize,
        /// Header's first leaf index.
        start: u64,
        /// Header's log size after the epoch.
        size: u64,
    },
    /// Envelope `index` does not decode.
    #[error("epoch {number}, envelope {index}: {error}")]
    Envelope {
        /// Epoch number.
        number: u64,
        /// Position among the epoch's envelopes.
        index: usize,
        /// The decoding error.
        error: DecodeError,
    },
    /// Envelope `index` is not the message of leaf `index`.
    #[error("epoch {number}, envelope {index} is not the message its leaf names")]
    NotSealed {
        /// Epoch number.
        number: u64,
        /// Position among the epoch's envelopes.
        index: usize,
    },
}

/// Opens one epoch as a sealer publishes it (header, leaves in log order, the sealed
/// envelopes in leaf order), authenticated by one signature: the log's over the
/// header, whose window root the leaves must reproduce, and every envelope must be
/// the message its leaf names (its id is the SHA-256 of its bytes). The envelopes
/// come back as [`Verified`]: their authors' signatures were checked against the
/// deployment's registry by the ingest whose output the log sealed — a log seals
/// nothing else — so a stage downstream of the log (the monitor) need not check
/// each again; anything else in the bytes (a forged or altered envelope, a leaf not
/// under the signed root, a header under an unknown key) is refused. Whoever does
/// not trust the deployment's own log verifies the authors' signatures instead
/// ([`SignedEnvelope::verify`], [`crate::verify_record`]).
pub fn open_sealed(
    header: &[u8],
    leaves: &[Vec<u8>],
    envelopes: &[Vec<u8>],
    keys: &KeyRegistry,
) -> Result<(EpochHeader, Vec<Verified<SignedEnvelope>>), SealedEpochError> {
    let header = EpochHeader::decode(header.to_vec()).map_err(SealedEpochError::Header)?;
    header.verify(keys).map_err(SealedEpochError::Signature)?;
    let number = header.number;
    let hashes: Vec<Hash> = leaves.iter().map(|l| leaf_hash(l)).collect();
    if header.size.checked_sub(header.start) != Some(leaves.len() as u64)
        || envelopes.len() > leaves.len()
        || root_from_leaf_hashes(&hashes) != header.window_root
    {
        return Err(SealedEpochError::Leaves {
            number,
            leaves: leaves.len(),
            start: header.start,
            size: header.size,
        });
    }
    let mut out = Vec::with_capacity(envelopes.len());
    for (index, (bytes, leaf)) in envelopes.iter().zip(leaves).enumerate() {
        let env =
            SignedEnvelope::decode(bytes.clone()).map_err(|error| SealedEpochError::Envelope {
                number,
                index,
                error,
            })?;
        if env.id().leaf_bytes() != *leaf {
            return Err(SealedEpochError::NotSealed { number, index });
        }
        out.push(Verified::new_unchecked(env));
    }
    Ok((header, out))
}

/// A closed epoch: its header, its leaves in log order, and the log-signed checkpoint
/// (keepers add co-signatures with [`SignedCheckpoint::cosign`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedEpoch {
    /// The signed header.
    pub header: EpochHeader,
    /// The sealed message ids, in leaf order.
    pub leaves: Vec<MessageId>,
    /// The checkpoint of the log at this epoch's end.
    pub checkpoint: SignedCheckpoint,
}

/// The incremental, pure sealer: append message ids, close epochs on demand.
#[derive(Debug)]
pub struct Sealer {
    origin: String,
    key: SigningKey,
    /// The log's compact range up to the last epoch closed (the open window's leaves
    /// join it when their epoch closes): the log's one frontier, which the sealer
    /// stage reads rather than keeping its own.
    log: CompactRange,
    window: Vec<MessageId>,
    window_hashes: Vec<Hash>,
    prev: Hash,
    next_number: u64,
    registry: Hash,
}

impl Sealer {
    /// A sealer for a new, empty log named `origin`, signing with the log key.
    pub fn new(origin: &str, key: SigningKey) -> Result<Self, crate::error::NameError> {
        check_name(origin)?;
        Ok(Self {
            origin: origin.to_owned(),
            key,
            log: CompactRange::new(),
            window: Vec::new(),
            window_hashes: Vec::new(),
            prev: [0; 32],
            next_number: 0,
            registry: [0; 32],
        })
    }
    /// Restarts a sealer after a crash or restart from the sealed log: `leaves` are
    /// all sealed ids in log order and `last` the latest epoch header. Fails unless
    /// the leaves reproduce the header's size and log root.
    pub fn resume(
        key: SigningKey,
        leaves: &[MessageId],
        last: &EpochHeader,
    ) -> Result<Self, crate::error::ProofError> {
        let mut log = CompactRange::new();
        for id in leaves {
            log.append(leaf_hash(&id.leaf_bytes()));
        }
        Self::resume_range(key, log, last)
    }
    /// [`Self::resume`] from the log's compact range instead of every leaf (a
    /// restart that streams the record). Fails unless the range reproduces the
    /// header's size and log root.
    pub fn resume_range(
        key: SigningKey,
        log: CompactRange,
        last: &EpochHeader,
    ) -> Result<Self, crate::error::ProofError> {
        if log.size() != last.size {
            return Err(crate::error::ProofError::OutOfRange {
                index: log.size(),
                size: last.size,
            });
        }
        if log.root() != last.log_root {
            return Err(crate::error::ProofError::RootMismatch);
        }
        Ok(Self {
            origin: last.origin.clone(),
            key,
            log,
            window: Vec::new(),
            window_hashes: Vec::new(),
            prev: last.hash(),
            next_number: last.number + 1,
            registry: last.registry,
        })
    }
    /// Declares the registry in force from the next epoch on (its digest goes into
    /// every header until changed).
    pub fn set_registry(&mut self, digest: Hash) {
        self.registry = digest;
    }
    /// The registry digest the next epoch will carry.
    pub fn registry(&self) -> Hash {
        self.registry
    }
    /// Appends a message id; returns its leaf index in the log.
    pub fn append(&mut self, id: MessageId) -> u64 {
        self.window_hashes.push(leaf_hash(&id.leaf_bytes()));
        self.window.push(id);
        self.size() - 1
    }
    /// Appends a signed envelope's id.
    pub fn append_envelope(&mut self, env: &SignedEnvelope) -> u64 {
        self.append(env.id().clone())
    }
    /// Number of ids in the open window.
    pub fn pending(&self) -> usize {
        self.window.len()
    }
    /// Total leaves appended so far (the open window's included).
    pub fn size(&self) -> u64 {
        self.log.size() + self.window.len() as u64
    }
    /// The log's compact range at the end of the last epoch closed (empty before
    /// the first): what a reader starting at the next epoch extends, and the base of
    /// keepers' consistency proofs.
    pub fn sealed(&self) -> &CompactRange {
        &self.log
    }
    /// Closes the open window into a signed epoch (possibly empty) at `closed_at`.
    pub fn close_epoch(&mut self, closed_at: u64) -> SealedEpoch {
        let start = self.log.size();
        for h in &self.window_hashes {
            self.log.append(*h);
        }
        let size = self.log.size();
        let window_root = root_from_leaf_hashes(&self.window_hashes);
        let log_root = self.log.root();
        let header = EpochHeader::sign(
            &self.origin,
            self.next_number,
            self.prev,
            start,
            size,
            window_root,
            log_root,
            closed_at,
            self.registry,
            &self.key,
        );
        self.prev = header.hash();
        self.next_number += 1;
        self.window_hashes.clear();
        let leaves = std::mem::take(&mut self.window);
        let checkpoint = SignedCheckpoint::sign(header.checkpoint(), &self.key);
        SealedEpoch {
            header,
            leaves,
            checkpoint,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::derive_signing_key;
    use crate::principal::PrincipalId;

    fn id(i: u8) -> MessageId {
        MessageId {
            author: PrincipalId::new("planner").unwrap(),
            digest: [i; 32],
        }
    }

    #[test]
    fn resumed_sealer_continues_the_uninterrupted_chain() {
        let key = derive_signing_key(1, "log.example");
        let mut straight = Sealer::new("log.example", key.clone()).unwrap();
        let mut first = Sealer::new("log.example", key.clone()).unwrap();
        for i in 0..5 {
            straight.append(id(i));
            first.append(id(i));
        }
        let a = straight.close_epoch(1);
        let a2 = first.close_epoch(1);
        assert_eq!(a, a2);
        // "Crash": rebuild from the sealed leaves and the last header.
        let mut resumed = Sealer::resume(key, &a2.leaves, &a2.header).unwrap();
        for i in 5..12 {
            straight.append(id(i));
            resumed.append(id(i));
        }
        assert_eq!(straight.close_epoch(2), resumed.close_epoch(2));
        assert!(Sealer::resume(derive_signing_key(1, "x"), &a2.leaves[..4], &a2.header).is_err());
    }

    /// `open_sealed` takes exactly what the log signed: a swapped envelope, a dropped
    /// leaf, a header under another key or an altered byte is refused.
    #[test]
    fn open_sealed_refuses_anything_the_log_did_not_sign() {
        use crate::envelope::{Effect, Envelope, Payload, ReplayPins};
        let log_key = derive_signing_key(1, "log.example");
        let author = derive_signing_key(1, "planner");
        let mut keys = KeyRegistry::new();
        keys.add_log("log.example", log_key.verifying_key())
            .unwrap();
        keys.add_principal(PrincipalId::new("planner").unwrap(), author.verifying_key());
        let env = |t: u64| {
            Envelope {
                author: PrincipalId::new("planner").unwrap(),
                destination: PrincipalId::new("robot").unwrap(),
                timestamp: t,
                payload: Payload::SensorReport {
                    sensor: "pose".into(),
                    reading: format!("x={t}"),
                },
                citations: Vec::new(),
                effect: Effect::None,
                pins: ReplayPins::default(),
            }
            .sign(&author)
            .unwrap()
        };
        let envs: Vec<SignedEnvelope> = (0..3).map(env).collect();
        let mut sealer = Sealer::new("log.example", log_key).unwrap();
        for e in &envs {
            sealer.append_envelope(e);
        }
        let epoch = sealer.close_epoch(9);
        let header = epoch.header.as_bytes().to_vec();
        let leaves: Vec<Vec<u8>> = epoch.leaves.iter().map(MessageId::leaf_bytes).collect();
        let bytes: Vec<Vec<u8>> = envs.iter().map(|e| e.as_bytes().to_vec()).collect();
        let (h, opened) = open_sealed(&header, &leaves, &bytes, &keys).unwrap();
        assert_eq!(h.number, 0);
        assert_eq!(opened.len(), 3);
        assert_eq!(opened[1].id(), envs[1].id());

        let mut swapped = bytes.clone();
        swapped.swap(0, 1);
        assert!(matches!(
            open_sealed(&header, &leaves, &swapped, &keys),
            Err(SealedEpochError::NotSealed { index: 0, .. })
        ));
        let mut forged = bytes.clone();
        forged[2] = env(99).as_bytes().to_vec();
        assert!(open_sealed(&header, &leaves, &forged, &keys).is_err());
        assert!(matches!(
            open_sealed(&header, &leaves[..2], &bytes[..2], &keys),
            Err(SealedEpochError::Leaves { .. })
        ));
        let mut other_leaves = leaves.clone();
        other_leaves[1] = forged[2].clone();
        assert!(open_sealed(&header, &other_leaves, &bytes, &keys).is_err());
        let mut bad_header = header.clone();
        let last = bad_header.len() - 1;
        bad_header[last] ^= 1;
        assert!(matches!(
            open_sealed(&bad_header, &leaves, &bytes, &keys),
            Err(SealedEpochError::Signature(_))
        ));
        let stranger = KeyRegistry::new();
        assert!(open_sealed(&header, &leaves, &bytes, &stranger).is_err());
    }
}
