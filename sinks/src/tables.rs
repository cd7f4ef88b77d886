//! The analytics tables: two Parquet tables an analyst queries with any engine
//! (DuckDB, polars, pyarrow, `audita query`), documented column by column in
//! `sinks/TABLES.md`.
//!
//! - `incidents` (`audita.incidents/v1`): one row per incident the sink took —
//!   graded, no-cause and abstained alike.
//! - `findings` (`audita.findings/v1`): one row per incident × principal.
//!
//! Design constraints:
//! - **Layout.** `<dir>/<table>/date=YYYY-MM-DD/part-<seq:06>.parquet`, Hive-style:
//!   `date` is the UTC date of `t_star` (of `verdict_time` when an abstention names
//!   no `t*`); it lives in the path only, so engines add it as a partition column.
//! - **Wall-clock time.** Record time is milliseconds since the record's own origin
//!   (the facility world starts at 0). `t_star = record_origin + t_star_ms`, where
//!   [`RecordOrigin`] is the deployment's declared wall-clock instant of record time 0,
//!   kept in `<dir>/record-origin.json` and in every file's metadata; `verdict_time` is
//!   the wall-clock instant the sink first took the record (journaled, so a restart
//!   keeps it).
//! - **Atomic commits.** A file is written under a hidden temporary name (`.part-….tmp`,
//!   which no `*.parquet` glob matches), fsync'd, renamed into place and its
//!   directory fsync'd: a reader sees a whole file or none. The open files of both
//!   tables close together, findings before incidents.
//! - **Exactly once.** Each table knows the incidents its completed files hold and
//!   writes an incident's rows only if they are not there, so replaying the journal
//!   after a crash at any point writes every row once.
//! - **Compaction.** A partition with at least [`Rotation::compact_files`] completed
//!   files smaller than [`SMALL_FILE_BYTES`] has those merged into one: the merged file is written and fsync'd under a temporary
//!   name, an intent (`_compaction-<seq>.json`: inputs and output) is fsync'd, the
//!   merged file is renamed into place, the inputs are removed, then the intent. On
//!   open, an intent whose output exists finishes (inputs removed); one whose output
//!   does not is dropped (inputs intact). A query racing a compaction can, for the
//!   instant between the rename and the removals, see a partition's rows twice
//!   (`incident` is the incidents table's key).
//! - **Schema evolution.** Columns are only ever added, at the end; the schema id and
//!   version (`audita.schema`, `audita.schema_version`) and the record origin are in
//!   every file's key-value metadata. `sinks/schema/*.columns.json` hold the published
//!   columns; a test fails if a published column is removed, renamed, moved or retyped.

use crate::parquet::SinkError;
use arrow::array::{
    ArrayRef, BooleanArray, Float64Array, ListBuilder, StringArray, StringBuilder,
    TimestampMillisecondArray, UInt32Array, UInt64Array,
};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use arrow::record_batch::RecordBatch;
use audita_topics::{VerdictRecord, VerdictView};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Schema id of the incidents table.
pub const INCIDENTS_SCHEMA: &str = "audita.incidents/v1";
/// Schema id of the findings table.
pub const FINDINGS_SCHEMA: &str = "audita.findings/v1";
/// Additive version within the schema id (bumped when columns are appended).
pub const SCHEMA_VERSION: u32 = 3;
/// Files at least this large are not compacted again.
pub const SMALL_FILE_BYTES: u64 = 64 << 20;
/// File holding the record origin in a tables directory.
pub const ORIGIN_FILE: &str = "record-origin.json";

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SinkError + '_ {
    move |source| SinkError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn enc(e: impl std::fmt::Display) -> SinkError {
    SinkError::Encode(e.to_string())
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// RFC 3339 UTC text of a Unix-ms instant (`2026-12-01T09:13:01.123Z`).
pub fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_else(|| format!("{ms} ms since 1970-01-01T00:00:00Z"))
}

/// `YYYY-MM-DD` (UTC) of a Unix-ms instant.
pub fn utc_date(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d").to_string())
        .unwrap_or_else(|| "1970-01-01".into())
}

/// The wall-clock instant (UTC) of record time 0: `wall = origin + record_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RecordOrigin {
    /// Unix milliseconds of record time 0.
    pub unix_ms: i64,
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct OriginFile {
    record_origin: String,
    unix_ms: i64,
    declared: bool,
}

