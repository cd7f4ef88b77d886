//! The mapping from checked VDA 5050 messages to Audita envelopes (pure: no I/O,
//! no clock, no keys; the sidecar signs what this module builds).
//!
//! Design constraints:
//! - Vehicle-authored topics (`state`, `connection`, `factsheet`, `visualization`)
//!   become **sensor roots**: a `sensor_report` authored by the vehicle's principal,
//!   addressed to master control, with `sensor = "vda5050.<topic>"` and `reading` =
//!   the exact payload text the vehicle sent. Pose, velocity, errors and safety state
//!   are read from it by [`state_facts`] (the same function for the bridge's summary
//!   and for anyone re-checking the record).
//! - Master-control topics (`order`, `instantActions`, 3.0 `responses`, `zoneSet`)
//!   become **derived commands**: an `agent_text` authored by master control's
//!   principal, addressed to the vehicle, `text` = the exact payload, citing the
//!   vehicle `state` the master-control sidecar had seen last from that vehicle
//!   (see the crate doc for how it learns that state's id). The committed effect of
//!   an order is the vehicle at its last released positioned node (within
//!   `allowedDeviationXY`; in a 2.0 message also `allowedDeviationXy`, the spelling
//!   of the published 2.0.0 order schema; default 0.5 m); of `startPause` and `cancelOrder`, the
//!   vehicle halted;
//!   otherwise a claim naming the message.
//! - With no state of the vehicle known, a command cites a root the master-control
//!   sidecar signs in master control's name ([`no_state_root`]): the command is then
//!   on record as master control's own initiative, never as a reaction to a state
//!   that was not seen.
//! - Every `actionStates` (3.0: also `instantActionStates`) status change of a
//!   vehicle becomes an **actuation report**: a `tool_output` (`tool =
//!   "vda5050.action"`) authored by the vehicle, citing the order or instant actions
//!   that requested the action (when the vehicle sidecar knows its id) and the state
//!   that reports the change.
//! - **Order progress is actuation** (VDA 5050 §6.10.2, read by
//!   [`audita_vda5050::progress`]): when a vehicle state shows it further along its
//!   order than the last one reported — a node reached, or the released edge after it
//!   entered — the vehicle's sidecar signs a **progress report**: a `tool_output`
//!   (`tool = "vda5050.progress"`) authored by the vehicle, citing the state and the
//!   order update(s) that first released the node and the edge
//!   ([`audita_vda5050::first_release`], updates up to the state's `orderUpdateId`).
//!   Its output is a function of the state alone (`orderId`, `orderUpdateId`, the node
//!   and edge with their sequence ids, `driving`, `stateHeaderId`); memory decides
//!   only whether it is emitted. So an order whose only action is a `drop` at its
//!   last node — the ordinary transport order — is realised the moment the vehicle
//!   drives its first edge, and an incident on that edge has the releasing order
//!   as its anchor.
//! - Deterministic: the envelope is a function of the payload bytes, the message's
//!   own `timestamp` (ms since the Unix epoch) and the citations; a redelivered
//!   message is signed to the same bytes (Ed25519 is deterministic) and so to the same
//!   message id, which the sealer dedupes.
//! - Coordinates and speeds are converted from metres (per second) to integer
//!   millimetres (per second), rounded; a non-finite or absurd value gives no effect
//!   rather than a wrong one.

use std::collections::{BTreeMap, VecDeque};

use audita_evidence::{Effect, Envelope, MessageId, Payload, PrincipalId};
use serde_json::{json, Value};

use crate::check::{Message, Rejection};
use crate::schema::Release;
use crate::topic::Kind;

/// `sensor` of a vehicle report: `vda5050.` + topic.
pub fn sensor_name(kind: Kind) -> String {
    format!("vda5050.{}", kind.name())
}

/// `tool` of an actuation report.
pub const ACTION_TOOL: &str = "vda5050.action";
/// `tool` of a progress report (order progress as actuation).
pub const PROGRESS_TOOL: &str = "vda5050.progress";
/// `source` of the root a command cites when no vehicle state is known.
pub const NO_STATE_SOURCE: &str = "vda5050.master-control";

/// How vehicle principals are named: a template over `{manufacturer}` and
/// `{serialNumber}` (both sidecars must use the same one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VehicleNames {
    template: String,
}

/// The default template: `{manufacturer}.{serialNumber}`.
pub const DEFAULT_VEHICLE_TEMPLATE: &str = "{manufacturer}.{serialNumber}";

