//! `audita verdict RECORD_DIR --duties DUTIES.json --adverse ADVERSE.json`: the graded,
//! evidence-linked verdict of a declared adverse outcome over an on-disk sealed record
//! (schema `audita.verdict/v1`, documented in `verdict/SCHEMA.md`).
//!
//! Verifies the record offline (public keys only), computes the verdict with replay
//! certification on the slice model, and prints it as JSON on stdout (`--rows`: one
//! JSON row per principal instead; `--frame VICTIM[,PRINCIPAL...]`: the blame-shift
//! certificate of that chain). Exit 0 for a graded verdict over a clean record; 1 when
//! the verdict abstains or the record has suspect/missing evidence (named in the JSON);
//! 2 with one line on stderr when an input cannot be read or is malformed.

use std::path::PathBuf;

use audita_evidence::{verify_record_with, Policy};
use audita_verdict::{certificate, verdict, Adverse, DutyRegistry, Status};

/// Arguments of `audita verdict`.
#[derive(clap::Args, Debug)]
pub struct VerdictArgs {
    /// Record directory (format `audita-record v1`).
    pub dir: PathBuf,
    /// Duty registry (JSON, see verdict/SCHEMA.md).
    #[arg(long)]
    pub duties: PathBuf,
    /// Adverse predicate declaration (JSON, see verdict/SCHEMA.md).
    #[arg(long)]
    pub adverse: PathBuf,
    /// Print one JSON row per (incident, principal) instead of the verdict.
    #[arg(long)]
    pub rows: bool,
    /// Print the blame-shift certificate of this chain (victim first, comma-separated).
    #[arg(long)]
    pub frame: Option<String>,
}

fn read(path: &PathBuf) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Runs the subcommand; returns the exit code.
pub fn run(args: &VerdictArgs) -> i32 {
    match run_inner(args) {
        Ok(code) => code,
        Err(line) => {
            eprintln!("audita verdict: {line}");
            2
        }
    }
}

fn run_inner(args: &VerdictArgs) -> Result<i32, String> {
    let (record, keys) = audita_sealer::disk::read_record(&args.dir).map_err(|e| e.to_string())?;
    let store = audita_sealer::disk::read_payloads(&args.dir).map_err(|e| e.to_string())?;
    let duties = DutyRegistry::from_json(&read(&args.duties)?)
        .map_err(|e| format!("{}: {e}", args.duties.display()))?;
    let adverse = Adverse::from_json(&read(&args.adverse)?)
        .map_err(|e| format!("{}: {e}", args.adverse.display()))?;
    let partition = verify_record_with(&record, &keys, &Policy::default(), store.as_ref());
    if let Some(chain) = &args.frame {
        let chain: Vec<&str> = chain.split(',').map(str::trim).collect();
        let cert = certificate(&record, &partition, &duties, &adverse, &chain)
            .map_err(|e| e.to_string())?;
        let text = serde_json::to_string_pretty(&cert).map_err(|e| e.to_string())?;
        println!("{text}");
        return Ok(0);
    }
    let v = verdict(&record, &partition, &duties, &adverse).map_err(|e| e.to_string())?;
    if args.rows {
        for row in v.rows() {
            println!(
                "{}",
                serde_json::to_string(&row).map_err(|e| e.to_string())?
            );
        }
    } else {
        println!("{}", v.to_json());
    }
    let clean = partition.is_clean() && v.status == Status::Graded;
    Ok(if clean { 0 } else { 1 })
}
