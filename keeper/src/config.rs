//! A keeper's configuration: its name and signing key, the logs it follows, its
//! state directory and its request bounds; the key helpers.
//!
//! Design constraints:
//! - The signing key is the keeper's own, read from a file that only its owner can
//!   read (mode 0600: a key file readable by group or others is refused), in the
//!   C2SP signed-note private key form `PRIVATE+KEY+<name>+<key id>+<base64(0x01 ||
//!   seed)>` or PKCS#8 PEM (`audita_keys`). [`generate_key`] makes one from
//!   OS randomness and returns the keeper's verifier key.
//! - The keeper's verifier key (what logs and verifiers pin) is the
//!   `cosignature/v1` vkey `<name>+<key id>+<base64(0x04 || public key)>`, key id
//!   over type 0x04 (c2sp.org/tlog-cosignature).
//! - A followed log is its origin and one or more Ed25519 note verifier keys
//!   (`<origin>+<key id>+<base64(0x01 || key)>`; the key name is the origin).
//! - The file form ([`KeeperFile`], TOML, unknown fields refused) is resolved once
//!   into a validated [`KeeperConfig`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use audita_evidence::checkpoint::{COSIGNATURE_V1_TYPE, ED25519_NOTE_TYPE};
use audita_evidence::principal::check_name;
use audita_evidence::trust::{parse_vkey, vkey};
use audita_evidence::{SigningKey, VerifyingKey};
use serde::Deserialize;
use thiserror::Error;

/// Default bound on a request body (a 63-line proof and a checkpoint with a few
/// dozen signatures fit in a few KiB).
pub const DEFAULT_MAX_BODY: usize = 16 * 1024;
/// Default bound on the time to read a request and answer it.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Default bound on the number of equivocation evidence files kept.
pub const DEFAULT_MAX_EVIDENCE: usize = 1000;

/// Why a configuration cannot be used. Permanent: fix the file and restart.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The keeper name breaks the note key naming rule.
    #[error("keeper name {0:?} is not a valid note key name")]
    BadName(String),
    /// A log verifier key does not parse.
    #[error("log key {vkey:?}: {reason}")]
    BadLogKey {
        /// The offending text.
        vkey: String,
        /// Why.
        reason: String,
    },
    /// No log to follow.
    #[error("a keeper needs at least one log to follow")]
    NoLogs,
    /// The key file could not be read or written.
    #[error(transparent)]
    Key(#[from] audita_keys::KeyError),
    /// The configuration file could not be read or parsed.
    #[error("{path}: {reason}")]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// Request bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest accepted request body in bytes (larger: 413).
    pub max_body: usize,
    /// Time to receive the request and answer (exceeded: 408).
    pub request_timeout: Duration,
    /// Evidence files kept at most; later conflicts are refused but not stored.
    pub max_evidence: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body: DEFAULT_MAX_BODY,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_evidence: DEFAULT_MAX_EVIDENCE,
        }
    }
}

/// The keeper's validated configuration.
#[derive(Clone)]
pub struct KeeperConfig {
    /// Note key name of the keeper (appears on its cosignature lines).
    pub name: String,
    /// Its signing key.
    pub key: SigningKey,
    /// Followed logs: origin to its trusted verifier keys.
    pub logs: BTreeMap<String, Vec<VerifyingKey>>,
    /// Directory of the per-log state and the evidence.
    pub state_dir: PathBuf,
    /// Request bounds.
    pub limits: Limits,
}

impl std::fmt::Debug for KeeperConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeeperConfig")
            .field("name", &self.name)
            .field("vkey", &self.vkey())
            .field("logs", &self.logs.keys().collect::<Vec<_>>())
            .field("state_dir", &self.state_dir)
            .field("limits", &self.limits)
            .finish()
    }
}

