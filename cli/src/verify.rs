//! `audita verify DIR`: offline verification of an on-disk sealed record with
//! public keys only.
//!
//! Prints a JSON summary on stdout; exit 0 when everything certifies; 1 when
//! anything is suspect or missing, a seal, receipt, checkpoint or payload is broken,
//! or (with `--trust`) the record's keys differ from the pinned ones (a one-line
//! summary of what failed goes to stderr); 2 with one line on stderr when an input
//! cannot be read at all or exceeds a size limit (`--max-*`, see `audita_record::Limits`).
//!
//! The summary is `audita_record::report`'s (schema `audita.verify/v1`: counts,
//! problem codes, capped lists, trust, registries, payload statuses, tiles); this
//! module reads the inputs, verifies, and adds what needs more than the record:
//! - `keeper_evidence` (only with `--keeper-evidence`) judges the conflicting
//!   checkpoints keepers refused against the record (statuses in
//!   `keeper_evidence.rs`): a `fork` or a log-signed checkpoint `beyond_record` is a
//!   problem (exit 1); evidence that does not check is reported as `invalid` and
//!   proves nothing against the log.

use std::path::PathBuf;

use audita_evidence::{verify_record_with, Policy};
use audita_record::report;
use serde_json::json;

use crate::inputs::{read_input, read_text, LimitArgs};

/// Arguments of `audita verify`.
#[derive(clap::Args, Debug)]
pub struct VerifyArgs {
    /// Record directory (format `audita-record v1`).
    pub dir: PathBuf,
    /// Verify envelope signatures with one Ed25519 batch first (strict single
    /// verification is the default).
    #[arg(long)]
    pub batch: bool,
    /// Threads for signature checks (default: available parallelism).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Omit the list of certified messages (counts only) for large records.
    #[arg(long)]
    pub brief: bool,
    /// A checkpoint note held outside the record (a keeper's latest copy); the
    /// record must reproduce it, which detects a record cut short (repeatable).
    #[arg(long = "checkpoint", value_name = "NOTE")]
    pub checkpoints: Vec<PathBuf>,
    /// Trust file pinning the log and keeper keys (C2SP vkeys) and the keeper
    /// quorum, instead of the record's own keys/ (format in README).
    #[arg(long, value_name = "FILE")]
    pub trust: Option<PathBuf>,
    /// Equivocation evidence kept by a keeper (`audita.keeper-evidence/v1`: a file
    /// of one record or of the array `audita keeper evidence` prints, or the
    /// keeper's state directory), judged against this record (repeatable).
    #[arg(long = "keeper-evidence", value_name = "PATH")]
    pub keeper_evidence: Vec<PathBuf>,
    /// At most this many entries per list in the summary (counts stay complete).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub max_list: usize,
    /// Size limits of the inputs.
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// Runs the subcommand; returns the exit code.
pub fn run(args: &VerifyArgs) -> i32 {
    match run_inner(args) {
        Ok(code) => code,
        Err(line) => {
            eprintln!("audita verify: {line}");
            2
        }
    }
}

fn run_inner(args: &VerifyArgs) -> Result<i32, String> {
    let dir =
        audita_record::read_dir(&args.dir, &args.limits.record()).map_err(|e| e.to_string())?;
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let mut held = Vec::new();
    for path in &args.checkpoints {
        held.push(read_input(path, args.limits.max_input_bytes)?);
    }
    let mut policy = Policy {
        batch_signatures: args.batch,
        threads,
        held_checkpoints: held,
        ..Policy::default()
    };
    // Every input is read here, before any library call: the verification below
    // never comes back to the command line.
    let trust_text = match &args.trust {
        Some(file) => Some((file, read_text(file, args.limits.max_input_bytes)?)),
        None => None,
    };
    let found = crate::keeper_evidence::read(&args.keeper_evidence, args.limits.max_input_bytes)?;
    let tiles = audita_record::tiles::check_tiles(&args.dir, &dir.record, &dir.keys);
    let (keys, trust) = match trust_text {
        Some((file, text)) => report::Trust::pinned(file, &text, &dir.keys, &mut policy)?,
        None => (dir.keys, report::Trust::Record),
    };
    let partition = verify_record_with(&dir.record, &keys, &policy, dir.payloads.as_ref());
    let evidence = audita_keeper::judge::judge(found, &dir.record, &keys);
    let options = report::Options {
        brief: args.brief,
        max_list: args.max_list,
    };
    let mut summary = report::summary(&args.dir, &partition, &trust, &tiles, options);
    if !args.keeper_evidence.is_empty() {
        summary["keeper_evidence"] = audita_keeper::judge::summary(&evidence, args.max_list);
        if evidence.iter().any(|j| j.is_problem()) {
            summary["clean"] = json!(false);
        }
    }
    println!(
        "{}",
        serde_json::to_string_pretty(&summary).unwrap_or_else(|_| "{}".into())
    );
    let mut failures: Vec<String> = Vec::new();
    if !partition.is_clean() {
        failures.push(report::failure_line(&partition));
    }
    failures.extend(trust.failure_line());
    if !tiles.problems.is_empty() {
        failures.push(format!(
            "{} problem(s) in the tiled log",
            tiles.problems.len()
        ));
    }
    failures.extend(audita_keeper::judge::failure_line(&evidence));
    if failures.is_empty() {
        Ok(0)
    } else {
        eprintln!("audita verify: {}", failures.join("; "));
        Ok(1)
    }
}
