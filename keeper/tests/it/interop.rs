//! Interop with independent implementations (issue 12 item 5, the keeper half):
//! - `interop/verify` (Go: `golang.org/x/mod/sumdb/note` and `.../sumdb/tlog`,
//!   `github.com/transparency-dev/formats/note` for `cosignature/v1`,
//!   `filippo.io/torchwood` for checkpoint bodies) verifies our checkpoints,
//!   keeper cosignatures and consistency proofs, and rejects tampered ones;
//! - Tessera's tlog-witness client (`github.com/transparency-dev/tessera`
//!   v1.0.1, its `posix-oneshot` log) drives our keeper: its published
//!   checkpoints carry our cosignature, growth is co-signed, its fork is refused
//!   and kept as evidence;
//! - the same Go program checks the keeper's evidence records
//!   (`audita.keeper-evidence/v1`) with the log's key alone;
//! - our client obtains cosignatures from litewitness (`filippo.io/torchwood`
//!   v0.6.1, with its ssh-agent key) and gets its 409/422/400 answers.
//!
//! Nothing is skipped: a Go tool that is missing is installed with `go install`
//! (as `.ci/run` does), and a tool that cannot be built fails the test, naming it.

use crate::common;

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use audita_evidence::{KeyRegistry, SignedCheckpoint};
use audita_keeper::{cosigned_by, ClientError, KeeperConfig, Outcome, WitnessClient};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use common::*;

const LITEWITNESS: &str = "filippo.io/torchwood/cmd/litewitness@v0.6.1";
const WITNESSCTL: &str = "filippo.io/torchwood/cmd/witnessctl@v0.6.1";
const POSIX_ONESHOT: &str = "github.com/transparency-dev/tessera/cmd/examples/posix-oneshot@v1.0.1";

fn go() -> PathBuf {
    let p = Path::new("/usr/local/go/bin/go");
    if p.exists() {
        p.to_owned()
    } else {
        PathBuf::from("go")
    }
}

fn go_cmd() -> Command {
    let mut c = Command::new(go());
    c.env("GOFLAGS", "-mod=mod");
    c
}

fn gopath_bin() -> PathBuf {
    let out = go_cmd()
        .args(["env", "GOPATH"])
        .output()
        .expect("Go is installed (/usr/local/go/bin/go or go on PATH); .ci/run needs it");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim()).join("bin")
}

/// A third-party Go tool from the module proxy, installed once (`go install`).
fn tool(name: &str, package: &str) -> PathBuf {
    let path = gopath_bin().join(name);
    if !path.exists() {
        let out = go_cmd().args(["install", package]).output().unwrap();
        assert!(
            out.status.success() && path.exists(),
            "cannot build {package} (`go install {package}`, as .ci/run does): {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    path
}

/// The interop verifier, built once per test run from `interop/`.
fn verifier() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let bin = Path::new(env!("CARGO_TARGET_TMPDIR")).join("audita-interop-verify");
        let out = go_cmd()
            .args(["build", "-o", bin.to_str().unwrap(), "./verify"])
            .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("interop"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "cannot build keeper/interop/verify: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        bin
    })
}

/// Runs a command to completion within `limit` (killed past it).
fn run(cmd: &mut Command, limit: Duration) -> Output {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    wait_bounded(child, limit)
}

