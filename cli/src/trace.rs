//! `audita trace …`: agent execution traces (`audita_traces`).
//!
//! - `trace import FILE` prints the span graph with every edge's grade;
//! - `trace witness FILE --action SPAN --injection SPAN` runs the causal-witness
//!   decision procedure and prints one JSON object (exit 0 causal, 1 a weaker claim);
//!   without `--injection` it lists the external inputs of the action's closure, each
//!   with the memo's level, ranked by value provenance ([`inputs`]; exit 0 when the
//!   candidate is causal, 1 otherwise);
//! - `trace whowhen FILE.json` names the decisive agent and step of a Who&When log;
//!   (the benchmark that scores it on every subset is `audita-load bench whowhen`);
//! - `trace serve --listen ADDR --out FILE` is an OTLP/HTTP receiver (`POST
//!   /v1/traces` and `POST /v1/logs`, OTLP/JSON) that appends each accepted export as
//!   one line to FILE (spans and the GenAI events logged as log records of one run
//!   in one file), which `trace import` reads (`audita_serve::otlp`);
//! - `trace seal FILE --config DEPLOYMENT --record OUT` seals a trace as evidence
//!   (one signed message per span, [`seal`]);
//! - `trace verdict RECORD --action SPAN --injection SPAN` judges an adverse outcome
//!   on such a record: the `audita verdict` machinery plus the witness claim
//!   ([`verdict`]); without `--injection`, the inputs of the sealed closure instead of
//!   the witness (value provenance from `--export FILE`, the content-bearing export,
//!   checked against the sealed hashes).
//!
//! Design constraints:
//! - Bad input (unreadable or oversized file, malformed OTLP, unknown span id) is one
//!   line on stderr and exit 2. Inputs are bounded: `--max-input-bytes` and
//!   `--max-spans`, also per request in the receiver (413/400 with the reason).
//! - The receiver validates every request completely before appending it, so the
//!   file only ever holds exports that import on their own (`audita_serve::otlp`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

mod inputs;
mod seal;
mod verdict;

use audita_traces::graph::{Boundary, Edge};
use audita_traces::whowhen;
use audita_traces::{
    parse_otlp_json, parse_otlp_json_with_contents, provenance, witness, Graph, Level, Limits,
    SpanId, Trace, Witness,
};
use serde_json::{json, Value};

/// Arguments of `audita trace`.
#[derive(clap::Args, Debug)]
pub struct TraceArgs {
    #[command(subcommand)]
    command: TraceCommand,
}

#[derive(clap::Subcommand, Debug)]
enum TraceCommand {
    /// Print the span graph of an OTLP/JSON trace with every edge's grade.
    Import(ImportArgs),
    /// Causal-witness test: did the injection cause the action, or only precede it?
    Witness(WitnessArgs),
    /// Static-log attribution of one Who&When log: decisive agent, step, profile.
    Whowhen(WhoWhenArgs),
    /// Score the attributor and the floors on a directory of Who&When logs.
    /// OTLP/HTTP receiver: POST /v1/traces (OTLP/JSON), appended to a file.
    Serve(ServeArgs),
    /// Seal a trace as evidence: one message per span, signed by its agent.
    Seal(seal::SealArgs),
    /// Verdict of an adverse agent action on a sealed trace record.
    Verdict(verdict::VerdictArgs),
}

/// Size limits of an OTLP read.
#[derive(clap::Args, Debug, Clone)]
struct OtlpLimitArgs {
    /// Refuse an input larger than this many bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 64 << 20)]
    max_input_bytes: u64,
    /// Refuse an input with more spans than this.
    #[arg(long, value_name = "N", default_value_t = 200_000)]
    max_spans: usize,
}

impl OtlpLimitArgs {
    fn limits(&self) -> Limits {
        Limits {
            max_bytes: usize::try_from(self.max_input_bytes).unwrap_or(usize::MAX),
            max_spans: self.max_spans,
        }
    }
}

#[derive(clap::Args, Debug)]
struct ImportArgs {
    /// OTLP/JSON file (one export, or JSON lines of exports); `-` reads stdin.
    file: PathBuf,
    #[command(flatten)]
    limits: OtlpLimitArgs,
    /// Pretty-print the output.
    #[arg(long)]
    pretty: bool,
}

#[derive(clap::Args, Debug)]
struct WitnessArgs {
    /// OTLP/JSON file; `-` reads stdin.
    file: PathBuf,
    /// Span id of the suspect action.
    #[arg(long, value_name = "SPAN_ID")]
    action: String,
    /// Span id of the injection node; without it, every external input of the
    /// action's closure is listed with its level, ranked by value provenance.
    #[arg(long, value_name = "SPAN_ID")]
    injection: Option<String>,
    #[command(flatten)]
    limits: OtlpLimitArgs,
    /// Pretty-print the output.
    #[arg(long)]
    pretty: bool,
}

