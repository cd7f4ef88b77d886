//! A deployment as the stages see it: public keys and registries, the duty registry,
//! the log's identity, topic names and the stages' settings, resolved once.

use crate::{Error, Result};
use audita_bus::{Bus, TopicSpec};
use audita_deploy::Config;
use audita_evidence::{KeyRegistry, PrincipalRegistry, SigningKey};
use audita_sealer::stage::SealerConfig;
use audita_topics::names as topics;
use audita_verdict::DutyRegistry;
use std::path::Path;
use std::time::Duration;

/// Partitions of each source topic (`audita.envelopes`, `audita.receipts`).
pub const SOURCE_PARTITIONS: u32 = 4;

/// Partitions of `audita.accepted` (the sealer's event-time watermark waits for all).
pub const ACCEPTED_PARTITIONS: u32 = 4;

/// Messages per epoch of the deployed sealer (unless the deployment sets another).
pub const EPOCH_MESSAGES: usize = 4096;

/// Everything the stages of one deployment share.
#[derive(Clone)]
pub struct Deployment {
    /// Public keys: principals (with validity windows), keepers, log.
    pub keys: KeyRegistry,
    /// The public principal registry in force (bound into every sealed epoch).
    pub registry: Option<PrincipalRegistry>,
    /// The duty registry.
    pub duties: DutyRegistry,
    /// Log origin (the checkpoint origin; the log key's name).
    pub origin: String,
    /// The log's signing key (the sealer only; `None` in other stages).
    pub log_key: Option<SigningKey>,
    /// Keepers run in this deployment's process (until keepers run as services).
    pub keepers: Vec<(String, SigningKey)>,
    /// Valid keeper co-signatures an epoch needs to count as witnessed.
    pub quorum: usize,
    /// Keepers run as tlog-witness services: (name, endpoint URL).
    pub remote_keepers: Vec<(String, String)>,
    /// Topic name prefix.
    pub prefix: String,
    /// Slicer retention horizon (record-time ms).
    pub horizon_ms: u64,
    /// Sealer dedupe horizon (record-time ms).
    pub dedupe_ms: u64,
    /// Slicer: minimum wall time a message is held.
    pub hold: Duration,
    /// Messages per epoch.
    pub epoch_messages: usize,
    /// Age of the oldest pending message that closes an epoch.
    pub epoch_age: Duration,
    /// Slicer: largest slice bundle published; a larger slice is an abstention.
    pub max_slice_bytes: usize,
    /// The adverse predicates (none: declarations arrive on `audita.adverse` from
    /// outside and are judged unchecked). With them the monitor stage detects
    /// incidents from the sealed record, and engine workers check every declaration.
    pub predicates: Option<audita_monitor::Predicates>,
    /// The wall-clock instant of record time 0 the deployment declares (`[clock]`:
    /// the Unix epoch when record time is Unix ms), which the sink's tables and
    /// reports use; `None`: the sink keeps its own (the first time it opens its
    /// directory).
    pub record_origin: Option<audita_sinks::tables::RecordOrigin>,
}

impl Deployment {
    /// The deployment `audita.toml` describes: registries, keys and settings from its
    /// files, nothing else. `sealer` also reads the private keys only the sealer
    /// holds (the log's, and those of keepers run in-process).
    pub fn from_config(c: &Config, sealer: bool) -> Result<Deployment> {
        let keys = c.keys()?;
        let (log_key, keepers) = if sealer {
            (Some(c.log_key()?), c.local_keeper_keys()?)
        } else {
            (None, Vec::new())
        };
        if let Some(seed) = c.insecure_demo_seed {
            tracing::warn!(
                seed,
                "INSECURE: this deployment's keys derive from a public seed ([insecure] demo_seed): tests and demos only"
            );
        }
        Ok(Deployment {
            keys,
            registry: Some(c.principals.clone()),
            duties: c.duties.clone(),
            origin: c.origin.clone(),
            log_key,
            keepers,
            quorum: c.quorum,
            remote_keepers: c
                .keepers
                .iter()
                .filter(|k| k.key_source.is_none())
                .filter_map(|k| k.url.clone().map(|u| (k.name.clone(), u)))
                .collect(),
            prefix: c.topic_prefix.clone(),
            horizon_ms: c.slicer_horizon_ms,
            dedupe_ms: c.dedupe_horizon_ms,
            hold: Duration::from_millis(c.slicer_hold_ms),
            epoch_messages: c.epoch_messages,
            epoch_age: Duration::from_millis(c.epoch_age_ms),
            max_slice_bytes: audita_bus::MAX_RECORD_BYTES,
            // An empty predicate file (what `audita init` writes) declares nothing: no
            // monitor runs and operator declarations are taken unchecked, as before.
            predicates: c.predicates.clone().filter(|p| !p.predicates.is_empty()),
            record_origin: c
                .clock
                .record_origin()
                .map(|o| audita_sinks::tables::RecordOrigin::parse(&o))
                .transpose()
                .map_err(|e| Error::Invalid(format!("{}: clock.origin: {e}", c.file.display())))?,
        })
    }

