//! The pipeline wired from its stages: one code path, two transports.
//!
//! `audita demo` runs every stage as a thread of one process over the embedded bus;
//! `audita stage NAME --config DIR/audita.toml` runs one stage as its own process over
//! Apache Kafka, and `audita feed` publishes the simulated fleet as a client of a
//! deployment. Every stage builds the same [`Deployment`] from the deployment's files
//! ([`Deployment::from_config`]: registries, keys, settings, nothing else), so a Kafka
//! run and an embedded run of one deployment produce identical verdict rows.

use anyhow::{bail, Context, Result};
use audita_bus::{topics, Bus, Producer, TopicSpec};
use audita_deploy::Config;
use audita_engine_workers::VerdictMessage;
use audita_evidence::{derive_signing_key, KeyRegistry, PrincipalRegistry, SigningKey};
use audita_load_tests::fleet::{self, Fleet};
use audita_sealer::stage::{SealerConfig, SealerStage};
use audita_sinks::metrics::Metrics;
use audita_sinks::parquet::{ParquetSink, Rotation};
use audita_sinks::VerdictRow;
use audita_slicer::stage::SlicerStage;
use audita_verdict::DutyRegistry;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The log origin of a seed-derived (insecure, reproducible) deployment: it names
/// the seed, so two runs of different seeds never sign under one identity.
pub fn seeded_origin(seed: u64) -> String {
    format!("audita.demo/seed-{seed}")
}
/// Keepers co-signing every checkpoint of a seed-derived deployment.
pub const KEEPERS: [&str; 2] = ["operator.example/keeper", "insurer.example/keeper"];

/// Partitions of each source topic (`audita.envelopes`, `audita.receipts`).
pub const SOURCE_PARTITIONS: u32 = 4;

/// Partitions of `audita.accepted` (the sealer's event-time watermark waits for all).
pub const ACCEPTED_PARTITIONS: u32 = 4;

