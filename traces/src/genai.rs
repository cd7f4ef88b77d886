//! Artifact hashes derived from the standard GenAI content a span records, for spans
//! that carry no `audita.*` hashes: the repository's reading of
//! `shared/agent-traces/CONVENTIONS.md` for traces as real frameworks emit them.
//!
//! **What is read.** A span is a model call ([`Role::Chat`]: `gen_ai.operation.name`
//! `chat`, `text_completion` or `generate_content`, or OpenInference span kind `LLM`)
//! or a tool call ([`Role::Tool`]: `execute_tool`, or `TOOL`); nothing is derived
//! from any other span (agent, chain and task spans repeat the whole state and would
//! only add false producers). A model call's messages come from, in this order:
//! `gen_ai.input.messages`/`gen_ai.output.messages` (a JSON string or a structured
//! value; each message in the GenAI parts schema **or** in OpenAI chat format, as AG2
//! writes it), OpenInference's `llm.input_messages.N.message.*` /
//! `llm.output_messages.N.*`, OpenLLMetry's flattened `gen_ai.prompt.N.*` /
//! `gen_ai.completion.N.*`, the ≤ v1.27 span events `gen_ai.content.prompt` /
//! `gen_ai.content.completion`, the v1.28–v1.36 log records
//! `gen_ai.{system,user,assistant,tool}.message` / `gen_ai.choice` joined to the span,
//! and the same events recorded as **span events** (Strands Agents' default: `content`
//! or `message` the JSON of the message's Bedrock Converse content blocks, `{"text"}`,
//! `{"toolUse": {toolUseId, name, input}}`, `{"toolResult": {toolUseId, content}}`).
//! Every content attribute (`gen_ai.input.messages`, `gen_ai.output.messages`,
//! `gen_ai.system_instructions`, `gen_ai.tool.call.arguments`/`result`, the memory and
//! retrieval records) is read from the span's events too when the span itself lacks
//! it (the conventions' `gen_ai.client.inference.operation.details` event): an
//! instrumentation may put content in either.
//! `gen_ai.system_instructions` is one more system message, first, unless an
//! identical one is present. A tool call's arguments are `gen_ai.tool.call.arguments`
//! (else OpenInference `input.value`), its result `gen_ai.tool.call.result` (else
//! `output.value`), its id `gen_ai.tool.call.id`; LangChain's callback envelope
//! (`input_str` + `inputs` + `kwargs.tool_call_id`) and serialised `ToolMessage`s are
//! unwrapped; Strands' tool spans record the arguments on a `gen_ai.tool.message`
//! event and the result's content blocks on a `gen_ai.choice` event, and a Strands
//! result's blocks are what the model is handed, their text (a Converse `toolResult`'s
//! content likewise). Strands' memory spans `memory.add` (a write: event
//! `memory.content`, the written content, which is also what the span consumed) and
//! `memory.search` (a read: events `memory.query` and `memory.results`, the JSON list
//! of entries with `content`) are memory operations like `create_memory` and
//! `search_memory`.
//!
//! **The bytes each hash is taken over** (`sha256:<hex>` of):
//! - a text part: its content's UTF-8 bytes, as recorded (no normalisation);
//! - tool-call arguments: the RFC 8785 canonical JSON ([`crate::jcs`]) of the
//!   arguments, a string holding a JSON object or array parsed first; any other
//!   string as its UTF-8 bytes (so `{"doc_id": "x"}` as a string, as an object and as
//!   `{"doc_id":"x"}` are one artifact);
//! - a single argument ([`PartKind::SingleArgument`]): the UTF-8 bytes of the value of
//!   a tool call's only argument when it is a string (of each of its strings when it
//!   is a list of strings, such as a memory tool's `entries`), and of a tool span's
//!   input when it is not a JSON object or array (a JSON string is unquoted first);
//! - a tool result: canonical JSON when it is (or a string holding) a JSON object or
//!   array, else a string's UTF-8 bytes (a scalar string is never parsed: `"5000"`
//!   stays text), else the canonical JSON of the scalar;
//! - any other part: the canonical JSON of the part;
//! - a model call's whole output (`output_hash`): the canonical JSON of the list of
//!   its normalised messages `{"role", "parts": [{"type": "text", "content"} |
//!   {"type": "tool_call", "id"?, "name"?, "arguments"} | {"type":
//!   "tool_call_response", "id"?, "response"} | other parts as recorded]}`, without
//!   `finish_reason` and `name`.
//!
//! These are the hashes `audita.output.parts` declares ("each tool call's arguments
//! (canonical JSON) and each text part"), so declared and derived hashes meet.
//!
//! Design constraints:
//! - Pure and total: unreadable content is a content gap ([`Capture::NotCaptured`]),
//!   never an error; nothing panics on input.
//! - Absent content is never hashed: a missing attribute or field, OpenInference's
//!   `__REDACTED__` and openai-agents-v2's `readacted` mark the part as not captured;
//!   a part that still has a call id is kept as an [`Opaque`] part.
//! - A `tool_call_response` part's content is its `response`, else its `result` (both
//!   are in the wild); a tool message's text part that repeats its
//!   `tool_call_response` is dropped (openai-agents-v2 records both).
//! - A value ending in `...[truncated]`, or a tool span with
//!   `ag2.tool.call.result.truncated`, is marked truncated ([`Capture::Truncated`]).
//! - A content gap names the switch that turns capture on, by instrumentation
//!   ([`capture_setting`]): OpenInference (scope `openinference.*`, or any span with
//!   `openinference.span.kind`) `OPENINFERENCE_HIDE_INPUTS/OUTPUTS=false`; pydantic-ai
//!   `InstrumentationSettings(include_content=True)`; AG2
//!   `TelemetryMiddleware(capture_content=True)`; OpenLLMetry's LangChain
//!   instrumentation `TRACELOOP_TRACE_CONTENT=true`; Strands Agents (scope
//!   `strands.*`, which records content unless told to redact it, then writes
//!   `[REDACTED]`) `OTEL_SEMCONV_STABILITY_OPT_IN` without its
//!   `gen_ai_unredacted_attributes=` token; any other
//!   `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`.

mod store;

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::hash::ArtifactHash;
use crate::jcs::canonical;
use crate::model::{Capture, Opaque, PartKind, PartMeta};

pub use store::{tool_store_read, Io, Texts, MIN_STORED_BYTES};

/// Values that stand for content an instrumentation withheld.
pub const REDACTED: [&str; 3] = ["__REDACTED__", "readacted", "[REDACTED]"];

/// The suffix AG2 (and others) append to a value they cut.
pub const TRUNCATION_MARKER: &str = "...[truncated]";

/// What a span is, for content derivation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A model call.
    Chat,
    /// A tool call.
    Tool,
    /// A memory or retrieval operation (`search_memory`, `retrieval`,
    /// `create_memory`, `update_memory`, OpenInference `RETRIEVER`).
    Store,
    /// Anything else: nothing is derived.
    Other,
}

/// The content a span carries, as the reader found it.
pub struct SpanContent<'a> {
    /// Every attribute, converted to JSON (a string stays a string).
    pub attrs: &'a BTreeMap<String, Value>,
    /// Span events: (name, attributes).
    pub events: &'a [(String, BTreeMap<String, Value>)],
    /// Log records joined to the span, in order: (event name, body).
    pub logs: &'a [(String, Value)],
    /// The instrumentation scope's name.
    pub scope: Option<&'a str>,
    /// The span's status is an error.
    pub error: bool,
    /// The span's name (a tool span's tool name when no attribute names it).
    pub name: &'a str,
}

/// What was derived from one span.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Derived {
    /// Consumed parts, in order.
    pub inputs: Vec<(ArtifactHash, PartMeta)>,
    /// Produced parts.
    pub outputs: Vec<(ArtifactHash, PartMeta)>,
    /// The whole output's hash.
    pub output_hash: Option<ArtifactHash>,
    /// Consumed parts without content.
    pub opaque_inputs: Vec<Opaque>,
    /// Produced parts without content.
    pub opaque_outputs: Vec<Opaque>,
    /// What was not recorded.
    pub capture: Capture,
    /// Whether input content was found at all (else nothing was derived for inputs).
    pub has_inputs: bool,
    /// Whether output content was found at all.
    pub has_outputs: bool,
    /// What the span wrote and read back ([`store`]).
    pub io: Io,
    /// The exact bytes behind the content hashes derived (text parts, canonical
    /// arguments and results, single arguments, queries), for
    /// [`crate::model::Contents`].
    pub content: Vec<String>,
}

/// The span's role from `gen_ai.operation.name`, OpenInference's span kind, or the
/// older OpenLLMetry `llm.request.type`.
pub fn role(attrs: &BTreeMap<String, Value>) -> Role {
    let s = |k: &str| attrs.get(k).and_then(Value::as_str);
    match s("gen_ai.operation.name") {
        Some("chat" | "text_completion" | "generate_content") => return Role::Chat,
        Some("execute_tool") => return Role::Tool,
        Some(
            "search_memory" | "retrieval" | "create_memory" | "update_memory" | "memory.search"
            | "memory.add",
        ) => return Role::Store,
        Some(_) => return Role::Other,
        None => {}
    }
    match s("openinference.span.kind") {
        Some("LLM") if is_helper(attrs) => return Role::Other,
        Some("LLM") => return Role::Chat,
        Some("TOOL") => return Role::Tool,
        Some("RETRIEVER") => return Role::Store,
        Some(_) => return Role::Other,
        None => {}
    }
    match s("llm.request.type") {
        Some("chat" | "completion") => Role::Chat,
        _ => Role::Other,
    }
}

