//! `audita`: the command line of the audit layer.
//!
//! Exit codes follow one rule across subcommands: 0 for a clean result, 1 for a
//! result that names problems (suspect or missing evidence, a broken seal), 2 when
//! the input cannot be read at all.

#![warn(clippy::too_many_lines)]

use clap::{Parser, Subcommand};

/// mimalloc, not glibc's malloc: the stages allocate per envelope (decoding,
/// indexes), and glibc's allocator was a fifth of the slicer's CPU profile and
/// kept its resident memory growing after the horizon filled (BENCHMARKS.md,
/// "The warehouse in real time").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod attribute;
mod bridge;
mod demo;
mod deployment;
mod export;
mod inputs;
mod keeper;
mod keeper_evidence;
mod proof;
mod query;
mod sample_record;
mod serve_log;
mod stage;
mod tail;
mod trace;
mod verdict;
mod verify;

#[derive(Parser)]
#[command(
    name = "audita",
    version,
    about = "Certified auditing and causal attribution for multi-agent fleets"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The main job: the whole pipeline over the embedded bus on a simulated fleet.
    Demo(demo::DemoArgs),
    /// Create a new deployment (fresh keys, empty registries).
    Init(deployment::InitArgs),
    /// Register, rotate or revoke a principal's key in a deployment.
    Principal(deployment::PrincipalArgs),
    /// The simulated fleet as a client of a deployment (`fleet register`).
    Fleet(deployment::FleetArgs),
    /// A keeper as an independent C2SP tlog-witness service (serve, generate-key,
    /// evidence).
    Keeper(keeper::KeeperArgs),
    /// Run one pipeline stage as its own process over Apache Kafka.
    Stage(audita_pipeline::process::StageArgs),
    /// Publish the simulated fleet's commands to Apache Kafka.
    Feed(stage::FeedArgs),
    /// Graded actual-causality attribution of a structural model (SPEC §7 JSON).
    Attribute(attribute::AttributeArgs),
    /// Verify an on-disk sealed record offline (public keys only); JSON summary.
    Verify(verify::VerifyArgs),
    /// Graded, evidence-linked verdict of a declared adverse outcome over a record.
    Verdict(verdict::VerdictArgs),
    /// SQL over the verdict tables (incidents, findings) with Apache DataFusion.
    Query(query::QueryArgs),
    /// RFC 9162 inclusion and consistency proofs over a record, with their checkpoint.
    Proof(proof::ProofArgs),
    /// Serve a record's tiled log (c2sp.org/tlog-tiles) over HTTP.
    ServeLog(serve_log::ServeLogArgs),
    /// Write a small signed, sealed sample fleet record.
    SampleRecord(sample_record::SampleRecordArgs),
    /// Export a record's evidence in a standard form (`export dsse`: DSSE JSON
    /// envelopes for off-the-shelf verifiers).
    Export(export::ExportArgs),
    /// Agent execution traces: OTLP import, the causal-witness test, an OTLP/HTTP
    /// receiver, and static-log attribution on Who&When.
    Trace(trace::TraceArgs),
    /// Record a fleet protocol as signed evidence (`bridge vda5050`: one sidecar of
    /// a VDA 5050 fleet over MQTT).
    Bridge(bridge::BridgeArgs),
    /// Print a deployment's alerts, quarantined input, declarations or verdicts as
    /// JSON lines.
    Tail(tail::TailArgs),
    /// Create a deployment's topics (what every stage does at start).
    Topics(tail::TopicsArgs),
}

fn main() {
    // Like other Unix tools, end quietly when stdout is a closed pipe
    // (`audita verify DIR | head`) instead of panicking on the failed write.
    // SAFETY: called first thing, before any other thread exists; SIG_DFL is a
    // valid disposition for SIGPIPE.
    #[allow(unsafe_code)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // Structured logs to stderr; level from RUST_LOG (default: warnings and errors).
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
        Command::Demo(args) => demo::run(args),
        Command::Stage(args) => stage::run_stage(args),
        Command::Tail(args) => tail::run(args),
        Command::Topics(args) => tail::run_topics(args),
        Command::Keeper(args) => keeper::run(args),
        Command::Feed(args) => stage::run_feed(args),
        Command::Init(args) => deployment::run_init(args),
        Command::Principal(args) => deployment::run_principal(args),
        Command::Fleet(args) => deployment::run_fleet(args),
        Command::Attribute(args) => attribute::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Verdict(args) => verdict::run(args),
        Command::SampleRecord(args) => sample_record::run(args),
        Command::Query(args) => query::run(args),
        Command::Proof(args) => proof::run(args),
        Command::ServeLog(args) => serve_log::run(args),
        Command::Export(args) => export::run(args),
        Command::Trace(args) => trace::run(args),
        Command::Bridge(args) => bridge::run(args),
    };
    std::process::exit(code);
}
