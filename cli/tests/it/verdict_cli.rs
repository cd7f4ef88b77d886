//! Runs `audita verdict` on a facility record written to disk: the verdict JSON, the
//! row view, the blame-shift certificate, and malformed inputs.

use std::path::Path;
use std::process::{Command, Output};

use audita_facility::record::sign_record;
use audita_facility::scenario::{generate, Family};
use audita_facility::world::Mode;

fn audita(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_audita"))
        .args(args)
        .output()
        .expect("run audita")
}

fn id(m: &audita_evidence::MessageId) -> String {
    format!("{}:{}", m.author, hex_of(&m.digest))
}

fn hex_of(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

fn setup(dir: &Path) -> (String, String, String) {
    let sc = generate(Family::Trivial, 3);
    let sr = sign_record(&sc).expect("record");
    audita_record::write_record(&dir.join("rec"), &sr.record, &sr.keys).expect("write");
    let y = sc.spec.run_actual(Mode::Pinned).adverse.expect("adverse");
    let anchor = id(sr.command_ids.last().expect("commands"));
    let duties = serde_json::json!({"standard": "reasonable_agent", "principals": {
        "planner-1": {"duties": [{"kind": "safety_envelope", "id": "env", "target": "agv-1",
                                   "max_mm_per_s": 1000}]}}});
    let adverse = serde_json::json!({"incident": "inc-1", "outcome": "separation_below_0.5m",
        "t_star_ms": u64::from(y.tick()) * 100 + 99, "anchors": [anchor],
        "severity": {"mass_kg": 400.0, "speed_m_per_s": 1.0}});
    let d = dir.join("duties.json");
    let a = dir.join("adverse.json");
    std::fs::write(&d, duties.to_string()).unwrap();
    std::fs::write(&a, adverse.to_string()).unwrap();
    (
        dir.join("rec").to_str().unwrap().to_string(),
        d.to_str().unwrap().to_string(),
        a.to_str().unwrap().to_string(),
    )
}

#[test]
fn verdict_prints_the_graded_verdict_and_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let (rec, d, a) = setup(tmp.path());
    let out = audita(&["verdict", &rec, "--duties", &d, "--adverse", &a]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["schema"], "audita.verdict/v1");
    assert_eq!(v["standard"], "reasonable_agent");
    assert_eq!(v["severity_j"], 200.0);
    assert_eq!(v["principals"]["planner-1"]["culpable"], true);
    assert_eq!(v["principals"]["planner-1"]["rho_lo"], 1.0);
    assert_eq!(v["principals"]["planner-1"]["status"], "culpable");
    assert_eq!(v["status"], "graded");
    assert!(v["replay"].as_array().is_some_and(|r| !r.is_empty()));
    let out = audita(&["verdict", &rec, "--duties", &d, "--adverse", &a, "--rows"]);
    assert_eq!(out.status.code(), Some(0));
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("row"))
        .collect();
    assert!(rows
        .iter()
        .any(|r| r["principal"] == "planner-1" && r["culpable"] == true && r["claim"] == "causal"));
    let out = audita(&[
        "verdict",
        &rec,
        "--duties",
        &d,
        "--adverse",
        &a,
        "--frame",
        "planner-1",
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "null",
        "no deviations declared"
    );
}

#[test]
fn malformed_inputs_exit_2_with_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let (rec, d, _) = setup(tmp.path());
    let bad = tmp.path().join("bad.json");
    std::fs::write(
        &bad,
        r#"{"incident": "x", "outcome": "y", "t_star_ms": 1, "nope": 1}"#,
    )
    .unwrap();
    let out = audita(&[
        "verdict",
        &rec,
        "--duties",
        &d,
        "--adverse",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
    let out = audita(&[
        "verdict",
        "/nonexistent/dir",
        "--duties",
        &d,
        "--adverse",
        &d,
    ]);
    assert_eq!(out.status.code(), Some(2));
}

/// `--predicates`: the monitor's declaration (derived from the record) is accepted and
/// the verdict names the predicate, the declarer and each fact's evidence; the same
/// declaration with `t*` moved, its anchor marked unrealised or dropped, or without a
/// declarer is refused — exit 2, one line, no verdict.
#[test]
fn verdict_with_predicates_refuses_a_declaration_the_record_does_not_support() {
    use audita_facility::record::{predicates_json, registry_json};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let sc = generate(Family::Redundancy, 2);
    let sr = sign_record(&sc).expect("record");
    let rec = dir.join("rec");
    audita_record::write_record(&rec, &sr.record, &sr.keys).expect("write");
    let part = audita_evidence::verify_record(&sr.record, &sr.keys);
    let file = audita_monitor::Predicates::from_json(&predicates_json(&sc)).unwrap();
    let decl = audita_monitor::derive(&part, &file).declarations.remove(0);
    let write = |name: &str, text: String| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let d = write("duties.json", registry_json(&sc, "reasonable_agent"));
    let p = write("predicates.json", predicates_json(&sc));
    let rec = rec.to_str().unwrap().to_string();
    let run = |decl: &audita_verdict::AdverseDecl| {
        let a = write("adverse.json", serde_json::to_string(decl).unwrap());
        audita(&[
            "verdict",
            &rec,
            "--duties",
            &d,
            "--adverse",
            &a,
            "--predicates",
            &p,
        ])
    };
    let out = run(&decl);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["declaration"]["predicate"], "separation_below_0.5m");
    assert_eq!(v["declaration"]["declarer"]["kind"], "monitor");
    let facts = v["declaration"]["facts"].as_array().expect("facts");
    assert!(facts
        .iter()
        .any(|f| f["fact"] == "anchor" && f["evidence"].as_array().is_some_and(|e| e.len() >= 2)));
    assert_eq!(v["principals"]["planner-1"]["rho_lo"], 0.5);
    let anchor = decl.anchors[0].clone();
    let mut moved = decl.clone();
    moved.facts.clear();
    moved.t_star_ms += 100;
    let mut unrealised = decl.clone();
    unrealised.facts.clear();
    unrealised.unrealised.push(anchor.clone());
    let mut dropped = decl.clone();
    dropped.facts.clear();
    dropped.anchors.clear();
    let mut anonymous = decl.clone();
    anonymous.declarer = None;
    for (bad, want) in [
        (&moved, "is not when"),
        (&unrealised, "the record shows its effect realised"),
        (&dropped, "dropped"),
        (&anonymous, "no declarer"),
    ] {
        let out = run(bad);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{want}: {err}");
        assert!(out.stdout.is_empty(), "{want}: a verdict was printed");
        assert!(
            err.contains("declaration refused") && err.contains(want),
            "{err}"
        );
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
}