/// An OpenInference `LLM` span that records no model exchange (no
/// `llm.input_messages`, `llm.output_messages` or `llm.prompts`) and whose recorded
/// output is a prepared request (`output.value` a JSON object with `messages`), not
/// a response: a helper the instrumentation wraps like a model call, such as
/// LlamaIndex's `_prepare_chat_with_tools`, which only assembles the request. Nothing
/// is derived from it and it has no content gap: capture is on (the output is
/// there), and the model call it prepares is its own span. A model call whose
/// messages are hidden (`OPENINFERENCE_HIDE_INPUT_MESSAGES`) records a response, not
/// a request, so it keeps its gap. With only the outputs hidden the helper is known
/// by its input (`tools` and `chat_history`, what the request is prepared from); with
/// its input hidden too, nothing says it is a helper and the gap stands (capture is
/// off).
pub fn is_helper(attrs: &BTreeMap<String, Value>) -> bool {
    let exchange = attrs.keys().any(|k| {
        k.starts_with("llm.input_messages.")
            || k.starts_with("llm.output_messages.")
            || k.starts_with("llm.prompts")
    });
    let prepared = present(attrs.get("output.value"))
        .and_then(json_attr)
        .is_some_and(|v| v.get("messages").is_some_and(Value::is_array));
    // Its input, when only the outputs are hidden (`OPENINFERENCE_HIDE_OUTPUTS`): the
    // tools and the chat history a request is prepared from.
    let preparing = present(attrs.get("input.value"))
        .and_then(json_attr)
        .is_some_and(|v| v.get("tools").is_some() && v.get("chat_history").is_some());
    !exchange && (prepared || preparing)
}

/// The switch that turns content capture on, by instrumentation scope (a span with
/// OpenInference's `openinference.span.kind` is OpenInference's whatever its scope).
pub fn capture_setting(scope: Option<&str>, attrs: &BTreeMap<String, Value>) -> String {
    let s = scope.unwrap_or("");
    if s.starts_with("openinference") || attrs.contains_key("openinference.span.kind") {
        "OPENINFERENCE_HIDE_INPUTS=false and OPENINFERENCE_HIDE_OUTPUTS=false (and the *_MESSAGES variants)".into()
    } else if s == "pydantic-ai" || s.starts_with("pydantic_ai") {
        "InstrumentationSettings(include_content=True)".into()
    } else if s.starts_with("opentelemetry.instrumentation.ag2") {
        "TelemetryMiddleware(capture_content=True)".into()
    } else if s.starts_with("opentelemetry.instrumentation.langchain") {
        "TRACELOOP_TRACE_CONTENT=true".into()
    } else if s.starts_with("strands") {
        STRANDS_SETTING.into()
    } else {
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true".into()
    }
}

/// Strands Agents' switch: it records content unless `OTEL_SEMCONV_STABILITY_OPT_IN`
/// holds a `gen_ai_unredacted_attributes=<list>` token, which redacts every sensitive
/// attribute the list does not name (`strands.telemetry.tracer`).
pub const STRANDS_SETTING: &str = "OTEL_SEMCONV_STABILITY_OPT_IN without its gen_ai_unredacted_attributes= token (Strands Agents redacts every content attribute that token's list does not name)";

/// The attributes an instrumentation may record either on the span or on one of its
/// events (the GenAI conventions' `gen_ai.client.inference.operation.details` event,
/// Strands' content events in their default mode).
const CONTENT_KEYS: [&str; 7] = [
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "gen_ai.memory.records",
    "gen_ai.retrieval.documents",
];

/// Derives the hashes of one span (see the module documentation). A content
/// attribute the span lacks is read from the first of its events that has it.
pub fn derive(c: &SpanContent<'_>) -> Derived {
    let missing =
        |k: &&str| !c.attrs.contains_key(*k) && c.events.iter().any(|(_, a)| a.contains_key(*k));
    if !CONTENT_KEYS.iter().any(missing) {
        return derive_role(c);
    }
    let mut attrs = c.attrs.clone();
    for k in CONTENT_KEYS {
        if !attrs.contains_key(k) {
            if let Some(v) = c.events.iter().find_map(|(_, a)| a.get(k)) {
                attrs.insert(k.to_string(), v.clone());
            }
        }
    }
    derive_role(&SpanContent {
        attrs: &attrs,
        events: c.events,
        logs: c.logs,
        scope: c.scope,
        error: c.error,
        name: c.name,
    })
}

fn derive_role(c: &SpanContent<'_>) -> Derived {
    match role(c.attrs) {
        Role::Chat => derive_chat(c),
        Role::Tool => derive_tool(c),
        Role::Store => derive_store(c),
        Role::Other => Derived::default(),
    }
}

/// The keys of Bedrock Converse content blocks (`{"text": …}`, `{"toolUse": …}`, …),
/// the message format Strands Agents records.
const CONVERSE_KEYS: [&str; 12] = [
    "text",
    "toolUse",
    "toolResult",
    "json",
    "image",
    "document",
    "video",
    "reasoningContent",
    "citationsContent",
    "cachePoint",
    "guardContent",
    "interruptResponse",
];

/// A list of Converse content blocks (or a string holding one): every item an object
/// without `type` that has a Converse block key.
fn converse_blocks(v: &Value) -> Option<Vec<Value>> {
    let parsed;
    let v = match v {
        Value::String(s) if s.trim_start().starts_with('[') => {
            parsed = serde_json::from_str::<Value>(s).ok()?;
            &parsed
        }
        v => v,
    };
    let items = v.as_array()?;
    let ok = !items.is_empty()
        && items.iter().all(|it| {
            it.as_object().is_some_and(|o| {
                !o.contains_key("type") && o.keys().any(|k| CONVERSE_KEYS.contains(&k.as_str()))
            })
        });
    ok.then(|| items.clone())
}

/// What a Converse `toolResult`'s `content` blocks hand the model: the text of its
/// text blocks joined by newlines when all are text, a single `json` block's value,
/// else the blocks as they are.
fn converse_result(blocks: &[Value]) -> Value {
    let texts: Option<Vec<&str>> = blocks
        .iter()
        .map(|b| b.get("text").and_then(Value::as_str))
        .collect();
    match texts {
        Some(t) if !t.is_empty() => Value::String(t.join("\n")),
        _ => match blocks {
            [b] if b.get("json").is_some() => b["json"].clone(),
            _ => Value::Array(blocks.to_vec()),
        },
    }
}

/// One Converse content block as a part.
fn converse_part(b: &Value) -> Part {
    if let Some(t) = b.get("text") {
        return Part::Text(present(Some(t)).and_then(text_of));
    }
    if let Some(u) = b.get("toolUse") {
        return Part::ToolCall {
            id: id_of(u.get("toolUseId")),
            name: u.get("name").and_then(Value::as_str).map(str::to_string),
            args: present(u.get("input")).cloned(),
        };
    }
    if let Some(r) = b.get("toolResult") {
        let content = present(r.get("content")).map(|c| match c.as_array() {
            Some(bs) => converse_result(bs),
            None => c.clone(),
        });
        return Part::ToolResult {
            id: id_of(r.get("toolUseId")),
            content,
        };
    }
    Part::Other(b.clone())
}

// ---------------------------------------------------------------- messages

/// One normalised message part.
#[derive(Clone, Debug)]
enum Part {
    Text(Option<String>),
    ToolCall {
        id: Option<String>,
        name: Option<String>,
        args: Option<Value>,
    },
    ToolResult {
        id: Option<String>,
        content: Option<Value>,
    },
    /// A compaction summary: the whole part, and its content when it has one.
    Compaction(Value, Option<Value>),
    Other(Value),
}

/// One normalised message.
#[derive(Clone, Debug)]
struct Msg {
    role: String,
    parts: Vec<Part>,
}

fn present(v: Option<&Value>) -> Option<&Value> {
    match v {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if REDACTED.contains(&s.as_str()) => None,
        Some(v) => Some(v),
    }
}

fn id_of(v: Option<&Value>) -> Option<String> {
    match v {
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    }
}

