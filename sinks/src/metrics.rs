//! Prometheus metrics of every stage, and a minimal `/metrics` HTTP endpoint.
//!
//! Names follow `audita_<stage>_<name>_<unit>[_total]`; labels take values from small
//! fixed sets (`result`, `reason`, `stage`). A process runs one [`Metrics`]; stages
//! that share a process share it.

use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
    TextEncoder,
};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};

/// The metrics of the pipeline.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    /// Envelopes read by ingest, by `result` (`accepted`, `suspect`).
    pub ingest_envelopes: IntCounterVec,
    /// Messages sealed into epochs.
    pub sealer_messages: IntCounter,
    /// Envelopes older than the dedupe horizon, quarantined as late.
    pub sealer_late: IntCounter,
    /// The sealer's event-time watermark (record time, ms).
    pub sealer_watermark: IntGauge,
    /// Re-delivered messages the sealer recognised by id and did not seal twice.
    pub sealer_duplicates: IntCounter,
    /// Epochs closed.
    pub sealer_epochs: IntCounter,
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
    /// Time from a declaration's arrival to its slice's emission.
    pub slicer_slice_wait: Histogram,
    /// Verdicts produced.
    pub engine_verdicts: IntCounter,
    /// Time an engine worker takes to verify and judge one slice.
    pub engine_judge: Histogram,
    /// Verdict rows written to Parquet.
    pub sinks_rows: IntCounter,
    /// Sends refused by back-pressure, by `stage`.
    pub backpressure: IntCounterVec,
}

impl Metrics {
    /// A fresh registry with every pipeline metric (and process metrics) registered.
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let counter =
            |name: &str, help: &str| IntCounter::new(name, help).expect("static metric name");
        let m = Metrics {
            ingest_envelopes: IntCounterVec::new(
                Opts::new(
                    "audita_ingest_envelopes_total",
                    "Envelopes read by ingest, by result",
                ),
                &["result"],
            )
            .expect("static metric name"),
            sealer_messages: counter(
                "audita_sealer_messages_sealed_total",
                "Messages sealed into epochs",
            ),
            sealer_late: counter(
                "audita_sealer_late_total",
                "Envelopes older than the dedupe horizon, quarantined as late",
            ),
            sealer_watermark: IntGauge::new(
                "audita_sealer_watermark_ms",
                "Event-time watermark of the sealer (record time, ms)",
            )
            .expect("static metric name"),
            sealer_duplicates: counter(
                "audita_sealer_duplicates_total",
                "Re-delivered messages not sealed twice",
            ),
            sealer_epochs: counter("audita_sealer_epochs_total", "Epochs closed"),
            slicer_incidents: counter(
                "audita_slicer_incidents_total",
                "Incidents sliced and fanned out",
            ),
            slicer_graph_messages: IntGauge::new(
                "audita_slicer_graph_messages",
                "Messages in the citation graph",
            )
            .expect("static metric name"),
            slicer_retained_epochs: IntGauge::new(
                "audita_slicer_retained_epochs",
                "Epochs retained for inclusion proofs",
            )
            .expect("static metric name"),
            slicer_evicted: counter(
                "audita_slicer_evicted_messages_total",
                "Messages evicted past the retention horizon",
            ),
            slicer_waiting: IntGauge::new(
                "audita_slicer_waiting_declarations",
                "Adverse declarations waiting for their slice",
            )
            .expect("static metric name"),
            slicer_unresolved: counter(
                "audita_slicer_unresolved_citations_total",
                "Citations emitted slices could not resolve",
            ),
            slicer_slice_wait: Histogram::with_opts(
                HistogramOpts::new(
                    "audita_slicer_slice_wait_seconds",
                    "Adverse declaration arrival to slice emission",
                )
                .buckets(vec![
                    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                ]),
            )
            .expect("static metric name"),
            engine_verdicts: counter("audita_engine_verdicts_total", "Verdicts produced"),
            engine_judge: Histogram::with_opts(
                HistogramOpts::new(
                    "audita_engine_judge_seconds",
                    "Verify and judge one slice bundle",
                )
                .buckets(vec![
                    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                ]),
            )
            .expect("static metric name"),
            sinks_rows: counter(
                "audita_sinks_rows_written_total",
                "Verdict rows written to Parquet",
            ),
            backpressure: IntCounterVec::new(
                Opts::new(
                    "audita_bus_backpressure_total",
                    "Sends refused by back-pressure, by stage",
                ),
                &["stage"],
            )
            .expect("static metric name"),
            registry,
        };
        let collectors: Vec<Box<dyn prometheus::core::Collector>> = vec![
            Box::new(m.ingest_envelopes.clone()),
            Box::new(m.sealer_messages.clone()),
            Box::new(m.sealer_duplicates.clone()),
            Box::new(m.sealer_epochs.clone()),
            Box::new(m.sealer_late.clone()),
            Box::new(m.sealer_watermark.clone()),
            Box::new(m.slicer_incidents.clone()),
            Box::new(m.slicer_graph_messages.clone()),
            Box::new(m.slicer_retained_epochs.clone()),
            Box::new(m.slicer_evicted.clone()),
            Box::new(m.slicer_waiting.clone()),
            Box::new(m.slicer_unresolved.clone()),
            Box::new(m.slicer_slice_wait.clone()),
            Box::new(m.engine_verdicts.clone()),
            Box::new(m.engine_judge.clone()),
            Box::new(m.sinks_rows.clone()),
            Box::new(m.backpressure.clone()),
            Box::new(prometheus::process_collector::ProcessCollector::for_self()),
        ];
        for c in collectors {
            m.registry.register(c).expect("each metric registered once");
        }
        m
    }

    /// The text exposition of every metric.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    }

    /// Serves `GET /metrics` on `addr` from a background thread; returns the bound
    /// address (use port 0 for an ephemeral one).
    pub fn serve(&self, addr: SocketAddr) -> std::io::Result<SocketAddr> {
        let listener = TcpListener::bind(addr)?;
        let bound = listener.local_addr()?;
        let me = self.clone();
        std::thread::Builder::new().name("metrics-http".into()).spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut reader = BufReader::new(&stream);
                let mut request_line = String::new();
                if reader.read_line(&mut request_line).is_err() {
                    continue;
                }
                // Drain headers.
                let mut line = String::new();
                while reader.read_line(&mut line).map(|n| n > 2).unwrap_or(false) {
                    line.clear();
                }
                let (status, body) = if request_line.starts_with("GET /metrics") {
                    ("200 OK", me.render())
                } else {
                    ("404 Not Found", "only /metrics is served\n".to_string())
                };
                let mut s = &stream;
                let _ = write!(
                    s,
                    "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        })?;
        Ok(bound)
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}
