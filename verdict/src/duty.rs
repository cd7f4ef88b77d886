//! The duty registry: declared obligations per principal, the breach standard a verdict
//! is computed under, and each principal's reference policy (for blame-shift
//! certificates).
//!
//! Design constraints (JSON format, every object `deny_unknown_fields`):
//! ```json
//! {"standard": "reasonable_agent",
//!  "principals": {
//!    "planner-1":  {"duties": [{"kind": "safety_envelope", "id": "aisle-speed",
//!                               "target": "agv-1", "max_mm_per_s": 1000}]},
//!    "supervisor": {"duties": [{"kind": "halt_authority", "id": "halt-aisle",
//!                               "target": "agv-1", "trigger_contains": "aisle",
//!                               "deadline_ms": 500}]},
//!    "planner-2":  {"duties": [{"kind": "review_required", "id": "rev-p2",
//!                               "reviewer": "checker"}],
//!                   "reference": [{"id": "no-fast", "kind": "set_speed",
//!                                  "min_mm_per_s": 1001}]}}}
//! ```
//! - `standard` (`specification` | `reasonable_agent`, default `specification`) is
//!   the standard culpability is computed under; both are always evaluated and
//!   reported.
//! - Duty kinds: `safety_envelope` (`target`; `max_mm_per_s` bounds `set_speed`;
//!   `param` + `min`/`max` bound `set_param`), `review_required` (`reviewer`: every
//!   derived message of the holder must cite a certified message of the reviewer),
//!   `halt_authority` (`target`, `trigger_contains`, optional `trigger_sensor`,
//!   `deadline_ms`: on a certified sensor report whose reading contains the text, the
//!   holder must issue a certified `halt` of the target within the deadline; an unissued
//!   halt is a duty-indexed absence variable `absent.<id>`), `aggregation` (`target`,
//!   `rule` `min`|`max`|`copy`: a command on the target must carry the declared
//!   aggregate of the values of its consumed certified inputs on that target).
//! - VDA 5050 duties, over orders as master control sends them (the exact payload,
//!   read by `audita_vda5050`): `vda5050_edge_release` (`target` vehicle, `zone`,
//!   `max_mm_per_s`: every edge a certified order of the holder to the target
//!   **releases** whose path may cross the zone — the straight segment between its
//!   nodes, or its trajectory's control polygon — must carry `maxSpeed` ≤ the bound;
//!   an absent `maxSpeed` is unbounded, a violation; horizon edges are not released
//!   and not judged; an edge without node positions cannot be judged and is named,
//!   never passed) and `vda5050_edge_speed` (`target` vehicle, the holder itself;
//!   optional `tolerance_mm_per_s`: every certified state of the holder that shows it
//!   on a released edge must report a speed ≤ that edge's `maxSpeed` as first
//!   released by a certified order to it with the state's `orderId`, plus the
//!   tolerance).
//! - `zones` names rectangles (`min_mm`, `max_mm`, optional `map_id`) once, for the
//!   duties and for the predicate file's `speed_in_zone`, which refers to them by
//!   name: one zone definition for what is detected and what is judged.
//! - `reference` lists forbidden-conduct rules; a certified message of the principal
//!   matching any rule is a *deviation* (a selector variable of the blame-shift
//!   certificate). A rule matches when every given field matches. Reference conduct
//!   is not always a mere omission: a rule may declare the `counterpart` the reference
//!   policy would have issued in the deviation's place
//!   (`{"kind": "move_to", "target": "agv-2", "realises_outcome": true}`), with its
//!   declared actuation semantics — `realises_outcome`: the counterpart alone would
//!   have realised the adverse outcome, so reverting the deviation adds it to `Y` as
//!   one more way of producing it (inevitability rigging: the realised deviation
//!   removed a sufficient production the reference plan contained). A counterpart
//!   that realises nothing makes the reversion a plain removal.
//! - Duty ids are unique across the registry and are identifiers
//!   (`[A-Za-z_][A-Za-z0-9_.:-]*`), because they name model variables.
//! - A duty its holder can never meet is refused where the registry meets the
//!   principals' roles (a deployment's load, `set_duties`): VDA 5050 master control
//!   (`master-control`) holds `vda5050_edge_release` or `review_required`, a VDA 5050
//!   vehicle (`vehicle`) `vda5050_edge_speed` or `review_required`
//!   ([`DutyRegistry::check_roles`]); a `safety_envelope` on master control would
//!   pass every order silently.
//! - Breach is *content-determined*: [`crate::breach`] reads only the holder's own
//!   certified messages/absences and their certified inputs.

