//! `audita attribute MODEL.json`: graded actual-causality attribution of a structural
//! model in the SPEC §7 interchange format.
//!
//! Prints the attribution JSON on stdout and exits 0. Malformed input (unreadable file,
//! bad JSON, unknown identifier, cycle, missing field) prints one line naming the
//! problem and its location on stderr and exits 2; so does a query that exceeds the
//! engine's limits, and a model larger than `--max-input-bytes` (16 MiB by default;
//! read through the one bounded reader of `crate::inputs`).

use std::path::PathBuf;

use audita_causal::{attribute_with, AttributeOptions, Model, Path};

/// Arguments of `audita attribute`.
#[derive(clap::Args, Debug)]
pub struct AttributeArgs {
    /// The model file (SPEC §7 JSON); `-` reads standard input.
    pub model: PathBuf,
    /// Force the general exact search even on monotone models.
    #[arg(long)]
    pub general: bool,
    /// Do not contract same-author conjunctive groups before grading.
    #[arg(long)]
    pub no_contract: bool,
    /// Pretty-print the output.
    #[arg(long)]
    pub pretty: bool,
    /// Refuse a model larger than this many bytes (bounded read: `/dev/zero` or an
    /// endless pipe ends here with one line).
    #[arg(long, value_name = "BYTES", default_value_t = audita_sealer::disk::DEFAULT_INPUT_BYTES)]
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

fn attribute_file(args: &AttributeArgs) -> Result<String, String> {
    let shown = if args.model.as_os_str() == "-" {
        "<stdin>".to_string()
    } else {
        args.model.display().to_string()
    };
    let text = crate::inputs::read_text(&args.model, args.max_input_bytes)?;
    let model = Model::from_json(&text).map_err(|e| format!("{shown}: {e}"))?;
    let opts = AttributeOptions {
        contract: !args.no_contract,
        path: if args.general {
            Path::General
        } else {
            Path::Auto
        },
        ..AttributeOptions::default()
    };
    let att = attribute_with(&model, &[], &opts).map_err(|e| format!("{shown}: {e}"))?;
    if args.pretty {
        serde_json::to_string_pretty(&att).map_err(|e| e.to_string())
    } else {
        Ok(att.to_json())
    }
}
