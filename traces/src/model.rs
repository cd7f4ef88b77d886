//! The trace model: logged steps with their principal and the hashes of what they
//! consumed and produced, independent of the format they were read from.
//!
//! Design constraints:
//! - A [`Trace`] holds each span id once; its nodes are kept in a `BTreeMap`, so every
//!   listing is in span-id order.
//! - Nesting (`parent`) is kept only to locate window exits: it is call nesting, not
//!   data flow, and no edge is ever read from it.
//! - A context mutation is either its own node ([`Node::mutation`]: a first-class
//!   transformation, memo condition 1) or a [`FoldedMutation`] recorded on another
//!   span, whose output is a folded artifact.
//! - A span's hashes are either declared (`audita.*` attributes) or **derived** from
//!   the standard GenAI content attributes ([`crate::genai`]). Derived parts carry a
//!   [`PartMeta`] each (`input_meta`/`output_meta` run parallel to
//!   `input_parts`/`output_parts`; both are empty for declared parts), and what the
//!   span did not record is said by [`Capture`] and the content-less [`Opaque`] parts.

use std::collections::{BTreeMap, BTreeSet};

use crate::hash::{ArtifactHash, Entry, SpanId};

/// What a step did (`gen_ai.operation.name`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    /// `invoke_agent`: an agent's turn (usually the parent of its calls).
    InvokeAgent,
    /// `invoke_workflow`.
    InvokeWorkflow,
    /// `chat`: an LLM call.
    Chat,
    /// `execute_tool`: a tool call.
    ExecuteTool,
    /// `create_memory`: a memory write.
    CreateMemory,
    /// `search_memory`: a memory read.
    SearchMemory,
    /// `retrieval`: a retrieval from a document store.
    Retrieval,
    /// Any other operation name, kept as written.
    Other(String),
}

impl Operation {
    /// Reads `gen_ai.operation.name`.
    pub fn parse(s: &str) -> Self {
        match s {
            "invoke_agent" => Self::InvokeAgent,
            "invoke_workflow" => Self::InvokeWorkflow,
            "chat" => Self::Chat,
            "execute_tool" => Self::ExecuteTool,
            "create_memory" => Self::CreateMemory,
            "search_memory" => Self::SearchMemory,
            "retrieval" => Self::Retrieval,
            other => Self::Other(other.to_string()),
        }
    }

    /// The conventions' name.
    pub fn as_str(&self) -> &str {
        match self {
            Self::InvokeAgent => "invoke_agent",
            Self::InvokeWorkflow => "invoke_workflow",
            Self::Chat => "chat",
            Self::ExecuteTool => "execute_tool",
            Self::CreateMemory => "create_memory",
            Self::SearchMemory => "search_memory",
            Self::Retrieval => "retrieval",
            Self::Other(s) => s,
        }
    }
}

/// The kind of a context mutation (`audita.mutation.kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum MutationKind {
    /// Compaction of the context.
    Compaction,
    /// Summarisation.
    Summarization,
    /// Truncation.
    Truncation,
    /// Reordering.
    Reorder,
}

impl MutationKind {
    /// Reads `audita.mutation.kind`; `None` for any other value.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "compaction" => Self::Compaction,
            "summarization" => Self::Summarization,
            "truncation" => Self::Truncation,
            "reorder" => Self::Reorder,
            _ => return None,
        })
    }

    /// The conventions' name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Compaction => "compaction",
            Self::Summarization => "summarization",
            Self::Truncation => "truncation",
            Self::Reorder => "reorder",
        }
    }
}

/// Why a framework linked one span to another (`audita.link.basis`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LinkBasis {
    /// The framework's own provenance claim: narrative grade, checked against hashes.
    Framework,
    /// Embedding proximity: always a similarity edge.
    EmbeddingSimilarity,
    /// Another basis, kept as written; it gives no edge.
    Other(String),
}

/// One entry of a span's `links[]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Link {
    /// The linked span.
    pub span_id: SpanId,
    /// Why it was linked; `None` when the link carries no `audita.link.basis`.
    pub basis: Option<LinkBasis>,
    /// The score of a similarity link.
    pub similarity: Option<f64>,
}

