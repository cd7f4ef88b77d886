//! The history of a conversation as the record shows it: which model request came
//! before which, and whether each request's input **extends** the history its
//! predecessor held or was **rewritten** on the way (a context mutation that no span
//! logged: a history processor, a compaction, a summary written by the application).
//!
//! A model request (a `chat` span whose input was derived from its messages) belongs to
//! one conversation: its `gen_ai.conversation.id` (OpenInference: `session.id`), else
//! its agent name within its run: the nearest `invoke_agent` ancestor that holds more
//! than one request (OpenInference marks any span named like an agent `AGENT`,
//! LangGraph's one-call `agent` node included), else its outermost ancestor. A
//! summariser agent run inside another agent's run is a conversation of its own, and
//! so is a **side call**: a request whose output text a later request takes in as a
//! system or compaction part (a memory that summarises with a model call of its own,
//! such as LlamaIndex's `ChatSummaryMemoryBuffer`, whose summary becomes a system
//! message): its input is the summariser's prompt, not the agent's history, so it is
//! no turn of the agent's conversation. Within a
//! conversation the requests are taken in start order; a request recorded inside
//! another request's interval (the same call recorded twice by two instrumentations,
//! or a model call a history processor made) is not part of the chain.
//!
//! For two consecutive requests `P` then `C` of one conversation, with `Known(P)` the
//! part hashes of `P`'s input and output, and `C`'s **new parts** its input parts
//! outside `Known(P)` (system parts included: frameworks put summaries in system
//! messages):
//! - **unlogged** ([`Change::Unlogged`]): `P` produced parts, `C` holds none of them,
//!   no tool result and no new part: the instrumentation does not log the whole
//!   history it sent (a capture gap, reason `history_truncated`);
//! - **extended**: `P`'s non-system messages are a prefix of `C`'s (compared by part
//!   hashes, not roles: group chats show each agent its own messages as `assistant`):
//!   what follows them is what the run appended (the model's answer, tool results, a
//!   new user turn), and a changed system message is instructions rendered anew;
//! - **dropped**: not an extension, but every part is one `P` already held: messages
//!   were removed and nothing was written in their place (the parts that remain keep
//!   their producers);
//! - **rewritten**: not an extension, and some part is new: a transformation the
//!   record does not show as its own step wrote it. A compaction part or
//!   `gen_ai.conversation.compacted` makes a request rewritten whatever its prefix.
//!
//! A part that a rewrite wrote stays what it is when later requests carry it on: it is
//! **carried** from the request it was new in ([`Turn::carried`]).
//!
//! **Across runs.** A framework that records each run as a trace of its own, with no
//! agent span and no conversation id (LlamaIndex's `agent.run`), still continues one
//! conversation from run to run through what it keeps (a memory, a chat store). The
//! first request `C` of a run without a conversation id **continues** the latest
//! request `P` under another outermost span, available before `C` started, whose input
//! or output holds one of `C`'s history parts (a non-system part before `C`'s trailing
//! user turn): the record shows `C`'s history repeats what `P` held. Then `P` is `C`'s
//! predecessor, with these differences: the trailing user turn is the new run's input,
//! not a rewrite; every other part `P` did not hold is new, system parts included, and
//! makes `C` rewritten even when its history otherwise extends `P`'s (a system message
//! that no logged step produced and that differs from the run before is what a memory
//! or a summary wrote, not outside input: a memory block rendered into the system
//! message); a history that only lost messages (a memory flush) is dropped, never
//! unlogged; and a part a rewrite of `P`'s run wrote is carried on. The evidence is
//! content identity only: a run that holds nothing of an earlier one (a fresh memory)
//! continues nothing.
//!
//! The **sources** of a request are the spans whose outputs its history held just
//! before it was sent: its predecessor and the tool calls that answered the
//! predecessor's tool calls (by call id, else by the arguments' hash) and ended before
//! the request did. A rewrite folded into the request could have read any of them, so
//! the graph's folded edges ([`crate::graph`]) point at each.
//!
//! Design constraints:
//! - Pure and deterministic: a function of the trace alone (conversation ids, nesting,
//!   times, part hashes and their metadata), so a sealed trace read back gives the
//!   same answer as the export it came from.
//! - System and developer messages are left out of the prefix comparison
//!   (instructions rendered anew for each request, a summariser that drops the
//!   agent's prompt), but not out of the new parts: in a request that is not an
//!   extension, a system part no earlier request held is as new as any other.
//! - `O(parts · log n)` over the whole trace.

