//! `audita load`, `audita bench …` and `audita bench-pipeline`: the arguments and exit
//! codes of the load and benchmark harness, which lives in `audita_load_tests`
//! beside the fleet it generates.
//!
//! Each command writes its report to stdout; an error is one line on stderr, exit 2.

use std::io::Write as _;

use audita_load_tests::bench_attribution::{self, AttributionArgs};
use audita_load_tests::bench_pipeline::{self, BenchPipelineArgs};
use audita_load_tests::bench_stages::{self, StagesArgs};
use audita_load_tests::kafka_run::{self, LoadArgs};

/// `audita bench …`
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    what: BenchWhat,
}

#[derive(clap::Subcommand, Debug)]
enum BenchWhat {
    /// Attribution accuracy on the facility register (issue 4 item 6).
    Attribution(AttributionArgs),
    /// Per-stage CPU per envelope, each stage alone, next to Ed25519 (issue 16).
    Stages(StagesArgs),
}

/// Exit code of a harness run: 0, or 2 with the error on one line after `what`.
fn exit(what: &str, result: anyhow::Result<()>) -> i32 {
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{what}: {e:#}");
            2
        }
    }
}

/// Runs `audita bench`.
pub fn bench(args: &BenchArgs) -> i32 {
    match &args.what {
        BenchWhat::Stages(a) => exit(
            "audita bench stages",
            bench_stages::run(a, &mut std::io::stdout().lock()),
        ),
        BenchWhat::Attribution(a) => exit(
            "error",
            bench_attribution::attribution(a)
                .and_then(|out| Ok(std::io::stdout().lock().write_all(out.as_bytes())?)),
        ),
    }
}

/// Runs `audita bench-pipeline`.
pub fn bench_pipeline(args: &BenchPipelineArgs) -> i32 {
    exit(
        "audita bench-pipeline",
        bench_pipeline::run(args, &mut std::io::stdout().lock()),
    )
}

/// Runs `audita load` (a measured run, a saved report, or one stage process).
pub fn load(args: &LoadArgs) -> i32 {
    let what = match args.stage {
        Some(s) => format!("audita load --stage {s:?}"),
        None => "audita load".to_string(),
    };
    exit(&what, kafka_run::run(args, &mut std::io::stdout().lock()))
}
