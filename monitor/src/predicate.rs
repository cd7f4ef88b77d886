//! The predicate file: the adverse predicates a deployment declares in advance, as
//! data (SPEC §3, §8).
//!
//! Design constraints (JSON, every object `deny_unknown_fields`):
//! ```json
//! {"version": 1,
//!  "realisation_deadline_ms": 100, "stale_after_ms": 5000,
//!  "entities": {"agv-1": {"class": "robot", "mass_kg": 400},
//!               "worker-1": {"class": "human"}},
//!  "predicates": [
//!   {"name": "separation_below_0.5m", "kind": "separation",
//!    "a": {"class": "robot"}, "b": {"class": "human"}, "below_mm": 500,
//!    "near_miss_margin": 500, "severity": {"kinetic": {"speed_field": "speed_mm_per_s"}}},
//!   {"name": "aisle_overspeed", "kind": "speed_in_zone", "entity": {"name": "agv-*"},
//!    "zone": {"min_mm": [-1000, -2000], "max_mm": [40000, 2000]},
//!    "above_mm_per_s": 1000},
//!   {"name": "batch_parameter_out_of_range", "kind": "out_of_range",
//!    "entity": {"class": "batch"}, "field": "param", "min": 4000, "max": 6000},
//!   {"name": "arm_in_manual_at_speed", "kind": "expression", "entity": {"class": "robot"},
//!    "when": "mode == \"manual\" && speed_mm_per_s > 250", "lookback_ms": 60000}]}
//! ```
//! - `version` is 1. `realisation_deadline_ms` (default 1000): an actuating command
//!   issued at least this long before `t*` whose effect no certified actuation report
//!   realised by `t*` is **unrealised** (its effect never arrived).
//!   `stale_after_ms` (default 5000): a separation pairs two entities' latest
//!   observations only when they lie within this of each other (record time) — an
//!   entity that stopped reporting is not "still there", and one whose reports
//!   arrived ahead of the stream is not "here yet".
//! - `entities`: the registered entities — class and, for kinetic severity, the
//!   mass in kg (finite, positive); optionally the `site` (a building, floor or cell
//!   with its own coordinate frame: a separation pairs only entities of one site,
//!   unregistered entities and those without a site sharing the default one).
//!   Telemetry reports an entity's class too; the registry is what severity trusts
//!   for mass.
//! - A **selector** (`a`, `b`, `entity`) names entities by `class` and/or by a `name`
//!   pattern (`*` matches any run of characters); at least one of the two.
//! - Kinds: `separation` — the Euclidean distance between the positions (`x_mm`,
//!   `y_mm`) of an `a` entity and a `b` entity is below `below_mm`; `speed_in_zone`
//!   — an `entity` inside the axis-aligned `zone` reports `speed_field` (default
//!   `speed_mm_per_s`) above `above_mm_per_s` (`zone` is inline, `{"min_mm",
//!   "max_mm", "map_id"?}`, or the **name** of a zone of the deployment's duty
//!   registry, so the zone a predicate detects in and the zone a duty judges are one
//!   definition: [`Predicates::from_json_with_zones`]; with a `map_id` the entity's
//!   `map_id` must match); `out_of_range` — an `entity`'s
//!   `field` lies outside `[min, max]`; `expression` — `when` (the language of
//!   [`crate::expr`]) holds on an `entity`'s fields.
//! - The predicate's **subject** — the entity whose realised state it reads, whose
//!   actuations become anchors and whose mass and speed give severity — is the `a`
//!   entity of a separation and the `entity` of every other kind.
//! - `near_miss_margin` (optional, ≥ 0, not for `expression`): a near-miss alert fires
//!   when the threshold is missed by less than the margin (separation below
//!   `below_mm + margin`, speed above `above − margin`, a field within `margin`
//!   outside/inside… of the range bounds: below `min + margin` or above `max − margin`).
//! - `severity` (optional): `{"kinetic": {"speed_field": F}}` — ½·m·v² from the
//!   subject's registered mass and its reported `F` (mm/s) at `t*`.
//! - `lookback_ms` (optional): the window the incident slices is
//!   `[t* − lookback_ms, t*]`; without it, `[0, t*]`.
//! - Names are unique and non-empty; thresholds are finite; every error is one line
//!   naming the predicate.

