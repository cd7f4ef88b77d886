//! VDA 5050 evidence as the monitor reads it: what the VDA 5050 bridge
//! (`audita bridge vda5050`, crate `audita_bridge`) records from an AGV fleet, read as
//! telemetry, actuating commands and actuation reports, so that predicates fire over
//! a real fleet's recorded vehicle states.
//!
//! Design constraints:
//! - A certified `sensor_report` of sensor [`STATE_SENSOR`] carries one vehicle
//!   `state` exactly as the vehicle sent it (VDA 5050 2.x or 3.x JSON, checked
//!   against the official schema by the bridge). It is one observation of the
//!   entity named by the report's **author** — the vehicle's registered principal,
//!   never a name inside the payload — so a vehicle can report only its own state.
//!   Its class is the one the predicate file registers for that name, else `robot`.
//! - Fields, in the telemetry conventions ([`crate::telemetry`]), integers: `x_mm`,
//!   `y_mm`, `theta_mrad` from `agvPosition` (3.x `mobileRobotPosition`),
//!   `speed_mm_per_s` = `hypot(vx, vy)` of `velocity`; and `driving`,
//!   `field_violation` (booleans), `e_stop`, `operating_mode`, `map_id` (strings),
//!   `errors` (how many). A field the state does not carry is absent; a
//!   non-finite or absurd number is absent, never a wrong value. A reading that is
//!   not a JSON object is malformed telemetry (counted, never fatal).
//! - An `agent_text` addressed to an entity whose committed effect is a physical one
//!   on that same entity (at a position, at a speed, halted, a parameter) is an
//!   actuating command on it — the bridge records master control's `order` with the
//!   vehicle at its goal node as the effect, and `startPause` as halted. Its kind is
//!   the typed command's of that effect (`move_to`, `set_speed`, `halt`,
//!   `set_param`). A `claim` effect commits to nothing physical and is no actuation.
//! - A `tool_output` of tool [`ACTION_TOOL`] authored by the vehicle is an actuation
//!   report of the command(s) it cites when its `actionStatus` is `RUNNING` or
//!   `FINISHED` (the vehicle executes or executed an action the command requested);
//!   `WAITING`, `INITIALIZING`, `PAUSED` and `FAILED` realise nothing.
//! - A `tool_output` of tool [`PROGRESS_TOOL`] authored by the vehicle (the bridge's
//!   progress report: a node reached or a released edge entered) is an actuation
//!   report of the order update(s) it cites — but only of an order whose `orderId`
//!   is the report's and which released one of the reported elements
//!   ([`crate::detect`] checks it against the order's text when it declares).
//! - The state's order progress is read as fields too (by
//!   [`audita_vda5050::progress`]): `order_id`, `order_update_id` (string, integer),
//!   `last_node_sequence_id`, and `edge_sequence_id` while the vehicle is on a
//!   released edge.

use std::collections::BTreeMap;

use audita_evidence::{Effect, Envelope, Payload};
use serde_json::Value as Json;

use crate::telemetry::{Observation, TelemetryError, Value};

/// `sensor` of a vehicle `state` report.
pub const STATE_SENSOR: &str = "vda5050.state";
/// `tool` of a vehicle's actuation report (an action status change).
pub const ACTION_TOOL: &str = "vda5050.action";
/// `tool` of a vehicle's progress report (order progress as actuation).
pub const PROGRESS_TOOL: &str = "vda5050.progress";
/// Class of a vehicle the predicate file does not register.
pub const DEFAULT_CLASS: &str = "robot";

fn mm(v: &Json) -> Option<i64> {
    let m = (v.as_f64()? * 1000.0).round();
    (m.is_finite() && m.abs() < 1e15).then_some(m as i64)
}

/// The observation a vehicle `state` (the exact payload text) gives of `entity`.
pub fn observation(
    entity: &str,
    class: &str,
    reading: &str,
) -> Result<Observation, TelemetryError> {
    let v: Json =
        serde_json::from_str(reading).map_err(|e| TelemetryError(format!("vda5050 state: {e}")))?;
    if !v.is_object() {
        return Err(TelemetryError("vda5050 state: not a JSON object".into()));
    }
    let pos = if v["agvPosition"].is_object() {
        &v["agvPosition"]
    } else {
        &v["mobileRobotPosition"]
    };
    let mut fields = BTreeMap::new();
    let mut int = |k: &str, x: Option<i64>| {
        if let Some(x) = x {
            fields.insert(k.to_string(), Value::Int(x));
        }
    };
    int("x_mm", mm(&pos["x"]));
    int("y_mm", mm(&pos["y"]));
    int("theta_mrad", mm(&pos["theta"]));
    let vel = &v["velocity"];
    if vel["vx"].is_number() || vel["vy"].is_number() {
        let s = vel["vx"]
            .as_f64()
            .unwrap_or(0.0)
            .hypot(vel["vy"].as_f64().unwrap_or(0.0));
        int("speed_mm_per_s", mm(&Json::from(s)));
    }
    int("errors", v["errors"].as_array().map(|e| e.len() as i64));
    let estop = if v["safetyState"]["eStop"].is_string() {
        &v["safetyState"]["eStop"]
    } else {
        &v["safetyState"]["activeEmergencyStop"]
    };
    for (k, j) in [
        ("e_stop", estop),
        ("operating_mode", &v["operatingMode"]),
        ("map_id", &pos["mapId"]),
    ] {
        if let Some(s) = j.as_str() {
            fields.insert(k.to_string(), Value::Str(s.to_string()));
        }
    }
    for (k, j) in [
        ("driving", &v["driving"]),
        ("field_violation", &v["safetyState"]["fieldViolation"]),
    ] {
        if let Some(b) = j.as_bool() {
            fields.insert(k.to_string(), Value::Bool(b));
        }
    }
    if let Some(state) = audita_vda5050::StateView::from_value(&v) {
        if !state.order_id.is_empty() {
            fields.insert("order_id".into(), Value::Str(state.order_id.clone()));
            fields.insert(
                "order_update_id".into(),
                Value::Int(i64::try_from(state.update_id).unwrap_or(i64::MAX)),
            );
        }
        if let Some(p) = audita_vda5050::progress(&state) {
            let int = |x: u64| Value::Int(i64::try_from(x).unwrap_or(i64::MAX));
            fields.insert("last_node_sequence_id".into(), int(p.node.1));
            if let Some((_, seq)) = p.edge {
                fields.insert("edge_sequence_id".into(), int(seq));
            }
        }
    }
    Ok(Observation {
        entity: entity.to_string(),
        class: class.to_string(),
        fields,
    })
}

