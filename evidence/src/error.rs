//! Errors of the evidence layer.
//!
//! Design constraints:
//! - Every error of this crate is **permanent**: the library is pure, so the same
//!   input always yields the same error and retrying cannot help. Each error type
//!   still answers [`DecodeError::is_permanent`] (and friends) so pipeline stages
//!   can route it to quarantine without knowing the variant.
//! - Errors carry the offset or item that failed, never a formatted blob.

use thiserror::Error;

/// Undecodable bytes: framing, varints, lengths, UTF-8, unknown tags.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The input ended before the value at `offset` was complete.
    #[error("truncated input at byte {offset}")]
    Truncated {
        /// Byte offset where more input was needed.
        offset: usize,
    },
    /// Bytes were left after a complete value.
    #[error("trailing bytes after the value at byte {offset}")]
    TrailingBytes {
        /// Offset of the first unexpected byte.
        offset: usize,
    },
    /// A varint was overlong, non-minimal or above `u64::MAX`.
    #[error("malformed varint at byte {offset}")]
    BadVarint {
        /// Offset where the varint starts.
        offset: usize,
    },
    /// A declared length or count exceeds the remaining input.
    #[error("declared length {length} at byte {offset} exceeds the input")]
    LengthOutOfBounds {
        /// Offset of the length field.
        offset: usize,
        /// The declared length.
        length: u64,
    },
    /// A string field is not UTF-8.
    #[error("string at byte {offset} is not UTF-8")]
    BadUtf8 {
        /// Offset of the string's length field.
        offset: usize,
    },
    /// The format version byte is not one this library reads.
    #[error("unsupported format version {0}")]
    UnknownVersion(u8),
    /// An enum tag is not defined.
    #[error("unknown {what} tag {tag} at byte {offset}")]
    UnknownTag {
        /// Which enum was being decoded.
        what: &'static str,
        /// The tag value.
        tag: u8,
        /// Offset of the tag.
        offset: usize,
    },
    /// A principal or key name violates the naming rule.
    #[error("invalid name at byte {offset}: {reason}")]
    InvalidName {
        /// Offset of the name.
        offset: usize,
        /// What is wrong with it.
        reason: NameError,
    },
    /// Citations are not strictly sorted (the encoding requires sorted, unique ids).
    #[error("citations not strictly sorted at byte {offset}")]
    UnsortedCitations {
        /// Offset of the offending citation.
        offset: usize,
    },
    /// The value is shorter than its fixed-size trailer (e.g. the 64-byte signature).
    #[error("value of {len} bytes is too short (minimum {min})")]
    TooShort {
        /// Actual length.
        len: usize,
        /// Minimum length.
        min: usize,
    },
}

impl DecodeError {
    /// Always true: malformed bytes stay malformed.
    pub fn is_permanent(&self) -> bool {
        true
    }
}

/// A principal or key name that violates the naming rule of [`crate::PrincipalId`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum NameError {
    /// Empty name.
    #[error("empty")]
    Empty,
    /// Longer than [`crate::principal::MAX_NAME_LEN`] bytes.
    #[error("longer than 64 bytes")]
    TooLong,
    /// Contains a character outside `[A-Za-z0-9._:/-]`.
    #[error("character outside [A-Za-z0-9._:/-]")]
    BadChar,
}

/// A message that cannot be signed or accepted as it stands.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EnvelopeError {
    /// A derived command carries no citation (SPEC §2: citation is consent).
    #[error("derived {kind} command from {author} carries no citation; only sensor reports and external inputs may be uncited")]
    UncitedDerived {
        /// Payload kind name.
        kind: &'static str,
        /// The author.
        author: String,
    },
    /// A message cites itself by author and digest (impossible for an honest signer).
    #[error("message cites itself")]
    SelfCitation,
    /// A name field violates the naming rule.
    #[error("invalid {field}: {reason}")]
    InvalidName {
        /// Which field.
        field: &'static str,
        /// Why.
        reason: NameError,
    },
    /// The signing key does not belong to the author (registry mismatch).
    #[error("signing key does not match the author's registered key")]
    WrongKey,
}

