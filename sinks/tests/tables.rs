//! The analytics tables read back by an independent reader (pyarrow, installed by
//! `.ci/run`): documented schema, wall-clock timestamps, Hive partitions, file
//! metadata, exactly-once across restarts, compaction with crash recovery, and the
//! additive schema-evolution rule.

mod common;

use audita_sinks::tables::{
    findings_schema, incidents_in, incidents_schema, RecordOrigin, Rotation, Tables,
};
use common::{abstention, verdict};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const DAY_MS: u64 = 86_400_000;

fn origin() -> RecordOrigin {
    RecordOrigin::parse("2026-03-01T22:00:00Z").unwrap()
}

fn python(script: &str, args: &[&Path]) -> Value {
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .expect("python3 must be installed (.ci/run installs it with pyarrow)");
    assert!(
        out.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

const READ: &str = r#"
import json, sys, glob, os, pyarrow.parquet as pq, pyarrow.dataset as ds
root = sys.argv[1]
out = {}
for table in ("incidents", "findings"):
    files = sorted(glob.glob(os.path.join(root, table, "date=*", "*.parquet")))
    d = ds.dataset(os.path.join(root, table), format="parquet", partitioning="hive")
    t = d.to_table()
    meta = pq.read_metadata(files[0]).metadata if files else {}
    out[table] = {
        "files": [os.path.relpath(f, root) for f in files],
        "schema": [(f.name, str(f.type)) for f in t.schema],
        "rows": json.loads(json.dumps(t.to_pylist(), default=str)),
        "meta": {k.decode(): v.decode() for k, v in meta.items() if k.startswith(b"audita.")},
    }
print(json.dumps(out))
"#;

fn write_all(dir: &Path, rotation: Rotation) -> Vec<PathBuf> {
    let mut t = Tables::open(dir, origin(), rotation).unwrap();
    // Day 0 22:00 + 1 h → 2026-03-01 23:00; + 3 h → 2026-03-02 01:00.
    t.write(
        &verdict(
            "inc-a",
            3_600_000,
            &[
                ("p1", "culpable", 0.5, 1.0),
                ("p2", "involved_cleared", 0.5, 0.5),
                ("p3", "unresolved", 0.0, 1.0),
            ],
        ),
        1_000,
    )
    .unwrap();
    t.write(&verdict("inc-nocause", 3 * 3_600_000, &[]), 2_000)
        .unwrap();
    t.write(&abstention("inc-abst", Some(DAY_MS + 3_600_000)), 3_000)
        .unwrap();
    t.write(&abstention("inc-unknown", None), 1_772_496_000_000)
        .unwrap(); // 2026-03-03T00:00Z
    t.finish().unwrap()
}

#[test]
fn pyarrow_reads_both_tables_with_timestamps_partitions_and_metadata() {
    let dir = tempfile::tempdir().unwrap();
    write_all(dir.path(), Rotation::default());
    let v = python(READ, &[dir.path()]);
    let inc = &v["incidents"];
    assert_eq!(
        inc["files"],
        serde_json::json!([
            "incidents/date=2026-03-01/part-000000.parquet",
            "incidents/date=2026-03-02/part-000001.parquet",
            "incidents/date=2026-03-03/part-000002.parquet",
        ]),
        "one file per UTC date of t* (an abstention without t* goes by its verdict time)"
    );
    let schema: Vec<(String, String)> = serde_json::from_value(inc["schema"].clone()).unwrap();
    let names: Vec<&str> = schema.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names.last(),
        Some(&"date"),
        "date is the hive partition column"
    );
    let ty = |n: &str| schema.iter().find(|(x, _)| x == n).unwrap().1.clone();
    assert_eq!(ty("t_star"), "timestamp[ms, tz=UTC]");
    assert_eq!(ty("verdict_time"), "timestamp[ms, tz=UTC]");
    assert_eq!(ty("culpable_principals"), "list<item: string>");
    let rows = inc["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "no-cause and abstained incidents have a row");
    let row = |name: &str| rows.iter().find(|r| r["incident"] == name).unwrap();
    assert_eq!(row("inc-a")["t_star"], "2026-03-01 23:00:00+00:00");
    assert_eq!(row("inc-a")["t_star_ms"], 3_600_000);
    assert_eq!(row("inc-a")["status"], "graded");
    assert_eq!(row("inc-a")["principals"], 3);
    assert_eq!(row("inc-a")["culpable"], 1);
    assert_eq!(row("inc-a")["unresolved"], 1, "p3's finding is unresolved");
    assert_eq!(row("inc-nocause")["unresolved"], 0);
    assert_eq!(
        row("inc-a")["culpable_principals"],
        serde_json::json!(["p1"])
    );
    assert_eq!(row("inc-a")["verdict_time"], "1970-01-01 00:00:01+00:00");
    assert_eq!(row("inc-nocause")["principals"], 0);
    assert_eq!(row("inc-nocause")["t_star"], "2026-03-02 01:00:00+00:00");
    assert_eq!(row("inc-abst")["status"], "abstained");
    assert!(row("inc-abst")["abstain_reason"]
        .as_str()
        .unwrap()
        .contains("delta"));
    assert_eq!(row("inc-abst")["t_star"], "2026-03-02 23:00:00+00:00");
    assert_eq!(row("inc-unknown")["t_star"], Value::Null);
    assert_eq!(row("inc-unknown")["predicate"], Value::Null);
    let meta = &inc["meta"];
    assert_eq!(meta["audita.schema"], "audita.incidents/v1");
    assert_eq!(meta["audita.schema_version"], "3");
    assert_eq!(meta["audita.record_origin"], "2026-03-01T22:00:00.000Z");
    let f = &v["findings"];
    let frows = f["rows"].as_array().unwrap();
    assert_eq!(frows.len(), 3, "one row per incident × principal");
    let p1 = frows.iter().find(|r| r["principal"] == "p1").unwrap();
    assert_eq!(p1["t_star"], "2026-03-01 23:00:00+00:00");
    assert_eq!(p1["status"], "culpable");
    assert_eq!(p1["violated_duties"], serde_json::json!(["env-p1"]));
    assert_eq!(
        p1["evidence"][0].as_str().unwrap().len(),
        "p1:".len() + 64,
        "evidence ids in full"
    );
    assert_eq!(f["meta"]["audita.schema"], "audita.findings/v1");
}

#[test]
fn a_reopened_table_writes_no_incident_twice() {
    let dir = tempfile::tempdir().unwrap();
    write_all(dir.path(), Rotation::default());
    // The same records again (a journal replay after a crash): nothing new.
    let mut t = Tables::open(dir.path(), origin(), Rotation::default()).unwrap();
    assert_eq!(
        t.write(
            &verdict("inc-a", 3_600_000, &[("p1", "culpable", 0.5, 1.0)]),
            9
        )
        .unwrap(),
        0
    );
    assert_eq!(t.write(&abstention("inc-abst", None), 9).unwrap(), 0);
    assert_eq!(
        t.write(&verdict("inc-b", 5, &[("p3", "exonerated", 0.0, 0.0)]), 9)
            .unwrap(),
        2
    );
    t.finish().unwrap();
    let inc = incidents_in(&dir.path().join("incidents")).unwrap();
    assert!(inc.values().all(|n| *n == 1), "{inc:?}");
    assert_eq!(inc.len(), 5);
    let fin = incidents_in(&dir.path().join("findings")).unwrap();
    assert_eq!(fin.get("inc-a"), Some(&3));
    assert_eq!(fin.get("inc-b"), Some(&1));
}

#[test]
fn files_left_open_by_a_crash_are_never_read_and_their_rows_are_written_again() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut t = Tables::open(dir.path(), origin(), Rotation::default()).unwrap();
        t.write(
            &verdict("inc-a", 3_600_000, &[("p1", "culpable", 0.5, 1.0)]),
            1,
        )
        .unwrap();
        // Dropped without close: a crash. The temporary files stay behind.
        #[allow(clippy::mem_forget)] // the point: no destructor runs, as in a crash
        std::mem::forget(t);
    }
    let hidden: Vec<_> = walk(dir.path())
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(!hidden.is_empty(), "a crash leaves hidden temporary files");
    assert!(incidents_in(&dir.path().join("incidents"))
        .unwrap()
        .is_empty());
    let mut t = Tables::open(dir.path(), origin(), Rotation::default()).unwrap();
    assert_eq!(
        t.write(
            &verdict("inc-a", 3_600_000, &[("p1", "culpable", 0.5, 1.0)]),
            1
        )
        .unwrap(),
        2
    );
    t.finish().unwrap();
    assert!(walk(dir.path())
        .iter()
        .all(|p| !p.to_string_lossy().ends_with(".tmp")));
    assert_eq!(
        incidents_in(&dir.path().join("incidents")).unwrap().len(),
        1
    );
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn parquet_count(dir: &Path) -> usize {
    walk(dir)
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .count()
}

#[test]
fn small_files_of_a_partition_are_compacted_into_one_with_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let rotation = Rotation {
        max_rows: 1,
        max_age: Duration::from_secs(3600),
        max_quiet: Duration::from_secs(3600),
        compact_files: 4,
    };
    let mut t = Tables::open(
        dir.path(),
        origin(),
        Rotation {
            compact_files: 0,
            ..rotation
        },
    )
    .unwrap();
    for i in 0..6 {
        t.write(
            &verdict(
                &format!("inc-{i}"),
                1000 + i,
                &[("p", "culpable", 1.0, 1.0)],
            ),
            1,
        )
        .unwrap();
    }
    t.finish().unwrap();
    assert_eq!(
        parquet_count(&dir.path().join("incidents")),
        6,
        "one file per row before compaction"
    );
    let mut t = Tables::open(dir.path(), origin(), rotation).unwrap();
    assert_eq!(t.compact().unwrap(), 2, "both tables' partition merged");
    t.finish().unwrap();
    assert_eq!(parquet_count(&dir.path().join("incidents")), 1);
    assert_eq!(parquet_count(&dir.path().join("findings")), 1);
    let inc = incidents_in(&dir.path().join("incidents")).unwrap();
    assert_eq!(inc.len(), 6);
    assert!(inc.values().all(|n| *n == 1));
    let v = python(READ, &[dir.path()]);
    assert_eq!(v["incidents"]["rows"].as_array().unwrap().len(), 6);
    assert_eq!(
        v["incidents"]["meta"]["audita.schema"],
        "audita.incidents/v1"
    );
}

