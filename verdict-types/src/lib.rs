//! The verdict's flat per-(incident, principal) row, [`VerdictRow`]: one definition
//! that `audita_verdict::Verdict::rows` fills, `audita_topics::VerdictRecord` carries
//! on `audita.verdicts` and the sink writes as its findings columns.
//!
//! It sits in a crate of its own, below both, because neither can own it for the
//! other: the verdict crate is a domain crate and links no record format (so not
//! `audita-topics`), and `audita-topics` is linked by the light clients, which must
//! not link the verdict engine (the CaDiCaL solver included).
//!
//! Design constraints:
//! - A pure type: serde only, no I/O, no engine.
//! - Its serialized form is a published contract (the verdict record's JSON Schema,
//!   `topics/schema/verdict-record.schema.json`, and the sink's columns): fields are
//!   only ever added, at the end, and never renamed or reordered.
#![warn(missing_docs)]
#![forbid(unsafe_code)]
#![warn(clippy::too_many_lines)]

use serde::{Deserialize, Serialize};

/// One verdict finding: an (incident, principal) row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The serialized field order is the published one (JSON keys, Parquet columns).
    #[test]
    fn fields_serialize_in_the_published_order() {
        let row = VerdictRow {
            incident: "i".into(),
            principal: "p".into(),
            outcome: "y".into(),
            t_star_ms: 1,
            severity_j: 0.5,
            standard: "specification".into(),
            duties: vec!["d".into()],
            breach_specification: true,
            breach_reasonable: false,
            rho_lo: 0.25,
            rho_hi: 1.0,
            culpable: true,
            claim: "causal".into(),
            flags: vec![],
            evidence: vec!["00".into()],
            record_root: "ab".into(),
        };
        let json = serde_json::to_string(&row).unwrap();
        assert_eq!(
            json,
            r#"{"incident":"i","principal":"p","outcome":"y","t_star_ms":1,"severity_j":0.5,"standard":"specification","duties":["d"],"breach_specification":true,"breach_reasonable":false,"rho_lo":0.25,"rho_hi":1.0,"culpable":true,"claim":"causal","flags":[],"evidence":["00"],"record_root":"ab"}"#
        );
        assert_eq!(serde_json::from_str::<VerdictRow>(&json).unwrap(), row);
    }
}
