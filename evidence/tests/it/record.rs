//! End-to-end checks of the record verifier on the sample record.

use audita_evidence::sample::sample_record;
use audita_evidence::*;

#[test]
fn sample_record_certifies_completely() {
    let s = sample_record(7, 40);
    let p = verify_record(&s.record, &s.keys);
    assert!(
        p.is_clean(),
        "{:#?}",
        (&p.suspect, &p.missing, &p.epochs, &p.checkpoints)
    );
    assert_eq!(p.certified.len(), s.envelopes.len());
    assert!(s.epochs.len() >= 2);
    for env in &s.envelopes {
        let proof = p
            .inclusion_proof(&s.record, env.id())
            .expect("certified has a proof");
        let c = &p.certified[env.id()];
        let header = &s.epochs[c.epoch as usize].header;
        let leaf = audita_evidence::merkle::leaf_hash(&env.id().leaf_bytes());
        let mut proof = proof;
        proof.size = header.size;
        proof.verify(&leaf, &header.log_root).unwrap();
    }
    let batch = verify_record_with(
        &s.record,
        &s.keys,
        &Policy {
            batch_signatures: true,
            ..Policy::default()
        },
        None,
    );
    assert_eq!(batch, p);
}

#[test]
fn deleting_a_message_reports_it_missing_with_its_author() {
    let s = sample_record(3, 30);
    for i in 0..s.record.envelopes.len() {
        let mut r = s.record.clone();
        r.envelopes.remove(i);
        let p = verify_record(&r, &s.keys);
        assert!(!p.is_clean());
        let id = s.envelopes[i].id();
        let m = p
            .missing
            .iter()
            .find(|m| &m.id == id)
            .expect("deleted id is missing");
        assert_eq!(m.author(), &id.author);
        assert!(!p.certified.contains_key(id));
    }
}

#[test]
fn uncited_derived_command_is_rejected() {
    let k = derive_signing_key(1, "dispatcher");
    let env = Envelope::new(
        PrincipalId::new("dispatcher").unwrap(),
        PrincipalId::new("agv-1").unwrap(),
        5,
        Payload::Halt {
            target: "agv-1".into(),
        },
    );
    let err = env.sign(&k).unwrap_err();
    assert!(
        matches!(err, EnvelopeError::UncitedDerived { kind: "halt", .. }),
        "{err}"
    );
    let root = Envelope::new(
        PrincipalId::new("lidar-3").unwrap(),
        PrincipalId::new("supervisor").unwrap(),
        5,
        Payload::SensorReport {
            sensor: "lidar-3".into(),
            reading: "clear".into(),
        },
    );
    assert!(root.sign(&derive_signing_key(1, "lidar-3")).is_ok());
}

#[test]
fn equivocating_checkpoint_is_evidence() {
    let s = sample_record(5, 20);
    let mut r = s.record.clone();
    let first = &s.epochs[0];
    let forged = SignedCheckpoint::sign(
        Checkpoint {
            origin: first.header.origin.clone(),
            size: first.header.size,
            root: [7; 32],
        },
        &derive_signing_key(5, audita_evidence::sample::SAMPLE_ORIGIN),
    );
    r.checkpoints.push(forged.to_text().into_bytes());
    let p = verify_record(&r, &s.keys);
    assert_eq!(p.equivocations.len(), 1);
    assert!(p.equivocations[0].verify(&s.keys));
    assert!(!p.is_clean());
}

