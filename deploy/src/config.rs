//! `audita.toml`: one deployment's configuration, read once at start-up and resolved
//! into a validated [`Config`] that the stages pass around.
//!
//! Design constraints (format `audita.deploy/v1`; every table `deny_unknown_fields`):
//! ```toml
//! format = "audita.deploy/v1"
//!
//! [log]
//! origin = "warehouse-7.example/audita"  # checkpoint origin; names the log key
//! vkey = "warehouse-7.example/audita+1a2b3c4d+AQ…"  # the log's public key (C2SP vkey)
//! key = "keys/log.key"                  # its private key: only the sealer reads it
//!
//! [registry]
//! principals = "principals.json"        # public principal registry (keys, windows)
//! duties = "duties.json"                # duty registry (verdict/SCHEMA.md)
//! predicates = "predicates.json"        # adverse predicates the monitor detects
//!                                       # (audita-monitor; optional)
//!
//! [epoch]                               # an epoch closes at whichever comes first
//! max_messages = 256
//! max_age_ms = 200
//!
//! [retention]                           # memory bounds (record-time / wall-time ms)
//! dedupe_horizon_ms = 600000            # sealer: how long sealed ids are remembered
//! slicer_horizon_ms = 120000            # slicer: how far back messages are held
//! slicer_hold_ms = 60000                # slicer: least wall time a message is held
//!
//! [topics]
//! prefix = ""                           # prepended to every topic name
//!
//! [witness]
//! quorum = 1                            # keeper cosignatures an epoch needs
//! [[witness.keepers]]
//! name = "insurer.example/keeper"
//! vkey = "insurer.example/keeper+5e6f7a8b+BA…"  # cosignature/v1 (0x04) or 0x01
//! url = "https://keeper.insurer.example/"      # its tlog-witness endpoint
//! # key = "keys/keepers/insurer.key"    # only for a keeper run in this process (demo)
//!
//! [kafka]                               # passed to librdkafka after Audita's defaults;
//!                                       # audita_bus::kafka::FIXED_SETTINGS are refused
//! "bootstrap.servers" = "kafka-0.kafka:9092"
//! "security.protocol" = "SASL_SSL"
//!
//! [engine]
//! workers = 2                           # engine worker threads per process
//!
//! [clock]                               # what record time (envelope timestamps) is
//! record_time = "unix_ms"               # ms since 1970-01-01T00:00:00Z (real fleets:
//!                                       # the VDA 5050 bridge, the client library)
//! # record_time = "relative"            # ms since `origin` (a simulated world from 0)
//! # origin = "2026-12-01T00:00:00Z"     # RFC 3339; relative only, optional
//!
//! [notifier]                            # the notifier stage: every incident to
//! url = "http://alertmanager:9093"      # Prometheus Alertmanager (crate::notifier)
//!
//! # [insecure]                          # tests and reproducible demos ONLY:
//! # demo_seed = 7                       # every key derives from this public seed
//! ```
//! - Paths are relative to the directory of `audita.toml`; a key source may also be
//!   `env:NAME` (a mounted secret or the environment; see [`crate::keys`]).
//! - Every error is one line `FILE: FIELD: reason`, naming the file and field.
//! - [`Config::load`] reads the file, the principal registry and the duty registry and
//!   checks every rule; nothing else about the world is read by a stage. The log's
//!   private key is read only by [`Config::log_key`] (the sealer) and checked against
//!   `log.vkey`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use audita_evidence::checkpoint::{COSIGNATURE_V1_TYPE, ED25519_NOTE_TYPE};
use audita_evidence::principal::check_name;
use audita_evidence::trust::parse_vkey;
use audita_evidence::{KeyRegistry, PrincipalRegistry, SigningKey, VerifyingKey};
use audita_monitor::Predicates;
use audita_verdict::DutyRegistry;
use serde::Deserialize;

use crate::keys;

/// Format identifier of `audita.toml`.
pub const CONFIG_FORMAT: &str = "audita.deploy/v1";

