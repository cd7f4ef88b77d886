//! Trust anchors held outside the record: the log and keeper keys a verifier pins,
//! and the keeper quorum every checkpoint must reach.
//!
//! A record carries its own public keys (`keys/` of the on-disk format). Whoever can
//! rewrite the record can rewrite those too: strip every co-signature and empty the
//! keeper list, or re-sign the log under a key of their own, and the record still
//! verifies against itself. A verifier that does not trust the operator pins the
//! keys it expects instead, from a source it trusts (the keepers' own publications,
//! the deployment's registry).
//!
//! Design constraints (trust file, UTF-8 text, one entry a line):
//! ```text
//! # comments start with '#'; blank lines are ignored
//! log     audita.local/fleet-log+8e3a2c51+AQ...      (a log: checkpoint origin and key)
//! keeper  insurer.example/keeper+1f09d2aa+BA...      (a keeper: checkpoint co-signer)
//! quorum  2                                          (optional; default: every pinned keeper)
//! ```
//! - A key is a C2SP signed-note verifier key (`vkey`):
//!   `<name>+<key id, 8 hex>+<base64(type byte || 32-byte Ed25519 key)>`, the key id
//!   being the first 4 bytes of `SHA-256(name || "\n" || type || key)`. Logs use
//!   type `0x01` (Ed25519 note signatures); keepers `0x04` (`cosignature/v1`, as
//!   C2SP witnesses publish them) or `0x01`. A key id that does not match is an
//!   error: the line was mistyped or tampered with.
//! - At least one log; names unique per kind; `quorum` between 1 and the number of
//!   pinned keepers (0 only without keepers). Anything else is a one-line
//!   [`TrustError`] naming the line.
//! - [`TrustAnchors::apply`] compares the record's own log and keeper keys with the
//!   pins — every difference is a named [`TrustProblem`] — and returns the key
//!   registry to verify with: the record's principals, the pinned logs and keepers.
//!   Principal keys need no pin: every message id is a sealed leaf and commits to
//!   its signature, so once the seals are checked against pinned keys a swapped
//!   principal key can only turn messages suspect, never certify a forgery.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use ed25519_dalek::VerifyingKey;

use crate::checkpoint::{key_id, COSIGNATURE_V1_TYPE, ED25519_NOTE_TYPE};
use crate::principal::{check_name, KeyRegistry};

/// Pinned log and keeper keys with the keeper quorum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustAnchors {
    logs: BTreeMap<String, VerifyingKey>,
    keepers: BTreeMap<String, VerifyingKey>,
    quorum: usize,
}

/// A malformed trust file line. Permanent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct TrustError {
    /// 1-based line number (0: the file as a whole).
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

/// A difference between the record's own keys and the pinned ones.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum TrustProblem {
    /// The record's `keys/logs.txt` has another key for a pinned log.
    LogKeyMismatch(String),
    /// The record names a log that is not pinned.
    LogNotPinned(String),
    /// A pinned log is absent from the record's `keys/logs.txt`.
    PinnedLogAbsent(String),
    /// The record's `keys/keepers.txt` has another key for a pinned keeper.
    KeeperKeyMismatch(String),
    /// The record names a keeper that is not pinned.
    KeeperNotPinned(String),
    /// A pinned keeper is absent from the record's `keys/keepers.txt`.
    PinnedKeeperAbsent(String),
}

