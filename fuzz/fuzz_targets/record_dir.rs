//! Structure-aware fuzzing of whole record directories: the fuzzer's input is a
//! list of edits (flip, truncate, drop / duplicate / swap / move / replace frames,
//! runs of short frames, forged lengths, deleted / copied / appended files, edited
//! key and checkpoint lines) applied to the files of a valid sample record
//! (segments, epochs, checkpoints, key files, payload store). The edited directory
//! goes through the whole verification path — the bounded readers of
//! `audita_record::read_dir`, then `verify_record_with` with the payload store and a
//! held checkpoint — and:
//! - nothing panics, and memory stays within libFuzzer's `-rss_limit_mb`;
//! - every certified envelope is byte-identical to one of the sample's (a forgery
//!   never certifies);
//! - a clean verdict (with the sample's last checkpoint held outside the record)
//!   certifies exactly the sample's messages: no edit hides or adds one unnoticed.
//!
//! Speed: the directory lives on tmpfs (`/dev/shm` when present) and persists
//! across executions; each execution only rewrites the files whose bytes differ
//! from what is on disk, removes the files (and then-empty directories) it no
//! longer has, and creates the new ones, so the reader sees exactly the edited
//! file set (as if freshly written) at the cost of the few files an input edits.
//! Signatures are the `cfg(fuzzing)` stand-in of `audita-evidence` (`src/sig.rs`).
#![no_main]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use arbitrary::Arbitrary;
use audita_evidence::sample::sample_record;
use audita_evidence::{verify_record_with, MessageId, Policy, Record};
use audita_record::{self as disk, decode_segment, encode_segment, Limits, RecordWriter};
use libfuzzer_sys::fuzz_target;

/// One edit of the record's files; `file` indices wrap around the file list.
#[derive(Arbitrary, Debug)]
enum Edit {
    Flip { file: u8, at: u32, mask: u8 },
    Truncate { file: u8, keep: u32 },
    Append { file: u8, bytes: Vec<u8> },
    DropFrame { file: u8, frame: u16 },
    DuplicateFrame { file: u8, frame: u16 },
    SwapFrames { file: u8, a: u16, b: u16 },
    MoveFrame { from: u8, frame: u16, to: u8 },
    ReplaceFrame { file: u8, frame: u16, bytes: Vec<u8> },
    ShortFrames { file: u8, at: u16, count: u8, len: u8 },
    SetLength { file: u8, frame: u16, len: u32 },
    Delete { file: u8 },
    CopyOver { from: u8, to: u8 },
    NewFile { like: u8, name: u8, bytes: Vec<u8> },
    ReplaceLine { file: u8, line: u8, text: String },
    DropLine { file: u8, line: u8 },
}

#[derive(Arbitrary, Debug)]
struct Input {
    edits: Vec<Edit>,
}

struct Template {
    files: Vec<(String, Vec<u8>)>,
    originals: BTreeSet<Vec<u8>>,
    ids: BTreeSet<MessageId>,
    held: Vec<u8>,
}

fn collect(dir: &Path, base: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect(&p, base, out);
        } else {
            let rel = p.strip_prefix(base).unwrap().to_string_lossy().into_owned();
            out.push((rel, std::fs::read(&p).unwrap()));
        }
    }
}

const WORK_PREFIX: &str = "audita-fuzz-record-dir-";

fn work_root() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() }
}

fn work_dir() -> PathBuf {
    work_root().join(format!("{WORK_PREFIX}{}", std::process::id()))
}

