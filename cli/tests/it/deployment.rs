//! A real deployment (issue 11): an operator creates it (`audita init`, `audita
//! principal add`), its stages run from `audita.toml` alone over a real Kafka broker,
//! a client signs with the key files the deployment handed out, and `audita verify`
//! certifies the record with the registry alone. Keys are never reproducible from the
//! command line; demo runs never share an origin; a revoked or not-yet-valid key makes
//! its messages suspect with the reason.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use audita_bus::kafka::KafkaBus;
use audita_bus::testing::{unique_name, KafkaBroker};
use audita_evidence::{
    derive_signing_key, Envelope, Payload, PrincipalId, Receipt, SignedEnvelope, SigningKey,
};
use audita_topics::names as topics;
use serde_json::Value;

fn audita() -> Command {
    Command::new(env!("CARGO_BIN_EXE_audita"))
}

fn ok(c: &mut Command) -> Output {
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "{:?}: {}",
        c,
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn key(dir: &Path, name: &str) -> SigningKey {
    let path = dir.join("keys/principals").join(format!("{name}.key"));
    audita_deploy::keys::load(path.to_str().unwrap(), Path::new("/"), Some(name)).unwrap()
}

fn pid(n: &str) -> PrincipalId {
    PrincipalId::new(n).unwrap()
}

/// Every private key file of a deployment directory, with its key.
fn key_files(dir: &Path) -> Vec<(PathBuf, SigningKey)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.join("keys")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let k = audita_deploy::keys::load(p.to_str().unwrap(), Path::new("/"), None)
                    .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                out.push((p, k));
            }
        }
    }
    out
}

struct Kill(Vec<Child>);

impl Drop for Kill {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn an_operator_made_deployment_seals_a_clients_messages_that_verify_with_the_registry_alone() {
    let broker = KafkaBroker::start().unwrap_or_else(|e| panic!("{e}"));
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("site");
    let origin = "site-7.example/audita";
    ok(audita().arg("init").arg(&dir).args(["--origin", origin]));
    for (name, role) in [
        ("planner-1", "planner"),
        ("controller-agv-1", "controller"),
        ("agv-1", "actuator"),
    ] {
        ok(audita()
            .args(["principal", "add"])
            .arg(&dir)
            .args([name, "--role", role]));
    }
    let prefix = format!("{}.", unique_name("deploy"));
    let config = dir.join("audita.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace("prefix = \"\"", &format!("prefix = \"{prefix}\"")),
    )
    .unwrap();

    // No key of the deployment can be recomputed from anything on its command lines:
    // not from the numbers given (there were none but defaults), not from the names.
    let files = key_files(&dir);
    assert_eq!(files.len(), 4, "the log key and three principal keys");
    for (path, k) in &files {
        for seed in 0..64u64 {
            for name in [origin, "planner-1", "controller-agv-1", "agv-1", "site"] {
                assert_ne!(
                    k.to_bytes(),
                    derive_signing_key(seed, name).to_bytes(),
                    "{} derives from a public value",
                    path.display()
                );
            }
        }
    }

