//! `audita trace seal` and `audita trace verdict` end to end, on the golden OTLP files
//! of the traces crate: a trace sealed under an operator-made deployment (`audita
//! init`, `audita principal add`: real keys from OS randomness) is a record `audita
//! verify` certifies; an altered byte is caught; `audita trace verdict` names the
//! injected agent and step with the memo's claim level (re-summarisation laundering:
//! not causal; correct in-context attribution: causal) next to the `audita verdict`
//! machinery's duty, breach and ρ; a collector signs as a conduit and says so; bad
//! input is one line and exit 2.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value};

const ACTION: &str = "00000000000000e1";
const INJECTION: &str = "00000000000000b1";

fn audita() -> Command {
    Command::new(env!("CARGO_BIN_EXE_audita"))
}

fn testdata(name: &str) -> PathBuf {
    PathBuf::from(format!(
        "{}/../traces/testdata/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
}

fn ok(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn fails_with(out: Output, needle: &str) {
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains(needle), "{err:?} should contain {needle:?}");
    assert!(!err.contains("panicked"));
}

/// A deployment with one local keeper and `principals` registered (role agent).
fn deployment(work: &Path, principals: &[&str]) -> PathBuf {
    let dir = work.join("site");
    ok(audita().arg("init").arg(&dir).args([
        "--origin",
        "agents.example/audita",
        "--local-keeper",
        "keeper-1",
    ]));
    for p in principals {
        ok(audita()
            .args(["principal", "add"])
            .arg(&dir)
            .args([p, "--role", "agent"]));
    }
    dir
}

fn seal(file: &Path, site: &Path, out: &Path, extra: &[&str]) -> Output {
    audita()
        .args(["trace", "seal"])
        .arg(file)
        .arg("--config")
        .arg(site)
        .arg("--record")
        .arg(out)
        .args(extra)
        .output()
        .unwrap()
}

fn sealed(file: &Path, site: &Path, out: &Path, extra: &[&str]) -> Value {
    let o = seal(file, site, out, extra);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

fn verify(dir: &Path) -> (Option<i32>, Value) {
    let o = audita().arg("verify").arg(dir).output().unwrap();
    (
        o.status.code(),
        serde_json::from_slice(&o.stdout).unwrap_or(Value::Null),
    )
}

fn trace_verdict(dir: &Path, extra: &[&str]) -> (Option<i32>, Value, String) {
    let o = audita()
        .args(["trace", "verdict"])
        .arg(dir)
        .args(["--action", ACTION, "--injection", INJECTION])
        .args(extra)
        .output()
        .unwrap();
    (
        o.status.code(),
        serde_json::from_slice(&o.stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A copy of a golden trace with `gen_ai.agent.name` set on the given spans (the
/// others inherit their nearest enclosing agent), or removed everywhere when
/// `agents` is empty.
fn with_agents(work: &Path, name: &str, agents: &[(&str, &str)]) -> PathBuf {
    let mut doc: Value = serde_json::from_slice(&std::fs::read(testdata(name)).unwrap()).unwrap();
    for rs in doc["resourceSpans"].as_array_mut().unwrap() {
        for ss in rs["scopeSpans"].as_array_mut().unwrap() {
            for span in ss["spans"].as_array_mut().unwrap() {
                let id = span["spanId"].as_str().unwrap().to_string();
                let attrs = span["attributes"].as_array_mut().unwrap();
                if agents.is_empty() {
                    attrs.retain(|a| a["key"] != "gen_ai.agent.name");
                }
                if let Some((_, agent)) = agents.iter().find(|(s, _)| *s == id) {
                    attrs.retain(|a| a["key"] != "gen_ai.agent.name");
                    attrs
                        .push(json!({"key": "gen_ai.agent.name", "value": {"stringValue": agent}}));
                }
            }
        }
    }
    let path = work.join(format!("agents-{}-{name}", agents.len()));
    std::fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();
    path
}

#[test]
fn a_sealed_trace_certifies_and_an_altered_byte_is_caught() {
    let work = tempfile::tempdir().unwrap();
    let site = deployment(work.path(), &["travel"]);
    let out = work.path().join("record");
    let v = sealed(&testdata("laundering.json"), &site, &out, &[]);
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(v["messages"], 5);
    assert_eq!(steps.len(), 5);
    assert_eq!(steps[0]["production"], "opening");
    // The folded edge keeps its grade through sealing.
    let c2 = steps
        .iter()
        .find(|s| s["span_id"] == "00000000000000c2")
        .unwrap();
    assert!(
        c2["cites"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["span_id"] == INJECTION && c["grade"] == "folded"),
        "{c2}"
    );
    assert!(steps
        .iter()
        .all(|s| s["signer"] == "travel" && s["conduit"] == false));
    let (code, summary) = verify(&out);
    assert_eq!(code, Some(0), "{summary}");

    // The output directory holds a record now: sealing into it again is refused.
    fails_with(
        seal(&testdata("laundering.json"), &site, &out, &[]),
        "already holds a record",
    );

    // One byte of the injection step's payload changed in the sealed segment.
    let seg = std::fs::read_dir(out.join("segments"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("envelopes-")
        })
        .unwrap();
    let mut bytes = std::fs::read(&seg).unwrap();
    let field = format!("\"span_id\":\"{INJECTION}\"");
    let at =
        find(&bytes, field.as_bytes()).expect("the injection step's payload is in the segment");
    let last = at + field.len() - 2;
    bytes[last] = if bytes[last] == b'1' { b'2' } else { b'1' };
    std::fs::write(&seg, &bytes).unwrap();
    let (code, summary) = verify(&out);
    assert_eq!(code, Some(1), "{summary}");
    // The altered step no longer certifies: the verdict cannot rest on it.
    let (code, _, err) = trace_verdict(&out, &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("injection span 00000000000000b1 is not a certified step"),
        "{err}"
    );
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[test]
fn trace_verdict_names_the_injected_step_with_the_memo_claim_level() {
    let work = tempfile::tempdir().unwrap();
    let site = deployment(work.path(), &["travel"]);
    // Memo case 3: correct in-context attribution.
    let rec = work.path().join("in_context");
    sealed(&testdata("in_context.json"), &site, &rec, &[]);
    let (code, v, err) = trace_verdict(&rec, &[]);
    assert_eq!(code, Some(0), "{err}\n{v}");
    assert_eq!(v["schema"], "audita.trace-verdict/v1");
    assert_eq!(v["claim"], "causal");
    assert_eq!(v["witness"]["level"], "causal");
    assert_eq!(v["injection"]["span_id"], INJECTION);
    assert_eq!(v["injection"]["agent"], "travel");
    assert_eq!(v["injection"]["step"], 2);
    assert_eq!(v["injection"]["name"], "retrieval fares-index");
    assert_eq!(v["verdict"]["schema"], "audita.verdict/v1");
    assert_eq!(v["verdict"]["status"], "graded");
    assert_eq!(
        v["verdict"]["anchors"][0], v["action"]["message"],
        "the action's message is the anchor"
    );
    assert!(v["injected_principal"]["rho_lo"].as_f64().unwrap() > 0.0);

    // Memo case 1: re-summarisation laundering — not causal, the folded edge named.
    let rec = work.path().join("laundering");
    sealed(&testdata("laundering.json"), &site, &rec, &[]);
    let (code, v, err) = trace_verdict(&rec, &[]);
    assert_eq!(code, Some(1), "{err}\n{v}");
    assert_eq!(v["claim"], "temporal");
    assert_eq!(v["witness"]["offending_edges"][0]["kind"], "folded");
    assert_eq!(v["witness"]["offending_edges"][0]["parent"], INJECTION);
    assert_eq!(v["injection"]["agent"], "travel");
    // The sealed per-citation pin makes the same edge a hypothesis in the verdict.
    let folded: Vec<&Value> = v["verdict"]["slice"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "folded_transform")
        .collect();
    assert_eq!(folded.len(), 1, "{}", v["verdict"]["slice"]);

    // Memo case 2: retrieval echo — the closure leaves the window.
    let rec = work.path().join("echo");
    sealed(&testdata("retrieval_echo.json"), &site, &rec, &[]);
    let (code, v, _) = trace_verdict(&rec, &[]);
    assert_eq!(code, Some(1));
    assert_eq!(v["claim"], "indeterminate");
    assert_eq!(v["witness"]["boundary"][0]["record_id"], "doc-2291");
}

#[test]
fn duties_breach_and_rho_of_the_agents_of_a_multi_agent_incident() {
    let work = tempfile::tempdir().unwrap();
    let site = deployment(work.path(), &["travel", "researcher", "payer", "verifier"]);
    let duties = work.path().join("duties.json");
    std::fs::write(
        &duties,
        json!({"principals": {"payer": {"duties": [
            {"kind": "review_required", "id": "verify-tool-results", "reviewer": "verifier"}
        ]}}})
        .to_string(),
    )
    .unwrap();
    let agents = [
        (INJECTION, "researcher"),
        ("00000000000000c2", "payer"),
        (ACTION, "payer"),
    ];
    let duties_arg = ["--duties", duties.to_str().unwrap()];

    let file = with_agents(work.path(), "in_context.json", &agents);
    let rec = work.path().join("in_context");
    sealed(&file, &site, &rec, &[]);
    let (code, v, err) = trace_verdict(&rec, &duties_arg);
    assert_eq!(code, Some(0), "{err}\n{v}");
    assert_eq!(v["claim"], "causal");
    assert_eq!(v["injection"]["agent"], "researcher");
    assert_eq!(v["injected_principal"]["name"], "researcher");
    let payer = &v["verdict"]["principals"]["payer"];
    assert_eq!(payer["duties"], json!(["verify-tool-results"]));
    assert_eq!(payer["breach"]["specification"], true, "{payer}");
    assert_eq!(payer["culpable"], true, "{payer}");
    let researcher = &v["verdict"]["principals"]["researcher"];
    assert!(researcher["rho_lo"].as_f64().unwrap() > 0.0, "{researcher}");
    assert_eq!(researcher["claim"]["level"], "causal");
    assert_eq!(researcher["culpable"], false, "no duty, no breach");

    let file = with_agents(work.path(), "laundering.json", &agents);
    let rec = work.path().join("laundering");
    sealed(&file, &site, &rec, &[]);
    let (code, v, err) = trace_verdict(&rec, &duties_arg);
    assert_eq!(code, Some(1), "{err}\n{v}");
    assert_eq!(v["claim"], "temporal");
    let researcher = &v["verdict"]["principals"]["researcher"];
    assert_ne!(researcher["claim"]["level"], "causal", "{researcher}");
    assert_eq!(researcher["rho_lo"], 0.0, "{researcher}");
    assert_eq!(v["verdict"]["principals"]["payer"]["culpable"], true);
}

#[test]
fn a_collector_without_the_agents_keys_signs_as_a_conduit_and_says_so() {
    let work = tempfile::tempdir().unwrap();
    let site = deployment(work.path(), &["otel-collector"]);
    let rec = work.path().join("record");
    let v = sealed(
        &testdata("in_context.json"),
        &site,
        &rec,
        &["--collector", "otel-collector"],
    );
    let steps = v["steps"].as_array().unwrap();
    assert!(steps.iter().all(|s| s["signer"] == "otel-collector"
        && s["conduit"] == true
        && s["agent"] == "travel"));
    assert_eq!(verify(&rec).0, Some(0));
    let (code, v, err) = trace_verdict(&rec, &[]);
    assert_eq!(code, Some(0), "{err}\n{v}");
    assert_eq!(v["injection"]["signer"], "otel-collector");
    assert_eq!(v["injection"]["conduit"], true);
    assert_eq!(v["injection"]["agent"], "travel");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let work = tempfile::tempdir().unwrap();
    let site = deployment(work.path(), &["travel"]);
    let out = work.path().join("r");
    // An agent the deployment has no key for, and no collector.
    let other = with_agents(
        work.path(),
        "in_context.json",
        &[("00000000000000a0", "stranger")],
    );
    fails_with(seal(&other, &site, &out, &[]), "agent stranger");
    // Spans that name no agent.
    let none = with_agents(work.path(), "in_context.json", &[]);
    fails_with(seal(&none, &site, &out, &[]), "--unattributed");
    assert!(
        !out.exists(),
        "nothing is written before every step has a signer"
    );
    // ... which --unattributed assigns.
    sealed(&none, &site, &out, &["--unattributed", "travel"]);
    assert_eq!(verify(&out).0, Some(0));
    // Not OTLP; not a deployment; an unknown collector.
    let junk = work.path().join("junk.json");
    std::fs::write(&junk, b"{").unwrap();
    fails_with(
        seal(&junk, &site, &work.path().join("r2"), &[]),
        "not OTLP/JSON",
    );
    fails_with(
        seal(
            &testdata("in_context.json"),
            &work.path().join("nowhere"),
            &work.path().join("r3"),
            &[],
        ),
        "nowhere: -: cannot read",
    );
    fails_with(
        seal(
            &testdata("in_context.json"),
            &site,
            &work.path().join("r4"),
            &["--collector", "nobody"],
        ),
        "--collector nobody",
    );
    // trace verdict: unknown span, bad span id, not a record, bad duties.
    let verdict = |args: &[&str]| {
        audita()
            .args(["trace", "verdict"])
            .args(args)
            .output()
            .unwrap()
    };
    let rec = out.to_str().unwrap();
    fails_with(
        verdict(&[
            rec,
            "--action",
            "00000000000000f0",
            "--injection",
            INJECTION,
        ]),
        "action span 00000000000000f0 is not a certified step",
    );
    fails_with(
        verdict(&[rec, "--action", "xyz", "--injection", INJECTION]),
        "--action \"xyz\" is not a span id",
    );
    fails_with(
        verdict(&[
            work.path().to_str().unwrap(),
            "--action",
            ACTION,
            "--injection",
            INJECTION,
        ]),
        "",
    );
    let bad_duties = work.path().join("duties.json");
    std::fs::write(&bad_duties, b"{\"principals\": 3}").unwrap();
    fails_with(
        verdict(&[
            rec,
            "--action",
            ACTION,
            "--injection",
            INJECTION,
            "--duties",
            bad_duties.to_str().unwrap(),
        ]),
        "duties.json",
    );
}

struct Kill(Vec<std::process::Child>);

impl Drop for Kill {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `--bootstrap`: the client library publishes the signed steps to a real broker; the
/// deployment's own ingest and sealer stages seal them; the verdict on that record
/// is the one `--record` gives.
#[test]
fn published_through_kafka_ingest_the_pipeline_seals_a_record_that_judges_the_same() {
    use std::time::{Duration, Instant};
    let broker = audita_bus::testing::KafkaBroker::start().unwrap_or_else(|e| panic!("{e}"));
    let work = tempfile::tempdir().unwrap();
    let site = deployment(work.path(), &["travel"]);
    let config = site.join("audita.toml");
    let prefix = format!("{}.", audita_bus::testing::unique_name("traceseal"));
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace("prefix = \"\"", &format!("prefix = \"{prefix}\"")),
    )
    .unwrap();
    let record = work.path().join("record");
    let stage = |args: &[&str]| {
        audita()
            .args(args)
            .arg("--config")
            .arg(&config)
            .args(["--bootstrap", broker.bootstrap(), "--max-idle-ms", "30000"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let stages = Kill(vec![
        stage(&["stage", "ingest"]),
        stage(&["stage", "sealer", "--dir", record.to_str().unwrap()]),
    ]);
    let out = ok(audita()
        .args(["trace", "seal"])
        .arg(testdata("in_context.json"))
        .arg("--config")
        .arg(&site)
        .args(["--bootstrap", broker.bootstrap(), "--spool"])
        .arg(work.path().join("spool")));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["published"]["envelopes"], 5, "{v}");
    assert_eq!(v["published"]["receipts"], 5, "{v}");

    // Until the sealed record certifies all five steps.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (code, summary) = verify(&record);
        if code == Some(0) && summary["counts"]["certified"] == 5 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not sealed clean in 120 s: {summary}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    drop(stages);
    let (code, v, err) = trace_verdict(&record, &[]);
    assert_eq!(code, Some(0), "{err}\n{v}");
    assert_eq!(v["claim"], "causal");
    assert_eq!(v["injection"]["agent"], "travel");

    // The same messages sealed locally judge the same (keys are fresh per
    // deployment, so ids match only within one deployment).
    let local = work.path().join("local");
    sealed(&testdata("in_context.json"), &site, &local, &[]);
    let (_, w, _) = trace_verdict(&local, &[]);
    assert_eq!(w["claim"], v["claim"]);
    assert_eq!(w["witness"], v["witness"]);
    assert_eq!(w["injection"]["message"], v["injection"]["message"]);
}

/// The claim is re-checkable from sealed evidence: on every golden trace, the witness
/// `trace verdict` re-runs on the certified steps of the sealed record is exactly the
/// one `trace witness` computes on the export.
#[test]
fn the_witness_on_the_sealed_record_is_the_witness_on_the_export() {
    let work = tempfile::tempdir().unwrap();
    let site = deployment(work.path(), &["travel"]);
    let mut files: Vec<PathBuf> = std::fs::read_dir(testdata(""))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "{files:?}");
    for file in files {
        let name = file.file_stem().unwrap().to_string_lossy().into_owned();
        let direct = audita()
            .args(["trace", "witness"])
            .arg(&file)
            .args(["--action", ACTION, "--injection", INJECTION])
            .output()
            .unwrap();
        let direct: Value = serde_json::from_slice(&direct.stdout).unwrap();
        let rec = work.path().join(&name);
        // missing_parent nests a span under an orchestrator absent from the export.
        sealed(&file, &site, &rec, &["--unattributed", "travel"]);
        assert_eq!(verify(&rec).0, Some(0), "{name}");
        let (code, v, err) = trace_verdict(&rec, &[]);
        assert_eq!(v["witness"], direct, "{name}: {err}");
        assert_eq!(
            code,
            Some(if v["claim"] == "causal" { 0 } else { 1 }),
            "{name}"
        );
        if direct["level"] != "causal" {
            assert_ne!(
                v["claim"], "causal",
                "{name}: never causal through a non-witness edge"
            );
        }
    }
}