use std::collections::{BTreeMap, BTreeSet};

use crate::hash::{ArtifactHash, SpanId};
use crate::model::{Node, Operation, PartKind, Trace};

/// How a request's input relates to its predecessor's history.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Change {
    /// The first request of its conversation in the window.
    First,
    /// The predecessor's messages are a prefix of this request's.
    Extended,
    /// Messages were removed; nothing new was written in their place.
    Dropped,
    /// A part no earlier request held was written into the history.
    Rewritten,
    /// The instrumentation did not log the history it sent.
    Unlogged,
}

impl Change {
    /// The name used in JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::First => "first",
            Self::Extended => "extended",
            Self::Dropped => "dropped",
            Self::Rewritten => "rewritten",
            Self::Unlogged => "unlogged",
        }
    }
}

/// One request's place in its conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Turn {
    /// The previous request of the conversation.
    pub previous: Option<SpanId>,
    /// How this request's input relates to it.
    pub change: Change,
    /// Input part indices that are new (only for [`Change::Rewritten`]).
    pub new_parts: BTreeSet<usize>,
    /// The spans whose outputs the history held just before this request.
    pub sources: Vec<SpanId>,
    /// The request carries an explicit compaction mark (a compaction part, or
    /// `gen_ai.conversation.compacted`).
    pub compacted: bool,
    /// Input parts carried from an earlier rewritten request of the conversation,
    /// where they were new: part index → that request.
    pub carried: BTreeMap<usize, SpanId>,
}

/// A request recorded inside another span that consumed something else: the model
/// call ran in code that the enclosing span's step runs (a history processor, a
/// guardrail, an agent used as a tool).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nested {
    /// The nearest enclosing model request or tool call.
    pub within: SpanId,
    /// The spans whose outputs that code could read: the enclosing request's sources,
    /// or the enclosing tool call itself.
    pub sources: Vec<SpanId>,
}

/// Every request's turn, and the requests nested in other steps.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Histories {
    turns: BTreeMap<SpanId, Turn>,
    nested: BTreeMap<SpanId, Nested>,
}

impl Histories {
    /// The turn of request `id`, when it is a request with derived messages.
    pub fn turn(&self, id: &SpanId) -> Option<&Turn> {
        self.turns.get(id)
    }

    /// Where request `id` is nested, when it ran inside another step.
    pub fn nested(&self, id: &SpanId) -> Option<&Nested> {
        self.nested.get(id)
    }

    /// Every turn, in span-id order.
    pub fn turns(&self) -> impl Iterator<Item = (&SpanId, &Turn)> {
        self.turns.iter()
    }
}

/// A model request whose input was derived from its messages.
pub fn is_request(n: &Node) -> bool {
    n.operation == Some(Operation::Chat) && !n.input_meta.is_empty()
}

fn is_system(role: Option<&str>) -> bool {
    matches!(role, Some("system" | "developer"))
}

/// The non-system messages of a request's input, as part hashes, in order.
fn messages(n: &Node) -> Vec<Vec<&ArtifactHash>> {
    let mut out: Vec<(Option<u32>, Vec<&ArtifactHash>)> = Vec::new();
    for (h, m) in n.input_parts.iter().zip(&n.input_meta) {
        if is_system(m.role.as_deref()) {
            continue;
        }
        match out.last_mut() {
            Some((at, parts)) if *at == m.message => parts.push(h),
            _ => out.push((m.message, vec![h])),
        }
    }
    out.into_iter().map(|(_, p)| p).collect()
}

/// Whether `c` carries an explicit compaction mark.
fn compacted(c: &Node) -> bool {
    c.compacted || c.input_meta.iter().any(|m| m.kind == PartKind::Compaction)
}

