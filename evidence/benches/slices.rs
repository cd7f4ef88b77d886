//! What an engine worker pays per incident: verifying a proven slice of a fixed
//! number of messages, against verifying the whole record it comes from, as the log
//! grows — side by side in one run. Prints a Markdown table (BENCHMARKS.md,
//! "Proven slices").
//!
//! Run: `cargo bench -p audita-evidence --bench slices`

use std::collections::BTreeSet;
use std::hint::black_box;
use std::time::{Duration, Instant};

use audita_evidence::merkle::{leaf_hash, CompactRange};
use audita_evidence::sample::sample_record;
use audita_evidence::{verify_proven, verify_record, EpochProofs, MessageId, Policy, ProvenSlice};

/// Messages per slice (a typical incident: window plus citation closure).
const SLICE: usize = 64;

fn best(rounds: usize, mut f: impl FnMut()) -> Duration {
    (0..rounds)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    println!("| log (messages) | whole-record verify | slice verify ({SLICE} msgs) | ratio | slice bytes | whole seal + envelopes bytes | proofs built by the slicer (per slice) |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for n in [1_000usize, 4_000, 16_000, 64_000] {
        let s = sample_record(3, n);
        let full = verify_record(&s.record, &s.keys);
        assert!(full.is_clean());
        // The newest SLICE messages: what an incident at the head of the log holds.
        let ids: BTreeSet<MessageId> = s
            .envelopes
            .iter()
            .rev()
            .take(SLICE)
            .map(|e| e.id().clone())
            .collect();
        let slice = ProvenSlice::from_record(&s.record, &ids);
        let p = verify_proven(&slice, &s.keys, &Policy::default());
        assert_eq!(p.certified.len(), ids.len());
        let whole_rounds = if n > 10_000 { 1 } else { 3 };
        let whole = best(whole_rounds, || {
            black_box(verify_record(&s.record, &s.keys));
        });
        let part = best(20, || {
            black_box(verify_proven(&slice, &s.keys, &Policy::default()));
        });
        // The slicer's side: the epochs of the slice's messages kept as EpochProofs.
        let mut log = CompactRange::new();
        let mut kept = Vec::new();
        for e in &s.record.epochs {
            let hashes: Vec<_> = e.leaves.iter().map(|l| leaf_hash(l)).collect();
            let ep = EpochProofs::new(&log, e.header.clone(), Vec::new(), hashes.clone());
            for h in hashes {
                log.append(h);
            }
            kept.push((ep, e.leaves.clone()));
        }
        let wanted: Vec<(usize, u64)> = kept
            .iter()
            .enumerate()
            .flat_map(|(ei, (ep, leaves))| {
                let start = ep.start;
                leaves
                    .iter()
                    .enumerate()
                    .filter(|(_, l)| {
                        MessageId::from_leaf_bytes(l).is_ok_and(|id| ids.contains(&id))
                    })
                    .map(move |(li, _)| (ei, start + li as u64))
            })
            .collect();
        let prove = best(20, || {
            let mut provers: Vec<_> = kept.iter().map(|(ep, _)| ep.prover()).collect();
            for (ei, index) in &wanted {
                black_box(provers[*ei].prove(*index).unwrap());
            }
        });
        let whole_bytes: usize = s
            .record
            .epochs
            .iter()
            .map(|e| e.header.len() + e.leaves.iter().map(Vec::len).sum::<usize>())
            .sum::<usize>()
            + s.record.checkpoints.iter().map(Vec::len).sum::<usize>()
            + s.record.envelopes.iter().map(Vec::len).sum::<usize>()
            + s.record.receipts.iter().map(Vec::len).sum::<usize>();
        println!(
            "| {} | {:.1} ms | {:.0} µs | {:.0}× | {} | {} | {:.0} µs |",
            s.envelopes.len(),
            whole.as_secs_f64() * 1e3,
            part.as_secs_f64() * 1e6,
            whole.as_secs_f64() / part.as_secs_f64(),
            slice.encode().len(),
            whole_bytes,
            prove.as_secs_f64() * 1e6,
        );
    }
}