impl TrustProblem {
    /// A short stable code.
    pub fn code(&self) -> &'static str {
        match self {
            TrustProblem::LogKeyMismatch(_) => "log_key_mismatch",
            TrustProblem::LogNotPinned(_) => "log_not_pinned",
            TrustProblem::PinnedLogAbsent(_) => "pinned_log_absent",
            TrustProblem::KeeperKeyMismatch(_) => "keeper_key_mismatch",
            TrustProblem::KeeperNotPinned(_) => "keeper_not_pinned",
            TrustProblem::PinnedKeeperAbsent(_) => "pinned_keeper_absent",
        }
    }
    /// The log or keeper name.
    pub fn name(&self) -> &str {
        match self {
            TrustProblem::LogKeyMismatch(n)
            | TrustProblem::LogNotPinned(n)
            | TrustProblem::PinnedLogAbsent(n)
            | TrustProblem::KeeperKeyMismatch(n)
            | TrustProblem::KeeperNotPinned(n)
            | TrustProblem::PinnedKeeperAbsent(n) => n,
        }
    }
    /// One line for humans.
    pub fn detail(&self) -> String {
        match self {
            TrustProblem::LogKeyMismatch(n) => {
                format!("the record's key for log {n} is not the pinned one")
            }
            TrustProblem::LogNotPinned(n) => {
                format!("the record names log {n}, which is not pinned")
            }
            TrustProblem::PinnedLogAbsent(n) => {
                format!("pinned log {n} is not among the record's logs")
            }
            TrustProblem::KeeperKeyMismatch(n) => {
                format!("the record's key for keeper {n} is not the pinned one")
            }
            TrustProblem::KeeperNotPinned(n) => {
                format!("the record names keeper {n}, which is not pinned")
            }
            TrustProblem::PinnedKeeperAbsent(n) => {
                format!("pinned keeper {n} is not among the record's keepers")
            }
        }
    }
}

/// Formats a C2SP verifier key (`name+keyid+base64(type || key)`).
pub fn vkey(name: &str, sig_type: u8, key: &VerifyingKey) -> String {
    let mut raw = vec![sig_type];
    raw.extend_from_slice(key.as_bytes());
    format!(
        "{name}+{}+{}",
        hex::encode(key_id(name, sig_type, key)),
        STANDARD.encode(raw)
    )
}

/// Parses a C2SP verifier key whose type is one of `types`.
pub fn parse_vkey(text: &str, types: &[u8]) -> Result<(String, VerifyingKey), String> {
    let mut parts = text.splitn(3, '+');
    let (Some(name), Some(id), Some(b64)) = (parts.next(), parts.next(), parts.next()) else {
        return Err("not a verifier key (want name+keyid+base64)".into());
    };
    check_name(name).map_err(|e| format!("key name {name:?}: {e}"))?;
    let id = hex::decode(id)
        .ok()
        .filter(|b| b.len() == 4)
        .ok_or("key id is not 8 hex digits")?;
    let raw = STANDARD.decode(b64).map_err(|_| "key is not base64")?;
    let [ty, key @ ..] = raw.as_slice() else {
        return Err("key is empty".into());
    };
    if !types.contains(ty) {
        return Err(format!("key type {ty:#04x} not accepted here"));
    }
    let key: [u8; 32] = key.try_into().map_err(|_| "key is not 32 bytes")?;
    let key = VerifyingKey::from_bytes(&key).map_err(|_| "not an Ed25519 public key")?;
    if key_id(name, *ty, &key)[..] != id[..] {
        return Err("key id does not match the name and key".into());
    }
    Ok((name.to_owned(), key))
}

