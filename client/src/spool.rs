//! The durable local spool: what a publisher accepted and the broker has not
//! acknowledged yet.
//!
//! Design constraints:
//! - One file per item, `<seq, 16 hex>-<e|r>.item` holding the signed bytes
//!   exactly: written to a temp file, fsync'd, renamed, and the directory fsync'd
//!   (`audita_files::write_atomic`),
//!   so after [`Spool::put`] returns the item survives a crash or power loss.
//!   Removal follows the broker's acknowledgement; a removal lost in a crash only
//!   means the item is sent again, which the record dedupes.
//! - Sequence numbers keep the acceptance order; [`Spool::pending`] returns items in
//!   it, so a resend keeps each author's messages in order.
//! - Bounded: at most [`SpoolConfig::max_bytes`] of items; an item that would pass
//!   it is refused. A file that is not a well-formed item (a stray file, a torn temp
//!   file) is left alone and named in a warning, never sent.
//! - One owner: the directory is `flock`ed while a [`Spool`] is open.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};

use crate::ClientError;

/// Default bound of a spool's items together (256 MiB).
pub const DEFAULT_MAX_BYTES: u64 = 256 << 20;
/// Largest single item (an envelope or receipt; the bus's record limit).
pub const MAX_ITEM_BYTES: usize = 1 << 20;

/// Where and how large a spool is.
#[derive(Debug, Clone)]
pub struct SpoolConfig {
    /// The spool directory (created).
    pub dir: PathBuf,
    /// The most bytes of items kept.
    pub max_bytes: u64,
}

impl SpoolConfig {
    /// A spool in `dir` with the default bound.
    pub fn new(dir: impl Into<PathBuf>) -> SpoolConfig {
        SpoolConfig {
            dir: dir.into(),
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }
}

/// Which topic an item goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Lane {
    /// A signed envelope (`audita.envelopes`).
    Envelope,
    /// A delivery receipt (`audita.receipts`).
    Receipt,
}

impl Lane {
    fn letter(self) -> char {
        match self {
            Lane::Envelope => 'e',
            Lane::Receipt => 'r',
        }
    }
}

/// One spooled item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spooled {
    /// Its sequence number.
    pub seq: u64,
    /// Its topic.
    pub lane: Lane,
    /// The signed bytes.
    pub bytes: Vec<u8>,
}

/// An open spool directory.
#[derive(Debug)]
pub struct Spool {
    dir: PathBuf,
    max_bytes: u64,
    next_seq: u64,
    /// Size of each item on disk, by sequence number.
    items: BTreeMap<u64, (Lane, u64)>,
    bytes: u64,
    _lock: File,
}

fn err(path: &Path, reason: impl std::fmt::Display) -> ClientError {
    ClientError::Spool {
        path: path.to_owned(),
        reason: reason.to_string(),
    }
}

fn parse_name(name: &str) -> Option<(u64, Lane)> {
    let stem = name.strip_suffix(".item")?;
    let (seq, lane) = stem.split_once('-')?;
    if seq.len() != 16 {
        return None;
    }
    let seq = u64::from_str_radix(seq, 16).ok()?;
    let lane = match lane {
        "e" => Lane::Envelope,
        "r" => Lane::Receipt,
        _ => return None,
    };
    Some((seq, lane))
}

