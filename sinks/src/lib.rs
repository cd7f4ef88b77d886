//! Sinks: verdict topic records to the analytics tables, HTML reports and the index
//! ([`sink::VerdictSink`]), and Prometheus metrics for every stage.
//!
//! Design constraints:
//! - Two Parquet tables, `incidents` (one row per incident, abstentions and no-cause
//!   controls included) and `findings` (one row per incident × principal), with
//!   versioned, additive schemas ([`tables`], documented in `sinks/TABLES.md`),
//!   Hive-partitioned by UTC date, each file committed atomically; a crash loses at
//!   most the open files, whose rows the [`journal`] restores on restart.
//! - The verdict topic record has one JSON Schema ([`record`],
//!   `sinks/schema/verdict-record.schema.json`).
//! - Reports are self-contained HTML rendered by templates ([`report`]).
//! - Metric names follow `audita_<stage>_<name>_<unit>[_total]` with a small fixed set
//!   of label values; never a message id as a label.

#![warn(missing_docs)]

pub mod journal;
pub mod metrics;
pub mod parquet;
pub mod record;
pub mod report;
pub mod sink;
pub mod tables;

/// One verdict finding: an (incident, principal) row.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct VerdictRow {
    /// Incident name (from the adverse declaration).
    pub incident: String,
    /// Principal the row is about.
    pub principal: String,
    /// The declared adverse predicate `Y` (e.g. `separation<0.5m`).
    pub outcome: String,
    /// Time the predicate became true, in ms of record time.
    pub t_star_ms: u64,
    /// Harm severity in joules (½·m·v² at the violating tick), 0 for non-physical harm.
    pub severity_j: f64,
    /// The duty standard the verdict was computed under (e.g. `specification`).
    pub standard: String,
    /// Registered duties active for this principal in the window.
    pub duties: Vec<String>,
    /// Breach under the specification standard.
    pub breach_specification: bool,
    /// Breach under the reasonable-agent standard.
    pub breach_reasonable: bool,
    /// Lower end of the responsibility interval (the involvement bound).
    pub rho_lo: f64,
    /// Upper end of the responsibility interval.
    pub rho_hi: f64,
    /// Breach ∧ ρ_lo > 0.
    pub culpable: bool,
    /// Claim level: `causal`, `temporal` or `indeterminate`.
    pub claim: String,
    /// Flags: `conduit`, `exonerated`, `omission`, `evidence_missing`, `evidence_suspect`.
    pub flags: Vec<String>,
    /// Hex ids of the certified messages that justify the findings.
    pub evidence: Vec<String>,
    /// Hex root of the last sealed epoch the verdict was computed against.
    pub record_root: String,
}
