//! The chart's Grafana dashboard answers (issue 37): a real Prometheus (Debian's
//! `prometheus`, on loopback, scraping every second) scrapes the `/metrics` of every
//! stage of a Kafka pipeline run — each stage its own `audita stage` process of one
//! deployment, fed the simulated fleet (`audita feed`) — and every PromQL expression
//! of `helm/audita/files/dashboard.json` is evaluated through Prometheus's HTTP API:
//! each must succeed and return at least one series. The dashboard JSON is checked
//! against `helm/audita/ci/dashboard.schema.json` (the Grafana dashboard model as far
//! as the file uses it) and for what a schema cannot say: unique panel ids and
//! refIds, panels inside the grid without overlap, datasources that are variables.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use audita_bus::testing::{unique_name, KafkaBroker};
use serde_json::Value;

fn chart() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../helm/audita")
}

fn dashboard() -> Value {
    serde_json::from_str(&std::fs::read_to_string(chart().join("files/dashboard.json")).unwrap())
        .expect("the dashboard is JSON")
}

/// A free loopback port (bound and released: the process that takes it binds it next).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `GET path` on `127.0.0.1:port` (HTTP/1.0, so the body is not chunked): status and
/// body.
pub(crate) fn get(port: u16, path: &str) -> Result<(u16, String), String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").map_err(|e| e.to_string())?;
    let mut text = String::new();
    s.read_to_string(&mut text).map_err(|e| e.to_string())?;
    let (head, body) = text.split_once("\r\n\r\n").ok_or("no HTTP header")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or("no HTTP status")?;
    Ok((status, body.to_string()))
}

/// `s` percent-encoded for a query string.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// An instant query: Prometheus's `data` on success, its error text otherwise.
fn query(port: u16, expr: &str) -> Result<Value, String> {
    let (status, body) = get(port, &format!("/api/v1/query?query={}", encode(expr)))?;
    let v: Value = serde_json::from_str(&body).map_err(|e| format!("{status}: {e}: {body}"))?;
    if v["status"] == "success" {
        Ok(v["data"].clone())
    } else {
        Err(format!("{status}: {} {}", v["errorType"], v["error"]))
    }
}

/// The value of a one-series instant query (0 when it returns none).
fn scalar(port: u16, expr: &str) -> f64 {
    query(port, expr)
        .ok()
        .and_then(|d| d["result"][0]["value"][1].as_str()?.parse().ok())
        .unwrap_or(0.0)
}

