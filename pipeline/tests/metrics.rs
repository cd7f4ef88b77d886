//! The stage endpoint: `/metrics` in the Prometheus text format with names that pass
//! `promtool check metrics` (the real promtool; CI installs it), `/healthz`, `/readyz`
//! following the stage's readiness, each stage process exporting only its own stage's
//! metrics, and a slow client answered within the request time limit.

use audita_pipeline::metrics::{Metrics, STAGES};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// Runs `promtool check metrics` on an exposition; returns its complaints.
fn promtool(exposition: &str) -> String {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool on PATH (.ci/run installs Debian's prometheus package)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(exposition.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        String::new()
    } else {
        text
    }
}

/// Every metric with a value, so each family appears in the exposition.
fn touch(m: &Metrics) {
    m.ingest_envelopes
        .with_label_values(&["accepted"])
        .inc_by(3);
    m.ingest_envelopes.with_label_values(&["suspect"]).inc();
    m.sealer_messages.inc();
    m.sealer_watermark.set(12.5);
    m.slicer_slice_wait.observe(0.2);
    m.engine_judge.observe(0.01);
    m.sinks_rows.inc();
    m.sinks_incidents.with_label_values(&["abstained"]).inc();
    m.monitor_alerts.with_label_values(&["fired"]).inc();
    m.monitor_alert_latency.observe(0.002);
}

/// The `audita_*` metric names a text refers to (PromQL expressions in the chart).
fn referenced_metrics(text: &str) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("audita_") {
        let name: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        rest = &rest[at + name.len()..];
        out.insert(name);
    }
    out
}

/// The chart's alerting rules and Grafana dashboard query only metrics the stages
/// export: a renamed metric would otherwise leave an alert that can never fire.
#[test]
fn the_charts_alert_rules_and_dashboard_name_only_exported_metrics() {
    let m = Metrics::new();
    touch(&m);
    let text = m.render();
    let mut exported: std::collections::BTreeSet<String> = Default::default();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        if let Some(name) = line.split(['{', ' ']).next() {
            exported.insert(name.to_string());
        }
    }
    let chart = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../helm/audita");
    for file in ["templates/prometheusrule.yaml", "files/dashboard.json"] {
        let body = std::fs::read_to_string(chart.join(file)).unwrap();
        let names = referenced_metrics(&body);
        assert!(!names.is_empty(), "{file} queries metrics");
        for n in names {
            assert!(
                exported.contains(&n),
                "{file} queries {n}, which no stage exports"
            );
        }
    }
}

#[test]
fn metrics_healthz_and_readyz_are_served_and_names_pass_promtool() {
    let m = Metrics::new();
    touch(&m);
    let addr = m.serve("127.0.0.1:0".parse().unwrap()).unwrap();
    let (status, body) = get(addr, "/metrics");
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("audita_ingest_envelopes_total{result=\"accepted\"} 3"),
        "{body}"
    );
    assert!(body.contains("audita_engine_judge_seconds_bucket"));
    assert!(body.contains("audita_slicer_slice_wait_seconds_bucket"));
    assert!(
        body.contains("audita_sealer_watermark_seconds 12.5"),
        "{body}"
    );
    assert!(!body.contains("_ms"), "a metric in milliseconds: {body}");
    let complaints = promtool(&body);
    assert!(
        complaints.is_empty(),
        "promtool check metrics:\n{complaints}"
    );

    assert_eq!(get(addr, "/healthz").0, 200);
    assert_eq!(
        get(addr, "/readyz").0,
        503,
        "not ready before the stage says so"
    );
    m.set_ready(true);
    assert_eq!(get(addr, "/readyz").0, 200);
    m.set_ready(false);
    assert_eq!(get(addr, "/readyz").0, 503, "draining is not ready");
    assert_eq!(get(addr, "/nothing").0, 404);
}

#[test]
fn a_stage_process_exports_only_its_own_stage_metrics() {
    for stage in STAGES {
        let m = Metrics::for_stage(stage);
        touch(&m);
        let text = m.render();
        let families: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split_whitespace().next())
            .filter(|n| n.starts_with("audita_"))
            .collect();
        assert!(
            families
                .iter()
                .any(|n| n.starts_with(&format!("audita_{stage}_"))),
            "{stage} exports its own metrics: {families:?}"
        );
        // The slicer's process runs the monitor's detectors: it exports theirs too.
        let detectors = stage == "slicer";
        for n in &families {
            assert!(
                n.starts_with(&format!("audita_{stage}_"))
                    || n.starts_with("audita_bus_")
                    || n.starts_with("audita_stage_")
                    || (detectors && n.starts_with("audita_monitor_")),
                "the {stage} process exports {n}"
            );
        }
        assert_eq!(
            detectors,
            families.iter().any(|n| n.starts_with("audita_monitor_")) && stage != "monitor",
            "only the slicer exports the detectors' metrics besides the monitor"
        );
        // Every stage process says when its stage cannot run (pipeline::supervise),
        // under one name, so one alert covers them all.
        for shared in ["audita_stage_faults_total", "audita_stage_stalled"] {
            assert!(
                families.contains(&shared),
                "the {stage} process exports {shared}: {families:?}"
            );
        }
        assert!(text.contains("process_"), "process metrics too");
        let complaints = promtool(&text);
        assert!(complaints.is_empty(), "{stage}: {complaints}");
    }
}

#[test]
fn a_client_that_never_finishes_its_request_does_not_hold_the_endpoint() {
    let m = Metrics::new();
    let addr = m.serve("127.0.0.1:0".parse().unwrap()).unwrap();
    // Slow clients: connect, send half a request line, never finish.
    let _stalled: Vec<TcpStream> = (0..32)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(b"GET /metr").unwrap();
            s
        })
        .collect();
    let t = Instant::now();
    assert_eq!(get(addr, "/healthz").0, 200);
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "a health check waited {:?} behind stalled clients",
        t.elapsed()
    );
}

/// A stage's lag: a large but steady one says nothing (record time on another
/// clock), one growing a second per second is said to fall behind every window it
/// lasts, and once it stops growing it is said to have caught up, once.
#[test]
fn the_lag_watch_says_when_a_stage_falls_behind_and_when_it_catches_up() {
    use audita_pipeline::metrics::{LagChange, LagWatch};
    use std::time::{Duration, Instant};
    let mut w = LagWatch::new("slicer");
    let t0 = Instant::now();
    let mut said = |from: u64, to: u64, lag: &dyn Fn(u64) -> f64| -> Vec<LagChange> {
        (from..to)
            .filter_map(|s| w.step(t0 + Duration::from_secs(s), lag(s)))
            .collect()
    };
    assert_eq!(said(0, 60, &|_| 86_400.0), vec![], "a steady lag of a day");
    let behind = said(60, 101, &|s| 86_400.0 + (s - 60) as f64);
    assert!(!behind.is_empty(), "a lag growing 1 s/s");
    assert!(behind
        .iter()
        .all(|c| matches!(c, LagChange::FallingBehind { grew_s, .. } if *grew_s >= 5.0)));
    let slow = said(101, 141, &|s| 86_440.0 + (s - 101) as f64 * 0.2);
    assert_eq!(
        slow,
        vec![],
        "growing 0.2 s/s: neither behind nor caught up"
    );
    let steady = said(141, 200, &|_| 86_448.0);
    assert_eq!(steady.len(), 1, "{steady:?}");
    assert!(matches!(steady[0], LagChange::CaughtUp { .. }));
}
