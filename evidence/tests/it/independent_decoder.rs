//! The wire format document (`FORMAT.md`) is enough for an independent
//! implementation: `testdata/interop/envelope_v1.py` (Python standard library and
//! `cryptography`, written from the document, sharing no code with this crate)
//! decodes every committed vector, re-encodes it byte for byte, recomputes ids and
//! leaves and verifies and re-creates every signature; it refuses a vector whose
//! signature was tampered with. `.ci/run` installs `cryptography` (with
//! `securesystemslib[crypto]`); a missing module fails the test, naming it.
#![cfg(not(fuzzing))]

use std::path::Path;
use std::process::Command;

fn run(vectors: &Path) -> std::process::Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/interop/envelope_v1.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(vectors)
        .output()
        .expect("python3 runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("No module named"),
        "`cryptography` is not installed (.ci/run installs it): {stderr}"
    );
    out
}

#[test]
fn an_independent_python_implementation_reproduces_every_vector() {
    let vectors = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/vectors.json");
    let out = run(&vectors);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["checked"], 5, "four envelopes and a receipt");

    // A vector with one signature bit flipped is refused.
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&vectors).unwrap()).unwrap();
    let signed = json["envelopes"][2]["signed"].as_str().unwrap().to_string();
    let mut bytes = hex::decode(&signed).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    json["envelopes"][2]["signed"] = serde_json::Value::String(hex::encode(&bytes));
    let tmp = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(tmp.path(), serde_json::to_vec(&json).unwrap()).unwrap();
    let out = run(tmp.path());
    assert!(!out.status.success(), "a tampered signature was accepted");
}
