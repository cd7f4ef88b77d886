//! The memo's decision procedure (reference 001, "Decision Boundary"), as its prose
//! states it and CONVENTIONS.md fixes it: was the injection the cause of the suspect
//! action, or does the trace only show that it came first?
//!
//! 1. Compute the artifact-hash closure backward from the suspect action ([`Graph`]
//!    edges; the injection node is not expanded; roots end the walk).
//! 2. **causal** when it reaches the injection node and holds only hash-match edges
//!    through logged nodes;
//! 3. **temporal** ("temporal precedence with plausible mechanism") when it needed a
//!    folded or similarity edge, each named;
//! 4. **indeterminate** ("external parent suspected") when the closure leaves the
//!    window: every boundary artifact is emitted. A hash mismatch is reported with both
//!    hashes and its unexplained input is a boundary.
//!
//! Where the memo's sample code disagrees with its prose, the prose wins:
//! - the sample code never walks a folded or similarity edge, so an injection reached
//!   only through one is "not reachable … exits boundary"; here the walk continues
//!   through them (for reachability only) and the level is temporal, naming them;
//! - a window exit on another branch beside a hash-only path: the sample code says
//!   "temporal"; here (step 4, condition 4) it is indeterminate with the boundary;
//! - a hash mismatch: the sample code raises and stops; here it is an offending edge,
//!   an error naming both hashes, and a boundary (indeterminate), and the walk goes on
//!   so that every other finding is reported too;
//! - a missing parent node: the sample code files it as a window-exit "offending"
//!   edge but then reports temporal; here it is a boundary, so indeterminate;
//! - the sample code's docstring promises the boundary artifact but never emits it;
//!   here every boundary carries the artifact hash, the record id of read-set
//!   entries and the absent span ids as locator;
//! - one input and one output hash per node cannot express a step with one
//!   hash-matched and one folded input; here each consumed part is its own edge.
//!
//! A folded edge off the injection path still refuses the causal claim (the sample
//! code and the Operational Effect agree; a narrow reading of step 2 would not).
//! The memo's prose has no level for a closure that closes inside the window without
//! reaching the injection: that is reported as indeterminate with
//! `reaches_injection: false`, and a note saying the injection is not an ancestor
//! only when the record can show it (below).
//!
//! **Honest absence** (spans read from GenAI content, [`crate::genai`]):
//! - every visited span (the action included, the injection not expanded) whose
//!   record has a gap — content not captured, history not logged — is a boundary
//!   with reason code `content_not_captured` or `history_truncated`, naming the
//!   setting that turns capture on (`settings`), so the claim is indeterminate;
//! - a value the instrumentation truncated (AG2's `max_tool_result_chars`) is not a
//!   boundary when the injection is reached: the cut records are identical on both
//!   sides and paired by call id, so the data-flow identity holds (the edge says
//!   `truncated`). When the injection is not reached it is a `history_truncated`
//!   boundary: what lay beyond the cut is unknown, so non-ancestry cannot be shown;
//! - `replayed` and `call_id` edges are walked for reachability and refuse a causal
//!   claim, like folded ones;
//! - the note "the record shows the injection is not an ancestor" is given only when
//!   the closure has no boundary and no offending edge, every span in it recorded
//!   its content completely, and the action consumed at least one recorded part
//!   (a span the walk reached as a producer may consume nothing: a source).
//!
//! **Memory and rewrites** (SPEC §9):
//! - a request whose history was rewritten by code no span logs carries folded edges
//!   ([`crate::graph`], rules `history_rewritten`, `compaction`,
//!   `nested_unlogged_input`, `quotes_read`): the claim is at most temporal, whatever
//!   other all-hash path reaches the injection;
//! - what the action itself returned is not part of the question (its inputs are): the
//!   read edges of its own result are left out of the closure;
//! - the note additionally needs every tool result in the closure to be explained:
//!   a result that returned no artifact an earlier span stored, in a window where some
//!   span had stored something before it, could be a read of that state in another
//!   form, so the record does not show it is not one.
//!
//! **Remedies.** Every offending edge and every boundary gives a [`Remedy`]: the step
//! whose record broke the witness, what the record shows there, and the setting or the
//! change of code that would make the trace a witness (log the rewrite as its own step,
//! extend the window to a writer, turn content capture on).
//!
//! Design constraints:
//! - Precedence indeterminate > temporal > causal: the weakest claim any part of the
//!   closure forces is the one reported.
//! - Each node is expanded once, so the walk is linear in the closure's edges.

