//! `audita-load bench stages`: what each pipeline stage costs per envelope, measured alone.
//!
//! The fleet of `audita-load load` (robots under continuous control: pose reports,
//! commands, actuation reports, one receipt per envelope, facility incident cells) is
//! pre-signed and published whole to `audita.envelopes` / `audita.receipts` first.
//! Then each stage runs alone, in pipeline order, over what the previous one left on
//! the bus — ingest, sealer, slicer (with the monitor's detectors), engine workers — until its input is
//! drained, so nothing else of the process competes with it. For each stage the
//! benchmark reports the CPU time of the whole process while it ran (the stage's own
//! thread plus, on Kafka, librdkafka's threads) per envelope of the load (an envelope
//! *with its receipt*: the unit in which a fleet's traffic is counted), the rate it
//! sustained alone on one core, and, side by side, the physical reference measured in
//! the same run: one Ed25519 `verify_strict`, one signature of a 256-item batch
//! verification (what ingest does), and ingest's floor — the two batch verifications
//! an envelope and its receipt need.
//!
//! Design constraints:
//! - Each stage is started through the same `audita_pipeline::run_*` function the
//!   deployed stage processes and `audita demo` use, on the same deployment; it stops
//!   when no input arrived for the idle time. The active time is the span in which
//!   the middle 95% of its CPU time was spent ([`active_span`]), so neither the
//!   consumer-group join on Kafka nor the idle tail counts.
//! - With `--transport kafka` the broker runs beside the benchmark; its CPU during
//!   each phase is reported too when its process is found (`--broker-pid`, else the
//!   local `kafka.Kafka` java process).
//! - Each stage runs on a thread named after it, so `perf record -g` of the
//!   benchmark separates the stages by thread name (`perf report --sort comm,dso,sym`).