/// The order and the sequence ids a progress report's output reaches: `(orderId,
/// [node, edge])`; `None` for anything else.
pub fn progress_of(output: &str) -> Option<(String, Vec<u64>)> {
    let v: Json = serde_json::from_str(output).ok()?;
    let order = v["orderId"].as_str()?.to_string();
    let seqs: Vec<u64> = [&v["node"]["sequenceId"], &v["edge"]["sequenceId"]]
        .into_iter()
        .filter_map(Json::as_u64)
        .collect();
    (!seqs.is_empty()).then_some((order, seqs))
}

/// The VDA 5050 order an `agent_text` command carries (its exact payload), if any.
pub fn order_of(env: &Envelope) -> Option<audita_vda5050::OrderView> {
    match &env.payload {
        Payload::AgentText { text } => audita_vda5050::OrderView::parse(text),
        _ => None,
    }
}

/// Whether an actuation report's output (the bridge's action status change) says the
/// vehicle executes or executed the action.
pub fn realises(output: &str) -> bool {
    serde_json::from_str::<Json>(output)
        .ok()
        .and_then(|v| v["actionStatus"].as_str().map(str::to_string))
        .is_some_and(|s| s == "RUNNING" || s == "FINISHED")
}

/// The entity a command acts on and its kind: a typed command's target, or an
/// `agent_text` whose committed physical effect is on its destination.
pub fn actuating(env: &Envelope) -> Option<(&str, &'static str)> {
    if let Some(t) = env.payload.target() {
        return Some((t, env.payload.kind()));
    }
    if !matches!(env.payload, Payload::AgentText { .. }) {
        return None;
    }
    let (target, kind) = match &env.effect {
        Effect::AtPosition { target, .. } => (target, "move_to"),
        Effect::Speed { target, .. } => (target, "set_speed"),
        Effect::Halted { target } => (target, "halt"),
        Effect::Param { target, .. } => (target, "set_param"),
        Effect::None | Effect::Claim(_) => return None,
    };
    (env.destination.as_str() == target).then_some((target.as_str(), kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATE_2: &str = r#"{"headerId":16,"timestamp":"2026-12-02T14:17:20.545Z","version":"2.0.0","manufacturer":"acme","serialNumber":"agv1","orderId":"o","orderUpdateId":0,"lastNodeId":"A","lastNodeSequenceId":0,"nodeStates":[],"edgeStates":[],"driving":true,"actionStates":[],"batteryState":{"batteryCharge":100,"charging":false},"operatingMode":"AUTOMATIC","errors":[],"safetyState":{"eStop":"NONE","fieldViolation":false},"agvPosition":{"positionInitialized":true,"mapId":"hall-1","x":2.2049,"y":-0.5,"theta":0},"velocity":{"omega":0,"vx":2,"vy":0}}"#;

    #[test]
    fn a_state_is_an_observation_of_its_author_in_integer_units() {
        let o = observation("acme.agv1", "robot", STATE_2).unwrap();
        assert_eq!(o.entity, "acme.agv1");
        assert_eq!(o.fields["x_mm"], Value::Int(2205));
        assert_eq!(o.fields["y_mm"], Value::Int(-500));
        assert_eq!(o.fields["speed_mm_per_s"], Value::Int(2000));
        assert_eq!(o.fields["driving"], Value::Bool(true));
        assert_eq!(o.fields["e_stop"], Value::Str("NONE".into()));
        assert_eq!(o.fields["errors"], Value::Int(0));
        assert_eq!(o.fields["map_id"], Value::Str("hall-1".into()));
    }

    #[test]
    fn a_3x_state_reads_the_mobile_robot_position() {
        let s = r#"{"mobileRobotPosition":{"x":1,"y":2,"theta":0.5,"mapId":"m","localized":true},"velocity":{"vx":0.3,"vy":0.4},"safetyState":{"activeEmergencyStop":"NONE","fieldViolation":true}}"#;
        let o = observation("v", "robot", s).unwrap();
        assert_eq!(o.fields["x_mm"], Value::Int(1000));
        assert_eq!(o.fields["theta_mrad"], Value::Int(500));
        assert_eq!(o.fields["speed_mm_per_s"], Value::Int(500));
        assert_eq!(o.fields["field_violation"], Value::Bool(true));
        assert!(!o.fields.contains_key("driving"));
        assert!(observation("v", "robot", "[1]").is_err());
        assert!(observation("v", "robot", "not json").is_err());
    }

    #[test]
    fn only_running_or_finished_actions_realise() {
        for (s, want) in [
            ("RUNNING", true),
            ("FINISHED", true),
            ("WAITING", false),
            ("INITIALIZING", false),
            ("FAILED", false),
        ] {
            let out = format!(r#"{{"actionId":"a","actionStatus":"{s}"}}"#);
            assert_eq!(realises(&out), want, "{s}");
        }
        assert!(!realises("RUNNING"));
    }
}
