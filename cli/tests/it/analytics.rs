//! What analysts get from a run, checked with independent tools: every verdict topic
//! record validates against `topics/schema/verdict-record.schema.json`; the incidents
//! table holds every incident (no-cause and abstained ones too); the README's DuckDB
//! and polars examples answer the same as a recomputation from the verdict records,
//! on a demo run and on an `audita-load load` run; `audita query` answers in every format.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const CELLS: &str = "24";
/// Slices larger than this become abstentions in the demo run (the unexpected
/// start-ups, whose windows hold the most telemetry: about 34-38 KB; the other
/// families' are 12-31 KB, varying by a KB or so with delivery order), so the run
/// has every kind of incident.
pub const MAX_SLICE_BYTES: &str = "32500";

fn audita() -> Command {
    Command::new(env!("CARGO_BIN_EXE_audita"))
}

/// One demo run shared by the tests of this file.
fn demo() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let out = audita()
            .args([
                "demo",
                "--quiet",
                "--cells",
                CELLS,
                "--max-slice-bytes",
                MAX_SLICE_BYTES,
            ])
            .args(["--record-origin", "2026-11-20T08:00:00Z", "--out"])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "demo failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        dir
    })
    .path()
}

/// The verdict topic records a sink journaled (its `record` field per line).
fn records(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("journal.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["record"].clone())
        .collect()
}

fn schema() -> jsonschema::Validator {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../topics/schema/verdict-record.schema.json");
    let schema: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    jsonschema::validator_for(&schema).expect("the schema is a valid JSON Schema")
}

fn assert_valid(v: &jsonschema::Validator, record: &Value) {
    let errors: Vec<String> = v
        .iter_errors(record)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{}: {errors:?}", record["incident"]);
}

#[test]
fn every_verdict_topic_record_of_an_embedded_run_validates_against_the_schema() {
    let v = schema();
    let recs = records(demo());
    assert_eq!(
        recs.len(),
        CELLS.parse::<usize>().unwrap(),
        "one record per incident"
    );
    let abstained = recs.iter().filter(|r| r.get("abstained").is_some()).count();
    let no_cause = recs
        .iter()
        .filter(|r| {
            r["verdict"]["principals"]
                .as_object()
                .is_some_and(|p| p.values().all(|f| f["rho_hi"] == 0.0))
        })
        .count();
    assert!(
        abstained > 0,
        "the run has slicer abstentions (--max-slice-bytes)"
    );
    assert!(no_cause > 0, "the run has no-cause controls");
    assert!(abstained < recs.len(), "and graded verdicts");
    for r in &recs {
        assert_valid(&v, r);
        if r.get("verdict").is_some() {
            assert!(r["record"]["checkpoint"]
                .as_str()
                .unwrap()
                .contains("insurer.example/keeper"));
            let catalogue = r
                .get("messages")
                .and_then(|m| m.as_object())
                .map_or(0, |m| m.len());
            let slice = r["verdict"]["slice"]["messages"].as_array().unwrap();
            assert!(
                catalogue >= slice.len(),
                "{}: every slice message is in the catalogue",
                r["incident"]
            );
            for id in slice {
                assert!(
                    r["messages"].get(id.as_str().unwrap()).is_some(),
                    "{id} decoded"
                );
            }
        } else {
            assert!(
                r["declaration"]["t_star_ms"].is_u64(),
                "an abstention carries its declaration"
            );
        }
    }
    // The schema rejects what the contract forbids.
    let mut both = recs[0].clone();
    both["abstained"] = "x".into();
    both["verdict"] = recs.iter().find(|r| r.get("verdict").is_some()).unwrap()["verdict"].clone();
    assert!(!v.is_valid(&both), "verdict and abstention at once");
    let mut bad = recs
        .iter()
        .find(|r| r.get("verdict").is_some())
        .unwrap()
        .clone();
    bad["verdict"]["principals"] = serde_json::json!({"p": {"rho_lo": 2.0}});
    assert!(!v.is_valid(&bad), "a finding without its fields");
}

fn origin_ms(dir: &Path) -> i64 {
    let v: Value =
        serde_json::from_slice(&std::fs::read(dir.join("verdicts/record-origin.json")).unwrap())
            .unwrap();
    v["unix_ms"].as_i64().unwrap()
}

fn date(ms: i64) -> String {
    chrono_free_date(ms)
}

/// UTC date of Unix ms without a date library (civil-from-days).
fn chrono_free_date(ms: i64) -> String {
    let z = ms.div_euclid(86_400_000) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// What the README's three questions must answer, recomputed from the records.
struct Expected {
    per_day: Vec<(String, String, u64)>,
    abstention: (u64, u64, f64),
    top: Vec<(String, u64, f64)>,
}

fn expected(dir: &Path) -> Expected {
    let origin = origin_ms(dir);
    let recs = records(dir);
    let mut per_day: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut abstained = 0;
    let mut findings = Vec::new();
    for r in &recs {
        let (t, pred) = match r.get("verdict") {
            Some(v) => (
                v["t_star_ms"].as_i64().unwrap(),
                v["outcome"].as_str().unwrap().to_string(),
            ),
            None => (
                r["declaration"]["t_star_ms"].as_i64().unwrap(),
                r["declaration"]["outcome"].as_str().unwrap().to_string(),
            ),
        };
        *per_day.entry((date(origin + t), pred)).or_insert(0) += 1;
        if r.get("verdict").is_none() || r["verdict"]["status"] == "abstained" {
            abstained += 1;
        }
        if let Some(ps) = r["verdict"]["principals"].as_object() {
            for (p, f) in ps {
                findings.push((
                    origin + t,
                    p.clone(),
                    f["culpable"].as_bool().unwrap(),
                    f["rho_lo"].as_f64().unwrap(),
                ));
            }
        }
    }
    let last = findings.iter().map(|f| f.0).max().unwrap_or(0);
    let mut by: BTreeMap<String, (u64, f64)> = BTreeMap::new();
    for (t, p, c, lo) in &findings {
        if *t >= last - 30 * 86_400_000 {
            let e = by.entry(p.clone()).or_default();
            e.0 += u64::from(*c);
            e.1 += lo;
        }
    }
    let mut top: Vec<(String, u64, f64)> = by
        .into_iter()
        .filter(|(_, (c, _))| *c > 0)
        .map(|(p, (c, s))| (p, c, (s * 1000.0).round() / 1000.0))
        .collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then(b.2.total_cmp(&a.2)).then(a.0.cmp(&b.0)));
    top.truncate(10);
    let n = recs.len() as u64;
    Expected {
        per_day: per_day.into_iter().map(|((d, p), c)| (d, p, c)).collect(),
        abstention: (
            n,
            abstained,
            ((abstained as f64 / n as f64) * 10_000.0).round() / 10_000.0,
        ),
        top,
    }
}

/// The README's python examples, by name.
fn readme_examples() -> BTreeMap<String, String> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"))
            .unwrap();
    let mut out = BTreeMap::new();
    for block in readme.split("```python\n").skip(1) {
        let code = block.split("```").next().unwrap();
        if let Some(name) = code
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# audita-example: "))
        {
            out.insert(name.trim().to_string(), code.to_string());
        }
    }
    out
}

