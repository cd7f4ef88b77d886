//! Checkpoints as C2SP signed notes, keeper co-signatures and equivocation evidence.
//!
//! Design constraints:
//! - A checkpoint note (c2sp.org/tlog-checkpoint, c2sp.org/signed-note) is
//!   ```text
//!   <origin>\n<tree size, decimal>\n<base64 root hash>\n
//!   \n
//!   — <key name> <base64(key id[4] || signature)>\n        (one line per signature)
//!   ```
//!   with no extension lines. The log signs the body bytes with Ed25519 under the
//!   key name equal to the origin; its key id is
//!   `SHA-256(name || 0x0A || 0x01 || pubkey)[:4]`.
//! - Keeper co-signatures follow c2sp.org/tlog-cosignature (`cosignature/v1`): key id
//!   `SHA-256(name || 0x0A || 0x04 || pubkey)[:4]`, signature bytes
//!   `timestamp_be64 || Ed25519(cosignature/v1\ntime <ts>\n || body)`.
//! - Parsing is strict and total: UTF-8, every line `\n`-terminated, decimal size
//!   without leading zeros, canonical padded base64; any other text is an error.
//!   Verification reads the stored body bytes, never a re-rendering.
//! - Two checkpoints that both carry a valid log signature, share origin and size
//!   and differ in root are an [`Equivocation`]: self-contained evidence that any
//!   third party can re-verify with the log's public key.

use crate::sig;
use crate::{SigningKey, VerifyingKey};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use sha2::{Digest as _, Sha256};

use crate::envelope::Hash;
use crate::error::NoteError;
use crate::principal::{check_name, KeyRegistry};

const SIG_PREFIX: &str = "\u{2014} ";
/// Signature type byte of plain Ed25519 note signatures.
pub const ED25519_NOTE_TYPE: u8 = 0x01;
/// Signature type byte of Ed25519 `cosignature/v1` signatures.
pub const COSIGNATURE_V1_TYPE: u8 = 0x04;

/// The C2SP key id: `SHA-256(name || "\n" || type || pubkey)[:4]`.
pub fn key_id(name: &str, sig_type: u8, key: &VerifyingKey) -> [u8; 4] {
    let mut h = Sha256::new();
    h.update(name.as_bytes());
    h.update([0x0a, sig_type]);
    h.update(key.as_bytes());
    let d = h.finalize();
    [d[0], d[1], d[2], d[3]]
}

/// The signed statement of a log: origin, tree size, root.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Checkpoint {
    /// Log origin (also the log's key name).
    pub origin: String,
    /// Number of leaves.
    pub size: u64,
    /// RFC 9162 root hash.
    pub root: Hash,
}

impl Checkpoint {
    /// The note body text.
    pub fn body(&self) -> String {
        format!(
            "{}\n{}\n{}\n",
            self.origin,
            self.size,
            STANDARD.encode(self.root)
        )
    }
    fn parse_body(body: &str) -> Result<Self, NoteError> {
        let lines: Vec<&str> = body.strip_suffix('\n').unwrap_or("").split('\n').collect();
        if lines.len() != 3 {
            return Err(NoteError::BadCheckpoint(
                "expected exactly origin, size and root lines",
            ));
        }
        let origin = lines[0];
        check_name(origin).map_err(|_| NoteError::BadCheckpoint("origin is not a valid name"))?;
        let size_text = lines[1];
        if size_text.is_empty()
            || !size_text.bytes().all(|b| b.is_ascii_digit())
            || (size_text.len() > 1 && size_text.starts_with('0'))
        {
            return Err(NoteError::BadCheckpoint("size is not a canonical decimal"));
        }
        let size: u64 = size_text
            .parse()
            .map_err(|_| NoteError::BadCheckpoint("size out of range"))?;
        let root_bytes = STANDARD
            .decode(lines[2])
            .map_err(|_| NoteError::BadCheckpoint("root is not base64"))?;
        let root: Hash = root_bytes
            .try_into()
            .map_err(|_| NoteError::BadCheckpoint("root is not 32 bytes"))?;
        if STANDARD.encode(root) != lines[2] {
            return Err(NoteError::BadCheckpoint("root base64 is not canonical"));
        }
        Ok(Self {
            origin: origin.to_owned(),
            size,
            root,
        })
    }
}

/// One signature line of a note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoteSignature {
    /// Key name.
    pub name: String,
    /// 4-byte key id.
    pub key_id: [u8; 4],
    /// Signature bytes after the key id (64 for a log signature, 72 for a cosignature).
    pub sig: Vec<u8>,
}

