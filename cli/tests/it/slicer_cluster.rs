//! The slicer as a cluster of two processes (timely's cluster mode, over loopback)
//! against a real Apache Kafka broker:
//! - a live run (every stage its own process, the detectors as `audita stage
//!   monitor`) in which one slicer member is SIGKILLed mid-stream and restarted, as
//!   a StatefulSet's kubelet would: the other member reforms the cluster by itself,
//!   and the verdicts equal the embedded run's, with nothing lost and nothing
//!   sealed twice;
//! - then the run's topics replayed through one slicer process and through a
//!   two-member cluster: the same slice for every incident, byte for byte (the
//!   record root aside, which names how far the slicer had read when it emitted), and
//!   the same verdict from it.

use crate::pipeline::{deployment, embedded_run, incidents, rows, Stages};
use audita_bus::kafka::KafkaBus;
use audita_bus::testing::{unique_name, KafkaBroker};
use audita_bus::{Consumer, Producer};
use audita_topics::SliceBundle;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn audita() -> Command {
    Command::new(env!("CARGO_BIN_EXE_audita"))
}

/// Two free loopback addresses below the kernel's ephemeral range (a port picked by
/// binding port 0 can be taken by an outgoing connection before the member binds it).
fn member_addresses() -> Vec<String> {
    let base = 33_000u16.saturating_sub((std::process::id() % 10_000) as u16);
    let mut out = Vec::new();
    let mut port = base;
    while out.len() < 2 {
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            out.push(format!("127.0.0.1:{port}"));
        }
        port -= 1;
    }
    out
}

/// A stage process logging into `logs/<name>.log`.
fn spawn(config: &Path, bootstrap: &str, logs: &Path, name: &str, args: &[&str]) -> Child {
    let log = std::fs::File::create(logs.join(format!("{name}.log"))).unwrap();
    audita()
        .args(args)
        .arg("--config")
        .arg(config)
        .args(["--bootstrap", bootstrap])
        .env(
            "RUST_LOG",
            "info,audita_slicer=debug,rdkafka=warn,librdkafka=warn",
        )
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap()
}

fn slicer_args<'a>(peers: &'a str, index: &'a str, idle: &'a str) -> Vec<&'a str> {
    vec![
        "stage",
        "slicer",
        "--peers",
        peers,
        "--index",
        index,
        "--max-idle-ms",
        idle,
    ]
}

/// A replay's slicer: idle for 8 s stops it, and a declaration whose window never
/// completes (a receipt that never came) is emitted after 2 s of quiet, so that it
/// is emitted before the stop (the live run waits the default 15 s).
const REPLAY: [&str; 4] = ["--max-idle-ms", "8000", "--quiet-wait-ms", "2000"];

/// Every record of `topic`, per partition in offset order, read to its end.
fn read_all(bus: &KafkaBus, topic: &str) -> Vec<audita_bus::Delivery> {
    let mut c = bus.consumer(&unique_name("read"), &[topic]).unwrap();
    let mut out = Vec::new();
    let mut quiet = Instant::now();
    while quiet.elapsed() < Duration::from_secs(3) {
        if let Some(d) = c.poll(Duration::from_millis(100)).unwrap() {
            out.push(d);
            quiet = Instant::now();
        }
    }
    out
}

/// A copy of the deployment's configuration under topic prefix `to`, with the input
/// topics of the slicer (seals, accepted bytes, declarations) copied record for
/// record, partition for partition, from prefix `from`.
fn copy_inputs(config: &Path, bus: &KafkaBus, bootstrap: &str, from: &str, to: &str) -> PathBuf {
    let text = std::fs::read_to_string(config).unwrap();
    let copy = config.with_file_name(format!("audita-{}.toml", to.trim_end_matches('.')));
    std::fs::write(
        &copy,
        text.replace(
            &format!("prefix = \"{from}\""),
            &format!("prefix = \"{to}\""),
        ),
    )
    .unwrap();
    let o = audita()
        .args(["topics", "create", "--config"])
        .arg(&copy)
        .args(["--bootstrap", bootstrap])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut p = bus.producer().unwrap();
    for topic in ["audita.epochs", "audita.accepted", "audita.adverse"] {
        for d in read_all(bus, &format!("{from}{topic}")) {
            p.send_to(&format!("{to}{topic}"), d.partition, &d.key, &d.payload)
                .unwrap();
        }
    }
    p.flush().unwrap();
    copy
}

