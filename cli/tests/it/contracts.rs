//! The promises the CLI makes to a hostile audience, each checked through the built
//! binary: an abstaining verdict is a JSON verdict (exit 1), severities are finite,
//! `audita demo` never replays a stale output directory, `--trust` pins the log and
//! keeper keys from outside the record, a lost payload key is not "shredded", and
//! the demo's verdicts are reproduced bitwise by `audita verdict`.

#[path = "../../../verdict/tests/it/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use audita_evidence::checkpoint::{COSIGNATURE_V1_TYPE, ED25519_NOTE_TYPE};
use audita_evidence::trust::vkey;
use serde_json::Value;

fn audita(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_audita"))
        .args(args)
        .output()
        .expect("run audita")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}); stderr: {}",
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn sample(dir: &Path) -> PathBuf {
    let rec = dir.join("rec");
    let out = audita(&["sample-record", s(&rec), "--messages", "16"]);
    assert_eq!(out.status.code(), Some(0), "{}", err(&out));
    rec
}

/// A trust file pinning the record's own log and keeper keys.
fn trust_file(rec: &Path, quorum: Option<usize>) -> PathBuf {
    let keys = audita_record::read_registry(rec).unwrap();
    let mut text = String::from("# pinned from the keepers' own publications\n");
    for (n, k) in keys.logs() {
        text.push_str(&format!("log {}\n", vkey(n, ED25519_NOTE_TYPE, k)));
    }
    for (n, k) in keys.keepers() {
        text.push_str(&format!("keeper {}\n", vkey(n, COSIGNATURE_V1_TYPE, k)));
    }
    if let Some(q) = quorum {
        text.push_str(&format!("quorum {q}\n"));
    }
    let path = rec.parent().unwrap().join(format!("trust-{quorum:?}.txt"));
    std::fs::write(&path, text).unwrap();
    path
}

/// Removes the co-signature lines of the named keepers (all keepers: `None`) from
/// every checkpoint note, keeping the log's own signature.
fn strip_cosignatures(rec: &Path, keepers: Option<&[&str]>) {
    for e in std::fs::read_dir(rec.join("checkpoints")).unwrap() {
        let path = e.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let (body, sigs) = text.split_once("\n\n").unwrap();
        let origin = body.lines().next().unwrap();
        let kept: Vec<&str> = sigs
            .lines()
            .filter(|l| {
                let name = l.trim_start_matches("— ").split(' ').next().unwrap();
                name == origin || keepers.is_some_and(|ks| !ks.contains(&name))
            })
            .collect();
        std::fs::write(&path, format!("{body}\n\n{}\n", kept.join("\n"))).unwrap();
    }
}

/// The attack of the issue: an empty keepers.txt and every co-signature stripped
/// verify clean against the record's own keys — and the summary now says that the
/// keys came from the record. Pinned keys catch it, naming each problem.
#[test]
fn stripped_cosignatures_with_an_empty_keeper_list_fail_against_pinned_keys() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = sample(tmp.path());
    let trust = trust_file(&rec, None);
    let honest = audita(&["verify", s(&rec), "--trust", s(&trust)]);
    assert_eq!(honest.status.code(), Some(0), "{}", err(&honest));
    let v = json(&honest);
    assert_eq!(v["trust"]["source"], "pinned");
    assert_eq!(v["trust"]["quorum"], 3);
    assert_eq!(v["counts"]["trust_problems"], 0);

    strip_cosignatures(&rec, None);
    std::fs::write(rec.join("keys/keepers.txt"), "").unwrap();
    // The forger rewrites the tiled log and the vkeys to match (the record's own
    // `audita verify` would otherwise name the tiles' cosigned checkpoint).
    audita_record::tiles::rebuild(&rec).unwrap();
    let own = audita(&["verify", s(&rec)]);
    assert_eq!(
        own.status.code(),
        Some(0),
        "against its own keys it verifies"
    );
    let v = json(&own);
    assert_eq!(v["trust"]["source"], "record");
    assert!(v["trust"]["note"].as_str().unwrap().contains("--trust"));

    let pinned = audita(&["verify", s(&rec), "--trust", s(&trust)]);
    assert_eq!(pinned.status.code(), Some(1));
    let v = json(&pinned);
    assert_eq!(v["clean"], false);
    assert_eq!(v["problem_codes"]["trust"]["pinned_keeper_absent"], 3);
    assert!(v["problem_codes"]["checkpoint_faults"]["missing_cosignature"].as_u64() > Some(0));
    assert!(v["problem_codes"]["epoch_faults"]["not_witnessed"].as_u64() > Some(0));
    let line = err(&pinned);
    assert_eq!(line.lines().count(), 1, "{line}");
    assert!(
        line.contains("pinned keeper") && line.contains("trust problems"),
        "{line}"
    );

    // `audita verdict` takes the same pins.
    let duties = tmp.path().join("d.json");
    std::fs::write(&duties, "{}").unwrap();
    let adverse = tmp.path().join("a.json");
    std::fs::write(
        &adverse,
        r#"{"incident": "i", "outcome": "o", "t_star_ms": 5000}"#,
    )
    .unwrap();
    let args = [
        "verdict",
        s(&rec),
        "--duties",
        s(&duties),
        "--adverse",
        s(&adverse),
    ];
    assert_eq!(audita(&args).status.code(), Some(0));
    let mut with_trust = args.to_vec();
    with_trust.extend(["--trust", s(&trust)]);
    let out = audita(&with_trust);
    assert_eq!(out.status.code(), Some(1));
    assert!(err(&out).contains("trust problems"), "{}", err(&out));
}

