//! The sealer as a witness client: keepers that are down leave epochs sealed,
//! published and counted as under-witnessed, and co-sign every checkpoint they
//! missed once they return (the notes on disk then carry their lines, and the record
//! verifies witnessed); a keeper that lost its state
//! answers 409 and gets the proof from its own size; a keeper shown a fork of the log
//! (same origin and key, another history) co-signs one branch only.

use audita_bus::embedded::EmbeddedBus;
use audita_bus::Bus;
use audita_evidence::checkpoint::SignedCheckpoint;
use audita_evidence::sample::{sample_record, SAMPLE_ORIGIN};
use audita_evidence::{derive_signing_key, verify_record_with, Hash, Keeper, KeyRegistry, Policy};
use audita_record::read_record;
use audita_sealer::stage::{SealerConfig, SealerStage};
use audita_sealer::witness::{Answer, LocalWitness, Witness};
use audita_topics::accepted::{FRAME_ENVELOPE, FRAME_RECEIPT};
use audita_topics::names as topics;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const KEEPER: &str = "insurer.example/keeper";

fn keys_for(seed: u64, n: usize) -> KeyRegistry {
    let mut keys = sample_record(seed, n).keys;
    let _ = keys.add_log(
        SAMPLE_ORIGIN,
        derive_signing_key(7, SAMPLE_ORIGIN).verifying_key(),
    );
    keys.add_keeper(KEEPER, derive_signing_key(9, KEEPER).verifying_key())
        .unwrap();
    keys
}

fn config(dir: &std::path::Path, keys: KeyRegistry) -> SealerConfig {
    SealerConfig {
        dir: dir.to_path_buf(),
        origin: SAMPLE_ORIGIN.to_string(),
        log_key: derive_signing_key(7, SAMPLE_ORIGIN),
        // No keeper in the sealer's process: the keeper is reached as a witness.
        keepers: Vec::new(),
        keys,
        epoch_messages: 16,
        epoch_age: Duration::from_secs(3600),
        topic_prefix: String::new(),
        input_partitions: 4,
        registry: None,
    }
}

fn publish(bus: &Bus, seed: u64, n: usize) -> usize {
    let s = sample_record(seed, n);
    let mut p = bus.producer().unwrap();
    for (e, r) in s.envelopes.iter().zip(&s.receipts) {
        let mut f = vec![FRAME_ENVELOPE];
        f.extend_from_slice(e.as_bytes());
        p.send(
            topics::ACCEPTED,
            e.envelope().author.as_str().as_bytes(),
            &f,
        )
        .unwrap();
        let mut f = vec![FRAME_RECEIPT];
        f.extend_from_slice(r.as_bytes());
        p.send(topics::ACCEPTED, r.recipient().as_str().as_bytes(), &f)
            .unwrap();
    }
    s.envelopes.len()
}

fn run_to_idle(stage: &mut SealerStage, bus: &Bus) {
    let mut c = bus.consumer("sealer", &[topics::ACCEPTED]).unwrap();
    let mut p = bus.producer().unwrap();
    stage
        .run(
            c.as_mut(),
            p.as_mut(),
            &AtomicBool::new(false),
            Some(Duration::from_millis(300)),
        )
        .unwrap();
}

/// One keeper shared by several sealers (as a service is), which can be taken down.
#[derive(Clone)]
struct Service {
    keeper: Arc<Mutex<LocalWitness>>,
    down: Arc<AtomicBool>,
    calls: Arc<AtomicUsize>,
}

impl Service {
    fn new(keys: &KeyRegistry) -> Service {
        Service {
            keeper: Arc::new(Mutex::new(LocalWitness::new(
                Keeper::new(KEEPER, derive_signing_key(9, KEEPER)).unwrap(),
                keys.clone(),
            ))),
            down: Arc::new(AtomicBool::new(false)),
            calls: Arc::new(AtomicUsize::new(0)),
        }
    }
}

