//! Edges derived from artifact hashes, each graded on its own and named by the rule
//! that matched (CONVENTIONS, "Deriving the closure", extended for derived parts:
//! [`crate::genai`], for context mutations the record shows only as a changed history:
//! [`crate::history`], and for reads of durable state: SPEC §9).
//!
//! **Availability, not start order.** A span `P` can have produced what a span `C`
//! consumed when `P`'s output was available before `C`'s was: `P` ended no later than
//! `C` ([`Node::available_ns`]), `P ≠ C`. A call nested inside the consuming span
//! counts (frameworks run history processors and guardrails inside the request they
//! prepare); a span that started earlier but was still running when `C` ended does
//! not.
//!
//! For every consumed part `h` of a span `C` the first rule that applies decides:
//! 1. `h` is a root (`audita.roots`): no edge;
//! 2. **hash_match P→C**: an available span `P` produced `h`. For derived parts the call
//!    ids are compared too: a producer with the consumer's call id first (rules
//!    `tool_call.id+arguments`, `tool_call.id+single_argument`, `tool_result.id+content`),
//!    else one of the two has no call id (`tool_call.arguments`,
//!    `tool_call.single_argument`, `tool_result.content`, `assistant_message`,
//!    `message_text`, `message_part`); a producer with a **different** call id never
//!    matches. Declared parts match any producer (rule `audita`);
//! 3. **replayed P→C** (rule `replayed_history`, a non-witness edge): no span produced
//!    `h`, but `h` is a part of an assistant message `m[k]` in a later model input
//!    `m[0..n]` whose first `k` messages are exactly the whole input of one earlier
//!    model call `P`, and `P` recorded no structured output (its tool calls survive only
//!    as text, as openai-agents-v2 writes them). The artifact is content-identical, but
//!    that `P` produced it is inferred from input identity, not recorded: the edge is
//!    walked for reachability and refuses a causal claim like a folded edge;
//! 4. **folded H→C** (rule `audita.mutation`): `h` is the output of a mutation recorded
//!    on span `H`;
//! 5. **folded S→C** (rules `history_rewritten`, `compaction`): `C` is a model request
//!    whose history was rewritten ([`crate::history`]: not an extension of its
//!    predecessor's, or marked compacted) and `h` is one of its new parts: a
//!    transformation no span logged wrote it. One edge from each **source** of the
//!    request (its predecessor and the tool calls answering it), walked for
//!    reachability; a compacted first request of a conversation has no source in the
//!    window and its new parts are **window exits** instead. A later request that
//!    carries such a part on has a folded edge from the request it was new in (rule
//!    `rewritten_earlier`);
//! 6. **call_id P→C** (rule `call_id`, non-witness): the part has a call id and an
//!    earlier span recorded the matching tool call or result without content;
//! 7. **window_exit**: a link target or the `parentSpanId` of `C` is absent from the
//!    export (the absent ids are the locator);
//! 8. **folded S→C** (rule `nested_unlogged_input`): a derived user message part
//!    without producer in a model request that ran inside another request or tool call
//!    ([`crate::history::Nested`]), unless the enclosing step's history already held
//!    it: the code around it wrote the part; one edge from each span that code could
//!    read (a window exit when there is none). The nested call's own instructions
//!    (system and developer parts) are external input like any agent's;
//! 9. **folded R→C** (rule `quotes_read`): a derived user or system part without
//!    producer that holds verbatim what an available span `R` returned from durable
//!    state (retrieved documents pasted into a prompt by code no span logs);
//!    but a **hash_match R→C** (rule `contains_result`) when what it holds is the
//!    **whole** result of a tool span `R` that reads no durable state, and `C`
//!    recorded its input completely. Why this meets the memo's condition: `C`'s
//!    recorded input contains every byte of `R`'s output artifact, so it could not have
//!    been produced without `R` (the memo's test of a witness edge), and `C` is itself
//!    a logged node with its input and output hashes — the model call that transforms
//!    what it read (LlamaIndex's `ChatSummaryMemoryBuffer` hands its summariser the
//!    history as one transcript string). The code that wrapped the result into the
//!    string changed no byte of it: a verbatim embedding, not a context mutation
//!    (compaction, summarisation, truncation, reordering). A part of a result, a
//!    paraphrase, or a record read from durable state never counts (similarity is not
//!    identity);
//!    **external input** otherwise: no edge, the closure ends there as at a root. After rule 7, so that a
//!    partial export cannot pass an upstream agent's message off as external; such
//!    parts are not added to [`Trace::roots`];
//! 10. **hash_mismatch P→C**: `C` has a `framework` link to a present span `P` none
//!     of whose outputs `C` consumed (an error naming both hashes; not traversed);
//! 11. **window_exit** otherwise.
//!
//! A part recorded without content ([`crate::model::Opaque`]) gives a **call_id**
//! edge to the latest available span that recorded the same call id (tool call to tool
//! span, tool span to tool result), or nothing.
//!
//! **Writes and reads** (the memo: "an edge exists only when the read-set intersects a
//! prior write-set with matching hash"). Every declared read-set entry is a
//! **hash_match W→C** when an available span `W` wrote the same record id with the
//! same hash, else a **window_exit** with the entry as boundary. A span without a
//! declared read-set reads what it returned ([`Node::returned`]): each returned
//! artifact that an available other span stored ([`Node::stored`]: a tool's
//! arguments, a memory write's records, a declared write-set) byte for byte is a
//! **hash_match W→C** (rule `write_read`); one nobody in the window stored is a
//! **window_exit** naming it (rule `unlogged_write`) when `C` reads durable state
//! ([`Node::store_read`]), and the span's own output otherwise; a document returned by
//! id only is a **similarity W→C** to the span that wrote that id (rule
//! `record_id_only`), else a window exit. A stored artifact contained verbatim in a
//! span's result ([`Node::contains`]) is a **similarity W→C** (rule `contains_write`):
//! a plausible mechanism, not an identity. Every `embedding_similarity` link is a
//! **similarity S→C**.
//!
//! Design constraints:
//! - Nesting gives no edge by itself; links give no edge except similarity links (a
//!   `framework` link is a narrative claim, only checked against hashes). Nesting only
//!   locates window exits and the code a nested request ran in (rule 8).
//! - Deterministic: when several spans produced `h` (content identity), the edge goes
//!   to the one that started last among the available ones, ties to the smaller span
//!   id; likewise for writers, and for mutations folded on several spans.
//! - [`Graph::new`] indexes producers, replayed outputs, call ids, folded outputs,
//!   writes and stores once, and analyses every conversation's history once, so
//!   deriving every node's edges is `O(parts · log n)` plus the candidates compared.
//! - An edge whose artifact was cut by the instrumentation on either side says so
//!   (`truncated`); it keeps its grade (both records are cut alike and paired).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use sha2::{Digest, Sha256};