impl RecordOrigin {
    /// Parses RFC 3339 (`2026-12-01T00:00:00Z`) or `now`.
    pub fn parse(text: &str) -> Result<RecordOrigin, String> {
        if text == "now" {
            return Ok(RecordOrigin { unix_ms: now_ms() });
        }
        chrono::DateTime::parse_from_rfc3339(text)
            .map(|t| RecordOrigin {
                unix_ms: t.timestamp_millis(),
            })
            .map_err(|e| format!("record origin {text:?} is not RFC 3339 ({e})"))
    }

    /// Wall-clock Unix ms of a record time.
    pub fn wall(&self, record_ms: u64) -> i64 {
        self.unix_ms
            .saturating_add(i64::try_from(record_ms).unwrap_or(i64::MAX))
    }

    /// RFC 3339 text.
    pub fn text(&self) -> String {
        rfc3339(self.unix_ms)
    }

    /// The origin of the tables in `dir`: the one declared (which must match one
    /// already kept there), else the kept one, else now — kept in
    /// `dir/record-origin.json` for restarts.
    pub fn resolve(dir: &Path, declared: Option<RecordOrigin>) -> Result<RecordOrigin, SinkError> {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let path = dir.join(ORIGIN_FILE);
        let kept = match std::fs::read(&path) {
            Ok(b) => Some(
                serde_json::from_slice::<OriginFile>(&b)
                    .map_err(|e| SinkError::Encode(format!("{}: {e}", path.display())))?,
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(source) => return Err(SinkError::Io { path, source }),
        };
        match (kept, declared) {
            (Some(k), Some(d)) if k.unix_ms != d.unix_ms => Err(SinkError::Encode(format!(
                "{} keeps record origin {} but {} was declared: the tables would mix two clocks",
                path.display(),
                k.record_origin,
                d.text()
            ))),
            (Some(k), _) => Ok(RecordOrigin { unix_ms: k.unix_ms }),
            (None, d) => {
                let origin = d.unwrap_or(RecordOrigin { unix_ms: now_ms() });
                let file = OriginFile {
                    record_origin: origin.text(),
                    unix_ms: origin.unix_ms,
                    declared: d.is_some(),
                };
                let bytes = serde_json::to_vec_pretty(&file).map_err(enc)?;
                write_atomic(&path, &bytes)?;
                Ok(origin)
            }
        }
    }
}

/// Writes `bytes` to `path` atomically ([`audita_files::write_atomic`]: hidden
/// temporary file, fsync, rename, fsync dir).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), SinkError> {
    audita_files::write_atomic(path, bytes).map_err(|e| io(&e.path)(e.source))
}

fn sync_dir(dir: &Path) -> Result<(), SinkError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir))
}

/// One row of the incidents table.
#[derive(Clone, Debug, PartialEq)]
pub struct IncidentRow {
    /// Incident name (the key).
    pub incident: String,
    /// Declared predicate `Y` (unknown for an abstention without a declaration).
    pub predicate: Option<String>,
    /// Wall-clock `t*` (Unix ms, UTC).
    pub t_star: Option<i64>,
    /// `t*` in record time (ms since the record origin).
    pub t_star_ms: Option<u64>,
    /// Severity (J).
    pub severity_j: Option<f64>,
    /// `graded` or `abstained`.
    pub status: String,
    /// Why it abstained.
    pub abstain_reason: Option<String>,
    /// Incident-level claim level.
    pub claim: Option<String>,
    /// Standard culpability was computed under.
    pub standard: Option<String>,
    /// Hex log root the verdict was computed against.
    pub record_root: Option<String>,
    /// Tree size of the checkpoint with that root.
    pub checkpoint_size: Option<u64>,
    /// Log origin of the record.
    pub log_origin: Option<String>,
    /// Keepers whose co-signature on that checkpoint verifies.
    pub keepers: Vec<String>,
    /// Whether the slice rested on a checkpoint short of the keeper quorum when
    /// judged (null without a checkpoint).
    pub under_witnessed: Option<bool>,
    /// When the sink first took the verdict (Unix ms, UTC).
    pub verdict_time: i64,
    /// Principals in the verdict.
    pub principals: u32,
    /// Culpable principals (count).
    pub culpable: u32,
    /// Culpable principals (names).
    pub culpable_principals: Vec<String>,
    /// Missing, suspect and unresolved items the verdict names.
    pub evidence_items: u32,
    /// Principals whose finding is `unresolved` (neither exonerated nor cleared: a
    /// missing item, a command to the subject not shown realised).
    pub unresolved: u32,
}