impl Witness for Service {
    fn name(&self) -> &str {
        KEEPER
    }
    fn add_checkpoint(&mut self, old_size: u64, proof: &[Hash], note: &str) -> Answer {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.down.load(Ordering::SeqCst) {
            return Answer::Unavailable("connection refused".into());
        }
        self.keeper
            .lock()
            .unwrap()
            .add_checkpoint(old_size, proof, note)
    }
}

/// Which of the record's checkpoints carry a valid co-signature of the keeper.
fn cosigned(dir: &std::path::Path, keys: &KeyRegistry) -> Vec<bool> {
    let mut files: Vec<_> = std::fs::read_dir(dir.join("checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| {
            let cp = SignedCheckpoint::parse(&std::fs::read(p).unwrap()).unwrap();
            cp.verify_log(keys).expect("log-signed");
            cp.cosignatures(keys).iter().any(|c| c.keeper == KEEPER)
        })
        .collect()
}

#[test]
fn keepers_down_leave_epochs_under_witnessed_and_they_catch_up() {
    let keys = keys_for(3, 60);
    let service = Service::new(&keys);
    service.down.store(true, Ordering::SeqCst);
    let bus = Bus::Embedded(EmbeddedBus::new(4));
    let n = publish(&bus, 3, 60);
    let dir = tempfile::tempdir().unwrap();
    let mut stage = SealerStage::open(config(dir.path(), keys.clone()))
        .unwrap()
        .with_witnesses(vec![Box::new(service.clone())], 1);
    run_to_idle(&mut stage, &bus);
    let s = stage.stats();
    assert_eq!(s.sealed, n as u64, "the keeper being down loses nothing");
    assert!(s.epochs > 2);
    assert_eq!(s.under_witnessed, s.epochs, "every epoch under-witnessed");
    assert_eq!(s.keepers_behind, 1);
    assert!(
        (service.calls.load(Ordering::SeqCst) as u64) < s.epochs,
        "a down keeper is retried after a back-off, not once per epoch"
    );
    assert!(cosigned(dir.path(), &keys).iter().all(|c| !c));
    // The offline verifier says so: no epoch is witnessed yet.
    // (The sample's registry also names its own keepers; this deployment's is KEEPER.)
    let policy = Policy {
        required_keepers: Some(vec![KEEPER.to_string()]),
        ..Policy::default()
    };
    let (record, dir_keys) = read_record(dir.path()).unwrap();
    let part = verify_record_with(&record, &dir_keys, &policy, None);
    assert!(part.epochs.iter().all(|e| e
        .faults
        .iter()
        .any(|f| format!("{f:?}").starts_with("NotWitnessed"))));
    assert!(part.certified.is_empty(), "nothing certifies unwitnessed");

    // Back up: the idle sealer offers its latest checkpoint again after the back-off.
    service.down.store(false, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(1_100));
    stage.catch_up().unwrap();
    let after = cosigned(dir.path(), &keys);
    assert!(
        after.iter().all(|c| *c),
        "every checkpoint it missed is co-signed, oldest first: {after:?}"
    );
    assert_eq!(stage.stats().keepers_behind, 0);
    // The tiled log's checkpoint (what tlog clients fetch) carries the line too.
    let tiled =
        SignedCheckpoint::parse(&std::fs::read(dir.path().join("checkpoint")).unwrap()).unwrap();
    assert!(
        tiled.cosignatures(&keys).iter().any(|c| c.keeper == KEEPER),
        "tiles' checkpoint after catch-up: {}",
        tiled.to_text()
    );
    let (record, dir_keys) = read_record(dir.path()).unwrap();
    let part = verify_record_with(&record, &dir_keys, &policy, None);
    let faults: Vec<String> = part
        .epochs
        .iter()
        .map(|e| format!("{:?}", e.faults))
        .chain(part.checkpoints.iter().map(|c| format!("{:?}", c.faults)))
        .filter(|f| f != "[]")
        .collect();
    assert!(
        part.is_clean(),
        "the record verifies clean: faults {faults:?}, {} suspect, {} missing, {} receipt problems",
        part.suspect.len(),
        part.missing.len(),
        part.receipt_problems.len()
    );
    assert_eq!(part.certified.len(), n, "every envelope certified");

    // New epochs are witnessed again, with proofs from the caught-up size.
    publish(&bus, 4, 30);
    let before = stage.stats();
    run_to_idle(&mut stage, &bus);
    let s = stage.stats();
    assert!(s.epochs > before.epochs);
    assert_eq!(s.under_witnessed, before.under_witnessed, "witnessed again");
    assert!(cosigned(dir.path(), &keys)[after.len()..]
        .iter()
        .all(|c| *c));
}

