//! Creating and changing a deployment: `audita init`, `audita principal
//! add|rotate|revoke` (the library half; the CLI only parses flags).
//!
//! Design constraints:
//! - [`init`] writes a new deployment directory: `audita.toml` (documented, every field
//!   at its default), an empty principal registry, an empty duty registry and a fresh
//!   log key (`keys/log.key`, mode 0600). It refuses a directory that already holds an
//!   `audita.toml`.
//! - [`add_principal`] creates a key pair for a new principal: the private key goes to
//!   its own file (by default `keys/principals/<name>.key`, meant to be moved to the
//!   device), the public key into the registry. [`rotate_principal`] adds a new key
//!   and closes the old one's window; [`revoke_principal`] closes the current key's
//!   window as a revocation. The registry file is replaced atomically.
//! - Every key comes from [`crate::keys::generate`] (OS randomness).

use std::path::{Path, PathBuf};

use audita_evidence::checkpoint::ED25519_NOTE_TYPE;
use audita_evidence::principal::check_name;
use audita_evidence::trust::vkey;
use audita_evidence::{PrincipalRegistry, VerifyingKey};

use crate::config::{Config, ConfigError};
use crate::keys::{self, KeyError};

/// Why a deployment could not be created or changed. Permanent unless I/O.
#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    /// A configuration or registry error.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A key file error.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// Anything else, one line.
    #[error("{0}")]
    Other(String),
}

/// What [`init`] made.
#[derive(Debug, Clone)]
pub struct Created {
    /// The configuration file.
    pub config: PathBuf,
    /// The log's public key (C2SP vkey), for verifiers' trust files.
    pub log_vkey: String,
}

/// [`audita_files::write_atomic`], its error naming the file being replaced.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), DeployError> {
    audita_files::write_atomic(path, bytes)
        .map_err(|e| DeployError::Other(format!("{}: {}", path.display(), e.source)))
}

/// How [`init_with`] creates a deployment.
#[derive(Debug, Clone, Default)]
pub struct InitOptions {
    /// Keepers this deployment runs in its own process (their keys in
    /// `keys/keepers/`): the demo's, until keepers run as their own services.
    pub local_keepers: Vec<String>,
    /// `Some(seed)`: every key derives from this public seed (`[insecure] demo_seed`).
    pub insecure_demo_seed: Option<u64>,
    /// Keepers run as services in their own trust domains: (name, published vkey,
    /// tlog-witness URL). The deployment never holds their keys.
    pub remote_keepers: Vec<(String, String, String)>,
}