use std::collections::{BTreeMap, BTreeSet};

use audita_evidence::{MessageId, Payload};
use serde::{Deserialize, Serialize};

use crate::VerdictError;

/// The standard culpability is computed under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Standard {
    /// Literal violation of a duty the principal holds.
    #[default]
    Specification,
    /// What a reasonable agent holding the principal's certified inputs would not have
    /// done: originating a demand outside any registered envelope of its target, an
    /// unissued registered halt, an unreviewed or mis-aggregated command. A faithful
    /// relay of a certified input is not a breach under this standard.
    ReasonableAgent,
}

impl Standard {
    /// Stable name.
    pub fn name(self) -> &'static str {
        match self {
            Standard::Specification => "specification",
            Standard::ReasonableAgent => "reasonable_agent",
        }
    }
}

/// Aggregation rule of an [`Duty::Aggregation`] duty.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AggregationRule {
    /// The minimum of the inputs' values.
    Min,
    /// The maximum of the inputs' values.
    Max,
    /// Equal to an input's value.
    Copy,
}

/// One declared duty.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Duty {
    /// A safety envelope on commands to a target.
    SafetyEnvelope {
        /// Duty id.
        id: String,
        /// Actuator or batch.
        target: String,
        /// Upper bound on `set_speed` (mm/s).
        #[serde(default)]
        max_mm_per_s: Option<u64>,
        /// Parameter bounded by `min`/`max` in `set_param`.
        #[serde(default)]
        param: Option<String>,
        /// Lower bound (milli-units).
        #[serde(default)]
        min: Option<i64>,
        /// Upper bound (milli-units).
        #[serde(default)]
        max: Option<i64>,
    },
    /// Every derived message must cite a certified review by `reviewer`.
    ReviewRequired {
        /// Duty id.
        id: String,
        /// Reviewing principal.
        reviewer: String,
    },
    /// Halt authority: on a triggering sensor report, halt the target in time.
    HaltAuthority {
        /// Duty id (names the absence variable `absent.<id>`).
        id: String,
        /// Actuator to halt.
        target: String,
        /// Text the sensor reading must contain.
        trigger_contains: String,
        /// Only reports of this sensor trigger (any sensor when absent).
        #[serde(default)]
        trigger_sensor: Option<String>,
        /// Deadline after the report (ms).
        deadline_ms: u64,
    },
    /// Commands on the target must carry the declared aggregate of their inputs.
    Aggregation {
        /// Duty id.
        id: String,
        /// Actuator or batch.
        target: String,
        /// The rule.
        rule: AggregationRule,
    },
    /// VDA 5050 master control: edges an order to the target releases through the
    /// zone carry `maxSpeed` ≤ the bound.
    Vda5050EdgeRelease {
        /// Duty id.
        id: String,
        /// The vehicle the orders are addressed to.
        target: String,
        /// A zone of the registry's `zones`.
        zone: String,
        /// Upper bound on the released `maxSpeed` (mm/s).
        max_mm_per_s: u64,
    },
    /// A VDA 5050 vehicle keeps to the `maxSpeed` of the edge it is on.
    Vda5050EdgeSpeed {
        /// Duty id.
        id: String,
        /// The vehicle (the holder).
        target: String,
        /// Speed allowed above `maxSpeed` (mm/s; measurement resolution).
        #[serde(default)]
        tolerance_mm_per_s: u64,
    },
}

/// A named zone: a rectangle, on a map when `map_id` is given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Zone {
    /// Lower corner `[x, y]` (mm).
    pub min_mm: [i64; 2],
    /// Upper corner `[x, y]` (mm).
    pub max_mm: [i64; 2],
    /// The map the rectangle is on (a VDA 5050 `mapId`); any map when absent.
    #[serde(default)]
    pub map_id: Option<String>,
}

impl Zone {
    /// The rectangle.
    pub fn rect(&self) -> audita_vda5050::Rect {
        audita_vda5050::Rect {
            min_mm: self.min_mm,
            max_mm: self.max_mm,
        }
    }
}

