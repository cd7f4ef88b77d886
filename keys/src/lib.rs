//! Private key files: generated from OS randomness, one file per key, kept by the
//! principal (or stage) that signs with it.
//!
//! A crate of its own, below the deployment: principals (`audita-client` and its
//! Python package), the VDA 5050 bridge and keepers read and write their key files
//! here without linking `audita-deploy` and the verdict engine behind it
//! (`audita_deploy::keys` re-exports this crate).
//!
//! Design constraints:
//! - A key file holds one Ed25519 private key in either form:
//!   * the C2SP signed-note private key line
//!     `PRIVATE+KEY+<name>+<key id, 8 hex>+<base64(0x01 || 32-byte seed)>` (what
//!     `golang.org/x/mod/sumdb/note` reads), whose name and key id are checked; or
//!   * PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`, RFC 8410), as OpenSSL writes it.
//! - A key is read from a file, or from an environment variable when the configured
//!   source is `env:NAME` (a mounted secret or the process environment).
//! - On Unix a key file readable or writable by group or others is refused with a
//!   one-line error saying how to fix it. New key files are created with mode 0600,
//!   never over an existing file.
//! - Keys come from [`generate`] (OS randomness). Only a deployment that declares
//!   `[insecure] demo_seed` (`audita init --insecure-demo-keys`, tests and
//!   reproducible demos) derives them from that public seed ([`generate_for`]).

#![warn(missing_docs)]
#![forbid(unsafe_code)]
#![warn(clippy::too_many_lines)]

use std::io::Write as _;
use std::path::{Path, PathBuf};

use audita_evidence::checkpoint::{key_id, ED25519_NOTE_TYPE};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use ed25519_dalek::pkcs8::{DecodePrivateKey, EncodePrivateKey};
use ed25519_dalek::SigningKey;

/// Why a key could not be read or written. Permanent unless the I/O cause is.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The file cannot be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file's permissions let others read it.
    #[error("{path}: key file is accessible by group or others (mode {mode:04o}); run `chmod 600 {path}`")]
    Permissions {
        /// The file.
        path: PathBuf,
        /// Its mode bits.
        mode: u32,
    },
    /// The content is not a key in either accepted form.
    #[error("{source_name}: {reason}")]
    Malformed {
        /// Where the key came from (a path or `env:NAME`).
        source_name: String,
        /// What is wrong.
        reason: String,
    },
    /// An `env:NAME` source whose variable is unset.
    #[error("environment variable {0} (a key source) is not set")]
    Unset(String),
    /// The file exists already (keys are never overwritten).
    #[error("{0}: exists already (a key file is never overwritten)")]
    Exists(PathBuf),
}

/// A fresh Ed25519 key from the operating system's random source.
pub fn generate() -> SigningKey {
    SigningKey::generate(&mut rand_core::OsRng)
}

/// [`generate`], or — only for a deployment that declares `[insecure] demo_seed` —
/// the key `audita_evidence::derive_signing_key(seed, name)`, which anyone can
/// recompute (reproducible tests and demos).
pub fn generate_for(insecure_seed: Option<u64>, name: &str) -> SigningKey {
    match insecure_seed {
        Some(seed) => audita_evidence::derive_signing_key(seed, name),
        None => generate(),
    }
}

/// The C2SP note private key line of `key` under `name`.
pub fn to_note(name: &str, key: &SigningKey) -> String {
    let id = key_id(name, ED25519_NOTE_TYPE, &key.verifying_key());
    let mut data = vec![ED25519_NOTE_TYPE];
    data.extend_from_slice(&key.to_bytes());
    format!(
        "PRIVATE+KEY+{name}+{}+{}",
        hex_of(&id),
        STANDARD.encode(&data)
    )
}