use crate::hash::{ArtifactHash, Entry, SpanId};
use crate::history::{self, Histories};
use crate::model::{Capture, LinkBasis, Node, PartKind, PartMeta, Stored, Trace};

/// The grade of one edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EdgeKind {
    /// The child consumed exactly what the parent produced (or read exactly what it
    /// wrote): a witness edge.
    HashMatch,
    /// The child consumed the output of a mutation folded into the parent span.
    Folded,
    /// Linked by embedding proximity: a hypothesis, not an edge of identity.
    Similarity,
    /// The child consumed what a later model input replays as the parent's output,
    /// which the parent did not record in structured form: inferred, not recorded.
    Replayed,
    /// Paired by a tool call id only, the content unrecorded on one side.
    CallId,
    /// The consumed artifact has no producer inside the window.
    WindowExit,
    /// The framework's link claims a parent whose outputs the child did not consume.
    HashMismatch,
}

impl EdgeKind {
    /// The name used in JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::HashMatch => "hash_match",
            Self::Folded => "folded",
            Self::Similarity => "similarity",
            Self::Replayed => "replayed",
            Self::CallId => "call_id",
            Self::WindowExit => "window_exit",
            Self::HashMismatch => "hash_mismatch",
        }
    }

    /// Whether an edge of this kind refuses a causal claim when it lies in the closure.
    pub fn is_offending(self) -> bool {
        matches!(
            self,
            Self::Folded | Self::Similarity | Self::Replayed | Self::CallId | Self::HashMismatch
        )
    }

    /// Whether the backward walk continues into the parent (for reachability).
    pub fn is_traversed(self) -> bool {
        matches!(
            self,
            Self::HashMatch | Self::Folded | Self::Similarity | Self::Replayed | Self::CallId
        )
    }
}

/// What part of the child an edge explains.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Basis {
    /// An `audita.input.parts` entry or a derived input part.
    InputPart,
    /// A part recorded without content (paired by call id).
    OpaquePart,
    /// An `audita.read_set` entry.
    ReadSet,
    /// An `embedding_similarity` link.
    SimilarityLink,
    /// An artifact the span returned ([`Node::returned`]).
    Returned,
    /// A stored artifact the span's result contains ([`Node::contains`]).
    Contained,
}

impl Basis {
    /// The name used in JSON output.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::InputPart => "input_part",
            Self::OpaquePart => "opaque_part",
            Self::ReadSet => "read_set",
            Self::SimilarityLink => "similarity_link",
            Self::Returned => "returned",
            Self::Contained => "contained",
        }
    }
}

/// Where the closure leaves the window, or cannot see: the artifact to look for when
/// extending it, or the span whose record has a gap.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Boundary {
    /// The artifact without a producer in the window (for a content gap: the span's
    /// output or input hash, else the sha256 of `span:<id>`).
    pub artifact: ArtifactHash,
    /// The record id, for a read-set entry.
    pub record_id: Option<String>,
    /// Span ids absent from the export that the child points at (link targets, its
    /// nesting parent); for a content gap, the span with the gap.
    pub locator: Vec<SpanId>,
    /// Why this is a boundary.
    pub reason: String,
    /// The machine-readable reason: `window_exit`, `hash_mismatch`,
    /// `content_not_captured` or `history_truncated`.
    pub code: &'static str,
}

/// One graded edge into `child`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Edge {
    /// The parent span; `None` for a window exit.
    pub parent: Option<SpanId>,
    /// The consuming span.
    pub child: SpanId,
    /// The grade.
    pub kind: EdgeKind,
    /// The artifact the edge carries (for a similarity edge: what the child returned,
    /// which is only similar to the parent's; `None` for a call-id edge).
    pub artifact: Option<ArtifactHash>,
    /// The record id, for read-set edges.
    pub record_id: Option<String>,
    /// What part of the child the edge explains.
    pub basis: Basis,
    /// The boundary this edge opens (window exits and hash mismatches).
    pub boundary: Option<Boundary>,
    /// For a hash mismatch: the error naming both hashes.
    pub error: Option<String>,
    /// The rule that decided the edge (module documentation).
    pub rule: &'static str,
    /// The call id both sides carry, when the rule compared call ids.
    pub call_id: Option<String>,
    /// The artifact was cut by the instrumentation (on either side).
    pub truncated: bool,
}

/// How one consumed part is explained.
enum Resolution {
    /// A declared root.
    Root,
    /// A derived user or system part without producer: external input.
    External,
    /// One edge.
    Edge(Box<Edge>),
    /// Several edges (a rewrite that could have read several sources).
    Edges(Vec<Edge>),
}