/// Removes the work directories of earlier runs whose process is gone (the
/// fuzzer exits without a hook to clean up after itself).
fn remove_stale_work_dirs() {
    let Ok(entries) = std::fs::read_dir(work_root()) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(pid) = name.strip_prefix(WORK_PREFIX) {
            if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
}

/// The files currently in the work directory (relative name → bytes).
static ON_DISK: Mutex<BTreeMap<String, Vec<u8>>> = Mutex::new(BTreeMap::new());

/// Makes the work directory hold exactly `files` (plus the directories that
/// contain them, and the root), touching only what differs from `on_disk`.
fn sync_dir(dir: &Path, on_disk: &mut BTreeMap<String, Vec<u8>>, files: &[(String, Vec<u8>)]) {
    let want: BTreeMap<&str, &[u8]> = files.iter().map(|(n, b)| (n.as_str(), b.as_slice())).collect();
    let parents = |names: &mut dyn Iterator<Item = &str>| -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for n in names {
            let mut p = n;
            while let Some((d, _)) = p.rsplit_once('/') {
                out.insert(d.to_owned());
                p = d;
            }
        }
        out
    };
    let old_dirs = parents(&mut on_disk.keys().map(String::as_str));
    let new_dirs = parents(&mut want.keys().copied());
    on_disk.retain(|name, _| {
        let keep = want.contains_key(name.as_str());
        if !keep {
            std::fs::remove_file(dir.join(name)).unwrap();
        }
        keep
    });
    // Deepest first, so a parent is empty when its turn comes.
    let gone: Vec<&String> = old_dirs.difference(&new_dirs).collect();
    for d in gone.into_iter().rev() {
        std::fs::remove_dir(dir.join(d)).unwrap();
    }
    for d in new_dirs.difference(&old_dirs) {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    for (name, bytes) in want {
        if on_disk.get(name).map(Vec::as_slice) != Some(bytes) {
            std::fs::write(dir.join(name), bytes).unwrap();
            on_disk.insert(name.to_owned(), bytes.to_vec());
        }
    }
}

fn template() -> &'static Template {
    static T: OnceLock<Template> = OnceLock::new();
    T.get_or_init(|| {
        let s = sample_record(5, 16);
        remove_stale_work_dirs();
        let dir = work_dir();
        let _ = std::fs::remove_dir_all(&dir);
        let mut w = RecordWriter::create(&dir, &s.keys).unwrap();
        let mut start = 0;
        for e in &s.epochs {
            let n = e.leaves.len();
            w.write_signed_envelopes(&s.envelopes[start..start + n]).unwrap();
            let r: Vec<&[u8]> = s.receipts[start..start + n].iter().map(|r| r.as_bytes()).collect();
            w.write_receipts(&r).unwrap();
            w.write_epoch(e).unwrap();
            start += n;
        }
        w.write_payloads(&s.payloads).unwrap();
        let mut files = Vec::new();
        collect(&dir, &dir, &mut files);
        *ON_DISK.lock().unwrap() = files.iter().cloned().collect();
        let ids = audita_evidence::verify_record(&s.record, &s.keys)
            .certified
            .keys()
            .cloned()
            .collect();
        Template {
            files,
            originals: s.record.envelopes.iter().cloned().collect(),
            ids,
            held: s.record.checkpoints.last().unwrap().clone(),
        }
    })
}

fn kind_of(name: &str) -> Option<u8> {
    if name.ends_with(".seg") {
        Some(if name.contains("envelopes-") {
            b'E'
        } else if name.contains("receipts-") {
            b'R'
        } else {
            b'H'
        })
    } else {
        None
    }
}

/// Applies `f` to the frames of a segment file (if it decodes).
fn frames(files: &mut [(String, Vec<u8>)], i: usize, f: impl FnOnce(&mut Vec<Vec<u8>>)) {
    let (name, bytes) = &mut files[i];
    let Some(kind) = kind_of(name) else { return };
    let Ok(mut fr) = decode_segment(kind, bytes, Path::new(name.as_str())) else {
        return;
    };
    f(&mut fr);
    let refs: Vec<&[u8]> = fr.iter().map(Vec::as_slice).collect();
    *bytes = encode_segment(kind, &refs);
}

