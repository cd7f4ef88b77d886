//! The declared adverse predicate `Y`: which recorded actuation messages it references,
//! when it fired, how severe it was, and the recorded-state facts the production gate
//! needs.
//!
//! Design constraints (JSON format, `deny_unknown_fields`):
//! ```json
//! {"incident": "inc-7", "outcome": "separation_below_0.5m", "t_star_ms": 12300,
//!  "severity": {"mass_kg": 400.0, "speed_m_per_s": 1.5},
//!  "anchors": ["controller-agv-1:3f…(64 hex)"], "combine": "any",
//!  "targets": ["agv-1"], "unrealised": [], "window_start_ms": 0}
//! ```
//! - `anchors`: message ids (`author:hex64`) of the actuation messages whose realised
//!   effects `Y` references. `combine` says whether any (default) or all of them are
//!   needed for `Y`. No anchors = an exogenous outcome (nobody's message produced it).
//! - `targets`: the actuators (or batches) whose recorded state `Y` reads — the
//!   entities the predicate names. Optional: the certified anchors' targets are always
//!   added. Declaring them keeps the incident's scope known when an anchor itself is
//!   missing (its payload, and so its target, is gone); without them a missing anchor
//!   makes the scope the whole time window.
//! - `unrealised`: message ids whose committed effects the recorded state shows never
//!   arrived (preempted); the production gate cuts them.
//! - The slice window is `[window_start_ms, window_end_ms]` (end defaults to
//!   `t_star_ms`); a citation leaving it is a *window exit*.
//! - Severity is `½·m·v²` in joules from the declared mass and speed at `t*`; mass
//!   and speed must be finite and non-negative and their product finite.
//! - `delta` is the certification margin δ (default 1.0: exact replay must flip `Y`).
//! - Derivation (optional; what a checkable declaration carries): `declarer`
//!   (`{"kind": "monitor" | "operator", "name": …}`: who declared it — the pipeline's
//!   monitor, or an operator by hand) and `facts`, each `{"fact": "t_star" |
//!   "severity" | "anchor" | "realised" | "unrealised", "message": id?, "evidence":
//!   [ids], "detail": text}`: the certified messages establishing `t*`, the severity
//!   inputs, each anchor and each realisation fact. `audita-monitor` derives them
//!   from the record and the predicate file and refuses a declaration the record does
//!   not support; the verdict names the predicate (`outcome`), the declarer and every
//!   fact with its evidence. A declaration without them is read as before (unchecked).

use audita_evidence::{MessageId, PrincipalId};
use serde::{Deserialize, Serialize};

use crate::VerdictError;

/// How the anchors combine into `Y`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Combine {
    /// Any anchor's effect suffices.
    #[default]
    Any,
    /// All anchors' effects are needed.
    All,
}

/// Mass and speed at the violating tick.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Severity {
    /// Moving mass (kg).
    pub mass_kg: f64,
    /// Speed at `t*` (m/s).
    pub speed_m_per_s: f64,
}

impl Severity {
    /// `½·m·v²` in joules.
    pub fn joules(&self) -> f64 {
        0.5 * self.mass_kg * self.speed_m_per_s * self.speed_m_per_s
    }

    /// Mass and speed finite and non-negative, and `½·m·v²` finite (a product that
    /// overflows would print as `null`): anything else is a one-line error.
    pub fn validate(&self) -> Result<(), VerdictError> {
        for (name, v) in [
            ("mass_kg", self.mass_kg),
            ("speed_m_per_s", self.speed_m_per_s),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(VerdictError::Adverse(format!(
                    "severity.{name} must be a finite non-negative number, not {v}"
                )));
            }
        }
        if !self.joules().is_finite() {
            return Err(VerdictError::Adverse(format!(
                "severity ½·m·v² overflows for mass_kg {} and speed_m_per_s {}",
                self.mass_kg, self.speed_m_per_s
            )));
        }
        Ok(())
    }
}

/// Who declared an adverse outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeclarerKind {
    /// Detected by the monitor from the certified record.
    Monitor,
    /// Declared by hand by an operator (checked against the record all the same).
    Operator,
}

/// The declarer of an adverse outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Declarer {
    /// Monitor or operator.
    pub kind: DeclarerKind,
    /// The monitor instance or the operator's name.
    pub name: String,
}

/// What a fact of a declaration states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FactKind {
    /// The predicate first holds at `t*`.
    TStar,
    /// The severity inputs at `t*`.
    Severity,
    /// An anchor: a realised actuation whose effect the predicate reads.
    Anchor,
    /// A command whose committed effect the record shows realised by `t*`.
    Realised,
    /// A command whose committed effect never arrived (past its realisation deadline).
    Unrealised,
}

/// One fact of a declaration, linked to the certified messages establishing it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fact {
    /// What it states.
    pub fact: FactKind,
    /// The message it is about (anchors, realisation facts; `author:hex64`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The certified messages establishing it (`author:hex64`).
    #[serde(default)]
    pub evidence: Vec<String>,
    /// One line saying what the evidence shows.
    #[serde(default)]
    pub detail: String,
}

fn default_delta() -> f64 {
    1.0
}

