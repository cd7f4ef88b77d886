//! The record's log checked by independent implementations: a Go program on
//! golang.org/x/mod/sumdb/{note,tlog} (`record/interop/main.go`) fetches a demo
//! record's tiled log from `audita serve-log`, verifies the checkpoint's log
//! signature and every keeper's cosignature, recomputes the root from the tiles,
//! proves every entry, and checks `audita proof consistency|inclusion` output; a
//! stdlib-only Python verifier (`record/interop/verify_inclusion.py`) checks
//! `audita proof inclusion --json`. Tampered tiles, bundles, cosignatures and
//! proofs must fail both. Also: what `audita serve-log` refuses to serve, and the
//! one-line errors of `audita proof`.
//!
//! Go is required (not skipped): `.ci/run` puts `/usr/local/go/bin` on PATH and
//! fetches golang.org/x/mod through the module proxy.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;

fn audita(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_audita"))
        .args(args)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn go() -> PathBuf {
    let candidates = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain([PathBuf::from("/usr/local/go/bin")])
        .map(|d| d.join("go"));
    for c in candidates {
        if c.is_file() {
            return c;
        }
    }
    panic!(
        "the interop test needs Go (not found on PATH nor in /usr/local/go/bin): \
         install Go, or run .ci/run, which puts /usr/local/go/bin on PATH"
    );
}

/// Builds `record/interop` once per test binary.
fn interop_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../record/interop");
        let out = std::env::temp_dir().join(format!("audita-interop-{}", std::process::id()));
        let o = Command::new(go())
            .current_dir(&src)
            .env("GOFLAGS", "-mod=mod")
            .args(["build", "-o"])
            .arg(&out)
            .arg(".")
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "go build of record/interop failed (the module proxy must serve golang.org/x/mod): {}",
            text(&o.stderr)
        );
        out
    })
}

/// `audita serve-log` on an ephemeral port, killed on drop.
struct Server {
    child: Child,
    addr: String,
}

impl Server {
    fn start(dir: &Path) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_audita"))
            .args([
                "serve-log",
                dir.to_str().unwrap(),
                "--listen",
                "127.0.0.1:0",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .rsplit_once("http://")
            .map(|(_, a)| a.to_owned())
            .unwrap_or_else(|| panic!("serve-log printed {line:?}"));
        Server { child, addr }
    }
    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One raw HTTP/1.1 request: (status, headers lower-cased, body).
fn request(addr: &str, method: &str, path: &str) -> (u16, BTreeMap<String, String>, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head");
    let head = text(&raw[..split]);
    let mut lines = head.lines();
    let status: u16 = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    (status, headers, raw[split + 4..].to_vec())
}

fn run_interop(server: &Server, dir: &Path, extra: &[&Path]) -> Output {
    let mut cmd = Command::new(interop_binary());
    cmd.arg("-url")
        .arg(server.url())
        .arg("-log-vkey")
        .arg(dir.join("keys/log.vkey"))
        .arg("-keepers-vkey")
        .arg(dir.join("keys/keepers.vkey"));
    for p in extra {
        let name = p.file_name().unwrap().to_string_lossy();
        let flag = if name.starts_with("consistency") {
            "-consistency"
        } else {
            "-inclusion"
        };
        cmd.arg(flag).arg(p);
    }
    cmd.output().unwrap()
}

/// Flips one bit of `path`'s byte at `at` (from the end when negative), runs `f`,
/// and restores the file.
fn with_flipped<T>(path: &Path, at: isize, f: impl FnOnce() -> T) -> T {
    let original = fs::read(path).unwrap();
    let mut bad = original.clone();
    let i = if at < 0 {
        (bad.len() as isize + at) as usize
    } else {
        at as usize
    };
    bad[i] ^= 1;
    fs::write(path, &bad).unwrap();
    let out = f();
    fs::write(path, &original).unwrap();
    out
}

/// Replaces one base64 character of line `line` (from the end when negative) of a
/// text file — `at` characters into the line's last space-separated field — with
/// another valid one ('A' ↔ 'B'), runs `f`, and restores the file.
fn with_swapped_b64<T>(path: &Path, line: isize, at: usize, f: impl FnOnce() -> T) -> T {
    let original = fs::read_to_string(path).unwrap();
    let mut lines: Vec<String> = original.split('\n').map(str::to_owned).collect();
    // The file ends with '\n': the last element is empty.
    let n = lines.len() as isize - 1;
    let i = if line < 0 { n + line } else { line } as usize;
    let field_start = lines[i].rfind(' ').map_or(0, |p| p + 1);
    let mut chars: Vec<char> = lines[i].chars().collect();
    let pos = lines[i][..field_start].chars().count() + at;
    chars[pos] = if chars[pos] == 'A' { 'B' } else { 'A' };
    lines[i] = chars.into_iter().collect();
    fs::write(path, lines.join("\n")).unwrap();
    let out = f();
    fs::write(path, &original).unwrap();
    out
}

fn tile_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, at: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in fs::read_dir(at).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.insert(rel, fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, &dir.join("tile"), &mut out);
    out.insert(
        "checkpoint".into(),
        fs::read(dir.join("checkpoint")).unwrap(),
    );
    out
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let t = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &t);
        } else {
            fs::copy(&p, &t).unwrap();
        }
    }
}

