//! `audita attribute MODEL.json`: graded actual-causality attribution of a structural
//! model in the SPEC §7 interchange format.
//!
//! Prints the attribution JSON on stdout and exits 0. With `--check X1,X2 [--witness
//! W1,W2]` it answers one cause check instead (is `X` a cause, with which smallest
//! witness: the query SAT-based checkers such as HP2SAT answer). Malformed input
//! (unreadable file, bad JSON, unknown identifier, cycle, missing field) prints one line
//! naming the problem and its location on stderr and exits 2; so does a query that hits
//! one of its bounds, naming the bound and the flag that raises it.
//!
//! Every query has a wall-clock deadline (`--timeout-ms`, default 10 s): the engine is a
//! pure library without a clock, so the deadline is checked through the
//! `audita_causal::Deadline` hook it polls. Work budgets are deterministic, so an answer
//! that finishes is the same on every run.
//!
//! A model larger than `--max-input-bytes` (16 MiB by default) is refused with one line
//! (read through the one bounded reader of `crate::inputs`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use audita_causal::{attribute_until, check_cause, AttributeOptions, Model, Path, VarId};

/// Arguments of `audita attribute`.
#[derive(clap::Args, Debug)]
pub struct AttributeArgs {
    /// The model file (SPEC §7 JSON); `-` reads standard input.
    pub model: PathBuf,
    /// Force the general exact search even on monotone models.
    #[arg(long, conflicts_with = "optimise")]
    pub general: bool,
    /// Force the optimisation path (minimal causes in order of grade on a SAT solver).
    #[arg(long)]
    pub optimise: bool,
    /// Do not contract same-author conjunctive groups before grading.
    #[arg(long)]
    pub no_contract: bool,
    /// Pretty-print the output.
    #[arg(long)]
    pub pretty: bool,
    /// Check one set instead of attributing: comma-separated variables, each at its
    /// actual value or written `NAME=true` / `NAME=false`.
    #[arg(long, value_name = "X1,X2")]
    pub check: Option<String>,
    /// With `--check`: also check this witness (comma-separated variables frozen at
    /// their actual values; empty for none).
    #[arg(long, value_name = "W1,W2", requires = "check")]
    pub witness: Option<String>,
    /// Wall-clock deadline of the query in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    pub timeout_ms: u64,
    /// Most minimal causes listed; beyond it the list is shortened (`"causes_complete":
    /// false`) and ρ stays exact.
    #[arg(long)]
    pub max_causes: Option<usize>,
    /// Model evaluations of the general search when `--general` forces it.
    #[arg(long)]
    pub max_evaluations: Option<u64>,
    /// Solver steps of the optimisation path.
    #[arg(long)]
    pub max_solver_steps: Option<u64>,
    /// Memory bound of the engine in MiB (cut-set families, solver encoding).
    #[arg(long)]
    pub max_memory_mb: Option<u64>,
    /// Refuse a model larger than this many bytes (bounded read: `/dev/zero` or an
    /// endless pipe ends here with one line).
    #[arg(long, value_name = "BYTES", default_value_t = audita_record::DEFAULT_INPUT_BYTES)]
    pub max_input_bytes: u64,
}

/// Runs the subcommand; returns the process exit code.
pub fn run(args: &AttributeArgs) -> i32 {
    match attribute_file(args) {
        Ok(json) => {
            println!("{json}");
            0
        }
        Err(line) => {
            eprintln!("error: {line}");
            2
        }
    }
}

fn options(args: &AttributeArgs) -> AttributeOptions {
    let d = AttributeOptions::default();
    AttributeOptions {
        contract: !args.no_contract,
        path: if args.general {
            Path::General
        } else if args.optimise {
            Path::Optimisation
        } else {
            Path::Auto
        },
        max_causes: args.max_causes.unwrap_or(d.max_causes),
        max_evaluations: args.max_evaluations.unwrap_or(d.max_evaluations),
        max_solver_steps: args.max_solver_steps.unwrap_or(d.max_solver_steps),
        max_memory_bytes: args
            .max_memory_mb
            .map_or(d.max_memory_bytes, |mb| mb.saturating_mul(1 << 20)),
        ..d
    }
}

fn attribute_file(args: &AttributeArgs) -> Result<String, String> {
    let shown = if args.model.as_os_str() == "-" {
        "<stdin>".to_string()
    } else {
        args.model.display().to_string()
    };
    let started = Instant::now();
    let limit = Duration::from_millis(args.timeout_ms);
    let deadline = move || started.elapsed() >= limit;
    let text = crate::inputs::read_text(&args.model, args.max_input_bytes)?;
    let model = Model::from_json(&text).map_err(|e| format!("{shown}: {e}"))?;
    let opts = options(args);
    let bound = |e: audita_causal::AttributeError| match e {
        audita_causal::AttributeError::DeadlineExceeded(_) => {
            format!("{shown}: {e} (the deadline was {} ms)", args.timeout_ms)
        }
        e => format!("{shown}: {e}"),
    };
    let value = if let Some(spec) = &args.check {
        let cause = parse_cause(&model, spec).map_err(|e| format!("--check: {e}"))?;
        let witness = match &args.witness {
            Some(w) => Some(parse_names(&model, w).map_err(|e| format!("--witness: {e}"))?),
            None => None,
        };
        let chk =
            check_cause(&model, &cause, witness.as_deref(), &opts, &deadline).map_err(bound)?;
        if args.pretty {
            serde_json::to_string_pretty(&chk)
        } else {
            serde_json::to_string(&chk)
        }
    } else {
        let att = attribute_until(&model, &[], &opts, &deadline).map_err(bound)?;
        if args.pretty {
            serde_json::to_string_pretty(&att)
        } else {
            Ok(att.to_json())
        }
    };
    // Fields serialise in declaration order (the SPEC §7 key order).
    value.map_err(|e| e.to_string())
}

fn lookup(model: &Model, name: &str) -> Result<VarId, String> {
    model
        .var(name)
        .ok_or_else(|| format!("unknown variable `{name}`"))
}

fn parse_names(model: &Model, spec: &str) -> Result<Vec<VarId>, String> {
    spec.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|n| lookup(model, n))
        .collect()
}

fn parse_cause(model: &Model, spec: &str) -> Result<Vec<(VarId, bool)>, String> {
    let actual = model.evaluate(&[]);
    let mut out = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, value) = match item.split_once('=') {
            Some((n, "true")) => (n.trim(), None::<bool>.or(Some(true))),
            Some((n, "false")) => (n.trim(), Some(false)),
            Some((_, v)) => return Err(format!("`{item}`: value `{v}` is not true or false")),
            None => (item, None),
        };
        let id = lookup(model, name)?;
        out.push((id, value.unwrap_or(actual[id.index()])));
    }
    if out.is_empty() {
        return Err("no variable given".into());
    }
    Ok(out)
}
