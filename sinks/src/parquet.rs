//! Parquet output of verdict rows, rotated by row count and age.
//!
//! Files are named `verdicts-<seq:06>.parquet` in the output directory and written as
//! `.tmp` first, renamed on close. Compression: snappy.

use crate::VerdictRow;
use arrow::array::{
    ArrayRef, BooleanArray, Float64Array, ListBuilder, StringArray, StringBuilder, UInt64Array,
};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why writing Parquet failed. All are permanent for the file at hand.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The file system refused (full disk, permissions).
    #[error("parquet sink i/o at {path}: {source}")]
    Io {
        /// File involved.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// Arrow/Parquet encoding failed.
    #[error("parquet encoding: {0}")]
    Encode(String),
}

/// The Arrow schema of a verdict file.
pub fn schema() -> Arc<Schema> {
    let list = |name: &str| {
        Field::new(
            name,
            DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
            false,
        )
    };
    Arc::new(Schema::new(vec![
        Field::new("incident", DataType::Utf8, false),
        Field::new("principal", DataType::Utf8, false),
        Field::new("outcome", DataType::Utf8, false),
        Field::new("t_star_ms", DataType::UInt64, false),
        Field::new("severity_j", DataType::Float64, false),
        Field::new("standard", DataType::Utf8, false),
        list("duties"),
        Field::new("breach_specification", DataType::Boolean, false),
        Field::new("breach_reasonable", DataType::Boolean, false),
        Field::new("rho_lo", DataType::Float64, false),
        Field::new("rho_hi", DataType::Float64, false),
        Field::new("culpable", DataType::Boolean, false),
        Field::new("claim", DataType::Utf8, false),
        list("flags"),
        list("evidence"),
        Field::new("record_root", DataType::Utf8, false),
    ]))
}

fn list_column(rows: &[VerdictRow], get: impl Fn(&VerdictRow) -> &Vec<String>) -> ArrayRef {
    let mut b = ListBuilder::new(StringBuilder::new());
    for r in rows {
        for s in get(r) {
            b.values().append_value(s);
        }
        b.append(true);
    }
    Arc::new(b.finish())
}

/// Converts rows into one record batch of [`schema`].
pub fn to_batch(rows: &[VerdictRow]) -> Result<RecordBatch, SinkError> {
    let s = |f: fn(&VerdictRow) -> &str| -> ArrayRef {
        Arc::new(StringArray::from_iter_values(rows.iter().map(f)))
    };
    let u = |f: fn(&VerdictRow) -> u64| -> ArrayRef {
        Arc::new(UInt64Array::from_iter_values(rows.iter().map(f)))
    };
    let fl = |f: fn(&VerdictRow) -> f64| -> ArrayRef {
        Arc::new(Float64Array::from_iter_values(rows.iter().map(f)))
    };
    let b = |f: fn(&VerdictRow) -> bool| -> ArrayRef {
        Arc::new(BooleanArray::from(rows.iter().map(f).collect::<Vec<_>>()))
    };
    let columns = vec![
        s(|r| &r.incident),
        s(|r| &r.principal),
        s(|r| &r.outcome),
        u(|r| r.t_star_ms),
        fl(|r| r.severity_j),
        s(|r| &r.standard),
        list_column(rows, |r| &r.duties),
        b(|r| r.breach_specification),
        b(|r| r.breach_reasonable),
        fl(|r| r.rho_lo),
        fl(|r| r.rho_hi),
        b(|r| r.culpable),
        s(|r| &r.claim),
        list_column(rows, |r| &r.flags),
        list_column(rows, |r| &r.evidence),
        s(|r| &r.record_root),
    ];
    RecordBatch::try_new(schema(), columns).map_err(|e| SinkError::Encode(e.to_string()))
}

/// When to close the current file and start the next.
#[derive(Clone, Copy, Debug)]
pub struct Rotation {
    /// Close after this many rows.
    pub max_rows: usize,
    /// Close when the open file is older than this.
    pub max_age: Duration,
}

impl Default for Rotation {
    fn default() -> Self {
        Rotation {
            max_rows: 100_000,
            max_age: Duration::from_secs(300),
        }
    }
}

/// Writes verdict rows into rotated Parquet files.
pub struct ParquetSink {
    dir: PathBuf,
    rotation: Rotation,
    seq: u64,
    open: Option<OpenFile>,
    written: Vec<PathBuf>,
}

struct OpenFile {
    tmp: PathBuf,
    path: PathBuf,
    writer: ArrowWriter<File>,
    rows: usize,
    opened: Instant,
}