impl NoteSignature {
    fn line(&self) -> String {
        let mut raw = self.key_id.to_vec();
        raw.extend_from_slice(&self.sig);
        format!("{SIG_PREFIX}{} {}\n", self.name, STANDARD.encode(raw))
    }
}

/// A keeper's verified co-signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cosignature {
    /// Keeper name.
    pub keeper: String,
    /// POSIX-style timestamp the keeper attached (caller-supplied).
    pub timestamp: u64,
}

/// What a signature line of a checkpoint turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignatureLine {
    /// The log's own valid signature.
    Log,
    /// A registered keeper's valid co-signature.
    Cosigned(Cosignature),
    /// A line that names no registered key (or whose key id does not match one).
    Unknown {
        /// Name on the line.
        name: String,
    },
    /// A line that matches a registered key but whose signature does not verify.
    Invalid {
        /// Name on the line.
        name: String,
    },
}

/// A checkpoint note exactly as stored: the text plus its parsed parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedCheckpoint {
    checkpoint: Checkpoint,
    body: String,
    signatures: Vec<NoteSignature>,
}

fn cosigned_message(body: &str, timestamp: u64) -> Vec<u8> {
    format!("cosignature/v1\ntime {timestamp}\n{body}").into_bytes()
}

impl SignedCheckpoint {
    /// The log signs `checkpoint` (its key name is the origin).
    pub fn sign(checkpoint: Checkpoint, log_key: &SigningKey) -> Self {
        let body = checkpoint.body();
        let sig = sig::sign(log_key, body.as_bytes()).to_vec();
        let name = checkpoint.origin.clone();
        let key_id = key_id(&name, ED25519_NOTE_TYPE, &log_key.verifying_key());
        Self {
            checkpoint,
            body,
            signatures: vec![NoteSignature { name, key_id, sig }],
        }
    }

    /// A keeper appends its `cosignature/v1` line. The caller (the keeper) is
    /// responsible for having checked consistency with its previous view.
    pub fn cosign(&mut self, keeper: &str, key: &SigningKey, timestamp: u64) {
        let msg = cosigned_message(&self.body, timestamp);
        let mut sig = timestamp.to_be_bytes().to_vec();
        sig.extend_from_slice(&sig::sign(key, &msg));
        let key_id = key_id(keeper, COSIGNATURE_V1_TYPE, &key.verifying_key());
        self.signatures.push(NoteSignature {
            name: keeper.to_owned(),
            key_id,
            sig,
        });
    }

    /// This note with `lines` appended: signature lines (`— <name> <base64>\n` each)
    /// a witness returned. Only the form is checked here; what each line proves is
    /// [`Self::classify`]'s to say.
    pub fn with_signature_lines(&self, lines: &str) -> Result<Self, NoteError> {
        let mut text = self.to_text();
        text.push_str(lines);
        Self::parse(text.as_bytes())
    }

    /// The note text.
    pub fn to_text(&self) -> String {
        let mut out = self.body.clone();
        out.push('\n');
        for s in &self.signatures {
            out.push_str(&s.line());
        }
        out
    }

    /// Parses a note (strict, total).
    pub fn parse(bytes: &[u8]) -> Result<Self, NoteError> {
        let text = std::str::from_utf8(bytes).map_err(|_| NoteError::Malformed("not UTF-8"))?;
        let split = text
            .find("\n\n")
            .ok_or(NoteError::Malformed("no blank line before signatures"))?;
        let body = &text[..split + 1];
        let sigs = &text[split + 2..];
        if !sigs.ends_with('\n') {
            return Err(NoteError::Malformed(
                "signature block not newline-terminated",
            ));
        }
        let checkpoint = Checkpoint::parse_body(body)?;
        let mut signatures = Vec::new();
        for line in sigs[..sigs.len() - 1].split('\n') {
            let rest = line.strip_prefix(SIG_PREFIX).ok_or(NoteError::Malformed(
                "signature line does not start with an em dash",
            ))?;
            let (name, b64) = rest
                .split_once(' ')
                .ok_or(NoteError::Malformed("signature line lacks a space"))?;
            if check_name(name).is_err() {
                return Err(NoteError::Malformed("bad key name"));
            }
            let raw = STANDARD
                .decode(b64)
                .map_err(|_| NoteError::Malformed("signature is not base64"))?;
            if raw.len() < 5 || STANDARD.encode(&raw) != b64 {
                return Err(NoteError::Malformed("signature too short or non-canonical"));
            }
            signatures.push(NoteSignature {
                name: name.to_owned(),
                key_id: [raw[0], raw[1], raw[2], raw[3]],
                sig: raw[4..].to_vec(),
            });
        }
        if signatures.is_empty() {
            return Err(NoteError::Malformed("no signature lines"));
        }
        Ok(Self {
            checkpoint,
            body: body.to_owned(),
            signatures,
        })
    }

