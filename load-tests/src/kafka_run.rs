//! `audita-load load`: the sustained fleet load benchmark over Apache Kafka.
//!
//! One run measures, side by side: the offered and the sustained end-to-end rate
//! (envelopes sealed and published by the sealer per second) as a ratio of the
//! single-core Ed25519 `verify_strict` limit measured in the same process; the latency
//! from each incident's adverse instant (`t*`, when the cell's last message stamped up
//! to it is offered) to its verdict on `audita.verdicts` (p50, p99); the incident
//! alerting latencies (sealed report → alert, `t*` → alert, alert → verdict); and the
//! resident memory and CPU of every stage, sampled each second.
//!
//! Design constraints:
//! - Every stage runs as its own process (`audita-load load --stage NAME`), exactly as
//!   deployed: ingest, sealer, slicer, monitor, `--workers` engine workers, sink. The
//!   fleet declares nothing: the monitor detects every incident from the sealed
//!   record with the load's predicate file, and a verdict of an incident no cell
//!   planted is counted as a false incident. The run
//!   creates a throw-away deployment directory first (`audita init`'s code: fresh
//!   log and keeper keys from OS randomness, a per-run origin) and registers the
//!   load's principals by their public keys; each stage reads only that directory,
//!   and nothing else passes between processes except through Kafka. The generator
//!   is the fleet, a client: it signs with keys derived from `--seed` (reproducible
//!   load, public keys — a benchmark's devices, never the deployment's keys).
//! - The load is pre-signed before the timed phase ([`crate::load`]) and
//!   offered at its record times; the achieved offered rate is what is reported.
//! - Bounded and loopback only: the bootstrap must be a loopback address, the load is
//!   bounded by [`crate::load::LoadConfig::validate`], the drain phase by
//!   `--drain-timeout`; the child processes are killed at the end (by their pids).
//! - Topics get a fresh prefix per run, so runs never see each other's records.

use crate::host::{
    ed25519_single_core_per_s, find_broker, machine_busy_s, percentile, proc_cpu_s, proc_rss_mib,
};
use crate::load::{feed, FeedStats, Lane, Load, LoadConfig, Placement};
use audita_bus::Bus;
use audita_pipeline::metrics::Metrics;
use audita_pipeline::{Deployment, Retention, EPOCH_MESSAGES};
use audita_topics::names as topics;
use audita_topics::EpochSeal;
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{IsTerminal as _, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod nemesis;

/// A stage process of the load run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LoadStage {
    /// Signature and form checks.
    Ingest,
    /// Epochs, checkpoints, durable record.
    Sealer,
    /// Citation graph and incident slices.
    Slicer,
    /// Adverse predicates over the sealed record: alerts and declarations.
    Monitor,
    /// Verdicts (one process per worker).
    Engine,
    /// Parquet verdict files.
    Sink,
}

/// Where incident cells sit in record time (`crate::load::Placement`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum IncidentTime {
    /// At the current record time: each incident's window also holds the fleet's
    /// traffic of those seconds (realistic; slices grow with the fleet).
    Live,
    /// Each cell in its own record-time slot: its window holds only its messages.
    OwnSlot,
}

/// Arguments of `audita-load load`.
#[derive(Args, Clone)]
pub struct LoadArgs {
    /// Robots in the warehouse.
    #[arg(long, default_value_t = 1_000)]
    pub robots: usize,
    /// Commands per second per robot (each answered by an actuation report).
    #[arg(long, default_value_t = 10.0)]
    pub rate: f64,
    /// Sensor reports per second per robot.
    #[arg(long, default_value_t = 1.0)]
    pub report_rate: f64,
    /// Facility incidents (cells whose adverse predicate fires) injected per second.
    #[arg(long, default_value_t = 0.5)]
    pub incident_rate: f64,
    /// Length of the offered load, in seconds.
    #[arg(long, default_value_t = 60.0)]
    pub duration: f64,
    /// Seed of keys, phases and scenarios.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Where incident cells sit in record time.
    #[arg(long, value_enum, default_value = "live")]
    pub incident_time: IncidentTime,
    /// How long the slicer lets a declaration wait for the event-time watermark
    /// before judging it as it stands (the `audita stage slicer` default).
    #[arg(long, default_value_t = 15_000)]
    pub slicer_wait_ms: u64,
    /// Messages per sealed epoch (the deployed sealer closes 256).
    #[arg(long, default_value_t = EPOCH_MESSAGES)]
    pub epoch_messages: usize,
    /// Sealer and slicer memory bounds (as `audita stage`).
    #[command(flatten)]
    pub retention: Retention,
    /// Kafka bootstrap on this machine (host:port; loopback only).
    #[arg(long)]
    pub bootstrap: Option<String>,
    /// The broker's process id, to account its CPU beside the stages' (default: the
    /// local `kafka.Kafka` java process, if exactly one runs).
    #[arg(long)]
    pub broker_pid: Option<u32>,
    /// A librdkafka setting for every Kafka client of the run, `KEY=VALUE`
    /// (repeatable; e.g. `compression.type=none`), applied after Audita's defaults.
    #[arg(long = "kafka", value_name = "KEY=VALUE")]
    pub kafka: Vec<String>,
    /// Engine worker processes.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Slicer processes: 1, or a cluster of up to 4 in timely's cluster mode over
    /// loopback (the detectors then run as a monitor process of their own).
    #[arg(long, default_value_t = 1)]
    pub slicer_processes: usize,
    /// After the load ends, wait at most this many seconds for the pipeline to drain.
    #[arg(long, default_value_t = 300.0)]
    pub drain_timeout: f64,
    /// Write an SVG plot of RSS and throughput over time here.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Write the full measurement (timeline included) as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// No progress display.
    #[arg(long)]
    pub quiet: bool,
    /// Keep the sink's output here (verdict tables, reports, journal) instead of
    /// discarding it with the run's scratch directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Keep every stage process's log (`<stage>.log`, its `RUST_LOG` output) here
    /// instead of discarding it with the run's scratch directory.
    #[arg(long)]
    pub logs: Option<PathBuf>,
    /// Render a measurement saved with `--json` again (table to stdout, `--svg`)
    /// instead of running one.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Render the capacity curve of measurements saved with `--json`, one per fleet
    /// size (repeat the flag): a table to stdout and, with `--svg`, the plot, the
    /// knee marked.
    #[arg(long, value_name = "FILE.json")]
    pub curve: Vec<PathBuf>,
    /// SIGKILL and restart every stage process once while the load is offered
    /// (ingest, sealer, slicer, monitor, engine-0, sink, evenly spaced over the
    /// feed); the report then says how long each took to recover, and whether
    /// anything was lost or sealed twice.
    #[arg(long)]
    pub kill_each: bool,
    /// Faults to inject while the load is offered, in order, each followed until the
    /// pipeline recovers, after a fault-free run of the same load whose verdicts the
    /// faulted run's must equal (record root aside): `kill`, `pause`,
    /// `broker-restart`, `partition`, `disk-full`, `clock-jump` (every stage each
    /// applies to, or `NAME:STAGE[+STAGE]`), `once` (each fault once) or `all`
    /// (comma-separated or repeated).
    #[arg(long, value_name = "FAULTS")]
    pub nemesis: Vec<String>,
    /// How long a pause, a partition, a full disk or a clock jump is held (seconds).
    #[arg(long, default_value_t = 20.0)]
    pub fault_seconds: f64,
    /// The broker's directory (`bash .ci/kafka.sh start DIR`, with
    /// `AUDITA_KAFKA_PROXIED=6` for partitions): `broker-restart` kills and restarts
    /// it, `partition` proxies its advertised listeners.
    #[arg(long, value_name = "DIR")]
    pub broker_dir: Option<PathBuf>,
    /// The Toxiproxy server binary for `partition` (default: `toxiproxy-server` on
    /// PATH).
    #[arg(long, value_name = "BIN")]
    pub toxiproxy: Option<PathBuf>,
    /// Size of the tmpfs `disk-full` puts under the sealer's record (MiB).
    #[arg(long, default_value_t = 2048)]
    pub disk_mib: u64,
    /// With `--nemesis`: no fault-free run first (its verdicts are not compared).
    #[arg(long)]
    pub no_baseline: bool,
    /// With `--nemesis`: the fault-free run offers the load this many times faster
    /// than its own pace (verdicts are functions of record time, not of the offer's
    /// pace).
    #[arg(long, default_value_t = 1.0)]
    pub baseline_speedup: f64,
    /// Internal: run one stage of a load run.
    #[arg(long, value_enum, hide = true)]
    pub stage: Option<LoadStage>,
    /// Internal: topic prefix of the run.
    #[arg(long, hide = true, default_value = "")]
    pub prefix: String,
    /// Internal: the stage's directory.
    #[arg(long, hide = true)]
    pub dir: Option<PathBuf>,
    /// (internal) The run's deployment (its audita.toml), for a stage process.
    #[arg(long, hide = true)]
    pub deployment: Option<PathBuf>,
    /// (internal) Where a stage process serves its /metrics (the nemesis reads its
    /// `audita_stage_*` series).
    #[arg(long, hide = true)]
    pub metrics: Option<std::net::SocketAddr>,
    /// (internal) A slicer cluster member's peers (comma-separated) ...
    #[arg(long, hide = true, value_delimiter = ',')]
    pub slicer_peers: Vec<String>,
    /// (internal) ... and its index among them.
    #[arg(long, hide = true, default_value_t = 0)]
    pub slicer_index: usize,
    /// (internal) A slicer process without the monitor's detectors (the slicer
    /// measured alone).
    #[arg(long, hide = true)]
    pub slicer_alone: bool,
}

/// Creates the run's throw-away deployment in `dir`: fresh log and keeper keys (OS
/// randomness), a per-run origin, the load's principals registered by their public
/// keys and its duty registry installed. Returns its `audita.toml`.
pub(crate) fn create_deployment(load: &Load, dir: &Path) -> anyhow::Result<PathBuf> {
    let origin = format!("audita.load/run-{}", crate::client::run_id());
    let opts = audita_deploy::InitOptions {
        local_keepers: crate::client::DEMO_KEEPERS
            .iter()
            .map(|k| k.to_string())
            .collect(),
        insecure_demo_seed: None,
        remote_keepers: Vec::new(),
    };
    let made = audita_deploy::init_with(dir, &origin, &opts)?;
    let public: Vec<(&str, &str, audita_evidence::VerifyingKey)> = load
        .fleet
        .roles
        .iter()
        .filter_map(|(n, r)| {
            load.fleet
                .keys
                .principal(n)
                .map(|k| (n.as_str(), r.as_str(), *k))
        })
        .collect();
    audita_deploy::register_public(&made.config, &public)?;
    audita_deploy::set_duties(&made.config, &load.fleet.duties_json)?;
    // The fleet declares nothing: the monitor detects every incident.
    audita_deploy::set_predicates(&made.config, &load.fleet.predicates_json)?;
    Ok(made.config)
}

