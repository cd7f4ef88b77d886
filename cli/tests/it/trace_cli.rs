//! `audita trace` end to end: the witness JSON and exit codes on the golden OTLP
//! files, one-line errors on bad input, the Who&When attributor, and the OTLP/HTTP
//! receiver fed by the official OpenTelemetry Python SDK (its OTLP/JSON exporter,
//! installed by `.ci/run`).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

fn audita() -> Command {
    Command::new(env!("CARGO_BIN_EXE_audita"))
}

fn testdata(name: &str) -> String {
    format!("{}/../traces/testdata/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn witness(file: &str, action: &str, injection: &str) -> (Option<i32>, Value) {
    let out = audita()
        .args([
            "trace",
            "witness",
            file,
            "--action",
            action,
            "--injection",
            injection,
        ])
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code(), v)
}

const ACTION: &str = "00000000000000e1";
const INJECTION: &str = "00000000000000b1";

#[test]
fn witness_prints_the_issue_json_and_exits_by_level() {
    let (code, v) = witness(&testdata("in_context.json"), ACTION, INJECTION);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["level"], "causal");
    assert_eq!(v["reaches_injection"], true);
    assert_eq!(v["offending_edges"], serde_json::json!([]));
    assert_eq!(v["boundary"], serde_json::json!([]));
    assert_eq!(v["errors"], serde_json::json!([]));
    assert!(!v["closure"]["edges"].as_array().unwrap().is_empty());

    let (code, v) = witness(&testdata("laundering.json"), ACTION, INJECTION);
    assert_eq!(code, Some(1));
    assert_eq!(v["level"], "temporal");
    let off = &v["offending_edges"][0];
    assert_eq!(off["parent"], INJECTION);
    assert_eq!(off["child"], "00000000000000c2");
    assert_eq!(off["kind"], "folded");
    assert!(off["artifact"].as_str().unwrap().starts_with("sha256:"));

    let (code, v) = witness(&testdata("retrieval_echo.json"), ACTION, INJECTION);
    assert_eq!(code, Some(1));
    assert_eq!(v["level"], "indeterminate");
    assert_eq!(v["boundary"][0]["record_id"], "doc-2291");
    assert!(v["boundary"][0]["reason"].as_str().is_some());

    let (code, v) = witness(&testdata("missing_parent.json"), ACTION, INJECTION);
    assert_eq!(code, Some(1));
    assert_eq!(v["boundary"][0]["locator"][0], "00000000000000ff");

    let (code, v) = witness(&testdata("hash_mismatch.json"), ACTION, INJECTION);
    assert_eq!(code, Some(1));
    assert_eq!(v["offending_edges"][0]["kind"], "hash_mismatch");
    assert_eq!(v["errors"].as_array().unwrap().len(), 1);
}

fn fails_with(out: Output, needle: &str) {
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(out.stdout.is_empty());
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains(needle), "{err:?} should contain {needle:?}");
    assert!(!err.contains("panicked"));
}

fn with_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut child = audita()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let w = [
        "trace",
        "witness",
        "-",
        "--action",
        ACTION,
        "--injection",
        INJECTION,
    ];
    fails_with(with_stdin(&w, b"{"), "not OTLP/JSON");
    fails_with(with_stdin(&w, b"[1,2]"), "not OTLP/JSON");
    fails_with(with_stdin(&w, b""), "empty document");
    let bad_hash = br#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"spanId":"00000000000000e1","attributes":[{"key":"audita.output.hash","value":{"stringValue":"md5:abc"}}]}]}]}]}"#;
    fails_with(with_stdin(&w, bad_hash), "audita.output.hash");
    let file = testdata("in_context.json");
    fails_with(
        audita()
            .args([
                "trace",
                "witness",
                &file,
                "--action",
                "00000000000000f0",
                "--injection",
                INJECTION,
            ])
            .output()
            .unwrap(),
        "action span 00000000000000f0 is not in the trace",
    );
    fails_with(
        audita()
            .args([
                "trace",
                "witness",
                &file,
                "--action",
                "xyz",
                "--injection",
                INJECTION,
            ])
            .output()
            .unwrap(),
        "--action",
    );
    fails_with(
        audita()
            .args(["trace", "import", &file, "--max-input-bytes", "100"])
            .output()
            .unwrap(),
        "--max-input-bytes",
    );
    fails_with(
        audita()
            .args(["trace", "import", &file, "--max-spans", "2"])
            .output()
            .unwrap(),
        "more than 2 spans",
    );
    fails_with(
        with_stdin(&["trace", "whowhen", "-"], b"{}"),
        "not a Who&When log",
    );
}

