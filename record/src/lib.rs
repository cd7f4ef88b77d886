//! The on-disk sealed record: a directory any party can verify offline with
//! public keys only.
//!
//! This crate is the format alone (files in, items out, and the writer the sealer
//! stage uses): it links no transport, so an offline verifier (`audita verify`, a
//! fuzz target, a third party's tool) depends on it without the pipeline.
//!
//! Design constraints (format `audita-record v1`; how versions change and which old
//! records every reader must keep reading: `record/FORMAT.md`, with the fixtures in
//! `record/fixtures/`):
//! ```text
//! DIR/FORMAT                         "audita-record v1\n" (exactly)
//! DIR/keys/principals.txt            "<name> <base64 Ed25519 public key>\n" per principal
//! DIR/keys/keepers.txt               same, one line per keeper (checkpoint co-signer)
//! DIR/keys/logs.txt                  same, one line per log (key name = checkpoint origin)
//! DIR/keys/registry/<hex>.json       a principal registry an epoch header names (audita.principals/v1;
//!                                    <hex> = its digest); the latest epoch's gives the principals'
//!                                    keys with their validity windows
//! DIR/segments/envelopes-NNNNNN.seg  framed signed envelopes, in append order
//! DIR/segments/receipts-NNNNNN.seg   framed signed receipts
//! DIR/epochs/epoch-NNNNNN.seg        frame 0: signed epoch header; frames 1..: leaves
//! DIR/checkpoints/checkpoint-NNNNNN.txt  C2SP checkpoint note with keeper co-signatures
//! DIR/payloads/<hex>.ct, <hex>.key   optional payload store: ciphertext and its key
//! DIR/payloads/<hex>.shredded        empty tombstone of a crypto-shredded payload
//! DIR/keys/log.vkey                  the log's C2SP verifier key (type 0x01), one line
//! DIR/keys/keepers.vkey              the keepers' C2SP verifier keys (cosignature/v1, type 0x04)
//! DIR/checkpoint                     the log as a C2SP static tiled log (c2sp.org/tlog-tiles):
//! DIR/tile/<L>/<N>[.p/<W>]           latest checkpoint, hash tiles and entry bundles of the
//! DIR/tile/entries/<N>[.p/<W>]       sealed leaves; written by the sealer after each epoch
//!                                    ([`tiles`]); optional (older records have none)
//! ```
//! - A payload is *shredded* only when its tombstone says so; a `.ct` whose `.key`
//!   is gone without a tombstone is a payload whose key is **missing** (a problem
//!   the verifier names), and a tombstone next to a key contradicts itself (the
//!   directory is not a record).
//! - A `.seg` file is the 8-byte magic `AUDSEG\x01` + kind byte (`E` envelopes,
//!   `R` receipts, `H` epoch), then frames `u32 big-endian length || bytes`.
//!   Frames hold the exact signed bytes; nothing is re-encoded on read.
//! - Reading is tolerant where the evidence can speak for itself: a frame whose
//!   length runs past the end of its file turns the rest of that file into one
//!   undecodable item, which the verifier reports (and whose sealed messages then
//!   show up as missing). A frame shorter than [`MIN_FRAME_BYTES`] cannot hold any
//!   item of the format (the shortest is a leaf with a one-character author), so a
//!   run of consecutive short frames is kept as one undecodable item holding the
//!   run's bytes: damage costs no more memory than its bytes. Only what makes the
//!   directory unreadable as a record — no `FORMAT`, a wrong magic, an unreadable
//!   key file, an I/O error, a limit exceeded — is a [`ReadError`].
//! - Every read is bounded ([`Limits`], each limit a one-line
//!   [`ReadError::TooLarge`] naming the flag that raises it); nothing reads a file
//!   to its end before checking it against a limit, so `/dev/zero` or an endless
//!   FIFO in place of any file ends the read at the limit. Defaults:
//!
//!   | limit | default | flag (`audita verify`, `audita verdict`) |
//!   |---|---|---|
//!   | all files of one record together | 1 GiB | `--max-record-bytes` |
//!   | one frame, and one file that is not a segment (key file, checkpoint note, payload file) | 16 MiB | `--max-frame-bytes` |
//!   | frames in one segment file | 1,048,576 (2^20) | `--max-segment-frames` |
//!   | one input file given on the command line (model, duties, adverse, `--checkpoint`, `--trust`) | 16 MiB | `--max-input-bytes` |
//!
//!   The sealer writes at most `epoch_messages + 1` frames per segment (`audita
//!   load` caps `epoch_messages` at 1,000,000) and a frame is one signed item
//!   (the bus carries at most 16 MiB per record), so every record the pipeline
//!   writes reads under the defaults up to 1 GiB in all. Verification then holds
//!   the record and its partition in memory: about 12x the record's bytes
//!   (BENCHMARKS.md).
//! - Files of one kind are read in file-name order (zero-padded numbers), so the
//!   record order is the append order. `keys/` holds public keys only.
//! - Writing creates files with their final content (no partial updates), each
//!   written atomically and durably (`audita_files::write_atomic`: temporary file,
//!   fsync, rename, fsync of the directory); the streaming sealer stage appends new
//!   numbered files rather than rewriting old ones.

#![warn(missing_docs)]
#![forbid(unsafe_code)]
#![warn(clippy::too_many_lines)]

use std::fs;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

use audita_evidence::store::{PayloadKey, StoredPayload};
use audita_evidence::{
    Hash, KeyRegistry, PayloadStore, PrincipalId, RawEpoch, Record, SealedEpoch, SignedEnvelope,
    VerifyingKey,
};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use thiserror::Error;

pub mod tiles;

/// Content of the `FORMAT` file.
pub const FORMAT_LINE: &str = "audita-record v1\n";
const MAGIC: &[u8; 7] = SEGMENT_MAGIC;

