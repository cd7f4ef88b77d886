//! Writing a record: each file created with its final content, atomically and
//! durably; the streaming sealer appends new numbered files.

use std::fs;
use std::path::{Path, PathBuf};

use audita_evidence::store::PayloadKey;
use audita_evidence::{KeyRegistry, PayloadStore, RawEpoch, Record, SealedEpoch, SignedEnvelope};

use crate::layout::{
    encode_segment, key_lines, registry_path, vkey_files, FORMAT_LINE, SEGMENT_FRAMES,
};
use crate::read::{io_err, list, ReadError};

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
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> Result<(), ReadError> {
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
        write_vkeys(dir, keys)?;
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

/// Writes the keys of `keys` in C2SP verifier-key form: `keys/log.vkey` (the
/// logs, note type 0x01) and `keys/keepers.vkey` (cosignature/v1, type 0x04).
pub fn write_vkeys(dir: &Path, keys: &KeyRegistry) -> Result<(), ReadError> {
    let (logs, keepers) = vkey_files(keys);
    write_file(&dir.join("keys/log.vkey"), logs.as_bytes())?;
    write_file(&dir.join("keys/keepers.vkey"), keepers.as_bytes())
}