use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};

use crate::expr::Expr;
use crate::MonitorError;

fn default_deadline() -> u64 {
    1000
}

fn default_stale() -> u64 {
    5000
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDecl {
    version: u32,
    #[serde(default = "default_deadline")]
    realisation_deadline_ms: u64,
    #[serde(default = "default_stale")]
    stale_after_ms: u64,
    #[serde(default)]
    entities: BTreeMap<String, EntityDecl>,
    predicates: Vec<PredicateDecl>,
}

/// A registered entity.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntityDecl {
    /// Class (`robot`, `human`, `batch`, …).
    pub class: String,
    /// Registered moving mass (kg).
    #[serde(default)]
    pub mass_kg: Option<f64>,
    /// The site whose coordinate frame its positions are in (none: the default
    /// site); a separation pairs only entities of one site.
    #[serde(default)]
    pub site: Option<String>,
}

/// Entities by class and/or name pattern.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Selector {
    /// Class the entity reports.
    #[serde(default)]
    pub class: Option<String>,
    /// Name pattern (`*` matches any run of characters).
    #[serde(default)]
    pub name: Option<String>,
}

impl Selector {
    /// Whether an entity of this name and class is selected.
    pub fn matches(&self, entity: &str, class: &str) -> bool {
        self.class.as_deref().is_none_or(|c| c == class)
            && self.name.as_deref().is_none_or(|p| glob(p, entity))
    }
}

/// `*`-only glob match, linear in the input for each star (bounded by name lengths).
fn glob(pattern: &str, s: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == s;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !s.starts_with(first) || s.len() < first.len() + last.len() || !s.ends_with(last) {
        return false;
    }
    let mut rest = &s[first.len()..s.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Kind {
    Separation,
    SpeedInZone,
    OutOfRange,
    Expression,
}

/// An axis-aligned zone.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Zone {
    /// Lower corner (mm).
    pub min_mm: [f64; 2],
    /// Upper corner (mm).
    pub max_mm: [f64; 2],
    /// The map it is on (any when absent).
    #[serde(default)]
    pub map_id: Option<String>,
}

impl Zone {
    /// Whether a point lies inside (bounds included).
    pub fn contains(&self, x: f64, y: f64) -> bool {
        x >= self.min_mm[0] && x <= self.max_mm[0] && y >= self.min_mm[1] && y <= self.max_mm[1]
    }

    /// Whether an observation on `map` (its `map_id` field, if any) is on this
    /// zone's map.
    pub fn on_map(&self, map: Option<&str>) -> bool {
        self.map_id.as_deref().is_none_or(|m| map == Some(m))
    }
}

/// A predicate's zone as written: inline, or a name of the duty registry's zones.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum ZoneRef {
    Inline(Zone),
    Named(String),
}

/// How severity is computed at `t*`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum SeverityRule {
    /// ½·m·v² from the subject's registered mass and a reported speed field (mm/s).
    Kinetic {
        /// The speed field.
        speed_field: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PredicateDecl {
    name: String,
    kind: Kind,
    #[serde(default)]
    a: Option<Selector>,
    #[serde(default)]
    b: Option<Selector>,
    #[serde(default)]
    entity: Option<Selector>,
    #[serde(default)]
    below_mm: Option<f64>,
    #[serde(default)]
    zone: Option<ZoneRef>,
    #[serde(default)]
    above_mm_per_s: Option<f64>,
    #[serde(default)]
    speed_field: Option<String>,
    #[serde(default)]
    field: Option<String>,
    #[serde(default)]
    min: Option<f64>,
    #[serde(default)]
    max: Option<f64>,
    #[serde(default)]
    when: Option<String>,
    #[serde(default)]
    near_miss_margin: Option<f64>,
    #[serde(default)]
    severity: Option<SeverityRule>,
    #[serde(default)]
    lookback_ms: Option<u64>,
}

/// What a predicate tests.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    /// Distance between an `a` and a `b` entity below `below_mm`.
    Separation {
        /// The subject's selector.
        a: Selector,
        /// The other party's selector.
        b: Selector,
        /// Threshold (mm).
        below_mm: f64,
    },
    /// A speed above a limit inside a zone.
    SpeedInZone {
        /// Selector.
        entity: Selector,
        /// Zone.
        zone: Zone,
        /// Limit (mm/s).
        above_mm_per_s: f64,
        /// Speed field.
        speed_field: String,
    },
    /// A field outside `[min, max]`.
    OutOfRange {
        /// Selector.
        entity: Selector,
        /// Field.
        field: String,
        /// Lower bound.
        min: f64,
        /// Upper bound.
        max: f64,
    },
    /// An expression over the entity's fields.
    Expression {
        /// Selector.
        entity: Selector,
        /// The source text.
        when: String,
        /// Parsed.
        expr: Expr,
    },
}