/// The seven bytes every segment (a record file, or a bus record framed like one)
/// starts with; its kind byte follows.
pub const SEGMENT_MAGIC: &[u8; 7] = b"AUDSEG\x01";
/// Maximum frames per segment file written by [`write_record`].
pub const SEGMENT_FRAMES: usize = 4096;
/// The shortest item of any kind: a Merkle leaf with a one-character author
/// (1-byte length, 1 byte of name, 32-byte digest). Envelopes, receipts and epoch
/// headers carry a 64-byte signature and are longer. Shorter frames are damage and
/// are coalesced (see the module doc).
pub const MIN_FRAME_BYTES: usize = 34;

/// Which bound a read exceeded; each is raised by one command-line flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// All bytes of one record ([`Limits::record_bytes`]).
    RecordBytes,
    /// One frame or one non-segment file ([`Limits::frame_bytes`]).
    FrameBytes,
    /// Frames in one segment ([`Limits::segment_frames`]).
    SegmentFrames,
    /// One input file named on the command line (a model, a duty registry, an
    /// adverse declaration, a held checkpoint, a trust file).
    InputBytes,
}

impl Limit {
    /// The `audita` flag that raises this limit.
    pub fn flag(self) -> &'static str {
        match self {
            Limit::RecordBytes => "--max-record-bytes",
            Limit::FrameBytes => "--max-frame-bytes",
            Limit::SegmentFrames => "--max-segment-frames",
            Limit::InputBytes => "--max-input-bytes",
        }
    }
    fn unit(self) -> &'static str {
        match self {
            Limit::RecordBytes => "bytes in all record files",
            Limit::FrameBytes => "bytes per frame or file",
            Limit::SegmentFrames => "frames per segment",
            Limit::InputBytes => "bytes per input file",
        }
    }
}

/// Size limits of every read of untrusted files (defaults in the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// All files of one record together: segments, key files, checkpoint notes,
    /// payload files.
    pub record_bytes: u64,
    /// One segment frame, and one file that is not a segment.
    pub frame_bytes: u64,
    /// Frames in one segment file.
    pub segment_frames: u64,
}

/// Default [`Limits::record_bytes`]: 1 GiB.
pub const DEFAULT_RECORD_BYTES: u64 = 1 << 30;
/// Default [`Limits::frame_bytes`]: 16 MiB, the largest record the bus carries.
pub const DEFAULT_FRAME_BYTES: u64 = 16 << 20;
/// Default [`Limits::segment_frames`]: 2^20 (the sealer writes at most
/// `epoch_messages + 1` frames per segment).
pub const DEFAULT_SEGMENT_FRAMES: u64 = 1 << 20;
/// Default limit of one input file named on the command line: 16 MiB.
pub const DEFAULT_INPUT_BYTES: u64 = 16 << 20;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            record_bytes: DEFAULT_RECORD_BYTES,
            frame_bytes: DEFAULT_FRAME_BYTES,
            segment_frames: DEFAULT_SEGMENT_FRAMES,
        }
    }
}

/// Why a directory cannot be read as a record at all.
#[derive(Debug, Error)]
pub enum ReadError {
    /// An I/O failure (missing directory, permissions). Transient only if the
    /// underlying cause is (e.g. a busy network mount); the verifier treats it as fatal.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// Writing a record file failed (a full disk, permissions): transient unless
    /// the cause is a missing directory.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// The directory is not an `audita-record v1` record. Permanent.
    #[error("{path} is not an audita record: {reason}")]
    NotARecord {
        /// The offending path.
        path: PathBuf,
        /// What is wrong.
        reason: &'static str,
    },
    /// A key file line is malformed. Permanent.
    #[error("{path}:{line}: malformed key line")]
    BadKey {
        /// The key file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
    },
    /// A read exceeded one of its [`Limits`]. Permanent for these limits; raising
    /// the limit (the flag named) is the only remedy.
    #[error("{path}: too large (limit {limit} {}, raise with {})", .what.unit(), .what.flag())]
    TooLarge {
        /// The file being read when the limit was hit.
        path: PathBuf,
        /// Which limit.
        what: Limit,
        /// Its value.
        limit: u64,
    },
}

impl ReadError {
    /// Whether retrying could help (only for I/O errors other than not-found).
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Io { source, .. } | Self::Write { source, .. } if source.kind() != io::ErrorKind::NotFound)
    }
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> ReadError + '_ {
    move |source| ReadError::Io {
        path: path.to_owned(),
        source,
    }
}

fn too_large(path: &Path, what: Limit, limit: u64) -> ReadError {
    ReadError::TooLarge {
        path: path.to_owned(),
        what,
        limit,
    }
}

/// Maps a failed bounded read of `path` into a [`ReadError`].
fn bounded_err(
    path: &Path,
    what: Limit,
) -> impl FnOnce(audita_files::ReadBoundedError) -> ReadError + '_ {
    move |e| match e {
        audita_files::ReadBoundedError::Io(source) => io_err(path)(source),
        audita_files::ReadBoundedError::TooLarge { limit } => too_large(path, what, limit),
    }
}

/// Reads at most `limit` bytes from `r`; more is [`ReadError::TooLarge`] (`what`,
/// reported against `path`). Never holds more than `limit + 1` bytes, so an endless
/// stream ends at the limit ([`audita_files::read_bounded_from`]).
pub fn read_bounded_from(
    r: impl Read,
    path: &Path,
    limit: u64,
    what: Limit,
) -> Result<Vec<u8>, ReadError> {
    audita_files::read_bounded_from(r, limit).map_err(bounded_err(path, what))
}

/// Reads a whole file of at most `limit` bytes — the one bounded file read every
/// reader of untrusted files uses (record files, and the CLI's input files with
/// [`Limit::InputBytes`]; [`audita_files::read_bounded`]). A regular file longer
/// than the limit fails before any byte is read; anything else (a FIFO,
/// `/dev/zero`) fails once `limit + 1` bytes arrived.
pub fn read_bounded(path: &Path, limit: u64, what: Limit) -> Result<Vec<u8>, ReadError> {
    audita_files::read_bounded(path, limit).map_err(bounded_err(path, what))
}

/// The byte budget of one record read: every file read draws on it.
#[derive(Debug)]
struct Budget {
    limits: Limits,
    left: u64,
}

impl Budget {
    fn new(limits: Limits) -> Self {
        Budget {
            limits,
            left: limits.record_bytes,
        }
    }