impl VehicleNames {
    /// A template; it must name `{serialNumber}` (one principal per vehicle).
    pub fn new(template: &str) -> Result<VehicleNames, String> {
        if !template.contains("{serialNumber}") {
            return Err(format!(
                "vehicle principal template {template:?} does not name {{serialNumber}}"
            ));
        }
        Ok(VehicleNames {
            template: template.to_string(),
        })
    }

    /// The principal of vehicle `manufacturer`/`serial`.
    pub fn principal(&self, manufacturer: &str, serial: &str) -> Result<PrincipalId, Rejection> {
        let name = self
            .template
            .replace("{manufacturer}", manufacturer)
            .replace("{serialNumber}", serial);
        PrincipalId::new(name.clone()).map_err(|e| {
            Rejection::new(
                "name",
                format!("vehicle {manufacturer}/{serial}: principal name {name:?}: {e}"),
            )
        })
    }
}

impl Default for VehicleNames {
    fn default() -> Self {
        VehicleNames {
            template: DEFAULT_VEHICLE_TEMPLATE.to_string(),
        }
    }
}

/// The sensor root of a vehicle-authored message.
pub fn vehicle_report(
    msg: &Message,
    vehicle: &PrincipalId,
    master: &PrincipalId,
    timestamp_ms: u64,
) -> Envelope {
    Envelope::new(
        vehicle.clone(),
        master.clone(),
        timestamp_ms,
        Payload::SensorReport {
            sensor: sensor_name(msg.topic.kind),
            reading: msg.text.clone(),
        },
    )
}

/// The derived command of a master-control message, citing `cites` (the vehicle
/// state it reacts to, or the [`no_state_root`]).
pub fn command(
    msg: &Message,
    master: &PrincipalId,
    vehicle: &PrincipalId,
    timestamp_ms: u64,
    cites: impl IntoIterator<Item = MessageId>,
) -> Envelope {
    Envelope::new(
        master.clone(),
        vehicle.clone(),
        timestamp_ms,
        Payload::AgentText {
            text: msg.text.clone(),
        },
    )
    .cite(cites)
    .with_effect(effect(msg, vehicle))
}

/// The root a command cites when the master-control sidecar knows no state of the
/// vehicle: master control's own input, naming the command it precedes.
pub fn no_state_root(
    msg: &Message,
    master: &PrincipalId,
    vehicle: &PrincipalId,
    timestamp_ms: u64,
) -> Envelope {
    Envelope::new(
        master.clone(),
        master.clone(),
        timestamp_ms,
        Payload::ExternalInput {
            source: NO_STATE_SOURCE.into(),
            text: format!(
                "{} headerId {} to {vehicle}: no state of the vehicle was known to the bridge",
                msg.topic.kind.name(),
                msg.header_id
            ),
        },
    )
}

fn mm(metres: Option<f64>) -> Option<i64> {
    let m = metres?;
    let v = (m * 1000.0).round();
    (v.is_finite() && v.abs() < 1e15).then_some(v as i64)
}

