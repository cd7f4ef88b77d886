//! The Python package `audita` (PyO3, `python/`), as installed from its wheel
//! (`.ci/run` builds it with maturin and installs it), against a real broker:
//! - its pytest suite (`python/tests/test_audita.py`): signing, citing,
//!   verifying, the refusals, key files, the spool with an unreachable broker;
//! - a Python script using only the package (`python/tests/publish_for_ingest.py`)
//!   publishes a registered planner's signed commands and the robot's receipt, which
//!   the ingest stage certifies, and a stranger's envelope and a tampered command,
//!   which it quarantines with the reason `signature`.
//!
//! Nothing is skipped: without the installed package (or pytest) the test fails,
//! saying how to install it.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use audita_bus::kafka::KafkaBus;
use audita_bus::testing::{unique_name, KafkaBroker};
use audita_evidence::KeyRegistry;

fn python_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../python"))
}

fn require_package() {
    let out = Command::new("python3")
        .args(["-c", "import audita, audita._native, pytest"])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "the `audita` Python package (and pytest) must be installed: \
         `maturin build -m python/Cargo.toml -o target/wheels && pip install target/wheels/audita-*.whl` \
         (what .ci/run does): {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

#[test]
fn the_pytest_suite_passes_against_a_real_broker() {
    require_package();
    let broker = KafkaBroker::start().expect("a Kafka broker");
    let out = Command::new("python3")
        .args([
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/test_audita.py",
        ])
        .current_dir(python_dir())
        .env("AUDITA_KAFKA_BOOTSTRAP", broker.bootstrap())
        .output()
        .expect("pytest runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("4 passed"), "{text}");
}

#[test]
fn a_python_script_publishes_what_ingest_certifies_and_the_rest_is_quarantined() {
    require_package();
    let broker = KafkaBroker::start().expect("a Kafka broker");
    let bus = KafkaBus::new(broker.bootstrap()).unwrap();
    let prefix = unique_name("py.") + ".";
    common::topics_of(&bus, &prefix);
    // The deployment registers planner and agv-1 by the keys `audita principal add`
    // would write; the script loads the key files.
    let tmp = tempfile::tempdir().unwrap();
    let keys = tmp.path().join("keys");
    let mut registry = KeyRegistry::new();
    for name in ["planner", "agv-1"] {
        let k = audita_keys::generate();
        audita_keys::write(&keys.join(format!("{name}.key")), name, &k, false).unwrap();
        registry.add_principal(
            audita_evidence::PrincipalId::new(name).unwrap(),
            k.verifying_key(),
        );
    }
    let report = tmp.path().join("published.json");
    let out = Command::new("python3")
        .arg(python_dir().join("tests/publish_for_ingest.py"))
        .args([
            broker.bootstrap(),
            &prefix,
            keys.to_str().unwrap(),
            tmp.path().join("spool").to_str().unwrap(),
            report.to_str().unwrap(),
        ])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let published: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let hexes = |k: &str| -> BTreeSet<String> {
        published[k]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    };

    let (accepted, suspect) = common::ingest(&bus, &prefix, &registry, 2);
    let accepted: BTreeSet<String> = accepted.iter().map(hex::encode).collect();
    assert_eq!(
        accepted,
        hexes("certified"),
        "the registered principals' evidence is accepted"
    );
    assert_eq!(suspect.len(), 2, "{suspect:?}");
    assert!(
        suspect.iter().all(|q| q.reason == "signature"),
        "{suspect:?}"
    );
    let quarantined: BTreeSet<String> = suspect.iter().map(|q| q.bytes_hex.clone()).collect();
    assert_eq!(quarantined, hexes("quarantined"));
}
