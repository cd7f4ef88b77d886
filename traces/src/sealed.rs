//! Sealing a trace as evidence: each logged step becomes one signed message of its
//! agent, citing the messages of its hash-derived parents, so the verdict machinery
//! (duties, breach, ρ, claim level) runs on agent incidents and the witness procedure
//! can be re-run on sealed evidence alone.
//!
//! [`plan`] says what to sign, in which order, with which citations; the caller signs
//! (the client library's `Principal`) and seals. [`rebuild`] reads the steps back from
//! the payloads of certified messages.
//!
//! Design constraints:
//! - Pure: no keys, no clock, no I/O. Deterministic: the same trace gives the same
//!   plan and the same payload bytes.
//! - **Order.** A step is signed after every step it cites: a topological order of the
//!   citations, ties broken by (start time, span id). Only spans with equal start
//!   times can cite each other in a cycle; such a trace is refused
//!   ([`SealError::Cycle`]).
//! - **Citations.** One per hash-derived parent the witness walk traverses ([`Graph`]
//!   edges of kind hash match, folded, similarity), with the edge's [`Grade`]; when
//!   two edges join the same pair, the weaker grade is kept. A consumed root artifact
//!   (`audita.roots`) cites the root span that declared it (hash match). A window
//!   exit or a hash mismatch cites nothing — there is no message to cite — and stays
//!   in the payload, where the re-run witness finds it again.
//! - **Production.** The first step in the order is the **opening** (an external
//!   input: where the run enters the record). A later step with citations is
//!   `relay-all` (its output is a function of every artifact it consumed, which is
//!   what an artifact-hash edge asserts); a later step without citations is an
//!   **origin** citing the opening as context only (its inputs came from outside the
//!   window, or it consumed nothing).
//! - **Payload** (`audita.trace-span/v2`): the step as canonical JSON with every
//!   field the edge rules and the witness read (ids, nesting parent, times,
//!   operation, agent, tool, input and output hashes and parts, roots, mutation,
//!   folded mutations, write and read sets, links; and for parts derived from GenAI
//!   content their metadata — kind, role, message, call id, truncated — the
//!   content-less parts with their call ids, the capture gap with its setting, and
//!   the instrumentation scope). [`node_from_payload`] is its exact inverse, and
//!   reads `audita.trace-span/v1` payloads (which have none of the v2 fields).
//! - **Grades the verdict reads.** The verdict machinery knows three citation
//!   grades. A `replayed` edge (an inferred producer) is pinned `folded` there: a
//!   hypothesis edge (`ρ_lo = 0`, never culpable), the conservative reading; the
//!   re-run witness re-derives it as `replayed` from the payloads. A `call_id` edge
//!   cites nothing, like a window exit.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map, Value};
use thiserror::Error;

use crate::graph::{EdgeKind, Graph};
use crate::hash::{ArtifactHash, Entry, SpanId};
use crate::model::{
    Capture, Contained, FoldedMutation, Link, LinkBasis, MutationKind, Node, Opaque, Operation,
    PartKind, PartMeta, Stored, Trace,
};

/// Schema id of a sealed step's payload.
pub const SPAN_SCHEMA: &str = "audita.trace-span/v2";

/// The first payload schema, still read.
pub const SPAN_SCHEMA_V1: &str = "audita.trace-span/v1";

/// The grade of a citation, as its per-citation pin records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Grade {
    /// The child consumed exactly what the parent produced (or declared as a root).
    HashMatch,
    /// The child consumed the output of a mutation folded into the parent.
    Folded,
    /// Linked by embedding proximity only.
    Similarity,
    /// The parent's output is inferred from a later input that replays it.
    Replayed,
}

impl Grade {
    /// The grade's name (`hash_match`, `folded`, `similarity`, `replayed`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::HashMatch => "hash_match",
            Self::Folded => "folded",
            Self::Similarity => "similarity",
            Self::Replayed => "replayed",
        }
    }

    /// The per-citation pin value the verdict machinery reads (`hash_match`,
    /// `folded`, `similarity`): a replayed citation is pinned `folded`.
    pub fn pin(self) -> &'static str {
        match self {
            Self::Replayed => "folded",
            g => g.as_str(),
        }
    }
}

/// One citation of a step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Citation {
    /// The cited step.
    pub parent: SpanId,
    /// Its grade; `None` for the context citation of an origin.
    pub grade: Option<Grade>,
}