/// A context mutation recorded on another span (event `audita.context.mutation`, or
/// the attribute `audita.context.mutation.output.hash`): its output is folded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoldedMutation {
    /// `audita.mutation.output.hash`.
    pub output_hash: ArtifactHash,
    /// `audita.mutation.input.parts`, when recorded (descriptive: the edge rules read
    /// only the consuming spans' `audita.input.parts`).
    pub input_parts: Vec<ArtifactHash>,
    /// `audita.mutation.kind`, when recorded.
    pub kind: Option<MutationKind>,
}

/// What a derived part is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PartKind {
    /// A text part of a message (its UTF-8 bytes).
    Text,
    /// A tool call's arguments (canonical JSON), in a model output or input, or the
    /// arguments a tool span received.
    ToolCall,
    /// The one string-valued argument of a tool call, or a tool span's non-JSON input
    /// (OpenInference records `input.value` bare for single-argument tools).
    SingleArgument,
    /// A tool's result, as the tool span returned it or a later model input holds it.
    ToolResult,
    /// A compaction summary standing for earlier history (a part of type `compaction`):
    /// its UTF-8 content, or its canonical JSON when it has none.
    Compaction,
    /// Any other part (blob, file, URI, reasoning, …), as canonical JSON.
    Other,
}

impl PartKind {
    /// The name used in payloads and JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::ToolCall => "tool_call",
            Self::SingleArgument => "single_argument",
            Self::ToolResult => "tool_result",
            Self::Compaction => "compaction",
            Self::Other => "other",
        }
    }

    /// Reads [`PartKind::as_str`]'s names.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "text" => Self::Text,
            "tool_call" => Self::ToolCall,
            "single_argument" => Self::SingleArgument,
            "tool_result" => Self::ToolResult,
            "compaction" => Self::Compaction,
            "other" => Self::Other,
            _ => return None,
        })
    }
}

/// What is known of one derived part besides its hash.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct PartMeta {
    /// The part's kind.
    pub kind: PartKind,
    /// The role of the message it is in (`user`, `system`, `assistant`, `tool`, …);
    /// `None` for a tool span's arguments and result.
    pub role: Option<String>,
    /// The position of that message in the span's input or output (`None` for a tool
    /// span's parts).
    pub message: Option<u32>,
    /// The tool call id the record pairs it with (`gen_ai.tool.call.id`, a part's
    /// `id`, `tool_call_id`).
    pub call_id: Option<String>,
    /// The record holds a cut value (`...[truncated]`, `ag2.tool.call.result.truncated`).
    pub truncated: bool,
}

impl PartMeta {
    /// A part of `kind` with nothing else known.
    pub fn new(kind: PartKind) -> Self {
        Self {
            kind,
            role: None,
            message: None,
            call_id: None,
            truncated: false,
        }
    }

    /// Whether a message of this role comes from outside the recorded system when no
    /// span produced it (the user's and the system prompt's parts).
    pub fn is_external_role(&self) -> bool {
        matches!(
            self.role.as_deref(),
            Some("user" | "system" | "human" | "developer")
        ) && matches!(self.kind, PartKind::Text | PartKind::Other)
    }
}

/// A part the span recorded without its content (content capture off), kept for its
/// call id: the structure still pairs a model's tool call with the tool span.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Opaque {
    /// `ToolCall` or `ToolResult`.
    pub kind: PartKind,
    /// The call id.
    pub call_id: String,
}

/// Whether a span recorded what it consumed (and produced) in full.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Capture {
    /// Everything the derivation reads was there (or the span declares its hashes).
    #[default]
    Complete,
    /// Content was not captured (absent, redacted, or unreadable); `setting` names the
    /// switch that turns capture on for the span's instrumentation.
    NotCaptured {
        /// The instrumentation's setting (or what to re-export with).
        setting: String,
    },
    /// The history the span holds lacks what an earlier model call of the same
    /// conversation produced: the instrumentation does not log all of the input.
    HistoryUnlogged {
        /// What is missing.
        detail: String,
    },
    /// A recorded value was cut by the instrumentation.
    Truncated {
        /// The marker or attribute that says so.
        marker: String,
    },
}