use crate::bench_pipeline::Transport;
use crate::host::{find_broker, self_cpu};
use crate::load::{feed, Lane, Load, LoadConfig, Placement, Scheduled};
use audita_bus::embedded::EmbeddedBus;
use audita_bus::Bus;
use audita_pipeline::metrics::Metrics;
use audita_pipeline::Deployment;
use clap::Args;
use ed25519_dalek::Signer as _;
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Arguments of `audita-load bench stages`.
#[derive(Args, Debug)]
pub struct StagesArgs {
    /// Robots in the warehouse (each: 1 pose report/s, `--rate` commands/s, an
    /// actuation report per command, a receipt per envelope).
    #[arg(long, default_value_t = 200)]
    pub robots: usize,
    /// Commands per second per robot.
    #[arg(long, default_value_t = 10.0)]
    pub rate: f64,
    /// Seconds of fleet traffic to pre-sign.
    #[arg(long, default_value_t = 20.0)]
    pub duration: f64,
    /// Facility incidents per second of traffic.
    #[arg(long, default_value_t = 0.5)]
    pub incident_rate: f64,
    /// Seed of keys, phases and scenarios.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Transport.
    #[arg(long, value_enum, default_value = "embedded")]
    pub transport: Transport,
    /// Kafka bootstrap (with `--transport kafka`).
    #[arg(long)]
    pub bootstrap: Option<String>,
    /// A librdkafka setting for every Kafka client of the run, `KEY=VALUE`
    /// (repeatable; e.g. `compression.type=none`), applied after Audita's defaults.
    #[arg(long = "kafka", value_name = "KEY=VALUE")]
    pub kafka: Vec<String>,
    /// The broker's process id, to report its CPU per phase (default: the local
    /// `kafka.Kafka` java process, if exactly one runs).
    #[arg(long)]
    pub broker_pid: Option<u32>,
    /// Ingest instances in the ingest phase (one consumer group, each on its own
    /// thread): `1` and `2` measure how ingest scales out.
    #[arg(long, default_value_t = 1)]
    pub ingest_instances: usize,
    /// After the stages: the slicer alone (without the detectors) again, as a
    /// cluster of each of these numbers of processes (comma-separated; Kafka only),
    /// over the same recorded stream: throughput, CPU per envelope and each
    /// process's share (the exchange's overhead is the difference to one process).
    #[arg(long, value_delimiter = ',')]
    pub slicer_processes: Vec<usize>,
    /// Write the measurement as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// The physical references of one run, µs per operation.
#[derive(Clone, Copy, Debug)]
struct Reference {
    verify_strict_us: f64,
    batch_us: f64,
}

fn measure_reference() -> Reference {
    let keys: Vec<ed25519_dalek::SigningKey> = (0..16)
        .map(|i| audita_evidence::derive_signing_key(9, &format!("bench-{i}")))
        .collect();
    let msgs: Vec<Vec<u8>> = (0..256u32)
        .map(|i| {
            let mut m = vec![7u8; 200];
            m[..4].copy_from_slice(&i.to_be_bytes());
            m
        })
        .collect();
    let signer = |i: usize| &keys[i % keys.len()];
    let sigs: Vec<ed25519_dalek::Signature> = msgs
        .iter()
        .enumerate()
        .map(|(i, m)| signer(i).sign(m))
        .collect();
    let vks: Vec<ed25519_dalek::VerifyingKey> =
        (0..msgs.len()).map(|i| signer(i).verifying_key()).collect();
    let n = 8_000;
    let t = Instant::now();
    for i in 0..n {
        let j = i % msgs.len();
        let _ =
            std::hint::black_box(vks[j].verify_strict(std::hint::black_box(&msgs[j]), &sigs[j]));
    }
    let verify_strict_us = t.elapsed().as_secs_f64() * 1e6 / n as f64;
    let refs: Vec<&[u8]> = msgs.iter().map(Vec::as_slice).collect();
    let rounds = 32;
    let t = Instant::now();
    for _ in 0..rounds {
        let _ = std::hint::black_box(ed25519_dalek::verify_batch(&refs, &sigs, &vks));
    }
    let batch_us = t.elapsed().as_secs_f64() * 1e6 / (rounds * msgs.len()) as f64;
    Reference {
        verify_strict_us,
        batch_us,
    }
}

/// What one stage cost, alone.
struct Phase {
    name: &'static str,
    cpu: Duration,
    active: Duration,
    broker_cpu_s: Option<f64>,
}

/// The span during which the middle 95% of a phase's CPU time was spent (scaled to
/// 100%), from `(wall, cumulative CPU)` samples: the consumer-group join before the
/// work and the idle wait after it cost little CPU, so neither counts, while a stage
/// that waits on its disk between bursts still has its waits counted.
fn active_span(samples: &[(Duration, Duration)], total: Duration) -> Option<Duration> {
    let at = |share: f64| {
        samples
            .iter()
            .find(|(_, c)| c.as_secs_f64() >= share * total.as_secs_f64())
            .map(|(t, _)| *t)
    };
    let (lo, hi) = (at(0.025)?, at(0.975)?);
    Some(
        hi.saturating_sub(lo)
            .max(Duration::from_millis(20))
            .div_f64(0.95),
    )
}

/// Runs `stage` on a thread named `name` until it returns, sampling this process's
/// CPU clock to find the span during which it worked ([`active_span`]).
fn run_phase(
    name: &'static str,
    broker: Option<u32>,
    stage: impl FnOnce() -> anyhow::Result<()> + Send,
) -> anyhow::Result<Phase> {
    let broker_before = broker.and_then(crate::host::proc_cpu_s);
    let cpu0 = self_cpu();
    let started = Instant::now();
    let done = AtomicBool::new(false);
    let (result, samples) = std::thread::scope(|s| {
        let worker = std::thread::Builder::new()
            .name(name.to_string())
            .spawn_scoped(s, || {
                let r = stage();
                done.store(true, Ordering::SeqCst);
                r
            })
            .map_err(|e| anyhow::anyhow!("spawning the {name} thread: {e}"));
        // The process's CPU clock every 20 ms: (wall since start, CPU since start).
        let mut samples: Vec<(Duration, Duration)> = Vec::new();
        while !done.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(20));
            samples.push((started.elapsed(), self_cpu().saturating_sub(cpu0)));
        }
        let result = match worker {
            Ok(h) => h
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("the {name} stage panicked"))),
            Err(e) => Err(e),
        };
        (result, samples)
    });
    result?;
    let cpu = self_cpu().saturating_sub(cpu0);
    let active = active_span(&samples, cpu).unwrap_or_else(|| started.elapsed());
    let broker_cpu_s = match (broker_before, broker.and_then(crate::host::proc_cpu_s)) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    Ok(Phase {
        name,
        cpu,
        active,
        broker_cpu_s,
    })
}