impl Condition {
    /// The subject's selector.
    pub fn subject(&self) -> &Selector {
        match self {
            Condition::Separation { a, .. } => a,
            Condition::SpeedInZone { entity, .. }
            | Condition::OutOfRange { entity, .. }
            | Condition::Expression { entity, .. } => entity,
        }
    }
}

/// A validated predicate.
#[derive(Debug, Clone, PartialEq)]
pub struct Predicate {
    /// Unique name (the declaration's `outcome`).
    pub name: String,
    /// What it tests.
    pub condition: Condition,
    /// Near-miss margin (threshold units).
    pub near_miss_margin: Option<f64>,
    /// Severity rule.
    pub severity: Option<SeverityRule>,
    /// Window length before `t*` (none: from 0).
    pub lookback_ms: Option<u64>,
}

/// A validated predicate file.
#[derive(Debug, Clone, PartialEq)]
pub struct Predicates {
    /// Realisation deadline (ms).
    pub realisation_deadline_ms: u64,
    /// Age (ms, record time) after which an entity's last observation no longer
    /// pairs with a fresh one in a separation.
    pub stale_after_ms: u64,
    /// Registered entities.
    pub entities: BTreeMap<String, EntityDecl>,
    /// Predicates in file order (the order ties are reported in).
    pub predicates: Vec<Predicate>,
}

/// The site `entity` is in under an optional predicate file: its registered site,
/// `None` (the default site) without a file or for an unregistered entity.
pub fn site_of<'a>(file: Option<&'a Predicates>, entity: &str) -> Option<&'a str> {
    file.and_then(|f| f.site_of(entity))
}

impl Predicates {
    /// The site `entity` is registered in (`None`: the default site, also that of
    /// an unregistered entity).
    pub fn site_of(&self, entity: &str) -> Option<&str> {
        self.entities.get(entity).and_then(|d| d.site.as_deref())
    }

    /// Parses and validates a predicate file (without named zones: see
    /// [`Self::from_json_with_zones`]).
    pub fn from_json(text: &str) -> Result<Predicates, MonitorError> {
        Self::from_json_with_zones(text, &BTreeMap::new())
    }

    /// Parses and validates a predicate file whose `speed_in_zone` predicates may
    /// name zones of the duty registry.
    pub fn from_json_with_zones(
        text: &str,
        zones: &BTreeMap<String, audita_verdict::Zone>,
    ) -> Result<Predicates, MonitorError> {
        let bad = |s: String| MonitorError::Predicates(s);
        let file: FileDecl = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
        if file.version != 1 {
            return Err(bad(format!("unsupported version {}", file.version)));
        }
        for (name, e) in &file.entities {
            if let Some(m) = e.mass_kg {
                if !(m.is_finite() && m > 0.0) {
                    return Err(bad(format!(
                        "entity {name}: mass_kg must be finite and positive"
                    )));
                }
            }
        }
        let mut seen = BTreeSet::new();
        let mut predicates = Vec::with_capacity(file.predicates.len());
        for d in file.predicates {
            if d.name.is_empty() || !seen.insert(d.name.clone()) {
                return Err(bad(format!(
                    "predicate name {:?} is empty or repeated",
                    d.name
                )));
            }
            predicates.push(validate(d, zones).map_err(bad)?);
        }
        Ok(Predicates {
            realisation_deadline_ms: file.realisation_deadline_ms,
            stale_after_ms: file.stale_after_ms,
            entities: file.entities,
            predicates,
        })
    }

