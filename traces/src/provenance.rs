//! Which input carried it: the external inputs of a suspect action's closure, each
//! graded by the memo's decision procedure, ranked by **value provenance** — for the
//! post-mortem where the analyst knows the harmful action, not the injection.
//!
//! **The inputs** ([`InputKind`]) of the closure the witness walk derives from the
//! action (no span left unexpanded, [`crate::witness::closure`]):
//! - `tool_result`: the result of a tool call, retrieval or memory read that the walk
//!   visited: content that entered the record at that span. A read of durable state
//!   whose returned artifacts are each the hash-matched read of a logged write is not
//!   one (its content has a logged producer, the write, and the walk goes on to it);
//!   a read that returned something no logged write stored is, and what it returned
//!   from outside the window is its `origin_boundary`;
//! - `message`: a user, system or developer message part no span produced (rule 9 of
//!   [`crate::graph`]: external input), at the closure's earliest span consuming it;
//! - `root`: an `audita.roots` artifact a visited span consumed;
//! - `boundary`: every other boundary artifact of the closure (a window exit, a hash
//!   mismatch, a content gap): an artifact with no logged producer in the window.
//!
//! **Each input's level** is the memo's, as `--injection` would give it:
//! - a `tool_result` is graded by [`crate::witness::witness`] with its span as the
//!   injection node (its own upstream is not expanded);
//! - a `message`, `root` or `boundary` is not a span, so nothing is left unexpanded:
//!   its level is the whole closure's (indeterminate when any boundary exists —
//!   always so for a `boundary` input — else temporal when any folded, similarity,
//!   replayed or call-id edge lies in the closure, else causal).
//!
//! **Value provenance** (no model, no similarity): the action's own argument values
//! are the leaves of its canonical JSON arguments (strings and numbers; an argument
//! that is not JSON is one leaf, path `""`). A leaf is traced when its text has at
//! least [`MIN_VALUE_CHARS`] characters and is not a boolean. An input **holds** a
//! value when the text of one of its artifacts contains it verbatim (or in its JSON
//! string escaping) with no letter or digit directly around it. For each value:
//! - its **origin** is the first input holding it, by the time it entered the
//!   window (the tool span's end, the first consuming span's start), ties by span id;
//! - the path it travelled is the closure's best path from the action back to the
//!   origin's span (fewest non-witness edges, then fewest edges), each edge with its
//!   kind and rule;
//! - a value no input holds is **produced by the model** — said only when the content
//!   of every input of the closure was read and no step of it has a content gap;
//!   otherwise its origin is unknown.
//!
//! **Ranking.** Inputs holding at least one value are ranked by the number of
//! distinct values held, then the bytes held, then the number of values they are the
//! origin of, then entry time. The first is the **candidate**; its claim is its level:
//! causal only when it reaches the action through hash-matched, logged steps alone
//! (the memo's step 2); an input that holds the values but reaches the action only
//! through a folded or similarity edge is at most temporal, and the edges are named;
//! a closure that leaves the window is indeterminate with its boundary. No claim is
//! ever made through a folded or similarity edge: the level is the memo's, and value
//! matching only orders the inputs.
//!
//! **Not an ancestor.** Every tool result of the trace outside the closure is listed
//! with `not_an_ancestor` true only when the witness with it as the injection gives
//! the note that the record shows it is not an ancestor (every artifact of the closure
//! has a logged producer, every step recorded its content, module
//! [`crate::witness`]).
//!
//! Design constraints:
//! - Pure: content comes in as [`Contents`] (hash-checked); without it, the inputs
//!   and their levels are still given, and every value's origin is unknown.
//! - Deterministic: inputs in a stated order, ties broken by span id and kind.
//! - One witness walk per tool span of the trace: `O(tools · closure)`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::graph::{Basis, Boundary, Edge, EdgeKind, Graph};
use crate::hash::{ArtifactHash, SpanId};
use crate::model::{Contents, Node, Operation, PartKind};
use crate::witness::{self, path, Level, Witness, WitnessError};

/// The shortest value text that is traced (characters): shorter leaves (`"EU"`, `7`)
/// occur by coincidence everywhere.
pub const MIN_VALUE_CHARS: usize = 3;

/// What an input is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum InputKind {
    /// A tool call's result.
    ToolResult,
    /// A user, system or developer message part no span produced.
    Message,
    /// An `audita.roots` artifact.
    Root,
    /// A boundary artifact of the closure.
    Boundary,
}

