//! The monitor stage: sealed epochs in; alerts (`audita.alerts`) and adverse
//! declarations (`audita.adverse`) out — the pipeline detects every incident itself.
//!
//! Design constraints:
//! - Its own stage, not part of the slicer's dataflow: the predicates are per-entity
//!   state machines over telemetry (latest observation, armed/fired), not a relation
//!   over the citation graph; an alert must leave the moment a predicate holds,
//!   while the slicer waits for anchors, receipts and the watermark before a slice
//!   is complete; and its declaration on `audita.adverse` is then an auditable input
//!   the engine workers check exactly like an operator's (`audita_monitor::check`).
//! - Input is sealed epochs (`audita.epochs` joined with `audita.accepted`,
//!   [`audita_join::input`]): only sealed messages, each epoch
//!   opened with one signature check ([`audita_evidence::open_sealed`]: the log's
//!   signature over the header, the leaves under its window root, every envelope
//!   the message its leaf names) instead of one per envelope — the log seals only
//!   what ingest verified against the same registry. A forged or altered epoch is
//!   refused whole. The engine workers verify every slice from scratch, the authors'
//!   signatures included, and re-derive the declaration from it.
//! - Alerts are published as they are raised; a fired incident is declared once the
//!   sealer's event-time watermark passes its `t*` by the grace in force
//!   ([`audita_join::grace`]: every message stamped up to `t*` is sealed and read,
//!   late sources included), or when the stream has been quiet for `quiet`
//!   (everything published is sealed).
//! - State is in memory and rebuilt from the beginning of its topics on start
//!   (its own consumer groups per process, like the slicer): a restart re-sends alerts
//!   (at least once) and re-declares incidents, which the slicer recognises by name.
//! - Each epoch number is taken once: the epoch a restarted sealer republishes is
//!   skipped (a message read twice must not become two facts of a declaration).

use crate::metrics::Metrics;
use crate::{Deployment, Result};
use audita_bus::Bus;
use audita_join::Input;
use audita_monitor::{Alert, AlertKind, Monitor};
use audita_slicer::stage::EpochTap;
use audita_topics::names as topics;
use audita_topics::{AlertRecord, ALERT_SCHEMA};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// The alert record of a monitor alert; `predicates` names its subject's site.
pub fn alert_record(a: &Alert, predicates: Option<&audita_monitor::Predicates>) -> AlertRecord {
    AlertRecord {
        schema: ALERT_SCHEMA.to_string(),
        kind: match a.kind {
            AlertKind::Fired => "fired",
            AlertKind::NearMiss => "near_miss",
        }
        .to_string(),
        predicate: a.predicate.clone(),
        incident: a.incident.clone(),
        entities: a.entities.clone(),
        t_ms: a.t_ms,
        severity_j: a.severity_j,
        messages: a.messages.clone(),
        detail: a.detail.clone(),
        site: a
            .entities
            .first()
            .and_then(|e| audita_monitor::predicate::site_of(predicates, e))
            .map(str::to_string),
    }
}

struct State {
    monitor: Monitor,
    /// The number of the last epoch taken.
    last_number: Option<u64>,
    last_epoch: Instant,
    /// The grace past `t*` before declaring, adapted to the lateness of sealed
    /// messages (as the slicer's).
    grace: audita_join::Grace,
}

/// The monitor's detectors as an operator over a join of seals and bytes: the
/// slicer's ([`audita_slicer::stage::EpochTap`], one fetch and one join per process)
/// or its own ([`run_monitor`]).
pub struct MonitorTap<'d> {
    d: &'d Deployment,
    m: &'d Metrics,
    st: State,
    alerts: String,
    adverse: String,
    quiet: Duration,
    lag: crate::metrics::LagWatch,
    missing_seen: u64,
}

impl<'d> MonitorTap<'d> {
    /// The detectors of `d`'s predicate file (`None` when the deployment has none),
    /// declaring what is pending after `quiet` without a new epoch.
    pub fn new(d: &'d Deployment, m: &'d Metrics, quiet: Duration) -> Option<Self> {
        let file = d.predicates.clone()?;
        Some(MonitorTap {
            d,
            m,
            st: State {
                monitor: Monitor::new(file),
                last_number: None,
                last_epoch: Instant::now(),
                grace: audita_join::Grace::new(),
            },
            alerts: d.topic(topics::ALERTS),
            adverse: d.topic(topics::ADVERSE),
            quiet,
            lag: crate::metrics::LagWatch::new("monitor"),
            missing_seen: 0,
        })
    }

    fn declare(
        &self,
        decls: Vec<audita_verdict::AdverseDecl>,
        out: &mut dyn audita_bus::Producer,
    ) -> std::result::Result<(), audita_bus::BusError> {
        for decl in decls {
            let bytes = serde_json::to_vec(&decl)
                .map_err(|e| audita_bus::BusError::Permanent(e.to_string()))?;
            out.send(&self.adverse, decl.incident.as_bytes(), &bytes)?;
            self.m.monitor_declarations.inc();
            tracing::info!(incident = %decl.incident, t_star_ms = decl.t_star_ms, anchors = decl.anchors.len(), "declared");
        }
        Ok(())
    }
}

