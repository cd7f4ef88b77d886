//! One stage as its own process over Apache Kafka (`audita stage NAME --config
//! DIR/audita.toml`): the same stage code the embedded demo runs as threads,
//! configured by the deployment's files alone.
//!
//! Design constraints:
//! - Flags are validated before any connection; a bad value is a one-line error.
//! - SIGTERM and SIGINT set the stage's stop flag: `/readyz` goes 503, the stage stops
//!   taking input, flushes what it produced, commits what it took and returns; a
//!   second signal while it drains exits at once (status 1).
//! - The process exports only its own stage's metrics ([`Metrics::for_stage`]).

use crate::metrics::Metrics;
use crate::supervise::Backoff;
use crate::{Deployment, Error, Result, Retention};
use audita_bus::kafka::KafkaBus;
use audita_bus::Bus;
use clap::{Args, ValueEnum};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// The stages that run as processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StageName {
    /// Signature and form checks.
    Ingest,
    /// Epochs, checkpoints, durable record.
    Sealer,
    /// Citation graph and incident slices.
    Slicer,
    /// Gate, grade, certify, verdict (run several for a consumer group).
    Engine,
    /// Parquet verdict files and rows.json.
    Sink,
    /// Adverse predicates over sealed epochs: alerts and declarations.
    Monitor,
    /// Every incident's alert to Alertmanager (`[notifier]`), updated as it is judged.
    Notifier,
}

impl StageName {
    /// The stage's metric name prefix (`audita_<prefix>_…`).
    pub fn metrics_prefix(self) -> &'static str {
        match self {
            StageName::Ingest => "ingest",
            StageName::Sealer => "sealer",
            StageName::Slicer => "slicer",
            StageName::Engine => "engine",
            StageName::Sink => "sinks",
            StageName::Monitor => "monitor",
            StageName::Notifier => "notifier",
        }
    }
}

/// Where a process finds its deployment and its broker.
#[derive(Args, Clone, Debug)]
pub struct Connect {
    /// The deployment's configuration (audita.toml, or its directory): registries,
    /// keys and settings; a stage reads nothing else about the world.
    #[arg(long)]
    pub config: PathBuf,
    /// Kafka bootstrap servers, overriding the configuration's `bootstrap.servers`.
    #[arg(long)]
    pub bootstrap: Option<String>,
}

/// The `audita.toml` of a deployment directory argument (a directory or the file).
pub fn config_path(dir: &Path) -> PathBuf {
    if dir.is_dir() {
        dir.join("audita.toml")
    } else {
        dir.to_path_buf()
    }
}

impl Connect {
    /// Loads the deployment (with the sealer's private keys when `sealer`), connects
    /// to its Kafka cluster and creates the topics.
    pub fn open(&self, sealer: bool) -> Result<(Deployment, Bus, audita_deploy::Config)> {
        let cfg = audita_deploy::Config::load(&config_path(&self.config))?;
        let d = Deployment::from_config(&cfg, sealer)?;
        let bus = Bus::Kafka(KafkaBus::from_settings(
            &cfg.kafka,
            self.bootstrap.as_deref(),
        )?);
        d.ensure_topics(&bus)?;
        Ok((d, bus, cfg))
    }
}