/// The committed effect of a master-control message on `vehicle`.
pub fn effect(msg: &Message, vehicle: &PrincipalId) -> Effect {
    let v = &msg.value;
    let target = vehicle.as_str().to_string();
    match msg.topic.kind {
        Kind::Order => {
            let goal = v["nodes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|n| n["released"].as_bool() == Some(true))
                .filter(|n| n["nodePosition"].is_object())
                .max_by_key(|n| n["sequenceId"].as_u64().unwrap_or(0));
            if let Some(n) = goal {
                let p = &n["nodePosition"];
                if let (Some(x_mm), Some(y_mm)) = (mm(p["x"].as_f64()), mm(p["y"].as_f64())) {
                    // The published 2.0.0 schema spells it `allowedDeviationXy`
                    // (its text and 2.1 say `…XY`); implementations that follow the
                    // schema send that, which the 2.1.0 schema lets through.
                    let deviation = p["allowedDeviationXY"].as_f64().or_else(|| {
                        v["version"]
                            .as_str()
                            .filter(|v| v.starts_with("2.0."))
                            .and(p["allowedDeviationXy"].as_f64())
                    });
                    let tol = mm(deviation.or(Some(0.5)))
                        .filter(|t| *t >= 0)
                        .unwrap_or(500);
                    return Effect::AtPosition {
                        target,
                        x_mm,
                        y_mm,
                        tolerance_mm: tol as u64,
                    };
                }
            }
            Effect::Claim(format!(
                "vda5050 order {} update {}",
                v["orderId"].as_str().unwrap_or(""),
                v["orderUpdateId"].as_u64().unwrap_or(0)
            ))
        }
        Kind::InstantActions => {
            let types: Vec<String> = audita_vda5050::instant_actions(v)
                .into_iter()
                .map(|(_, t)| t)
                .collect();
            // `startPause` stops the vehicle; `cancelOrder` stops it and deletes the
            // order (VDA 5050 §6.6.3): both commit to the vehicle halted.
            if types
                .iter()
                .any(|t| t == "startPause" || t == "cancelOrder")
            {
                Effect::Halted { target }
            } else {
                Effect::Claim(format!("vda5050 instantActions {}", types.join(",")))
            }
        }
        k => Effect::Claim(format!("vda5050 {} headerId {}", k.name(), msg.header_id)),
    }
}

/// The actions a master-control message requests: `(actionId, actionType)`, from an
/// order's nodes and edges or an instant-actions list.
pub fn requested_actions(msg: &Message) -> Vec<(String, String)> {
    let v = &msg.value;
    let lists: Vec<&Value> = match msg.topic.kind {
        Kind::Order => ["nodes", "edges"]
            .iter()
            .flat_map(|k| v[*k].as_array().into_iter().flatten())
            .map(|n| &n["actions"])
            .collect(),
        Kind::InstantActions => return audita_vda5050::instant_actions(v),
        _ => Vec::new(),
    };
    lists
        .into_iter()
        .flat_map(|l| l.as_array().into_iter().flatten())
        .filter_map(|a| {
            Some((
                a["actionId"].as_str()?.to_string(),
                a["actionType"].as_str().unwrap_or("").to_string(),
            ))
        })
        .collect()
}

/// One action's status in a state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionStatus {
    /// `actionId`.
    pub action_id: String,
    /// `actionType`, if the state names it.
    pub action_type: Option<String>,
    /// `actionStatus`.
    pub status: String,
}

/// The action statuses a state reports (`actionStates`, and in 3.0
/// `instantActionStates` and `zoneActionStates`).
pub fn action_states(msg: &Message) -> Vec<ActionStatus> {
    if msg.topic.kind != Kind::State {
        return Vec::new();
    }
    ["actionStates", "instantActionStates", "zoneActionStates"]
        .iter()
        .flat_map(|k| msg.value[*k].as_array().into_iter().flatten())
        .filter_map(|a| {
            Some(ActionStatus {
                action_id: a["actionId"].as_str()?.to_string(),
                action_type: a["actionType"].as_str().map(str::to_string),
                status: a["actionStatus"].as_str()?.to_string(),
            })
        })
        .collect()
}

/// An action whose status changed between two states of one vehicle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    /// `actionId`.
    pub action_id: String,
    /// `actionType`, if known.
    pub action_type: Option<String>,
    /// The status before (`None`: first seen).
    pub from: Option<String>,
    /// The status now.
    pub to: String,
}

/// The last status of each action of one vehicle, bounded (oldest forgotten first).
#[derive(Debug, Clone)]
pub struct ActionMemory {
    last: BTreeMap<String, String>,
    order: VecDeque<String>,
    cap: usize,
}

impl ActionMemory {
    /// Remembers at most `cap` actions.
    pub fn new(cap: usize) -> ActionMemory {
        ActionMemory {
            last: BTreeMap::new(),
            order: VecDeque::new(),
            cap: cap.max(1),
        }
    }

    /// The transitions `states` shows against what was remembered, remembered now.
    pub fn transitions(&mut self, states: &[ActionStatus]) -> Vec<Transition> {
        let mut out = Vec::new();
        for s in states {
            let before = self.last.get(&s.action_id).cloned();
            if before.as_deref() == Some(s.status.as_str()) {
                continue;
            }
            if before.is_none() {
                self.order.push_back(s.action_id.clone());
                while self.order.len() > self.cap {
                    if let Some(old) = self.order.pop_front() {
                        self.last.remove(&old);
                    }
                }
            }
            self.last.insert(s.action_id.clone(), s.status.clone());
            out.push(Transition {
                action_id: s.action_id.clone(),
                action_type: s.action_type.clone(),
                from: before,
                to: s.status.clone(),
            });
        }
        out
    }
}

