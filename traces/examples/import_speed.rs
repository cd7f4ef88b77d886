//! Import speed of agent traces: builds an OTLP/JSON export of N spans in memory (an
//! agent loop of chat → tool → memory write → memory search steps, each consuming its
//! predecessors' outputs by hash, with a folded compaction every 50 steps), then
//! times parsing, indexing and deriving every edge, and one witness query from the
//! last action back to the first tool result.
//!
//! `cargo run --release -p audita-traces --example import_speed -- [N] [RUNS]`

use std::time::Instant;

use audita_traces::{parse_otlp_json, witness, ArtifactHash, Graph, Limits, SpanId};
use serde_json::{json, Value};

fn s(v: &str) -> Value {
    json!({"stringValue": v})
}

fn arr(v: &[String]) -> Value {
    json!({"arrayValue": {"values": v.iter().map(|x| s(x)).collect::<Vec<_>>()}})
}

fn h(tag: &str) -> String {
    ArtifactHash::of(tag.as_bytes()).to_string()
}

fn build(n: usize) -> Vec<u8> {
    let root = h("user");
    let mut spans = vec![json!({
        "traceId": "5b8aa5a2d2c872e8321cf37308d69df2", "spanId": format!("{:016x}", 1),
        "parentSpanId": "", "name": "invoke_agent", "startTimeUnixNano": "1000",
        "attributes": [{"key": "gen_ai.operation.name", "value": s("invoke_agent")},
                       {"key": "gen_ai.agent.name", "value": s("agent")},
                       {"key": "audita.roots", "value": arr(std::slice::from_ref(&root))}]})];
    let mut prev = root.clone();
    for i in 2..=n as u64 {
        let out = h(&format!("out-{i}"));
        let (op, extra): (&str, Vec<Value>) = match i % 4 {
            0 => ("chat", vec![]),
            1 => ("execute_tool", vec![]),
            2 => (
                "create_memory",
                vec![json!({"key": "audita.write_set", "value": arr(&[format!("r{i}@{out}")])})],
            ),
            _ => (
                "search_memory",
                vec![
                    json!({"key": "audita.read_set", "value": arr(&[format!("r{}@{}", i - 1, prev)])}),
                ],
            ),
        };
        let parts = vec![prev.clone(), root.clone()];
        let mut attrs = vec![
            json!({"key": "gen_ai.operation.name", "value": s(op)}),
            json!({"key": "audita.input.parts", "value": arr(&parts)}),
            json!({"key": "audita.output.hash", "value": s(&out)}),
        ];
        attrs.extend(extra);
        let events = if i % 50 == 0 {
            vec![json!({"name": "audita.context.mutation", "attributes": [
                {"key": "audita.mutation.output.hash", "value": s(&h(&format!("summary-{i}")))}]})]
        } else {
            vec![]
        };
        spans.push(json!({
            "traceId": "5b8aa5a2d2c872e8321cf37308d69df2", "spanId": format!("{i:016x}"),
            "parentSpanId": format!("{:016x}", 1), "name": op,
            "startTimeUnixNano": (1000 + i * 10).to_string(),
            "endTimeUnixNano": (1005 + i * 10).to_string(),
            "attributes": attrs, "events": events}));
        prev = out;
    }
    serde_json::to_vec(&json!({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})).unwrap()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let runs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let bytes = build(n);
    let limits = Limits {
        max_bytes: usize::MAX,
        max_spans: usize::MAX,
    };
    let (mut parse, mut edges, mut query) = (Vec::new(), Vec::new(), Vec::new());
    let mut raw = Vec::new();
    let mut edge_count = 0;
    let mut closure = 0;
    for _ in 0..runs {
        // Baseline: the same bytes into an untyped serde_json::Value (no validation).
        let r0 = Instant::now();
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        raw.push(r0.elapsed().as_secs_f64());
        drop(v);
        let t0 = Instant::now();
        let trace = parse_otlp_json(&bytes, &limits).unwrap();
        let t1 = Instant::now();
        let graph = Graph::new(&trace);
        edge_count = graph.all_edges().values().map(Vec::len).sum::<usize>();
        let t2 = Instant::now();
        let w = witness(
            &graph,
            &SpanId::parse(&format!("{n:016x}")).unwrap(),
            &SpanId::parse(&format!("{:016x}", 5)).unwrap(),
        )
        .unwrap();
        let t3 = Instant::now();
        assert!(w.reaches_injection);
        closure = w.closure.len();
        parse.push((t1 - t0).as_secs_f64());
        edges.push((t2 - t1).as_secs_f64());
        query.push((t3 - t2).as_secs_f64());
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (p, e, q, r) = (
        med(&mut parse),
        med(&mut edges),
        med(&mut query),
        med(&mut raw),
    );
    let mib = bytes.len() as f64 / (1 << 20) as f64;
    println!("{n} spans, {mib:.1} MiB OTLP/JSON, {edge_count} edges, median of {runs} runs:");
    let row = |what: &str, secs: f64, note: String| {
        println!(
            "  {what:<18} {:>8.1} ms {:>10.0} spans/s  {note}",
            secs * 1e3,
            n as f64 / secs
        );
    };
    row(
        "serde_json::Value",
        r,
        "baseline: untyped JSON, nothing checked".into(),
    );
    row("parse", p, format!("{:.2}x the baseline's time", p / r));
    row("edges", e, "index + every edge graded".into());
    row(
        "import",
        p + e,
        format!("parse + edges, {:.2}x the baseline's time", (p + e) / r),
    );
    println!(
        "  {:<18} {:>8.1} ms  (action {n} back to span 5: {closure} closure edges)",
        "witness",
        q * 1e3
    );
}
