//! The sink's durable journal: every verdict-topic record the sink took, one JSON
//! line each, fsync'd before the record's offset is committed.
//!
//! Design constraints:
//! - Parquet files are written whole (the open file is lost on a crash), so the
//!   journal is what makes the sink's output survive a SIGKILL: on restart, every
//!   journaled verdict whose incident is not in a closed Parquet file is written
//!   again, and incidents already in one are not — each row lands exactly once.
//! - A torn last line (a crash mid-append) is cut off on open; its record was never
//!   committed, so the bus delivers it again.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::parquet::SinkError;

/// An append-only JSON-lines journal.
pub struct Journal {
    path: PathBuf,
    file: File,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SinkError + '_ {
    move |source| SinkError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl Journal {
    /// Opens (or creates) the journal; returns it with the complete records it holds.
    pub fn open(path: &Path) -> Result<(Journal, Vec<Vec<u8>>), SinkError> {
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .append(true)
            .open(path)
            .map_err(io(path))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io(path))?;
        let mut records = Vec::new();
        let mut good = 0;
        for line in bytes.split_inclusive(|b| *b == b'\n') {
            let complete = line.last() == Some(&b'\n')
                && serde_json::from_slice::<serde_json::Value>(&line[..line.len() - 1]).is_ok();
            if !complete {
                break;
            }
            good += line.len();
            records.push(line[..line.len() - 1].to_vec());
        }
        if good < bytes.len() {
            tracing::warn!(path = %path.display(), cut = bytes.len() - good, "journal: cutting a torn last record");
            file.set_len(good as u64).map_err(io(path))?;
            file.seek(SeekFrom::End(0)).map_err(io(path))?;
        }
        Ok((
            Journal {
                path: path.to_path_buf(),
                file,
            },
            records,
        ))
    }

    /// Appends one record (a JSON value without newlines) durably.
    pub fn append(&mut self, record: &[u8]) -> Result<(), SinkError> {
        let mut line = Vec::with_capacity(record.len() + 1);
        line.extend(record.iter().filter(|b| **b != b'\n'));
        line.push(b'\n');
        self.file.write_all(&line).map_err(io(&self.path))?;
        self.file.sync_data().map_err(io(&self.path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_survive_reopen_and_a_torn_tail_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        {
            let (mut j, past) = Journal::open(&path).unwrap();
            assert!(past.is_empty());
            j.append(br#"{"incident":"a"}"#).unwrap();
            j.append(br#"{"incident":"b"}"#).unwrap();
        }
        // A crash mid-append leaves half a record.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(br#"{"incid"#)
            .unwrap();
        let (mut j, past) = Journal::open(&path).unwrap();
        assert_eq!(
            past,
            vec![
                br#"{"incident":"a"}"#.to_vec(),
                br#"{"incident":"b"}"#.to_vec()
            ]
        );
        j.append(br#"{"incident":"c"}"#).unwrap();
        drop(j);
        let (_, past) = Journal::open(&path).unwrap();
        assert_eq!(past.len(), 3);
        assert_eq!(past[2], br#"{"incident":"c"}"#.to_vec());
    }
}
