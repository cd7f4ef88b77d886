//! `audita trace …`: agent execution traces (`audita_traces`).
//!
//! - `trace import FILE` prints the span graph with every edge's grade;
//! - `trace witness FILE --action SPAN --injection SPAN` runs the causal-witness
//!   decision procedure and prints one JSON object (exit 0 causal, 1 a weaker claim);
//! - `trace whowhen FILE.json` names the decisive agent and step of a Who&When log;
//! - `trace whowhen-bench DIR` scores the attributor and the floors on every Who&When
//!   subset present (development half, held-out half, all; each row names its
//!   subset, and `pooled` rows join the subsets), and the three LLM-judge formats
//!   when `AUDITA_JUDGE_ENDPOINT` is set;
//! - `trace serve --listen ADDR --out FILE` is an OTLP/HTTP receiver (`POST
//!   /v1/traces` and `POST /v1/logs`, OTLP/JSON) that appends each accepted export as
//!   one line to FILE (spans and the GenAI events logged as log records of one run
//!   in one file), which `trace import` reads;
//! - `trace seal FILE --config DEPLOYMENT --record OUT` seals a trace as evidence
//!   (one signed message per span, [`seal`]);
//! - `trace verdict RECORD --action SPAN --injection SPAN` judges an adverse outcome
//!   on such a record: the `audita verdict` machinery plus the witness claim
//!   ([`verdict`]).
//!
//! Design constraints:
//! - Bad input (unreadable or oversized file, malformed OTLP, unknown span id) is one
//!   line on stderr and exit 2. Inputs are bounded: `--max-input-bytes` and
//!   `--max-spans`, also per request in the receiver (413/400 with the reason).
//! - The receiver validates every request completely before appending it, so the
//!   file only ever holds exports that import on their own; appends are serialised.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

mod seal;
mod verdict;

use audita_traces::graph::Edge;
use audita_traces::whowhen::{self, Tally};
use audita_traces::{parse_otlp_json, witness, Graph, Level, Limits, SpanId, Trace, Witness};
use serde_json::{json, Value};

/// Time limit of one receiver request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

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
    WhowhenBench(WhoWhenBenchArgs),
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
    /// Span id of the injection node.
    #[arg(long, value_name = "SPAN_ID")]
    injection: String,
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
struct WhoWhenBenchArgs {
    /// Directory of Who&When logs (`1.json` …), or holding the subset directories
    /// `Algorithm-Generated/` and `Hand-Crafted/`.
    dir: PathBuf,
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
        TraceCommand::WhowhenBench(a) => bench(a),
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
    let injection = span_id(&a.injection, "--injection")?;
    let trace = read_trace(&a.file, &a.limits)?;
    let graph = Graph::new(&trace);
    let w = witness(&graph, &action, &injection).map_err(|e| e.to_string())?;
    print(&witness_json(&w), a.pretty);
    Ok(if w.level == Level::Causal { 0 } else { 1 })
}