/// Arguments of one stage process.
#[derive(Args, Clone, Debug)]
pub struct StageArgs {
    /// Which stage.
    #[arg(value_enum)]
    pub name: StageName,
    /// The deployment and its broker.
    #[command(flatten)]
    pub connect: Connect,
    /// Record directory (sealer) or output directory (sink).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Stop after this many ms without input (unset: run until stopped).
    #[arg(long)]
    pub max_idle_ms: Option<u64>,
    /// Serve Prometheus /metrics, /healthz and /readyz on this address (e.g.
    /// 127.0.0.1:9464).
    #[arg(long)]
    pub metrics: Option<std::net::SocketAddr>,
    /// Slicer and monitor: how long a declaration waits for the event-time watermark
    /// once the stream goes quiet (longer than an upstream stage takes to restart).
    #[arg(long, default_value_t = 15_000)]
    pub quiet_wait_ms: u64,
    /// Sink only: exit once this many incidents have a verdict (or abstention).
    #[arg(long)]
    pub expect: Option<usize>,
    /// Sink only: the wall-clock instant (RFC 3339, UTC) of record time 0, from which
    /// the tables' and reports' wall-clock times are derived. Default: the one kept in
    /// DIR/verdicts/record-origin.json, else the time the sink first opens DIR.
    #[arg(long)]
    pub record_origin: Option<String>,
    /// Sealer and slicer memory bounds (override the deployment's `[retention]`).
    #[command(flatten)]
    pub retention: Retention,
    /// Slicer only: the processes of a slicer cluster.
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// The slicer as a cluster of processes (timely's cluster mode,
/// [`audita_slicer::cluster`]).
#[derive(Args, Clone, Debug, Default)]
pub struct ClusterArgs {
    /// Slicer only: every member's address (`host:port`, comma-separated, in member
    /// order), this process's among them; unset: a slicer of one process.
    #[arg(long, value_delimiter = ',')]
    pub peers: Vec<String>,
    /// Slicer only: this process's index among `--peers`.
    #[arg(long, conflicts_with = "index_from_hostname")]
    pub index: Option<usize>,
    /// Slicer only: take the index from the trailing `-N` of the host name (a
    /// Kubernetes StatefulSet's pod `NAME-N`).
    #[arg(long)]
    pub index_from_hostname: bool,
}

impl ClusterArgs {
    /// The cluster these flags describe (`None`: no `--peers`, one process).
    pub fn cluster(&self) -> Result<Option<audita_slicer::cluster::Cluster>> {
        if self.peers.is_empty() {
            if self.index.is_some() || self.index_from_hostname {
                return Err(Error::Invalid(
                    "--index and --index-from-hostname need --peers".into(),
                ));
            }
            return Ok(None);
        }
        let index = match (self.index, self.index_from_hostname) {
            (Some(i), _) => i,
            (None, true) => {
                let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .ok()
                    .or_else(|| std::env::var("HOSTNAME").ok())
                    .unwrap_or_default();
                let host = host.trim();
                host.rsplit_once('-')
                    .and_then(|(_, n)| n.parse().ok())
                    .ok_or_else(|| {
                        Error::Invalid(format!(
                            "--index-from-hostname: host name {host:?} does not end in -N"
                        ))
                    })?
            }
            (None, false) => {
                return Err(Error::Invalid(
                    "--peers needs --index or --index-from-hostname".into(),
                ))
            }
        };
        audita_slicer::cluster::Cluster::new(index, self.peers.clone())
            .map(Some)
            .map_err(Error::Invalid)
    }
}

/// SIGTERM and SIGINT set `stop`; a second one while the stage drains exits at once
/// (status 1), for an operator who will not wait.
pub fn stop_on_signals(stop: &Arc<AtomicBool>) -> Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let fail = |e: std::io::Error| Error::Invalid(format!("installing signal handlers: {e}"));
    for sig in [SIGTERM, SIGINT] {
        // Order matters: the conditional shutdown sees the flag the first signal set.
        signal_hook::flag::register_conditional_shutdown(sig, 1, stop.clone()).map_err(fail)?;
        signal_hook::flag::register(sig, stop.clone()).map_err(fail)?;
    }
    Ok(())
}

