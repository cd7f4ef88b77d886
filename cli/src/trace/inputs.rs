//! The JSON of `trace witness --action SPAN` without `--injection` (and of `trace
//! verdict` without it): the external inputs of the action's closure, each with the
//! memo's level, ranked by value provenance (`audita_traces::provenance`).
//!
//! Shape (`schema` `audita.trace-inputs/v1`):
//! - `action`: span id, name, tool; `level`: the whole closure's level;
//! - `candidate`: the first-ranked input (`null` when no input holds a value), with
//!   `claim` (its level), the values it holds, `holds_all`, and `statement`, one
//!   sentence saying what the record supports;
//! - `inputs[]`, ranked ones first: `rank` (1-based, `null` when it holds no value),
//!   `input` (`tool_result`, `message`, `root`, `boundary`), `span_id`, `name`, `tool`,
//!   `role`, `code`, `artifacts`, `level`, `path_kinds` and `path` (edges from the
//!   action back to the input's span, action first), `offending_edges`, `boundary`,
//!   `origin_boundary` (what a memory or retrieval read returned that no logged write
//!   stored), `holds` (argument paths), `content` (`read` or `not_read`);
//! - `values[]`: every leaf of the action's arguments: `path`, `value`, `origin`
//!   (`input`, `model`, `unknown`, `untraced`), `input` (the origin's rank index into
//!   `inputs`, span id and kind), `holders` (indices into `inputs`), and the origin's
//!   `level` and `path_kinds`;
//! - `arguments`: `read` or `not_read`;
//! - `not_in_closure[]`: the trace's other tool results, with `not_an_ancestor`;
//! - `offending_edges`, `boundary`, `reasons`, `settings`, `remedies`, `closure`: the
//!   whole closure's, as `trace witness` prints them.

use audita_traces::graph::Edge;
use audita_traces::{Input, Level, Origin, Provenance, Trace};
use serde_json::{json, Value};

use super::{boundary_json, edge_json, remedies_json};

/// Exit 0 when the candidate is causal, 1 otherwise.
pub(super) fn exit_code(p: &Provenance) -> i32 {
    match p.candidate() {
        Some(c) if c.level == Level::Causal => 0,
        _ => 1,
    }
}

fn path_kinds(path: &[Edge]) -> Vec<&'static str> {
    path.iter().map(|e| e.kind.as_str()).collect()
}

fn input_json(p: &Provenance, trace: &Trace, ix: usize, i: &Input) -> Value {
    let node = trace.get(&i.span);
    json!({
        "rank": (ix < p.ranked).then_some(ix + 1),
        "input": i.kind.as_str(),
        "span_id": i.span.to_string(),
        "name": node.map(|n| n.name.clone()),
        "tool": node.and_then(|n| n.tool.clone()),
        "role": i.role,
        "code": i.code,
        "artifacts": i.artifacts.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "level": i.level.as_str(),
        "path_kinds": path_kinds(&i.path),
        "path": i.path.iter().map(edge_json).collect::<Vec<_>>(),
        "offending_edges": i.offending.iter().map(edge_json).collect::<Vec<_>>(),
        "boundary": i.boundary.iter().map(boundary_json).collect::<Vec<_>>(),
        "origin_boundary": i.origin_boundary.iter().map(boundary_json).collect::<Vec<_>>(),
        "holds": i.holds.iter().map(|v| p.values[*v].path.clone()).collect::<Vec<_>>(),
        "content": if i.content_known { "read" } else { "not_read" },
    })
}