fn wait_bounded(mut child: Child, limit: Duration) -> Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// Runs the Go verifier: `Ok` if it printed ok, `Err(stderr)` otherwise.
fn go_verify(args: &[&str]) -> Result<(), String> {
    let out = run(Command::new(verifier()).args(args), Duration::from_secs(30));
    if out.status.success() && out.stdout == b"ok\n" {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn cosign(
    c: &WitnessClient,
    vkey: &str,
    old: u64,
    proof: &[[u8; 32]],
    cp: &SignedCheckpoint,
) -> SignedCheckpoint {
    let Outcome::Cosigned(lines) = c
        .add_checkpoint(old, proof, cp.to_text().as_bytes())
        .unwrap()
    else {
        panic!("expected a cosignature");
    };
    cosigned_by(cp, &lines, vkey).unwrap().1
}

fn write_proof(path: &Path, proof: &[[u8; 32]]) {
    let text: String = proof.iter().map(|h| STANDARD.encode(h) + "\n").collect();
    std::fs::write(path, text).unwrap();
}

#[test]
fn go_verifies_our_checkpoints_cosignatures_and_proofs() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::new("audita.example/interop-log", 1, 50);
    let k1 = start(&config(&dir.path().join("k1"), &[&log]));
    let cfg2 = KeeperConfig::new(
        "vendor.example/k2",
        audita_evidence::derive_signing_key(8, "vendor.example/k2"),
        &[log.vkey()],
        &dir.path().join("k2"),
    )
    .unwrap();
    let k2 = start(&cfg2);
    let (c1, c2) = (
        WitnessClient::new(&k1.url(), Duration::from_secs(10)),
        WitnessClient::new(&k2.url(), Duration::from_secs(10)),
    );
    // Checkpoints 7 and 33, each co-signed by both keepers.
    let both = |old: u64, proof: &[[u8; 32]], n: usize| {
        let one = cosign(&c1, k1.vkey(), old, proof, &log.checkpoint(n));
        let two = cosign(&c2, k2.vkey(), old, proof, &log.checkpoint(n));
        let line2 = two.to_text().lines().last().unwrap().to_owned() + "\n";
        one.to_text() + &line2
    };
    let cp7 = both(0, &[], 7);
    let cp33 = both(7, &log.proof(7, 33), 33);
    let p = |n: &str| dir.path().join(n);
    std::fs::write(p("cp7"), &cp7).unwrap();
    std::fs::write(p("cp33"), &cp33).unwrap();
    write_proof(&p("proof"), &log.proof(7, 33));
    let s = |p: PathBuf| p.to_str().unwrap().to_owned();
    let (lk, w1, w2) = (log.vkey(), k1.vkey().to_owned(), k2.vkey().to_owned());
    let full = |cp: &str, old: &str, proof: &str, w: &str| {
        go_verify(&[
            "-log",
            &lk,
            "-witness",
            w,
            "-witness",
            &w2,
            "-checkpoint",
            cp,
            "-old",
            old,
            "-proof",
            proof,
        ])
    };
    full(&s(p("cp33")), &s(p("cp7")), &s(p("proof")), &w1).unwrap();
    go_verify(&["-log", &lk, "-witness", &w1, "-checkpoint", &s(p("cp7"))]).unwrap();

    // Tampered inputs fail it.
    let tamper = |name: &str, text: String| {
        std::fs::write(p(name), text).unwrap();
        s(p(name))
    };
    let mut lines: Vec<String> = cp33.lines().map(str::to_owned).collect();
    // 1. The root.
    let mut root = STANDARD.decode(&lines[2]).unwrap();
    root[0] ^= 1;
    let mut t = lines.clone();
    t[2] = STANDARD.encode(&root);
    let bad_root = tamper("bad_root", t.join("\n") + "\n");
    assert!(full(&bad_root, &s(p("cp7")), &s(p("proof")), &w1).is_err());
    // 2. A cosignature's signature bytes; 3. its timestamp.
    for (name, byte) in [("bad_sig", 40usize), ("bad_time", 9usize)] {
        let i = lines.iter().position(|l| l.contains(KEEPER)).unwrap();
        let (head, b64) = lines[i].rsplit_once(' ').unwrap();
        let mut raw = STANDARD.decode(b64).unwrap();
        raw[byte] ^= 1;
        let mut t = lines.clone();
        t[i] = format!("{head} {}", STANDARD.encode(raw));
        let f = tamper(name, t.join("\n") + "\n");
        assert!(
            go_verify(&["-log", &lk, "-witness", &w1, "-checkpoint", &f]).is_err(),
            "{name} accepted"
        );
    }
    // 4. The keeper's line removed.
    lines.retain(|l| !l.contains(KEEPER));
    let stripped = tamper("stripped", lines.join("\n") + "\n");
    let err = go_verify(&["-log", &lk, "-witness", &w1, "-checkpoint", &stripped]).unwrap_err();
    assert!(err.contains(KEEPER), "{err}");
    // 5. A proof hash flipped, a proof line dropped, the proof for other sizes.
    let mut bad = log.proof(7, 33);
    bad[1][5] ^= 1;
    write_proof(&p("bad_proof"), &bad);
    assert!(full(&s(p("cp33")), &s(p("cp7")), &s(p("bad_proof")), &w1).is_err());
    write_proof(&p("short_proof"), &log.proof(7, 33)[1..]);
    assert!(full(&s(p("cp33")), &s(p("cp7")), &s(p("short_proof")), &w1).is_err());
    write_proof(&p("other_proof"), &log.proof(8, 33));
    assert!(full(&s(p("cp33")), &s(p("cp7")), &s(p("other_proof")), &w1).is_err());
    // 6. Another witness key under the keeper's name.
    let wrong = audita_keeper::keeper_vkey(KEEPER, &log.key.verifying_key());
    assert!(go_verify(&["-log", &lk, "-witness", &wrong, "-checkpoint", &s(p("cp7"))]).is_err());
    // 7. A fork of the log (same key): its checkpoint 33 is not consistent with 7
    //    of the other branch.
    let fork = log.fork(5);
    std::fs::write(p("fork33"), fork.checkpoint(33).to_text()).unwrap();
    write_proof(&p("fork_proof"), &fork.proof(7, 33));
    assert!(go_verify(&[
        "-log",
        &lk,
        "-checkpoint",
        &s(p("fork33")),
        "-old",
        &s(p("cp7")),
        "-proof",
        &s(p("fork_proof"))
    ])
    .is_err());
}

/// Writes a log private key for Tessera (C2SP note form) and returns the log's
/// verifier key.
fn tessera_log_key(path: &Path, origin: &str, seed: u64) -> String {
    let key = audita_evidence::derive_signing_key(seed, origin);
    audita_keys::write(path, origin, &key, false).unwrap();
    audita_keeper::log_vkey(origin, &key.verifying_key())
}

fn oneshot(
    bin: &Path,
    storage: &Path,
    entries: &Path,
    key: &Path,
    policy: &Path,
    extra: &[&str],
) -> Output {
    run(
        Command::new(bin).args(extra).args([
            "--storage_dir",
            storage.to_str().unwrap(),
            "--entries",
            &format!("{}/*", entries.display()),
            "--private_key",
            key.to_str().unwrap(),
            "--witness_policy_file",
            policy.to_str().unwrap(),
            "--witness_timeout",
            "5s",
        ]),
        Duration::from_secs(90),
    )
}

fn entries(dir: &Path, from: usize, to: usize, tag: &str) {
    std::fs::create_dir_all(dir).unwrap();
    for i in from..to {
        std::fs::write(dir.join(format!("{i:04}")), format!("{tag} entry {i}")).unwrap();
    }
}

#[test]
fn tessera_witness_client_drives_our_keeper() {
    let oneshot_bin = tool("posix-oneshot", POSIX_ONESHOT);
    let dir = tempfile::tempdir().unwrap();
    let origin = "example.com/tessera-log";
    let key = dir.path().join("log.key");
    let lvk = tessera_log_key(&key, origin, 3);
    let cfg = KeeperConfig::new(
        KEEPER,
        keeper_key(),
        std::slice::from_ref(&lvk),
        &dir.path().join("keeper"),
    )
    .unwrap();
    let k = start(&cfg);
    let policy = dir.path().join("policy");
    std::fs::write(
        &policy,
        format!("witness k1 {} {}\nquorum k1\n", k.vkey(), k.url()),
    )
    .unwrap();
    let mut keys = KeyRegistry::new();
    keys.add_keeper(KEEPER, keeper_key().verifying_key())
        .unwrap();

    let storage = dir.path().join("log");
    let cosigned_size = |path: &Path| -> u64 {
        let note = SignedCheckpoint::parse(&std::fs::read(path).unwrap()).unwrap();
        assert_eq!(
            note.cosignatures(&keys).len(),
            1,
            "no valid keeper cosignature"
        );
        note.checkpoint().size
    };
    // Two runs: 5 entries, then 6 more (Tessera sends the proof from 5 itself).
    for (round, (from, to)) in [(0, 5), (5, 11)].into_iter().enumerate() {
        let e = dir.path().join(format!("entries{round}"));
        entries(&e, from, to, "main");
        let out = oneshot(&oneshot_bin, &storage, &e, &key, &policy, &[]);
        assert!(
            out.status.success(),
            "posix-oneshot round {round}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let cp = storage.join("checkpoint");
        assert_eq!(cosigned_size(&cp), to as u64);
        // And the Go verifier agrees.
        go_verify(&[
            "-log",
            &lvk,
            "-witness",
            k.vkey(),
            "-checkpoint",
            cp.to_str().unwrap(),
        ])
        .unwrap();
    }
    // A fork: another Tessera log under the same key with other entries, larger.
    // Tessera (fail-open, so that it publishes at all) learns the keeper's size
    // from its 409 and sends a proof from 11 in its own tree: our keeper refuses
    // (422), the fork is published without our cosignature, and the conflict is
    // kept as evidence.
    let forked = dir.path().join("fork");
    let e = dir.path().join("fork-entries");
    entries(&e, 0, 14, "fork");
    let out = oneshot(
        &oneshot_bin,
        &forked,
        &e,
        &key,
        &policy,
        &["--witness_fail_open"],
    );
    assert!(
        out.status.success(),
        "posix-oneshot (fork): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let note = SignedCheckpoint::parse(&std::fs::read(forked.join("checkpoint")).unwrap()).unwrap();
    assert_eq!(note.checkpoint().size, 14);
    assert!(
        note.cosignatures(&keys).is_empty(),
        "the fork was co-signed"
    );
    let records = audita_keeper::evidence(&dir.path().join("keeper")).unwrap();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0].kind, audita_keeper::ConflictKind::Inconsistent);
    let (_, log_key) =
        audita_evidence::trust::parse_vkey(&lvk, &[audita_evidence::checkpoint::ED25519_NOTE_TYPE])
            .unwrap();
    for r in &records {
        r.check(&log_key).unwrap();
    }
    // The keeper stays on the first history.
    let state = audita_keeper::state::StateDir::inspect(&dir.path().join("keeper"));
    assert_eq!(state.load(origin).unwrap().unwrap().checkpoint().size, 11);
}

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn our_client_gets_cosignatures_from_litewitness() {
    let litewitness = tool("litewitness", LITEWITNESS);
    let witnessctl = tool("witnessctl", WITNESSCTL);
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n);
    let wkey = d("witness");
    let out = run(
        Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", "lw", "-f"])
            .arg(&wkey),
        Duration::from_secs(20),
    );
    assert!(out.status.success(), "ssh-keygen (openssh-client): {out:?}");
    let sock = d("agent.sock");
    let _agent = Killed(
        Command::new("ssh-agent")
            .args(["-D", "-a"])
            .arg(&sock)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("ssh-agent (openssh-client) starts"),
    );
    let start_wait = Instant::now();
    while !sock.exists() {
        assert!(
            start_wait.elapsed() < Duration::from_secs(10),
            "ssh-agent socket"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = run(
        Command::new("ssh-add")
            .arg(&wkey)
            .env("SSH_AUTH_SOCK", &sock),
        Duration::from_secs(20),
    );
    assert!(out.status.success(), "ssh-add: {out:?}");
    let out = run(
        Command::new("ssh-keygen")
            .arg("-lf")
            .arg(wkey.with_extension("pub")),
        Duration::from_secs(20),
    );
    let fp = String::from_utf8(out.stdout).unwrap();
    let fp = fp
        .split_whitespace()
        .nth(1)
        .expect("fingerprint")
        .to_owned();

    let log = Log::new("example.com/lite-log", 6, 40);
    let fork = log.fork(9);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let db = d("lw.db");
    let mut child = Command::new(&litewitness)
        .arg("-db")
        .arg(&db)
        .args(["-name", "witness.example/lite", "-key", &fp, "-ssh-agent"])
        .arg(&sock)
        .args(["-listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("litewitness starts");
    let stderr = child.stderr.take().unwrap();
    let _lw = Killed(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut vkey = None;
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    while Instant::now() < deadline
        && (vkey.is_none() || !seen.iter().any(|l: &String| l.contains("listening")))
    {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
            if let Some(v) = line
                .split_whitespace()
                .find_map(|t| t.strip_prefix("vkey="))
            {
                vkey = Some(v.trim_matches('"').to_owned());
            }
            seen.push(line);
        }
    }
    let vkey = vkey.unwrap_or_else(|| panic!("litewitness printed no vkey: {seen:?}"));
    for args in [
        vec!["add-log", "-origin", &log.origin],
        vec!["add-key", "-origin", &log.origin, "-key", &log.vkey()],
    ] {
        let out = run(
            Command::new(&witnessctl)
                .arg(args[0])
                .arg("-db")
                .arg(&db)
                .args(&args[1..]),
            Duration::from_secs(20),
        );
        assert!(out.status.success(), "witnessctl {args:?}: {out:?}");
    }
    let url = format!("http://127.0.0.1:{port}");
    let c = WitnessClient::new(&url, Duration::from_secs(10));
    // Wait for it to accept.
    let ready = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            ready.elapsed() < Duration::from_secs(20),
            "litewitness does not listen"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    let cp5 = cosign(&c, &vkey, 0, &[], &log.checkpoint(5));
    assert_eq!(
        c.add_checkpoint(0, &[], &log.note(12)).unwrap(),
        Outcome::Conflict(5)
    );
    let cp12 = cosign(&c, &vkey, 5, &log.proof(5, 12), &log.checkpoint(12));
    // The fork is refused: at the same size (litewitness v0.6.1 answers 422
    // there, where the spec, and our keeper, answer 409), and larger with its own
    // proof (422); the original history continues.
    let err = c.add_checkpoint(12, &[], &fork.note(12)).unwrap_err();
    assert!(
        matches!(err, ClientError::Status { status: 422, .. }),
        "{err}"
    );
    let err = c
        .add_checkpoint(12, &fork.proof(12, 20), &fork.note(20))
        .unwrap_err();
    assert!(
        matches!(err, ClientError::Status { status: 422, .. }),
        "{err}"
    );
    let err = c.add_checkpoint(12, &[], &log.note(7)).unwrap_err();
    assert!(
        matches!(err, ClientError::Status { status: 400, .. }),
        "{err}"
    );
    let other = Log::new("example.com/unknown", 1, 2);
    // litewitness v0.6.1 answers 403 for an unknown log (the spec now says 404;
    // our keeper answers 404): either way a permanent refusal for our client.
    let err = c.add_checkpoint(0, &[], &other.note(1)).unwrap_err();
    assert!(
        matches!(err, ClientError::Status { status: 403, .. }),
        "{err}"
    );
    assert!(!err.is_transient());
    // `WitnessClient::cosign` from a forgotten size: litewitness's 409 names 12,
    // the retry carries the proof from 12.
    let l = log.clone();
    let w = c
        .cosign(&log.checkpoint(20), 0, &vkey, move |old| {
            (old <= 20).then(|| l.proof(old as usize, 20))
        })
        .unwrap();
    assert_eq!(
        (w.size, w.cosignature.keeper.as_str()),
        (20, "witness.example/lite")
    );

    // The Go verifier accepts litewitness's cosignatures on our checkpoints.
    std::fs::write(d("cp5"), cp5.to_text()).unwrap();
    std::fs::write(d("cp12"), cp12.to_text()).unwrap();
    write_proof(&d("proof"), &log.proof(5, 12));
    go_verify(&[
        "-log",
        &log.vkey(),
        "-witness",
        &vkey,
        "-checkpoint",
        d("cp12").to_str().unwrap(),
        "-old",
        d("cp5").to_str().unwrap(),
        "-proof",
        d("proof").to_str().unwrap(),
    ])
    .unwrap();
}

#[test]
fn go_checks_keeper_evidence_records() {
    let dir = tempfile::tempdir().unwrap();
    let a = Log::new("audita.example/evidence-log", 4, 30);
    let b = a.fork(6);
    let k = start(&config(&dir.path().join("k"), &[&a]));
    let c = WitnessClient::new(&k.url(), Duration::from_secs(10));
    cosign(&c, k.vkey(), 0, &[], &a.checkpoint(10));
    // Same size, other root (409) and larger, inconsistent (422).
    assert_eq!(
        c.add_checkpoint(10, &[], &b.note(10)).unwrap(),
        Outcome::Conflict(10)
    );
    assert!(c.add_checkpoint(10, &b.proof(10, 20), &b.note(20)).is_err());
    let records = audita_keeper::evidence(&dir.path().join("k")).unwrap();
    assert_eq!(records.len(), 2);
    let stranger = Log::new(&a.origin, 99, 1).vkey();
    for (i, r) in records.iter().enumerate() {
        let f = dir.path().join(format!("e{i}.json"));
        std::fs::write(&f, serde_json::to_vec_pretty(r).unwrap()).unwrap();
        go_verify(&["-log", &a.vkey(), "-evidence", f.to_str().unwrap()]).unwrap();
        assert!(go_verify(&["-log", &stranger, "-evidence", f.to_str().unwrap()]).is_err());
        // The refused note's root changed: its log signature no longer verifies.
        let mut t = r.clone();
        let mut lines: Vec<String> = t.refused.lines().map(str::to_owned).collect();
        let mut root = STANDARD.decode(&lines[2]).unwrap();
        root[3] ^= 1;
        lines[2] = STANDARD.encode(root);
        t.refused = lines.join("\n") + "\n";
        let f = dir.path().join(format!("t{i}.json"));
        std::fs::write(&f, serde_json::to_vec(&t).unwrap()).unwrap();
        assert!(go_verify(&["-log", &a.vkey(), "-evidence", f.to_str().unwrap()]).is_err());
    }
    // An "inconsistent" record whose proof is made valid is no evidence.
    let mut cleared = records
        .iter()
        .find(|r| r.kind == audita_keeper::ConflictKind::Inconsistent)
        .unwrap()
        .clone();
    cleared.refused = a.checkpoint(20).to_text();
    cleared.proof = a.proof(10, 20).iter().map(|h| STANDARD.encode(h)).collect();
    let f = dir.path().join("cleared.json");
    std::fs::write(&f, serde_json::to_vec(&cleared).unwrap()).unwrap();
    let err = go_verify(&["-log", &a.vkey(), "-evidence", f.to_str().unwrap()]).unwrap_err();
    assert!(err.contains("valid consistency proof"), "{err}");
}
