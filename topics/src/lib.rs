//! The record type of every topic of the pipeline: what the stages send each other.
//!
//! The stages depend on these types, not on each other: ingest writes
//! [`accepted`] frames and [`Quarantined`] records, the sealer reads the first and
//! writes [`EpochSeal`]s (and quarantines `late` envelopes), the slicer's process
//! joins seals with the accepted bytes (the `audita-join` crate) into
//! [`EpochMessage`]s, runs the monitor's detectors over them and writes
//! [`SliceBundle`]s, the engine workers read bundles and write [`VerdictRecord`]s,
//! which the sinks read. This crate holds the record types only.
//!
//! | topic ([`names`]) | key | record |
//! |---|---|---|
//! | `audita.envelopes` | author | a signed envelope (`audita_evidence::SignedEnvelope` bytes) |
//! | `audita.receipts` | recipient | a signed receipt (`audita_evidence::Receipt` bytes) |
//! | `audita.accepted` | author / recipient | an [`accepted`] frame: kind byte + exact signed bytes, or a [`Watermark`] |
//! | `audita.suspect` | source topic (`late` from the sealer) | JSON [`Quarantined`] |
//! | `audita.epochs` | log origin | [`EpochSeal`] segment: seals and accepted positions, not the bytes |
//! | `audita.adverse` | incident | adverse declaration JSON (`audita_verdict::AdverseDecl`) |
//! | `audita.slices` | incident | [`SliceBundle`] segment |
//! | `audita.verdicts` | incident | JSON [`VerdictRecord`] (`audita.verdict-record/v1`, [`RECORD_JSON_SCHEMA`]) |
//! | `audita.alerts` | predicate | JSON [`AlertRecord`] (`audita.alert/v1`) |
//!
//! Design constraints:
//! - Signed bytes travel exactly as signed: frames wrap them, nothing re-encodes them.
//! - One pass of the bytes: after ingest, a message's bytes are published once, on
//!   `audita.accepted`; every later topic names them by id (or carries the few a
//!   slice needs, with their proofs). `audita.accepted` is retained at least as long
//!   as `audita.epochs` (a reader replays both).
//! - Binary records are `audita-record` segments (magic, kind byte, length-prefixed
//!   frames), so a topic record and a record file share one bounded decoder; every
//!   decoder returns `None`/an error on malformed input, never panics.
//! - JSON records only ever gain optional fields (readers ignore unknown ones).

#![warn(missing_docs)]
#![forbid(unsafe_code)]
#![warn(clippy::too_many_lines)]

pub mod accepted;
mod alert;
mod epoch;
mod quarantine;
mod slice;
mod verdict;

pub use accepted::Watermark;
pub use alert::{AlertRecord, ALERT_SCHEMA};
pub use epoch::{EpochMessage, EpochSeal, WHOLE_RECORD};
pub use quarantine::{Quarantined, MAX_QUARANTINED_BYTES};
pub use slice::SliceBundle;
pub use verdict::*;

/// The report file name of an incident (the sink writes `reports/<this>`, the
/// notifier links to it): the name restricted to `[A-Za-z0-9._-]` (leading dots
/// replaced), with a digest suffix when that changed it, so an untrusted name never
/// becomes a path.
pub fn report_file_name(incident: &str) -> String {
    let clean: String = incident
        .chars()
        .enumerate()
        .map(|(i, c)| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || (c == '.' && i > 0) {
                c
            } else {
                '_'
            }
        })
        .take(120)
        .collect();
    if clean == incident && !clean.is_empty() && clean != "index" {
        format!("{clean}.html")
    } else {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in incident.bytes() {
            h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
        format!("{clean}-{h:016x}.html")
    }
}

/// The topics of the pipeline (each name is prefixed by a deployment's topic prefix).
pub mod names {
    /// Signed envelopes as submitted by fleet principals (key: author principal).
    pub const ENVELOPES: &str = "audita.envelopes";
    /// Delivery receipts signed by recipients (key: recipient principal).
    pub const RECEIPTS: &str = "audita.receipts";
    /// Input that failed a form or signature check, with the reason (key: source topic).
    pub const SUSPECT: &str = "audita.suspect";
    /// Envelopes that passed ingest checks, in acceptance order (key: author).
    pub const ACCEPTED: &str = "audita.accepted";
    /// Sealed epochs: headers, checkpoints and the ids they seal, not the bytes
    /// (key: log origin).
    pub const EPOCHS: &str = "audita.epochs";
    /// Adverse-outcome declarations (key: incident id): derived from the sealed record
    /// by the monitor stage, or declared by an operator (checked all the same).
    pub const ADVERSE: &str = "audita.adverse";
    /// Incident slices fanned out to engine workers (key: incident id).
    pub const SLICES: &str = "audita.slices";
    /// Verdicts for alerting and analytics (key: incident id).
    pub const VERDICTS: &str = "audita.verdicts";
    /// Alerts: a declared predicate (or its near-miss margin) holds, before the
    /// incident's slice is complete (key: predicate name).
    pub const ALERTS: &str = "audita.alerts";
}
