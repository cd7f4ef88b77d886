//! Cosignatures per second of one keeper over loopback HTTP, beside raw Ed25519
//! (one verify of the log's signature plus one cosignature sign: the keeper's
//! cryptographic work per request) on the same machine, in one run.
//!
//! `cargo bench -p audita-keeper --bench cosign` (optional: `-- N` requests per
//! row, default 2000). Rows: one client, keep-alive, each request advancing the
//! log by one leaf with a consistency proof; the state on the target directory's
//! disk (fsync per request) and on /dev/shm (tmpfs: what the keeper costs without
//! the disk); four clients on four logs at once.

use std::time::{Duration, Instant};

use audita_evidence::merkle::{leaf_hash, root_from_leaf_hashes};
use audita_evidence::{Checkpoint, ConsistencyProof, Hash, SignedCheckpoint, SigningKey};
use audita_keeper::{log_vkey, KeeperConfig, Outcome, WitnessClient};
use ed25519_dalek::{Signer as _, Verifier as _};

struct Log {
    origin: String,
    key: SigningKey,
    leaves: Vec<Hash>,
}

impl Log {
    fn new(origin: &str, n: usize) -> Self {
        Self {
            origin: origin.into(),
            key: audita_evidence::derive_signing_key(1, origin),
            leaves: (0..n)
                .map(|i| leaf_hash(&(i as u64).to_be_bytes()))
                .collect(),
        }
    }
    /// Request bodies 0 -> 1 -> 2 -> ... -> n (proofs from the previous size).
    fn requests(&self, n: usize) -> Vec<(u64, Vec<Hash>, Vec<u8>)> {
        (1..=n)
            .map(|size| {
                let note = SignedCheckpoint::sign(
                    Checkpoint {
                        origin: self.origin.clone(),
                        size: size as u64,
                        root: root_from_leaf_hashes(&self.leaves[..size]),
                    },
                    &self.key,
                )
                .to_text()
                .into_bytes();
                let proof = ConsistencyProof::generate(&self.leaves[..size], size as u64 - 1)
                    .unwrap()
                    .path;
                (size as u64 - 1, proof, note)
            })
            .collect()
    }
}

fn keeper(state: &std::path::Path, logs: &[&Log]) -> audita_keeper::KeeperHandle {
    let vkeys: Vec<String> = logs
        .iter()
        .map(|l| log_vkey(&l.origin, &l.key.verifying_key()))
        .collect();
    let cfg = KeeperConfig::new(
        "bench.example/keeper",
        audita_evidence::derive_signing_key(2, "k"),
        &vkeys,
        state,
    )
    .unwrap();
    audita_keeper::serve(&cfg, std::net::TcpListener::bind("127.0.0.1:0").unwrap()).unwrap()
}

fn drive(url: &str, reqs: &[(u64, Vec<Hash>, Vec<u8>)]) {
    let c = WitnessClient::new(url, Duration::from_secs(30));
    for (old, proof, note) in reqs {
        match c.add_checkpoint(*old, proof, note).unwrap() {
            Outcome::Cosigned(_) => {}
            other => panic!("{other:?}"),
        }
    }
}

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(2000);
    let mut rows: Vec<(String, f64)> = Vec::new();

    // Raw Ed25519: verify the log's signature + sign the cosignature.
    let log_key = audita_evidence::derive_signing_key(1, "raw");
    let keeper_key = audita_evidence::derive_signing_key(2, "raw-k");
    let msg = b"audita.example/log\n123456\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n";
    let sig = log_key.sign(msg);
    let vk = log_key.verifying_key();
    let reps = n * 10;
    let t = Instant::now();
    for _ in 0..reps {
        vk.verify(msg, &sig).unwrap();
        std::hint::black_box(keeper_key.sign(msg));
    }
    rows.push((
        "raw Ed25519 verify + sign (no HTTP, no disk)".into(),
        reps as f64 / t.elapsed().as_secs_f64(),
    ));

    let disk = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let shm = tempfile::tempdir_in("/dev/shm").unwrap();
    for (label, dir) in [
        (
            "keeper over loopback HTTP, state on disk (fsync)",
            disk.path(),
        ),
        ("keeper over loopback HTTP, state on tmpfs", shm.path()),
    ] {
        let log = Log::new("bench.example/log", n + 1);
        let reqs = log.requests(n);
        let k = keeper(dir, &[&log]);
        let t = Instant::now();
        drive(&k.url(), &reqs);
        rows.push((label.into(), n as f64 / t.elapsed().as_secs_f64()));
    }
    {
        let logs: Vec<Log> = (0..4)
            .map(|i| Log::new(&format!("bench.example/log{i}"), n + 1))
            .collect();
        let reqs: Vec<_> = logs.iter().map(|l| l.requests(n)).collect();
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let k = keeper(dir.path(), &logs.iter().collect::<Vec<_>>());
        let t = Instant::now();
        std::thread::scope(|s| {
            for r in &reqs {
                let url = k.url();
                s.spawn(move || drive(&url, r));
            }
        });
        rows.push((
            "keeper over loopback HTTP, 4 clients on 4 logs, disk".into(),
            (4 * n) as f64 / t.elapsed().as_secs_f64(),
        ));
    }

    let raw = rows[0].1;
    println!(
        "| {:<55} | {:>12} | {:>10} |",
        "what", "per second", "vs raw"
    );
    println!("|{:-<57}|{:->14}|{:->12}|", "", "", "");
    for (label, rate) in &rows {
        println!("| {label:<55} | {rate:>12.0} | {:>9.4}x |", rate / raw);
    }
}
