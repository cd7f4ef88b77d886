//! `audita stage NAME --config DIR/audita.toml` and `audita feed`: one pipeline stage
//! as its own process over Apache Kafka (the same stage code the embedded demo runs as
//! threads), configured by the deployment's files alone; the feed publishes the
//! simulated fleet as a client of the deployment, signed with its registered keys.

use crate::pipeline::{self, Deployment};
use audita_bus::kafka::KafkaBus;
use audita_bus::Bus;
use audita_sinks::metrics::Metrics;
use clap::{Args, ValueEnum};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// The stages that run as processes.
#[derive(Clone, Copy, Debug, ValueEnum)]
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
}

impl StageName {
    /// The stage's metric name prefix (`audita_<prefix>_…`).
    fn metrics_prefix(self) -> &'static str {
        match self {
            StageName::Ingest => "ingest",
            StageName::Sealer => "sealer",
            StageName::Slicer => "slicer",
            StageName::Engine => "engine",
            StageName::Sink => "sinks",
        }
    }
}

/// SIGTERM and SIGINT set `stop`: the stage stops taking input, flushes what it
/// produced, commits what it took and exits 0. A second signal while it drains exits
/// at once (status 1), for an operator who will not wait.
fn stop_on_signals(stop: &Arc<AtomicBool>) -> std::io::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    for sig in [SIGTERM, SIGINT] {
        // Order matters: the conditional shutdown sees the flag the first signal set.
        signal_hook::flag::register_conditional_shutdown(sig, 1, stop.clone())?;
        signal_hook::flag::register(sig, stop.clone())?;
    }
    Ok(())
}

/// Arguments shared by `stage` and `feed`.
#[derive(Args)]
pub struct StageArgs {
    /// Which stage.
    #[arg(value_enum)]
    pub name: StageName,
    #[command(flatten)]
    pub common: Common,
    /// Record directory (sealer) or output directory (sink).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Stop after this many ms without input (unset: run until killed).
    #[arg(long)]
    pub max_idle_ms: Option<u64>,
    /// Serve Prometheus /metrics on this address (e.g. 127.0.0.1:9464).
    #[arg(long)]
    pub metrics: Option<std::net::SocketAddr>,
    /// Slicer only: how long a declaration waits for the event-time watermark once the
    /// stream goes quiet (longer than an upstream stage takes to restart).
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
    pub retention: pipeline::Retention,
}

/// Deployment flags.
#[derive(Args)]
pub struct Common {
    /// The deployment's configuration (audita.toml, or its directory): registries,
    /// keys and settings; a stage reads nothing else about the world.
    #[arg(long)]
    pub config: PathBuf,
    /// Kafka bootstrap servers, overriding the configuration's `bootstrap.servers`.
    #[arg(long)]
    pub bootstrap: Option<String>,
}

/// Arguments of `audita feed`.
#[derive(Args)]
pub struct FeedArgs {
    #[command(flatten)]
    pub common: Common,
    /// The simulated fleet (registered with `audita fleet register`).
    #[command(flatten)]
    pub fleet: crate::deployment::FleetShape,
    /// Messages per second (unset: as fast as the broker takes them).
    #[arg(long)]
    pub rate: Option<f64>,
}

fn setup(c: &Common, sealer: bool) -> anyhow::Result<(Deployment, Bus, audita_deploy::Config)> {
    let cfg = audita_deploy::Config::load(&crate::deployment::config_path(&c.config))?;
    let d = Deployment::from_config(&cfg, sealer)?;
    let bus = Bus::Kafka(KafkaBus::from_settings(&cfg.kafka, c.bootstrap.as_deref())?);
    d.ensure_topics(&bus)?;
    Ok((d, bus, cfg))
}

pub fn run_stage(args: &StageArgs) -> i32 {
    let result = (|| -> anyhow::Result<()> {
        // Flags first: a bad value is a one-line error before any connection.
        args.retention.validate()?;
        let sealer = matches!(args.name, StageName::Sealer);
        let (mut d, bus, _) = setup(&args.common, sealer)?;
        args.retention.apply_given(&mut d)?;
        let m = Metrics::for_stage(args.name.metrics_prefix());
        if let Some(addr) = args.metrics {
            let bound = m
                .serve(addr)
                .map_err(|e| anyhow::anyhow!("--metrics {addr}: {e}"))?;
            tracing::info!(%bound, "serving /metrics, /healthz, /readyz");
        }
        let stop = Arc::new(AtomicBool::new(false));
        stop_on_signals(&stop)?;
        // Connected (the topics exist on the broker): ready until a signal drains it.
        m.drain_on(&stop);
        m.set_ready(true);
        let idle = args.max_idle_ms.map(Duration::from_millis);
        let dir = || {
            args.dir
                .clone()
                .ok_or_else(|| anyhow::anyhow!("--dir is required for this stage"))
        };
        match args.name {
            StageName::Ingest => pipeline::run_ingest(&d, &bus, &stop, idle, &m).map(|_| ()),
            StageName::Sealer => pipeline::run_sealer(&d, &bus, &dir()?, &stop, idle, &m),
            StageName::Slicer => pipeline::run_slicer(
                &d,
                &bus,
                Duration::from_millis(args.quiet_wait_ms),
                &stop,
                idle,
                &m,
            ),
            StageName::Engine => pipeline::run_engine(&d, &bus, &stop, idle, &m).map(|_| ()),
            StageName::Sink => {
                let out = dir()?;
                if let Some(text) = &args.record_origin {
                    let origin = audita_sinks::tables::RecordOrigin::parse(text)
                        .map_err(|e| anyhow::anyhow!("--record-origin: {e}"))?;
                    audita_sinks::tables::RecordOrigin::resolve(
                        &out.join("verdicts"),
                        Some(origin),
                    )?;
                }
                let expect = args.expect;
                let json_dir = out.join("verdicts-json");
                std::fs::create_dir_all(&json_dir)?;
                let c = pipeline::run_sink(&d, &bus, &out, expect, &stop, idle, &m, |v| {
                    let stem = audita_sinks::report::stem(&v.incident);
                    let _ = std::fs::write(
                        json_dir.join(format!("{stem}.json")),
                        v.verdict
                            .as_ref()
                            .map(|j| j.to_string())
                            .unwrap_or_else(|| serde_json::to_string(v).unwrap_or_default()),
                    );
                })?;
                std::fs::write(
                    out.join("rows.json"),
                    serde_json::to_vec_pretty(&pipeline::rows(&c))?,
                )?;
                Ok(())
            }
        }
    })();
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("audita stage {:?}: {e:#}", args.name);
            2
        }
    }
}

pub fn run_feed(args: &FeedArgs) -> i32 {
    let result = (|| -> anyhow::Result<()> {
        let (d, bus, cfg) = setup(&args.common, false)?;
        let d = d.with_fleet(crate::deployment::fleet_of(&cfg, &args.fleet)?);
        pipeline::feed(&d, &bus, args.rate, |_| {})
    })();
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("audita feed: {e:#}");
            2
        }
    }
}