/// The declaration as read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdverseDecl {
    /// Incident name.
    pub incident: String,
    /// Name of the declared predicate.
    pub outcome: String,
    /// Time `Y` became true (ms, record time).
    pub t_star_ms: u64,
    /// Severity inputs (none: severity 0).
    #[serde(default)]
    pub severity: Option<Severity>,
    /// Referenced actuation messages (`author:hex64`).
    #[serde(default)]
    pub anchors: Vec<String>,
    /// How anchors combine.
    #[serde(default)]
    pub combine: Combine,
    /// Actuators / batches whose recorded state `Y` reads (besides the certified
    /// anchors' targets).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<String>,
    /// Messages whose committed effect never arrived (`author:hex64`).
    #[serde(default)]
    pub unrealised: Vec<String>,
    /// Window start (ms; default 0).
    #[serde(default)]
    pub window_start_ms: u64,
    /// Window end (ms; default `t_star_ms`).
    #[serde(default)]
    pub window_end_ms: Option<u64>,
    /// Certification margin δ.
    #[serde(default = "default_delta")]
    pub delta: f64,
    /// Who declared it (none: an unchecked, legacy declaration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declarer: Option<Declarer>,
    /// The facts the declaration rests on, each with its evidence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub facts: Vec<Fact>,
}

/// A validated declaration.
#[derive(Debug, Clone, PartialEq)]
pub struct Adverse {
    /// The declaration.
    pub decl: AdverseDecl,
    /// Parsed anchors (sorted, unique).
    pub anchors: Vec<MessageId>,
    /// Parsed unrealised ids (sorted, unique).
    pub unrealised: Vec<MessageId>,
}

impl Adverse {
    /// Parses and validates declaration JSON.
    pub fn from_json(text: &str) -> Result<Self, VerdictError> {
        let decl: AdverseDecl =
            serde_json::from_str(text).map_err(|e| VerdictError::Adverse(e.to_string()))?;
        Self::new(decl)
    }

    /// Validates a declaration.
    pub fn new(decl: AdverseDecl) -> Result<Self, VerdictError> {
        let parse = |v: &[String]| -> Result<Vec<MessageId>, VerdictError> {
            let mut out = v
                .iter()
                .map(|s| parse_id(s))
                .collect::<Result<Vec<_>, _>>()?;
            out.sort();
            out.dedup();
            Ok(out)
        };
        let anchors = parse(&decl.anchors)?;
        let unrealised = parse(&decl.unrealised)?;
        if let Some(s) = decl.severity {
            s.validate()?;
        }
        if !(decl.delta.is_finite() && decl.delta > 0.0 && decl.delta <= 1.0) {
            return Err(VerdictError::Adverse("delta must lie in (0, 1]".into()));
        }
        if decl.window_end() < decl.window_start_ms {
            return Err(VerdictError::Adverse("window ends before it starts".into()));
        }
        Ok(Self {
            decl,
            anchors,
            unrealised,
        })
    }

    /// Severity in joules (0 when undeclared).
    pub fn severity_j(&self) -> f64 {
        self.decl.severity.map(|s| s.joules()).unwrap_or(0.0)
    }
}

impl AdverseDecl {
    /// End of the slice window.
    pub fn window_end(&self) -> u64 {
        self.window_end_ms.unwrap_or(self.t_star_ms)
    }
}

/// Formats a message id as `author:hex64`.
pub fn id_string(id: &MessageId) -> String {
    format!("{}:{}", id.author, hex::encode(id.digest))
}

/// Parses `author:hex64` (the author may itself contain `:`).
pub fn parse_id(s: &str) -> Result<MessageId, VerdictError> {
    let bad = || VerdictError::Adverse(format!("bad message id {s:?} (want author:hex64)"));
    let (author, hexd) = s.rsplit_once(':').ok_or_else(bad)?;
    let bytes = hex::decode(hexd).map_err(|_| bad())?;
    let digest: [u8; 32] = bytes.try_into().map_err(|_| bad())?;
    let author = PrincipalId::new(author).map_err(|_| bad())?;
    Ok(MessageId { author, digest })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decl(severity: &str) -> String {
        format!(r#"{{"incident": "i", "outcome": "o", "t_star_ms": 1, "severity": {severity}}}"#)
    }

    #[test]
    fn huge_severity_is_rejected_instead_of_printing_null() {
        let e = Adverse::from_json(&decl(r#"{"mass_kg": 1e300, "speed_m_per_s": 1e300}"#))
            .unwrap_err()
            .to_string();
        assert!(e.contains("overflows"), "{e}");
        for bad in [
            r#"{"mass_kg": -1.0, "speed_m_per_s": 1.0}"#,
            r#"{"mass_kg": 1.0, "speed_m_per_s": -0.5}"#,
        ] {
            let e = Adverse::from_json(&decl(bad)).unwrap_err().to_string();
            assert!(e.contains("finite non-negative"), "{bad}: {e}");
            assert!(!e.contains('\n'));
        }
        // Beyond f64: the JSON reader refuses it.
        assert!(Adverse::from_json(&decl(r#"{"mass_kg": 1e309, "speed_m_per_s": 1.0}"#)).is_err());
        let ok = Adverse::from_json(&decl(r#"{"mass_kg": 400.0, "speed_m_per_s": 1.5}"#)).unwrap();
        assert_eq!(ok.severity_j(), 450.0);
    }
}
