//! The verdict topic record: what `audita.verdicts` carries, keyed by incident name.
//!
//! Its contract is one JSON Schema, `topics/schema/verdict-record.schema.json`
//! (`audita.verdict-record/v1`), checked in tests against every record an embedded
//! pipeline run emits. Two producers write it: the engine workers (a verdict, or an
//! abstention when a slice cannot be judged) and the slicer (an abstention when a
//! slice exceeds the record limit).
//!
//! Design constraints:
//! - A record is either a verdict (`verdict` set) or an abstention (`abstained` set
//!   with the reason), never both; `rows` is empty for abstentions.
//! - Everything in it is a function of the slice bundle, the registries and the verdict
//!   alone (no clock, no worker state), so re-delivery and the number of workers never
//!   change its bytes. Wall-clock times are the sink's business (`audita_sinks::tables`).
//! - `messages` is the catalogue of the certified messages the verdict names (its
//!   slice, anchors, evidence, triggers), decoded from the signed envelopes the bundle
//!   carries, so a report can show what each id *says* without the record directory.
//! - `duties` holds the registry entries of the duties the verdict names, so a
//!   reader sees what each duty id obliges.
//! - `record` is the checkpoint the verdict was computed against (origin, size, root,
//!   the note text with its keeper co-signatures), so a reader can check it with
//!   standard transparency-log tooling and hand it to `audita verify --checkpoint`.
//! - Fields are only ever added (readers ignore unknown fields; every added field is
//!   optional); a change that removes or retypes a field is a new schema id.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Schema identifier of a verdict topic record.
pub const RECORD_SCHEMA: &str = "audita.verdict-record/v1";

/// The JSON Schema (draft 2020-12) of [`VerdictRecord`].
pub const RECORD_JSON_SCHEMA: &str = include_str!("../schema/verdict-record.schema.json");

fn schema_id() -> String {
    RECORD_SCHEMA.to_string()
}

/// One verdict finding: an (incident, principal) row (defined in
/// `audita-verdict-types`, which the verdict crate fills it from).
pub use audita_verdict_types::VerdictRow;

/// One record of `audita.verdicts`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VerdictRecord {
    /// `audita.verdict-record/v1` (records written before the field existed lack it).
    #[serde(default = "schema_id")]
    pub schema: String,
    /// Incident name (the declaration's `incident`; also the record key).
    pub incident: String,
    /// The full verdict (`audita.verdict/v1`, `verdict/SCHEMA.md`); absent for an
    /// abstention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<serde_json::Value>,
    /// Why no verdict could be computed; absent for a verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abstained: Option<String>,
    /// The adverse declaration exactly as declared (when it parsed as JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declaration: Option<serde_json::Value>,
    /// The checkpoint the verdict was computed against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<RecordAnchor>,
    /// Decoded certified messages the verdict names, by id (`author:hex64`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub messages: BTreeMap<String, MessageView>,
    /// The registered duties the verdict names, by duty id: holder and declaration.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub duties: BTreeMap<String, DutyView>,
    /// One row per principal in the verdict (empty for an abstention).
    #[serde(default)]
    pub rows: Vec<VerdictRow>,
}

/// A registered duty as declared in the deployment's duty registry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DutyView {
    /// The principal holding it.
    pub holder: String,
    /// Its declaration (`kind`, `id` and the kind's fields; verdict/SCHEMA.md).
    pub definition: serde_json::Value,
}

impl VerdictRecord {
    /// An abstention with its reason (and the declaration, when known).
    pub fn abstention(
        incident: &str,
        reason: &str,
        declaration: Option<serde_json::Value>,
    ) -> VerdictRecord {
        VerdictRecord {
            schema: schema_id(),
            incident: incident.to_string(),
            verdict: None,
            abstained: Some(reason.to_string()),
            declaration,
            record: None,
            messages: BTreeMap::new(),
            duties: BTreeMap::new(),
            rows: Vec::new(),
        }
    }