/// The sealer's and slicer's memory bounds, as flags (`audita stage`, `audita load`).
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
                bail!(
                    "{flag} {ms} is below 10000: re-deliveries and late declarations would \
                     fall outside it"
                );
            }
        }
        Ok(())
    }

    /// Validates and sets the bounds given as flags.
    pub fn apply_given(&self, d: &mut Deployment) -> Result<()> {
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

    /// Validates and sets the deployment's bounds (unset flags: the defaults).
    pub fn apply(&self, d: &mut Deployment) -> Result<()> {
        self.apply_given(d)
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

/// Everything the stages of one deployment share.
pub struct Deployment {
    /// The simulated fleet this deployment feeds (empty for a deployment of a real
    /// fleet: its principals publish themselves).
    pub fleet: Fleet,
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
}

impl Deployment {
    /// The simulated fleet of `cells` cells from `seed` on keys derived from the seed
    /// (tests and benchmarks only: the log is `audita.demo/seed-<seed>`, so a
    /// reproducible run never signs under another run's identity).
    pub fn new(cells: usize, seed: u64, prefix: &str) -> Result<Deployment> {
        if cells == 0 {
            bail!("--cells must be at least 1");
        }
        Deployment::from_fleet(fleet::build(&fleet::DEMO_MIX, cells, seed), seed, prefix)
    }

    /// The deployment of any fleet signed with seed-derived keys (the load
    /// generator's): log and keeper keys derived from `seed` too, origin naming it.
    pub fn from_fleet(fleet: Fleet, seed: u64, prefix: &str) -> Result<Deployment> {
        let origin = seeded_origin(seed);
        let mut keys = fleet.keys.clone();
        let log_key = derive_signing_key(seed, &origin);
        keys.add_log(&origin, log_key.verifying_key())
            .context("log key")?;
        let mut keepers = Vec::new();
        for k in KEEPERS {
            let key = derive_signing_key(seed, k);
            keys.add_keeper(k, key.verifying_key())
                .context("keeper key")?;
            keepers.push((k.to_string(), key));
        }
        let duties = fleet.duties().context("fleet duty registry")?;
        Ok(Deployment {
            fleet,
            keys,
            registry: None,
            duties,
            origin,
            log_key: Some(log_key),
            keepers,
            prefix: prefix.to_string(),
            horizon_ms: audita_slicer::stage::DEFAULT_HORIZON_MS,
            dedupe_ms: audita_sealer::stage::DEFAULT_DEDUPE_HORIZON_MS,
            hold: audita_slicer::stage::DEFAULT_HOLD,
            epoch_messages: EPOCH_MESSAGES,
            epoch_age: Duration::from_millis(200),
        })
    }

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
            fleet: Fleet {
                keys: KeyRegistry::new(),
                roles: BTreeMap::new(),
                cells: Vec::new(),
                duties_json: String::new(),
            },
            keys,
            registry: Some(c.principals.clone()),
            duties: c.duties.clone(),
            origin: c.origin.clone(),
            log_key,
            keepers,
            prefix: c.topic_prefix.clone(),
            horizon_ms: c.slicer_horizon_ms,
            dedupe_ms: c.dedupe_horizon_ms,
            hold: Duration::from_millis(c.slicer_hold_ms),
            epoch_messages: c.epoch_messages,
            epoch_age: Duration::from_millis(c.epoch_age_ms),
        })
    }

    /// A deployment of a real fleet that feeds `fleet` as one of its clients: the
    /// deployment's configuration, with the fleet's envelopes to publish.
    pub fn with_fleet(mut self, fleet: Fleet) -> Deployment {
        self.fleet = fleet;
        self
    }

    /// Full name of a topic.
    pub fn topic(&self, base: &str) -> String {
        format!("{}{}", self.prefix, base)
    }

    /// Creates the pipeline's topics.
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
        ])?;
        Ok(())
    }

    /// The sealer's configuration writing the record into `dir`.
    pub fn sealer_config(&self, dir: &Path, epoch_messages: usize) -> Result<SealerConfig> {
        Ok(SealerConfig {
            dir: dir.to_path_buf(),
            origin: self.origin.clone(),
            log_key: self.log_key.clone().ok_or_else(|| {
                anyhow::anyhow!("the sealer needs the log's private key (log.key)")
            })?,
            keepers: self.keepers.clone(),
            keys: self.keys.clone(),
            epoch_messages,
            epoch_age: self.epoch_age,
            topic_prefix: self.prefix.clone(),
            input_partitions: ACCEPTED_PARTITIONS as usize,
            registry: self.registry.clone(),
        })
    }

    /// Number of incidents the fleet will declare.
    pub fn incidents(&self) -> usize {
        self.fleet
            .cells
            .iter()
            .filter(|c| c.adverse.is_some())
            .count()
    }
}

/// Publishes the fleet: envelopes and receipts in time order, each cell's adverse
/// declaration right after the messages up to its `t*`. Calls `progress` per message.
pub fn feed(
    d: &Deployment,
    bus: &Bus,
    rate: Option<f64>,
    mut progress: impl FnMut(usize),
) -> Result<()> {
    let mut p = bus.producer()?;
    let started = std::time::Instant::now();
    let mut decls: Vec<(u64, Vec<u8>, String)> = d
        .fleet
        .cells
        .iter()
        .filter_map(|c| c.adverse.as_ref())
        .map(|a| {
            (
                a.t_star_ms,
                serde_json::to_vec(a).unwrap_or_default(),
                a.incident.clone(),
            )
        })
        .collect();
    decls.sort();
    let mut next = 0;
    let (env_topic, rec_topic, adv_topic) = (
        d.topic(topics::ENVELOPES),
        d.topic(topics::RECEIPTS),
        d.topic(topics::ADVERSE),
    );
    let send = |p: &mut Box<dyn Producer>, topic: &str, key: &[u8], bytes: &[u8]| -> Result<()> {
        loop {
            match p.send(topic, key, bytes) {
                Ok(()) => return Ok(()),
                Err(e) if e.is_transient() => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => return Err(e.into()),
            }
        }
    };
    for (i, (env, receipt)) in d.fleet.envelopes_in_time_order().into_iter().enumerate() {
        let t = env.envelope().timestamp;
        while next < decls.len() && decls[next].0 < t {
            send(&mut p, &adv_topic, decls[next].2.as_bytes(), &decls[next].1)?;
            next += 1;
        }
        send(
            &mut p,
            &env_topic,
            env.envelope().author.as_str().as_bytes(),
            env.as_bytes(),
        )?;
        send(
            &mut p,
            &rec_topic,
            receipt.recipient().as_str().as_bytes(),
            receipt.as_bytes(),
        )?;
        progress(i + 1);
        if let Some(rate) = rate.filter(|r| *r > 0.0) {
            // Paced feed: flush what is due so the stream really arrives over time.
            let due = Duration::from_secs_f64((i + 1) as f64 / rate);
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                p.flush()?;
                std::thread::sleep(wait);
            }
        }
    }
    for (_, bytes, name) in &decls[next..] {
        send(&mut p, &adv_topic, name.as_bytes(), bytes)?;
    }
    p.flush()?;
    Ok(())
}