/// The JSON of `audita trace witness` (the shape).
fn witness_json(w: &Witness) -> Value {
    let boundary: Vec<Value> = w
        .boundary
        .iter()
        .map(|b| {
            let mut v =
                json!({"artifact": b.artifact.to_string(), "reason": b.reason, "code": b.code});
            if let Some(r) = &b.record_id {
                v["record_id"] = json!(r);
            }
            if !b.locator.is_empty() {
                v["locator"] = json!(b.locator.iter().map(|l| l.to_string()).collect::<Vec<_>>());
            }
            v
        })
        .collect();
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

type Predictor = fn(&[whowhen::Turn]) -> Option<(String, usize)>;

/// One Who&When log file of a bench directory.
struct WhoWhenFile {
    /// The subset directory it came from (`None`: the directory itself).
    subset: Option<&'static str>,
    path: PathBuf,
    /// Its file name (`N.json`), which fixes its half.
    name: String,
}

/// The Who&When files under `dir`: `N.json` files directly, and those of the
/// subset directories `Algorithm-Generated/` and `Hand-Crafted/` when present.
fn whowhen_files(dir: &Path) -> Result<Vec<WhoWhenFile>, String> {
    let numbered = |d: &Path| -> Result<Vec<(u64, String)>, String> {
        let mut v: Vec<(u64, String)> = std::fs::read_dir(d)
            .map_err(|e| format!("{}: {e}", d.display()))?
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter_map(|n| {
                n.strip_suffix(".json")
                    .and_then(|s| s.parse::<u64>().ok())
                    .map(|i| (i, n.clone()))
            })
            .collect();
        v.sort();
        Ok(v)
    };
    let mut out = Vec::new();
    for (_, name) in numbered(dir)? {
        out.push(WhoWhenFile {
            subset: None,
            path: dir.join(&name),
            name,
        });
    }
    for sub in ["Algorithm-Generated", "Hand-Crafted"] {
        let d = dir.join(sub);
        if d.is_dir() {
            for (_, name) in numbered(&d)? {
                out.push(WhoWhenFile {
                    subset: Some(sub),
                    path: d.join(&name),
                    name,
                });
            }
        }
    }
    if out.is_empty() {
        return Err(format!(
            "{}: no N.json files (directly or under Algorithm-Generated/ or Hand-Crafted/)",
            dir.display()
        ));
    }
    Ok(out)
}

fn bench(a: &WhoWhenBenchArgs) -> Result<i32, String> {
    let files = whowhen_files(&a.dir)?;
    let methods: [(&str, Predictor); 3] = [
        ("audita-static", |h| {
            whowhen::attribute(h).map(|a| (a.agent, a.step))
        }),
        ("floor: first worker reply", whowhen::floor_first_worker),
        ("floor: step 0", whowhen::floor_step_zero),
    ];
    // (subset, method, split) → tally
    let mut tallies: BTreeMap<(&str, &str, &str), Tally> = BTreeMap::new();
    // The LLM judges run only with a configured endpoint (audita_baselines::judge).
    let endpoint = std::env::var("AUDITA_JUDGE_ENDPOINT")
        .ok()
        .filter(|e| !e.is_empty());
    let mut transport = match &endpoint {
        None => None,
        Some(e) => {
            let model = std::env::var("AUDITA_JUDGE_MODEL").unwrap_or_else(|_| "default".into());
            Some(
                audita_baselines::judge::HttpTransport::new(e, &model)
                    .map_err(|e| e.to_string())?,
            )
        }
    };
    let mut judge_errors = 0usize;
    let mut subsets: std::collections::BTreeSet<&str> = Default::default();
    for WhoWhenFile {
        subset: dir_subset,
        path,
        name,
    } in &files
    {
        let bytes = crate::inputs::read_input(path, 16 << 20)?;
        let c = whowhen::parse_whowhen(&bytes, &whowhen::Limits::default())
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let label = c
            .label
            .clone()
            .ok_or_else(|| format!("{}: no mistake_agent/mistake_step label", path.display()))?;
        let subset = dir_subset.unwrap_or(c.format.subset());
        subsets.insert(subset);
        // A file of the Hand-Crafted directory is held out whatever its shape.
        let split_format = match dir_subset {
            Some("Hand-Crafted") => whowhen::LogFormat::MagenticOne,
            _ => c.format,
        };
        let half = if whowhen::is_development_in(split_format, name) {
            "development"
        } else {
            "held-out"
        };
        let mut add = |m: &'static str, hits| {
            for split in [half, "all"] {
                tallies.entry((subset, m, split)).or_default().add(hits);
                tallies.entry(("pooled", m, split)).or_default().add(hits);
            }
        };
        for (m, f) in &methods {
            let p = f(&c.history);
            add(
                m,
                whowhen::score(p.as_ref().map(|(a, s)| (a.as_str(), *s)), &label),
            );
        }
        if let Some(t) = transport.as_mut() {
            use audita_baselines::judge::Transport as _;
            for format in whowhen::judge::Format::ALL {
                let p = whowhen::judge::judge(&c, format, &mut |prompt: &str| t.complete(prompt))
                    .unwrap_or_else(|e| {
                        tracing::warn!(file = %path.display(), error = %e, "judge call failed");
                        judge_errors += 1;
                        None
                    });
                add(
                    format.name(),
                    whowhen::score(p.as_ref().map(|(a, s)| (a.as_str(), *s)), &label),
                );
            }
        }
    }
    let pooled = subsets.len() > 1;
    let rows: Vec<Value> = tallies
        .iter()
        .filter(|((subset, _, _), _)| pooled || *subset != "pooled")
        .map(|((subset, m, half), t)| {
            json!({
                "subset": subset, "method": m, "split": half, "n": t.n,
                "agent": round3(t.rate(t.agent)), "step": round3(t.rate(t.step)),
                "agent_strict": round3(t.rate(t.agent_strict)),
                "step_strict": round3(t.rate(t.step_strict)),
            })
        })
        .collect();
    let judges = match &endpoint {
        None => "not run (AUDITA_JUDGE_ENDPOINT unset)".to_string(),
        Some(e) => format!("run against {e} ({judge_errors} failed calls counted as misses)"),
    };
    print(
        &json!({"files": files.len(), "subsets": subsets, "judges": judges, "rows": rows}),
        true,
    );
    Ok(0)
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The receiver's shared state: the output file and the per-request limits.
struct Receiver {
    out: std::sync::Mutex<std::fs::File>,
    limits: Limits,
}

fn serve(a: &ServeArgs) -> Result<i32, String> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&a.out)
        .map_err(|e| format!("{}: cannot open for appending: {e}", a.out.display()))?;
    let state = Arc::new(Receiver {
        out: std::sync::Mutex::new(file),
        limits: Limits {
            max_bytes: a.max_body_bytes,
            max_spans: a.max_spans,
        },
    });
    crate::serve_log::serve_http(
        "trace serve",
        a.listen,
        router(state, a.max_body_bytes),
        |bound| format!("receiving OTLP/HTTP traces on http://{bound}/v1/traces"),
    )?;
    Ok(0)
}

