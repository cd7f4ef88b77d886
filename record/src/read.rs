//! Reading a record: bounded reads ([`Limits`], one-line [`ReadError`]s), segments
//! frame by frame, key files, registries, payloads, and the whole directory.

use std::fs;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

use audita_evidence::store::{PayloadKey, StoredPayload};
use audita_evidence::{
    Hash, KeyRegistry, PayloadStore, PrincipalId, RawEpoch, Record, VerifyingKey,
};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use thiserror::Error;

use crate::layout::{hex, registry_path, FORMAT_LINE, MAGIC, MIN_FRAME_BYTES};

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

pub(crate) fn io_err(path: &Path) -> impl FnOnce(io::Error) -> ReadError + '_ {
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

pub(crate) fn list(dir: &Path, prefix: &str, suffix: &str) -> Result<Vec<PathBuf>, ReadError> {
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