/// The actuation report of `t`, seen in the vehicle state `state` (header
/// `state_header_id`), citing the requesting message (if known) and that state.
pub fn actuation_report(
    vehicle: &PrincipalId,
    master: &PrincipalId,
    timestamp_ms: u64,
    state_header_id: u64,
    t: &Transition,
    cites: impl IntoIterator<Item = MessageId>,
) -> Envelope {
    let output = json!({
        "actionId": t.action_id,
        "actionType": t.action_type,
        "actionStatus": t.to,
        "previous": t.from,
        "stateHeaderId": state_header_id,
    });
    Envelope::new(
        vehicle.clone(),
        master.clone(),
        timestamp_ms,
        Payload::ToolOutput {
            tool: ACTION_TOOL.into(),
            output: output.to_string(),
        },
    )
    .cite(cites)
}

/// What a progress report states of the vehicle `state` message it was read from.
#[derive(Clone, Copy, Debug)]
pub struct StateSeen {
    /// The state's header id.
    pub header_id: u64,
    /// The state's `orderUpdateId`.
    pub update_id: u64,
    /// The state's `driving`.
    pub driving: bool,
}

/// The progress report of `p`, seen in the vehicle state `seen`, citing that state
/// and the order updates that released its node and edge (those whose ids are known).
pub fn progress_report(
    vehicle: &PrincipalId,
    master: &PrincipalId,
    timestamp_ms: u64,
    seen: StateSeen,
    p: &audita_vda5050::Progress,
    cites: impl IntoIterator<Item = MessageId>,
) -> Envelope {
    let output = json!({
        "orderId": p.order_id,
        "orderUpdateId": seen.update_id,
        "node": {"nodeId": p.node.0, "sequenceId": p.node.1},
        "edge": p.edge.as_ref().map(|(id, seq)| json!({"edgeId": id, "sequenceId": seq})),
        "driving": seen.driving,
        "stateHeaderId": seen.header_id,
    });
    let mut cites: Vec<MessageId> = cites.into_iter().collect();
    cites.sort();
    cites.dedup();
    Envelope::new(
        vehicle.clone(),
        master.clone(),
        timestamp_ms,
        Payload::ToolOutput {
            tool: PROGRESS_TOOL.into(),
            output: output.to_string(),
        },
    )
    .cite(cites)
}

/// What a vehicle state says about pose, motion and safety, in integer units.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct StateFacts {
    /// Position x in mm (`agvPosition` / 3.0 `mobileRobotPosition`).
    pub x_mm: Option<i64>,
    /// Position y in mm.
    pub y_mm: Option<i64>,
    /// Heading in milliradians.
    pub theta_mrad: Option<i64>,
    /// Map of the position.
    pub map_id: Option<String>,
    /// Whether the position is initialised / localised.
    pub localized: Option<bool>,
    /// Speed over ground, `hypot(vx, vy)` in mm/s.
    pub speed_mm_s: Option<i64>,
    /// `driving`.
    pub driving: Option<bool>,
    /// The e-stop state (`eStop` / 3.0 `activeEmergencyStop`).
    pub e_stop: Option<String>,
    /// `fieldViolation`.
    pub field_violation: Option<bool>,
    /// Active errors: `(errorType, errorLevel)`.
    pub errors: Vec<(String, String)>,
}