#[test]
fn import_prints_every_edge_with_its_grade() {
    let out = audita()
        .args(["trace", "import", &testdata("retrieval_echo.json")])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["spans"], 8);
    assert_eq!(v["edge_kinds"]["similarity"], 1);
    assert_eq!(v["edge_kinds"]["window_exit"], 1);
    // Every non-root span inherits the root agent's name (nesting names principals).
    assert!(v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|n| n["agent"] == "travel"));
    let out = audita()
        .args(["trace", "import", &testdata("hash_mismatch.json")])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "a hash mismatch is a problem named"
    );
}

#[test]
fn whowhen_names_agent_step_and_profile() {
    let out = audita()
        .args([
            "trace",
            "whowhen",
            &testdata("whowhen/Algorithm-Generated/1.json"),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["agent"], "Excel_Expert");
    assert_eq!(v["step"], 0);
    let total: f64 = v["responsibility"]
        .as_object()
        .unwrap()
        .values()
        .map(|x| x.as_f64().unwrap())
        .sum();
    assert!((total - 1.0).abs() < 0.01);
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn receiver_accepts_spans_from_the_opentelemetry_python_sdk() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("traces.jsonl");
    let mut child = audita()
        .args([
            "trace",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--max-body-bytes",
            "1000000",
            "--out",
        ])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _server = Server(child);
    let url = line.trim().rsplit(' ').next().unwrap().to_string();
    assert!(url.ends_with("/v1/traces"), "{line}");

    let script = format!("{}/tests/otel_export.py", env!("CARGO_MANIFEST_DIR"));
    let py = Command::new("python3")
        .arg(&script)
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        py.status.success(),
        "the OpenTelemetry SDK exporter ran: {}",
        String::from_utf8_lossy(&py.stderr)
    );
    let ids: Value = serde_json::from_slice(&py.stdout).unwrap();
    let file = out.to_str().unwrap();

    let (code, v) = witness(
        file,
        ids["action"].as_str().unwrap(),
        ids["injection"].as_str().unwrap(),
    );
    assert_eq!(code, Some(1), "{v}");
    assert_eq!(v["level"], "temporal");
    assert_eq!(v["offending_edges"][0]["kind"], "folded");

    let (code, v) = witness(
        file,
        ids["compaction_node_action"].as_str().unwrap(),
        ids["injection2"].as_str().unwrap(),
    );
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["level"], "causal");

    // A request that is not OTLP/JSON is refused with the reason, and not stored.
    let before = std::fs::read(&out).unwrap();
    let bad = Command::new("python3")
        .args([
            "-c",
            "import sys,urllib.request,urllib.error\n\
             r=urllib.request.Request(sys.argv[1],data=b'{\"resourceSpans\":7}',headers={'Content-Type':'application/json'})\n\
             try: urllib.request.urlopen(r)\n\
             except urllib.error.HTTPError as e: print(e.code, e.read().decode())",
            &url,
        ])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&bad.stdout);
    assert!(said.starts_with("400 "), "{said}");
    assert!(said.contains("not OTLP/JSON"), "{said}");
    // Protobuf (not supported: 415 naming the way out) and an oversized body (413).
    let refused = Command::new("python3")
        .args([
            "-c",
            "import sys,urllib.request,urllib.error\n\
             def post(data, ctype):\n\
             \x20   r=urllib.request.Request(sys.argv[1],data=data,headers={'Content-Type':ctype})\n\
             \x20   try: urllib.request.urlopen(r); print('200')\n\
             \x20   except urllib.error.HTTPError as e: print(e.code, e.read().decode())\n\
             post(b'\\x0a\\x00', 'application/x-protobuf')\n\
             post(b' ' * (2 << 20), 'application/json')",
            &url,
        ])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&refused.stdout);
    let mut lines = said.lines();
    let proto = lines.next().unwrap_or_default();
    assert!(
        proto.starts_with("415 ") && proto.contains("OTLP/JSON"),
        "{said}"
    );
    assert!(
        lines.next().unwrap_or_default().starts_with("413"),
        "{said}"
    );
    assert_eq!(std::fs::read(&out).unwrap(), before);
}

