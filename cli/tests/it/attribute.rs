//! `audita attribute` end to end: valid models print the SPEC §7 JSON, malformed ones
//! exit 2 with one line naming the problem and its location.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn run(model: &str, extra: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_audita"))
        .arg("attribute")
        .args(extra)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(model.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn fails_with(model: &str, needle: &str) {
    let out = run(model, &[]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{model}: {err}");
    assert!(out.stdout.is_empty());
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains(needle), "{err:?} should contain {needle:?}");
    assert!(!err.contains("panicked"));
}

const SPEC: &str = r#"{"variables": {
   "m_a1": {"principal": "planner-1", "value": true},
   "m_a2": {"principal": "planner-2", "value": true},
   "m_d":  {"principal": "dispatcher", "eq": "m_a1 | m_a2"},
   "quake": {"principal": null, "value": false, "candidate": false}},
 "outcome": "m_d & !quake"}"#;

#[test]
fn prints_causes_and_responsibility() {
    let out = run(SPEC, &[]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text.trim_end(),
        r#"{"outcome":true,"causes":[{"vars":["m_d"],"witness":[],"grade":1.0},{"vars":["m_a1","m_a2"],"witness":[],"grade":0.5}],"responsibility":{"dispatcher":1.0,"planner-1":0.5,"planner-2":0.5}}"#
    );
    // Forcing the general path gives the same bytes.
    assert_eq!(run(SPEC, &["--general"]).stdout, text.as_bytes());
}

#[test]
fn reads_a_file_argument() {
    let dir = std::env::temp_dir().join(format!("audita-attr-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("m.json");
    std::fs::write(&path, SPEC).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_audita"))
        .arg("attribute")
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["responsibility"]["planner-1"], 0.5);
    std::fs::remove_dir_all(&dir).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_audita"))
        .args(["attribute", "/nonexistent/m.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/m.json: cannot read"));
}

#[test]
fn malformed_inputs_exit_2_with_one_line() {
    fails_with(r#"{"variables": {"a": {"value": true}"#, "line 1 column");
    fails_with("not json", "<stdin>: invalid model JSON at line 1 column");
    fails_with(
        r#"{"variables": {"a": {"value": true}}, "outcome": "a & b"}"#,
        "outcome: unknown identifier `b`",
    );
    fails_with(
        r#"{"variables": {"a": {"eq": "b"}, "b": {"eq": "a"}}, "outcome": "a"}"#,
        "cycle in equations",
    );
    fails_with(
        r#"{"variables": {"a": {"value": true}}}"#,
        "missing field `outcome`",
    );
    fails_with(
        r#"{"variables": {"a": {"principal": "p"}}, "outcome": "a"}"#,
        "variables.a: missing field `value` or `eq`",
    );
    fails_with(
        r#"{"variables": {"a": {"value": true, "eq": "true"}}, "outcome": "a"}"#,
        "variables.a: has both `value` and `eq`",
    );
    fails_with(
        r#"{"variables": {"a": {"value": true, "colour": 1}}, "outcome": "a"}"#,
        "variables.a: unknown field `colour`",
    );
    fails_with(
        r#"{"variables": {"a": {"value": "yes"}}, "outcome": "a"}"#,
        "variables.a: invalid type",
    );
    fails_with(
        r#"{"variables": {"a": {"value": true}}, "outcome": "a", "extra": 1}"#,
        "unknown field `extra`",
    );
    fails_with(
        r#"{"variables": {"a": {"value": true}}, "outcome": "a & (a | "}"#,
        "outcome: unexpected end of expression at byte 9",
    );
    fails_with(
        r#"{"variables": {"a": {"value": true}, "b": {"eq": "a ^ a"}}, "outcome": "b"}"#,
        "variables.b.eq: unexpected character '^' at byte 2",
    );
    fails_with(
        r#"{"variables": {"1a": {"value": true}}, "outcome": "true"}"#,
        "variables.1a: invalid variable name",
    );
    fails_with(
        r#"{"variables": {"a": {"value": true}, "a": {"value": false}}, "outcome": "a"}"#,
        "declared twice",
    );
    fails_with(
        &format!(
            r#"{{"variables": {{"a": {{"value": true}}}}, "outcome": "{}a{}"}}"#,
            "(".repeat(5000),
            ")".repeat(5000)
        ),
        "nested deeper",
    );
}

/// Rock throwing (Halpern): Suzy's throw preempts Billy's.
const ROCK: &str = r#"{"variables": {
  "st": {"principal": "suzy", "value": true},
  "bt": {"principal": "billy", "value": true},
  "sh": {"principal": null, "eq": "st", "candidate": false},
  "bh": {"principal": null, "eq": "bt & !sh", "candidate": false}},
 "outcome": "sh | bh"}"#;

