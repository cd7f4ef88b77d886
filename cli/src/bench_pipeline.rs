//! `audita bench-pipeline`: end-to-end throughput, adverse-event-to-verdict latency and
//! resident memory of the pipeline, next to the single-core Ed25519 verification limit
//! measured in the same run (every accepted message costs at least one verification).

use audita_bus::embedded::EmbeddedBus;
use audita_bus::kafka::KafkaBus;
use audita_bus::Bus;
use audita_evidence::derive_signing_key;
use audita_load_tests::fleet;
use audita_pipeline::metrics::Metrics;
use audita_pipeline::Deployment;
use clap::{Args, ValueEnum};
use ed25519_dalek::Signer as _;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Transport under test.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Transport {
    /// In-process bus.
    Embedded,
    /// Apache Kafka (`--bootstrap`).
    Kafka,
}

/// Arguments of `audita bench-pipeline`.
#[derive(Args)]
pub struct BenchPipelineArgs {
    /// Facility cells in the fleet (about 7 signed messages and one incident each).
    #[arg(long, default_value_t = 2000)]
    pub cells: usize,
    /// Transport.
    #[arg(long, value_enum, default_value = "embedded")]
    pub transport: Transport,
    /// Kafka bootstrap (with `--transport kafka`).
    #[arg(long)]
    pub bootstrap: Option<String>,
    /// Engine workers.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Fleet seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

pub(crate) fn ed25519_single_core_per_s() -> f64 {
    let key = derive_signing_key(9, "bench");
    let vk = key.verifying_key();
    let msg = [7u8; 180];
    let sig = key.sign(&msg);
    let n = 20_000;
    let t = Instant::now();
    for _ in 0..n {
        let _ = std::hint::black_box(vk.verify_strict(std::hint::black_box(&msg), &sig));
    }
    n as f64 / t.elapsed().as_secs_f64()
}

pub fn run(args: &BenchPipelineArgs) -> i32 {
    match bench(args) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("audita bench-pipeline: {e:#}");
            2
        }
    }
}

pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn bench(args: &BenchPipelineArgs) -> anyhow::Result<()> {
    let limit = ed25519_single_core_per_s();
    let prefix = format!("bench{}.", std::process::id());
    let built = Instant::now();
    if args.cells == 0 {
        anyhow::bail!("--cells must be at least 1");
    }
    // The benchmark's fleet signs with seed-derived keys (a reproducible client); the
    // deployment it feeds is a throw-away one with fresh log and keeper keys.
    let fleet = fleet::build(&fleet::DEMO_MIX, args.cells, args.seed);
    let d = Arc::new(Deployment::ephemeral(
        fleet.keys.clone(),
        fleet.duties()?,
        &prefix,
        &audita_load_tests::client::DEMO_KEEPERS,
    )?);
    let messages = fleet.messages();
    eprintln!(
        "fleet: {} cells, {messages} messages, built in {:.1}s",
        args.cells,
        built.elapsed().as_secs_f64()
    );
    let bus = match args.transport {
        Transport::Embedded => Bus::Embedded(EmbeddedBus::new(4).with_pending_limit(50_000)),
        Transport::Kafka => Bus::Kafka(KafkaBus::new(
            args.bootstrap.as_deref().unwrap_or("127.0.0.1:9092"),
        )?),
    };
    let out = tempdir_path(&prefix)?;
    let metrics = Metrics::new();
    // Declaration publish instants (from the feed's progress) and verdict arrivals.
    let published: Arc<Mutex<BTreeMap<String, Instant>>> = Arc::default();
    let t_star: Vec<(u64, String)> = {
        let mut v: Vec<(u64, String)> = fleet
            .cells
            .iter()
            .filter_map(|c| {
                c.adverse
                    .as_ref()
                    .map(|a| (a.t_star_ms, a.incident.clone()))
            })
            .collect();
        v.sort();
        v
    };
    let order: Vec<u64> = fleet
        .envelopes_in_time_order()
        .iter()
        .map(|(e, _)| e.envelope().timestamp)
        .collect();
    let mut latencies = Vec::new();
    let peak_rss = Arc::new(Mutex::new(rss_kib()));
    let sampler_stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let (peak, stop) = (peak_rss.clone(), sampler_stop.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let r = rss_kib();
                let mut p = peak.lock().unwrap_or_else(|e| e.into_inner());
                *p = (*p).max(r);
                drop(p);
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let started = Instant::now();
    let mut next_decl = 0;
    let collected = audita_pipeline::run_all(
        d.clone(),
        &bus,
        &out,
        args.workers,
        &metrics,
        |bus| {
            let mut producer = bus.producer()?;
            fleet.publish_declaring(producer.as_mut(), &d.prefix, None, |n| {
                // Declarations go out right after the messages up to their t*.
                let t = order.get(n).copied().unwrap_or(u64::MAX);
                let mut p = published.lock().unwrap_or_else(|e| e.into_inner());
                while next_decl < t_star.len() && t_star[next_decl].0 < t {
                    p.insert(t_star[next_decl].1.clone(), Instant::now());
                    next_decl += 1;
                }
            })?;
            Ok(fleet.incidents())
        },
        |v| {
            if let Some(at) = published
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&v.incident)
            {
                latencies.push(at.elapsed());
            }
        },
    )?;
    let elapsed = started.elapsed();
    sampler_stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let _ = sampler.join();
    latencies.sort();
    let rate = messages as f64 / elapsed.as_secs_f64();
    let peak = *peak_rss.lock().unwrap_or_else(|e| e.into_inner());
    println!("| transport | cells | messages | verdicts | wall s | e2e msg/s | Ed25519 verify/s (1 core) | ratio | latency p50 ms | p99 ms | peak RSS MiB |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {:?} | {} | {} | {} | {:.2} | {:.0} | {:.0} | {:.3} | {:.1} | {:.1} | {:.0} |",
        args.transport,
        args.cells,
        messages,
        collected.verdicts.len(),
        elapsed.as_secs_f64(),
        rate,
        limit,
        rate / limit,
        percentile(&latencies, 0.5).as_secs_f64() * 1e3,
        percentile(&latencies, 0.99).as_secs_f64() * 1e3,
        peak as f64 / 1024.0
    );
    let _ = std::fs::remove_dir_all(&out);
    Ok(())
}

fn tempdir_path(prefix: &str) -> anyhow::Result<std::path::PathBuf> {
    let p = std::env::temp_dir().join(format!("audita-{prefix}{}", std::process::id()));
    std::fs::create_dir_all(&p)?;
    Ok(p)
}