/// POSTs each `(path, file)` to the receiver at `base` as OTLP/JSON and returns one
/// line per request: the HTTP status and, for a refusal, the body.
fn post_files(base: &str, requests: &[(&str, String)]) -> Vec<String> {
    let mut args = vec![
        "-c".to_string(),
        "import sys,urllib.request,urllib.error\n\
         for path, file in zip(sys.argv[2::2], sys.argv[3::2]):\n\
         \x20   r=urllib.request.Request(sys.argv[1]+path,data=open(file,'rb').read(),headers={'Content-Type':'application/json'})\n\
         \x20   try: urllib.request.urlopen(r); print('200')\n\
         \x20   except urllib.error.HTTPError as e: print(e.code, e.read().decode())"
            .to_string(),
        base.to_string(),
    ];
    for (path, file) in requests {
        args.push(path.to_string());
        args.push(file.clone());
    }
    let out = Command::new("python3").args(&args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn receiver_joins_genai_log_records_posted_to_v1_logs() {
    // openai-v2 with the v1.28–v1.36 conventions: the messages are log records only,
    // exported to /v1/logs beside the spans; one file holds the run.
    let receiver = crate::trace_frameworks::receiver();
    let out = receiver.out.clone();
    let base = receiver.url.strip_suffix("/v1/traces").unwrap();
    let spans = testdata("frameworks/openai_v2_events-injected.json");
    let logs = testdata("frameworks/openai_v2_events-injected.logs.json");
    let said = post_files(
        base,
        &[
            ("/v1/traces", spans),
            ("/v1/logs", logs.clone()),
            ("/v1/traces", logs.clone()),
            ("/v1/logs", testdata("not_ancestor.json")),
        ],
    );
    assert_eq!(said[..2], ["200", "200"], "{said:?}");
    // Each signal's export only at its own path.
    for refused in &said[2..] {
        assert!(
            refused.starts_with("400 ") && refused.contains("not OTLP/JSON for"),
            "{said:?}"
        );
    }
    assert_eq!(std::fs::read_to_string(&out).unwrap().lines().count(), 2);

    let ids = std::fs::read_to_string(testdata("frameworks/ids.jsonl")).unwrap();
    let ids: Value = ids
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["stack"] == "openai_v2_events" && v["case"] == "injected")
        .unwrap();
    let file = out.to_str().unwrap();
    let (code, v) = witness(
        file,
        ids["action"].as_str().unwrap(),
        ids["injection"].as_str().unwrap(),
    );
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["level"], "causal");
    let imported = audita().args(["trace", "import", file]).output().unwrap();
    let imported: Value = serde_json::from_slice(&imported.stdout).unwrap();
    assert_eq!(imported["orphan_log_records"], 0, "{imported}");
}

/// A Magentic-One log of the Hand-Crafted shape, written here (the held-out subset
/// itself is never read): `{role, content}` entries without `name`.
fn magentic_one_log(mistake_agent: &str, mistake_step: &str) -> String {
    serde_json::json!({
        "question": "q", "ground_truth": "a",
        "mistake_agent": mistake_agent, "mistake_step": mistake_step, "mistake_reason": "r",
        "history": [
            {"role": "human", "content": "q"},
            {"role": "Orchestrator (thought)", "content": "Initial plan"},
            {"role": "Orchestrator (-> FileSurfer)", "content": "Open the file"},
            {"role": "FileSurfer", "content": "opened the wrong file"},
            {"role": "Orchestrator (thought)", "content": "Updated Ledger: {\"is_progress_being_made\": {\"reason\": \"no\", \"answer\": false}, \"is_in_loop\": {\"reason\": \"\", \"answer\": false}}"},
        ]
    })
    .to_string()
}

#[test]
fn whowhen_reads_magentic_one_logs_and_the_bench_scores_each_subset() {
    // Regression: a Magentic-One log was refused with "missing field `name`".
    let out = with_stdin(
        &["trace", "whowhen", "-"],
        magentic_one_log("FileSurfer", "3").as_bytes(),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["agent"], "FileSurfer");
    assert_eq!(v["step"], 3);
    assert_eq!(v["format"], "Hand-Crafted");

    // A directory holding both subsets: every subset scored, pooled rows beside.
    let dir = tempfile::tempdir().unwrap();
    let ag = dir.path().join("Algorithm-Generated");
    let hc = dir.path().join("Hand-Crafted");
    std::fs::create_dir_all(&ag).unwrap();
    std::fs::create_dir_all(&hc).unwrap();
    for i in 1..=126 {
        std::fs::copy(
            testdata(&format!("whowhen/Algorithm-Generated/{i}.json")),
            ag.join(format!("{i}.json")),
        )
        .unwrap();
    }
    std::fs::write(hc.join("1.json"), magentic_one_log("FileSurfer", "3")).unwrap();
    std::fs::write(hc.join("2.json"), magentic_one_log("Orchestrator", "2")).unwrap();
    let out = crate::audita_load()
        .args(["bench", "whowhen"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["files"], 128);
    let row = |subset: &str, split: &str| {
        v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| {
                r["subset"] == subset && r["method"] == "audita-static" && r["split"] == split
            })
            .cloned()
            .unwrap_or_else(|| panic!("no {subset}/{split} row: {v}"))
    };
    assert_eq!(row("Hand-Crafted", "held-out")["n"], 2);
    assert_eq!(row("Hand-Crafted", "held-out")["agent"], 0.5);
    assert_eq!(row("Algorithm-Generated", "held-out")["n"], 54);
    assert!(
        row("Algorithm-Generated", "held-out")["agent"]
            .as_f64()
            .unwrap()
            >= 0.648
    );
    assert!(
        row("Algorithm-Generated", "held-out")["step"]
            .as_f64()
            .unwrap()
            >= 0.389
    );
    assert_eq!(row("pooled", "all")["n"], 128);
}

