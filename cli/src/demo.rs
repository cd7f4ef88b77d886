//! `audita demo`: the whole pipeline in one process over the embedded bus, on a
//! simulated fleet, with live progress; writes the sealed record, Parquet verdicts and
//! an HTML report per adverse incident, then verifies the record it wrote.

use crate::pipeline::{self, Deployment};
use audita_bus::embedded::EmbeddedBus;
use audita_bus::Bus;
use audita_sinks::metrics::Metrics;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// Arguments of `audita demo`.
#[derive(Args)]
pub struct DemoArgs {
    /// Output directory (record/, verdicts/{incidents,findings}/, reports/, rows.json).
    #[arg(long, default_value = "audita-demo")]
    pub out: PathBuf,
    /// Facility cells (each a scenario of the mix: robots, humans, principals).
    #[arg(long, default_value_t = 64)]
    pub cells: usize,
    /// Fleet seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Engine workers.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// No progress bar (for logs and tests).
    #[arg(long)]
    pub quiet: bool,
    /// Wall-clock instant (RFC 3339, UTC) of record time 0 (default: now).
    #[arg(long)]
    pub record_origin: Option<String>,
    /// Largest slice (bytes) the slicer publishes; larger slices become abstentions
    /// (default: the bus record limit, 16 MiB).
    #[arg(long)]
    pub max_slice_bytes: Option<usize>,
}

pub fn run(args: &DemoArgs) -> i32 {
    match demo(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("audita demo: {e:#}");
            2
        }
    }
}

fn demo(args: &DemoArgs) -> anyhow::Result<i32> {
    let started = Instant::now();
    if args.out.join("record").exists() {
        std::fs::remove_dir_all(args.out.join("record"))?;
    }
    if args.out.join("verdicts").exists() {
        std::fs::remove_dir_all(args.out.join("verdicts"))?;
    }
    // Verdicts journaled over an earlier run's record would be taken again.
    if args.out.join("journal.jsonl").exists() {
        std::fs::remove_file(args.out.join("journal.jsonl"))?;
    }
    if args.out.join("reports").exists() {
        std::fs::remove_dir_all(args.out.join("reports"))?;
    }
    std::fs::create_dir_all(args.out.join("reports"))?;
    // The fleet's record time starts now (or at the declared origin).
    let origin =
        audita_sinks::tables::RecordOrigin::parse(args.record_origin.as_deref().unwrap_or("now"))
            .map_err(|e| anyhow::anyhow!("--record-origin: {e}"))?;
    audita_sinks::tables::RecordOrigin::resolve(&args.out.join("verdicts"), Some(origin))?;
    let mut d = Deployment::new(args.cells, args.seed, "")?;
    if let Some(n) = args.max_slice_bytes {
        d.max_slice_bytes = n;
    }
    let d = Arc::new(d);
    let total = d.fleet.messages() as u64;
    let bar = if args.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(total)
    };
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} {elapsed_precise} [{bar:40}] {pos}/{len} messages · {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let bus = Bus::Embedded(EmbeddedBus::new(4).with_pending_limit(50_000));
    let metrics = Metrics::new();
    let mut verdicts = 0usize;
    let expect = d.incidents();
    let collected = pipeline::run_all(
        d.clone(),
        &bus,
        &args.out,
        args.workers,
        &metrics,
        |n| {
            if n % 64 == 0 || n as u64 == total {
                bar.set_position(n as u64);
            }
        },
        |_| {
            verdicts += 1;
            bar.set_message(format!("{verdicts}/{expect} verdicts"));
        },
    )?;
    bar.finish_and_clear();
    let rows = pipeline::rows(&collected);
    std::fs::write(
        args.out.join("rows.json"),
        serde_json::to_vec_pretty(&rows)?,
    )?;
    std::fs::write(args.out.join("duties.json"), &d.fleet.duties_json)?;
    // The planted causal profile of every incident (for checking, never read by the pipeline).
    let planted = d.fleet.planted();
    std::fs::write(
        args.out.join("planted.json"),
        serde_json::to_vec_pretty(&planted)?,
    )?;
    let (record, keys) = audita_sealer::disk::read_record(&args.out.join("record"))?;
    let partition = audita_evidence::verify_record(&record, &keys);
    let culpable: Vec<String> = rows
        .iter()
        .filter(|r| r.culpable)
        .map(|r| format!("{} in {}", r.principal, r.incident))
        .collect();
    println!(
        "audita demo: {} cells, {} messages sealed in {} epochs, record {}",
        args.cells,
        partition.certified.len(),
        partition.epochs.len(),
        if partition.is_clean() {
            "verifies clean"
        } else {
            "has problems (run audita verify)"
        }
    );
    println!("  {} adverse incidents → {} verdicts ({} abstained), {} verdict rows in {} Parquet file(s)", expect, collected.verdicts.len(), collected.abstained.len(), rows.len(), collected.files.len());
    for (incident, reason) in collected.abstained.iter().take(4) {
        println!("    abstained: {incident}: {reason}");
    }
    println!("  culpable findings: {}", culpable.len());
    for c in culpable.iter().take(8) {
        println!("    {c}");
    }
    println!(
        "  reports: {}/reports/index.html · tables: {}/verdicts/{{incidents,findings}} (audita query) · record: {}/record (audita verify) · {:.1}s",
        args.out.display(),
        args.out.display(),
        args.out.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(
        if partition.is_clean() && collected.verdicts.len() + collected.abstained.len() == expect {
            0
        } else {
            1
        },
    )
}
