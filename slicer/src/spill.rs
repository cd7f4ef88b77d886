//! The bytes of the messages the slicer holds, kept on disk instead of in memory.
//!
//! A slicer holds every sealed message of its retention horizon (minutes of a
//! warehouse's traffic), but reads a message's bytes only when an incident's slice
//! needs it. So the bytes live in append-only segment files and the slicer keeps, per
//! message, a 12-byte [`Spilled`] locator; what it keeps in memory per message no
//! longer includes the envelope and its receipts.
//!
//! Design constraints:
//! - Segments are anonymous temporary files (unlinked on creation, in the directory
//!   given, by default the system's temporary directory), so a crash leaves nothing
//!   behind and nothing else can open them. The slicer rebuilds its state from its
//!   topics on restart, so the files need no durability: nothing is synced.
//! - Appends are buffered and written once per epoch ([`Spill::flush`]); a message
//!   appended but not yet flushed is read from the buffer.
//! - A segment is closed at [`SEGMENT_BYTES`] and deleted when its last message is
//!   released. Messages are released in about the order they were appended (the
//!   horizon evicts by record time), so disk use follows the horizon, not the run.
//! - Reads go through a small read-ahead cache ([`CACHE_CHUNKS`] chunks of
//!   [`CHUNK_BYTES`]): a window scanned in time order reads each chunk once instead
//!   of issuing one system call per message. Memory is bounded by the cache, the
//!   unflushed buffer and the locators.
//! - An I/O failure is an error of the stage, never a missing message: [`Spill::get`]
//!   returns it, and the caller must not judge with a message it could not read.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt as _;
use std::path::PathBuf;

/// Bytes at which a segment is closed and a new one started.
pub const SEGMENT_BYTES: u32 = 32 << 20;
/// Bytes read at once from a segment: a window scanned in time order costs one
/// system call per ~200 messages, a lookup in id order (a bundle's members) one
/// small read from the page cache.
pub const CHUNK_BYTES: usize = 64 << 10;
/// Chunks the read cache holds.
pub const CACHE_CHUNKS: usize = 16;

/// Where one message's bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spilled {
    segment: u32,
    offset: u32,
    len: u32,
}

struct Segment {
    file: File,
    /// Bytes written to the file.
    written: u32,
    /// Messages appended and not yet released.
    live: usize,
}

/// A chunk of a segment read into memory: (segment, offset, bytes).
type Chunk = (u32, u32, Vec<u8>);

/// Append-only segment files holding message bytes; see the module documentation.
pub struct Spill {
    dir: Option<PathBuf>,
    segments: BTreeMap<u32, Segment>,
    /// The segment appended to, and its bytes not yet written.
    current: u32,
    buffer: Vec<u8>,
    /// Recently read chunks, most recent last.
    cache: RefCell<Vec<Chunk>>,
    /// Chunks read from disk so far.
    disk_reads: std::cell::Cell<u64>,
}

impl Default for Spill {
    fn default() -> Spill {
        Spill::new(None)
    }
}

impl Spill {
    /// A spill whose segments are created in `dir` (default: the system's temporary
    /// directory). No file is created before the first flush.
    pub fn new(dir: Option<PathBuf>) -> Spill {
        Spill {
            dir,
            segments: BTreeMap::new(),
            current: 0,
            buffer: Vec::new(),
            cache: RefCell::new(Vec::new()),
            disk_reads: std::cell::Cell::new(0),
        }
    }

    /// Appends one message's bytes (kept in the buffer until [`Spill::flush`]).
    /// Fails when a segment file cannot be created or a full one written out.
    pub fn put(&mut self, bytes: &[u8]) -> std::io::Result<Spilled> {
        let len = u32::try_from(bytes.len())
            .ok()
            .filter(|l| *l < SEGMENT_BYTES)
            .ok_or_else(|| std::io::Error::other("message larger than a spill segment"))?;
        // `written + buffer` stays at most SEGMENT_BYTES, so offsets fit in u32.
        if let Some(seg) = self.segments.get(&self.current) {
            if seg.written as usize + self.buffer.len() + bytes.len() > SEGMENT_BYTES as usize {
                self.flush()?;
                if self
                    .segments
                    .get(&self.current)
                    .is_some_and(|s| s.live == 0)
                {
                    self.segments.remove(&self.current);
                }
                self.current += 1;
            }
        }
        if !self.segments.contains_key(&self.current) {
            let file = match &self.dir {
                Some(dir) => tempfile::tempfile_in(dir)?,
                None => tempfile::tempfile()?,
            };
            self.segments.insert(
                self.current,
                Segment {
                    file,
                    written: 0,
                    live: 0,
                },
            );
        }
        let Some(seg) = self.segments.get_mut(&self.current) else {
            return Err(std::io::Error::other("spill segment vanished"));
        };
        let offset = seg.written + self.buffer.len() as u32;
        seg.live += 1;
        self.buffer.extend_from_slice(bytes);
        Ok(Spilled {
            segment: self.current,
            offset,
            len,
        })
    }

