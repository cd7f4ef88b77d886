//! Runs the `audita` binary: `sample-record` then `verify`, on the intact record,
//! after single-byte flips, after removing messages, and on garbage.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use audita_record::{decode_segment, encode_segment};

fn audita(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_audita"))
        .args(args)
        .output()
        .expect("run audita")
}

fn sample(dir: &Path, messages: &str) {
    let out = audita(&[
        "sample-record",
        dir.to_str().unwrap(),
        "--seed",
        "4",
        "--messages",
        messages,
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn verify(dir: &Path) -> (i32, serde_json::Value, String) {
    let out = audita(&["verify", dir.to_str().unwrap()]);
    let json = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (
        out.status.code().unwrap_or(-1),
        json,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn sample_record_verifies_clean() {
    let dir = tempfile::tempdir().unwrap();
    sample(dir.path(), "40");
    let (code, json, _) = verify(dir.path());
    assert_eq!(code, 0, "{json:#}");
    assert_eq!(json["clean"], true);
    assert!(json["counts"]["certified"].as_u64().unwrap() >= 40);
    assert!(json["counts"]["epochs"].as_u64().unwrap() >= 2);
    assert_eq!(json["counts"]["shredded_payloads"], 1);
    for cp in json["checkpoints"].as_array().unwrap() {
        assert_eq!(cp["cosigned_by"].as_array().unwrap().len(), 3);
    }
}

/// A dense sample through the binary (every byte is covered in process by
/// `sealer/tests/every_byte.rs`): every 5th byte of every file, plus the first and last.
#[test]
fn byte_flips_never_verify_clean() {
    let dir = tempfile::tempdir().unwrap();
    sample(dir.path(), "16");
    for path in files(dir.path()) {
        let original = fs::read(&path).unwrap();
        let mut positions: Vec<usize> = (0..original.len()).step_by(5).collect();
        positions.push(original.len().saturating_sub(1));
        for i in positions.into_iter().filter(|&i| i < original.len()) {
            let mut bytes = original.clone();
            bytes[i] ^= 0x04;
            fs::write(&path, &bytes).unwrap();
            let (code, json, stderr) = verify(dir.path());
            assert!(
                code == 1 || code == 2,
                "flip at {i} of {}: exit {code}",
                path.display()
            );
            assert_ne!(json["clean"], true);
            assert!(!stderr.trim().is_empty(), "the failure is named");
        }
        fs::write(&path, &original).unwrap();
    }
    assert_eq!(verify(dir.path()).0, 0);
}

#[test]
fn removing_any_message_is_reported_missing_with_its_author() {
    let dir = tempfile::tempdir().unwrap();
    sample(dir.path(), "16");
    let segs: Vec<PathBuf> = files(dir.path())
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("envelopes-"))
        .collect();
    for seg in segs {
        let original = fs::read(&seg).unwrap();
        let frames = decode_segment(b'E', &original, &seg).unwrap();
        for i in 0..frames.len() {
            let env = audita_evidence::SignedEnvelope::decode(frames[i].clone()).unwrap();
            let kept: Vec<&[u8]> = frames
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, f)| f.as_slice())
                .collect();
            fs::write(&seg, encode_segment(b'E', &kept)).unwrap();
            let (code, json, stderr) = verify(dir.path());
            assert_eq!(code, 1, "removal of frame {i} of {}", seg.display());
            let digest: String = env.id().digest.iter().map(|b| format!("{b:02x}")).collect();
            let missing = json["missing"].as_array().unwrap();
            let entry = missing
                .iter()
                .find(|m| m["id"] == digest.as_str())
                .expect("removed id reported missing");
            assert_eq!(entry["author"], env.id().author.as_str());
            assert!(stderr.contains("missing"));
        }
        fs::write(&seg, &original).unwrap();
    }
}

#[test]
fn unreadable_input_exits_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases: Vec<PathBuf> = {
        let garbage = dir.path().join("garbage");
        fs::create_dir_all(&garbage).unwrap();
        fs::write(garbage.join("FORMAT"), b"\x00\xffnot a record").unwrap();
        let file = dir.path().join("plain-file");
        fs::write(&file, b"hello").unwrap();
        let bad_seg = dir.path().join("bad-seg");
        sample(&bad_seg, "16");
        fs::write(
            bad_seg.join("segments/envelopes-000000.seg"),
            b"garbage garbage garbage",
        )
        .unwrap();
        vec![dir.path().join("does-not-exist"), garbage, file, bad_seg]
    };
    for case in cases {
        let out = audita(&["verify", case.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{}", case.display());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn a_held_checkpoint_catches_a_record_cut_short() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("rec");
    sample(&dir, "80");
    let mut epochs: Vec<PathBuf> = files(&dir.join("epochs"));
    let mut notes: Vec<PathBuf> = files(&dir.join("checkpoints"));
    assert!(epochs.len() >= 2);
    let held = tmp.path().join("held.txt");
    fs::copy(notes.last().unwrap(), &held).unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["verify", dir.to_str().unwrap(), "--brief"];
        args.extend_from_slice(extra);
        audita(&args)
    };
    let ok = run(&["--checkpoint", held.to_str().unwrap()]);
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    fs::remove_file(epochs.pop().unwrap()).unwrap();
    fs::remove_file(notes.pop().unwrap()).unwrap();
    let cut = run(&["--checkpoint", held.to_str().unwrap()]);
    assert_eq!(cut.status.code(), Some(1));
    let err = String::from_utf8_lossy(&cut.stderr);
    assert!(err.contains("record truncated"), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    let json: serde_json::Value = serde_json::from_slice(&cut.stdout).unwrap();
    assert_eq!(json["held_checkpoints"].as_array().unwrap().len(), 1);
    let absent = run(&["--checkpoint", "/nonexistent/held.txt"]);
    assert_eq!(absent.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&absent.stderr).contains("/nonexistent/held.txt"));
}
