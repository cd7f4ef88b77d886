//! Equivocation evidence: checkpoints the log signed that the keeper refused
//! because they conflict with what it co-signed, kept on disk and exportable.
//!
//! Design constraints:
//! - One JSON file per conflict under `<state>/evidence/<id>.json`, the id being
//!   the first 16 bytes (hex) of `SHA-256(kind || 0 || co-signed body || 0 ||
//!   refused body)`, so a conflict resubmitted a thousand times is one file. At most
//!   `Limits::max_evidence` files are kept (a log holder can sign unboundedly many
//!   conflicting notes); past that, conflicts are still refused, and logged, but not
//!   stored. A file is bounded by two request bodies.
//! - The format, `audita.keeper-evidence/v1` ([`ConflictRecord`]), JSON object:
//!   ```text
//!   format         "audita.keeper-evidence/v1"
//!   kind           "equivocation" | "inconsistent"
//!   origin         the log's origin
//!   keeper         the keeper's note key name
//!   cosigned       the checkpoint note the keeper had co-signed (text)
//!   refused        the refused checkpoint note, as submitted (text)
//!   old_size       the request's old size
//!   proof          the request's consistency proof, base64 hashes
//!   received_unix  POSIX seconds when it was refused
//!   ```
//! - Checking needs only the log's public key ([`ConflictRecord::check`]):
//!   * `equivocation`: both notes carry a valid log signature, same origin and
//!     size, different roots. Conclusive: the log showed two histories
//!     (`audita_evidence::Equivocation`).
//!   * `inconsistent`: both notes carry a valid log signature, the refused one is
//!     larger, and the submitted proof does not prove it extends the co-signed one.
//!     A fork unless someone produces a valid RFC 9162 consistency proof between the
//!     two; [`ConflictRecord::cleared_by`] checks such a proof.
//! - Standard libraries suffice: `keeper/interop/verify -evidence FILE` checks a
//!   record with `golang.org/x/mod/sumdb/{note,tlog}` only.

use std::path::Path;

use audita_evidence::{
    ConsistencyProof, Equivocation, Hash, KeyRegistry, SignedCheckpoint, VerifyingKey,
};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use thiserror::Error;

use crate::state::{read_bounded, write_atomic, StateError};

/// The format tag of an evidence file.
pub const EVIDENCE_FORMAT: &str = "audita.keeper-evidence/v1";
/// Largest evidence file read back.
const MAX_EVIDENCE_FILE: u64 = 1 << 20;

/// What kind of conflict a record proves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConflictKind {
    /// Same size, other root.
    Equivocation,
    /// Larger size, no valid consistency proof from the co-signed checkpoint.
    Inconsistent,
}

/// One refused conflicting checkpoint, with what it conflicts with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConflictRecord {
    /// Always [`EVIDENCE_FORMAT`].
    pub format: String,
    /// The conflict's kind.
    pub kind: ConflictKind,
    /// The log's origin.
    pub origin: String,
    /// The keeper that refused.
    pub keeper: String,
    /// The note the keeper had co-signed.
    pub cosigned: String,
    /// The refused note.
    pub refused: String,
    /// The request's old size.
    pub old_size: u64,
    /// The request's proof (base64 hashes).
    pub proof: Vec<String>,
    /// When it was refused (POSIX seconds).
    pub received_unix: u64,
}

/// What a checked record establishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// Conclusive: two log-signed checkpoints of one size with different roots.
    Equivocation(Box<Equivocation>),
    /// Both log-signed, and the log's proof does not connect them.
    Inconsistent {
        /// The co-signed checkpoint.
        cosigned: Box<SignedCheckpoint>,
        /// The refused, larger one.
        refused: Box<SignedCheckpoint>,
    },
}

/// Why a record does not check. Permanent.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EvidenceError {
    /// Not the documented format.
    #[error("not {EVIDENCE_FORMAT}: {0}")]
    Format(String),
    /// A note is malformed or lacks a valid signature of the log.
    #[error("{which} note: {reason}")]
    Note {
        /// `cosigned` or `refused`.
        which: &'static str,
        /// Why.
        reason: String,
    },
    /// The notes do not conflict the way the record says.
    #[error("no conflict: {0}")]
    NoConflict(&'static str),
}

fn proof_hashes(proof: &[String]) -> Option<Vec<Hash>> {
    proof
        .iter()
        .map(|p| STANDARD.decode(p).ok()?.try_into().ok())
        .collect()
}

impl ConflictRecord {
    /// The record's file id.
    pub fn id(&self) -> String {
        let mut h = Sha256::new();
        h.update(match self.kind {
            ConflictKind::Equivocation => b"equivocation".as_slice(),
            ConflictKind::Inconsistent => b"inconsistent".as_slice(),
        });
        for note in [&self.cosigned, &self.refused] {
            h.update([0]);
            let body = note.split_once("\n\n").map_or(note.as_str(), |(b, _)| b);
            h.update(body.as_bytes());
        }
        hex::encode(&h.finalize()[..16])
    }