/// The run's deployment as one stage sees it (the sealer also reads its private keys),
/// with the run's topic prefix, epoch size and retention flags.
fn open_deployment(args: &LoadArgs, config: &Path, sealer: bool) -> anyhow::Result<Deployment> {
    let cfg = audita_deploy::Config::load(config)?;
    let mut d = Deployment::from_config(&cfg, sealer)?;
    d.prefix = args.prefix.clone();
    d.epoch_messages = args.epoch_messages;
    args.retention.apply(&mut d)?;
    Ok(d)
}

impl LoadArgs {
    fn config(&self) -> anyhow::Result<LoadConfig> {
        if !(self.duration.is_finite() && self.duration > 0.0) {
            anyhow::bail!("--duration must be a positive number of seconds");
        }
        let c = LoadConfig {
            robots: self.robots,
            commands_per_s: self.rate,
            reports_per_s: self.report_rate,
            incidents_per_s: self.incident_rate,
            duration: Duration::from_secs_f64(self.duration.min(1e6)),
            seed: self.seed,
            placement: match self.incident_time {
                IncidentTime::Live => Placement::Live,
                IncidentTime::OwnSlot => Placement::OwnSlot,
            },
        };
        c.validate()?;
        Ok(c)
    }

    fn bootstrap(&self) -> anyhow::Result<String> {
        let b = self.bootstrap.clone().ok_or_else(|| {
            anyhow::anyhow!(
                "--bootstrap HOST:PORT is required (a broker on this machine: bash .ci/kafka.sh start DIR)"
            )
        })?;
        for server in b.split(',') {
            let host = server
                .rsplit_once(':')
                .map(|(h, _)| h)
                .unwrap_or(server)
                .trim_matches(|c| c == '[' || c == ']');
            let loopback = host == "localhost"
                || host
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback());
            if !loopback {
                anyhow::bail!("--bootstrap {server}: the load generator only targets loopback brokers (127.0.0.0/8, ::1, localhost)");
            }
        }
        Ok(b)
    }
}

/// Runs `audita-load load`: one stage process (`--stage`), the rendering of a saved
/// measurement (`--report`), or a whole measured run; the report goes to `out`.
pub fn run(args: &LoadArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    match (args.stage, &args.report) {
        (Some(stage), _) => run_child(args, stage),
        (None, None) if !args.curve.is_empty() => {
            crate::capacity::render(&args.curve, args.svg.as_deref(), out)
        }
        (None, Some(path)) => render(args, path, out),
        (None, None) => bench(args, out),
    }
}

/// Renders a saved measurement again.
fn render(args: &LoadArgs, path: &Path, out: &mut dyn Write) -> anyhow::Result<()> {
    let bytes = std::fs::read(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let report: Value = serde_json::from_slice(&bytes)
        .map_err(|e| anyhow::anyhow!("{}: not a saved measurement: {e}", path.display()))?;
    if !report["samples"].is_array() {
        anyhow::bail!("{}: not a saved measurement (no samples)", path.display());
    }
    if let Some(svg_path) = &args.svg {
        std::fs::write(svg_path, svg(&report))?;
    }
    writeln!(out, "{}", markdown(&report))?;
    Ok(())
}

/// One stage process of a load run: runs until killed.
fn run_child(args: &LoadArgs, stage: LoadStage) -> anyhow::Result<()> {
    let deployment = args
        .deployment
        .as_deref()
        .ok_or_else(|| anyhow::anyhow!("--deployment is required for a stage process"))?;
    let d = open_deployment(args, deployment, stage == LoadStage::Sealer)?;
    let bus = Bus::Kafka(crate::host::kafka_bus(&args.bootstrap()?, &args.kafka)?);
    let m = Metrics::new();
    if let Some(addr) = args.metrics {
        m.serve(addr)
            .map_err(|e| anyhow::anyhow!("--metrics {addr}: {e}"))?;
    }
    // SIGTERM drains the stage (the run ends the sink so, to read its tables).
    let stop = Arc::new(AtomicBool::new(false));
    audita_pipeline::process::stop_on_signals(&stop)?;
    let dir = || {
        args.dir
            .clone()
            .ok_or_else(|| anyhow::anyhow!("--dir is required for this stage"))
    };
    // As deployed: a fault a wait heals (the broker gone, a full disk) reopens the
    // stage from its durable state (`audita_pipeline::supervise`).
    let name = format!("{stage:?}").to_lowercase();
    let stopped = audita_pipeline::supervise::supervise(
        &name,
        &m,
        &stop,
        audita_pipeline::supervise::Backoff::default(),
        || run_stage(args, stage, &d, &bus, &stop, &m, &dir),
    );
    Ok(stopped?)
}

/// One life of a stage process's stage.
fn run_stage(
    args: &LoadArgs,
    stage: LoadStage,
    d: &Deployment,
    bus: &Bus,
    stop: &AtomicBool,
    m: &Metrics,
    dir: &dyn Fn() -> anyhow::Result<PathBuf>,
) -> audita_pipeline::Result<()> {
    let dir = || dir().map_err(|e| audita_pipeline::Error::Invalid(e.to_string()));
    let (d, bus, stop, m) = (d, bus, stop, m);
    match stage {
        LoadStage::Ingest => audita_pipeline::run_ingest(d, bus, stop, None, m).map(|_| ()),
        LoadStage::Sealer => audita_pipeline::run_sealer(d, bus, &dir()?, stop, None, m),
        LoadStage::Slicer => {
            let cluster = if args.slicer_peers.len() > 1 {
                Some(
                    audita_slicer::cluster::Cluster::new(
                        args.slicer_index,
                        args.slicer_peers.clone(),
                    )
                    .map_err(audita_pipeline::Error::Invalid)?,
                )
            } else {
                None
            };
            audita_pipeline::run_slicer_member(
                d,
                bus,
                Duration::from_millis(args.slicer_wait_ms),
                stop,
                None,
                m,
                cluster.as_ref(),
                !args.slicer_alone,
            )
        }
        LoadStage::Monitor => audita_pipeline::monitor::run_monitor(
            d,
            bus,
            Duration::from_millis(args.slicer_wait_ms),
            stop,
            None,
            m,
        ),
        LoadStage::Engine => audita_pipeline::run_engine(d, bus, stop, None, m).map(|_| ()),
        LoadStage::Sink => {
            audita_pipeline::run_sink(d, bus, &dir()?, None, stop, None, m, |_| {}).map(|_| ())
        }
    }
}

/// A stage process and where its stderr goes.
struct StageProc {
    name: String,
    stage: LoadStage,
    child: Child,
    log: PathBuf,
    /// Where it serves /metrics.
    metrics: std::net::SocketAddr,
}

/// What starts a stage process of the run (again, after a kill).
struct Spawner<'a> {
    args: &'a LoadArgs,
    bootstrap: String,
    prefix: String,
    work: PathBuf,
    deployment: PathBuf,
    /// What the nemesis set up: a stage's proxy and clock.
    rig: Option<&'a nemesis::Rig>,
    /// The sink's output directory.
    sink_dir: PathBuf,
    /// The slicer cluster's members' addresses (none: a slicer of one process).
    slicer_peers: Vec<String>,
}

impl Spawner<'_> {
    fn spawn(&self, stage: LoadStage, name: &str) -> anyhow::Result<StageProc> {
        let bootstrap = self
            .rig
            .and_then(|r| r.bootstrap_for(name))
            .unwrap_or_else(|| self.bootstrap.clone());
        let env = self.rig.map(|r| r.env_for(name)).unwrap_or_default();
        let dir = match stage {
            LoadStage::Sink => self.sink_dir.clone(),
            _ => self.work.join(name),
        };
        let mut extra = Vec::new();
        if stage == LoadStage::Slicer && self.slicer_peers.len() > 1 {
            let index = name
                .rsplit_once('-')
                .and_then(|(_, i)| i.parse::<usize>().ok())
                .ok_or_else(|| anyhow::anyhow!("slicer member {name} has no index"))?;
            extra.extend([
                "--slicer-peers".to_string(),
                self.slicer_peers.join(","),
                "--slicer-index".to_string(),
                index.to_string(),
            ]);
        }
        spawn_stage(
            self.args,
            stage,
            name,
            &bootstrap,
            &self.prefix,
            &self.work,
            &self.deployment,
            &env,
            &dir,
            &extra,
        )
    }
}

/// What the monitor saw on the pipeline's output topics.
#[derive(Default)]
struct Seen {
    sealed: u64,
    epochs: u64,
    /// The sealer's latest event-time watermark (record ms).
    watermark: u64,
    last_sealed_at: Option<Instant>,
    latencies: BTreeMap<String, Duration>,
    abstained: BTreeMap<String, String>,
    /// Incidents whose verdict's ρ differs from the cell's planted causal profile.
    off_truth: Vec<Value>,
    duplicates: u64,
    quarantined: u64,
    /// Bytes of every slice bundle published (one per incident, more on re-emission).
    slice_bytes: Vec<usize>,
    /// When each incident cell's sealed message became readable (its epoch's arrival;
    /// the background fleet's messages are not kept).
    readable: BTreeMap<[u8; 32], Instant>,
    /// The first `fired` alert of each incident.
    alerted: BTreeMap<String, Instant>,
    /// Sealed → alert: from the arrival of the epoch sealing the last message an
    /// alert cites to the alert's arrival.
    sealed_to_alert: Vec<Duration>,
    /// Alerts read before an epoch of a message they cite (not timed).
    alerts_unordered: u64,
    /// Incident instant (`t*`) → first fired alert.
    instant_to_alert: Vec<Duration>,
    /// First fired alert → verdict.
    alert_to_verdict: Vec<Duration>,
    /// Verdicts (or abstentions) of incidents no cell planted: false declarations.
    unexpected: Vec<String>,
    /// The number of the last epoch counted (a restarted sealer republishes its
    /// last one: counted once).
    last_epoch: Option<u64>,
    /// Epochs published again (by a restarted sealer) and not counted again.
    republished: u64,
    /// The first 8 bytes of every sealed id's digest.
    distinct: std::collections::HashSet<u64>,
    /// Sealed ids seen in two different epochs.
    sealed_twice: u64,
    /// The first verdict record of every incident, [`normalized`].
    verdicts: BTreeMap<String, Value>,
    /// Verdicts published again (a restarted or rejoined engine) that differ from the
    /// incident's first, normalized: what differs.
    redone_differently: Vec<Value>,
}