fn run_example(code: &str, dir: &Path) -> Value {
    let script = format!(
        "{code}\nimport json as _j\nprint('AUDITA-RESULT ' + _j.dumps(result, default=str))\n"
    );
    let out = Command::new("python3")
        .arg("-c")
        .arg(&script)
        .env("AUDITA_OUT", dir)
        .output()
        .expect("python3 must be installed (.ci/run installs it with duckdb and polars)");
    assert!(
        out.status.success(),
        "{code}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("AUDITA-RESULT "))
        .unwrap();
    serde_json::from_str(line).unwrap()
}

fn check_readme_examples(dir: &Path) {
    let want = expected(dir);
    let examples = readme_examples();
    for engine in ["duckdb", "polars"] {
        let got = run_example(&examples[&format!("{engine}-incidents-per-day")], dir);
        let got: Vec<(String, String, u64)> = serde_json::from_value(got).unwrap();
        assert_eq!(
            got, want.per_day,
            "{engine}: incidents per day by predicate"
        );
        let got = run_example(&examples[&format!("{engine}-abstention-rate")], dir);
        let got: Vec<(u64, u64, f64)> = serde_json::from_value(got).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(
            (got[0].0, got[0].1),
            (want.abstention.0, want.abstention.1),
            "{engine}: abstentions"
        );
        assert!(
            (got[0].2 - want.abstention.2).abs() < 1e-9,
            "{engine}: abstention rate"
        );
        let got = run_example(&examples[&format!("{engine}-top-principals")], dir);
        let got: Vec<(String, u64, f64)> = serde_json::from_value(got).unwrap();
        assert_eq!(
            got.len(),
            want.top.len(),
            "{engine}: top principals {got:?} vs {:?}",
            want.top
        );
        for (g, w) in got.iter().zip(&want.top) {
            assert_eq!((&g.0, g.1), (&w.0, w.1), "{engine}: top principals");
            assert!((g.2 - w.2).abs() < 1e-9, "{engine}: ρ_lo sum of {}", g.0);
        }
    }
}

#[test]
fn the_readme_duckdb_and_polars_examples_answer_on_a_demo_run() {
    let dir = demo();
    let want = expected(dir);
    assert!(
        want.per_day.len() > 1,
        "the demo spans several days: {:?}",
        want.per_day
    );
    assert!(!want.top.is_empty());
    check_readme_examples(dir);
}

#[test]
fn the_incidents_table_holds_no_cause_and_abstained_incidents() {
    let dir = demo();
    let out = audita()
        .args(["query", "--format", "json", "--dir"])
        .arg(dir)
        .arg("SELECT status, culpable = 0 AS nobody_culpable, count(*) AS n FROM incidents GROUP BY 1, 2 ORDER BY 1, 2")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let n = |status: &str, none: bool| {
        rows.iter()
            .find(|r| r["status"] == status && r["nobody_culpable"] == none)
            .map_or(0, |r| r["n"].as_u64().unwrap())
    };
    let recs = records(dir);
    let abstained = recs.iter().filter(|r| r.get("abstained").is_some()).count() as u64;
    assert_eq!(n("abstained", true), abstained, "{rows:?}");
    assert!(
        n("graded", true) > 0,
        "no-cause controls (nobody culpable) have incident rows: {rows:?}"
    );
    assert_eq!(
        n("graded", true) + n("graded", false) + n("abstained", true) + n("abstained", false),
        recs.len() as u64
    );
}

#[test]
fn audita_query_prints_table_csv_and_json_and_refuses_writes() {
    let dir = demo();
    let q = |args: &[&str]| {
        audita()
            .arg("query")
            .arg("--dir")
            .arg(dir)
            .args(args)
            .output()
            .unwrap()
    };
    let sql = "SELECT incident, t_star, date FROM incidents WHERE status = 'graded' ORDER BY t_star LIMIT 2";
    let table = q(&[sql]);
    assert!(
        table.status.success(),
        "{}",
        String::from_utf8_lossy(&table.stderr)
    );
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("| incident") && text.contains("2026-11-20"),
        "{text}"
    );
    let csv = q(&["--format", "csv", sql]);
    let text = String::from_utf8_lossy(&csv.stdout).to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "incident,t_star,date");
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[1].contains("2026-11-20T08:"),
        "wall-clock t* from the declared origin: {text}"
    );
    let json = q(&["--format", "json", "--limit", "1", sql]);
    let v: Vec<Value> = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v.len(), 1);
    assert!(v[0]["incident"].is_string());
    for bad in [
        "COPY incidents TO '/tmp/x.csv'",
        "CREATE TABLE x AS SELECT 1",
        "SELEKT 1",
    ] {
        let out = q(&[bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "one-line error: {err}");
    }
    // An unknown column: DataFusion's message once, on one line.
    let out = q(&["SELECT no_such_column FROM incidents"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "one-line error: {err}");
    assert_eq!(err.matches("no_such_column").count(), 1, "said once: {err}");
    let missing = audita()
        .args(["query", "--dir", "/nonexistent", "SELECT 1"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("holds no verdict tables"));
}

#[test]
fn a_demo_without_an_origin_dates_no_incident_in_the_future() {
    let dir = tempfile::tempdir().unwrap();
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let out = audita()
        .args(["demo", "--quiet", "--cells", "12", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let origin = origin_ms(dir.path());
    let recs = records(dir.path());
    assert!(!recs.is_empty());
    let t_star = |r: &Value| {
        r["verdict"]["t_star_ms"]
            .as_i64()
            .or(r["declaration"]["t_star_ms"].as_i64())
            .unwrap()
    };
    let last = recs.iter().map(t_star).max().unwrap();
    // Twelve cells span 110,000 s of record time: with the origin at the start of
    // the run, the last incident was dated more than half a day ahead.
    assert!(last > 50_000_000, "the cells lie apart: {last}");
    assert!(
        origin + last <= after,
        "t* {} after the run ended {after}",
        origin + last
    );
    // The record ends about now (within a few cells), not long ago.
    assert!(
        origin + last >= before - 30_000_000,
        "t* {} long before {before}",
        origin + last
    );
}

#[test]
fn the_readme_examples_answer_on_an_audita_load_run() {
    let broker = audita_bus::testing::KafkaBroker::start().unwrap_or_else(|e| panic!("{e}"));
    let out: PathBuf = tempfile::tempdir().unwrap().keep();
    let run = crate::audita_load()
        .args([
            "load",
            "--quiet",
            "--robots",
            "20",
            "--rate",
            "2",
            "--incident-rate",
            "0.5",
            "--duration",
            "30",
        ])
        .args([
            "--drain-timeout",
            "120",
            "--bootstrap",
            broker.bootstrap(),
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(!records(&out).is_empty(), "the load run produced verdicts");
    // The report accounts the CPU of every stage, the broker, the generator and the
    // whole machine while the load was offered.
    let table = String::from_utf8_lossy(&run.stdout);
    let cpu = table
        .lines()
        .find(|l| l.starts_with("Cores busy while the load was offered"))
        .unwrap_or_else(|| panic!("no CPU line in the report:\n{table}"));
    for part in [
        " ingest ",
        " sealer ",
        " slicer ",
        " generator and monitor ",
        " cores**.",
    ] {
        assert!(cpu.contains(part), "{part} missing: {cpu}");
    }
    check_readme_examples(&out);
    // The load's record time is LIVE_ORIGIN_MS at its first send: t* is today's.
    let origin = origin_ms(&out);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    for r in records(&out) {
        let t = r["declaration"]["t_star_ms"].as_i64().unwrap();
        assert!(
            (origin + t - now).abs() < 600_000,
            "wall-clock t* of a load run within minutes of now"
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// The commands a report prints reproduce its verdict: `audita verify` accepts the
/// checkpoint saved beside the report, `audita verdict` on the declaration saved
/// beside it gives the same findings.
#[test]
fn the_commands_a_report_prints_reproduce_its_verdict() {
    let dir = demo();
    let recs = records(dir);
    let graded: Vec<&Value> = recs
        .iter()
        .filter(|r| {
            r.get("verdict").is_some()
                && !r["verdict"]["principals"].as_object().unwrap().is_empty()
        })
        .take(4)
        .collect();
    assert!(!graded.is_empty());
    for r in graded {
        let incident = r["incident"].as_str().unwrap();
        let html = std::fs::read_to_string(
            dir.join("reports")
                .join(audita_sinks::report::file_name(incident)),
        )
        .unwrap();
        let cmd = |prefix: &str| -> Vec<String> {
            let start = html
                .find(prefix)
                .unwrap_or_else(|| panic!("{incident}: no {prefix:?} command"));
            let line = html[start..].split(['\n', '<']).next().unwrap();
            line.split_whitespace()
                .skip(1)
                .map(|w| {
                    if w == "RECORD_DIR" {
                        "record".to_string()
                    } else {
                        w.to_string()
                    }
                })
                .collect()
        };
        let verify = audita()
            .current_dir(dir)
            .args(cmd("audita verify "))
            .output()
            .unwrap();
        assert_eq!(
            verify.status.code(),
            Some(0),
            "{incident}: {}",
            String::from_utf8_lossy(&verify.stdout)
        );
        let verdict = audita()
            .current_dir(dir)
            .args(cmd("audita verdict "))
            .output()
            .unwrap();
        assert!(
            verdict.status.success(),
            "{incident}: {}",
            String::from_utf8_lossy(&verdict.stderr)
        );
        let offline: Value = serde_json::from_slice(&verdict.stdout).unwrap();
        let finding = |v: &Value| -> Vec<(String, Value, Value, Value, Value)> {
            v["principals"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(p, f)| {
                    (
                        p.clone(),
                        f["rho_lo"].clone(),
                        f["rho_hi"].clone(),
                        f["culpable"].clone(),
                        f["status"].clone(),
                    )
                })
                .collect()
        };
        assert_eq!(
            finding(&offline),
            finding(&r["verdict"]),
            "{incident}: offline findings"
        );
    }
}