use std::collections::{BTreeMap, BTreeSet};

use thiserror::Error;

use crate::graph::{gap_boundary, Basis, Boundary, Edge, EdgeKind, Graph};
use crate::hash::SpanId;
use crate::model::{Capture, Node, Operation};

/// The claim a trace supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// The closure leaves the window (or holds a hash mismatch): "consistent with, not
    /// proven"; external parent suspected.
    Indeterminate,
    /// Temporal precedence with plausible mechanism: a folded or similarity edge.
    Temporal,
    /// Causal witness: the injection was reached by hash-match edges only.
    Causal,
}

impl Level {
    /// The JSON name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Indeterminate => "indeterminate",
            Self::Temporal => "temporal",
            Self::Causal => "causal",
        }
    }
}

/// A query the trace cannot answer at all.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum WitnessError {
    /// The named span is not in the trace.
    #[error("{role} span {id} is not in the trace")]
    Absent {
        /// `action` or `injection`.
        role: &'static str,
        /// The span id asked for.
        id: String,
    },
    /// The action and the injection are one span.
    #[error("the action and the injection are the same span {0}")]
    Same(String),
}

/// The answer of the decision procedure.
#[derive(Clone, Debug, PartialEq)]
pub struct Witness {
    /// The claim level.
    pub level: Level,
    /// Whether the walk, including non-witness edges, reached the injection node.
    pub reaches_injection: bool,
    /// The folded, similarity and hash-mismatch edges of the closure.
    pub offending: Vec<Edge>,
    /// Every boundary artifact of the closure (deduplicated).
    pub boundary: Vec<Boundary>,
    /// Errors (hash mismatches, naming both hashes).
    pub errors: Vec<String>,
    /// Every edge of the closure, in the order the walk derived them.
    pub closure: Vec<Edge>,
    /// The edge kinds on a path from the action back to the injection (the one with
    /// fewest non-witness edges, then fewest edges), action first; empty when it is
    /// not reached.
    pub injection_path_kinds: Vec<EdgeKind>,
    /// A remark on a level the memo does not name (closure closed without reaching
    /// the injection).
    pub note: Option<String>,
    /// The reason codes of the boundaries (`window_exit`, `hash_mismatch`,
    /// `content_not_captured`, `history_truncated`).
    pub reasons: BTreeSet<&'static str>,
    /// The settings that would have turned capture on for the spans with gaps.
    pub settings: Vec<String>,
    /// What broke the witness, step by step, and what would mend it.
    pub remedies: Vec<Remedy>,
    /// Every span the walk visited (the action, the injection when reached), in span-id
    /// order.
    pub visited: Vec<SpanId>,
}

/// One place where the record stops being a causal witness, and the fix.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Remedy {
    /// The step whose record broke the witness (the edge's child, or the span a
    /// boundary locates).
    pub span: SpanId,
    /// The edge rule or boundary code it comes from.
    pub cause: &'static str,
    /// What the record shows there.
    pub finding: String,
    /// The setting or code change that would make the trace a witness.
    pub fix: String,
}

/// Runs the decision procedure for the suspect action `action` and the injection
/// node `injection`.
pub fn witness(
    graph: &Graph<'_>,
    action: &SpanId,
    injection: &SpanId,
) -> Result<Witness, WitnessError> {
    let trace = graph.trace();
    let a = trace.get(action).ok_or_else(|| WitnessError::Absent {
        role: "action",
        id: action.to_string(),
    })?;
    if trace.get(injection).is_none() {
        return Err(WitnessError::Absent {
            role: "injection",
            id: injection.to_string(),
        });
    }
    if action == injection {
        return Err(WitnessError::Same(action.to_string()));
    }
    Ok(walk(graph, a, Some(injection)))
}

/// The whole closure of `action`, no span left unexpanded: what [`witness`] walks when
/// no injection is named (`reaches_injection` is false, there is no note, and a cut
/// value is a boundary, since no pairing across the cut is asked about). The input
/// analysis of [`crate::provenance`] starts from it.
pub fn closure(graph: &Graph<'_>, action: &SpanId) -> Result<Witness, WitnessError> {
    let a = graph
        .trace()
        .get(action)
        .ok_or_else(|| WitnessError::Absent {
            role: "action",
            id: action.to_string(),
        })?;
    Ok(walk(graph, a, None))
}

