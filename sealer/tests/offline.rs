//! A record sealed offline (`SealedLog::create` + `seal`, the path of `audita trace
//! seal` and `audita sample-record`) is the record the sealer stage would write:
//! the same epoch headers and roots as the sealing logic alone gives, every
//! checkpoint co-signed by every keeper at the epoch's second, tiles current, and
//! the directory verifies clean; sealing the same input twice writes the same bytes.

use audita_evidence::checkpoint::SignedCheckpoint;
use audita_evidence::sample::{sample_record, Sample, SAMPLE_KEEPERS, SAMPLE_ORIGIN};
use audita_evidence::{derive_signing_key, verify_record, SigningKey};
use audita_record::read_record;
use audita_record::tiles::check_tiles;
use audita_sealer::log::{Offline, SealedLog};
use std::path::Path;

fn keepers(seed: u64) -> Vec<(String, SigningKey)> {
    SAMPLE_KEEPERS
        .iter()
        .map(|k| (k.to_string(), derive_signing_key(seed, k)))
        .collect()
}

/// A new offline log in `dir` under the sample's origin, log key and `keepers`.
fn open_log(
    dir: &Path,
    seed: u64,
    s: &Sample,
    keepers: &[(String, SigningKey)],
) -> Result<SealedLog, audita_sealer::stage::StageError> {
    SealedLog::create(
        dir,
        Offline {
            origin: SAMPLE_ORIGIN,
            log_key: derive_signing_key(seed, SAMPLE_ORIGIN),
            keys: &s.keys,
            registry: None,
            keepers,
        },
    )
}

/// Seals `s` into `dir` epoch by epoch as the sample cut it (keepers co-signing at
/// `closed_at / 1000`).
fn seal(dir: &Path, seed: u64, s: &Sample) {
    let keepers = keepers(seed);
    let mut log = open_log(dir, seed, s, &keepers).unwrap();
    let mut start = 0;
    for e in &s.epochs {
        let n = e.leaves.len();
        let receipts: Vec<&[u8]> = s.receipts[start..start + n]
            .iter()
            .map(|r| r.as_bytes())
            .collect();
        let closed = log
            .seal(
                &s.envelopes[start..start + n],
                &receipts,
                e.header.closed_at,
            )
            .unwrap();
        assert_eq!(closed.epoch.header, e.header, "epoch {}", e.header.number);
        assert!(closed.quorum_met, "every keeper at hand co-signs");
        start += n;
    }
    log.write_payloads(&s.payloads).unwrap();
}

/// Every file under `dir`, relative path → bytes.
fn files(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

#[test]
fn a_record_sealed_offline_is_the_sealers_record_and_verifies_clean() {
    let seed = 5;
    let s = sample_record(seed, 90);
    let dir = tempfile::tempdir().unwrap();
    seal(dir.path(), seed, &s);

    let (record, keys) = read_record(dir.path()).unwrap();
    let partition = verify_record(&record, &keys);
    assert!(partition.is_clean(), "{partition:?}");
    assert_eq!(record.envelopes.len(), s.envelopes.len());
    assert_eq!(record.checkpoints.len(), s.epochs.len());
    for (note, e) in record.checkpoints.iter().zip(&s.epochs) {
        let cp = SignedCheckpoint::parse(note).unwrap();
        assert_eq!(cp.checkpoint(), e.checkpoint.checkpoint(), "same tree head");
        let by: Vec<_> = cp.cosignatures(&keys);
        assert_eq!(by.len(), SAMPLE_KEEPERS.len(), "co-signed by every keeper");
        assert!(
            by.iter().all(|c| c.timestamp == e.header.closed_at / 1000),
            "keepers co-sign at the epoch's second, not their wall clock's"
        );
    }
    let tiles = check_tiles(dir.path(), &record, &keys);
    assert!(
        tiles.present && tiles.problems.is_empty(),
        "{:?}",
        tiles.problems
    );
    assert_eq!(tiles.size, tiles.record_size, "tiles are current");

    // The same input sealed again: the same bytes, file for file.
    let again = tempfile::tempdir().unwrap();
    seal(again.path(), seed, &s);
    assert_eq!(files(dir.path()), files(again.path()));
}

/// The sample written the way records were written before there was one path: the
/// pre-sealed epochs put down with the record writer, the tiles rebuilt at the end.
fn write_presealed(dir: &Path, s: &Sample) {
    let mut w = audita_record::RecordWriter::create(dir, &s.keys).unwrap();
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

#[test]
fn sealing_the_sample_at_its_keepers_seconds_writes_the_presealed_record_byte_for_byte() {
    let seed = 4;
    let s = sample_record(seed, 120);
    let keepers = keepers(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), seed, &s, &keepers).unwrap();
    let mut start = 0;
    for e in &s.epochs {
        let n = e.leaves.len();
        let at = e.checkpoint.cosignatures(&s.keys)[0].timestamp;
        let r: Vec<&[u8]> = s.receipts[start..start + n]
            .iter()
            .map(|r| r.as_bytes())
            .collect();
        let closed = log
            .seal_at(&s.envelopes[start..start + n], &r, e.header.closed_at, at)
            .unwrap();
        assert_eq!(
            closed.epoch.checkpoint, e.checkpoint,
            "epoch {}",
            e.header.number
        );
        start += n;
    }
    log.write_payloads(&s.payloads).unwrap();
    let reference = tempfile::tempdir().unwrap();
    write_presealed(reference.path(), &s);
    let (ours, theirs) = (files(dir.path()), files(reference.path()));
    for (name, bytes) in &theirs {
        assert!(
            ours.get(name) == Some(bytes),
            "{name} differs or is missing"
        );
    }
    // Beyond the rebuilt record, the partial tiles of every earlier checkpoint, as the
    // sealer stage leaves them (c2sp.org/tlog-tiles: a client holding an older
    // checkpoint fetches the partial tile of its size).
    let earlier: Vec<String> = s.epochs[..s.epochs.len() - 1]
        .iter()
        .map(|e| format!("000.p/{}", e.header.size % 256))
        .collect();
    let extra: Vec<&String> = ours.keys().filter(|k| !theirs.contains_key(*k)).collect();
    assert_eq!(extra.len(), 2 * earlier.len(), "{extra:?}");
    for name in extra {
        assert!(
            (name.starts_with("tile/0/") || name.starts_with("tile/entries/"))
                && earlier.iter().any(|e| name.ends_with(e.as_str())),
            "unexpected file {name}"
        );
    }
}

#[test]
fn an_offline_log_refuses_a_directory_that_holds_a_record() {
    let seed = 6;
    let s = sample_record(seed, 20);
    let dir = tempfile::tempdir().unwrap();
    seal(dir.path(), seed, &s);
    let keepers = keepers(seed);
    let err = open_log(dir.path(), seed, &s, &keepers)
        .err()
        .expect("refused");
    assert!(err.to_string().contains("already holds a record"), "{err}");
}