/// Reads [`StateFacts`] from a state payload of `release`.
pub fn state_facts(value: &Value, release: Release) -> StateFacts {
    let (pos, estop) = match release {
        Release::V2_1_0 => ("agvPosition", "eStop"),
        Release::V3_0_0 => ("mobileRobotPosition", "activeEmergencyStop"),
    };
    let p = &value[pos];
    let vel = &value["velocity"];
    let speed = match (vel["vx"].as_f64(), vel["vy"].as_f64()) {
        (None, None) => None,
        (vx, vy) => mm(Some(vx.unwrap_or(0.0).hypot(vy.unwrap_or(0.0)))),
    };
    StateFacts {
        x_mm: mm(p["x"].as_f64()),
        y_mm: mm(p["y"].as_f64()),
        theta_mrad: mm(p["theta"].as_f64()),
        map_id: p["mapId"].as_str().map(str::to_string),
        localized: p["positionInitialized"]
            .as_bool()
            .or(p["localized"].as_bool()),
        speed_mm_s: speed,
        driving: value["driving"].as_bool(),
        e_stop: value["safetyState"][estop].as_str().map(str::to_string),
        field_violation: value["safetyState"]["fieldViolation"].as_bool(),
        errors: value["errors"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| {
                (
                    e["errorType"].as_str().unwrap_or("").to_string(),
                    e["errorLevel"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;
    use audita_evidence::SigningKey;

    use crate::testing::intake;

    fn pid(s: &str) -> PrincipalId {
        PrincipalId::new(s).unwrap()
    }

    fn key(n: u8) -> SigningKey {
        SigningKey::from_bytes(&[n; 32])
    }

    #[test]
    fn a_state_is_the_vehicles_sensor_root_carrying_the_exact_payload() {
        let i = intake("v2");
        let text = testing::state("2.1.0", "acme", "7", 3, 1.5, -2.25, 0.8);
        let m = i.check("uagv/v2/acme/7/state", text.as_bytes()).unwrap();
        let names = VehicleNames::default();
        let agv = names.principal("acme", "7").unwrap();
        assert_eq!(agv.as_str(), "acme.7");
        let e = vehicle_report(&m, &agv, &pid("master"), m.timestamp_ms.unwrap());
        assert!(e.payload.is_root());
        assert_eq!(e.author, agv);
        assert_eq!(e.destination.as_str(), "master");
        assert_eq!(e.timestamp, 1_767_225_600_003);
        match &e.payload {
            Payload::SensorReport { sensor, reading } => {
                assert_eq!(sensor, "vda5050.state");
                assert_eq!(reading, &text);
            }
            p => panic!("{p:?}"),
        }
        // Deterministic: the same message signs to the same id.
        let a = e.clone().sign(&key(1)).unwrap();
        let b = vehicle_report(&m, &agv, &pid("master"), m.timestamp_ms.unwrap())
            .sign(&key(1))
            .unwrap();
        assert_eq!(a.id(), b.id());
        let f = state_facts(&m.value, m.release);
        assert_eq!(
            (f.x_mm, f.y_mm, f.speed_mm_s),
            (Some(1500), Some(-2250), Some(800))
        );
        assert_eq!(f.e_stop.as_deref(), Some("NONE"));
        assert_eq!(f.field_violation, Some(false));
        assert_eq!(f.localized, Some(true));
    }

    #[test]
    fn facts_read_both_releases() {
        let i = intake("v3");
        let text = testing::state("3.0.0", "acme", "7", 3, 3.0, 4.0, -0.5);
        let m = i.check("uagv/v3/acme/7/state", text.as_bytes()).unwrap();
        let f = state_facts(&m.value, m.release);
        assert_eq!(
            (f.x_mm, f.y_mm, f.speed_mm_s),
            (Some(3000), Some(4000), Some(500))
        );
        assert_eq!(f.e_stop.as_deref(), Some("NONE"));
        assert_eq!(f.map_id.as_deref(), Some("hall-1"));
    }

    #[test]
    fn an_order_is_master_controls_command_citing_the_state_with_its_goal_as_effect() {
        let i = intake("v2");
        let text = testing::order("2.1.0", "acme", "7", 9, "o-1", &[("a-1", "pick")]);
        let m = i.check("uagv/v2/acme/7/order", text.as_bytes()).unwrap();
        let agv = pid("acme.7");
        let state = vehicle_report(
            &i.check(
                "uagv/v2/acme/7/state",
                testing::state("2.1.0", "acme", "7", 3, 0.0, 0.0, 0.0).as_bytes(),
            )
            .unwrap(),
            &agv,
            &pid("master"),
            1,
        )
        .sign(&key(1))
        .unwrap();
        let e = command(&m, &pid("master"), &agv, 5, [state.id().clone()]);
        assert!(!e.payload.is_root());
        assert_eq!(e.citations, vec![state.id().clone()]);
        assert_eq!(e.destination, agv);
        assert_eq!(
            e.effect,
            Effect::AtPosition {
                target: "acme.7".into(),
                x_mm: 10_000,
                y_mm: 5_000,
                tolerance_mm: 250
            }
        );
        assert!(e.sign(&key(2)).is_ok());
        // Uncited it would not sign: the citation rule holds.
        assert!(command(&m, &pid("master"), &agv, 5, [])
            .sign(&key(2))
            .is_err());
        // With no state seen it cites master control's own root.
        let root = no_state_root(&m, &pid("master"), &agv, 5);
        assert!(root.payload.is_root());
        assert_eq!(root.author.as_str(), "master");
        assert_eq!(requested_actions(&m), vec![("a-1".into(), "pick".into())]);
    }

    /// Regression (issue 14, vda-5050-lib 1.4.0): the published VDA 5050 2.0.0
    /// order schema spells the node's deviation `allowedDeviationXy` (the 2.0 text
    /// and 2.1 say `allowedDeviationXY`); a 2.0 order passes the 2.1.0 schema with
    /// it, and its effect must use it, not the 0.5 m default.
    #[test]
    fn a_2_0_orders_allowed_deviation_xy_sets_the_effects_tolerance() {
        let i = intake("v2");
        let text = testing::order("2.0.0", "acme", "7", 9, "o-1", &[])
            .replace("\"allowedDeviationXY\"", "\"allowedDeviationXy\"");
        let m = i.check("uagv/v2/acme/7/order", text.as_bytes()).unwrap();
        let tolerance = |m: &Message| match effect(m, &pid("acme.7")) {
            Effect::AtPosition { tolerance_mm, .. } => tolerance_mm,
            e => panic!("{e:?}"),
        };
        assert_eq!(tolerance(&m), 250);
        // Only in a 2.0 message: a 2.1 order with the 2.0 spelling has no deviation.
        let text = text.replace("\"2.0.0\"", "\"2.1.0\"");
        let m = i.check("uagv/v2/acme/7/order", text.as_bytes()).unwrap();
        assert_eq!(tolerance(&m), 500);
    }

    #[test]
    fn instant_pause_commits_to_a_halt() {
        let i = intake("v2");
        let text = testing::instant_actions("2.1.0", "acme", "7", 2, &[("p-1", "startPause")]);
        let m = i
            .check("uagv/v2/acme/7/instantActions", text.as_bytes())
            .unwrap();
        assert_eq!(
            effect(&m, &pid("acme.7")),
            Effect::Halted {
                target: "acme.7".into()
            }
        );
        let text =
            testing::instant_actions("2.1.0", "acme", "7", 2, &[("f-1", "factsheetRequest")]);
        let m = i
            .check("uagv/v2/acme/7/instantActions", text.as_bytes())
            .unwrap();
        assert_eq!(
            effect(&m, &pid("acme.7")),
            Effect::Claim("vda5050 instantActions factsheetRequest".into())
        );
        assert_eq!(
            requested_actions(&m),
            vec![("f-1".into(), "factsheetRequest".into())]
        );
    }

    #[test]
    fn action_transitions_are_reported_once_each() {
        let i = intake("v2");
        let mut mem = ActionMemory::new(8);
        let st = |h, status: &str| {
            let text = testing::state_with_actions(
                "2.1.0",
                "acme",
                "7",
                h,
                0.0,
                0.0,
                0.0,
                "o-1",
                &[("a-1", "pick", status)],
            );
            action_states(&i.check("uagv/v2/acme/7/state", text.as_bytes()).unwrap())
        };
        let t = mem.transitions(&st(1, "WAITING"));
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].from, None);
        assert!(
            mem.transitions(&st(2, "WAITING")).is_empty(),
            "no change, no report"
        );
        let t = mem.transitions(&st(3, "RUNNING"));
        assert_eq!(t[0].from.as_deref(), Some("WAITING"));
        assert_eq!(t[0].to, "RUNNING");
        // A redelivered state changes nothing.
        assert!(mem.transitions(&st(3, "RUNNING")).is_empty());
        let r = actuation_report(&pid("acme.7"), &pid("master"), 7, 3, &t[0], []);
        assert!(!r.payload.is_root());
        match r.payload {
            Payload::ToolOutput { tool, output } => {
                assert_eq!(tool, ACTION_TOOL);
                let v: Value = serde_json::from_str(&output).unwrap();
                assert_eq!(v["actionStatus"], "RUNNING");
                assert_eq!(v["previous"], "WAITING");
            }
            p => panic!("{p:?}"),
        }
    }

    #[test]
    fn the_action_memory_is_bounded() {
        let mut mem = ActionMemory::new(2);
        let s = |id: &str| ActionStatus {
            action_id: id.into(),
            action_type: None,
            status: "RUNNING".into(),
        };
        for id in ["a", "b", "c"] {
            assert_eq!(mem.transitions(&[s(id)]).len(), 1);
        }
        assert_eq!(mem.last.len(), 2);
        assert_eq!(mem.transitions(&[s("a")]).len(), 1, "a was forgotten");
    }

    #[test]
    fn vehicle_names_must_be_principal_names() {
        let n = VehicleNames::new("agv/{manufacturer}/{serialNumber}").unwrap();
        assert_eq!(n.principal("acme", "7").unwrap().as_str(), "agv/acme/7");
        assert_eq!(n.principal("acme", "a b").unwrap_err().reason, "name");
        assert!(VehicleNames::new("{manufacturer}").is_err());
    }
}
