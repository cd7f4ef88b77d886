//! Proven-slice decoding and verification never panic, and never certify an
//! envelope that is not byte-identical to one of the sample's originals, whatever
//! the fuzzer does to the slice's bytes.
#![no_main]

use std::collections::BTreeSet;
use std::sync::OnceLock;

use audita_evidence::sample::{sample_record, Sample};
use audita_evidence::{verify_proven, verify_record, MessageId, Policy, ProvenSlice};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    static SAMPLE: OnceLock<(Sample, Vec<u8>)> = OnceLock::new();
    let (s, wire) = SAMPLE.get_or_init(|| {
        let s = sample_record(2, 16);
        let ids: BTreeSet<MessageId> = verify_record(&s.record, &s.keys)
            .certified
            .keys()
            .cloned()
            .collect();
        let wire = ProvenSlice::from_record(&s.record, &ids).encode();
        (s, wire)
    });
    // data = [mode, offset, bytes...]: either the raw input is the slice, or it
    // overwrites the honest slice's wire bytes from `offset`.
    let bytes = match data.first() {
        Some(m) if m % 2 == 0 => data[1..].to_vec(),
        Some(_) if data.len() >= 2 => {
            let mut w = wire.clone();
            let at = data[1] as usize * w.len() / 256;
            for (i, b) in data[2..].iter().enumerate() {
                if let Some(x) = w.get_mut(at + i) {
                    *x = *b;
                }
            }
            w
        }
        _ => return,
    };
    if let Ok(slice) = ProvenSlice::decode(&bytes) {
        let p = verify_proven(&slice, &s.keys, &Policy::default());
        for c in p.certified.values() {
            assert!(s.record.envelopes.iter().any(|e| e.as_slice() == c.envelope.as_bytes()));
        }
    }
});
