//! Property tests of the decision procedure on generated traces: an injection, a
//! chain of transformation steps (the only path) to the action, and side inputs of
//! every grade on the chain.
//!
//! - Adding a logged transformation node with matching hashes on any hash-match edge
//!   never weakens the claim (and never changes reachability).
//! - Replacing any hash-match edge of the only path by a folded or a similarity edge
//!   always drops a causal claim to temporal, naming that edge.

use audita_traces::model::FoldedMutation;
use audita_traces::{
    witness, ArtifactHash, EdgeKind, Graph, Level, Link, LinkBasis, Node, SpanId, Trace,
};
use proptest::prelude::*;

#[derive(Clone, Copy, Debug)]
enum Side {
    Root,
    Match,
    Folded,
    Exit,
    Similar,
}

fn side() -> impl Strategy<Value = Side> {
    prop_oneof![
        Just(Side::Root),
        Just(Side::Match),
        Just(Side::Folded),
        Just(Side::Exit),
        Just(Side::Similar)
    ]
}

fn sid(n: u64) -> SpanId {
    SpanId::parse(&format!("{n:016x}")).unwrap()
}

fn art(tag: &str) -> ArtifactHash {
    ArtifactHash::of(tag.as_bytes())
}

const INJECTION: u64 = 1;
const ACTION: u64 = 1000;

/// Injection, `sides.len() - 1` chain steps, then the action; chain step `j` (the
/// action last) consumes its predecessor's output and one side input of grade
/// `sides[j]`.
fn build(sides: &[Side]) -> Trace {
    let mut t = Trace::new();
    let root = art("root");
    let mut top = Node::new(sid(999), "invoke_agent", 0);
    top.roots = vec![root.clone()];
    t.insert(top).unwrap();
    let mut inj = Node::new(sid(INJECTION), "tool", 100);
    inj.input_parts = vec![root.clone()];
    inj.output_hash = Some(art("out-1"));
    t.insert(inj).unwrap();
    let mut prev_out = art("out-1");
    for (j, s) in sides.iter().enumerate() {
        let n = if j + 1 == sides.len() {
            ACTION
        } else {
            2 + j as u64
        };
        let start = 200 + 100 * j as u64;
        let mut c = Node::new(sid(n), "step", start);
        c.input_parts = vec![prev_out.clone(), root.clone()];
        let side_out = art(&format!("side-{j}"));
        let mut side_node = Node::new(sid(500 + j as u64), "side", start - 50);
        side_node.input_parts = vec![root.clone()];
        side_node.output_hash = Some(art(&format!("side-node-out-{j}")));
        match s {
            Side::Root => {}
            Side::Match => {
                side_node.output_hash = Some(side_out.clone());
                c.input_parts.push(side_out);
            }
            Side::Folded => {
                side_node.folded.push(FoldedMutation {
                    output_hash: side_out.clone(),
                    input_parts: Vec::new(),
                    kind: None,
                });
                c.input_parts.push(side_out);
            }
            Side::Exit => c.input_parts.push(side_out),
            Side::Similar => c.links.push(Link {
                span_id: side_node.span_id.clone(),
                basis: Some(LinkBasis::EmbeddingSimilarity),
                similarity: Some(0.9),
            }),
        }
        t.insert(side_node).unwrap();
        prev_out = art(&format!("out-{n}"));
        c.output_hash = Some(prev_out.clone());
        t.insert(c).unwrap();
    }
    t
}

fn claim(t: &Trace) -> audita_traces::Witness {
    witness(&Graph::new(t), &sid(ACTION), &sid(INJECTION)).unwrap()
}

/// Order of strength: indeterminate < temporal < causal.
fn strength(l: Level) -> u8 {
    match l {
        Level::Indeterminate => 0,
        Level::Temporal => 1,
        Level::Causal => 2,
    }
}