/// Runs one stage process until it is stopped (a signal) or idle for `--max-idle-ms`.
pub fn run(args: &StageArgs) -> Result<()> {
    // Flags first: a bad value is a one-line error before any connection.
    args.retention.validate()?;
    let cluster = args.cluster.cluster()?;
    if cluster.is_some() && args.name != StageName::Slicer {
        return Err(Error::Invalid("--peers is a slicer flag".into()));
    }
    let record_origin = args
        .record_origin
        .as_deref()
        .map(audita_sinks::tables::RecordOrigin::parse)
        .transpose()
        .map_err(|e| Error::Invalid(format!("--record-origin: {e}")))?;
    let dir = || {
        args.dir
            .clone()
            .ok_or_else(|| Error::Invalid("--dir is required for this stage".into()))
    };
    let (mut d, bus, cfg) = args.connect.open(args.name == StageName::Sealer)?;
    args.retention.apply(&mut d)?;
    let m = Metrics::for_stage(args.name.metrics_prefix());
    if let Some(addr) = args.metrics {
        let bound = m
            .serve(addr)
            .map_err(|e| Error::Invalid(format!("--metrics {addr}: {e}")))?;
        tracing::info!(%bound, "serving /metrics, /healthz, /readyz");
    }
    let stop = Arc::new(AtomicBool::new(false));
    stop_on_signals(&stop)?;
    // Connected (the topics exist on the broker): ready until a signal drains it.
    m.drain_on(&stop);
    m.set_ready(true);
    // One line at every log level: what this process is and that it is serving.
    eprintln!(
        "audita stage {}: ready — deployment {}, topics {}audita.*{}{}",
        match args.name {
            StageName::Sink => "sink",
            other => other.metrics_prefix(),
        },
        d.origin,
        d.prefix,
        args.dir
            .as_ref()
            .map(|p| format!(", directory {}", p.display()))
            .unwrap_or_default(),
        d.record_origin
            .filter(|_| args.name == StageName::Sink)
            .map(|o| format!(", record time 0 = {}", o.text()))
            .unwrap_or_default()
    );
    let idle = args.max_idle_ms.map(Duration::from_millis);
    // A fault a wait can heal (the broker gone, a full disk) stops the stage, which
    // reopens from its durable state by itself (`crate::supervise`).
    let name = args.name.metrics_prefix();
    let supervised = |attempt: &mut dyn FnMut() -> Result<()>| {
        crate::supervise::supervise(name, &m, &stop, Backoff::default(), attempt)
    };
    match args.name {
        StageName::Ingest => {
            supervised(&mut || crate::run_ingest(&d, &bus, &stop, idle, &m).map(|_| ()))
        }
        StageName::Sealer => {
            let dir = dir()?;
            supervised(&mut || crate::run_sealer(&d, &bus, &dir, &stop, idle, &m))
        }
        StageName::Slicer => supervised(&mut || {
            crate::run_slicer_member(
                &d,
                &bus,
                Duration::from_millis(args.quiet_wait_ms),
                &stop,
                idle,
                &m,
                cluster.as_ref(),
                true,
            )
        }),
        StageName::Engine => {
            supervised(&mut || crate::run_engine(&d, &bus, &stop, idle, &m).map(|_| ()))
        }
        StageName::Monitor => {
            if d.predicates.is_none() {
                return Err(Error::Invalid(
                    "the deployment declares no adverse predicates ([registry] predicates): nothing to monitor".into(),
                ));
            }
            supervised(&mut || {
                crate::monitor::run_monitor(
                    &d,
                    &bus,
                    Duration::from_millis(args.quiet_wait_ms),
                    &stop,
                    idle,
                    &m,
                )
            })
        }
        StageName::Notifier => {
            let settings = crate::notifier_settings(&cfg, &d)?.ok_or_else(|| {
                Error::Invalid(
                    "the deployment declares no [notifier] (its Alertmanager url): nothing to notify"
                        .into(),
                )
            })?;
            supervised(&mut || {
                crate::run_notifier(&d, &bus, &settings, &stop, idle, &m).map(|_| ())
            })
        }
        StageName::Sink => {
            let out = dir()?;
            if let Some(origin) = record_origin {
                if let Some(declared) = d.record_origin.filter(|o| *o != origin) {
                    return Err(Error::Invalid(format!(
                        "--record-origin {} contradicts the deployment's [clock] (record time 0 is {})",
                        origin.text(),
                        declared.text()
                    )));
                }
                d.record_origin = Some(origin);
            }
            let json_dir = out.join("verdicts-json");
            let io = |what: &Path, e: std::io::Error| {
                Error::Invalid(format!("writing {}: {e}", what.display()))
            };
            std::fs::create_dir_all(&json_dir).map_err(|e| io(&json_dir, e))?;
            let c = crate::supervise::supervise(name, &m, &stop, Backoff::default(), || {
                crate::run_sink(&d, &bus, &out, args.expect, &stop, idle, &m, |v| {
                    // Canonical JSON (sorted keys, pretty, one trailing newline): the bytes
                    // `audita verdict` prints for the same verdict, so `cmp` re-checks it.
                    let stem = audita_sinks::report::stem(&v.incident);
                    let text = match &v.verdict {
                        Some(j) => serde_json::to_string_pretty(j),
                        None => {
                            serde_json::to_value(v).and_then(|j| serde_json::to_string_pretty(&j))
                        }
                    };
                    let _ = std::fs::write(
                        json_dir.join(format!("{stem}.json")),
                        text.unwrap_or_default() + "\n",
                    );
                })
            })?;
            let rows = out.join("rows.json");
            let json = serde_json::to_vec_pretty(&c.rows())
                .map_err(|e| Error::Invalid(format!("rows.json: {e}")))?;
            std::fs::write(&rows, json).map_err(|e| io(&rows, e))?;
            Ok(())
        }
    }
}
