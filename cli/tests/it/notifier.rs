//! Every incident to the real Alertmanager (issue 57): Debian's
//! `prometheus-alertmanager` on a loopback port, and a pipeline over a real Kafka
//! broker — each stage its own `audita stage` process of one deployment made with
//! `audita init` and `audita fleet register`, `audita stage notifier` among them —
//! fed the simulated fleet, whose planted incidents the monitor detects:
//! - each incident's alert is in `GET /api/v2/alerts` within 1 s of its record on
//!   `audita.alerts`, with the labels and annotations the notifier promises;
//! - the same alert (same labels) is updated when its verdict lands: status judged
//!   (the culpable principals) or abstained (the reason);
//! - the notifier SIGKILLed mid-run and restarted loses no alert;
//! - Alertmanager stopped for 60 s (the notifier SIGKILLed and restarted meanwhile,
//!   an operator's declaration and a malformed record arriving) and started again —
//!   with none of its alerts, it keeps them in memory — has every alert back, the
//!   one declared while it was down included; the malformed record is one line.

use crate::dashboard::{free_port, get};
use crate::pipeline::{deployment_of, Stages, SEED};
use audita_bus::kafka::KafkaBus;
use audita_bus::testing::{unique_name, KafkaBroker};
use audita_bus::{Bus, Consumer};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CELLS: usize = 4;
const BASE: &str = "https://audita.example/";

fn audita() -> Command {
    Command::new(env!("CARGO_BIN_EXE_audita"))
}

/// The real Alertmanager on `port`, its files in `dir`, ready.
fn alertmanager(port: u16, dir: &Path) -> Child {
    audita_notifier::testing::start_alertmanager(port, dir)
}

/// Alertmanager's active alerts by their `incident` label (empty while it is down).
fn active(port: u16) -> BTreeMap<String, Value> {
    let Ok((200, body)) = get(port, "/api/v2/alerts") else {
        return BTreeMap::new();
    };
    let alerts: Vec<Value> = serde_json::from_str(&body).unwrap_or_default();
    alerts
        .into_iter()
        .filter_map(|a| Some((a["labels"]["incident"].as_str()?.to_string(), a)))
        .collect()
}

fn status(a: &Value) -> &str {
    a["annotations"]["status"].as_str().unwrap_or("")
}

fn is_final(a: &Value) -> bool {
    matches!(status(a), "judged" | "abstained")
}

/// What the test reads from the topics itself, with the time it read each.
#[derive(Default)]
struct Seen {
    alerts: BTreeMap<String, (Instant, Value)>,
    verdicts: BTreeMap<String, (Instant, Value)>,
    declarations: Vec<Value>,
}

impl Seen {
    fn drain(&mut self, c: &mut dyn Consumer, prefix: &str) {
        while let Some(d) = c.poll(Duration::from_millis(20)).unwrap() {
            let Ok(v) = serde_json::from_slice::<Value>(&d.payload) else {
                continue;
            };
            let now = Instant::now();
            match d.topic.strip_prefix(prefix) {
                Some("audita.alerts") if v["kind"] == "fired" => {
                    let i = v["incident"].as_str().unwrap().to_string();
                    self.alerts.entry(i).or_insert((now, v));
                }
                Some("audita.verdicts") => {
                    let i = v["incident"].as_str().unwrap().to_string();
                    self.verdicts.entry(i).or_insert((now, v));
                }
                Some("audita.adverse") => self.declarations.push(v),
                _ => {}
            }
        }
    }
}

/// The stage processes of the run, the notifier's log kept in a file.
struct Run {
    config: PathBuf,
    bootstrap: String,
    logs: PathBuf,
    stages: Stages,
    starts: usize,
}