/// A free loopback address for a stage's `/metrics`, below the kernel's ephemeral
/// range (32768 and up on Linux): a port 0 picks is free only until the child binds it,
/// and a client's outgoing connection can take it meanwhile (CI of 261695f2: a sink
/// restarted after its kill found its port in use and exited).
pub(crate) fn metrics_addr() -> anyhow::Result<std::net::SocketAddr> {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let base = std::process::id() % 12_000;
    for _ in 0..12_000 {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let port = 20_000 + ((base + n) % 12_000) as u16;
        if let Ok(l) = std::net::TcpListener::bind(("127.0.0.1", port)) {
            return Ok(l.local_addr()?);
        }
    }
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?)
}

#[allow(clippy::too_many_arguments)]
fn spawn_stage(
    args: &LoadArgs,
    stage: LoadStage,
    name: &str,
    bootstrap: &str,
    prefix: &str,
    work: &Path,
    deployment: &Path,
    env: &[(String, String)],
    dir: &Path,
    extra: &[String],
) -> anyhow::Result<StageProc> {
    let exe = std::env::current_exe()?;
    let log = work.join(format!("{name}.log"));
    std::fs::create_dir_all(dir)?;
    let metrics = metrics_addr()?;
    let child = Command::new(exe)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .arg("load")
        .args(["--stage", &format!("{stage:?}").to_lowercase()])
        .args(["--bootstrap", bootstrap, "--prefix", prefix])
        .arg("--deployment")
        .arg(deployment)
        .arg("--dir")
        .arg(dir)
        .args(["--robots", &args.robots.to_string()])
        .args(["--rate", &args.rate.to_string()])
        .args(["--report-rate", &args.report_rate.to_string()])
        .args(["--incident-rate", &args.incident_rate.to_string()])
        .args(["--duration", &args.duration.to_string()])
        .args(["--seed", &args.seed.to_string()])
        .args([
            "--incident-time",
            match args.incident_time {
                IncidentTime::Live => "live",
                IncidentTime::OwnSlot => "own-slot",
            },
        ])
        .args(["--slicer-wait-ms", &args.slicer_wait_ms.to_string()])
        .args(["--epoch-messages", &args.epoch_messages.to_string()])
        .args(["--metrics", &metrics.to_string()])
        .args(args.retention.flags())
        .args(args.kafka.iter().flat_map(|k| ["--kafka", k.as_str()]))
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        // Appended to: a stage restarted after a kill keeps its first life's log.
        .stderr(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)?,
        )
        .spawn()?;
    Ok(StageProc {
        name: name.to_string(),
        stage,
        child,
        log,
        metrics,
    })
}

fn tail(path: &Path) -> String {
    let s = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = s.lines().rev().take(3).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
}

fn bench(args: &LoadArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let config = args.config()?;
    let bootstrap = args.bootstrap()?;
    if args.epoch_messages == 0 || args.epoch_messages > 1_000_000 {
        anyhow::bail!("--epoch-messages must be in 1..=1000000");
    }
    if args.workers == 0 || args.workers > 16 {
        anyhow::bail!("--workers must be in 1..=16");
    }
    args.retention.validate()?;
    if !(args.drain_timeout.is_finite() && args.drain_timeout >= 0.0) {
        anyhow::bail!("--drain-timeout must be a non-negative number of seconds");
    }
    let plan = nemesis::plan(args)?;
    if !plan.is_empty() {
        if !(args.fault_seconds.is_finite()
            && args.fault_seconds >= 1.0
            && args.fault_seconds <= 600.0)
        {
            anyhow::bail!("--fault-seconds must be in 1..=600");
        }
        if !(args.baseline_speedup.is_finite() && (1.0..=20.0).contains(&args.baseline_speedup)) {
            anyhow::bail!("--baseline-speedup must be in 1..=20");
        }
        let need = nemesis::needed_s(&plan, Duration::from_secs_f64(args.fault_seconds));
        if args.duration < need {
            anyhow::bail!(
                "--nemesis: {} fault(s) need a feed of at least {need:.0} s (each fault's hold and 15 s to recover): raise --duration",
                plan.len()
            );
        }
    }
    let limit_before = ed25519_single_core_per_s();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let signed = AtomicU64::new(0);
    let expected = config.background_messages();
    let presign = Instant::now();
    let load = std::thread::scope(|s| {
        let bar = bar(args.quiet, expected, "signing");
        let h = s.spawn(|| Load::build(&config, threads, &signed));
        while !h.is_finished() {
            bar.set_position(signed.load(Ordering::Relaxed));
            std::thread::sleep(Duration::from_millis(200));
        }
        bar.finish_and_clear();
        h.join()
            .map_err(|_| anyhow::anyhow!("a signing thread panicked"))?
            .map_err(anyhow::Error::from)
    })?;
    let presign_s = presign.elapsed().as_secs_f64();
    let envelopes = load.envelopes() as u64;
    let incidents = load.incidents();
    eprintln!(
        "audita-load load: {} robots × {} commands/s, {} incidents, {} envelopes ({:.0}/s offered) pre-signed in {:.1}s",
        config.robots,
        config.commands_per_s,
        incidents.len(),
        envelopes,
        envelopes as f64 / config.duration.as_secs_f64(),
        presign_s
    );

    let run = format!("load{}-{}", std::process::id(), config.seed);
    let work = std::env::temp_dir().join(format!("audita-{run}.d"));
    std::fs::create_dir_all(&work)?;
    let deployment = create_deployment(&load, &work.join("deployment"))?;
    let bus = Bus::Kafka(crate::host::kafka_bus(&bootstrap, &args.kafka)?);
    let run_phase = |load: &Load, tag: &str, plan: &[nemesis::Fault]| {
        phase(
            &Phase {
                args,
                config: &config,
                load,
                envelopes,
                incidents: &incidents,
                bus: &bus,
                limit_before,
                presign_s,
                bootstrap: &bootstrap,
                deployment: &deployment,
                prefix: format!("{run}-{tag}."),
                work: work.join(tag),
                reported: tag == "run",
            },
            plan,
        )
    };
    let result = (|| -> anyhow::Result<Value> {
        // The fault-free run of the same load, whose verdicts the faulted run's must
        // equal.
        let baseline = match plan.is_empty() || args.no_baseline {
            true => None,
            false => {
                eprintln!("audita-load load: the fault-free run of the same load first");
                Some(run_phase(&load, "base", &[])?.finish(&incidents)?)
            }
        };
        let ended = run_phase(&load, "run", &plan)?;
        // The pre-signed load (every envelope and receipt offered) is let go of
        // before the history check reads the whole record back: at 400 robots for
        // 11 minutes the two together did not fit in 24 GiB.
        drop(load);
        let mut report = ended.finish(&incidents)?;
        if let Some(base) = baseline {
            compare_verdicts(&mut report, &base);
        }
        if !plan.is_empty() {
            decide(&mut report);
        }
        Ok(report)
    })();
    if let Some(logs) = &args.logs {
        for tag in ["base", "run"] {
            let from = work.join(tag);
            if from.exists() {
                keep_logs(
                    &from,
                    &if tag == "run" {
                        logs.clone()
                    } else {
                        logs.join(tag)
                    },
                )?;
            }
        }
    }
    let _ = std::fs::remove_dir_all(&work);
    let mut report = result?;
    if let Some(o) = report.as_object_mut() {
        o.remove("_verdicts");
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
    }
    if let Some(path) = &args.svg {
        std::fs::write(path, svg(&report))?;
    }
    writeln!(out, "{}", markdown(&report))?;
    if report["history"]["passed"] == json!(false) {
        anyhow::bail!(
            "the fault run's history check failed: {}",
            report["history"]["failures"]
        );
    }
    Ok(())
}

/// What one run of the load over fresh topics is given.
struct Phase<'a> {
    args: &'a LoadArgs,
    config: &'a LoadConfig,
    load: &'a Load,
    envelopes: u64,
    incidents: &'a [String],
    bus: &'a Bus,
    limit_before: f64,
    presign_s: f64,
    bootstrap: &'a str,
    deployment: &'a Path,
    /// Topic prefix of this run.
    prefix: String,
    /// Its scratch directory (stage directories and logs).
    work: PathBuf,
    /// The run reported (not the fault-free one before it): its sink writes `--out`.
    reported: bool,
}