impl InputKind {
    /// The JSON name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ToolResult => "tool_result",
            Self::Message => "message",
            Self::Root => "root",
            Self::Boundary => "boundary",
        }
    }
}

/// One external input of the closure.
#[derive(Clone, Debug, PartialEq)]
pub struct Input {
    /// What it is.
    pub kind: InputKind,
    /// The tool span that returned it; for a message or root the closure's earliest
    /// span consuming it; for a boundary the span it opens at.
    pub span: SpanId,
    /// The artifacts it consists of.
    pub artifacts: Vec<ArtifactHash>,
    /// The message's role (`message` inputs).
    pub role: Option<String>,
    /// The boundary's reason code (`boundary` inputs).
    pub code: Option<&'static str>,
    /// When it entered the window (ns).
    pub at_ns: u64,
    /// The memo's level for this input.
    pub level: Level,
    /// The closure's best path from the action back to the input's span, action first.
    pub path: Vec<Edge>,
    /// The offending edges of the closure its level was decided on.
    pub offending: Vec<Edge>,
    /// The boundary artifacts of that closure.
    pub boundary: Vec<Boundary>,
    /// For a read of durable state: what it returned that no logged write in the
    /// window stored (where to extend the window to find who wrote it).
    pub origin_boundary: Vec<Boundary>,
    /// Indices (into [`Provenance::values`]) of the values it holds.
    pub holds: Vec<usize>,
    /// Whether the content of every artifact of it was read.
    pub content_known: bool,
}

/// Where a value of the action's arguments came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The first input holding it (an index into [`Provenance::inputs`]).
    Input(usize),
    /// No input holds it, and the content of the whole closure was read.
    Model,
    /// No input holds it, and some content of the closure was not read.
    Unknown,
    /// The value is too short (or a boolean) to be traced verbatim.
    Untraced,
}

/// One leaf of the action's arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct ArgValue {
    /// Its path in the arguments (`account`, `items[0].sku`; `""` for a bare one).
    pub path: String,
    /// The value.
    pub value: Value,
    /// Every input holding it (indices into [`Provenance::inputs`]), origin first.
    pub holders: Vec<usize>,
    /// Where it came from.
    pub origin: Origin,
}

/// A tool result of the trace that is not in the closure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outside {
    /// The tool span.
    pub span: SpanId,
    /// Whether the record shows it is not an ancestor of the action.
    pub not_an_ancestor: bool,
}

/// The answer: the closure's inputs, ranked, with the provenance of every value.
#[derive(Clone, Debug, PartialEq)]
pub struct Provenance {
    /// The suspect action.
    pub action: SpanId,
    /// The whole closure (no injection named).
    pub closure: Witness,
    /// The whole closure's level.
    pub level: Level,
    /// The inputs, ranked ones first (in rank order), then the others in entry order.
    pub inputs: Vec<Input>,
    /// How many of `inputs` are ranked (hold at least one value).
    pub ranked: usize,
    /// The action's argument values.
    pub values: Vec<ArgValue>,
    /// Whether the action's arguments were read (content recorded and supplied).
    pub arguments_known: bool,
    /// The tool results outside the closure.
    pub outside: Vec<Outside>,
}

impl Provenance {
    /// The candidate: the first-ranked input.
    pub fn candidate(&self) -> Option<&Input> {
        (self.ranked > 0).then(|| &self.inputs[0])
    }
}

/// The closure's level, as the witness procedure grades it when the injection is
/// reached with nothing left unexpanded.
fn closure_level(w: &Witness) -> Level {
    if !w.boundary.is_empty() {
        Level::Indeterminate
    } else if w.offending.iter().any(|e| e.kind != EdgeKind::HashMismatch) {
        Level::Temporal
    } else {
        Level::Causal
    }
}

/// Whether a span is a read of durable state (its inputs come from writes).
fn reads_store(n: &Node) -> bool {
    n.store_read.is_some() || !n.read_set.is_empty()
}

/// Whether a span returns content of its own (a tool, a retrieval, a memory read).
fn is_tool(n: &Node) -> bool {
    matches!(
        n.operation,
        Some(Operation::ExecuteTool | Operation::Retrieval | Operation::SearchMemory)
    ) && (n.output_hash.is_some() || !n.output_parts.is_empty() || !n.opaque_outputs.is_empty())
}