#[test]
fn shredded_payload_is_reported_and_seals_still_verify() {
    use rand_chacha::rand_core::SeedableRng;
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(9);
    let mut store = PayloadStore::new();
    let digest = store.put(
        b"operator note: worker name Jane Doe entered aisle 4",
        &mut rng,
    );
    let keys_seed = 11;
    let sk = |n: &str| derive_signing_key(keys_seed, n);
    let mut keys = KeyRegistry::new();
    for n in ["operator", "planner"] {
        keys.add_principal(PrincipalId::new(n).unwrap(), sk(n).verifying_key());
    }
    keys.add_log("log.example", sk("log.example").verifying_key())
        .unwrap();
    let env = Envelope::new(
        PrincipalId::new("operator").unwrap(),
        PrincipalId::new("planner").unwrap(),
        1,
        Payload::Stored {
            kind: StoredKind::ExternalInput,
            digest,
            len: 52,
        },
    )
    .sign(&sk("operator"))
    .unwrap();
    let receipt = Receipt::sign(
        env.id().clone(),
        PrincipalId::new("planner").unwrap(),
        2,
        &sk("planner"),
    );
    let mut sealer = Sealer::new("log.example", sk("log.example")).unwrap();
    sealer.append_envelope(&env);
    let epoch = sealer.close_epoch(3);
    let mut record = Record::new();
    record.push_envelope(&env);
    record.push_receipt(&receipt);
    record.push_epoch(&epoch);
    let p = verify_record_with(&record, &keys, &Policy::default(), Some(&store));
    assert!(p.is_clean());
    assert_eq!(p.payloads[0].status, PayloadStatus::Available);
    store.shred(&digest);
    let p = verify_record_with(&record, &keys, &Policy::default(), Some(&store));
    assert!(p.is_clean(), "shredding breaks no seal");
    assert_eq!(p.payloads[0].status, PayloadStatus::Shredded);
}

fn reasons_of(p: &Partition, id: &MessageId) -> Vec<SuspectReason> {
    p.suspect
        .iter()
        .find(|s| matches!(&s.item, SuspectItem::Message { id: i, .. } if i == id))
        .map(|s| s.reasons.clone())
        .unwrap_or_default()
}

#[test]
fn forged_signature_is_suspect_and_its_citers_cascade() {
    let s = sample_record(8, 20);
    // Re-sign the planner's first message with the wrong key: same content, forged author.
    let i = s
        .envelopes
        .iter()
        .position(|e| e.envelope().author.as_str() == "planner")
        .unwrap();
    let forged = s.envelopes[i]
        .envelope()
        .clone()
        .sign(&derive_signing_key(999, "planner"))
        .unwrap();
    let mut r = s.record.clone();
    r.envelopes[i] = forged.as_bytes().to_vec();
    let p = verify_record(&r, &s.keys);
    let reasons = reasons_of(&p, forged.id());
    assert!(
        reasons
            .iter()
            .any(|x| matches!(x, SuspectReason::Signature(SignatureError::BadSignature(_)))),
        "{reasons:?}"
    );
    assert!(
        reasons.contains(&SuspectReason::Unreceipted) && reasons.contains(&SuspectReason::Unsealed)
    );
    // The genuine message is missing, with its author, and its citers stay certified.
    let m = p
        .missing
        .iter()
        .find(|m| &m.id == s.envelopes[i].id())
        .unwrap();
    assert_eq!(m.author().as_str(), "planner");
    assert!(!m.certified_citers.is_empty());
    for c in &m.certified_citers {
        assert!(p.certified.contains_key(c));
    }
}

#[test]
fn receipt_signed_by_someone_else_is_rejected() {
    let s = sample_record(9, 16);
    let target = &s.envelopes[1];
    let wrong = Receipt::sign(
        target.id().clone(),
        PrincipalId::new("supervisor").unwrap(),
        5,
        &derive_signing_key(9, "supervisor"),
    );
    let mut r = s.record.clone();
    r.receipts[1] = wrong.as_bytes().to_vec();
    let p = verify_record(&r, &s.keys);
    assert!(p
        .receipt_problems
        .iter()
        .any(|x| matches!(x.fault, ReceiptFault::WrongRecipient { .. })));
    assert!(reasons_of(&p, target.id()).contains(&SuspectReason::Unreceipted));
}