fn text_of(v: &Value) -> Option<String> {
    match v {
        Value::String(s) if REDACTED.contains(&s.as_str()) => None,
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// A GenAI parts-schema message or an OpenAI chat-format message.
fn normalise(m: &Value) -> Option<Msg> {
    let obj = m.as_object()?;
    let role = obj
        .get("role")
        .and_then(Value::as_str)
        .unwrap_or("user")
        .to_string();
    let mut parts = Vec::new();
    if let Some(list) = obj.get("parts").and_then(Value::as_array) {
        for p in list {
            parts.push(schema_part(p));
        }
    } else {
        chat_parts(obj, &role, &mut parts);
    }
    dedupe_tool_text(&mut parts);
    Some(Msg { role, parts })
}

fn schema_part(p: &Value) -> Part {
    let Some(o) = p.as_object() else {
        return Part::Other(p.clone());
    };
    match o.get("type").and_then(Value::as_str) {
        Some("text") => Part::Text(present(o.get("content")).and_then(text_of)),
        Some("tool_call") => Part::ToolCall {
            id: id_of(o.get("id")),
            name: o.get("name").and_then(Value::as_str).map(str::to_string),
            args: present(o.get("arguments")).cloned(),
        },
        Some("tool_call_response") => Part::ToolResult {
            id: id_of(o.get("id")),
            content: present(o.get("response").or_else(|| o.get("result"))).cloned(),
        },
        Some("compaction") => Part::Compaction(
            p.clone(),
            present(o.get("content").or_else(|| o.get("summary"))).cloned(),
        ),
        _ => Part::Other(p.clone()),
    }
}

/// OpenAI chat format: `content` (a string or content parts), `tool_calls[]` with
/// `function.{name, arguments}`, the legacy `function_call`, and a `tool` message's
/// `tool_call_id` (or a log record body's `id`).
fn chat_parts(obj: &Map<String, Value>, role: &str, parts: &mut Vec<Part>) {
    let content = obj.get("content");
    if let Some(blocks) = content.filter(|c| c.is_array()).and_then(converse_blocks) {
        parts.extend(blocks.iter().map(converse_part));
        return;
    }
    if role == "tool" || obj.contains_key("tool_call_id") {
        parts.push(Part::ToolResult {
            id: id_of(obj.get("tool_call_id").or_else(|| obj.get("id"))),
            content: present(content).cloned(),
        });
    } else {
        match content {
            Some(Value::String(s)) if s.is_empty() => {}
            Some(Value::Array(items)) => {
                for it in items {
                    match it.get("type").and_then(Value::as_str) {
                        Some("text" | "input_text" | "output_text") => {
                            parts.push(Part::Text(present(it.get("text")).and_then(text_of)))
                        }
                        _ => parts.push(Part::Other(it.clone())),
                    }
                }
            }
            None | Some(Value::Null) => {
                // A message with neither content nor tool calls recorded nothing.
                if !obj.contains_key("tool_calls") && !obj.contains_key("function_call") {
                    parts.push(Part::Text(None));
                }
            }
            Some(v @ Value::String(_)) => parts.push(Part::Text(text_of(v))),
            Some(v) => parts.push(Part::Other(v.clone())),
        }
    }
    let calls = obj
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    for tc in calls {
        let f = tc.get("function");
        parts.push(Part::ToolCall {
            id: id_of(tc.get("id")),
            name: f
                .and_then(|f| f.get("name"))
                .or_else(|| tc.get("name"))
                .and_then(Value::as_str)
                .map(str::to_string),
            args: present(
                f.and_then(|f| f.get("arguments"))
                    .or_else(|| tc.get("arguments")),
            )
            .cloned(),
        });
    }
    if let Some(fc) = obj.get("function_call").filter(|v| v.is_object()) {
        parts.push(Part::ToolCall {
            id: None,
            name: fc.get("name").and_then(Value::as_str).map(str::to_string),
            args: present(fc.get("arguments")).cloned(),
        });
    }
}

/// Drops a text part that repeats a tool result of the same message.
fn dedupe_tool_text(parts: &mut Vec<Part>) {
    let results: Vec<ArtifactHash> = parts
        .iter()
        .filter_map(|p| match p {
            Part::ToolResult {
                content: Some(c), ..
            } => Some(result_hash(c)),
            _ => None,
        })
        .collect();
    if results.is_empty() {
        return;
    }
    parts.retain(|p| match p {
        Part::Text(Some(t)) => !results.contains(&ArtifactHash::of(t.as_bytes())),
        _ => true,
    });
}

/// Parses a JSON-valued attribute: a string holding JSON, or a structured value.
fn json_attr(v: &Value) -> Option<Value> {
    match v {
        Value::String(s) if REDACTED.contains(&s.as_str()) => None,
        Value::String(s) => serde_json::from_str(s).ok(),
        v => Some(v.clone()),
    }
}

/// A message list from a JSON value (a list of messages, or one message).
fn message_list(v: &Value) -> Option<Vec<Msg>> {
    match v {
        Value::Array(items) => items.iter().map(normalise).collect(),
        Value::Object(_) => normalise(v).map(|m| vec![m]),
        _ => None,
    }
}

/// A flattened attribute family (`prefix.N.rest…`) as a tree: index → nested map.
#[derive(Debug, Default)]
struct Tree {
    leaf: Option<Value>,
    kids: BTreeMap<String, Tree>,
}

impl Tree {
    fn insert(&mut self, path: &[&str], v: &Value) {
        match path.split_first() {
            None => self.leaf = Some(v.clone()),
            Some((head, rest)) => self
                .kids
                .entry(head.to_string())
                .or_default()
                .insert(rest, v),
        }
    }

    fn get(&self, path: &str) -> Option<&Tree> {
        path.split('.').try_fold(self, |t, seg| t.kids.get(seg))
    }

    fn value(&self, path: &str) -> Option<&Value> {
        self.get(path).and_then(|t| t.leaf.as_ref())
    }

    /// Children with numeric names, in numeric order.
    fn indexed(&self) -> Vec<&Tree> {
        let mut v: Vec<(u64, &Tree)> = self
            .kids
            .iter()
            .filter_map(|(k, t)| k.parse::<u64>().ok().map(|i| (i, t)))
            .collect();
        v.sort_by_key(|(i, _)| *i);
        v.into_iter().map(|(_, t)| t).collect()
    }
}

fn flattened(attrs: &BTreeMap<String, Value>, prefix: &str) -> Option<Tree> {
    let dotted = format!("{prefix}.");
    let mut tree = Tree::default();
    let mut any = false;
    for (k, v) in attrs.range(dotted.clone()..) {
        let Some(rest) = k.strip_prefix(&dotted) else {
            break;
        };
        let path: Vec<&str> = rest.split('.').collect();
        if path.first().is_some_and(|i| i.parse::<u64>().is_ok()) {
            tree.insert(&path, v);
            any = true;
        }
    }
    any.then_some(tree)
}

/// OpenInference's `llm.{input,output}_messages.N.message.*` as chat-format messages.
fn openinference_messages(attrs: &BTreeMap<String, Value>, prefix: &str) -> Option<Vec<Msg>> {
    let tree = flattened(attrs, prefix)?;
    let mut out = Vec::new();
    for t in tree.indexed() {
        let Some(m) = t.get("message") else { continue };
        let mut obj = Map::new();
        let copy = |obj: &mut Map<String, Value>, from: &str, to: &str| {
            if let Some(v) = m.value(from) {
                obj.insert(to.into(), v.clone());
            }
        };
        copy(&mut obj, "role", "role");
        copy(&mut obj, "tool_call_id", "tool_call_id");
        if m.value("content").is_some() {
            copy(&mut obj, "content", "content");
        } else if let Some(cs) = m.get("contents") {
            let items: Vec<Value> = cs
                .indexed()
                .into_iter()
                .map(|c| {
                    let mut o = Map::new();
                    if let Some(v) = c.value("message_content.type") {
                        o.insert("type".into(), v.clone());
                    }
                    if let Some(v) = c.value("message_content.text") {
                        o.insert("text".into(), v.clone());
                    }
                    Value::Object(o)
                })
                .collect();
            obj.insert("content".into(), Value::Array(items));
        }
        if let Some(tcs) = m.get("tool_calls") {
            let calls: Vec<Value> = tcs
                .indexed()
                .into_iter()
                .map(|tc| {
                    let mut f = Map::new();
                    if let Some(v) = tc.value("tool_call.function.name") {
                        f.insert("name".into(), v.clone());
                    }
                    if let Some(v) = tc.value("tool_call.function.arguments") {
                        f.insert("arguments".into(), v.clone());
                    }
                    let mut o = Map::new();
                    if let Some(v) = tc.value("tool_call.id") {
                        o.insert("id".into(), v.clone());
                    }
                    o.insert("function".into(), Value::Object(f));
                    Value::Object(o)
                })
                .collect();
            obj.insert("tool_calls".into(), Value::Array(calls));
        }
        out.extend(normalise(&Value::Object(obj)));
    }
    Some(out)
}

/// OpenLLMetry's flattened `gen_ai.{prompt,completion}.N.{role, content,
/// tool_call_id, tool_calls.M.{id, name, arguments}}`.
fn openllmetry_messages(attrs: &BTreeMap<String, Value>, prefix: &str) -> Option<Vec<Msg>> {
    let tree = flattened(attrs, prefix)?;
    let mut out = Vec::new();
    for t in tree.indexed() {
        let mut obj = Map::new();
        for k in ["role", "content", "tool_call_id"] {
            if let Some(v) = t.value(k) {
                obj.insert(k.into(), v.clone());
            }
        }
        if let Some(tcs) = t.get("tool_calls") {
            let calls: Vec<Value> = tcs
                .indexed()
                .into_iter()
                .map(|tc| {
                    let mut o = Map::new();
                    for k in ["id", "name", "arguments"] {
                        if let Some(v) = tc.value(k) {
                            o.insert(k.into(), v.clone());
                        }
                    }
                    Value::Object(o)
                })
                .collect();
            obj.insert("tool_calls".into(), Value::Array(calls));
        }
        out.extend(normalise(&Value::Object(obj)));
    }
    Some(out)
}

/// Where a side's messages came from, or why there are none.
enum Source {
    Found(Vec<Msg>),
    /// An attribute was there but could not be read.
    Unreadable(&'static str),
    Absent,
}

fn from_attr(attrs: &BTreeMap<String, Value>, key: &'static str) -> Option<Source> {
    let v = attrs.get(key)?;
    Some(match json_attr(v).as_ref().and_then(message_list) {
        Some(m) => Source::Found(m),
        None if matches!(v, Value::String(s) if REDACTED.contains(&s.as_str())) => Source::Absent,
        None => Source::Unreadable(key),
    })
}

/// A legacy span event (`gen_ai.content.prompt` with `gen_ai.prompt`).
fn from_event(c: &SpanContent<'_>, event: &str, key: &'static str) -> Option<Source> {
    let (_, attrs) = c.events.iter().find(|(n, _)| n == event)?;
    from_attr(attrs, key)
}

/// Log records joined to the span: the input messages in order, or the choices.
fn from_logs(c: &SpanContent<'_>, output: bool) -> Option<Source> {
    messages_from(c.logs.iter().map(|(n, b)| (n.as_str(), b.clone())), output)
}

/// The same events recorded as span events (Strands Agents' default): attributes
/// `content` (and `role`, `id`) of a message event, `message` of a `gen_ai.choice`;
/// a value that is a string holding Converse content blocks is read as those blocks,
/// one holding a JSON message object as that object, any other string as text.
fn from_span_events(c: &SpanContent<'_>, output: bool) -> Option<Source> {
    let value = |v: &Value| -> Value {
        if let Some(blocks) = converse_blocks(v) {
            return Value::Array(blocks);
        }
        v.clone()
    };
    let bodies = c.events.iter().map(|(name, attrs)| {
        let mut body: Map<String, Value> = attrs
            .iter()
            .map(|(k, v)| (k.clone(), if k == "content" { value(v) } else { v.clone() }))
            .collect();
        if name == "gen_ai.choice" {
            let message = match body.remove("message") {
                Some(Value::String(s)) => match serde_json::from_str::<Value>(&s) {
                    Ok(Value::Object(o)) if o.contains_key("content") || o.contains_key("role") => {
                        Value::Object(o)
                    }
                    _ => serde_json::json!({"content": value(&Value::String(s))}),
                },
                Some(v) => v,
                None => Value::Null,
            };
            body = Map::from_iter([("message".to_string(), message)]);
        }
        (name.as_str(), Value::Object(body))
    });
    messages_from(bodies, output)
}

fn messages_from<'a>(
    items: impl Iterator<Item = (&'a str, Value)>,
    output: bool,
) -> Option<Source> {
    let mut msgs = Vec::new();
    for (name, body) in items {
        let role = match name {
            "gen_ai.system.message" if !output => "system",
            "gen_ai.user.message" if !output => "user",
            "gen_ai.assistant.message" if !output => "assistant",
            "gen_ai.tool.message" if !output => "tool",
            "gen_ai.choice" if output => "assistant",
            _ => continue,
        };
        let body = if output {
            body.get("message").cloned().unwrap_or(Value::Null)
        } else {
            body.clone()
        };
        let mut obj = body.as_object().cloned().unwrap_or_default();
        obj.entry("role")
            .or_insert_with(|| Value::String(role.into()));
        msgs.extend(normalise(&Value::Object(obj)));
    }
    (!msgs.is_empty()).then_some(Source::Found(msgs))
}

fn input_source(c: &SpanContent<'_>) -> Source {
    from_attr(c.attrs, "gen_ai.input.messages")
        .or_else(|| openinference_messages(c.attrs, "llm.input_messages").map(Source::Found))
        .or_else(|| openllmetry_messages(c.attrs, "gen_ai.prompt").map(Source::Found))
        .or_else(|| from_event(c, "gen_ai.content.prompt", "gen_ai.prompt"))
        .or_else(|| from_logs(c, false))
        .or_else(|| from_span_events(c, false))
        .unwrap_or(Source::Absent)
}

fn output_source(c: &SpanContent<'_>) -> Source {
    from_attr(c.attrs, "gen_ai.output.messages")
        .or_else(|| openinference_messages(c.attrs, "llm.output_messages").map(Source::Found))
        .or_else(|| openllmetry_messages(c.attrs, "gen_ai.completion").map(Source::Found))
        .or_else(|| from_event(c, "gen_ai.content.completion", "gen_ai.completion"))
        .or_else(|| from_logs(c, true))
        .or_else(|| from_span_events(c, true))
        .unwrap_or(Source::Absent)
}

/// `gen_ai.system_instructions`: a list of parts, or a bare string.
fn system_instructions(attrs: &BTreeMap<String, Value>) -> Option<Msg> {
    let v = attrs.get("gen_ai.system_instructions")?;
    let parts = match json_attr(v) {
        Some(Value::Array(items)) => items.iter().map(schema_part).collect(),
        Some(Value::Object(o)) => vec![schema_part(&Value::Object(o))],
        _ => match v {
            Value::String(s) if !REDACTED.contains(&s.as_str()) => {
                vec![Part::Text(Some(s.clone()))]
            }
            _ => vec![Part::Text(None)],
        },
    };
    Some(Msg {
        role: "system".into(),
        parts,
    })
}

// ---------------------------------------------------------------- hashes

/// Tool-call arguments: canonical JSON of an object/array (a string holding one is
/// parsed first), else a string's bytes, else the scalar's canonical JSON.
pub fn arguments_hash(v: &Value) -> ArtifactHash {
    structured_or_bytes(v)
}

/// A tool result: the same rule as [`arguments_hash`].
pub fn result_hash(v: &Value) -> ArtifactHash {
    structured_or_bytes(v)
}

fn structured_or_bytes(v: &Value) -> ArtifactHash {
    ArtifactHash::of(hashed_text(v).as_bytes())
}

/// The bytes [`arguments_hash`] and [`result_hash`] hash.
pub fn hashed_text(v: &Value) -> String {
    match v {
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(j @ (Value::Object(_) | Value::Array(_))) => canonical(&j),
            _ => s.clone(),
        },
        v => canonical(v),
    }
}

/// Arguments as a JSON value (a string holding JSON parsed), for single-argument
/// detection and the normalised message.
fn parsed(v: &Value) -> Value {
    match v {
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(j @ (Value::Object(_) | Value::Array(_))) => j,
            _ => v.clone(),
        },
        v => v.clone(),
    }
}

fn is_truncated(v: &Value) -> bool {
    matches!(v, Value::String(s) if s.ends_with(TRUNCATION_MARKER))
}

/// The normalised JSON of one message, for the whole-output hash.
fn message_json(m: &Msg) -> Value {
    let parts: Vec<Value> = m
        .parts
        .iter()
        .map(|p| match p {
            Part::Text(c) => serde_json::json!({"type": "text", "content": c}),
            Part::ToolCall { id, name, args } => {
                let mut o = Map::new();
                o.insert("type".into(), "tool_call".into());
                if let Some(id) = id {
                    o.insert("id".into(), id.clone().into());
                }
                if let Some(n) = name {
                    o.insert("name".into(), n.clone().into());
                }
                o.insert(
                    "arguments".into(),
                    args.as_ref().map(parsed).unwrap_or(Value::Null),
                );
                Value::Object(o)
            }
            Part::ToolResult { id, content } => {
                let mut o = Map::new();
                o.insert("type".into(), "tool_call_response".into());
                if let Some(id) = id {
                    o.insert("id".into(), id.clone().into());
                }
                o.insert("response".into(), content.clone().unwrap_or(Value::Null));
                Value::Object(o)
            }
            Part::Compaction(v, _) | Part::Other(v) => v.clone(),
        })
        .collect();
    serde_json::json!({"role": m.role, "parts": parts})
}

/// Hashes the parts of `msgs` into `out` (and content-less parts with call ids into
/// `opaque`); returns whether some part's content was absent, and whether some was
/// truncated. `single` adds a tool call's only string argument as its own part.
fn hash_messages(
    msgs: &[Msg],
    single: bool,
    out: &mut Vec<(ArtifactHash, PartMeta)>,
    opaque: &mut Vec<Opaque>,
    mut texts: Option<&mut Vec<(usize, String)>>,
    content: &mut Vec<String>,
) -> (bool, bool) {
    let (mut absent, mut truncated) = (false, false);
    for (i, m) in msgs.iter().enumerate() {
        let meta = |kind, call_id: &Option<String>, cut: bool| PartMeta {
            kind,
            role: Some(m.role.clone()),
            message: u32::try_from(i).ok(),
            call_id: call_id.clone(),
            truncated: cut,
        };
        for p in &m.parts {
            match p {
                Part::Text(Some(t)) => {
                    let cut = t.ends_with(TRUNCATION_MARKER);
                    truncated |= cut;
                    if let Some(texts) = texts.as_deref_mut() {
                        texts.push((out.len(), t.clone()));
                    }
                    content.push(t.clone());
                    out.push((
                        ArtifactHash::of(t.as_bytes()),
                        meta(PartKind::Text, &None, cut),
                    ));
                }
                Part::Text(None) => absent = true,
                Part::ToolCall {
                    id, args: Some(a), ..
                } => {
                    content.push(hashed_text(a));
                    out.push((arguments_hash(a), meta(PartKind::ToolCall, id, false)));
                    if single {
                        if let Value::Object(o) = parsed(a) {
                            // The only argument when it is a string, or each string of
                            // the only argument when it is a list of strings (a memory
                            // tool's `entries`): what the model wrote, byte for byte.
                            if let (1, Some(Value::String(s))) = (o.len(), o.values().next()) {
                                content.push(s.clone());
                                out.push((
                                    ArtifactHash::of(s.as_bytes()),
                                    meta(PartKind::SingleArgument, id, false),
                                ));
                            }
                            let strings: Vec<&String> = match (o.len(), o.values().next()) {
                                (1, Some(Value::Array(items))) => items
                                    .iter()
                                    .filter_map(|v| match v {
                                        Value::String(s) => Some(s),
                                        _ => None,
                                    })
                                    .collect(),
                                _ => Vec::new(),
                            };
                            for s in strings {
                                let h = ArtifactHash::of(s.as_bytes());
                                if out
                                    .iter()
                                    .any(|(x, m)| *x == h && m.kind == PartKind::SingleArgument)
                                {
                                    continue;
                                }
                                content.push(s.clone());
                                out.push((h, meta(PartKind::SingleArgument, id, false)));
                            }
                        }
                    }
                }
                Part::ToolResult {
                    id,
                    content: Some(c),
                } => {
                    let cut = is_truncated(c);
                    truncated |= cut;
                    content.push(hashed_text(c));
                    out.push((result_hash(c), meta(PartKind::ToolResult, id, cut)));
                }
                Part::ToolCall { id, args: None, .. } => {
                    absent = true;
                    if let Some(id) = id {
                        opaque.push(Opaque {
                            kind: PartKind::ToolCall,
                            call_id: id.clone(),
                        });
                    }
                }
                Part::ToolResult { id, content: None } => {
                    absent = true;
                    if let Some(id) = id {
                        opaque.push(Opaque {
                            kind: PartKind::ToolResult,
                            call_id: id.clone(),
                        });
                    }
                }
                Part::Compaction(whole, summary) => {
                    let h = match summary {
                        Some(Value::String(t)) => {
                            if let Some(texts) = texts.as_deref_mut() {
                                texts.push((out.len(), t.clone()));
                            }
                            content.push(t.clone());
                            ArtifactHash::of(t.as_bytes())
                        }
                        Some(v) => ArtifactHash::of(canonical(v).as_bytes()),
                        None => ArtifactHash::of(canonical(whole).as_bytes()),
                    };
                    out.push((h, meta(PartKind::Compaction, &None, false)));
                }
                Part::Other(v) => out.push((
                    ArtifactHash::of(canonical(v).as_bytes()),
                    meta(PartKind::Other, &None, false),
                )),
            }
        }
    }
    (absent, truncated)
}

fn same_parts(a: &Msg, b: &Msg) -> bool {
    let hashes = |m: &Msg| {
        let mut out = Vec::new();
        hash_messages(
            std::slice::from_ref(m),
            false,
            &mut out,
            &mut Vec::new(),
            None,
            &mut Vec::new(),
        );
        out.into_iter().map(|(h, _)| h).collect::<Vec<_>>()
    };
    a.role == b.role && hashes(a) == hashes(b)
}

fn derive_chat(c: &SpanContent<'_>) -> Derived {
    let mut d = Derived::default();
    let setting = capture_setting(c.scope, c.attrs);
    let not_captured = |d: &mut Derived| {
        d.capture.join(Capture::NotCaptured {
            setting: setting.clone(),
        })
    };
    let mut truncated = false;
    match input_source(c) {
        Source::Found(mut msgs) => {
            if let Some(sys) = system_instructions(c.attrs) {
                if !msgs.iter().any(|m| same_parts(m, &sys)) {
                    msgs.insert(0, sys);
                }
            }
            d.has_inputs = true;
            let mut texts = Vec::new();
            let (absent, cut) = hash_messages(
                &msgs,
                false,
                &mut d.inputs,
                &mut d.opaque_inputs,
                Some(&mut texts),
                &mut d.content,
            );
            // The user's and the system's texts, for the containment pass.
            d.io.texts.inputs = texts
                .into_iter()
                .filter(|(i, _)| {
                    d.inputs.get(*i).is_some_and(|(_, m)| {
                        m.is_external_role() || m.kind == PartKind::Compaction
                    })
                })
                .collect();
            truncated |= cut;
            if absent {
                not_captured(&mut d);
            }
        }
        Source::Unreadable(key) => d.capture.join(Capture::NotCaptured {
            setting: format!(
                "{key} in the GenAI parts schema or OpenAI chat format (it is not readable JSON)"
            ),
        }),
        Source::Absent => not_captured(&mut d),
    }
    match output_source(c) {
        Source::Found(msgs) => {
            d.has_outputs = true;
            let (absent, cut) = hash_messages(
                &msgs,
                true,
                &mut d.outputs,
                &mut d.opaque_outputs,
                None,
                &mut d.content,
            );
            truncated |= cut;
            if absent {
                not_captured(&mut d);
            } else {
                let all: Vec<Value> = msgs.iter().map(message_json).collect();
                d.output_hash = Some(ArtifactHash::of(canonical(&Value::Array(all)).as_bytes()));
            }
        }
        Source::Unreadable(key) => d.capture.join(Capture::NotCaptured {
            setting: format!(
                "{key} in the GenAI parts schema or OpenAI chat format (it is not readable JSON)"
            ),
        }),
        Source::Absent if c.error => {}
        Source::Absent => not_captured(&mut d),
    }
    if truncated {
        d.capture.join(Capture::Truncated {
            marker: TRUNCATION_MARKER.into(),
        });
    }
    d
}

/// LangChain's tool-callback envelope `{"input_str", "inputs", "kwargs":
/// {"tool_call_id"}}` (OpenLLMetry): the arguments and the call id inside.
fn unwrap_envelope(v: &Value) -> Option<(Value, Option<String>)> {
    let o = match v {
        Value::String(s) => serde_json::from_str::<Value>(s).ok()?,
        v => v.clone(),
    };
    let obj = o.as_object()?;
    if !(obj.contains_key("input_str") && obj.contains_key("inputs")) {
        return None;
    }
    let id = id_of(obj.get("kwargs").and_then(|k| k.get("tool_call_id")));
    Some((obj.get("inputs").cloned().unwrap_or(Value::Null), id))
}

/// A serialised LangChain `ToolMessage`: OpenInference's `{"type": "tool", "data":
/// {…}}` or OpenLLMetry's `{"output": {"id": [… "ToolMessage"], "kwargs": {…}}}`.
fn unwrap_tool_message(v: &Value) -> Option<(Value, Option<String>)> {
    let o = match v {
        Value::String(s) => serde_json::from_str::<Value>(s).ok()?,
        v => v.clone(),
    };
    let fields = if o.get("type").and_then(Value::as_str) == Some("tool") {
        o.get("data")?
    } else {
        let out = o.get("output")?;
        let is_tool_message = out
            .get("id")
            .and_then(Value::as_array)
            .is_some_and(|ids| ids.last().and_then(Value::as_str) == Some("ToolMessage"));
        if !is_tool_message {
            return None;
        }
        out.get("kwargs")?
    };
    let content = fields.get("content")?.clone();
    Some((content, id_of(fields.get("tool_call_id"))))
}

/// LlamaIndex's tool input as OpenInference records it, `{"kwargs": {…}}` (with an
/// empty `args`): the keyword arguments are the arguments.
fn unwrap_kwargs(v: &Value) -> Option<Value> {
    let o = match v {
        Value::String(s) => serde_json::from_str::<Value>(s).ok()?,
        v => v.clone(),
    };
    let obj = o.as_object()?;
    let kwargs = obj.get("kwargs")?.as_object()?;
    let positional = obj
        .get("args")
        .is_some_and(|a| a.as_array().is_none_or(|a| !a.is_empty()));
    if positional || obj.keys().any(|k| k != "kwargs" && k != "args") {
        return None;
    }
    Some(Value::Object(kwargs.clone()))
}

/// LlamaIndex's serialised `ToolOutput` (`blocks`, `tool_name`, `raw_input`,
/// `raw_output`, `is_error`): its content is what the model is handed, the text of
/// its text blocks joined by newlines (`ToolOutput.content`), else `raw_output`.
fn unwrap_tool_output(v: &Value) -> Option<Value> {
    let o = match v {
        Value::String(s) => serde_json::from_str::<Value>(s).ok()?,
        v => v.clone(),
    };
    let obj = o.as_object()?;
    if !(obj.contains_key("tool_name") && obj.contains_key("raw_output")) {
        return None;
    }
    let texts: Option<Vec<&str>> = obj
        .get("blocks")
        .and_then(Value::as_array)
        .map(|bs| bs.iter().filter_map(|b| b.get("text")?.as_str()).collect());
    match texts {
        Some(t) if !t.is_empty() => Some(Value::String(t.join("\n"))),
        _ => obj.get("raw_output").cloned(),
    }
}

fn derive_tool(c: &SpanContent<'_>) -> Derived {
    let mut d = Derived::default();
    let a = c.attrs;
    let mut call_id = id_of(a.get("gen_ai.tool.call.id"));
    let mut args = present(
        a.get("gen_ai.tool.call.arguments")
            .or_else(|| a.get("input.value")),
    )
    .cloned();
    let mut result = present(
        a.get("gen_ai.tool.call.result")
            .or_else(|| a.get("output.value")),
    )
    .cloned();
    // Strands Agents' default: the arguments on a `gen_ai.tool.message` event, the
    // result blocks on a `gen_ai.choice` event, each with the call id.
    let event = |name: &str, key: &str| {
        c.events
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, e)| e.get(key))
    };
    if !a.contains_key("gen_ai.tool.call.arguments") && !a.contains_key("input.value") {
        if let Some(v) = event("gen_ai.tool.message", "content") {
            args = present(Some(v)).cloned();
            call_id = call_id.or_else(|| id_of(event("gen_ai.tool.message", "id")));
        }
    }
    if !a.contains_key("gen_ai.tool.call.result") && !a.contains_key("output.value") {
        if let Some(v) = event("gen_ai.choice", "message") {
            result = present(Some(v)).cloned();
            call_id = call_id.or_else(|| id_of(event("gen_ai.choice", "id")));
        }
    }
    // Strands records a result as its Converse content blocks: the model is handed
    // their text.
    if c.scope.is_some_and(|s| s.starts_with("strands")) {
        if let Some(blocks) = result.as_ref().and_then(converse_blocks) {
            result = Some(converse_result(&blocks));
        }
    }
    if let Some((inner, id)) = args.as_ref().and_then(unwrap_envelope) {
        args = present(Some(&inner)).cloned();
        call_id = call_id.or(id);
    }
    if let Some((inner, id)) = result.as_ref().and_then(unwrap_tool_message) {
        result = present(Some(&inner)).cloned();
        call_id = call_id.or(id);
    }
    if let Some(inner) = args.as_ref().and_then(unwrap_kwargs) {
        args = Some(inner);
    }
    if let Some(inner) = result.as_ref().and_then(unwrap_tool_output) {
        result = present(Some(&inner)).cloned();
    }
    let setting = capture_setting(c.scope, c.attrs);
    let tool = a
        .get("gen_ai.tool.name")
        .or_else(|| a.get("tool.name"))
        .and_then(Value::as_str)
        .unwrap_or_else(|| c.name.strip_prefix("execute_tool ").unwrap_or(c.name));
    d.io.store_read = store::tool_store_read(a, Some(tool));
    let meta = |kind, cut| PartMeta {
        kind,
        role: None,
        message: None,
        call_id: call_id.clone(),
        truncated: cut,
    };
    let record_id = a
        .get("gen_ai.memory.record.id")
        .and_then(|v| id_of(Some(v)));
    match &args {
        Some(v) => {
            d.has_inputs = true;
            let p = parsed(v);
            let (text, kind) = match &p {
                Value::Object(_) | Value::Array(_) => (canonical(&p), PartKind::ToolCall),
                Value::String(s) => {
                    let inner = match serde_json::from_str::<Value>(s) {
                        Ok(Value::String(t)) => t,
                        _ => s.clone(),
                    };
                    (inner, PartKind::SingleArgument)
                }
                other => (canonical(other), PartKind::SingleArgument),
            };
            let h = ArtifactHash::of(text.as_bytes());
            d.content.push(text);
            store::tool_writes(&mut d.io, &p, &h, record_id.as_deref());
            d.inputs.push((h, meta(kind, false)));
        }
        None => {
            d.capture.join(Capture::NotCaptured {
                setting: setting.clone(),
            });
            if let Some(id) = &call_id {
                d.opaque_inputs.push(Opaque {
                    kind: PartKind::ToolCall,
                    call_id: id.clone(),
                });
            }
        }
    }
    let flagged = a.get("ag2.tool.call.result.truncated") == Some(&Value::Bool(true));
    match &result {
        Some(v) => {
            d.has_outputs = true;
            let cut = flagged || is_truncated(v);
            let h = result_hash(v);
            d.content.push(hashed_text(v));
            store::tool_reads(&mut d.io, v, &h);
            d.outputs.push((h.clone(), meta(PartKind::ToolResult, cut)));
            d.output_hash = Some(h);
            if cut {
                d.capture.join(Capture::Truncated {
                    marker: if flagged {
                        "ag2.tool.call.result.truncated".into()
                    } else {
                        TRUNCATION_MARKER.into()
                    },
                });
            }
        }
        None if c.error => {}
        None => {
            d.capture.join(Capture::NotCaptured { setting });
            if let Some(id) = &call_id {
                d.opaque_outputs.push(Opaque {
                    kind: PartKind::ToolResult,
                    call_id: id.clone(),
                });
            }
        }
    }
    d
}