#[test]
fn an_interrupted_compaction_is_finished_or_dropped_on_open_never_duplicated() {
    for output_renamed in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let no_compact = Rotation {
            max_rows: 1,
            max_age: Duration::from_secs(3600),
            max_quiet: Duration::from_secs(3600),
            compact_files: 0,
        };
        let mut t = Tables::open(dir.path(), origin(), no_compact).unwrap();
        for i in 0..3 {
            t.write(&verdict(&format!("inc-{i}"), 1000 + i, &[]), 1)
                .unwrap();
        }
        t.finish().unwrap();
        // Simulate the crash: copy the tables, compact the copy, then put back the
        // inputs (and the intent) as they were between the steps.
        let part = dir.path().join("incidents/date=2026-03-01");
        let inputs: Vec<PathBuf> = walk(&part);
        let saved: Vec<(PathBuf, Vec<u8>)> = inputs
            .iter()
            .map(|p| (p.clone(), std::fs::read(p).unwrap()))
            .collect();
        let mut t = Tables::open(
            dir.path(),
            origin(),
            Rotation {
                compact_files: 2,
                ..no_compact
            },
        )
        .unwrap();
        t.compact().unwrap();
        t.finish().unwrap();
        let merged: Vec<PathBuf> = walk(&part);
        assert_eq!(merged.len(), 1);
        for (p, b) in &saved {
            std::fs::write(p, b).unwrap();
        }
        let name = |p: &Path| p.file_name().unwrap().to_string_lossy().to_string();
        let intent = serde_json::json!({
            "partition": "date=2026-03-01",
            "inputs": saved.iter().map(|(p, _)| name(p)).collect::<Vec<_>>(),
            "output": name(&merged[0]),
        });
        std::fs::write(
            dir.path().join("incidents/_compaction-000099.json"),
            intent.to_string(),
        )
        .unwrap();
        if !output_renamed {
            // Crash before the rename: the merged file is still the temporary one.
            let tmp = part.join(format!(".{}.tmp", name(&merged[0])));
            std::fs::rename(&merged[0], &tmp).unwrap();
        }
        let t = Tables::open(dir.path(), origin(), no_compact).unwrap();
        t.finish().unwrap();
        let inc = incidents_in(&dir.path().join("incidents")).unwrap();
        assert_eq!(inc.len(), 3, "renamed={output_renamed}");
        assert!(
            inc.values().all(|n| *n == 1),
            "renamed={output_renamed}: {inc:?}"
        );
        assert!(!dir
            .path()
            .join("incidents/_compaction-000099.json")
            .exists());
        assert_eq!(walk(&part).len(), if output_renamed { 1 } else { 3 });
    }
}

