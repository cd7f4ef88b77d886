//! `audita-keeper`: a keeper as its own process (the same code `audita keeper
//! serve` runs; the fault tests kill this one with SIGKILL).
//!
//! ```text
//! audita-keeper serve CONFIG.toml [--listen ADDR]    (default 127.0.0.1:7380)
//! audita-keeper generate-key KEY_FILE NAME           (prints the cosignature/v1 vkey)
//! audita-keeper evidence STATE_DIR                   (prints the kept conflicts, JSON)
//! ```
//! `serve` prints `listening <addr>` and `vkey <vkey>` on stdout once it accepts.
//! Fault injection for tests only: `AUDITA_KEEPER_FAULT=<point>:<n>` aborts the
//! process (as `kill -9` would stop it) the n-th time the co-signing path reaches
//! `<point>` (`before-persist`, `after-temp-write`, `after-rename`,
//! `after-persist`).

#![warn(clippy::too_many_lines)]

use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context as _};
use audita_keeper::{FaultHook, FaultPoint, KeeperFile};

fn fault_from_env() -> anyhow::Result<Option<FaultHook>> {
    let Ok(spec) = std::env::var("AUDITA_KEEPER_FAULT") else {
        return Ok(None);
    };
    let (point, n) = spec
        .split_once(':')
        .context("AUDITA_KEEPER_FAULT: want <point>:<n>")?;
    let point = match point {
        "before-persist" => FaultPoint::BeforePersist,
        "after-temp-write" => FaultPoint::AfterTempWrite,
        "after-rename" => FaultPoint::AfterRename,
        "after-persist" => FaultPoint::AfterPersist,
        other => bail!("AUDITA_KEEPER_FAULT: unknown point {other}"),
    };
    let n: u64 = n.parse().context("AUDITA_KEEPER_FAULT: n")?;
    let seen = AtomicU64::new(0);
    Ok(Some(Arc::new(move |p: FaultPoint| {
        if p == point && seen.fetch_add(1, Ordering::SeqCst) + 1 == n {
            std::process::abort();
        }
    })))
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber_init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("serve") => {
            let config_path = args.get(1).context("serve CONFIG.toml [--listen ADDR]")?;
            let listen = match args.get(2).map(String::as_str) {
                Some("--listen") => args.get(3).context("--listen ADDR")?.clone(),
                None => "127.0.0.1:7380".into(),
                Some(other) => bail!("unknown argument {other}"),
            };
            let config = KeeperFile::load(std::path::Path::new(config_path))?;
            let listener = std::net::TcpListener::bind(&listen)
                .with_context(|| format!("binding {listen}"))?;
            let handle = audita_keeper::serve_with(&config, listener, fault_from_env()?)?;
            let mut out = std::io::stdout().lock();
            writeln!(out, "listening {}", handle.addr())?;
            writeln!(out, "vkey {}", handle.vkey())?;
            out.flush()?;
            drop(out);
            handle.wait();
            Ok(())
        }
        Some("generate-key") => {
            let (Some(path), Some(name)) = (args.get(1), args.get(2)) else {
                bail!("generate-key KEY_FILE NAME");
            };
            let vkey = audita_keeper::generate_key(std::path::Path::new(path), name)?;
            println!("{vkey}");
            Ok(())
        }
        Some("evidence") => {
            let dir = args.get(1).context("evidence STATE_DIR")?;
            let records = audita_keeper::evidence(std::path::Path::new(dir))?;
            println!("{}", serde_json::to_string_pretty(&records)?);
            Ok(())
        }
        _ => bail!("usage: audita-keeper serve CONFIG.toml [--listen ADDR] | generate-key KEY_FILE NAME | evidence STATE_DIR"),
    }
}

/// Log lines to stderr, level from `RUST_LOG` (default `warn`).
fn tracing_subscriber_init() {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .try_init();
}