/// A configuration error: file, field and reason, one line. Permanent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {field}: {reason}")]
pub struct ConfigError {
    /// The file.
    pub file: String,
    /// The field (dotted path; `-` for the file as a whole).
    pub field: String,
    /// What is wrong.
    pub reason: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    format: String,
    log: RawLog,
    registry: RawRegistry,
    #[serde(default)]
    epoch: RawEpoch,
    #[serde(default)]
    retention: RawRetention,
    #[serde(default)]
    topics: RawTopics,
    #[serde(default)]
    witness: RawWitness,
    #[serde(default)]
    kafka: BTreeMap<String, toml::Value>,
    #[serde(default)]
    engine: RawEngine,
    #[serde(default)]
    clock: Option<RawClock>,
    #[serde(default)]
    insecure: Option<RawInsecure>,
    #[serde(default)]
    notifier: Option<crate::notifier::RawNotifier>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClock {
    record_time: String,
    #[serde(default)]
    origin: Option<String>,
}

/// How record time (every envelope's `timestamp`) maps to UTC: the deployment says it
/// once, and the sink, its tables and reports read it from here.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Clock {
    /// No `[clock]` table (a deployment written before it existed): the sink takes
    /// the origin kept in its directory, else its own start, and says so.
    #[default]
    Unset,
    /// Record time is milliseconds since the Unix epoch.
    UnixMs,
    /// Record time is milliseconds since `origin` (RFC 3339), when given.
    Relative(Option<String>),
}