/// Every (parent, child, artifact) hash-match edge on an input part, over all nodes.
fn hash_match_edges(t: &Trace) -> Vec<(SpanId, SpanId, ArtifactHash)> {
    let g = Graph::new(t);
    t.nodes()
        .flat_map(|n| g.edges_into(n))
        .filter(|e| e.kind == EdgeKind::HashMatch && e.record_id.is_none())
        .map(|e| (e.parent.unwrap(), e.child, e.artifact.unwrap()))
        .collect()
}

/// Splices a logged transformation node M between `p` and `c` on artifact `h`: M
/// consumes `h` and produces a fresh artifact, which `c` consumes instead.
fn splice(t: &Trace, p: &SpanId, c: &SpanId, h: &ArtifactHash) -> Trace {
    let mut t2 = t.clone();
    let (tp, tc) = (t.get(p).unwrap().start_ns, t.get(c).unwrap().start_ns);
    let fresh = art(&format!("spliced-{p}-{c}"));
    let mut m = Node::new(sid(77_777), "compaction", (tp + tc) / 2);
    m.mutation = Some(audita_traces::MutationKind::Compaction);
    m.input_parts = vec![h.clone()];
    m.output_hash = Some(fresh.clone());
    let child = t2.get_mut(c).unwrap();
    for x in child.input_parts.iter_mut() {
        if x == h {
            *x = fresh.clone();
        }
    }
    t2.insert(m).unwrap();
    t2
}

/// The golden files, for mutation.
fn golden_bytes() -> Vec<Vec<u8>> {
    [
        "laundering",
        "retrieval_echo",
        "hash_mismatch",
        "memory_match",
    ]
    .iter()
    .map(|n| std::fs::read(format!("{}/testdata/{n}.json", env!("CARGO_MANIFEST_DIR"))).unwrap())
    .collect()
}

proptest! {
    /// Never a panic on input: random byte edits of real exports parse or fail with
    /// an error, and every witness query on what parses answers or fails cleanly.
    #[test]
    fn mutated_exports_never_panic(
        file in 0usize..4,
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let mut bytes = golden_bytes().swap_remove(file);
        for (at, b) in &edits {
            let i = at.index(bytes.len());
            bytes[i] = *b;
        }
        if let Ok(t) = audita_traces::parse_otlp_json(&bytes, &audita_traces::Limits::default()) {
            let g = Graph::new(&t);
            let ids: Vec<SpanId> = t.nodes().map(|n| n.span_id.clone()).collect();
            for a in &ids {
                for b in &ids {
                    let _ = witness(&g, a, b);
                }
            }
        }
    }

    #[test]
    fn adding_a_logged_transformation_never_weakens_a_claim(
        sides in proptest::collection::vec(side(), 1..7),
        pick in any::<prop::sample::Index>(),
    ) {
        let t = build(&sides);
        let before = claim(&t);
        let edges = hash_match_edges(&t);
        prop_assume!(!edges.is_empty());
        let (p, c, h) = &edges[pick.index(edges.len())];
        let after = claim(&splice(&t, p, c, h));
        prop_assert!(strength(after.level) >= strength(before.level),
            "{:?} -> {:?} splicing {p}->{c}", before.level, after.level);
        prop_assert_eq!(after.reaches_injection, before.reaches_injection);
    }

    #[test]
    fn a_non_witness_edge_on_the_only_path_drops_causal_to_temporal(
        chain in proptest::collection::vec(prop_oneof![Just(Side::Root), Just(Side::Match)], 1..7),
        pick in any::<prop::sample::Index>(),
        similarity in any::<bool>(),
    ) {
        let t = build(&chain);
        prop_assert_eq!(claim(&t).level, Level::Causal);
        // The path: injection → 2 → … → action.
        let mut path: Vec<u64> = vec![INJECTION];
        path.extend((0..chain.len() as u64 - 1).map(|j| 2 + j));
        path.push(ACTION);
        let j = pick.index(path.len() - 1);
        let (p, c) = (sid(path[j]), sid(path[j + 1]));
        let h = t.get(&p).unwrap().output_hash.clone().unwrap();
        let mut t2 = t.clone();
        if similarity {
            let child = t2.get_mut(&c).unwrap();
            child.input_parts.retain(|x| *x != h);
            child.links.push(Link { span_id: p.clone(), basis: Some(LinkBasis::EmbeddingSimilarity), similarity: Some(0.99) });
        } else {
            let parent = t2.get_mut(&p).unwrap();
            parent.output_hash = Some(art(&format!("unlogged-{p}")));
            parent.folded.push(FoldedMutation { output_hash: h.clone(), input_parts: Vec::new(), kind: None });
        }
        let w = claim(&t2);
        prop_assert_eq!(w.level, Level::Temporal);
        prop_assert!(w.reaches_injection);
        let kind = if similarity { EdgeKind::Similarity } else { EdgeKind::Folded };
        prop_assert_eq!(w.offending.len(), 1);
        prop_assert_eq!(w.offending[0].kind, kind);
        prop_assert_eq!(w.offending[0].parent.as_ref(), Some(&p));
        prop_assert_eq!(&w.offending[0].child, &c);
    }

    #[test]
    fn the_level_follows_the_worst_side_input(sides in proptest::collection::vec(side(), 1..7)) {
        let w = claim(&build(&sides));
        let expect = if sides.iter().any(|s| matches!(s, Side::Exit)) {
            Level::Indeterminate
        } else if sides.iter().any(|s| matches!(s, Side::Folded | Side::Similar)) {
            Level::Temporal
        } else {
            Level::Causal
        };
        prop_assert_eq!(w.level, expect);
        prop_assert!(w.reaches_injection);
    }
}