/// One row of the findings table.
#[derive(Clone, Debug, PartialEq)]
pub struct FindingRow {
    /// Incident name.
    pub incident: String,
    /// Principal.
    pub principal: String,
    /// Declared predicate.
    pub predicate: String,
    /// Wall-clock `t*` (Unix ms, UTC).
    pub t_star: i64,
    /// `t*` in record time.
    pub t_star_ms: u64,
    /// Severity (J).
    pub severity_j: f64,
    /// Standard culpability was computed under.
    pub standard: String,
    /// Finding status.
    pub status: String,
    /// Culpable.
    pub culpable: bool,
    /// Breach (specification standard).
    pub breach_specification: bool,
    /// Breach (reasonable-agent standard).
    pub breach_reasonable: bool,
    /// Involvement bound.
    pub rho_lo: f64,
    /// Upper end of the interval.
    pub rho_hi: f64,
    /// Claim level.
    pub claim: String,
    /// Registered duty ids.
    pub duties: Vec<String>,
    /// Duty ids it violated.
    pub violated_duties: Vec<String>,
    /// Flags.
    pub flags: Vec<String>,
    /// Certified evidence ids, in full (`author:hex64`).
    pub evidence: Vec<String>,
    /// Named missing/suspect items, in full.
    pub items: Vec<String>,
    /// Hex log root.
    pub record_root: String,
    /// When the sink first took the verdict (Unix ms, UTC).
    pub verdict_time: i64,
}

/// The rows of one verdict topic record.
pub fn rows_of(
    record: &VerdictRecord,
    origin: &RecordOrigin,
    verdict_time: i64,
) -> (IncidentRow, Vec<FindingRow>) {
    let decl = record.declaration.as_ref();
    let decl_str = |k: &str| decl.and_then(|d| d[k].as_str()).map(str::to_string);
    let decl_t = decl.and_then(|d| d["t_star_ms"].as_u64());
    let view = record.verdict.as_ref().map(VerdictView::of);
    let anchor = record.record.as_ref();
    let mut inc = IncidentRow {
        incident: record.incident.clone(),
        predicate: decl_str("outcome"),
        t_star: decl_t.map(|t| origin.wall(t)),
        t_star_ms: decl_t,
        severity_j: None,
        status: "abstained".into(),
        abstain_reason: record.abstained.clone(),
        claim: None,
        standard: None,
        record_root: anchor.map(|a| a.root.clone()),
        checkpoint_size: anchor.map(|a| a.size),
        log_origin: anchor.map(|a| a.origin.clone()),
        keepers: anchor
            .map(|a| a.cosignatures.iter().map(|c| c.keeper.clone()).collect())
            .unwrap_or_default(),
        under_witnessed: anchor.map(|a| a.under_witnessed),
        verdict_time,
        principals: 0,
        culpable: 0,
        culpable_principals: Vec::new(),
        evidence_items: 0,
        unresolved: 0,
    };
    let v = match view {
        None => return (inc, Vec::new()),
        Some(Err(e)) => {
            inc.abstain_reason = Some(e);
            return (inc, Vec::new());
        }
        Some(Ok(v)) => v,
    };
    let t_star = origin.wall(v.t_star_ms);
    inc.predicate = Some(v.outcome.clone());
    inc.t_star = Some(t_star);
    inc.t_star_ms = Some(v.t_star_ms);
    inc.severity_j = Some(v.severity_j);
    inc.status = v.status.clone();
    inc.abstain_reason = v.abstain_reason();
    inc.claim = Some(v.claim.level.clone());
    inc.standard = Some(v.standard.clone());
    inc.record_root = Some(v.record_root.clone());
    inc.principals = v.principals.len() as u32;
    inc.culpable_principals = v
        .principals
        .iter()
        .filter(|(_, f)| f.culpable)
        .map(|(p, _)| p.clone())
        .collect();
    inc.culpable = inc.culpable_principals.len() as u32;
    inc.evidence_items = v.completions.items.len() as u32;
    inc.unresolved = v
        .principals
        .values()
        .filter(|f| f.status == "unresolved")
        .count() as u32;
    let findings = v
        .principals
        .iter()
        .map(|(p, f)| FindingRow {
            incident: v.incident.clone(),
            principal: p.clone(),
            predicate: v.outcome.clone(),
            t_star,
            t_star_ms: v.t_star_ms,
            severity_j: v.severity_j,
            standard: v.standard.clone(),
            status: f.status.clone(),
            culpable: f.culpable,
            breach_specification: f.breach.specification,
            breach_reasonable: f.breach.reasonable_agent,
            rho_lo: f.rho_lo,
            rho_hi: f.rho_hi,
            claim: f.claim.level.clone(),
            duties: f.duties.clone(),
            violated_duties: f
                .breach
                .violations
                .iter()
                .map(|x| x.duty.clone())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect(),
            flags: f.flags.clone(),
            evidence: f.evidence.clone(),
            items: f.items.iter().map(|i| i.id.clone()).collect(),
            record_root: v.record_root.clone(),
            verdict_time,
        })
        .collect();
    (inc, findings)
}