/// The fleet's traffic, pre-signed: what is published before the stages run.
struct Traffic {
    config: LoadConfig,
    load: Load,
    /// The load's schedule without its incident instants: the fleet publishes no
    /// declaration, the monitor detects every incident.
    schedule: Vec<Scheduled>,
    envelopes: u64,
    receipts: u64,
}

/// Signs `args.duration` seconds of the fleet's traffic (at most one pose report a
/// second per robot, incident cells at the current record time).
fn sign_traffic(args: &StagesArgs) -> anyhow::Result<Traffic> {
    let config = LoadConfig {
        robots: args.robots,
        commands_per_s: args.rate,
        reports_per_s: 1.0_f64.min(args.rate),
        incidents_per_s: args.incident_rate,
        duration: Duration::from_secs_f64(args.duration.min(3_600.0)),
        seed: args.seed,
        placement: Placement::Live,
    };
    config.validate()?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let signed = AtomicU64::new(0);
    let t = Instant::now();
    let load = Load::build(&config, threads, &signed)?;
    // The fleet publishes no declaration: the monitor detects every incident.
    let schedule: Vec<_> = load
        .schedule
        .iter()
        .filter(|s| s.lane != Lane::Adverse)
        .cloned()
        .collect();
    let envelopes = schedule.iter().filter(|s| s.lane == Lane::Envelope).count() as u64;
    let receipts = schedule.len() as u64 - envelopes;
    eprintln!(
        "bench stages: {} robots × {} commands/s for {} s: {envelopes} envelopes, {receipts} receipts, {} incident cells, signed in {:.1} s",
        config.robots,
        config.commands_per_s,
        args.duration,
        load.fleet.cells.len(),
        t.elapsed().as_secs_f64()
    );
    Ok(Traffic {
        config,
        load,
        schedule,
        envelopes,
        receipts,
    })
}

/// What the stages run on: one deployment and one bus.
struct Bench {
    d: Arc<Deployment>,
    bus: Bus,
    /// How long a stage waits without input before it stops.
    idle: Duration,
    /// The broker's process id, when its CPU is accounted.
    broker: Option<u32>,
}

/// The fleet's ephemeral deployment (its keys, duties and adverse predicates) under
/// `prefix`, on the bus `--transport` names, with its topics created.
fn open_bench(args: &StagesArgs, load: &Load, prefix: &str) -> anyhow::Result<Bench> {
    let mut d = Deployment::ephemeral(
        load.fleet.keys.clone(),
        load.fleet.duties()?,
        prefix,
        &crate::client::DEMO_KEEPERS,
    )?;
    let predicates = audita_monitor::Predicates::from_json(&load.fleet.predicates_json)?;
    if !predicates.predicates.is_empty() {
        d.predicates = Some(predicates);
    }
    let d = Arc::new(d);
    let (bus, idle, broker) = match args.transport {
        Transport::Embedded => (
            Bus::Embedded(EmbeddedBus::new(4)),
            Duration::from_millis(500),
            None,
        ),
        Transport::Kafka => {
            let b = args
                .bootstrap
                .as_deref()
                .ok_or_else(|| anyhow::anyhow!("--transport kafka needs --bootstrap HOST:PORT"))?;
            (
                Bus::Kafka(crate::host::kafka_bus(b, &args.kafka)?),
                Duration::from_secs(8),
                args.broker_pid.or_else(find_broker),
            )
        }
    };
    d.ensure_topics(&bus)?;
    Ok(Bench {
        d,
        bus,
        idle,
        broker,
    })
}