/// One measured run of the load over fresh topics, with `plan`'s faults injected;
/// after a run with faults, its history checked ([`check_history`]).
fn phase(p: &Phase, plan: &[nemesis::Fault]) -> anyhow::Result<Ended> {
    let args = p.args;
    std::fs::create_dir_all(&p.work)?;
    let rig = match plan.is_empty() {
        true => None,
        false => Some(nemesis::Rig::prepare(args, plan, &p.work)?),
    };
    let mut d = open_deployment(args, p.deployment, false)?;
    d.prefix = p.prefix.clone();
    d.ensure_topics(p.bus)?;
    // The sink's output: `--out` for the run that is reported, else scratch.
    let sink_dir = match (&args.out, p.reported) {
        (Some(out), true) => out.clone(),
        _ => p.work.join("sink"),
    };
    let spawner = Spawner {
        args,
        bootstrap: p.bootstrap.to_string(),
        prefix: p.prefix.clone(),
        work: p.work.clone(),
        deployment: p.deployment.to_path_buf(),
        rig: rig.as_ref(),
        sink_dir: sink_dir.clone(),
        slicer_peers: match args.slicer_processes {
            0 | 1 => Vec::new(),
            n => (0..n)
                .map(|_| metrics_addr().map(|a| a.to_string()))
                .collect::<anyhow::Result<_>>()?,
        },
    };
    let mut procs = Vec::new();
    let result = (|| -> anyhow::Result<Value> {
        let mut stages = vec![
            (LoadStage::Ingest, "ingest".to_string()),
            (LoadStage::Sealer, "sealer".to_string()),
        ];
        if spawner.slicer_peers.is_empty() {
            // The slicer runs the monitor's detectors over its join.
            stages.push((LoadStage::Slicer, "slicer".to_string()));
        } else {
            // A cluster's members read a share of the bytes each: the detectors
            // run on their own, over every partition.
            stages.extend(
                (0..spawner.slicer_peers.len()).map(|i| (LoadStage::Slicer, format!("slicer-{i}"))),
            );
            stages.push((LoadStage::Monitor, "monitor".to_string()));
        }
        stages.extend((0..args.workers).map(|i| (LoadStage::Engine, format!("engine-{i}"))));
        stages.push((LoadStage::Sink, "sink".to_string()));
        for (stage, name) in &stages {
            procs.push(spawner.spawn(*stage, name)?);
        }
        let setup = Setup {
            args,
            config: p.config,
            load: p.load,
            envelopes: p.envelopes,
            incidents: p.incidents,
            d: &d,
            bus: p.bus,
            limit_before: p.limit_before,
            presign_s: p.presign_s,
            spawner: &spawner,
            plan,
            speedup: match p.reported {
                true => 1.0,
                false => args.baseline_speedup,
            },
        };
        measure(&setup, &mut procs)
    })();
    // The sink drains on SIGTERM (its tables complete); the rest are killed.
    for proc in procs.iter_mut().filter(|p| p.stage == LoadStage::Sink) {
        let _ = Command::new("kill")
            .arg(proc.child.id().to_string())
            .status();
        let until = Instant::now() + Duration::from_secs(30);
        while Instant::now() < until && matches!(proc.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    for proc in &mut procs {
        let _ = proc.child.kill();
        let _ = proc.child.wait();
    }
    Ok(Ended {
        report: result?,
        check: (!plan.is_empty()).then(|| (p.work.join("sealer"), sink_dir)),
        rig,
        out: args.out.clone().filter(|_| p.reported),
    })
}

/// A phase whose stages have stopped, with what is left to do once the caller has
/// let go of the pre-signed load (the history check reads the whole record).
struct Ended {
    report: Value,
    /// The record and sink directories to check (a faulted run).
    check: Option<(PathBuf, PathBuf)>,
    /// The faults' rig (the record's small filesystem stays mounted until checked).
    rig: Option<nemesis::Rig>,
    /// `--out`, for the run that is reported.
    out: Option<PathBuf>,
}

impl Ended {
    /// Checks the history (a faulted run), releases the rig and fills `--out`.
    fn finish(self, incidents: &[String]) -> anyhow::Result<Value> {
        let mut report = self.report;
        if let Some((record, sink)) = &self.check {
            check_history(&mut report, record, sink, incidents);
        }
        drop(self.rig);
        if let Some(out) = &self.out {
            rebuild_sink_output(out, &report)?;
        }
        Ok(report)
    }
}

/// The history check of a faulted run, into `report["history"]`: every acknowledged
/// envelope sealed exactly once (from the run's own count), the record as the sealer
/// left it verifying clean (signatures, seals, checkpoints, tiles), every incident
/// judged on its planted profile, and the sink's Parquet tables holding every verdict
/// once.
fn check_history(report: &mut Value, record: &Path, sink: &Path, incidents: &[String]) {
    let verified = verify_record(record);
    let tables = audita_sinks::tables::incidents_in(&sink.join("verdicts").join("incidents"));
    let (in_tables, twice): (Vec<String>, Vec<String>) = match &tables {
        Ok(t) => (
            t.keys().cloned().collect(),
            t.iter()
                .filter(|(_, n)| **n > 1)
                .map(|(i, _)| i.clone())
                .collect(),
        ),
        Err(_) => (Vec::new(), Vec::new()),
    };
    let judged: Vec<&String> = incidents
        .iter()
        .filter(|i| report["_verdicts"].get(i.as_str()).is_some())
        .collect();
    let missing_from_tables: Vec<&&String> =
        judged.iter().filter(|i| !in_tables.contains(i)).collect();
    let h = &mut report["history"];
    h["record"] = verified;
    h["sink_tables"] = json!({
        "incidents": in_tables.len(),
        "missing": missing_from_tables,
        "written_twice": twice,
        "error": tables.err().map(|e| e.to_string()),
    });
}

/// Verifies the record directory the sealer left, as `audita verify --batch` does:
/// `{"clean", "messages", "problems"}`.
fn verify_record(dir: &Path) -> Value {
    let limits = audita_record::Limits {
        record_bytes: 64 << 30,
        ..audita_record::Limits::default()
    };
    let read = match audita_record::read_dir(dir, &limits) {
        Ok(r) => r,
        Err(e) => return json!({"clean": false, "problems": [e.to_string()]}),
    };
    let policy = audita_evidence::Policy {
        batch_signatures: true,
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        ..audita_evidence::Policy::default()
    };
    let tiles = audita_record::tiles::check_tiles(dir, &read.record, &read.keys);
    let partition = audita_evidence::verify_record_with(
        &read.record,
        &read.keys,
        &policy,
        read.payloads.as_ref(),
    );
    let mut problems: Vec<String> = Vec::new();
    if !partition.is_clean() {
        problems.push(format!(
            "{} suspect, {} missing, {} epoch(s) with faults",
            partition.suspect.len(),
            partition.missing.len(),
            partition
                .epochs
                .iter()
                .filter(|e| !e.faults.is_empty())
                .count()
        ));
    }
    problems.extend(
        tiles
            .problems
            .iter()
            .take(5)
            .map(|t| format!("tiles: {t:?}")),
    );
    json!({
        "clean": problems.is_empty(),
        "certified": partition.certified.len(),
        "problems": problems,
    })
}

/// Compares the faulted run's verdicts with the fault-free run's (both normalized:
/// record root aside) into `report["history"]`, and decides whether the history
/// passed.
fn compare_verdicts(report: &mut Value, base: &Value) {
    let empty = serde_json::Map::new();
    let ours = report["_verdicts"].as_object().unwrap_or(&empty).clone();
    let theirs = base["_verdicts"].as_object().unwrap_or(&empty);
    let mut changed = Vec::new();
    for (incident, want) in theirs {
        match ours.get(incident) {
            Some(got) if got == want => {}
            Some(got) => changed
                .push(json!({"incident": incident, "differs_at": differences(want, got, "")})),
            None => changed.push(
                json!({"incident": incident, "differs_at": ["no verdict in the faulted run"]}),
            ),
        }
    }
    for incident in ours.keys().filter(|i| !theirs.contains_key(*i)) {
        changed.push(
            json!({"incident": incident, "differs_at": ["no verdict in the fault-free run"]}),
        );
    }
    let h = &mut report["history"];
    h["verdicts_compared"] = json!(theirs.len());
    h["verdicts_changed"] = json!(changed);
    h["baseline"] = json!({
        "verdicts": base["verdicts"], "abstained": base["abstained"],
        "missing_verdicts": base["missing_verdicts"], "sealed": base["sealed"],
    });
}

/// Whether a faulted run's history passed, into `report["history"]["passed"]` with
/// every failure named.
fn decide(report: &mut Value) {
    let changed = report["history"]["verdicts_changed"]
        .as_array()
        .map_or(0, |a| a.len());
    let h = report["history"].clone();
    let mut failures: Vec<String> = Vec::new();
    let count =
        |v: &Value| v.as_array().map_or(0, |a| a.len()) + v.as_object().map_or(0, |o| o.len());
    for (what, n) in [
        (
            "acknowledged envelopes not sealed",
            h["acknowledged_not_sealed"].as_u64().unwrap_or(0) as usize,
        ),
        (
            "envelopes never acknowledged",
            h["unacknowledged"].as_u64().unwrap_or(0) as usize,
        ),
        (
            "ids sealed twice",
            report["sealed_twice"].as_u64().unwrap_or(0) as usize,
        ),
        ("verdicts changed", changed),
        (
            "verdicts published again differently",
            count(&report["duplicate_verdicts_differing"]),
        ),
        ("incidents not judged", count(&report["missing_verdicts"])),
        ("abstentions", count(&report["abstained"])),
        (
            "verdicts off the planted profile",
            count(&report["verdicts_off_planted_truth"]),
        ),
        ("false incidents", count(&report["unexpected_incidents"])),
        (
            "verdicts missing from the sink's tables",
            count(&report["history"]["sink_tables"]["missing"]),
        ),
        (
            "verdicts written twice to the sink's tables",
            count(&report["history"]["sink_tables"]["written_twice"]),
        ),
        (
            "faults not recovered",
            report["faults"].as_array().map_or(0, |f| {
                f.iter().filter(|x| x["recovery_s"].is_null()).count()
            }),
        ),
    ] {
        if n > 0 {
            failures.push(format!("{what} {n}"));
        }
    }
    if report["history"]["record"]["clean"] != json!(true) {
        failures.push(format!(
            "record does not verify: {}",
            report["history"]["record"]["problems"]
        ));
    }
    let h = &mut report["history"];
    h["passed"] = json!(failures.is_empty());
    h["failures"] = json!(failures);
}

/// The JSON paths at which `a` and `b` differ (at most 8).
fn differences(a: &Value, b: &Value, at: &str) -> Vec<String> {
    let mut out = Vec::new();
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                if x.get(k) != y.get(k) {
                    out.extend(differences(
                        x.get(k).unwrap_or(&Value::Null),
                        y.get(k).unwrap_or(&Value::Null),
                        &format!("{at}.{k}"),
                    ));
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                if p != q {
                    out.extend(differences(p, q, &format!("{at}[{i}]")));
                }
            }
        }
        _ if a != b => out.push(if at.is_empty() {
            ".".into()
        } else {
            at.to_string()
        }),
        _ => {}
    }
    out.truncate(8);
    out
}

/// A verdict record as compared across runs: the record it was judged against aside
/// (its checkpoint and root depend on how the run's epochs fell, not on what was
/// judged).
fn normalized(v: &Value) -> Value {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(o) => {
                o.remove("record_root");
                o.values_mut().for_each(strip);
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut v = v.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("record");
    }
    strip(&mut v);
    v
}

/// Rebuilds the sink's verdict tables and reports in `out` from its journal. The sink
/// was killed with its files open; its journal is replayed under the run's record
/// origin: the fleet's record time is [`crate::load::LIVE_ORIGIN_MS`] at the first send.
fn rebuild_sink_output(out: &Path, report: &Value) -> anyhow::Result<()> {
    let first = report["first_send_unix_ms"].as_i64().unwrap_or(0);
    let origin = audita_sinks::tables::RecordOrigin {
        unix_ms: first - crate::load::LIVE_ORIGIN_MS as i64,
    };
    if out.join("verdicts").exists() {
        std::fs::remove_dir_all(out.join("verdicts"))?;
    }
    let mut sink = audita_sinks::sink::VerdictSink::open(
        out,
        Some(origin),
        audita_sinks::tables::Rotation::default(),
        audita_sinks::report::Build::current(env!("CARGO_PKG_VERSION")),
    )?;
    sink.replay()?;
    sink.finish()?;
    Ok(())
}

/// Copies every stage process's log (`<stage>.log`) from the run's scratch directory
/// `work` to `logs`.
fn keep_logs(work: &Path, logs: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(logs)?;
    for entry in std::fs::read_dir(work)?.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "log") {
            std::fs::copy(&path, logs.join(entry.file_name()))?;
        }
    }
    Ok(())
}

fn bar(quiet: bool, len: u64, what: &str) -> ProgressBar {
    let bar = if quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(len)
    };
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{spinner}} {{elapsed_precise}} [{{bar:30}}] {{pos}}/{{len}} {what} · {{msg}}"
        ))
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