impl Duty {
    /// The duty's kind, as the registry names it.
    pub fn kind(&self) -> &'static str {
        match self {
            Duty::SafetyEnvelope { .. } => "safety_envelope",
            Duty::ReviewRequired { .. } => "review_required",
            Duty::HaltAuthority { .. } => "halt_authority",
            Duty::Aggregation { .. } => "aggregation",
            Duty::Vda5050EdgeRelease { .. } => "vda5050_edge_release",
            Duty::Vda5050EdgeSpeed { .. } => "vda5050_edge_speed",
        }
    }

    /// What the duty judges, in a few words (for errors).
    fn judges(&self) -> &'static str {
        match self {
            Duty::SafetyEnvelope { .. } => "set_speed and set_param commands",
            Duty::ReviewRequired { .. } => "every derived message of its holder",
            Duty::HaltAuthority { .. } => "halt commands after a triggering sensor report",
            Duty::Aggregation { .. } => "commands carrying an aggregate of their inputs",
            Duty::Vda5050EdgeRelease { .. } => "the edges VDA 5050 orders release",
            Duty::Vda5050EdgeSpeed { .. } => "the speed VDA 5050 vehicle states report",
        }
    }

    /// The duty id.
    pub fn id(&self) -> &str {
        match self {
            Duty::SafetyEnvelope { id, .. }
            | Duty::ReviewRequired { id, .. }
            | Duty::HaltAuthority { id, .. }
            | Duty::Aggregation { id, .. }
            | Duty::Vda5050EdgeRelease { id, .. }
            | Duty::Vda5050EdgeSpeed { id, .. } => id,
        }
    }
}

/// A forbidden-conduct rule of a reference policy.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Rule id.
    pub id: String,
    /// Payload kind (`set_speed`, `move_to`, `halt`, `set_param`, ...).
    #[serde(default)]
    pub kind: Option<String>,
    /// Target actuator or batch.
    #[serde(default)]
    pub target: Option<String>,
    /// Matches messages citing a message of this principal.
    #[serde(default)]
    pub cites_author: Option<String>,
    /// Matches `set_speed` at or above this speed (mm/s).
    #[serde(default)]
    pub min_mm_per_s: Option<u64>,
    /// What the reference policy would have issued instead of a matching deviation.
    #[serde(default)]
    pub counterpart: Option<Counterpart>,
}

/// The command a reference policy issues in place of a deviation (Definition S3 of the
/// reference paper: reference conduct may differ from the realised conduct, not only
/// omit it).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Counterpart {
    /// Payload kind of the reference command.
    pub kind: String,
    /// Its target actuator or batch.
    #[serde(default)]
    pub target: Option<String>,
    /// Declared actuation semantics: the reference command alone would have realised
    /// the adverse outcome (it enters `Y` as one more disjunct when the deviation is
    /// reverted).
    #[serde(default)]
    pub realises_outcome: bool,
}

/// The duties and reference policy of one principal.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrincipalDuties {
    /// Declared duties.
    #[serde(default)]
    pub duties: Vec<Duty>,
    /// Reference policy: forbidden-conduct rules (deviations).
    #[serde(default)]
    pub reference: Vec<Rule>,
}

/// The machine-readable duty registry (validated on load).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DutyRegistry {
    /// Standard culpability is computed under.
    #[serde(default)]
    pub standard: Standard,
    /// Duties per principal name.
    #[serde(default)]
    pub principals: BTreeMap<String, PrincipalDuties>,
    /// Named zones (duties and the predicate file refer to them by name).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub zones: BTreeMap<String, Zone>,
}

impl DutyRegistry {
    /// Parses and validates registry JSON.
    pub fn from_json(text: &str) -> Result<Self, VerdictError> {
        let reg: DutyRegistry =
            serde_json::from_str(text).map_err(|e| VerdictError::Duties(e.to_string()))?;
        reg.validate()?;
        Ok(reg)
    }

