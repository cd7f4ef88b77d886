//! Content-addressed payload store with per-payload keys and crypto-shredding.
//!
//! Design constraints:
//! - A payload is addressed by its commitment
//!   `SHA-256("audita/payload/v1" || 0x00 || salt[32] || plaintext)`, which is what
//!   [`crate::Payload::Stored`] signs and the Merkle tree seals. The random salt
//!   lives only inside the ciphertext, so once the key is destroyed the
//!   commitment no longer confirms guesses of short payloads.
//! - Each payload has its own 256-bit ChaCha20-Poly1305 key; the nonce can be
//!   zero because a key encrypts exactly one plaintext.
//! - Shredding deletes the key and keeps the ciphertext: the payload is reported
//!   as [`PayloadStatus::Shredded`], every seal still verifies (seals hold only
//!   commitments), and no operation can recover the plaintext. Shredding is a
//!   recorded act ([`PayloadKey::Shredded`], a tombstone on disk): a key that is
//!   simply gone is [`PayloadKey::Missing`] and reported as
//!   [`PayloadStatus::KeyMissing`], a problem, never as shredded.
//! - Randomness is an input (`rand_core` RNG); the store has no clock and no I/O.

use std::collections::BTreeMap;

use chacha20poly1305::aead::{Aead, KeyInit};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use rand_core::{CryptoRng, RngCore};
use sha2::{Digest as _, Sha256};

use crate::envelope::Hash;
use crate::error::StoreError;

/// What the store knows about a commitment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadStatus {
    /// Ciphertext and key present.
    Available,
    /// Key destroyed, and the destruction recorded (crypto-shredded).
    Shredded,
    /// Ciphertext present, key gone without a record of its shredding (a problem).
    KeyMissing,
    /// Never stored here.
    Absent,
}

impl PayloadStatus {
    /// Whether a verification with this status is clean (available or shredded).
    pub fn is_clean(self) -> bool {
        matches!(self, PayloadStatus::Available | PayloadStatus::Shredded)
    }
}

/// The key state of a stored payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadKey {
    /// The per-payload key.
    Key([u8; 32]),
    /// Destroyed by [`PayloadStore::shred`] (on disk: a `.shredded` tombstone).
    Shredded,
    /// Absent without a record of its destruction (read back from damaged storage).
    Missing,
}

/// One stored payload: ciphertext of `salt || plaintext`, and its key until shredded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPayload {
    /// ChaCha20-Poly1305 ciphertext (with tag) of `salt[32] || plaintext`.
    pub ciphertext: Vec<u8>,
    /// The per-payload key, or why there is none.
    pub key: PayloadKey,
}

/// The payload store.
#[derive(Debug, Clone, Default)]
pub struct PayloadStore {
    entries: BTreeMap<Hash, StoredPayload>,
}

/// The commitment of `plaintext` under `salt`.
pub fn commitment(salt: &[u8; 32], plaintext: &[u8]) -> Hash {
    let mut h = Sha256::new();
    h.update(b"audita/payload/v1\0");
    h.update(salt);
    h.update(plaintext);
    h.finalize().into()
}

impl PayloadStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
    /// Encrypts and stores `plaintext` under a fresh key; returns its commitment.
    pub fn put<R: RngCore + CryptoRng>(&mut self, plaintext: &[u8], rng: &mut R) -> Hash {
        let mut salt = [0u8; 32];
        rng.fill_bytes(&mut salt);
        let mut key = [0u8; 32];
        rng.fill_bytes(&mut key);
        let digest = commitment(&salt, plaintext);
        let mut sealed = salt.to_vec();
        sealed.extend_from_slice(plaintext);
        let cipher = ChaCha20Poly1305::new(Key::from_slice(&key));
        // Encryption with a fresh key cannot fail for in-memory buffers; an error
        // here would be a library invariant violation, surfaced as an empty entry.
        let ciphertext = cipher
            .encrypt(Nonce::from_slice(&[0u8; 12]), sealed.as_slice())
            .unwrap_or_default();
        self.entries.insert(
            digest,
            StoredPayload {
                ciphertext,
                key: PayloadKey::Key(key),
            },
        );
        digest
    }
    /// Inserts an entry read back from storage.
    pub fn insert(&mut self, digest: Hash, entry: StoredPayload) {
        self.entries.insert(digest, entry);
    }
    /// Decrypts a payload and checks it against its commitment.
    pub fn get(&self, digest: &Hash) -> Result<Vec<u8>, StoreError> {
        let name = hex::encode(digest);
        let entry = self
            .entries
            .get(digest)
            .ok_or_else(|| StoreError::NotFound(name.clone()))?;
        let key = match entry.key {
            PayloadKey::Key(k) => k,
            PayloadKey::Shredded => return Err(StoreError::Shredded(name)),
            PayloadKey::Missing => return Err(StoreError::KeyMissing(name)),
        };
        let cipher = ChaCha20Poly1305::new(Key::from_slice(&key));
        let sealed = cipher
            .decrypt(Nonce::from_slice(&[0u8; 12]), entry.ciphertext.as_slice())
            .map_err(|_| StoreError::Corrupted(name.clone()))?;
        if sealed.len() < 32 {
            return Err(StoreError::Corrupted(name));
        }
        let (salt, plaintext) = sealed.split_at(32);
        let mut s = [0u8; 32];
        s.copy_from_slice(salt);
        if commitment(&s, plaintext) != *digest {
            return Err(StoreError::Corrupted(name));
        }
        Ok(plaintext.to_vec())
    }
    /// Destroys a payload's key. Returns whether a key was destroyed.
    pub fn shred(&mut self, digest: &Hash) -> bool {
        match self.entries.get_mut(digest) {
            Some(e) if matches!(e.key, PayloadKey::Key(_)) => {
                e.key = PayloadKey::Shredded;
                true
            }
            _ => false,
        }
    }
    /// Status of a commitment.
    pub fn status(&self, digest: &Hash) -> PayloadStatus {
        match self.entries.get(digest) {
            None => PayloadStatus::Absent,
            Some(e) => match e.key {
                PayloadKey::Key(_) => PayloadStatus::Available,
                PayloadKey::Shredded => PayloadStatus::Shredded,
                PayloadKey::Missing => PayloadStatus::KeyMissing,
            },
        }
    }
    /// All entries in commitment order.
    pub fn entries(&self) -> impl Iterator<Item = (&Hash, &StoredPayload)> {
        self.entries.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::rand_core::SeedableRng;

    #[test]
    fn put_get_shred() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(3);
        let mut store = PayloadStore::new();
        let d = store.put(b"tool output: pallet weight 412 kg", &mut rng);
        assert_eq!(store.get(&d).unwrap(), b"tool output: pallet weight 412 kg");
        assert_eq!(store.status(&d), PayloadStatus::Available);
        assert!(store.shred(&d));
        assert_eq!(store.status(&d), PayloadStatus::Shredded);
        assert!(matches!(store.get(&d), Err(StoreError::Shredded(_))));
        assert!(!store.shred(&d));
    }

    #[test]
    fn a_lost_key_is_not_shredded() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(4);
        let mut store = PayloadStore::new();
        let d = store.put(b"operator note", &mut rng);
        let mut entry = store.entries().next().unwrap().1.clone();
        entry.key = PayloadKey::Missing;
        store.insert(d, entry);
        assert_eq!(store.status(&d), PayloadStatus::KeyMissing);
        assert!(matches!(store.get(&d), Err(StoreError::KeyMissing(_))));
        assert!(
            !store.shred(&d),
            "a missing key cannot be shredded after the fact"
        );
    }
}
