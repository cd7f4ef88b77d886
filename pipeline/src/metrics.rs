//! Prometheus metrics of every stage, and the stage's HTTP endpoint: `/metrics`,
//! `/healthz`, `/readyz`.
//!
//! Names follow `audita_<stage>_<name>_<unit>[_total]` in base units (seconds, not
//! milliseconds) and pass `promtool check metrics`; labels take values from small fixed
//! sets (`result`, `stage`), never a message id. A stage process exports only its own
//! stage's metrics ([`Metrics::for_stage`]) plus the bus and process metrics; the
//! embedded demo, whose stages share a process, registers all of them ([`Metrics::new`]).
//!
//! The endpoint is an axum server on its own thread and runtime, so a stage's run loop
//! never waits on a scrape; every request has a time limit ([`REQUEST_TIMEOUT`]) and
//! a response is rendered from the registry in memory (bounded by the fixed metric
//! set). `/healthz` answers 200 while the process serves; `/readyz` answers 200 only
//! while the stage is connected and taking input ([`Metrics::set_ready`]), 503 before
//! and once its stop flag is set ([`Metrics::drain_on`]: it drains after SIGTERM).

use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use prometheus::{
    Encoder, Gauge, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
    TextEncoder,
};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The longest a request to the endpoint may take before it is answered 408.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The stages, as metric name prefixes (`audita_<prefix>_…`).
pub const STAGES: [&str; 7] = [
    "ingest", "sealer", "slicer", "engine", "sinks", "monitor", "notifier",
];

/// The metrics of the pipeline.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    ready: Arc<AtomicBool>,
    stop: Arc<OnceLock<Arc<AtomicBool>>>,
    /// Envelopes read by ingest, by `result` (`accepted`, `suspect`).
    pub ingest_envelopes: IntCounterVec,
    /// Messages sealed into epochs.
    pub sealer_messages: IntCounter,
    /// Envelopes older than the dedupe horizon, quarantined as late.
    pub sealer_late: IntCounter,
    /// The sealer's event-time watermark (record time, seconds).
    pub sealer_watermark: Gauge,
    /// Re-delivered messages the sealer recognised by id and did not seal twice.
    pub sealer_duplicates: IntCounter,
    /// Epochs closed.
    pub sealer_epochs: IntCounter,
    /// Epochs sealed with fewer valid keeper co-signatures than the quorum.
    pub sealer_under_witnessed: IntCounter,
    /// Keeper co-signatures collected.
    pub sealer_cosignatures: IntCounter,
    /// Keepers behind the log's head.
    pub sealer_keepers_behind: IntGauge,
    /// `audita_<stage>_lag_seconds` of the sealer, the slicer and the monitor: the
    /// wall clock minus the event-time watermark the stage has taken — how far
    /// behind the fleet's clocks its output is ([`LagWatch`] logs when it grows).
    pub sealer_lag: Gauge,
    /// See [`Metrics::sealer_lag`].
    pub slicer_lag: Gauge,
    /// See [`Metrics::sealer_lag`].
    pub monitor_lag: Gauge,
    /// `audita_<stage>_join_held_bytes` of the slicer and the monitor: accepted
    /// bytes read ahead of their seals (`audita_join::input`).
    pub slicer_join_held: IntGauge,
    /// See [`Metrics::slicer_join_held`].
    pub monitor_join_held: IntGauge,
    /// `audita_<stage>_join_missing_total`: sealed messages and receipts whose bytes
    /// were gone from `audita.accepted` when their epoch was joined.
    pub slicer_join_missing: IntCounter,
    /// See [`Metrics::slicer_join_missing`].
    pub monitor_join_missing: IntCounter,
    /// Incidents sliced and fanned out.
    pub slicer_incidents: IntCounter,
    /// Messages currently in the citation graph.
    pub slicer_graph_messages: IntGauge,
    /// Epochs retained for inclusion proofs.
    pub slicer_retained_epochs: IntGauge,
    /// Messages evicted past the retention horizon.
    pub slicer_evicted: IntCounter,
    /// Declarations waiting for their slice.
    pub slicer_waiting: IntGauge,
    /// Citations emitted slices could not resolve (missing or past the horizon).
    pub slicer_unresolved: IntCounter,
    /// `audita_slicer_grace_seconds`: the grace past a window's end now in force,
    /// adapted to the lateness of sealed messages (`audita_join::grace`).
    pub slicer_grace: Gauge,
    /// `audita_slicer_spill_bytes`: bytes of held messages and receipts in the
    /// slicer's spill files (`audita_slicer::spill`).
    pub slicer_spill_bytes: IntGauge,
    /// `audita_slicer_whole_window_scopes_total`: incidents whose scope was computed
    /// over the whole window, because a missing citation or anchor made the verdict
    /// read beyond its scope (each costs a decode of the window).
    pub slicer_whole_window_scopes: IntCounter,
    /// Time from a declaration's arrival to its slice's emission.
    pub slicer_slice_wait: Histogram,
    /// `audita_stage_faults_total{reason}`: failures of this process's stage that a
    /// wait can heal (`bus`: the broker unreachable or not acknowledging; `storage`: a
    /// file could not be written, e.g. a full disk); each stopped the stage, which
    /// reopened from its durable state ([`crate::supervise`]).
    pub stage_faults: IntCounterVec,
    /// `audita_stage_stalled`: 1 while this process's stage waits to reopen after such
    /// a failure (it takes no input), else 0.
    pub stage_stalled: IntGauge,
    /// Verdicts produced.
    pub engine_verdicts: IntCounter,
    /// Time an engine worker takes to verify and judge one slice.
    pub engine_judge: Histogram,
    /// Verdict rows written to Parquet.
    pub sinks_rows: IntCounter,
    /// Incidents the sink recorded, by `outcome` (`verdict`, `abstained`).
    pub sinks_incidents: IntCounterVec,
    /// Alerts the monitor raised, by `kind` (`fired`, `near_miss`).
    pub monitor_alerts: IntCounterVec,
    /// Adverse declarations the monitor published.
    pub monitor_declarations: IntCounter,
    /// Incidents fired and not yet declared (waiting for the watermark).
    pub monitor_pending: IntGauge,
    /// The monitor's handling time from a sealed epoch's arrival to the alerts it
    /// raised being queued for publication.
    pub monitor_alert_latency: Histogram,
    /// Alerts posted to Alertmanager, by `outcome` (`accepted`, `rejected`: a 4xx,
    /// not posted again; `failed`: a post to retry).
    pub notifier_posts: IntCounterVec,
    /// Records the notifier could not read (skipped).
    pub notifier_malformed: IntCounter,
    /// Incidents whose alert the notifier holds (open, or ended and held).
    pub notifier_incidents: IntGauge,
}

