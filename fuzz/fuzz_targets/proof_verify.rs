//! Proof parsing and verification never panic, and a parsed proof that verifies
//! against a real tree is the honest one.
#![no_main]

use audita_evidence::merkle::{leaf_hash, root_from_leaf_hashes};
use audita_evidence::{ConsistencyProof, InclusionProof};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let leaves: Vec<[u8; 32]> = (0u8..37).map(|i| leaf_hash(&[i])).collect();
    if let Ok(p) = InclusionProof::decode(data) {
        if p.size >= 1 && p.size <= leaves.len() as u64 && p.index < p.size {
            let root = root_from_leaf_hashes(&leaves[..p.size as usize]);
            if p.verify(&leaves[p.index as usize], &root).is_ok() {
                let honest = InclusionProof::generate(&leaves[..p.size as usize], p.index).unwrap();
                assert_eq!(honest.path, p.path);
            }
        } else {
            let _ = p.verify(&leaves[0], &leaves[1]);
        }
    }
    if let Ok(p) = ConsistencyProof::decode(data) {
        if p.old_size <= p.size && p.size <= leaves.len() as u64 {
            let old = root_from_leaf_hashes(&leaves[..p.old_size as usize]);
            let new = root_from_leaf_hashes(&leaves[..p.size as usize]);
            if p.verify(&old, &new).is_ok() {
                let honest = ConsistencyProof::generate(&leaves[..p.size as usize], p.old_size).unwrap();
                assert_eq!(honest.path, p.path);
            }
        } else {
            let _ = p.verify(&leaves[0], &leaves[1]);
        }
    }
});
