//! `audita-load`: the load generator and the benchmark harness as a binary of their
//! own, so the `audita` binary and the image operators run link neither the harness
//! nor the baselines (`pipeline/tests/layout.rs` checks it).
//!
//! ```text
//! audita-load load …              sustained fleet load over Kafka, every stage its own
//!                                 process (a fault run with --nemesis); BENCHMARKS.md
//! audita-load bench attribution … attribution accuracy on the facility register
//! audita-load bench stages …      per-stage CPU per envelope next to Ed25519
//! audita-load bench whowhen DIR   the Who&When benchmark, attributor and floors
//! audita-load bench-pipeline …    the embedded pipeline benchmark
//! ```
//!
//! Each command writes its report to stdout; an error is one line on stderr, exit 2.

#![warn(clippy::too_many_lines)]

use std::io::Write as _;
use std::path::{Path, PathBuf};

use audita_load_tests::bench_attribution::{self, AttributionArgs};
use audita_load_tests::bench_pipeline::{self, BenchPipelineArgs};
use audita_load_tests::bench_stages::{self, StagesArgs};
use audita_load_tests::kafka_run::{self, LoadArgs};
use clap::{Parser, Subcommand};

/// The same allocator as the `audita` binary, so a stage process of a load run
/// allocates as the deployed stage does.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "audita-load",
    version,
    about = "Audita's load generator and benchmark harness"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Sustained fleet load over Kafka, every stage its own process: msg/s vs the
    /// Ed25519 limit, adverse-to-verdict latency, RSS of each stage over time; with
    /// `--nemesis`, faults while the load is offered and the run's history checked.
    Load(Box<LoadArgs>),
    /// Evaluation benchmarks.
    Bench(BenchArgs),
    /// Pipeline benchmark: end-to-end msg/s vs the Ed25519 limit, verdict latency, memory.
    BenchPipeline(BenchPipelineArgs),
}

/// `audita-load bench …`
#[derive(clap::Args, Debug)]
struct BenchArgs {
    #[command(subcommand)]
    what: BenchWhat,
}

#[derive(clap::Subcommand, Debug)]
enum BenchWhat {
    /// Attribution accuracy on the facility register (issue 4 item 6).
    Attribution(AttributionArgs),
    /// Per-stage CPU per envelope, each stage alone, next to Ed25519 (issue 16).
    Stages(StagesArgs),
    /// The Who&When benchmark: the static attributor and the label-free floors (and
    /// the LLM judges with `AUDITA_JUDGE_ENDPOINT`) on every subset in DIR.
    Whowhen(WhoWhenArgs),
}

#[derive(clap::Args, Debug)]
struct WhoWhenArgs {
    /// Directory of Who&When logs (`1.json` …), or holding the subset directories
    /// `Algorithm-Generated/` and `Hand-Crafted/`.
    dir: PathBuf,
}

/// Exit code of a harness run: 0, or 2 with the error on one line after `what`.
fn exit(what: &str, result: anyhow::Result<()>) -> i32 {
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{what}: {}", one_line(&e));
            2
        }
    }
}

/// The error and its causes on one line, each cause once: an error that already
/// prints its source (`sink: {0}`) is not followed by it again.
fn one_line(e: &anyhow::Error) -> String {
    let mut line = e.to_string();
    for cause in e.chain().skip(1) {
        let text = cause.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
    }
    line
}

/// A Who&When log read with a size limit (one line naming the file on failure).
fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, String> {
    audita_record::read_bounded(path, limit, audita_record::Limit::InputBytes).map_err(
        |e| match e {
            audita_record::ReadError::Io { path, source } => {
                format!("{}: cannot read: {source}", path.display())
            }
            e => e.to_string(),
        },
    )
}

fn bench(args: &BenchArgs) -> i32 {
    let mut out = std::io::stdout().lock();
    match &args.what {
        BenchWhat::Stages(a) => exit("audita-load bench stages", bench_stages::run(a, &mut out)),
        BenchWhat::Attribution(a) => exit(
            "audita-load bench attribution",
            bench_attribution::attribution(a).and_then(|r| Ok(out.write_all(r.as_bytes())?)),
        ),
        BenchWhat::Whowhen(a) => exit(
            "audita-load bench whowhen",
            audita_load_tests::bench_whowhen::run(&a.dir, &read_bounded)
                .map_err(anyhow::Error::msg)
                .and_then(|v| Ok(writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?)),
        ),
    }
}

fn main() {
    // End quietly when stdout is a closed pipe (`audita-load load … | head`).
    // SAFETY: called first thing, before any other thread exists; SIG_DFL is a
    // valid disposition for SIGPIPE.
    #[allow(unsafe_code)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // Structured logs to stderr (a load run keeps each stage's), level from RUST_LOG.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        // Colour only on a terminal: a stage's log file (or a collector) gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .init();
    let cli = Cli::parse();
    let code = match &cli.command {
        Command::Load(args) => {
            let what = match args.stage {
                Some(s) => format!("audita-load load --stage {s:?}"),
                None => "audita-load load".to_string(),
            };
            exit(&what, kafka_run::run(args, &mut std::io::stdout().lock()))
        }
        Command::Bench(args) => bench(args),
        Command::BenchPipeline(args) => exit(
            "audita-load bench-pipeline",
            bench_pipeline::run(args, &mut std::io::stdout().lock()),
        ),
    };
    std::process::exit(code);
}
