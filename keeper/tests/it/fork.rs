//! A forked log (same origin and key, two histories) gets at most one branch
//! co-signed; the other is refused and kept as evidence that checks offline
//! against the log's key. State survives restarts.

use crate::common;

use audita_keeper::evidence::{ConflictKind, EvidenceError, Finding};
use audita_keeper::protocol::format_request;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use common::*;

fn add(url: &str, old: u64, proof: &[[u8; 32]], note: &[u8]) -> u16 {
    post(url, "/add-checkpoint", &format_request(old, proof, note)).0
}

#[test]
fn forked_log_gets_one_branch_cosigned_and_the_other_kept_as_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let a = Log::new("log.example/fork", 1, 32);
    let b = a.fork(8);
    let k = start(&config(dir.path(), &[&a]));
    let url = k.url();
    assert_eq!(add(&url, 0, &[], &a.note(8)), 200);
    // Both branches agree up to 8; A grows to 16.
    assert_eq!(add(&url, 8, &a.proof(8, 16), &a.note(16)), 200);
    // B at the same size: equivocation, 409.
    assert_eq!(add(&url, 16, &[], &b.note(16)), 409);
    // B larger, with B's own (valid in B) proof from 16: does not verify from A's
    // root, 422.
    assert_eq!(add(&url, 16, &b.proof(16, 24), &b.note(24)), 422);
    // B from the shared prefix: 409 (the keeper is at 16).
    assert_eq!(add(&url, 8, &b.proof(8, 24), &b.note(24)), 409);
    // A keeps growing.
    assert_eq!(add(&url, 16, &a.proof(16, 24), &a.note(24)), 200);
    // B at A's size again (24): refused, kept.
    assert_eq!(add(&url, 24, &[], &b.note(24)), 409);
    // The same conflict resubmitted is kept once.
    assert_eq!(add(&url, 24, &[], &b.note(24)), 409);

    let records = audita_keeper::evidence(dir.path()).unwrap();
    let kinds: Vec<_> = records.iter().map(|r| r.kind).collect();
    assert_eq!(
        kinds
            .iter()
            .filter(|k| **k == ConflictKind::Equivocation)
            .count(),
        2,
        "{kinds:?}"
    );
    assert_eq!(
        kinds
            .iter()
            .filter(|k| **k == ConflictKind::Inconsistent)
            .count(),
        1
    );
    for r in &records {
        assert_eq!(r.keeper, KEEPER);
        match (r.kind, r.check(&a.key.verifying_key()).unwrap()) {
            (ConflictKind::Equivocation, Finding::Equivocation(e)) => {
                assert_eq!(e.first.checkpoint().size, e.second.checkpoint().size);
            }
            (ConflictKind::Inconsistent, Finding::Inconsistent { cosigned, refused }) => {
                assert_eq!(cosigned.checkpoint().size, 16);
                assert_eq!(refused.checkpoint().size, 24);
                // Only a valid proof between the two roots would clear it; B's
                // proof from the shared prefix does not, nor does A's.
                assert!(!r.cleared_by(&a.proof(16, 24)));
                assert!(!r.cleared_by(&b.proof(16, 24)));
            }
            other => panic!("record and finding disagree: {other:?}"),
        }
        // Under another key nothing checks; a tampered record does not check.
        let stranger = audita_evidence::derive_signing_key(5, "x").verifying_key();
        assert!(matches!(
            r.check(&stranger),
            Err(EvidenceError::Note { .. })
        ));
        let mut t = r.clone();
        let mut lines: Vec<String> = t.refused.lines().map(str::to_owned).collect();
        let mut root = STANDARD.decode(&lines[2]).unwrap();
        root[0] ^= 1;
        lines[2] = STANDARD.encode(root);
        t.refused = lines.join("\n") + "\n";
        assert!(t.check(&a.key.verifying_key()).is_err());
    }
    // The JSON form round-trips through the documented format.
    let json = serde_json::to_string(&records).unwrap();
    assert!(json.contains("\"format\":\"audita.keeper-evidence/v1\""));
    assert!(json.contains("\"kind\":\"equivocation\""));
    assert!(json.contains("\"kind\":\"inconsistent\""));
}