#[test]
fn unknown_author_and_unsealed_message_are_suspect() {
    let s = sample_record(10, 16);
    let intruder = Envelope::new(
        PrincipalId::new("intruder").unwrap(),
        PrincipalId::new("agv-1").unwrap(),
        9,
        Payload::SensorReport {
            sensor: "fake".into(),
            reading: "clear".into(),
        },
    )
    .sign(&derive_signing_key(10, "intruder"))
    .unwrap();
    let mut r = s.record.clone();
    r.envelopes.push(intruder.as_bytes().to_vec());
    let p = verify_record(&r, &s.keys);
    let reasons = reasons_of(&p, intruder.id());
    assert!(reasons.iter().any(|x| matches!(
        x,
        SuspectReason::Signature(SignatureError::UnknownSigner(_))
    )));
    assert!(reasons.contains(&SuspectReason::Unsealed));
    assert_eq!(
        p.certified.len(),
        s.envelopes.len(),
        "an intruder changes nothing certified"
    );
}

#[test]
fn broken_chain_marks_later_epochs_and_their_messages() {
    let s = sample_record(11, 30);
    let mut r = s.record.clone();
    r.epochs.remove(0);
    r.checkpoints.remove(0);
    let p = verify_record(&r, &s.keys);
    assert!(p.epochs.iter().all(|e| !e.intact()));
    assert!(p.epochs[0].faults.contains(&EpochFault::ChainBroken));
    assert!(p.certified.is_empty());
    assert!(p.suspect.iter().all(|x| x.reasons.iter().any(|r| matches!(
        r,
        SuspectReason::Unsealed | SuspectReason::SealBroken { .. }
    ))));
}

#[test]
fn missing_cosignature_is_not_witnessed() {
    let s = sample_record(12, 16);
    let mut r = s.record.clone();
    let text = String::from_utf8(r.checkpoints[0].clone()).unwrap();
    let without: String = text
        .lines()
        .filter(|l| !l.contains("insurer.example"))
        .map(|l| format!("{l}\n"))
        .collect();
    r.checkpoints[0] = without.into_bytes();
    let p = verify_record(&r, &s.keys);
    assert!(
        matches!(&p.epochs[0].faults[..], [EpochFault::NotWitnessed { missing }] if missing == &["insurer.example/keeper".to_string()])
    );
    assert!(p.checkpoints[0]
        .faults
        .contains(&CheckpointFault::MissingCosignature(
            "insurer.example/keeper".into()
        )));
    // A policy that requires only two keepers accepts it.
    let policy = Policy {
        required_keepers: Some(vec![
            "operator.example/keeper".into(),
            "vendor.example/keeper".into(),
        ]),
        ..Policy::default()
    };
    assert!(verify_record_with(&r, &s.keys, &policy, None).is_clean());
}

