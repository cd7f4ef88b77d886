//! Envelope, receipt and epoch-header decoding is total: any bytes give a value
//! or an error, never a panic; a decoded envelope keeps its exact bytes.
#![no_main]

use audita_evidence::{EpochHeader, MessageId, Receipt, SignedEnvelope};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(env) = SignedEnvelope::decode(data.to_vec()) {
        assert_eq!(env.as_bytes(), data);
        // Canonical encoding: re-encoding the decoded body reproduces the bytes.
        assert_eq!(env.envelope().encode_body(), env.body());
        let _ = env.envelope().validate();
    }
    let _ = Receipt::decode(data.to_vec());
    let _ = EpochHeader::decode(data.to_vec());
    if let Ok(id) = MessageId::from_leaf_bytes(data) {
        assert_eq!(id.leaf_bytes(), data);
    }
});
