//! The verdict sink: takes verdict topic records, journals them, writes the analytics
//! tables, one HTML report per incident and the index page.
//!
//! Output directory layout:
//! ```text
//! <dir>/journal.jsonl                 every record taken, with the time it was taken
//! <dir>/verdicts/record-origin.json   the wall-clock instant of record time 0
//! <dir>/verdicts/incidents/date=…/    the incidents table (crate::tables)
//! <dir>/verdicts/findings/date=…/     the findings table
//! <dir>/reports/<incident>.html       one self-contained report per incident
//! <dir>/reports/<incident>.checkpoint the checkpoint it was computed against
//! <dir>/reports/<incident>.adverse.json  its declaration (for `audita verdict`)
//! <dir>/reports/index.html            every incident, sortable without scripts
//! ```
//!
//! Design constraints:
//! - A record is journaled (fsync) before the caller commits its offset; a journal line
//!   is `{"received_ms": <Unix ms>, "record": <the record>}` (a bare record, as older
//!   sinks wrote, is read too). On open the journal is replayed: tables write only the
//!   rows they do not hold, reports are rendered again, so a SIGKILL at any point
//!   loses no row and writes none twice, and `verdict_time` survives restarts.
//! - The first record per incident wins; later ones (re-deliveries, which are
//!   identical) are dropped.
//! - Untrusted names never become paths: a report's file name is the incident name
//!   restricted to `[A-Za-z0-9._-]` (with a digest suffix when that changed it).
//! - The stage's run loop ([`run`]) commits a record's offset only after the sink took
//!   (journaled) it; on start it takes the journal's records again first.

use crate::parquet::SinkError;
use crate::report::{self, Build};
use crate::tables::{self, IncidentRow, RecordOrigin, Rotation, Tables};
use audita_bus::Consumer;
use audita_topics::VerdictRecord;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What taking one record did.
#[derive(Debug, PartialEq)]
pub enum Taken {
    /// A new incident: its record (parsed) and the table rows written.
    New(Box<VerdictRecord>, usize),
    /// An incident already taken: dropped.
    Duplicate,
}

/// The sink of one output directory.
pub struct VerdictSink {
    dir: PathBuf,
    journal: crate::journal::Journal,
    tables: Tables,
    build: Build,
    /// Incidents taken, by name (the index's rows).
    index: BTreeMap<String, IncidentRow>,
    index_dirty: bool,
    past: Vec<Vec<u8>>,
}

fn unwrap_line(line: &[u8]) -> Result<(serde_json::Value, Option<i64>), SinkError> {
    let v: serde_json::Value = serde_json::from_slice(line)
        .map_err(|e| SinkError::Encode(format!("journal line is not JSON: {e}")))?;
    if v.get("incident").is_none() {
        if let (Some(t), Some(r)) = (
            v.get("received_ms").and_then(|t| t.as_i64()),
            v.get("record"),
        ) {
            return Ok((r.clone(), Some(t)));
        }
    }
    Ok((v, None))
}

impl VerdictSink {
    /// Opens the sink's directory: resolves the record origin (`declared`, else the
    /// one kept, else now), opens the tables and the journal. Call [`Self::replay`]
    /// next to take the journaled records again.
    pub fn open(
        dir: &Path,
        declared: Option<RecordOrigin>,
        rotation: Rotation,
        build: Build,
    ) -> Result<VerdictSink, SinkError> {
        std::fs::create_dir_all(dir.join("reports")).map_err(|source| SinkError::Io {
            path: dir.join("reports"),
            source,
        })?;
        let tables_dir = dir.join("verdicts");
        let origin = RecordOrigin::resolve(&tables_dir, declared)?;
        let tables = Tables::open(&tables_dir, origin, rotation)?;
        let (journal, past) = crate::journal::Journal::open(&dir.join("journal.jsonl"))?;
        Ok(VerdictSink {
            dir: dir.to_path_buf(),
            journal,
            tables,
            build,
            index: BTreeMap::new(),
            index_dirty: false,
            past,
        })
    }

    /// The record origin the tables and reports use.
    pub fn origin(&self) -> RecordOrigin {
        self.tables.origin
    }

    /// Takes the journaled records again (after a restart); returns what each did.
    pub fn replay(&mut self) -> Result<Vec<Taken>, SinkError> {
        let past = std::mem::take(&mut self.past);
        let mut out = Vec::with_capacity(past.len());
        for line in past {
            let (record, received) = unwrap_line(&line)?;
            out.push(self.take_value(record, received.unwrap_or_else(tables::now_ms), false)?);
        }
        Ok(out)
    }

    /// Takes one record from the topic (journaled before this returns).
    pub fn take(&mut self, payload: &[u8]) -> Result<Taken, SinkError> {
        let v: serde_json::Value = serde_json::from_slice(payload)
            .map_err(|e| SinkError::Encode(format!("verdict record is not JSON: {e}")))?;
        self.take_value(v, tables::now_ms(), true)
    }