impl Run {
    fn spawn(&mut self, name: &str, args: &[&str]) {
        self.starts += 1;
        let log =
            std::fs::File::create(self.logs.join(format!("{name}-{}.log", self.starts))).unwrap();
        let child = audita()
            .args(["stage", name])
            .arg("--config")
            .arg(&self.config)
            .args(["--bootstrap", &self.bootstrap])
            .args(args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.stages.0.push((name.to_string(), child));
    }

    /// SIGKILLs the notifier and starts it again.
    fn kill_notifier(&mut self) {
        let at = self
            .stages
            .0
            .iter()
            .position(|(n, _)| n == "notifier")
            .unwrap();
        let (_, mut child) = self.stages.0.remove(at);
        child.kill().unwrap();
        child.wait().unwrap();
        self.spawn("notifier", &[]);
    }

    fn notifier_log(&self) -> String {
        let mut text = String::new();
        for e in std::fs::read_dir(&self.logs).unwrap().flatten() {
            if e.file_name().to_string_lossy().starts_with("notifier-") {
                text += &std::fs::read_to_string(e.path()).unwrap_or_default();
            }
        }
        text
    }

    fn check_alive(&mut self) {
        for (name, c) in &mut self.stages.0 {
            if let Some(s) = c.try_wait().unwrap() {
                panic!(
                    "stage {name} exited early ({s}); logs in {}",
                    self.logs.display()
                );
            }
        }
    }
}

/// `p ρ∈[lo, hi]; …` of a verdict's culpable principals (the notifier's annotation).
fn culpable(verdict: &Value) -> String {
    let mut out = Vec::new();
    if let Some(ps) = verdict["principals"].as_object() {
        for (p, f) in ps {
            if f["culpable"] == true {
                out.push(format!(
                    "{p} ρ∈[{:.2}, {:.2}]",
                    f["rho_lo"].as_f64().unwrap(),
                    f["rho_hi"].as_f64().unwrap()
                ));
            }
        }
    }
    if out.is_empty() {
        "none".into()
    } else {
        out.join("; ")
    }
}

/// The labels and annotations of an incident's alert against its alert record.
fn check_alert(a: &Value, record: &Value) {
    let incident = record["incident"].as_str().unwrap();
    let l = &a["labels"];
    assert_eq!(l["alertname"], record["predicate"], "{a}");
    assert_eq!(l["incident"], record["incident"], "{a}");
    assert_eq!(l["subject"], record["entities"][0], "{a}");
    assert_eq!(l["site"], record["site"], "the monitor names the cell: {a}");
    assert!(
        matches!(
            l["severity"].as_str(),
            Some("critical" | "warning" | "info")
        ),
        "{a}"
    );
    let n = &a["annotations"];
    assert!(
        n["summary"].as_str().is_some_and(|s| s.contains(incident)),
        "{a}"
    );
    if let Some(j) = record["severity_j"].as_f64() {
        assert_eq!(n["severity_j"], format!("{j:.1}"), "{a}");
    }
    assert_eq!(
        n["report_url"],
        format!("{BASE}reports/{incident}.html"),
        "{a}"
    );
    assert_eq!(
        n["runbook_url"],
        format!(
            "https://runbooks.example/audita/{}",
            record["predicate"].as_str().unwrap()
        ),
        "{a}"
    );
    let first = record["messages"][0].as_str().unwrap();
    assert!(
        n["messages"].as_str().is_some_and(|m| m.contains(first)),
        "the certified messages that establish it: {a}"
    );
}

#[test]
fn every_incident_reaches_alertmanager_within_a_second_is_judged_there_and_survives_restarts_of_both(
) {
    let broker = KafkaBroker::start().unwrap_or_else(|e| panic!("{e}"));
    let work = tempfile::tempdir().unwrap();
    let prefix = format!("{}.", unique_name("notify"));
    let config = deployment_of(work.path(), &prefix, &CELLS.to_string());
    let port = free_port();
    let mut toml = std::fs::read_to_string(&config).unwrap();
    toml += &format!(
        "\n[notifier]\nurl = \"http://127.0.0.1:{port}\"\npublic_base_url = \"{BASE}\"\nrunbook_url = \"https://runbooks.example/audita/{{predicate}}\"\nresend_ms = 1000\n"
    );
    std::fs::write(&config, toml).unwrap();
    let am_dir = work.path().join("alertmanager");
    std::fs::create_dir_all(&am_dir).unwrap();
    let mut am = Stages(vec![("alertmanager".into(), alertmanager(port, &am_dir))]);

    let fleet = audita_load_tests::fleet::build(
        &audita_load_tests::fleet::DEMO_MIX,
        CELLS,
        SEED.parse().unwrap(),
    );
    let planted: BTreeSet<String> = fleet
        .cells
        .iter()
        .filter_map(|c| c.adverse.as_ref().map(|a| a.incident.clone()))
        .collect();
    assert!(!planted.is_empty());

    let logs = work.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let mut run = Run {
        config: config.clone(),
        bootstrap: broker.bootstrap().to_string(),
        logs,
        stages: Stages(Vec::new()),
        starts: 0,
    };
    let record = work.path().join("record");
    run.spawn("notifier", &[]);
    run.spawn("ingest", &[]);
    run.spawn("sealer", &["--dir", record.to_str().unwrap()]);
    run.spawn("slicer", &["--quiet-wait-ms", "2000"]);
    run.spawn("engine", &[]);

    let bus = Bus::Kafka(KafkaBus::new(broker.bootstrap()).unwrap());
    let t = |name: &str| format!("{prefix}{name}");
    let topics = [
        t("audita.alerts"),
        t("audita.adverse"),
        t("audita.verdicts"),
    ];
    let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
    // The stages create the topics as they start.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut reader = loop {
        match bus.consumer(&unique_name("notify-check"), &refs) {
            Ok(c) => break c,
            Err(e) => assert!(Instant::now() < deadline, "topics: {e}"),
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    // The reader joins its group before the fleet is fed, so that the time it reads
    // an alert is the time the alert is on the topic.
    let mut seen = Seen::default();
    let joined = Instant::now();
    while joined.elapsed() < Duration::from_secs(6) {
        seen.drain(reader.as_mut(), &prefix);
    }
    let feed = audita()
        .arg("feed")
        .arg("--config")
        .arg(&config)
        .args(["--bootstrap", broker.bootstrap()])
        .args(["--cells", &CELLS.to_string(), "--seed", SEED])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    // Phase 1: every alert within 1 s; its update when the verdict lands; the
    // notifier SIGKILLed once the first update is seen.
    let mut first_in_am: BTreeMap<String, Instant> = BTreeMap::new();
    let mut final_in_am: BTreeMap<String, Instant> = BTreeMap::new();
    let mut killed: Option<Instant> = None;
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        seen.drain(reader.as_mut(), &prefix);
        let now = Instant::now();
        for (i, a) in active(port) {
            first_in_am.entry(i.clone()).or_insert(now);
            if is_final(&a) {
                final_in_am.entry(i).or_insert(now);
            }
        }
        if killed.is_none() && !final_in_am.is_empty() {
            run.kill_notifier();
            killed = Some(Instant::now());
        }
        if planted.iter().all(|i| final_in_am.contains_key(i))
            && seen.verdicts.len() >= planted.len()
        {
            break;
        }
        run.check_alive();
        assert!(
            Instant::now() < deadline,
            "not every incident judged in Alertmanager within 240 s: {} of {} fired, {} verdicts, {} final in Alertmanager; logs in {}",
            seen.alerts.len(),
            planted.len(),
            seen.verdicts.len(),
            final_in_am.len(),
            run.logs.display()
        );
        std::thread::sleep(Duration::from_millis(25));
    }
    let f = feed.wait_with_output().unwrap();
    assert!(
        f.status.success(),
        "feed: {}",
        String::from_utf8_lossy(&f.stderr)
    );
    let killed = killed.unwrap();

    let fired: BTreeSet<String> = seen.alerts.keys().cloned().collect();
    assert_eq!(fired, planted, "the monitor fires every planted incident");
    let now = active(port);
    let mut timed = 0;
    for (i, (at, rec)) in &seen.alerts {
        let a = &now[i];
        check_alert(a, rec);
        // Within 1 s of its record (the test reads the topic as the notifier does),
        // for every alert recorded while the first notifier ran.
        if *at < killed {
            timed += 1;
            let took = first_in_am[i].saturating_duration_since(*at);
            assert!(
                took <= Duration::from_secs(1),
                "{i} reached Alertmanager {took:?} after its record"
            );
        }
    }
    assert!(
        timed > 0,
        "an alert recorded before the notifier was killed"
    );
    for (i, (at, v)) in &seen.verdicts {
        let a = &now[i];
        match v["abstained"].as_str() {
            Some(reason) => {
                assert_eq!(status(a), "abstained", "{a}");
                assert_eq!(a["annotations"]["abstained"], reason, "{a}");
            }
            None => {
                assert_eq!(status(a), "judged", "{a}");
                assert_eq!(
                    a["annotations"]["culpable"],
                    culpable(&v["verdict"]),
                    "the culpable principals and their ρ intervals: {a}"
                );
            }
        }
        if *at < killed {
            let took = final_in_am[i].saturating_duration_since(*at);
            assert!(
                took <= Duration::from_secs(1),
                "{i}'s verdict reached Alertmanager {took:?} after its record"
            );
        }
    }

    // Phase 2: Alertmanager down for 60 s; meanwhile the notifier is SIGKILLed and
    // restarted, an operator declares one more incident and a malformed record
    // lands on audita.alerts.
    let stopped = Instant::now();
    let (_, mut first) = am.0.pop().unwrap();
    Command::new("kill")
        .arg(first.id().to_string())
        .status()
        .unwrap();
    first.wait().unwrap();
    run.kill_notifier();
    let mut extra = seen.declarations[0].clone();
    let operator = format!("operator-{}", unique_name("decl"));
    extra["incident"] = Value::String(operator.clone());
    let mut p = bus.producer().unwrap();
    p.send(
        &t("audita.adverse"),
        operator.as_bytes(),
        &serde_json::to_vec(&extra).unwrap(),
    )
    .unwrap();
    p.send(
        &t("audita.alerts"),
        b"x",
        b"{\"schema\": \"audita.alert/v1\"",
    )
    .unwrap();
    p.flush().unwrap();
    while !seen.verdicts.contains_key(&operator) {
        seen.drain(reader.as_mut(), &prefix);
        run.check_alive();
        assert!(
            stopped.elapsed() < Duration::from_secs(55),
            "no verdict for the operator's declaration within 55 s"
        );
    }
    std::thread::sleep(Duration::from_secs(60).saturating_sub(stopped.elapsed()));
    am.0.push(("alertmanager".into(), alertmanager(port, &am_dir)));
    let back = Instant::now();
    let want: BTreeSet<String> = planted.iter().cloned().chain([operator.clone()]).collect();
    loop {
        let now = active(port);
        let finals: BTreeSet<String> = now
            .iter()
            .filter(|(_, a)| is_final(a))
            .map(|(i, _)| i.clone())
            .collect();
        if finals == want {
            break;
        }
        run.check_alive();
        assert!(
            back.elapsed() < Duration::from_secs(30),
            "30 s after Alertmanager came back it holds {finals:?}, not {want:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = run.notifier_log();
    let unreachable: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("cannot post to Alertmanager"))
        .collect();
    assert!(
        !unreachable.is_empty() && unreachable.len() <= 6,
        "an unreachable Alertmanager is said in a line, rate-limited: {unreachable:?}"
    );
    assert_eq!(
        log.lines().filter(|l| l.contains("record skipped")).count(),
        1,
        "the malformed record is one line: {log}"
    );
}
