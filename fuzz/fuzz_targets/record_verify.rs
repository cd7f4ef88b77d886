//! Whole-record verification never panics and never certifies an envelope that
//! is not byte-identical to one of the sample's originals, whatever the fuzzer
//! does to the record's items.
#![no_main]

use std::sync::OnceLock;

use audita_evidence::sample::{sample_record, Sample};
use audita_evidence::verify_record;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    static SAMPLE: OnceLock<Sample> = OnceLock::new();
    let s = SAMPLE.get_or_init(|| sample_record(1, 16));
    let mut r = s.record.clone();
    // data = [which, index, bytes...]: replace one item with fuzzer bytes.
    let (which, idx, bytes) = (data[0] % 5, data[1] as usize, data[2..].to_vec());
    match which {
        0 => { let i = idx % r.envelopes.len(); r.envelopes[i] = bytes }
        1 => { let i = idx % r.receipts.len(); r.receipts[i] = bytes }
        2 => { let i = idx % r.epochs.len(); r.epochs[i].header = bytes }
        3 => { let i = idx % r.checkpoints.len(); r.checkpoints[i] = bytes }
        _ => r.envelopes.push(bytes),
    }
    let p = verify_record(&r, &s.keys);
    for c in p.certified.values() {
        assert!(s.record.envelopes.iter().any(|e| e.as_slice() == c.envelope.as_bytes()));
    }
});