fn list_field(name: &str) -> Field {
    Field::new(
        name,
        DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
        false,
    )
}

fn ts_field(name: &str, nullable: bool) -> Field {
    Field::new(
        name,
        DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
        nullable,
    )
}

/// Arrow schema of the incidents table (columns in published order).
pub fn incidents_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("incident", DataType::Utf8, false),
        Field::new("predicate", DataType::Utf8, true),
        ts_field("t_star", true),
        Field::new("t_star_ms", DataType::UInt64, true),
        Field::new("severity_j", DataType::Float64, true),
        Field::new("status", DataType::Utf8, false),
        Field::new("abstain_reason", DataType::Utf8, true),
        Field::new("claim", DataType::Utf8, true),
        Field::new("standard", DataType::Utf8, true),
        Field::new("record_root", DataType::Utf8, true),
        Field::new("checkpoint_size", DataType::UInt64, true),
        Field::new("log_origin", DataType::Utf8, true),
        list_field("keepers"),
        ts_field("verdict_time", false),
        Field::new("principals", DataType::UInt32, false),
        Field::new("culpable", DataType::UInt32, false),
        list_field("culpable_principals"),
        Field::new("evidence_items", DataType::UInt32, false),
        Field::new("under_witnessed", DataType::Boolean, true),
        Field::new("unresolved", DataType::UInt32, true),
    ]))
}

/// Arrow schema of the findings table (columns in published order).
pub fn findings_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("incident", DataType::Utf8, false),
        Field::new("principal", DataType::Utf8, false),
        Field::new("predicate", DataType::Utf8, false),
        ts_field("t_star", false),
        Field::new("t_star_ms", DataType::UInt64, false),
        Field::new("severity_j", DataType::Float64, false),
        Field::new("standard", DataType::Utf8, false),
        Field::new("status", DataType::Utf8, false),
        Field::new("culpable", DataType::Boolean, false),
        Field::new("breach_specification", DataType::Boolean, false),
        Field::new("breach_reasonable", DataType::Boolean, false),
        Field::new("rho_lo", DataType::Float64, false),
        Field::new("rho_hi", DataType::Float64, false),
        Field::new("claim", DataType::Utf8, false),
        list_field("duties"),
        list_field("violated_duties"),
        list_field("flags"),
        list_field("evidence"),
        list_field("items"),
        Field::new("record_root", DataType::Utf8, false),
        ts_field("verdict_time", false),
    ]))
}

fn lists<T>(rows: &[T], get: impl Fn(&T) -> &Vec<String>) -> ArrayRef {
    let mut b = ListBuilder::new(StringBuilder::new());
    for r in rows {
        for s in get(r) {
            b.values().append_value(s);
        }
        b.append(true);
    }
    Arc::new(b.finish())
}

fn ts(values: impl Iterator<Item = Option<i64>>) -> ArrayRef {
    Arc::new(TimestampMillisecondArray::from(values.collect::<Vec<_>>()).with_timezone("UTC"))
}

/// The incidents rows as one record batch.
pub fn incidents_batch(rows: &[IncidentRow]) -> Result<RecordBatch, SinkError> {
    let s = |f: fn(&IncidentRow) -> Option<&str>| -> ArrayRef {
        Arc::new(StringArray::from(rows.iter().map(f).collect::<Vec<_>>()))
    };
    let u32s = |f: fn(&IncidentRow) -> u32| -> ArrayRef {
        Arc::new(UInt32Array::from_iter_values(rows.iter().map(f)))
    };
    let columns: Vec<ArrayRef> = vec![
        s(|r| Some(&r.incident)),
        s(|r| r.predicate.as_deref()),
        ts(rows.iter().map(|r| r.t_star)),
        Arc::new(UInt64Array::from(
            rows.iter().map(|r| r.t_star_ms).collect::<Vec<_>>(),
        )),
        Arc::new(Float64Array::from(
            rows.iter().map(|r| r.severity_j).collect::<Vec<_>>(),
        )),
        s(|r| Some(&r.status)),
        s(|r| r.abstain_reason.as_deref()),
        s(|r| r.claim.as_deref()),
        s(|r| r.standard.as_deref()),
        s(|r| r.record_root.as_deref()),
        Arc::new(UInt64Array::from(
            rows.iter().map(|r| r.checkpoint_size).collect::<Vec<_>>(),
        )),
        s(|r| r.log_origin.as_deref()),
        lists(rows, |r| &r.keepers),
        ts(rows.iter().map(|r| Some(r.verdict_time))),
        u32s(|r| r.principals),
        u32s(|r| r.culpable),
        lists(rows, |r| &r.culpable_principals),
        u32s(|r| r.evidence_items),
        Arc::new(BooleanArray::from(
            rows.iter().map(|r| r.under_witnessed).collect::<Vec<_>>(),
        )),
        Arc::new(UInt32Array::from(
            rows.iter().map(|r| Some(r.unresolved)).collect::<Vec<_>>(),
        )),
    ];
    RecordBatch::try_new(incidents_schema(), columns).map_err(enc)
}