/// A counter (the name is static, so valid).
fn counter(name: &str, help: &str) -> IntCounter {
    IntCounter::new(name, help).expect("static metric name")
}

/// A counter with one label.
fn counter_vec(name: &str, help: &str, label: &str) -> IntCounterVec {
    IntCounterVec::new(Opts::new(name, help), &[label]).expect("static metric name")
}

/// An integer gauge.
fn int_gauge(name: &str, help: &str) -> IntGauge {
    IntGauge::new(name, help).expect("static metric name")
}

/// A gauge.
fn gauge(name: &str, help: &str) -> Gauge {
    Gauge::new(name, help).expect("static metric name")
}

/// Buckets (seconds) of the slice wait, the engine's judging and the monitor's alert
/// latency histograms.
const SLICE_WAIT_BUCKETS: [f64; 12] = [
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];
const JUDGE_BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];
const ALERT_BUCKETS: [f64; 11] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
];

/// The notifier's posts by outcome, the records it skipped and the alerts it holds
/// ([`Metrics`]).
fn notifier() -> (IntCounterVec, IntCounter, IntGauge) {
    (
        counter_vec(
            "audita_notifier_posts_total",
            "Alerts posted to Alertmanager, by outcome (accepted, rejected, failed)",
            "outcome",
        ),
        counter(
            "audita_notifier_malformed_records_total",
            "Records of audita.alerts, audita.adverse or audita.verdicts the notifier could not read",
        ),
        int_gauge(
            "audita_notifier_incidents",
            "Incidents whose alert the notifier holds (open, or judged and held)",
        ),
    )
}