impl KeeperConfig {
    /// A configuration from its parts; `log_vkeys` are Ed25519 note verifier keys
    /// named after their origins (several keys of one origin are all trusted).
    pub fn new(
        name: &str,
        key: SigningKey,
        log_vkeys: &[String],
        state_dir: &Path,
    ) -> Result<Self, ConfigError> {
        check_name(name).map_err(|_| ConfigError::BadName(name.to_owned()))?;
        let mut logs: BTreeMap<String, Vec<VerifyingKey>> = BTreeMap::new();
        for text in log_vkeys {
            let (origin, key) =
                parse_vkey(text.trim(), &[ED25519_NOTE_TYPE]).map_err(|reason| {
                    ConfigError::BadLogKey {
                        vkey: text.clone(),
                        reason,
                    }
                })?;
            let keys = logs.entry(origin).or_default();
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        if logs.is_empty() {
            return Err(ConfigError::NoLogs);
        }
        Ok(Self {
            name: name.to_owned(),
            key,
            logs,
            state_dir: state_dir.to_owned(),
            limits: Limits::default(),
        })
    }

    /// The keeper's `cosignature/v1` verifier key.
    pub fn vkey(&self) -> String {
        keeper_vkey(&self.name, &self.key.verifying_key())
    }
}

/// The `cosignature/v1` verifier key of a keeper.
pub fn keeper_vkey(name: &str, key: &VerifyingKey) -> String {
    vkey(name, COSIGNATURE_V1_TYPE, key)
}

/// The Ed25519 note verifier key of a log (what a keeper's log list holds).
pub fn log_vkey(origin: &str, key: &VerifyingKey) -> String {
    vkey(origin, ED25519_NOTE_TYPE, key)
}

/// Generates a keeper key from OS randomness, writes it to a new file at `path`
/// (mode 0600, never over an existing file) in the C2SP note private key form and
/// returns the keeper's `cosignature/v1` verifier key.
pub fn generate_key(path: &Path, name: &str) -> Result<String, ConfigError> {
    check_name(name).map_err(|_| ConfigError::BadName(name.to_owned()))?;
    let key = audita_keys::generate();
    audita_keys::write(path, name, &key, false)?;
    Ok(keeper_vkey(name, &key.verifying_key()))
}

/// Reads a keeper key file (permissions checked; a note key must carry `name`).
pub fn load_key(path: &Path, name: &str) -> Result<SigningKey, ConfigError> {
    let source = path.to_string_lossy();
    Ok(audita_keys::load(&source, Path::new("."), Some(name))?)
}

/// The keeper's configuration file (TOML):
/// ```toml
/// name = "insurer.example/keeper"          # note key name
/// key = "keeper.key"                       # key file, relative to this file
/// state_dir = "state"                      # relative to this file
/// logs = ["audita.local/log+8e3a2c51+AQ..."]
/// max_body_bytes = 16384                   # optional
/// request_timeout_ms = 10000               # optional
/// max_evidence = 1000                      # optional
/// ```
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeeperFile {
    /// Note key name of the keeper.
    pub name: String,
    /// Path of the key file (relative paths: to the configuration file's folder).
    pub key: PathBuf,
    /// State directory (relative paths: to the configuration file's folder).
    pub state_dir: PathBuf,
    /// Ed25519 note verifier keys of the followed logs.
    pub logs: Vec<String>,
    /// Largest accepted request body (default [`DEFAULT_MAX_BODY`]).
    #[serde(default)]
    pub max_body_bytes: Option<usize>,
    /// Per-request time bound in milliseconds (default 10 000).
    #[serde(default)]
    pub request_timeout_ms: Option<u64>,
    /// Evidence files kept at most (default [`DEFAULT_MAX_EVIDENCE`]).
    #[serde(default)]
    pub max_evidence: Option<usize>,
}

impl KeeperFile {
    /// Reads and resolves a configuration file (key loaded, logs parsed).
    pub fn load(path: &Path) -> Result<KeeperConfig, ConfigError> {
        let file_err = |reason: String| ConfigError::File {
            path: path.to_owned(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| file_err(e.to_string()))?;
        let file: KeeperFile = toml::from_str(&text).map_err(|e| file_err(e.to_string()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        let key = load_key(&base.join(&file.key), &file.name)?;
        let mut config =
            KeeperConfig::new(&file.name, key, &file.logs, &base.join(&file.state_dir))?;
        if let Some(b) = file.max_body_bytes {
            config.limits.max_body = b;
        }
        if let Some(ms) = file.request_timeout_ms {
            config.limits.request_timeout = Duration::from_millis(ms);
        }
        if let Some(n) = file.max_evidence {
            config.limits.max_evidence = n;
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_key_loads_and_loose_permissions_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.key");
        let vkey = generate_key(&path, "keeper.example/k").unwrap();
        let key = load_key(&path, "keeper.example/k").unwrap();
        assert_eq!(vkey, keeper_vkey("keeper.example/k", &key.verifying_key()));
        assert!(vkey.starts_with("keeper.example/k+"));
        assert!(
            generate_key(&path, "keeper.example/k").is_err(),
            "never overwrites"
        );
        assert!(
            load_key(&path, "other.example/k").is_err(),
            "name is checked"
        );
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let err = load_key(&path, "keeper.example/k").unwrap_err().to_string();
        assert!(err.contains("chmod 600"), "{err}");
    }

    #[test]
    fn log_keys_must_be_ed25519_note_keys() {
        let log = audita_evidence::derive_signing_key(1, "log.example");
        let k = audita_evidence::derive_signing_key(1, "k");
        let good = log_vkey("log.example", &log.verifying_key());
        let cfg = KeeperConfig::new(
            "k.example",
            k.clone(),
            &[good.clone(), good],
            Path::new("s"),
        )
        .unwrap();
        assert_eq!(cfg.logs["log.example"].len(), 1);
        let cosig = keeper_vkey("log.example", &log.verifying_key());
        assert!(matches!(
            KeeperConfig::new("k.example", k.clone(), &[cosig], Path::new("s")),
            Err(ConfigError::BadLogKey { .. })
        ));
        assert!(matches!(
            KeeperConfig::new("k.example", k.clone(), &[], Path::new("s")),
            Err(ConfigError::NoLogs)
        ));
        assert!(matches!(
            KeeperConfig::new("bad name", k, &[], Path::new("s")),
            Err(ConfigError::BadName(_))
        ));
    }
}
