//! Every answer of `POST /add-checkpoint` over real loopback HTTP, through the raw
//! wire and through the blocking client; adversarial bodies get 4xx, never a
//! panic (the keeper keeps answering afterwards).

use crate::common;

use std::time::Duration;

use audita_evidence::{Checkpoint, SignedCheckpoint};
use audita_keeper::protocol::format_request;
use audita_keeper::{cosigned_by, keeper_vkey, ClientError, Outcome, WitnessClient};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use common::*;

fn add(url: &str, old: u64, proof: &[[u8; 32]], note: &[u8]) -> (u16, String, Vec<u8>) {
    post(url, "/add-checkpoint", &format_request(old, proof, note))
}

#[test]
fn every_status_code_path() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::new("log.example/a", 1, 40);
    let other = Log::new("log.example/other", 2, 4);
    let k = start(&config(dir.path(), &[&log]));
    let url = k.url();

    // 200 from size 0 with an empty proof; the body is one cosignature/v1 line
    // that verifies under the keeper's vkey, with a POSIX-seconds timestamp.
    let (st, ct, body) = add(&url, 0, &[], &log.note(5));
    assert_eq!(st, 200, "{}", String::from_utf8_lossy(&body));
    assert!(ct.starts_with("text/plain"));
    let lines = vec![String::from_utf8(body).unwrap()];
    let vkey = keeper_vkey(KEEPER, &keeper_key().verifying_key());
    let (cosig, _) = cosigned_by(&log.checkpoint(5), &lines, &vkey).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(cosig.timestamp <= now && cosig.timestamp + 60 > now);

    // 409 on an old size other than the latest co-signed one, with the size.
    for old in [0, 4, 6] {
        let (st, ct, body) = add(&url, old, &log.proof(old as usize, 9), &log.note(9));
        assert_eq!(st, 409);
        assert_eq!(ct, "text/x.tlog.size");
        assert_eq!(body, b"5\n");
    }
    // 200 with a consistency proof from 5; the same checkpoint again (old = size,
    // same root, empty proof) is co-signed again.
    assert_eq!(add(&url, 5, &log.proof(5, 9), &log.note(9)).0, 200);
    assert_eq!(add(&url, 9, &[], &log.note(9)).0, 200);

    // 422: a proof that does not verify, of the wrong length, or non-empty for
    // equal sizes.
    let mut bad = log.proof(9, 20);
    bad[0][0] ^= 1;
    assert_eq!(add(&url, 9, &bad, &log.note(20)).0, 422);
    let good = log.proof(9, 20);
    assert_eq!(add(&url, 9, &good[..good.len() - 1], &log.note(20)).0, 422);
    let mut longer = good.clone();
    longer.push([0; 32]);
    assert_eq!(add(&url, 9, &longer, &log.note(20)).0, 422);
    assert_eq!(add(&url, 9, &[[0; 32]], &log.note(9)).0, 422);

    // 404: unknown origin; 403: right origin, other key (the line's key id does
    // not match: ignored, so no trusted signature).
    assert_eq!(add(&url, 0, &[], &other.note(2)).0, 404);
    let mut impostor = log.clone();
    impostor.key = audita_evidence::derive_signing_key(99, "impostor");
    assert_eq!(add(&url, 9, &log.proof(9, 20), &impostor.note(20)).0, 403);
    // Right key id, broken signature: 403 too.
    let text = String::from_utf8(log.note(20)).unwrap();
    let (head, sig) = text.rsplit_once(' ').unwrap();
    let mut raw = STANDARD.decode(sig.trim_end()).unwrap();
    raw[10] ^= 1;
    let forged = format!("{head} {}\n", STANDARD.encode(raw));
    assert_eq!(add(&url, 9, &log.proof(9, 20), forged.as_bytes()).0, 403);

    // 400: old size above the checkpoint's size; malformed bodies and notes.
    assert_eq!(add(&url, 21, &[], &log.note(20)).0, 400);
    for body in [
        b"".to_vec(),
        b"garbage".to_vec(),
        b"old 9\n!!!!\n\nlog".to_vec(),
        b"old 09\n\nx".to_vec(),
        format_request(9, &[[0; 32]; 64], &log.note(20)),
        format_request(9, &[], b"not a checkpoint\n\n"),
        format!("old 9\n{}\n\n", STANDARD.encode([1u8; 33])).into_bytes(),
        [b"old 9\n\n".as_slice(), &[0xff, 0xfe, b'\n']].concat(),
    ] {
        let (st, _, b) = post(&url, "/add-checkpoint", &body);
        assert_eq!(st, 400, "{:?} -> {}", body, String::from_utf8_lossy(&b));
    }

    // 413 on a body over the limit; 405 on GET; 404 on other paths.
    // A declared length over the limit is refused before the body is read; a
    // chunked body is cut at the limit.
    let declared = b"POST /add-checkpoint HTTP/1.1\r\nHost: k\r\nContent-Length: 1048576\r\nConnection: close\r\n\r\n";
    assert_eq!(raw_status(k.addr(), declared), Some(413));
    let mut chunked = b"POST /add-checkpoint HTTP/1.1\r\nHost: k\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n".to_vec();
    for _ in 0..8 {
        chunked.extend_from_slice(b"1000\r\n");
        chunked.extend_from_slice(&[b'a'; 0x1000]);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    assert_eq!(raw_status(k.addr(), &chunked), Some(413));

    assert_eq!(post(&url, "/nope", b"x").0, 404);
    let get = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent()
        .get(&format!("{url}/add-checkpoint"))
        .call()
        .unwrap();
    assert_eq!(get.status().as_u16(), 405);
    let probe = b"GET /healthz HTTP/1.1\r\nHost: k\r\nConnection: close\r\n\r\n";
    assert_eq!(raw_status(k.addr(), probe), Some(200));

    // After all of that the keeper still serves, at size 9.
    let (st, _, _) = add(&url, 9, &log.proof(9, 20), &log.note(20));
    assert_eq!(st, 200);

    // Its metrics count what it answered (400s before the log is known are
    // counted too) and the size it holds.
    let text = ureq::get(&format!("{url}/metrics"))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    let value = |name: &str| -> u64 {
        text.lines()
            .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
            .unwrap_or_else(|| panic!("{name} missing from\n{text}"))
            .rsplit(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(value("audita_keeper_answers_total{answer=\"cosigned\"}"), 4);
    assert_eq!(value("audita_keeper_answers_total{answer=\"conflict\"}"), 3);
    assert_eq!(
        value("audita_keeper_answers_total{answer=\"bad_proof\"}"),
        4
    );
    assert_eq!(
        value("audita_keeper_answers_total{answer=\"unknown_log\"}"),
        1
    );
    assert_eq!(
        value("audita_keeper_answers_total{answer=\"forbidden\"}"),
        2
    );
    assert_eq!(
        value("audita_keeper_answers_total{answer=\"bad_request\"}"),
        9
    );
    assert_eq!(
        value("audita_keeper_conflicts_total{kind=\"inconsistent\"}"),
        4
    );
    assert_eq!(
        value("audita_keeper_latest_size{origin=\"log.example/a\"}"),
        20
    );
}

#[test]
fn the_client_reports_each_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::new("log.example/c", 3, 30);
    let k = start(&config(dir.path(), &[&log]));
    let c = WitnessClient::new(&k.url(), Duration::from_secs(10));
    let vkey = k.vkey().to_owned();

    let Outcome::Cosigned(lines) = c.add_checkpoint(0, &[], &log.note(3)).unwrap() else {
        panic!("expected a cosignature");
    };
    let (cosig, with) = cosigned_by(&log.checkpoint(3), &lines, &vkey).unwrap();
    assert_eq!(cosig.keeper, KEEPER);
    assert!(with.to_text().ends_with(&lines[0]));
    // A line checked against another keeper's key is not that keeper's.
    let other = keeper_vkey("other.example/k", &log.key.verifying_key());
    assert!(cosigned_by(&log.checkpoint(3), &lines, &other).is_err());
    // The line is over checkpoint 3, not any other.
    assert!(cosigned_by(&log.checkpoint(4), &lines, &vkey).is_err());

    assert_eq!(
        c.add_checkpoint(0, &[], &log.note(10)).unwrap(),
        Outcome::Conflict(3)
    );
    assert!(matches!(
        c.add_checkpoint(3, &log.proof(3, 10), &log.note(10))
            .unwrap(),
        Outcome::Cosigned(_)
    ));
    let err = c
        .add_checkpoint(10, &log.proof(3, 12), &log.note(12))
        .unwrap_err();
    assert!(
        matches!(err, ClientError::Status { status: 422, .. }),
        "{err}"
    );
    assert!(!err.is_transient());
    let err = c.add_checkpoint(11, &[], &log.note(10)).unwrap_err();
    assert!(matches!(err, ClientError::Status { status: 400, .. }));

    // Unreachable keeper: a transient transport error within the timeout.
    let url = k.url();
    k.shutdown();
    let start = std::time::Instant::now();
    let err = audita_keeper::add_checkpoint(&url, 10, &[], &log.note(10), Duration::from_secs(2))
        .unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn concurrent_requests_for_one_log_never_roll_back() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::new("log.example/race", 4, 200);
    let k = start(&config(dir.path(), &[&log]));
    assert_eq!(add(&k.url(), 0, &[], &log.note(1)).0, 200);
    // Eight threads race to advance the keeper, each believing it is at the size
    // it last learned; every cosigned size a thread sees must be above the size
    // it sent, and the sizes the keeper co-signed must be strictly increasing in
    // the order of the state it reports.
    let cosigned = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for t in 0..8usize {
            let (url, log, cosigned) = (k.url(), &log, &cosigned);
            s.spawn(move || {
                let c = WitnessClient::new(&url, Duration::from_secs(20));
                let mut known = 1usize;
                for i in 0..25 {
                    let target = (known + 1 + (t * 7 + i) % 5).min(200);
                    match c
                        .add_checkpoint(known as u64, &log.proof(known, target), &log.note(target))
                        .unwrap()
                    {
                        Outcome::Cosigned(_) => {
                            cosigned.lock().unwrap().push((known, target));
                            known = target;
                        }
                        Outcome::Conflict(n) => known = n as usize,
                    }
                }
            });
        }
    });
    let mut pairs = cosigned.into_inner().unwrap();
    // Every co-signed step starts where the previous one ended: a chain.
    pairs.sort();
    for w in pairs.windows(2) {
        assert_eq!(
            w[0].1, w[1].0,
            "steps {:?} and {:?} do not chain",
            w[0], w[1]
        );
    }
    assert!(!pairs.is_empty());
}

