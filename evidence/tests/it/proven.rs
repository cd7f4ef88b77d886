//! Proven slices verify like the whole record they come from, stay small as the log
//! grows, and fail closed on every tampered proof, header or note.

use std::collections::BTreeSet;

use audita_evidence::sample::sample_record;
use audita_evidence::{
    verify_proven, verify_record, EpochFault, MessageId, Partition, Policy, ProvenSlice,
    SuspectReason,
};
use proptest::prelude::*;

fn ids_of(p: &Partition) -> BTreeSet<MessageId> {
    p.certified.keys().cloned().collect()
}

/// Every id a certified member of `ids` cites, transitively (within the record).
fn closed(full: &Partition, seed: &BTreeSet<MessageId>) -> BTreeSet<MessageId> {
    let mut out = seed.clone();
    let mut stack: Vec<MessageId> = seed.iter().cloned().collect();
    while let Some(id) = stack.pop() {
        if let Some(c) = full.certified.get(&id) {
            for p in &c.envelope.envelope().citations {
                if full.certified.contains_key(p) && out.insert(p.clone()) {
                    stack.push(p.clone());
                }
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// A citation-closed subset certifies exactly as in the whole record, with nothing
    /// missing; an arbitrary subset certifies the same messages and reports as missing
    /// exactly the cited ids it left out.
    #[test]
    fn slices_certify_like_the_whole_record(seed in 0u64..1000, n in 4usize..60, pick in any::<u64>()) {
        let s = sample_record(seed, n);
        let full = verify_record(&s.record, &s.keys);
        let all: Vec<MessageId> = full.certified.keys().cloned().collect();
        prop_assume!(!all.is_empty());
        let subset: BTreeSet<MessageId> = all
            .iter()
            .enumerate()
            .filter(|(i, _)| (pick >> (i % 64)) & 1 == 1)
            .map(|(_, id)| id.clone())
            .collect();

        let closure = closed(&full, &subset);
        let p = verify_proven(&ProvenSlice::from_record(&s.record, &closure), &s.keys, &Policy::default());
        prop_assert_eq!(ids_of(&p), closure.clone());
        prop_assert!(p.suspect.is_empty(), "{:?}", p.suspect);
        prop_assert!(p.missing.is_empty(), "{:?}", p.missing);
        prop_assert!(p.epochs.iter().all(|e| e.intact()), "{:?}", p.epochs);

        let sliced = ProvenSlice::from_record(&s.record, &subset);
        let p = verify_proven(&sliced, &s.keys, &Policy::default());
        prop_assert_eq!(ids_of(&p), subset.clone());
        let left_out: BTreeSet<MessageId> = subset
            .iter()
            .flat_map(|id| full.certified[id].envelope.envelope().citations.clone())
            .filter(|c| !subset.contains(c))
            .collect();
        // Left-out certified ids are proved sealed elsewhere; the rest stay missing.
        let want_elsewhere: BTreeSet<MessageId> = left_out
            .iter()
            .filter(|c| full.certified.contains_key(*c))
            .cloned()
            .collect();
        prop_assert_eq!(&p.elsewhere, &want_elsewhere);
        let got_missing: BTreeSet<MessageId> = p.missing.iter().map(|m| m.id.clone()).collect();
        let want_missing: BTreeSet<MessageId> = left_out.difference(&want_elsewhere).cloned().collect();
        prop_assert_eq!(got_missing, want_missing);

        // A broken "sealed elsewhere" proof fails closed: that id is missing again.
        if let Some(i) = (0..sliced.elsewhere_proofs.len()).find(|i| !sliced.elsewhere_proofs[*i].is_empty()) {
            let mut bad = sliced.clone();
            let last = bad.elsewhere_proofs[i].len() - 1;
            bad.elsewhere_proofs[i][last] ^= 1;
            let id = MessageId::from_leaf_bytes(&bad.elsewhere[i]).unwrap();
            let p = verify_proven(&bad, &s.keys, &Policy::default());
            prop_assert!(!p.elsewhere.contains(&id));
            prop_assert!(p.missing.iter().any(|m| m.id == id));
        }
    }

    /// Flipping any byte of any proof, header or note never certifies a message whose
    /// proof no longer holds, and the round trip through the wire form is exact.
    #[test]
    fn tampering_fails_closed(seed in 0u64..1000, which in 0usize..3, at in any::<usize>(), bit in 0u8..8) {
        let s = sample_record(seed, 24);
        let full = verify_record(&s.record, &s.keys);
        let ids: BTreeSet<MessageId> = full.certified.keys().cloned().collect();
        let slice = ProvenSlice::from_record(&s.record, &ids);
        prop_assert_eq!(ProvenSlice::decode(&slice.encode()).unwrap(), slice.clone());
        let mut bad = slice.clone();
        let list = match which {
            0 => &mut bad.proofs,
            1 => &mut bad.headers,
            _ => &mut bad.checkpoints,
        };
        prop_assume!(!list.is_empty());
        let i = at % list.len();
        prop_assume!(!list[i].is_empty());
        let j = (at / 7) % list[i].len();
        list[i][j] ^= 1 << bit;
        let p = verify_proven(&bad, &s.keys, &Policy::default());
        if which == 0 {
            // Exactly the message whose proof changed is no longer certified.
            let victim = audita_evidence::SignedEnvelope::decode(bad.envelopes[i].clone()).unwrap();
            prop_assert!(!p.certified.contains_key(victim.id()));
        } else {
            // A changed header or note cannot keep every epoch intact and every message
            // certified: some seal breaks or some finding is raised.
            prop_assert!(!p.is_clean() || ids_of(&p) != ids);
        }
        // Truncations of the wire form are errors, never panics.
        let bytes = bad.encode();
        for cut in [0, 1, bytes.len() / 2, bytes.len().saturating_sub(1)] {
            prop_assert!(ProvenSlice::decode(&bytes[..cut]).is_err());
        }
    }
}

#[test]
fn a_missing_cosignature_breaks_the_seal_of_every_message_of_that_epoch() {
    let s = sample_record(7, 30);
    let full = verify_record(&s.record, &s.keys);
    let ids: BTreeSet<MessageId> = full.certified.keys().cloned().collect();
    let mut slice = ProvenSlice::from_record(&s.record, &ids);
    // Drop every co-signature line (keep the log's own first signature line).
    slice.checkpoints = slice
        .checkpoints
        .iter()
        .map(|note| {
            let text = String::from_utf8(note.clone()).unwrap();
            let (body, sigs) = text.split_once("\n\n").unwrap();
            let first = sigs.lines().next().unwrap();
            format!("{body}\n\n{first}\n").into_bytes()
        })
        .collect();
    let p = verify_proven(&slice, &s.keys, &Policy::default());
    assert!(p.certified.is_empty());
    assert!(p.epochs.iter().all(|e| e
        .faults
        .iter()
        .any(|f| matches!(f, EpochFault::NotWitnessed { .. }))));
    assert!(p.suspect.iter().all(|x| x.reasons.iter().any(|r| matches!(
        r,
        SuspectReason::SealBroken { .. } | SuspectReason::CitesSuspect(_)
    ))));
}

#[test]
fn a_slice_stays_small_as_the_log_grows() {
    let small = sample_record(3, 64);
    let big = sample_record(3, 4096);
    let size_of = |s: &audita_evidence::sample::Sample| {
        let full = verify_record(&s.record, &s.keys);
        let ids: BTreeSet<MessageId> = full.certified.keys().take(8).cloned().collect();
        let slice = ProvenSlice::from_record(&s.record, &ids);
        let p = verify_proven(&slice, &s.keys, &Policy::default());
        assert_eq!(p.certified.len(), 8);
        let whole: usize = s
            .record
            .epochs
            .iter()
            .map(|e| e.header.len() + e.leaves.iter().map(Vec::len).sum::<usize>())
            .sum();
        (slice.encode().len(), whole)
    };
    let (a, whole_a) = size_of(&small);
    let (b, whole_b) = size_of(&big);
    // 64x the log: the whole record's seal data grows ~64x, the slice's by the
    // logarithmic proof length and a few more epoch headers, well under 4x.
    assert!(whole_b > 30 * whole_a, "{whole_a} -> {whole_b}");
    assert!(b < 4 * a, "slice {a} -> {b} bytes");
}