#[test]
fn the_dashboard_json_is_a_grafana_dashboard_whose_panels_fit_the_grid() {
    let d = dashboard();
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(chart().join("ci/dashboard.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&d)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "dashboard.json: {errors:#?}");
    let panels = d["panels"].as_array().unwrap();
    let variables: Vec<String> = d["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| format!("${{{}}}", v["name"].as_str().unwrap()))
        .collect();
    let mut ids = std::collections::BTreeSet::new();
    let mut cells = std::collections::BTreeMap::new();
    for p in panels {
        let title = p["title"].as_str().unwrap();
        assert!(
            ids.insert(p["id"].as_u64().unwrap()),
            "{title}: a second panel id"
        );
        let g = &p["gridPos"];
        let (x, y, w, h) = (
            g["x"].as_u64().unwrap(),
            g["y"].as_u64().unwrap(),
            g["w"].as_u64().unwrap(),
            g["h"].as_u64().unwrap(),
        );
        assert!(x + w <= 24, "{title}: wider than the 24-column grid");
        for cx in x..x + w {
            for cy in y..y + h {
                if let Some(other) = cells.insert((cx, cy), title) {
                    panic!("{title} overlaps {other} at ({cx}, {cy})");
                }
            }
        }
        let uid = p["datasource"]["uid"].as_str().unwrap();
        assert!(
            variables.iter().any(|v| v == uid),
            "{title}: datasource {uid} is not a variable"
        );
        let mut refs = std::collections::BTreeSet::new();
        for t in p["targets"].as_array().unwrap() {
            assert!(
                refs.insert(t["refId"].as_str().unwrap()),
                "{title}: a second refId"
            );
        }
    }
}

#[test]
fn every_dashboard_expression_returns_data_from_a_prometheus_scraping_a_real_run() {
    let broker = KafkaBroker::start().unwrap_or_else(|e| panic!("{e}"));
    let work = tempfile::tempdir().unwrap();
    let prefix = format!("{}.", unique_name("dash"));
    let config = crate::pipeline::deployment(work.path(), &prefix);
    let record = work.path().join("record");
    let sink_dir = work.path().join("sink");
    let stages: Vec<(&str, Vec<String>)> = vec![
        ("ingest", vec![]),
        ("sealer", vec!["--dir".into(), record.display().to_string()]),
        // The slicer runs the monitor's detectors and exports their metrics.
        ("slicer", vec![]),
        ("engine", vec![]),
        ("sink", vec!["--dir".into(), sink_dir.display().to_string()]),
    ];
    let mut targets = Vec::new();
    let mut procs = crate::pipeline::Stages(Vec::new());
    for (name, extra) in &stages {
        let port = free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_audita"))
            .args(["stage", name, "--config"])
            .arg(&config)
            .args(["--bootstrap", broker.bootstrap()])
            .args(["--metrics", &format!("127.0.0.1:{port}")])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        procs.0.push((name.to_string(), child));
        targets.push((name.to_string(), port));
    }
    // Prometheus, scraping each stage as the chart's ServiceMonitor does: one job per
    // stage, every second.
    let prom_port = free_port();
    let scrape: Vec<String> = targets
        .iter()
        .map(|(name, port)| {
            format!(
                "  - job_name: audita-{name}\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
            )
        })
        .collect();
    let prom_config = work.path().join("prometheus.yml");
    std::fs::write(
        &prom_config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n{}",
            scrape.concat()
        ),
    )
    .unwrap();
    let prom = Command::new("prometheus")
        .arg(format!("--config.file={}", prom_config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            work.path().join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("prometheus on PATH (.ci/run installs Debian's prometheus package)");
    procs.0.push(("prometheus".into(), prom));

    // Every target up before the fleet is fed.
    let deadline = Instant::now() + Duration::from_secs(90);
    while scalar(prom_port, "sum(up)") < targets.len() as f64 {
        for (name, c) in &mut procs.0 {
            if let Some(s) = c.try_wait().unwrap() {
                panic!("{name} exited early ({s})");
            }
        }
        assert!(
            Instant::now() < deadline,
            "not every stage was scraped up in 90 s"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let feed = Command::new(env!("CARGO_BIN_EXE_audita"))
        .arg("feed")
        .arg("--config")
        .arg(&config)
        .args(["--bootstrap", broker.bootstrap()])
        .args([
            "--cells",
            crate::pipeline::CELLS,
            "--seed",
            crate::pipeline::SEED,
        ])
        .output()
        .unwrap();
    assert!(
        feed.status.success(),
        "feed: {}",
        String::from_utf8_lossy(&feed.stderr)
    );

    // Until the sink has recorded verdicts and the monitor fired, then a few more
    // scrapes so every rate() has two samples after the last event.
    let deadline = Instant::now() + Duration::from_secs(180);
    while scalar(prom_port, "sum(audita_sinks_incidents_total)") < 1.0
        || scalar(
            prom_port,
            "sum(audita_monitor_alerts_total{kind=\"fired\"})",
        ) < 1.0
    {
        assert!(
            Instant::now() < deadline,
            "no verdict reached the sink's metrics in 180 s"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    std::thread::sleep(Duration::from_secs(4));

    let mut failures = Vec::new();
    let mut answered = 0;
    for panel in dashboard()["panels"].as_array().unwrap() {
        for t in panel["targets"].as_array().unwrap() {
            let expr = t["expr"].as_str().unwrap();
            match query(prom_port, expr) {
                Ok(data) if data["result"].as_array().is_some_and(|r| !r.is_empty()) => {
                    answered += 1
                }
                Ok(data) => failures.push(format!(
                    "{}: `{expr}` returns no series ({data})",
                    panel["title"]
                )),
                Err(e) => failures.push(format!("{}: `{expr}` fails: {e}", panel["title"])),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "dashboard panels without data:\n{}",
        failures.join("\n")
    );
    assert!(answered >= 10, "only {answered} expressions");
    eprintln!("{answered} dashboard expressions answered by Prometheus over a real run");
}