/// How a step's presence depends on what it cites.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Production {
    /// The first step: an external input, uncited.
    Opening,
    /// No in-window input: its own decision; cites the opening as context.
    Origin,
    /// Produced from every cited input.
    RelayAll,
}

/// One step to sign.
#[derive(Clone, Debug)]
pub struct Step<'t> {
    /// The logged step.
    pub node: &'t Node,
    /// Its production.
    pub production: Production,
    /// What it cites, in span-id order.
    pub cites: Vec<Citation>,
    /// The payload text (`audita.trace-span/v1`).
    pub text: String,
}

/// Why a trace cannot be sealed.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SealError {
    /// The trace has no span.
    #[error("the trace has no span")]
    Empty,
    /// Spans with equal start times consume each other's outputs.
    #[error("spans {} consume each other's outputs (equal start times): no signing order", .0.join(", "))]
    Cycle(Vec<String>),
}

/// A payload that is not a sealed step.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum PayloadError {
    /// Not a JSON object of schema [`SPAN_SCHEMA`] (the message is something else).
    #[error("not an {SPAN_SCHEMA} payload")]
    NotAStep,
    /// A field is missing or malformed.
    #[error("sealed step: field {0}: {1}")]
    Field(&'static str, String),
    /// Two certified messages carry the same span id.
    #[error("span {0} is sealed twice")]
    Duplicate(String),
}

/// The signing plan of `trace`: every node once, each after what it cites.
pub fn plan(trace: &Trace) -> Result<Vec<Step<'_>>, SealError> {
    if trace.is_empty() {
        return Err(SealError::Empty);
    }
    let graph = Graph::new(trace);
    // Root artifact → the earliest root span declaring it.
    let mut declared: BTreeMap<&ArtifactHash, (u64, &SpanId)> = BTreeMap::new();
    for n in trace.nodes().filter(|n| n.parent.is_none()) {
        for r in &n.roots {
            let e = declared.entry(r).or_insert((n.start_ns, &n.span_id));
            if (n.start_ns, &n.span_id) < *e {
                *e = (n.start_ns, &n.span_id);
            }
        }
    }
    let mut cites: BTreeMap<&SpanId, BTreeMap<SpanId, Grade>> = BTreeMap::new();
    for n in trace.nodes() {
        let mut mine: BTreeMap<SpanId, Grade> = BTreeMap::new();
        let mut add = |p: &SpanId, g: Grade| {
            if p != &n.span_id && trace.get(p).is_some() {
                let e = mine.entry(p.clone()).or_insert(g);
                *e = (*e).max(g);
            }
        };
        for e in graph.edges_into(n) {
            let g = match e.kind {
                EdgeKind::HashMatch => Grade::HashMatch,
                EdgeKind::Folded => Grade::Folded,
                EdgeKind::Similarity => Grade::Similarity,
                EdgeKind::Replayed => Grade::Replayed,
                EdgeKind::CallId | EdgeKind::WindowExit | EdgeKind::HashMismatch => continue,
            };
            if let Some(p) = &e.parent {
                add(p, g);
            }
        }
        for h in &n.input_parts {
            if let Some((_, p)) = declared.get(h) {
                add(p, Grade::HashMatch);
            }
        }
        cites.insert(&n.span_id, mine);
    }
    // Kahn's algorithm, ready steps by (start, id).
    let mut waiting: BTreeMap<&SpanId, usize> = BTreeMap::new();
    let mut children: BTreeMap<&SpanId, Vec<&SpanId>> = BTreeMap::new();
    for (c, ps) in &cites {
        waiting.insert(c, ps.len());
        for p in ps.keys() {
            if let Some(p) = trace.get(p) {
                children.entry(&p.span_id).or_default().push(c);
            }
        }
    }
    let key = |id: &SpanId| trace.get(id).map_or(0, |n| n.start_ns);
    let mut ready: BTreeSet<(u64, &SpanId)> = waiting
        .iter()
        .filter(|(_, w)| **w == 0)
        .map(|(id, _)| (key(id), *id))
        .collect();
    let mut order: Vec<&SpanId> = Vec::with_capacity(trace.len());
    while let Some(first) = ready.pop_first() {
        order.push(first.1);
        for c in children.get(first.1).map(Vec::as_slice).unwrap_or(&[]) {
            if let Some(w) = waiting.get_mut(c) {
                *w -= 1;
                if *w == 0 {
                    ready.insert((key(c), *c));
                }
            }
        }
    }
    if order.len() < trace.len() {
        let done: BTreeSet<&SpanId> = order.iter().copied().collect();
        let stuck: Vec<String> = trace
            .nodes()
            .filter(|n| !done.contains(&n.span_id))
            .map(|n| n.span_id.to_string())
            .collect();
        return Err(SealError::Cycle(stuck));
    }
    let opening = order[0].clone();
    let mut steps = Vec::with_capacity(order.len());
    for (i, id) in order.iter().enumerate() {
        let Some(node) = trace.get(id) else {
            continue;
        };
        let mine = cites.remove(id).unwrap_or_default();
        let (production, cites) = if i == 0 {
            (Production::Opening, Vec::new())
        } else if mine.is_empty() {
            (
                Production::Origin,
                vec![Citation {
                    parent: opening.clone(),
                    grade: None,
                }],
            )
        } else {
            (
                Production::RelayAll,
                mine.into_iter()
                    .map(|(parent, g)| Citation {
                        parent,
                        grade: Some(g),
                    })
                    .collect(),
            )
        };
        steps.push(Step {
            node,
            production,
            cites,
            text: span_json(node).to_string(),
        });
    }
    Ok(steps)
}

