//! Property tests on random records: forged or corrupted entries never reach the
//! certified set, and deleted messages always show up as missing with their author.

use std::collections::BTreeSet;

use audita_evidence::sample::sample_record;
use audita_evidence::*;
use proptest::prelude::*;

/// Which stored item a flip lands in.
#[derive(Debug, Clone)]
enum Target {
    Envelope,
    Receipt,
    Header,
    Leaf,
    Checkpoint,
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        Just(Target::Envelope),
        Just(Target::Receipt),
        Just(Target::Header),
        Just(Target::Leaf),
        Just(Target::Checkpoint)
    ]
}

fn flip(bytes: &mut [u8], pos: usize, mask: u8) {
    let i = pos % bytes.len();
    bytes[i] ^= mask;
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn any_flip_is_never_clean_and_never_certifies_a_forgery(
        seed in 0u64..1_000,
        messages in 16usize..40,
        which in target(),
        item in any::<usize>(),
        pos in any::<usize>(),
        mask in 1u8..=255,
    ) {
        let s = sample_record(seed, messages);
        let originals: BTreeSet<Vec<u8>> = s.record.envelopes.iter().cloned().collect();
        let mut r = s.record.clone();
        let mut flipped_original: Option<MessageId> = None;
        match which {
            Target::Envelope => {
                let i = item % r.envelopes.len();
                flipped_original = Some(s.envelopes[i].id().clone());
                flip(&mut r.envelopes[i], pos, mask);
            }
            Target::Receipt => { let i = item % r.receipts.len(); flip(&mut r.receipts[i], pos, mask) }
            Target::Header => { let i = item % r.epochs.len(); flip(&mut r.epochs[i].header, pos, mask) }
            Target::Leaf => {
                let e = item % r.epochs.len();
                let l = (item / 7) % r.epochs[e].leaves.len();
                flip(&mut r.epochs[e].leaves[l], pos, mask)
            }
            Target::Checkpoint => { let i = item % r.checkpoints.len(); flip(&mut r.checkpoints[i], pos, mask) }
        }
        let p = verify_record(&r, &s.keys);
        prop_assert!(!p.is_clean());
        let batched = verify_record_with(&r, &s.keys, &Policy { batch_signatures: true, ..Policy::default() }, None);
        prop_assert_eq!(&batched, &p, "batch verification changes no finding");
        let threaded = verify_record_with(&r, &s.keys, &Policy { threads: 3, ..Policy::default() }, None);
        prop_assert_eq!(&threaded, &p, "threads change no finding");
        for c in p.certified.values() {
            prop_assert!(originals.contains(c.envelope.as_bytes()), "a modified envelope was certified");
        }
        if let Some(id) = flipped_original {
            let m = p.missing.iter().find(|m| m.id == id);
            prop_assert!(m.is_some(), "the original of a flipped envelope is reported missing");
            prop_assert_eq!(m.unwrap().author(), &id.author);
        }
    }

    #[test]
    fn deletions_always_show_as_missing_with_their_author(
        seed in 0u64..1_000,
        messages in 16usize..40,
        drop_mask in any::<u64>(),
    ) {
        let s = sample_record(seed, messages);
        let mut r = s.record.clone();
        let mut dropped = Vec::new();
        let mut kept = Vec::new();
        for (i, raw) in s.record.envelopes.iter().enumerate() {
            if drop_mask >> (i % 64) & 1 == 1 && i % 3 == 0 {
                dropped.push(s.envelopes[i].id().clone());
            } else {
                kept.push(raw.clone());
            }
        }
        r.envelopes = kept;
        let p = verify_record(&r, &s.keys);
        prop_assert_eq!(p.is_clean(), dropped.is_empty());
        for id in &dropped {
            let m = p.missing.iter().find(|m| &m.id == id);
            prop_assert!(m.is_some(), "dropped message not reported missing");
            prop_assert_eq!(m.unwrap().author(), &id.author);
            prop_assert!(m.unwrap().sealed_in.is_some());
            prop_assert!(!p.certified.contains_key(id));
        }
        // Deletion never demotes a message whose citations stay certified or absent.
        prop_assert_eq!(p.certified.len() + dropped.len(), s.envelopes.len());
    }

    #[test]
    fn envelope_decoding_is_total(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = SignedEnvelope::decode(bytes.clone());
        let _ = Receipt::decode(bytes.clone());
        let _ = EpochHeader::decode(bytes.clone());
        let _ = SignedCheckpoint::parse(&bytes);
        let _ = InclusionProof::decode(&bytes);
        let _ = ConsistencyProof::decode(&bytes);
    }
}