impl ParquetSink {
    /// A sink writing into `dir` (created if absent). Numbering continues after the
    /// highest existing file, so a restarted sink never overwrites earlier output.
    pub fn new(dir: &Path, rotation: Rotation) -> Result<Self, SinkError> {
        std::fs::create_dir_all(dir).map_err(|source| SinkError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let mut seq = 0;
        let entries = std::fs::read_dir(dir).map_err(|source| SinkError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.ends_with(".parquet.tmp") {
                // The open file of a sink that crashed: never complete, never read.
                let _ = std::fs::remove_file(e.path());
                continue;
            }
            if let Some(n) = name
                .strip_prefix("verdicts-")
                .and_then(|r| r.strip_suffix(".parquet"))
            {
                if let Ok(n) = n.parse::<u64>() {
                    seq = seq.max(n + 1);
                }
            }
        }
        Ok(ParquetSink {
            dir: dir.to_path_buf(),
            rotation,
            seq,
            open: None,
            written: Vec::new(),
        })
    }

    /// Closes the open file if it is older than the rotation age (call when idle, so
    /// a quiet stream's last rows reach a readable file).
    pub fn tick(&mut self) -> Result<(), SinkError> {
        if self
            .open
            .as_ref()
            .is_some_and(|f| f.opened.elapsed() >= self.rotation.max_age)
        {
            self.close_file()?;
        }
        Ok(())
    }

    /// Appends rows, rotating files as configured.
    pub fn write(&mut self, rows: &[VerdictRow]) -> Result<(), SinkError> {
        if rows.is_empty() {
            return Ok(());
        }
        if self.open.as_ref().is_some_and(|f| {
            f.rows >= self.rotation.max_rows || f.opened.elapsed() >= self.rotation.max_age
        }) {
            self.close_file()?;
        }
        if self.open.is_none() {
            let path = self.dir.join(format!("verdicts-{:06}.parquet", self.seq));
            let tmp = path.with_extension("parquet.tmp");
            self.seq += 1;
            let file = File::create(&tmp).map_err(|source| SinkError::Io {
                path: tmp.clone(),
                source,
            })?;
            let props = WriterProperties::builder()
                .set_compression(Compression::SNAPPY)
                .build();
            let writer = ArrowWriter::try_new(file, schema(), Some(props))
                .map_err(|e| SinkError::Encode(e.to_string()))?;
            self.open = Some(OpenFile {
                tmp,
                path,
                writer,
                rows: 0,
                opened: Instant::now(),
            });
        }
        let f = self.open.as_mut().expect("opened above");
        f.writer
            .write(&to_batch(rows)?)
            .map_err(|e| SinkError::Encode(e.to_string()))?;
        f.rows += rows.len();
        Ok(())
    }

    fn close_file(&mut self) -> Result<(), SinkError> {
        if let Some(f) = self.open.take() {
            f.writer
                .close()
                .map_err(|e| SinkError::Encode(e.to_string()))?;
            std::fs::rename(&f.tmp, &f.path).map_err(|source| SinkError::Io {
                path: f.path.clone(),
                source,
            })?;
            self.written.push(f.path);
        }
        Ok(())
    }

    /// Closes the open file; returns every file this sink completed.
    pub fn finish(mut self) -> Result<Vec<PathBuf>, SinkError> {
        self.close_file()?;
        Ok(std::mem::take(&mut self.written))
    }
}

/// The incidents (with their row counts) in the completed verdict files of `dir`.
pub fn incidents_in(dir: &Path) -> Result<std::collections::BTreeMap<String, usize>, SinkError> {
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let mut out = std::collections::BTreeMap::new();
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
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
        .collect();
    files.sort();
    for path in files {
        let file = File::open(&path).map_err(|source| SinkError::Io {
            path: path.clone(),
            source,
        })?;
        let reader = ParquetRecordBatchReaderBuilder::try_new(file)
            .and_then(|b| b.build())
            .map_err(|e| SinkError::Encode(format!("{}: {e}", path.display())))?;
        for batch in reader {
            let batch = batch.map_err(|e| SinkError::Encode(e.to_string()))?;
            let col = batch
                .column_by_name("incident")
                .and_then(|c| c.as_any().downcast_ref::<StringArray>())
                .ok_or_else(|| {
                    SinkError::Encode(format!("{}: no incident column", path.display()))
                })?;
            for i in 0..arrow::array::Array::len(col) {
                *out.entry(col.value(i).to_string()).or_insert(0) += 1;
            }
        }
    }
    Ok(out)
}