#[test]
fn checkpoint_with_extension_lines_is_refused_as_malformed() {
    // Our checkpoints carry no extension lines; one with an extension line is a
    // malformed note for this keeper (400), not a panic.
    let dir = tempfile::tempdir().unwrap();
    let log = Log::new("log.example/x", 5, 4);
    let k = start(&config(dir.path(), &[&log]));
    let cp = Checkpoint {
        origin: log.origin.clone(),
        size: 2,
        root: [0; 32],
    };
    let text = SignedCheckpoint::sign(cp, &log.key).to_text();
    let with_ext = text.replacen("\n\n", "\nextension\n\n", 1);
    assert_eq!(add(&k.url(), 0, &[], with_ext.as_bytes()).0, 400);
}

#[test]
fn a_body_that_never_completes_is_cut_off_by_the_time_limit() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::new("log.example/slow", 6, 4);
    let mut cfg = config(dir.path(), &[&log]);
    cfg.limits.request_timeout = Duration::from_millis(500);
    let k = start(&cfg);
    let start = std::time::Instant::now();
    let partial = b"POST /add-checkpoint HTTP/1.1\r\nHost: k\r\nContent-Length: 100\r\n\r\nold 0\n";
    assert_eq!(raw_status(k.addr(), partial), Some(408));
    assert!(start.elapsed() < Duration::from_secs(5));
    // Headers that never complete (slowloris): the connection is closed.
    let start = std::time::Instant::now();
    let status = raw_status(k.addr(), b"POST /add-checkpoint HTTP/1.1\r\nHost: k\r\n");
    assert!(matches!(status, None | Some(408)), "{status:?}");
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(add(&k.url(), 0, &[], &log.note(2)).0, 200);
}