/// The boundaries a read of durable state opened for what it returned (empty for any
/// other span): the edges into it of basis returned or read-set that leave the window.
fn read_exits<'w>(w: &'w Witness, n: &Node) -> Vec<&'w Boundary> {
    w.closure
        .iter()
        .filter(|e| e.child == n.span_id && matches!(e.basis, Basis::Returned | Basis::ReadSet))
        .filter_map(|e| e.boundary.as_ref())
        .collect()
}

/// Whether a visited span is a tool result input (module documentation): a tool, or a
/// read of durable state that returned something no logged write explains.
fn is_source(w: &Witness, n: &Node) -> bool {
    is_tool(n) && (!reads_store(n) || !read_exits(w, n).is_empty())
}

/// Runs the input analysis for the suspect action `action`.
pub fn provenance(
    graph: &Graph<'_>,
    action: &SpanId,
    contents: &Contents,
) -> Result<Provenance, WitnessError> {
    let w = witness::closure(graph, action)?;
    let level = closure_level(&w);
    let mut inputs = collect_inputs(graph, action, &w, level)?;
    let (values, arguments_known) = argument_values(graph, action, contents);
    let mut values = values;
    hold(&mut inputs, &mut values, contents);
    let gap = w
        .reasons
        .iter()
        .any(|r| matches!(*r, "content_not_captured" | "history_truncated"));
    let all_known = !gap && inputs.iter().all(|i| i.content_known);
    let ranked = rank(&mut inputs, &mut values, all_known);
    let visited: BTreeSet<&SpanId> = w.visited.iter().collect();
    let outside = graph
        .trace()
        .nodes()
        .filter(|n| &n.span_id != action && is_tool(n) && !visited.contains(&n.span_id))
        .map(|n| {
            let not = witness::witness(graph, action, &n.span_id)
                .map(|x| x.note.is_some())
                .unwrap_or(false);
            Outside {
                span: n.span_id.clone(),
                not_an_ancestor: not,
            }
        })
        .collect();
    Ok(Provenance {
        action: action.clone(),
        closure: w,
        level,
        inputs,
        ranked,
        values,
        arguments_known,
        outside,
    })
}

/// The cost of a path: non-witness edges, then edges.
fn cost(p: &[Edge]) -> (usize, usize) {
    (
        p.iter().filter(|e| e.kind != EdgeKind::HashMatch).count(),
        p.len(),
    )
}

/// Every external input of the closure `w` of `action` (module documentation), in
/// entry order.
fn collect_inputs(
    graph: &Graph<'_>,
    action: &SpanId,
    w: &Witness,
    level: Level,
) -> Result<Vec<Input>, WitnessError> {
    let trace = graph.trace();
    let best =
        |to: &SpanId| -> Vec<Edge> { path(&w.closure, action, to).into_iter().cloned().collect() };
    let mut out: Vec<Input> = Vec::new();
    let whole = |kind, span: &SpanId, artifacts, at_ns, path| Input {
        kind,
        span: span.clone(),
        artifacts,
        role: None,
        code: None,
        at_ns,
        level,
        path,
        offending: w.offending.clone(),
        boundary: w.boundary.clone(),
        origin_boundary: Vec::new(),
        holds: Vec::new(),
        content_known: false,
    };
    // Messages and roots: (artifact) → (kind, role, consumers).
    let mut parts: BTreeMap<&ArtifactHash, (InputKind, Option<String>, Vec<&Node>)> =
        BTreeMap::new();
    let mut owned: BTreeSet<&Boundary> = BTreeSet::new();
    for id in &w.visited {
        let Some(n) = trace.get(id) else { continue };
        if id != action && is_source(w, n) {
            let x = witness::witness(graph, action, id)?;
            let mut artifacts: Vec<ArtifactHash> = n.output_hash.iter().cloned().collect();
            for p in &n.output_parts {
                if !artifacts.contains(p) {
                    artifacts.push(p.clone());
                }
            }
            let mut i = whole(
                InputKind::ToolResult,
                id,
                artifacts,
                n.available_ns(),
                best(id),
            );
            i.level = x.level;
            i.offending = x.offending;
            i.boundary = x.boundary;
            let exits = read_exits(w, n);
            i.origin_boundary = exits.iter().map(|b| (*b).clone()).collect();
            owned.extend(exits);
            out.push(i);
        }
        let external: BTreeSet<&ArtifactHash> = graph.external_inputs(n).into_iter().collect();
        for (k, h) in n.input_parts.iter().enumerate() {
            let kind = if trace.roots().contains(h) {
                InputKind::Root
            } else if external.contains(h) {
                InputKind::Message
            } else {
                continue;
            };
            let role = n.input_meta(k).and_then(|m| m.role.clone());
            let e = parts.entry(h).or_insert_with(|| (kind, role, Vec::new()));
            e.2.push(n);
        }
    }
    for (h, (kind, role, consumers)) in parts {
        let first = consumers
            .iter()
            .min_by_key(|n| (n.start_ns, n.span_id.clone()))
            .copied();
        let closest = consumers
            .iter()
            .map(|n| best(&n.span_id))
            .min_by_key(|p| cost(p))
            .unwrap_or_default();
        let Some(first) = first else { continue };
        let mut i = whole(
            kind,
            &first.span_id,
            vec![h.clone()],
            first.start_ns,
            closest,
        );
        i.role = role;
        out.push(i);
    }
    // Boundaries, at the step whose edge opened them (else the span they locate).
    for b in w.boundary.iter().filter(|b| !owned.contains(b)) {
        let at = w
            .closure
            .iter()
            .find(|e| e.boundary.as_ref() == Some(b))
            .map(|e| e.child.clone())
            .or_else(|| b.locator.first().cloned());
        let Some(at) = at else { continue };
        let start = trace.get(&at).map_or(0, |n| n.start_ns);
        let mut i = whole(
            InputKind::Boundary,
            &at,
            vec![b.artifact.clone()],
            start,
            best(&at),
        );
        i.code = Some(b.code);
        i.level = Level::Indeterminate;
        out.push(i);
    }
    out.sort_by(|a, b| {
        (a.at_ns, &a.span, a.kind, &a.artifacts).cmp(&(b.at_ns, &b.span, b.kind, &b.artifacts))
    });
    Ok(out)
}