    fn take_value(
        &mut self,
        v: serde_json::Value,
        received_ms: i64,
        fresh: bool,
    ) -> Result<Taken, SinkError> {
        let record: VerdictRecord = serde_json::from_value(v.clone())
            .map_err(|e| SinkError::Encode(format!("verdict record: {e}")))?;
        if self.index.contains_key(&record.incident) {
            return Ok(Taken::Duplicate);
        }
        if fresh {
            let line = serde_json::json!({"received_ms": received_ms, "record": v});
            self.journal.append(line.to_string().as_bytes())?;
        }
        let written = self.tables.write(&record, received_ms)?;
        let (row, _) = tables::rows_of(&record, &self.tables.origin, received_ms);
        let html = report::render(&record, &self.tables.origin, received_ms, &self.build);
        tables::write_atomic(&self.report_path(&record.incident), html.as_bytes())?;
        // What the report's commands read, next to it.
        let stem = report::stem(&record.incident);
        let beside = |ext: &str| self.dir.join("reports").join(format!("{stem}.{ext}"));
        if let Some(a) = &record.record {
            tables::write_atomic(&beside("checkpoint"), a.checkpoint.as_bytes())?;
        }
        if let Some(d) = &record.declaration {
            let bytes =
                serde_json::to_vec_pretty(d).map_err(|e| SinkError::Encode(e.to_string()))?;
            tables::write_atomic(&beside("adverse.json"), &bytes)?;
        }
        self.index.insert(record.incident.clone(), row);
        self.index_dirty = true;
        Ok(Taken::New(Box::new(record), written))
    }

    /// Where the report of `incident` is written.
    pub fn report_path(&self, incident: &str) -> PathBuf {
        self.dir.join("reports").join(report::file_name(incident))
    }

    /// Rewrites `reports/index.html` if anything was taken since it was last written.
    pub fn write_index(&mut self) -> Result<(), SinkError> {
        if !self.index_dirty {
            return Ok(());
        }
        let rows: Vec<&IncidentRow> = self.index.values().collect();
        let html = report::render_index(&rows, &self.tables.origin, &self.build);
        tables::write_atomic(
            &self.dir.join("reports").join("index.html"),
            html.as_bytes(),
        )?;
        self.index_dirty = false;
        Ok(())
    }

    /// Call when idle: rotates old files, compacts, refreshes the index.
    pub fn tick(&mut self) -> Result<(), SinkError> {
        self.tables.tick()?;
        self.write_index()
    }

    /// Closes the tables (and compacts) and writes the index; returns the completed
    /// Parquet files this instance wrote.
    pub fn finish(mut self) -> Result<Vec<PathBuf>, SinkError> {
        self.write_index()?;
        self.tables.finish()
    }
}

/// What one run of the sink stage collected.
#[derive(Debug, Default)]
pub struct Collected {
    /// One verdict per incident (later duplicates of an incident are identical and
    /// dropped).
    pub verdicts: BTreeMap<String, VerdictRecord>,
    /// Abstentions by incident, with the reason.
    pub abstained: BTreeMap<String, String>,
    /// Parquet files written.
    pub files: Vec<PathBuf>,
}

impl Collected {
    /// Incidents with a verdict or an abstention.
    pub fn len(&self) -> usize {
        self.verdicts.len() + self.abstained.len()
    }

    /// Whether nothing was collected.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// All rows of the verdicts, sorted by (incident, principal): the comparison key
    /// of two runs of one deployment (e.g. Kafka vs embedded).
    pub fn rows(&self) -> Vec<crate::VerdictRow> {
        let mut rows: Vec<crate::VerdictRow> = self
            .verdicts
            .values()
            .flat_map(|v| v.rows.clone())
            .collect();
        rows.sort_by(|a, b| (&a.incident, &a.principal).cmp(&(&b.incident, &b.principal)));
        rows
    }

    fn note(&mut self, taken: Taken, on_record: &mut impl FnMut(&VerdictRecord, usize)) {
        if let Taken::New(record, rows) = taken {
            on_record(&record, rows);
            match &record.abstained {
                Some(reason) if record.verdict.is_none() => {
                    self.abstained
                        .insert(record.incident.clone(), reason.clone());
                }
                _ => {
                    self.verdicts.insert(record.incident.clone(), *record);
                }
            }
        }
    }
}

/// The sink stage's run loop over `input` (subscribed to `audita.verdicts`): takes
/// the journal's records again, then every record from the bus, until `stop` is set,
/// `expect` incidents were collected, or nothing arrived for `idle`; then finishes
/// the open files. `on_record` sees every new record (verdict or abstention) with the
/// number of table rows it wrote.
///
/// Each record is journaled durably before its offset is committed, and only rows not
/// in a completed Parquet file are written again, so a SIGKILL at any point loses no
/// row and writes none twice.
pub fn run(
    mut sink: VerdictSink,
    input: &mut dyn Consumer,
    expect: Option<usize>,
    stop: &AtomicBool,
    idle: Option<Duration>,
    mut on_record: impl FnMut(&VerdictRecord, usize),
) -> Result<Collected, SinkError> {
    let mut got = Collected::default();
    for taken in sink.replay()? {
        got.note(taken, &mut on_record);
    }
    let mut idle_since = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        if expect.is_some_and(|n| got.len() >= n) {
            break;
        }
        let Some(del) = input.poll(Duration::from_millis(50))? else {
            sink.tick()?;
            if idle.is_some_and(|i| idle_since.elapsed() >= i) {
                break;
            }
            continue;
        };
        idle_since = Instant::now();
        let taken = sink.take(&del.payload)?;
        got.note(taken, &mut on_record);
        input.commit(&del)?;
    }
    got.files = sink.finish()?;
    Ok(got)
}