/// The conversation key of each request.
fn conversations(trace: &Trace) -> BTreeMap<String, Vec<&Node>> {
    let invoker = trace.nearest_ancestor(|n| n.operation == Some(Operation::InvokeAgent));
    // Agent spans that hold more than one request: an agent run, not one call's wrapper.
    let mut held: BTreeMap<&SpanId, usize> = BTreeMap::new();
    for n in trace.nodes().filter(|n| is_request(n)) {
        if let Some(a) = invoker.get(&n.span_id) {
            *held.entry(a).or_default() += 1;
        }
    }
    let run_of = |id: &SpanId| -> Option<SpanId> {
        let mut at = invoker.get(id)?;
        let mut steps = 0usize;
        loop {
            if held.get(at).copied().unwrap_or(0) > 1 {
                return Some(at.clone());
            }
            at = invoker.get(at)?;
            steps += 1;
            if steps > trace.len() {
                return None;
            }
        }
    };
    let outermost = outermost(trace);
    let mut groups: BTreeMap<String, Vec<&Node>> = BTreeMap::new();
    for n in trace.nodes().filter(|n| is_request(n)) {
        let key = match &n.conversation {
            Some(c) => format!("conversation:{c}"),
            None => format!(
                "run:{}:{}",
                run_of(&n.span_id)
                    .as_ref()
                    .or_else(|| outermost.get(&n.span_id))
                    .unwrap_or(&n.span_id),
                n.agent.as_deref().unwrap_or("")
            ),
        };
        groups.entry(key).or_default().push(n);
    }
    groups
}

/// Every span's outermost ancestor present in the trace (itself for a root).
fn outermost(trace: &Trace) -> BTreeMap<SpanId, SpanId> {
    let mut out = BTreeMap::new();
    for n in trace.nodes() {
        let mut at = n;
        let mut steps = 0usize;
        while let Some(p) = at.parent.as_ref().and_then(|p| trace.get(p)) {
            at = p;
            steps += 1;
            if steps > trace.len() {
                break;
            }
        }
        out.insert(n.span_id.clone(), at.span_id.clone());
    }
    out
}

/// The tool calls that answered `p`'s tool calls and ended by `until`: by call id,
/// else (a tool span that records no call id) by an input part equal to one of `p`'s
/// tool-call outputs, started after `p`.
fn answers<'t>(trace: &'t Trace, p: &Node, until: u64) -> Vec<&'t SpanId> {
    let ids: BTreeSet<&str> = p
        .output_meta
        .iter()
        .filter(|m| matches!(m.kind, PartKind::ToolCall | PartKind::SingleArgument))
        .filter_map(|m| m.call_id.as_deref())
        .chain(
            p.opaque_outputs
                .iter()
                .filter(|o| o.kind == PartKind::ToolCall)
                .map(|o| o.call_id.as_str()),
        )
        .collect();
    let calls: BTreeSet<&ArtifactHash> = p
        .output_parts
        .iter()
        .zip(&p.output_meta)
        .filter(|(_, m)| matches!(m.kind, PartKind::ToolCall | PartKind::SingleArgument))
        .map(|(h, _)| h)
        .collect();
    trace
        .nodes()
        .filter(|t| t.operation == Some(Operation::ExecuteTool))
        .filter(|t| t.start_ns >= p.start_ns && t.available_ns() <= until)
        .filter(|t| {
            let by_id = t
                .input_meta
                .iter()
                .filter_map(|m| m.call_id.as_deref())
                .chain(t.opaque_inputs.iter().map(|o| o.call_id.as_str()))
                .any(|id| ids.contains(id));
            let by_args = t.input_parts.iter().any(|h| calls.contains(h));
            by_id || by_args
        })
        .map(|t| &t.span_id)
        .collect()
}

/// The turn of `c` after `p`.
fn turn(trace: &Trace, p: &Node, c: &Node) -> Turn {
    let known: BTreeSet<&ArtifactHash> = p
        .input_parts
        .iter()
        .chain(&p.output_parts)
        .chain(p.output_hash.iter())
        .collect();
    let new_parts: BTreeSet<usize> = c
        .input_parts
        .iter()
        .zip(&c.input_meta)
        .enumerate()
        .filter(|(_, (h, _))| !known.contains(h))
        .map(|(i, _)| i)
        .collect();
    let holds_output = p.output_parts.iter().any(|h| c.input_parts.contains(h));
    let holds_result = c.input_meta.iter().any(|m| m.kind == PartKind::ToolResult);
    let (pm, cm) = (messages(p), messages(c));
    let extends = cm.len() >= pm.len() && cm[..pm.len()] == pm[..];
    let marked = compacted(c);
    let change =
        if !p.output_meta.is_empty() && !holds_output && !holds_result && new_parts.is_empty() {
            Change::Unlogged
        } else if marked || (!extends && !new_parts.is_empty()) {
            Change::Rewritten
        } else if !extends {
            Change::Dropped
        } else {
            Change::Extended
        };
    turn_after(trace, p, c, change, new_parts, marked)
}

