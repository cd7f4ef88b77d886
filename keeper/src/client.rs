//! The blocking witness client: what a log (the sealer) calls to obtain a keeper's
//! cosignature over a checkpoint (c2sp.org/tlog-witness `add-checkpoint`).
//!
//! Design constraints:
//! - One HTTP POST per call, plain HTTP (TLS, where needed, is terminated in front
//!   of a keeper), keep-alive reused by a [`WitnessClient`], every call bounded by
//!   its timeout (connect + send + receive), answers read up to 64 KiB.
//! - 200: the body must be note signature lines; [`WitnessClient::add_checkpoint`]
//!   returns them as they are. Checking them against the keeper's key is
//!   [`cosigned_by`] (lines of unknown keys are ignored, as the spec says).
//! - 409: the body must be the keeper's size with `Content-Type:
//!   text/x.tlog.size`: [`Outcome::Conflict`] (the caller retries with a proof from
//!   that size; [`WitnessClient::cosign`] does that once, and checks the
//!   cosignature). Every other answer is a [`ClientError`] that says whether a retry
//!   can help (transport errors, 408, 5xx) or not (400, 403, 404, 413, 422).

use std::time::Duration;

use audita_evidence::checkpoint::COSIGNATURE_V1_TYPE;
use audita_evidence::trust::parse_vkey;
use audita_evidence::{Cosignature, Hash, KeyRegistry, SignatureLine, SignedCheckpoint};
use thiserror::Error;

use crate::protocol::{format_request, parse_signature_lines, parse_size_body, SIZE_CONTENT_TYPE};

/// Largest answer body read.
const MAX_ANSWER: u64 = 64 * 1024;
/// Default per-call time bound.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// A successful exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// 200: the witness's signature lines (each with its `\n`).
    Cosigned(Vec<String>),
    /// 409: the witness's latest co-signed size differs from the old size sent
    /// (or the checkpoint conflicts with the one it co-signed at that size).
    Conflict(u64),
}

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ClientError {
    /// No answer: connect, send or receive failed or timed out. Transient.
    #[error("witness {url}: {reason}")]
    Transport {
        /// The endpoint.
        url: String,
        /// Why.
        reason: String,
    },
    /// An HTTP error status.
    #[error("witness {url} answered {status}: {body}")]
    Status {
        /// The endpoint.
        url: String,
        /// The status code.
        status: u16,
        /// The body's first line (at most 200 bytes).
        body: String,
    },
    /// A 200 or 409 whose body breaks the protocol. Permanent.
    #[error("witness {url}: malformed answer: {reason}")]
    Malformed {
        /// The endpoint.
        url: String,
        /// Why.
        reason: String,
    },
}

impl ClientError {
    /// Whether retrying the same request later may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            ClientError::Transport { .. } => true,
            ClientError::Status { status, .. } => *status == 408 || *status >= 500,
            ClientError::Malformed { .. } => false,
        }
    }
}

/// A reusable client for one witness.
#[derive(Debug, Clone)]
pub struct WitnessClient {
    agent: ureq::Agent,
    endpoint: String,
}

impl WitnessClient {
    /// A client for the witness whose submission prefix is `prefix` (e.g.
    /// `http://127.0.0.1:7380`), each call bounded by `timeout`.
    pub fn new(prefix: &str, timeout: Duration) -> Self {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .max_redirects(0)
            .build()
            .new_agent();
        Self {
            agent,
            endpoint: format!("{}/add-checkpoint", prefix.trim_end_matches('/')),
        }
    }

    /// The `add-checkpoint` URL.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Submits `note` with a consistency proof from `old_size`.
    pub fn add_checkpoint(
        &self,
        old_size: u64,
        proof: &[Hash],
        note: &[u8],
    ) -> Result<Outcome, ClientError> {
        let url = self.endpoint.clone();
        let body = format_request(old_size, proof, note);
        let mut resp = self
            .agent
            .post(&url)
            .header("content-type", "text/plain; charset=utf-8")
            .send(&body[..])
            .map_err(|e| ClientError::Transport {
                url: url.clone(),
                reason: e.to_string(),
            })?;
        let status = resp.status().as_u16();
        let content_type = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let bytes = resp
            .body_mut()
            .with_config()
            .limit(MAX_ANSWER)
            .read_to_vec()
            .map_err(|e| ClientError::Transport {
                url: url.clone(),
                reason: format!("reading the answer: {e}"),
            })?;
        let malformed = |reason: &str| ClientError::Malformed {
            url: url.clone(),
            reason: reason.to_owned(),
        };
        match status {
            200 => parse_signature_lines(&bytes)
                .map(Outcome::Cosigned)
                .ok_or_else(|| malformed("200 body is not note signature lines")),
            409 => {
                if content_type.split(';').next().map(str::trim) != Some(SIZE_CONTENT_TYPE) {
                    return Err(malformed("409 without Content-Type text/x.tlog.size"));
                }
                parse_size_body(&bytes)
                    .map(Outcome::Conflict)
                    .ok_or_else(|| malformed("409 body is not a size"))
            }
            _ => {
                let text = String::from_utf8_lossy(&bytes);
                let mut first: String = text.lines().next().unwrap_or("").to_owned();
                first.truncate(200);
                Err(ClientError::Status {
                    url,
                    status,
                    body: first,
                })
            }
        }
    }
}