/// Runs ingest until stopped/idle.
pub fn run_ingest(
    d: &Deployment,
    bus: &Bus,
    stop: &AtomicBool,
    idle: Option<Duration>,
    m: &Metrics,
) -> Result<u64> {
    let mut c = bus.consumer(
        &d.topic("ingest"),
        &[&d.topic(topics::ENVELOPES), &d.topic(topics::RECEIPTS)],
    )?;
    let mut p = bus.producer()?;
    let names = audita_ingest::Topics {
        prefix: d.prefix.clone(),
    };
    let ingest = std::cell::RefCell::new(audita_ingest::BatchIngest::new(
        &d.keys,
        names,
        audita_ingest::Watermarks::new(
            2 * SOURCE_PARTITIONS,
            ACCEPTED_PARTITIONS,
            Duration::from_millis(100),
        ),
    ));
    let n = audita_bus::pump_with(
        c.as_mut(),
        p.as_mut(),
        stop,
        256,
        idle,
        |del, _| {
            ingest.borrow_mut().take(del);
            Ok(())
        },
        |out| {
            let (accepted, quarantined) = ingest.borrow_mut().flush(out)?;
            m.ingest_envelopes
                .with_label_values(&["accepted"])
                .inc_by(accepted);
            m.ingest_envelopes
                .with_label_values(&["suspect"])
                .inc_by(quarantined);
            Ok(())
        },
    )?;
    Ok(n)
}

/// Messages per epoch of the deployed sealer.
pub const EPOCH_MESSAGES: usize = 256;

/// Runs the sealer until stopped/idle.
pub fn run_sealer(
    d: &Deployment,
    bus: &Bus,
    dir: &Path,
    stop: &AtomicBool,
    idle: Option<Duration>,
    m: &Metrics,
) -> Result<()> {
    run_sealer_with(d, bus, dir, d.epoch_messages, stop, idle, m)
}

/// Runs the sealer closing epochs of `epoch_messages` until stopped/idle.
pub fn run_sealer_with(
    d: &Deployment,
    bus: &Bus,
    dir: &Path,
    epoch_messages: usize,
    stop: &AtomicBool,
    idle: Option<Duration>,
    m: &Metrics,
) -> Result<()> {
    let live = m.clone();
    let mut seen = audita_sealer::stage::SealerStats::default();
    let mut stage = SealerStage::open(d.sealer_config(dir, epoch_messages)?)?
        .with_horizon(d.dedupe_ms)
        .with_observer(Box::new(move |s, watermark| {
            live.sealer_messages.inc_by(s.sealed - seen.sealed);
            live.sealer_epochs.inc_by(s.epochs - seen.epochs);
            live.sealer_duplicates
                .inc_by(s.duplicates - seen.duplicates);
            live.sealer_late.inc_by(s.late - seen.late);
            live.sealer_watermark.set(watermark as i64);
            seen = *s;
        }));
    let mut c = bus.consumer(&d.topic("sealer"), &[&d.topic(topics::ACCEPTED)])?;
    let mut p = bus.producer()?;
    stage.run(c.as_mut(), p.as_mut(), stop, idle)?;
    Ok(())
}

