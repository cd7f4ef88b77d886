//! The on-disk sealed record: a directory any party can verify offline with
//! public keys only.
//!
//! Design constraints (format `audita-record v1`):
//! ```text
//! DIR/FORMAT                         "audita-record v1\n" (exactly)
//! DIR/keys/principals.txt            "<name> <base64 Ed25519 public key>\n" per principal
//! DIR/keys/keepers.txt               same, one line per keeper (checkpoint co-signer)
//! DIR/keys/logs.txt                  same, one line per log (key name = checkpoint origin)
//! DIR/segments/envelopes-NNNNNN.seg  framed signed envelopes, in append order
//! DIR/segments/receipts-NNNNNN.seg   framed signed receipts
//! DIR/epochs/epoch-NNNNNN.seg        frame 0: signed epoch header; frames 1..: leaves
//! DIR/checkpoints/checkpoint-NNNNNN.txt  C2SP checkpoint note with keeper co-signatures
//! DIR/payloads/<hex>.ct, <hex>.key   optional payload store: ciphertext and its key
//! DIR/payloads/<hex>.shredded        empty tombstone of a crypto-shredded payload
//! ```
//! - A `.seg` file is the 8-byte magic `AUDSEG\x01` + kind byte (`E` envelopes,
//!   `R` receipts, `H` epoch), then frames `u32 big-endian length || bytes`.
//!   Frames hold the exact signed bytes; nothing is re-encoded on read.
//! - Reading is tolerant where the evidence can speak for itself: a frame whose
//!   length runs past the end of its file turns the rest of that file into one
//!   undecodable item, which the verifier reports (and whose sealed messages then
//!   show up as missing). Only what makes the directory unreadable as a record —
//!   no `FORMAT`, a wrong magic, an unreadable key file, an I/O error — is a
//!   [`ReadError`].
//! - Files of one kind are read in file-name order (zero-padded numbers), so the
//!   record order is the append order. `keys/` holds public keys only.
//! - Writing creates files with their final content (no partial updates); the
//!   streaming sealer stage appends new numbered files rather than rewriting old ones.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use audita_evidence::store::StoredPayload;
use audita_evidence::{
    Hash, KeyRegistry, PayloadStore, PrincipalId, RawEpoch, Record, SealedEpoch, SignedEnvelope,
    VerifyingKey,
};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use thiserror::Error;

/// Content of the `FORMAT` file.
pub const FORMAT_LINE: &str = "audita-record v1\n";
const MAGIC: &[u8; 7] = b"AUDSEG\x01";
/// Maximum frames per segment file written by [`write_record`].
pub const SEGMENT_FRAMES: usize = 4096;

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
}

impl ReadError {
    /// Whether retrying could help (only for I/O errors other than not-found).
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Io { source, .. } if source.kind() != io::ErrorKind::NotFound)
    }
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> ReadError + '_ {
    move |source| ReadError::Io {
        path: path.to_owned(),
        source,
    }
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

/// Splits a segment file body into frames. A truncated or overlong last frame
/// becomes one frame holding the remaining bytes, so the damage is reported
/// rather than hidden.
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

fn list(dir: &Path, prefix: &str, suffix: &str) -> Result<Vec<PathBuf>, ReadError> {
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
            out.push(entry.path());
        }
    }
    out.sort();
    Ok(out)
}

fn read_keys(path: &Path) -> Result<Vec<(String, VerifyingKey)>, ReadError> {
    let text = fs::read(path).map_err(io_err(path))?;
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
/// whole record in memory (the sealer's restart).
pub struct Stream {
    files: std::vec::IntoIter<PathBuf>,
    kind: u8,
    current: std::vec::IntoIter<Vec<u8>>,
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
        Some(
            fs::read(&path)
                .map_err(io_err(&path))
                .and_then(|bytes| decode_segment(self.kind, &bytes, &path)),
        )
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
        Some(path) => Ok(Some(fs::read(path).map_err(io_err(path))?)),
        None => Ok(None),
    }
}

/// The frames of the newest receipts segment, if any.
pub fn last_receipts(dir: &Path) -> Result<Vec<Vec<u8>>, ReadError> {
    match list(&dir.join("segments"), "receipts-", ".seg")?.last() {
        Some(path) => {
            let bytes = fs::read(path).map_err(io_err(path))?;
            decode_segment(b'R', &bytes, path)
        }
        None => Ok(Vec::new()),
    }
}

/// Reads the public keys of a record directory.
pub fn read_registry(dir: &Path) -> Result<KeyRegistry, ReadError> {
    let mut keys = KeyRegistry::new();
    let kdir = dir.join("keys");
    for (name, key) in read_keys(&kdir.join("principals.txt"))? {
        let id = PrincipalId::new(name).map_err(|_| ReadError::BadKey {
            path: kdir.join("principals.txt"),
            line: 0,
        })?;
        keys.add_principal(id, key);
    }
    for (name, key) in read_keys(&kdir.join("keepers.txt"))? {
        keys.add_keeper(&name, key).map_err(|_| ReadError::BadKey {
            path: kdir.join("keepers.txt"),
            line: 0,
        })?;
    }
    for (name, key) in read_keys(&kdir.join("logs.txt"))? {
        keys.add_log(&name, key).map_err(|_| ReadError::BadKey {
            path: kdir.join("logs.txt"),
            line: 0,
        })?;
    }
    Ok(keys)
}