impl Capture {
    /// `complete`, `not_captured`, `history_unlogged`, `truncated`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Complete => "complete",
            Self::NotCaptured { .. } => "not_captured",
            Self::HistoryUnlogged { .. } => "history_unlogged",
            Self::Truncated { .. } => "truncated",
        }
    }

    /// The witness reason code of a gap (`None` when complete).
    pub fn code(&self) -> Option<&'static str> {
        match self {
            Self::Complete => None,
            Self::NotCaptured { .. } => Some("content_not_captured"),
            Self::HistoryUnlogged { .. } | Self::Truncated { .. } => Some("history_truncated"),
        }
    }

    /// The setting, marker or detail text (empty when complete).
    pub fn detail(&self) -> &str {
        match self {
            Self::Complete => "",
            Self::NotCaptured { setting } => setting,
            Self::HistoryUnlogged { detail } => detail,
            Self::Truncated { marker } => marker,
        }
    }

    /// The setting that would have closed the gap, when one is known.
    pub fn setting(&self) -> Option<String> {
        match self {
            Self::NotCaptured { setting } => Some(setting.clone()),
            Self::Truncated { marker } if marker.starts_with("ag2.") => {
                Some("TelemetryMiddleware(max_tool_result_chars=None)".into())
            }
            _ => None,
        }
    }

    /// The gap from its [`Capture::as_str`] name and detail text.
    pub fn from_parts(name: &str, detail: &str) -> Option<Self> {
        let d = detail.to_string();
        Some(match name {
            "complete" => Self::Complete,
            "not_captured" => Self::NotCaptured { setting: d },
            "history_unlogged" => Self::HistoryUnlogged { detail: d },
            "truncated" => Self::Truncated { marker: d },
            _ => return None,
        })
    }

    /// How much the gap weighs: a span keeps the heaviest one it has.
    fn weight(&self) -> u8 {
        match self {
            Self::Complete => 0,
            Self::Truncated { .. } => 1,
            Self::HistoryUnlogged { .. } => 2,
            Self::NotCaptured { .. } => 3,
        }
    }

    /// Keeps the heavier of `self` and `other`.
    pub fn join(&mut self, other: Capture) {
        if other.weight() > self.weight() {
            *self = other;
        }
    }
}

/// An artifact a span wrote to durable state or read back from it, derived from its
/// GenAI content ([`crate::genai`]): what the memo calls its write-set and read-set
/// when the instrumentation records none (`audita.write_set`/`audita.read_set`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Stored {
    /// The content hash; `None` for a document recorded by id (and score) only.
    pub hash: Option<ArtifactHash>,
    /// The record or document id, when the record holds one.
    pub record_id: Option<String>,
}

/// An artifact of another span that a span's content holds verbatim without being it
/// (found at import, where the content is at hand): a plausible data flow, not an
/// identity.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Contained {
    /// `None`: the span's result holds an artifact another span stored (a read that
    /// returned a write in another form). `Some(i)`: input part `i` holds an artifact
    /// another span returned from durable state (retrieved content pasted into a
    /// message by code the record does not show).
    pub part: Option<usize>,
    /// The artifact held.
    pub artifact: ArtifactHash,
}

