//! `audita verdict RECORD_DIR --duties DUTIES.json --adverse ADVERSE.json`: the graded,
//! evidence-linked verdict of a declared adverse outcome over an on-disk sealed record
//! (schema `audita.verdict/v1`, documented in `verdict/SCHEMA.md`).
//!
//! Verifies the record offline (public keys only; `--trust FILE` pins the log and
//! keeper keys as for `audita verify`), computes the verdict with replay
//! certification on the slice model, and prints it as canonical JSON on stdout
//! (pretty, keys in sorted order: the bytes the pipeline publishes and `audita demo`
//! writes to `DIR/verdicts/<incident>.json`, so a verdict is re-checked by comparing
//! bytes; `--rows`: one JSON row per principal instead; `--frame VICTIM[,PRINCIPAL...]`:
//! the blame-shift certificate of that chain; `--at-root HEX`: the record as it stood
//! at that log root, see `Record::as_of_root`). Exit 0 for a graded verdict over a
//! clean record; 1 when the verdict abstains (a JSON verdict with status `abstained`
//! and the reason in `notes`: too many completions, an engine budget), the record
//! has suspect/missing evidence (named in the JSON) or its keys differ from the
//! pinned ones (named on stderr); 2 with one line on stderr when an input cannot be
//! read, exceeds a size limit (`--max-*`) or is malformed.
//!
//! `--predicates P` makes the declaration checkable: the monitor (`audita-monitor`)
//! re-derives the incident from the certified record and the predicate file, and a
//! declaration whose `t*`, anchors, severity or realisation facts the record does not
//! support — or that names no declarer — is refused (exit 2, one line naming the
//! difference, no verdict). An accepted declaration is judged with the facts the
//! record establishes, and the verdict names the predicate, the declarer and each
//! fact's evidence (`declaration`).

use std::path::PathBuf;

use audita_evidence::{verify_record_with, Policy};
use audita_verdict::{certificate, verdict, Adverse, DutyRegistry, Status, Verdict};
use serde::Serialize;

use crate::inputs::{load_trust, read_text, LimitArgs};

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
    /// Predicate file (JSON, see monitor/README.md): re-derive the declaration from
    /// the record and refuse it unless the record supports it.
    #[arg(long)]
    pub predicates: Option<PathBuf>,
    /// Print one JSON row per (incident, principal) instead of the verdict.
    #[arg(long)]
    pub rows: bool,
    /// Print the blame-shift certificate of this chain (victim first, comma-separated).
    #[arg(long)]
    pub frame: Option<String>,
    /// Trust file pinning the log and keeper keys and the keeper quorum (as for
    /// `audita verify --trust`).
    #[arg(long, value_name = "FILE")]
    pub trust: Option<PathBuf>,
    /// Judge the record as it stood when the epoch with this log root (hex, as in
    /// a verdict's `record_root`) was sealed: how a published verdict is re-checked
    /// on a record that has grown since.
    #[arg(long, value_name = "HEX")]
    pub at_root: Option<String>,
    /// Size limits of the inputs.
    #[command(flatten)]
    pub limits: LimitArgs,
}

fn parse_root(text: &str) -> Result<[u8; 32], String> {
    let bad = || format!("--at-root {text:?} is not a 64-digit hex log root");
    if text.len() != 64 || !text.is_ascii() {
        return Err(bad());
    }
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(out)
}

/// Canonical JSON text: pretty-printed with every object's keys in sorted order, as
/// a `serde_json::Value` prints. The verdict on the bus is such a value, so the
/// pipeline's verdict and this command's print the same bytes.
pub fn canonical_json(v: &impl Serialize) -> Result<String, String> {
    let value = serde_json::to_value(v).map_err(|e| e.to_string())?;
    serde_json::to_string_pretty(&value).map_err(|e| e.to_string())
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
    let dir =
        audita_record::read_dir(&args.dir, &args.limits.record()).map_err(|e| e.to_string())?;
    let max_input = args.limits.max_input_bytes;
    let duties = DutyRegistry::from_json(&read_text(&args.duties, max_input)?)
        .map_err(|e| format!("{}: {e}", args.duties.display()))?;
    let adverse = Adverse::from_json(&read_text(&args.adverse, max_input)?)
        .map_err(|e| format!("{}: {e}", args.adverse.display()))?;
    let mut policy = Policy::default();
    let (keys, trust) = load_trust(args.trust.as_deref(), dir.keys, &mut policy, max_input)?;
    let record = match &args.at_root {
        None => dir.record,
        Some(text) => dir
            .record
            .as_of_root(&parse_root(text)?)
            .ok_or_else(|| format!("no epoch of {} has log root {text}", args.dir.display()))?,
    };
    let partition = verify_record_with(&record, &keys, &policy, dir.payloads.as_ref());
    let adverse = match &args.predicates {
        None => adverse,
        Some(path) => {
            let file = audita_monitor::Predicates::from_json(&read_text(path, max_input)?)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            let derived = audita_monitor::derive(&partition, &file);
            let checked = audita_monitor::check(&adverse.decl, &file, &derived)
                .map_err(|e| format!("{}: {e}", args.adverse.display()))?;
            Adverse::new(checked).map_err(|e| e.to_string())?
        }
    };
    if let Some(line) = trust.failure_line() {
        eprintln!("audita verdict: {line}");
    }
    if let Some(chain) = &args.frame {
        let chain: Vec<&str> = chain.split(',').map(str::trim).collect();
        let cert = certificate(&record, &partition, &duties, &adverse, &chain)
            .map_err(|e| e.to_string())?;
        let text = serde_json::to_string_pretty(&cert).map_err(|e| e.to_string())?;
        println!("{text}");
        return Ok(if trust.problems().is_empty() { 0 } else { 1 });
    }
    let v = match verdict(&record, &partition, &duties, &adverse) {
        Ok(v) => v,
        Err(e) if e.abstains() => {
            eprintln!("audita verdict: abstaining: {e}");
            Verdict::abstained(&partition, &duties, &adverse, &e)
        }
        Err(e) => return Err(e.to_string()),
    };
    if args.rows {
        for row in v.rows() {
            println!(
                "{}",
                serde_json::to_string(&row).map_err(|e| e.to_string())?
            );
        }
    } else {
        println!("{}", canonical_json(&v)?);
    }
    let clean = partition.is_clean() && trust.problems().is_empty() && v.status == Status::Graded;
    Ok(if clean { 0 } else { 1 })
}
