//! Fault test: a keeper process killed at random points over a long run (SIGKILL
//! at random times, and aborts injected exactly before the state write, between
//! the temp file and the rename, between the rename and the directory sync, and
//! between the durable write and the answer) never co-signs a checkpoint
//! inconsistent with one it co-signed before, nor a smaller one after a larger.
//!
//! The client plays a log that forked after leaf 30 (same origin, same key) and
//! pushes both branches at random. Every cosignature it receives is verified and
//! recorded; at the end all of them must lie on one history with sizes growing in
//! the order they were received, the state on disk must extend them all, and
//! every evidence record must check against the log's key.
//! Seed: `AUDITA_KEEPER_CRASH_SEED` (default fixed), rounds:
//! `AUDITA_KEEPER_CRASH_ROUNDS` (default 200).

use crate::common;

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use audita_keeper::{cosigned_by, ClientError, Outcome, WitnessClient};
use common::*;
use rand::{Rng as _, SeedableRng as _};

const SHARED: usize = 30;
const LEAVES: usize = 6000;

struct Proc {
    child: Arc<Mutex<Child>>,
    url: String,
    // Held open: the keeper writes a second line (its vkey) after the first.
    _stdout: BufReader<std::process::ChildStdout>,
}

fn spawn(config: &std::path::Path, fault: Option<String>) -> Proc {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_audita-keeper"));
    cmd.args(["serve", config.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "error")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if let Some(f) = fault {
        cmd.env("AUDITA_KEEPER_FAULT", f);
    }
    let mut child = cmd.spawn().expect("audita-keeper starts");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let addr = line
        .strip_prefix("listening ")
        .unwrap_or_else(|| panic!("keeper did not start: {line:?}"))
        .trim()
        .to_owned();
    Proc {
        child: Arc::new(Mutex::new(child)),
        url: format!("http://{addr}"),
        _stdout: out,
    }
}

#[test]
fn killed_keeper_never_cosigns_an_inconsistent_checkpoint() {
    let seed: u64 = std::env::var("AUDITA_KEEPER_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    let rounds: usize = std::env::var("AUDITA_KEEPER_CRASH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    eprintln!("crash test seed {seed}, {rounds} rounds");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);

    let dir = tempfile::tempdir().unwrap();
    let a = Log::new("log.example/crash", 1, LEAVES);
    let b = a.fork(SHARED);
    let branches = [&a, &b];
    audita_keys::write(&dir.path().join("keeper.key"), KEEPER, &keeper_key(), false).unwrap();
    let config = dir.path().join("keeper.toml");
    std::fs::write(
        &config,
        format!(
            "name = \"{KEEPER}\"\nkey = \"keeper.key\"\nstate_dir = \"state\"\nlogs = [\"{}\"]\n",
            a.vkey()
        ),
    )
    .unwrap();
    let vkey = audita_keeper::keeper_vkey(KEEPER, &keeper_key().verifying_key());

    // (branch, size) of every cosignature received, in order.
    let mut released: Vec<(usize, usize)> = Vec::new();
    let mut known = 0usize;
    let mut branch = 0usize;
    let mut faults_hit = 0usize;
    for round in 0..rounds {
        let points = [
            "before-persist",
            "after-temp-write",
            "after-rename",
            "after-persist",
        ];
        let fault = (round % 3 != 0).then(|| {
            format!(
                "{}:{}",
                points[rng.gen_range(0..points.len())],
                rng.gen_range(1..6)
            )
        });
        let p = spawn(&config, fault.clone());
        // Without an injected fault, a SIGKILL at a random moment.
        let killer = fault.is_none().then(|| {
            let child = p.child.clone();
            let delay = Duration::from_millis(rng.gen_range(0..150));
            std::thread::spawn(move || {
                std::thread::sleep(delay);
                let _ = child.lock().unwrap().kill();
            })
        });
        let client = WitnessClient::new(&p.url, Duration::from_secs(10));
        for _ in 0..40 {
            if rng.gen_bool(0.2) {
                branch = 1 - branch;
            }
            let log = branches[branch];
            let target = (known + rng.gen_range(0..8)).min(LEAVES);
            let target = target.max(known);
            match client.add_checkpoint(known as u64, &log.proof(known, target), &log.note(target))
            {
                Ok(Outcome::Cosigned(lines)) => {
                    cosigned_by(&log.checkpoint(target), &lines, &vkey)
                        .expect("a 200 carries a valid cosignature of this checkpoint");
                    released.push((branch, target));
                    known = target;
                }
                Ok(Outcome::Conflict(n)) => known = n as usize,
                Err(ClientError::Status { status: 422, .. }) => {}
                Err(e) if e.is_transient() => break,
                Err(e) => panic!("unexpected answer: {e}"),
            }
        }
        {
            let mut c = p.child.lock().unwrap();
            if fault.is_some() && c.try_wait().unwrap().is_some() {
                faults_hit += 1;
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(k) = killer {
            k.join().unwrap();
        }
    }
    eprintln!(
        "{} cosignatures released, {faults_hit} injected aborts hit, final size {known}",
        released.len()
    );
    assert!(faults_hit > 5, "the injected faults must actually fire");
    assert!(released.len() > 50, "the run must make progress");

    // One history: beyond the shared prefix every cosignature is of one branch,
    // and sizes never decrease in the order cosignatures were released.
    let forked: Vec<usize> = released
        .iter()
        .filter(|(_, s)| *s > SHARED)
        .map(|(b, _)| *b)
        .collect();
    assert!(
        forked.windows(2).all(|w| w[0] == w[1]),
        "cosigned both branches of a fork"
    );
    assert!(
        released.windows(2).all(|w| w[0].1 <= w[1].1),
        "cosigned a smaller tree after a larger one"
    );

    // The state on disk extends every released cosignature.
    let state = audita_keeper::state::StateDir::inspect(&dir.path().join("state"));
    let last = state.load(&a.origin).unwrap().expect("state written");
    let &(_, ls) = released.last().unwrap();
    let size = last.checkpoint().size as usize;
    assert!(size >= ls, "state on disk is behind a released cosignature");
    let on = |b: usize| branches[b].checkpoint(size).checkpoint().root == last.checkpoint().root;
    if size <= SHARED {
        assert!(on(0));
    } else if let Some(&fb) = forked.last() {
        assert!(on(fb), "state on disk is on the other branch");
    } else {
        assert!(on(0) || on(1));
    }

    // Every kept conflict checks against the log's key.
    for r in audita_keeper::evidence(&dir.path().join("state")).unwrap() {
        r.check(&a.key.verifying_key()).unwrap();
    }
}