    /// Checks duty ids (unique identifiers), numeric fields and zone references.
    pub fn validate(&self) -> Result<(), VerdictError> {
        for (name, z) in &self.zones {
            if z.min_mm[0] > z.max_mm[0] || z.min_mm[1] > z.max_mm[1] {
                return Err(VerdictError::Duties(format!(
                    "zone {name:?}: min_mm {:?} exceeds max_mm {:?}",
                    z.min_mm, z.max_mm
                )));
            }
        }
        let mut seen = BTreeSet::new();
        for (p, d) in &self.principals {
            for duty in &d.duties {
                let id = duty.id();
                if !audita_causal::expr::is_identifier(id) {
                    return Err(VerdictError::Duties(format!(
                        "duty id {id:?} of {p} is not an identifier"
                    )));
                }
                if !seen.insert(id.to_string()) {
                    return Err(VerdictError::Duties(format!("duplicate duty id {id:?}")));
                }
                if let Duty::SafetyEnvelope {
                    min: Some(lo),
                    max: Some(hi),
                    ..
                } = duty
                {
                    if lo > hi {
                        return Err(VerdictError::Duties(format!(
                            "duty {id}: min {lo} exceeds max {hi}"
                        )));
                    }
                }
                if let Duty::Vda5050EdgeRelease { zone, .. } = duty {
                    if !self.zones.contains_key(zone) {
                        return Err(VerdictError::Duties(format!(
                            "duty {id}: no zone {zone:?} in the registry's zones"
                        )));
                    }
                }
                if let Duty::Vda5050EdgeSpeed { target, .. } = duty {
                    if target != p {
                        return Err(VerdictError::Duties(format!(
                            "duty {id}: a vda5050_edge_speed duty binds its target vehicle \
                             itself ({target}), not {p}"
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// Checks that every duty can apply to what its holder issues, as far as the
    /// holder's registered role tells (`role_of`; a role it does not know is not
    /// judged): a VDA 5050 master control (`master-control`) signs only orders and
    /// instant actions, a VDA 5050 vehicle (`vehicle`) only its state, connection,
    /// factsheet and visualization messages (the bridge's recording). A duty that
    /// bounds other commands would pass silently on every incident — "causation
    /// without breach" for an order that broke the bound it meant — so it is refused,
    /// naming the duty kind that applies.
    pub fn check_roles<'r>(
        &self,
        role_of: impl Fn(&str) -> Option<&'r str>,
    ) -> Result<(), VerdictError> {
        for (p, duty) in self.all() {
            let Some(role) = role_of(p) else {
                continue;
            };
            let (issues, applies, allowed): (&str, &str, &[&str]) = match role {
                "master-control" => (
                    "a VDA 5050 master control issues orders and instant actions",
                    "vda5050_edge_release bounds the maxSpeed of the edges its orders release",
                    &["vda5050_edge_release", "review_required"],
                ),
                "vehicle" => (
                    "a VDA 5050 vehicle issues its state and connection messages",
                    "vda5050_edge_speed bounds the speed its states report",
                    &["vda5050_edge_speed", "review_required"],
                ),
                _ => continue,
            };
            let kind = duty.kind();
            if !allowed.contains(&kind) {
                return Err(VerdictError::Duties(format!(
                    "duty {} of {p} (role {role}) is a {kind} duty, which judges {}; {issues},                      so it could never apply: {applies}",
                    duty.id(),
                    duty.judges()
                )));
            }
        }
        Ok(())
    }

    /// The zone named `name`.
    pub fn zone(&self, name: &str) -> Option<&Zone> {
        self.zones.get(name)
    }

    /// Duties held by `principal`.
    pub fn duties_of(&self, principal: &str) -> &[Duty] {
        self.principals
            .get(principal)
            .map(|d| d.duties.as_slice())
            .unwrap_or(&[])
    }

    /// Every `(holder, duty)` pair in registry order.
    pub fn all(&self) -> impl Iterator<Item = (&str, &Duty)> {
        self.principals
            .iter()
            .flat_map(|(p, d)| d.duties.iter().map(move |x| (p.as_str(), x)))
    }
}

impl Rule {
    /// Whether a message with this payload and these citations is one the rule names.
    pub(crate) fn matches(&self, payload: &Payload, cites: &[MessageId]) -> bool {
        self.kind.as_ref().is_none_or(|k| k == payload.kind())
            && self
                .target
                .as_ref()
                .is_none_or(|t| payload.target() == Some(t.as_str()))
            && self
                .cites_author
                .as_ref()
                .is_none_or(|a| cites.iter().any(|c| c.author.as_str() == a))
            && self.min_mm_per_s.is_none_or(
                |min| matches!(payload, Payload::SetSpeed { mm_per_s, .. } if *mm_per_s >= min),
            )
    }
}
