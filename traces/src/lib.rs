//! Agent execution traces as evidence of data flow, after the causal-witness memo
//! (reference 001) and `shared/agent-traces/CONVENTIONS.md`.
//!
//! A trace is a set of logged steps ([`Node`]: an LLM call, a tool call, a retrieval,
//! a memory write or read, a context mutation), each with its principal and the
//! content hashes of what it consumed and produced. Edges between steps are derived
//! **from those hashes only** ([`graph`]), never from span nesting, and every edge is
//! graded on its own: hash match, folded transform, similarity match, window exit,
//! hash mismatch. The decision procedure of the memo ([`witness`]) walks the
//! artifact-hash closure backward from a suspect action and says whether the trace is
//! a causal witness that an injection caused it, supports only temporal precedence,
//! or is indeterminate because the closure leaves the window. When the injection is
//! not known, [`provenance`] lists the external inputs of the action's closure, each
//! with its level, and ranks them by which holds the action's argument values.
//!
//! Readers: OTLP/JSON ([`otlp`]) following the OpenTelemetry GenAI conventions plus
//! the `audita.*` attributes — where a span carries no `audita.*` hashes they are
//! derived from its standard GenAI content ([`genai`], canonical JSON by [`jcs`]),
//! and what the instrumentation did not record is said, never guessed — and the AG2/AutoGen conversation logs of the Who&When
//! benchmark ([`whowhen`]) with a static-log attributor and the benchmark's scorer.
//! [`sealed`] turns a trace into the messages that seal it as evidence (one signed
//! message per step, citing its hash-derived parents with each edge's grade) and
//! reads it back from certified payloads.
//!
//! Design constraints:
//! - A pure library: it parses bytes handed to it; no file or network I/O, no clock.
//! - Total on input: malformed input is an error naming the problem, never a panic;
//!   every reader is bounded ([`otlp::Limits`]) in spans, attributes and bytes.
//! - Deterministic: `BTreeMap`/`BTreeSet` wherever output order is visible, and ties
//!   between candidate producers are broken by a stated rule.
//! - The claim precedence is indeterminate > temporal > causal: the weakest claim any
//!   part of the closure forces is the one reported.
#![warn(missing_docs)]
#![forbid(unsafe_code)]
#![warn(clippy::too_many_lines)]

pub mod genai;
pub mod graph;
pub mod hash;
pub mod history;
pub mod jcs;
pub mod model;
pub mod otlp;
pub mod provenance;
pub mod sealed;
pub mod whowhen;
pub mod witness;

pub use graph::{Boundary, Edge, EdgeKind, Graph};
pub use hash::{ArtifactHash, Entry, SpanId};
pub use history::{Change, Histories, Turn};
pub use model::{
    Capture, Contained, Contents, Link, LinkBasis, MutationKind, Node, Opaque, Operation, PartKind,
    PartMeta, Stored, Trace,
};
pub use otlp::{parse_otlp_json, parse_otlp_json_with_contents, Limits, OtlpError};
pub use provenance::{provenance, Input, InputKind, Origin, Provenance};
pub use witness::{witness, Level, Witness, WitnessError};