/// Runs the slicer until stopped/idle.
pub fn run_slicer(
    d: &Deployment,
    bus: &Bus,
    quiet_wait: Duration,
    stop: &AtomicBool,
    idle: Option<Duration>,
    m: &Metrics,
) -> Result<()> {
    let live = m.clone();
    let mut seen = audita_slicer::stage::SlicerStats::default();
    let mut stage = SlicerStage::new(1, &d.prefix, quiet_wait)
        .with_horizon(d.horizon_ms, d.hold)
        .with_registry(d.duties.clone())
        .with_observer(Box::new(move |s, waits| {
            live.slicer_incidents
                .inc_by((s.emitted - seen.emitted) as u64);
            live.slicer_graph_messages.set(s.graph_messages as i64);
            live.slicer_retained_epochs.set(s.retained_epochs as i64);
            live.slicer_evicted.inc_by(s.evicted - seen.evicted);
            live.slicer_waiting.set(s.waiting as i64);
            live.slicer_unresolved
                .inc_by(s.unresolved - seen.unresolved);
            for w in waits {
                live.slicer_slice_wait.observe(w.as_secs_f64());
            }
            seen = *s;
        }));
    let group = format!("{}slicer-{}", d.prefix, std::process::id());
    let mut c = bus.consumer(
        &group,
        &[&d.topic(topics::EPOCHS), &d.topic(topics::ADVERSE)],
    )?;
    let mut p = bus.producer()?;
    stage.run(c.as_mut(), p.as_mut(), stop, idle)?;
    for (name, unsealed) in stage.waiting() {
        tracing::warn!(incident = %name, unsealed_anchors = unsealed, "declaration still waiting for its anchors");
    }
    Ok(())
}

/// Runs one engine worker until stopped/idle.
pub fn run_engine(
    d: &Deployment,
    bus: &Bus,
    stop: &AtomicBool,
    idle: Option<Duration>,
    m: &Metrics,
) -> Result<u64> {
    let mut c = bus.consumer(&d.topic("engine-workers"), &[&d.topic(topics::SLICES)])?;
    let mut p = bus.producer()?;
    let n = audita_engine_workers::run_observed(
        c.as_mut(),
        p.as_mut(),
        &d.keys,
        &d.duties,
        &d.prefix,
        stop,
        idle,
        |took| {
            m.engine_judge.observe(took.as_secs_f64());
            m.engine_verdicts.inc();
        },
    )?;
    Ok(n)
}

/// What the sink collected.
#[derive(Default)]
pub struct Collected {
    /// One verdict per incident (later duplicates of an incident are identical and dropped).
    pub verdicts: BTreeMap<String, VerdictMessage>,
    /// Abstentions by incident, with the reason.
    pub abstained: BTreeMap<String, String>,
    /// Parquet files written.
    pub files: Vec<PathBuf>,
}

/// Runs the sink: verdicts to Parquet (and to `on_verdict`) until stopped/idle or
/// until `expect` incidents arrived.
///
/// Each record is journaled durably before its offset is committed; on restart the
/// journal's verdicts are taken again (`on_verdict` sees them, `expect` counts them)
/// and those whose rows are not in a completed Parquet file are written again, so a
/// SIGKILL at any point loses no row and writes none twice.
#[allow(clippy::too_many_arguments)]
pub fn run_sink(
    d: &Deployment,
    bus: &Bus,
    out_dir: &Path,
    expect: Option<usize>,
    stop: &AtomicBool,
    idle: Option<Duration>,
    m: &Metrics,
    mut on_verdict: impl FnMut(&VerdictMessage),
) -> Result<Collected> {
    std::fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let parquet_dir = out_dir.join("verdicts");
    let mut sink = ParquetSink::new(&parquet_dir, Rotation::default())?;
    let in_parquet = audita_sinks::parquet::incidents_in(&parquet_dir)?;
    let (mut journal, past) = audita_sinks::journal::Journal::open(&out_dir.join("journal.jsonl"))?;
    let mut got = Collected::default();
    // Takes one verdict-topic record; `fresh` = not yet in the journal.
    let mut take = |payload: &[u8],
                    fresh: bool,
                    got: &mut Collected,
                    sink: &mut ParquetSink|
     -> Result<bool> {
        let v: serde_json::Value =
            serde_json::from_slice(payload).context("verdict record is not JSON")?;
        let incident = v["incident"].as_str().unwrap_or_default().to_string();
        if got.verdicts.contains_key(&incident) || got.abstained.contains_key(&incident) {
            return Ok(false);
        }
        if fresh {
            journal.append(payload)?;
        }
        if let Some(reason) = v.get("abstained").and_then(|r| r.as_str()) {
            got.abstained.insert(incident, reason.to_string());
        } else {
            let msg: VerdictMessage = serde_json::from_value(v).context("verdict record")?;
            if fresh || !in_parquet.contains_key(&incident) {
                sink.write(&msg.rows)?;
                m.sinks_rows.inc_by(msg.rows.len() as u64);
            }
            on_verdict(&msg);
            got.verdicts.insert(incident, msg);
        }
        Ok(true)
    };
    for record in &past {
        take(record, false, &mut got, &mut sink)?;
    }
    let mut c = bus.consumer(&d.topic("sinks"), &[&d.topic(topics::VERDICTS)])?;
    let mut idle_since = std::time::Instant::now();
    while !stop.load(Ordering::SeqCst) {
        if expect.is_some_and(|n| got.verdicts.len() + got.abstained.len() >= n) {
            break;
        }
        let Some(del) = c.poll(Duration::from_millis(50))? else {
            sink.tick()?;
            if idle.is_some_and(|i| idle_since.elapsed() >= i) {
                break;
            }
            continue;
        };
        idle_since = std::time::Instant::now();
        take(&del.payload, true, &mut got, &mut sink)?;
        c.commit(&del)?;
    }
    drop(take);
    got.files = sink.finish()?;
    Ok(got)
}