/// A bundle without what depends on when it was emitted: the record root's header
/// and checkpoint, unless a carried proof is against that epoch.
fn canonical(bundle: &[u8]) -> (Vec<u8>, Vec<Vec<Vec<u8>>>) {
    let b = SliceBundle::decode(bundle).expect("a slice bundle");
    let e = &b.evidence;
    let sizes: std::collections::BTreeSet<u64> = e
        .proofs
        .iter()
        .chain(&e.elsewhere_proofs)
        .filter_map(|p| audita_evidence::InclusionProof::decode(p).ok())
        .map(|p| p.size)
        .collect();
    let (mut headers, mut checkpoints) = (Vec::new(), Vec::new());
    for (h, c) in e.headers.iter().zip(&e.checkpoints) {
        let size = audita_evidence::EpochHeader::decode(h.clone()).map(|h| h.size);
        if size.is_ok_and(|s| sizes.contains(&s)) {
            headers.push(h.clone());
            checkpoints.push(c.clone());
        }
    }
    (
        b.declaration.clone(),
        vec![
            e.envelopes.clone(),
            e.proofs.clone(),
            e.receipts.clone(),
            e.elsewhere.clone(),
            e.elsewhere_proofs.clone(),
            headers,
            checkpoints,
        ],
    )
}

