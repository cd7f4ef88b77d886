//! Verdict Parquet files read back by an independent reader (pyarrow, installed by
//! `.ci/run`) must show the documented schema and the exact values written.

use audita_sinks::parquet::{ParquetSink, Rotation};
use audita_sinks::VerdictRow;
use std::process::Command;
use std::time::Duration;

fn row(i: u64) -> VerdictRow {
    VerdictRow {
        incident: format!("inc-{}", i / 3),
        principal: format!("planner-{}", i % 3),
        outcome: "separation<0.5m".into(),
        t_star_ms: 1_000 + i,
        severity_j: 0.5 * 400.0 * (i as f64 * 0.1).powi(2),
        standard: "specification".into(),
        duties: if i % 2 == 0 {
            vec!["halt_authority:zone-A".into()]
        } else {
            vec![]
        },
        breach_specification: i % 2 == 0,
        breach_reasonable: i % 4 == 0,
        rho_lo: 1.0 / (1 + i % 3) as f64,
        rho_hi: 1.0,
        culpable: i % 2 == 0,
        claim: "causal".into(),
        flags: vec!["conduit".into(), "evidence_missing".into()][..(i % 3) as usize].to_vec(),
        evidence: vec![format!("{:064x}", i)],
        record_root: "ab".repeat(32),
    }
}

#[test]
fn pyarrow_reads_the_documented_schema_and_values() {
    let dir = tempfile::tempdir().unwrap();
    let mut sink = ParquetSink::new(
        dir.path(),
        Rotation {
            max_rows: 10,
            max_age: Duration::from_secs(3600),
        },
    )
    .unwrap();
    let rows: Vec<VerdictRow> = (0..25).map(row).collect();
    for chunk in rows.chunks(5) {
        sink.write(chunk).unwrap();
    }
    let files = sink.finish().unwrap();
    assert_eq!(files.len(), 3, "25 rows rotated every 10 rows make 3 files");
    let script = r#"
import json, sys, pyarrow.parquet as pq
out = {"schema": None, "rows": []}
for path in sys.argv[1:]:
    t = pq.read_table(path)
    out["schema"] = [(f.name, str(f.type)) for f in t.schema]
    out["rows"].extend(t.to_pylist())
print(json.dumps(out))
"#;
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(&files)
        .output()
        .expect("python3 must be installed (.ci/run installs it with pyarrow)");
    assert!(
        out.status.success(),
        "pyarrow failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let schema: Vec<(String, String)> = serde_json::from_value(v["schema"].clone()).unwrap();
    let want_schema: Vec<(&str, &str)> = vec![
        ("incident", "string"),
        ("principal", "string"),
        ("outcome", "string"),
        ("t_star_ms", "uint64"),
        ("severity_j", "double"),
        ("standard", "string"),
        ("duties", "list<item: string>"),
        ("breach_specification", "bool"),
        ("breach_reasonable", "bool"),
        ("rho_lo", "double"),
        ("rho_hi", "double"),
        ("culpable", "bool"),
        ("claim", "string"),
        ("flags", "list<item: string>"),
        ("evidence", "list<item: string>"),
        ("record_root", "string"),
    ];
    assert_eq!(
        schema,
        want_schema
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect::<Vec<_>>()
    );
    let back: Vec<VerdictRow> = serde_json::from_value(v["rows"].clone()).unwrap();
    assert_eq!(back.len(), rows.len());
    for (i, (b, r)) in back.iter().zip(&rows).enumerate() {
        assert_eq!(b, r, "row {i} read by pyarrow differs from the row written");
    }
}

#[test]
fn a_restarted_sink_continues_numbering_and_never_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = ParquetSink::new(dir.path(), Rotation::default()).unwrap();
    a.write(&[row(1)]).unwrap();
    let first = a.finish().unwrap();
    let mut b = ParquetSink::new(dir.path(), Rotation::default()).unwrap();
    b.write(&[row(2)]).unwrap();
    let second = b.finish().unwrap();
    assert_ne!(first, second);
    assert!(first[0].exists() && second[0].exists());
}

#[test]
fn metrics_endpoint_serves_pipeline_metrics() {
    use std::io::{Read, Write};
    let m = audita_sinks::metrics::Metrics::new();
    m.ingest_envelopes
        .with_label_values(&["accepted"])
        .inc_by(3);
    let addr = m.serve("127.0.0.1:0".parse().unwrap()).unwrap();
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    assert!(
        body.contains("audita_ingest_envelopes_total{result=\"accepted\"} 3"),
        "{body}"
    );
    assert!(body.contains("audita_engine_judge_seconds_bucket"));
    assert!(body.contains("audita_slicer_slice_wait_seconds_bucket"));
}