    /// A throw-away deployment held in memory, for one process's run (benchmarks and
    /// load tests): the principals' public keys and the duty registry given, the log
    /// and each of `keepers` on fresh keys from OS randomness, and a fresh origin
    /// (`audita.ephemeral/run-<random>`), so no two runs sign under one identity.
    pub fn ephemeral(
        principals: KeyRegistry,
        duties: DutyRegistry,
        prefix: &str,
        keepers: &[&str],
    ) -> Result<Deployment> {
        let fresh = audita_deploy::keys::generate;
        let origin = format!("audita.ephemeral/run-{}", audita_deploy::keys::run_id());
        let mut keys = principals;
        let log_key = fresh();
        keys.add_log(&origin, log_key.verifying_key())
            .map_err(|e| Error::Invalid(format!("log key: {e}")))?;
        let mut local = Vec::new();
        for k in keepers {
            let key = fresh();
            keys.add_keeper(k, key.verifying_key())
                .map_err(|e| Error::Invalid(format!("keeper {k}: {e}")))?;
            local.push((k.to_string(), key));
        }
        Ok(Deployment {
            keys,
            registry: None,
            duties,
            origin,
            log_key: Some(log_key),
            quorum: local.len(),
            remote_keepers: Vec::new(),
            keepers: local,
            prefix: prefix.to_string(),
            horizon_ms: audita_slicer::stage::DEFAULT_HORIZON_MS,
            dedupe_ms: audita_sealer::stage::DEFAULT_DEDUPE_HORIZON_MS,
            hold: audita_slicer::stage::DEFAULT_HOLD,
            epoch_messages: EPOCH_MESSAGES,
            epoch_age: Duration::from_millis(100),
            max_slice_bytes: audita_bus::MAX_RECORD_BYTES,
            predicates: None,
            record_origin: None,
        })
    }

    /// Full name of a topic.
    pub fn topic(&self, base: &str) -> String {
        format!("{}{}", self.prefix, base)
    }

    /// What a stage downstream of the sealer reads (`audita.epochs` joined with
    /// `audita.accepted`, and `others`), from the beginning, in consumer groups of its
    /// own named after `stage`, this process and this start of the stage: a stage
    /// reopened in the same process (its supervisor after a fault) rebuilds its state
    /// from the beginning too, never from the positions its previous start committed
    /// (which only a member rejoining the same group may resume from).
    pub fn sealed_input(
        &self,
        bus: &Bus,
        stage: &str,
        others: &[&str],
    ) -> Result<audita_join::SealedInput> {
        static STARTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let start = STARTS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let group = format!("{}{stage}-{}-{start}", self.prefix, std::process::id());
        let mut names = vec![self.topic(topics::EPOCHS)];
        names.extend(others.iter().map(|t| self.topic(t)));
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let records = bus.consumer(&group, &names)?;
        let accepted = bus.consumer(
            &format!("{group}-accepted"),
            &[&self.topic(topics::ACCEPTED)],
        )?;
        Ok(audita_join::SealedInput::new(
            records,
            accepted,
            &self.topic(topics::EPOCHS),
        ))
    }

    /// [`Self::sealed_input`] for a slicer cluster member: every seal and `others`,
    /// but of `audita.accepted` only the partitions `own` (assigned, from the
    /// beginning), joined as a share ([`audita_join::SealedInput::of_partitions`]).
    pub fn sealed_share(
        &self,
        bus: &Bus,
        stage: &str,
        others: &[&str],
        own: &[u32],
    ) -> Result<audita_join::SealedInput> {
        static STARTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let start = STARTS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let group = format!(
            "{}{stage}-share-{}-{start}",
            self.prefix,
            std::process::id()
        );
        let mut names = vec![self.topic(topics::EPOCHS)];
        names.extend(others.iter().map(|t| self.topic(t)));
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let records = bus.consumer(&group, &names)?;
        let accepted = bus.consumer_of(
            &format!("{group}-accepted"),
            &self.topic(topics::ACCEPTED),
            own,
        )?;
        Ok(audita_join::SealedInput::of_partitions(
            records,
            accepted,
            &self.topic(topics::EPOCHS),
            own,
        ))
    }