#[test]
fn inconsistent_record_is_cleared_by_a_valid_proof() {
    // A log that sends a wrong proof for a checkpoint that does extend the
    // co-signed one: the record checks (the proof fails), and the right proof
    // clears it.
    let dir = tempfile::tempdir().unwrap();
    let a = Log::new("log.example/sloppy", 2, 20);
    let k = start(&config(dir.path(), &[&a]));
    assert_eq!(add(&k.url(), 0, &[], &a.note(5)), 200);
    let mut wrong = a.proof(5, 13);
    wrong.reverse();
    assert_eq!(add(&k.url(), 5, &wrong, &a.note(13)), 422);
    let records = audita_keeper::evidence(dir.path()).unwrap();
    assert_eq!(records.len(), 1);
    assert!(matches!(
        records[0].check(&a.key.verifying_key()),
        Ok(Finding::Inconsistent { .. })
    ));
    assert!(records[0].cleared_by(&a.proof(5, 13)));
}

#[test]
fn evidence_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let a = Log::new("log.example/flood", 3, 8);
    let mut cfg = config(dir.path(), &[&a]);
    cfg.limits.max_evidence = 3;
    let k = start(&cfg);
    assert_eq!(add(&k.url(), 0, &[], &a.note(4)), 200);
    for i in 0..10u8 {
        let mut f = a.clone();
        f.leaves[2] = [i; 32];
        assert_eq!(add(&k.url(), 4, &[], &f.note(4)), 409);
    }
    assert_eq!(audita_keeper::evidence(dir.path()).unwrap().len(), 3);
}

#[test]
fn state_survives_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let a = Log::new("log.example/persist", 4, 40);
    let b = a.fork(10);
    let cfg = config(dir.path(), &[&a]);
    let k = start(&cfg);
    assert_eq!(add(&k.url(), 0, &[], &a.note(10)), 200);
    assert_eq!(add(&k.url(), 10, &a.proof(10, 20), &a.note(20)), 200);
    k.shutdown();

    let k = start(&cfg);
    // It remembers 20: old size 0 is a conflict naming 20, the fork is refused,
    // a smaller tree is refused, and A grows from 20.
    let (st, _, body) = post(
        &k.url(),
        "/add-checkpoint",
        &format_request(0, &[], &a.note(30)),
    );
    assert_eq!((st, body.as_slice()), (409, b"20\n".as_slice()));
    assert_eq!(add(&k.url(), 20, &[], &b.note(20)), 409);
    assert_eq!(add(&k.url(), 10, &[], &a.note(10)), 409);
    assert_eq!(add(&k.url(), 20, &b.proof(20, 30), &b.note(30)), 422);
    assert_eq!(add(&k.url(), 20, &a.proof(20, 30), &a.note(30)), 200);
    drop(k);

    // The state file is itself a co-signed checkpoint of the keeper.
    let state = audita_keeper::state::StateDir::inspect(dir.path());
    let note = state.load(&a.origin).unwrap().unwrap();
    assert_eq!(note.checkpoint().size, 30);
    let mut keys = audita_evidence::KeyRegistry::new();
    keys.add_keeper(KEEPER, keeper_key().verifying_key())
        .unwrap();
    assert_eq!(note.cosignatures(&keys).len(), 1);

    // A corrupt state file: the keeper refuses to start (fails closed).
    std::fs::write(state.log_path(&a.origin), b"not a checkpoint").unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    assert!(matches!(
        audita_keeper::serve(&cfg, listener),
        Err(audita_keeper::server::ServeError::State(
            audita_keeper::state::StateError::Corrupt { .. }
        ))
    ));
}

#[test]
fn a_second_keeper_on_one_state_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let a = Log::new("log.example/twice", 5, 4);
    let cfg = config(dir.path(), &[&a]);
    let k = start(&cfg);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    assert!(matches!(
        audita_keeper::serve(&cfg, listener),
        Err(audita_keeper::server::ServeError::State(
            audita_keeper::state::StateError::Locked(_)
        ))
    ));
    k.shutdown();
    // Released with the first keeper.
    let k = start(&cfg);
    assert_eq!(add(&k.url(), 0, &[], &a.note(2)), 200);
}