#[test]
fn a_keeper_quorum_accepts_a_missing_keeper_and_rejects_two() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = sample(tmp.path());
    let keys = audita_record::read_registry(&rec).unwrap();
    let names: Vec<String> = keys.keepers().map(|(n, _)| n.clone()).collect();
    assert_eq!(names.len(), 3);
    let trust = trust_file(&rec, Some(2));
    strip_cosignatures(&rec, Some(&[names[0].as_str()]));
    let out = audita(&["verify", s(&rec), "--trust", s(&trust)]);
    assert_eq!(out.status.code(), Some(0), "{}", err(&out));
    // Without a quorum, every pinned keeper is required.
    let all = trust_file(&rec, None);
    assert_eq!(
        audita(&["verify", s(&rec), "--trust", s(&all)])
            .status
            .code(),
        Some(1)
    );
    strip_cosignatures(&rec, Some(&[names[1].as_str()]));
    let out = audita(&["verify", s(&rec), "--trust", s(&trust)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(json(&out)["problem_codes"]["epoch_faults"]["not_witnessed"].as_u64() > Some(0));
}

#[test]
fn a_record_resigned_under_another_log_key_is_named_against_the_pin() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = sample(tmp.path());
    let trust = trust_file(&rec, None);
    let text = std::fs::read_to_string(rec.join("keys/logs.txt")).unwrap();
    let (name, _) = text.trim_end().split_once(' ').unwrap();
    let other = audita_evidence::derive_signing_key(99, name).verifying_key();
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(other.as_bytes());
    std::fs::write(rec.join("keys/logs.txt"), format!("{name} {b64}\n")).unwrap();
    let out = audita(&["verify", s(&rec), "--trust", s(&trust)]);
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    assert_eq!(v["problem_codes"]["trust"]["log_key_mismatch"], 1);
    // The pinned key is the one verified against: the seals still hold.
    assert_eq!(v["counts"]["epochs_intact"], v["counts"]["epochs"]);
    // A malformed trust file is a one-line input error.
    std::fs::write(&trust, "log not-a-key\n").unwrap();
    let out = audita(&["verify", s(&rec), "--trust", s(&trust)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(err(&out).contains("line 1:"), "{}", err(&out));
}

/// Deleting a payload's key used to be reported as "shredded". Only a tombstone
/// says shredded; a key that is merely gone is `missing_key`, a problem.
#[test]
fn a_deleted_payload_key_is_missing_key_not_shredded() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = sample(tmp.path());
    let key = std::fs::read_dir(rec.join("payloads"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "key"))
        .unwrap();
    std::fs::remove_file(&key).unwrap();
    let out = audita(&["verify", s(&rec)]);
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    assert_eq!(v["counts"]["shredded_payloads"], 1, "the tombstoned one");
    assert_eq!(v["counts"]["missing_key_payloads"], 1);
    assert_eq!(v["problem_codes"]["payloads"]["missing_key"], 1);
    let statuses: Vec<&str> = v["payloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["status"].as_str().unwrap())
        .collect();
    assert!(statuses.contains(&"missing_key") && statuses.contains(&"shredded"));
    assert!(err(&out).contains("key is missing"), "{}", err(&out));
}

/// An abstention used to exit 2 with no JSON. It is a verdict: status `abstained`,
/// the reason in `notes`, exit 1.
#[test]
fn an_abstaining_verdict_prints_json_with_status_abstained_and_exits_1() {
    use common::{adverse, eighteen_deleted_relays};
    let (a, rec, keys) = eighteen_deleted_relays();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("rec");
    audita_record::write_record(&dir, &rec, &keys).unwrap();
    let adv = tmp.path().join("a.json");
    std::fs::write(
        &adv,
        serde_json::to_vec(&adverse(&[&a], 1000, &[]).decl).unwrap(),
    )
    .unwrap();
    let duties = tmp.path().join("d.json");
    std::fs::write(&duties, "{}").unwrap();
    let out = audita(&[
        "verdict",
        s(&dir),
        "--duties",
        s(&duties),
        "--adverse",
        s(&adv),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", err(&out));
    let v = json(&out);
    assert_eq!(v["schema"], "audita.verdict/v1");
    assert_eq!(v["status"], "abstained");
    assert_eq!(v["principals"], serde_json::json!({}));
    let note = v["notes"][0].as_str().unwrap();
    assert!(
        note.starts_with("abstained:") && note.contains("readings"),
        "{note}"
    );
    assert!(err(&out).contains("abstaining"), "{}", err(&out));
}

#[test]
fn a_severity_that_overflows_is_a_one_line_input_error() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = sample(tmp.path());
    let duties = tmp.path().join("d.json");
    std::fs::write(&duties, "{}").unwrap();
    let adverse = tmp.path().join("a.json");
    std::fs::write(
        &adverse,
        r#"{"incident": "i", "outcome": "o", "t_star_ms": 1,
            "severity": {"mass_kg": 1e300, "speed_m_per_s": 1e300}}"#,
    )
    .unwrap();
    let out = audita(&[
        "verdict",
        s(&rec),
        "--duties",
        s(&duties),
        "--adverse",
        s(&adverse),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(err(&out).lines().count(), 1);
    assert!(err(&out).contains("overflows"), "{}", err(&out));
    assert!(out.stdout.is_empty());
}

fn demo(out: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "demo",
        "--quiet",
        "--cells",
        "6",
        "--seed",
        "5",
        "--out",
        s(out),
    ];
    args.extend(extra);
    audita(&args)
}

/// `audita demo` into its own earlier output used to report "0 messages … verifies
/// clean" from the stale journal. Now it refuses, and `--force` starts clean.
#[test]
fn demo_refuses_a_non_empty_out_and_force_starts_clean() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("demo");
    let first = demo(&out, &[]);
    assert_eq!(first.status.code(), Some(0), "{}", err(&first));
    let summary = String::from_utf8_lossy(&first.stdout).into_owned();
    let again = demo(&out, &[]);
    assert_eq!(again.status.code(), Some(2));
    assert!(err(&again).contains("--force"), "{}", err(&again));
    let forced = demo(&out, &["--force"]);
    assert_eq!(forced.status.code(), Some(0), "{}", err(&forced));
    let line = |t: &str| t.lines().next().unwrap_or("").to_string();
    assert_eq!(
        line(&String::from_utf8_lossy(&forced.stdout)),
        line(&summary),
        "the forced run seals the whole fleet again"
    );
    assert!(!line(&summary).contains(" 0 messages"));
    // Anything a demo does not write is never cleared.
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    let refused = demo(&out, &["--force"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(err(&refused).contains("notes.txt"), "{}", err(&refused));
    assert!(out.join("notes.txt").exists());
}

/// Every incident of a demo whose record spans several epochs: `audita verdict` on the
/// record, the duty registry and the incident's declaration, at the verdict's own
/// record root, prints the demo's verdict file byte for byte. (Verdicts judged at an
/// earlier root used to list ids the cut left missing: the scope leak of issue 10.)
#[test]
fn demo_verdicts_are_reproduced_bitwise_by_audita_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    // Small epochs, so the record has many roots; which root each verdict is judged
    // at is the stages' timing (a loaded machine can let the slicer see every epoch
    // before it cuts the first slice, and then all verdicts share the last root). The
    // regression needs earlier roots, so a run judged at one root is run again (at
    // most three runs; each is still checked below in full when it is the one kept).
    let mut attempt = 0;
    let out = loop {
        let out = tmp.path().join(format!("demo-{attempt}"));
        let run = audita(&[
            "demo",
            "--quiet",
            "--cells",
            "64",
            "--epoch-messages",
            "256",
            // Paced, so the first slices are cut while later epochs are sealed.
            "--publish-rate",
            "3000",
            "--out",
            s(&out),
        ]);
        assert_eq!(run.status.code(), Some(0), "{}", err(&run));
        let roots: std::collections::BTreeSet<String> = std::fs::read_dir(out.join("verdicts"))
            .unwrap()
            .filter_map(|e| {
                let p = e.ok()?.path();
                (p.extension()? == "json").then_some(p)
            })
            .map(|p| {
                let v: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
                v["record_root"].as_str().unwrap_or_default().to_string()
            })
            .collect();
        if roots.len() > 1 || attempt == 2 {
            break out;
        }
        eprintln!("run {attempt}: every verdict judged at one root; running again");
        attempt += 1;
    };
    let mut checked = 0;
    let mut roots = std::collections::BTreeSet::new();
    for e in std::fs::read_dir(out.join("adverse")).unwrap() {
        let adverse = e.unwrap().path();
        let incident = adverse.file_stem().unwrap().to_string_lossy().into_owned();
        let published = std::fs::read(out.join("verdicts").join(format!("{incident}.json")))
            .unwrap_or_else(|e| panic!("{incident}: no verdict file: {e}"));
        let v: Value = serde_json::from_slice(&published).unwrap();
        let root = v["record_root"].as_str().unwrap();
        roots.insert(root.to_string());
        let again = audita(&[
            "verdict",
            s(&out.join("record")),
            "--duties",
            s(&out.join("duties.json")),
            "--adverse",
            s(&adverse),
            "--at-root",
            root,
        ]);
        assert!(
            again.status.code() == Some(0) || again.status.code() == Some(1),
            "{incident}: {}",
            err(&again)
        );
        assert_eq!(
            String::from_utf8_lossy(&again.stdout),
            String::from_utf8_lossy(&published),
            "{incident}"
        );
        checked += 1;
    }
    assert_eq!(
        checked, 64,
        "every cell of the demo mix declares an incident"
    );
    assert!(
        roots.len() > 1,
        "verdicts judged at several roots: {roots:?}"
    );
}