fn strings<T: ToString>(v: &[T]) -> Value {
    Value::Array(v.iter().map(|x| Value::String(x.to_string())).collect())
}

fn meta_json(m: &PartMeta) -> Value {
    let mut o = Map::new();
    o.insert("kind".into(), m.kind.as_str().into());
    if let Some(r) = &m.role {
        o.insert("role".into(), r.clone().into());
    }
    if let Some(i) = m.message {
        o.insert("message".into(), i.into());
    }
    if let Some(c) = &m.call_id {
        o.insert("call_id".into(), c.clone().into());
    }
    if m.truncated {
        o.insert("truncated".into(), true.into());
    }
    Value::Object(o)
}

fn opaque_json(o: &Opaque) -> Value {
    json!({"kind": o.kind.as_str(), "call_id": o.call_id})
}

fn stored_json(s: &Stored) -> Value {
    json!({
        "hash": s.hash.as_ref().map(ToString::to_string),
        "record_id": s.record_id,
    })
}

fn contained_json(c: &Contained) -> Value {
    json!({"part": c.part, "artifact": c.artifact.to_string()})
}

/// The payload of a sealed step (`audita.trace-span/v2`).
pub fn span_json(n: &Node) -> Value {
    let folded: Vec<Value> = n
        .folded
        .iter()
        .map(|m| {
            json!({
                "output_hash": m.output_hash.to_string(),
                "input_parts": strings(&m.input_parts),
                "kind": m.kind.map(MutationKind::as_str),
            })
        })
        .collect();
    let links: Vec<Value> = n
        .links
        .iter()
        .map(|l| {
            json!({
                "span_id": l.span_id.to_string(),
                "basis": l.basis.as_ref().map(|b| match b {
                    LinkBasis::Framework => "framework",
                    LinkBasis::EmbeddingSimilarity => "embedding_similarity",
                    LinkBasis::Other(s) => s.as_str(),
                }),
                "similarity": l.similarity,
            })
        })
        .collect();
    json!({
        "schema": SPAN_SCHEMA,
        "span_id": n.span_id.to_string(),
        "parent": n.parent.as_ref().map(ToString::to_string),
        "name": n.name,
        "start_ns": n.start_ns,
        "end_ns": n.end_ns,
        "operation": n.operation.as_ref().map(Operation::as_str),
        "agent": n.agent,
        "tool": n.tool,
        "input_parts": strings(&n.input_parts),
        "input_hash": n.input_hash.as_ref().map(ToString::to_string),
        "output_hash": n.output_hash.as_ref().map(ToString::to_string),
        "output_parts": strings(&n.output_parts),
        "roots": strings(&n.roots),
        "mutation": n.mutation.map(MutationKind::as_str),
        "folded": folded,
        "write_set": strings(&n.write_set),
        "read_set": strings(&n.read_set),
        "links": links,
        "input_meta": n.input_meta.iter().map(meta_json).collect::<Vec<_>>(),
        "output_meta": n.output_meta.iter().map(meta_json).collect::<Vec<_>>(),
        "opaque_inputs": n.opaque_inputs.iter().map(opaque_json).collect::<Vec<_>>(),
        "opaque_outputs": n.opaque_outputs.iter().map(opaque_json).collect::<Vec<_>>(),
        "capture": n.capture.as_str(),
        "capture_detail": n.capture.detail(),
        "instrumentation": n.instrumentation,
        "conversation": n.conversation,
        "compacted": n.compacted,
        "stored": n.stored.iter().map(stored_json).collect::<Vec<_>>(),
        "returned": n.returned.iter().map(stored_json).collect::<Vec<_>>(),
        "store_read": n.store_read,
        "contains": n.contains.iter().map(contained_json).collect::<Vec<_>>(),
    })
}