    let record = work.path().join("record");
    let stage = |args: &[&str]| -> Child {
        audita()
            .args(args)
            .arg("--config")
            .arg(&config)
            .args(["--bootstrap", broker.bootstrap(), "--max-idle-ms", "30000"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let stages = Kill(vec![
        stage(&["stage", "ingest"]),
        stage(&["stage", "sealer", "--dir", record.to_str().unwrap()]),
    ]);

    // A client: the planner and the controller sign with the files they were given.
    let planner = key(&dir, "planner-1");
    let controller = key(&dir, "controller-agv-1");
    let agv = key(&dir, "agv-1");
    let order = Envelope::new(
        pid("planner-1"),
        pid("controller-agv-1"),
        1_000,
        Payload::ExternalInput {
            source: "wms".into(),
            text: "pick aisle 4".into(),
        },
    )
    .sign(&planner)
    .unwrap();
    let speed = Envelope::new(
        pid("controller-agv-1"),
        pid("agv-1"),
        1_010,
        Payload::SetSpeed {
            target: "agv-1".into(),
            mm_per_s: 800,
        },
    )
    .cite([order.id().clone()])
    .sign(&controller)
    .unwrap();
    // An impostor: a registered name, an unregistered key.
    let forged = Envelope::new(
        pid("planner-1"),
        pid("controller-agv-1"),
        1_020,
        Payload::ExternalInput {
            source: "wms".into(),
            text: "forged".into(),
        },
    )
    .sign(&audita_deploy::keys::generate())
    .unwrap();
    let receipts = [
        Receipt::sign(
            order.id().clone(),
            pid("controller-agv-1"),
            1_001,
            &controller,
        ),
        Receipt::sign(speed.id().clone(), pid("agv-1"), 1_011, &agv),
    ];
    let bus = audita_bus::Bus::Kafka(KafkaBus::new(broker.bootstrap()).unwrap());
    let mut p = bus.producer().unwrap();
    let send = |p: &mut Box<dyn audita_bus::Producer>, topic: &str, key: &str, bytes: &[u8]| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match p.send(&format!("{prefix}{topic}"), key.as_bytes(), bytes) {
                Ok(()) => break,
                Err(e) if e.is_transient() && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Err(e) => panic!("{e}"),
            }
        }
    };
    for e in [&order, &speed, &forged] {
        send(
            &mut p,
            topics::ENVELOPES,
            e.envelope().author.as_str(),
            e.as_bytes(),
        );
    }
    for r in &receipts {
        send(
            &mut p,
            topics::RECEIPTS,
            r.recipient().as_str(),
            r.as_bytes(),
        );
    }
    p.flush().unwrap();

    // Wait until both genuine messages are sealed, then stop the stages.
    let sealed = |want: usize| {
        audita_record::read_record(&record)
            .map(|(r, _)| r.epochs.iter().map(|e| e.leaves.len()).sum::<usize>() >= want)
            .unwrap_or(false)
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    while !sealed(2) {
        assert!(
            Instant::now() < deadline,
            "the client's messages were not sealed in 120 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_millis(500));
    drop(stages);

    // The record verifies clean with the keys the deployment registered: the
    // registry is in it, bound by digest into every epoch header.
    let v = ok(audita().arg("verify").arg(&record));
    let v: Value = serde_json::from_slice(&v.stdout).unwrap();
    assert_eq!(v["clean"], true, "{v}");
    assert_eq!(
        v["counts"]["certified"], 2,
        "the forgery never reached the record: {v}"
    );
    let registry = audita_evidence::PrincipalRegistry::from_json(
        &std::fs::read_to_string(dir.join("principals.json")).unwrap(),
    )
    .unwrap();
    let digest: String = registry
        .digest()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(v["registries"][0]["digest"], digest.as_str(), "{v}");
    assert!(audita_record::registry_path(&record, &registry.digest()).exists());
    // With the registry pinned as the only trust anchor of principal keys, nothing
    // else was needed: the record's keys/ holds only public keys.
    for f in ["keys/principals.txt", "keys/logs.txt"] {
        let text = std::fs::read_to_string(record.join(f)).unwrap();
        assert!(!text.contains("PRIVATE"), "{f}");
    }
    let _ = SignedEnvelope::decode(forged.as_bytes().to_vec()).unwrap();
}

#[test]
fn two_demo_runs_never_sign_under_one_origin() {
    let work = tempfile::tempdir().unwrap();
    let run = |name: &str| -> (String, String) {
        let out = work.path().join(name);
        ok(audita()
            .args(["demo", "--quiet", "--cells", "2", "--out"])
            .arg(&out));
        let logs = std::fs::read_to_string(out.join("record/keys/logs.txt")).unwrap();
        let (origin, key) = logs.trim().split_once(' ').unwrap();
        (origin.to_string(), key.to_string())
    };
    let (o1, k1) = run("a");
    let (o2, k2) = run("b");
    assert_ne!(o1, o2, "each demo run names its own log");
    assert_ne!(k1, k2, "and signs with its own fresh key");
    assert!(o1.starts_with("audita.demo/run-"), "{o1}");
}

#[test]
fn a_revoked_or_not_yet_valid_key_makes_its_messages_suspect_with_the_reason() {
    // A reproducible demo record; then the registry in force revokes a principal's
    // key before one of its messages and opens another's window after its message.
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("demo");
    ok(audita()
        .args(["demo", "--quiet", "--cells", "1", "--out"])
        .arg(&out));
    let record = out.join("record");
    let v: Value = serde_json::from_slice(&ok(audita().arg("verify").arg(&record)).stdout).unwrap();
    let digest = v["registries"][0]["digest"].as_str().unwrap().to_string();
    let path = record.join("keys/registry").join(format!("{digest}.json"));
    let mut reg =
        audita_evidence::PrincipalRegistry::from_json(&std::fs::read_to_string(&path).unwrap())
            .unwrap();
    // Timestamps of two authors' messages.
    let (rec, _) = audita_record::read_record(&record).unwrap();
    let envs: Vec<SignedEnvelope> = rec
        .envelopes
        .iter()
        .map(|e| SignedEnvelope::decode(e.clone()).unwrap())
        .collect();
    let first = |author: &str| {
        envs.iter()
            .filter(|e| e.envelope().author.as_str() == author)
            .map(|e| e.envelope().timestamp)
            .min()
            .unwrap()
    };
    let mut authors: Vec<String> = envs
        .iter()
        .map(|e| e.envelope().author.to_string())
        .collect();
    authors.sort();
    authors.dedup();
    assert!(authors.len() >= 2, "{authors:?}");
    let (revoked, late) = (authors[0].clone(), authors[1].clone());
    reg.revoke(&revoked, first(&revoked) - 1).unwrap();
    let p = reg.principals.iter_mut().find(|p| p.name == late).unwrap();
    p.keys[0].valid_from_ms = Some(first(&late) + 1);
    // The edited registry is what the record's headers name now (as a registry in
    // force would be): rewrite the file under the header's digest to simulate it.
    std::fs::write(&path, reg.to_json_pretty()).unwrap();
    let o = audita().arg("verify").arg(&record).output().unwrap();
    // The file no longer matches its digest: the reader refuses it, naming it.
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("digest"));
    // Judged against the edited registry directly, the messages are suspect with the
    // reasons.
    let mut keys = reg.key_registry().unwrap();
    let (_, record_keys) = {
        std::fs::remove_file(&path).unwrap();
        audita_record::read_record(&record).unwrap()
    };
    for (n, k) in record_keys.keepers() {
        keys.add_keeper(n, *k).unwrap();
    }
    for (n, k) in record_keys.logs() {
        keys.add_log(n, *k).unwrap();
    }
    let part = audita_evidence::verify_record(&rec, &keys);
    let codes: std::collections::BTreeSet<&str> = part
        .suspect
        .iter()
        .flat_map(|s| s.reasons.iter().map(|r| r.code()))
        .collect();
    assert!(codes.contains("key_revoked"), "{codes:?}");
    assert!(codes.contains("key_not_yet_valid"), "{codes:?}");
}

/// The README's first command runs `audita demo` with its default, relative `--out`:
/// the fleet's key files must be found relative to the deployment's directory, not
/// to `/` (they once were: "62 fleet principals have no key file").
#[test]
fn the_demo_runs_with_a_relative_output_directory() {
    let cwd = tempfile::tempdir().unwrap();
    let out = audita()
        .current_dir(cwd.path())
        .args(["demo", "--cells", "2", "--quiet", "--out", "rel-demo"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "audita demo --out rel-demo: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(cwd.path().join("rel-demo/record/FORMAT").exists());
    assert!(String::from_utf8_lossy(&out.stdout).contains("verifies clean"));
}