/// The decision procedure proper, from the action's node `a` (which differs from
/// `injection`).
fn walk(graph: &Graph<'_>, a: &Node, injection: Option<&SpanId>) -> Witness {
    let trace = graph.trace();
    let action = &a.span_id;
    let mut visited: BTreeSet<&SpanId> = BTreeSet::new();
    let mut stack = vec![a];
    let mut closure = Vec::new();
    let mut gaps: Vec<Boundary> = Vec::new();
    let mut cuts: Vec<Boundary> = Vec::new();
    let mut settings: Vec<String> = Vec::new();
    let mut cut_settings: Vec<String> = Vec::new();
    let mut all_complete = true;
    while let Some(c) = stack.pop() {
        if !visited.insert(&c.span_id) {
            continue;
        }
        if Some(&c.span_id) == injection {
            continue;
        }
        if let Some(b) = gap_boundary(c) {
            all_complete = false;
            let cut = matches!(c.capture, Capture::Truncated { .. });
            if let Some(s) = c.capture.setting() {
                let list = if cut {
                    &mut cut_settings
                } else {
                    &mut settings
                };
                if !list.contains(&s) {
                    list.push(s);
                }
            }
            if cut {
                cuts.push(b);
            } else {
                gaps.push(b);
            }
        }
        let mut edges = graph.edges_into(c);
        if &c.span_id == action {
            // The action's own result is not what the question is about.
            edges.retain(|e| !matches!(e.basis, Basis::Returned | Basis::Contained));
        }
        // Push in reverse so the walk visits parents in the order the child lists them.
        for e in edges.iter().rev() {
            if !e.kind.is_traversed() {
                continue;
            }
            if let Some(p) = e.parent.as_ref().and_then(|p| trace.get(p)) {
                if !visited.contains(&p.span_id) {
                    stack.push(p);
                }
            }
        }
        closure.extend(edges);
    }
    let reaches_injection = injection.is_some_and(|i| visited.contains(i));
    let offending: Vec<Edge> = closure
        .iter()
        .filter(|e| e.kind.is_offending())
        .cloned()
        .collect();
    if reaches_injection {
        // The cut records pair on a hash-matched path: no boundary (module docs).
        cuts.clear();
    } else {
        for s in cut_settings {
            if !settings.contains(&s) {
                settings.push(s);
            }
        }
    }
    let mut boundary: Vec<Boundary> = Vec::new();
    for b in closure
        .iter()
        .filter_map(|e| e.boundary.as_ref())
        .chain(&gaps)
        .chain(&cuts)
    {
        if !boundary.contains(b) {
            boundary.push(b.clone());
        }
    }
    let reasons: BTreeSet<&'static str> = boundary.iter().map(|b| b.code).collect();
    let errors: Vec<String> = closure.iter().filter_map(|e| e.error.clone()).collect();
    let level = if !boundary.is_empty() {
        Level::Indeterminate
    } else if offending.iter().any(|e| e.kind != EdgeKind::HashMismatch) {
        Level::Temporal
    } else if reaches_injection {
        Level::Causal
    } else {
        Level::Indeterminate
    };
    let unexplained_read = visited
        .iter()
        .filter(|id| **id != action && Some(**id) != injection)
        .filter_map(|id| trace.get(id))
        .any(|v| {
            let explained = closure
                .iter()
                .filter(|e| e.child == v.span_id && e.basis == Basis::Returned)
                .filter(|e| e.kind == EdgeKind::HashMatch)
                .count();
            v.operation == Some(Operation::ExecuteTool)
                && !v.returned.is_empty()
                && explained < v.returned.len()
                && graph.stored_before(v)
        });
    let note = (injection.is_some()
        && !reaches_injection
        && boundary.is_empty()
        && offending.is_empty()
        && all_complete
        && !unexplained_read
        && a.consumed_anything())
    .then(|| {
        "the closure closes inside the window without reaching the injection: the record shows the injection is not an ancestor of the action".to_string()
    });
    let injection_path_kinds = match injection {
        Some(i) if reaches_injection => path(&closure, action, i).iter().map(|e| e.kind).collect(),
        _ => Vec::new(),
    };
    let remedies = remedies(graph, &closure, &offending, &boundary, &settings);
    let visited = visited.into_iter().cloned().collect();
    Witness {
        level,
        reaches_injection,
        offending,
        boundary,
        errors,
        closure,
        injection_path_kinds,
        note,
        reasons,
        settings,
        remedies,
        visited,
    }
}

