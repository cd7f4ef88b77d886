//! Delivery receipts: the recipient's signed acknowledgement of a message id.
//!
//! Design constraints (wire format v1, integers varints):
//! ```text
//! signed = body || signature[64]     ; recipient's Ed25519 over PAE(RECEIPT_TYPE, body)
//! body   = 0x01 message_author:str message_digest[32] recipient:str timestamp:varint
//! ```
//! - A receipt is consistent with a message when it names the message's id and
//!   its recipient is the message's destination.
//! - As with envelopes, verification reads the stored bytes.

use ed25519_dalek::SigningKey;

use crate::codec::{Reader, Writer};
use crate::dsse::{self, RECEIPT_TYPE};
use crate::envelope::{read_name, sha256, signed_body, Hash, MessageId, SIGNATURE_LEN};
use crate::error::{DecodeError, SignatureError};
use crate::principal::{KeyRegistry, PrincipalId};

/// Receipt format version.
pub const RECEIPT_VERSION: u8 = 1;

/// A signed delivery receipt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    bytes: Vec<u8>,
    message: MessageId,
    recipient: PrincipalId,
    timestamp: u64,
}

impl Receipt {
    /// The recipient acknowledges `message` at `timestamp`.
    pub fn sign(
        message: MessageId,
        recipient: PrincipalId,
        timestamp: u64,
        key: &SigningKey,
    ) -> Self {
        let mut w = Writer::new();
        w.u8(RECEIPT_VERSION);
        message.encode(&mut w);
        w.str(recipient.as_str());
        w.varint(timestamp);
        let sig = dsse::sign(key, RECEIPT_TYPE, &w.buf);
        let mut bytes = w.buf;
        bytes.extend_from_slice(&sig);
        Self {
            bytes,
            message,
            recipient,
            timestamp,
        }
    }
    /// Decodes stored bytes (total). Does not check the signature.
    pub fn decode(bytes: Vec<u8>) -> Result<Self, DecodeError> {
        let mut r = Reader::new(signed_body(&bytes)?);
        let v = r.u8()?;
        if v != RECEIPT_VERSION {
            return Err(DecodeError::UnknownVersion(v));
        }
        let message = MessageId::decode(&mut r)?;
        let recipient = read_name(&mut r)?;
        let timestamp = r.varint()?;
        r.finish()?;
        Ok(Self {
            bytes,
            message,
            recipient,
            timestamp,
        })
    }
    /// The exact stored bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }
    /// The signed body (stored bytes without the signature).
    pub fn body(&self) -> &[u8] {
        &self.bytes[..self.bytes.len() - SIGNATURE_LEN]
    }
    /// The signature bytes.
    pub fn signature(&self) -> [u8; 64] {
        let mut s = [0u8; 64];
        s.copy_from_slice(&self.bytes[self.bytes.len() - SIGNATURE_LEN..]);
        s
    }
    /// SHA-256 of the stored bytes.
    pub fn digest(&self) -> Hash {
        sha256(&self.bytes)
    }
    /// The acknowledged message.
    pub fn message(&self) -> &MessageId {
        &self.message
    }
    /// The recipient who signed.
    pub fn recipient(&self) -> &PrincipalId {
        &self.recipient
    }
    /// Caller-supplied delivery time.
    pub fn timestamp(&self) -> u64 {
        self.timestamp
    }
    /// Checks the recipient's signature over the stored bytes.
    ///
    /// The key must be one of the recipient's registered keys whose window covers
    /// the receipt's timestamp.
    pub fn verify(&self, keys: &KeyRegistry) -> Result<(), SignatureError> {
        let who = self.recipient.as_str();
        let (body, sig) = self.bytes.split_at(self.bytes.len() - SIGNATURE_LEN);
        let mut s = [0u8; 64];
        s.copy_from_slice(sig);
        crate::envelope::check_signer(keys, who, self.timestamp, RECEIPT_TYPE, body, &s)
    }
}