/// `audita_stage_faults_total{reason}` and `audita_stage_stalled` ([`Metrics`]).
fn stage_health() -> (IntCounterVec, IntGauge) {
    (
        counter_vec(
            "audita_stage_faults_total",
            "Failures of the stage a wait can heal (it reopened from its durable state), by reason",
            "reason",
        ),
        int_gauge(
            "audita_stage_stalled",
            "1 while the stage waits to reopen after a failure (it takes no input)",
        ),
    )
}

/// A histogram with `buckets`.
fn histogram(name: &str, help: &str, buckets: Vec<f64>) -> Histogram {
    Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets))
        .expect("static metric name")
}

impl Metrics {
    /// A fresh registry with every pipeline metric (and process metrics) registered:
    /// for a process running every stage (the embedded demo, `audita-load load`).
    pub fn new() -> Metrics {
        Metrics::registering(|_| true)
    }

    /// A fresh registry with `stage`'s metrics (one of [`STAGES`]), the bus's and the
    /// process's: what `audita stage NAME` exports. The other stages' metrics exist
    /// (the stage code may update them) but are not exported — except the monitor's
    /// in the slicer's process, which runs the monitor's detectors over its join.
    pub fn for_stage(stage: &str) -> Metrics {
        let own = format!("audita_{stage}_");
        let also = (stage == "slicer").then_some("audita_monitor_");
        Metrics::registering(move |name| {
            !STAGES
                .iter()
                .any(|s| name.starts_with(&format!("audita_{s}_")))
                || name.starts_with(&own)
                || also.is_some_and(|a| name.starts_with(a))
        })
    }

    /// Every metric, registered where `keep` holds for its name (and the process
    /// metrics), every label value created at 0.
    fn registering(keep: impl Fn(&str) -> bool) -> Metrics {
        let m = Metrics::unregistered();
        let collectors = m.collectors();
        m.zero_label_values();
        for c in collectors {
            let name = c
                .desc()
                .first()
                .map(|d| d.fq_name.clone())
                .unwrap_or_default();
            if name.starts_with("audita_") && !keep(&name) {
                continue;
            }
            m.registry.register(c).expect("each metric registered once");
        }
        m
    }

