//! Adverse predicates declared as data and detected from the record (SPEC §3, §8).
//!
//! A deployment declares its adverse predicates in advance in a predicate file
//! ([`predicate`]: separation between entity classes, speed in a zone, a parameter
//! out of range, or an [`expr`] expression over typed telemetry fields; each with a
//! severity rule, a window and an optional near-miss margin). The [`Monitor`] reads
//! certified messages incrementally — telemetry reports in the [`telemetry`] format
//! (or VDA 5050 vehicle states, [`vda5050`]), actuating commands and actuation
//! reports — and, at the first report at which a
//! predicate holds, raises an [`Alert`] and (once the watermark passes `t*`) emits the
//! adverse declaration: `t*`, anchors, severity and realisation facts, each fact
//! linked to the certified messages establishing it. [`check()`] re-derives a
//! declaration from the record and refuses one the record does not support, whoever
//! declared it.
//!
//! A pure library: no I/O, no clock, no transport. Guarantees (tested in `tests/`):
//! - **Record-derived.** Only certified messages are read; every fact of a
//!   declaration is re-derivable from the record and the predicate file alone.
//! - **Equal to the planted truth** on every facility scenario family and on
//!   generator draws: anchors, `t*`, severity and realisation facts; no-cause
//!   controls fire with no anchors; non-adverse draws fire nothing.
//! - **Checkable.** A declaration that moves `t*`, drops or adds an anchor, marks a
//!   realised command unrealised or misstates severity is refused with the reason.
#![warn(missing_docs)]
#![warn(clippy::too_many_lines)]

pub mod check;
pub mod detect;
pub mod expr;
pub mod predicate;
pub mod telemetry;
pub mod vda5050;

pub use check::{check, Refusal};
pub use detect::{
    derive, observes, read_key, reads, Alert, AlertKind, Derivation, Monitor, ReadKey, MONITOR_NAME,
};
pub use predicate::{Predicate, Predicates};

/// Why a predicate file could not be used. Permanent for its input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MonitorError {
    /// The predicate file is malformed.
    #[error("predicate file: {0}")]
    Predicates(String),
}