struct Fields<'a>(&'a Map<String, Value>);

impl<'a> Fields<'a> {
    fn bad(field: &'static str, why: &str) -> PayloadError {
        PayloadError::Field(field, why.to_string())
    }
    fn opt_str(&self, f: &'static str) -> Result<Option<&'a str>, PayloadError> {
        match self.0.get(f) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(Self::bad(f, "not a string")),
        }
    }
    fn str(&self, f: &'static str) -> Result<&'a str, PayloadError> {
        self.opt_str(f)?.ok_or_else(|| Self::bad(f, "missing"))
    }
    fn u64(&self, f: &'static str) -> Result<u64, PayloadError> {
        self.0
            .get(f)
            .and_then(Value::as_u64)
            .ok_or_else(|| Self::bad(f, "not an unsigned integer"))
    }
    /// `v` as an object (an item of the array at `f`).
    fn of(v: &'a Value, f: &'static str) -> Result<Fields<'a>, PayloadError> {
        v.as_object()
            .map(Fields)
            .ok_or_else(|| Self::bad(f, "not an object"))
    }
    /// The objects of the array at `f`, in order (none when absent or not an array);
    /// an item that is not an object is refused when it is reached.
    fn objects(
        &self,
        f: &'static str,
    ) -> impl Iterator<Item = Result<Fields<'a>, PayloadError>> + 'a {
        self.0
            .get(f)
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
            .iter()
            .map(move |v| Self::of(v, f))
    }
    fn list<T>(
        &self,
        f: &'static str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<Vec<T>, PayloadError> {
        list_of(self.0.get(f), f, parse)
    }
    fn hash(&self, f: &'static str) -> Result<Option<ArtifactHash>, PayloadError> {
        self.opt_str(f)?
            .map(|s| ArtifactHash::parse(s).ok_or_else(|| Self::bad(f, "not a sha256: hash")))
            .transpose()
    }
}

fn list_of<T>(
    v: Option<&Value>,
    f: &'static str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Vec<T>, PayloadError> {
    let Some(v) = v else {
        return Ok(Vec::new());
    };
    let arr = v.as_array().ok_or_else(|| Fields::bad(f, "not an array"))?;
    arr.iter()
        .map(|x| {
            x.as_str()
                .and_then(&parse)
                .ok_or_else(|| Fields::bad(f, "malformed entry"))
        })
        .collect()
}