/// What closes a boundary of the window.
fn boundary_fix(b: &Boundary, settings: &[String]) -> String {
    match b.code {
        "content_not_captured" => settings
            .first()
            .cloned()
            .unwrap_or_else(|| "turn content capture on".into()),
        "history_truncated" => "use an instrumentation (or settings) that record the whole model input, or declare audita.input.parts".into(),
        _ => match &b.record_id {
            Some(id) => format!(
                "extend the window to the session that wrote record {id} ({}), or record the store's writes (audita.write_set)",
                b.artifact
            ),
            None => format!("extend the window to the step that produced {}", b.artifact),
        },
    }
}

/// The remedy of each offending edge (one per rule and child) and of each boundary.
fn remedies(
    graph: &Graph<'_>,
    closure: &[Edge],
    offending: &[Edge],
    boundary: &[Boundary],
    settings: &[String],
) -> Vec<Remedy> {
    let mut out: Vec<Remedy> = Vec::new();
    let art = |e: &Edge| {
        e.artifact
            .as_ref()
            .map_or_else(|| "a part".to_string(), ToString::to_string)
    };
    let mut seen: BTreeSet<(&'static str, &SpanId)> = BTreeSet::new();
    for e in offending {
        if !seen.insert((e.rule, &e.child)) {
            continue;
        }
        let parents: Vec<String> = offending
            .iter()
            .filter(|o| o.rule == e.rule && o.child == e.child)
            .filter_map(|o| o.parent.as_ref().map(ToString::to_string))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let from = parents.join(", ");
        let (finding, fix) = match e.rule {
            "history_rewritten" => {
                let prev = graph
                    .histories()
                    .turn(&e.child)
                    .and_then(|t| t.previous.as_ref())
                    .map_or_else(String::new, ToString::to_string);
                (
                    format!(
                        "request {} consumed {}, written into its history by a transformation no span logged: its history is not an extension of request {prev}'s (folded; it could have read {from})",
                        e.child,
                        art(e)
                    ),
                    "log the rewrite as its own step: produce the summary with a model call the framework instruments and put its output into the history unchanged, or record a span with audita.mutation.kind (compaction, summarization, truncation) whose audita.input.parts and audita.output.hash hash what it read and wrote".into(),
                )
            }
            "rewritten_earlier" => (
                format!(
                    "request {} carries {}, which a rewrite no span logged wrote into the history of request {from}",
                    e.child,
                    art(e)
                ),
                "log the rewrite as its own step (see the remedy of request ".to_string() + &from + ")",
            ),
            "compaction" => (
                format!(
                    "request {} is marked compacted and consumed {}, a summary no span logged (folded; it could have read {from})",
                    e.child,
                    art(e)
                ),
                "record the compaction as its own span (audita.mutation.kind compaction) with the hashes of the history it read and of the summary it wrote, or let an instrumented model call write the summary".into(),
            ),
            "nested_unlogged_input" => (
                format!(
                    "model call {} ran inside another step and consumed {}, which that step's code wrote without a span (folded; it could have read {from})",
                    e.child,
                    art(e)
                ),
                "hand the history to that model call as structured messages (e.g. message_history=) rather than text the code assembles, or record the code's input and output hashes as a span".into(),
            ),
            "quotes_read" => (
                format!(
                    "request {} consumed a message holding verbatim what {from} returned from durable state, assembled by code no span logs (folded)",
                    e.child
                ),
                "pass retrieved content to the model as the retrieval's own output (a tool result) or record the prompt assembly as a span whose audita.input.parts name the returned artifacts".into(),
            ),
            "contains_write" => (
                format!(
                    "tool call {} returned, inside its result, {} that {from} stored: the store returned it in another form (similarity, not identity)",
                    e.child,
                    art(e)
                ),
                "record the read-set of the store (audita.read_set with record ids and content hashes) or return stored records unchanged".into(),
            ),
            "audita.mutation" => (
                format!(
                    "{} consumed {}, the output of a context mutation recorded on span {from} instead of as its own span",
                    e.child,
                    art(e)
                ),
                "record the mutation as its own span (audita.mutation.kind) with audita.input.parts and audita.output.hash".into(),
            ),
            "embedding_similarity" | "record_id_only" => (
                format!(
                    "{} is linked to {from} by similarity or by a record id only, not by a content hash",
                    e.child
                ),
                "record the returned artifact's identity: the document or record id and the content hash (audita.read_set, or retrieval documents with content)".into(),
            ),
            "replayed_history" => (
                format!(
                    "{} consumed {}, which {from} recorded only as text: that it produced the structured part is inferred from a later input",
                    e.child,
                    art(e)
                ),
                "use an instrumentation that records model outputs as structured parts (gen_ai.output.messages with tool_call parts)".into(),
            ),
            "call_id" => (
                format!(
                    "{} is paired with {from} by a tool call id only: the content was not captured on one side",
                    e.child
                ),
                settings
                    .first()
                    .cloned()
                    .unwrap_or_else(|| "turn content capture on".into()),
            ),
            "framework_link" => (
                e.error.clone().unwrap_or_default(),
                "re-export the trace with the producing span, or correct the framework's link".into(),
            ),
            other => (
                format!("{} via {other} from {from}", e.child),
                "record the step as its own span with input and output hashes".into(),
            ),
        };
        out.push(Remedy {
            span: e.child.clone(),
            cause: e.rule,
            finding,
            fix,
        });
    }
    // Each boundary once, at the step whose edge opened it (else the span it locates).
    let mut done: BTreeSet<&Boundary> = BTreeSet::new();
    let at = closure
        .iter()
        .filter_map(|e| e.boundary.as_ref().map(|b| (b, e.child.clone())))
        .chain(
            boundary
                .iter()
                .filter_map(|b| b.locator.first().map(|s| (b, s.clone()))),
        );
    for (b, span) in at {
        if !done.insert(b) {
            continue;
        }
        out.push(Remedy {
            span,
            cause: b.code,
            finding: b.reason.clone(),
            fix: boundary_fix(b, settings),
        });
    }
    out
}

/// The edges of the best path from `action` back to `target` over traversed closure
/// edges, action first: fewest non-witness edges first, then fewest edges (Dijkstra on
/// the lexicographic cost, `O(E log V)`); empty when `target` is not reached (or is
/// the action).
pub fn path<'e>(closure: &'e [Edge], action: &SpanId, target: &SpanId) -> Vec<&'e Edge> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    // child → the traversed edges into it
    let mut up: BTreeMap<&SpanId, Vec<&Edge>> = BTreeMap::new();
    for e in closure.iter().filter(|e| e.kind.is_traversed()) {
        if e.parent.is_some() {
            up.entry(&e.child).or_default().push(e);
        }
    }
    // node → (cost, the edge it was reached by)
    type Best<'a, 'e> = BTreeMap<&'a SpanId, ((usize, usize), Option<&'e Edge>)>;
    let mut best: Best = BTreeMap::new();
    best.insert(action, ((0, 0), None));
    let mut heap = BinaryHeap::from([Reverse(((0usize, 0usize), action))]);
    let mut done: BTreeSet<&SpanId> = BTreeSet::new();
    while let Some(Reverse((cost, c))) = heap.pop() {
        if !done.insert(c) {
            continue;
        }
        if c == target {
            break;
        }
        for &e in up.get(c).map(Vec::as_slice).unwrap_or(&[]) {
            let Some(p) = e.parent.as_ref() else { continue };
            let next = (
                cost.0 + usize::from(e.kind != EdgeKind::HashMatch),
                cost.1 + 1,
            );
            if best.get(p).is_none_or(|(b, _)| next < *b) {
                best.insert(p, (next, Some(e)));
                heap.push(Reverse((next, p)));
            }
        }
    }
    let mut edges = Vec::new();
    let mut at = target;
    while let Some((_, Some(e))) = best.get(at) {
        edges.push(*e);
        at = &e.child;
        if edges.len() > closure.len() {
            break;
        }
    }
    edges.reverse();
    edges
}