#[test]
fn a_keeper_that_lost_its_state_answers_409_and_gets_the_proof_from_its_size() {
    let keys = keys_for(5, 40);
    let bus = Bus::Embedded(EmbeddedBus::new(4));
    publish(&bus, 5, 40);
    let dir = tempfile::tempdir().unwrap();
    let first = Service::new(&keys);
    let mut stage = SealerStage::open(config(dir.path(), keys.clone()))
        .unwrap()
        .with_witnesses(vec![Box::new(first)], 1);
    run_to_idle(&mut stage, &bus);
    assert_eq!(stage.stats().under_witnessed, 0);
    drop(stage);
    // Restart with a keeper at size 0 (its state lost): the sealer assumes it holds
    // the head, is told 409 (size 0), and proves from 0 out of the record on disk.
    let fresh = Service::new(&keys);
    publish(&bus, 6, 20);
    let mut stage = SealerStage::open(config(dir.path(), keys.clone()))
        .unwrap()
        .with_witnesses(vec![Box::new(fresh.clone())], 1);
    run_to_idle(&mut stage, &bus);
    assert_eq!(stage.stats().under_witnessed, 0, "the 409 was resolved");
    assert!(stage.stats().epochs > 0);
    assert!(fresh.calls.load(Ordering::SeqCst) as u64 > stage.stats().epochs);
    assert!(cosigned(dir.path(), &keys).iter().all(|c| *c));
}

#[test]
fn a_keeper_shown_a_fork_cosigns_one_branch_only() {
    // Two histories under one origin and log key (an operator forking its log), both
    // presented to one keeper service.
    let keys = {
        let mut k = keys_for(11, 40);
        for (name, key) in sample_record(12, 40).keys.principals() {
            if k.principal(name.as_str()).is_none() {
                k.add_principal(name.clone(), *key);
            }
        }
        k
    };
    let service = Service::new(&keys);
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let bus_a = Bus::Embedded(EmbeddedBus::new(4));
    publish(&bus_a, 11, 40);
    let mut sa = SealerStage::open(config(a.path(), keys.clone()))
        .unwrap()
        .with_witnesses(vec![Box::new(service.clone())], 1);
    run_to_idle(&mut sa, &bus_a);
    assert_eq!(sa.stats().under_witnessed, 0);
    let bus_b = Bus::Embedded(EmbeddedBus::new(4));
    publish(&bus_b, 12, 40);
    let mut sb = SealerStage::open(config(b.path(), keys.clone()))
        .unwrap()
        .with_witnesses(vec![Box::new(service.clone())], 1);
    run_to_idle(&mut sb, &bus_b);
    assert!(cosigned(a.path(), &keys).iter().all(|c| *c));
    assert!(
        cosigned(b.path(), &keys).iter().all(|c| !c),
        "the keeper co-signed a checkpoint of the other branch"
    );
    assert_eq!(sb.stats().under_witnessed, sb.stats().epochs);
}