    /// Writes the buffered bytes to the current segment (at its written length, so
    /// a retry after a failed write lands at the same offsets).
    pub fn flush(&mut self) -> std::io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let Some(seg) = self.segments.get_mut(&self.current) else {
            return Err(std::io::Error::other("spill segment vanished"));
        };
        seg.file
            .write_all_at(&self.buffer, u64::from(seg.written))?;
        seg.written += self.buffer.len() as u32;
        self.buffer.clear();
        Ok(())
    }

    /// Reads one message's bytes back.
    pub fn get(&self, at: Spilled) -> std::io::Result<Vec<u8>> {
        let (start, end) = (at.offset as usize, at.offset as usize + at.len as usize);
        let Some(seg) = self.segments.get(&at.segment) else {
            return Err(std::io::Error::other(format!(
                "spill segment {} was released",
                at.segment
            )));
        };
        if at.segment == self.current && start >= seg.written as usize {
            let from = start - seg.written as usize;
            return self
                .buffer
                .get(from..from + at.len as usize)
                .map(<[u8]>::to_vec)
                .ok_or_else(|| std::io::Error::other("spill locator past the buffer"));
        }
        if end > seg.written as usize {
            return Err(std::io::Error::other("spill locator past its segment"));
        }
        let mut cache = self.cache.borrow_mut();
        let hit = cache.iter().position(|(s, o, b)| {
            *s == at.segment && (*o as usize) <= start && end <= *o as usize + b.len()
        });
        let i = match hit {
            Some(i) => i,
            None => {
                let want = (end - start)
                    .max(CHUNK_BYTES)
                    .min(seg.written as usize - start);
                let mut chunk = vec![0u8; want];
                seg.file.read_exact_at(&mut chunk, start as u64)?;
                self.disk_reads.set(self.disk_reads.get() + 1);
                if cache.len() == CACHE_CHUNKS {
                    cache.remove(0);
                }
                cache.push((at.segment, at.offset, chunk));
                cache.len() - 1
            }
        };
        let (_, o, b) = &cache[i];
        let from = start - *o as usize;
        Ok(b[from..from + at.len as usize].to_vec())
    }

    /// Releases one message's bytes; a closed segment whose messages are all
    /// released is deleted.
    pub fn release(&mut self, at: Spilled) {
        let Some(seg) = self.segments.get_mut(&at.segment) else {
            return;
        };
        seg.live = seg.live.saturating_sub(1);
        if seg.live == 0 && at.segment != self.current {
            self.segments.remove(&at.segment);
            self.cache.borrow_mut().retain(|(s, _, _)| *s != at.segment);
        }
    }

    /// Segment files open now.
    pub fn segments(&self) -> usize {
        self.segments.len()
    }

    /// Bytes on disk now (closed and current segments, written part).
    pub fn disk_bytes(&self) -> u64 {
        self.segments.values().map(|s| u64::from(s.written)).sum()
    }

    /// Chunks read from disk so far.
    pub fn disk_reads(&self) -> u64 {
        self.disk_reads.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(i: usize, len: usize) -> Vec<u8> {
        (0..len).map(|j| (i * 31 + j * 7) as u8).collect()
    }

    #[test]
    fn bytes_read_back_equal_what_was_put_before_and_after_flushes() {
        let mut spill = Spill::default();
        let mut at = Vec::new();
        for i in 0..2_000 {
            let m = message(i, 100 + i % 700);
            at.push((spill.put(&m).unwrap(), m));
            if i % 97 == 0 {
                spill.flush().unwrap();
            }
            // Unflushed and flushed alike.
            let (s, m) = &at[i / 2];
            assert_eq!(&spill.get(*s).unwrap(), m);
        }
        spill.flush().unwrap();
        // Scattered order: the cache never serves bytes of another message.
        for k in 0..at.len() {
            let (s, m) = &at[(k * 7919) % at.len()];
            assert_eq!(&spill.get(*s).unwrap(), m);
        }
        assert!(spill.disk_reads() > 0);
        assert_eq!(spill.segments(), 1);
    }

    #[test]
    fn segments_rotate_and_are_deleted_when_their_messages_are_released() {
        let dir = tempfile::tempdir().unwrap();
        let mut spill = Spill::new(Some(dir.path().to_path_buf()));
        let len = 1 << 20;
        let mut at = Vec::new();
        for i in 0..70 {
            at.push((spill.put(&message(i, len)).unwrap(), i));
            spill.flush().unwrap();
        }
        assert_eq!(spill.segments(), 3, "70 MiB in 32 MiB segments");
        for (s, i) in &at {
            assert_eq!(spill.get(*s).unwrap(), message(*i, len));
        }
        // Anonymous files: nothing visible in the directory.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        for (s, _) in &at[..40] {
            spill.release(*s);
        }
        assert_eq!(spill.segments(), 2, "the first segment is gone");
        assert!(
            spill.get(at[0].0).is_err(),
            "a released segment is an error"
        );
        for (s, i) in &at[40..] {
            assert_eq!(spill.get(*s).unwrap(), message(*i, len));
        }
        for (s, _) in &at[40..] {
            spill.release(*s);
        }
        assert_eq!(spill.segments(), 1, "the current segment stays");
        assert!(spill.disk_bytes() <= u64::from(SEGMENT_BYTES));
    }

    #[test]
    fn an_oversized_message_is_refused() {
        let mut spill = Spill::default();
        assert!(spill.put(&vec![0u8; SEGMENT_BYTES as usize]).is_err());
        assert_eq!(spill.segments(), 0);
    }
}