/// The findings rows as one record batch.
pub fn findings_batch(rows: &[FindingRow]) -> Result<RecordBatch, SinkError> {
    let s = |f: fn(&FindingRow) -> &str| -> ArrayRef {
        Arc::new(StringArray::from_iter_values(rows.iter().map(f)))
    };
    let fl = |f: fn(&FindingRow) -> f64| -> ArrayRef {
        Arc::new(Float64Array::from_iter_values(rows.iter().map(f)))
    };
    let b = |f: fn(&FindingRow) -> bool| -> ArrayRef {
        Arc::new(BooleanArray::from(rows.iter().map(f).collect::<Vec<_>>()))
    };
    let columns: Vec<ArrayRef> = vec![
        s(|r| &r.incident),
        s(|r| &r.principal),
        s(|r| &r.predicate),
        ts(rows.iter().map(|r| Some(r.t_star))),
        Arc::new(UInt64Array::from_iter_values(
            rows.iter().map(|r| r.t_star_ms),
        )),
        fl(|r| r.severity_j),
        s(|r| &r.standard),
        s(|r| &r.status),
        b(|r| r.culpable),
        b(|r| r.breach_specification),
        b(|r| r.breach_reasonable),
        fl(|r| r.rho_lo),
        fl(|r| r.rho_hi),
        s(|r| &r.claim),
        lists(rows, |r| &r.duties),
        lists(rows, |r| &r.violated_duties),
        lists(rows, |r| &r.flags),
        lists(rows, |r| &r.evidence),
        lists(rows, |r| &r.items),
        s(|r| &r.record_root),
        ts(rows.iter().map(|r| Some(r.verdict_time))),
    ];
    RecordBatch::try_new(findings_schema(), columns).map_err(enc)
}

/// When to close open files and when to compact a partition.
#[derive(Clone, Copy, Debug)]
pub struct Rotation {
    /// Close a table's open file after this many rows.
    pub max_rows: usize,
    /// Close open files older than this.
    pub max_age: Duration,
    /// Close open files once no row was written for this long, so a query sees a
    /// verdict seconds after the sink took it, not at the next rotation; a steady
    /// stream still fills files up to `max_age` (and compaction merges the small ones).
    pub max_quiet: Duration,
    /// Compact a partition once it holds this many completed files (0: never).
    pub compact_files: usize,
}

impl Default for Rotation {
    fn default() -> Self {
        Rotation {
            max_rows: 100_000,
            max_age: Duration::from_secs(300),
            max_quiet: Duration::from_secs(2),
            compact_files: 8,
        }
    }
}

/// One partitioned table.
struct Table {
    root: PathBuf,
    schema: Arc<Schema>,
    schema_id: &'static str,
    origin: RecordOrigin,
    /// Next file number (above every existing one).
    seq: u64,
    open: BTreeMap<String, OpenFile>,
    /// Incidents in completed files.
    held: BTreeSet<String>,
    written: Vec<PathBuf>,
}