/// A memory or retrieval span: its query is what it consumed, its records or
/// documents what it returned (a read) or stored (a write), and, for a read, each
/// returned content is also an output a later step may consume.
fn derive_store(c: &SpanContent<'_>) -> Derived {
    let mut d = Derived::default();
    let a = c.attrs;
    let op = a
        .get("gen_ai.operation.name")
        .and_then(Value::as_str)
        .unwrap_or("retrieval");
    // Strands Agents' memory spans: `memory.query` / `memory.results` /
    // `memory.content` events with `content` (or, with `gen_ai_span_attributes_only`,
    // `content` on the span itself: the query, then overwritten by the results).
    let strands = op.starts_with("memory.");
    let event = |name: &str| {
        c.events
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, e)| present(e.get("content")))
    };
    let own = present(a.get("content")).filter(|_| strands);
    let own_list = own.filter(|v| store::records(v).is_some());
    let strands_query = match op {
        "memory.search" => event("memory.query").or(own.filter(|_| own_list.is_none())),
        "memory.add" => event("memory.content").or(own),
        _ => None,
    };
    let query = [
        "gen_ai.memory.query.text",
        "gen_ai.retrieval.query.text",
        "input.value",
    ]
    .iter()
    .find_map(|k| present(a.get(*k)))
    .or(strands_query);
    if let Some(q) = query {
        d.has_inputs = true;
        let text = match q {
            Value::String(s) => s.clone(),
            v => canonical(v),
        };
        d.content.push(text.clone());
        d.inputs.push((
            ArtifactHash::of(text.as_bytes()),
            PartMeta::new(PartKind::SingleArgument),
        ));
    }
    let writes = matches!(op, "create_memory" | "update_memory" | "memory.add");
    let recs = present(a.get("gen_ai.memory.records"))
        .or_else(|| present(a.get("gen_ai.retrieval.documents")))
        .and_then(store::records)
        .or_else(|| openinference_documents(a))
        .or_else(|| match op {
            "memory.search" => event("memory.results")
                .or(own_list)
                .and_then(store::records),
            // What a memory add writes is the content it was handed.
            "memory.add" => strands_query.map(|q| vec![(Some(q.clone()), None)]),
            _ => None,
        });
    match recs {
        Some(recs) => {
            d.has_outputs = true;
            store::add_records(&mut d.io, &recs, !writes);
        }
        None => d.capture.join(Capture::NotCaptured {
            setting: "content capture of gen_ai.memory.records / gen_ai.retrieval.documents (opt-in) or OpenInference retrieval.documents".into(),
        }),
    }
    if !writes {
        d.io.store_read = Some(format!("operation {op}"));
        for r in &d.io.returned {
            if let Some(h) = &r.hash {
                d.outputs.push((h.clone(), PartMeta::new(PartKind::Other)));
            }
        }
    }
    d
}

