//! The pipeline end to end: the embedded run (`audita demo`) and the Kafka run (every
//! stage a separate `audita stage --config` process of one deployment made with
//! `audita init` and `audita fleet register`, two engine workers, against a real
//! Apache Kafka broker) of the same fleet produce identical verdict rows.

use audita_bus::testing::{unique_name, KafkaBroker};
use serde_json::Value;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) const CELLS: &str = "8";
pub(crate) const SEED: &str = "3";

fn audita() -> Command {
    Command::new(env!("CARGO_BIN_EXE_audita"))
}

/// Verdict rows without `record_root`: the root names the epoch the slice was read
/// from, and epoch boundaries depend on arrival timing (epochs close by count or
/// age), not on the evidence.
pub(crate) fn rows(path: &Path) -> Vec<Value> {
    let text = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut rows: Vec<Value> = serde_json::from_slice(&text).unwrap();
    for r in &mut rows {
        r.as_object_mut().unwrap().remove("record_root");
    }
    rows
}

/// The uninterrupted reference: `audita demo` on the same fleet, over the embedded bus.
pub(crate) fn embedded_run() -> tempfile::TempDir {
    let embedded = tempfile::tempdir().unwrap();
    let st = audita()
        .args([
            "demo",
            "--quiet",
            "--insecure-demo-keys",
            "--cells",
            CELLS,
            "--seed",
            SEED,
            "--out",
        ])
        .arg(embedded.path())
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    embedded
}

/// A deployment for the Kafka runs, made as an operator makes one (`audita init`,
/// `audita fleet register`), on the same seed-derived keys as [`embedded_run`]'s
/// throw-away deployment, so both runs sign identical bytes; topics under `prefix`.
pub(crate) fn deployment(work: &Path, prefix: &str) -> std::path::PathBuf {
    deployment_of(work, prefix, CELLS)
}

/// [`deployment`] for a fleet of `cells` cells.
pub(crate) fn deployment_of(work: &Path, prefix: &str, cells: &str) -> std::path::PathBuf {
    let dir = work.join("deployment");
    let origin = format!("audita.demo/seed-{SEED}");
    let ok = |c: &mut Command| {
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    ok(audita()
        .args(["init"])
        .arg(&dir)
        .args(["--origin", &origin])
        .args(["--local-keeper", "operator.example/keeper"])
        .args(["--local-keeper", "insurer.example/keeper"])
        .args(["--insecure-demo-keys", "--seed", SEED]));
    let config = dir.join("audita.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace("prefix = \"\"", &format!("prefix = \"{prefix}\"")),
    )
    .unwrap();
    ok(audita()
        .args(["fleet", "register"])
        .arg(&dir)
        .args(["--cells", cells, "--seed", SEED]));
    config
}

/// Incidents the embedded run judged (the sink's `--expect`).
pub(crate) fn incidents(embedded: &Path) -> String {
    std::fs::read_dir(embedded.join("adverse"))
        .unwrap()
        .count()
        .to_string()
}

/// The abstentions in a sink's journal: (incident, reason).
fn abstentions(journal: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(journal).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| {
            let r = v.get("record").cloned().unwrap_or(v);
            let reason = r["abstained"].as_str()?.to_string();
            Some((r["incident"].as_str()?.to_string(), reason))
        })
        .collect()
}

/// Child processes killed (and reaped) when dropped, a test's failure included.
pub(crate) struct Stages(pub(crate) Vec<(String, Child)>);