    /// The signed statement.
    pub fn checkpoint(&self) -> &Checkpoint {
        &self.checkpoint
    }
    /// Signature lines in stored order.
    pub fn signatures(&self) -> &[NoteSignature] {
        &self.signatures
    }

    /// Checks the log's signature (key name = origin, key from `keys.log`).
    pub fn verify_log(&self, keys: &KeyRegistry) -> Result<(), NoteError> {
        let origin = &self.checkpoint.origin;
        let key = keys
            .log(origin)
            .ok_or_else(|| NoteError::NoLogSignature(origin.clone()))?;
        let id = key_id(origin, ED25519_NOTE_TYPE, key);
        let ok = self.signatures.iter().any(|s| {
            s.name == *origin && s.key_id == id && verify_raw(key, self.body.as_bytes(), &s.sig)
        });
        if ok {
            Ok(())
        } else {
            Err(NoteError::NoLogSignature(origin.clone()))
        }
    }

    /// Classifies every signature line against the registry.
    pub fn classify(&self, keys: &KeyRegistry) -> Vec<SignatureLine> {
        let origin = &self.checkpoint.origin;
        self.signatures
            .iter()
            .map(|s| {
                if let Some(key) = keys.log(&s.name).filter(|_| s.name == *origin) {
                    if s.key_id != key_id(&s.name, ED25519_NOTE_TYPE, key) {
                        return SignatureLine::Unknown {
                            name: s.name.clone(),
                        };
                    }
                    return if verify_raw(key, self.body.as_bytes(), &s.sig) {
                        SignatureLine::Log
                    } else {
                        SignatureLine::Invalid {
                            name: s.name.clone(),
                        }
                    };
                }
                let Some(key) = keys.keeper(&s.name) else {
                    return SignatureLine::Unknown {
                        name: s.name.clone(),
                    };
                };
                if s.key_id != key_id(&s.name, COSIGNATURE_V1_TYPE, key) {
                    return SignatureLine::Unknown {
                        name: s.name.clone(),
                    };
                }
                if s.sig.len() != 72 {
                    return SignatureLine::Invalid {
                        name: s.name.clone(),
                    };
                }
                let mut ts = [0u8; 8];
                ts.copy_from_slice(&s.sig[..8]);
                let timestamp = u64::from_be_bytes(ts);
                if timestamp > i64::MAX as u64 {
                    return SignatureLine::Invalid {
                        name: s.name.clone(),
                    };
                }
                let msg = cosigned_message(&self.body, timestamp);
                if verify_raw(key, &msg, &s.sig[8..]) {
                    SignatureLine::Cosigned(Cosignature {
                        keeper: s.name.clone(),
                        timestamp,
                    })
                } else {
                    SignatureLine::Invalid {
                        name: s.name.clone(),
                    }
                }
            })
            .collect()
    }

    /// The keepers whose co-signatures verify.
    pub fn cosignatures(&self, keys: &KeyRegistry) -> Vec<Cosignature> {
        self.classify(keys)
            .into_iter()
            .filter_map(|l| match l {
                SignatureLine::Cosigned(c) => Some(c),
                _ => None,
            })
            .collect()
    }
}

fn verify_raw(key: &VerifyingKey, msg: &[u8], sig: &[u8]) -> bool {
    let Ok(bytes) = <[u8; 64]>::try_from(sig) else {
        return false;
    };
    sig::verify(key, msg, &bytes)
}

/// Two validly log-signed checkpoints with the same origin and size but different
/// roots: proof that the log showed different histories to different parties.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Equivocation {
    /// One checkpoint.
    pub first: SignedCheckpoint,
    /// The conflicting one.
    pub second: SignedCheckpoint,
}

