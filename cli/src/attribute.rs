//! `audita attribute MODEL.json`: graded actual-causality attribution of a structural
//! model in the SPEC §7 interchange format.
//!
//! Prints the attribution JSON on stdout and exits 0. Malformed input (unreadable file,
//! bad JSON, unknown identifier, cycle, missing field) prints one line naming the
//! problem and its location on stderr and exits 2; so does a query that exceeds the
//! engine's limits.

use std::io::Read;
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
    let mut shown = args.model.display().to_string();
    let text = if shown == "-" {
        shown = "<stdin>".into();
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| format!("{shown}: cannot read: {e}"))?;
        s
    } else {
        std::fs::read_to_string(&args.model).map_err(|e| format!("{shown}: cannot read: {e}"))?
    };
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