impl Drop for Stages {
    fn drop(&mut self) {
        for (_, c) in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn embedded_demo_writes_a_clean_record_reports_and_parquet() {
    let out = embedded_run();
    let rows = rows(&out.path().join("rows.json"));
    assert!(!rows.is_empty(), "the demo fleet has adverse incidents");
    assert!(
        rows.iter().any(|r| r["culpable"] == Value::Bool(true)),
        "some finding is culpable"
    );
    // Through the whole pipeline, every incident's ρ equals the planted causal profile.
    let planted: std::collections::BTreeMap<String, std::collections::BTreeMap<String, f64>> =
        serde_json::from_slice(&std::fs::read(out.path().join("planted.json")).unwrap()).unwrap();
    assert!(!planted.is_empty());
    for (incident, profile) in &planted {
        for r in rows.iter().filter(|r| r["incident"] == incident.as_str()) {
            let p = r["principal"].as_str().unwrap();
            let want = profile.get(p).copied().unwrap_or(0.0);
            assert_eq!(
                (r["rho_lo"].as_f64().unwrap(), r["rho_hi"].as_f64().unwrap()),
                (want, want),
                "{incident}: {p}"
            );
        }
        for (p, want) in profile.iter().filter(|(_, w)| **w > 0.0) {
            assert!(
                rows.iter()
                    .any(|r| r["incident"] == incident.as_str() && r["principal"] == p.as_str()),
                "{incident}: {p} (ρ = {want}) has no row"
            );
        }
    }
    let reports = std::fs::read_dir(out.path().join("reports"))
        .unwrap()
        .count();
    assert!(reports > 0, "one HTML report per adverse incident");
    let v = audita()
        .arg("verify")
        .arg(out.path().join("record"))
        .output()
        .unwrap();
    assert_eq!(
        v.status.code(),
        Some(0),
        "the demo's record verifies clean: {}",
        String::from_utf8_lossy(&v.stdout)
    );
}

#[test]
fn kafka_run_with_separate_stage_processes_equals_the_embedded_run() {
    let broker = KafkaBroker::start().unwrap_or_else(|e| panic!("{e}"));
    let embedded = embedded_run();

    let work = tempfile::tempdir().unwrap();
    let prefix = format!("{}.", unique_name("pipe"));
    let config = deployment(work.path(), &prefix);
    let expect = incidents(embedded.path());
    let common = |c: &mut Command| {
        c.arg("--config")
            .arg(&config)
            .args(["--bootstrap", broker.bootstrap()]);
    };
    let spawn = |args: &[&str], extra: &[&str]| -> Child {
        let mut c = audita();
        c.args(args);
        common(&mut c);
        c.args(extra).stdout(Stdio::null()).stderr(Stdio::piped());
        c.spawn().unwrap()
    };
    let record = work.path().join("record");
    let sink_dir = work.path().join("sink");
    let idle = ["--max-idle-ms", "60000"];
    let mut stages = Stages(vec![
        ("ingest".into(), spawn(&["stage", "ingest"], &idle)),
        (
            "sealer".into(),
            spawn(
                &["stage", "sealer", "--dir", record.to_str().unwrap()],
                &idle,
            ),
        ),
        // The slicer runs the monitor's detectors over its own join: no monitor
        // process of its own.
        ("slicer".into(), spawn(&["stage", "slicer"], &idle)),
        ("engine-1".into(), spawn(&["stage", "engine"], &idle)),
        ("engine-2".into(), spawn(&["stage", "engine"], &idle)),
    ]);
    let mut sink = spawn(
        &[
            "stage",
            "sink",
            "--expect",
            &expect,
            "--dir",
            sink_dir.to_str().unwrap(),
        ],
        &idle,
    );
    let mut feed = audita();
    feed.arg("feed");
    common(&mut feed);
    feed.args(["--cells", CELLS, "--seed", SEED]);
    let f = feed.output().unwrap();
    assert!(
        f.status.success(),
        "feed failed: {}",
        String::from_utf8_lossy(&f.stderr)
    );
    let deadline = Instant::now() + Duration::from_secs(240);
    let status = loop {
        if let Some(s) = sink.try_wait().unwrap() {
            break s;
        }
        for (name, c) in &mut stages.0 {
            if let Some(s) = c.try_wait().unwrap() {
                let mut err = String::new();
                let _ = std::io::Read::read_to_string(c.stderr.as_mut().unwrap(), &mut err);
                panic!("stage {name} exited early ({s}): {err}");
            }
        }
        assert!(
            Instant::now() < deadline,
            "the Kafka pipeline produced no complete verdict set within 240 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(status.success(), "sink failed");
    let (kafka, local) = (
        rows(&sink_dir.join("rows.json")),
        rows(&embedded.path().join("rows.json")),
    );
    let differing: Vec<String> = kafka
        .iter()
        .zip(&local)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("kafka {a}\nlocal {b}"))
        .take(3)
        .collect();
    assert!(
        kafka.len() == local.len() && differing.is_empty(),
        "Kafka ({} rows) and embedded ({} rows) verdicts differ:\n{}",
        kafka.len(),
        local.len(),
        differing.join("\n")
    );
}

#[test]
fn sigkill_of_each_stage_mid_stream_loses_nothing_seals_nothing_twice_and_changes_no_verdict() {
    interrupted_run(Signal::Kill);
}

#[test]
fn sigterm_of_each_stage_mid_stream_exits_0_loses_nothing_seals_nothing_twice_and_changes_no_verdict(
) {
    interrupted_run(Signal::Term);
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Signal {
    /// SIGKILL: a crash.
    Kill,
    /// SIGTERM: an orderly stop (a Kubernetes rollout, a node drain).
    Term,
}

/// How long a stage may take to drain and exit after SIGTERM.
const DRAIN_BOUND: Duration = Duration::from_secs(30);

/// Stops `child` with `signal` and waits for it; after SIGTERM the stage must exit 0
/// within [`DRAIN_BOUND`].
fn interrupt(child: &mut Child, signal: Signal, what: &str) {
    match signal {
        Signal::Kill => {
            child.kill().unwrap();
            child.wait().unwrap();
        }
        Signal::Term => {
            let sent = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status()
                .unwrap();
            assert!(sent.success(), "kill -TERM {what}");
            let deadline = Instant::now() + DRAIN_BOUND;
            let status = loop {
                if let Some(status) = child.try_wait().unwrap() {
                    break status;
                }
                if Instant::now() >= deadline {
                    let _ = child.kill();
                    panic!("{what} did not exit within {DRAIN_BOUND:?} of SIGTERM");
                }
                std::thread::sleep(Duration::from_millis(20));
            };
            assert_eq!(status.code(), Some(0), "{what} after SIGTERM: {status}");
        }
    }
}

fn interrupted_run(signal: Signal) {
    let broker = KafkaBroker::start().unwrap_or_else(|e| panic!("{e}"));
    let embedded = embedded_run();

    let work = tempfile::tempdir().unwrap();
    let work = if std::env::var("AUDITA_KEEP").is_ok() {
        Box::leak(Box::new(work)).path().to_path_buf()
    } else {
        work.path().to_path_buf()
    };
    eprintln!("work dir {}", work.display());
    let prefix = format!(
        "{}.",
        unique_name(if signal == Signal::Kill {
            "crash"
        } else {
            "term"
        })
    );
    let config = deployment(&work, &prefix);
    let expect = incidents(embedded.path());
    let record = work.join("record");
    let sink_dir = work.join("sink");
    // Every stage process logs (debug) into work/logs/<stage>-<n>.log, kept with the
    // work directory under AUDITA_KEEP=1: what each instance did around its signal.
    let logs = work.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let spawned = std::cell::Cell::new(0usize);
    let stage = |args: &[&str]| -> Child {
        let n = spawned.get();
        spawned.set(n + 1);
        let log = std::fs::File::create(logs.join(format!("{}-{n}.log", args[1]))).unwrap();
        let mut c = audita();
        c.args(args)
            .arg("--config")
            .arg(&config)
            .args(["--bootstrap", broker.bootstrap(), "--max-idle-ms", "60000"])
            .env("RUST_LOG", "debug,rdkafka=info,librdkafka=info")
            .stdout(Stdio::null())
            .stderr(log);
        c.spawn().unwrap()
    };
    let sealer_args = ["stage", "sealer", "--dir", record.to_str().unwrap()];
    let slicer_args = ["stage", "slicer"];
    let mut stages = Stages(vec![
        ("ingest".into(), stage(&["stage", "ingest"])),
        ("sealer".into(), stage(&sealer_args)),
        ("slicer".into(), stage(&slicer_args)),
        ("engine-1".into(), stage(&["stage", "engine"])),
        ("engine-2".into(), stage(&["stage", "engine"])),
    ]);
    let sink_args = [
        "stage",
        "sink",
        "--expect",
        &expect,
        "--dir",
        sink_dir.to_str().unwrap(),
    ];
    let mut sink = stage(&sink_args);
    // A paced feed (about 4 s), so every kill below lands mid-stream.
    let mut feed = audita();
    feed.args(["feed", "--rate", "15", "--config"])
        .arg(&config)
        .args([
            "--bootstrap",
            broker.bootstrap(),
            "--cells",
            CELLS,
            "--seed",
            SEED,
        ]);
    let mut feeder = feed.spawn().unwrap();
    let victims = std::env::var("AUDITA_CRASH_VICTIMS")
        .unwrap_or_else(|_| "sealer,ingest,slicer,engine-1,slicer,sealer".into());
    for (i, victim) in victims.split(',').filter(|v| !v.is_empty()).enumerate() {
        std::thread::sleep(Duration::from_millis(if i == 0 { 900 } else { 600 }));
        let slot = stages.0.iter_mut().find(|(n, _)| n == victim).unwrap();
        assert!(
            slot.1.try_wait().unwrap().is_none(),
            "{victim} exited before it was interrupted"
        );
        interrupt(&mut slot.1, signal, victim);
        slot.1 = match victim {
            "sealer" => stage(&sealer_args),
            "ingest" => stage(&["stage", "ingest"]),
            "slicer" => stage(&slicer_args),
            _ => stage(&["stage", "engine"]),
        };
    }
    assert!(feeder.wait().unwrap().success(), "feed failed");
    // The sink dies once it has taken a verdict but not all of them, and restarts.
    let journal = sink_dir.join("journal.jsonl");
    let journaled = || {
        std::fs::read(&journal)
            .map(|b| b.iter().filter(|c| **c == b'\n').count())
            .unwrap_or(0)
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    while journaled() == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        sink.try_wait().unwrap().is_none(),
        "the sink finished before it could be killed mid-stream"
    );
    interrupt(&mut sink, signal, "sink");
    assert!(journaled() >= 1, "no verdict reached the sink within 120 s");
    sink = stage(&sink_args);
    let deadline = Instant::now() + Duration::from_secs(240);
    while sink.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "no complete verdict set within 240 s after the crashes"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        rows(&sink_dir.join("rows.json")),
        rows(&embedded.path().join("rows.json")),
        "verdicts after {signal:?} interruptions differ from the uninterrupted run \
         (abstentions the sink took: {:?})",
        abstentions(&journal)
    );
    // Across the sink's restart every row landed in Parquet exactly once: one
    // incidents row per incident, one findings row per incident and principal.
    let tables = sink_dir.join("verdicts");
    let findings = audita_sinks::tables::incidents_in(&tables.join("findings")).unwrap();
    let mut want: std::collections::BTreeMap<String, usize> = Default::default();
    for r in rows(&embedded.path().join("rows.json")) {
        *want
            .entry(r["incident"].as_str().unwrap().to_string())
            .or_insert(0) += 1;
    }
    assert_eq!(
        findings, want,
        "findings rows per incident after the sink's crash"
    );
    let incidents = audita_sinks::tables::incidents_in(&tables.join("incidents")).unwrap();
    let embedded_incidents =
        audita_sinks::tables::incidents_in(&embedded.path().join("verdicts/incidents")).unwrap();
    assert!(incidents.values().all(|n| *n == 1), "{incidents:?}");
    assert_eq!(
        incidents.keys().collect::<Vec<_>>(),
        embedded_incidents.keys().collect::<Vec<_>>(),
        "incidents rows after the sink's crash"
    );
    // Stop the sealer before reading its directory.
    drop(stages);
    let (rec, _) = audita_record::read_record(&record).unwrap();
    let leaves: Vec<Vec<u8>> = rec.epochs.iter().flat_map(|e| e.leaves.clone()).collect();
    let unique: std::collections::BTreeSet<&Vec<u8>> = leaves.iter().collect();
    assert_eq!(unique.len(), leaves.len(), "a message was sealed twice");
    let (local, _) = audita_record::read_record(&embedded.path().join("record")).unwrap();
    let local_leaves: usize = local.epochs.iter().map(|e| e.leaves.len()).sum();
    assert_eq!(leaves.len(), local_leaves, "an accepted message was lost");
    let v = audita().arg("verify").arg(&record).output().unwrap();
    assert_eq!(
        v.status.code(),
        Some(0),
        "the record after crashes verifies clean: {}",
        String::from_utf8_lossy(&v.stdout)
    );
}