/// The side calls of `trace` (module documentation): requests an output text part of
/// which a request that started after them holds as a system, developer or
/// compaction part.
fn side_calls(trace: &Trace) -> BTreeSet<&SpanId> {
    let mut taken: BTreeMap<&ArtifactHash, u64> = BTreeMap::new();
    for m in trace.nodes().filter(|n| is_request(n)) {
        for (h, meta) in m.input_parts.iter().zip(&m.input_meta) {
            if is_system(meta.role.as_deref()) || meta.kind == PartKind::Compaction {
                let t = taken.entry(h).or_insert(m.start_ns);
                *t = (*t).max(m.start_ns);
            }
        }
    }
    trace
        .nodes()
        .filter(|n| is_request(n))
        .filter(|n| {
            n.output_parts.iter().zip(&n.output_meta).any(|(h, meta)| {
                meta.kind == PartKind::Text && taken.get(h).is_some_and(|&t| t >= n.available_ns())
            })
        })
        .map(|n| &n.span_id)
        .collect()
}

/// The index of the first part of `c`'s trailing run of user messages: the turn a new
/// run starts with (its user's message), not history.
fn trailing_user(c: &Node) -> usize {
    let mut at = c.input_parts.len();
    while at > 0
        && c.input_meta
            .get(at - 1)
            .is_some_and(|m| matches!(m.role.as_deref(), Some("user" | "human")))
    {
        at -= 1;
    }
    at
}

/// The part hashes `p`'s history held: its input and output.
fn known(p: &Node) -> BTreeSet<&ArtifactHash> {
    p.input_parts
        .iter()
        .chain(&p.output_parts)
        .chain(p.output_hash.iter())
        .collect()
}

/// The request of another run that `c`, the first request of its run, continues
/// (module documentation, "Across runs"): the latest request available before `c`
/// started, under another outermost span, whose input or output holds one of `c`'s
/// history parts (a non-system part before its trailing user turn).
fn continued<'t>(
    c: &Node,
    candidates: &[&'t Node],
    outermost: &BTreeMap<SpanId, SpanId>,
) -> Option<&'t Node> {
    if c.conversation.is_some() {
        return None;
    }
    let history: Vec<&ArtifactHash> = c.input_parts[..trailing_user(c)]
        .iter()
        .zip(&c.input_meta)
        .filter(|(_, m)| !is_system(m.role.as_deref()))
        .map(|(h, _)| h)
        .collect();
    if history.is_empty() {
        return None;
    }
    let root = outermost.get(&c.span_id);
    candidates
        .iter()
        .filter(|p| p.available_ns() <= c.start_ns && outermost.get(&p.span_id) != root)
        .filter(|p| {
            let k = known(p);
            history.iter().any(|h| k.contains(h))
        })
        .max_by(|a, b| (a.available_ns(), &a.span_id).cmp(&(b.available_ns(), &b.span_id)))
        .copied()
}

/// The turn of `c`, the first request of a run, after `p`, the request of an
/// earlier run it continues: the trailing user turn is the new run's input, not a
/// rewrite; any other part `p` did not hold (a system message rendered with what a
/// memory or a summary wrote included) is new, and makes the request rewritten even
/// when it otherwise extends `p`'s history; without new parts it is an extension or
/// a drop (a memory that flushed messages), never a logging gap.
fn continued_turn(trace: &Trace, p: &Node, c: &Node) -> Turn {
    let k = known(p);
    let tail = trailing_user(c);
    let new_parts: BTreeSet<usize> = (0..tail)
        .filter(|&i| !k.contains(&c.input_parts[i]))
        .collect();
    let (pm, cm) = (messages(p), messages(c));
    let extends = cm.len() >= pm.len() && cm[..pm.len()] == pm[..];
    let marked = compacted(c);
    let change = if marked || !new_parts.is_empty() {
        Change::Rewritten
    } else if !extends {
        Change::Dropped
    } else {
        Change::Extended
    };
    turn_after(trace, p, c, change, new_parts, marked)
}