    /// Every metric of the pipeline, with an empty registry.
    fn unregistered() -> Metrics {
        let registry = Registry::new();
        let (stage_faults, stage_stalled) = stage_health();
        let (notifier_posts, notifier_malformed, notifier_incidents) = notifier();
        Metrics {
            ingest_envelopes: counter_vec(
                "audita_ingest_envelopes_total",
                "Envelopes read by ingest, by result",
                "result",
            ),
            sealer_messages: counter(
                "audita_sealer_messages_sealed_total",
                "Messages sealed into epochs",
            ),
            sealer_late: counter(
                "audita_sealer_late_total",
                "Envelopes older than the dedupe horizon, quarantined as late",
            ),
            sealer_watermark: gauge(
                "audita_sealer_watermark_seconds",
                "Event-time watermark of the sealer (record time, seconds)",
            ),
            sealer_duplicates: counter(
                "audita_sealer_duplicates_total",
                "Re-delivered messages not sealed twice",
            ),
            sealer_epochs: counter("audita_sealer_epochs_total", "Epochs closed"),
            sealer_under_witnessed: counter(
                "audita_sealer_under_witnessed_epochs_total",
                "Epochs sealed with fewer valid keeper co-signatures than the quorum",
            ),
            sealer_cosignatures: counter(
                "audita_sealer_cosignatures_total",
                "Keeper co-signatures collected",
            ),
            sealer_keepers_behind: int_gauge(
                "audita_sealer_keepers_behind",
                "Keepers whose latest co-signed size is behind the log's head",
            ),
            sealer_lag: gauge(
                "audita_sealer_lag_seconds",
                "Wall clock minus the sealer's event-time watermark",
            ),
            slicer_lag: gauge(
                "audita_slicer_lag_seconds",
                "Wall clock minus the event-time watermark of the last epoch the slicer took",
            ),
            monitor_lag: gauge(
                "audita_monitor_lag_seconds",
                "Wall clock minus the event-time watermark of the last epoch the monitor took",
            ),
            slicer_join_held: int_gauge(
                "audita_slicer_join_held_bytes",
                "Accepted bytes the slicer holds ahead of their seals",
            ),
            monitor_join_held: int_gauge(
                "audita_monitor_join_held_bytes",
                "Accepted bytes the monitor holds ahead of their seals",
            ),
            slicer_join_missing: counter(
                "audita_slicer_join_missing_total",
                "Sealed items whose bytes were gone from audita.accepted when the slicer joined them",
            ),
            monitor_join_missing: counter(
                "audita_monitor_join_missing_total",
                "Sealed items whose bytes were gone from audita.accepted when the monitor joined them",
            ),
            slicer_incidents: counter(
                "audita_slicer_incidents_total",
                "Incidents sliced and fanned out",
            ),
            slicer_graph_messages: int_gauge(
                "audita_slicer_graph_messages",
                "Messages in the citation graph",
            ),
            slicer_retained_epochs: int_gauge(
                "audita_slicer_retained_epochs",
                "Epochs retained for inclusion proofs",
            ),
            slicer_evicted: counter(
                "audita_slicer_evicted_messages_total",
                "Messages evicted past the retention horizon",
            ),
            slicer_waiting: int_gauge(
                "audita_slicer_waiting_declarations",
                "Adverse declarations waiting for their slice",
            ),
            slicer_grace: gauge(
                "audita_slicer_grace_seconds",
                "Record time past a window's end the slicer waits (adapted to observed lateness)",
            ),
            slicer_spill_bytes: int_gauge(
                "audita_slicer_spill_bytes",
                "Bytes of held messages and receipts the slicer keeps on disk",
            ),
            slicer_whole_window_scopes: counter(
                "audita_slicer_whole_window_scopes_total",
                "Incidents scoped over their whole window (a missing citation or anchor)",
            ),
            slicer_unresolved: counter(
                "audita_slicer_unresolved_citations_total",
                "Citations emitted slices could not resolve",
            ),
            slicer_slice_wait: histogram(
                "audita_slicer_slice_wait_seconds",
                "Adverse declaration arrival to slice emission",
                SLICE_WAIT_BUCKETS.to_vec(),
            ),
            engine_verdicts: counter("audita_engine_verdicts_total", "Verdicts produced"),
            engine_judge: histogram(
                "audita_engine_judge_seconds",
                "Verify and judge one slice bundle",
                JUDGE_BUCKETS.to_vec(),
            ),
            sinks_rows: counter(
                "audita_sinks_rows_written_total",
                "Verdict rows written to Parquet",
            ),
            sinks_incidents: counter_vec(
                "audita_sinks_incidents_total",
                "Incidents recorded by the sink, by outcome (verdict, abstained)",
                "outcome",
            ),
            monitor_alerts: counter_vec(
                "audita_monitor_alerts_total",
                "Alerts raised by the monitor, by kind",
                "kind",
            ),
            monitor_declarations: counter(
                "audita_monitor_declarations_total",
                "Adverse declarations the monitor derived and published",
            ),
            monitor_pending: int_gauge(
                "audita_monitor_pending_incidents",
                "Incidents fired and waiting for the watermark to be declared",
            ),
            monitor_alert_latency: histogram(
                "audita_monitor_alert_seconds",
                "Epoch arrival at the monitor to the alert's publication",
                ALERT_BUCKETS.to_vec(),
            ),
            notifier_posts,
            notifier_malformed,
            notifier_incidents,
            stage_faults,
            stage_stalled,
            registry,
            ready: Arc::new(AtomicBool::new(false)),
            stop: Arc::new(OnceLock::new()),
        }
    }