#[test]
fn a_declared_origin_that_contradicts_the_kept_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let a = RecordOrigin::resolve(dir.path(), Some(origin())).unwrap();
    assert_eq!(a, origin());
    assert_eq!(
        RecordOrigin::resolve(dir.path(), None).unwrap(),
        origin(),
        "kept across restarts"
    );
    let other = RecordOrigin::parse("2027-01-01T00:00:00Z").unwrap();
    let e = RecordOrigin::resolve(dir.path(), Some(other))
        .unwrap_err()
        .to_string();
    assert!(e.contains("two clocks"), "{e}");
    assert!(RecordOrigin::parse("yesterday").is_err());
}

/// The published columns (`sinks/schema/<table>.columns.json`) must stay a prefix of
/// the current schema: columns are only appended. `AUDITA_BLESS=1` rewrites the files
/// after an additive change (and only then).
#[test]
fn schema_evolution_is_additive_only() {
    for (file, schema) in [
        ("incidents.columns.json", incidents_schema()),
        ("findings.columns.json", findings_schema()),
    ] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("schema")
            .join(file);
        let current: Vec<Value> = schema
            .fields()
            .iter()
            .map(|f| serde_json::json!({"name": f.name(), "type": f.data_type().to_string(), "nullable": f.is_nullable()}))
            .collect();
        let published: Vec<Value> = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        for (i, p) in published.iter().enumerate() {
            assert_eq!(
                current.get(i),
                Some(p),
                "{file}: published column {i} was removed, renamed, moved or retyped — only appending is allowed (a new schema id otherwise)"
            );
        }
        if current.len() != published.len() {
            assert!(
                std::env::var("AUDITA_BLESS").is_ok(),
                "{file}: {} columns appended; bump SCHEMA_VERSION, document them in TABLES.md and rerun with AUDITA_BLESS=1",
                current.len() - published.len()
            );
            std::fs::write(&path, serde_json::to_vec_pretty(&current).unwrap()).unwrap();
        }
    }
}