/// Reads a sealed step back; [`PayloadError::NotAStep`] when the text is another
/// kind of message.
pub fn node_from_payload(text: &str) -> Result<Node, PayloadError> {
    let v: Value = serde_json::from_str(text).map_err(|_| PayloadError::NotAStep)?;
    let obj = v.as_object().ok_or(PayloadError::NotAStep)?;
    let schema = obj.get("schema").and_then(Value::as_str);
    if schema != Some(SPAN_SCHEMA) && schema != Some(SPAN_SCHEMA_V1) {
        return Err(PayloadError::NotAStep);
    }
    let f = Fields(obj);
    let span_id =
        SpanId::parse(f.str("span_id")?).ok_or_else(|| Fields::bad("span_id", "not a span id"))?;
    let mut n = Node::new(span_id, f.str("name")?, f.u64("start_ns")?);
    n.end_ns = f.u64("end_ns")?;
    n.parent = f
        .opt_str("parent")?
        .map(|p| SpanId::parse(p).ok_or_else(|| Fields::bad("parent", "not a span id")))
        .transpose()?;
    n.operation = f.opt_str("operation")?.map(Operation::parse);
    n.agent = f.opt_str("agent")?.map(str::to_string);
    n.tool = f.opt_str("tool")?.map(str::to_string);
    n.input_parts = f.list("input_parts", ArtifactHash::parse)?;
    n.input_hash = f.hash("input_hash")?;
    n.output_hash = f.hash("output_hash")?;
    n.output_parts = f.list("output_parts", ArtifactHash::parse)?;
    n.roots = f.list("roots", ArtifactHash::parse)?;
    n.mutation = f
        .opt_str("mutation")?
        .map(|m| MutationKind::parse(m).ok_or_else(|| Fields::bad("mutation", "unknown kind")))
        .transpose()?;
    n.write_set = f.list("write_set", Entry::parse)?;
    n.read_set = f.list("read_set", Entry::parse)?;
    for m in f.objects("folded") {
        let m = m?;
        n.folded.push(FoldedMutation {
            output_hash: m
                .hash("output_hash")?
                .ok_or_else(|| Fields::bad("folded", "no output_hash"))?,
            input_parts: m.list("input_parts", ArtifactHash::parse)?,
            kind: m
                .opt_str("kind")?
                .map(|k| {
                    MutationKind::parse(k).ok_or_else(|| Fields::bad("folded", "unknown kind"))
                })
                .transpose()?,
        });
    }
    for l in f.objects("links") {
        let l = l?;
        n.links.push(Link {
            span_id: SpanId::parse(l.str("span_id")?)
                .ok_or_else(|| Fields::bad("links", "not a span id"))?,
            basis: l.opt_str("basis")?.map(|b| match b {
                "framework" => LinkBasis::Framework,
                "embedding_similarity" => LinkBasis::EmbeddingSimilarity,
                other => LinkBasis::Other(other.to_string()),
            }),
            similarity: l.0.get("similarity").and_then(Value::as_f64),
        });
    }
    n.input_meta = metas(obj.get("input_meta"), "input_meta")?;
    n.output_meta = metas(obj.get("output_meta"), "output_meta")?;
    if n.input_meta.len() > n.input_parts.len() || n.output_meta.len() > n.output_parts.len() {
        return Err(Fields::bad("input_meta", "more entries than parts"));
    }
    n.opaque_inputs = opaques(obj.get("opaque_inputs"), "opaque_inputs")?;
    n.opaque_outputs = opaques(obj.get("opaque_outputs"), "opaque_outputs")?;
    n.capture = match f.opt_str("capture")? {
        None => Capture::Complete,
        Some(c) => Capture::from_parts(c, f.opt_str("capture_detail")?.unwrap_or(""))
            .ok_or_else(|| Fields::bad("capture", "unknown state"))?,
    };
    n.instrumentation = f.opt_str("instrumentation")?.map(str::to_string);
    n.conversation = f.opt_str("conversation")?.map(str::to_string);
    n.compacted = match obj.get("compacted") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(Fields::bad("compacted", "not a boolean")),
    };
    for (field, out) in [("stored", &mut n.stored), ("returned", &mut n.returned)] {
        for x in f.objects(field) {
            let x = x?;
            out.push(Stored {
                hash: x.hash("hash")?,
                record_id: x.opt_str("record_id")?.map(str::to_string),
            });
        }
    }
    n.store_read = f.opt_str("store_read")?.map(str::to_string);
    for x in f.objects("contains") {
        let x = x?;
        let part = match x.0.get("part") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_u64()
                    .and_then(|p| usize::try_from(p).ok())
                    .filter(|&p| p < n.input_parts.len())
                    .ok_or_else(|| Fields::bad("contains", "part is not an input part index"))?,
            ),
        };
        n.contains.push(Contained {
            part,
            artifact: x
                .hash("artifact")?
                .ok_or_else(|| Fields::bad("contains", "no artifact"))?,
        });
    }
    Ok(n)
}

fn entries<'a>(v: Option<&'a Value>, f: &'static str) -> Result<&'a [Value], PayloadError> {
    match v {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(_) => Err(Fields::bad(f, "not an array")),
    }
}

fn kind_of(m: &Fields<'_>, f: &'static str) -> Result<PartKind, PayloadError> {
    PartKind::parse(m.str("kind").map_err(|_| Fields::bad(f, "no kind"))?)
        .ok_or_else(|| Fields::bad(f, "unknown kind"))
}

fn metas(v: Option<&Value>, f: &'static str) -> Result<Vec<PartMeta>, PayloadError> {
    entries(v, f)?
        .iter()
        .map(|e| {
            let m = Fields::of(e, f)?;
            Ok(PartMeta {
                kind: kind_of(&m, f)?,
                role: m.opt_str("role")?.map(str::to_string),
                message: match m.0.get("message") {
                    None | Some(Value::Null) => None,
                    Some(x) => Some(
                        x.as_u64()
                            .and_then(|i| u32::try_from(i).ok())
                            .ok_or_else(|| Fields::bad(f, "message is not a small integer"))?,
                    ),
                },
                call_id: m.opt_str("call_id")?.map(str::to_string),
                truncated: m
                    .0
                    .get("truncated")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            })
        })
        .collect()
}