/// Publishes the whole schedule, as fast as the bus takes it.
fn publish(bus: &Bus, schedule: &[Scheduled], prefix: &str) -> anyhow::Result<()> {
    let mut p = bus.producer()?;
    let t = Instant::now();
    feed(schedule, p.as_mut(), prefix, 1e12, |_, _| {})?;
    p.flush()?;
    eprintln!(
        "bench stages: published {} records in {:.1} s",
        schedule.len(),
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Runs each stage alone, in pipeline order, over what the previous one left on the
/// bus: ingest (`instances` of it), sealer (its record under `work`), the slicer
/// (with the monitor's detectors when the deployment has adverse predicates), engine.
/// Returns what each cost.
fn run_stages(
    bench: &Bench,
    instances: usize,
    work: &Path,
    m: &Metrics,
) -> anyhow::Result<Vec<Phase>> {
    let (d, bus, idle, broker) = (&bench.d, &bench.bus, bench.idle, bench.broker);
    let stop = AtomicBool::new(false);
    let mut phases = Vec::new();
    phases.push(run_phase("ingest", broker, || {
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..instances)
                .map(|i| {
                    std::thread::Builder::new()
                        .name(format!("ingest-{i}"))
                        .spawn_scoped(s, || {
                            audita_pipeline::run_ingest(d, bus, &stop, Some(idle), m)
                        })
                })
                .collect();
            for w in workers {
                w?.join()
                    .map_err(|_| anyhow::anyhow!("an ingest instance panicked"))??;
            }
            Ok(())
        })
    })?);
    phases.push(run_phase("sealer", broker, || {
        audita_pipeline::run_sealer(d, bus, &work.join("record"), &stop, Some(idle), m)?;
        Ok(())
    })?);
    // The slicer's process runs the monitor's detectors over its join (they declare
    // the incidents it then slices): one phase, as deployed.
    phases.push(run_phase("slicer", broker, || {
        // Past the slicer's quiet period (1 s), so the last windows are emitted too.
        let wait = idle.max(Duration::from_millis(1_500));
        audita_pipeline::run_slicer(d, bus, idle, &stop, Some(wait), m)?;
        Ok(())
    })?);
    phases.push(run_phase("engine", broker, || {
        audita_pipeline::run_engine(d, bus, &stop, Some(idle), m)?;
        Ok(())
    })?);
    Ok(phases)
}