#[derive(clap::Args, Debug)]
struct WhoWhenArgs {
    /// A Who&When log, either format (`history`, …); `-` reads stdin.
    file: PathBuf,
    /// Refuse a log larger than this many bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 16 << 20)]
    max_input_bytes: u64,
}

#[derive(clap::Args, Debug)]
struct ServeArgs {
    /// Address to listen on (port 0: a free port, printed on stdout).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:4318")]
    listen: SocketAddr,
    /// File the accepted exports are appended to (JSON lines).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Refuse a request body larger than this many bytes (413).
    #[arg(long, value_name = "BYTES", default_value_t = 8 << 20)]
    max_body_bytes: usize,
    /// Refuse a request with more spans than this (400).
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    max_spans: usize,
}

/// Runs the subcommand; returns the exit code.
pub fn run(args: &TraceArgs) -> i32 {
    let result = match &args.command {
        TraceCommand::Import(a) => import(a),
        TraceCommand::Witness(a) => run_witness(a),
        TraceCommand::Whowhen(a) => run_whowhen(a),
        TraceCommand::Serve(a) => serve(a),
        TraceCommand::Seal(a) => seal::run(a),
        TraceCommand::Verdict(a) => verdict::run(a),
    };
    match result {
        Ok(code) => code,
        Err(line) => {
            eprintln!("audita trace: {line}");
            2
        }
    }
}

fn print(v: &Value, pretty: bool) {
    let s = if pretty {
        serde_json::to_string_pretty(v)
    } else {
        serde_json::to_string(v)
    };
    println!("{}", s.unwrap_or_default());
}

fn read_trace(file: &Path, limits: &OtlpLimitArgs) -> Result<Trace, String> {
    let bytes = crate::inputs::read_input(file, limits.max_input_bytes)?;
    parse_otlp_json(&bytes, &limits.limits()).map_err(|e| format!("{}: {e}", file.display()))
}

fn edge_json(e: &Edge) -> Value {
    let mut v = json!({
        "parent": e.parent.as_ref().map(|p| p.to_string()),
        "child": e.child.to_string(),
        "kind": e.kind.as_str(),
        "artifact": e.artifact.as_ref().map(|a| a.to_string()),
    });
    if let Some(r) = &e.record_id {
        v["record_id"] = json!(r);
    }
    v["rule"] = json!(e.rule);
    if let Some(c) = &e.call_id {
        v["call_id"] = json!(c);
    }
    if e.truncated {
        v["truncated"] = json!(true);
    }
    v
}

fn import(a: &ImportArgs) -> Result<i32, String> {
    let trace = read_trace(&a.file, &a.limits)?;
    let graph = Graph::new(&trace);
    let all = graph.all_edges();
    let nodes: Vec<Value> = trace
        .nodes()
        .map(|n| {
            let mut v = json!({
                "span_id": n.span_id.to_string(),
                "parent": n.parent.as_ref().map(|p| p.to_string()),
                "name": n.name,
                "operation": n.operation.as_ref().map(|o| o.as_str()),
                "agent": n.agent,
                "tool": n.tool,
                "mutation": n.mutation.map(|m| m.as_str()),
                "folded_mutations": n.folded.len(),
                "capture": n.capture.as_str(),
                "instrumentation": n.instrumentation,
                "derived": {"inputs": n.input_meta.len(), "outputs": n.output_meta.len()},
            });
            let external = graph.external_inputs(n).len();
            if external > 0 {
                v["external_inputs"] = json!(external);
            }
            if let Some(s) = n.capture.setting() {
                v["setting"] = json!(s);
            }
            if let Some(t) = graph.histories().turn(&n.span_id) {
                v["history"] = json!({
                    "change": t.change.as_str(),
                    "previous": t.previous.as_ref().map(|p| p.to_string()),
                    "new_parts": t.new_parts.len(),
                });
            }
            if let Some(r) = &n.store_read {
                v["store_read"] = json!(r);
            }
            if !n.stored.is_empty() || !n.returned.is_empty() {
                v["stores"] = json!({"stored": n.stored.len(), "returned": n.returned.len()});
            }
            v
        })
        .collect();
    let edges: Vec<Value> = all.values().flatten().map(edge_json).collect();
    let errors: Vec<&str> = all
        .values()
        .flatten()
        .filter_map(|e| e.error.as_deref())
        .collect();
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    let mut rules: BTreeMap<&str, usize> = BTreeMap::new();
    for e in all.values().flatten() {
        *kinds.entry(e.kind.as_str()).or_default() += 1;
        *rules.entry(e.rule).or_default() += 1;
    }
    print(
        &json!({
            "spans": trace.len(),
            "orphan_log_records": trace.orphan_log_records(),
            "edge_kinds": kinds,
            "edge_rules": rules,
            "nodes": nodes,
            "edges": edges,
            "errors": errors,
        }),
        a.pretty,
    );
    Ok(if errors.is_empty() { 0 } else { 1 })
}