/// One logged step.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// The span id.
    pub span_id: SpanId,
    /// The call-nesting parent (`parentSpanId`), if any: locates window exits only.
    pub parent: Option<SpanId>,
    /// The span's name.
    pub name: String,
    /// Start time, nanoseconds since the Unix epoch.
    pub start_ns: u64,
    /// End time, nanoseconds since the Unix epoch.
    pub end_ns: u64,
    /// `gen_ai.operation.name`.
    pub operation: Option<Operation>,
    /// The principal: `gen_ai.agent.name` (or the nearest enclosing agent span's).
    pub agent: Option<String>,
    /// `gen_ai.tool.name`.
    pub tool: Option<String>,
    /// `audita.input.parts`: what the span consumed, in order.
    pub input_parts: Vec<ArtifactHash>,
    /// `audita.input.hash`.
    pub input_hash: Option<ArtifactHash>,
    /// `audita.output.hash`.
    pub output_hash: Option<ArtifactHash>,
    /// `audita.output.parts`.
    pub output_parts: Vec<ArtifactHash>,
    /// `audita.roots`: artifacts entering from outside the recorded system. Only a
    /// root span's (no `parent`) count: a nested span cannot declare an artifact
    /// external and so hide the edge that produced it.
    pub roots: Vec<ArtifactHash>,
    /// `audita.mutation.kind`: the span is itself a context mutation.
    pub mutation: Option<MutationKind>,
    /// Mutations recorded on this span (folded).
    pub folded: Vec<FoldedMutation>,
    /// `audita.write_set`.
    pub write_set: Vec<Entry>,
    /// `audita.read_set`.
    pub read_set: Vec<Entry>,
    /// `links[]`.
    pub links: Vec<Link>,
    /// One entry per `input_parts` entry when the inputs were derived from GenAI
    /// content; empty when they were declared (`audita.input.parts`).
    pub input_meta: Vec<PartMeta>,
    /// One entry per `output_parts` entry when the outputs were derived.
    pub output_meta: Vec<PartMeta>,
    /// Consumed parts recorded without content, with their call ids.
    pub opaque_inputs: Vec<Opaque>,
    /// Produced parts recorded without content, with their call ids.
    pub opaque_outputs: Vec<Opaque>,
    /// Whether the span recorded what it consumed and produced.
    pub capture: Capture,
    /// The instrumentation scope that emitted the span (`scope.name`), naming the
    /// setting of a content gap.
    pub instrumentation: Option<String>,
    /// `gen_ai.conversation.id`: the requests of one conversation form its history
    /// chain ([`crate::history`]).
    pub conversation: Option<String>,
    /// `gen_ai.conversation.compacted` (or a `compaction` part in its input): the
    /// request's history was compacted before it was sent.
    pub compacted: bool,
    /// What the span wrote that a later read may return byte for byte: a tool's
    /// arguments (whole, its single argument, and each string value of at least
    /// [`crate::genai::MIN_STORED_BYTES`] bytes), a memory write's records.
    pub stored: Vec<Stored>,
    /// What the span read back from durable state or returned as a tool result: the
    /// result (whole, and each content string of a JSON result of at least
    /// [`crate::genai::MIN_STORED_BYTES`] bytes), a memory search's records, a
    /// retrieval's documents (with content, or by id only).
    pub returned: Vec<Stored>,
    /// Why the span is a read of durable state (memory, vector store, retrieval), when
    /// it is one: its operation, its attributes, its tool's name, or a retrieval
    /// nested in it. A read with no logged write in the window leaves the window.
    pub store_read: Option<String>,
    /// Artifacts of other spans this span's content holds verbatim without being
    /// them ([`Contained`]).
    pub contains: Vec<Contained>,
}

impl Node {
    /// A node with only an id, a name and a start time (the rest empty): for building
    /// traces in code.
    pub fn new(span_id: SpanId, name: &str, start_ns: u64) -> Self {
        Self {
            span_id,
            parent: None,
            name: name.to_string(),
            start_ns,
            end_ns: start_ns,
            operation: None,
            agent: None,
            tool: None,
            input_parts: Vec::new(),
            input_hash: None,
            output_hash: None,
            output_parts: Vec::new(),
            roots: Vec::new(),
            mutation: None,
            folded: Vec::new(),
            write_set: Vec::new(),
            read_set: Vec::new(),
            links: Vec::new(),
            input_meta: Vec::new(),
            output_meta: Vec::new(),
            opaque_inputs: Vec::new(),
            opaque_outputs: Vec::new(),
            capture: Capture::Complete,
            instrumentation: None,
            conversation: None,
            compacted: false,
            stored: Vec::new(),
            returned: Vec::new(),
            store_read: None,
            contains: Vec::new(),
        }
    }

    /// When the span's output was available: its end, or its start when the record
    /// gives no later end.
    pub fn available_ns(&self) -> u64 {
        self.end_ns.max(self.start_ns)
    }

    /// The metadata of input part `i`, when the inputs were derived.
    pub fn input_meta(&self, i: usize) -> Option<&PartMeta> {
        self.input_meta.get(i)
    }

    /// Whether the span consumed anything it recorded (a hashed part, a read-set
    /// entry, or a content-less part).
    pub fn consumed_anything(&self) -> bool {
        !self.input_parts.is_empty() || !self.read_set.is_empty() || !self.opaque_inputs.is_empty()
    }

    /// Whether the span produced `h` as its output or one of its output parts.
    pub fn produces(&self, h: &ArtifactHash) -> bool {
        self.output_hash.as_ref() == Some(h) || self.output_parts.contains(h)
    }
}