    /// The predicate of this name.
    pub fn get(&self, name: &str) -> Option<&Predicate> {
        self.predicates.iter().find(|p| p.name == name)
    }
}

fn validate(
    d: PredicateDecl,
    zones: &BTreeMap<String, audita_verdict::Zone>,
) -> Result<Predicate, String> {
    let name = d.name.clone();
    let err = |s: &str| format!("predicate {name}: {s}");
    let finite = |v: Option<f64>, what: &str| -> Result<f64, String> {
        match v {
            Some(x) if x.is_finite() => Ok(x),
            Some(_) => Err(err(&format!("{what} must be finite"))),
            None => Err(err(&format!("kind needs {what}"))),
        }
    };
    let selector = |s: Option<Selector>, what: &str| -> Result<Selector, String> {
        match s {
            Some(s) if s.class.is_some() || s.name.is_some() => Ok(s),
            Some(_) => Err(err(&format!(
                "selector {what} names neither class nor name"
            ))),
            None => Err(err(&format!("kind needs {what}"))),
        }
    };
    // Fields that do not apply to the kind are refused, as unknown fields are.
    let present = [
        ("a", d.a.is_some()),
        ("b", d.b.is_some()),
        ("entity", d.entity.is_some()),
        ("below_mm", d.below_mm.is_some()),
        ("zone", d.zone.is_some()),
        ("above_mm_per_s", d.above_mm_per_s.is_some()),
        ("speed_field", d.speed_field.is_some()),
        ("field", d.field.is_some()),
        ("min", d.min.is_some()),
        ("max", d.max.is_some()),
        ("when", d.when.is_some()),
    ];
    let allowed: &[&str] = match d.kind {
        Kind::Separation => &["a", "b", "below_mm"],
        Kind::SpeedInZone => &["entity", "zone", "above_mm_per_s", "speed_field"],
        Kind::OutOfRange => &["entity", "field", "min", "max"],
        Kind::Expression => &["entity", "when"],
    };
    if let Some((f, _)) = present.iter().find(|(f, p)| *p && !allowed.contains(f)) {
        return Err(err(&format!("field {f} does not apply to this kind")));
    }
    let condition = match d.kind {
        Kind::Separation => {
            let below_mm = finite(d.below_mm, "below_mm")?;
            if below_mm <= 0.0 {
                return Err(err("below_mm must be positive"));
            }
            Condition::Separation {
                a: selector(d.a, "a")?,
                b: selector(d.b, "b")?,
                below_mm,
            }
        }
        Kind::SpeedInZone => {
            let zone = match d.zone.clone().ok_or_else(|| err("kind needs zone"))? {
                ZoneRef::Inline(z) => z,
                ZoneRef::Named(n) => {
                    let z = zones.get(&n).ok_or_else(|| {
                        err(&format!(
                            "zone {n:?} is not a zone of the duty registry (duties.json \"zones\")"
                        ))
                    })?;
                    Zone {
                        min_mm: [z.min_mm[0] as f64, z.min_mm[1] as f64],
                        max_mm: [z.max_mm[0] as f64, z.max_mm[1] as f64],
                        map_id: z.map_id.clone(),
                    }
                }
            };
            if !zone
                .min_mm
                .iter()
                .chain(&zone.max_mm)
                .all(|v| v.is_finite())
                || zone.min_mm[0] > zone.max_mm[0]
                || zone.min_mm[1] > zone.max_mm[1]
            {
                return Err(err("zone corners must be finite, min ≤ max"));
            }
            Condition::SpeedInZone {
                entity: selector(d.entity, "entity")?,
                zone,
                above_mm_per_s: finite(d.above_mm_per_s, "above_mm_per_s")?,
                speed_field: d.speed_field.unwrap_or_else(|| "speed_mm_per_s".into()),
            }
        }
        Kind::OutOfRange => {
            let (min, max) = (finite(d.min, "min")?, finite(d.max, "max")?);
            if min > max {
                return Err(err("min exceeds max"));
            }
            Condition::OutOfRange {
                entity: selector(d.entity, "entity")?,
                field: d.field.ok_or_else(|| err("kind needs field"))?,
                min,
                max,
            }
        }
        Kind::Expression => {
            let when = d.when.ok_or_else(|| err("kind needs when"))?;
            let expr = Expr::parse(&when).map_err(|e| err(&e))?;
            if d.near_miss_margin.is_some() {
                return Err(err("an expression has no near-miss margin"));
            }
            Condition::Expression {
                entity: selector(d.entity, "entity")?,
                when,
                expr,
            }
        }
    };
    if let Some(m) = d.near_miss_margin {
        if !(m.is_finite() && m >= 0.0) {
            return Err(err("near_miss_margin must be finite and non-negative"));
        }
    }
    Ok(Predicate {
        name: d.name,
        condition,
        near_miss_margin: d.near_miss_margin,
        severity: d.severity,
        lookback_ms: d.lookback_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"version": 1, "entities": {"agv-1": {"class": "robot", "mass_kg": 400}},
      "predicates": [
        {"name": "sep", "kind": "separation", "a": {"class": "robot"}, "b": {"class": "human"},
         "below_mm": 500, "near_miss_margin": 500, "severity": {"kinetic": {"speed_field": "speed_mm_per_s"}}},
        {"name": "over", "kind": "speed_in_zone", "entity": {"name": "agv-*"},
         "zone": {"min_mm": [0, 0], "max_mm": [10, 10]}, "above_mm_per_s": 1000},
        {"name": "range", "kind": "out_of_range", "entity": {"class": "batch"}, "field": "param", "min": 1, "max": 2},
        {"name": "expr", "kind": "expression", "entity": {"class": "robot"}, "when": "speed > 3 && !halted", "lookback_ms": 5}]}"#;

    #[test]
    fn the_documented_kinds_parse() {
        let p = Predicates::from_json(GOOD).unwrap();
        assert_eq!(p.predicates.len(), 4);
        assert_eq!(p.realisation_deadline_ms, 1000);
        assert!(p
            .get("over")
            .unwrap()
            .condition
            .subject()
            .matches("agv-12", "robot"));
        assert!(!p
            .get("over")
            .unwrap()
            .condition
            .subject()
            .matches("arm-1", "robot"));
    }

    #[test]
    fn malformed_files_are_one_line_errors_naming_the_problem() {
        let cases = [
            (GOOD.replace("\"version\": 1", "\"version\": 2"), "version"),
            (
                GOOD.replace("\"below_mm\": 500", "\"below_mm\": 500, \"colour\": 1"),
                "unknown field",
            ),
            (
                GOOD.replace("\"below_mm\": 500", "\"below_mm\": 500, \"field\": \"x\""),
                "does not apply",
            ),
            (
                GOOD.replace("\"min\": 1, \"max\": 2", "\"min\": 3, \"max\": 2"),
                "min exceeds max",
            ),
            (
                GOOD.replace("speed > 3 && !halted", "speed >"),
                "predicate expr",
            ),
            (
                GOOD.replace("\"name\": \"over\"", "\"name\": \"sep\""),
                "repeated",
            ),
            (
                GOOD.replace("\"mass_kg\": 400", "\"mass_kg\": -1"),
                "mass_kg",
            ),
            (
                GOOD.replace("{\"name\": \"agv-*\"}", "{}"),
                "neither class nor name",
            ),
            (
                GOOD.replace(
                    "\"lookback_ms\": 5",
                    "\"lookback_ms\": 5, \"near_miss_margin\": 1",
                ),
                "near-miss",
            ),
        ];
        for (text, want) in cases {
            let e = Predicates::from_json(&text).unwrap_err().to_string();
            assert!(e.contains(want), "want {want:?} in {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn glob_patterns() {
        assert!(glob("c*.agv-*", "c12.agv-1"));
        assert!(!glob("c*.agv-*", "c12.arm-1"));
        assert!(glob("*", ""));
        assert!(glob("a*a", "aa"));
        assert!(!glob("a*a", "a"));
        assert!(glob("worker-1", "worker-1"));
    }
}
