//! The HTML incident report and index are self-contained and say what the verdict says.

mod common;

use audita_sinks::report::{file_name, render, render_index, Build};
use audita_sinks::tables::{rows_of, RecordOrigin};
use audita_topics::VerdictRecord;
use common::{abstention, id, verdict};
use serde_json::json;

fn build() -> Build {
    Build {
        version: "9.9.9".into(),
        generated_ms: Some(0),
    }
}

fn origin() -> RecordOrigin {
    RecordOrigin::parse("2026-03-01T22:00:00Z").unwrap()
}

fn graded() -> VerdictRecord {
    let mut r = verdict(
        "inc-<7>",
        3_600_000,
        &[
            ("planner", "culpable", 0.5, 1.0),
            ("checker", "involved_cleared", 0.5, 0.5),
        ],
    );
    let v = r.verdict.as_mut().unwrap();
    let (anchor, cmd, gone) = (id("ctl", 0xaa), id("planner", 0xbb), id("gone", 0xcc));
    v["slice"] = json!({
        "messages": [anchor, cmd],
        "edges": [{"child": anchor, "parent": cmd, "kind": "hash_match", "consumed": true},
                  {"child": cmd, "parent": gone, "kind": "window_exit", "consumed": true}],
        "absences": [{"variable": "absent.halt-1", "duty": "halt-1", "holder": "supervisor", "trigger": cmd, "in_outcome": true}]});
    v["completions"]["items"] = json!([{"id": gone, "author": "gone", "kind": "missing", "citers": [cmd], "anchor": false, "enumerated": true}]);
    v["notes"] = json!(["a note"]);
    r.messages.insert(
        cmd.clone(),
        serde_json::from_value(json!({"author": "planner", "destination": "ctl", "kind": "set_speed", "target": "agv-1",
            "params": {"mm_per_s": 2000}, "effect": "agv-1 moves at 2000 mm/s", "timestamp_ms": 3_599_000, "citations": [gone]})).unwrap(),
    );
    r.duties.insert(
        "halt-1".into(),
        serde_json::from_value(
            json!({"holder": "supervisor", "definition": {"kind": "halt_authority", "id": "halt-1",
            "target": "agv-1", "trigger_contains": "entered aisle", "deadline_ms": 500}}),
        )
        .unwrap(),
    );
    r.record = Some(
        serde_json::from_value(
            json!({"origin": "audita.local/fleet-log", "size": 443, "root": common::ROOT,
            "checkpoint": "audita.local/fleet-log\n443\nQEYA\n\n— audita.local/fleet-log abc=\n",
            "cosignatures": [{"keeper": "insurer.example/keeper", "timestamp": 3_600_100}]}),
        )
        .unwrap(),
    );
    r
}

#[test]
fn report_shows_summary_times_graph_messages_and_how_to_verify() {
    let html = render(&graded(), &origin(), 0, &build());
    assert!(html.starts_with("<!doctype html>") && !html.contains("<script"));
    assert!(
        html.contains("name=\"viewport\""),
        "responsive: viewport meta"
    );
    assert!(
        html.contains("inc-&#60;7&#62;") && !html.contains("inc-<7>"),
        "names are escaped"
    );
    assert!(html.contains("2026-03-01T23:00:00.000Z"), "wall-clock t*");
    assert!(html.contains("3600000 ms"), "record-time t*");
    assert!(
        html.contains("planner is culpable under the reasonable agent standard"),
        "summary names the culpable principal and the standard"
    );
    assert!(
        html.contains("set_speed 2000 mm/s above 1000"),
        "summary says why"
    );
    assert!(
        html.contains("checker was involved") && html.contains("cleared"),
        "and who was cleared"
    );
    assert!(
        html.contains("marker-end=\"url(#arrow)\""),
        "edges carry arrowheads"
    );
    assert!(html.contains("time (to t*)"), "the graph has a time axis");
    assert!(
        html.contains("absent: supervisor"),
        "absence variables are nodes"
    );
    assert!(html.contains("mm_per_s=2000"), "the message behind a node");
    assert!(
        html.contains(&id("planner", 0xbb)),
        "full ids in the message table"
    );
    assert!(
        html.contains("after a certified sensor report containing “entered aisle”"),
        "duties with their meaning"
    );
    assert!(
        html.contains("insurer.example/keeper"),
        "keeper co-signatures"
    );
    assert!(html.contains(common::ROOT), "record root");
    assert!(
        html.contains("audita verify RECORD_DIR --checkpoint reports/inc-_7_-"),
        "verify command"
    );
    assert!(
        html.contains("audita verdict RECORD_DIR --duties duties.json --adverse reports/"),
        "verdict command"
    );
    assert!(
        html.contains("by audita 9.9.9") && html.contains("Generated 1970-01-01T00:00:00.000Z")
    );
    assert!(html.contains("a note"));
}

