//! The test vectors of `audita-evidence`: keys, signed envelopes, a receipt, Merkle
//! roots and proofs, sealed epochs and their checkpoints.
//!
//! Shared by `examples/gen_vectors.rs` (writes testdata/vectors.json) and
//! `tests/it/vectors.rs` (checks the committed file against the code).
//!
//! Everything here is deterministic: keys come from `derive_signing_key`.

use audita_evidence::merkle::{leaf_hash, root_from_leaf_hashes};
use audita_evidence::*;
use serde_json::{json, Value};

fn h(b: &[u8]) -> String {
    hex::encode(b)
}

fn p(n: &str) -> PrincipalId {
    PrincipalId::new(n).unwrap()
}

/// The log origin of the vectors' epochs.
const ORIGIN: &str = "audita.example/vector-log";
/// The keeper co-signing the vectors' checkpoints.
const KEEPER: &str = "insurer.example/keeper";

pub fn vectors() -> Value {
    let seed = 2026;
    let names = ["planner", "dispatcher", "supervisor", "agv-7", "lidar-3"];
    let keys: Vec<Value> = names
        .iter()
        .map(|n| {
            let k = derive_signing_key(seed, n);
            json!({"name": n, "seed": seed, "secret": h(&k.to_bytes()), "public": h(k.verifying_key().as_bytes())})
        })
        .collect();
    let envs = episode(seed);
    let [_, _, _, halt] = &envs;
    let envelopes: Vec<Value> = envs
        .iter()
        .map(|e| {
            json!({
                "kind": e.envelope().payload.kind(),
                "author": e.id().author.as_str(),
                "signed": h(e.as_bytes()),
                "bytes": e.as_bytes().len(),
                "id_digest": h(&e.id().digest),
                "leaf": h(&e.id().leaf_bytes()),
                "leaf_hash": h(&leaf_hash(&e.id().leaf_bytes())),
            })
        })
        .collect();
    let receipt = Receipt::sign(
        halt.id().clone(),
        p("agv-7"),
        1_031,
        &derive_signing_key(seed, "agv-7"),
    );
    let origin = ORIGIN;
    let keeper = KEEPER;
    let log_key = derive_signing_key(seed, origin);
    let keeper_key = derive_signing_key(seed, keeper);
    json!({
        "description": "audita-evidence test vectors; regenerate with `cargo run -p audita-evidence --example gen_vectors`",
        "keys": keys,
        "log": {"origin": origin, "public": h(log_key.verifying_key().as_bytes()),
                "note_key_id": h(&key_id(origin, 0x01, &log_key.verifying_key()))},
        "keeper": {"name": keeper, "public": h(keeper_key.verifying_key().as_bytes()),
                   "cosignature_key_id": h(&key_id(keeper, 0x04, &keeper_key.verifying_key()))},
        "envelopes": envelopes,
        "receipt": {"signed": h(receipt.as_bytes()), "message": h(&halt.id().digest), "recipient": "agv-7"},
        "merkle": merkle(),
        "epochs": epochs(seed, &envs),
    })
}

/// One episode, signed: a lidar report, the planner's text citing it, the
/// dispatcher's `move_to` citing that, and the supervisor's `halt` citing the report
/// and the move.
fn episode(seed: u64) -> [SignedEnvelope; 4] {
    let sensor = Envelope::new(
        p("lidar-3"),
        p("supervisor"),
        1_000,
        Payload::SensorReport {
            sensor: "lidar-3".into(),
            reading: "human@1200,3400".into(),
        },
    )
    .sign(&derive_signing_key(seed, "lidar-3"))
    .unwrap();
    let plan = Envelope::new(
        p("planner"),
        p("dispatcher"),
        1_010,
        Payload::AgentText {
            text: "route agv-7 via aisle 2".into(),
        },
    )
    .cite([sensor.id().clone()])
    .with_effect(Effect::Claim("crate 7 assigned to agv-7".into()))
    .with_pins(ReplayPins {
        model_id: Some("planner-llm-8b".into()),
        model_hash: Some(sha256(b"weights")),
        seed: Some(42),
        tools: vec![ToolPin {
            name: "route-planner".into(),
            version: "2.3.1".into(),
        }],
    })
    .sign(&derive_signing_key(seed, "planner"))
    .unwrap();
    let mv = Envelope::new(
        p("dispatcher"),
        p("agv-7"),
        1_020,
        Payload::MoveTo {
            target: "agv-7".into(),
            x_mm: 12_500,
            y_mm: -3_000,
        },
    )
    .cite([plan.id().clone()])
    .with_effect(Effect::AtPosition {
        target: "agv-7".into(),
        x_mm: 12_500,
        y_mm: -3_000,
        tolerance_mm: 50,
    })
    .sign(&derive_signing_key(seed, "dispatcher"))
    .unwrap();
    let halt = Envelope::new(
        p("supervisor"),
        p("agv-7"),
        1_030,
        Payload::Halt {
            target: "agv-7".into(),
        },
    )
    .cite([sensor.id().clone(), mv.id().clone()])
    .with_effect(Effect::Halted {
        target: "agv-7".into(),
    })
    .sign(&derive_signing_key(seed, "supervisor"))
    .unwrap();
    [sensor, plan, mv, halt]
}