fn apply(files: &mut Vec<(String, Vec<u8>)>, e: Edit) {
    if files.is_empty() {
        return;
    }
    let n = files.len();
    let at = |x: u8| x as usize % n;
    match e {
        Edit::Flip { file, at: pos, mask } => {
            let b = &mut files[at(file)].1;
            if !b.is_empty() {
                let i = pos as usize % b.len();
                b[i] ^= mask.max(1);
            }
        }
        Edit::Truncate { file, keep } => {
            let b = &mut files[at(file)].1;
            let k = keep as usize % (b.len() + 1);
            b.truncate(k);
        }
        Edit::Append { file, bytes } => files[at(file)].1.extend(bytes),
        Edit::DropFrame { file, frame } => frames(files, at(file), |f| {
            if !f.is_empty() {
                let i = frame as usize % f.len();
                f.remove(i);
            }
        }),
        Edit::DuplicateFrame { file, frame } => frames(files, at(file), |f| {
            if !f.is_empty() {
                let i = frame as usize % f.len();
                let c = f[i].clone();
                f.insert(i, c);
            }
        }),
        Edit::SwapFrames { file, a, b } => frames(files, at(file), |f| {
            if !f.is_empty() {
                let (a, b) = (a as usize % f.len(), b as usize % f.len());
                f.swap(a, b);
            }
        }),
        Edit::MoveFrame { from, frame, to } => {
            let mut taken = None;
            frames(files, at(from), |f| {
                if !f.is_empty() {
                    taken = Some(f.remove(frame as usize % f.len()));
                }
            });
            if let Some(t) = taken {
                frames(files, at(to), |f| f.push(t));
            }
        }
        Edit::ReplaceFrame { file, frame, bytes } => frames(files, at(file), |f| {
            if !f.is_empty() {
                let i = frame as usize % f.len();
                f[i] = bytes;
            }
        }),
        Edit::ShortFrames { file, at: pos, count, len } => frames(files, at(file), |f| {
            let i = pos as usize % (f.len() + 1);
            for _ in 0..count {
                f.insert(i, vec![0xa5; len as usize % 40]);
            }
        }),
        Edit::SetLength { file, frame, len } => {
            let (name, bytes) = &mut files[at(file)];
            if kind_of(name).is_none() {
                return;
            }
            // Walk the frames to the chosen one and overwrite its length prefix.
            let mut pos = 8;
            let mut k = 0;
            while pos + 4 <= bytes.len() {
                let l = u32::from_be_bytes([bytes[pos], bytes[pos + 1], bytes[pos + 2], bytes[pos + 3]]);
                if k == frame as usize % 64 {
                    bytes[pos..pos + 4].copy_from_slice(&len.to_be_bytes());
                    return;
                }
                pos += 4 + l as usize;
                k += 1;
            }
        }
        Edit::Delete { file } => {
            files.remove(at(file));
        }
        Edit::CopyOver { from, to } => {
            let c = files[at(from)].1.clone();
            files[at(to)].1 = c;
        }
        Edit::NewFile { like, name, bytes } => {
            // A new file next to an existing one, named to sort before or after it.
            let base = files[at(like)].0.clone();
            // Only inside a subdirectory (never a path starting with '/').
            let Some((dir, file)) = base.rsplit_once('/') else {
                return;
            };
            let stem_end = file.find('-').map_or(0, |i| i + 1);
            let ext = file.rsplit_once('.').map_or("", |(_, e)| e);
            let new = format!("{dir}/{}{:06}.{ext}", &file[..stem_end], name);
            if !files.iter().any(|(n, _)| *n == new) {
                files.push((new, bytes));
            }
        }
        Edit::ReplaceLine { file, line, text } => {
            let b = &mut files[at(file)].1;
            if let Ok(t) = std::str::from_utf8(b) {
                let mut lines: Vec<String> = t.split('\n').map(str::to_owned).collect();
                let i = line as usize % lines.len();
                lines[i] = text;
                *b = lines.join("\n").into_bytes();
            }
        }
        Edit::DropLine { file, line } => {
            let b = &mut files[at(file)].1;
            if let Ok(t) = std::str::from_utf8(b) {
                let mut lines: Vec<&str> = t.split('\n').collect();
                let i = line as usize % lines.len();
                lines.remove(i);
                *b = lines.join("\n").into_bytes();
            }
        }
    }
}

/// Small limits keep each run fast; the limits themselves are part of what runs.
const LIMITS: Limits = Limits {
    record_bytes: 4 << 20,
    frame_bytes: 256 << 10,
    segment_frames: 8192,
};

fuzz_target!(|input: Input| {
    if input.edits.len() > 12 {
        return;
    }
    let t = template();
    let mut files = t.files.clone();
    for e in input.edits {
        apply(&mut files, e);
    }
    let dir = work_dir();
    sync_dir(&dir, &mut ON_DISK.lock().unwrap(), &files);
    let Ok(read) = disk::read_dir(&dir, &LIMITS) else {
        return;
    };
    let record: &Record = &read.record;
    let policy = Policy {
        held_checkpoints: vec![t.held.clone()],
        ..Policy::default()
    };
    let p = verify_record_with(record, &read.keys, &policy, read.payloads.as_ref());
    for c in p.certified.values() {
        assert!(
            t.originals.contains(c.envelope.as_bytes()),
            "a forged envelope certified"
        );
    }
    if p.is_clean() {
        let got: BTreeSet<MessageId> = p.certified.keys().cloned().collect();
        assert_eq!(got, t.ids, "a clean record lost or gained messages");
    }
});
