//! The committed test vectors (`testdata/vectors.json`) match the code, and each
//! vector verifies on its own terms (signatures, ids, roots, proofs, checkpoints).
//! Regenerate after an intended format change with
//! `cargo run -p audita-evidence --example gen_vectors`.
//!
//! The vectors are Ed25519 vectors: a `cfg(fuzzing)` build (cargo-fuzz only)
//! replaces Ed25519 by the stand-in of `src/sig.rs`, so this file is compiled out
//! there; every other test of the crate runs under both.
#![cfg(not(fuzzing))]

#[path = "../../testdata/gen.rs"]
mod gen;

use audita_evidence::merkle::{leaf_hash, root_from_leaf_hashes};
use audita_evidence::*;

fn unhex(s: &serde_json::Value) -> Vec<u8> {
    hex::decode(s.as_str().unwrap()).unwrap()
}

fn committed() -> serde_json::Value {
    let text = include_str!("../../testdata/vectors.json");
    serde_json::from_str(text).unwrap()
}

#[test]
fn committed_vectors_match_the_code() {
    assert_eq!(
        committed(),
        gen::vectors(),
        "format changed: regenerate and review testdata/vectors.json"
    );
}

#[test]
fn committed_vectors_verify_independently() {
    let v = committed();
    let mut keys = KeyRegistry::new();
    for k in v["keys"].as_array().unwrap() {
        let public: [u8; 32] = unhex(&k["public"]).try_into().unwrap();
        keys.add_principal(
            PrincipalId::new(k["name"].as_str().unwrap()).unwrap(),
            VerifyingKey::from_bytes(&public).unwrap(),
        );
    }
    let log_pub: [u8; 32] = unhex(&v["log"]["public"]).try_into().unwrap();
    keys.add_log(
        v["log"]["origin"].as_str().unwrap(),
        VerifyingKey::from_bytes(&log_pub).unwrap(),
    )
    .unwrap();
    let keeper_pub: [u8; 32] = unhex(&v["keeper"]["public"]).try_into().unwrap();
    keys.add_keeper(
        v["keeper"]["name"].as_str().unwrap(),
        VerifyingKey::from_bytes(&keeper_pub).unwrap(),
    )
    .unwrap();

    for e in v["envelopes"].as_array().unwrap() {
        let signed = unhex(&e["signed"]);
        assert_eq!(sha256(&signed).to_vec(), unhex(&e["id_digest"]));
        let env = SignedEnvelope::decode(signed).unwrap();
        assert!(env.check(&keys).is_ok());
        assert_eq!(env.id().leaf_bytes(), unhex(&e["leaf"]));
        assert_eq!(
            leaf_hash(&env.id().leaf_bytes()).to_vec(),
            unhex(&e["leaf_hash"])
        );
    }
    let receipt = Receipt::decode(unhex(&v["receipt"]["signed"])).unwrap();
    receipt.verify(&keys).unwrap();

    let leaves: Vec<[u8; 32]> = (0u8..13).map(|i| leaf_hash(&[i])).collect();
    let roots: Vec<Vec<u8>> = v["merkle"]["roots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| unhex(&r["root"]))
        .collect();
    // RFC 9162 known answer: the empty tree hashes to SHA-256("").
    assert_eq!(
        hex::encode(&roots[0]),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    for (n, root) in roots.iter().enumerate() {
        assert_eq!(root_from_leaf_hashes(&leaves[..n]).to_vec(), *root);
    }
    for p in v["merkle"]["inclusion"].as_array().unwrap() {
        let proof = InclusionProof::decode(&unhex(&p["encoded"])).unwrap();
        let root: [u8; 32] = roots[proof.size as usize].clone().try_into().unwrap();
        proof.verify(&leaves[proof.index as usize], &root).unwrap();
    }
    for p in v["merkle"]["consistency"].as_array().unwrap() {
        let proof = ConsistencyProof::decode(&unhex(&p["encoded"])).unwrap();
        let old: [u8; 32] = roots[proof.old_size as usize].clone().try_into().unwrap();
        let new: [u8; 32] = roots[proof.size as usize].clone().try_into().unwrap();
        proof.verify(&old, &new).unwrap();
    }
    let mut prev = [0u8; 32];
    for e in v["epochs"].as_array().unwrap() {
        let header = EpochHeader::decode(unhex(&e["header"])).unwrap();
        header.verify(&keys).unwrap();
        assert_eq!(header.prev, prev);
        prev = header.hash();
        let cp = SignedCheckpoint::parse(e["checkpoint"].as_str().unwrap().as_bytes()).unwrap();
        cp.verify_log(&keys).unwrap();
        assert_eq!(cp.checkpoint(), &header.checkpoint());
        assert_eq!(cp.cosignatures(&keys).len(), 1);
    }
}