impl TrustAnchors {
    /// Parses a trust file (format in the module doc).
    pub fn parse(text: &str) -> Result<Self, TrustError> {
        let mut logs = BTreeMap::new();
        let mut keepers = BTreeMap::new();
        let mut quorum = None;
        for (i, line) in text.lines().enumerate() {
            let err = |reason: String| TrustError {
                line: i + 1,
                reason,
            };
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let (kind, value) = line
                .split_once(char::is_whitespace)
                .map(|(k, v)| (k, v.trim()))
                .ok_or_else(|| err("want `log VKEY`, `keeper VKEY` or `quorum N`".into()))?;
            match kind {
                "log" => {
                    let (name, key) = parse_vkey(value, &[ED25519_NOTE_TYPE]).map_err(err)?;
                    if logs.insert(name.clone(), key).is_some() {
                        return Err(err(format!("log {name} pinned twice")));
                    }
                }
                "keeper" => {
                    let (name, key) = parse_vkey(value, &[COSIGNATURE_V1_TYPE, ED25519_NOTE_TYPE])
                        .map_err(err)?;
                    if keepers.insert(name.clone(), key).is_some() {
                        return Err(err(format!("keeper {name} pinned twice")));
                    }
                }
                "quorum" => {
                    let q: usize = value
                        .parse()
                        .map_err(|_| err(format!("quorum {value:?} is not a number")))?;
                    if quorum.replace((q, i + 1)).is_some() {
                        return Err(err("quorum given twice".into()));
                    }
                }
                other => return Err(err(format!("unknown entry kind {other:?}"))),
            }
        }
        if logs.is_empty() {
            return Err(TrustError {
                line: 0,
                reason: "no log pinned (want at least one `log VKEY` line)".into(),
            });
        }
        let quorum = match quorum {
            None => keepers.len(),
            Some((q, line)) if q > keepers.len() || (q == 0 && !keepers.is_empty()) => {
                return Err(TrustError {
                    line,
                    reason: format!(
                        "quorum {q} must lie between 1 and the {} pinned keepers",
                        keepers.len()
                    ),
                })
            }
            Some((q, _)) => q,
        };
        Ok(TrustAnchors {
            logs,
            keepers,
            quorum,
        })
    }

    /// Pinned logs in name order.
    pub fn logs(&self) -> impl Iterator<Item = (&String, &VerifyingKey)> {
        self.logs.iter()
    }
    /// Pinned keepers in name order.
    pub fn keepers(&self) -> impl Iterator<Item = (&String, &VerifyingKey)> {
        self.keepers.iter()
    }
    /// How many pinned keepers must co-sign every checkpoint.
    pub fn quorum(&self) -> usize {
        self.quorum
    }
    /// The pinned keeper names (the `required_keepers` of a verification policy).
    pub fn keeper_names(&self) -> Vec<String> {
        self.keepers.keys().cloned().collect()
    }

    /// Compares the record's own keys with the pins: the registry to verify with
    /// (the record's principals, the pinned logs and keepers) and every difference.
    pub fn apply(&self, record_keys: &KeyRegistry) -> (KeyRegistry, Vec<TrustProblem>) {
        let mut problems = Vec::new();
        let record_logs: BTreeMap<&String, &VerifyingKey> = record_keys.logs().collect();
        let record_keepers: BTreeMap<&String, &VerifyingKey> = record_keys.keepers().collect();
        compare(
            &self.logs,
            &record_logs,
            &mut problems,
            TrustProblem::LogKeyMismatch,
            TrustProblem::LogNotPinned,
            TrustProblem::PinnedLogAbsent,
        );
        compare(
            &self.keepers,
            &record_keepers,
            &mut problems,
            TrustProblem::KeeperKeyMismatch,
            TrustProblem::KeeperNotPinned,
            TrustProblem::PinnedKeeperAbsent,
        );
        let mut keys = KeyRegistry::new();
        for (id, k) in record_keys.principals() {
            keys.add_principal(id.clone(), *k);
        }
        for (n, k) in &self.logs {
            // Names were checked at parse time.
            let _ = keys.add_log(n, *k);
        }
        for (n, k) in &self.keepers {
            let _ = keys.add_keeper(n, *k);
        }
        problems.sort();
        (keys, problems)
    }
}