impl audita_slicer::stage::EpochTap for MonitorTap<'_> {
    fn epoch(
        &mut self,
        epoch: &audita_topics::EpochMessage,
        missing: u64,
        out: &mut dyn audita_bus::Producer,
    ) -> std::result::Result<(), audita_bus::BusError> {
        self.lag.observe(&self.m.monitor_lag, epoch.watermark);
        self.m
            .monitor_join_missing
            .inc_by(missing.saturating_sub(self.missing_seen));
        self.missing_seen = self.missing_seen.max(missing);
        let due = take_epoch(self.d, self.m, &mut self.st, epoch, &self.alerts, out)?;
        self.declare(due, out)?;
        // Alerts leave with their epoch: a dashboard sees them now.
        out.flush()
    }

    fn idle(
        &mut self,
        out: &mut dyn audita_bus::Producer,
    ) -> std::result::Result<(), audita_bus::BusError> {
        if self.st.monitor.pending() > 0 && self.st.last_epoch.elapsed() >= self.quiet {
            let due = self.st.monitor.declare_pending();
            self.m.monitor_pending.set(0);
            self.declare(due, out)?;
            out.flush()?;
        }
        Ok(())
    }
}

/// Runs the monitor as a process of its own (its own join of seals and bytes) until
/// stopped/idle; declares pending incidents after `quiet` without a new epoch.
/// Without predicates in the deployment it returns at once. The slicer runs the same
/// detectors over its own join ([`crate::stages::run_slicer`]), so a deployment runs
/// this only when it wants alerts without slices.
pub fn run_monitor(
    d: &Deployment,
    bus: &Bus,
    quiet: Duration,
    stop: &AtomicBool,
    idle: Option<Duration>,
    m: &Metrics,
) -> Result<()> {
    let Some(mut tap) = MonitorTap::new(d, m, quiet) else {
        return Ok(());
    };
    let mut input = d.sealed_input(bus, "monitor", &[])?;
    let mut p = bus.producer()?;
    let mut idle_since = Instant::now();
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        match input.poll(Duration::from_millis(20))? {
            Some(Input::Epoch(epoch)) => {
                idle_since = Instant::now();
                m.monitor_join_held.set(input.backlog().0 as i64);
                tap.epoch(&epoch.message, input.stats().missing, p.as_mut())?;
            }
            Some(Input::Record(_)) => {}
            None => {
                tap.idle(p.as_mut())?;
                if idle.is_some_and(|i| idle_since.elapsed() >= i) {
                    break;
                }
            }
        }
    }
    p.flush()?;
    Ok(())
}

/// Takes one sealed epoch: raises and publishes its alerts, and returns the
/// incidents the watermark (past the grace) now lets the monitor declare.
fn take_epoch(
    d: &Deployment,
    m: &Metrics,
    st: &mut State,
    epoch: &audita_topics::EpochMessage,
    alerts: &str,
    out: &mut dyn audita_bus::Producer,
) -> std::result::Result<Vec<audita_verdict::AdverseDecl>, audita_bus::BusError> {
    let started = Instant::now();
    st.last_epoch = started;
    // A restarted sealer republishes its last epoch (topics::epoch): an epoch
    // number already taken is skipped, as the slicer skips it. Read twice, its
    // actuation reports would be declared realised twice, and the engine's
    // re-derivation from the slice (once) would refuse the declaration: a verdict
    // turned into an abstention by a restart.
    let number = match audita_evidence::EpochHeader::decode(epoch.header.clone()) {
        Ok(h) => h.number,
        Err(e) => {
            tracing::error!(error = %e, "monitor: epoch with an undecodable header refused");
            return Ok(Vec::new());
        }
    };
    if st.last_number.is_some_and(|last| number <= last) {
        tracing::debug!(epoch = number, "monitor: republished epoch skipped");
        return Ok(Vec::new());
    }
    // One signature for the whole epoch: the log's over its header, whose window
    // root the leaves reproduce, each envelope the message its leaf names. The log
    // seals only what ingest verified, so the authors' signatures are not checked a
    // second time here.
    let sealed =
        match audita_evidence::open_sealed(&epoch.header, &epoch.leaves, &epoch.envelopes, &d.keys)
        {
            Ok((_, sealed)) => sealed,
            Err(e) => {
                tracing::error!(epoch = number, error = %e, "monitor: epoch refused");
                return Ok(Vec::new());
            }
        };
    st.last_number = Some(number);
    for verified in &sealed {
        if !audita_monitor::observes(verified.envelope()) {
            continue;
        }
        for a in st.monitor.observe(verified) {
            let rec = alert_record(&a, d.predicates.as_ref());
            let bytes = serde_json::to_vec(&rec)
                .map_err(|e| audita_bus::BusError::Permanent(e.to_string()))?;
            out.send(alerts, a.predicate.as_bytes(), &bytes)?;
            m.monitor_alerts.with_label_values(&[&rec.kind]).inc();
            m.monitor_alert_latency
                .observe(started.elapsed().as_secs_f64());
        }
    }
    st.grace.observe(
        sealed.iter().map(|e| e.envelope().timestamp),
        epoch.watermark,
    );
    let settled = epoch.watermark.saturating_sub(st.grace.ms());
    let due = st.monitor.advance(settled.saturating_sub(1));
    m.monitor_pending.set(st.monitor.pending() as i64);
    Ok(due)
}