    /// Creates the pipeline's topics (existing ones are kept).
    pub fn ensure_topics(&self, bus: &Bus) -> Result<()> {
        let spec = |base: &str, partitions: u32| TopicSpec {
            name: self.topic(base),
            partitions,
        };
        bus.ensure_topics(&[
            spec(topics::ENVELOPES, SOURCE_PARTITIONS),
            spec(topics::RECEIPTS, SOURCE_PARTITIONS),
            spec(topics::ACCEPTED, ACCEPTED_PARTITIONS),
            spec(topics::SUSPECT, 1),
            spec(topics::EPOCHS, 1),
            spec(topics::ADVERSE, 1),
            spec(topics::SLICES, 4),
            spec(topics::VERDICTS, 4),
            spec(topics::ALERTS, 1),
        ])?;
        Ok(())
    }

    /// The sealer's configuration writing the record into `dir`.
    pub fn sealer_config(&self, dir: &Path) -> Result<SealerConfig> {
        Ok(SealerConfig {
            dir: dir.to_path_buf(),
            origin: self.origin.clone(),
            log_key: self.log_key.clone().ok_or_else(|| {
                Error::Invalid("the sealer needs the log's private key (log.key)".into())
            })?,
            keepers: self.keepers.clone(),
            keys: self.keys.clone(),
            epoch_messages: self.epoch_messages,
            epoch_age: self.epoch_age,
            topic_prefix: self.prefix.clone(),
            input_partitions: ACCEPTED_PARTITIONS as usize,
            registry: self.registry.clone(),
        })
    }

    /// How ingest is laid out on this deployment's topics.
    pub fn ingest_layout(&self) -> audita_ingest::Layout {
        audita_ingest::Layout {
            names: audita_ingest::Topics {
                prefix: self.prefix.clone(),
            },
            source_partitions: 2 * SOURCE_PARTITIONS,
            accepted_partitions: ACCEPTED_PARTITIONS,
            watermark_every: Duration::from_millis(100),
        }
    }
}

/// The sealer's and slicer's memory bounds, as flags (`audita stage`, `audita-load load`).
/// Unset flags keep the deployment's `[retention]` values (or the defaults).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct Retention {
    /// Slicer: record time (ms) behind the watermark for which the slicer keeps
    /// messages (the oldest citation and the latest declaration a fleet makes must
    /// fit in it; default 120000).
    #[arg(long)]
    pub horizon_ms: Option<u64>,
    /// Sealer: record time (ms) behind the watermark for which the sealer remembers
    /// sealed ids (an envelope arriving later is quarantined as `late`; default
    /// 600000).
    #[arg(long)]
    pub dedupe_horizon_ms: Option<u64>,
    /// Slicer: minimum wall time (ms) a message is held before eviction (default
    /// 60000).
    #[arg(long)]
    pub hold_ms: Option<u64>,
}

impl Retention {
    /// One-line error for a horizon too short to cover re-deliveries.
    pub fn validate(&self) -> Result<()> {
        for (flag, ms) in [
            ("--horizon-ms", self.horizon_ms),
            ("--dedupe-horizon-ms", self.dedupe_horizon_ms),
        ] {
            if let Some(ms) = ms.filter(|ms| *ms < 10_000) {
                return Err(Error::Invalid(format!(
                    "{flag} {ms} is below 10000: re-deliveries and late declarations would \
                     fall outside it"
                )));
            }
        }
        Ok(())
    }

    /// Validates and sets the bounds given as flags (unset ones keep the deployment's).
    pub fn apply(&self, d: &mut Deployment) -> Result<()> {
        self.validate()?;
        if let Some(v) = self.horizon_ms {
            d.horizon_ms = v;
        }
        if let Some(v) = self.dedupe_horizon_ms {
            d.dedupe_ms = v;
        }
        if let Some(v) = self.hold_ms {
            d.hold = Duration::from_millis(v);
        }
        Ok(())
    }

    /// The bounds given as flags, for a child process.
    pub fn flags(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (flag, v) in [
            ("--horizon-ms", self.horizon_ms),
            ("--dedupe-horizon-ms", self.dedupe_horizon_ms),
            ("--hold-ms", self.hold_ms),
        ] {
            if let Some(v) = v {
                out.push(flag.to_string());
                out.push(v.to_string());
            }
        }
        out
    }
}