struct OpenFile {
    tmp: PathBuf,
    path: PathBuf,
    writer: ArrowWriter<File>,
    incidents: BTreeSet<String>,
    rows: usize,
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Intent {
    partition: String,
    inputs: Vec<String>,
    output: String,
}

fn parquet_files(dir: &Path) -> Result<Vec<PathBuf>, SinkError> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(source) => {
            return Err(SinkError::Io {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    for e in entries {
        let path = e.map_err(io(dir))?.path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if name.starts_with("part-") && name.ends_with(".parquet") {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

fn partitions(root: &Path) -> Result<Vec<(String, PathBuf)>, SinkError> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(source) => {
            return Err(SinkError::Io {
                path: root.to_path_buf(),
                source,
            })
        }
    };
    for e in entries {
        let path = e.map_err(io(root))?.path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if let Some(date) = name.strip_prefix("date=") {
            if path.is_dir() {
                out.push((date.to_string(), path.clone()));
            }
        }
    }
    out.sort();
    Ok(out)
}

fn seq_of(path: &Path) -> Option<u64> {
    path.file_name()?
        .to_str()?
        .strip_prefix("part-")?
        .strip_suffix(".parquet")?
        .parse()
        .ok()
}

/// Reads every batch of a completed file.
fn read_batches(path: &Path) -> Result<Vec<RecordBatch>, SinkError> {
    let file = File::open(path).map_err(io(path))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .and_then(|b| b.build())
        .map_err(|e| SinkError::Encode(format!("{}: {e}", path.display())))?;
    reader
        .map(|b| b.map_err(|e| SinkError::Encode(format!("{}: {e}", path.display()))))
        .collect()
}

fn incidents_of(batches: &[RecordBatch], path: &Path) -> Result<Vec<String>, SinkError> {
    let mut out = Vec::new();
    for batch in batches {
        let col = batch
            .column_by_name("incident")
            .and_then(|c| c.as_any().downcast_ref::<StringArray>())
            .ok_or_else(|| SinkError::Encode(format!("{}: no incident column", path.display())))?;
        for i in 0..arrow::array::Array::len(col) {
            out.push(col.value(i).to_string());
        }
    }
    Ok(out)
}

impl Table {
    fn open(
        root: PathBuf,
        schema: Arc<Schema>,
        schema_id: &'static str,
        origin: RecordOrigin,
    ) -> Result<Table, SinkError> {
        std::fs::create_dir_all(&root).map_err(io(&root))?;
        recover_compactions(&root)?;
        let mut seq = 0;
        let mut held = BTreeSet::new();
        for (_, dir) in partitions(&root)? {
            for e in std::fs::read_dir(&dir).map_err(io(&dir))?.flatten() {
                let name = e.file_name().to_string_lossy().to_string();
                if name.starts_with('.') && name.ends_with(".tmp") {
                    // The open file of a sink that crashed: never complete, never read.
                    let _ = std::fs::remove_file(e.path());
                }
            }
            for path in parquet_files(&dir)? {
                seq = seq.max(seq_of(&path).map_or(0, |s| s + 1));
                held.extend(incidents_of(&read_batches(&path)?, &path)?);
            }
        }
        Ok(Table {
            root,
            schema,
            schema_id,
            origin,
            seq,
            open: BTreeMap::new(),
            held,
            written: Vec::new(),
        })
    }

    fn props(&self) -> WriterProperties {
        WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_key_value_metadata(Some(vec![
                KeyValue::new("audita.schema".into(), self.schema_id.to_string()),
                KeyValue::new("audita.schema_version".into(), SCHEMA_VERSION.to_string()),
                KeyValue::new("audita.record_origin".into(), self.origin.text()),
                KeyValue::new(
                    "audita.record_origin_unix_ms".into(),
                    self.origin.unix_ms.to_string(),
                ),
            ]))
            .build()
    }

    fn new_file(&mut self, date: &str) -> Result<(PathBuf, PathBuf), SinkError> {
        let dir = self.root.join(format!("date={date}"));
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        let name = format!("part-{:06}.parquet", self.seq);
        self.seq += 1;
        Ok((dir.join(format!(".{name}.tmp")), dir.join(name)))
    }

    fn contains(&self, incident: &str) -> bool {
        self.held.contains(incident) || self.open.values().any(|f| f.incidents.contains(incident))
    }

    fn write(&mut self, date: &str, incident: &str, batch: &RecordBatch) -> Result<(), SinkError> {
        if !self.open.contains_key(date) {
            let (tmp, path) = self.new_file(date)?;
            let file = File::create(&tmp).map_err(io(&tmp))?;
            let writer =
                ArrowWriter::try_new(file, self.schema.clone(), Some(self.props())).map_err(enc)?;
            self.open.insert(
                date.to_string(),
                OpenFile {
                    tmp,
                    path,
                    writer,
                    incidents: BTreeSet::new(),
                    rows: 0,
                },
            );
        }
        let f = self.open.get_mut(date).expect("opened above");
        f.writer.write(batch).map_err(enc)?;
        f.rows += batch.num_rows();
        f.incidents.insert(incident.to_string());
        Ok(())
    }

    fn rows_open(&self) -> usize {
        self.open.values().map(|f| f.rows).sum()
    }

    fn close(&mut self) -> Result<(), SinkError> {
        for (_, f) in std::mem::take(&mut self.open) {
            let file = f.writer.into_inner().map_err(enc)?;
            file.sync_all().map_err(io(&f.tmp))?;
            std::fs::rename(&f.tmp, &f.path).map_err(io(&f.path))?;
            sync_dir(f.path.parent().unwrap_or(Path::new(".")))?;
            self.held.extend(f.incidents);
            self.written.push(f.path);
        }
        Ok(())
    }

    /// Merges every partition holding at least `min` completed files.
    fn compact(&mut self, min: usize) -> Result<usize, SinkError> {
        if min < 2 {
            return Ok(0);
        }
        let mut merged = 0;
        for (date, dir) in partitions(&self.root)? {
            if self.open.contains_key(&date) {
                continue;
            }
            // Small files only: a merged file is not rewritten once it is large.
            let inputs: Vec<PathBuf> = parquet_files(&dir)?
                .into_iter()
                .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.len() < SMALL_FILE_BYTES))
                .collect();
            if inputs.len() < min {
                continue;
            }
            let (tmp, path) = self.new_file(&date)?;
            let file = File::create(&tmp).map_err(io(&tmp))?;
            let mut writer =
                ArrowWriter::try_new(file, self.schema.clone(), Some(self.props())).map_err(enc)?;
            for input in &inputs {
                for batch in read_batches(input)? {
                    // Files written under an earlier version lack appended columns.
                    let batch = widen(&batch, &self.schema)?;
                    writer.write(&batch).map_err(enc)?;
                }
            }
            writer
                .into_inner()
                .map_err(enc)?
                .sync_all()
                .map_err(io(&tmp))?;
            let name = |p: &Path| {
                p.file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .to_string()
            };
            let intent = Intent {
                partition: format!("date={date}"),
                inputs: inputs.iter().map(|p| name(p)).collect(),
                output: name(&path),
            };
            let intent_path = self.root.join(format!(
                "_compaction-{:06}.json",
                seq_of(&path).unwrap_or(0)
            ));
            write_atomic(&intent_path, &serde_json::to_vec(&intent).map_err(enc)?)?;
            std::fs::rename(&tmp, &path).map_err(io(&path))?;
            sync_dir(&dir)?;
            finish_compaction(&self.root, &intent_path, &intent)?;
            self.written.retain(|w| !inputs.contains(w));
            self.written.push(path);
            merged += 1;
        }
        Ok(merged)
    }
}

/// A batch of an earlier schema version, with the columns appended since as nulls.
fn widen(batch: &RecordBatch, schema: &Arc<Schema>) -> Result<RecordBatch, SinkError> {
    if batch.schema().fields() == schema.fields() {
        return Ok(batch.clone());
    }
    let mut columns = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        match batch.column_by_name(field.name()) {
            Some(c) => columns.push(c.clone()),
            None => columns.push(arrow::array::new_null_array(
                field.data_type(),
                batch.num_rows(),
            )),
        }
    }
    RecordBatch::try_new(schema.clone(), columns).map_err(enc)
}

fn finish_compaction(root: &Path, intent_path: &Path, intent: &Intent) -> Result<(), SinkError> {
    let dir = root.join(&intent.partition);
    for input in &intent.inputs {
        let p = dir.join(input);
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(SinkError::Io { path: p, source }),
        }
    }
    sync_dir(&dir)?;
    std::fs::remove_file(intent_path).map_err(io(intent_path))?;
    sync_dir(root)
}