    /// Every metric of the pipeline, then the process collector.
    fn collectors(&self) -> Vec<Box<dyn prometheus::core::Collector>> {
        vec![
            Box::new(self.ingest_envelopes.clone()),
            Box::new(self.sealer_messages.clone()),
            Box::new(self.sealer_duplicates.clone()),
            Box::new(self.sealer_epochs.clone()),
            Box::new(self.sealer_under_witnessed.clone()),
            Box::new(self.sealer_cosignatures.clone()),
            Box::new(self.sealer_keepers_behind.clone()),
            Box::new(self.sealer_late.clone()),
            Box::new(self.sealer_watermark.clone()),
            Box::new(self.sealer_lag.clone()),
            Box::new(self.slicer_lag.clone()),
            Box::new(self.monitor_lag.clone()),
            Box::new(self.slicer_join_held.clone()),
            Box::new(self.monitor_join_held.clone()),
            Box::new(self.slicer_join_missing.clone()),
            Box::new(self.monitor_join_missing.clone()),
            Box::new(self.slicer_incidents.clone()),
            Box::new(self.slicer_graph_messages.clone()),
            Box::new(self.slicer_retained_epochs.clone()),
            Box::new(self.slicer_evicted.clone()),
            Box::new(self.slicer_waiting.clone()),
            Box::new(self.slicer_spill_bytes.clone()),
            Box::new(self.slicer_whole_window_scopes.clone()),
            Box::new(self.slicer_unresolved.clone()),
            Box::new(self.slicer_grace.clone()),
            Box::new(self.slicer_slice_wait.clone()),
            Box::new(self.stage_faults.clone()),
            Box::new(self.stage_stalled.clone()),
            Box::new(self.engine_verdicts.clone()),
            Box::new(self.engine_judge.clone()),
            Box::new(self.sinks_rows.clone()),
            Box::new(self.sinks_incidents.clone()),
            Box::new(self.monitor_alerts.clone()),
            Box::new(self.monitor_declarations.clone()),
            Box::new(self.monitor_pending.clone()),
            Box::new(self.monitor_alert_latency.clone()),
            Box::new(self.notifier_posts.clone()),
            Box::new(self.notifier_malformed.clone()),
            Box::new(self.notifier_incidents.clone()),
            Box::new(prometheus::process_collector::ProcessCollector::for_self()),
        ]
    }

    /// Creates every label value a counter can take.
    fn zero_label_values(&self) {
        // Every label value a counter can take exists from the start at 0, so a
        // dashboard's `rate()` or `increase()` has a series before the first event
        // (and an alert's first event is an increase, not a new series).
        for (v, values) in [
            (&self.ingest_envelopes, &["accepted", "suspect"][..]),
            (&self.sinks_incidents, &["verdict", "abstained"][..]),
            (&self.monitor_alerts, &["fired", "near_miss"][..]),
            (
                &self.notifier_posts,
                &["accepted", "rejected", "failed"][..],
            ),
            (&self.stage_faults, &["bus", "storage", "cluster"][..]),
        ] {
            for value in values {
                v.with_label_values(&[value]);
            }
        }
    }

    /// Marks the stage ready (connected and taking input) or not (starting, draining).
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }

    /// Ties readiness to the stage's stop flag: once it is set (a signal), the stage
    /// drains and `/readyz` answers 503. A second call keeps the first flag.
    pub fn drain_on(&self, stop: &Arc<AtomicBool>) {
        let _ = self.stop.set(stop.clone());
    }

    /// Whether `/readyz` answers 200: marked ready and not draining.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
            && !self.stop.get().is_some_and(|s| s.load(Ordering::SeqCst))
    }

    /// The text exposition of every metric.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    }

    /// Serves `/metrics`, `/healthz` and `/readyz` on `addr` from a background thread
    /// (its own single-threaded runtime); returns the bound address (port 0: an
    /// ephemeral one). A bind failure is returned here, before the stage starts.
    /// Connections are bounded like every endpoint's (`audita_http::serve_connections`:
    /// header timeout, at most `MAX_CONNECTIONS` at once).
    pub fn serve(&self, addr: SocketAddr) -> std::io::Result<SocketAddr> {
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let bound = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let app = self.router();
        std::thread::Builder::new()
            .name("metrics-http".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(l) => l,
                        Err(e) => {
                            tracing::error!(error = %e, "metrics endpoint: listener");
                            return;
                        }
                    };
                    // Runs as long as the process: the stop sender lives here.
                    let (_never, stopped) = tokio::sync::oneshot::channel::<()>();
                    audita_http::serve_connections(
                        "metrics",
                        listener,
                        app,
                        REQUEST_TIMEOUT,
                        stopped,
                    )
                    .await;
                })
            })?;
        Ok(bound)
    }

    /// The endpoint's routes, with the request time limit.
    pub fn router(&self) -> Router {
        let (metrics, ready) = (self.clone(), self.clone());
        Router::new()
            .route(
                "/metrics",
                get(move || {
                    let m = metrics.clone();
                    async move {
                        (
                            [(
                                header::CONTENT_TYPE,
                                "text/plain; version=0.0.4; charset=utf-8",
                            )],
                            m.render(),
                        )
                    }
                }),
            )
            .route("/healthz", get(|| async { "ok\n" }))
            .route(
                "/readyz",
                get(move || {
                    let ready = ready.is_ready();
                    async move {
                        if ready {
                            (StatusCode::OK, "ready\n").into_response()
                        } else {
                            (StatusCode::SERVICE_UNAVAILABLE, "not ready\n").into_response()
                        }
                    }
                }),
            )
            .layer(tower_http::timeout::TimeoutLayer::with_status_code(
                StatusCode::REQUEST_TIMEOUT,
                REQUEST_TIMEOUT,
            ))
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// Wall time over which [`LagWatch`] measures how a stage's lag moves.
pub const LAG_WINDOW: Duration = Duration::from_secs(10);

/// Lag growth over one [`LAG_WINDOW`] at which a stage is said to fall behind: it
/// then loses at least half a second of its input per second.
pub const LAG_GROWTH: Duration = Duration::from_secs(5);

/// What [`LagWatch::step`] has to say.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LagChange {
    /// The lag grew by [`LAG_GROWTH`] or more over the last [`LAG_WINDOW`].
    FallingBehind {
        /// The lag now (s).
        lag_s: f64,
        /// How much it grew over the window (s).
        grew_s: f64,
    },
    /// The lag, which was growing, no longer grows.
    CaughtUp {
        /// The lag now (s).
        lag_s: f64,
    },
}

