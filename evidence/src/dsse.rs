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

/// One signature of a [`DsseJson`] envelope.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DsseSignature {
    /// The signer's C2SP verifier key (`name+hash+base64(0x01 || key)`), or empty
    /// when the record registers no key for the signer at the signing time.
    pub keyid: String,
    /// Base64 (standard, padded) of the 64-byte Ed25519 signature.
    pub sig: String,
}

/// A signed envelope or receipt in the standard DSSE JSON envelope form
/// (`payloadType`, base64 `payload`, `signatures`): the stored body is the
/// payload and the stored signature its signature, unchanged, since every
/// signature here is already over `PAE(payloadType, body)`. Off-the-shelf DSSE
/// verifiers check it with the signer's Ed25519 public key.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DsseJson {
    /// [`ENVELOPE_TYPE`] or [`RECEIPT_TYPE`].
    #[serde(rename = "payloadType")]
    pub payload_type: String,
    /// Base64 (standard, padded) of the signed body.
    pub payload: String,
    /// Exactly one signature.
    pub signatures: Vec<DsseSignature>,
}

impl DsseJson {
    /// `body` signed with `sig` under `payload_type` by the key `keyid` names.
    pub fn new(payload_type: &str, body: &[u8], sig: &[u8; 64], keyid: String) -> DsseJson {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD;
        DsseJson {
            payload_type: payload_type.to_string(),
            payload: b64.encode(body),
            signatures: vec![DsseSignature {
                keyid,
                sig: b64.encode(sig),
            }],
        }
    }

    /// Whether some signature verifies under `key` (strict Ed25519).
    pub fn verify(&self, key: &VerifyingKey) -> bool {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD;
        let Ok(body) = b64.decode(&self.payload) else {
            return false;
        };
        self.signatures.iter().any(|s| {
            b64.decode(&s.sig)
                .ok()
                .and_then(|raw| <[u8; 64]>::try_from(raw).ok())
                .is_some_and(|sig| verify(key, &self.payload_type, &body, &sig))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dsse_json_round_trips_and_binds_type_and_payload() {
        let k = crate::derive_signing_key(1, "x");
        let sig = sign(&k, ENVELOPE_TYPE, b"body");
        let d = DsseJson::new(ENVELOPE_TYPE, b"body", &sig, "x+00000000+AQ".into());
        let json = serde_json::to_string(&d).unwrap();
        assert!(json.contains("\"payloadType\":\"application/vnd.audita.envelope.v1\""));
        let back: DsseJson = serde_json::from_str(&json).unwrap();
        assert!(back.verify(&k.verifying_key()));
        let mut t = back.clone();
        t.payload_type = RECEIPT_TYPE.into();
        assert!(!t.verify(&k.verifying_key()));
        let mut t = back.clone();
        t.payload = "Ym9kZQ==".into();
        assert!(!t.verify(&k.verifying_key()));
        assert!(!back.verify(&crate::derive_signing_key(2, "x").verifying_key()));
    }

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
