//! The accountable record (SPEC §2): signed envelopes, receipts, Merkle epochs,
//! C2SP checkpoints, keeper co-signatures, the payload store and the verification
//! partition. A pure library: no I/O, no clock, no Kafka.
//!
//! Design constraints:
//! - Everything signed is signed over the exact stored bytes (DSSE PAE, see
//!   [`dsse`]); verification reads those bytes and never re-serializes.
//! - Decoding untrusted bytes is total: errors, never panics, allocations bounded
//!   by the input.
//! - Deterministic: `BTreeMap`/`BTreeSet` everywhere something is hashed, sealed or
//!   compared; time and randomness are inputs.
//! - Every error is permanent (the library is pure); each error type says so.
//!
//! Typical flow: build an [`Envelope`], [`Envelope::sign`] it, have the recipient
//! sign a [`Receipt`], feed ids to a [`Sealer`] and [`Sealer::close_epoch`], let
//! each [`Keeper`] co-sign the checkpoint after checking consistency, collect
//! everything into a [`Record`] and [`verify_record`] it into a [`Partition`];
//! attribution then works on [`Certified`] messages only.
#![warn(missing_docs)]
#![forbid(unsafe_code)]
#![warn(clippy::too_many_lines)]

pub mod checkpoint;
mod codec;
pub mod dsse;
pub mod envelope;
pub mod epoch;
pub mod error;
pub mod keeper;
pub mod merkle;
pub mod principal;
pub mod proven;
pub mod receipt;
pub mod registry;
pub mod sample;
mod sig;
pub mod store;
pub mod trust;
pub mod verify;

pub use checkpoint::{
    find_equivocations, key_id, Checkpoint, Cosignature, Equivocation, SignatureLine,
    SignedCheckpoint,
};
pub use envelope::{
    sha256, Effect, Envelope, Hash, MessageCheck, MessageId, Payload, ReplayPins, SignedEnvelope,
    StoredKind, ToolPin, Verified,
};
pub use epoch::{open_sealed, EpochHeader, SealedEpoch, SealedEpochError, Sealer};
pub use error::{
    DecodeError, EnvelopeError, NameError, NoteError, ProofError, SignatureError, StoreError,
};
pub use keeper::{Keeper, KeeperError};
pub use merkle::{ConsistencyProof, InclusionProof};
pub use principal::{derive_signing_key, KeyRegistry, KeyValidity, KeyWindow, PrincipalId};
pub use proven::{verify_proven, EpochProofs, ProvenSlice};
pub use receipt::Receipt;
pub use registry::{PrincipalRegistry, RegistryError};
pub use store::{PayloadKey, PayloadStatus, PayloadStore};
pub use trust::{TrustAnchors, TrustError, TrustProblem};
pub use verify::{
    check_envelopes_batch, check_receipts_batch, verify_record, verify_record_with, Certified,
    CheckpointFault, CheckpointStatus, EpochFault, EpochStatus, HeldFault, HeldFinding, Missing,
    Partition, PayloadFinding, Policy, RawEpoch, ReceiptFault, ReceiptProblem, Record, Suspect,
    SuspectItem, SuspectReason,
};

/// Re-exported key types, so callers need not depend on `ed25519-dalek` directly.
pub use ed25519_dalek::{SigningKey, VerifyingKey};