impl Spool {
    /// Opens (creating) the spool directory and locks it.
    pub fn open(config: &SpoolConfig) -> Result<Spool, ClientError> {
        let dir = &config.dir;
        fs::create_dir_all(dir).map_err(|e| err(dir, e))?;
        let lock_path = dir.join(".lock");
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| err(&lock_path, e))?;
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive).map_err(
            |_| {
                err(
                    dir,
                    "locked by another publisher (one publisher per spool directory)",
                )
            },
        )?;
        let mut items = BTreeMap::new();
        let mut bytes = 0;
        for entry in fs::read_dir(dir).map_err(|e| err(dir, e))? {
            let entry = entry.map_err(|e| err(dir, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == ".lock" || name.ends_with(".tmp") {
                continue;
            }
            let Some((seq, lane)) = parse_name(&name) else {
                tracing::warn!(file = %entry.path().display(), "not a spool item; left alone");
                continue;
            };
            let len = entry.metadata().map_err(|e| err(&entry.path(), e))?.len();
            bytes += len;
            items.insert(seq, (lane, len));
        }
        let next_seq = items.keys().next_back().map_or(0, |s| s + 1);
        Ok(Spool {
            dir: dir.clone(),
            max_bytes: config.max_bytes,
            next_seq,
            items,
            bytes,
            _lock: lock,
        })
    }

    fn path(&self, seq: u64, lane: Lane) -> PathBuf {
        self.dir.join(format!("{seq:016x}-{}.item", lane.letter()))
    }

    /// Keeps `bytes` durably; returns its sequence number.
    pub fn put(&mut self, lane: Lane, bytes: &[u8]) -> Result<u64, ClientError> {
        if bytes.len() > MAX_ITEM_BYTES {
            return Err(err(
                &self.dir,
                format!("item of {} bytes exceeds {MAX_ITEM_BYTES}", bytes.len()),
            ));
        }
        if self.bytes + bytes.len() as u64 > self.max_bytes {
            return Err(ClientError::SpoolFull {
                path: self.dir.clone(),
                bytes: self.bytes,
                max: self.max_bytes,
            });
        }
        let seq = self.next_seq;
        let path = self.path(seq, lane);
        audita_files::write_atomic(&path, bytes).map_err(|e| err(&e.path, e.source))?;
        self.next_seq += 1;
        self.items.insert(seq, (lane, bytes.len() as u64));
        self.bytes += bytes.len() as u64;
        Ok(seq)
    }

    /// Forgets item `seq` (the broker acknowledged it).
    pub fn remove(&mut self, seq: u64) -> Result<(), ClientError> {
        let Some((lane, len)) = self.items.remove(&seq) else {
            return Ok(());
        };
        let path = self.path(seq, lane);
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(err(&path, e)),
        }
        self.bytes -= len;
        Ok(())
    }

    /// Every item kept, in acceptance order.
    pub fn pending(&self) -> Result<Vec<Spooled>, ClientError> {
        self.items
            .iter()
            .map(|(&seq, &(lane, _))| {
                let path = self.path(seq, lane);
                let bytes = fs::read(&path).map_err(|e| err(&path, e))?;
                Ok(Spooled { seq, lane, bytes })
            })
            .collect()
    }

    /// Items kept.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Bytes kept.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_survive_reopening_in_order_and_the_bound_holds() {
        let dir = tempfile::tempdir().unwrap();
        let config = SpoolConfig {
            dir: dir.path().join("s"),
            max_bytes: 100,
        };
        let mut s = Spool::open(&config).unwrap();
        let a = s.put(Lane::Envelope, b"first").unwrap();
        let b = s.put(Lane::Receipt, b"second").unwrap();
        let c = s.put(Lane::Envelope, b"third").unwrap();
        s.remove(b).unwrap();
        assert!(matches!(
            s.put(Lane::Envelope, &[0; 95]),
            Err(ClientError::SpoolFull { .. })
        ));
        // A second publisher cannot take the same spool.
        assert!(Spool::open(&config).is_err());
        drop(s);
        std::fs::write(config.dir.join("stray.txt"), b"x").unwrap();
        let mut s = Spool::open(&config).unwrap();
        let got = s.pending().unwrap();
        assert_eq!(
            got,
            vec![
                Spooled {
                    seq: a,
                    lane: Lane::Envelope,
                    bytes: b"first".to_vec()
                },
                Spooled {
                    seq: c,
                    lane: Lane::Envelope,
                    bytes: b"third".to_vec()
                },
            ]
        );
        assert_eq!(s.bytes(), 10);
        // New items come after the old ones.
        let d = s.put(Lane::Receipt, b"fourth").unwrap();
        assert!(d > c);
        s.remove(a).unwrap();
        s.remove(c).unwrap();
        s.remove(d).unwrap();
        assert!(s.is_empty());
        assert_eq!(s.bytes(), 0);
    }
}