/// Cutting the last epoch together with its checkpoint and messages leaves a
/// consistent, shorter record; only a checkpoint held outside it reveals the cut.
#[test]
fn a_held_checkpoint_reveals_truncation_and_forks() {
    let s = sample_record(9, 60);
    assert!(s.record.epochs.len() >= 2);
    let held = s.record.checkpoints.last().unwrap().clone();
    let policy = |notes: Vec<Vec<u8>>| Policy {
        held_checkpoints: notes,
        ..Policy::default()
    };
    let full = verify_record_with(&s.record, &s.keys, &policy(vec![held.clone()]), None);
    assert!(full.is_clean(), "{:?}", full.held);

    let mut cut = s.record.clone();
    let last = cut.epochs.pop().unwrap();
    cut.checkpoints.pop();
    let gone: std::collections::BTreeSet<MessageId> = last
        .leaves
        .iter()
        .map(|l| MessageId::from_leaf_bytes(l).unwrap())
        .collect();
    cut.envelopes
        .retain(|e| !gone.contains(SignedEnvelope::decode(e.clone()).unwrap().id()));
    cut.receipts
        .retain(|r| !gone.contains(Receipt::decode(r.clone()).unwrap().message()));
    assert!(
        verify_record(&cut, &s.keys).is_clean(),
        "without a held checkpoint the cut is invisible"
    );
    let p = verify_record_with(&cut, &s.keys, &policy(vec![held.clone()]), None);
    assert!(!p.is_clean());
    assert!(matches!(
        p.held.as_slice(),
        [HeldFinding {
            index: 0,
            fault: HeldFault::Truncated { .. }
        }]
    ));

    // A log-signed note for the same size with another root: the log forked.
    let cp = SignedCheckpoint::parse(&held).unwrap();
    let mut other = cp.checkpoint().clone();
    other.root[0] ^= 1;
    let log_key = derive_signing_key(9, audita_evidence::sample::SAMPLE_ORIGIN);
    let forged = SignedCheckpoint::sign(other, &log_key)
        .to_text()
        .into_bytes();
    let p = verify_record_with(&s.record, &s.keys, &policy(vec![forged]), None);
    assert!(matches!(
        p.held.as_slice(),
        [HeldFinding {
            fault: HeldFault::Forked { .. },
            ..
        }]
    ));
    // Garbage and an unsigned note are findings, not panics.
    let p = verify_record_with(
        &s.record,
        &s.keys,
        &policy(vec![b"nonsense".to_vec()]),
        None,
    );
    assert!(matches!(p.held[0].fault, HeldFault::Unparseable(_)));
}

/// A message signed with a revoked, retired or not-yet-valid key is suspect with that
/// reason; one inside its key's window certifies.
#[test]
fn a_key_outside_its_window_makes_its_messages_suspect_with_the_reason() {
    use audita_evidence::{KeyWindow, PrincipalId};
    let s = audita_evidence::sample::sample_record(3, 6);
    let part = audita_evidence::verify_record(&s.record, &s.keys);
    assert!(part.is_clean());
    // Re-register every principal's key with windows that exclude some timestamps.
    let times: Vec<(PrincipalId, u64)> = part
        .certified
        .values()
        .map(|c| {
            (
                c.envelope.envelope().author.clone(),
                c.envelope.envelope().timestamp,
            )
        })
        .collect();
    let (victim, t) = times[times.len() / 2].clone();
    for (window, code) in [
        (
            KeyWindow {
                from_ms: Some(t + 1),
                until_ms: None,
                revoked: false,
            },
            "key_not_yet_valid",
        ),
        (
            KeyWindow {
                from_ms: None,
                until_ms: Some(t.saturating_sub(1)),
                revoked: false,
            },
            "key_retired",
        ),
        (
            KeyWindow {
                from_ms: None,
                until_ms: Some(t.saturating_sub(1)),
                revoked: true,
            },
            "key_revoked",
        ),
    ] {
        let mut keys = audita_evidence::KeyRegistry::new();
        for (id, k) in s.keys.principals() {
            if id == &victim {
                keys.add_principal_key(id.clone(), *k, window);
            } else {
                keys.add_principal(id.clone(), *k);
            }
        }
        for (n, k) in s.keys.keepers() {
            keys.add_keeper(n, *k).unwrap();
        }
        for (n, k) in s.keys.logs() {
            keys.add_log(n, *k).unwrap();
        }
        let p = audita_evidence::verify_record(&s.record, &keys);
        let hit = p
            .suspect
            .iter()
            .find(|x| x.reasons.iter().any(|r| r.code() == code));
        assert!(hit.is_some(), "{code}: {:?}", p.suspect);
        // Only the victim's messages outside the window are hit.
        for x in &p.suspect {
            if let audita_evidence::SuspectItem::Message { id, .. } = &x.item {
                if x.reasons.iter().any(|r| r.code() == code) {
                    assert_eq!(id.author, victim);
                }
            }
        }
    }
}