/// Keeps a stage's lag gauge and says, in one log line, when the stage falls
/// behind (its lag grew by [`LAG_GROWTH`] or more over a [`LAG_WINDOW`]) and when it
/// has caught up again (the lag stopped growing). A lag that is large but steady
/// (record time on another clock, as in a replay or the demo) says nothing.
pub struct LagWatch {
    stage: &'static str,
    window: Option<(std::time::Instant, f64)>,
    behind: bool,
}

impl LagWatch {
    /// A watch for `stage`'s lag.
    pub fn new(stage: &'static str) -> LagWatch {
        LagWatch {
            stage,
            window: None,
            behind: false,
        }
    }

    /// Takes the event-time watermark `watermark_ms` (Unix ms; 0 = none yet) the
    /// stage now stands at: sets `gauge` and logs a change of state.
    pub fn observe(&mut self, gauge: &Gauge, watermark_ms: u64) {
        if watermark_ms == 0 {
            return;
        }
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let lag = (now_ms as f64 - watermark_ms as f64) / 1000.0;
        gauge.set(lag);
        match self.step(std::time::Instant::now(), lag) {
            Some(LagChange::FallingBehind { lag_s, grew_s }) => tracing::warn!(
                stage = self.stage,
                lag_s = format!("{lag_s:.1}"),
                grew_s = format!("{grew_s:.1}"),
                over_s = LAG_WINDOW.as_secs(),
                "stage falling behind: its input's event time lags the wall clock more and more"
            ),
            Some(LagChange::CaughtUp { lag_s }) => tracing::info!(
                stage = self.stage,
                lag_s = format!("{lag_s:.1}"),
                "stage caught up: its lag no longer grows"
            ),
            None => {}
        }
    }

    /// The state machine alone: the stage's lag was `lag_s` seconds at `at`. Every
    /// [`LAG_WINDOW`] it compares the lag with the window's first: grown by
    /// [`LAG_GROWTH`] or more is falling behind (said every window it lasts); not
    /// grown at all after that is caught up (said once).
    pub fn step(&mut self, at: std::time::Instant, lag_s: f64) -> Option<LagChange> {
        let (started, at_start) = *self.window.get_or_insert((at, lag_s));
        if at.saturating_duration_since(started) < LAG_WINDOW {
            return None;
        }
        self.window = Some((at, lag_s));
        let grew_s = lag_s - at_start;
        if grew_s >= LAG_GROWTH.as_secs_f64() {
            self.behind = true;
            Some(LagChange::FallingBehind { lag_s, grew_s })
        } else if self.behind && grew_s <= 0.0 {
            self.behind = false;
            Some(LagChange::CaughtUp { lag_s })
        } else {
            None
        }
    }
}