#[test]
fn a_no_cause_report_says_nobody_is_responsible_and_claims_nothing() {
    let html = render(
        &verdict("cell7-no_cause-8", 70_004_599, &[]),
        &origin(),
        0,
        &build(),
    );
    assert!(
        html.contains("No principal is responsible"),
        "meaningful no-cause page"
    );
    assert!(html.contains("no causal claim is made"));
    assert!(
        !html.contains("Incident claim"),
        "no bare 'claim causal' on a no-cause page"
    );
    assert!(html.contains("b-no-cause"));
}

#[test]
fn an_abstention_report_says_why_and_accuses_nobody() {
    let html = render(&abstention("inc-x", Some(5_000)), &origin(), 0, &build());
    assert!(html.contains(
        "Audita abstained on incident inc-x: adverse declaration: delta must lie in (0, 1]"
    ));
    assert!(html.contains("never an accusation"));
    assert!(
        html.contains("2026-03-01T22:00:05.000Z"),
        "the declared t* in wall-clock time"
    );
    assert!(
        html.contains("&#34;delta&#34;: 1.5"),
        "the declaration is shown"
    );
}

#[test]
fn report_file_names_never_leave_the_reports_directory() {
    assert_eq!(file_name("cell1-redundancy-2"), "cell1-redundancy-2.html");
    for hostile in ["../../etc/passwd", "a/b", ".hidden", "index", "", "x\0y"] {
        let f = file_name(hostile);
        assert!(
            !f.contains('/') && !f.starts_with('.') && f != "index.html",
            "{hostile:?} -> {f}"
        );
        assert!(f.ends_with(".html"));
    }
    assert_ne!(
        file_name("a/b"),
        file_name("a_b"),
        "a sanitized name cannot collide with a clean one"
    );
}

#[test]
fn index_lists_every_incident_with_css_only_sorting() {
    let records = [
        graded(),
        verdict("cell7-no_cause-8", 70_004_599, &[]),
        abstention("inc-x", Some(5_000)),
    ];
    let rows: Vec<_> = records.iter().map(|r| rows_of(r, &origin(), 0).0).collect();
    let refs: Vec<_> = rows.iter().collect();
    let html = render_index(&refs, &origin(), &build());
    assert!(!html.contains("<script"));
    assert!(html.contains("3 incidents") && html.contains("1 abstained"));
    for s in ["culpable", "no cause", "abstained"] {
        assert!(html.contains(&format!(">{s}</span>")), "status {s}");
    }
    assert!(html.contains("href=\"cell7-no_cause-8.html\""));
    assert!(
        html.contains("#s-s:checked~.scroll .row:not(.head){order:var(--s)}"),
        "sort by severity"
    );
    assert!(html.contains("planner") && html.contains("2026-03-01T23:00:00.000Z"));
}

/// Issue 57: every principal of an exogenous outcome read `causal` in the findings
/// table while the summary said no causal claim is made.
#[test]
fn a_principal_no_causal_claim_concerns_is_not_called_causal() {
    let html = render(
        &verdict(
            "inc-c",
            5_000,
            &[("p1", "culpable", 0.5, 1.0), ("p2", "exonerated", 0.0, 0.0)],
        ),
        &origin(),
        0,
        &build(),
    );
    let rows: Vec<&str> = html.split("<tr class=\"finding\">").skip(1).collect();
    assert_eq!(rows.len(), 2, "{html}");
    assert!(rows[0].starts_with("<td>p1</td>") && rows[0].contains("<td>causal</td>"));
    assert!(rows[1].starts_with("<td>p2</td>"), "{}", rows[1]);
    assert!(
        rows[1].contains("<td>none (not a cause in any reading)</td>")
            && !rows[1].contains("<td>causal</td>"),
        "{}",
        rows[1]
    );
    // The duties sit in a row of their own, across the table, not in a column.
    assert!(rows[0].contains("<tr class=\"finding-detail\"><td colspan=\"6\">"));
    assert!(rows[0].contains("<code>env-p1</code>"));
}
