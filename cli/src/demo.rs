//! `audita demo`: the whole pipeline in one process over the embedded bus, on a
//! simulated fleet, with live progress; writes the sealed record, Parquet verdicts and
//! an HTML report per adverse incident, then verifies the record it wrote.
//!
//! Design constraints:
//! - The output directory starts empty: a directory holding anything refuses the run
//!   (an earlier run's record and sink journal would otherwise be replayed as this
//!   run's), unless `--force`, which first removes what an earlier demo wrote there
//!   and still refuses if anything else is present.
//! - Every verdict is re-checkable offline: next to the record and `duties.json`
//!   the demo writes the predicate file it monitored (`predicates.json`), each
//!   incident's adverse declaration as the monitor derived it from the record
//!   (`adverse/<incident>.json`: `t*`, anchors, severity, realisation facts with their
//!   evidence) and the verdict the pipeline published (`verdicts/<incident>.json`,
//!   canonical JSON), so `audita verdict DIR/record --duties DIR/duties.json --adverse
//!   DIR/adverse/<incident>.json --predicates DIR/predicates.json` re-derives the
//!   declaration, checks it and prints the same bytes.
//! - The keepers are independent services (`DIR/keepers/keeper-N/`: own key, own
//!   state), run in this process over loopback HTTP with the code of `audita keeper
//!   serve`; the sealer reaches them as a tlog-witness client, so the demo's record
//!   is co-signed exactly like a deployment's.

use audita_bus::embedded::EmbeddedBus;
use audita_bus::Bus;
use audita_deploy::Config;
use audita_evidence::Partition;
use audita_fleet::client;
use audita_fleet::fleet::Fleet;
use audita_pipeline::metrics::Metrics;
use audita_pipeline::{Collected, Deployment};
use audita_sinks::VerdictRow;
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
    /// Replace the output of an earlier demo in `--out` (only what a demo writes is
    /// removed; anything else in the directory still refuses the run).
    #[arg(long)]
    pub force: bool,
    /// TESTS ONLY: derive every key of the throw-away deployment from `--seed` (a
    /// public value), for runs that must reproduce each other bitwise. By default
    /// every key is fresh and the log's origin names this run alone.
    #[arg(long)]
    pub insecure_demo_keys: bool,
    /// Wall-clock instant (RFC 3339, UTC) of record time 0 (default: the whole second
    /// that puts the fleet's last message at the present, so no incident is dated in
    /// the future).
    #[arg(long)]
    pub record_origin: Option<String>,
    /// Largest slice (bytes) the slicer publishes; larger slices become abstentions
    /// (default: the bus record limit, 16 MiB).
    #[arg(long)]
    pub max_slice_bytes: Option<usize>,
    /// Messages (and receipts) after which the sealer closes an epoch (default: the
    /// deployment's `epoch.max_messages`). Smaller epochs give a record more roots.
    #[arg(long)]
    pub epoch_messages: Option<usize>,
    /// TESTS ONLY: offer the fleet's messages at this rate (per second) instead of at
    /// once, so slices are cut while later epochs are still sealed (verdicts judged at
    /// several record roots, whatever the machine's speed).
    #[arg(long, hide = true)]
    pub publish_rate: Option<f64>,
}

/// The demo's keepers before they serve: a key file, a state directory and a bound
/// loopback listener each.
struct DemoKeepers {
    keepers: Vec<(String, PathBuf, PathBuf, std::net::TcpListener, String)>,
}

impl DemoKeepers {
    /// Fresh keys (OS randomness) and listeners for [`client::DEMO_KEEPERS`].
    fn bind(dir: &std::path::Path) -> anyhow::Result<DemoKeepers> {
        let mut keepers = Vec::new();
        for (i, name) in client::DEMO_KEEPERS.iter().enumerate() {
            let home = dir.join(format!("keeper-{i}"));
            std::fs::create_dir_all(&home)?;
            let key_file = home.join("keeper.key");
            let vkey = audita_keeper::generate_key(&key_file, name)?;
            let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
            keepers.push((
                name.to_string(),
                key_file,
                home.join("state"),
                listener,
                vkey,
            ));
        }
        Ok(DemoKeepers { keepers })
    }

    /// (name, vkey, URL) of each, for the deployment's `[[witness.keepers]]`.
    fn listed(&self) -> Vec<(String, String, String)> {
        self.keepers
            .iter()
            .map(|(name, _, _, l, vkey)| {
                let url = l
                    .local_addr()
                    .map(|a| format!("http://{a}"))
                    .unwrap_or_default();
                (name.clone(), vkey.clone(), url)
            })
            .collect()
    }