fn hex_of(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Parses a key in either accepted form. With `expect_name`, a note key must carry
/// that name.
pub fn parse(
    text: &str,
    source_name: &str,
    expect_name: Option<&str>,
) -> Result<SigningKey, KeyError> {
    let bad = |reason: String| KeyError::Malformed {
        source_name: source_name.to_string(),
        reason,
    };
    let t = text.trim();
    if t.starts_with("-----BEGIN") {
        return SigningKey::from_pkcs8_pem(t)
            .map_err(|e| bad(format!("not a PKCS#8 Ed25519 key: {e}")));
    }
    let rest = t.strip_prefix("PRIVATE+KEY+").ok_or_else(|| {
        bad("neither a C2SP note private key (PRIVATE+KEY+…) nor PKCS#8 PEM".into())
    })?;
    // A note key name never contains '+' (base64 may): split from the left.
    let mut parts = rest.splitn(3, '+');
    let (name, id, data) = match (parts.next(), parts.next(), parts.next()) {
        (Some(n), Some(i), Some(d)) => (n, i, d),
        _ => return Err(bad("want PRIVATE+KEY+<name>+<key id>+<base64>".into())),
    };
    let raw = STANDARD
        .decode(data)
        .map_err(|_| bad("key data is not base64".into()))?;
    if raw.len() != 33 || raw[0] != ED25519_NOTE_TYPE {
        return Err(bad(
            "key data is not 0x01 followed by a 32-byte Ed25519 seed".into(),
        ));
    }
    let mut seed = [0u8; 32];
    seed.copy_from_slice(&raw[1..]);
    let key = SigningKey::from_bytes(&seed);
    let want = hex_of(&key_id(name, ED25519_NOTE_TYPE, &key.verifying_key()));
    if id != want {
        return Err(bad(format!("key id {id} does not match the key ({want})")));
    }
    if let Some(n) = expect_name {
        if n != name {
            return Err(bad(format!("key is named {name:?}, expected {n:?}")));
        }
    }
    Ok(key)
}

/// A fresh identifier for a throw-away deployment's origin (12 hex digits from OS
/// randomness), so no two runs sign under one log identity.
pub fn run_id() -> String {
    generate().verifying_key().as_bytes()[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Reads a key from `source`: a path (relative to `base`) or `env:NAME`.
pub fn load(source: &str, base: &Path, expect_name: Option<&str>) -> Result<SigningKey, KeyError> {
    if let Some(var) = source.strip_prefix("env:") {
        let text = std::env::var(var).map_err(|_| KeyError::Unset(var.to_string()))?;
        return parse(&text, source, expect_name);
    }
    let path = base.join(source);
    check_permissions(&path)?;
    let bytes = read_small(&path)?;
    let text = String::from_utf8(bytes).map_err(|_| KeyError::Malformed {
        source_name: path.display().to_string(),
        reason: "not UTF-8 text".into(),
    })?;
    parse(&text, &path.display().to_string(), expect_name)
}

/// A key file is a few hundred bytes: anything past 64 KiB is not one.
fn read_small(path: &Path) -> Result<Vec<u8>, KeyError> {
    audita_files::read_bounded(path, 64 * 1024).map_err(|e| match e {
        audita_files::ReadBoundedError::Io(source) => KeyError::Io {
            path: path.to_owned(),
            source,
        },
        audita_files::ReadBoundedError::TooLarge { .. } => KeyError::Malformed {
            source_name: path.display().to_string(),
            reason: "larger than 64 KiB: not a key file".into(),
        },
    })
}

#[cfg(unix)]
fn check_permissions(path: &Path) -> Result<(), KeyError> {
    use std::os::unix::fs::PermissionsExt as _;
    let meta = std::fs::metadata(path).map_err(|source| KeyError::Io {
        path: path.to_owned(),
        source,
    })?;
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(KeyError::Permissions {
            path: path.to_owned(),
            mode,
        });
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_permissions(_path: &Path) -> Result<(), KeyError> {
    Ok(())
}

/// Writes `key` to a new file at `path` (mode 0600, never over an existing file),
/// in the C2SP note form under `name`, or PKCS#8 PEM with `pem`.
pub fn write(path: &Path, name: &str, key: &SigningKey, pem: bool) -> Result<(), KeyError> {
    let io = |source| KeyError::Io {
        path: path.to_owned(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let text = if pem {
        key.to_pkcs8_pem(Default::default())
            .map_err(|e| KeyError::Malformed {
                source_name: path.display().to_string(),
                reason: format!("cannot encode PKCS#8: {e}"),
            })?
            .to_string()
    } else {
        to_note(name, key) + "\n"
    };
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        opts.mode(0o600);
    }
    let mut f = opts.open(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            KeyError::Exists(path.to_owned())
        } else {
            io(e)
        }
    })?;
    f.write_all(text.as_bytes()).map_err(io)?;
    f.sync_all().map_err(io)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_round_trip_and_bad_keys_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let k = generate();
        let note = dir.path().join("a.key");
        write(&note, "planner-1", &k, false).unwrap();
        assert_eq!(load("a.key", dir.path(), Some("planner-1")).unwrap(), k);
        let e = load("a.key", dir.path(), Some("planner-2"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected \"planner-2\""), "{e}");
        let pem = dir.path().join("b.pem");
        write(&pem, "x", &k, true).unwrap();
        assert_eq!(load("b.pem", dir.path(), None).unwrap(), k);
        assert!(matches!(
            write(&pem, "x", &k, true),
            Err(KeyError::Exists(_))
        ));
        // A flipped key id is refused.
        let text = to_note("n", &k);
        let parts: Vec<&str> = text.splitn(5, '+').collect();
        let id = parts[3];
        let other = if id.starts_with('0') { "1" } else { "0" };
        let flipped = format!("PRIVATE+KEY+n+{other}{}+{}", &id[1..], parts[4]);
        assert!(parse(&flipped, "t", None)
            .unwrap_err()
            .to_string()
            .contains("key id"));
    }

    #[cfg(unix)]
    #[test]
    fn a_world_readable_key_file_is_refused() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k");
        write(&p, "n", &generate(), false).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = load("k", dir.path(), None).unwrap_err().to_string();
        assert!(e.contains("chmod 600"), "{e}");
    }

    #[test]
    fn keys_are_fresh_and_env_sources_work() {
        assert_ne!(generate().to_bytes(), generate().to_bytes());
        let k = generate();
        std::env::set_var("AUDITA_TEST_KEY_XYZ", to_note("n", &k));
        assert_eq!(
            load("env:AUDITA_TEST_KEY_XYZ", Path::new("."), Some("n")).unwrap(),
            k
        );
        assert!(matches!(
            load("env:AUDITA_UNSET_KEY_XYZ", Path::new("."), None),
            Err(KeyError::Unset(_))
        ));
    }
}