/// Runs `audita-load bench stages`: signs and publishes the fleet's traffic, runs each
/// stage alone over it, and writes the measurement (`--json`) and its table to `out`.
/// Fails when the sealer did not seal every envelope published.
pub fn run(args: &StagesArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    if !(args.duration.is_finite() && args.duration >= 1.0) {
        anyhow::bail!("--duration must be at least 1 second");
    }
    let reference_before = measure_reference();
    let traffic = sign_traffic(args)?;
    let (config, envelopes) = (&traffic.config, traffic.envelopes);
    let prefix = format!("stages{}.", std::process::id());
    let bench = open_bench(args, &traffic.load, &prefix)?;
    publish(&bench.bus, &traffic.schedule, &prefix)?;
    let work = tempfile_dir(&prefix)?;
    let m = Metrics::new();
    let instances = args.ingest_instances.clamp(1, 16);
    let phases = run_stages(&bench, instances, &work, &m)?;
    let declared_now = m.monitor_declarations.get();
    let mut clusters = Vec::new();
    if !args.slicer_processes.is_empty() {
        let Transport::Kafka = args.transport else {
            anyhow::bail!("--slicer-processes needs --transport kafka (the members are processes)");
        };
        let config = crate::kafka_run::create_deployment(&traffic.load, &work.join("deployment"))?;
        for n in &args.slicer_processes {
            clusters.push(run_cluster(
                args,
                &bench,
                &config,
                &prefix,
                *n,
                declared_now,
                &work,
            )?);
        }
    }
    let _ = std::fs::remove_dir_all(&work);
    let sealed = m.sealer_messages.get();
    let accepted = m.ingest_envelopes.with_label_values(&["accepted"]).get();
    let verdicts = m.engine_verdicts.get();
    let declared = m.monitor_declarations.get();
    let reference_after = measure_reference();
    let reference = Reference {
        verify_strict_us: reference_before
            .verify_strict_us
            .min(reference_after.verify_strict_us),
        batch_us: reference_before.batch_us.min(reference_after.batch_us),
    };
    let report = json!({
        "transport": bench.bus.transport(),
        "kafka_settings": args.kafka,
        "robots": config.robots,
        "ingest_instances": instances,
        "commands_per_s": config.commands_per_s,
        "duration_s": args.duration,
        "envelopes": envelopes,
        "receipts": traffic.receipts,
        "accepted": accepted,
        "sealed": sealed,
        "declared": declared,
        "verdicts": verdicts,
        "incident_cells": traffic.load.fleet.cells.len(),
        "verify_strict_us": reference.verify_strict_us,
        "batch_verify_us": reference.batch_us,
        "stages": phases.iter().map(|p| json!({
            "stage": p.name,
            "cpu_s": p.cpu.as_secs_f64(),
            "active_s": p.active.as_secs_f64(),
            "cpu_us_per_envelope": p.cpu.as_secs_f64() * 1e6 / envelopes.max(1) as f64,
            "alone_envelopes_per_s": envelopes as f64 / p.active.as_secs_f64().max(1e-9),
            "broker_cpu_s": p.broker_cpu_s,
        })).collect::<Vec<_>>(),
        "slicer_clusters": clusters.iter().map(|c| json!({
            "processes": c.processes,
            "slices": c.slices,
            "active_s": c.active.as_secs_f64(),
            "envelopes_per_s": envelopes as f64 / c.active.as_secs_f64().max(1e-9),
            "cpu_us_per_envelope": c.cpu.iter().sum::<f64>() * 1e6 / envelopes.max(1) as f64,
            "cpu_s_by_process": c.cpu,
            "peak_rss_mib_by_process": c.rss,
            "memory_by_process": c.memory,
        })).collect::<Vec<_>>(),
    });
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
    }
    writeln!(out, "{}", markdown(&report))?;
    if sealed != envelopes {
        anyhow::bail!("the sealer sealed {sealed} of the {envelopes} envelopes published");
    }
    Ok(())
}

/// The slicer alone as a cluster of `processes` (child processes of this binary over
/// the bus): what it cost.
struct ClusterRun {
    processes: usize,
    slices: u64,
    /// CPU seconds of each member.
    cpu: Vec<f64>,
    /// Peak resident MiB of each member.
    rss: Vec<f64>,
    active: Duration,
    /// Each member's last memory line ([`memory_line`]), as it stopped.
    memory: Vec<Option<Value>>,
}

