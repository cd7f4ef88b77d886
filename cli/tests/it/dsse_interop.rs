//! `audita export dsse` against an independent DSSE implementation: every envelope
//! and receipt of a demo record, exported, verifies with python `securesystemslib`
//! (`securesystemslib.dsse.Envelope.verify` with the exported ed25519 keys), and
//! tampered exports (payload, payload type, signature, another signer's key) fail
//! it. `.ci/run` installs `securesystemslib[crypto]`; a missing module fails the
//! test, naming it.

use std::path::Path;
use std::process::Command;

const CHECK: &str = r#"
import copy, json, os, sys, base64
from securesystemslib.dsse import Envelope
from securesystemslib.signer import SSlibKey
from securesystemslib.exceptions import VerificationError

out = sys.argv[1]
keys = {k: SSlibKey.from_dict(k, dict(v)) for k, v in json.load(open(os.path.join(out, "keys.json"))).items()}
index = json.load(open(os.path.join(out, "index.json")))
ok = 0
for item in index:
    env = Envelope.from_dict(json.load(open(os.path.join(out, item["file"]))))
    assert env.signatures, item
    env.verify([keys[item["keyid"]]], 1)
    ok += 1

def fails(env, key):
    try:
        env.verify([key], 1)
    except VerificationError:
        return True
    return False

first = index[0]
# securesystemslib's from_dict consumes the dict it is given: build each from a copy.
raw = json.load(open(os.path.join(out, first["file"])))
env = lambda d: Envelope.from_dict(copy.deepcopy(d))
key = keys[first["keyid"]]
assert not fails(env(raw), key), "the untouched envelope verifies"
body = bytearray(base64.b64decode(raw["payload"]))
body[-1] ^= 1
assert fails(env(dict(raw, payload=base64.b64encode(bytes(body)).decode())), key), "tampered payload verified"
assert fails(env(dict(raw, payloadType="application/vnd.audita.receipt.v1")), key), "other payload type verified"
sig = bytearray(base64.b64decode(raw["signatures"][0]["sig"]))
sig[0] ^= 1
t = dict(raw, signatures=[dict(raw["signatures"][0], sig=base64.b64encode(bytes(sig)).decode())])
assert fails(env(t), key), "tampered signature verified"
other = next(i for i in index if i["keyid"] != first["keyid"])
impostor = SSlibKey.from_dict(first["keyid"], dict(json.load(open(os.path.join(out, "keys.json")))[other["keyid"]]))
assert fails(env(raw), impostor), "another signer's key verified"
print(json.dumps({"verified": ok}))
"#;

fn audita(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_audita"))
        .args(args)
        .output()
        .expect("run audita")
}

fn count(dir: &Path, prefix: &str) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(prefix)
        })
        .count()
}

#[test]
fn every_envelope_and_receipt_of_a_demo_record_verifies_with_securesystemslib() {
    let tmp = tempfile::tempdir().unwrap();
    let demo = tmp.path().join("demo");
    let run = audita(&[
        "demo",
        "--quiet",
        "--cells",
        "2",
        "--out",
        demo.to_str().unwrap(),
    ]);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let record = demo.join("record");
    let out = tmp.path().join("dsse");
    let export = audita(&[
        "export",
        "dsse",
        record.to_str().unwrap(),
        out.to_str().unwrap(),
    ]);
    assert_eq!(
        export.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&export.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&export.stdout).unwrap();
    let rd = audita_record::read_dir(&record, &audita_record::Limits::default()).unwrap();
    assert_eq!(summary["envelopes"], rd.record.envelopes.len());
    assert_eq!(summary["receipts"], rd.record.receipts.len());
    assert_eq!(
        (summary["undecodable"].as_u64(), summary["unkeyed"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(count(&out, "envelope-"), rd.record.envelopes.len());
    assert_eq!(count(&out, "receipt-"), rd.record.receipts.len());

    let py = Command::new("python3")
        .args(["-c", CHECK, out.to_str().unwrap()])
        .output()
        .expect("python3 runs");
    let stderr = String::from_utf8_lossy(&py.stderr);
    assert!(
        !stderr.contains("No module named"),
        "securesystemslib is not installed (.ci/run installs it): {stderr}"
    );
    assert!(py.status.success(), "{stderr}");
    let verified: serde_json::Value = serde_json::from_slice(&py.stdout).unwrap();
    assert_eq!(
        verified["verified"],
        rd.record.envelopes.len() + rd.record.receipts.len()
    );

    // An unreadable record is one line, exit 2.
    let bad = audita(&[
        "export",
        "dsse",
        tmp.path().join("nope").to_str().unwrap(),
        out.to_str().unwrap(),
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&bad.stderr).lines().count(), 1);
}
