//! Every reader of untrusted input under a memory cap (`ulimit -v` around the built
//! binary): hostile files end with a one-line error naming the limit and its flag
//! (exit 2) or, when the record is readable but damaged, a bounded JSON summary
//! (exit 1) — never an abort, never a runaway allocation, and quickly.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

/// Address-space cap for every run: far below what the unbounded readers used
/// (3.6 GB for the zero-frame segment), far above what a bounded read needs.
const CAP_KB: u64 = 1_500_000;

/// Runs `audita ARGS` under the memory cap, with `stdin` from a file if given.
fn capped(args: &[&str], stdin: Option<&str>) -> (Output, Duration) {
    let mut script = format!("ulimit -v {CAP_KB}; exec \"$0\"");
    for i in 0..args.len() {
        script.push_str(&format!(" \"${}\"", i + 1));
    }
    if let Some(f) = stdin {
        script.push_str(&format!(" < '{f}'"));
    }
    let started = Instant::now();
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_audita"))
        .args(args)
        .output()
        .expect("run audita under bash");
    (out, started.elapsed())
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Exit 2 with exactly one line on stderr containing every piece of `want`,
/// within a few seconds.
fn assert_refused(run: (Output, Duration), want: &[&str]) {
    let (out, took) = run;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    for w in want {
        assert!(err.contains(w), "{w:?} not in {err}");
    }
    assert!(out.stdout.is_empty(), "no partial output");
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

fn sample(dir: &Path) -> PathBuf {
    let rec = dir.join("rec");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_audita"))
        .args(["sample-record", rec.to_str().unwrap(), "--messages", "16"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    rec
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The segment of the issue: 4 MB of zero-length frames used 3.6 GB and printed
/// 239 MB of JSON. Now the run of frames that cannot hold any item is one
/// undecodable item.
#[test]
fn zero_length_frame_segment_is_one_item_in_bounded_memory_and_output() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = sample(tmp.path());
    let mut seg = b"AUDSEG\x01E".to_vec();
    seg.resize(8 + 4 * ((4 << 20) / 4 - 2), 0);
    std::fs::write(rec.join("segments/envelopes-000099.seg"), &seg).unwrap();
    let (out, took) = capped(&["verify", s(&rec)], None);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        out.stdout.len() < 200_000,
        "{} bytes of JSON",
        out.stdout.len()
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["counts"]["suspect"], 1, "one item for the whole run");
    assert_eq!(v["problem_codes"]["suspect"]["undecodable"], 1);
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

/// The other case of the issue: 20 MB of envelope-sized garbage frames aborted with
/// "memory allocation failed". Now it is a summary of bounded size with every
/// problem counted.
#[test]
fn twenty_mb_of_envelope_frames_are_counted_and_capped_not_an_abort() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = sample(tmp.path());
    let mut seg = b"AUDSEG\x01E".to_vec();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut frames = 0u64;
    while seg.len() < 20 << 20 {
        seg.extend_from_slice(&120u32.to_be_bytes());
        for _ in 0..15 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            seg.extend_from_slice(&x.to_le_bytes());
        }
        frames += 1;
    }
    std::fs::write(rec.join("segments/envelopes-000099.seg"), &seg).unwrap();
    let (out, took) = capped(&["verify", s(&rec)], None);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(stderr(&out).lines().count(), 1);
    assert!(
        out.stdout.len() < 2_000_000,
        "{} bytes of JSON",
        out.stdout.len()
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["counts"]["suspect"].as_u64(), Some(frames));
    assert_eq!(v["suspect"].as_array().unwrap().len(), 1000);
    assert_eq!(v["more"]["suspect"].as_u64(), Some(frames - 1000));
    assert!(took < Duration::from_secs(60), "took {took:?}");
    // A smaller list on request.
    let (out, _) = capped(&["verify", s(&rec), "--max-list", "3", "--brief"], None);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["suspect"].as_array().unwrap().len(), 3);
    assert!(v.get("certified").is_none());
}

/// `/dev/zero` in place of every kind of record file, and of every input file.
#[test]
fn dev_zero_as_any_input_is_a_one_line_limit_error() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = sample(tmp.path());
    let link = |target: &Path| {
        let saved = tmp.path().join("saved");
        std::fs::rename(target, &saved).unwrap();
        std::os::unix::fs::symlink("/dev/zero", target).unwrap();
        saved
    };
    let restore = |target: &Path, saved: PathBuf| {
        std::fs::remove_file(target).unwrap();
        std::fs::rename(saved, target).unwrap();
    };
    let limit = "too large (limit 16777216 bytes per frame or file, raise with --max-frame-bytes)";
    for file in [
        "keys/principals.txt",
        "keys/keepers.txt",
        "keys/logs.txt",
        "checkpoints/checkpoint-000000.txt",
    ] {
        let path = rec.join(file);
        let saved = link(&path);
        assert_refused(capped(&["verify", s(&rec)], None), &[file, limit]);
        restore(&path, saved);
    }
    let ct = std::fs::read_dir(rec.join("payloads"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "ct"))
        .unwrap();
    let saved = link(&ct);
    assert_refused(capped(&["verify", s(&rec)], None), &[limit]);
    restore(&ct, saved);
    // A segment of zeros has no magic: not a record.
    let seg = rec.join("segments/envelopes-000000.seg");
    let saved = link(&seg);
    assert_refused(capped(&["verify", s(&rec)], None), &["bad segment magic"]);
    restore(&seg, saved);
    assert_eq!(capped(&["verify", s(&rec)], None).0.status.code(), Some(0));

    let input = "too large (limit 16777216 bytes per input file, raise with --max-input-bytes)";
    assert_refused(
        capped(&["verify", s(&rec), "--checkpoint", "/dev/zero"], None),
        &["/dev/zero", input],
    );
    assert_refused(
        capped(&["verify", s(&rec), "--trust", "/dev/zero"], None),
        &[input],
    );
    let adverse = tmp.path().join("a.json");
    std::fs::write(
        &adverse,
        r#"{"incident": "i", "outcome": "o", "t_star_ms": 1}"#,
    )
    .unwrap();
    let duties = tmp.path().join("d.json");
    std::fs::write(&duties, "{}").unwrap();
    for (d, a) in [("/dev/zero", s(&adverse)), (s(&duties), "/dev/zero")] {
        assert_refused(
            capped(&["verdict", s(&rec), "--duties", d, "--adverse", a], None),
            &[input],
        );
    }
    assert_refused(capped(&["attribute", "/dev/zero"], None), &[input]);
    assert_refused(
        capped(&["attribute", "-"], Some("/dev/zero")),
        &["<stdin>", input],
    );
}