/// A span in an index: (start, available, span id).
type Timed<'t> = (u64, u64, &'t SpanId);

/// One span that produced an artifact, as the index holds it.
#[derive(Clone, Copy, Debug)]
struct Producer<'t> {
    start: u64,
    end: u64,
    span: &'t SpanId,
    call_id: Option<&'t str>,
    truncated: bool,
}

/// Tool calls and tool results pair by call id within their family.
fn family(kind: PartKind) -> u8 {
    match kind {
        PartKind::ToolResult => 1,
        _ => 0,
    }
}

/// A trace with its hash indexes, ready to derive edges.
pub struct Graph<'t> {
    trace: &'t Trace,
    /// Artifact → every span producing it, sorted by (start, span).
    producers: HashMap<&'t ArtifactHash, Vec<Producer<'t>>>,
    /// Artifact → the model calls a later input replays it as the output of.
    replayed: HashMap<&'t ArtifactHash, Vec<Producer<'t>>>,
    /// (call id, family) → every span that recorded it as an output.
    calls: HashMap<(&'t str, u8), Vec<Timed<'t>>>,
    /// The same, for outputs recorded without content only.
    opaque_calls: HashMap<(&'t str, u8), Vec<Timed<'t>>>,
    /// Folded mutation output → spans it was recorded on.
    folded: HashMap<&'t ArtifactHash, BTreeSet<&'t SpanId>>,
    /// (record id, hash) → every declared writer.
    writers: HashMap<(&'t str, &'t ArtifactHash), Vec<Timed<'t>>>,
    /// Content hash → every span that stored it (derived or declared).
    stores: HashMap<&'t ArtifactHash, Vec<Timed<'t>>>,
    /// Record id → every span that stored a record under it.
    records: HashMap<&'t str, Vec<Timed<'t>>>,
    /// Content hash → every span that returned it from durable state.
    returns: HashMap<&'t ArtifactHash, Vec<Timed<'t>>>,
    /// The two earliest-available storing spans (availability, span).
    first_stores: [Option<(u64, &'t SpanId)>; 2],
    /// Every conversation's history.
    histories: Histories,
}

/// The sha256 of a model input's `message:hash` lines up to each message boundary:
/// `prefixes[k]` covers messages `0..k`; the last entry covers the whole input.
fn input_prefixes(n: &Node) -> Vec<(u32, ArtifactHash)> {
    let mut out = Vec::new();
    let mut h = Sha256::new();
    let mut current: Option<u32> = None;
    for (part, meta) in n.input_parts.iter().zip(&n.input_meta) {
        let m = meta.message.unwrap_or(0);
        if current != Some(m) {
            out.push((m, ArtifactHash::of_digest(h.clone().finalize().as_slice())));
            current = Some(m);
        }
        h.update(format!("{m}:{part}\n").as_bytes());
    }
    out.push((u32::MAX, ArtifactHash::of_digest(h.finalize().as_slice())));
    out
}

fn is_chat(n: &Node) -> bool {
    history::is_request(n)
}

fn timed(n: &Node) -> Timed<'_> {
    (n.start_ns, n.available_ns(), &n.span_id)
}

impl<'t> Graph<'t> {
    /// Indexes `trace`.
    pub fn new(trace: &'t Trace) -> Self {
        let mut producers: HashMap<&ArtifactHash, Vec<Producer>> = HashMap::new();
        let mut calls: HashMap<(&str, u8), Vec<Timed>> = HashMap::new();
        let mut opaque_calls: HashMap<(&str, u8), Vec<Timed>> = HashMap::new();
        let mut folded: HashMap<&ArtifactHash, BTreeSet<&SpanId>> = HashMap::new();
        let mut writers: HashMap<(&str, &ArtifactHash), Vec<Timed>> = HashMap::new();
        let mut stores: HashMap<&ArtifactHash, Vec<Timed>> = HashMap::new();
        let mut records: HashMap<&str, Vec<Timed>> = HashMap::new();
        let mut returns: HashMap<&ArtifactHash, Vec<Timed>> = HashMap::new();
        for n in trace.nodes() {
            let mut seen: BTreeSet<(&ArtifactHash, Option<&str>)> = BTreeSet::new();
            let mut add = |h: &'t ArtifactHash, meta: Option<&'t PartMeta>| {
                let call_id = meta.and_then(|m| m.call_id.as_deref());
                if seen.insert((h, call_id)) {
                    producers.entry(h).or_default().push(Producer {
                        start: n.start_ns,
                        end: n.available_ns(),
                        span: &n.span_id,
                        call_id,
                        truncated: meta.is_some_and(|m| m.truncated),
                    });
                }
            };
            if let Some(h) = &n.output_hash {
                // A tool span's whole output is its result part: keep the part's call id.
                let meta = n
                    .output_parts
                    .iter()
                    .position(|p| p == h)
                    .and_then(|i| n.output_meta.get(i));
                add(h, meta);
            }
            for (i, h) in n.output_parts.iter().enumerate() {
                add(h, n.output_meta.get(i));
            }
            for m in &n.output_meta {
                if let Some(id) = &m.call_id {
                    calls
                        .entry((id.as_str(), family(m.kind)))
                        .or_default()
                        .push(timed(n));
                }
            }
            for o in &n.opaque_outputs {
                for index in [&mut calls, &mut opaque_calls] {
                    index
                        .entry((o.call_id.as_str(), family(o.kind)))
                        .or_default()
                        .push(timed(n));
                }
            }
            for m in &n.folded {
                folded.entry(&m.output_hash).or_default().insert(&n.span_id);
            }
            for e in &n.write_set {
                writers
                    .entry((e.record_id.as_str(), &e.hash))
                    .or_default()
                    .push(timed(n));
                stores.entry(&e.hash).or_default().push(timed(n));
                records
                    .entry(e.record_id.as_str())
                    .or_default()
                    .push(timed(n));
            }
            for st in &n.stored {
                if let Some(h) = &st.hash {
                    stores.entry(h).or_default().push(timed(n));
                }
                if let Some(id) = &st.record_id {
                    records.entry(id.as_str()).or_default().push(timed(n));
                }
            }
            for h in n.returned.iter().filter_map(|r| r.hash.as_ref()) {
                returns.entry(h).or_default().push(timed(n));
            }
        }
        for v in producers.values_mut() {
            v.sort_by(|a, b| (a.start, a.span).cmp(&(b.start, b.span)));
        }
        for v in calls
            .values_mut()
            .chain(opaque_calls.values_mut())
            .chain(writers.values_mut())
            .chain(stores.values_mut())
            .chain(records.values_mut())
            .chain(returns.values_mut())
        {
            v.sort();
            v.dedup();
        }
        let replayed = Self::index_replayed(trace);
        let by_end: BTreeSet<(u64, &SpanId)> = stores
            .values()
            .flatten()
            .map(|&(_, end, id)| (end, id))
            .collect();
        let mut first_stores: [Option<(u64, &SpanId)>; 2] = [None, None];
        for (end, id) in by_end {
            match first_stores[0] {
                None => first_stores[0] = Some((end, id)),
                Some((_, first)) if first != id => {
                    first_stores[1] = Some((end, id));
                    break;
                }
                Some(_) => {}
            }
        }
        Self {
            trace,
            producers,
            replayed,
            calls,
            opaque_calls,
            folded,
            writers,
            stores,
            records,
            returns,
            first_stores,
            histories: history::analyse(trace),
        }
    }

    /// Rule 3's index: for each model call `C` and each assistant message `m[k]` of
    /// its input, the one earlier model call whose whole input is `m[0..k]`, when that
    /// call recorded no structured output.
    fn index_replayed(trace: &'t Trace) -> HashMap<&'t ArtifactHash, Vec<Producer<'t>>> {
        let chats: Vec<&Node> = trace.nodes().filter(|n| is_chat(n)).collect();
        let mut by_input: HashMap<ArtifactHash, Vec<&Node>> = HashMap::new();
        let mut prefixes: BTreeMap<&SpanId, Vec<(u32, ArtifactHash)>> = BTreeMap::new();
        for n in &chats {
            let p = input_prefixes(n);
            if let Some((_, whole)) = p.last() {
                by_input.entry(whole.clone()).or_default().push(n);
            }
            prefixes.insert(&n.span_id, p);
        }
        let mut out: HashMap<&ArtifactHash, Vec<Producer>> = HashMap::new();
        for c in &chats {
            for (k, key) in prefixes.get(&c.span_id).map(Vec::as_slice).unwrap_or(&[]) {
                let parts: Vec<(&ArtifactHash, &PartMeta)> = c
                    .input_parts
                    .iter()
                    .zip(&c.input_meta)
                    .filter(|(_, m)| m.message == Some(*k))
                    .collect();
                if parts.is_empty()
                    || parts
                        .iter()
                        .any(|(_, m)| m.role.as_deref() != Some("assistant"))
                {
                    continue;
                }
                let earlier: Vec<&&Node> = by_input
                    .get(key)
                    .map(Vec::as_slice)
                    .unwrap_or(&[])
                    .iter()
                    .filter(|p| p.span_id != c.span_id && p.start_ns <= c.start_ns)
                    .collect();
                let [p] = earlier.as_slice() else { continue };
                if p.output_meta.iter().any(|m| m.kind == PartKind::ToolCall) {
                    continue;
                }
                for (h, m) in parts {
                    let v = out.entry(h).or_default();
                    let entry = Producer {
                        start: p.start_ns,
                        end: p.available_ns(),
                        span: &p.span_id,
                        call_id: m.call_id.as_deref(),
                        truncated: m.truncated,
                    };
                    if !v
                        .iter()
                        .any(|e| e.span == entry.span && e.call_id == entry.call_id)
                    {
                        v.push(entry);
                    }
                }
            }
        }
        for v in out.values_mut() {
            v.sort_by(|a, b| (a.start, a.span).cmp(&(b.start, b.span)));
        }
        out
    }

    /// The trace.
    pub fn trace(&self) -> &'t Trace {
        self.trace
    }

    /// Whether a span other than `v` stored an artifact ([`Node::stored`], a declared
    /// write-set) whose output was available before `v`'s.
    pub fn stored_before(&self, v: &Node) -> bool {
        let until = v.available_ns();
        self.first_stores
            .iter()
            .flatten()
            .any(|&(end, id)| id != &v.span_id && end <= until)
    }

    /// The conversations' histories ([`crate::history`]).
    pub fn histories(&self) -> &Histories {
        &self.histories
    }

    /// The latest-started span in `candidates` (sorted by start) whose output was
    /// available by `until`, other than `not`; among equal starts the smallest id.
    fn latest(candidates: &[Timed<'t>], until: u64, not: &SpanId) -> Option<&'t SpanId> {
        let end = candidates.partition_point(|&(s, _, _)| s <= until);
        let mut best: Option<(u64, &'t SpanId)> = None;
        for &(s, e, id) in &candidates[..end] {
            if id == not || e > until {
                continue;
            }
            let replace = match best {
                None => true,
                Some((bs, bid)) => s > bs || (s == bs && id < bid),
            };
            if replace {
                best = Some((s, id));
            }
        }
        best.map(|(_, id)| id)
    }

    /// The last-started of `it`; among equal starts the smallest span id.
    fn best<'a>(it: impl Iterator<Item = &'a Producer<'t>>) -> Option<Producer<'t>>
    where
        't: 'a,
    {
        let mut best: Option<Producer<'t>> = None;
        for p in it {
            let replace = match &best {
                None => true,
                Some(b) => {
                    (p.start, std::cmp::Reverse(p.span)) > (b.start, std::cmp::Reverse(b.span))
                }
            };
            if replace {
                best = Some(*p);
            }
        }
        best
    }

    /// The producer rule 2 (or 3) picks among `candidates` (sorted by start) for a
    /// part of `c` with `call_id`: among the spans available by `c`'s end, the same
    /// call id first, else one side without a call id; never another id. `true` when
    /// the ids matched.
    fn pick(
        candidates: &[Producer<'t>],
        c: &Node,
        call_id: Option<&str>,
    ) -> Option<(Producer<'t>, bool)> {
        let until = c.available_ns();
        let end = candidates.partition_point(|p| p.start <= until);
        let eligible = candidates[..end]
            .iter()
            .filter(move |p| p.span != &c.span_id && p.end <= until);
        match call_id {
            Some(id) => Self::best(eligible.clone().filter(|p| p.call_id == Some(id)))
                .map(|p| (p, true))
                .or_else(|| {
                    Self::best(eligible.filter(|p| p.call_id.is_none())).map(|p| (p, false))
                }),
            None => Self::best(eligible).map(|p| (p, false)),
        }
    }

    /// The rule name of a matched derived part.
    fn rule_of(meta: Option<&PartMeta>, by_id: bool) -> &'static str {
        let Some(m) = meta else { return "audita" };
        match (m.kind, by_id) {
            (PartKind::ToolCall, true) => "tool_call.id+arguments",
            (PartKind::ToolCall, false) => "tool_call.arguments",
            (PartKind::SingleArgument, true) => "tool_call.id+single_argument",
            (PartKind::SingleArgument, false) => "tool_call.single_argument",
            (PartKind::ToolResult, true) => "tool_result.id+content",
            (PartKind::ToolResult, false) => "tool_result.content",
            (PartKind::Compaction, _) => "compaction_part",
            (PartKind::Text, _) if m.role.as_deref() == Some("assistant") => "assistant_message",
            (PartKind::Text, _) => "message_text",
            (PartKind::Other, _) => "message_part",
        }
    }

    /// Span ids `c` points at that are absent from the export.
    fn absent_of(&self, c: &Node) -> Vec<SpanId> {
        let mut ids: BTreeSet<SpanId> = c
            .links
            .iter()
            .map(|l| &l.span_id)
            .chain(c.parent.iter())
            .filter(|id| self.trace.get(id).is_none())
            .cloned()
            .collect();
        ids.remove(&c.span_id);
        ids.into_iter().collect()
    }

    /// The latest span available by `c`'s end that recorded `call_id` as an output of
    /// the family of `kind` (only among outputs recorded without content, when
    /// `opaque_only`: a recorded output of another hash is no match).
    fn by_call_id(
        &self,
        c: &Node,
        call_id: &str,
        kind: PartKind,
        opaque_only: bool,
    ) -> Option<&'t SpanId> {
        let index = if opaque_only {
            &self.opaque_calls
        } else {
            &self.calls
        };
        index
            .get(&(call_id, family(kind)))
            .and_then(|v| Self::latest(v, c.available_ns(), &c.span_id))
    }

    /// Why a derived tool-call part has no producer, when the likely reason is in
    /// the record: the latest earlier model call of the same agent recorded its
    /// output as text only.
    fn unstructured_hint(&self, c: &Node, meta: Option<&PartMeta>) -> Option<String> {
        let m = meta?;
        if !matches!(m.kind, PartKind::ToolCall | PartKind::SingleArgument) || m.role.is_some() {
            return None;
        }
        let p = self
            .trace
            .nodes()
            .filter(|n| is_chat(n) && n.start_ns <= c.start_ns && n.agent == c.agent)
            .filter(|n| !n.output_meta.is_empty())
            .max_by(|a, b| (a.start_ns, &b.span_id).cmp(&(b.start_ns, &a.span_id)))?;
        let text_only = p.output_meta.iter().all(|m| m.kind == PartKind::Text);
        text_only.then(|| {
            format!(
                "no model output holds this tool call as a structured part (the outputs of span {} are text only)",
                p.span_id
            )
        })
    }

    /// Rule 5: the edges of input part `i` of request `c` when its history was
    /// rewritten and the part is new — folded from each source, or a window exit for
    /// a compacted request whose conversation starts in it.
    fn history_fold(
        &self,
        c: &Node,
        i: usize,
        edge: &dyn Fn(Option<SpanId>, EdgeKind, &'static str) -> Edge,
    ) -> Option<Vec<Edge>> {
        let turn = self.histories.turn(&c.span_id)?;
        if let Some(first) = turn.carried.get(&i) {
            return Some(vec![edge(
                Some(first.clone()),
                EdgeKind::Folded,
                "rewritten_earlier",
            )]);
        }
        if !turn.new_parts.contains(&i) {
            return None;
        }
        let rule = if turn.compacted {
            "compaction"
        } else {
            "history_rewritten"
        };
        if turn.sources.is_empty() {
            let mut e = edge(None, EdgeKind::WindowExit, rule);
            e.boundary = Some(Boundary {
                artifact: c.input_parts[i].clone(),
                record_id: None,
                locator: vec![c.span_id.clone()],
                reason: format!(
                    "request {} is marked compacted and no earlier request of its conversation is in the window: the summary stands for history outside it",
                    c.span_id
                ),
                code: "window_exit",
            });
            return Some(vec![e]);
        }
        Some(
            turn.sources
                .iter()
                .map(|s| edge(Some(s.clone()), EdgeKind::Folded, rule))
                .collect(),
        )
    }

    /// Rule 8: the edges of a user or system part without producer of a request that
    /// ran inside another step: folded from what that step's code could read.
    fn nested_fold(
        &self,
        c: &Node,
        edge: &dyn Fn(Option<SpanId>, EdgeKind, &'static str) -> Edge,
    ) -> Option<Vec<Edge>> {
        let n = self.histories.nested(&c.span_id)?;
        // The same external input carried into the nested call (the user's prompt
        // the enclosing step's history held) is still external.
        let h = edge(None, EdgeKind::WindowExit, "").artifact?;
        let carried = std::iter::once(&n.within)
            .chain(&n.sources)
            .filter_map(|s| self.trace.get(s))
            .any(|s| s.input_parts.contains(&h) || s.output_parts.contains(&h));
        if carried {
            return None;
        }
        if n.sources.is_empty() {
            let mut e = edge(None, EdgeKind::WindowExit, "nested_unlogged_input");
            if let Some(h) = e.artifact.clone() {
                e.boundary = Some(Boundary {
                    artifact: h,
                    record_id: None,
                    locator: vec![n.within.clone()],
                    reason: format!(
                        "a model call inside span {} consumed a message that code in that step wrote, with nothing in the window it could have read",
                        n.within
                    ),
                    code: "window_exit",
                });
            }
            return Some(vec![e]);
        }
        Some(
            n.sources
                .iter()
                .map(|s| edge(Some(s.clone()), EdgeKind::Folded, "nested_unlogged_input"))
                .collect(),
        )
    }

    /// The span a mutation producing `h` was folded on, as `c` saw it: of several,
    /// the one that started last no later than `c`, else the first by id.
    fn folded_on(&self, c: &Node, h: &ArtifactHash) -> Option<&'t SpanId> {
        let hs = self.folded.get(h)?;
        hs.iter()
            .filter_map(|id| self.trace.get(id))
            .filter(|n| n.start_ns <= c.start_ns)
            .max_by(|a, b| {
                a.start_ns
                    .cmp(&b.start_ns)
                    .then_with(|| b.span_id.cmp(&a.span_id))
            })
            .map(|n| &n.span_id)
            .or_else(|| hs.iter().next().copied())
    }

    /// How input part `i` of `c` is explained.
    fn resolve(&self, c: &Node, i: usize, absent: &[SpanId], framework: &[&Node]) -> Resolution {
        let h = &c.input_parts[i];
        let meta = c.input_meta(i);
        if self.trace.roots().contains(h) {
            return Resolution::Root;
        }
        let call_id = meta.and_then(|m| m.call_id.as_deref());
        let edge = |parent: Option<SpanId>, kind, rule| Edge {
            parent,
            child: c.span_id.clone(),
            kind,
            artifact: Some(h.clone()),
            record_id: None,
            basis: Basis::InputPart,
            boundary: None,
            error: None,
            rule,
            call_id: None,
            truncated: meta.is_some_and(|m| m.truncated),
        };
        for (index, kind) in [
            (&self.producers, EdgeKind::HashMatch),
            (&self.replayed, EdgeKind::Replayed),
        ] {
            if let Some((p, by_id)) = index.get(h).and_then(|v| Self::pick(v, c, call_id)) {
                let rule = if kind == EdgeKind::Replayed {
                    "replayed_history"
                } else {
                    Self::rule_of(meta, by_id)
                };
                let mut e = edge(Some(p.span.clone()), kind, rule);
                e.call_id = by_id.then(|| call_id.map(str::to_string)).flatten();
                e.truncated |= p.truncated;
                return Resolution::Edge(Box::new(e));
            }
        }
        if let Some(hid) = self.folded_on(c, h) {
            return Resolution::Edge(Box::new(edge(
                Some(hid.clone()),
                EdgeKind::Folded,
                "audita.mutation",
            )));
        }
        if let Some(edges) = self.history_fold(c, i, &edge) {
            return Resolution::Edges(edges);
        }
        if let (Some(id), Some(m)) = (call_id, meta) {
            if let Some(p) = self.by_call_id(c, id, m.kind, true) {
                let mut e = edge(Some(p.clone()), EdgeKind::CallId, "call_id");
                e.call_id = Some(id.to_string());
                return Resolution::Edge(Box::new(e));
            }
        }
        if !absent.is_empty() {
            let mut e = edge(None, EdgeKind::WindowExit, "absent_span");
            e.boundary = Some(Boundary {
                artifact: h.clone(),
                record_id: None,
                locator: absent.to_vec(),
                reason: "consumed artifact has no producer in the window; the span points at spans absent from the export".into(),
                code: "window_exit",
            });
            return Resolution::Edge(Box::new(e));
        }
        if meta.is_some_and(PartMeta::is_external_role) {
            let instructions =
                meta.is_some_and(|m| matches!(m.role.as_deref(), Some("system" | "developer")));
            if let Some(edges) = (!instructions)
                .then(|| self.nested_fold(c, &edge))
                .flatten()
            {
                return Resolution::Edges(edges);
            }
            let quoted: Vec<Edge> = c
                .contains
                .iter()
                .filter(|x| x.part == Some(i))
                .filter_map(|x| {
                    self.returns
                        .get(&x.artifact)
                        .and_then(|v| Self::latest(v, c.available_ns(), &c.span_id))
                        .map(|r| (r, self.whole_result(c, r, &x.artifact)))
                })
                .collect::<BTreeSet<_>>()
                .into_iter()
                .map(|(r, whole)| {
                    if whole {
                        edge(Some(r.clone()), EdgeKind::HashMatch, "contains_result")
                    } else {
                        edge(Some(r.clone()), EdgeKind::Folded, "quotes_read")
                    }
                })
                .collect();
            if !quoted.is_empty() {
                return Resolution::Edges(quoted);
            }
            return Resolution::External;
        }
        if let Some(p) = framework
            .iter()
            .find(|p| !c.input_parts.iter().any(|x| p.produces(x)))
        {
            let theirs = p
                .output_hash
                .as_ref()
                .or(p.output_parts.first())
                .map_or_else(|| "no output hash".to_string(), |o| o.to_string());
            let mut e = edge(
                Some(p.span_id.clone()),
                EdgeKind::HashMismatch,
                "framework_link",
            );
            e.error = Some(format!(
                "hash mismatch on edge {}->{}: the framework links them, but {} consumed {} and {} produced {}",
                p.span_id, c.span_id, c.span_id, h, p.span_id, theirs
            ));
            e.boundary = Some(Boundary {
                artifact: h.clone(),
                record_id: None,
                locator: Vec::new(),
                reason: format!(
                    "consumed artifact has no producer in the window; the framework link names {} which produced {}",
                    p.span_id, theirs
                ),
                code: "hash_mismatch",
            });
            return Resolution::Edge(Box::new(e));
        }
        let mut e = edge(None, EdgeKind::WindowExit, "no_producer");
        let same_id = call_id
            .zip(meta)
            .and_then(|(id, m)| self.by_call_id(c, id, m.kind, false))
            .map(|p| {
                format!(
                    "span {p} recorded call id {} with other content",
                    call_id.unwrap_or_default()
                )
            });
        let reason = match same_id.or_else(|| self.unstructured_hint(c, meta)) {
            Some(hint) => format!("consumed artifact has no producer in the window: {hint}"),
            None => "consumed artifact has no producer in the window".into(),
        };
        e.boundary = Some(Boundary {
            artifact: h.clone(),
            record_id: None,
            locator: Vec::new(),
            reason,
            code: "window_exit",
        });
        Resolution::Edge(Box::new(e))
    }

    /// Whether `artifact`, held verbatim in an input part of `c`, is the **whole**
    /// result of the tool span `r`, which reads no durable state, and `c` recorded its
    /// input completely (rule `contains_result`, module documentation).
    fn whole_result(&self, c: &Node, r: &SpanId, artifact: &ArtifactHash) -> bool {
        c.capture == Capture::Complete
            && self.trace.get(r).is_some_and(|r| {
                r.store_read.is_none()
                    && r.read_set.is_empty()
                    && r.output_hash.as_ref() == Some(artifact)
            })
    }

    /// The graded edges into `c`: one per non-root, non-external input part, one per
    /// content-less part paired by call id, one per read-set entry, one per
    /// similarity link, in that order.
    pub fn edges_into(&self, c: &Node) -> Vec<Edge> {
        let mut out = Vec::new();
        let absent = self.absent_of(c);
        let framework: Vec<&Node> = c
            .links
            .iter()
            .filter(|l| l.basis == Some(LinkBasis::Framework))
            .filter_map(|l| self.trace.get(&l.span_id))
            .filter(|p| p.span_id != c.span_id)
            .collect();
        for i in 0..c.input_parts.len() {
            match self.resolve(c, i, &absent, &framework) {
                Resolution::Edge(e) => out.push(*e),
                Resolution::Edges(es) => out.extend(es),
                Resolution::Root | Resolution::External => {}
            }
        }
        for o in &c.opaque_inputs {
            if let Some(p) = self.by_call_id(c, &o.call_id, o.kind, false) {
                out.push(Edge {
                    parent: Some(p.clone()),
                    child: c.span_id.clone(),
                    kind: EdgeKind::CallId,
                    artifact: None,
                    record_id: None,
                    basis: Basis::OpaquePart,
                    boundary: None,
                    error: None,
                    rule: "call_id",
                    call_id: Some(o.call_id.clone()),
                    truncated: false,
                });
            }
        }
        for entry in &c.read_set {
            out.push(self.read_edge(c, entry));
        }
        if c.read_set.is_empty() {
            for r in &c.returned {
                out.extend(self.returned_edge(c, r));
            }
        }
        for h in c
            .contains
            .iter()
            .filter(|x| x.part.is_none())
            .map(|x| &x.artifact)
        {
            if let Some(w) = self
                .stores
                .get(h)
                .and_then(|v| Self::latest(v, c.available_ns(), &c.span_id))
            {
                out.push(Edge {
                    parent: Some(w.clone()),
                    child: c.span_id.clone(),
                    kind: EdgeKind::Similarity,
                    artifact: Some(h.clone()),
                    record_id: None,
                    basis: Basis::Contained,
                    boundary: None,
                    error: None,
                    rule: "contains_write",
                    call_id: None,
                    truncated: false,
                });
            }
        }
        for l in &c.links {
            if l.basis != Some(LinkBasis::EmbeddingSimilarity) {
                continue;
            }
            let artifact = c
                .output_hash
                .clone()
                .or_else(|| c.read_set.first().map(|e| e.hash.clone()));
            let mut e = Edge {
                parent: Some(l.span_id.clone()),
                child: c.span_id.clone(),
                kind: EdgeKind::Similarity,
                artifact: artifact.clone(),
                record_id: None,
                basis: Basis::SimilarityLink,
                boundary: None,
                error: None,
                rule: "embedding_similarity",
                call_id: None,
                truncated: false,
            };
            if self.trace.get(&l.span_id).is_none() {
                if let Some(a) = artifact {
                    e.boundary = Some(Boundary {
                        artifact: a,
                        record_id: None,
                        locator: vec![l.span_id.clone()],
                        reason: "similarity link to a span absent from the export".into(),
                        code: "window_exit",
                    });
                }
            }
            out.push(e);
        }
        out
    }

    /// The derived user and system parts of `c` that no span produced: external
    /// inputs, where the closure ends (rule 7).
    pub fn external_inputs(&self, c: &Node) -> Vec<&'t ArtifactHash> {
        let absent = self.absent_of(c);
        let Some(node) = self.trace.get(&c.span_id) else {
            return Vec::new();
        };
        (0..node.input_parts.len())
            .filter(|&i| matches!(self.resolve(node, i, &absent, &[]), Resolution::External))
            .map(|i| &node.input_parts[i])
            .collect()
    }

    /// The edge of one artifact `c` returned (module documentation, "Writes and
    /// reads"), or none for an ordinary tool's own output.
    fn returned_edge(&self, c: &Node, r: &Stored) -> Option<Edge> {
        let until = c.available_ns();
        let mut e = Edge {
            parent: None,
            child: c.span_id.clone(),
            kind: EdgeKind::HashMatch,
            artifact: r.hash.clone(),
            record_id: r.record_id.clone(),
            basis: Basis::Returned,
            boundary: None,
            error: None,
            rule: "write_read",
            call_id: None,
            truncated: false,
        };
        let (artifact, writer) = match (&r.hash, &r.record_id) {
            (Some(h), _) => (
                h.clone(),
                self.stores
                    .get(h)
                    .and_then(|v| Self::latest(v, until, &c.span_id)),
            ),
            (None, Some(id)) => {
                let w = self
                    .records
                    .get(id.as_str())
                    .and_then(|v| Self::latest(v, until, &c.span_id));
                if let Some(w) = w {
                    e.parent = Some(w.clone());
                    e.kind = EdgeKind::Similarity;
                    e.rule = "record_id_only";
                    return Some(e);
                }
                (ArtifactHash::of(format!("record:{id}").as_bytes()), None)
            }
            (None, None) => return None,
        };
        if let Some(w) = writer {
            e.parent = Some(w.clone());
            return Some(e);
        }
        let why = c.store_read.as_ref()?;
        e.kind = EdgeKind::WindowExit;
        e.rule = "unlogged_write";
        let what = match (&r.hash, &r.record_id) {
            (Some(_), Some(id)) => format!("record {id}"),
            (Some(_), None) => "an artifact".to_string(),
            (None, Some(id)) => format!("record {id} by id and score only (no content recorded)"),
            (None, None) => return None,
        };
        e.boundary = Some(Boundary {
            artifact,
            record_id: r.record_id.clone(),
            locator: vec![c.span_id.clone()],
            reason: format!(
                "span {} reads durable state ({why}) and returned {what} that no logged write in the window stored",
                c.span_id
            ),
            code: "window_exit",
        });
        Some(e)
    }

    fn read_edge(&self, c: &Node, entry: &Entry) -> Edge {
        let w = self
            .writers
            .get(&(entry.record_id.as_str(), &entry.hash))
            .and_then(|v| Self::latest(v, c.available_ns(), &c.span_id));
        let mut e = Edge {
            parent: w.cloned(),
            child: c.span_id.clone(),
            kind: EdgeKind::HashMatch,
            artifact: Some(entry.hash.clone()),
            record_id: Some(entry.record_id.clone()),
            basis: Basis::ReadSet,
            boundary: None,
            error: None,
            rule: "audita.read_set",
            call_id: None,
            truncated: false,
        };
        if w.is_none() {
            e.kind = EdgeKind::WindowExit;
            e.boundary = Some(Boundary {
                artifact: entry.hash.clone(),
                record_id: Some(entry.record_id.clone()),
                locator: Vec::new(),
                reason: "read-set entry intersects no earlier write-set with matching record id and hash".into(),
                code: "window_exit",
            });
        }
        e
    }

    /// Every node's edges, in span-id order of the child.
    pub fn all_edges(&self) -> BTreeMap<&'t SpanId, Vec<Edge>> {
        self.trace
            .nodes()
            .map(|n| (&n.span_id, self.edges_into(n)))
            .collect()
    }
}

/// The boundary of a content gap on span `n` (the witness emits it when the walk
/// visits `n`): the span's output hash, else its first input part, else the sha256
/// of `span:<id>`, located at the span itself.
pub fn gap_boundary(n: &Node) -> Option<Boundary> {
    let code = n.capture.code()?;
    let artifact = n
        .output_hash
        .clone()
        .or_else(|| n.input_parts.first().cloned())
        .unwrap_or_else(|| ArtifactHash::of(format!("span:{}", n.span_id).as_bytes()));
    let scope = n
        .instrumentation
        .as_deref()
        .unwrap_or("unknown instrumentation");
    let reason = match &n.capture {
        Capture::NotCaptured { setting } => format!(
            "span {} ({scope}) recorded no message content for part of what it consumed or produced; set {setting}",
            n.span_id
        ),
        Capture::Truncated { marker } => format!(
            "span {} ({scope}) holds a value cut by the instrumentation ({marker}): what lay beyond the cut is not in the record",
            n.span_id
        ),
        Capture::HistoryUnlogged { detail } => detail.clone(),
        Capture::Complete => return None,
    };
    Some(Boundary {
        artifact,
        record_id: None,
        locator: vec![n.span_id.clone()],
        reason,
        code,
    })
}