fn router(state: Arc<Receiver>, max_body: usize) -> axum::Router {
    use axum::http::StatusCode;
    let logs = state.clone();
    axum::Router::new()
        .route(
            "/v1/traces",
            axum::routing::post(
                move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                    let state = state.clone();
                    async move { receive(&state, &headers, &body, Signal::Traces) }
                },
            ),
        )
        .route(
            "/v1/logs",
            axum::routing::post(
                move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                    let state = logs.clone();
                    async move { receive(&state, &headers, &body, Signal::Logs) }
                },
            ),
        )
        .layer(axum::extract::DefaultBodyLimit::max(max_body))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            REQUEST_TIMEOUT,
        ))
}

/// Which OTLP signal a request carries.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Signal {
    /// `ExportTraceServiceRequest` (`resourceSpans`).
    Traces,
    /// `ExportLogsServiceRequest` (`resourceLogs`): GenAI events as log records.
    Logs,
}

fn receive(
    state: &Receiver,
    headers: &axum::http::HeaderMap,
    body: &[u8],
    signal: Signal,
) -> (
    axum::http::StatusCode,
    [(axum::http::HeaderName, &'static str); 1],
    String,
) {
    use axum::http::{header, StatusCode};
    let json_type = [(header::CONTENT_TYPE, "application/json")];
    let refuse = |code: StatusCode, msg: String| {
        tracing::warn!(reason = %msg, "trace serve: request refused");
        (code, json_type.clone(), json!({"error": msg}).to_string())
    };
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    if !content_type.starts_with("application/json") {
        return refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "content type {content_type} is not supported: send OTLP/JSON (application/json)"
            ),
        );
    }
    if let Some(enc) = headers.get(header::CONTENT_ENCODING) {
        if enc.as_bytes() != b"identity" {
            return refuse(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "compressed bodies are not supported: export uncompressed".into(),
            );
        }
    }
    let trace = match parse_otlp_json(body, &state.limits) {
        Ok(t) => t,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, e.to_string()),
    };
    // The body is one JSON document (checked above); its top level must hold its
    // signal's key.
    let (key, path) = match signal {
        Signal::Traces => ("resourceSpans", "/v1/traces"),
        Signal::Logs => ("resourceLogs", "/v1/logs"),
    };
    let has_key = serde_json::from_slice::<BTreeMap<String, serde::de::IgnoredAny>>(body)
        .is_ok_and(|top| top.contains_key(key));
    if !has_key {
        return refuse(
            StatusCode::BAD_REQUEST,
            format!("not OTLP/JSON for {path}: no {key} in the request"),
        );
    }
    let mut line = body.to_vec();
    line.retain(|&b| b != b'\n' && b != b'\r');
    line.push(b'\n');
    let written = state
        .out
        .lock()
        .map_err(|_| "output file lock poisoned".to_string())
        .and_then(|mut f| f.write_all(&line).map_err(|e| e.to_string()));
    if let Err(e) = written {
        tracing::error!(error = %e, "trace serve: cannot append");
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            json_type,
            json!({"error": "cannot store the export"}).to_string(),
        );
    }
    tracing::info!(spans = trace.len(), "trace serve: export accepted");
    (
        StatusCode::OK,
        json_type,
        json!({"partialSuccess": {}}).to_string(),
    )
}