/// What a measured run is given: its arguments, the pre-signed load, and the
/// deployment and bus its stages run on.
struct Setup<'a> {
    args: &'a LoadArgs,
    config: &'a LoadConfig,
    load: &'a Load,
    /// Envelopes in the load.
    envelopes: u64,
    /// The load's incidents, in injection order.
    incidents: &'a [String],
    d: &'a Deployment,
    bus: &'a Bus,
    /// The single-core Ed25519 limit measured before the load was signed.
    limit_before: f64,
    /// Seconds the load took to pre-sign.
    presign_s: f64,
    /// Starts a stage process again after a kill.
    spawner: &'a Spawner<'a>,
    /// The faults to inject while the load is offered.
    plan: &'a [nemesis::Fault],
    /// Record time offered per second of wall time (1: the load's own pace).
    speedup: f64,
}

/// What the threads of a measured run share: the monitor writes `seen`, the feed
/// writes `published` and `offered`, the sampler reads them; `done` stops the
/// monitor and the sampler.
#[derive(Default)]
struct Shared {
    seen: Arc<Mutex<Seen>>,
    /// Each incident's adverse instant (`t*`), stamped as the feed passes it.
    published: Arc<Mutex<BTreeMap<String, Instant>>>,
    /// Envelopes offered so far.
    offered: Arc<AtomicU64>,
    done: Arc<AtomicBool>,
}

/// The measured run: the monitor on the pipeline's output topics, the sampler, the
/// timed phase offering the load, the drain until everything is sealed and judged
/// (or a stage died, or `--drain-timeout` passed), and the report of it all.
fn measure(setup: &Setup, procs: &mut [StageProc]) -> anyhow::Result<Value> {
    let shared = Shared::default();
    let monitor = spawn_monitor(setup, &shared)?;
    // Give the stage processes time to join their consumer groups.
    std::thread::sleep(Duration::from_secs(5));
    let pids: Arc<Mutex<Vec<(String, u32)>>> = Arc::new(Mutex::new(
        procs
            .iter()
            .map(|p| (p.name.clone(), p.child.id()))
            .collect(),
    ));
    // Beside the stages, the CPU of the broker and of this process (the generator
    // offering the load, and the monitor measuring it), and of the whole machine:
    // what shows which resource a run exhausts.
    let others: Vec<(String, u32)> = setup
        .args
        .broker_pid
        .or_else(find_broker)
        .map(|b| ("broker".to_string(), b))
        .into_iter()
        .chain([("load".to_string(), std::process::id())])
        .collect();
    let start = Instant::now();
    let first_send_unix_ms = audita_sinks::tables::now_ms();
    let samples: Arc<Mutex<Vec<Value>>> = Arc::default();
    let sampler = Sampler {
        pids: pids.clone(),
        others,
        start,
        // Without a terminal for the progress bars, a status line every 10 s instead.
        status_lines: !setup.args.quiet && !std::io::stderr().is_terminal(),
        expected_verdicts: setup.incidents.len(),
        seen: shared.seen.clone(),
        done: shared.done.clone(),
        offered: shared.offered.clone(),
        samples: samples.clone(),
    };
    let sampler = std::thread::spawn(move || sampler.run());
    let (offered, kills) = if !setup.plan.is_empty() {
        std::thread::scope(|s| {
            let feed = s.spawn(|| offer(setup, &shared));
            let rig = setup.spawner.rig;
            let kills = match rig {
                Some(rig) => nemesis::run(setup, &shared, procs, &pids, start, rig, setup.plan),
                None => Err(anyhow::anyhow!("a nemesis plan without its rig")),
            };
            let offered = feed
                .join()
                .map_err(|_| anyhow::anyhow!("the feed thread panicked"))
                .and_then(|r| r);
            (offered, kills)
        })
    } else {
        (offer(setup, &shared), Ok(Vec::new()))
    };
    let (stats, sealed_at_feed_end) = offered?;
    let kills = kills?;
    // Stages that exited (they never should): name → status and the tail of its log.
    let mut died: BTreeMap<String, String> = BTreeMap::new();
    drain(setup, &shared, procs, &mut died);
    let end = start.elapsed();
    shared.done.store(true, Ordering::SeqCst);
    let _ = sampler.join();
    match monitor.join() {
        Ok(r) => r?,
        Err(_) => anyhow::bail!("the monitor thread panicked"),
    }
    check_exits(procs, &mut died);
    let limit_after = ed25519_single_core_per_s();
    let seen = shared.seen.lock().unwrap_or_else(|e| e.into_inner());
    let samples = samples.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let history = acknowledged_history(setup, &stats, &seen);
    let mut report = report(
        setup,
        &Measured {
            seen: &seen,
            samples,
            stats,
            sealed_at_feed_end,
            start,
            end,
            first_send_unix_ms,
            limit_after,
            died,
            kills,
        },
    );
    report["history"] = history;
    report["_verdicts"] = json!(seen.verdicts);
    Ok(report)
}

/// What the generator offered, what the broker acknowledged and what was sealed: every
/// acknowledged envelope must be among the ids the sealer published (each once: a
/// second epoch sealing an id is counted as `sealed_twice`).
fn acknowledged_history(setup: &Setup, stats: &FeedStats, seen: &Seen) -> Value {
    let never: std::collections::HashSet<usize> = stats.unacknowledged.iter().copied().collect();
    let mut offered = 0u64;
    let mut unacknowledged = 0u64;
    let mut not_sealed: Vec<String> = Vec::new();
    let mut not_sealed_n = 0u64;
    for (i, s) in setup.load.schedule.iter().enumerate() {
        if s.lane != Lane::Envelope {
            continue;
        }
        offered += 1;
        if never.contains(&i) {
            unacknowledged += 1;
            continue;
        }
        let digest = audita_evidence::sha256(&s.bytes);
        let short = u64::from_be_bytes(digest[..8].try_into().unwrap_or([0; 8]));
        if !seen.distinct.contains(&short) {
            not_sealed_n += 1;
            if not_sealed.len() < 5 {
                not_sealed.push(format!("{}:{}", s.key, hex::encode(digest)));
            }
        }
    }
    json!({
        "offered": offered,
        "acknowledged_records": stats.acknowledged,
        "unacknowledged": unacknowledged,
        "resent": stats.resent,
        "sealed": seen.sealed,
        "acknowledged_not_sealed": not_sealed_n,
        "acknowledged_not_sealed_first": not_sealed,
        "sealed_twice": seen.sealed_twice,
    })
}

/// Spawns the run's monitor: its own consumer group on the pipeline's output topics,
/// recording every delivery into `shared.seen` until `shared.done`.
fn spawn_monitor(
    setup: &Setup,
    shared: &Shared,
) -> anyhow::Result<std::thread::JoinHandle<anyhow::Result<()>>> {
    let d = setup.d;
    // The planted causal profile of every incident (never read by the pipeline),
    // owned by the monitor thread.
    let planted: BTreeMap<String, BTreeMap<String, f64>> = setup
        .load
        .fleet
        .planted()
        .into_iter()
        .map(|(incident, profile)| (incident, profile.clone()))
        .collect();
    let mut consumer = setup.bus.consumer(
        &d.topic("load-monitor"),
        &[
            &d.topic(topics::EPOCHS),
            &d.topic(topics::VERDICTS),
            &d.topic(topics::SUSPECT),
            &d.topic(topics::SLICES),
            &d.topic(topics::ALERTS),
        ],
    )?;
    let (seen, published, done) = (
        shared.seen.clone(),
        shared.published.clone(),
        shared.done.clone(),
    );
    Ok(std::thread::spawn(move || -> anyhow::Result<()> {
        while !done.load(Ordering::SeqCst) {
            let Some(del) = consumer.poll(Duration::from_millis(100))? else {
                continue;
            };
            let now = Instant::now();
            let mut s = seen.lock().unwrap_or_else(|e| e.into_inner());
            s.record(&del, now, &published, &planted);
        }
        Ok(())
    }))
}

impl Seen {
    /// Records one delivery from the pipeline's output topics, read at `now`:
    /// an epoch, an alert, a quarantined envelope, a slice bundle or a verdict.
    fn record(
        &mut self,
        del: &audita_bus::Delivery,
        now: Instant,
        published: &Mutex<BTreeMap<String, Instant>>,
        planted: &BTreeMap<String, BTreeMap<String, f64>>,
    ) {
        if del.topic.ends_with(topics::EPOCHS) {
            if let Some(e) = EpochSeal::decode(&del.payload) {
                self.record_epoch(&e, now);
            }
        } else if del.topic.ends_with(topics::ALERTS) {
            if let Ok(alert) = serde_json::from_slice::<audita_topics::AlertRecord>(&del.payload) {
                self.record_alert(alert, now, published);
            }
        } else if del.topic.ends_with(topics::SUSPECT) {
            self.quarantined += 1;
        } else if del.topic.ends_with(topics::SLICES) {
            self.slice_bytes.push(del.payload.len());
        } else if let Ok(v) = serde_json::from_slice::<Value>(&del.payload) {
            self.record_verdict(&v, now, published, planted);
        }
    }

    /// Counts a sealed epoch and notes when each incident cell's message in it became
    /// readable.
    fn record_epoch(&mut self, e: &EpochSeal, now: Instant) {
        let number = e.number();
        if number.is_some_and(|n| self.last_epoch.is_some_and(|last| n <= last)) {
            self.republished += 1;
            return;
        }
        self.last_epoch = number.or(self.last_epoch);
        self.sealed += e.leaves.len() as u64;
        self.epochs += 1;
        self.watermark = self.watermark.max(e.watermark);
        self.last_sealed_at = Some(now);
        for leaf in &e.leaves {
            if let Ok(id) = audita_evidence::MessageId::from_leaf_bytes(leaf) {
                let short = u64::from_be_bytes(id.digest[..8].try_into().unwrap_or([0; 8]));
                if !self.distinct.insert(short) {
                    self.sealed_twice += 1;
                }
                if !id.author.as_str().starts_with("fleet/") {
                    self.readable.insert(id.digest, now);
                }
            }
        }
    }

    /// Times an alert from the moment it could first be raised (the arrival of the
    /// epoch sealing the last message it cites) and, for an incident's first `fired`
    /// alert, from the incident's adverse instant.
    fn record_alert(
        &mut self,
        alert: audita_topics::AlertRecord,
        now: Instant,
        published: &Mutex<BTreeMap<String, Instant>>,
    ) {
        let ready: Option<Instant> = alert
            .messages
            .iter()
            .map(|m| {
                let hex_digest = m.rsplit_once(':').map_or(m.as_str(), |(_, h)| h);
                let digest: Option<[u8; 32]> =
                    hex::decode(hex_digest).ok().and_then(|b| b.try_into().ok());
                digest.and_then(|d| self.readable.get(&d).copied())
            })
            .collect::<Option<Vec<Instant>>>()
            .and_then(|v| v.into_iter().max());
        match ready {
            Some(r) => self.sealed_to_alert.push(now.duration_since(r)),
            None => self.alerts_unordered += 1,
        }
        if let Some(incident) = alert.incident.filter(|_| alert.kind == "fired") {
            if !self.alerted.contains_key(&incident) {
                let instant = published
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(&incident)
                    .copied();
                if let Some(at) = instant {
                    let waited = now.saturating_duration_since(at);
                    tracing::debug!(
                        incident = %incident,
                        instant_to_alert_ms = waited.as_millis() as u64,
                        "alert seen"
                    );
                    self.instant_to_alert.push(waited);
                }
                self.alerted.insert(incident, now);
            }
        }
    }