impl Equivocation {
    /// Builds the evidence if (and only if) the two checkpoints equivocate.
    pub fn detect(a: &SignedCheckpoint, b: &SignedCheckpoint, keys: &KeyRegistry) -> Option<Self> {
        let (x, y) = (a.checkpoint(), b.checkpoint());
        if x.origin != y.origin || x.size != y.size || x.root == y.root {
            return None;
        }
        if a.verify_log(keys).is_err() || b.verify_log(keys).is_err() {
            return None;
        }
        let (first, second) = if x.root < y.root {
            (a.clone(), b.clone())
        } else {
            (b.clone(), a.clone())
        };
        Some(Self { first, second })
    }
    /// Re-checks the evidence against the log's public key.
    pub fn verify(&self, keys: &KeyRegistry) -> bool {
        Self::detect(&self.first, &self.second, keys).is_some()
    }
}

/// Equivocations among `checkpoints`: for each origin and size signed with k
/// distinct roots, the first root (in root order) paired with each of the k - 1 others.
pub fn find_equivocations(
    checkpoints: &[SignedCheckpoint],
    keys: &KeyRegistry,
) -> Vec<Equivocation> {
    let valid: Vec<&SignedCheckpoint> = checkpoints
        .iter()
        .filter(|c| c.verify_log(keys).is_ok())
        .collect();
    let mut by_key: std::collections::BTreeMap<
        (&str, u64),
        std::collections::BTreeMap<Hash, &SignedCheckpoint>,
    > = Default::default();
    for c in valid {
        by_key
            .entry((c.checkpoint().origin.as_str(), c.checkpoint().size))
            .or_default()
            .entry(c.checkpoint().root)
            .or_insert(c);
    }
    // The first root of each (origin, size) against every other one: k roots give
    // k - 1 pieces of evidence (linear, however many notes a log key holder signs),
    // and together they prove every pair.
    let mut out = Vec::new();
    for roots in by_key.values() {
        let mut list = roots.values();
        let Some(first) = list.next() else { continue };
        for other in list {
            if let Some(e) = Equivocation::detect(first, other, keys) {
                out.push(e);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::derive_signing_key;

    fn setup() -> (KeyRegistry, SigningKey, SigningKey) {
        let log = derive_signing_key(1, "audita.example/log");
        let keeper = derive_signing_key(1, "insurer.example/keeper");
        let mut keys = KeyRegistry::new();
        keys.add_log("audita.example/log", log.verifying_key())
            .unwrap();
        keys.add_keeper("insurer.example/keeper", keeper.verifying_key())
            .unwrap();
        (keys, log, keeper)
    }

    #[test]
    fn roundtrip_sign_cosign_parse_verify() {
        let (keys, log, keeper) = setup();
        let cp = Checkpoint {
            origin: "audita.example/log".into(),
            size: 7,
            root: [9; 32],
        };
        let mut sc = SignedCheckpoint::sign(cp, &log);
        sc.cosign("insurer.example/keeper", &keeper, 1_700_000_000);
        let text = sc.to_text();
        let parsed = SignedCheckpoint::parse(text.as_bytes()).unwrap();
        assert_eq!(parsed, sc);
        parsed.verify_log(&keys).unwrap();
        assert_eq!(
            parsed.classify(&keys),
            vec![
                SignatureLine::Log,
                SignatureLine::Cosigned(Cosignature {
                    keeper: "insurer.example/keeper".into(),
                    timestamp: 1_700_000_000
                })
            ]
        );
    }

    #[test]
    fn equivocation_is_detected_only_for_same_size_different_root() {
        let (keys, log, _) = setup();
        let a = SignedCheckpoint::sign(
            Checkpoint {
                origin: "audita.example/log".into(),
                size: 4,
                root: [1; 32],
            },
            &log,
        );
        let b = SignedCheckpoint::sign(
            Checkpoint {
                origin: "audita.example/log".into(),
                size: 4,
                root: [2; 32],
            },
            &log,
        );
        let c = SignedCheckpoint::sign(
            Checkpoint {
                origin: "audita.example/log".into(),
                size: 5,
                root: [2; 32],
            },
            &log,
        );
        let e = find_equivocations(&[a.clone(), b.clone(), c], &keys);
        assert_eq!(e.len(), 1);
        assert!(e[0].verify(&keys));
        let forged = derive_signing_key(2, "audita.example/log");
        let d = SignedCheckpoint::sign(
            Checkpoint {
                origin: "audita.example/log".into(),
                size: 4,
                root: [3; 32],
            },
            &forged,
        );
        assert!(Equivocation::detect(&a, &d, &keys).is_none());
    }
}