    /// Serves each, following the deployment's log.
    fn start(
        self,
        cfg: &audita_deploy::Config,
    ) -> anyhow::Result<Vec<audita_keeper::KeeperHandle>> {
        let log = cfg
            .keys()?
            .log(&cfg.origin)
            .copied()
            .ok_or_else(|| anyhow::anyhow!("the demo deployment has no log key"))?;
        let log_vkey = audita_keeper::log_vkey(&cfg.origin, &log);
        let mut handles = Vec::new();
        for (name, key_file, state, listener, _) in self.keepers {
            let key = audita_keeper::load_key(&key_file, &name)?;
            let config = audita_keeper::KeeperConfig::new(
                &name,
                key,
                std::slice::from_ref(&log_vkey),
                &state,
            )?;
            handles.push(audita_keeper::serve(&config, listener)?);
        }
        Ok(handles)
    }
}

/// What `audita demo` writes into its output directory.
const OUTPUTS: [&str; 11] = [
    "deployment",
    "keepers",
    "record",
    "verdicts",
    "reports",
    "adverse",
    "journal.jsonl",
    "rows.json",
    "duties.json",
    "predicates.json",
    "planted.json",
];

/// Makes `out` an empty directory: refuses a non-empty one unless `force`, and even
/// then removes only what a demo writes.
fn prepare(out: &std::path::Path, force: bool) -> anyhow::Result<()> {
    let entries: Vec<String> = match std::fs::read_dir(out) {
        Ok(rd) => rd
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect::<Result<_, _>>()?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => anyhow::bail!("cannot read {}: {e}", out.display()),
    };
    if !entries.is_empty() && !force {
        anyhow::bail!(
            "{} is not empty (an earlier run's record and journal would be replayed as this run's): pass --force to replace an earlier demo's output, or choose another --out",
            out.display()
        );
    }
    if let Some(other) = entries.iter().find(|e| !OUTPUTS.contains(&e.as_str())) {
        anyhow::bail!(
            "{} holds {other:?}, which audita demo does not write: refusing to clear it",
            out.display()
        );
    }
    for e in &entries {
        let p = out.join(e);
        if p.is_dir() {
            std::fs::remove_dir_all(&p)?;
        } else {
            std::fs::remove_file(&p)?;
        }
    }
    Ok(())
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
    prepare(&args.out, args.force)?;
    std::fs::create_dir_all(args.out.join("reports"))?;
    // A throw-away deployment the simulated fleet is a client of: fresh keys (one
    // file per principal), a per-run origin, the fleet registered through the same
    // code as `audita principal add`.
    let shape = client::Shape {
        cells: args.cells,
        seed: args.seed,
    };
    // The keepers: separate services with their own keys and state (in this process,
    // over loopback HTTP: the code of `audita keeper serve`); the deployment knows
    // only their published verifier keys and URLs.
    let keepers = DemoKeepers::bind(&args.out.join("keepers"))?;
    let cfg = client::demo_deployment(
        &args.out.join("deployment"),
        &shape,
        args.insecure_demo_keys.then_some(args.seed),
        &keepers.listed(),
    )?;
    let keepers = keepers.start(&cfg)?;
    let fleet = client::fleet_of(&cfg, &shape)?;
    audita_sinks::tables::RecordOrigin::resolve(
        &args.out.join("verdicts"),
        Some(record_origin(args, &fleet, audita_deploy::now_ms())?),
    )?;
    let d = Arc::new(deployment(args, &cfg, &fleet)?);
    let collected = run_fleet(args, &d, &fleet)?;
    for k in keepers {
        k.shutdown();
    }
    let rows = collected.rows();
    write_outputs(args, &fleet, &collected, &rows)?;
    let partition = verify_written(args)?;
    print_summary(args, &fleet, &collected, &rows, &partition, started);
    Ok(
        if partition.is_clean()
            && collected.verdicts.len() + collected.abstained.len() == fleet.incidents()
        {
            0
        } else {
            1
        },
    )
}

/// The wall-clock instant of record time 0: the declared one, or by default the
/// whole second that makes the fleet's last message the present (`now_ms`) or just
/// before it — the simulated record is history, never dated in the future (its
/// cells lie 10,000 s of record time apart, days for a large fleet).
fn record_origin(
    args: &DemoArgs,
    fleet: &Fleet,
    now_ms: u64,
) -> anyhow::Result<audita_sinks::tables::RecordOrigin> {
    if let Some(text) = &args.record_origin {
        return audita_sinks::tables::RecordOrigin::parse(text)
            .map_err(|e| anyhow::anyhow!("--record-origin: {e}"));
    }
    let last = fleet
        .cells
        .iter()
        .flat_map(|c| &c.envelopes)
        .map(|e| e.envelope().timestamp)
        .max()
        .unwrap_or(0);
    let unix_ms = now_ms.saturating_sub(last) / 1000 * 1000;
    Ok(audita_sinks::tables::RecordOrigin {
        unix_ms: i64::try_from(unix_ms).unwrap_or(i64::MAX),
    })
}