/// A FIFO that never ends, in place of a segment: the frame count limit stops it
/// after 2^20 frames (4 MiB of zeros), long before memory runs out.
#[test]
fn endless_fifo_segment_stops_at_the_frame_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = sample(tmp.path());
    let fifo = rec.join("segments/receipts-000099.seg");
    let st = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(st.success());
    // The writer: the segment magic, then zeros until the reader goes away.
    let mut writer = std::process::Command::new("bash")
        .arg("-c")
        .arg("{ printf 'AUDSEG\\001R'; cat /dev/zero; } > \"$0\" 2>/dev/null")
        .arg(&fifo)
        .spawn()
        .unwrap();
    assert_refused(
        capped(&["verify", s(&rec)], None),
        &[
            "receipts-000099.seg",
            "too large (limit 1048576 frames per segment, raise with --max-segment-frames)",
        ],
    );
    let _ = writer.kill();
    let _ = writer.wait();
}

#[test]
fn record_and_frame_limits_are_flags() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = sample(tmp.path());
    assert_refused(
        capped(&["verify", s(&rec), "--max-record-bytes", "2000"], None),
        &["bytes in all record files, raise with --max-record-bytes"],
    );
    assert_refused(
        capped(&["verify", s(&rec), "--max-frame-bytes", "100"], None),
        &["raise with --max-frame-bytes"],
    );
    assert_refused(
        capped(&["verify", s(&rec), "--max-segment-frames", "3"], None),
        &["raise with --max-segment-frames"],
    );
    // Many empty files count against the record budget too.
    for i in 0..400 {
        std::fs::File::create(rec.join(format!("checkpoints/checkpoint-9{i:05}.txt")))
            .unwrap()
            .flush()
            .unwrap();
    }
    assert_refused(
        capped(&["verify", s(&rec), "--max-record-bytes", "100000"], None),
        &["raise with --max-record-bytes"],
    );
    let (out, _) = capped(&["verify", s(&rec)], None);
    assert_eq!(out.status.code(), Some(1), "blank checkpoints are damage");
}
