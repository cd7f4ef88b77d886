//! `audita-load bench-pipeline`: end-to-end throughput, adverse-event-to-verdict latency and
//! resident memory of the pipeline, next to the single-core Ed25519 verification limit
//! measured in the same run (every accepted message costs at least one verification);
//! and the incident-alerting latencies: sealed report → alert (an observer consuming
//! `audita.epochs` and `audita.alerts` like any other client of the bus: from the
//! arrival of the epoch that sealed the last message an alert cites to the alert's
//! arrival) and alert → verdict (the alert's arrival to its incident's verdict).

use crate::fleet;
use crate::host::{ed25519_single_core_per_s, percentile, rss_kib};
use audita_bus::embedded::EmbeddedBus;
use audita_bus::kafka::KafkaBus;
use audita_bus::Bus;
use audita_pipeline::metrics::Metrics;
use audita_pipeline::Deployment;
use clap::{Args, ValueEnum};
use std::collections::BTreeMap;
use std::io::Write;
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

/// Arguments of `audita-load bench-pipeline`.
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

/// Runs `audita-load bench-pipeline`: the fleet through every stage over the chosen
/// transport; the tables (rates beside the single-core Ed25519 limit, latencies,
/// peak memory) go to `report`.
pub fn run(args: &BenchPipelineArgs, report: &mut dyn Write) -> anyhow::Result<()> {
    let limit = ed25519_single_core_per_s();
    let prefix = format!("bench{}.", std::process::id());
    let built = Instant::now();
    if args.cells == 0 {
        anyhow::bail!("--cells must be at least 1");
    }
    // The benchmark's fleet signs with seed-derived keys (a reproducible client); the
    // deployment it feeds is a throw-away one with fresh log and keeper keys.
    let fleet = fleet::build(&fleet::DEMO_MIX, args.cells, args.seed);
    let mut d = Deployment::ephemeral(
        fleet.keys.clone(),
        fleet.duties()?,
        &prefix,
        &crate::client::DEMO_KEEPERS,
    )?;
    // The fleet publishes no declaration: the monitor stage detects every incident.
    d.predicates = Some(audita_monitor::Predicates::from_json(
        &fleet.predicates_json,
    )?);
    let d = Arc::new(d);
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
    // The instant the last message stamped up to each incident's t* was published
    // (from the feed's progress), and verdict arrivals: detection by the monitor,
    // the slice and the verdict are all inside the latency.
    let published: Arc<Mutex<BTreeMap<String, Instant>>> = Arc::default();
    let t_star = incidents_by_t_star(&fleet);
    let order: Vec<u64> = fleet
        .envelopes_in_time_order()
        .iter()
        .map(|(e, _)| e.envelope().timestamp)
        .collect();
    d.ensure_topics(&bus)?;
    let observer = Observer::start(&bus, &d)?;
    let mut latencies = Vec::new();
    let mut alert_to_verdict = Vec::new();
    let peak_rss = PeakRss::start();
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
            fleet.publish(producer.as_mut(), &d.prefix, None, |n| {
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
            if let Some(alerted) = observer.alerted(&v.incident) {
                alert_to_verdict.push(alerted.elapsed());
            }
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
    let (mut sealed_to_alert, unordered) = observer.stop();
    sealed_to_alert.sort();
    alert_to_verdict.sort();
    let peak = peak_rss.stop();
    latencies.sort();
    let rate = messages as f64 / elapsed.as_secs_f64();
    let measured = Measured {
        messages,
        verdicts: collected.verdicts.len(),
        elapsed,
        rate,
        limit,
        peak_kib: peak,
        latencies,
        sealed_to_alert,
        unordered,
        alert_to_verdict,
    };
    write_tables(report, args, &measured)?;
    let _ = std::fs::remove_dir_all(&out);
    Ok(())
}

/// The incidents the fleet planted, by the record time of their adverse instant.
fn incidents_by_t_star(fleet: &fleet::Fleet) -> Vec<(u64, String)> {
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
}

/// The peak resident memory of this process, sampled every 100 ms on a thread.
struct PeakRss {
    peak: Arc<Mutex<u64>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl PeakRss {
    /// Starts sampling.
    fn start() -> PeakRss {
        let peak = Arc::new(Mutex::new(rss_kib()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread = {
            let (peak, stop) = (peak.clone(), stop.clone());
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
        PeakRss { peak, stop, thread }
    }

    /// Stops sampling; the peak (KiB).
    fn stop(self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = self.thread.join();
        let peak = *self.peak.lock().unwrap_or_else(|e| e.into_inner());
        peak
    }
}

/// What one run measured (durations sorted).
struct Measured {
    messages: usize,
    verdicts: usize,
    elapsed: Duration,
    /// End-to-end messages per second.
    rate: f64,
    /// Ed25519 verifications per second on one core, measured before the run.
    limit: f64,
    peak_kib: u64,
    /// `t*` published → verdict.
    latencies: Vec<Duration>,
    sealed_to_alert: Vec<Duration>,
    /// Alerts read before the epoch that sealed what they cite.
    unordered: usize,
    alert_to_verdict: Vec<Duration>,
}

/// The two Markdown tables of a run: throughput and verdict latency beside the
/// Ed25519 limit, then alert latencies.
fn write_tables(
    report: &mut dyn Write,
    args: &BenchPipelineArgs,
    m: &Measured,
) -> anyhow::Result<()> {
    writeln!(report, "| transport | cells | messages | verdicts | wall s | e2e msg/s | Ed25519 verify/s (1 core) | ratio | latency p50 ms | p99 ms | peak RSS MiB |")?;
    writeln!(report, "|---|---|---|---|---|---|---|---|---|---|---|")?;
    writeln!(
        report,
        "| {:?} | {} | {} | {} | {:.2} | {:.0} | {:.0} | {:.3} | {:.1} | {:.1} | {:.0} |",
        args.transport,
        args.cells,
        m.messages,
        m.verdicts,
        m.elapsed.as_secs_f64(),
        m.rate,
        m.limit,
        m.rate / m.limit,
        percentile(&m.latencies, 0.5).as_secs_f64() * 1e3,
        percentile(&m.latencies, 0.99).as_secs_f64() * 1e3,
        m.peak_kib as f64 / 1024.0
    )?;
    writeln!(report)?;
    writeln!(report, "| transport | alerts timed | read before their epoch | sealed → alert p50 ms | p99 ms | max ms | alert → verdict p50 ms | p99 ms |")?;
    writeln!(report, "|---|---|---|---|---|---|---|---|")?;
    let ms = |v: &[Duration], p: f64| percentile(v, p).as_secs_f64() * 1e3;
    writeln!(
        report,
        "| {:?} | {} | {} | {:.1} | {:.1} | {:.1} | {:.0} | {:.0} |",
        args.transport,
        m.sealed_to_alert.len(),
        m.unordered,
        ms(&m.sealed_to_alert, 0.5),
        ms(&m.sealed_to_alert, 0.99),
        ms(&m.sealed_to_alert, 1.0),
        ms(&m.alert_to_verdict, 0.5),
        ms(&m.alert_to_verdict, 0.99),
    )?;
    Ok(())
}

/// A client of the bus that watches `audita.epochs` and `audita.alerts`: when each
/// sealed message became readable (its epoch's arrival) and when each alert arrived.
struct Observer {
    stop: Arc<std::sync::atomic::AtomicBool>,
    alerts: Arc<Mutex<BTreeMap<String, Instant>>>,
    thread: std::thread::JoinHandle<(Vec<Duration>, usize)>,
}

impl Observer {
    fn start(bus: &Bus, d: &Deployment) -> anyhow::Result<Observer> {
        use audita_topics::names as topics;
        let group = format!("{}observer-{}", d.prefix, std::process::id());
        let mut c = bus.consumer(
            &group,
            &[&d.topic(topics::EPOCHS), &d.topic(topics::ALERTS)],
        )?;
        let (epochs_topic, alerts_topic) = (d.topic(topics::EPOCHS), d.topic(topics::ALERTS));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let alerts: Arc<Mutex<BTreeMap<String, Instant>>> = Arc::default();
        let (st, al) = (stop.clone(), alerts.clone());
        let thread = std::thread::spawn(move || {
            // Message id → arrival of the epoch that sealed it (ids of telemetry and
            // actuation reports only would do; every id is cheap enough).
            let mut sealed: std::collections::HashMap<String, Instant> = Default::default();
            let (mut latencies, mut unordered) = (Vec::new(), 0usize);
            while !st.load(std::sync::atomic::Ordering::SeqCst) {
                let Ok(Some(delivery)) = c.poll(Duration::from_millis(20)) else {
                    continue;
                };
                let now = Instant::now();
                if delivery.topic == epochs_topic {
                    let Some(epoch) = audita_topics::EpochSeal::decode(&delivery.payload) else {
                        continue;
                    };
                    for leaf in &epoch.leaves {
                        if let Ok(id) = audita_evidence::MessageId::from_leaf_bytes(leaf) {
                            sealed.insert(id.to_string(), now);
                        }
                    }
                } else if delivery.topic == alerts_topic {
                    let Ok(alert) =
                        serde_json::from_slice::<audita_topics::AlertRecord>(&delivery.payload)
                    else {
                        continue;
                    };
                    // The alert could be raised once the last message it cites was
                    // sealed. An alert read before the epoch of a message it cites
                    // (the observer lagged on the epoch topic) has no sample: it is
                    // counted, not guessed.
                    let ready: Option<Instant> = alert
                        .messages
                        .iter()
                        .map(|m| sealed.get(m).copied())
                        .collect::<Option<Vec<Instant>>>()
                        .and_then(|v| v.into_iter().max());
                    match ready {
                        Some(r) => latencies.push(now.saturating_duration_since(r)),
                        None => unordered += 1,
                    }
                    if let Some(incident) = alert.incident.filter(|_| alert.kind == "fired") {
                        al.lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .entry(incident)
                            .or_insert(now);
                    }
                }
            }
            (latencies, unordered)
        });
        Ok(Observer {
            stop,
            alerts,
            thread,
        })
    }

    /// When the first alert of `incident` arrived.
    fn alerted(&self, incident: &str) -> Option<Instant> {
        self.alerts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(incident)
            .copied()
    }

    /// Stops watching; the sealed → alert latency of every alert seen, and the number
    /// of alerts read before an epoch they cite (no sample).
    fn stop(self) -> (Vec<Duration>, usize) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.thread.join().unwrap_or_default()
    }
}

fn tempdir_path(prefix: &str) -> anyhow::Result<std::path::PathBuf> {
    let p = std::env::temp_dir().join(format!("audita-{prefix}{}", std::process::id()));
    std::fs::create_dir_all(&p)?;
    Ok(p)
}