/// The leaves of the action's arguments, and whether they were read.
fn argument_values(
    graph: &Graph<'_>,
    action: &SpanId,
    contents: &Contents,
) -> (Vec<ArgValue>, bool) {
    let Some(a) = graph.trace().get(action) else {
        return (Vec::new(), false);
    };
    let mut out = Vec::new();
    let mut known = false;
    for (k, h) in a.input_parts.iter().enumerate() {
        let kind = a.input_meta(k).map(|m| m.kind);
        if !matches!(
            kind,
            None | Some(PartKind::ToolCall | PartKind::SingleArgument)
        ) {
            continue;
        }
        // The single argument repeats a leaf of the whole arguments.
        if kind == Some(PartKind::SingleArgument)
            && a.input_meta.iter().any(|m| m.kind == PartKind::ToolCall)
        {
            continue;
        }
        let Some(text) = contents.get(h) else {
            continue;
        };
        known = true;
        match serde_json::from_str::<Value>(text) {
            Ok(j @ (Value::Object(_) | Value::Array(_)))
                if kind != Some(PartKind::SingleArgument) =>
            {
                leaves(&j, String::new(), &mut out);
            }
            _ => out.push(leaf(String::new(), Value::String(text.to_string()))),
        }
    }
    (out, known)
}

fn leaf(path: String, value: Value) -> ArgValue {
    ArgValue {
        path,
        value,
        holders: Vec::new(),
        origin: Origin::Untraced,
    }
}

fn leaves(v: &Value, path: String, out: &mut Vec<ArgValue>) {
    match v {
        Value::Object(o) => {
            for (k, it) in o {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                leaves(it, p, out);
            }
        }
        Value::Array(items) => {
            for (i, it) in items.iter().enumerate() {
                leaves(it, format!("{path}[{i}]"), out);
            }
        }
        Value::Null => {}
        v => out.push(leaf(path, v.clone())),
    }
}

