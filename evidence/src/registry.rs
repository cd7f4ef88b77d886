//! The public principal registry of a deployment (`principals.json`): who may sign,
//! with which keys, when. It holds no secret; its digest is bound into every sealed
//! epoch header ([`crate::EpochHeader::registry`]), so an offline verifier knows which
//! keys applied at every epoch.
//!
//! Design constraints (format `audita.principals/v1`, JSON, `deny_unknown_fields`):
//! ```json
//! {"format": "audita.principals/v1",
//!  "principals": [
//!    {"name": "planner-1", "role": "planner",
//!     "keys": [{"vkey": "planner-1+1a2b3c4d+AQ…", "valid_from_ms": 0},
//!              {"vkey": "planner-1+5e6f7a8b+AQ…", "valid_from_ms": 86400000,
//!               "valid_until_ms": 172800000, "revoked": true}]}]}
//! ```
//! - `name` follows the principal naming rule; names are unique; `role` is a lower-case
//!   word (`planner`, `dispatcher`, `supervisor`, `controller`, `sensor`, `checker`,
//!   `operator`, `agent`, `actuator`, `bridge`, …: informational, for readers).
//! - `vkey` is a C2SP signed-note verifier key of type `0x01` (Ed25519) whose name is
//!   the principal's; its key id is checked. Windows are record time in ms, inclusive;
//!   `revoked` marks a window closed by compromise (the reason a late message is
//!   suspect), and needs `valid_until_ms`.
//! - [`PrincipalRegistry::digest`] is SHA-256 of the canonical encoding
//!   ([`PrincipalRegistry::to_json`]: principals sorted by name, keys in registration
//!   order, no whitespace), so equal registries have equal digests however their files
//!   are formatted.
//! - Every error is one line naming the principal (or entry) and the reason.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::checkpoint::ED25519_NOTE_TYPE;
use crate::envelope::Hash;
use crate::principal::{check_name, KeyRegistry, KeyWindow, PrincipalId};
use crate::trust::{parse_vkey, vkey};

/// Format identifier of the file.
pub const REGISTRY_FORMAT: &str = "audita.principals/v1";

/// One key of a principal with its validity window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisteredKey {
    /// C2SP note verifier key (`name+keyid+base64(0x01 || key)`).
    pub vkey: String,
    /// First instant the key may sign (ms, record time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_from_ms: Option<u64>,
    /// Last instant the key may sign (ms, record time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_until_ms: Option<u64>,
    /// The window was closed by revocation (compromise).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub revoked: bool,
}

/// One principal of the registry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisteredPrincipal {
    /// Principal name.
    pub name: String,
    /// Role (informational).
    pub role: String,
    /// Keys in registration order (rotation appends).
    pub keys: Vec<RegisteredKey>,
}

/// The registry file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrincipalRegistry {
    /// Always [`REGISTRY_FORMAT`].
    pub format: String,
    /// Principals (any order in a file; sorted by name once validated).
    pub principals: Vec<RegisteredPrincipal>,
}

/// A malformed registry. Permanent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RegistryError(pub String);

impl Default for PrincipalRegistry {
    fn default() -> Self {
        PrincipalRegistry {
            format: REGISTRY_FORMAT.to_string(),
            principals: Vec::new(),
        }
    }
}