/// Runs the slicer (one process, or a cluster on `peers`) over prefix `to`'s copied
/// inputs until idle; returns its slices by incident.
fn replay(
    config: &Path,
    bus: &KafkaBus,
    bootstrap: &str,
    logs: &Path,
    to: &str,
    peers: Option<&[String]>,
) -> BTreeMap<String, Vec<u8>> {
    let mut members = Stages(Vec::new());
    match peers {
        None => {
            let mut args = vec!["stage", "slicer"];
            args.extend(REPLAY);
            members.0.push((
                "one".into(),
                spawn(config, bootstrap, logs, &format!("replay-{to}"), &args),
            ))
        }
        Some(peers) => {
            let list = peers.join(",");
            for i in 0..peers.len() {
                let index = i.to_string();
                let mut args = vec!["stage", "slicer", "--peers", &list, "--index", &index];
                args.extend(REPLAY);
                members.0.push((
                    format!("member-{i}"),
                    spawn(config, bootstrap, logs, &format!("replay-{to}-{i}"), &args),
                ));
            }
        }
    }
    let deadline = Instant::now() + Duration::from_secs(180);
    for (name, c) in &mut members.0 {
        loop {
            if let Some(s) = c.try_wait().unwrap() {
                assert!(s.success(), "replay slicer {name} of {to} exited with {s}");
                break;
            }
            assert!(
                Instant::now() < deadline,
                "replay slicer {name} of {to} never went idle"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let mut out = BTreeMap::new();
    for d in read_all(bus, &format!("{to}audita.slices")) {
        let incident = String::from_utf8(d.key.clone()).unwrap();
        assert!(
            out.insert(incident.clone(), d.payload).is_none(),
            "{to}: {incident} emitted twice"
        );
    }
    out
}

/// A verdict record without what depends on when it was sliced (as the embedded
/// load test normalises it).
fn without_anchor(mut v: Value) -> Value {
    if let Some(o) = v.as_object_mut() {
        o.remove("record");
    }
    if let Some(o) = v["verdict"].as_object_mut() {
        o.remove("record_root");
    }
    if let Some(rows) = v["rows"].as_array_mut() {
        for r in rows {
            if let Some(o) = r.as_object_mut() {
                o.remove("record_root");
            }
        }
    }
    v
}

#[test]
fn slicer_cluster_of_two_processes_reforms_after_a_sigkill_and_slices_as_one_process() {
    let broker = KafkaBroker::start().unwrap_or_else(|e| panic!("{e}"));
    let bootstrap = broker.bootstrap().to_string();
    let embedded = embedded_run();
    let work = tempfile::tempdir().unwrap();
    let work = if std::env::var("AUDITA_KEEP").is_ok() {
        Box::leak(Box::new(work)).path().to_path_buf()
    } else {
        work.path().to_path_buf()
    };
    eprintln!("work dir {}", work.display());
    let logs = work.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let prefix = format!("{}.", unique_name("cluster"));
    let config = deployment(&work, &prefix);
    let expect = incidents(embedded.path());
    let record = work.join("record");
    let sink_dir = work.join("sink");
    let peers = member_addresses();
    let list = peers.join(",");
    let idle = "90000";
    let run = |name: &str, args: &[&str]| spawn(&config, &bootstrap, &logs, name, args);
    let member = |i: usize, attempt: usize| {
        let index = i.to_string();
        run(
            &format!("slicer-{i}-{attempt}"),
            &slicer_args(&list, &index, idle),
        )
    };
    let mut stages = Stages(vec![
        (
            "ingest".into(),
            run("ingest", &["stage", "ingest", "--max-idle-ms", idle]),
        ),
        (
            "sealer".into(),
            run(
                "sealer",
                &[
                    "stage",
                    "sealer",
                    "--dir",
                    record.to_str().unwrap(),
                    "--max-idle-ms",
                    idle,
                ],
            ),
        ),
        // The cluster's members read a share of the bytes each: the detectors run on
        // their own, over every partition.
        (
            "monitor".into(),
            run("monitor", &["stage", "monitor", "--max-idle-ms", idle]),
        ),
        ("slicer-0".into(), member(0, 0)),
        ("slicer-1".into(), member(1, 0)),
        (
            "engine-1".into(),
            run("engine-1", &["stage", "engine", "--max-idle-ms", idle]),
        ),
        (
            "engine-2".into(),
            run("engine-2", &["stage", "engine", "--max-idle-ms", idle]),
        ),
    ]);
    let mut sink = run(
        "sink",
        &[
            "stage",
            "sink",
            "--expect",
            &expect,
            "--dir",
            sink_dir.to_str().unwrap(),
            "--max-idle-ms",
            idle,
        ],
    );
    // A paced feed (about 4 s), so the kill lands mid-stream.
    let mut feeder = audita()
        .args(["feed", "--rate", "15", "--config"])
        .arg(&config)
        .args(["--bootstrap", &bootstrap, "--cells", crate::pipeline::CELLS])
        .args(["--seed", crate::pipeline::SEED])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1_500));
    let victim = stages.0.iter_mut().find(|(n, _)| n == "slicer-1").unwrap();
    assert!(
        victim.1.try_wait().unwrap().is_none(),
        "slicer-1 exited before its kill"
    );
    victim.1.kill().unwrap();
    victim.1.wait().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    victim.1 = member(1, 1);
    assert!(feeder.wait().unwrap().success(), "feed failed");
    let deadline = Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(s) = sink.try_wait().unwrap() {
            break s;
        }
        for (name, c) in &mut stages.0 {
            if let Some(s) = c.try_wait().unwrap() {
                panic!(
                    "{name} exited before the sink had every verdict ({s}); logs in {}",
                    logs.display()
                );
            }
        }
        assert!(
            Instant::now() < deadline,
            "no complete verdict set within 300 s of the kill; logs in {}",
            logs.display()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(status.success(), "sink failed");
    // The member that was not killed reformed the cluster by itself: it never exited.
    let survivor = stages.0.iter_mut().find(|(n, _)| n == "slicer-0").unwrap();
    assert!(survivor.1.try_wait().unwrap().is_none(), "slicer-0 exited");
    let survivor_log = std::fs::read_to_string(logs.join("slicer-0-0.log")).unwrap();
    assert!(
        survivor_log.matches("slicer cluster formed").count() >= 2,
        "slicer-0 did not reform the cluster after its peer's kill:\n{survivor_log}"
    );
    assert_eq!(
        rows(&sink_dir.join("rows.json")),
        rows(&embedded.path().join("rows.json")),
        "verdicts through the slicer cluster, across a member's SIGKILL, differ from the embedded run's"
    );
    drop(stages);
    // Nothing sealed twice, nothing lost: the record verifies clean.
    let v = audita().arg("verify").arg(&record).output().unwrap();
    assert!(
        v.status.success(),
        "the record does not verify: {}",
        String::from_utf8_lossy(&v.stdout)
    );

    // The same input through one process and through a cluster of two.
    let bus = KafkaBus::new(&bootstrap).unwrap();
    let one = format!("{}.", unique_name("one"));
    let two = format!("{}.", unique_name("two"));
    let config_one = copy_inputs(&config, &bus, &bootstrap, &prefix, &one);
    let config_two = copy_inputs(&config, &bus, &bootstrap, &prefix, &two);
    let by_one = replay(&config_one, &bus, &bootstrap, &logs, &one, None);
    let by_two = replay(
        &config_two,
        &bus,
        &bootstrap,
        &logs,
        &two,
        Some(&member_addresses()),
    );
    assert_eq!(
        by_one.len().to_string(),
        expect,
        "one process sliced every incident"
    );
    assert_eq!(
        by_one.keys().collect::<Vec<_>>(),
        by_two.keys().collect::<Vec<_>>(),
        "the cluster sliced other incidents than one process"
    );
    let d = audita_pipeline::Deployment::from_config(
        &audita_deploy::Config::load(&config).unwrap(),
        false,
    )
    .unwrap();
    let reg = audita_engine_workers::Registries {
        keys: &d.keys,
        duties: &d.duties,
        quorum: d.quorum,
        predicates: d.predicates.as_ref(),
    };
    for (incident, bundle) in &by_one {
        assert!(
            canonical(bundle) == canonical(&by_two[incident]),
            "{incident}: the cluster's slice differs from one process's"
        );
        let verdict = |bytes: &[u8]| {
            let b = SliceBundle::decode(bytes).unwrap();
            let v = audita_engine_workers::judge_checked(&b, reg.keys, reg.duties, reg.predicates)
                .unwrap_or_else(|e| panic!("{incident}: {e}"));
            without_anchor(
                serde_json::to_value(audita_engine_workers::record(&v, &b, &reg)).unwrap(),
            )
        };
        assert_eq!(
            verdict(bundle),
            verdict(&by_two[incident]),
            "{incident}: the cluster's verdict differs from one process's"
        );
    }
}