    /// Records a verdict (or abstention) `v`: a duplicate, a false incident, or the
    /// latency from its incident's adverse instant, checked against the planted
    /// causal profile.
    fn record_verdict(
        &mut self,
        v: &Value,
        now: Instant,
        published: &Mutex<BTreeMap<String, Instant>>,
        planted: &BTreeMap<String, BTreeMap<String, f64>>,
    ) {
        let incident = v["incident"].as_str().unwrap_or_default().to_string();
        match self.verdicts.get(&incident) {
            None => {
                self.verdicts.insert(incident.clone(), normalized(v));
            }
            // A verdict published again must be the same verdict.
            Some(first) => {
                let again = normalized(v);
                if &again != first {
                    self.redone_differently.push(json!({
                        "incident": incident,
                        "differs_at": differences(first, &again, ""),
                    }));
                }
            }
        }
        let at = published
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&incident)
            .copied();
        if self.latencies.contains_key(&incident) || self.abstained.contains_key(&incident) {
            self.duplicates += 1;
        } else if !planted.contains_key(&incident) {
            self.unexpected.push(incident);
        } else if let Some(reason) = v.get("abstained").and_then(Value::as_str) {
            self.abstained.insert(incident, reason.to_string());
        } else if let Some(at) = at {
            if !matches_truth(v, planted.get(&incident)) {
                self.off_truth
                    .push(off_truth(&incident, planted.get(&incident), v));
            }
            if let Some(alerted) = self.alerted.get(&incident).copied() {
                self.alert_to_verdict
                    .push(now.saturating_duration_since(alerted));
            }
            tracing::debug!(
                incident = %incident,
                latency_ms = now.saturating_duration_since(at).as_millis() as u64,
                "verdict seen"
            );
            self.latencies
                .insert(incident, now.saturating_duration_since(at));
        }
    }
}

/// A verdict off its incident's planted causal profile, kept whole: what was planted
/// and what was found.
fn off_truth(incident: &str, planted: Option<&BTreeMap<String, f64>>, v: &Value) -> Value {
    let rows: Vec<Value> = v["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            json!({
                "principal": r["principal"], "rho_lo": r["rho_lo"],
                "rho_hi": r["rho_hi"], "flags": r["flags"],
            })
        })
        .collect();
    json!({
        "incident": incident, "planted": planted,
        "rows": rows, "notes": v["verdict"]["notes"],
        "completions": v["verdict"]["completions"],
    })
}

/// The once-a-second sampler of a run: what it reads and where it writes.
struct Sampler {
    /// The stage processes (RSS and CPU); a restarted stage's new pid replaces its
    /// old one.
    pids: Arc<Mutex<Vec<(String, u32)>>>,
    /// The broker and this process (CPU only).
    others: Vec<(String, u32)>,
    /// The first send: `t` of a sample counts from here.
    start: Instant,
    /// Print a status line every 10 samples.
    status_lines: bool,
    expected_verdicts: usize,
    seen: Arc<Mutex<Seen>>,
    done: Arc<AtomicBool>,
    offered: Arc<AtomicU64>,
    samples: Arc<Mutex<Vec<Value>>>,
}