/// A cosignature obtained by [`WitnessClient::cosign`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Witnessed {
    /// The verified cosignature (keeper name, timestamp).
    pub cosignature: Cosignature,
    /// Its signature line (with `\n`), to append to the checkpoint note.
    pub line: String,
    /// The witness's size now: the checkpoint's (the next call's known size).
    pub size: u64,
}

/// Why [`WitnessClient::cosign`] got no cosignature.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WitnessError {
    /// The call failed ([`ClientError::is_transient`] says whether to retry).
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The witness is at a size the caller cannot prove from (above the
    /// checkpoint: it co-signed a larger tree; or a second 409). Permanent for
    /// this checkpoint.
    #[error("witness is at size {witness_size}, no proof from there to {size}")]
    Conflict {
        /// The witness's latest co-signed size.
        witness_size: u64,
        /// The checkpoint's size.
        size: u64,
    },
    /// A 200 without a valid cosignature of this witness. Permanent.
    #[error(transparent)]
    Cosignature(#[from] CosignatureError),
}

impl WitnessError {
    /// Whether retrying later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, WitnessError::Client(e) if e.is_transient())
    }
}

impl WitnessClient {
    /// Obtains this witness's cosignature on `note` (what a log calls per
    /// witness and checkpoint): sends it with the proof from `known_size` (the
    /// witness's size as last seen, 0 if never), and on a 409 naming another size
    /// retries once with the proof from that size. `proof(old)` is the RFC 6962
    /// consistency proof from `old` to the note's size, `None` if `old` is above
    /// it. The answer's lines are checked against `vkey` (lines of other keys are
    /// ignored).
    pub fn cosign(
        &self,
        note: &SignedCheckpoint,
        known_size: u64,
        vkey: &str,
        proof: impl Fn(u64) -> Option<Vec<Hash>>,
    ) -> Result<Witnessed, WitnessError> {
        let size = note.checkpoint().size;
        let text = note.to_text();
        let mut old = known_size;
        for attempt in 0..2 {
            let path = proof(old).ok_or(WitnessError::Conflict {
                witness_size: old,
                size,
            })?;
            match self.add_checkpoint(old, &path, text.as_bytes())? {
                Outcome::Cosigned(lines) => {
                    let (cosignature, with) = cosigned_by(note, &lines, vkey)?;
                    let line = with
                        .to_text()
                        .trim_end_matches('\n')
                        .rsplit('\n')
                        .next()
                        .map(|l| format!("{l}\n"))
                        .unwrap_or_default();
                    return Ok(Witnessed {
                        cosignature,
                        line,
                        size,
                    });
                }
                Outcome::Conflict(n) if attempt == 0 && n != old && n <= size => old = n,
                Outcome::Conflict(n) => {
                    return Err(WitnessError::Conflict {
                        witness_size: n,
                        size,
                    })
                }
            }
        }
        Err(WitnessError::Conflict {
            witness_size: old,
            size,
        })
    }
}

/// One call with a fresh client ([`WitnessClient`] reuses connections).
pub fn add_checkpoint(
    prefix: &str,
    old_size: u64,
    proof: &[Hash],
    note: &[u8],
    timeout: Duration,
) -> Result<Outcome, ClientError> {
    WitnessClient::new(prefix, timeout).add_checkpoint(old_size, proof, note)
}

/// Why returned cosignature lines are not a valid cosignature of the keeper.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CosignatureError {
    /// The keeper's verifier key does not parse.
    #[error("keeper key: {0}")]
    BadKey(String),
    /// The note with the lines appended does not parse.
    #[error("note with the returned lines does not parse: {0}")]
    Malformed(String),
    /// No line is a valid cosignature of the keeper over this checkpoint.
    #[error("no valid cosignature/v1 of {0} among the returned lines")]
    Missing(String),
}

/// Checks that `lines` (an answer to `note`) hold a valid `cosignature/v1` of the
/// keeper with verifier key `keeper_vkey` (type 0x04); returns it and the note
/// with only that line appended. Lines of other keys are ignored.
pub fn cosigned_by(
    note: &SignedCheckpoint,
    lines: &[String],
    keeper_vkey: &str,
) -> Result<(Cosignature, SignedCheckpoint), CosignatureError> {
    let (name, key) =
        parse_vkey(keeper_vkey, &[COSIGNATURE_V1_TYPE]).map_err(CosignatureError::BadKey)?;
    let mut keys = KeyRegistry::new();
    keys.add_keeper(&name, key)
        .map_err(|e| CosignatureError::BadKey(e.to_string()))?;
    let base = note.to_text();
    for line in lines {
        let Ok(with) = SignedCheckpoint::parse(format!("{base}{line}").as_bytes()) else {
            continue;
        };
        if let Some(SignatureLine::Cosigned(c)) = with.classify(&keys).last() {
            if c.keeper == name {
                return Ok((c.clone(), with));
            }
        }
    }
    if lines.is_empty() {
        return Err(CosignatureError::Malformed("no lines".into()));
    }
    Err(CosignatureError::Missing(name))
}