fn opaques(v: Option<&Value>, f: &'static str) -> Result<Vec<Opaque>, PayloadError> {
    entries(v, f)?
        .iter()
        .map(|e| {
            let m = Fields::of(e, f)?;
            Ok(Opaque {
                kind: kind_of(&m, f)?,
                call_id: m
                    .str("call_id")
                    .map_err(|_| Fields::bad(f, "no call_id"))?
                    .to_string(),
            })
        })
        .collect()
}

/// Rebuilds a trace from the payloads of sealed steps (other payloads are skipped);
/// a span id sealed twice is an error.
pub fn rebuild<'a>(payloads: impl IntoIterator<Item = &'a str>) -> Result<Trace, PayloadError> {
    let mut trace = Trace::new();
    for text in payloads {
        let node = match node_from_payload(text) {
            Ok(n) => n,
            Err(PayloadError::NotAStep) => continue,
            Err(e) => return Err(e),
        };
        trace
            .insert(node)
            .map_err(|n| PayloadError::Duplicate(n.span_id.to_string()))?;
    }
    Ok(trace)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::otlp::{parse_otlp_json, Limits};

    fn golden(name: &str) -> Trace {
        let path = format!("{}/testdata/{name}", env!("CARGO_MANIFEST_DIR"));
        let bytes = std::fs::read(path).unwrap();
        parse_otlp_json(&bytes, &Limits::default()).unwrap()
    }

    #[test]
    fn payload_round_trips_every_golden_step() {
        for name in [
            "laundering.json",
            "retrieval_echo.json",
            "hash_mismatch.json",
            "frameworks/pydanticai-nocontent.json",
            "frameworks/ag2_tracing-truncated.json",
            "frameworks/openai_agents_otel-injected.json",
            "frameworks/langgraph_openinference-injected.json",
        ] {
            let t = golden(name);
            for n in t.nodes() {
                let back = node_from_payload(&span_json(n).to_string()).unwrap();
                assert_eq!(&back, n, "{name}");
            }
        }
    }

    #[test]
    fn laundering_plan_cites_the_fold_and_signs_parents_first() {
        let t = golden("laundering.json");
        let steps = plan(&t).unwrap();
        assert_eq!(steps.len(), t.len());
        assert_eq!(steps[0].production, Production::Opening);
        let pos: BTreeMap<String, usize> = steps
            .iter()
            .enumerate()
            .map(|(i, s)| (s.node.span_id.to_string(), i))
            .collect();
        for s in &steps {
            for c in &s.cites {
                assert!(pos[c.parent.as_str()] < pos[s.node.span_id.as_str()]);
            }
        }
        let c2 = steps
            .iter()
            .find(|s| s.node.span_id.as_str() == "00000000000000c2")
            .unwrap();
        assert!(c2.cites.contains(&Citation {
            parent: SpanId::parse("00000000000000b1").unwrap(),
            grade: Some(Grade::Folded)
        }));
        let rebuilt = rebuild(steps.iter().map(|s| s.text.as_str())).unwrap();
        assert_eq!(rebuilt, t);
    }

    #[test]
    fn a_v1_payload_still_reads() {
        let t = golden("in_context.json");
        for n in t.nodes() {
            let mut v = span_json(n);
            let o = v.as_object_mut().unwrap();
            o.insert("schema".into(), SPAN_SCHEMA_V1.into());
            for k in [
                "input_meta",
                "output_meta",
                "opaque_inputs",
                "opaque_outputs",
                "capture",
                "capture_detail",
                "instrumentation",
            ] {
                o.remove(k);
            }
            let mut back = node_from_payload(&v.to_string()).unwrap();
            back.instrumentation = n.instrumentation.clone();
            assert_eq!(&back, n);
        }
    }

    #[test]
    fn a_replayed_edge_is_pinned_as_a_hypothesis() {
        let t = golden("frameworks/openai_agents_otel_chatcmpl-injected.json");
        let steps = plan(&t).unwrap();
        let replayed: Vec<&Citation> = steps
            .iter()
            .flat_map(|s| &s.cites)
            .filter(|c| c.grade == Some(Grade::Replayed))
            .collect();
        assert!(!replayed.is_empty());
        assert_eq!(Grade::Replayed.pin(), "folded");
        let rebuilt = rebuild(steps.iter().map(|s| s.text.as_str())).unwrap();
        assert_eq!(rebuilt, t);
    }
}