/// The last `slicer memory` line of a slicer's log (`SlicerStage::memory`, logged
/// every 10 s and as it stops): messages held, bytes counted per held message,
/// resident MiB and the components, as JSON.
pub fn memory_line(log: &str) -> Option<Value> {
    let line = log.lines().rev().find(|l| l.contains("slicer memory"))?;
    let field = |name: &str| -> Option<u64> {
        let at = line.find(&format!(" {name}="))? + name.len() + 2;
        line[at..]
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    let components: serde_json::Map<String, Value> = line
        .split_once(" components=")
        .map(|(_, rest)| rest)
        .unwrap_or("")
        .split("; ")
        .filter_map(|c| {
            let (name, value) = c.rsplit_once(": ")?;
            let bytes: u64 = value.trim().strip_suffix(" B/msg")?.parse().ok()?;
            Some((name.to_string(), json!(bytes)))
        })
        .collect();
    Some(json!({
        "held": field("held")?,
        "counted_bytes_per_message": field("counted_bytes_per_message")?,
        "rss_mib": field("rss_mib")?,
        "components_bytes_per_message": components,
    }))
}

/// Runs the slicer alone (no detectors: the declarations are on `audita.adverse`
/// already) as `processes` child processes over the whole recorded stream, until
/// they have emitted a slice for each of the `declared` incidents; samples every
/// member's CPU clock to find the active span ([`active_span`]).
#[allow(clippy::too_many_arguments)]
fn run_cluster(
    args: &StagesArgs,
    bench: &Bench,
    config: &Path,
    prefix: &str,
    processes: usize,
    declared: u64,
    work: &Path,
) -> anyhow::Result<ClusterRun> {
    let bootstrap = args.bootstrap.clone().unwrap_or_default();
    let peers: Vec<String> = if processes > 1 {
        (0..processes)
            .map(|_| crate::kafka_run::metrics_addr().map(|a| a.to_string()))
            .collect::<anyhow::Result<_>>()?
    } else {
        Vec::new()
    };
    let Bus::Kafka(kafka) = &bench.bus else {
        anyhow::bail!("a slicer cluster runs over Kafka");
    };
    let slices_topic = bench.d.topic(audita_topics::names::SLICES);
    let mut seen =
        kafka.consumer_from_end(&format!("{prefix}cluster-{processes}"), &[&slices_topic])?;
    // Joined once the consumer has its partitions: wait for its first (empty) poll.
    let _ = audita_bus::Consumer::poll(&mut seen, Duration::from_secs(3))?;
    let exe = std::env::current_exe()?;
    let mut children = Vec::new();
    for i in 0..processes {
        let dir = work.join(format!("slicer-{processes}-{i}"));
        std::fs::create_dir_all(&dir)?;
        let log = std::fs::File::create(work.join(format!("slicer-{processes}-{i}.log")))?;
        let mut c = std::process::Command::new(&exe);
        c.args(["load", "--stage", "slicer", "--slicer-alone"])
            .args(["--bootstrap", &bootstrap, "--prefix", prefix])
            .arg("--deployment")
            .arg(config)
            .arg("--dir")
            .arg(&dir)
            .args(["--slicer-wait-ms", "1500"])
            .args(args.kafka.iter().flat_map(|k| ["--kafka", k.as_str()]));
        if processes > 1 {
            c.args([
                "--slicer-peers",
                &peers.join(","),
                "--slicer-index",
                &i.to_string(),
            ]);
        }
        children.push(c.stdout(std::process::Stdio::null()).stderr(log).spawn()?);
    }
    let pids: Vec<u32> = children.iter().map(|c| c.id()).collect();
    let cpu_now = || -> Vec<f64> {
        pids.iter()
            .map(|p| crate::host::proc_cpu_s(*p).unwrap_or(0.0))
            .collect()
    };
    let started = Instant::now();
    let mut samples: Vec<(Duration, Duration)> = Vec::new();
    let mut rss = vec![0.0f64; processes];
    let mut slices = 0u64;
    let deadline = started + Duration::from_secs(600);
    while slices < declared && Instant::now() < deadline {
        while let Some(_d) = audita_bus::Consumer::poll(&mut seen, Duration::from_millis(20))? {
            slices += 1;
        }
        let cpu: f64 = cpu_now().iter().sum();
        samples.push((started.elapsed(), Duration::from_secs_f64(cpu)));
        for (i, p) in pids.iter().enumerate() {
            rss[i] = rss[i].max(crate::host::proc_rss_mib(*p).unwrap_or(0.0));
        }
        if let Some((i, s)) = children
            .iter_mut()
            .enumerate()
            .find_map(|(i, c)| c.try_wait().ok().flatten().map(|s| (i, s)))
        {
            anyhow::bail!(
                "slicer member {i} of {processes} exited early ({s}); log in {}",
                work.display()
            );
        }
    }
    let cpu = cpu_now();
    for c in &mut children {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status();
    }
    for c in &mut children {
        let _ = c.wait();
    }
    let memory = (0..processes)
        .map(|i| {
            let log = std::fs::read_to_string(work.join(format!("slicer-{processes}-{i}.log")));
            memory_line(&log.unwrap_or_default())
        })
        .collect();
    if slices < declared {
        anyhow::bail!("the slicer as {processes} processes emitted {slices} of {declared} slices within 600 s");
    }
    let total = Duration::from_secs_f64(cpu.iter().sum());
    let active = active_span(&samples, total).unwrap_or_else(|| started.elapsed());
    eprintln!(
        "bench stages: slicer × {processes}: {slices} slices, {:.1} s active, CPU {:?} s",
        active.as_secs_f64(),
        cpu
    );
    Ok(ClusterRun {
        processes,
        slices,
        cpu,
        rss,
        active,
        memory,
    })
}

fn tempfile_dir(prefix: &str) -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("audita-{prefix}d"));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// The measurement as a Markdown table (what BENCHMARKS.md shows).
pub fn markdown(r: &Value) -> String {
    let f = |v: &Value, k: &str| v[k].as_f64().unwrap_or(0.0);
    let strict = f(r, "verify_strict_us");
    let batch = f(r, "batch_verify_us");
    let mut transport = r["transport"].as_str().unwrap_or("").to_string();
    let settings: Vec<&str> = r["kafka_settings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if !settings.is_empty() {
        transport = format!("{transport} (librdkafka {})", settings.join(", "));
    }
    let mut s = format!(
        "{} bus, {} robots × {} commands/s, {} s of traffic: {} envelopes + {} receipts; \
         sealed {}, incidents declared by the monitor {}, verdicts {}.\n\
         Same run: Ed25519 `verify_strict` {:.1} µs, one signature of a 256-batch {:.1} µs \
         (ingest's floor, two batch verifications per envelope: {:.1} µs).\n\n\
         | stage | CPU µs / envelope | × verify_strict | × batch verify | alone, envelopes/s | broker CPU µs / envelope |\n\
         |---|---|---|---|---|---|\n",
        transport,
        r["robots"],
        r["commands_per_s"],
        r["duration_s"],
        r["envelopes"],
        r["receipts"],
        r["sealed"],
        r["declared"],
        r["verdicts"],
        strict,
        batch,
        2.0 * batch
    );
    let n = f(r, "envelopes").max(1.0);
    let mut total = 0.0;
    for p in r["stages"].as_array().into_iter().flatten() {
        let us = f(p, "cpu_us_per_envelope");
        total += us;
        let broker = p["broker_cpu_s"]
            .as_f64()
            .map_or("–".to_string(), |b| format!("{:.1}", b * 1e6 / n));
        let mut name = p["stage"].as_str().unwrap_or("").to_string();
        let instances = r["ingest_instances"].as_u64().unwrap_or(1);
        if name == "ingest" && instances > 1 {
            name = format!("ingest × {instances}");
        }
        s.push_str(&format!(
            "| {} | {:.1} | {:.2} | {:.2} | {:.0} | {} |\n",
            name,
            us,
            us / strict.max(1e-9),
            us / batch.max(1e-9),
            f(p, "alone_envelopes_per_s"),
            broker
        ));
    }
    s.push_str(&format!(
        "| **all stages** | {:.1} | {:.2} | {:.2} | {:.0} (one core) | |\n",
        total,
        total / strict.max(1e-9),
        total / batch.max(1e-9),
        1e6 / total.max(1e-9)
    ));
    let clusters: Vec<&Value> = r["slicer_clusters"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    if !clusters.is_empty() {
        let one = clusters
            .iter()
            .find(|c| c["processes"] == 1)
            .map(|c| f(c, "cpu_us_per_envelope"));
        s.push_str(
            "\nThe slicer alone (no detectors) as a cluster, same stream:\n\n| processes | slices | envelopes/s | CPU µs / envelope (all processes) | × verify_strict | × one process | each process's share of the CPU | peak RSS MiB per process |\n|---|---|---|---|---|---|---|---|\n",
        );
        for c in &clusters {
            let us = f(c, "cpu_us_per_envelope");
            let cpu: Vec<f64> = c["cpu_s_by_process"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_f64)
                .collect();
            let sum: f64 = cpu.iter().sum::<f64>().max(1e-9);
            let shares: Vec<String> = cpu
                .iter()
                .map(|x| format!("{:.0} %", 100.0 * x / sum))
                .collect();
            let rss: Vec<String> = c["peak_rss_mib_by_process"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_f64)
                .map(|m| format!("{m:.0}"))
                .collect();
            s.push_str(&format!(
                "| {} | {} | {:.0} | {:.1} | {:.2} | {} | {} | {} |\n",
                c["processes"],
                c["slices"],
                f(c, "envelopes_per_s"),
                us,
                us / strict.max(1e-9),
                one.map_or("–".to_string(), |o| format!("{:.2}", us / o.max(1e-9))),
                shares.join(" / "),
                rss.join(" / "),
            ));
        }
        s.push_str(&memory_table(&clusters));
    }
    s
}

/// The slicer's memory per held message by component, per cluster size (each
/// member's last memory line; a member without one is left out).
fn memory_table(clusters: &[&Value]) -> String {
    let lines: Vec<(u64, usize, &Value)> = clusters
        .iter()
        .flat_map(|c| {
            let n = c["processes"].as_u64().unwrap_or(0);
            c["memory_by_process"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
                .filter(|(_, m)| !m.is_null())
                .map(move |(i, m)| (n, i, m))
        })
        .collect();
    let Some((_, _, first)) = lines.first() else {
        return String::new();
    };
    let names: Vec<&String> = first["components_bytes_per_message"]
        .as_object()
        .map(|o| o.keys().collect())
        .unwrap_or_default();
    let mut s = String::from(
        "\nThe slicer's memory per held message (B), as each member stopped: its own accounting by component, and its resident set over the messages it held:\n\n| processes | member | held | ",
    );
    for n in &names {
        s.push_str(&format!("{n} | "));
    }
    s.push_str("counted | RSS / held |\n|---|---|---|");
    s.push_str(&"---|".repeat(names.len() + 2));
    s.push('\n');
    for (n, i, m) in lines {
        let held = m["held"].as_u64().unwrap_or(0);
        s.push_str(&format!("| {n} | {i} | {held} | "));
        for name in &names {
            let b = &m["components_bytes_per_message"][name.as_str()];
            s.push_str(&format!(
                "{} | ",
                b.as_u64().map_or("–".into(), |b| b.to_string())
            ));
        }
        let rss = m["rss_mib"].as_u64().unwrap_or(0) << 20;
        s.push_str(&format!(
            "{} | {} |\n",
            m["counted_bytes_per_message"],
            rss.checked_div(held).map_or("–".into(), |b| b.to_string())
        ));
    }
    s
}

#[cfg(test)]
mod memory_tests {
    use super::*;

    #[test]
    fn the_last_memory_line_of_a_slicer_log_is_read_with_its_components() {
        let log = "2026-12-07T15:00:00Z  INFO audita_slicer::stage: slicer memory member=0 held=10 counted_mib=0 counted_bytes_per_message=300 rss_mib=1 components=slab (message slots): 120 B/msg; key index: 40 B/msg
2026-12-07T15:00:10Z  INFO audita_slicer::stage: slicer memory member=0 held=2000 counted_mib=0 counted_bytes_per_message=310 rss_mib=3 components=slab (message slots): 130 B/msg; key index: 41 B/msg; citation edges (arrangement): 84 B/msg
2026-12-07T15:00:11Z  INFO audita_slicer::stage: slicer stopped";
        let m = memory_line(log).expect("a memory line");
        assert_eq!(m["held"], 2000);
        assert_eq!(m["counted_bytes_per_message"], 310);
        assert_eq!(m["rss_mib"], 3);
        let c = &m["components_bytes_per_message"];
        assert_eq!(c["slab (message slots)"], 130);
        assert_eq!(c["citation edges (arrangement)"], 84);
        assert_eq!(c.as_object().unwrap().len(), 3);
        assert!(memory_line("no such line").is_none());
        let table = memory_table(&[&json!({"processes": 1, "memory_by_process": [m]})]);
        assert!(
            table.contains("| 1 | 0 | 2000 | 84 | 41 | 130 | 310 | 1572 |"),
            "{table}"
        );
    }
}