    /// Whether this is an abstention (no verdict).
    pub fn is_abstention(&self) -> bool {
        self.verdict.is_none()
    }
}

/// The checkpoint a verdict was computed against.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordAnchor {
    /// Log origin (the log's key name).
    pub origin: String,
    /// Tree size (messages sealed) at the checkpoint.
    pub size: u64,
    /// RFC 9162 root hash, hex.
    pub root: String,
    /// The C2SP signed note, text exactly as stored (log signature and keeper
    /// co-signature lines included).
    pub checkpoint: String,
    /// Keeper co-signatures that verify against the registry.
    pub cosignatures: Vec<CosignatureView>,
    /// Valid keeper co-signatures the deployment requires of an epoch (its
    /// quorum, `k` of the `n` keepers).
    #[serde(default)]
    pub quorum: usize,
    /// Whether some checkpoint the slice rests on had fewer valid keeper
    /// co-signatures than `quorum` when the verdict was computed (keepers down or
    /// behind): the verdict stands on the log's signature alone until they catch
    /// up, and a verifier requiring the quorum does not yet accept its record.
    #[serde(default)]
    pub under_witnessed: bool,
}

/// A verified keeper co-signature.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CosignatureView {
    /// Keeper name.
    pub keeper: String,
    /// The timestamp the keeper signed (`cosignature/v1` `time` line): POSIX
    /// seconds of the keeper's own clock.
    pub timestamp: u64,
}

/// A certified message as a reader sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MessageView {
    /// Author principal.
    pub author: String,
    /// Destination principal (the receipt signer).
    pub destination: String,
    /// Payload kind (`move_to`, `set_speed`, `halt`, `set_param`, `sensor_report`, …).
    pub kind: String,
    /// Actuator or machine a command acts on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Payload parameters by name (numbers in the envelope's units: mm, mm/s,
    /// milli-units; text as text).
    #[serde(default)]
    pub params: BTreeMap<String, serde_json::Value>,
    /// The committed effect `φ`, as text (`none` for a report).
    pub effect: String,
    /// Record time of the message (ms since the record's origin).
    pub timestamp_ms: u64,
    /// Cited ids (`author:hex64`).
    #[serde(default)]
    pub citations: Vec<String>,
}

/// A typed reading of the verdict (`audita.verdict/v1`) for the sink's tables and
/// reports: the fields they show, tolerant of fields added later.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct VerdictView {
    /// Incident name.
    pub incident: String,
    /// Declared predicate `Y`.
    pub outcome: String,
    /// `t*`, record-time ms.
    pub t_star_ms: u64,
    /// Severity (J).
    pub severity_j: f64,
    /// Standard culpability was computed under.
    pub standard: String,
    /// Hex log root of the last intact epoch.
    pub record_root: String,
    /// `graded` or `abstained`.
    pub status: String,
    /// Incident-level claim.
    pub claim: ClaimView,
    /// Declared anchors.
    #[serde(default)]
    pub anchors: Vec<String>,
    /// The slice.
    #[serde(default)]
    pub slice: SliceView,
    /// Completion items (missing, suspect, unresolved).
    #[serde(default)]
    pub completions: CompletionsView,
    /// Replay receipts.
    #[serde(default)]
    pub replay: Vec<ReplayView>,
    /// Findings by principal.
    #[serde(default)]
    pub principals: BTreeMap<String, FindingView>,
    /// Incident-level notes.
    #[serde(default)]
    pub notes: Vec<String>,
    /// Equivocations found by verification.
    #[serde(default)]
    pub equivocations: u64,
}

impl VerdictView {
    /// Reads the verdict of a record; a one-line error names what does not fit.
    pub fn of(verdict: &serde_json::Value) -> Result<VerdictView, String> {
        VerdictView::deserialize(verdict).map_err(|e| format!("verdict unreadable: {e}"))
    }