#[test]
fn a_verdict_reaches_the_tables_once_the_stream_is_quiet_not_at_the_next_rotation() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = Tables::open(
        dir.path(),
        origin(),
        Rotation {
            max_rows: 100_000,
            max_age: Duration::from_secs(3600),
            max_quiet: Duration::from_millis(500),
            compact_files: 0,
        },
    )
    .unwrap();
    t.write(&verdict("inc-0", 1000, &[("p", "culpable", 1.0, 1.0)]), 1)
        .unwrap();
    t.tick().unwrap();
    assert_eq!(
        parquet_count(&dir.path().join("incidents")),
        0,
        "a file stays open while rows may follow"
    );
    std::thread::sleep(Duration::from_millis(600));
    t.tick().unwrap();
    assert_eq!(parquet_count(&dir.path().join("incidents")), 1);
    assert_eq!(parquet_count(&dir.path().join("findings")), 1);
    assert_eq!(
        incidents_in(&dir.path().join("incidents")).unwrap().len(),
        1
    );
    // The next row opens a new file; closing without a tick still writes it.
    t.write(&verdict("inc-1", 1001, &[]), 1).unwrap();
    t.finish().unwrap();
    assert_eq!(
        incidents_in(&dir.path().join("incidents")).unwrap().len(),
        2
    );
}