/// Finishes or drops the compactions a crash interrupted.
fn recover_compactions(root: &Path) -> Result<(), SinkError> {
    let mut intents: Vec<PathBuf> = std::fs::read_dir(root)
        .map_err(io(root))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("_compaction-") && n.ends_with(".json"))
        })
        .collect();
    intents.sort();
    for path in intents {
        let intent: Intent = serde_json::from_slice(&std::fs::read(&path).map_err(io(&path))?)
            .map_err(|e| SinkError::Encode(format!("{}: {e}", path.display())))?;
        let dir = root.join(&intent.partition);
        if dir.join(&intent.output).exists() {
            tracing::warn!(intent = %path.display(), "finishing an interrupted compaction");
            finish_compaction(root, &path, &intent)?;
        } else {
            tracing::warn!(intent = %path.display(), "dropping an interrupted compaction");
            let _ = std::fs::remove_file(dir.join(format!(".{}.tmp", intent.output)));
            std::fs::remove_file(&path).map_err(io(&path))?;
        }
    }
    Ok(())
}

/// The two analytics tables of one output directory.
pub struct Tables {
    incidents: Table,
    findings: Table,
    rotation: Rotation,
    opened: Option<Instant>,
    /// When the last row was written to the open files.
    last_row: Option<Instant>,
    /// A file was completed (or the tables opened) since the last compaction pass.
    compact_due: bool,
    /// The record origin the tables are written under.
    pub origin: RecordOrigin,
}