fn span_id(s: &str, flag: &str) -> Result<SpanId, String> {
    SpanId::parse(s).ok_or_else(|| format!("{flag} {s:?} is not a span id (16 hex digits)"))
}

fn run_witness(a: &WitnessArgs) -> Result<i32, String> {
    let action = span_id(&a.action, "--action")?;
    let Some(injection) = &a.injection else {
        let bytes = crate::inputs::read_input(&a.file, a.limits.max_input_bytes)?;
        let (trace, contents) = parse_otlp_json_with_contents(&bytes, &a.limits.limits())
            .map_err(|e| format!("{}: {e}", a.file.display()))?;
        let graph = Graph::new(&trace);
        let p = provenance(&graph, &action, &contents).map_err(|e| e.to_string())?;
        print(&inputs::provenance_json(&p, &trace), a.pretty);
        return Ok(inputs::exit_code(&p));
    };
    let injection = span_id(injection, "--injection")?;
    let trace = read_trace(&a.file, &a.limits)?;
    let graph = Graph::new(&trace);
    let w = witness(&graph, &action, &injection).map_err(|e| e.to_string())?;
    print(&witness_json(&w), a.pretty);
    Ok(if w.level == Level::Causal { 0 } else { 1 })
}

fn boundary_json(b: &Boundary) -> Value {
    let mut v = json!({"artifact": b.artifact.to_string(), "reason": b.reason, "code": b.code});
    if let Some(r) = &b.record_id {
        v["record_id"] = json!(r);
    }
    if !b.locator.is_empty() {
        v["locator"] = json!(b.locator.iter().map(|l| l.to_string()).collect::<Vec<_>>());
    }
    v
}

fn remedies_json(w: &Witness) -> Vec<Value> {
    w.remedies
        .iter()
        .map(|r| {
            json!({
                "span": r.span.to_string(),
                "cause": r.cause,
                "finding": r.finding,
                "fix": r.fix,
            })
        })
        .collect()
}

/// The JSON of `audita trace witness` (the shape).
fn witness_json(w: &Witness) -> Value {
    let boundary: Vec<Value> = w.boundary.iter().map(boundary_json).collect();
    let mut out = json!({
        "level": w.level.as_str(),
        "reaches_injection": w.reaches_injection,
        "offending_edges": w.offending.iter().map(edge_json).collect::<Vec<_>>(),
        "boundary": boundary,
        "errors": w.errors,
        "closure": {"edges": w.closure.iter().map(edge_json).collect::<Vec<_>>()},
        "injection_path_kinds": w.injection_path_kinds.iter().map(|k| k.as_str()).collect::<Vec<_>>(),
        "reasons": w.reasons,
        "settings": w.settings,
        "remedies": remedies_json(w),
    });
    if let Some(n) = &w.note {
        out["note"] = json!(n);
    }
    out
}

fn run_whowhen(a: &WhoWhenArgs) -> Result<i32, String> {
    let bytes = crate::inputs::read_input(&a.file, a.max_input_bytes)?;
    let limits = whowhen::Limits {
        max_bytes: usize::try_from(a.max_input_bytes).unwrap_or(usize::MAX),
        ..whowhen::Limits::default()
    };
    let c = whowhen::parse_whowhen(&bytes, &limits)
        .map_err(|e| format!("{}: {e}", a.file.display()))?;
    let at = whowhen::attribute(&c.history)
        .ok_or_else(|| format!("{}: empty history", a.file.display()))?;
    print(
        &json!({
            "agent": at.agent,
            "step": at.step,
            "responsibility": at.responsibility,
            "rule": at.rule,
            "format": c.format.subset(),
        }),
        false,
    );
    Ok(0)
}

fn serve(a: &ServeArgs) -> Result<i32, String> {
    let limits = Limits {
        max_bytes: a.max_body_bytes,
        max_spans: a.max_spans,
    };
    audita_serve::serve_until_signalled(
        "trace serve",
        a.listen,
        audita_serve::otlp::receiver(&a.out, limits)?,
        |bound| format!("receiving OTLP/HTTP traces on http://{bound}/v1/traces"),
    )?;
    Ok(0)
}