impl PrincipalRegistry {
    /// The registered role of `name`.
    pub fn role(&self, name: &str) -> Option<&str> {
        self.principals
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.role.as_str())
    }

    /// Parses and validates a registry file.
    pub fn from_json(text: &str) -> Result<Self, RegistryError> {
        let mut r: PrincipalRegistry = serde_json::from_str(text)
            .map_err(|e| RegistryError(format!("principal registry: {e}")))?;
        r.validate()?;
        r.principals.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(r)
    }

    /// Checks every rule of the module docs.
    pub fn validate(&self) -> Result<(), RegistryError> {
        if self.format != REGISTRY_FORMAT {
            return Err(RegistryError(format!(
                "principal registry: format {:?} (want {REGISTRY_FORMAT:?})",
                self.format
            )));
        }
        let mut seen = std::collections::BTreeSet::new();
        for p in &self.principals {
            let at = |what: String| RegistryError(format!("principal {:?}: {what}", p.name));
            check_name(&p.name).map_err(|e| at(format!("bad name: {e}")))?;
            if !seen.insert(p.name.as_str()) {
                return Err(at("listed twice".into()));
            }
            let role_ok = !p.role.is_empty()
                && p.role.len() <= 32
                && p.role.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-'
                });
            if !role_ok {
                return Err(at(format!("bad role {:?} (a lower-case word)", p.role)));
            }
            if p.keys.is_empty() {
                return Err(at("no keys".into()));
            }
            for (i, k) in p.keys.iter().enumerate() {
                let at = |what: String| at(format!("key {i}: {what}"));
                let (name, _) = parse_vkey(&k.vkey, &[ED25519_NOTE_TYPE]).map_err(at)?;
                if name != p.name {
                    return Err(at(format!("vkey names {name:?}")));
                }
                if let (Some(a), Some(b)) = (k.valid_from_ms, k.valid_until_ms) {
                    if b < a {
                        return Err(at("valid_until_ms before valid_from_ms".into()));
                    }
                }
                if k.revoked && k.valid_until_ms.is_none() {
                    return Err(at("revoked without valid_until_ms".into()));
                }
            }
        }
        Ok(())
    }

    /// The canonical encoding (sorted principals, compact JSON), what [`Self::digest`]
    /// hashes.
    pub fn to_json(&self) -> String {
        let mut c = self.clone();
        c.principals.sort_by(|a, b| a.name.cmp(&b.name));
        serde_json::to_string(&c).unwrap_or_default()
    }

    /// Pretty form for files people edit.
    pub fn to_json_pretty(&self) -> String {
        let mut c = self.clone();
        c.principals.sort_by(|a, b| a.name.cmp(&b.name));
        serde_json::to_string_pretty(&c).unwrap_or_default() + "\n"
    }

    /// SHA-256 of the canonical encoding.
    pub fn digest(&self) -> Hash {
        Sha256::digest(self.to_json().as_bytes()).into()
    }

    /// The principal `name`, if registered.
    pub fn get(&self, name: &str) -> Option<&RegisteredPrincipal> {
        self.principals.iter().find(|p| p.name == name)
    }

    /// Registers a new principal with one key valid from `from_ms`.
    pub fn add(
        &mut self,
        name: &str,
        role: &str,
        key: &ed25519_dalek::VerifyingKey,
        from_ms: Option<u64>,
    ) -> Result<(), RegistryError> {
        if self.get(name).is_some() {
            return Err(RegistryError(format!(
                "principal {name:?} is already registered"
            )));
        }
        self.principals.push(RegisteredPrincipal {
            name: name.to_string(),
            role: role.to_string(),
            keys: vec![RegisteredKey {
                vkey: vkey(name, ED25519_NOTE_TYPE, key),
                valid_from_ms: from_ms,
                valid_until_ms: None,
                revoked: false,
            }],
        });
        self.validate()
    }

    /// Rotates `name` to a new key at `at_ms`: the current key's window closes at
    /// `at_ms - 1`, the new one opens at `at_ms`.
    pub fn rotate(
        &mut self,
        name: &str,
        key: &ed25519_dalek::VerifyingKey,
        at_ms: u64,
    ) -> Result<(), RegistryError> {
        let p = self
            .principals
            .iter_mut()
            .find(|p| p.name == name)
            .ok_or_else(|| RegistryError(format!("principal {name:?} is not registered")))?;
        if let Some(last) = p.keys.last_mut() {
            if last.valid_until_ms.is_none() {
                last.valid_until_ms = Some(at_ms.saturating_sub(1));
            }
        }
        p.keys.push(RegisteredKey {
            vkey: vkey(name, ED25519_NOTE_TYPE, key),
            valid_from_ms: Some(at_ms),
            valid_until_ms: None,
            revoked: false,
        });
        self.validate()
    }

    /// Revokes `name`'s current key at `at_ms` (compromise): it signs nothing after.
    pub fn revoke(&mut self, name: &str, at_ms: u64) -> Result<(), RegistryError> {
        let p = self
            .principals
            .iter_mut()
            .find(|p| p.name == name)
            .ok_or_else(|| RegistryError(format!("principal {name:?} is not registered")))?;
        let last = p
            .keys
            .last_mut()
            .ok_or_else(|| RegistryError(format!("principal {name:?} has no key")))?;
        last.valid_until_ms = Some(at_ms);
        last.revoked = true;
        self.validate()
    }

    /// The public keys with their windows, as the verifier uses them.
    pub fn key_registry(&self) -> Result<KeyRegistry, RegistryError> {
        let mut out = KeyRegistry::new();
        self.add_to(&mut out)?;
        Ok(out)
    }

    /// Adds every principal key to `keys` (keepers and logs are left alone).
    pub fn add_to(&self, keys: &mut KeyRegistry) -> Result<(), RegistryError> {
        for p in &self.principals {
            let id = PrincipalId::new(p.name.clone())
                .map_err(|e| RegistryError(format!("principal {:?}: {e}", p.name)))?;
            for k in &p.keys {
                let (_, vk) = parse_vkey(&k.vkey, &[ED25519_NOTE_TYPE])
                    .map_err(|e| RegistryError(format!("principal {:?}: {e}", p.name)))?;
                keys.add_principal_key(
                    id.clone(),
                    vk,
                    KeyWindow {
                        from_ms: k.valid_from_ms,
                        until_ms: k.valid_until_ms,
                        revoked: k.revoked,
                    },
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::derive_signing_key;

    #[test]
    fn digest_is_canonical_and_windows_apply() {
        let k1 = derive_signing_key(1, "a").verifying_key();
        let k2 = derive_signing_key(2, "a").verifying_key();
        let mut r = PrincipalRegistry::default();
        r.add("b", "planner", &k1, None).unwrap();
        r.add("a", "planner", &k1, Some(10)).unwrap();
        r.rotate("a", &k2, 100).unwrap();
        let again = PrincipalRegistry::from_json(&r.to_json_pretty()).unwrap();
        assert_eq!(again.digest(), r.digest());
        let keys = r.key_registry().unwrap();
        assert_eq!(keys.principal_at("a", 50), Some(&k1));
        assert_eq!(keys.principal_at("a", 100), Some(&k2));
        assert_eq!(keys.principal_at("a", 5), None);
        r.revoke("a", 200).unwrap();
        let keys = r.key_registry().unwrap();
        assert_eq!(keys.principal_at("a", 201), None);
    }

    #[test]
    fn malformed_entries_are_one_line_errors_naming_the_principal() {
        let k = derive_signing_key(1, "a").verifying_key();
        let good = vkey("a", ED25519_NOTE_TYPE, &k);
        for (json, want) in [
            (r#"{"format":"x","principals":[]}"#.to_string(), "format"),
            (
                format!(
                    r#"{{"format":"{REGISTRY_FORMAT}","principals":[{{"name":"b","role":"planner","keys":[{{"vkey":"{good}"}}]}}]}}"#
                ),
                "vkey names",
            ),
            (
                format!(
                    r#"{{"format":"{REGISTRY_FORMAT}","principals":[{{"name":"a","role":"Planner!","keys":[{{"vkey":"{good}"}}]}}]}}"#
                ),
                "bad role",
            ),
            (
                format!(
                    r#"{{"format":"{REGISTRY_FORMAT}","principals":[{{"name":"a","role":"planner","keys":[{{"vkey":"{good}","revoked":true}}]}}]}}"#
                ),
                "revoked without",
            ),
            (
                format!(
                    r#"{{"format":"{REGISTRY_FORMAT}","principals":[{{"name":"a","role":"planner","keys":[{{"vkey":"{good}"}}],"extra":1}}]}}"#
                ),
                "unknown field",
            ),
        ] {
            let e = PrincipalRegistry::from_json(&json).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
            assert!(!e.contains('\n'));
        }
    }
}