fn compare(
    pinned: &BTreeMap<String, VerifyingKey>,
    record: &BTreeMap<&String, &VerifyingKey>,
    problems: &mut Vec<TrustProblem>,
    mismatch: fn(String) -> TrustProblem,
    unpinned: fn(String) -> TrustProblem,
    absent: fn(String) -> TrustProblem,
) {
    for (name, key) in pinned {
        match record.get(name) {
            Some(k) if *k == key => {}
            Some(_) => problems.push(mismatch(name.clone())),
            None => problems.push(absent(name.clone())),
        }
    }
    for name in record.keys() {
        if !pinned.contains_key(*name) {
            problems.push(unpinned((*name).clone()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::derive_signing_key;

    fn file(quorum: Option<usize>) -> (String, KeyRegistry) {
        let log = derive_signing_key(1, "audita.example/log").verifying_key();
        let k1 = derive_signing_key(1, "k1.example/keeper").verifying_key();
        let k2 = derive_signing_key(1, "k2.example/keeper").verifying_key();
        let mut text = format!(
            "# pinned by the insurer\nlog {}\nkeeper {}\n\nkeeper   {}  # second\n",
            vkey("audita.example/log", ED25519_NOTE_TYPE, &log),
            vkey("k1.example/keeper", COSIGNATURE_V1_TYPE, &k1),
            vkey("k2.example/keeper", ED25519_NOTE_TYPE, &k2),
        );
        if let Some(q) = quorum {
            text.push_str(&format!("quorum {q}\n"));
        }
        let mut reg = KeyRegistry::new();
        reg.add_log("audita.example/log", log).unwrap();
        reg.add_keeper("k1.example/keeper", k1).unwrap();
        reg.add_keeper("k2.example/keeper", k2).unwrap();
        (text, reg)
    }

    #[test]
    fn parses_and_matches_the_record_it_pins() {
        let (text, reg) = file(Some(1));
        let t = TrustAnchors::parse(&text).unwrap();
        assert_eq!(t.quorum(), 1);
        assert_eq!(t.keeper_names().len(), 2);
        let (keys, problems) = t.apply(&reg);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(keys, reg);
        assert_eq!(TrustAnchors::parse(&file(None).0).unwrap().quorum(), 2);
    }

    #[test]
    fn every_difference_is_named() {
        let (text, _) = file(None);
        let t = TrustAnchors::parse(&text).unwrap();
        let mut reg = KeyRegistry::new();
        let other = derive_signing_key(2, "x").verifying_key();
        reg.add_log("audita.example/log", other).unwrap();
        reg.add_log("rogue.example/log", other).unwrap();
        reg.add_keeper("k1.example/keeper", other).unwrap();
        let (keys, problems) = t.apply(&reg);
        let codes: Vec<(&str, &str)> = problems.iter().map(|p| (p.code(), p.name())).collect();
        assert_eq!(
            codes,
            [
                ("log_key_mismatch", "audita.example/log"),
                ("log_not_pinned", "rogue.example/log"),
                ("keeper_key_mismatch", "k1.example/keeper"),
                ("pinned_keeper_absent", "k2.example/keeper"),
            ]
        );
        assert!(keys.log("rogue.example/log").is_none());
        assert_ne!(keys.log("audita.example/log"), Some(&other));
    }

    #[test]
    fn malformed_lines_are_one_line_errors() {
        let (text, _) = file(None);
        let log_line = text.lines().nth(1).unwrap().to_string();
        let bad = |t: &str| TrustAnchors::parse(t).unwrap_err().to_string();
        assert!(bad("").contains("no log pinned"));
        assert!(bad("witness x").starts_with("line 1:"));
        assert!(bad(&format!("{log_line}\nquorum 3")).contains("quorum 3"));
        assert!(bad(&format!("{log_line}\n{log_line}")).contains("twice"));
        // A wrong key id, and a keeper key offered as a log.
        let mut parts: Vec<&str> = log_line["log ".len()..].splitn(3, '+').collect();
        let wrong_id = "00000000".to_string();
        parts[1] = wrong_id.as_str();
        assert!(bad(&format!("log {}", parts.join("+"))).contains("key id"));
        let k = derive_signing_key(1, "k").verifying_key();
        assert!(bad(&format!("log {}", vkey("k", COSIGNATURE_V1_TYPE, &k))).contains("type"));
    }
}
