//! Principals, their Ed25519 keys and the key registry.
//!
//! Design constraints:
//! - A principal name is 1..=64 bytes of `[A-Za-z0-9._:/-]`: no whitespace and no
//!   `+`, so a name is also a valid C2SP signed-note key name.
//! - The registry maps names to **public** keys only, in three roles: principals
//!   (authors and recipients of messages), keepers (co-signers of checkpoints,
//!   "witnesses" in transparency-log terms) and logs (recorders that sign epoch
//!   headers and checkpoints). Maps are `BTreeMap`, so iteration is deterministic.
//! - [`derive_signing_key`] is deterministic in `(seed, name)` and is for tests and
//!   demos only; production keys come from the operator's key custody.

use std::collections::BTreeMap;
use std::fmt;

use ed25519_dalek::{SigningKey, VerifyingKey};
use sha2::{Digest as _, Sha256};

/// Re-exported from [`crate::error`], where it lives beside the errors that carry it.
pub use crate::error::KeyValidity;
use crate::error::NameError;

/// Maximum length of a principal or key name in bytes.
pub const MAX_NAME_LEN: usize = 64;

/// Checks a name against the naming rule.
pub fn check_name(name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if name.len() > MAX_NAME_LEN {
        return Err(NameError::TooLong);
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'/' | b'-'))
    {
        return Err(NameError::BadChar);
    }
    Ok(())
}

/// The name of a principal (planner, dispatcher, supervisor, robot controller...).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PrincipalId(String);

impl PrincipalId {
    /// Validates and wraps a name.
    pub fn new(name: impl Into<String>) -> Result<Self, NameError> {
        let name = name.into();
        check_name(&name)?;
        Ok(Self(name))
    }
    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for PrincipalId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for PrincipalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Deterministically derives a signing key from `(seed, name)` for tests and demos:
/// the secret is `SHA-256("audita/derive-key/v1" || 0x00 || seed_be64 || name)`.
pub fn derive_signing_key(seed: u64, name: &str) -> SigningKey {
    let mut h = Sha256::new();
    h.update(b"audita/derive-key/v1\0");
    h.update(seed.to_be_bytes());
    h.update(name.as_bytes());
    SigningKey::from_bytes(&h.finalize().into())
}

/// When a registered principal key may sign, in record time (ms): from `from_ms`
/// (inclusive) to `until_ms` (inclusive), each unbounded when absent. A key whose
/// window closed because it was compromised is `revoked`: the distinction is kept in
/// the reason a message is suspect.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeyWindow {
    /// First instant the key may sign.
    pub from_ms: Option<u64>,
    /// Last instant the key may sign.
    pub until_ms: Option<u64>,
    /// Whether the window was closed by revocation (compromise), not rotation.
    pub revoked: bool,
}

impl KeyWindow {
    /// Whether the window covers `t` (ms), and why not.
    pub fn check(&self, t: u64) -> Result<(), KeyValidity> {
        if let Some(from_ms) = self.from_ms {
            if t < from_ms {
                return Err(KeyValidity::NotYetValid { from_ms });
            }
        }
        match self.until_ms {
            Some(until) if t > until && self.revoked => Err(KeyValidity::Revoked { at_ms: until }),
            Some(until_ms) if t > until_ms => Err(KeyValidity::Expired { until_ms }),
            _ => Ok(()),
        }
    }
}

/// Public keys of principals (each with its validity windows), keepers and logs.
/// Holds no secrets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyRegistry {
    principals: BTreeMap<PrincipalId, Vec<(VerifyingKey, KeyWindow)>>,
    keepers: BTreeMap<String, VerifyingKey>,
    logs: BTreeMap<String, VerifyingKey>,
}

impl KeyRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }
    /// Registers (or replaces) a principal's only public key, valid at all times.
    pub fn add_principal(&mut self, id: PrincipalId, key: VerifyingKey) {
        self.principals
            .insert(id, vec![(key, KeyWindow::default())]);
    }
    /// Adds one more key of a principal with its validity window (rotation: the
    /// previous key's window closes where the new one's opens).
    pub fn add_principal_key(&mut self, id: PrincipalId, key: VerifyingKey, window: KeyWindow) {
        self.principals.entry(id).or_default().push((key, window));
    }
    /// Registers a keeper (checkpoint co-signer) under its note key name.
    pub fn add_keeper(&mut self, name: &str, key: VerifyingKey) -> Result<(), NameError> {
        check_name(name)?;
        self.keepers.insert(name.to_owned(), key);
        Ok(())
    }
    /// Registers a log (recorder) key under its checkpoint origin / note key name.
    pub fn add_log(&mut self, name: &str, key: VerifyingKey) -> Result<(), NameError> {
        check_name(name)?;
        self.logs.insert(name.to_owned(), key);
        Ok(())
    }
    /// A principal's current key (the last registered), if any.
    pub fn principal(&self, name: &str) -> Option<&VerifyingKey> {
        self.principals
            .get(name)
            .and_then(|k| k.last())
            .map(|(k, _)| k)
    }
    /// Every key of a principal with its window, in registration order.
    pub fn principal_keys(&self, name: &str) -> &[(VerifyingKey, KeyWindow)] {
        self.principals.get(name).map_or(&[], Vec::as_slice)
    }
    /// The key of `name` whose window covers `t` (the last registered such), if any.
    pub fn principal_at(&self, name: &str, t: u64) -> Option<&VerifyingKey> {
        self.principal_keys(name)
            .iter()
            .rev()
            .find(|(_, w)| w.check(t).is_ok())
            .map(|(k, _)| k)
    }
    /// A keeper's key, if registered.
    pub fn keeper(&self, name: &str) -> Option<&VerifyingKey> {
        self.keepers.get(name)
    }
    /// A log's key, if registered.
    pub fn log(&self, name: &str) -> Option<&VerifyingKey> {
        self.logs.get(name)
    }
    /// All principals in name order, each with its current key.
    pub fn principals(&self) -> impl Iterator<Item = (&PrincipalId, &VerifyingKey)> {
        self.principals
            .iter()
            .filter_map(|(id, ks)| ks.last().map(|(k, _)| (id, k)))
    }
    /// All principals in name order with every key and window.
    pub fn principal_entries(
        &self,
    ) -> impl Iterator<Item = (&PrincipalId, &[(VerifyingKey, KeyWindow)])> {
        self.principals.iter().map(|(id, ks)| (id, ks.as_slice()))
    }
    /// All keepers in name order.
    pub fn keepers(&self) -> impl Iterator<Item = (&String, &VerifyingKey)> {
        self.keepers.iter()
    }
    /// All logs in name order.
    pub fn logs(&self) -> impl Iterator<Item = (&String, &VerifyingKey)> {
        self.logs.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_rule() {
        assert!(PrincipalId::new("planner-1").is_ok());
        assert!(PrincipalId::new("audita.example/log").is_ok());
        assert_eq!(PrincipalId::new(""), Err(NameError::Empty));
        assert_eq!(PrincipalId::new("a b"), Err(NameError::BadChar));
        assert_eq!(PrincipalId::new("a+b"), Err(NameError::BadChar));
        assert_eq!(PrincipalId::new("x".repeat(65)), Err(NameError::TooLong));
    }

    #[test]
    fn derivation_is_deterministic() {
        assert_eq!(
            derive_signing_key(7, "planner").to_bytes(),
            derive_signing_key(7, "planner").to_bytes()
        );
        assert_ne!(
            derive_signing_key(7, "planner").to_bytes(),
            derive_signing_key(8, "planner").to_bytes()
        );
    }
}
