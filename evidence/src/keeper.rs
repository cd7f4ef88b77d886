//! Keepers: the parties (operator, vendors, insurer) that co-sign checkpoints,
//! "witnesses" in transparency-log terms.
//!
//! Design constraints:
//! - A keeper co-signs a checkpoint only if the log signed it and it extends the
//!   keeper's latest co-signed checkpoint: larger or equal size, proven by an RFC
//!   9162 consistency proof. Its co-signature therefore means "append-only up to
//!   here", as in c2sp.org/tlog-cosignature.
//! - A checkpoint with the keeper's latest size but another root is refused with
//!   the two notes as [`Equivocation`] evidence; a smaller size is refused as a
//!   rollback. The keeper state is one checkpoint; time is an input.

use thiserror::Error;

use crate::checkpoint::{Cosignature, Equivocation, SignedCheckpoint};
use crate::error::{NameError, NoteError, ProofError};
use crate::merkle::ConsistencyProof;
use crate::principal::{check_name, KeyRegistry};
use crate::SigningKey;

/// Why a keeper refused to co-sign. All permanent for the given inputs.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum KeeperError {
    /// The log's signature is missing or invalid.
    #[error("checkpoint not signed by its log: {0}")]
    NotLogSigned(NoteError),
    /// The checkpoint is for another log than the keeper's previous ones.
    #[error("checkpoint origin {got} differs from {expected}")]
    OtherLog {
        /// Origin the keeper follows.
        expected: String,
        /// Origin of the checkpoint.
        got: String,
    },
    /// The checkpoint is smaller than one already co-signed.
    #[error("rollback from size {have} to {got}")]
    Rollback {
        /// Latest co-signed size.
        have: u64,
        /// Offered size.
        got: u64,
    },
    /// Same size, different root: the log equivocated.
    #[error("log equivocated at size {}", .0.first.checkpoint().size)]
    Equivocation(Box<Equivocation>),
    /// The consistency proof is for other sizes or does not verify.
    #[error("not consistent with the latest co-signed checkpoint: {0}")]
    Inconsistent(ProofError),
}

impl KeeperError {
    /// Always true.
    pub fn is_permanent(&self) -> bool {
        true
    }
}

/// A keeper with its signing key and its latest co-signed checkpoint.
#[derive(Debug, Clone)]
pub struct Keeper {
    name: String,
    key: SigningKey,
    latest: Option<SignedCheckpoint>,
    /// The latest timestamp this keeper co-signed at: a clock stepped back never
    /// dates a co-signature before one the keeper already made.
    last_timestamp: u64,
}

