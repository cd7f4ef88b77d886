//! Durable keeper state: per followed log, the latest checkpoint the keeper
//! co-signed, and the atomic file write everything on disk goes through.
//!
//! Design constraints:
//! - Layout under the state directory:
//!   ```text
//!   lock                                               flock(2)ed by the serving keeper
//!   logs/<hex SHA-256(origin), 32 chars>.checkpoint   the latest co-signed note
//!   evidence/<hex id>.json                             refused conflicts (evidence.rs)
//!   ```
//!   A `.checkpoint` file holds the checkpoint note exactly as the keeper co-signed
//!   it: the log's signature lines as received plus the keeper's own
//!   `cosignature/v1` line, so the state file is itself a co-signed checkpoint.
//! - Every write is atomic and durable (`audita_files::write_atomic`): write
//!   `.<file>.tmp`, fsync it, rename over `<file>`, fsync the directory. A crash at
//!   any point leaves the old file or the new one, never a mix; the server answers
//!   200 only after the fsync of the directory returned.
//! - Loading fails closed: a state file that does not parse or names another
//!   origin stops the keeper from starting (resetting a log to size 0 would let it
//!   co-sign a fork). Leftover `.tmp` files are ignored.
//! - One keeper per state directory: [`StateDir::open`] takes an exclusive
//!   `flock` on `lock` for the keeper's lifetime (the kernel drops it when the
//!   process dies, `kill -9` included) and a second keeper on the same directory,
//!   in this process or another, is refused ([`StateError::Locked`]): two keepers
//!   sharing one state could each co-sign a different branch. Readers that only
//!   look ([`StateDir::inspect`]) take no lock.

use std::path::{Path, PathBuf};

use audita_evidence::SignedCheckpoint;
use sha2::{Digest as _, Sha256};
use thiserror::Error;

/// A state file is one checkpoint note: anything larger is not one.
const MAX_STATE_FILE: u64 = 1 << 20;

/// Why the state could not be read or written.
#[derive(Debug, Error)]
pub enum StateError {
    /// An I/O failure (transient unless the disk is gone).
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Another keeper serves this state directory.
    #[error("{0}: another keeper holds this state directory")]
    Locked(PathBuf),
    /// A state file is not a checkpoint of its log (permanent: an operator must
    /// look; the keeper refuses to start rather than forget what it co-signed).
    #[error("{path}: state file is not a checkpoint of log {origin}: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The log.
        origin: String,
        /// Why.
        reason: String,
    },
}