impl EnvelopeError {
    /// Always true: the message must be rebuilt, resending it cannot help.
    pub fn is_permanent(&self) -> bool {
        true
    }
}

/// A signature or key check that failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SignatureError {
    /// The signer is not in the key registry.
    #[error("no registered key for {0}")]
    UnknownSigner(String),
    /// The Ed25519 signature does not verify over the stored bytes.
    #[error("signature of {0} does not verify")]
    BadSignature(String),
    /// The signature verifies under a registered key of the signer whose validity
    /// window does not cover the signing time.
    #[error("{signer} signed at {at_ms} ms with a key {}", validity_text(.validity))]
    KeyNotValid {
        /// The signer.
        signer: String,
        /// The signing time it claims (ms).
        at_ms: u64,
        /// Why the key does not cover it.
        validity: KeyValidity,
    },
}

/// Why a key did not cover a signing time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyValidity {
    /// Signed before the key's window opened.
    NotYetValid {
        /// Start of the window.
        from_ms: u64,
    },
    /// Signed after a rotated key's window closed.
    Expired {
        /// End of the window.
        until_ms: u64,
    },
    /// Signed after the key was revoked.
    Revoked {
        /// Revocation instant.
        at_ms: u64,
    },
}

fn validity_text(v: &KeyValidity) -> String {
    use KeyValidity::*;
    match v {
        NotYetValid { from_ms } => format!("not valid before {from_ms} ms"),
        Expired { until_ms } => format!("retired at {until_ms} ms"),
        Revoked { at_ms } => format!("revoked at {at_ms} ms"),
    }
}

impl SignatureError {
    /// Always true: a bad signature is quarantined, never retried.
    pub fn is_permanent(&self) -> bool {
        true
    }
}

/// A Merkle proof that is malformed or does not verify.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ProofError {
    /// The leaf index is not below the tree size, or sizes are out of order.
    #[error("index {index} out of range for tree size {size}")]
    OutOfRange {
        /// Leaf index or old size.
        index: u64,
        /// Tree size.
        size: u64,
    },
    /// The proof has the wrong number of hashes for its index and size.
    #[error("proof has {got} hashes, expected {expected}")]
    WrongLength {
        /// Hashes supplied.
        got: usize,
        /// Hashes required.
        expected: usize,
    },
    /// The recomputed root differs from the claimed root.
    #[error("recomputed root does not match")]
    RootMismatch,
    /// The encoded proof could not be parsed.
    #[error("malformed proof encoding: {0}")]
    Malformed(#[from] DecodeError),
}

impl ProofError {
    /// Always true: a proof that fails once fails forever.
    pub fn is_permanent(&self) -> bool {
        true
    }
}

/// A signed note / checkpoint that cannot be parsed or verified.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NoteError {
    /// The text violates the C2SP signed-note grammar.
    #[error("malformed note: {0}")]
    Malformed(&'static str),
    /// The body is not a valid tlog checkpoint.
    #[error("malformed checkpoint body: {0}")]
    BadCheckpoint(&'static str),
    /// No signature line from the expected log key verifies.
    #[error("no valid signature by the log key {0}")]
    NoLogSignature(String),
}

impl NoteError {
    /// Always true.
    pub fn is_permanent(&self) -> bool {
        true
    }
}

/// A payload-store operation that failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StoreError {
    /// No payload with that hash was ever stored.
    #[error("payload {0} not found")]
    NotFound(String),
    /// The payload's key was destroyed (crypto-shredded).
    #[error("payload {0} was shredded")]
    Shredded(String),
    /// The payload's key is gone without a record of its shredding.
    #[error("payload {0} has lost its key (not recorded as shredded)")]
    KeyMissing(String),
    /// Decryption or the content-hash check failed (corrupted ciphertext).
    #[error("payload {0} is corrupted")]
    Corrupted(String),
}

impl StoreError {
    /// Always true: a shredded payload never comes back.
    pub fn is_permanent(&self) -> bool {
        true
    }
}