#[test]
fn connections_past_the_cap_are_closed_and_the_keeper_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::new("log.example/conns", 7, 4);
    let mut cfg = config(dir.path(), &[&log]);
    // The held connections send nothing: with the default 10 s request limit the
    // first of them were closed for it while a loaded machine was still probing
    // (CI of 935b8606), freeing slots the probe then got. They must outlast the probe.
    cfg.limits.request_timeout = Duration::from_secs(60);
    let k = start(&cfg);
    let cap = audita_http::MAX_CONNECTIONS;
    let held: Vec<std::net::TcpStream> = (0..cap)
        .map(|_| std::net::TcpStream::connect(k.addr()).unwrap())
        .collect();
    // One more is accepted by the kernel and closed by the keeper, unanswered
    // (probed until the keeper has accepted all the held ones, at most 10 s).
    let probe = b"GET /probe HTTP/1.1\r\nHost: k\r\nConnection: close\r\n\r\n";
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while raw_status(k.addr(), probe).is_some() {
        assert!(
            std::time::Instant::now() < deadline,
            "the cap never applied"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(held);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while raw_status(k.addr(), probe) != Some(404) {
        assert!(
            std::time::Instant::now() < deadline,
            "the keeper did not recover"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(add(&k.url(), 0, &[], &log.note(2)).0, 200);
}

/// Seeded random mutations of valid requests (byte flips, insertions, deletions,
/// truncations, duplicated lines): every answer is a 2xx or 4xx, never a 5xx or a
/// dropped connection, and the keeper never co-signs a checkpoint that is not the
/// log's own history.
#[test]
fn mutated_requests_get_4xx_and_never_break_the_keeper() {
    use rand::{Rng as _, SeedableRng as _};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(41);
    let dir = tempfile::tempdir().unwrap();
    let log = Log::new("log.example/mutate", 8, 300);
    let k = start(&config(dir.path(), &[&log]));
    let c = WitnessClient::new(&k.url(), Duration::from_secs(10));
    let mut size = 0usize;
    let mut cosigned_roots = std::collections::BTreeMap::new();
    for i in 0..600 {
        let target = (size + rng.gen_range(0..4)).min(300);
        let mut body = format_request(size as u64, &log.proof(size, target), &log.note(target));
        if i % 5 != 0 {
            for _ in 0..rng.gen_range(1..4) {
                let at = rng.gen_range(0..body.len());
                match rng.gen_range(0..5) {
                    0 => body[at] ^= 1 << rng.gen_range(0..8),
                    1 => body.insert(at, rng.gen()),
                    2 => {
                        body.remove(at);
                    }
                    3 => body.truncate(at),
                    _ => {
                        let line: Vec<u8> = body[at..]
                            .iter()
                            .take_while(|&&b| b != b'\n')
                            .copied()
                            .collect();
                        body.splice(at..at, line.into_iter().chain([b'\n']));
                    }
                }
                if body.is_empty() {
                    body.push(b'\n');
                }
            }
        }
        let (st, _, answer) = post(&k.url(), "/add-checkpoint", &body);
        assert!(
            st == 200 || (400..500).contains(&st),
            "status {st} for {:?}: {}",
            String::from_utf8_lossy(&body),
            String::from_utf8_lossy(&answer)
        );
        if st == 200 {
            // Whatever was co-signed is a checkpoint of the log's own history.
            let note = audita_evidence::SignedCheckpoint::parse(
                &audita_keeper::protocol::parse_request(&body).unwrap().note,
            )
            .unwrap();
            let n = note.checkpoint().size as usize;
            assert_eq!(note.checkpoint().root, log.checkpoint(n).checkpoint().root);
            cosigned_roots.insert(n, note.checkpoint().root);
            size = n;
        }
        if st == 409 {
            if let Some(n) = audita_keeper::protocol::parse_size_body(&answer) {
                size = n as usize;
            }
        }
    }
    assert!(cosigned_roots.len() > 20, "the run must make progress");
    assert!(matches!(
        c.add_checkpoint(size as u64, &log.proof(size, 300), &log.note(300)),
        Ok(Outcome::Cosigned(_))
    ));
}

#[test]
fn cosign_learns_the_witness_size_from_a_409_and_checks_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::new("log.example/cosign", 9, 40);
    let fork = log.fork(3);
    let k = start(&config(dir.path(), &[&log]));
    let c = WitnessClient::new(&k.url(), Duration::from_secs(10));
    let vkey = k.vkey().to_owned();
    let prover = |l: &Log, new: usize| {
        let l = l.clone();
        move |old: u64| (old as usize <= new).then(|| l.proof(old as usize, new))
    };
    let w = c
        .cosign(&log.checkpoint(8), 0, &vkey, prover(&log, 8))
        .unwrap();
    assert_eq!((w.size, w.cosignature.keeper.as_str()), (8, KEEPER));
    assert!(w.line.starts_with("\u{2014} keeper.example/k1 "));
    // The caller forgot the size (0): one 409, then the proof from 8.
    let w = c
        .cosign(&log.checkpoint(20), 0, &vkey, prover(&log, 20))
        .unwrap();
    assert_eq!(w.size, 20);
    // A smaller checkpoint: the witness is above it, no proof from there.
    assert_eq!(
        c.cosign(&log.checkpoint(12), 20, &vkey, prover(&log, 12))
            .unwrap_err(),
        audita_keeper::WitnessError::Conflict {
            witness_size: 20,
            size: 12
        }
    );
    // A fork: 422, permanent.
    let err = c
        .cosign(&fork.checkpoint(30), 20, &vkey, prover(&fork, 30))
        .unwrap_err();
    assert!(!err.is_transient(), "{err}");
    // The wrong key for this witness: the 200's line does not check.
    let other = keeper_vkey("other.example/k", &log.key.verifying_key());
    assert!(matches!(
        c.cosign(&log.checkpoint(20), 20, &other, prover(&log, 20)),
        Err(audita_keeper::WitnessError::Cosignature(_))
    ));
}
