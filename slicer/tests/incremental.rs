//! The incremental closures against a from-scratch recompute at every batch, on
//! seeded random streams of citation and anchor inserts and retractions (in the
//! manner of differential-dataflow's own `tests/bfs.rs`).

use audita_slicer::{recompute, Graph, IncidentId, Key};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeSet;

fn node(i: u32) -> Key {
    (u128::from(i) << 96) | 0xA5
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

fn check_stream(seed: u64, nodes: u32, batches: usize, per_batch: usize) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut graph = Graph::new();
    let mut cites: BTreeSet<(Key, Key)> = BTreeSet::new();
    let mut anchors: BTreeSet<(IncidentId, Key)> = BTreeSet::new();
    for batch in 0..batches {
        let (mut edges, mut anchored) = (Vec::new(), Vec::new());
        for _ in 0..per_batch {
            // Citations point to earlier messages mostly (a DAG), sometimes not (cycles
            // from a forged or replayed citation must not break the closure).
            let c = rng.gen_range(1..nodes);
            let p = if rng.gen_bool(0.9) {
                rng.gen_range(0..c)
            } else {
                rng.gen_range(0..nodes)
            };
            toggle(&mut cites, (node(c), node(p)), &mut edges);
        }
        if rng.gen_bool(0.4) {
            let a = (rng.gen_range(0..4u64), node(rng.gen_range(0..nodes)));
            toggle(&mut anchors, a, &mut anchored);
        }
        graph.apply(edges, anchored);
        assert_eq!(
            graph.all(),
            recompute(&cites, &anchors),
            "seed {seed}: incremental closures differ from the recompute at batch {batch}"
        );
    }
    // Everything retracted: nothing is left.
    graph.apply(
        cites.iter().map(|e| (*e, -1)).collect(),
        anchors.iter().map(|a| (*a, -1)).collect(),
    );
    assert!(graph.all().is_empty());
}

#[test]
fn incremental_closures_equal_recompute_every_batch() {
    for seed in 0..8 {
        check_stream(seed, 40, 25, 12);
    }
}

#[test]
fn incremental_closures_equal_recompute_on_a_denser_graph() {
    for seed in 100..104 {
        check_stream(seed, 60, 20, 40);
    }
}

#[test]
fn a_citation_puts_the_cited_message_in_the_closure_and_its_retraction_takes_it_out() {
    let mut g = Graph::new();
    let (attacker, victim, actuation) = (node(1), node(2), node(3));
    g.apply(vec![((actuation, attacker), 1)], vec![((7, actuation), 1)]);
    assert!(!g.closure(7).contains(&victim));
    // The attacker cites the victim: the victim is now an ancestor of the anchor.
    let changed = g.apply(vec![((attacker, victim), 1)], Vec::new());
    assert!(changed.contains(&7) && g.closure(7).contains(&victim));
    // Retracting the citation (the attacker's message evicted) takes it out.
    g.apply(vec![((attacker, victim), -1)], Vec::new());
    assert_eq!(g.closure(7), [attacker, actuation].into_iter().collect());
}
