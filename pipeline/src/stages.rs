//! Each stage connected to the bus, the deployment and its metrics; and the whole
//! pipeline as threads of one process.

use crate::metrics::Metrics;
use crate::{Deployment, Error, Result};
use audita_bus::Bus;
use audita_sealer::stage::{SealerStage, SealerStats};
use audita_sinks::sink::{Collected, VerdictSink};
use audita_sinks::tables::Rotation;
use audita_slicer::stage::{SlicerStage, SlicerStats};
use audita_topics::names as topics;
use audita_topics::VerdictRecord;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Runs ingest until stopped/idle; returns the records taken.
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
    let n = audita_ingest::run(
        c.as_mut(),
        p.as_mut(),
        &d.keys,
        &d.ingest_layout(),
        stop,
        idle,
        |accepted, quarantined| {
            m.ingest_envelopes
                .with_label_values(&["accepted"])
                .inc_by(accepted);
            m.ingest_envelopes
                .with_label_values(&["suspect"])
                .inc_by(quarantined);
        },
    )?;
    Ok(n)
}

/// Runs the sealer, writing the record into `dir`, until stopped/idle.
pub fn run_sealer(
    d: &Deployment,
    bus: &Bus,
    dir: &Path,
    stop: &AtomicBool,
    idle: Option<Duration>,
    m: &Metrics,
) -> Result<()> {
    let live = m.clone();
    let mut seen = SealerStats::default();
    let mut lag = crate::metrics::LagWatch::new("sealer");
    let mut stage = SealerStage::open(d.sealer_config(dir)?)?
        .with_witnesses(crate::witness::remote(d), d.quorum)
        .with_horizon(d.dedupe_ms)
        .with_observer(Box::new(move |s, watermark| {
            live.sealer_messages.inc_by(s.sealed - seen.sealed);
            live.sealer_epochs.inc_by(s.epochs - seen.epochs);
            live.sealer_duplicates
                .inc_by(s.duplicates - seen.duplicates);
            live.sealer_late.inc_by(s.late - seen.late);
            live.sealer_under_witnessed
                .inc_by(s.under_witnessed - seen.under_witnessed);
            live.sealer_cosignatures
                .inc_by(s.cosignatures - seen.cosignatures);
            live.sealer_keepers_behind.set(s.keepers_behind as i64);
            live.sealer_watermark.set(watermark as f64 / 1000.0);
            lag.observe(&live.sealer_lag, watermark);
            seen = *s;
        }));
    let mut c = bus.consumer(&d.topic("sealer"), &[&d.topic(topics::ACCEPTED)])?;
    let mut p = bus.producer()?;
    stage.run(c.as_mut(), p.as_mut(), stop, idle)?;
    Ok(())
}

/// Runs the slicer until stopped/idle; a declaration waits up to `quiet_wait` for the
/// event-time watermark once the stream goes quiet. With the deployment's predicates
/// the monitor's detectors run over the slicer's own join of seals and bytes
/// ([`crate::monitor::MonitorTap`]), on a thread of their own: one fetch and one join
/// of the bytes per process, alerts published as each epoch is joined.
pub fn run_slicer(
    d: &Deployment,
    bus: &Bus,
    quiet_wait: Duration,
    stop: &AtomicBool,
    idle: Option<Duration>,
    m: &Metrics,
) -> Result<()> {
    run_slicer_member(d, bus, quiet_wait, stop, idle, m, None, true)
}