/// Merkle vectors over the leaf hashes of the single bytes 0..13: the root of every
/// prefix, and inclusion and consistency proofs.
fn merkle() -> Value {
    let leaves: Vec<[u8; 32]> = (0u8..13).map(|i| leaf_hash(&[i])).collect();
    let roots: Vec<Value> = (0..=13)
        .map(|n| json!({"size": n, "root": h(&root_from_leaf_hashes(&leaves[..n]))}))
        .collect();
    let mut inclusion = Vec::new();
    for (index, size) in [
        (0u64, 1u64),
        (0, 2),
        (1, 2),
        (2, 3),
        (4, 5),
        (0, 8),
        (5, 8),
        (7, 8),
        (6, 13),
        (12, 13),
    ] {
        let proof = InclusionProof::generate(&leaves[..size as usize], index).unwrap();
        inclusion.push(json!({
            "index": index, "size": size,
            "path": proof.path.iter().map(|x| h(x)).collect::<Vec<_>>(),
            "encoded": h(&proof.encode()),
        }));
    }
    let mut consistency = Vec::new();
    for (old, size) in [
        (1u64, 1u64),
        (1, 2),
        (1, 8),
        (3, 7),
        (4, 8),
        (5, 13),
        (6, 8),
        (8, 13),
        (12, 13),
    ] {
        let proof = ConsistencyProof::generate(&leaves[..size as usize], old).unwrap();
        consistency.push(json!({
            "old_size": old, "size": size,
            "path": proof.path.iter().map(|x| h(x)).collect::<Vec<_>>(),
            "encoded": h(&proof.encode()),
        }));
    }
    json!({"leaves": "leaf_hash([i]) for i in 0..13", "roots": roots, "inclusion": inclusion, "consistency": consistency})
}

/// The episode sealed into two epochs (two messages each), each checkpoint
/// co-signed by the keeper.
fn epochs(seed: u64, envs: &[SignedEnvelope; 4]) -> Vec<Value> {
    let [sensor, plan, mv, halt] = envs;
    let log_key = derive_signing_key(seed, ORIGIN);
    let mut sealer = Sealer::new(ORIGIN, log_key.clone()).unwrap();
    sealer.append_envelope(sensor);
    sealer.append_envelope(plan);
    let mut e0 = sealer.close_epoch(2_000);
    sealer.append_envelope(mv);
    sealer.append_envelope(halt);
    let mut e1 = sealer.close_epoch(3_000);
    let keeper_key = derive_signing_key(seed, KEEPER);
    e0.checkpoint.cosign(KEEPER, &keeper_key, 1_790_000_000);
    e1.checkpoint.cosign(KEEPER, &keeper_key, 1_790_000_100);
    [&e0, &e1]
        .iter()
        .map(|e| {
            json!({
                "number": e.header.number,
                "header": h(e.header.as_bytes()),
                "header_hash": h(&e.header.hash()),
                "window_root": h(&e.header.window_root),
                "log_root": h(&e.header.log_root),
                "checkpoint": e.checkpoint.to_text(),
            })
        })
        .collect()
}
