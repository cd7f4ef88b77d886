//! `audita query "SQL"`: SQL over the verdict tables of an output directory with
//! Apache DataFusion (in process, no server), printed as a table, CSV or JSON.
//!
//! Design constraints:
//! - The tables are `incidents` and `findings` (`sinks/TABLES.md`), registered from
//!   `DIR/verdicts/<table>/date=…/part-*.parquet` with `date` as a Hive partition
//!   column (DATE) and the published Arrow schema, so an empty table still has its
//!   columns and a file written under an earlier additive version still reads.
//! - Read-only: nothing under DIR is written; statements other than queries
//!   (`CREATE`, `COPY`, `INSERT`, `SET`, …) are refused.
//! - Bounded: results are printed as they stream; `--limit` caps the rows printed.
//! - A bad query or a missing directory is a one-line error and exit 2; never a panic.

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::prelude::{SessionConfig, SessionContext};
use futures::StreamExt;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

/// Output formats.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Format {
    /// An aligned text table.
    Table,
    /// CSV with a header row.
    Csv,
    /// A JSON array of row objects.
    Json,
    /// One JSON object per line.
    Jsonl,
}

/// Arguments of `audita query`.
#[derive(Args)]
pub struct QueryArgs {
    /// The SQL query (tables: `incidents`, `findings`).
    pub sql: String,
    /// Output directory of `audita demo` or of the sink (holds `verdicts/`).
    #[arg(long, default_value = "audita-demo")]
    pub dir: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Print at most this many rows.
    #[arg(long)]
    pub limit: Option<usize>,
}

pub fn run(args: &QueryArgs) -> i32 {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("audita query: cannot start a runtime: {e}");
            return 2;
        }
    };
    match rt.block_on(query(args)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("audita query: {}", one_line(&e));
            2
        }
    }
}

/// An error and its causes on one line, each message once: DataFusion's errors
/// repeat their source's text in their own, so the plain chain said an unknown
/// column three times over.
fn one_line(e: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in e.chain() {
        let text = cause.to_string().replace('\n', " ");
        let text = text.trim();
        if text.is_empty() || parts.iter().any(|p| p.contains(text)) {
            continue;
        }
        // A cause that repeats everything said so far replaces it.
        parts.retain(|p| !text.contains(p.as_str()));
        parts.push(text.to_string());
    }
    parts.join(": ")
}

/// A session with the verdict tables of `dir` registered.
pub async fn session(dir: &std::path::Path) -> Result<SessionContext> {
    let root = dir.join("verdicts");
    if !root.is_dir() {
        bail!(
            "{} holds no verdict tables (run `audita demo --out {}` or a sink first)",
            root.display(),
            dir.display()
        );
    }
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(2));
    for (name, schema) in [
        ("incidents", audita_sinks::tables::incidents_schema()),
        ("findings", audita_sinks::tables::findings_schema()),
    ] {
        let path = root.join(name);
        std::fs::create_dir_all(&path).ok();
        let path = path
            .canonicalize()
            .with_context(|| format!("table directory {}", path.display()))?;
        let url = ListingTableUrl::parse(format!("{}/", path.display()))
            .with_context(|| format!("table path {}", path.display()))?;
        let options = ListingOptions::new(Arc::new(ParquetFormat::default()))
            .with_file_extension(".parquet")
            .with_table_partition_cols(vec![("date".to_string(), DataType::Date32)]);
        let config = ListingTableConfig::new(url)
            .with_listing_options(options)
            .with_schema(Arc::new(Schema::clone(&schema)));
        let table = ListingTable::try_new(config).context(name)?;
        ctx.register_table(name, Arc::new(table)).context(name)?;
    }
    Ok(ctx)
}

async fn query(args: &QueryArgs) -> Result<()> {
    let ctx = session(&args.dir).await?;
    let first = args
        .sql
        .trim_start()
        .split(|c: char| c.is_whitespace() || c == '(')
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    if !matches!(
        first.as_str(),
        "select" | "with" | "values" | "explain" | "describe" | "show"
    ) {
        bail!("only queries are allowed (SELECT, WITH, VALUES, EXPLAIN, DESCRIBE, SHOW), not {first:?}");
    }
    let df = ctx.sql(&args.sql).await.context("query")?;
    let df = match args.limit {
        Some(n) => df.limit(0, Some(n))?,
        None => df,
    };
    let mut stream = df.execute_stream().await.context("query")?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut batches = Vec::new();
    let mut csv_header = true;
    let mut json_rows = 0usize;
    if matches!(args.format, Format::Json) {
        out.write_all(b"[")?;
    }
    while let Some(batch) = stream.next().await {
        let batch = batch.context("query")?;
        match args.format {
            // A table needs every row's width: collected (bounded by --limit).
            Format::Table => batches.push(batch),
            Format::Csv => {
                let mut w = datafusion::arrow::csv::WriterBuilder::new()
                    .with_header(csv_header)
                    .build(Vec::new());
                w.write(&batch)?;
                out.write_all(&w.into_inner())?;
                csv_header = false;
            }
            Format::Json | Format::Jsonl => {
                let mut w = datafusion::arrow::json::LineDelimitedWriter::new(Vec::new());
                w.write(&batch)?;
                w.finish()?;
                let text = String::from_utf8(w.into_inner())?;
                for line in text.lines() {
                    if matches!(args.format, Format::Json) {
                        if json_rows > 0 {
                            out.write_all(b",")?;
                        }
                        out.write_all(b"\n")?;
                    }
                    out.write_all(line.as_bytes())?;
                    if matches!(args.format, Format::Jsonl) {
                        out.write_all(b"\n")?;
                    }
                    json_rows += 1;
                }
            }
        }
    }
    match args.format {
        Format::Table => {
            let text = datafusion::arrow::util::pretty::pretty_format_batches(&batches)?;
            writeln!(out, "{text}")?;
        }
        Format::Json => out.write_all(b"\n]\n")?,
        _ => {}
    }
    out.flush()?;
    Ok(())
}