    /// Checks the record against the log's public key (module doc).
    pub fn check(&self, log_key: &VerifyingKey) -> Result<Finding, EvidenceError> {
        if self.format != EVIDENCE_FORMAT {
            return Err(EvidenceError::Format(format!(
                "format is {:?}",
                self.format
            )));
        }
        let mut keys = KeyRegistry::new();
        keys.add_log(&self.origin, *log_key)
            .map_err(|e| EvidenceError::Format(format!("origin: {e}")))?;
        let note = |which: &'static str, text: &str| {
            let n = SignedCheckpoint::parse(text.as_bytes()).map_err(|e| EvidenceError::Note {
                which,
                reason: e.to_string(),
            })?;
            n.verify_log(&keys).map_err(|e| EvidenceError::Note {
                which,
                reason: e.to_string(),
            })?;
            Ok::<_, EvidenceError>(n)
        };
        let cosigned = note("cosigned", &self.cosigned)?;
        let refused = note("refused", &self.refused)?;
        let (a, b) = (cosigned.checkpoint(), refused.checkpoint());
        match self.kind {
            ConflictKind::Equivocation => Equivocation::detect(&cosigned, &refused, &keys)
                .map(|e| Finding::Equivocation(Box::new(e)))
                .ok_or(EvidenceError::NoConflict(
                    "not two checkpoints of one size with different roots",
                )),
            ConflictKind::Inconsistent => {
                if a.origin != b.origin || b.size <= a.size {
                    return Err(EvidenceError::NoConflict(
                        "refused checkpoint is not a larger one of the same log",
                    ));
                }
                let path = proof_hashes(&self.proof)
                    .ok_or(EvidenceError::Format("proof line is not a hash".into()))?;
                let proof = ConsistencyProof {
                    old_size: a.size,
                    size: b.size,
                    path,
                };
                if proof.verify(&a.root, &b.root).is_ok() {
                    return Err(EvidenceError::NoConflict(
                        "the submitted proof is a valid consistency proof",
                    ));
                }
                Ok(Finding::Inconsistent {
                    cosigned: Box::new(cosigned),
                    refused: Box::new(refused),
                })
            }
        }
    }

    /// Whether `path` is a valid consistency proof from the co-signed checkpoint to
    /// the refused one (which clears an `inconsistent` record: no fork).
    pub fn cleared_by(&self, path: &[Hash]) -> bool {
        let (Ok(a), Ok(b)) = (
            SignedCheckpoint::parse(self.cosigned.as_bytes()),
            SignedCheckpoint::parse(self.refused.as_bytes()),
        ) else {
            return false;
        };
        let (a, b) = (a.checkpoint(), b.checkpoint());
        ConsistencyProof {
            old_size: a.size,
            size: b.size,
            path: path.to_vec(),
        }
        .verify(&a.root, &b.root)
        .is_ok()
    }
}

/// Writes a record unless it is already kept or `max` records are; returns
/// whether it is kept now.
pub(crate) fn store(dir: &Path, record: &ConflictRecord, max: usize) -> Result<bool, StateError> {
    let path = dir.join(format!("{}.json", record.id()));
    if path.exists() {
        return Ok(true);
    }
    if count(dir)? >= max {
        return Ok(false);
    }
    let json = serde_json::to_vec_pretty(record).map_err(|e| StateError::Io {
        path: path.clone(),
        source: std::io::Error::other(e),
    })?;
    write_atomic(&path, &json, None)?;
    Ok(true)
}

fn json_files(dir: &Path) -> Result<Vec<std::path::PathBuf>, StateError> {
    let io = |source| StateError::Io {
        path: dir.to_owned(),
        source,
    };
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let p = entry.map_err(io)?.path();
        if p.extension().is_some_and(|e| e == "json") {
            out.push(p);
        }
    }
    out.sort();
    Ok(out)
}

fn count(dir: &Path) -> Result<usize, StateError> {
    Ok(json_files(dir)?.len())
}

/// Why the evidence of a state directory could not be exported.
#[derive(Debug, Error)]
pub enum ExportError {
    /// A file could not be read.
    #[error(transparent)]
    State(#[from] StateError),
    /// A file is not a record.
    #[error("{path}: not {EVIDENCE_FORMAT}: {reason}")]
    Malformed {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        reason: String,
    },
}

/// Every conflict record kept in the state directory `state_dir`, in id order.
/// Each one is then checked offline with [`ConflictRecord::check`].
pub fn evidence(state_dir: &Path) -> Result<Vec<ConflictRecord>, ExportError> {
    let dir = state_dir.join("evidence");
    if !dir.exists() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for path in json_files(&dir)? {
        let bytes = read_bounded(&path, MAX_EVIDENCE_FILE)?;
        let record: ConflictRecord =
            serde_json::from_slice(&bytes).map_err(|e| ExportError::Malformed {
                path: path.clone(),
                reason: e.to_string(),
            })?;
        out.push(record);
    }
    Ok(out)
}
