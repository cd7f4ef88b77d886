//! The signature primitive: the one place where this crate signs and verifies
//! (DSSE bodies, checkpoint notes, keeper co-signatures, the batch path).
//!
//! Design constraints:
//! - Every signature of the crate is made by [`sign`] and checked by [`verify`] or
//!   [`verify_batch`]; nothing else touches `ed25519-dalek`'s sign/verify. Callers
//!   build the exact signed message (DSSE PAE, note body, `cosignature/v1` text).
//! - Normal builds: Ed25519 (RFC 8032) — [`verify`] is `verify_strict` (canonical
//!   `S`, no small-order key or `R`), [`verify_batch`] is one Ed25519 batch
//!   (callers fall back to [`verify`] one by one when it fails).
//! - Fuzzing builds only (`cfg(fuzzing)`, which `cargo fuzz build` passes to rustc;
//!   it is not a cargo feature, so no dependent crate and no `--features` flag can
//!   turn it on): a cheap deterministic stand-in with the same interface and the
//!   same accept/reject structure. The "signature" is the 64-byte tag
//!   `SHA-512("audita-fuzzing-stand-in\0" || public key || message)`, and a
//!   signature verifies iff it equals the tag of (public key, message); a batch
//!   verifies iff every item does. So a signature still fails on any change of the
//!   signed bytes, of the key or of the signer, while one execution of a
//!   whole-record fuzz target costs a few hashes instead of ~40 Ed25519
//!   verifications (~200 → thousands of executions per second), and every parser,
//!   Merkle, checkpoint, receipt, citation and partition path runs for real. It is
//!   no signature (anyone holding the public key can compute the tag); that is
//!   fine for fuzzing, where the adversary is a mutator that cannot compute
//!   SHA-512 preimages, and the fuzz targets build their seed records at start-up
//!   with the same primitive. Ed25519 itself is exercised by the normal test
//!   suite and its RFC 8032 vectors, not by the fuzzer.

use crate::{SigningKey, VerifyingKey};

/// Signs `msg` with `key`.
#[cfg(not(fuzzing))]
pub(crate) fn sign(key: &SigningKey, msg: &[u8]) -> [u8; 64] {
    use ed25519_dalek::Signer as _;
    key.sign(msg).to_bytes()
}

/// Verifies `sig` over `msg` under `key` (strict RFC 8032 checks).
#[cfg(not(fuzzing))]
pub(crate) fn verify(key: &VerifyingKey, msg: &[u8], sig: &[u8; 64]) -> bool {
    key.verify_strict(msg, &ed25519_dalek::Signature::from_bytes(sig))
        .is_ok()
}

/// One batch over `(message, signature, key)` triples; true only if every
/// signature verifies (a false may still hide valid ones: callers then verify one
/// by one with [`verify`]).
#[cfg(not(fuzzing))]
pub(crate) fn verify_batch(msgs: &[&[u8]], sigs: &[[u8; 64]], keys: &[VerifyingKey]) -> bool {
    let sigs: Vec<ed25519_dalek::Signature> = sigs
        .iter()
        .map(ed25519_dalek::Signature::from_bytes)
        .collect();
    ed25519_dalek::verify_batch(msgs, &sigs, keys).is_ok()
}

/// The fuzzing stand-in's tag of (public key, message).
#[cfg(fuzzing)]
fn tag(key: &VerifyingKey, msg: &[u8]) -> [u8; 64] {
    use sha2::{Digest as _, Sha512};
    let mut h = Sha512::new();
    h.update(b"audita-fuzzing-stand-in\0");
    h.update(key.as_bytes());
    h.update(msg);
    h.finalize().into()
}

/// Fuzzing stand-in: the tag of (`key`'s public key, `msg`).
#[cfg(fuzzing)]
pub(crate) fn sign(key: &SigningKey, msg: &[u8]) -> [u8; 64] {
    tag(&key.verifying_key(), msg)
}

/// Fuzzing stand-in: `sig` verifies iff it equals the tag of (`key`, `msg`).
///
/// The comparison folds the XOR of all 64 bytes and tests only the fold: a plain
/// `==` compiles to `memcmp`, whose arguments libFuzzer records and splices into
/// later inputs, so the fuzzer would learn the expected tag of its own bytes and
/// "forge" signatures no real adversary can.
#[cfg(fuzzing)]
pub(crate) fn verify(key: &VerifyingKey, msg: &[u8], sig: &[u8; 64]) -> bool {
    let t = tag(key, msg);
    t.iter().zip(sig).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// Fuzzing stand-in: every item verifies (and the lengths agree, as
/// `ed25519_dalek::verify_batch` requires).
#[cfg(fuzzing)]
pub(crate) fn verify_batch(msgs: &[&[u8]], sigs: &[[u8; 64]], keys: &[VerifyingKey]) -> bool {
    msgs.len() == sigs.len()
        && msgs.len() == keys.len()
        && msgs
            .iter()
            .zip(sigs)
            .zip(keys)
            .all(|((m, s), k)| verify(k, m, s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::derive_signing_key;

    /// The accept/reject structure both primitives share: a signature verifies
    /// under its key and message only, and a batch fails if any item fails.
    #[test]
    fn signatures_fail_on_any_change_of_message_key_or_signer() {
        let a = derive_signing_key(1, "a");
        let b = derive_signing_key(1, "b");
        let sig = sign(&a, b"message");
        assert!(verify(&a.verifying_key(), b"message", &sig));
        assert!(!verify(&a.verifying_key(), b"messagf", &sig));
        assert!(!verify(&b.verifying_key(), b"message", &sig));
        assert!(!verify(
            &b.verifying_key(),
            b"message",
            &sign(&a, b"message!")
        ));
        let mut flipped = sig;
        flipped[63] ^= 1;
        assert!(!verify(&a.verifying_key(), b"message", &flipped));
        flipped = sig;
        flipped[0] ^= 0x80;
        assert!(!verify(&a.verifying_key(), b"message", &flipped));
        let sig_b = sign(&b, b"other");
        let keys = [a.verifying_key(), b.verifying_key()];
        assert!(verify_batch(&[b"message", b"other"], &[sig, sig_b], &keys));
        assert!(!verify_batch(&[b"message", b"other"], &[sig_b, sig], &keys));
        assert!(!verify_batch(&[b"message", b"othe"], &[sig, sig_b], &keys));
        assert!(!verify_batch(
            &[b"message", b"other"],
            &[sig, sig_b],
            &[keys[1], keys[0]]
        ));
        assert!(!verify_batch(&[b"message"], &[sig, sig_b], &keys));
    }

    /// Deterministic: the same key and message always give the same signature
    /// (RFC 8032 signing is deterministic, and so is the stand-in's tag).
    #[test]
    fn signing_is_deterministic() {
        let a = derive_signing_key(2, "a");
        assert_eq!(sign(&a, b"m"), sign(&a, b"m"));
        assert_ne!(sign(&a, b"m"), sign(&a, b"n"));
    }

    /// A normal build signs with real Ed25519: the signature checks with
    /// `ed25519-dalek` directly, so the stand-in can never be what ships.
    #[cfg(not(fuzzing))]
    #[test]
    fn normal_builds_sign_with_ed25519() {
        use ed25519_dalek::Verifier as _;
        let a = derive_signing_key(3, "a");
        let sig = ed25519_dalek::Signature::from_bytes(&sign(&a, b"m"));
        assert!(a.verifying_key().verify(b"m", &sig).is_ok());
    }
}