impl Sampler {
    /// Until the run is done, one sample a second into `samples`: t (s since the
    /// first send), envelopes offered and sealed so far, verdicts so far, the sealer's
    /// watermark, RSS (MiB) and CPU seconds per process, and the machine's busy CPU
    /// seconds.
    fn run(self) {
        let mut next = Duration::ZERO;
        let mut next_line = 10u64;
        let mut tick = 0u64;
        while !self.done.load(Ordering::SeqCst) {
            if let Some(wait) = next.checked_sub(self.start.elapsed()) {
                std::thread::sleep(wait.min(Duration::from_millis(200)));
                continue;
            }
            next += Duration::from_secs(1);
            let (sealed, verdicts, watermark) = {
                let s = self.seen.lock().unwrap_or_else(|e| e.into_inner());
                (
                    s.sealed,
                    (s.latencies.len() + s.abstained.len()) as u64,
                    s.watermark,
                )
            };
            let (rss, cpu) = self.usage();
            self.samples
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(json!({
                    "t": self.start.elapsed().as_secs_f64(),
                    "offered": self.offered.load(Ordering::Relaxed),
                    "sealed": sealed,
                    "verdicts": verdicts,
                    "watermark_ms": watermark,
                    "rss_mib": rss,
                    "cpu_s": cpu,
                    "machine_busy_s": machine_busy_s(),
                }));
            tick += 1;
            if self.status_lines && tick >= next_line {
                next_line += 10;
                eprintln!(
                    "audita-load load: {:>4.0} s · offered {} · sealed {} · verdicts {}/{} · RSS {}",
                    self.start.elapsed().as_secs_f64(),
                    self.offered.load(Ordering::Relaxed),
                    sealed,
                    verdicts,
                    self.expected_verdicts,
                    rss.iter()
                        .map(|(k, v)| format!("{k} {v:.0}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                );
            }
        }
    }

    /// The resident memory (MiB) of every stage process and the CPU seconds of every
    /// sampled process, by name (a process that is gone is left out).
    fn usage(&self) -> (BTreeMap<String, f64>, BTreeMap<String, f64>) {
        let mut rss = BTreeMap::new();
        let mut cpu = BTreeMap::new();
        let pids = self.pids.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for (name, pid) in &pids {
            if let Some(r) = proc_rss_mib(*pid) {
                rss.insert(name.clone(), r);
            }
            if let Some(c) = proc_cpu_s(*pid) {
                cpu.insert(name.clone(), c);
            }
        }
        for (name, pid) in &self.others {
            if let Some(c) = proc_cpu_s(*pid) {
                cpu.insert(name.clone(), c);
            }
        }
        (rss, cpu)
    }
}

/// The progress line of the feed and the drain: what is sealed and judged so far.
fn status(seen: &Mutex<Seen>, incidents: usize) -> String {
    let s = seen.lock().unwrap_or_else(|e| e.into_inner());
    format!(
        "sealed {} · watermark {:.1}s · verdicts {}/{} · quarantined {}",
        s.sealed,
        s.watermark as f64 / 1e3,
        s.latencies.len() + s.abstained.len(),
        incidents,
        s.quarantined
    )
}

/// The timed phase: offers the pre-signed load at its record times, counting the
/// envelopes offered and stamping each incident's adverse instant. Returns what the
/// feed offered and the envelopes sealed when it ended.
fn offer(setup: &Setup, shared: &Shared) -> anyhow::Result<(FeedStats, u64)> {
    let incidents = setup.incidents.len();
    let feed_bar = bar(setup.args.quiet, setup.envelopes, "offered");
    let mut producer = setup.bus.producer()?;
    let mut last_status = Instant::now();
    let stats = feed(
        &setup.load.schedule,
        producer.as_mut(),
        &setup.d.prefix,
        setup.speedup,
        |_, s| match s.lane {
            Lane::Envelope => {
                let n = shared.offered.fetch_add(1, Ordering::Relaxed) + 1;
                if n & 511 == 0 {
                    feed_bar.set_position(n);
                    if last_status.elapsed() >= Duration::from_millis(500) {
                        feed_bar.set_message(status(&shared.seen, incidents));
                        last_status = Instant::now();
                    }
                }
            }
            // The incident's adverse instant (nothing is sent: the monitor declares).
            Lane::Adverse => {
                shared
                    .published
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(s.key.clone(), Instant::now());
            }
            Lane::Receipt => {}
        },
    )?;
    feed_bar.finish_and_clear();
    let sealed_at_feed_end = shared.seen.lock().unwrap_or_else(|e| e.into_inner()).sealed;
    Ok((stats, sealed_at_feed_end))
}

/// Notes in `died` every stage process that has exited since the last look: its
/// status and the tail of its log.
fn check_exits(procs: &mut [StageProc], died: &mut BTreeMap<String, String>) {
    for p in procs.iter_mut() {
        if !died.contains_key(&p.name) {
            if let Ok(Some(st)) = p.child.try_wait() {
                died.insert(p.name.clone(), format!("exited ({st}): {}", tail(&p.log)));
            }
        }
    }
}

/// The drain: waits until every envelope is sealed and every incident judged, as far
/// as the stages still running allow, or until `--drain-timeout` passes; stages that
/// exit meanwhile go into `died`.
fn drain(
    setup: &Setup,
    shared: &Shared,
    procs: &mut [StageProc],
    died: &mut BTreeMap<String, String>,
) {
    let (envelopes, incidents) = (setup.envelopes, setup.incidents.len());
    let drain_bar = bar(setup.args.quiet, envelopes, "sealed");
    let drain_deadline = Instant::now() + Duration::from_secs_f64(setup.args.drain_timeout);
    loop {
        let (sealed, judged) = {
            let s = shared.seen.lock().unwrap_or_else(|e| e.into_inner());
            (s.sealed, s.latencies.len() + s.abstained.len())
        };
        drain_bar.set_position(sealed.min(envelopes));
        drain_bar.set_message(status(&shared.seen, incidents));
        check_exits(procs, died);
        // Without ingest or sealer nothing more is sealed; without the slicer, an
        // engine or the sink, no more verdicts arrive (keep measuring the sealing).
        let sealing = !died.contains_key("ingest") && !died.contains_key("sealer");
        let judging = sealing && died.is_empty();
        if (sealed >= envelopes || !sealing) && (judged >= incidents || !judging) {
            break;
        }
        if Instant::now() >= drain_deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    drain_bar.finish_and_clear();
}

/// What a measured run observed, for its report.
struct Measured<'a> {
    /// The kills of a `--kill-each` run.
    kills: Vec<Value>,
    seen: &'a Seen,
    samples: Vec<Value>,
    stats: FeedStats,
    /// Envelopes sealed when the feed ended.
    sealed_at_feed_end: u64,
    /// The first send.
    start: Instant,
    /// The end of the drain, since `start`.
    end: Duration,
    first_send_unix_ms: i64,
    /// The single-core Ed25519 limit measured after the run.
    limit_after: f64,
    /// Stages that exited: name → status and the tail of its log.
    died: BTreeMap<String, String>,
}

/// Milliseconds, rounded to 0.1.
fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e4).round() / 10.0
}

/// Count, p50, p99 and maximum (ms) of a set of latencies.
fn spread(v: &[Duration]) -> Value {
    let mut v = v.to_vec();
    v.sort();
    json!({
        "count": v.len(),
        "p50": ms(percentile(&v, 0.5)),
        "p99": ms(percentile(&v, 0.99)),
        "max": ms(v.last().copied().unwrap_or_default()),
    })
}

/// The run's configuration as the report records it.
fn config_json(args: &LoadArgs, config: &LoadConfig) -> Value {
    json!({
        "robots": config.robots, "commands_per_s": config.commands_per_s,
        "reports_per_s": config.reports_per_s, "incidents_per_s": config.incidents_per_s,
        "duration_s": config.duration.as_secs_f64(), "seed": config.seed,
        "workers": args.workers, "incident_time": format!("{:?}", args.incident_time),
        "slicer_wait_ms": args.slicer_wait_ms, "epoch_messages": args.epoch_messages,
        "horizon_ms": args.retention.horizon_ms, "hold_ms": args.retention.hold_ms,
        "dedupe_horizon_ms": args.retention.dedupe_horizon_ms,
        "kafka_settings": args.kafka,
    })
}

/// The measurement (what `--json` saves and [`markdown`] renders): rates against the
/// Ed25519 limit, verdict and alert latencies, what went missing or wrong, and the
/// samples.
fn report(setup: &Setup, m: &Measured) -> Value {
    let (config, seen) = (setup.config, m.seen);
    let (envelopes, incidents) = (setup.envelopes, setup.incidents);
    let stats = &m.stats;
    let mut slices = seen.slice_bytes.clone();
    slices.sort_unstable();
    let mut lat: Vec<Duration> = seen.latencies.values().copied().collect();
    lat.sort();
    let sealed_span = seen
        .last_sealed_at
        .map(|t| t.duration_since(m.start))
        .unwrap_or(m.end);
    let e2e = seen.sealed as f64 / sealed_span.as_secs_f64().max(1e-9);
    let limit = setup.limit_before.max(m.limit_after);
    let missing: Vec<&String> = incidents
        .iter()
        .filter(|i| !seen.latencies.contains_key(*i) && !seen.abstained.contains_key(*i))
        .collect();
    json!({
        "first_send_unix_ms": m.first_send_unix_ms,
        "machine_cores": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "config": config_json(setup.args, config),
        "presign_s": setup.presign_s,
        "envelopes": envelopes,
        "target_per_s": config.offered_per_s(),
        "offered_per_s": stats.offered_per_s(),
        "feed_s": stats.elapsed.as_secs_f64(),
        "feed_max_behind_ms": ms(stats.max_behind),
        "sealed": seen.sealed,
        "epochs": seen.epochs,
        "sealed_during_feed_per_s": m.sealed_at_feed_end as f64 / stats.elapsed.as_secs_f64().max(1e-9),
        "sealed_span_s": sealed_span.as_secs_f64(),
        "e2e_per_s": e2e,
        "ed25519_verify_per_s": limit,
        "ed25519_verify_per_s_before_after": [setup.limit_before, m.limit_after],
        "ratio": e2e / limit,
        "incidents": incidents.len(),
        "verdicts": seen.latencies.len(),
        "abstained": seen.abstained,
        "missing_verdicts": missing,
        "duplicate_verdicts": seen.duplicates,
        "duplicate_verdicts_differing": seen.redone_differently,
        "verdicts_off_planted_truth": seen.off_truth,
        "quarantined": seen.quarantined,
        "latency_ms": {
            "p50": ms(percentile(&lat, 0.5)),
            "p99": ms(percentile(&lat, 0.99)),
            "max": ms(lat.last().copied().unwrap_or_default()),
        },
        "alerts": {
            "sealed_to_alert_ms": spread(&seen.sealed_to_alert),
            "read_before_their_epoch": seen.alerts_unordered,
            "instant_to_alert_ms": spread(&seen.instant_to_alert),
            "alert_to_verdict_ms": spread(&seen.alert_to_verdict),
        },
        "unexpected_incidents": seen.unexpected,
        "slices": {
            "count": slices.len(),
            "p50_bytes": slices.get(slices.len() / 2).copied().unwrap_or(0),
            "max_bytes": slices.last().copied().unwrap_or(0),
        },
        "stage_failures": m.died,
        "faults": m.kills,
        "sealed_twice": seen.sealed_twice,
        "republished_epochs": seen.republished,
        "drained": seen.sealed >= envelopes && seen.latencies.len() + seen.abstained.len() >= incidents.len(),
        "wall_s": m.end.as_secs_f64(),
        "cpu_per_envelope": cpu_per_envelope(&m.samples, stats.offered_per_s(), limit),
        "samples": m.samples,
    })
}

/// The CPU the machine and each process spent per envelope while the load was
/// offered, in µs and as a multiple of one Ed25519 `verify_strict` measured in the
/// same run (a figure that means the same on a faster or slower machine): cores busy
/// over the offer ([`crate::capacity::cores_while_offered`]) per envelope offered.
fn cpu_per_envelope(samples: &[Value], offered_per_s: f64, ed25519_per_s: f64) -> Value {
    let Some((_, busy)) = crate::capacity::cores_while_offered(samples) else {
        return Value::Null;
    };
    let verify_us = 1e6 / ed25519_per_s.max(1e-9);
    let us = |cores: f64| cores * 1e6 / offered_per_s.max(1e-9);
    let per: serde_json::Map<String, Value> = busy
        .iter()
        .map(|(name, cores)| {
            (
                name.clone(),
                json!({"us": us(*cores), "ed25519": us(*cores) / verify_us}),
            )
        })
        .collect();
    json!({"ed25519_verify_us": verify_us, "by_process": per})
}

fn f(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or(0.0)
}

/// Whether a verdict's ρ interval is exactly the planted causal profile: every row's
/// principal at its planted ρ (0 where none), and a row for every principal with ρ > 0.
fn matches_truth(verdict: &Value, planted: Option<&BTreeMap<String, f64>>) -> bool {
    let (Some(rows), Some(planted)) = (verdict["rows"].as_array(), planted) else {
        return false;
    };
    let rows_ok = rows.iter().all(|r| {
        let want = r["principal"]
            .as_str()
            .and_then(|p| planted.get(p))
            .copied()
            .unwrap_or(0.0);
        r["rho_lo"].as_f64() == Some(want) && r["rho_hi"].as_f64() == Some(want)
    });
    rows_ok
        && planted
            .iter()
            .filter(|(_, w)| **w > 0.0)
            .all(|(p, _)| rows.iter().any(|r| r["principal"] == p.as_str()))
}

/// The stage names sampled in a run, in name order.
fn stage_names(samples: &[Value]) -> Vec<String> {
    let names: std::collections::BTreeSet<String> = samples
        .iter()
        .filter_map(|s| s["rss_mib"].as_object())
        .flat_map(|o| o.keys().cloned())
        .collect();
    names.into_iter().collect()
}

/// The faults of a nemesis run and its history check, as BENCHMARKS.md text (empty
/// for a run without faults).
fn faults_markdown(r: &Value) -> String {
    let mut s = String::new();
    let Some(faults) = r["faults"].as_array().filter(|k| !k.is_empty()) else {
        return s;
    };
    s.push_str("\n| fault | at s | held s | recovered in s | the stage's alarm (`audita_stage_*`) | what the stages logged (WARN/ERROR, first lines) |\n|---|---|---|---|---|---|\n");
    for k in faults {
        let logged: Vec<String> = k["logged"]
            .as_object()
            .into_iter()
            .flatten()
            .flat_map(|(stage, lines)| {
                lines
                    .as_array()
                    .into_iter()
                    .flatten()
                    .take(2)
                    .map(move |l| {
                        let line = l["line"].as_str().unwrap_or_default();
                        let short: String = line.chars().take(110).collect();
                        format!("{stage}: `{}` ×{}", short.replace('|', "/"), l["count"])
                    })
            })
            .collect();
        let alarm: Vec<String> = k["alerted"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(stage, a)| {
                let mut parts = vec![format!("faults +{}", a["faults_counted"])];
                if a["stalled_seen"] == json!(true) {
                    parts.push("stalled".into());
                }
                format!("{stage}: {}", parts.join(", "))
            })
            .collect();
        s.push_str(&format!(
            "| {} | {:.0} | {:.1} | {} | {} | {} |\n",
            k["fault"].as_str().unwrap_or_default(),
            f(k, "at_s"),
            f(k, "held_s"),
            k["recovery_s"]
                .as_f64()
                .map_or("**not recovered**".to_string(), |v| format!("{v:.1}")),
            if alarm.is_empty() {
                "—".to_string()
            } else {
                alarm.join("; ")
            },
            if logged.is_empty() {
                "nothing".to_string()
            } else {
                logged.join("<br>")
            },
        ));
    }
    let h = &r["history"];
    s.push_str(&format!(
        "\nHistory: offered {} envelopes, acknowledged {} records ({} sent again), never acknowledged {}; sealed {}, acknowledged but not sealed {}, sealed twice {}; record verifies clean: {}; sink tables hold {} incidents (missing {}, written twice {}); verdicts compared with the fault-free run {}, changed {}. **{}**\n",
        h["offered"],
        h["acknowledged_records"],
        h["resent"],
        h["unacknowledged"],
        h["sealed"],
        h["acknowledged_not_sealed"],
        h["sealed_twice"],
        h["record"]["clean"],
        h["sink_tables"]["incidents"],
        h["sink_tables"]["missing"].as_array().map_or(0, |a| a.len()),
        h["sink_tables"]["written_twice"].as_array().map_or(0, |a| a.len()),
        h["verdicts_compared"],
        h["verdicts_changed"].as_array().map_or("not compared".to_string(), |a| a.len().to_string()),
        match h["passed"].as_bool() {
            Some(true) => "passed".to_string(),
            _ => format!("failed: {}", h["failures"]),
        },
    ));
    s
}

/// The measurement as BENCHMARKS.md text: one summary table and RSS over time.
fn markdown(r: &Value) -> String {
    let c = &r["config"];
    let mut s = String::new();
    s.push_str("| robots | cmd/s/robot | incidents/s | duration s | envelopes | target msg/s | offered msg/s | sustained e2e msg/s | Ed25519 verify/s (1 core) | ratio | verdicts | latency p50 ms | p99 ms | max ms |\n");
    s.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    s.push_str(&format!(
        "| {} | {} | {} | {} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.3} | {}/{} | {} | {} | {} |\n",
        c["robots"],
        c["commands_per_s"],
        c["incidents_per_s"],
        c["duration_s"],
        r["envelopes"],
        f(r, "target_per_s"),
        f(r, "offered_per_s"),
        f(r, "e2e_per_s"),
        f(r, "ed25519_verify_per_s"),
        f(r, "ratio"),
        r["verdicts"],
        r["incidents"],
        r["latency_ms"]["p50"],
        r["latency_ms"]["p99"],
        r["latency_ms"]["max"],
    ));
    s.push_str(&format!(
        "\nsealed {} of {} envelopes in {} epochs ({:.0}/s while the load was offered); {} slices (median {} B, largest {} B); quarantined {}; abstained {}; missing verdicts {}; duplicate verdicts {} ({} of them differing from the first); verdicts off the planted causal profile {}; stage failures: {}\n",
        r["sealed"],
        r["envelopes"],
        r["epochs"],
        f(r, "sealed_during_feed_per_s"),
        r["slices"]["count"],
        r["slices"]["p50_bytes"],
        r["slices"]["max_bytes"],
        r["quarantined"],
        r["abstained"].as_object().map_or(0, |o| o.len()),
        r["missing_verdicts"].as_array().map_or(0, |a| a.len()),
        r["duplicate_verdicts"],
        r["duplicate_verdicts_differing"]
            .as_array()
            .map_or("not checked".to_string(), |a| a.len().to_string()),
        r["verdicts_off_planted_truth"]
            .as_array()
            .map_or("not checked".to_string(), |a| a.len().to_string()),
        r["stage_failures"]
            .as_object()
            .filter(|o| !o.is_empty())
            .map_or("none".to_string(), |o| o
                .iter()
                .map(|(k, v)| format!("{k} {}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join("; ")),
    ));
    s.push_str(&faults_markdown(r));
    let a = &r["alerts"];
    if a.is_object() {
        s.push_str("\n| alerts timed | read before their epoch | sealed → alert p50 ms | p99 ms | max ms | t* → alert p50 ms | p99 ms | alert → verdict p50 ms | p99 ms | false incidents |\n|---|---|---|---|---|---|---|---|---|---|\n");
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            a["sealed_to_alert_ms"]["count"],
            a["read_before_their_epoch"],
            a["sealed_to_alert_ms"]["p50"],
            a["sealed_to_alert_ms"]["p99"],
            a["sealed_to_alert_ms"]["max"],
            a["instant_to_alert_ms"]["p50"],
            a["instant_to_alert_ms"]["p99"],
            a["alert_to_verdict_ms"]["p50"],
            a["alert_to_verdict_ms"]["p99"],
            r["unexpected_incidents"].as_array().map_or(0, |v| v.len()),
        ));
    }
    let samples = r["samples"].as_array().cloned().unwrap_or_default();
    let stages = stage_names(&samples);
    s.push_str("\nResident memory (MiB) and sealed rate over the run:\n\n| t s | offered msg/s | sealed msg/s | verdicts |");
    for st in &stages {
        s.push_str(&format!(" {st} |"));
    }
    s.push_str("\n|---|---|---|---|");
    s.push_str(&"---|".repeat(stages.len()));
    s.push('\n');
    let step = (samples.len() / 12).max(1);
    let mut prev: Option<&Value> = None;
    for (i, smp) in samples.iter().enumerate() {
        if i % step != 0 && i + 1 != samples.len() {
            continue;
        }
        let (dt, d_off, d_seal) = match prev {
            Some(p) => (
                f(smp, "t") - f(p, "t"),
                f(smp, "offered") - f(p, "offered"),
                f(smp, "sealed") - f(p, "sealed"),
            ),
            None => (f(smp, "t"), f(smp, "offered"), f(smp, "sealed")),
        };
        let dt = dt.max(1e-9);
        s.push_str(&format!(
            "| {:.0} | {:.0} | {:.0} | {} |",
            f(smp, "t"),
            d_off / dt,
            d_seal / dt,
            smp["verdicts"]
        ));
        for st in &stages {
            s.push_str(&format!(
                " {:.0} |",
                smp["rss_mib"][st].as_f64().unwrap_or(0.0)
            ));
        }
        s.push('\n');
        prev = Some(smp);
    }
    if let Some(last) = samples.last() {
        s.push_str("\nCPU seconds per stage over the run:");
        for st in &stages {
            s.push_str(&format!(
                " {st} {:.0};",
                last["cpu_s"][st].as_f64().unwrap_or(0.0)
            ));
        }
        s.push('\n');
    }
    if let Some(c) = r["cpu_per_envelope"].as_object() {
        let verify = c["ed25519_verify_us"].as_f64().unwrap_or(0.0);
        let by = c["by_process"].as_object().cloned().unwrap_or_default();
        let cell = |n: &str| {
            by.get(n).map_or("–".to_string(), |v| {
                format!(
                    "{:.1} µs = {:.2}×",
                    v["us"].as_f64().unwrap_or(0.0),
                    v["ed25519"].as_f64().unwrap_or(0.0)
                )
            })
        };
        s.push_str(&format!(
            "\nCPU per envelope offered, as µs and as a multiple of one Ed25519 `verify_strict` of this run ({verify:.1} µs): **machine {}**;",
            cell("machine")
        ));
        for (name, _) in by.iter().filter(|(n, _)| n.as_str() != "machine") {
            s.push_str(&format!(" {name} {};", cell(name)));
        }
        s.push('\n');
    }
    if let Some(line) = cpu_while_offered(&samples, r["machine_cores"].as_u64()) {
        s.push_str(&line);
    }
    s
}

/// Cores each process kept busy while the load was offered (from the first sample
/// to the last at which the offered count grew), and the whole machine's busy cores
/// beside the cores it has: the line that shows whether CPU is what a run exhausts.
fn cpu_while_offered(samples: &[Value], cores: Option<u64>) -> Option<String> {
    let (dt, mut busy) = crate::capacity::cores_while_offered(samples)?;
    let machine = busy.remove("machine");
    let mut s = format!("\nCores busy while the load was offered ({dt:.0} s):");
    let mut names: Vec<(&String, &f64)> = busy.iter().collect();
    // The stages first, then the broker and this process.
    names.sort_by_key(|(n, _)| (matches!(n.as_str(), "broker" | "load"), n.as_str()));
    for (name, c) in names {
        let label = match name.as_str() {
            "load" => "generator and monitor",
            n => n,
        };
        s.push_str(&format!(" {label} {c:.2};"));
    }
    if let Some(m) = machine {
        s.push_str(&format!(" **machine {m:.2}"));
        if let Some(c) = cores {
            s.push_str(&format!(" of {c} cores"));
        }
        s.push_str("**.");
    }
    s.push('\n');
    Some(s)
}

/// RSS per stage (top) and offered vs sealed rate (bottom) over time.
fn svg(r: &Value) -> String {
    let samples = r["samples"].as_array().cloned().unwrap_or_default();
    let stages = stage_names(&samples);
    let (w, left, pw, ph) = (720.0, 60.0, 520.0, 200.0);
    let (top1, top2) = (40.0, 310.0);
    let h = top2 + ph + 50.0;
    let tmax = samples.iter().map(|s| f(s, "t")).fold(1.0, f64::max);
    let rmax = samples
        .iter()
        .flat_map(|s| {
            s["rss_mib"]
                .as_object()
                .into_iter()
                .flat_map(|o| o.values().filter_map(Value::as_f64))
        })
        .fold(1.0, f64::max)
        * 1.1;
    // Rates over 5-sample windows (an epoch seals 256 messages at once).
    let rates: Vec<(f64, f64, f64)> = samples
        .windows(6)
        .map(|p| {
            let (a, b) = (&p[0], &p[5]);
            let dt = (f(b, "t") - f(a, "t")).max(1e-9);
            (
                f(b, "t"),
                (f(b, "offered") - f(a, "offered")) / dt,
                (f(b, "sealed") - f(a, "sealed")) / dt,
            )
        })
        .collect();
    let qmax = rates.iter().map(|r| r.1.max(r.2)).fold(1.0, f64::max) * 1.1;
    let c = &r["config"];
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"11\">\n\
         <text x=\"{left}\" y=\"18\" font-size=\"13\">audita-load load: {} robots × {} commands/s, {} incidents/s — resident memory per stage (MiB)</text>\n",
        c["robots"], c["commands_per_s"], c["incidents_per_s"]
    );
    let axes = |s: &mut String, top: f64, max: f64, label: &str| {
        for i in 0..=4 {
            let y = top + ph * (1.0 - i as f64 / 4.0);
            s.push_str(&format!(
                "<line x1=\"{left}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{:.0}</text>\n",
                left + pw,
                left - 4.0,
                y + 4.0,
                max * i as f64 / 4.0
            ));
        }
        for i in 0..=5 {
            let x = left + pw * i as f64 / 5.0;
            s.push_str(&format!(
                "<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{:.0} s</text>\n",
                top + ph + 14.0,
                tmax * i as f64 / 5.0
            ));
        }
        s.push_str(&format!(
            "<text x=\"{left}\" y=\"{:.1}\" fill=\"#555\">{label}</text>\n",
            top - 6.0
        ));
    };
    axes(&mut s, top1, rmax, "");
    let palette = [
        "#1b7f79", "#b84a4a", "#3a5fb0", "#c98a1b", "#7a4fb0", "#4f8f3a", "#a0522d", "#555555",
    ];
    for (k, st) in stages.iter().enumerate() {
        let color = palette[k % palette.len()];
        let pts: Vec<String> = samples
            .iter()
            .filter_map(|smp| {
                let v = smp["rss_mib"][st].as_f64()?;
                Some(format!(
                    "{:.1},{:.1}",
                    left + pw * f(smp, "t") / tmax,
                    top1 + ph * (1.0 - v / rmax)
                ))
            })
            .collect();
        s.push_str(&format!(
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/>\n<text x=\"{:.1}\" y=\"{:.1}\" fill=\"{color}\">{st}</text>\n",
            pts.join(" "),
            left + pw + 10.0,
            top1 + 12.0 + 14.0 * k as f64
        ));
    }
    axes(
        &mut s,
        top2,
        qmax,
        "envelopes per second over 5 s: offered (grey) and sealed (teal)",
    );
    for (series, color) in [(1usize, "#999999"), (2usize, "#1b7f79")] {
        let pts: Vec<String> = rates
            .iter()
            .map(|r| {
                let v = if series == 1 { r.1 } else { r.2 };
                format!(
                    "{:.1},{:.1}",
                    left + pw * r.0 / tmax,
                    top2 + ph * (1.0 - v / qmax)
                )
            })
            .collect();
        s.push_str(&format!(
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/>\n",
            pts.join(" ")
        ));
    }
    s.push_str("</svg>\n");
    s
}