#[test]
fn check_answers_hp2sat_s_query() {
    let out = run(ROCK, &["--check", "st"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["is_cause"], true);
    assert_eq!(v["witness"], serde_json::json!(["bh"]));
    assert_eq!(v["grade"], 0.5);
    // Billy's throw is not a cause (AC2 fails); both throws together are not minimal.
    let v: serde_json::Value =
        serde_json::from_slice(&run(ROCK, &["--check", "bt"]).stdout).unwrap();
    assert_eq!(
        (v["ac1"].clone(), v["ac2"].clone(), v["is_cause"].clone()),
        (true.into(), false.into(), false.into())
    );
    let v: serde_json::Value =
        serde_json::from_slice(&run(ROCK, &["--check", "st,bt"]).stdout).unwrap();
    assert_eq!(v["ac3"], false);
    assert_eq!(v["smaller_cause"], serde_json::json!(["st"]));
    // A given witness is checked too.
    let v: serde_json::Value =
        serde_json::from_slice(&run(ROCK, &["--check", "st", "--witness", "bh"]).stdout).unwrap();
    assert_eq!(v["given_witness_valid"], true);
    let v: serde_json::Value =
        serde_json::from_slice(&run(ROCK, &["--check", "st", "--witness", ""]).stdout).unwrap();
    assert_eq!(v["given_witness_valid"], false);
    // A stated value the variable does not have fails AC1.
    let v: serde_json::Value =
        serde_json::from_slice(&run(ROCK, &["--check", "st=false"]).stdout).unwrap();
    assert_eq!(v["ac1"], false);
    let out = run(ROCK, &["--check", "nobody"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown variable `nobody`"));
}

/// A chain of `n` relays: `n` minimal causes, one per link.
fn chain(n: usize) -> String {
    let mut vars = vec![r#""m0": {"principal": "planner", "value": true}"#.to_string()];
    for i in 1..n {
        vars.push(format!(
            r#""m{i}": {{"principal": "relay-{}", "eq": "m{}"}}"#,
            i % 3,
            i - 1
        ));
    }
    format!(
        r#"{{"variables": {{{}}}, "outcome": "m{}"}}"#,
        vars.join(", "),
        n - 1
    )
}

#[test]
fn too_many_causes_shorten_the_list_not_rho() {
    let out = run(&chain(50), &["--max-causes", "5"]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["causes_complete"], false);
    assert_eq!(v["causes"].as_array().unwrap().len(), 5);
    for p in ["planner", "relay-0", "relay-1", "relay-2"] {
        assert_eq!(v["responsibility"][p], 1.0, "{p}");
    }
    // The full list has no marker.
    let v: serde_json::Value = serde_json::from_slice(&run(&chain(50), &[]).stdout).unwrap();
    assert_eq!(v["causes"].as_array().unwrap().len(), 50);
    assert!(v.get("causes_complete").is_none());
}

#[test]
fn every_bound_names_its_flag() {
    // A 64-variable non-monotone model through the forced general search.
    let mut vars = Vec::new();
    for i in 0..32 {
        vars.push(format!(
            r#""m{i}": {{"principal": "p{}", "value": {}}}"#,
            i % 4,
            i % 3 != 0
        ));
    }
    for i in 0..32 {
        let a = format!("m{}", (i * 7) % 32);
        let b = if i == 0 {
            "m1".to_string()
        } else {
            format!("r{}", i - 1)
        };
        let c = format!("m{}", (i * 5 + 3) % 32);
        vars.push(format!(
            r#""r{i}": {{"principal": "p{}", "eq": "({a} & !{b}) | ({c} & {b})"}}"#,
            i % 4
        ));
    }
    let model = format!(
        r#"{{"variables": {{{}}}, "outcome": "(!r31 & r30) | (r29 & !r28 & r20)"}}"#,
        vars.join(", ")
    );
    for (flags, needle) in [
        (
            &["--general", "--max-evaluations", "100"][..],
            "--max-evaluations",
        ),
        (
            &["--optimise", "--max-solver-steps", "0"][..],
            "--max-solver-steps",
        ),
        (
            &["--optimise", "--max-memory-mb", "0"][..],
            "--max-memory-mb",
        ),
        (
            &[
                "--general",
                "--max-evaluations",
                "100000000000",
                "--timeout-ms",
                "0",
            ][..],
            "--timeout-ms",
        ),
    ] {
        let out = run(&model, flags);
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{flags:?}: {err}");
        assert!(out.stdout.is_empty());
    }
    // With the defaults the same model is answered.
    let out = run(&model, &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
