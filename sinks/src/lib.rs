//! Sinks: verdict topic records to the analytics tables, HTML reports and the index
//! ([`sink::VerdictSink`]) and the sink stage's run loop ([`sink::run`]).
//!
//! Design constraints:
//! - Two Parquet tables, `incidents` (one row per incident, abstentions and no-cause
//!   controls included) and `findings` (one row per incident × principal), with
//!   versioned, additive schemas ([`tables`], documented in `sinks/TABLES.md`),
//!   Hive-partitioned by UTC date, each file committed atomically; a crash loses at
//!   most the open files, whose rows the [`journal`] restores on restart.
//! - The verdict topic record (`audita_topics::VerdictRecord`) has one JSON Schema,
//!   `topics/schema/verdict-record.schema.json`; this crate reads it, the engine
//!   workers write it.
//! - Reports are self-contained HTML rendered by templates ([`report`]).

#![warn(missing_docs)]
#![warn(clippy::too_many_lines)]

pub mod journal;
pub mod parquet;
pub mod report;
pub mod sink;
pub mod tables;

pub use audita_topics::VerdictRow;