impl Keeper {
    /// A keeper that has not co-signed anything yet.
    pub fn new(name: &str, key: SigningKey) -> Result<Self, NameError> {
        check_name(name)?;
        Ok(Self {
            name: name.to_owned(),
            key,
            latest: None,
            last_timestamp: 0,
        })
    }
    /// A keeper resuming from `latest`, the last checkpoint it co-signed (e.g. read
    /// back from a record after a restart). `latest` is taken only if it carries this
    /// keeper's valid co-signature over a log-signed checkpoint; otherwise the keeper
    /// starts as [`Keeper::new`] does.
    pub fn resume(
        name: &str,
        key: SigningKey,
        latest: &SignedCheckpoint,
        keys: &KeyRegistry,
    ) -> Result<Self, NameError> {
        let mut k = Keeper::new(name, key)?;
        let own = latest.verify_log(keys).is_ok()
            && keys
                .keeper(name)
                .is_some_and(|vk| *vk == k.key.verifying_key())
            && latest.cosignatures(keys).iter().any(|c| c.keeper == name);
        if own {
            k.last_timestamp = latest
                .cosignatures(keys)
                .iter()
                .filter(|c| c.keeper == name)
                .map(|c| c.timestamp)
                .max()
                .unwrap_or(0);
            k.latest = Some(latest.clone());
        }
        Ok(k)
    }
    /// The keeper's note key name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The latest checkpoint this keeper co-signed.
    pub fn latest(&self) -> Option<&SignedCheckpoint> {
        self.latest.as_ref()
    }
    /// Checks `checkpoint` against the keeper's view and, if it extends it,
    /// appends a `cosignature/v1` line at `timestamp`. `proof` must prove
    /// consistency from the latest co-signed size (ignored for the first one).
    pub fn cosign(
        &mut self,
        checkpoint: &mut SignedCheckpoint,
        proof: &ConsistencyProof,
        keys: &KeyRegistry,
        timestamp: u64,
    ) -> Result<Cosignature, KeeperError> {
        checkpoint
            .verify_log(keys)
            .map_err(KeeperError::NotLogSigned)?;
        let new = checkpoint.checkpoint().clone();
        if let Some(prev) = &self.latest {
            let old = prev.checkpoint();
            if old.origin != new.origin {
                return Err(KeeperError::OtherLog {
                    expected: old.origin.clone(),
                    got: new.origin,
                });
            }
            if new.size < old.size {
                return Err(KeeperError::Rollback {
                    have: old.size,
                    got: new.size,
                });
            }
            if new.size == old.size && new.root != old.root {
                let e = Equivocation::detect(prev, checkpoint, keys)
                    .ok_or(KeeperError::Inconsistent(ProofError::RootMismatch))?;
                return Err(KeeperError::Equivocation(Box::new(e)));
            }
            if proof.old_size != old.size || proof.size != new.size {
                return Err(KeeperError::Inconsistent(ProofError::OutOfRange {
                    index: proof.old_size,
                    size: proof.size,
                }));
            }
            proof
                .verify(&old.root, &new.root)
                .map_err(KeeperError::Inconsistent)?;
        }
        // Monotone: a wall clock stepped back (NTP, a VM restored) must not make a
        // later co-signature look older than an earlier one.
        let timestamp = timestamp.max(self.last_timestamp);
        self.last_timestamp = timestamp;
        checkpoint.cosign(&self.name, &self.key, timestamp);
        self.latest = Some(checkpoint.clone());
        Ok(Cosignature {
            keeper: self.name.clone(),
            timestamp,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::Checkpoint;
    use crate::derive_signing_key;
    use crate::merkle::{leaf_hash, root_from_leaf_hashes};

    #[test]
    fn keeper_cosigns_growth_and_refuses_rollback_and_forks() {
        let log = derive_signing_key(1, "log.example");
        let mut keys = KeyRegistry::new();
        keys.add_log("log.example", log.verifying_key()).unwrap();
        let leaves: Vec<_> = (0u8..9).map(|i| leaf_hash(&[i])).collect();
        let cp = |n: usize| {
            SignedCheckpoint::sign(
                Checkpoint {
                    origin: "log.example".into(),
                    size: n as u64,
                    root: root_from_leaf_hashes(&leaves[..n]),
                },
                &log,
            )
        };
        let mut keeper = Keeper::new("insurer.example/keeper", derive_signing_key(1, "k")).unwrap();
        let mut c4 = cp(4);
        keeper
            .cosign(
                &mut c4,
                &ConsistencyProof::generate(&leaves[..4], 0).unwrap(),
                &keys,
                10,
            )
            .unwrap();
        let mut c9 = cp(9);
        keeper
            .cosign(
                &mut c9,
                &ConsistencyProof::generate(&leaves, 4).unwrap(),
                &keys,
                11,
            )
            .unwrap();
        let mut c5 = cp(5);
        assert!(matches!(
            keeper.cosign(
                &mut c5,
                &ConsistencyProof::generate(&leaves[..5], 5).unwrap(),
                &keys,
                12
            ),
            Err(KeeperError::Rollback { .. })
        ));
        let mut fork = SignedCheckpoint::sign(
            Checkpoint {
                origin: "log.example".into(),
                size: 9,
                root: [0; 32],
            },
            &log,
        );
        let err = keeper
            .cosign(
                &mut fork,
                &ConsistencyProof::generate(&leaves, 9).unwrap(),
                &keys,
                13,
            )
            .unwrap_err();
        assert!(matches!(err, KeeperError::Equivocation(e) if e.verify(&keys)));
        let mut wrong = cp(9);
        let bad = ConsistencyProof {
            old_size: 9,
            size: 9,
            path: vec![[1; 32]],
        };
        assert!(keeper.cosign(&mut wrong, &bad, &keys, 14).is_err());
    }

    #[test]
    fn a_clock_stepped_back_never_dates_a_cosignature_before_an_earlier_one() {
        let log = derive_signing_key(1, "log.example");
        let mut keys = KeyRegistry::new();
        keys.add_log("log.example", log.verifying_key()).unwrap();
        let name = "insurer.example/keeper";
        let key = derive_signing_key(1, "k");
        keys.add_keeper(name, key.verifying_key()).unwrap();
        let leaves: Vec<_> = (0u8..9).map(|i| leaf_hash(&[i])).collect();
        let cp = |n: usize| {
            SignedCheckpoint::sign(
                Checkpoint {
                    origin: "log.example".into(),
                    size: n as u64,
                    root: root_from_leaf_hashes(&leaves[..n]),
                },
                &log,
            )
        };
        let mut keeper = Keeper::new(name, key.clone()).unwrap();
        let mut c4 = cp(4);
        let proof4 = ConsistencyProof::generate(&leaves[..4], 0).unwrap();
        let first = keeper.cosign(&mut c4, &proof4, &keys, 1_000).unwrap();
        // The wall clock stepped back five minutes.
        let mut c6 = cp(6);
        let proof6 = ConsistencyProof::generate(&leaves[..6], 4).unwrap();
        let second = keeper.cosign(&mut c6, &proof6, &keys, 700).unwrap();
        assert_eq!((first.timestamp, second.timestamp), (1_000, 1_000));
        // A keeper resumed from its last co-signature keeps the floor too.
        let mut resumed = Keeper::resume(name, key, &c6, &keys).unwrap();
        let mut c9 = cp(9);
        let proof9 = ConsistencyProof::generate(&leaves, 6).unwrap();
        assert_eq!(
            resumed
                .cosign(&mut c9, &proof9, &keys, 900)
                .unwrap()
                .timestamp,
            1_000
        );
        assert_eq!(
            c9.cosignatures(&keys)
                .iter()
                .find(|c| c.keeper == name)
                .map(|c| c.timestamp),
            Some(1_000)
        );
    }
}
