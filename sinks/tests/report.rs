//! The HTML incident report is self-contained and shows what the verdict says.

use audita_sinks::report::render;
use serde_json::json;

#[test]
fn report_draws_slice_nodes_by_status_bars_and_the_duty_table() {
    let v = json!({
        "incident": "inc-<7>", "outcome": "separation_below_0.5m", "t_star_ms": 1200, "severity_j": 450.0,
        "standard": "reasonable_agent", "status": "graded", "claim": {"level": "causal"},
        "anchors": ["ctl:aa11"],
        "slice": {"messages": ["ctl:aa11", "planner:bb22"],
                  "edges": [{"child": "ctl:aa11", "parent": "planner:bb22", "kind": "hash_match"},
                            {"child": "planner:bb22", "parent": "gone:cc33", "kind": "window_exit"}],
                  "absences": [{"variable": "absent.halt", "duty": "halt", "holder": "supervisor", "trigger": "s:dd44", "in_outcome": true}]},
        "completions": {"items": [{"id": "gone:cc33", "kind": "missing"}]},
        "principals": {"planner": {"duties": ["env"], "breach": {"specification": true, "reasonable_agent": true},
                                   "rho_lo": 0.5, "rho_hi": 1.0, "culpable": true, "status": "culpable",
                                   "claim": {"level": "causal"}, "flags": [], "evidence": ["planner:bb22"]}},
        "notes": ["a note"]
    });
    let html = render(&v);
    assert!(html.starts_with("<!doctype html>") && !html.contains("<script"));
    assert!(html.contains("inc-&lt;7&gt;"), "names are escaped");
    assert!(
        html.contains("#2e7d32") && html.contains("#c62828"),
        "certified and missing nodes are coloured"
    );
    assert!(
        html.contains("stroke-dasharray=\"2,3\""),
        "window exit edge drawn dotted"
    );
    assert!(
        html.contains("[0.500, 1.000] culpable"),
        "interval bar with its bounds"
    );
    assert!(html.contains("absent.halt") && html.contains("a note"));
}
