//! The incremental slicer against a from-scratch recompute at every epoch, on seeded
//! random streams of citation, realisation and anchor inserts and retractions (in the
//! manner of differential-dataflow's own `tests/bfs.rs`).

use audita_slicer::{recompute, EpochBatch, NodeId, Slicer};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeSet;

fn node(i: u32) -> NodeId {
    let mut n = [0u8; 32];
    n[..4].copy_from_slice(&i.to_be_bytes());
    n[31] = 0xA5;
    n
}

/// Toggles an element of `set`, recording the diff in `out`.
fn toggle<T: Ord + Copy>(set: &mut BTreeSet<T>, x: T, out: &mut Vec<(T, isize)>) {
    if set.remove(&x) {
        out.push((x, -1));
    } else {
        set.insert(x);
        out.push((x, 1));
    }
}

fn check_stream(seed: u64, nodes: u32, epochs: usize, per_epoch: usize, workers: usize) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut slicer = Slicer::new(workers);
    let (mut cites, mut realised, mut anchors) =
        (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    for epoch in 0..epochs {
        let mut batch = EpochBatch::default();
        for _ in 0..per_epoch {
            // Citations point to earlier messages mostly (a DAG), sometimes not (cycles
            // from a forged or replayed citation must not break the closure).
            let c = rng.gen_range(1..nodes);
            let p = if rng.gen_bool(0.9) {
                rng.gen_range(0..c)
            } else {
                rng.gen_range(0..nodes)
            };
            toggle(&mut cites, (node(c), node(p)), &mut batch.cites);
            if rng.gen_bool(0.5) {
                toggle(
                    &mut realised,
                    node(rng.gen_range(0..nodes)),
                    &mut batch.realised,
                );
            }
        }
        if rng.gen_bool(0.4) {
            let a = (rng.gen_range(0..4u64), node(rng.gen_range(0..nodes)));
            toggle(&mut anchors, a, &mut batch.anchors);
        }
        slicer.apply(batch);
        let want = recompute(&cites, &realised, &anchors);
        let have = slicer.all();
        assert_eq!(
            have, want,
            "seed {seed}: incremental slices differ from the recompute at epoch {epoch}"
        );
        // The dataflow holds a key for exactly the ids live updates name.
        let named: BTreeSet<_> = cites
            .iter()
            .flat_map(|(c, p)| [*c, *p])
            .chain(realised.iter().copied())
            .chain(anchors.iter().map(|(_, a)| *a))
            .collect();
        assert_eq!(slicer.interned(), named.len(), "seed {seed}, epoch {epoch}");
    }
    // Everything retracted: nothing is left, outputs or keys.
    let batch = EpochBatch {
        cites: cites.iter().map(|e| (*e, -1)).collect(),
        realised: realised.iter().map(|n| (*n, -1)).collect(),
        anchors: anchors.iter().map(|a| (*a, -1)).collect(),
    };
    slicer.apply(batch);
    assert!(slicer.all().is_empty());
    assert_eq!(slicer.interned(), 0);
}

#[test]
fn incremental_slices_equal_recompute_every_epoch_single_worker() {
    for seed in 0..6 {
        check_stream(seed, 40, 25, 12, 1);
    }
}

#[test]
fn incremental_slices_equal_recompute_every_epoch_two_workers() {
    for seed in 100..104 {
        check_stream(seed, 60, 20, 20, 2);
    }
}

#[test]
fn production_created_by_citation_puts_the_cited_victim_on_a_path() {
    let mut s = Slicer::new(1);
    let (attacker, victim, actuation) = (node(1), node(2), node(3));
    s.apply(EpochBatch {
        cites: vec![((actuation, attacker), 1)],
        realised: vec![(attacker, 1), (victim, 1)],
        anchors: vec![((7, actuation), 1)],
    });
    assert!(!s.incident(7).slice.contains(&victim));
    // The attacker cites the victim: the victim is now on a production path.
    let changed = s.apply(EpochBatch {
        cites: vec![((attacker, victim), 1)],
        ..Default::default()
    });
    assert!(changed[&7].produced.contains(&victim));
    // Retracting the citation (e.g. the attacker's message turned out suspect) removes it.
    let changed = s.apply(EpochBatch {
        cites: vec![((attacker, victim), -1)],
        ..Default::default()
    });
    assert!(!changed[&7].slice.contains(&victim));
}

#[test]
fn an_unrealised_link_is_in_the_slice_but_off_the_production_path() {
    let mut s = Slicer::new(1);
    let (cmd, halt, act) = (node(10), node(11), node(12));
    s.apply(EpochBatch {
        cites: vec![((act, cmd), 1), ((halt, cmd), 1), ((act, halt), 1)],
        realised: vec![(cmd, 1)],
        anchors: vec![((1, act), 1)],
    });
    let inc = s.incident(1);
    assert_eq!(inc.slice, [cmd, halt, act].into_iter().collect());
    assert!(inc.produced.contains(&cmd) && !inc.produced.contains(&halt));
}