impl Clock {
    /// The wall-clock instant of record time 0 (RFC 3339), when the deployment
    /// declares one.
    pub fn record_origin(&self) -> Option<String> {
        match self {
            Clock::UnixMs => Some("1970-01-01T00:00:00Z".into()),
            Clock::Relative(o) => o.clone(),
            Clock::Unset => None,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInsecure {
    demo_seed: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLog {
    origin: String,
    vkey: String,
    #[serde(default)]
    key: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRegistry {
    principals: String,
    duties: String,
    #[serde(default)]
    predicates: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEpoch {
    #[serde(default = "default_epoch_messages")]
    max_messages: usize,
    #[serde(default = "default_epoch_age")]
    max_age_ms: u64,
}

impl Default for RawEpoch {
    fn default() -> Self {
        RawEpoch {
            max_messages: default_epoch_messages(),
            max_age_ms: default_epoch_age(),
        }
    }
}

fn default_epoch_messages() -> usize {
    4096
}
fn default_epoch_age() -> u64 {
    100
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRetention {
    #[serde(default = "default_dedupe")]
    dedupe_horizon_ms: u64,
    #[serde(default = "default_horizon")]
    slicer_horizon_ms: u64,
    #[serde(default = "default_hold")]
    slicer_hold_ms: u64,
}

impl Default for RawRetention {
    fn default() -> Self {
        RawRetention {
            dedupe_horizon_ms: default_dedupe(),
            slicer_horizon_ms: default_horizon(),
            slicer_hold_ms: default_hold(),
        }
    }
}

fn default_dedupe() -> u64 {
    600_000
}
fn default_horizon() -> u64 {
    120_000
}
fn default_hold() -> u64 {
    60_000
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTopics {
    #[serde(default)]
    prefix: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWitness {
    #[serde(default)]
    quorum: Option<usize>,
    #[serde(default)]
    keepers: Vec<RawKeeper>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKeeper {
    name: String,
    vkey: String,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    key: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEngine {
    #[serde(default = "default_workers")]
    workers: usize,
}

impl Default for RawEngine {
    fn default() -> Self {
        RawEngine {
            workers: default_workers(),
        }
    }
}

fn default_workers() -> usize {
    2
}

/// A keeper (witness) of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keeper {
    /// Its note key name.
    pub name: String,
    /// Its public key.
    pub key: VerifyingKey,
    /// Its tlog-witness endpoint, when it runs as a service.
    pub url: Option<String>,
    /// Source of its private key, only for a keeper run in this process (demo).
    pub key_source: Option<String>,
}

/// The validated configuration of a deployment.
#[derive(Debug, Clone)]
pub struct Config {
    /// Directory of `audita.toml` (paths resolve against it).
    pub dir: PathBuf,
    /// The file itself.
    pub file: PathBuf,
    /// Checkpoint origin (the log key's name).
    pub origin: String,
    /// The log's public key.
    pub log_vkey: VerifyingKey,
    log_key_source: Option<String>,
    /// The public principal registry.
    pub principals: PrincipalRegistry,
    /// Its file.
    pub principals_path: PathBuf,
    /// The duty registry.
    pub duties: DutyRegistry,
    /// Its file.
    pub duties_path: PathBuf,
    /// The adverse predicates the monitor stage detects (`registry.predicates`; none:
    /// the deployment runs no monitor and declarations come from operators).
    pub predicates: Option<Predicates>,
    /// Where they are kept.
    pub predicates_path: Option<PathBuf>,
    /// Messages per epoch (at most).
    pub epoch_messages: usize,
    /// Age of the oldest pending message that closes an epoch (ms).
    pub epoch_age_ms: u64,
    /// Sealer dedupe horizon (record-time ms).
    pub dedupe_horizon_ms: u64,
    /// Slicer retention horizon (record-time ms).
    pub slicer_horizon_ms: u64,
    /// Slicer least hold (wall-time ms).
    pub slicer_hold_ms: u64,
    /// Topic name prefix.
    pub topic_prefix: String,
    /// Keepers.
    pub keepers: Vec<Keeper>,
    /// Cosignatures an epoch needs.
    pub quorum: usize,
    /// librdkafka settings, as given.
    pub kafka: BTreeMap<String, String>,
    /// Engine worker threads per process.
    pub engine_workers: usize,
    /// `[clock]`: what record time is.
    pub clock: Clock,
    /// `[insecure] demo_seed`: every key of this deployment derives from this public
    /// seed (reproducible tests and demos only; stages say so loudly).
    pub insecure_demo_seed: Option<u64>,
    /// `[notifier]`: where the notifier stage posts alerts (none: it is not run).
    pub notifier: Option<crate::notifier::Notifier>,
}

/// Checks `YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)` (the sink parses it).
fn check_rfc3339(t: &str) -> Result<(), String> {
    let b = t.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|s| s.iter().all(u8::is_ascii_digit));
    let ok = b.len() >= 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && (t.ends_with('Z') || t[19..].contains(['+', '-']));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{t:?} is not an RFC 3339 instant (e.g. 2026-12-01T00:00:00Z)"
        ))
    }
}

/// Largest `audita.toml`, principal or duty registry read (a deployment's files are
/// small; a bigger one is not one).
pub const MAX_FILE_BYTES: u64 = 64 << 20;

fn read_text(path: &Path) -> Result<String, ConfigError> {
    use std::io::Read as _;
    let err = |reason: String| ConfigError {
        file: path.display().to_string(),
        field: "-".into(),
        reason,
    };
    let f = std::fs::File::open(path).map_err(|e| err(format!("cannot read: {e}")))?;
    let mut bytes = Vec::new();
    f.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| err(format!("cannot read: {e}")))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(err(format!("larger than {MAX_FILE_BYTES} bytes")));
    }
    String::from_utf8(bytes).map_err(|_| err("not UTF-8 text".into()))
}

/// An error in a registry file read while loading the configuration.
fn in_file(path: &Path, e: impl std::fmt::Display) -> ConfigError {
    ConfigError {
        file: path.display().to_string(),
        field: "-".into(),
        reason: e.to_string(),
    }
}

/// How a configuration check names the field it refuses.
type At<'a> = &'a dyn Fn(&str, String) -> ConfigError;

impl Raw {
    /// Checks the epoch bounds, the retention horizons and the topic prefix.
    fn check_bounds(&self, at: At<'_>) -> Result<(), ConfigError> {
        if self.epoch.max_messages == 0 || self.epoch.max_messages > 1 << 20 {
            return Err(at(
                "epoch.max_messages",
                format!("{} (want 1 to 1048576)", self.epoch.max_messages),
            ));
        }
        if self.epoch.max_age_ms == 0 {
            return Err(at("epoch.max_age_ms", "must be at least 1".into()));
        }
        for (field, ms) in [
            (
                "retention.dedupe_horizon_ms",
                self.retention.dedupe_horizon_ms,
            ),
            (
                "retention.slicer_horizon_ms",
                self.retention.slicer_horizon_ms,
            ),
        ] {
            if ms < 10_000 {
                return Err(at(
                    field,
                    format!("{ms} is below 10000: re-deliveries and late declarations would fall outside it"),
                ));
            }
        }
        let prefix_ok = self
            .topics
            .prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if !prefix_ok || self.topics.prefix.len() > 100 {
            return Err(at(
                "topics.prefix",
                format!(
                    "{:?}: letters, digits, '.', '_', '-' only",
                    self.topics.prefix
                ),
            ));
        }
        Ok(())
    }
}

impl RawWitness {
    /// The keepers (each named once, its vkey under its name, its URL http(s)) and
    /// the quorum (all of them by default, never more).
    fn resolve(&self, at: At<'_>) -> Result<(Vec<Keeper>, usize), ConfigError> {
        let mut keepers = Vec::new();
        for (i, k) in self.keepers.iter().enumerate() {
            let field = |f: &str| format!("witness.keepers[{i}].{f}");
            check_name(&k.name).map_err(|e| at(&field("name"), e.to_string()))?;
            if keepers.iter().any(|x: &Keeper| x.name == k.name) {
                return Err(at(&field("name"), format!("{:?} listed twice", k.name)));
            }
            let (n, key) = parse_vkey(&k.vkey, &[COSIGNATURE_V1_TYPE, ED25519_NOTE_TYPE])
                .map_err(|e| at(&field("vkey"), e))?;
            if n != k.name {
                return Err(at(&field("vkey"), format!("names {n:?}, not {:?}", k.name)));
            }
            if let Some(u) = &k.url {
                if !(u.starts_with("http://") || u.starts_with("https://")) {
                    return Err(at(&field("url"), format!("{u:?} is not an http(s) URL")));
                }
            }
            keepers.push(Keeper {
                name: k.name.clone(),
                key,
                url: k.url.clone(),
                key_source: k.key.clone(),
            });
        }
        let quorum = self.quorum.unwrap_or(keepers.len());
        if quorum > keepers.len() {
            return Err(at(
                "witness.quorum",
                format!("{quorum} exceeds the {} keepers listed", keepers.len()),
            ));
        }
        Ok((keepers, quorum))
    }
}

/// The `[kafka]` settings as librdkafka strings (strings, numbers and booleans only).
fn kafka_settings(
    raw: &BTreeMap<String, toml::Value>,
    at: At<'_>,
) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut kafka = BTreeMap::new();
    for (k, v) in raw {
        let v = match v {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            toml::Value::Float(f) => f.to_string(),
            _ => {
                return Err(at(
                    &format!("kafka.{k}"),
                    "want a string, number or boolean".into(),
                ))
            }
        };
        kafka.insert(k.clone(), v);
    }
    Ok(kafka)
}

impl Clock {
    /// The `[clock]` section resolved: unset, Unix milliseconds (no origin), or
    /// relative (with an optional RFC 3339 origin).
    fn resolve(raw: Option<RawClock>, at: At<'_>) -> Result<Clock, ConfigError> {
        Ok(match raw {
            None => Clock::Unset,
            Some(c) => match (c.record_time.as_str(), c.origin) {
                ("unix_ms", None) => Clock::UnixMs,
                ("unix_ms", Some(_)) => {
                    return Err(at(
                        "clock.origin",
                        "record_time \"unix_ms\" has its origin (the Unix epoch); origin is for \"relative\"".into(),
                    ))
                }
                ("relative", origin) => {
                    if let Some(o) = &origin {
                        check_rfc3339(o).map_err(|e| at("clock.origin", e))?;
                    }
                    Clock::Relative(origin)
                }
                (other, _) => {
                    return Err(at(
                        "clock.record_time",
                        format!("{other:?} (want \"unix_ms\" or \"relative\")"),
                    ))
                }
            },
        })
    }
}

impl Config {
    /// A new private key for `name` in this deployment: OS randomness, or derived from
    /// the public `[insecure] demo_seed` when the deployment declares one.
    pub fn new_key(&self, name: &str) -> SigningKey {
        keys::generate_for(self.insecure_demo_seed, name)
    }

    /// Reads and validates `audita.toml` and the registries it names.
    pub fn load(file: &Path) -> Result<Config, ConfigError> {
        let text = read_text(file)?;
        let dir = file
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        Self::parse(&text, file, &dir)
    }

    /// Validates configuration text read from `file` (registries resolved against
    /// `dir`).
    pub fn parse(text: &str, file: &Path, dir: &Path) -> Result<Config, ConfigError> {
        let shown = file.display().to_string();
        let at = |field: &str, reason: String| ConfigError {
            file: shown.clone(),
            field: field.to_string(),
            reason,
        };
        let raw: Raw = toml::from_str(text).map_err(|e| {
            let msg = e.message().replace('\n', " ");
            let field = e
                .span()
                .map(|s| {
                    let line = text[..s.start.min(text.len())].lines().count().max(1);
                    format!("line {line}")
                })
                .unwrap_or_else(|| "-".into());
            at(&field, msg)
        })?;
        if raw.format != CONFIG_FORMAT {
            return Err(at(
                "format",
                format!("{:?} (want {CONFIG_FORMAT:?})", raw.format),
            ));
        }
        check_name(&raw.log.origin).map_err(|e| at("log.origin", e.to_string()))?;
        let (vname, log_vkey) =
            parse_vkey(&raw.log.vkey, &[ED25519_NOTE_TYPE]).map_err(|e| at("log.vkey", e))?;
        if vname != raw.log.origin {
            return Err(at(
                "log.vkey",
                format!("names {vname:?}, not the origin {:?}", raw.log.origin),
            ));
        }
        let principals_path = dir.join(&raw.registry.principals);
        let principals = PrincipalRegistry::from_json(&read_text(&principals_path)?)
            .map_err(|e| in_file(&principals_path, e))?;
        let duties_path = dir.join(&raw.registry.duties);
        let duties = DutyRegistry::from_json(&read_text(&duties_path)?)
            .and_then(|d| d.validate().map(|()| d))
            .and_then(|d| d.check_roles(|p| principals.role(p)).map(|()| d))
            .map_err(|e| in_file(&duties_path, e))?;
        let predicates_path = raw.registry.predicates.as_ref().map(|p| dir.join(p));
        let predicates = match &predicates_path {
            None => None,
            Some(path) => Some(
                Predicates::from_json_with_zones(&read_text(path)?, &duties.zones)
                    .map_err(|e| in_file(path, e))?,
            ),
        };
        raw.check_bounds(&at)?;
        let (keepers, quorum) = raw.witness.resolve(&at)?;
        let kafka = kafka_settings(&raw.kafka, &at)?;
        if raw.engine.workers == 0 || raw.engine.workers > 256 {
            return Err(at(
                "engine.workers",
                format!("{} (want 1 to 256)", raw.engine.workers),
            ));
        }
        let clock = Clock::resolve(raw.clock, &at)?;
        let notifier = raw.notifier.map(|n| n.resolve(dir, &at)).transpose()?;
        Ok(Config {
            dir: dir.to_path_buf(),
            file: file.to_path_buf(),
            origin: raw.log.origin,
            log_vkey,
            log_key_source: raw.log.key,
            principals,
            principals_path,
            duties,
            duties_path,
            predicates,
            predicates_path,
            epoch_messages: raw.epoch.max_messages,
            epoch_age_ms: raw.epoch.max_age_ms,
            dedupe_horizon_ms: raw.retention.dedupe_horizon_ms,
            slicer_horizon_ms: raw.retention.slicer_horizon_ms,
            slicer_hold_ms: raw.retention.slicer_hold_ms,
            topic_prefix: raw.topics.prefix,
            keepers,
            quorum,
            kafka,
            engine_workers: raw.engine.workers,
            clock,
            insecure_demo_seed: raw.insecure.map(|i| i.demo_seed),
            notifier,
        })
    }

    /// The log's private key (the sealer only), checked against `log.vkey`.
    pub fn log_key(&self) -> Result<SigningKey, ConfigError> {
        let at = |reason: String| ConfigError {
            file: self.file.display().to_string(),
            field: "log.key".into(),
            reason,
        };
        let source = self
            .log_key_source
            .as_deref()
            .ok_or_else(|| at("not set: the sealer needs the log's private key".into()))?;
        let key =
            keys::load(source, &self.dir, Some(&self.origin)).map_err(|e| at(e.to_string()))?;
        if key.verifying_key() != self.log_vkey {
            return Err(at("the key does not match log.vkey".into()));
        }
        Ok(key)
    }

    /// The private keys of keepers this deployment runs in-process (`key` set).
    pub fn local_keeper_keys(&self) -> Result<Vec<(String, SigningKey)>, ConfigError> {
        let mut out = Vec::new();
        for (i, k) in self.keepers.iter().enumerate() {
            let Some(source) = &k.key_source else {
                continue;
            };
            let at = |reason: String| ConfigError {
                file: self.file.display().to_string(),
                field: format!("witness.keepers[{i}].key"),
                reason,
            };
            let key =
                keys::load(source, &self.dir, Some(&k.name)).map_err(|e| at(e.to_string()))?;
            if key.verifying_key() != k.key {
                return Err(at("the key does not match the keeper's vkey".into()));
            }
            out.push((k.name.clone(), key));
        }
        Ok(out)
    }

    /// Every public key a stage verifies with: the registry's principals (with their
    /// windows), the keepers and the log.
    pub fn keys(&self) -> Result<KeyRegistry, ConfigError> {
        let mut keys = self.principals.key_registry().map_err(|e| ConfigError {
            file: self.principals_path.display().to_string(),
            field: "-".into(),
            reason: e.to_string(),
        })?;
        for k in &self.keepers {
            keys.add_keeper(&k.name, k.key).map_err(|e| ConfigError {
                file: self.file.display().to_string(),
                field: "witness.keepers".into(),
                reason: e.to_string(),
            })?;
        }
        keys.add_log(&self.origin, self.log_vkey)
            .map_err(|e| ConfigError {
                file: self.file.display().to_string(),
                field: "log.origin".into(),
                reason: e.to_string(),
            })?;
        Ok(keys)
    }
}