/// The turn from `p` to `c` once its change is known: its sources are `p` and the
/// answers to `p` available when `c` started; new parts are kept for a rewrite only.
fn turn_after(
    trace: &Trace,
    p: &Node,
    c: &Node,
    change: Change,
    new_parts: BTreeSet<usize>,
    marked: bool,
) -> Turn {
    let mut sources: Vec<SpanId> = vec![p.span_id.clone()];
    sources.extend(answers(trace, p, c.available_ns()).into_iter().cloned());
    sources.sort();
    sources.dedup();
    Turn {
        previous: Some(p.span_id.clone()),
        change,
        new_parts: if change == Change::Rewritten {
            new_parts
        } else {
            BTreeSet::new()
        },
        sources,
        compacted: marked,
        carried: BTreeMap::new(),
    }
}

/// Analyses every conversation of `trace` (module documentation).
pub fn analyse(trace: &Trace) -> Histories {
    let mut out = Histories::default();
    let side = side_calls(trace);
    let mut chains: Vec<Vec<&Node>> = Vec::new();
    for chats in conversations(trace).values_mut() {
        chats.retain(|c| !side.contains(&c.span_id));
        let all = chats.clone();
        chats.retain(|c| {
            !all.iter().any(|o| {
                o.span_id != c.span_id
                    && o.start_ns <= c.start_ns
                    && c.end_ns <= o.end_ns
                    && (o.start_ns, o.end_ns) != (c.start_ns, c.end_ns)
            })
        });
        chats.sort_by(|a, b| (a.start_ns, &a.span_id).cmp(&(b.start_ns, &b.span_id)));
        if !chats.is_empty() {
            chains.push(chats.clone());
        }
    }
    // Runs in the order they started, so that a run continued by a later one has its
    // rewrites recorded first.
    chains.sort_by(|a, b| (a[0].start_ns, &a[0].span_id).cmp(&(b[0].start_ns, &b[0].span_id)));
    let outermost = outermost(trace);
    let all: Vec<&Node> = chains.iter().flatten().copied().collect();
    // A part first written by a rewrite → the request it was new in, per chain.
    let mut first_news: Vec<BTreeMap<&ArtifactHash, &SpanId>> = Vec::new();
    let chain_of: BTreeMap<&SpanId, usize> = chains
        .iter()
        .enumerate()
        .flat_map(|(i, ch)| ch.iter().map(move |n| (&n.span_id, i)))
        .collect();
    for chats in &chains {
        let mut previous: Option<&Node> = None;
        let mut first_new: BTreeMap<&ArtifactHash, &SpanId> = BTreeMap::new();
        let before = continued(chats[0], &all, &outermost);
        if let Some(p) = before {
            // What the continued run's rewrites wrote is carried on from there.
            if let Some(m) = chain_of.get(&p.span_id).and_then(|&j| first_news.get(j)) {
                first_new.extend(m.iter().map(|(h, s)| (*h, *s)));
            }
        }
        for c in chats.iter() {
            let t = match (previous, before) {
                (None, Some(p)) => continued_turn(trace, p, c),
                (None, None) => Turn {
                    previous: None,
                    change: Change::First,
                    new_parts: if compacted(c) {
                        (0..c.input_parts.len())
                            .filter(|&i| {
                                c.input_meta
                                    .get(i)
                                    .is_some_and(|m| m.kind == PartKind::Compaction)
                            })
                            .collect()
                    } else {
                        BTreeSet::new()
                    },
                    sources: Vec::new(),
                    compacted: compacted(c),
                    carried: BTreeMap::new(),
                },
                (Some(p), _) => turn(trace, p, c),
            };
            let mut t = t;
            for (i, h) in c.input_parts.iter().enumerate() {
                if t.new_parts.contains(&i) {
                    first_new.entry(h).or_insert(&c.span_id);
                } else if let Some(first) = first_new.get(h) {
                    t.carried.insert(i, (*first).clone());
                }
            }
            out.turns.insert(c.span_id.clone(), t);
            previous = Some(c);
        }
        first_news.push(first_new);
    }
    nest(trace, &mut out);
    out
}