/// The texts a value is looked for as (its text, and its JSON string escaping when
/// that differs); `None` when it is not traced.
fn needles(v: &Value) -> Option<Vec<String>> {
    let text = match v {
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    if text.chars().count() < MIN_VALUE_CHARS {
        return None;
    }
    let mut out = vec![text.clone()];
    if let Ok(q) = serde_json::to_string(&text) {
        let inner = q[1..q.len() - 1].to_string();
        if inner != text {
            out.push(inner);
        }
    }
    Some(out)
}

/// Whether `hay` holds `needle` with no letter or digit directly around it (where
/// the needle itself begins or ends with one).
fn holds_verbatim(hay: &str, needle: &str) -> bool {
    let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    let first = needle.chars().next();
    let last = needle.chars().last();
    let mut from = 0;
    while let Some(i) = hay[from..].find(needle) {
        let s = from + i;
        let e = s + needle.len();
        let before = hay[..s].chars().next_back();
        let after = hay[e..].chars().next();
        let ok_before = !(word(first) && word(before));
        let ok_after = !(word(last) && word(after));
        if ok_before && ok_after {
            return true;
        }
        from = s + needle.chars().next().map_or(1, char::len_utf8);
    }
    false
}

/// Which input holds which value.
fn hold(inputs: &mut [Input], values: &mut [ArgValue], contents: &Contents) {
    let wanted: Vec<Option<Vec<String>>> = values.iter().map(|v| needles(&v.value)).collect();
    for (ix, input) in inputs.iter_mut().enumerate() {
        let texts: Vec<&str> = input
            .artifacts
            .iter()
            .filter_map(|h| contents.get(h))
            .collect();
        input.content_known = !input.artifacts.is_empty() && texts.len() == input.artifacts.len();
        for (vx, w) in wanted.iter().enumerate() {
            let Some(ns) = w else { continue };
            if texts
                .iter()
                .any(|t| ns.iter().any(|n| holds_verbatim(t, n)))
            {
                input.holds.push(vx);
                values[vx].holders.push(ix);
            }
        }
    }
    for (v, w) in values.iter_mut().zip(&wanted) {
        if w.is_some() {
            v.origin = Origin::Unknown;
        }
    }
}

/// Ranks the inputs (module documentation), sets every value's origin, and returns
/// the number of ranked inputs; indices in `values` follow the new order.
fn rank(inputs: &mut Vec<Input>, values: &mut [ArgValue], all_known: bool) -> usize {
    // Origins in entry order (inputs are in entry order here).
    let origin_of: Vec<Option<usize>> = values.iter().map(|v| v.holders.first().copied()).collect();
    let mut origins = vec![0usize; inputs.len()];
    for o in origin_of.iter().flatten() {
        origins[*o] += 1;
    }
    let bytes = |i: &Input| -> usize {
        i.holds
            .iter()
            .filter_map(|v| needles(&values[*v].value))
            .map(|n| n[0].len())
            .sum()
    };
    let mut order: Vec<usize> = (0..inputs.len()).collect();
    order.sort_by_key(|&i| {
        let x = &inputs[i];
        let held = x.holds.len();
        (
            held == 0,
            std::cmp::Reverse(held),
            std::cmp::Reverse(bytes(x)),
            std::cmp::Reverse(origins[i]),
            if held == 0 { 0 } else { x.at_ns },
            i,
        )
    });
    let mut new_index = vec![0usize; inputs.len()];
    for (new, &old) in order.iter().enumerate() {
        new_index[old] = new;
    }
    let mut taken: Vec<Option<Input>> = std::mem::take(inputs).into_iter().map(Some).collect();
    *inputs = order.iter().filter_map(|&o| taken[o].take()).collect();
    for (v, o) in values.iter_mut().zip(&origin_of) {
        v.holders = v.holders.iter().map(|h| new_index[*h]).collect();
        v.origin = match (o, &v.origin) {
            (Some(o), _) => Origin::Input(new_index[*o]),
            (None, Origin::Untraced) => Origin::Untraced,
            (None, _) if all_known => Origin::Model,
            (None, _) => Origin::Unknown,
        };
    }
    inputs.iter().take_while(|i| !i.holds.is_empty()).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbatim_means_not_inside_a_longer_word_or_number() {
        assert!(holds_verbatim("pay account X-1 the amount 5000.", "5000"));
        assert!(!holds_verbatim("the amount 50000", "5000"));
        assert!(!holds_verbatim("ref 15000", "5000"));
        assert!(holds_verbatim("15000 or 5000", "5000"));
        assert!(holds_verbatim("\"amount\":5000}", "5000"));
        assert!(holds_verbatim("120.00 EUR", "120"));
        assert!(!holds_verbatim("X-ATTACKER-9990", "X-ATTACKER-999"));
    }

    #[test]
    fn short_values_and_booleans_are_not_traced() {
        assert!(needles(&Value::Bool(true)).is_none());
        assert!(needles(&serde_json::json!(12)).is_none());
        assert_eq!(needles(&serde_json::json!(120)).unwrap(), vec!["120"]);
        assert_eq!(
            needles(&serde_json::json!("say \"hi\"")).unwrap(),
            vec!["say \"hi\"".to_string(), "say \\\"hi\\\"".to_string()]
        );
    }
}