/// An epoch of receipts only states the same tree as the epoch before it (or the
/// empty tree, first): keepers co-sign it too (with the empty proof), so it is not
/// left under-witnessed.
#[test]
fn an_epoch_of_receipts_only_is_witnessed() {
    let s = sample_record(13, 20);
    let keys = keys_for(13, 20);
    let bus = Bus::Embedded(EmbeddedBus::new(4));
    let mut p = bus.producer().unwrap();
    let mut f = vec![FRAME_RECEIPT];
    f.extend_from_slice(s.receipts[0].as_bytes());
    p.send(topics::ACCEPTED, b"r", &f).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let service = Service::new(&keys);
    let mut stage = SealerStage::open(config(dir.path(), keys.clone()))
        .unwrap()
        .with_witnesses(vec![Box::new(service.clone())], 1);
    run_to_idle(&mut stage, &bus);
    publish(&bus, 13, 20);
    run_to_idle(&mut stage, &bus);
    // A receipt not seen before, alone: an epoch of the same tree as the last.
    let other = sample_record(14, 5);
    let mut f = vec![FRAME_RECEIPT];
    f.extend_from_slice(other.receipts[0].as_bytes());
    p.send(topics::ACCEPTED, b"r", &f).unwrap();
    let before = stage.stats().epochs;
    run_to_idle(&mut stage, &bus);
    assert_eq!(stage.stats().epochs, before + 1, "a receipts-only epoch");
    assert_eq!(stage.stats().under_witnessed, 0);
    assert!(cosigned(dir.path(), &keys).iter().all(|c| *c));
}

/// A keeper that answers with its own valid line wrapped in junk: a line claiming
/// another keeper's name and a malformed one.
struct Noisy(LocalWitness);

impl Witness for Noisy {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn add_checkpoint(&mut self, old_size: u64, proof: &[Hash], note: &str) -> Answer {
        match self.0.add_checkpoint(old_size, proof, note) {
            Answer::Cosigned(own) => Answer::Cosigned(format!(
                "— {OTHER} AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==\n{own}— not a line\n"
            )),
            other => other,
        }
    }
}

const OTHER: &str = "vendor.example/keeper";

/// Three keepers asked at once, one of them noisy: every checkpoint on disk carries
/// exactly the log's line and one valid line per keeper — nothing a keeper returned
/// besides its own valid co-signature joins the note.
#[test]
fn three_keepers_cosign_every_epoch_and_only_their_own_valid_lines_join_the_note() {
    let names = [KEEPER, OTHER, "regulator.example/keeper"];
    let mut keys = keys_for(8, 60);
    for n in &names[1..] {
        keys.add_keeper(n, derive_signing_key(9, n).verifying_key())
            .unwrap();
    }
    let local = |n: &str| {
        LocalWitness::new(
            Keeper::new(n, derive_signing_key(9, n)).unwrap(),
            keys.clone(),
        )
    };
    let witnesses: Vec<Box<dyn Witness>> = vec![
        Box::new(Noisy(local(names[0]))),
        Box::new(local(names[1])),
        Box::new(local(names[2])),
    ];
    let bus = Bus::Embedded(EmbeddedBus::new(4));
    let n = publish(&bus, 8, 60);
    let dir = tempfile::tempdir().unwrap();
    let mut stage = SealerStage::open(config(dir.path(), keys.clone()))
        .unwrap()
        .with_witnesses(witnesses, 3);
    run_to_idle(&mut stage, &bus);
    let s = stage.stats();
    assert_eq!(s.sealed, n as u64);
    assert!(s.epochs > 2);
    assert_eq!(s.under_witnessed, 0);
    assert_eq!(s.cosignatures, 3 * s.epochs);
    let mut files: Vec<_> = std::fs::read_dir(dir.path().join("checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    assert_eq!(files.len() as u64, s.epochs);
    for f in files {
        let cp = SignedCheckpoint::parse(&std::fs::read(&f).unwrap()).unwrap();
        let mut signers: Vec<String> = cp
            .cosignatures(&keys)
            .into_iter()
            .map(|c| c.keeper)
            .collect();
        signers.sort();
        let mut want: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        want.sort();
        assert_eq!(signers, want, "{}", f.display());
        assert_eq!(
            cp.signatures().len(),
            4,
            "log + 3 keepers only: {}",
            cp.to_text()
        );
    }
}