/// The JSON `trace witness --injection` printed before the analysis without
/// `--injection` existed (issue 59), byte for byte: `cli/tests/golden/witness/*.json`,
/// one per (file, action, injection) below, written by the binary of the commit
/// before it. Refresh only on purpose: `AUDITA_REFRESH_GOLDEN=1`.
const PINNED: [(&str, &str, &str, &str); 9] = [
    ("in_context", "in_context.json", ACTION, INJECTION),
    ("laundering", "laundering.json", ACTION, INJECTION),
    ("retrieval_echo", "retrieval_echo.json", ACTION, INJECTION),
    ("hash_mismatch", "hash_mismatch.json", ACTION, INJECTION),
    (
        "pydanticai-injected",
        "frameworks/pydanticai-injected.json",
        "f418a0378c4dc6cd",
        "ec6d3f0385292689",
    ),
    (
        "pydanticai-memory_paraphrase",
        "frameworks/pydanticai-memory_paraphrase.json",
        "3e8f94843085dc77",
        "24e0d97d8238efef",
    ),
    (
        "langgraph_openinference-compact_tail",
        "frameworks/langgraph_openinference-compact_tail.json",
        "8eda8cec1a272a49",
        "842e02b490ec15be",
    ),
    (
        "openai_agents_openinference-clean",
        "frameworks/openai_agents_openinference-clean.json",
        "17859682a2c228fa",
        "7ebc7ff868a89663",
    ),
    (
        "ag2_tracing-truncated",
        "frameworks/ag2_tracing-truncated.json",
        "8fb6713388fb19c7",
        "56e6665ec68250ab",
    ),
];

#[test]
fn witness_with_injection_prints_what_it_printed_before_byte_for_byte() {
    for (name, file, action, injection) in PINNED {
        let out = audita()
            .args(["trace", "witness", &testdata(file)])
            .args(["--action", action, "--injection", injection])
            .output()
            .unwrap();
        let golden = format!(
            "{}/tests/golden/witness/{name}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        if std::env::var_os("AUDITA_REFRESH_GOLDEN").is_some() {
            std::fs::create_dir_all(std::path::Path::new(&golden).parent().unwrap()).unwrap();
            std::fs::write(&golden, &out.stdout).unwrap();
        }
        let want = std::fs::read(&golden).unwrap();
        assert!(
            out.stdout == want,
            "{name}: the --injection JSON changed:\n{}\nwas\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&want)
        );
    }
}

fn inputs(file: &str, action: &str) -> (Option<i32>, Value) {
    let out = audita()
        .args(["trace", "witness", file, "--action", action])
        .output()
        .unwrap();
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        out.status.code(),
        serde_json::from_slice(&out.stdout).unwrap(),
    )
}

#[test]
fn witness_without_injection_ranks_the_inputs_by_value_provenance() {
    // pydantic-ai's decoy run: the document holds the account and the amount, the
    // inbox (read first) a similar instruction with the amount only.
    let (code, v) = inputs(
        &testdata("frameworks/pydanticai-decoy.json"),
        "81900a4c123ededa",
    );
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["schema"], "audita.trace-inputs/v1");
    assert_eq!(v["action"]["tool"], "pay");
    assert_eq!(v["candidate"]["span_id"], "6530d6fb29117e25", "{v}");
    assert_eq!(v["candidate"]["claim"], "causal");
    assert!(v["candidate"]["statement"]
        .as_str()
        .unwrap()
        .contains("causal candidate"));
    let ins = v["inputs"].as_array().unwrap();
    assert_eq!(ins[0]["rank"], 1);
    assert_eq!(ins[0]["tool"], "fetch_document");
    assert_eq!(ins[1]["tool"], "read_inbox");
    assert_eq!(ins[1]["holds"], serde_json::json!(["amount"]));
    assert!(ins
        .iter()
        .any(|i| i["input"] == "message" && i["role"] == "user" && i["rank"].is_null()));
    let amount = v["values"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["path"] == "amount")
        .unwrap();
    assert_eq!(amount["value"], 5000);
    assert_eq!(
        amount["input"]["span_id"], "1fbf4b2d4fd73aea",
        "first to hold it"
    );

    // Declared hashes, no content: the inputs and their levels, every value unknown.
    let (code, v) = inputs(&testdata("laundering.json"), ACTION);
    assert_eq!(code, Some(1), "{v}");
    assert_eq!(v["arguments"], "not_read");
    assert!(v["candidate"].is_null());
    assert_eq!(v["level"], "temporal", "{v}");
    assert!(v["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|i| i["span_id"] == INJECTION && i["level"] == "temporal"));
}
