//! An epoch seal off `audita.epochs` decodes or is refused, never panics; a decoded
//! seal re-encodes to itself; and joining it with any accepted frame (the same bytes
//! as one) hands out at most one epoch, naming only what the seal names.
#![no_main]

use audita_join::Join;
use audita_topics::EpochSeal;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut join = Join::new();
    join.take_accepted(0, 0, data);
    if let Some(seal) = EpochSeal::decode(data) {
        assert_eq!(EpochSeal::decode(&seal.encode()).as_ref(), Some(&seal));
        let leaves = seal.leaves.len();
        join.take_seal(seal);
        if let Some(epoch) = join.next(true) {
            assert!(epoch.envelopes.len() <= leaves);
            assert_eq!(epoch.leaves.len(), leaves);
        }
        assert!(join.next(true).is_none());
    }
});