fn message_ids(dir: &Path) -> Vec<String> {
    let (record, _) = audita_record::read_record(dir).unwrap();
    record
        .epochs
        .iter()
        .flat_map(|e| e.leaves.iter())
        .map(|l| {
            audita_evidence::MessageId::from_leaf_bytes(l)
                .unwrap()
                .to_string()
        })
        .collect()
}

fn checkpoint_sizes(dir: &Path) -> Vec<u64> {
    let (record, _) = audita_record::read_record(dir).unwrap();
    record
        .checkpoints
        .iter()
        .map(|n| {
            audita_evidence::SignedCheckpoint::parse(n)
                .unwrap()
                .checkpoint()
                .size
        })
        .collect()
}

#[test]
fn demo_record_tiles_and_proofs_verify_with_go_and_python_and_tampering_fails_them() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("demo");
    let o = audita(&[
        "demo",
        "--out",
        out.to_str().unwrap(),
        "--cells",
        "64",
        // Small epochs: several checkpoints to prove consistency between on any
        // machine (the default epochs can seal the whole demo in one).
        "--epoch-messages",
        "256",
        "--quiet",
    ]);
    assert!(o.status.success(), "demo: {}", text(&o.stderr));
    let dir = out.join("record");
    let d = dir.to_str().unwrap();

    // The sealer's incremental tiles equal the tiles rebuilt from scratch (plus
    // partials of older checkpoints, which must be prefixes: `audita verify`).
    let copy = tmp.path().join("rebuilt");
    copy_dir(&dir, &copy);
    let size = audita_record::tiles::rebuild(&copy).unwrap();
    let (inc, rebuilt) = (tile_files(&dir), tile_files(&copy));
    for (path, bytes) in &rebuilt {
        assert_eq!(inc.get(path), Some(bytes), "{path}");
    }
    assert!(inc
        .keys()
        .filter(|p| !rebuilt.contains_key(*p))
        .all(|p| p.contains(".p/")));
    let v = audita(&["verify", "--brief", d]);
    assert_eq!(v.status.code(), Some(0), "{}", text(&v.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&v.stdout).unwrap();
    assert_eq!(
        summary["tiles"]["status"], "current",
        "{}",
        summary["tiles"]
    );
    assert_eq!(summary["tiles"]["size"], size);

    // Proofs to check: consistency from every other checkpoint (and 0), inclusion
    // of the first, a middle and the last message.
    let sizes = checkpoint_sizes(&dir);
    assert!(sizes.len() >= 2, "the demo seals several epochs");
    assert!(size > 256, "the demo crosses a tile boundary");
    let proofs = tmp.path().join("proofs");
    fs::create_dir_all(&proofs).unwrap();
    let mut files = Vec::new();
    for old in std::iter::once(0).chain(sizes.iter().copied().step_by(3)) {
        let o = audita(&["proof", "consistency", d, &old.to_string()]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert!(text(&o.stdout).starts_with(&format!("old {old}\n")));
        let f = proofs.join(format!("consistency-{old}.txt"));
        fs::write(&f, &o.stdout).unwrap();
        files.push(f);
    }
    let ids = message_ids(&dir);
    assert_eq!(ids.len() as u64, size);
    let mut json_files = Vec::new();
    for (k, id) in [&ids[0], &ids[ids.len() / 2], &ids[ids.len() - 1]]
        .into_iter()
        .enumerate()
    {
        let o = audita(&["proof", "inclusion", d, id]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert!(text(&o.stdout).starts_with("c2sp.org/tlog-proof@v1\nextra "));
        let f = proofs.join(format!("inclusion-{k}.tlog-proof"));
        fs::write(&f, &o.stdout).unwrap();
        files.push(f);
        let o = audita(&["proof", "inclusion", "--json", d, id]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let f = proofs.join(format!("inclusion-{k}.json"));
        fs::write(&f, &o.stdout).unwrap();
        json_files.push(f);
    }

    let server = Server::start(&dir);
    let refs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let o = run_interop(&server, &dir, &refs);
    assert!(
        o.status.success(),
        "the Go tlog verifier rejected our log: {}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    let said = text(&o.stdout);
    assert!(said.contains(&format!("size {size} verified")), "{said}");
    assert!(said.contains("inclusion of entry 0"), "{said}");

    // Tampering: each must make the Go verifier fail.
    let fails = |what: &str, o: Output| {
        assert!(
            !o.status.success(),
            "{what}: the Go verifier accepted it: {}",
            text(&o.stdout)
        );
        assert!(
            text(&o.stderr).contains("FAIL"),
            "{what}: {}",
            text(&o.stderr)
        );
    };
    fails(
        "a flipped level-0 tile hash",
        with_flipped(&dir.join("tile/0/000"), 100, || {
            run_interop(&server, &dir, &[])
        }),
    );
    fails(
        "a flipped entry byte",
        with_flipped(&dir.join("tile/entries/000"), 5, || {
            run_interop(&server, &dir, &[])
        }),
    );
    // A cosignature's last base64 character before the newline of the last line.
    let cp = dir.join("checkpoint");
    let note = fs::read(&cp).unwrap();
    assert!(
        text(&note).matches('\u{2014}').count() >= 2,
        "log signature and cosignatures"
    );
    // A keeper cosignature's signature bytes (char 20 of the base64: past the key
    // id and timestamp), then the log's own signature (the first signature line).
    fails(
        "a tampered keeper cosignature",
        with_swapped_b64(&cp, -1, 20, || run_interop(&server, &dir, &[])),
    );
    let log_sig_line = text(&note)
        .lines()
        .position(|l| l.starts_with('\u{2014}'))
        .unwrap() as isize;
    fails(
        "a tampered log signature",
        with_swapped_b64(&cp, log_sig_line, 20, || run_interop(&server, &dir, &[])),
    );
    let consistency = files
        .iter()
        .find(|f| {
            let t = fs::read_to_string(f).unwrap();
            t.lines().nth(1).is_some_and(|l| !l.is_empty())
        })
        .expect("a non-empty consistency proof");
    fails(
        "a tampered consistency proof",
        with_swapped_b64(consistency, 1, 0, || {
            run_interop(&server, &dir, &[consistency.as_path()])
        }),
    );
    let inclusion = files
        .iter()
        .find(|f| f.to_string_lossy().ends_with("1.tlog-proof"))
        .unwrap();
    fails(
        "a tampered inclusion proof",
        with_swapped_b64(inclusion, 3, 0, || {
            run_interop(&server, &dir, &[inclusion.as_path()])
        }),
    );
    fails(
        "an inclusion proof of another leaf",
        with_swapped_b64(inclusion, 1, 8, || {
            run_interop(&server, &dir, &[inclusion.as_path()])
        }),
    );
    // Restored: verifies again.
    assert!(run_interop(&server, &dir, &refs).status.success());
    drop(server);

    // The stdlib-only Python verifier.
    let py = Path::new(env!("CARGO_MANIFEST_DIR")).join("../record/interop/verify_inclusion.py");
    let python = |files: &[PathBuf]| {
        Command::new("python3")
            .arg(&py)
            .args(files)
            .output()
            .expect("python3 is required")
    };
    let o = python(&json_files);
    assert!(o.status.success(), "{}{}", text(&o.stdout), text(&o.stderr));
    assert_eq!(text(&o.stdout).matches("inclusion verified").count(), 3);
    for (field, new) in [
        ("proof", None),
        ("index", Some(serde_json::json!(1))),
        ("leaf", Some(serde_json::json!("AAAA"))),
        ("root", Some(serde_json::json!(ids_root_flip()))),
    ] {
        let f = &json_files[1];
        let original = fs::read(f).unwrap();
        let mut doc: serde_json::Value = serde_json::from_slice(&original).unwrap();
        match new {
            Some(v) => doc[field] = v,
            None => {
                let first = doc["proof"][0].as_str().unwrap().to_owned();
                let flipped = match first.strip_prefix('A') {
                    Some(rest) => format!("B{rest}"),
                    None => format!("A{}", &first[1..]),
                };
                doc["proof"][0] = serde_json::json!(flipped);
            }
        }
        fs::write(f, serde_json::to_vec(&doc).unwrap()).unwrap();
        let o = python(std::slice::from_ref(f));
        assert_eq!(
            o.status.code(),
            Some(1),
            "tampered {field}: {}",
            text(&o.stdout)
        );
        fs::write(f, &original).unwrap();
    }
}

/// A root that is not the log's (32 zero bytes, base64).
fn ids_root_flip() -> String {
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=".into()
}

#[test]
fn serve_log_serves_the_tiled_log_and_nothing_else() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("r");
    let o = audita(&["sample-record", dir.to_str().unwrap(), "--messages", "700"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let server = Server::start(&dir);
    let (status, h, body) = request(&server.addr, "GET", "/checkpoint");
    assert_eq!(status, 200);
    assert_eq!(h["content-type"], "text/plain; charset=utf-8");
    assert_eq!(h["cache-control"], "no-cache");
    assert_eq!(body, fs::read(dir.join("checkpoint")).unwrap());
    let (status, h, body) = request(&server.addr, "GET", "/tile/0/000");
    assert_eq!(status, 200);
    assert_eq!(h["content-type"], "application/octet-stream");
    assert!(h["cache-control"].contains("immutable"));
    assert_eq!(body.len(), 8192);
    let (status, _, body) = request(&server.addr, "HEAD", "/tile/0/000");
    assert_eq!((status, body.len()), (200, 0));
    let (status, _, body) = request(&server.addr, "GET", "/tile/1/000.p/2");
    assert_eq!((status, body.len()), (200, 64));
    let (status, _, body) = request(&server.addr, "GET", "/tile/entries/001");
    assert_eq!(status, 200);
    assert_eq!(body, fs::read(dir.join("tile/entries/001")).unwrap());
    for path in [
        "/",
        "/FORMAT",
        "/keys/log.vkey",
        "/tile",
        "/tile/",
        "/tile/0",
        "/tile/0/",
        "/tile/0/000/",
        "/tile/0/0",
        "/tile/00/000",
        "/tile/0/x000/000",
        "/tile/../keys/log.vkey",
        "/tile/0/../../FORMAT",
        "/tile/0/%2e%2e/%2e%2e/FORMAT",
        "/tile/0/000.p",
        "/tile/0/000.p/",
        "/tile/9/000",
        "/tile/entries/../../keys/logs.txt",
        "/checkpoints/checkpoint-000000.txt",
        "/segments/envelopes-000000.seg",
        "//etc/passwd",
        "/tile/0/999",
    ] {
        let (status, _, body) = request(&server.addr, "GET", path);
        assert_eq!(status, 404, "{path}: {}", text(&body));
    }
    let (status, h, _) = request(&server.addr, "POST", "/checkpoint");
    assert_eq!(status, 405);
    assert_eq!(h["allow"], "GET, HEAD");

    // Clients that open a connection and send half a request line never finish it:
    // others are still served at once, and the server closes the stalled
    // connections itself once their headers are overdue (the request time limit).
    let mut stalled: Vec<TcpStream> = (0..32)
        .map(|_| {
            let mut s = TcpStream::connect(&server.addr).unwrap();
            s.write_all(b"GET /tile/0/0").unwrap();
            s
        })
        .collect();
    let t = std::time::Instant::now();
    let (status, _, _) = request(&server.addr, "GET", "/checkpoint");
    assert_eq!(status, 200);
    assert!(
        t.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        t.elapsed()
    );
    for s in &mut stalled {
        s.set_read_timeout(Some(std::time::Duration::from_secs(20)))
            .unwrap();
        let mut buf = Vec::new();
        // EOF (or a reset) within the header timeout, not an answer we waited for.
        let _ = s.read_to_end(&mut buf);
    }
    let closed_after = t.elapsed();
    assert!(
        closed_after < std::time::Duration::from_secs(15),
        "stalled connections closed after {closed_after:?}"
    );
    drop(server);

    // A record without tiles: serve-log refuses it in one line; verify says absent.
    fs::remove_dir_all(dir.join("tile")).unwrap();
    fs::remove_file(dir.join("checkpoint")).unwrap();
    let o = audita(&[
        "serve-log",
        dir.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(text(&o.stderr).lines().count(), 1, "{}", text(&o.stderr));
    let v = audita(&["verify", "--brief", dir.to_str().unwrap()]);
    assert_eq!(v.status.code(), Some(0), "{}", text(&v.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&v.stdout).unwrap();
    assert_eq!(summary["tiles"]["status"], "absent");
}

#[test]
fn verify_reports_a_tampered_tile_and_proof_errors_are_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("r");
    let d = dir.to_str().unwrap();
    assert!(audita(&["sample-record", d, "--messages", "300"])
        .status
        .success());
    let v = with_flipped(&dir.join("tile/0/000"), 7, || {
        audita(&["verify", "--brief", d])
    });
    assert_eq!(v.status.code(), Some(1));
    let summary: serde_json::Value = serde_json::from_slice(&v.stdout).unwrap();
    assert_eq!(summary["tiles"]["status"], "problems");
    assert_eq!(summary["problem_codes"]["tiles"]["tile_mismatch"], 1);
    assert_eq!(summary["tiles"]["problems"][0]["path"], "tile/0/000");
    assert!(text(&v.stderr).contains("tiled log"), "{}", text(&v.stderr));

    let sizes = checkpoint_sizes(&dir);
    let (first, last) = (sizes[0], *sizes.last().unwrap());
    let no_cp = (1..last).find(|s| !sizes.contains(s)).unwrap();
    for (args, want) in [
        (
            vec!["proof", "inclusion", d, &"0".repeat(64)],
            "is not in the log",
        ),
        (
            vec!["proof", "inclusion", d, "not-an-id"],
            "is not author:hex",
        ),
        (
            vec![
                "proof",
                "consistency",
                d,
                &last.to_string(),
                &first.to_string(),
            ],
            "is larger than NEW_SIZE",
        ),
        (
            vec!["proof", "consistency", d, &no_cp.to_string()],
            "no checkpoint of the record has size",
        ),
        (
            vec!["proof", "consistency", d, "0", &no_cp.to_string()],
            "no checkpoint of the record has size",
        ),
        (
            vec!["proof", "consistency", "/nonexistent/dir", "0"],
            "cannot read",
        ),
    ] {
        let o = audita(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let e = text(&o.stderr);
        assert_eq!(e.lines().count(), 1, "{args:?}: {e}");
        assert!(e.contains(want), "{args:?}: {e}");
        assert!(o.stdout.is_empty());
    }
    // Consistency JSON: both checkpoints, and the proof from the record's first.
    let o = audita(&["proof", "consistency", "--json", d, &first.to_string()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["schema"], "audita.proof.consistency/v1");
    assert_eq!(
        (j["old_size"].as_u64(), j["new_size"].as_u64()),
        (Some(first), Some(last))
    );
    assert!(!j["proof"].as_array().unwrap().is_empty());
    assert!(j["old_checkpoint"]
        .as_str()
        .unwrap()
        .contains(&format!("\n{first}\n")));
}