/// [`run_slicer`] as member `cluster.index` of a slicer cluster (`None`: a cluster of
/// one): it joins the seals with its share of the `audita.accepted` partitions
/// (partition `p` is member `p mod members`'), and the members exchange the graph
/// over timely's cluster mode ([`audita_slicer::cluster`]). A cluster of more than
/// one runs no detectors: they need every partition, and run as `audita stage
/// monitor` beside it. `detectors: false` runs none in a slicer of one either (a
/// measurement of the slicer alone).
#[allow(clippy::too_many_arguments)]
pub fn run_slicer_member(
    d: &Deployment,
    bus: &Bus,
    quiet_wait: Duration,
    stop: &AtomicBool,
    idle: Option<Duration>,
    m: &Metrics,
    cluster: Option<&audita_slicer::cluster::Cluster>,
    detectors: bool,
) -> Result<()> {
    let members = cluster.map_or(1, |c| c.addresses.len());
    if members > crate::deployment::ACCEPTED_PARTITIONS as usize {
        return Err(crate::Error::Invalid(format!(
            "a slicer cluster of {members} members needs at least as many audita.accepted partitions (it has {})",
            crate::deployment::ACCEPTED_PARTITIONS
        )));
    }
    let stage = match cluster.filter(|c| c.addresses.len() > 1) {
        Some(c) => SlicerStage::cluster(c, &d.prefix, quiet_wait, stop)?,
        None => SlicerStage::new(&d.prefix, quiet_wait),
    };
    let live = m.clone();
    let mut seen = SlicerStats::default();
    let mut lag = crate::metrics::LagWatch::new("slicer");
    let mut stage = stage
        .with_horizon(d.horizon_ms, d.hold)
        .with_registry(d.duties.clone())
        .with_predicates(d.predicates.clone())
        .with_max_record(d.max_slice_bytes)
        .with_observer(Box::new(move |s, waits| {
            live.slicer_incidents
                .inc_by((s.emitted - seen.emitted) as u64);
            live.slicer_graph_messages.set(s.graph_messages as i64);
            live.slicer_retained_epochs.set(s.retained_epochs as i64);
            live.slicer_evicted.inc_by(s.evicted - seen.evicted);
            live.slicer_waiting.set(s.waiting as i64);
            live.slicer_grace.set(s.grace_ms as f64 / 1000.0);
            lag.observe(&live.slicer_lag, s.watermark);
            live.slicer_join_held.set(s.join_held_bytes as i64);
            live.slicer_join_missing
                .inc_by(s.join_missing - seen.join_missing);
            live.slicer_spill_bytes.set(s.spill_bytes as i64);
            live.slicer_unresolved
                .inc_by(s.unresolved - seen.unresolved);
            live.slicer_whole_window_scopes
                .inc_by(s.whole_window_scopes - seen.whole_window_scopes);
            for w in waits {
                live.slicer_slice_wait.observe(w.as_secs_f64());
            }
            seen = *s;
        }));
    let (me, members) = stage.member();
    let mut p = bus.producer()?;
    if members > 1 {
        let own: Vec<u32> = (0..crate::deployment::ACCEPTED_PARTITIONS)
            .filter(|p| *p as usize % members == me)
            .collect();
        let mut input = d.sealed_share(bus, "slicer", &[topics::ADVERSE], &own)?;
        if d.predicates.is_some() {
            tracing::info!(
                "slicer member {me} of {members}: the detectors run in `audita stage monitor`, not here"
            );
        }
        stage.run(&mut input, p.as_mut(), stop, idle)?;
    } else {
        // The slicer keeps its state in memory and rebuilds it from its topics on
        // start: its own consumer groups per process (and per start), from the
        // beginning.
        let mut input = d.sealed_input(bus, "slicer", &[topics::ADVERSE])?;
        // The detectors on a thread of their own, with their own producer: an alert
        // never waits for a slicer turn.
        match crate::monitor::MonitorTap::new(d, m, quiet_wait).filter(|_| detectors) {
            Some(mut tap) => {
                let mut tap_out = bus.producer()?;
                stage.run_with(
                    &mut input,
                    p.as_mut(),
                    stop,
                    idle,
                    Some((&mut tap, tap_out.as_mut())),
                )?
            }
            None => stage.run(&mut input, p.as_mut(), stop, idle)?,
        }
    }
    for (name, unsealed) in stage.waiting() {
        tracing::warn!(incident = %name, unsealed_anchors = unsealed, "declaration still waiting for its anchors");
    }
    drop(stage);
    tracing::info!(member = me, members, "slicer stopped");
    Ok(())
}

