//! Whole-record verification never panics and never certifies an envelope that
//! is not byte-identical to one of the sample's originals, whatever the fuzzer
//! does to the record's items; under a key-window variant of the keys (see
//! `windows.rs`) it never certifies a message its author's key did not cover.
//! Signatures are the `cfg(fuzzing)` stand-in of `audita-evidence` (`src/sig.rs`).
#![no_main]

use std::sync::OnceLock;

use audita_evidence::sample::{sample_record, Sample};
use audita_evidence::{verify_record, KeyRegistry};
use libfuzzer_sys::fuzz_target;

#[path = "windows.rs"]
mod windows;

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    type Keys = Vec<(KeyRegistry, windows::Restriction)>;
    static SAMPLE: OnceLock<(Sample, Keys)> = OnceLock::new();
    let (s, variants) = SAMPLE.get_or_init(|| {
        let s = sample_record(1, 16);
        let v = windows::variants(&s);
        (s, v)
    });
    let mut r = s.record.clone();
    // data = [which + 5 * keys, index, bytes...]: replace one item with fuzzer
    // bytes, verify under key variant `keys % 4`.
    let (which, idx, bytes) = (data[0] % 5, data[1] as usize, data[2..].to_vec());
    let (keys, restriction) = &variants[(data[0] / 5) as usize % variants.len()];
    match which {
        0 => { let i = idx % r.envelopes.len(); r.envelopes[i] = bytes }
        1 => { let i = idx % r.receipts.len(); r.receipts[i] = bytes }
        2 => { let i = idx % r.epochs.len(); r.epochs[i].header = bytes }
        3 => { let i = idx % r.checkpoints.len(); r.checkpoints[i] = bytes }
        _ => r.envelopes.push(bytes),
    }
    let p = verify_record(&r, keys);
    for c in p.certified.values() {
        assert!(s.record.envelopes.iter().any(|e| e.as_slice() == c.envelope.as_bytes()));
    }
    windows::assert_windows(restriction, p.certified.values());
});
