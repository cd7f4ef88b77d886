//! DSSE pre-authentication encoding: what every signature of this crate covers.
//!
//! Design constraints:
//! - A signature covers `PAE(type, body) = "DSSEv1" SP len(type) SP type SP
//!   len(body) SP body` with lengths in ASCII decimal, exactly as the DSSE
//!   specification defines it; `type` names the object kind, so a signature over
//!   an envelope can never be replayed as a receipt or an epoch header.
//! - `body` is the exact stored byte string; verification reads those bytes and
//!   never re-serializes a decoded value.

use crate::sig;
use crate::{SigningKey, VerifyingKey};

/// DSSE payload type of message envelopes.
pub const ENVELOPE_TYPE: &str = "application/vnd.audita.envelope.v1";
/// DSSE payload type of delivery receipts.
pub const RECEIPT_TYPE: &str = "application/vnd.audita.receipt.v1";
/// DSSE payload type of epoch headers.
pub const EPOCH_TYPE: &str = "application/vnd.audita.epoch.v1";

/// The pre-authentication encoding of `body` under `payload_type`.
pub fn pae(payload_type: &str, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + payload_type.len() + 32);
    out.extend_from_slice(b"DSSEv1 ");
    out.extend_from_slice(payload_type.len().to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload_type.as_bytes());
    out.push(b' ');
    out.extend_from_slice(body.len().to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(body);
    out
}

/// Signs `body` under `payload_type`.
pub fn sign(key: &SigningKey, payload_type: &str, body: &[u8]) -> [u8; 64] {
    sig::sign(key, &pae(payload_type, body))
}

/// Verifies a signature over `body` under `payload_type` (strict RFC 8032 checks:
/// canonical `S`, no small-order keys or `R`; see [`crate::sig`]).
pub fn verify(key: &VerifyingKey, payload_type: &str, body: &[u8], sig: &[u8; 64]) -> bool {
    sig::verify(key, &pae(payload_type, body), sig)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pae_matches_the_dsse_definition() {
        assert_eq!(pae("t", b"ab"), b"DSSEv1 1 t 2 ab".to_vec());
    }

    #[test]
    fn type_separates_domains() {
        let k = crate::derive_signing_key(1, "x");
        let sig = sign(&k, ENVELOPE_TYPE, b"body");
        assert!(verify(&k.verifying_key(), ENVELOPE_TYPE, b"body", &sig));
        assert!(!verify(&k.verifying_key(), RECEIPT_TYPE, b"body", &sig));
    }
}