    /// Why the verdict abstained (status `abstained`), from its notes.
    pub fn abstain_reason(&self) -> Option<String> {
        (self.status == "abstained").then(|| {
            self.notes
                .iter()
                .find(|n| n.contains("abstain"))
                .cloned()
                .unwrap_or_else(|| {
                    if self.notes.is_empty() {
                        "abstained".to_string()
                    } else {
                        self.notes.join("; ")
                    }
                })
        })
    }
}

/// A claim.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct ClaimView {
    /// `causal`, `temporal` or `indeterminate`.
    pub level: String,
    /// Folded/similarity edges that downgrade it.
    #[serde(default)]
    pub offending_edges: Vec<EdgeView>,
    /// Window-exit artifacts.
    #[serde(default)]
    pub boundary: Vec<String>,
}

/// A slice edge.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct EdgeView {
    /// Citing message.
    pub child: String,
    /// Cited message.
    pub parent: String,
    /// Witness grade.
    pub kind: String,
    /// Whether the child consumes the parent.
    #[serde(default)]
    pub consumed: bool,
}

/// The slice.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct SliceView {
    /// Closure messages.
    #[serde(default)]
    pub messages: Vec<String>,
    /// Closure edges.
    #[serde(default)]
    pub edges: Vec<EdgeView>,
    /// Duty absences.
    #[serde(default)]
    pub absences: Vec<AbsenceView>,
}

/// A duty-indexed absence variable.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct AbsenceView {
    /// Variable name.
    pub variable: String,
    /// Duty id.
    pub duty: String,
    /// Holder.
    pub holder: String,
    /// Triggering report.
    pub trigger: String,
    /// Whether it enters `Y`.
    #[serde(default)]
    pub in_outcome: bool,
}

/// Completion items.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct CompletionsView {
    /// Missing, suspect and unresolved items.
    #[serde(default)]
    pub items: Vec<ItemView>,
    /// Readings enumerated.
    #[serde(default)]
    pub readings: u64,
    /// Admissible readings.
    #[serde(default)]
    pub admissible: u64,
}

/// A missing, suspect or unresolved item.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct ItemView {
    /// Id.
    pub id: String,
    /// Author.
    #[serde(default)]
    pub author: String,
    /// `missing`, `suspect` or `unresolved`.
    pub kind: String,
}

/// A replay receipt.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct ReplayView {
    /// Cause variables.
    pub vars: Vec<String>,
    /// Grade.
    pub grade: f64,
    /// Factual risk.
    pub q0: f64,
    /// Interventional risk.
    pub q1: f64,
    /// Runs per arm.
    pub runs: u64,
    /// Certified.
    pub certified: bool,
}

/// The finding about one principal.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct FindingView {
    /// Registered duty ids.
    #[serde(default)]
    pub duties: Vec<String>,
    /// Breach under both standards.
    pub breach: BreachView,
    /// Involvement bound.
    pub rho_lo: f64,
    /// Upper end of the interval.
    pub rho_hi: f64,
    /// Culpable.
    pub culpable: bool,
    /// `culpable`, `negligent_but_inert`, `involved_cleared`, `exonerated`, `unresolved`.
    pub status: String,
    /// Claim of its causal finding.
    pub claim: ClaimView,
    /// Flags.
    #[serde(default)]
    pub flags: Vec<String>,
    /// Certified evidence ids.
    #[serde(default)]
    pub evidence: Vec<String>,
    /// Named missing/suspect items.
    #[serde(default)]
    pub items: Vec<ItemView>,
    /// Notes.
    #[serde(default)]
    pub notes: Vec<String>,
}

/// Breach under both standards.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct BreachView {
    /// Specification standard.
    pub specification: bool,
    /// Reasonable-agent standard.
    pub reasonable_agent: bool,
    /// Violations.
    #[serde(default)]
    pub violations: Vec<ViolationView>,
}

/// One duty violation.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct ViolationView {
    /// Duty id.
    pub duty: String,
    /// Standards it breaches.
    #[serde(default)]
    pub standards: Vec<String>,
    /// Witness messages.
    #[serde(default)]
    pub evidence: Vec<String>,
    /// What was violated.
    #[serde(default)]
    pub detail: String,
}
