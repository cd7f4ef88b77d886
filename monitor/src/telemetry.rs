//! The telemetry format: what a certified `sensor_report` carries when it reports
//! typed state the predicates read.
//!
//! Design constraints:
//! - A telemetry report is a certified `sensor_report` whose `reading` is one JSON
//!   object `{"telemetry": 1, "observations": [{"entity": NAME, "class": CLASS,
//!   "fields": {FIELD: VALUE, …}}, …]}` (unknown keys refused). A value is a JSON
//!   integer, number, boolean or string; `null`, arrays and objects are refused.
//! - Any other reading (free text such as `human worker-1 entered aisle`) is not
//!   telemetry and is ignored; a reading that starts like telemetry but breaks the
//!   format is [`TelemetryError`] (counted by the monitor, never fatal).
//! - Bounded: at most [`MAX_OBSERVATIONS`] observations of at most [`MAX_FIELDS`]
//!   fields each; names at most [`MAX_NAME`] bytes.
//! - Field conventions the predicate kinds read: `x_mm`, `y_mm` (position), a speed
//!   field named by the predicate (the facility's `speed_mm_per_s`), and for
//!   committed effects: `speed_mm_per_s` (an `Effect::Speed`) and the parameter's own
//!   name (an `Effect::Param`).

use serde::Deserialize;
use std::collections::BTreeMap;

/// Largest number of observations in one report.
pub const MAX_OBSERVATIONS: usize = 10_000;
/// Largest number of fields in one observation.
pub const MAX_FIELDS: usize = 64;
/// Longest entity, class or field name (bytes).
pub const MAX_NAME: usize = 256;

/// A typed telemetry value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// An integer.
    Int(i64),
    /// A floating-point number (finite).
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// A string.
    Str(String),
}

impl Value {
    /// The value as a number, if it is one.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::Int(i) => Some(i as f64),
            Value::Float(f) => Some(f),
            _ => None,
        }
    }

    fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Int(i) => (*i).into(),
            Value::Float(f) => serde_json::Number::from_f64(*f)
                .map(serde_json::Value::Number)
                .unwrap_or(serde_json::Value::Null),
            Value::Bool(b) => (*b).into(),
            Value::Str(s) => s.clone().into(),
        }
    }
}

/// One entity's reported state.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    /// Entity name (a robot, a human's tag, a batch).
    pub entity: String,
    /// Entity class (`robot`, `human`, `batch`, …).
    pub class: String,
    /// Reported fields.
    pub fields: BTreeMap<String, Value>,
}

/// A malformed telemetry reading.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("telemetry: {0}")]
pub struct TelemetryError(pub String);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Reading {
    telemetry: u32,
    observations: Vec<ObservationDecl>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ObservationDecl {
    entity: String,
    class: String,
    #[serde(default)]
    fields: BTreeMap<String, serde_json::Value>,
}

/// Parses a `sensor_report` reading: `None` when it is not telemetry, the
/// observations when it is, an error when it claims to be and breaks the format.
pub fn parse(reading: &str) -> Option<Result<Vec<Observation>, TelemetryError>> {
    let t = reading.trim_start();
    if !t.starts_with('{') || !t.contains("\"telemetry\"") {
        return None;
    }
    Some(parse_telemetry(t))
}

fn parse_telemetry(text: &str) -> Result<Vec<Observation>, TelemetryError> {
    let bad = |s: String| TelemetryError(s);
    let r: Reading = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
    if r.telemetry != 1 {
        return Err(bad(format!(
            "unsupported telemetry version {}",
            r.telemetry
        )));
    }
    if r.observations.len() > MAX_OBSERVATIONS {
        return Err(bad(format!(
            "{} observations (max {MAX_OBSERVATIONS})",
            r.observations.len()
        )));
    }
    let mut out = Vec::with_capacity(r.observations.len());
    for o in r.observations {
        if o.entity.is_empty() || o.entity.len() > MAX_NAME || o.class.len() > MAX_NAME {
            return Err(bad(format!("bad entity or class name {:?}", o.entity)));
        }
        if o.fields.len() > MAX_FIELDS {
            return Err(bad(format!(
                "{} fields for {} (max {MAX_FIELDS})",
                o.fields.len(),
                o.entity
            )));
        }
        let mut fields = BTreeMap::new();
        for (k, v) in o.fields {
            if k.len() > MAX_NAME {
                return Err(bad("field name too long".into()));
            }
            let v = match v {
                serde_json::Value::Bool(b) => Value::Bool(b),
                serde_json::Value::String(s) => Value::Str(s),
                serde_json::Value::Number(n) => match n.as_i64() {
                    Some(i) => Value::Int(i),
                    None => match n.as_f64() {
                        Some(f) if f.is_finite() => Value::Float(f),
                        _ => return Err(bad(format!("field {k} is not a finite number"))),
                    },
                },
                _ => {
                    return Err(bad(format!(
                        "field {k} of {} must be a number, boolean or string",
                        o.entity
                    )))
                }
            };
            fields.insert(k, v);
        }
        out.push(Observation {
            entity: o.entity,
            class: o.class,
            fields,
        });
    }
    Ok(out)
}

/// Writes observations as a telemetry reading (the inverse of [`parse`]).
pub fn reading(observations: &[Observation]) -> String {
    let obs: Vec<serde_json::Value> = observations
        .iter()
        .map(|o| {
            let fields: serde_json::Map<String, serde_json::Value> = o
                .fields
                .iter()
                .map(|(k, v)| (k.clone(), v.to_json()))
                .collect();
            serde_json::json!({"entity": o.entity, "class": o.class, "fields": fields})
        })
        .collect();
    serde_json::json!({"telemetry": 1, "observations": obs}).to_string()
}

/// The reading with every entity renamed by `rename` (`None` when it is not valid
/// telemetry): how a fleet relabels a facility cell's telemetry.
pub fn rename(reading_text: &str, rename: impl Fn(&str) -> String) -> Option<String> {
    let mut obs = parse(reading_text)?.ok()?;
    for o in &mut obs {
        o.entity = rename(&o.entity);
    }
    Some(reading(&obs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_text_is_not_telemetry_and_broken_telemetry_is_an_error() {
        assert!(parse("human worker-1 entered aisle").is_none());
        let e = parse(r#"{"telemetry": 1, "observations": [{"entity": "a", "class": "robot", "fields": {"x": null}}]}"#)
            .unwrap()
            .unwrap_err();
        assert!(e.to_string().contains("field x"), "{e}");
        let e = parse(r#"{"telemetry": 1, "observations": [], "extra": 1}"#)
            .unwrap()
            .unwrap_err();
        assert!(e.to_string().contains("unknown field"), "{e}");
        assert!(parse(r#"{"telemetry": 2, "observations": []}"#)
            .unwrap()
            .is_err());
    }

    #[test]
    fn rename_round_trips_typed_fields() {
        let text = r#"{"telemetry": 1, "observations": [{"entity": "agv-1", "class": "robot", "fields": {"x_mm": -3, "v": 1.5, "halted": false, "mode": "auto"}}]}"#;
        let out = rename(text, |n| format!("c7.{n}")).unwrap();
        let obs = parse(&out).unwrap().unwrap();
        assert_eq!(obs[0].entity, "c7.agv-1");
        assert_eq!(obs[0].fields["x_mm"], Value::Int(-3));
        assert_eq!(obs[0].fields["v"], Value::Float(1.5));
        assert_eq!(obs[0].fields["halted"], Value::Bool(false));
        assert_eq!(obs[0].fields["mode"], Value::Str("auto".into()));
    }
}