/// A keeper line of `audita.toml`.
enum KeeperLine<'a> {
    /// Run in this deployment's process, its key in this file.
    Local(&'a str),
    /// A tlog-witness service at this URL.
    Remote(&'a str),
}

/// The `audita.toml` of a new deployment.
fn config_text(
    origin: &str,
    log_vkey: &str,
    keepers: &[(String, String, KeeperLine<'_>)],
    insecure: Option<u64>,
) -> String {
    let mut witness = format!(
        "[witness]\nquorum = {}                       # keeper cosignatures an epoch needs\n",
        keepers.len()
    );
    if keepers.is_empty() {
        witness.push_str(
            "# [[witness.keepers]]\n# name = \"insurer.example/keeper\"\n# vkey = \"insurer.example/keeper+…\"   # the keeper's published verifier key\n# url = \"https://keeper.insurer.example/\"\n",
        );
    }
    for (name, vkey, line) in keepers {
        let last = match line {
            KeeperLine::Local(key) => {
                format!("key = \"{key}\"   # run in this deployment's process")
            }
            KeeperLine::Remote(url) => format!("url = \"{url}\"   # its tlog-witness endpoint"),
        };
        witness.push_str(&format!(
            "[[witness.keepers]]\nname = \"{name}\"\nvkey = \"{vkey}\"\n{last}\n"
        ));
    }
    let insecure = insecure
        .map(|s| format!("\n[insecure]                       # TESTS AND DEMOS ONLY: every key of this deployment\ndemo_seed = {s}                    # derives from this public seed\n"))
        .unwrap_or_default();
    format!(
        r#"# An Audita deployment (format audita.deploy/v1). Paths are relative to this file;
# a key may also come from the environment: key = "env:NAME".
format = "audita.deploy/v1"

[log]
origin = "{origin}"   # checkpoint origin; names the log key
vkey = "{log_vkey}"
key = "keys/log.key"  # the log's private key: only the sealer reads it

[registry]
principals = "principals.json"  # public keys of every principal, with validity windows
duties = "duties.json"          # duty registry (verdict/SCHEMA.md)
predicates = "predicates.json"  # adverse predicates the monitor detects (audita-monitor)

[epoch]                          # an epoch closes at whichever comes first
max_messages = 4096
max_age_ms = 100

[retention]
dedupe_horizon_ms = 600000       # sealer: record time sealed ids are remembered
slicer_horizon_ms = 120000       # slicer: record time messages are held
slicer_hold_ms = 60000           # slicer: least wall time a message is held

[topics]
prefix = ""                      # prepended to every topic name

{witness}
[kafka]                          # passed to librdkafka after Audita's defaults (not: acks,
                                 # enable.idempotence, enable.auto.commit, group.id, ...)
"bootstrap.servers" = "127.0.0.1:9092"
# "security.protocol" = "SASL_SSL"
# "sasl.mechanisms" = "SCRAM-SHA-512"

[engine]
workers = 2

[clock]                          # what record time (envelope timestamps) is
record_time = "unix_ms"          # ms since 1970-01-01T00:00:00Z, as real producers stamp it
                                 # (the VDA 5050 bridge, the client library); a simulated
                                 # world from 0: record_time = "relative" [origin = "RFC 3339"]
{insecure}"#
    )
}

/// Creates a deployment in `dir` for the log `origin` (fresh keys, no keepers).
pub fn init(dir: &Path, origin: &str) -> Result<Created, DeployError> {
    init_with(dir, origin, &InitOptions::default())
}

/// Creates a deployment in `dir` for the log `origin`.
pub fn init_with(dir: &Path, origin: &str, opts: &InitOptions) -> Result<Created, DeployError> {
    check_name(origin).map_err(|e| DeployError::Other(format!("--origin {origin:?}: {e}")))?;
    let config = dir.join("audita.toml");
    if config.exists() {
        return Err(DeployError::Other(format!(
            "{}: a deployment exists already",
            config.display()
        )));
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| DeployError::Other(format!("{}: {e}", dir.display())))?;
    let log = keys::generate_for(opts.insecure_demo_seed, origin);
    keys::write(&dir.join("keys/log.key"), origin, &log, false)?;
    let log_vkey = vkey(origin, ED25519_NOTE_TYPE, &log.verifying_key());
    let mut files = Vec::new();
    for (i, name) in opts.local_keepers.iter().enumerate() {
        check_name(name).map_err(|e| DeployError::Other(format!("keeper {name:?}: {e}")))?;
        let key = keys::generate_for(opts.insecure_demo_seed, name);
        let file = format!("keys/keepers/{i}.key");
        keys::write(&dir.join(&file), name, &key, false)?;
        files.push((
            name.clone(),
            vkey(
                name,
                audita_evidence::checkpoint::COSIGNATURE_V1_TYPE,
                &key.verifying_key(),
            ),
            file,
        ));
    }
    let mut keepers: Vec<(String, String, KeeperLine<'_>)> = files
        .iter()
        .map(|(n, v, f)| (n.clone(), v.clone(), KeeperLine::Local(f)))
        .collect();
    for (name, vkey, url) in &opts.remote_keepers {
        check_name(name).map_err(|e| DeployError::Other(format!("keeper {name:?}: {e}")))?;
        for bad in ['"', '\\', '\n'] {
            if vkey.contains(bad) || url.contains(bad) {
                return Err(DeployError::Other(format!(
                    "keeper {name}: vkey and url may not contain {bad:?}"
                )));
            }
        }
        keepers.push((name.clone(), vkey.clone(), KeeperLine::Remote(url)));
    }
    write_atomic(
        &dir.join("principals.json"),
        PrincipalRegistry::default().to_json_pretty().as_bytes(),
    )?;
    write_atomic(
        &dir.join("duties.json"),
        b"{\"standard\": \"specification\", \"principals\": {}}\n",
    )?;
    write_atomic(
        &dir.join("predicates.json"),
        b"{\"version\": 1, \"predicates\": []}\n",
    )?;
    write_atomic(
        &config,
        config_text(origin, &log_vkey, &keepers, opts.insecure_demo_seed).as_bytes(),
    )?;
    // Validate what was written, as every stage will.
    Config::load(&config)?;
    Ok(Created { config, log_vkey })
}

/// Replaces the deployment's duty registry (validated first).
pub fn set_duties(config: &Path, json: &str) -> Result<(), DeployError> {
    let c = Config::load(config)?;
    audita_verdict::DutyRegistry::from_json(json)
        .and_then(|d| d.validate().map(|()| d))
        .and_then(|d| d.check_roles(|p| c.principals.role(p)))
        .map_err(|e| DeployError::Other(format!("duty registry: {e}")))?;
    write_atomic(&c.duties_path, json.as_bytes())
}

/// Declares record time relative (`[clock] record_time = "relative"`, optionally with
/// its `origin`): for a simulated world whose clock starts at 0. Rewrites the
/// `record_time` line `audita init` wrote; a deployment without a `[clock]` table gets
/// one.
pub fn set_record_time_relative(config: &Path, origin: Option<&str>) -> Result<(), DeployError> {
    let c = Config::load(config)?;
    let text = std::fs::read_to_string(&c.file)
        .map_err(|e| DeployError::Other(format!("{}: {e}", c.file.display())))?;
    let mut lines: Vec<String> = Vec::new();
    let mut in_clock = false;
    let mut done = false;
    let want = match origin {
        Some(o) => format!("record_time = \"relative\"\norigin = \"{o}\""),
        None => "record_time = \"relative\"".to_string(),
    };
    for l in text.lines() {
        let t = l.trim_start();
        if t.starts_with('[') {
            in_clock = t.starts_with("[clock]");
        }
        if in_clock && (t.starts_with("record_time") || t.starts_with("origin")) {
            if !done {
                lines.push(want.clone());
                done = true;
            }
            continue;
        }
        lines.push(l.to_string());
    }
    if !done {
        lines.push(String::new());
        lines.push("[clock]".into());
        lines.push(want);
    }
    let out = lines.join("\n") + "\n";
    Config::parse(&out, &c.file, &c.dir).map_err(DeployError::from)?;
    write_atomic(&c.file, out.as_bytes())
}

/// Installs `json` as the deployment's adverse predicates (validated first), in the
/// file `registry.predicates` names. A deployment whose `audita.toml` names none is
/// told which line to add.
pub fn set_predicates(config: &Path, json: &str) -> Result<(), DeployError> {
    let c = Config::load(config)?;
    audita_monitor::Predicates::from_json_with_zones(json, &c.duties.zones)
        .map_err(|e| DeployError::Other(format!("predicate file: {e}")))?;
    let path = c.predicates_path.ok_or_else(|| {
        DeployError::Other(format!(
            "{}: [registry] names no predicate file: add predicates = \"predicates.json\"",
            c.file.display()
        ))
    })?;
    write_atomic(&path, json.as_bytes())
}

/// What [`add_principal`] / [`rotate_principal`] made.
#[derive(Debug, Clone)]
pub struct NewKey {
    /// The private key file (for the principal's device).
    pub key_file: PathBuf,
    /// The public key as registered (C2SP vkey).
    pub vkey: String,
}

fn registry(config: &Path) -> Result<(Config, PrincipalRegistry), DeployError> {
    let c = Config::load(config)?;
    let r = c.principals.clone();
    Ok((c, r))
}

fn save(c: &Config, r: &PrincipalRegistry) -> Result<(), DeployError> {
    write_atomic(&c.principals_path, r.to_json_pretty().as_bytes())
}

fn default_key_file(c: &Config, name: &str, n: usize) -> PathBuf {
    let file = if n == 0 {
        format!("{name}.key")
    } else {
        format!("{name}.{n}.key")
    };
    c.dir.join("keys/principals").join(file)
}

/// Registers a new principal `name` with role `role` and a fresh key.
pub fn add_principal(
    config: &Path,
    name: &str,
    role: &str,
    key_out: Option<&Path>,
    valid_from_ms: Option<u64>,
) -> Result<NewKey, DeployError> {
    let mut made = add_principals_with(config, &[(name, role, key_out)], valid_from_ms)?;
    made.pop()
        .ok_or_else(|| DeployError::Other("no principal added".into()))
}

/// Registers many principals (`(name, role)`) with fresh keys in one registry write
/// (a fleet's worth), each key in its default file.
pub fn add_principals(
    config: &Path,
    principals: &[(&str, &str)],
    valid_from_ms: Option<u64>,
) -> Result<Vec<NewKey>, DeployError> {
    let with: Vec<(&str, &str, Option<&Path>)> =
        principals.iter().map(|(n, r)| (*n, *r, None)).collect();
    add_principals_with(config, &with, valid_from_ms)
}

fn add_principals_with(
    config: &Path,
    principals: &[(&str, &str, Option<&Path>)],
    valid_from_ms: Option<u64>,
) -> Result<Vec<NewKey>, DeployError> {
    let (c, mut r) = registry(config)?;
    let mut out = Vec::new();
    for (name, role, key_out) in principals {
        let key = c.new_key(name);
        r.add(name, role, &key.verifying_key(), valid_from_ms)
            .map_err(|e| DeployError::Other(e.to_string()))?;
        let key_file = key_out
            .map(Path::to_path_buf)
            .unwrap_or_else(|| default_key_file(&c, name, 0));
        keys::write(&key_file, name, &key, false)?;
        out.push(NewKey {
            key_file,
            vkey: vkey(name, ED25519_NOTE_TYPE, &key.verifying_key()),
        });
    }
    save(&c, &r)?;
    Ok(out)
}

/// Registers principals whose private keys the deployment never sees (`(name, role,
/// public key)`: devices that made their own keys), in one registry write.
pub fn register_public(
    config: &Path,
    principals: &[(&str, &str, VerifyingKey)],
) -> Result<(), DeployError> {
    let (c, mut r) = registry(config)?;
    for (name, role, key) in principals {
        r.add(name, role, key, None)
            .map_err(|e| DeployError::Other(e.to_string()))?;
    }
    save(&c, &r)
}

/// Rotates `name` to a fresh key valid from `at_ms`.
pub fn rotate_principal(
    config: &Path,
    name: &str,
    key_out: Option<&Path>,
    at_ms: u64,
) -> Result<NewKey, DeployError> {
    let (c, mut r) = registry(config)?;
    let n = r.get(name).map(|p| p.keys.len()).unwrap_or(0);
    let key = if c.insecure_demo_seed.is_some() {
        // A rotation must change the key even in the insecure mode.
        c.new_key(&format!("{name}#{n}"))
    } else {
        c.new_key(name)
    };
    r.rotate(name, &key.verifying_key(), at_ms)
        .map_err(|e| DeployError::Other(e.to_string()))?;
    let key_file = key_out
        .map(Path::to_path_buf)
        .unwrap_or_else(|| default_key_file(&c, name, n));
    keys::write(&key_file, name, &key, false)?;
    save(&c, &r)?;
    Ok(NewKey {
        key_file,
        vkey: vkey(name, ED25519_NOTE_TYPE, &key.verifying_key()),
    })
}

/// Revokes `name`'s current key at `at_ms`.
pub fn revoke_principal(config: &Path, name: &str, at_ms: u64) -> Result<(), DeployError> {
    let (c, mut r) = registry(config)?;
    r.revoke(name, at_ms)
        .map_err(|e| DeployError::Other(e.to_string()))?;
    save(&c, &r)
}

/// Milliseconds since the Unix epoch (the record time of a real fleet).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duty_its_holder_can_never_meet_is_refused_at_load() {
        let dir = tempfile::tempdir().unwrap();
        let made = init(&dir.path().join("site"), "site-8.example/audita").unwrap();
        add_principal(
            &made.config,
            "master-control",
            "master-control",
            None,
            Some(0),
        )
        .unwrap();
        add_principal(&made.config, "planner-1", "planner", None, Some(0)).unwrap();
        let envelope = |holder: &str| {
            format!(
                r#"{{"principals": {{"{holder}": {{"duties": [{{"kind": "safety_envelope",
                "id": "aisle-speed", "target": "agv-1", "max_mm_per_s": 1000}}]}}}}}}"#
            )
        };
        // A planner's set_speed envelope applies; master control never sends set_speed.
        set_duties(&made.config, &envelope("planner-1")).unwrap();
        let err = set_duties(&made.config, &envelope("master-control"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("aisle-speed") && err.contains("vda5050_edge_release"),
            "{err}"
        );
        // Written behind the command's back, the deployment refuses to load.
        let c = Config::load(&made.config).unwrap();
        std::fs::write(&c.duties_path, envelope("master-control")).unwrap();
        let err = Config::load(&made.config).unwrap_err().to_string();
        assert!(
            err.contains("vda5050_edge_release") && !err.contains('\n'),
            "{err}"
        );
    }

    #[test]
    fn init_add_rotate_revoke_round_trip_through_the_config() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("site");
        let made = init(&d, "site-7.example/audita").unwrap();
        assert!(
            init(&d, "site-7.example/audita").is_err(),
            "never over an existing deployment"
        );
        let a = add_principal(&made.config, "planner-1", "planner", None, Some(0)).unwrap();
        assert!(a.key_file.exists());
        let b = rotate_principal(&made.config, "planner-1", None, 1_000).unwrap();
        assert_ne!(a.vkey, b.vkey);
        revoke_principal(&made.config, "planner-1", 2_000).unwrap();
        let c = Config::load(&made.config).unwrap();
        let keys = c.keys().unwrap();
        let k1 = keys::load(
            a.key_file.to_str().unwrap(),
            Path::new("/"),
            Some("planner-1"),
        )
        .unwrap();
        let k2 = keys::load(
            b.key_file.to_str().unwrap(),
            Path::new("/"),
            Some("planner-1"),
        )
        .unwrap();
        assert_eq!(
            keys.principal_at("planner-1", 500),
            Some(&k1.verifying_key())
        );
        assert_eq!(
            keys.principal_at("planner-1", 1_500),
            Some(&k2.verifying_key())
        );
        assert_eq!(keys.principal_at("planner-1", 2_500), None);
        assert_eq!(c.log_key().unwrap().verifying_key(), c.log_vkey);
    }

    #[test]
    fn two_inits_with_the_same_arguments_share_no_key() {
        let dir = tempfile::tempdir().unwrap();
        let a = init(&dir.path().join("a"), "o.example/log").unwrap();
        let b = init(&dir.path().join("b"), "o.example/log").unwrap();
        assert_ne!(a.log_vkey, b.log_vkey);
    }

    #[test]
    fn a_bad_field_names_file_and_field() {
        let dir = tempfile::tempdir().unwrap();
        let made = init(&dir.path().join("x"), "o.example/log").unwrap();
        let text = std::fs::read_to_string(&made.config).unwrap();
        for (from, to, field) in [
            (
                "max_messages = 4096",
                "max_messages = 0",
                "epoch.max_messages",
            ),
            (
                "dedupe_horizon_ms = 600000",
                "dedupe_horizon_ms = 5",
                "retention.dedupe_horizon_ms",
            ),
            ("[engine]", "[engine]\ncolour = 1", "line"),
            ("quorum = 0", "quorum = 3", "witness.quorum"),
        ] {
            std::fs::write(&made.config, text.replace(from, to)).unwrap();
            let e = Config::load(&made.config).unwrap_err().to_string();
            assert!(e.contains("audita.toml") && e.contains(field), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }
}