impl Tables {
    /// Opens (or creates) the tables in `dir` (`dir/incidents`, `dir/findings`):
    /// finishes interrupted compactions, removes files a crash left open, and learns
    /// which incidents the completed files hold.
    pub fn open(dir: &Path, origin: RecordOrigin, rotation: Rotation) -> Result<Tables, SinkError> {
        Ok(Tables {
            incidents: Table::open(
                dir.join("incidents"),
                incidents_schema(),
                INCIDENTS_SCHEMA,
                origin,
            )?,
            findings: Table::open(
                dir.join("findings"),
                findings_schema(),
                FINDINGS_SCHEMA,
                origin,
            )?,
            rotation,
            opened: None,
            last_row: None,
            compact_due: true,
            origin,
        })
    }

    /// Whether the incidents table already holds `incident`.
    pub fn holds(&self, incident: &str) -> bool {
        self.incidents.contains(incident)
    }

    /// Writes the rows of one record that the tables do not hold yet; returns the
    /// number of rows written.
    pub fn write(&mut self, record: &VerdictRecord, verdict_time: i64) -> Result<usize, SinkError> {
        let (inc, findings) = rows_of(record, &self.origin, verdict_time);
        let date = utc_date(inc.t_star.unwrap_or(inc.verdict_time));
        if self
            .opened
            .is_some_and(|t| t.elapsed() >= self.rotation.max_age)
            || self.incidents.rows_open() >= self.rotation.max_rows
            || self.findings.rows_open() >= self.rotation.max_rows
        {
            self.close()?;
        }
        let mut n = 0;
        if !findings.is_empty() && !self.findings.contains(&inc.incident) {
            self.findings
                .write(&date, &inc.incident, &findings_batch(&findings)?)?;
            n += findings.len();
        }
        if !self.incidents.contains(&inc.incident) {
            let incident = inc.incident.clone();
            self.incidents
                .write(&date, &incident, &incidents_batch(&[inc])?)?;
            n += 1;
        }
        if n > 0 {
            self.opened.get_or_insert_with(Instant::now);
            self.last_row = Some(Instant::now());
        }
        Ok(n)
    }

    /// Closes the open files of both tables (findings first, then incidents).
    pub fn close(&mut self) -> Result<(), SinkError> {
        if self.opened.is_some() {
            self.compact_due = true;
        }
        self.findings.close()?;
        self.incidents.close()?;
        self.opened = None;
        self.last_row = None;
        Ok(())
    }

    /// Call when idle: closes files older than the rotation age or quiet for
    /// `max_quiet`, then, if a file was completed since the last pass, compacts
    /// partitions that have gathered enough small files. Returns partitions merged.
    pub fn tick(&mut self) -> Result<usize, SinkError> {
        if self
            .opened
            .is_some_and(|t| t.elapsed() >= self.rotation.max_age)
            || self
                .last_row
                .is_some_and(|t| t.elapsed() >= self.rotation.max_quiet)
        {
            self.close()?;
        }
        if !self.compact_due {
            return Ok(0);
        }
        self.compact()
    }

    /// Compacts every partition (of both tables) that holds at least
    /// `rotation.compact_files` completed files.
    pub fn compact(&mut self) -> Result<usize, SinkError> {
        let min = self.rotation.compact_files;
        let merged = self.findings.compact(min)? + self.incidents.compact(min)?;
        self.compact_due = false;
        Ok(merged)
    }

    /// Closes the open files and compacts; returns the completed files this instance
    /// wrote (incidents, then findings).
    pub fn finish(mut self) -> Result<Vec<PathBuf>, SinkError> {
        self.close()?;
        self.compact()?;
        let mut files = std::mem::take(&mut self.incidents.written);
        files.append(&mut self.findings.written);
        Ok(files)
    }
}

/// Incidents (with their row counts) held by the completed files of one table
/// directory (`dir/incidents` or `dir/findings`).
pub fn incidents_in(table: &Path) -> Result<BTreeMap<String, usize>, SinkError> {
    let mut out = BTreeMap::new();
    for (_, dir) in partitions(table)? {
        for path in parquet_files(&dir)? {
            for i in incidents_of(&read_batches(&path)?, &path)? {
                *out.entry(i).or_insert(0) += 1;
            }
        }
    }
    Ok(out)
}
