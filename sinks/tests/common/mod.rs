//! Verdict topic records for the sink tests, shaped as the engine workers write them.

#![allow(dead_code)]

use audita_topics::VerdictRecord;
use serde_json::{json, Value};

pub const ROOT: &str = "4046000000000000000000000000000000000000000000000000000000000001";

pub fn id(author: &str, n: u8) -> String {
    format!("{author}:{}", format!("{n:02x}").repeat(32))
}

/// A graded verdict record of `incident` at `t_star_ms` with one finding per
/// `(principal, status, rho_lo, rho_hi)`.
pub fn verdict(
    incident: &str,
    t_star_ms: u64,
    findings: &[(&str, &str, f64, f64)],
) -> VerdictRecord {
    let mut principals = serde_json::Map::new();
    for (i, (p, status, lo, hi)) in findings.iter().enumerate() {
        let culpable = *status == "culpable";
        principals.insert(
            p.to_string(),
            json!({
                "duties": if culpable { vec![format!("env-{p}")] } else { vec![] },
                "breach": {"specification": culpable, "reasonable_agent": culpable,
                           "violations": if culpable { vec![json!({"duty": format!("env-{p}"), "standards": ["specification", "reasonable_agent"], "evidence": [id(p, i as u8)], "detail": "set_speed 2000 mm/s above 1000"})] } else { vec![] }},
                "rho_lo": lo, "rho_hi": hi, "culpable": culpable, "status": status,
                "claim": {"level": "causal", "offending_edges": [], "boundary": []},
                "flags": if *status == "exonerated" { vec!["exonerated"] } else { vec![] },
                "evidence": [id(p, i as u8)], "items": [], "notes": []
            }),
        );
    }
    let anchors: Vec<String> = if findings.is_empty() {
        vec![]
    } else {
        vec![id("ctl", 0xaa)]
    };
    let v: Value = json!({
        "schema": "audita.verdict/v1", "incident": incident,
        "outcome": if findings.is_empty() { "batch_parameter_out_of_range" } else { "separation_below_0.5m" },
        "t_star_ms": t_star_ms, "severity_j": if findings.is_empty() { 0.0 } else { 450.0 },
        "standard": "reasonable_agent", "record_root": ROOT, "status": "graded",
        "claim": {"level": "causal", "offending_edges": [], "boundary": []},
        "anchors": anchors,
        "slice": {"messages": anchors.clone(), "edges": [], "absences": []},
        "variables": {}, "completions": {"items": [], "hypotheses": [], "readings": 1, "admissible": 1},
        "equivocations": 0, "replay": [], "principals": principals, "notes": []
    });
    let mut r: VerdictRecord = serde_json::from_value(json!({
        "schema": "audita.verdict-record/v1", "incident": incident, "verdict": v, "rows": [],
        "declaration": {"incident": incident, "outcome": "separation_below_0.5m", "t_star_ms": t_star_ms}
    }))
    .unwrap();
    r.rows = Vec::new();
    r
}

/// An abstention record (with its declaration when `t_star_ms` is given).
pub fn abstention(incident: &str, t_star_ms: Option<u64>) -> VerdictRecord {
    VerdictRecord::abstention(
        incident,
        "adverse declaration: delta must lie in (0, 1]",
        t_star_ms.map(|t| json!({"incident": incident, "outcome": "separation_below_0.5m", "t_star_ms": t, "delta": 1.5})),
    )
}