/// Reads a record directory: the raw record and its public keys.
pub fn read_record(dir: &Path) -> Result<(Record, KeyRegistry), ReadError> {
    let format_path = dir.join("FORMAT");
    let format = fs::read(&format_path).map_err(io_err(&format_path))?;
    if format != FORMAT_LINE.as_bytes() {
        return Err(ReadError::NotARecord {
            path: format_path,
            reason: "unknown FORMAT",
        });
    }
    let keys = read_registry(dir)?;
    let mut record = Record::new();
    for path in list(&dir.join("segments"), "envelopes-", ".seg")? {
        let bytes = fs::read(&path).map_err(io_err(&path))?;
        record
            .envelopes
            .extend(decode_segment(b'E', &bytes, &path)?);
    }
    for path in list(&dir.join("segments"), "receipts-", ".seg")? {
        let bytes = fs::read(&path).map_err(io_err(&path))?;
        record.receipts.extend(decode_segment(b'R', &bytes, &path)?);
    }
    for path in list(&dir.join("epochs"), "epoch-", ".seg")? {
        let bytes = fs::read(&path).map_err(io_err(&path))?;
        let mut frames = decode_segment(b'H', &bytes, &path)?.into_iter();
        let header = frames.next().unwrap_or_default();
        record.epochs.push(RawEpoch {
            header,
            leaves: frames.collect(),
        });
    }
    for path in list(&dir.join("checkpoints"), "checkpoint-", ".txt")? {
        record
            .checkpoints
            .push(fs::read(&path).map_err(io_err(&path))?);
    }
    Ok((record, keys))
}

/// Reads the optional payload store of a record directory.
pub fn read_payloads(dir: &Path) -> Result<Option<PayloadStore>, ReadError> {
    let pdir = dir.join("payloads");
    if !pdir.exists() {
        return Ok(None);
    }
    let mut store = PayloadStore::new();
    for path in list(&pdir, "", ".shredded")? {
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let Some(digest) = hex::decode_to_array(&stem) else {
            return Err(ReadError::NotARecord {
                path,
                reason: "payload file name is not a hex digest",
            });
        };
        if !fs::read(&path).map_err(io_err(&path))?.is_empty() {
            return Err(ReadError::NotARecord {
                path,
                reason: "shredded tombstone is not empty",
            });
        }
        store.insert(
            digest,
            StoredPayload {
                ciphertext: Vec::new(),
                key: None,
            },
        );
    }
    for path in list(&pdir, "", ".ct")? {
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let digest: Hash = match hex::decode_to_array(&stem) {
            Some(d) => d,
            None => {
                return Err(ReadError::NotARecord {
                    path,
                    reason: "payload file name is not a hex digest",
                })
            }
        };
        let ciphertext = fs::read(&path).map_err(io_err(&path))?;
        let key_path = pdir.join(format!("{stem}.key"));
        let key = match fs::read(&key_path) {
            Ok(k) => Some(k.try_into().map_err(|_| ReadError::NotARecord {
                path: key_path.clone(),
                reason: "key is not 32 bytes",
            })?),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(io_err(&key_path)(e)),
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

/// Writes `bytes` to `path` atomically: a `.tmp` sibling is written and synced, then
/// renamed, so a crash (even SIGKILL) never leaves a half-written record file.
fn write_file(path: &Path, bytes: &[u8]) -> Result<(), ReadError> {
    use std::io::Write as _;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut f = fs::File::create(&tmp).map_err(io_err(&tmp))?;
    f.write_all(bytes).map_err(io_err(&tmp))?;
    f.sync_all().map_err(io_err(&tmp))?;
    drop(f);
    fs::rename(&tmp, path).map_err(io_err(path))
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
        Ok(Self {
            dir: dir.to_owned(),
            envelope_segments: 0,
            receipt_segments: 0,
            epochs: 0,
            checkpoints: 0,
        })
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
                Some(k) => {
                    write_file(&pdir.join(format!("{name}.ct")), &entry.ciphertext)?;
                    write_file(&pdir.join(format!("{name}.key")), &k)?;
                }
                // A shredded payload leaves an empty tombstone: nothing that can
                // no longer be checked stays in the record.
                None => write_file(&pdir.join(format!("{name}.shredded")), b"")?,
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

    #[test]
    fn truncated_frame_becomes_one_reported_item() {
        let seg = encode_segment(b'E', &[b"abc", b"defg"]);
        let cut = &seg[..seg.len() - 1];
        let frames = decode_segment(b'E', cut, Path::new("x")).unwrap();
        assert_eq!(frames.len(), 2);
        assert_eq!(frames[0], b"abc");
    }
}