/// Records, for every request nested in another request or tool call, where it ran
/// and what that code could read. A request whose input equals the enclosing
/// request's is the same call recorded twice, not nested code.
fn nest(trace: &Trace, out: &mut Histories) {
    let within =
        trace.nearest_ancestor(|n| is_request(n) || n.operation == Some(Operation::ExecuteTool));
    for n in trace.nodes().filter(|n| is_request(n)) {
        let Some(e) = within.get(&n.span_id).and_then(|e| trace.get(e)) else {
            continue;
        };
        if is_request(e) && e.input_parts == n.input_parts {
            continue;
        }
        let sources = if is_request(e) {
            out.turns
                .get(&e.span_id)
                .map(|t| t.sources.clone())
                .unwrap_or_default()
        } else {
            vec![e.span_id.clone()]
        };
        out.nested.insert(
            n.span_id.clone(),
            Nested {
                within: e.span_id.clone(),
                sources,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::PartMeta;

    fn sid(n: u64) -> SpanId {
        SpanId::parse(&format!("{n:016x}")).unwrap()
    }

    fn h(s: &str) -> ArtifactHash {
        ArtifactHash::of(s.as_bytes())
    }

    /// A request at `t` with input messages `(role, [text])` and output texts.
    fn request(id: u64, t: u64, input: &[(&str, &[&str])], output: &[&str]) -> Node {
        let mut n = Node::new(sid(id), "chat m", t);
        n.end_ns = t + 10;
        n.operation = Some(Operation::Chat);
        n.conversation = Some("c1".into());
        for (i, (role, parts)) in input.iter().enumerate() {
            for p in *parts {
                n.input_parts.push(h(p));
                n.input_meta.push(PartMeta {
                    role: Some(role.to_string()),
                    message: Some(i as u32),
                    ..PartMeta::new(PartKind::Text)
                });
            }
        }
        for p in output {
            n.output_parts.push(h(p));
            n.output_meta.push(PartMeta {
                role: Some("assistant".into()),
                message: Some(0),
                ..PartMeta::new(PartKind::Text)
            });
        }
        n
    }

    fn trace(nodes: Vec<Node>) -> Trace {
        let mut t = Trace::new();
        for n in nodes {
            t.insert(n).unwrap();
        }
        t
    }

    #[test]
    fn an_appended_history_extends_and_a_replaced_one_is_rewritten() {
        let sys: (&str, &[&str]) = ("system", &["S"]);
        let t = trace(vec![
            request(1, 100, &[sys, ("user", &["U"])], &["A1"]),
            request(
                2,
                200,
                &[
                    sys,
                    ("user", &["U"]),
                    ("assistant", &["A1"]),
                    ("user", &["U2"]),
                ],
                &["A2"],
            ),
            request(
                3,
                300,
                &[sys, ("user", &["SUMMARY"]), ("user", &["U3"])],
                &["A3"],
            ),
            request(4, 400, &[sys, ("user", &["SUMMARY"])], &["A4"]),
        ]);
        let hs = analyse(&t);
        assert_eq!(hs.turn(&sid(1)).unwrap().change, Change::First);
        assert_eq!(hs.turn(&sid(2)).unwrap().change, Change::Extended);
        let third = hs.turn(&sid(3)).unwrap();
        assert_eq!(third.change, Change::Rewritten);
        // SUMMARY and U3 are new; the system part is not history.
        assert_eq!(third.new_parts, BTreeSet::from([1, 2]));
        assert_eq!(third.sources, vec![sid(2)]);
        // Request 4 holds nothing of request 3's output, no tool result and nothing
        // new: from the record alone that is a history the instrumentation cut.
        assert_eq!(hs.turn(&sid(4)).unwrap().change, Change::Unlogged);
    }

    #[test]
    fn a_run_that_repeats_an_earlier_runs_history_continues_it() {
        // Three runs, each a trace of its own (a root span, no conversation id).
        let run = |id: u64, t: u64| {
            let mut r = Node::new(sid(id), "FunctionAgent.run", t);
            r.end_ns = t + 50;
            r
        };
        let req = |id: u64, root: u64, t: u64, input: &[(&str, &[&str])], output: &[&str]| {
            let mut n = request(id, t, input, output);
            n.conversation = None;
            n.parent = Some(sid(root));
            n
        };
        let t = trace(vec![
            run(10, 95),
            req(
                1,
                10,
                100,
                &[("system", &["S"]), ("user", &["U1"])],
                &["A1"],
            ),
            run(20, 195),
            // The memory kept the first turn and rendered a block into a second
            // system message; U2 is the new run's own message.
            req(
                2,
                20,
                200,
                &[
                    ("system", &["S"]),
                    ("system", &["MEMORY"]),
                    ("user", &["U1"]),
                    ("assistant", &["A1"]),
                    ("user", &["U2"]),
                ],
                &["A2"],
            ),
            run(30, 295),
            // A fresh memory: nothing of the runs before.
            req(
                3,
                30,
                300,
                &[("system", &["S"]), ("user", &["U3"])],
                &["A3"],
            ),
            run(40, 395),
            // The memory flushed the second run's first messages and wrote nothing.
            req(
                4,
                40,
                400,
                &[
                    ("system", &["S"]),
                    ("assistant", &["A2"]),
                    ("user", &["U4"]),
                ],
                &["A4"],
            ),
        ]);
        let hs = analyse(&t);
        let second = hs.turn(&sid(2)).unwrap();
        assert_eq!(second.previous, Some(sid(1)));
        assert_eq!(second.change, Change::Rewritten);
        // The rendered block is new; the new run's message is not a rewrite.
        assert_eq!(second.new_parts, BTreeSet::from([1]));
        assert_eq!(second.sources, vec![sid(1)]);
        assert_eq!(hs.turn(&sid(3)).unwrap().change, Change::First);
        let fourth = hs.turn(&sid(4)).unwrap();
        assert_eq!(fourth.previous, Some(sid(2)));
        // The block the second run's rewrite wrote is not carried (flushed); what
        // remains lost messages only: dropped, not a logging gap.
        assert_eq!(fourth.change, Change::Dropped);
    }

    #[test]
    fn a_history_that_lacks_the_previous_answer_and_adds_nothing_is_unlogged() {
        let t = trace(vec![
            request(1, 100, &[("user", &["U"])], &["A1"]),
            request(2, 200, &[("user", &["U"])], &["A2"]),
        ]);
        assert_eq!(analyse(&t).turn(&sid(2)).unwrap().change, Change::Unlogged);
    }

    #[test]
    fn a_compaction_mark_rewrites_even_an_extension() {
        let mut c = request(
            2,
            200,
            &[("user", &["U"]), ("assistant", &["A1"]), ("user", &["X"])],
            &["A2"],
        );
        c.compacted = true;
        let t = trace(vec![request(1, 100, &[("user", &["U"])], &["A1"]), c]);
        let turn = analyse(&t).turn(&sid(2)).cloned().unwrap();
        assert_eq!(turn.change, Change::Rewritten);
        assert_eq!(turn.new_parts, BTreeSet::from([2]));
    }

    #[test]
    fn a_request_inside_another_request_is_nested_code_unless_it_is_the_same_call() {
        let outer = request(1, 100, &[("user", &["U"])], &["A1"]);
        let mut summariser = request(2, 105, &[("user", &["Summarise: U"])], &["S"]);
        summariser.end_ns = 106;
        summariser.parent = Some(sid(1));
        summariser.conversation = Some("c2".into());
        let mut twin = request(3, 101, &[("user", &["U"])], &["A1"]);
        twin.end_ns = 102;
        twin.parent = Some(sid(1));
        let t = trace(vec![outer, summariser, twin]);
        let hs = analyse(&t);
        assert_eq!(hs.nested(&sid(2)).unwrap().within, sid(1));
        assert!(hs.nested(&sid(3)).is_none());
        // The twin is inside the outer call's interval: not a turn of its own.
        assert!(hs.turn(&sid(3)).is_none());
    }
}