impl StateError {
    /// Whether retrying may help.
    pub fn is_transient(&self) -> bool {
        matches!(self, StateError::Io { .. })
    }
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StateError + '_ {
    move |source| StateError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Writes `bytes` to `path` atomically and durably ([`audita_files::write_atomic`]:
/// temp file, fsync, rename, fsync of the directory). `hook` is called after the
/// temp file is synced and after the rename (fault injection in tests; `None` in
/// production).
pub fn write_atomic(
    path: &Path,
    bytes: &[u8],
    hook: Option<&crate::fault::FaultHook>,
) -> Result<(), StateError> {
    audita_files::write_atomic_observed(path, bytes, |step| {
        if let Some(h) = hook {
            h(match step {
                audita_files::WriteStep::TempSynced => crate::fault::FaultPoint::AfterTempWrite,
                audita_files::WriteStep::Renamed => crate::fault::FaultPoint::AfterRename,
            });
        }
    })
    .map_err(|e| StateError::Io {
        path: e.path,
        source: e.source,
    })
}

/// Reads a file of at most `max` bytes ([`audita_files::read_bounded`]).
pub fn read_bounded(path: &Path, max: u64) -> Result<Vec<u8>, StateError> {
    audita_files::read_bounded(path, max).map_err(|e| StateError::Io {
        path: path.to_owned(),
        source: match e {
            audita_files::ReadBoundedError::Io(source) => source,
            too_large => std::io::Error::other(too_large.to_string()),
        },
    })
}

/// The state directory.
#[derive(Debug, Clone)]
pub struct StateDir {
    root: PathBuf,
    /// The flock'ed lock file (serving keepers only); released on drop.
    _lock: Option<std::sync::Arc<std::fs::File>>,
}

impl StateDir {
    /// Opens (creating if needed) a state directory to serve from, locked
    /// against any other keeper.
    pub fn open(root: &Path) -> Result<Self, StateError> {
        for sub in ["logs", "evidence"] {
            let p = root.join(sub);
            std::fs::create_dir_all(&p).map_err(io_err(&p))?;
        }
        let path = root.join("lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io_err(&path))?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).map_err(
            |e| {
                if e == rustix::io::Errno::WOULDBLOCK {
                    StateError::Locked(root.to_owned())
                } else {
                    StateError::Io {
                        path: path.clone(),
                        source: e.into(),
                    }
                }
            },
        )?;
        Ok(Self {
            root: root.to_owned(),
            _lock: Some(std::sync::Arc::new(file)),
        })
    }

    /// A state directory to read only (no lock taken, nothing created): the
    /// state of a running keeper, or of a stopped one.
    pub fn inspect(root: &Path) -> Self {
        Self {
            root: root.to_owned(),
            _lock: None,
        }
    }

    /// The directory's root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where a log's latest co-signed checkpoint lives.
    pub fn log_path(&self, origin: &str) -> PathBuf {
        let digest = Sha256::digest(origin.as_bytes());
        self.root
            .join("logs")
            .join(format!("{}.checkpoint", &hex::encode(digest)[..32]))
    }

    /// The evidence folder.
    pub fn evidence_dir(&self) -> PathBuf {
        self.root.join("evidence")
    }

    /// The latest checkpoint co-signed for `origin`, if any.
    pub fn load(&self, origin: &str) -> Result<Option<SignedCheckpoint>, StateError> {
        let path = self.log_path(origin);
        if !path.exists() {
            return Ok(None);
        }
        let bytes = read_bounded(&path, MAX_STATE_FILE)?;
        let corrupt = |reason: String| StateError::Corrupt {
            path: path.clone(),
            origin: origin.to_owned(),
            reason,
        };
        let note = SignedCheckpoint::parse(&bytes).map_err(|e| corrupt(e.to_string()))?;
        if note.checkpoint().origin != origin {
            return Err(corrupt(format!(
                "it names origin {}",
                note.checkpoint().origin
            )));
        }
        Ok(Some(note))
    }

    /// Persists `note` as the latest co-signed checkpoint of its log.
    pub fn store(
        &self,
        note: &SignedCheckpoint,
        hook: Option<&crate::fault::FaultHook>,
    ) -> Result<(), StateError> {
        let path = self.log_path(&note.checkpoint().origin);
        write_atomic(&path, note.to_text().as_bytes(), hook)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use audita_evidence::{derive_signing_key, Checkpoint};

    #[test]
    fn store_load_roundtrip_and_corruption_fails_closed() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(dir.path()).unwrap();
        assert!(state.load("log.example").unwrap().is_none());
        let log = derive_signing_key(1, "log.example");
        let note = SignedCheckpoint::sign(
            Checkpoint {
                origin: "log.example".into(),
                size: 3,
                root: [7; 32],
            },
            &log,
        );
        state.store(&note, None).unwrap();
        assert_eq!(state.load("log.example").unwrap(), Some(note));
        // A leftover temp file (crash before the rename) is ignored.
        let tmp = audita_files::temp_path(&state.log_path("log.example"));
        std::fs::write(&tmp, b"garbage").unwrap();
        assert!(state.load("log.example").unwrap().is_some());
        // A second keeper on the same directory is refused; a reader is not.
        assert!(matches!(
            StateDir::open(dir.path()),
            Err(StateError::Locked(_))
        ));
        assert!(StateDir::inspect(dir.path()).load("log.example").is_ok());
        drop(state);
        let state = StateDir::open(dir.path()).unwrap();
        std::fs::write(state.log_path("log.example"), b"garbage").unwrap();
        assert!(matches!(
            state.load("log.example"),
            Err(StateError::Corrupt { .. })
        ));
    }
}
