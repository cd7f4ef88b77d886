//! Checkpoint note parsing is total and round-trips exactly.
#![no_main]

use audita_evidence::{derive_signing_key, KeyRegistry, SignedCheckpoint};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(cp) = SignedCheckpoint::parse(data) {
        assert_eq!(cp.to_text().as_bytes(), data);
        let mut keys = KeyRegistry::new();
        let _ = keys.add_log(&cp.checkpoint().origin, derive_signing_key(0, "log").verifying_key());
        let _ = keys.add_keeper("keeper", derive_signing_key(0, "keeper").verifying_key());
        let _ = cp.verify_log(&keys);
        let _ = cp.classify(&keys);
    }
});