/// Runs one engine worker until stopped/idle; returns the bundles judged.
pub fn run_engine(
    d: &Deployment,
    bus: &Bus,
    stop: &AtomicBool,
    idle: Option<Duration>,
    m: &Metrics,
) -> Result<u64> {
    let mut c = bus.consumer(&d.topic("engine-workers"), &[&d.topic(topics::SLICES)])?;
    let mut p = bus.producer()?;
    let registries = audita_engine_workers::Registries {
        keys: &d.keys,
        duties: &d.duties,
        quorum: d.quorum,
        predicates: d.predicates.as_ref(),
    };
    let n = audita_engine_workers::run_observed(
        c.as_mut(),
        p.as_mut(),
        &registries,
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

/// Runs the sink ([`audita_sinks::sink::run`]: journal, analytics tables, reports,
/// index) into `out_dir` until stopped/idle or until `expect` incidents arrived,
/// calling `on_verdict` with every new record (verdict or abstention). The tables'
/// record origin is the deployment's (`[clock]`), else the one kept in
/// `out_dir/verdicts/record-origin.json` (else the first time the sink opens the
/// directory); a deployment's that contradicts the kept one is an error.
#[allow(clippy::too_many_arguments)]
pub fn run_sink(
    d: &Deployment,
    bus: &Bus,
    out_dir: &Path,
    expect: Option<usize>,
    stop: &AtomicBool,
    idle: Option<Duration>,
    m: &Metrics,
    mut on_verdict: impl FnMut(&VerdictRecord),
) -> Result<Collected> {
    std::fs::create_dir_all(out_dir)
        .map_err(|e| Error::Invalid(format!("creating {}: {e}", out_dir.display())))?;
    let sink = VerdictSink::open(
        out_dir,
        d.record_origin,
        Rotation::default(),
        audita_sinks::report::Build::current(env!("CARGO_PKG_VERSION")),
    )?;
    let mut c = bus.consumer(&d.topic("sinks"), &[&d.topic(topics::VERDICTS)])?;
    let got = audita_sinks::sink::run(sink, c.as_mut(), expect, stop, idle, |r, rows| {
        m.sinks_rows.inc_by(rows as u64);
        let outcome = if r.abstained.is_some() {
            "abstained"
        } else {
            "verdict"
        };
        m.sinks_incidents.with_label_values(&[outcome]).inc();
        on_verdict(r);
    })?;
    Ok(got)
}

/// The stages of a deployment running as threads of this process (all but the sink:
/// a caller reads `audita.verdicts` itself, or runs [`run_sink`]).
pub struct Running {
    stop: Arc<AtomicBool>,
    handles: Vec<(String, JoinHandle<Result<()>>)>,
}

impl Running {
    /// Sets the stop flag, waits for every stage to drain, and returns the first
    /// stage's error (naming the stage).
    pub fn stop(self) -> Result<()> {
        self.stop.store(true, Ordering::SeqCst);
        let mut first = Ok(());
        for (name, h) in self.handles {
            let r = match h.join() {
                Ok(r) => r.map_err(|e| Error::Invalid(format!("stage {name}: {e}"))),
                Err(_) => Err(Error::Invalid(format!("stage {name} panicked"))),
            };
            if first.is_ok() {
                first = r;
            }
        }
        first
    }

    /// The stop flag the stages watch.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }
}

/// Creates the topics and starts ingest, the sealer (writing the record into
/// `record_dir`), the slicer (waiting `quiet_wait` for the watermark once the stream
/// is quiet; with the deployment's predicates it runs the monitor's detectors over
/// its join too, declaring what is pending after `quiet_wait` of quiet) and
/// `workers` engine workers as threads over `bus`.
pub fn start(
    d: Arc<Deployment>,
    bus: &Bus,
    record_dir: &Path,
    workers: usize,
    quiet_wait: Duration,
    m: &Metrics,
) -> Result<Running> {
    d.ensure_topics(bus)?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut running = Running {
        stop: stop.clone(),
        handles: Vec::new(),
    };
    type Body = Box<dyn FnOnce(&Deployment, &Bus, &AtomicBool, &Metrics) -> Result<()> + Send>;
    let record_dir: PathBuf = record_dir.to_path_buf();
    let mut plan: Vec<(String, Body)> = vec![
        (
            "ingest".into(),
            Box::new(|d, bus, stop, m| run_ingest(d, bus, stop, None, m).map(|_| ())),
        ),
        (
            "sealer".into(),
            Box::new(move |d, bus, stop, m| run_sealer(d, bus, &record_dir, stop, None, m)),
        ),
        (
            "slicer".into(),
            Box::new(move |d, bus, stop, m| run_slicer(d, bus, quiet_wait, stop, None, m)),
        ),
    ];
    for i in 0..workers.max(1) {
        plan.push((
            format!("engine-{i}"),
            Box::new(|d, bus, stop, m| run_engine(d, bus, stop, None, m).map(|_| ())),
        ));
    }
    for (name, body) in plan {
        let (d, bus, stop, m) = (d.clone(), bus.clone(), stop.clone(), m.clone());
        let spawned = std::thread::Builder::new()
            .name(name.clone())
            .spawn(move || body(&d, &bus, &stop, &m));
        match spawned {
            Ok(h) => running.handles.push((name, h)),
            Err(e) => {
                let _ = running.stop();
                return Err(Error::Invalid(format!("starting stage {name}: {e}")));
            }
        }
    }
    Ok(running)
}

/// Runs every stage as a thread over `bus`, the record in `out_dir/record` and the
/// sink's output in `out_dir`: `feed` publishes the input (a client of the
/// deployment) and returns how many incidents it declared; returns once every one
/// has a verdict or an abstention (or the sink saw nothing for 120 s).
pub fn run_all(
    d: Arc<Deployment>,
    bus: &Bus,
    out_dir: &Path,
    workers: usize,
    m: &Metrics,
    feed: impl FnOnce(&Bus) -> Result<usize>,
    on_verdict: impl FnMut(&VerdictRecord),
) -> Result<Collected> {
    let running = start(
        d.clone(),
        bus,
        &out_dir.join("record"),
        workers,
        Duration::from_secs(2),
        m,
    )?;
    let collected = feed(bus).and_then(|expect| {
        run_sink(
            &d,
            bus,
            out_dir,
            Some(expect),
            &AtomicBool::new(false),
            Some(Duration::from_secs(120)),
            m,
            on_verdict,
        )
    });
    let stopped = running.stop();
    let collected = collected?;
    stopped?;
    Ok(collected)
}

/// The notifier's settings from a deployment's `[notifier]` (`None`: it declares
/// none); the password and the CA bundle are read here, once.
pub fn notifier_settings(
    cfg: &audita_deploy::Config,
    d: &Deployment,
) -> Result<Option<audita_notifier::Settings>> {
    let Some(n) = &cfg.notifier else {
        return Ok(None);
    };
    let mut s = audita_notifier::Settings::new(&n.url);
    s.public_base_url = n.public_base_url.clone();
    s.runbook_url = n.runbook_url.clone();
    s.ca_pem = n
        .ca_file
        .as_ref()
        .map(|f| {
            std::fs::read(f)
                .map_err(|e| Error::Invalid(format!("notifier.ca_file: {}: {e}", f.display())))
        })
        .transpose()?;
    s.basic_auth = match (&n.username, n.password(&cfg.dir).map_err(Error::Invalid)?) {
        (Some(user), Some(password)) => Some((user.clone(), password)),
        _ => None,
    };
    s.resend = Duration::from_millis(n.resend_ms);
    s.hold = Duration::from_millis(n.hold_ms);
    s.open_for = Duration::from_millis(n.open_for_ms);
    s.timeout = Duration::from_millis(n.timeout_ms);
    s.critical_j = n.critical_j;
    s.warning_j = n.warning_j;
    s.max_incidents = n.max_incidents;
    s.record_origin_ms = d.record_origin.map(|o| o.unix_ms);
    Ok(Some(s))
}

/// Runs the notifier ([`audita_notifier::run`]) until stopped/idle: the consumer
/// group `notifier` over `audita.alerts`, `audita.adverse` and `audita.verdicts`,
/// every incident's alert posted to Alertmanager.
pub fn run_notifier(
    d: &Deployment,
    bus: &Bus,
    s: &audita_notifier::Settings,
    stop: &AtomicBool,
    idle: Option<Duration>,
    m: &Metrics,
) -> Result<audita_notifier::Stats> {
    let am = audita_notifier::Alertmanager::new(s).map_err(|e| Error::Invalid(e.to_string()))?;
    let t = audita_notifier::Topics {
        alerts: d.topic(topics::ALERTS),
        adverse: d.topic(topics::ADVERSE),
        verdicts: d.topic(topics::VERDICTS),
    };
    let mut c = bus.consumer(&d.topic("notifier"), &[&t.alerts, &t.adverse, &t.verdicts])?;
    let mut seen = audita_notifier::Stats::default();
    let stats = audita_notifier::run(s, &am, c.as_mut(), &t, stop, idle, |st| {
        let posts = &m.notifier_posts;
        posts
            .with_label_values(&["accepted"])
            .inc_by(st.posted - seen.posted);
        posts
            .with_label_values(&["rejected"])
            .inc_by(st.rejected - seen.rejected);
        posts
            .with_label_values(&["failed"])
            .inc_by(st.failures - seen.failures);
        m.notifier_malformed.inc_by(st.malformed - seen.malformed);
        m.notifier_incidents.set(st.incidents as i64);
        seen = st.clone();
    })
    .map_err(|e| match e {
        audita_notifier::NotifierError::Bus(b) => Error::from(b),
        other => Error::Invalid(other.to_string()),
    })?;
    Ok(stats)
}