/// A JSON value as text with the object members in the order `perm` picks and
/// whitespace after every separator when `spaced`.
fn spell(v: &serde_json::Value, perm: &mut impl FnMut(usize) -> usize, spaced: bool) -> String {
    let sep = if spaced { ", " } else { "," };
    let colon = if spaced { ": " } else { ":" };
    match v {
        serde_json::Value::Object(m) => {
            let mut members: Vec<(&String, &serde_json::Value)> = m.iter().collect();
            // A deterministic shuffle driven by the generated choices.
            for i in (1..members.len()).rev() {
                members.swap(i, perm(i + 1));
            }
            let inner: Vec<String> = members
                .into_iter()
                .map(|(k, x)| {
                    format!(
                        "{}{colon}{}",
                        serde_json::to_string(k).unwrap(),
                        spell(x, perm, spaced)
                    )
                })
                .collect();
            format!("{{{}}}", inner.join(sep))
        }
        serde_json::Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(|x| spell(x, perm, spaced)).collect();
            format!("[{}]", inner.join(sep))
        }
        other => other.to_string(),
    }
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i32>().prop_map(serde_json::Value::from),
        (-1e6f64..1e6).prop_map(serde_json::Value::from),
        "[a-zA-Z0-9 _\\-é\"\\\\\n]{0,8}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            proptest::collection::btree_map("[a-z]{1,4}", inner, 0..4)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn derived_argument_hashes_ignore_key_order_and_whitespace(
        args in proptest::collection::btree_map("[a-z_]{1,6}", json_value(), 0..5),
        choices in proptest::collection::vec(any::<prop::sample::Index>(), 64),
        spaced in any::<bool>(),
    ) {
        use audita_traces::genai::arguments_hash;
        let args = serde_json::Value::Object(args.into_iter().collect());
        let mut k = 0;
        let mut perm = |n: usize| { k += 1; choices[k % choices.len()].index(n) };
        let text = spell(&args, &mut perm, spaced);
        // The object itself, its text in any member order and spacing, and the text
        // of the canonical form: one artifact.
        let as_object = arguments_hash(&args);
        prop_assert_eq!(&arguments_hash(&serde_json::Value::String(text.clone())), &as_object, "{}", text);
        let canonical = audita_traces::jcs::canonical(&args);
        prop_assert_eq!(&arguments_hash(&serde_json::Value::String(canonical.clone())), &as_object);
        prop_assert_eq!(as_object, ArtifactHash::of(canonical.as_bytes()));
    }
}