/// The demo's deployment as its stages see it: `cfg` with the command line's slice and
/// epoch sizes, monitoring the fleet's adverse predicates.
fn deployment(args: &DemoArgs, cfg: &Config, fleet: &Fleet) -> anyhow::Result<Deployment> {
    let mut d = Deployment::from_config(cfg, true)?;
    if let Some(n) = args.max_slice_bytes {
        d.max_slice_bytes = n;
    }
    if let Some(n) = args.epoch_messages {
        anyhow::ensure!(n > 0, "--epoch-messages must be at least 1");
        d.epoch_messages = n;
    }
    // The deployment's adverse predicates: its monitor stage detects every incident
    // from the sealed record (the fleet publishes no declaration), and its engine
    // workers check each declaration against the slice.
    d.predicates = Some(audita_monitor::Predicates::from_json(
        &fleet.predicates_json,
    )?);
    Ok(d)
}

/// Runs the whole pipeline over the embedded bus with the fleet publishing its
/// messages, a progress bar unless `--quiet`; returns what the sink collected.
fn run_fleet(args: &DemoArgs, d: &Arc<Deployment>, fleet: &Fleet) -> anyhow::Result<Collected> {
    let total = fleet.messages() as u64;
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
    let expect = fleet.incidents();
    let collected = audita_pipeline::run_all(
        Arc::clone(d),
        &bus,
        &args.out,
        args.workers,
        &metrics,
        |bus| {
            let mut p = bus.producer()?;
            fleet.publish(p.as_mut(), &d.prefix, args.publish_rate, |n| {
                if n % 64 == 0 || n as u64 == total {
                    bar.set_position(n as u64);
                }
            })?;
            Ok(expect)
        },
        |_| {
            verdicts += 1;
            bar.set_message(format!("{verdicts}/{expect} verdicts"));
        },
    )?;
    bar.finish_and_clear();
    Ok(collected)
}

/// Writes what the verdicts can be re-checked with offline: the rows, the duty and
/// predicate files, each incident's declaration and verdict, the planted profiles.
fn write_outputs(
    args: &DemoArgs,
    fleet: &Fleet,
    collected: &Collected,
    rows: &[VerdictRow],
) -> anyhow::Result<()> {
    std::fs::write(args.out.join("rows.json"), serde_json::to_vec_pretty(rows)?)?;
    std::fs::write(args.out.join("duties.json"), &fleet.duties_json)?;
    std::fs::write(args.out.join("predicates.json"), &fleet.predicates_json)?;
    // What each verdict was judged on and what it said, for re-checking offline.
    let adverse_dir = args.out.join("adverse");
    std::fs::create_dir_all(&adverse_dir)?;
    for a in fleet.cells.iter().filter_map(|c| c.adverse.as_ref()) {
        std::fs::write(
            adverse_dir.join(format!("{}.json", a.incident)),
            serde_json::to_vec_pretty(a)?,
        )?;
    }
    for (incident, v) in &collected.verdicts {
        let text = crate::verdict::canonical_json(&v.verdict).map_err(anyhow::Error::msg)?;
        std::fs::write(
            args.out.join("verdicts").join(format!("{incident}.json")),
            text + "\n",
        )?;
    }
    // The planted causal profile of every incident (for checking, never read by the pipeline).
    let planted = fleet.planted();
    std::fs::write(
        args.out.join("planted.json"),
        serde_json::to_vec_pretty(&planted)?,
    )?;
    Ok(())
}

/// Verifies the record the run wrote, as `audita verify` would.
fn verify_written(args: &DemoArgs) -> anyhow::Result<Partition> {
    let dir = audita_record::read_dir(&args.out.join("record"), &audita_record::Limits::default())?;
    Ok(audita_evidence::verify_record_with(
        &dir.record,
        &dir.keys,
        &audita_evidence::Policy::default(),
        dir.payloads.as_ref(),
    ))
}

/// Prints the run's summary: the record, the verdicts and abstentions, the culpable
/// findings and where everything was written.
fn print_summary(
    args: &DemoArgs,
    fleet: &Fleet,
    collected: &Collected,
    rows: &[VerdictRow],
    partition: &Partition,
    started: Instant,
) {
    let expect = fleet.incidents();
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
}