    /// Reads one non-segment file under the per-file limit and the record budget.
    fn file(&mut self, path: &Path) -> Result<Vec<u8>, ReadError> {
        let (limit, what) = self.file_limit();
        let bytes = read_bounded(path, limit, what).map_err(|e| match e {
            // Report the record's limit, not what was left of it.
            ReadError::TooLarge {
                path,
                what: Limit::RecordBytes,
                ..
            } => too_large(&path, Limit::RecordBytes, self.limits.record_bytes),
            e => e,
        })?;
        self.left -= bytes.len() as u64;
        Ok(bytes)
    }

    /// Like [`Budget::file`], but a missing file is `None`.
    fn optional_file(&mut self, path: &Path) -> Result<Option<Vec<u8>>, ReadError> {
        match self.file(path) {
            Ok(b) => Ok(Some(b)),
            Err(ReadError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    fn file_limit(&self) -> (u64, Limit) {
        if self.limits.frame_bytes <= self.left {
            (self.limits.frame_bytes, Limit::FrameBytes)
        } else {
            (self.left, Limit::RecordBytes)
        }
    }

    /// Reads one segment file frame by frame (see [`read_segment`]).
    fn segment(&mut self, path: &Path, kind: u8) -> Result<Vec<Vec<u8>>, ReadError> {
        let file = fs::File::open(path).map_err(io_err(path))?;
        if let Ok(meta) = file.metadata() {
            if meta.is_file() && meta.len() > self.left {
                return Err(too_large(
                    path,
                    Limit::RecordBytes,
                    self.limits.record_bytes,
                ));
            }
        }
        let mut counted = Counted {
            inner: BufReader::with_capacity(64 << 10, file.take(self.left.saturating_add(1))),
            read: 0,
        };
        let frames = read_segment(&mut counted, kind, path, &self.limits)?;
        if counted.read > self.left {
            return Err(too_large(
                path,
                Limit::RecordBytes,
                self.limits.record_bytes,
            ));
        }
        self.left -= counted.read;
        Ok(frames)
    }
}

/// A reader that counts the bytes it delivered.
struct Counted<R> {
    inner: R,
    read: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

/// Reads into `buf` until it holds `want` bytes or the input ends; the bytes read.
fn read_up_to(r: &mut impl Read, buf: &mut Vec<u8>, want: u64) -> io::Result<u64> {
    let before = buf.len();
    r.by_ref().take(want).read_to_end(buf)?;
    Ok((buf.len() - before) as u64)
}

/// Reads the frames of one segment from a stream (format in the module doc): the
/// magic, then frames, each checked against `limits` as it arrives, so memory never
/// exceeds what the limits allow however long the stream is. A frame whose length
/// runs past the end of the input becomes one item holding the rest (length
/// included); a run of frames shorter than [`MIN_FRAME_BYTES`] becomes one item
/// holding the run's bytes.
pub fn read_segment(
    r: &mut impl Read,
    kind: u8,
    path: &Path,
    limits: &Limits,
) -> Result<Vec<Vec<u8>>, ReadError> {
    let mut magic = Vec::with_capacity(8);
    read_up_to(r, &mut magic, 8).map_err(io_err(path))?;
    if magic.len() < 8 || &magic[..7] != MAGIC || magic[7] != kind {
        return Err(ReadError::NotARecord {
            path: path.to_owned(),
            reason: "bad segment magic",
        });
    }
    let mut frames = Vec::new();
    let mut run: Option<Vec<u8>> = None;
    let mut count: u64 = 0;
    loop {
        let mut item = Vec::with_capacity(4);
        let got = read_up_to(r, &mut item, 4).map_err(io_err(path))?;
        if got == 0 {
            break;
        }
        count += 1;
        if count > limits.segment_frames {
            return Err(too_large(path, Limit::SegmentFrames, limits.segment_frames));
        }
        if got < 4 {
            // A torn length: the rest of the file is one item.
            frames.extend(run.take());
            frames.push(item);
            break;
        }
        let len = u64::from(u32::from_be_bytes([item[0], item[1], item[2], item[3]]));
        let want = len.min(limits.frame_bytes.saturating_add(1));
        let got = read_up_to(r, &mut item, want).map_err(io_err(path))?;
        if got < want {
            // The frame runs past the end: the rest of the file is one item.
            frames.extend(run.take());
            frames.push(item);
            break;
        }
        if len > limits.frame_bytes {
            return Err(too_large(path, Limit::FrameBytes, limits.frame_bytes));
        }
        if (len as usize) < MIN_FRAME_BYTES {
            run.get_or_insert_with(Vec::new).extend_from_slice(&item);
            continue;
        }
        frames.extend(run.take());
        item.drain(..4);
        frames.push(item);
    }
    frames.extend(run);
    Ok(frames)
}

/// Encodes frames into a segment file body.
pub fn encode_segment(kind: u8, frames: &[&[u8]]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.push(kind);
    for f in frames {
        out.extend_from_slice(&(f.len() as u32).to_be_bytes());
        out.extend_from_slice(f);
    }
    out
}

/// Splits an in-memory segment body (a bus record framed like a segment) into
/// frames. A truncated or overlong last frame becomes one frame holding the
/// remaining bytes, so the damage is reported rather than hidden. Frames of any
/// length are kept as they are (bus records carry legitimately short frames); the
/// number of frames is bounded by the input (each costs at least 4 bytes).
pub fn decode_segment(kind: u8, bytes: &[u8], path: &Path) -> Result<Vec<Vec<u8>>, ReadError> {
    if bytes.len() < 8 || &bytes[..7] != MAGIC || bytes[7] != kind {
        return Err(ReadError::NotARecord {
            path: path.to_owned(),
            reason: "bad segment magic",
        });
    }
    let mut frames = Vec::new();
    let mut pos = 8;
    while pos < bytes.len() {
        let rest = &bytes[pos..];
        if rest.len() < 4 {
            frames.push(rest.to_vec());
            break;
        }
        let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        if len > rest.len() - 4 {
            frames.push(rest.to_vec());
            break;
        }
        frames.push(rest[4..4 + len].to_vec());
        pos += 4 + len;
    }
    Ok(frames)
}

/// Every record file also counts this many bytes against the record budget, so a
/// directory of many empty files (tombstones, blank checkpoints) is bounded too.
const FILE_COST: u64 = 256;

/// The files `dir/prefix*suffix` in name order; `charge` is called once per match
/// as the listing goes (so a huge directory stops at the budget, not after it).
fn list_with(
    dir: &Path,
    prefix: &str,
    suffix: &str,
    mut charge: impl FnMut(&Path) -> Result<(), ReadError>,
) -> Result<Vec<PathBuf>, ReadError> {
    let mut out = Vec::new();
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(io_err(dir)(e)),
    };
    for entry in entries {
        let entry = entry.map_err(io_err(dir))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(prefix) && name.ends_with(suffix) {
            let path = entry.path();
            charge(&path)?;
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

fn list(dir: &Path, prefix: &str, suffix: &str) -> Result<Vec<PathBuf>, ReadError> {
    list_with(dir, prefix, suffix, |_| Ok(()))
}

impl Budget {
    /// [`list_with`] charging [`FILE_COST`] per file.
    fn list(&mut self, dir: &Path, prefix: &str, suffix: &str) -> Result<Vec<PathBuf>, ReadError> {
        list_with(dir, prefix, suffix, |path| {
            if self.left < FILE_COST {
                return Err(too_large(
                    path,
                    Limit::RecordBytes,
                    self.limits.record_bytes,
                ));
            }
            self.left -= FILE_COST;
            Ok(())
        })
    }
}

fn read_keys(path: &Path, budget: &mut Budget) -> Result<Vec<(String, VerifyingKey)>, ReadError> {
    let text = budget.file(path)?;
    let text = String::from_utf8(text).map_err(|_| ReadError::BadKey {
        path: path.to_owned(),
        line: 0,
    })?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let bad = || ReadError::BadKey {
            path: path.to_owned(),
            line: i + 1,
        };
        let (name, b64) = line.split_once(' ').ok_or_else(bad)?;
        let raw = STANDARD.decode(b64).map_err(|_| bad())?;
        let raw: [u8; 32] = raw.try_into().map_err(|_| bad())?;
        let key = VerifyingKey::from_bytes(&raw).map_err(|_| bad())?;
        out.push((name.to_owned(), key));
    }
    Ok(out)
}

fn key_lines<'a>(keys: impl Iterator<Item = (&'a str, &'a VerifyingKey)>) -> String {
    keys.map(|(n, k)| format!("{n} {}\n", STANDARD.encode(k.as_bytes())))
        .collect()
}

/// A record directory read one file at a time, for stages that must not hold the
/// whole record in memory (the sealer's restart). Each file is read under the
/// per-frame and per-segment [`Limits`]; there is no total budget (the stream never
/// holds more than one file).
pub struct Stream {
    files: std::vec::IntoIter<PathBuf>,
    kind: u8,
    current: std::vec::IntoIter<Vec<u8>>,
}

/// Limits of a one-file-at-a-time read: the defaults without a total.
fn streaming_budget() -> Budget {
    Budget::new(Limits {
        record_bytes: u64::MAX,
        ..Limits::default()
    })
}

impl Stream {
    /// The frames of every `sub/prefix*.seg` file of kind `kind`, in record order.
    pub fn segments(dir: &Path, sub: &str, prefix: &str, kind: u8) -> Result<Stream, ReadError> {
        Ok(Stream {
            files: list(&dir.join(sub), prefix, ".seg")?.into_iter(),
            kind,
            current: Vec::new().into_iter(),
        })
    }

    /// The next whole file's frames (one epoch: header, then leaves).
    pub fn next_file(&mut self) -> Option<Result<Vec<Vec<u8>>, ReadError>> {
        let path = self.files.next()?;
        Some(streaming_budget().segment(&path, self.kind))
    }
}

impl Iterator for Stream {
    type Item = Result<Vec<u8>, ReadError>;
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(f) = self.current.next() {
                return Some(Ok(f));
            }
            match self.next_file()? {
                Ok(frames) => self.current = frames.into_iter(),
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

/// The newest checkpoint note of a record directory, if any.
pub fn last_checkpoint(dir: &Path) -> Result<Option<Vec<u8>>, ReadError> {
    match list(&dir.join("checkpoints"), "checkpoint-", ".txt")?.last() {
        Some(path) => Ok(Some(streaming_budget().file(path)?)),
        None => Ok(None),
    }
}

/// The frames of the newest receipts segment, if any.
pub fn last_receipts(dir: &Path) -> Result<Vec<Vec<u8>>, ReadError> {
    match list(&dir.join("segments"), "receipts-", ".seg")?.last() {
        Some(path) => streaming_budget().segment(path, b'R'),
        None => Ok(Vec::new()),
    }
}

/// Reads the public keys of a record directory (default [`Limits`]).
pub fn read_registry(dir: &Path) -> Result<KeyRegistry, ReadError> {
    registry(dir, &mut Budget::new(Limits::default()))
}

fn registry(dir: &Path, budget: &mut Budget) -> Result<KeyRegistry, ReadError> {
    let mut keys = KeyRegistry::new();
    let kdir = dir.join("keys");
    for (name, key) in read_keys(&kdir.join("principals.txt"), budget)? {
        let id = PrincipalId::new(name).map_err(|_| ReadError::BadKey {
            path: kdir.join("principals.txt"),
            line: 0,
        })?;
        keys.add_principal(id, key);
    }
    for (name, key) in read_keys(&kdir.join("keepers.txt"), budget)? {
        keys.add_keeper(&name, key).map_err(|_| ReadError::BadKey {
            path: kdir.join("keepers.txt"),
            line: 0,
        })?;
    }
    for (name, key) in read_keys(&kdir.join("logs.txt"), budget)? {
        keys.add_log(&name, key).map_err(|_| ReadError::BadKey {
            path: kdir.join("logs.txt"),
            line: 0,
        })?;
    }
    Ok(keys)
}

/// A record directory as read: the raw record, its public keys and its optional
/// payload store.
#[derive(Debug)]
pub struct RecordDir {
    /// The raw record.
    pub record: Record,
    /// The public keys of `keys/`.
    pub keys: KeyRegistry,
    /// The payload store of `payloads/`, if the directory has one.
    pub payloads: Option<PayloadStore>,
}

/// Reads a whole record directory — record, keys and payload store — under one
/// byte budget ([`Limits`]): the one entry point of everything that reads a record
/// directory whole (`audita verify`, `audita verdict`, `audita demo`).
pub fn read_dir(dir: &Path, limits: &Limits) -> Result<RecordDir, ReadError> {
    let mut budget = Budget::new(*limits);
    let (record, keys) = record(dir, &mut budget)?;
    let payloads = payloads(dir, &mut budget)?;
    Ok(RecordDir {
        record,
        keys,
        payloads,
    })
}

/// Reads a record directory: the raw record and its public keys (default
/// [`Limits`]; see [`read_dir`]).
pub fn read_record(dir: &Path) -> Result<(Record, KeyRegistry), ReadError> {
    record(dir, &mut Budget::new(Limits::default()))
}

fn record(dir: &Path, budget: &mut Budget) -> Result<(Record, KeyRegistry), ReadError> {
    let format_path = dir.join("FORMAT");
    let format = read_bounded(&format_path, 64, Limit::FrameBytes).map_err(|e| match e {
        ReadError::TooLarge { path, .. } => ReadError::NotARecord {
            path,
            reason: "unknown FORMAT",
        },
        e => e,
    })?;
    if format != FORMAT_LINE.as_bytes() {
        return Err(ReadError::NotARecord {
            path: format_path,
            reason: "unknown FORMAT",
        });
    }
    let keys = registry(dir, budget)?;
    let mut record = Record::new();
    for path in budget.list(&dir.join("segments"), "envelopes-", ".seg")? {
        record.envelopes.extend(budget.segment(&path, b'E')?);
    }
    for path in budget.list(&dir.join("segments"), "receipts-", ".seg")? {
        record.receipts.extend(budget.segment(&path, b'R')?);
    }
    for path in budget.list(&dir.join("epochs"), "epoch-", ".seg")? {
        let mut frames = budget.segment(&path, b'H')?.into_iter();
        let header = frames.next().unwrap_or_default();
        record.epochs.push(RawEpoch {
            header,
            leaves: frames.collect(),
        });
    }
    for path in budget.list(&dir.join("checkpoints"), "checkpoint-", ".txt")? {
        record.checkpoints.push(budget.file(&path)?);
    }
    let keys = with_registry_in_force(dir, &record, keys, budget)?;
    Ok((record, keys))
}

/// The principal keys of the registry the record's latest epoch names (its file
/// `keys/registry/<hex>.json`, whose digest must match its name), with their
/// validity windows, in place of `keys/principals.txt`'s; keepers and logs are kept.
/// Registries only ever add keys and close windows, so the latest one judges every
/// epoch. Without a named registry file the record's own principal list stands
/// (`audita verify` reports a named registry whose file is absent).
fn with_registry_in_force(
    dir: &Path,
    record: &Record,
    keys: KeyRegistry,
    budget: &mut Budget,
) -> Result<KeyRegistry, ReadError> {
    let latest = record
        .epochs
        .iter()
        .filter_map(|e| audita_evidence::EpochHeader::decode(e.header.clone()).ok())
        .max_by_key(|h| h.number)
        .map(|h| h.registry)
        .filter(|d| *d != [0u8; 32]);
    let Some(digest) = latest else {
        return Ok(keys);
    };
    let path = registry_path(dir, &digest);
    if !path.exists() {
        return Ok(keys);
    }
    let bad = |reason: &'static str| ReadError::NotARecord {
        path: path.clone(),
        reason,
    };
    let bytes = budget.file(&path)?;
    let text = String::from_utf8(bytes).map_err(|_| bad("registry is not UTF-8"))?;
    let reg = audita_evidence::PrincipalRegistry::from_json(&text)
        .map_err(|_| bad("registry does not parse"))?;
    if reg.digest() != digest {
        return Err(bad("registry digest does not match its file name"));
    }
    let mut out = reg
        .key_registry()
        .map_err(|_| bad("registry keys do not parse"))?;
    for (n, k) in keys.keepers() {
        out.add_keeper(n, *k).map_err(|_| bad("keeper name"))?;
    }
    for (n, k) in keys.logs() {
        out.add_log(n, *k).map_err(|_| bad("log name"))?;
    }
    Ok(out)
}

/// Where a record keeps the registry with `digest`.
pub fn registry_path(dir: &Path, digest: &Hash) -> PathBuf {
    dir.join("keys/registry")
        .join(format!("{}.json", hex::encode(digest)))
}

/// Reads the optional payload store of a record directory (default [`Limits`];
/// see [`read_dir`]).
pub fn read_payloads(dir: &Path) -> Result<Option<PayloadStore>, ReadError> {
    payloads(dir, &mut Budget::new(Limits::default()))
}

fn digest_of(path: &Path) -> Result<(String, Hash), ReadError> {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    match hex::decode_to_array(&stem) {
        Some(d) => Ok((stem, d)),
        None => Err(ReadError::NotARecord {
            path: path.to_owned(),
            reason: "payload file name is not a hex digest",
        }),
    }
}

fn payloads(dir: &Path, budget: &mut Budget) -> Result<Option<PayloadStore>, ReadError> {
    let pdir = dir.join("payloads");
    if !pdir.exists() {
        return Ok(None);
    }
    let mut store = PayloadStore::new();
    let mut tombstones = std::collections::BTreeSet::new();
    for path in budget.list(&pdir, "", ".shredded")? {
        let (stem, digest) = digest_of(&path)?;
        if !budget.file(&path)?.is_empty() {
            return Err(ReadError::NotARecord {
                path,
                reason: "shredded tombstone is not empty",
            });
        }
        if pdir.join(format!("{stem}.key")).exists() {
            return Err(ReadError::NotARecord {
                path,
                reason: "a shredded payload still has its key",
            });
        }
        tombstones.insert(digest);
        store.insert(
            digest,
            StoredPayload {
                ciphertext: Vec::new(),
                key: PayloadKey::Shredded,
            },
        );
    }
    for path in budget.list(&pdir, "", ".ct")? {
        let (stem, digest) = digest_of(&path)?;
        let ciphertext = budget.file(&path)?;
        let key_path = pdir.join(format!("{stem}.key"));
        let key = match budget.optional_file(&key_path)? {
            Some(k) => PayloadKey::Key(k.try_into().map_err(|_| ReadError::NotARecord {
                path: key_path.clone(),
                reason: "key is not 32 bytes",
            })?),
            None if tombstones.contains(&digest) => PayloadKey::Shredded,
            // The key is gone but nothing recorded its destruction.
            None => PayloadKey::Missing,
        };
        store.insert(digest, StoredPayload { ciphertext, key });
    }
    Ok(Some(store))
}

mod hex {
    pub fn decode_to_array(s: &str) -> Option<[u8; 32]> {
        if s.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, chunk) in s.as_bytes().chunks(2).enumerate() {
            let hi = (chunk[0] as char).to_digit(16)?;
            let lo = (chunk[1] as char).to_digit(16)?;
            out[i] = (hi * 16 + lo) as u8;
        }
        Some(out)
    }
    pub fn encode(d: &[u8]) -> String {
        d.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Incremental writer of a record directory, used by the sealer stage and by
/// `audita sample-record`.
#[derive(Debug)]
pub struct RecordWriter {
    dir: PathBuf,
    envelope_segments: usize,
    receipt_segments: usize,
    epochs: usize,
    checkpoints: usize,
}

/// Writes `bytes` to `path` atomically and durably ([`audita_files::write_atomic`]:
/// a hidden `.tmp` sibling is written and synced, renamed, and the directory
/// synced), so a crash (even SIGKILL) never leaves a half-written record file.
fn write_file(path: &Path, bytes: &[u8]) -> Result<(), ReadError> {
    audita_files::write_atomic(path, bytes).map_err(|e| ReadError::Write {
        path: e.path,
        source: e.source,
    })
}

impl RecordWriter {
    /// Creates the directory layout and writes `FORMAT` and the public keys.
    pub fn create(dir: &Path, keys: &KeyRegistry) -> Result<Self, ReadError> {
        for sub in ["keys", "segments", "epochs", "checkpoints"] {
            let p = dir.join(sub);
            fs::create_dir_all(&p).map_err(io_err(&p))?;
        }
        write_file(&dir.join("FORMAT"), FORMAT_LINE.as_bytes())?;
        write_file(
            &dir.join("keys/principals.txt"),
            key_lines(keys.principals().map(|(n, k)| (n.as_str(), k))).as_bytes(),
        )?;
        write_file(
            &dir.join("keys/keepers.txt"),
            key_lines(keys.keepers().map(|(n, k)| (n.as_str(), k))).as_bytes(),
        )?;
        write_file(
            &dir.join("keys/logs.txt"),
            key_lines(keys.logs().map(|(n, k)| (n.as_str(), k))).as_bytes(),
        )?;
        tiles::write_vkeys(dir, keys)?;
        Ok(Self {
            dir: dir.to_owned(),
            envelope_segments: 0,
            receipt_segments: 0,
            epochs: 0,
            checkpoints: 0,
        })
    }
    /// Stores the principal registry `reg` under its digest (`keys/registry/<hex>.json`;
    /// written once, atomically), so an offline verifier holds every registry an
    /// epoch header names. Also refreshes `keys/principals.txt` to its current keys.
    pub fn write_registry(
        &mut self,
        reg: &audita_evidence::PrincipalRegistry,
    ) -> Result<(), ReadError> {
        let path = registry_path(&self.dir, &reg.digest());
        if !path.exists() {
            let rdir = self.dir.join("keys/registry");
            fs::create_dir_all(&rdir).map_err(io_err(&rdir))?;
            write_file(&path, reg.to_json_pretty().as_bytes())?;
        }
        let keys = reg.key_registry().map_err(|_| ReadError::NotARecord {
            path: path.clone(),
            reason: "registry keys do not parse",
        })?;
        write_file(
            &self.dir.join("keys/principals.txt"),
            key_lines(keys.principals().map(|(n, k)| (n.as_str(), k))).as_bytes(),
        )
    }
    /// Reopens an existing record directory for appending (e.g. after a restart of
    /// the sealer stage): numbering continues after the files already present, so
    /// nothing written before is rewritten.
    pub fn open(dir: &Path) -> Result<Self, ReadError> {
        let format_path = dir.join("FORMAT");
        let format = fs::read(&format_path).map_err(io_err(&format_path))?;
        if format != FORMAT_LINE.as_bytes() {
            return Err(ReadError::NotARecord {
                path: format_path,
                reason: "unknown FORMAT",
            });
        }
        Ok(Self {
            dir: dir.to_owned(),
            envelope_segments: list(&dir.join("segments"), "envelopes-", ".seg")?.len(),
            receipt_segments: list(&dir.join("segments"), "receipts-", ".seg")?.len(),
            epochs: list(&dir.join("epochs"), "epoch-", ".seg")?.len(),
            checkpoints: list(&dir.join("checkpoints"), "checkpoint-", ".txt")?.len(),
        })
    }
    /// Writes one segment of envelopes (raw signed bytes).
    pub fn write_envelopes(&mut self, frames: &[&[u8]]) -> Result<(), ReadError> {
        let path = self.dir.join(format!(
            "segments/envelopes-{:06}.seg",
            self.envelope_segments
        ));
        self.envelope_segments += 1;
        write_file(&path, &encode_segment(b'E', frames))
    }
    /// Writes one segment of receipts (raw signed bytes).
    pub fn write_receipts(&mut self, frames: &[&[u8]]) -> Result<(), ReadError> {
        let path = self.dir.join(format!(
            "segments/receipts-{:06}.seg",
            self.receipt_segments
        ));
        self.receipt_segments += 1;
        write_file(&path, &encode_segment(b'R', frames))
    }
    /// Writes a raw epoch (header and leaves).
    pub fn write_raw_epoch(&mut self, epoch: &RawEpoch) -> Result<(), ReadError> {
        let mut frames: Vec<&[u8]> = vec![&epoch.header];
        frames.extend(epoch.leaves.iter().map(Vec::as_slice));
        let path = self
            .dir
            .join(format!("epochs/epoch-{:06}.seg", self.epochs));
        self.epochs += 1;
        write_file(&path, &encode_segment(b'H', &frames))
    }
    /// Writes a checkpoint note.
    pub fn write_checkpoint(&mut self, note: &[u8]) -> Result<(), ReadError> {
        let path = self.dir.join(format!(
            "checkpoints/checkpoint-{:06}.txt",
            self.checkpoints
        ));
        self.checkpoints += 1;
        write_file(&path, note)
    }
    /// Replaces checkpoint note `index` (atomically) by a version of it carrying more
    /// co-signatures: a keeper that was down co-signed it after it was written. The
    /// caller keeps the note's body and its log signature; only notes already written
    /// can be replaced.
    pub fn replace_checkpoint(&mut self, index: u64, note: &[u8]) -> Result<(), ReadError> {
        let path = self
            .dir
            .join(format!("checkpoints/checkpoint-{index:06}.txt"));
        if index >= self.checkpoints as u64 || !path.exists() {
            return Err(ReadError::NotARecord {
                path,
                reason: "no such checkpoint to replace",
            });
        }
        write_file(&path, note)
    }
    /// Writes a sealed epoch and its (co-signed) checkpoint.
    pub fn write_epoch(&mut self, epoch: &SealedEpoch) -> Result<(), ReadError> {
        self.write_raw_epoch(&RawEpoch {
            header: epoch.header.as_bytes().to_vec(),
            leaves: epoch.leaves.iter().map(|l| l.leaf_bytes()).collect(),
        })?;
        self.write_checkpoint(epoch.checkpoint.to_text().as_bytes())
    }
    /// Writes a payload store (ciphertexts, and keys not yet shredded).
    pub fn write_payloads(&mut self, store: &PayloadStore) -> Result<(), ReadError> {
        let pdir = self.dir.join("payloads");
        fs::create_dir_all(&pdir).map_err(io_err(&pdir))?;
        for (digest, entry) in store.entries() {
            let name = hex::encode(digest);
            match entry.key {
                PayloadKey::Key(k) => {
                    write_file(&pdir.join(format!("{name}.ct")), &entry.ciphertext)?;
                    write_file(&pdir.join(format!("{name}.key")), &k)?;
                }
                // A shredded payload leaves an empty tombstone: nothing that can
                // no longer be checked stays in the record.
                PayloadKey::Shredded => write_file(&pdir.join(format!("{name}.shredded")), b"")?,
                // A key lost before writing: the ciphertext alone (read back as
                // a missing key, as it was).
                PayloadKey::Missing => {
                    write_file(&pdir.join(format!("{name}.ct")), &entry.ciphertext)?
                }
            }
        }
        Ok(())
    }
    /// Convenience: appends signed envelopes as segments of [`SEGMENT_FRAMES`].
    pub fn write_signed_envelopes(&mut self, envs: &[SignedEnvelope]) -> Result<(), ReadError> {
        for chunk in envs.chunks(SEGMENT_FRAMES) {
            let frames: Vec<&[u8]> = chunk.iter().map(SignedEnvelope::as_bytes).collect();
            self.write_envelopes(&frames)?;
        }
        Ok(())
    }
}

/// Writes a whole raw record (segments of at most [`SEGMENT_FRAMES`] frames).
pub fn write_record(dir: &Path, record: &Record, keys: &KeyRegistry) -> Result<(), ReadError> {
    let mut w = RecordWriter::create(dir, keys)?;
    for chunk in record.envelopes.chunks(SEGMENT_FRAMES) {
        let frames: Vec<&[u8]> = chunk.iter().map(Vec::as_slice).collect();
        w.write_envelopes(&frames)?;
    }
    for chunk in record.receipts.chunks(SEGMENT_FRAMES) {
        let frames: Vec<&[u8]> = chunk.iter().map(Vec::as_slice).collect();
        w.write_receipts(&frames)?;
    }
    for e in &record.epochs {
        w.write_raw_epoch(e)?;
    }
    for c in &record.checkpoints {
        w.write_checkpoint(c)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use audita_evidence::sample::sample_record;
    use audita_evidence::verify_record;

    #[test]
    fn write_then_read_is_identity_and_certifies() {
        let s = sample_record(1, 30);
        let dir = tempfile::tempdir().unwrap();
        write_record(dir.path(), &s.record, &s.keys).unwrap();
        let (record, keys) = read_record(dir.path()).unwrap();
        assert_eq!(record, s.record);
        assert_eq!(keys, s.keys);
        assert!(verify_record(&record, &keys).is_clean());
    }

    #[test]
    fn reopened_writer_appends_after_existing_files() {
        let s = sample_record(6, 16);
        let dir = tempfile::tempdir().unwrap();
        let mut w = RecordWriter::create(dir.path(), &s.keys).unwrap();
        let (first, rest) = s.epochs.split_at(1);
        let n0 = first[0].leaves.len();
        w.write_signed_envelopes(&s.envelopes[..n0]).unwrap();
        let r: Vec<&[u8]> = s.receipts[..n0].iter().map(|r| r.as_bytes()).collect();
        w.write_receipts(&r).unwrap();
        w.write_epoch(&first[0]).unwrap();
        drop(w);
        let mut w = RecordWriter::open(dir.path()).unwrap();
        w.write_signed_envelopes(&s.envelopes[n0..]).unwrap();
        let r: Vec<&[u8]> = s.receipts[n0..].iter().map(|r| r.as_bytes()).collect();
        w.write_receipts(&r).unwrap();
        for e in rest {
            w.write_epoch(e).unwrap();
        }
        let (record, keys) = read_record(dir.path()).unwrap();
        assert!(verify_record(&record, &keys).is_clean());
        assert_eq!(record.envelopes, s.record.envelopes);
    }

    fn read(bytes: &[u8], limits: &Limits) -> Result<Vec<Vec<u8>>, ReadError> {
        read_segment(&mut &bytes[..], b'E', Path::new("x"), limits)
    }

    #[test]
    fn min_frame_bytes_is_the_shortest_item() {
        let id = audita_evidence::MessageId {
            author: PrincipalId::new("a").unwrap(),
            digest: [7; 32],
        };
        assert_eq!(id.leaf_bytes().len(), MIN_FRAME_BYTES);
        let s = sample_record(1, 4);
        let shortest = [
            &s.record.envelopes,
            &s.record.receipts,
            &s.record.checkpoints,
        ]
        .into_iter()
        .flatten()
        .map(Vec::len)
        .chain(s.record.epochs.iter().map(|e| e.header.len()))
        .min()
        .unwrap();
        assert!(shortest > MIN_FRAME_BYTES);
    }

    #[test]
    fn streamed_segment_equals_the_in_memory_decoder_on_honest_frames() {
        let frames: Vec<Vec<u8>> = (0..50).map(|i| vec![i as u8; 34 + i * 7]).collect();
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        let seg = encode_segment(b'E', &refs);
        assert_eq!(read(&seg, &Limits::default()).unwrap(), frames);
        assert_eq!(decode_segment(b'E', &seg, Path::new("x")).unwrap(), frames);
        // A truncated last frame: the rest of the file (length included) is one item.
        let cut = &seg[..seg.len() - 3];
        let got = read(cut, &Limits::default()).unwrap();
        assert_eq!(got[..49], frames[..49]);
        assert_eq!(got[49].len(), 4 + frames[49].len() - 3);
    }

    #[test]
    fn a_run_of_short_frames_is_one_item_of_its_bytes() {
        let long = vec![9u8; 40];
        let seg = encode_segment(b'E', &[&long, b"", b"", b"abc", &long, b"", &long, b"x"]);
        let got = read(&seg, &Limits::default()).unwrap();
        assert_eq!(
            got,
            vec![
                long.clone(),
                [
                    &0u32.to_be_bytes()[..],
                    &0u32.to_be_bytes()[..],
                    &3u32.to_be_bytes()[..],
                    &b"abc"[..]
                ]
                .concat(),
                long.clone(),
                0u32.to_be_bytes().to_vec(),
                long.clone(),
                [&1u32.to_be_bytes()[..], &b"x"[..]].concat(),
            ]
        );
        // A million empty frames: one item holding their 4 MB.
        let mut zeros = MAGIC.to_vec();
        zeros.push(b'E');
        zeros.resize(8 + 4 * 1_000_000, 0);
        let got = read(&zeros, &Limits::default()).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].len(), 4_000_000);
    }

    #[test]
    fn every_limit_is_a_one_line_error_naming_its_flag() {
        let f = vec![1u8; 100];
        let seg = encode_segment(b'E', &[&f, &f, &f]);
        let limits = Limits {
            segment_frames: 2,
            ..Limits::default()
        };
        let e = read(&seg, &limits).unwrap_err().to_string();
        assert!(
            e.contains("limit 2 frames per segment, raise with --max-segment-frames"),
            "{e}"
        );
        let limits = Limits {
            frame_bytes: 99,
            ..Limits::default()
        };
        let e = read(&seg, &limits).unwrap_err().to_string();
        assert!(e.contains("raise with --max-frame-bytes"), "{e}");
        // A length past the end is damage, not a limit: the rest is one item.
        let mut huge = MAGIC.to_vec();
        huge.push(b'E');
        huge.extend_from_slice(&u32::MAX.to_be_bytes());
        huge.extend_from_slice(&[5; 50]);
        assert_eq!(read(&huge, &limits).unwrap(), vec![huge[8..].to_vec()]);
        // The record budget.
        let s = sample_record(1, 30);
        let dir = tempfile::tempdir().unwrap();
        write_record(dir.path(), &s.record, &s.keys).unwrap();
        let limits = Limits {
            record_bytes: 5_000,
            ..Limits::default()
        };
        let e = read_dir(dir.path(), &limits).unwrap_err().to_string();
        assert!(e.contains("raise with --max-record-bytes"), "{e}");
        assert!(!e.contains('\n'));
        let whole = read_dir(dir.path(), &Limits::default()).unwrap();
        assert_eq!(whole.record, s.record);
    }

    #[test]
    fn a_deleted_key_is_missing_not_shredded() {
        let s = sample_record(1, 30);
        let dir = tempfile::tempdir().unwrap();
        let mut w = RecordWriter::create(dir.path(), &s.keys).unwrap();
        w.write_payloads(&s.payloads).unwrap();
        let store = read_payloads(dir.path()).unwrap().unwrap();
        let statuses: Vec<_> = store.entries().map(|(d, _)| store.status(d)).collect();
        assert!(statuses.contains(&audita_evidence::PayloadStatus::Shredded));
        assert!(statuses.contains(&audita_evidence::PayloadStatus::Available));
        let key = fs::read_dir(dir.path().join("payloads"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "key"))
            .unwrap();
        fs::remove_file(&key).unwrap();
        let store = read_payloads(dir.path()).unwrap().unwrap();
        let statuses: Vec<_> = store.entries().map(|(d, _)| store.status(d)).collect();
        assert!(statuses.contains(&audita_evidence::PayloadStatus::KeyMissing));
        assert_eq!(
            statuses
                .iter()
                .filter(|s| **s == audita_evidence::PayloadStatus::Shredded)
                .count(),
            1,
            "only the payload with a tombstone is shredded"
        );
        // A tombstone next to a key contradicts itself.
        let tomb = key.with_extension("shredded");
        fs::write(&tomb, b"").unwrap();
        fs::write(&key, [0u8; 32]).unwrap();
        let e = read_payloads(dir.path()).unwrap_err().to_string();
        assert!(e.contains("still has its key"), "{e}");
    }

    #[test]
    fn truncated_frame_becomes_one_reported_item() {
        let seg = encode_segment(b'E', &[b"abc", b"defg"]);
        let cut = &seg[..seg.len() - 1];
        let frames = decode_segment(b'E', cut, Path::new("x")).unwrap();
        assert_eq!(frames.len(), 2);
        assert_eq!(frames[0], b"abc");
    }
}