/// A set of logged steps, keyed by span id.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trace {
    nodes: BTreeMap<SpanId, Node>,
    roots: BTreeSet<ArtifactHash>,
    orphan_log_records: usize,
}

impl Trace {
    /// An empty trace.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a node; `Err` with the node back when its span id is already present.
    pub fn insert(&mut self, node: Node) -> Result<(), Box<Node>> {
        if self.nodes.contains_key(&node.span_id) {
            return Err(Box::new(node));
        }
        if node.parent.is_none() {
            self.roots.extend(node.roots.iter().cloned());
        }
        self.nodes.insert(node.span_id.clone(), node);
        Ok(())
    }

    /// The node with this span id.
    pub fn get(&self, id: &SpanId) -> Option<&Node> {
        self.nodes.get(id)
    }

    /// Mutable access (for building variants in tests and tools). Roots added through
    /// it are not seen: set roots before [`Trace::insert`].
    pub fn get_mut(&mut self, id: &SpanId) -> Option<&mut Node> {
        self.nodes.get_mut(id)
    }

    /// All nodes in span-id order.
    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.values()
    }

    /// The number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the trace has no node.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Every `audita.roots` artifact of a root span (one without a parent).
    pub fn roots(&self) -> &BTreeSet<ArtifactHash> {
        &self.roots
    }

    /// GenAI log records the reader found whose span is not in the trace.
    pub fn orphan_log_records(&self) -> usize {
        self.orphan_log_records
    }

    /// Sets [`Trace::orphan_log_records`] (the reader's count).
    pub fn set_orphan_log_records(&mut self, n: usize) {
        self.orphan_log_records = n;
    }

    /// For every span, its nearest strict ancestor (by `parent`) for which `pred`
    /// holds; memoised, so linear in the number of spans even for deep or cyclic
    /// nesting.
    pub fn nearest_ancestor(&self, pred: impl Fn(&Node) -> bool) -> BTreeMap<SpanId, SpanId> {
        let mut memo: BTreeMap<SpanId, Option<SpanId>> = BTreeMap::new();
        for n in self.nodes() {
            let mut path: Vec<SpanId> = Vec::new();
            let mut seen: BTreeSet<SpanId> = BTreeSet::new();
            let mut at = n.parent.clone();
            let answer = loop {
                let Some(cur) = at else { break None };
                if let Some(known) = memo.get(&cur) {
                    // `cur`'s own nearest is known; `cur` itself may qualify.
                    let here = self.get(&cur).filter(|c| pred(c)).map(|_| cur.clone());
                    break here.or_else(|| known.clone());
                }
                let Some(node) = self.get(&cur) else {
                    break None;
                };
                if pred(node) {
                    break Some(cur);
                }
                if !seen.insert(cur.clone()) {
                    break None;
                }
                path.push(cur.clone());
                at = node.parent.clone();
            };
            // Every span on the path (none of which qualified) has the same answer.
            for p in path {
                memo.insert(p, answer.clone());
            }
            memo.insert(n.span_id.clone(), answer);
        }
        memo.into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect()
    }
}

/// The content behind artifact hashes, as an importer read it: the exact bytes each
/// derived hash was taken over (a text part's text, canonical arguments and results,
/// a single argument, a query, a stored or returned record). Kept beside the
/// [`Trace`], never in it: nodes hold hashes only, and a sealed record holds no
/// content. Every entry is checked on insertion (`sha256(text)` is its key), so
/// content from any source can only ever stand for the artifact it hashes to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Contents {
    texts: BTreeMap<ArtifactHash, String>,
}

impl Contents {
    /// No content.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `text` under its own hash, and returns that hash.
    pub fn insert(&mut self, text: &str) -> ArtifactHash {
        let h = ArtifactHash::of(text.as_bytes());
        self.texts
            .entry(h.clone())
            .or_insert_with(|| text.to_string());
        h
    }

    /// The text behind `h`, when it was read.
    pub fn get(&self, h: &ArtifactHash) -> Option<&str> {
        self.texts.get(h).map(String::as_str)
    }

    /// The number of artifacts with content.
    pub fn len(&self) -> usize {
        self.texts.len()
    }

    /// Whether no content was read.
    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }
}
