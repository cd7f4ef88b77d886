//! `audita.alerts`: an alert the monitor raises the moment a declared predicate (or
//! its near-miss margin) holds on certified telemetry — before the incident's slice
//! is complete; the verdict follows on `audita.verdicts`.
//!
//! Design constraints (JSON, schema `audita.alert/v1`):
//! ```json
//! {"schema": "audita.alert/v1", "kind": "fired", "predicate": "separation_below_0.5m",
//!  "incident": "separation_below_0.5m-agv-1-12399", "entities": ["agv-1", "worker-1"],
//!  "t_ms": 12399, "severity_j": 450.0, "messages": ["rtls:3f…(64 hex)"],
//!  "detail": "separation 412 mm between agv-1 and worker-1 (threshold 500 mm)",
//!  "site": "c3"}
//! ```
//! - `kind`: `fired` (the predicate holds: `incident` names the declaration that
//!   follows on `audita.adverse`) or `near_miss` (within the margin; no incident).
//! - `entities`: the predicate's subject first; `t_ms`: record time of the telemetry
//!   report (`t*` when fired); `messages`: the certified telemetry establishing it;
//!   `site` (optional): the subject's site in the predicate file.
//! - Delivery is at least once (a restarted monitor re-reads the sealed record):
//!   consumers dedupe on `(kind, predicate, entities, t_ms)`.

use serde::{Deserialize, Serialize};

/// Schema id of an alert record.
pub const ALERT_SCHEMA: &str = "audita.alert/v1";

/// An alert as published on `audita.alerts`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlertRecord {
    /// [`ALERT_SCHEMA`].
    pub schema: String,
    /// `fired` or `near_miss`.
    pub kind: String,
    /// Predicate name.
    pub predicate: String,
    /// The incident the declaration will carry (fired alerts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incident: Option<String>,
    /// Entities, the subject first.
    pub entities: Vec<String>,
    /// Record time of the telemetry report (ms).
    pub t_ms: u64,
    /// Severity in joules, when the predicate has a rule and the inputs are reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity_j: Option<f64>,
    /// Certified telemetry messages establishing it (`author:hex64`).
    pub messages: Vec<String>,
    /// One line saying what holds.
    pub detail: String,
    /// The subject's site (building, floor or cell), when the predicate file
    /// registers it at one (records written before the field existed lack it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
}