/// OpenInference's `retrieval.documents.N.document.{id, content}`.
fn openinference_documents(
    attrs: &BTreeMap<String, Value>,
) -> Option<Vec<(Option<Value>, Option<String>)>> {
    let tree = flattened(attrs, "retrieval.documents")?;
    Some(
        tree.indexed()
            .into_iter()
            .filter_map(|t| {
                let content = t
                    .value("document.content")
                    .filter(|v| !v.is_null())
                    .cloned();
                let id = t.value("document.id").and_then(|v| id_of(Some(v)));
                (content.is_some() || id.is_some()).then_some((content, id))
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attrs(pairs: &[(&str, Value)]) -> BTreeMap<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    fn run(pairs: &[(&str, Value)]) -> Derived {
        let a = attrs(pairs);
        derive(&SpanContent {
            attrs: &a,
            events: &[],
            logs: &[],
            scope: Some("test"),
            error: false,
            name: "test",
        })
    }

    /// A span with content in its events only, under `scope`.
    fn with_events(
        pairs: &[(&str, Value)],
        events: &[(&str, &[(&str, Value)])],
        scope: &str,
    ) -> Derived {
        let a = attrs(pairs);
        let ev: Vec<(String, BTreeMap<String, Value>)> = events
            .iter()
            .map(|(n, kv)| (n.to_string(), attrs(kv)))
            .collect();
        derive(&SpanContent {
            attrs: &a,
            events: &ev,
            logs: &[],
            scope: Some(scope),
            error: false,
            name: "test",
        })
    }

    #[test]
    fn a_request_helper_with_its_output_hidden_is_still_no_request() {
        let helper = attrs(&[
            ("openinference.span.kind", json!("LLM")),
            (
                "input.value",
                json!(
                    r#"{"tools": ["<FunctionTool object>"], "user_msg": null, "chat_history": ["ChatMessage(...)"]}"#
                ),
            ),
            ("output.value", json!("__REDACTED__")),
        ]);
        assert_eq!(role(&helper), Role::Other);
        // A model call with its messages hidden keeps its gap.
        let call = attrs(&[
            ("openinference.span.kind", json!("LLM")),
            ("input.value", json!("__REDACTED__")),
            ("output.value", json!("__REDACTED__")),
        ]);
        assert_eq!(role(&call), Role::Chat);
    }

    #[test]
    fn strands_messages_in_span_events_are_read() {
        let blocks = |v: Value| Value::String(v.to_string());
        let doc = "the document text, long enough";
        let chat = with_events(
            &[("gen_ai.operation.name", json!("chat"))],
            &[
                (
                    "gen_ai.system.message",
                    &[("content", blocks(json!([{"text": "S"}])))],
                ),
                (
                    "gen_ai.user.message",
                    &[("content", blocks(json!([{"text": "U"}])))],
                ),
                (
                    "gen_ai.assistant.message",
                    &[(
                        "content",
                        blocks(
                            json!([{"toolUse": {"toolUseId": "c1", "name": "fetch", "input": {"id": "x"}}}]),
                        ),
                    )],
                ),
                (
                    "gen_ai.tool.message",
                    &[(
                        "content",
                        blocks(
                            json!([{"toolResult": {"toolUseId": "c1", "status": "success", "content": [{"text": doc}]}}]),
                        ),
                    )],
                ),
                (
                    "gen_ai.choice",
                    &[
                        ("finish_reason", json!("tool_use")),
                        (
                            "message",
                            blocks(
                                json!([{"toolUse": {"toolUseId": "c2", "name": "pay", "input": {"to": "A"}}}]),
                            ),
                        ),
                    ],
                ),
            ],
            "strands.telemetry.tracer",
        );
        assert_eq!(chat.capture, Capture::Complete);
        let result = chat
            .inputs
            .iter()
            .find(|(_, m)| m.kind == PartKind::ToolResult)
            .unwrap();
        assert_eq!(result.0, ArtifactHash::of(doc.as_bytes()));
        assert_eq!(result.1.call_id.as_deref(), Some("c1"));
        assert_eq!(
            hashes(&chat.outputs)[0],
            (
                arguments_hash(&json!({"to": "A"})),
                PartKind::ToolCall,
                Some("c2".into())
            )
        );
        // The tool span: arguments and result blocks on its events, the same hashes.
        let tool = with_events(
            &[
                ("gen_ai.operation.name", json!("execute_tool")),
                ("gen_ai.tool.name", json!("fetch")),
                ("gen_ai.tool.call.id", json!("c1")),
            ],
            &[
                (
                    "gen_ai.tool.message",
                    &[
                        ("role", json!("tool")),
                        ("content", json!("{\"id\": \"x\"}")),
                        ("id", json!("c1")),
                    ],
                ),
                (
                    "gen_ai.choice",
                    &[
                        ("message", blocks(json!([{"text": doc}]))),
                        ("id", json!("c1")),
                    ],
                ),
            ],
            "strands.telemetry.tracer",
        );
        assert_eq!(tool.output_hash, Some(ArtifactHash::of(doc.as_bytes())));
        assert_eq!(tool.inputs[0].0, arguments_hash(&json!({"id": "x"})));
        // Redacted: a content gap naming Strands' switch.
        let redacted = with_events(
            &[("gen_ai.operation.name", json!("chat"))],
            &[
                ("gen_ai.user.message", &[("content", json!("[REDACTED]"))]),
                ("gen_ai.choice", &[("message", json!("[REDACTED]"))]),
            ],
            "strands.telemetry.tracer",
        );
        assert_eq!(
            redacted.capture,
            Capture::NotCaptured {
                setting: STRANDS_SETTING.into()
            }
        );
    }

    #[test]
    fn content_attributes_on_an_event_are_read_as_the_spans() {
        // The conventions' operation-details event, as Strands' latest mode writes it.
        let d = with_events(
            &[("gen_ai.operation.name", json!("chat"))],
            &[(
                "gen_ai.client.inference.operation.details",
                &[
                    (
                        "gen_ai.input.messages",
                        json!(r#"[{"role":"user","parts":[{"type":"text","content":"U"}]}]"#),
                    ),
                    (
                        "gen_ai.output.messages",
                        json!(r#"[{"role":"assistant","parts":[{"type":"text","content":"A"}]}]"#),
                    ),
                ],
            )],
            "strands.telemetry.tracer",
        );
        assert_eq!(d.capture, Capture::Complete);
        assert_eq!(d.inputs[0].0, ArtifactHash::of(b"U"));
        assert_eq!(d.outputs[0].0, ArtifactHash::of(b"A"));
    }

    #[test]
    fn strands_memory_spans_write_and_read() {
        let memo = "a remembered note, long enough";
        let add = with_events(
            &[("gen_ai.operation.name", json!("memory.add"))],
            &[("memory.content", &[("content", json!(memo))])],
            "strands.telemetry.tracer",
        );
        let h = ArtifactHash::of(memo.as_bytes());
        assert_eq!(add.io.stored[0].hash, Some(h.clone()));
        assert_eq!(add.inputs[0].0, h);
        let search = with_events(
            &[("gen_ai.operation.name", json!("memory.search"))],
            &[
                ("memory.query", &[("content", json!("q"))]),
                (
                    "memory.results",
                    &[(
                        "content",
                        json!(json!([{"content": memo, "store_name": "notes", "metadata": {"_relevanceScore": 2}}]).to_string()),
                    )],
                ),
            ],
            "strands.telemetry.tracer",
        );
        assert!(search.io.store_read.is_some());
        assert_eq!(search.io.returned[0].hash, Some(h.clone()));
        assert_eq!(search.inputs[0].0, ArtifactHash::of(b"q"));
        // The search_memory tool's result: the JSON list in one text block, read
        // element by element.
        let entries =
            json!([{"content": memo, "store_name": "notes", "metadata": {"_relevanceScore": 2}}])
                .to_string();
        let tool = with_events(
            &[
                ("gen_ai.operation.name", json!("execute_tool")),
                ("gen_ai.tool.name", json!("search_memory")),
            ],
            &[
                (
                    "gen_ai.tool.message",
                    &[("content", json!("{\"query\": \"q\"}"))],
                ),
                (
                    "gen_ai.choice",
                    &[("message", json!(json!([{"text": entries}]).to_string()))],
                ),
            ],
            "strands.telemetry.tracer",
        );
        assert_eq!(
            tool.io
                .returned
                .iter()
                .map(|r| r.hash.clone())
                .collect::<Vec<_>>(),
            vec![Some(h)]
        );
    }

    #[test]
    fn a_list_of_strings_as_the_only_argument_is_each_a_part() {
        let d = run(&[
            ("gen_ai.operation.name", json!("chat")),
            (
                "gen_ai.input.messages",
                json!(r#"[{"role":"user","parts":[{"type":"text","content":"U"}]}]"#),
            ),
            (
                "gen_ai.output.messages",
                json!(
                    r#"[{"role":"assistant","parts":[{"type":"tool_call","id":"c","name":"add_memory","arguments":{"entries":["first note","second note"]}}]}]"#
                ),
            ),
        ]);
        let singles: Vec<ArtifactHash> = d
            .outputs
            .iter()
            .filter(|(_, m)| m.kind == PartKind::SingleArgument)
            .map(|(h, _)| h.clone())
            .collect();
        assert_eq!(
            singles,
            vec![
                ArtifactHash::of(b"first note"),
                ArtifactHash::of(b"second note")
            ]
        );
    }

    fn hashes(v: &[(ArtifactHash, PartMeta)]) -> Vec<(ArtifactHash, PartKind, Option<String>)> {
        v.iter()
            .map(|(h, m)| (h.clone(), m.kind, m.call_id.clone()))
            .collect()
    }

    #[test]
    fn chat_format_and_parts_schema_give_the_same_hashes() {
        let schema = run(&[
            ("gen_ai.operation.name", json!("chat")),
            (
                "gen_ai.input.messages",
                json!(
                    r#"[{"role":"user","parts":[{"type":"text","content":"hi"}]},{"role":"assistant","parts":[{"type":"tool_call","id":"c1","name":"f","arguments":{"b":2,"a":"x"}}]},{"role":"tool","parts":[{"type":"tool_call_response","id":"c1","response":"r"}]}]"#
                ),
            ),
            (
                "gen_ai.output.messages",
                json!(r#"[{"role":"assistant","parts":[{"type":"text","content":"done"}]}]"#),
            ),
        ]);
        let chat = run(&[
            ("gen_ai.operation.name", json!("chat")),
            (
                "gen_ai.input.messages",
                json!(
                    r#"[{"content": "hi", "role": "user"}, {"content": null, "role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"arguments": "{\"a\": \"x\", \"b\": 2}", "name": "f"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "r"}]"#
                ),
            ),
            (
                "gen_ai.output.messages",
                json!(r#"[{"content": "done", "role": "assistant"}]"#),
            ),
        ]);
        assert_eq!(hashes(&schema.inputs), hashes(&chat.inputs));
        assert_eq!(hashes(&schema.outputs), hashes(&chat.outputs));
        assert_eq!(schema.output_hash, chat.output_hash);
        assert_eq!(schema.capture, Capture::Complete);
        assert_eq!(schema.inputs.len(), 3);
        assert_eq!(schema.inputs[1].0, ArtifactHash::of(br#"{"a":"x","b":2}"#));
    }

    #[test]
    fn result_and_response_are_one_field_and_a_repeated_tool_text_is_dropped() {
        let a = run(&[
            ("gen_ai.operation.name", json!("chat")),
            (
                "gen_ai.input.messages",
                json!(
                    r#"[{"role":"tool","parts":[{"type":"text","content":"r"},{"type":"tool_call_response","id":"c1","result":"r"}]}]"#
                ),
            ),
            ("gen_ai.output.messages", json!("[]")),
        ]);
        let b = run(&[
            ("gen_ai.operation.name", json!("chat")),
            (
                "gen_ai.input.messages",
                json!([{"role":"tool","parts":[{"type":"tool_call_response","id":"c1","response":"r"}]}]),
            ),
            ("gen_ai.output.messages", json!([])),
        ]);
        assert_eq!(hashes(&a.inputs), hashes(&b.inputs));
        assert_eq!(a.inputs.len(), 1);
        assert_eq!(a.inputs[0].1.kind, PartKind::ToolResult);
    }

    #[test]
    fn json_string_and_object_arguments_are_one_artifact() {
        let s = run(&[
            ("gen_ai.operation.name", json!("execute_tool")),
            (
                "gen_ai.tool.call.arguments",
                json!("{\"doc_id\": \"x\",\n \"n\": 1.0}"),
            ),
            ("gen_ai.tool.call.result", json!("ok")),
        ]);
        let o = run(&[
            ("gen_ai.operation.name", json!("execute_tool")),
            ("gen_ai.tool.call.arguments", json!({"n": 1, "doc_id": "x"})),
            ("gen_ai.tool.call.result", json!("ok")),
        ]);
        assert_eq!(s.inputs[0].0, o.inputs[0].0);
        assert_eq!(s.inputs[0].1.kind, PartKind::ToolCall);
        // A scalar string result is never parsed: "5000" is text.
        assert_eq!(result_hash(&json!("5000")), ArtifactHash::of(b"5000"));
    }

    #[test]
    fn redacted_values_are_never_hashed() {
        for marker in REDACTED {
            let d = run(&[
                ("openinference.span.kind", json!("TOOL")),
                ("input.value", json!(marker)),
                ("output.value", json!(marker)),
            ]);
            assert!(d.inputs.is_empty() && d.outputs.is_empty(), "{marker}");
            assert!(matches!(d.capture, Capture::NotCaptured { .. }));
            assert_eq!(d.capture.code(), Some("content_not_captured"));
        }
        let d = run(&[
            ("gen_ai.operation.name", json!("chat")),
            (
                "gen_ai.input.messages",
                json!([{"role": "user", "parts": [{"type": "text"}]}]),
            ),
            (
                "gen_ai.output.messages",
                json!([{"role": "assistant", "parts": [{"type": "tool_call", "id": "c9", "name": "pay"}]}]),
            ),
        ]);
        assert!(d.inputs.is_empty() && d.outputs.is_empty());
        assert_eq!(
            d.opaque_outputs,
            vec![Opaque {
                kind: PartKind::ToolCall,
                call_id: "c9".into()
            }]
        );
        assert!(matches!(d.capture, Capture::NotCaptured { .. }));
    }

    #[test]
    fn langchain_envelopes_unwrap_to_arguments_result_and_call_id() {
        let d = run(&[
            ("gen_ai.operation.name", json!("execute_tool")),
            (
                "gen_ai.tool.call.arguments",
                json!(
                    r#"{"input_str": "{'a': 1}", "inputs": {"a": 1}, "kwargs": {"tool_call_id": "c7"}}"#
                ),
            ),
            (
                "gen_ai.tool.call.result",
                json!(
                    r#"{"output": {"lc": 1, "id": ["langchain", "schema", "messages", "ToolMessage"], "kwargs": {"content": "R", "tool_call_id": "c7"}}}"#
                ),
            ),
        ]);
        assert_eq!(d.inputs[0].0, ArtifactHash::of(br#"{"a":1}"#));
        assert_eq!(d.inputs[0].1.call_id.as_deref(), Some("c7"));
        assert_eq!(d.outputs[0].0, ArtifactHash::of(b"R"));
        let oi = run(&[
            ("openinference.span.kind", json!("TOOL")),
            ("input.value", json!("invoice-17")),
            (
                "output.value",
                json!(r#"{"type": "tool", "data": {"content": "R", "tool_call_id": "c8"}}"#),
            ),
        ]);
        assert_eq!(oi.inputs[0].0, ArtifactHash::of(b"invoice-17"));
        assert_eq!(oi.inputs[0].1.kind, PartKind::SingleArgument);
        assert_eq!(oi.inputs[0].1.call_id.as_deref(), Some("c8"));
    }

    #[test]
    fn openinference_flattened_messages_read_like_chat_format() {
        let oi = run(&[
            ("openinference.span.kind", json!("LLM")),
            ("llm.input_messages.1.message.role", json!("user")),
            ("llm.input_messages.1.message.content", json!("hi")),
            ("llm.input_messages.3.message.role", json!("tool")),
            ("llm.input_messages.3.message.content", json!("r")),
            ("llm.input_messages.3.message.tool_call_id", json!("c1")),
            ("llm.output_messages.0.message.role", json!("assistant")),
            (
                "llm.output_messages.0.message.tool_calls.0.tool_call.id",
                json!("c2"),
            ),
            (
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.name",
                json!("f"),
            ),
            (
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments",
                json!("{\"k\": \"v\"}"),
            ),
        ]);
        let chat = run(&[
            ("gen_ai.operation.name", json!("chat")),
            (
                "gen_ai.input.messages",
                json!([{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "c1", "content": "r"}]),
            ),
            (
                "gen_ai.output.messages",
                json!([{"role": "assistant", "tool_calls": [{"id": "c2", "function": {"name": "f", "arguments": {"k": "v"}}}]}]),
            ),
        ]);
        assert_eq!(hashes(&oi.inputs), hashes(&chat.inputs));
        assert_eq!(hashes(&oi.outputs), hashes(&chat.outputs));
        // The only string argument is its own part too.
        assert_eq!(oi.outputs[1].0, ArtifactHash::of(b"v"));
        assert_eq!(oi.outputs[1].1.kind, PartKind::SingleArgument);
    }

    #[test]
    fn truncation_is_marked_and_system_instructions_are_not_doubled() {
        let d = run(&[
            ("gen_ai.operation.name", json!("execute_tool")),
            ("gen_ai.tool.call.arguments", json!("{}")),
            (
                "gen_ai.tool.call.result",
                json!("Invoice 17 ...[truncated]"),
            ),
            ("ag2.tool.call.result.truncated", json!(true)),
        ]);
        assert!(d.outputs[0].1.truncated);
        assert_eq!(d.capture.code(), Some("history_truncated"));
        let sys = json!([{"type": "text", "content": "S"}]);
        let d = run(&[
            ("gen_ai.operation.name", json!("chat")),
            ("gen_ai.system_instructions", json!(sys.to_string())),
            (
                "gen_ai.input.messages",
                json!([{"role": "system", "parts": [{"type": "text", "content": "S"}]}, {"role": "user", "parts": [{"type": "text", "content": "U"}]}]),
            ),
            ("gen_ai.output.messages", json!([])),
        ]);
        assert_eq!(d.inputs.len(), 2);
        let d = run(&[
            ("gen_ai.operation.name", json!("chat")),
            ("gen_ai.system_instructions", json!(sys.to_string())),
            (
                "gen_ai.input.messages",
                json!([{"role": "user", "parts": [{"type": "text", "content": "U"}]}]),
            ),
            ("gen_ai.output.messages", json!([])),
        ]);
        assert_eq!(d.inputs.len(), 2);
        assert_eq!(d.inputs[0].1.role.as_deref(), Some("system"));
        assert_eq!(d.inputs[1].1.message, Some(1));
    }

    #[test]
    fn openllmetry_flattened_prompt_and_completion() {
        let d = run(&[
            ("llm.request.type", json!("chat")),
            ("gen_ai.prompt.0.role", json!("user")),
            ("gen_ai.prompt.0.content", json!("hi")),
            ("gen_ai.completion.0.role", json!("assistant")),
            ("gen_ai.completion.0.tool_calls.0.id", json!("c1")),
            ("gen_ai.completion.0.tool_calls.0.name", json!("f")),
            (
                "gen_ai.completion.0.tool_calls.0.arguments",
                json!("{\"x\": 1}"),
            ),
        ]);
        assert_eq!(d.inputs[0].0, ArtifactHash::of(b"hi"));
        assert_eq!(d.outputs[0].0, ArtifactHash::of(br#"{"x":1}"#));
        assert_eq!(d.outputs[0].1.call_id.as_deref(), Some("c1"));
        assert_eq!(d.capture, Capture::Complete);
    }
}