/// What the record supports about the candidate, in one sentence.
fn statement(p: &Provenance, trace: &Trace, c: &Input) -> String {
    let what = match c.kind {
        audita_traces::InputKind::ToolResult => format!(
            "the result of tool span {} ({})",
            c.span,
            trace
                .get(&c.span)
                .and_then(|n| n.tool.clone())
                .unwrap_or_else(|| "unnamed tool".into())
        ),
        audita_traces::InputKind::Message => format!(
            "the {} message first consumed by span {}",
            c.role.as_deref().unwrap_or("external"),
            c.span
        ),
        audita_traces::InputKind::Root => format!("the root artifact consumed by span {}", c.span),
        audita_traces::InputKind::Boundary => format!(
            "the artifact {} at span {}, which has no logged producer in the window",
            c.artifacts
                .first()
                .map(ToString::to_string)
                .unwrap_or_default(),
            c.span
        ),
    };
    let held: Vec<&str> = c.holds.iter().map(|v| p.values[*v].path.as_str()).collect();
    let values = format!("holds the action's argument value(s) {}", held.join(", "));
    let origin = if c.origin_boundary.is_empty() {
        String::new()
    } else {
        format!(
            "; it returned {} artifact(s) no logged write in the window stored: extend the window to find who wrote them",
            c.origin_boundary.len()
        )
    };
    match c.level {
        Level::Causal => format!(
            "{what} {values} and reaches the action through hash-matched, logged steps only: the causal candidate{origin}"
        ),
        Level::Temporal => {
            let edges: Vec<String> = c
                .offending
                .iter()
                .filter(|e| e.kind != audita_traces::EdgeKind::HashMismatch)
                .map(|e| {
                    format!(
                        "{}->{} {} ({})",
                        e.parent.as_ref().map(ToString::to_string).unwrap_or_default(),
                        e.child,
                        e.kind.as_str(),
                        e.rule
                    )
                })
                .collect();
            format!(
                "{what} {values}, but the closure holds non-witness edges ({}): temporal precedence with plausible mechanism, not a causal claim",
                edges.join(", ")
            )
        }
        Level::Indeterminate => format!(
            "{what} {values}, but the closure leaves the window ({} boundary artifact(s)): consistent with, not proven; external parent suspected",
            c.boundary.len()
        ),
    }
}

fn value_json(p: &Provenance, v: &audita_traces::provenance::ArgValue) -> Value {
    let (origin, input) = match &v.origin {
        Origin::Input(i) => ("input", Some(*i)),
        Origin::Model => ("model", None),
        Origin::Unknown => ("unknown", None),
        Origin::Untraced => ("untraced", None),
    };
    let mut out = json!({
        "path": v.path,
        "value": v.value,
        "origin": origin,
        "holders": v.holders,
    });
    if let Some(i) = input.and_then(|i| p.inputs.get(i).map(|x| (i, x))) {
        out["input"] = json!({
            "index": i.0,
            "span_id": i.1.span.to_string(),
            "input": i.1.kind.as_str(),
        });
        out["level"] = json!(i.1.level.as_str());
        out["path_kinds"] = json!(path_kinds(&i.1.path));
    }
    out
}

/// The JSON of the input analysis (module documentation).
pub(super) fn provenance_json(p: &Provenance, trace: &Trace) -> Value {
    let w = &p.closure;
    let act_node = trace.get(&p.action);
    let candidate = p.candidate().map(|c| {
        json!({
            "index": 0,
            "input": c.kind.as_str(),
            "span_id": c.span.to_string(),
            "tool": trace.get(&c.span).and_then(|n| n.tool.clone()),
            "claim": c.level.as_str(),
            "holds": c.holds.iter().map(|v| p.values[*v].path.clone()).collect::<Vec<_>>(),
            "holds_all": p
                .values
                .iter()
                .enumerate()
                .filter(|(_, v)| v.origin != Origin::Untraced)
                .all(|(vx, _)| c.holds.contains(&vx)),
            "statement": statement(p, trace, c),
        })
    });
    json!({
        "schema": "audita.trace-inputs/v1",
        "action": {
            "span_id": p.action.to_string(),
            "name": act_node.map(|n| n.name.clone()),
            "tool": act_node.and_then(|n| n.tool.clone()),
        },
        "level": p.level.as_str(),
        "candidate": candidate,
        "inputs": p.inputs.iter().enumerate().map(|(ix, i)| input_json(p, trace, ix, i)).collect::<Vec<_>>(),
        "values": p.values.iter().map(|v| value_json(p, v)).collect::<Vec<_>>(),
        "arguments": if p.arguments_known { "read" } else { "not_read" },
        "not_in_closure": p.outside.iter().map(|o| json!({
            "span_id": o.span.to_string(),
            "name": trace.get(&o.span).map(|n| n.name.clone()),
            "tool": trace.get(&o.span).and_then(|n| n.tool.clone()),
            "not_an_ancestor": o.not_an_ancestor,
        })).collect::<Vec<_>>(),
        "offending_edges": w.offending.iter().map(edge_json).collect::<Vec<_>>(),
        "boundary": w.boundary.iter().map(boundary_json).collect::<Vec<_>>(),
        "reasons": w.reasons,
        "settings": w.settings,
        "remedies": remedies_json(w),
        "closure": {"edges": w.closure.iter().map(edge_json).collect::<Vec<_>>()},
    })
}