/// All rows of a collection, sorted (the comparison key of Kafka vs embedded runs).
pub fn rows(c: &Collected) -> Vec<VerdictRow> {
    let mut rows: Vec<VerdictRow> = c.verdicts.values().flat_map(|v| v.rows.clone()).collect();
    rows.sort_by(|a, b| (&a.incident, &a.principal).cmp(&(&b.incident, &b.principal)));
    rows
}

/// Runs every stage as a thread over `bus` until all expected verdicts arrived.
pub fn run_all(
    d: Arc<Deployment>,
    bus: &Bus,
    out_dir: &Path,
    workers: usize,
    m: &Metrics,
    mut on_fed: impl FnMut(usize),
    on_verdict: impl FnMut(&VerdictMessage),
) -> Result<Collected> {
    d.ensure_topics(bus)?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    let spawn = |name: &str, f: Box<dyn FnOnce() -> Result<()> + Send>| {
        std::thread::Builder::new()
            .name(name.to_string())
            .spawn(f)
            .expect("spawn stage thread")
    };
    {
        let (d, bus, stop, m) = (d.clone(), bus.clone(), stop.clone(), m.clone());
        handles.push(spawn(
            "ingest",
            Box::new(move || run_ingest(&d, &bus, &stop, None, &m).map(|_| ())),
        ));
    }
    {
        let (d, bus, stop, m, dir) = (
            d.clone(),
            bus.clone(),
            stop.clone(),
            m.clone(),
            out_dir.join("record"),
        );
        handles.push(spawn(
            "sealer",
            Box::new(move || run_sealer(&d, &bus, &dir, &stop, None, &m)),
        ));
    }
    {
        let (d, bus, stop, m) = (d.clone(), bus.clone(), stop.clone(), m.clone());
        handles.push(spawn(
            "slicer",
            Box::new(move || run_slicer(&d, &bus, Duration::from_secs(2), &stop, None, &m)),
        ));
    }
    for i in 0..workers.max(1) {
        let (d, bus, stop, m) = (d.clone(), bus.clone(), stop.clone(), m.clone());
        handles.push(spawn(
            &format!("engine-{i}"),
            Box::new(move || run_engine(&d, &bus, &stop, None, &m).map(|_| ())),
        ));
    }
    feed(&d, bus, None, &mut on_fed)?;
    let expect = d.incidents();
    let collected = run_sink(
        &d,
        bus,
        out_dir,
        Some(expect),
        &AtomicBool::new(false),
        Some(Duration::from_secs(120)),
        m,
        on_verdict,
    );
    stop.store(true, Ordering::SeqCst);
    for h in handles {
        match h.join() {
            Ok(r) => r?,
            Err(_) => bail!("a stage thread panicked"),
        }
    }
    collected
}
