//! Proven-slice decoding and verification never panic, and never certify an
//! envelope that is not byte-identical to one of the sample's originals, whatever
//! the fuzzer does to the slice's bytes; under a key-window variant of the keys
//! (see `windows.rs`) it never certifies a message its author's key did not
//! cover. Signatures are the `cfg(fuzzing)` stand-in of `audita-evidence`.
#![no_main]

use std::collections::BTreeSet;
use std::sync::OnceLock;

use audita_evidence::sample::{sample_record, Sample};
use audita_evidence::{verify_proven, verify_record, KeyRegistry, MessageId, Policy, ProvenSlice};
use libfuzzer_sys::fuzz_target;

#[path = "windows.rs"]
mod windows;

fuzz_target!(|data: &[u8]| {
    type Keys = Vec<(KeyRegistry, windows::Restriction)>;
    static SAMPLE: OnceLock<(Sample, Vec<u8>, Keys)> = OnceLock::new();
    let (s, wire, variants) = SAMPLE.get_or_init(|| {
        let s = sample_record(2, 16);
        let ids: BTreeSet<MessageId> = verify_record(&s.record, &s.keys)
            .certified
            .keys()
            .cloned()
            .collect();
        let wire = ProvenSlice::from_record(&s.record, &ids).encode();
        let v = windows::variants(&s);
        (s, wire, v)
    });
    // data = [mode + 2 * keys, offset, bytes...]: either the raw input is the
    // slice, or it overwrites the honest slice's wire bytes from `offset`; the
    // slice is verified under key variant `keys % 4`.
    let (keys, restriction) = match data.first() {
        Some(m) => &variants[(m / 2) as usize % variants.len()],
        None => return,
    };
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
        let p = verify_proven(&slice, keys, &Policy::default());
        for c in p.certified.values() {
            assert!(s.record.envelopes.iter().any(|e| e.as_slice() == c.envelope.as_bytes()));
        }
        windows::assert_windows(restriction, p.certified.values());
    }
});
