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
        }
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
}
