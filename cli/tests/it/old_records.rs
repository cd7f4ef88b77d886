//! Records written by earlier versions of audita (`record/fixtures/`, the rule in
//! `record/FORMAT.md`): today's `audita verify` and `audita verdict` read each one and
//! say what its own version said, and reading it changes none of its bytes.
//!
//! Each fixture holds the record its writer's `audita demo` sealed, the demo's
//! `duties.json` (and `predicates.json` when that version had one), every incident's
//! adverse declaration and the verdict that version's pipeline published
//! (`verdicts/<incident>.json`, canonical JSON), and `verify.json`, that version's
//! `audita verify` summary of the record. What "the same" means is each fixture's
//! README; in short:
//! - verify: clean then, clean now; every count the old summary has is equal; the
//!   same certified messages (id, author, epoch, leaf, kind, timestamp).
//! - verdict: judged at the verdict's own `record_root` (`--at-root`), the output is
//!   the published verdict byte for byte. A change that breaks this changes what an
//!   old record is judged to say: it needs a new schema or format version under
//!   `record/FORMAT.md`'s rule, never a regenerated fixture.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn fixtures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../record/fixtures");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("record/FORMAT").is_file())
        .collect();
    dirs.sort();
    dirs
}

/// Every file under `dir` (by its path below `dir`) with its bytes (a fixture is a few
/// hundred KB).
fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let bytes = std::fs::read(&p).unwrap();
                out.insert(p.strip_prefix(dir).unwrap().to_path_buf(), bytes);
            }
        }
    }
    out
}

/// A copy of the fixture to run in: a reader that wrote would otherwise change the
/// committed files.
fn copy(fixture: &Path, to: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let files = tree(fixture);
    for (rel, bytes) in &files {
        let p = to.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }
    files
}

fn audita(dir: &Path, args: &[&str]) -> (i32, Vec<u8>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_audita"))
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn check_verify(fixture: &Path) {
    let name = fixture.file_name().unwrap().to_string_lossy();
    let old: Value =
        serde_json::from_slice(&std::fs::read(fixture.join("verify.json")).unwrap()).unwrap();
    let (code, stdout, stderr) = audita(fixture, &["verify", "record"]);
    assert_eq!(code, 0, "{name}: audita verify exited {code}: {stderr}");
    let new: Value = serde_json::from_slice(&stdout).unwrap();
    assert_eq!(
        old["clean"], true,
        "{name}: the fixture's own verify was not clean"
    );
    assert_eq!(new["clean"], true, "{name}: {}", new["problem_codes"]);
    let (old_counts, new_counts) = (old["counts"].as_object().unwrap(), &new["counts"]);
    assert!(!old_counts.is_empty());
    for (k, n) in old_counts {
        assert_eq!(&new_counts[k], n, "{name}: counts.{k}");
    }
    let certified = |v: &Value| -> BTreeMap<String, Vec<Value>> {
        v["certified"]
            .as_array()
            .unwrap_or_else(|| panic!("{name}: no certified list"))
            .iter()
            .map(|c| {
                let keys = ["author", "epoch", "leaf", "kind", "timestamp"];
                (
                    c["id"].as_str().unwrap().to_string(),
                    keys.iter().map(|k| c[*k].clone()).collect(),
                )
            })
            .collect()
    };
    let (old_c, new_c) = (certified(&old), certified(&new));
    assert!(!old_c.is_empty());
    assert_eq!(old_c, new_c, "{name}: the certified messages differ");
}

fn check_verdicts(fixture: &Path) -> usize {
    let name = fixture.file_name().unwrap().to_string_lossy();
    let predicates = fixture.join("predicates.json").is_file();
    // The exit code that version's `audita verdict` gave each re-check: 1 where the
    // record as of an earlier root is not clean as a whole (messages receipted or
    // cited only by later epochs), though the verdict is graded.
    let exits: BTreeMap<String, i32> = std::fs::read_to_string(fixture.join("verdict-exit.txt"))
        .unwrap()
        .lines()
        .map(|l| {
            let (file, code) = l.rsplit_once(' ').unwrap();
            (file.to_string(), code.parse().unwrap())
        })
        .collect();
    let mut n = 0;
    let mut adverse: Vec<PathBuf> = std::fs::read_dir(fixture.join("adverse"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    adverse.sort();
    for a in adverse {
        let file = a.file_name().unwrap().to_string_lossy().into_owned();
        let published = std::fs::read(fixture.join("verdicts").join(&file)).unwrap();
        let old: Value = serde_json::from_slice(&published).unwrap();
        let root = old["record_root"].as_str().unwrap().to_string();
        let adverse_arg = format!("adverse/{file}");
        let mut args = vec![
            "verdict",
            "record",
            "--duties",
            "duties.json",
            "--adverse",
            &adverse_arg,
            "--at-root",
            &root,
        ];
        if predicates {
            args.extend(["--predicates", "predicates.json"]);
        }
        let (code, stdout, stderr) = audita(fixture, &args);
        let expected_code = exits[&file];
        assert_eq!(code, expected_code, "{name} {file}: exit {code}: {stderr}");
        assert!(
            stdout == published,
            "{name} {file}: the verdict differs from the published one\nnow: {}",
            String::from_utf8_lossy(&stdout)
        );
        n += 1;
    }
    assert_eq!(
        n,
        exits.len(),
        "{name}: verdict-exit.txt names other incidents"
    );
    n
}

#[test]
fn every_earlier_records_verify_and_verdicts_are_what_its_own_version_said() {
    let all = fixtures();
    assert!(
        all.len() >= 2,
        "record/fixtures holds {} fixtures (at least the v1-epoch1 record and today's)",
        all.len()
    );
    for fixture in &all {
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join(fixture.file_name().unwrap());
        let before = copy(fixture, &f);
        check_verify(&f);
        let verdicts = check_verdicts(&f);
        assert!(
            verdicts >= 2,
            "{}: only {verdicts} verdicts to re-check",
            fixture.display()
        );
        let after = tree(&f);
        let changed: Vec<_> = before
            .keys()
            .chain(after.keys())
            .filter(|k| before.get(*k) != after.get(*k))
            .collect();
        assert!(
            changed.is_empty(),
            "{}: reading it changed {changed:?}",
            fixture.display()
        );
    }
}
