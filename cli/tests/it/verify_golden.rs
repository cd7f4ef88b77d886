//! Golden-file tests of `audita verify` output: exit code, stderr and the JSON
//! summary for the sample record and for named tampering cases. Refresh the files
//! in `cli/tests/golden/` after an intended change with
//! `UPDATE_GOLDEN=1 cargo test -p audita --test verify_golden`.

use std::fs;
use std::path::Path;
use std::process::Command;

use audita_record::{decode_segment, encode_segment};

fn check(name: &str, dir: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_audita"))
        .args(["verify", "--brief", dir.to_str().unwrap()])
        .output()
        .unwrap();
    let dir_text = dir.to_str().unwrap();
    let actual = format!(
        "exit: {}\nstderr: {}\nstdout:\n{}",
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).replace(dir_text, "<DIR>"),
        String::from_utf8_lossy(&out.stdout).replace(dir_text, "<DIR>"),
    );
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{name}.txt"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        fs::write(&path, &actual).unwrap();
        return;
    }
    let expected = fs::read_to_string(&path).unwrap_or_default();
    assert!(
        expected == actual,
        "{name}: output differs from {} (UPDATE_GOLDEN=1 to refresh)\n{actual}",
        path.display()
    );
}

fn sample(dir: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_audita"))
        .args([
            "sample-record",
            dir.to_str().unwrap(),
            "--seed",
            "4",
            "--messages",
            "16",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
}

#[test]
fn golden_clean_sample() {
    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    check("clean_sample", dir.path());
}

#[test]
fn golden_removed_dispatcher_command() {
    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    let seg = dir.path().join("segments/envelopes-000000.seg");
    let frames = decode_segment(b'E', &fs::read(&seg).unwrap(), &seg).unwrap();
    // Frame 3 is the dispatcher's move_to of the first episode.
    let kept: Vec<&[u8]> = frames
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 3)
        .map(|(_, f)| f.as_slice())
        .collect();
    fs::write(&seg, encode_segment(b'E', &kept)).unwrap();
    check("removed_dispatcher_command", dir.path());
}

#[test]
fn golden_flipped_receipt_byte() {
    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    let seg = dir.path().join("segments/receipts-000001.seg");
    let mut bytes = fs::read(&seg).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    fs::write(&seg, bytes).unwrap();
    check("flipped_receipt_byte", dir.path());
}

#[test]
fn golden_unreadable() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("FORMAT"), "something else\n").unwrap();
    check("unreadable", dir.path());
}
