//! Exhaustive tamper check of the on-disk format: flipping any single byte of any
//! record file, in process, never leaves a clean verification. This is the same
//! read-then-verify path that `audita verify` runs (the record, then its tiled log
//! and vkeys against it).

use std::fs;
use std::path::{Path, PathBuf};

use audita_evidence::sample::sample_record;
use audita_evidence::{verify_record_with, Policy};
use audita_record::{read_payloads, read_record, RecordWriter};

fn write_sample(dir: &Path) {
    let s = sample_record(2, 16);
    let mut w = RecordWriter::create(dir, &s.keys).unwrap();
    let mut start = 0;
    for e in &s.epochs {
        let n = e.leaves.len();
        w.write_signed_envelopes(&s.envelopes[start..start + n])
            .unwrap();
        let r: Vec<&[u8]> = s.receipts[start..start + n]
            .iter()
            .map(|r| r.as_bytes())
            .collect();
        w.write_receipts(&r).unwrap();
        w.write_epoch(e).unwrap();
        start += n;
    }
    w.write_payloads(&s.payloads).unwrap();
    audita_record::tiles::rebuild(dir).unwrap();
}

/// `Some(true)` clean, `Some(false)` problems found, `None` unreadable.
fn clean(dir: &Path) -> Option<bool> {
    let (record, keys) = read_record(dir).ok()?;
    let store = read_payloads(dir).ok()?;
    let tiles = audita_record::tiles::check_tiles(dir, &record, &keys);
    Some(
        verify_record_with(&record, &keys, &Policy::default(), store.as_ref()).is_clean()
            && tiles.present
            && tiles.problems.is_empty(),
    )
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn no_single_byte_flip_of_any_file_verifies_clean() {
    let dir = tempfile::tempdir().unwrap();
    write_sample(dir.path());
    assert_eq!(clean(dir.path()), Some(true));
    let mut checked = 0;
    for path in files(dir.path()) {
        let original = fs::read(&path).unwrap();
        for i in 0..original.len() {
            // One flip per byte, cycling through low, high, all and ASCII-case bits.
            {
                let mask = [0x01u8, 0x80, 0xff, 0x20][i % 4];
                let mut bytes = original.clone();
                bytes[i] ^= mask;
                fs::write(&path, &bytes).unwrap();
                assert_ne!(
                    clean(dir.path()),
                    Some(true),
                    "flip {mask:#x} at byte {i} of {} verified clean",
                    path.display()
                );
                checked += 1;
            }
        }
        fs::write(&path, &original).unwrap();
    }
    assert_eq!(clean(dir.path()), Some(true));
    assert!(checked > 5_000, "checked {checked}");
}
