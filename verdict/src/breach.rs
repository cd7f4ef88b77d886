//! Content-determined breach under the specification and the reasonable-agent
//! standards, and the faithful-relay (conduit) test.
//!
//! Design constraints:
//! - A finding against principal `p` reads only `p`'s own certified messages in the
//!   window, `p`'s duty absences, and the certified messages `p` cited (its certified
//!   input frontier) — never ground truth, never another principal's assertion about
//!   `p`. Every violation names the message ids that witness it.
//! - **Faithful relay** (the record-level clean-input replay): a non-origin message
//!   whose payload equals the payload of one of its consumed certified inputs. Under
//!   clean-input replay its output is its input's demand.
//! - **Specification**: a message of `p` violates a safety envelope `p` holds (faithful
//!   relays included: the duty is literal), or a review, halt or aggregation duty of
//!   `p` is violated.
//! - **Reasonable agent**: `p` *originated* (not a faithful relay) a demand outside any
//!   registered envelope of its target — the registry is public, so the hazard was
//!   knowable — or a review, halt or aggregation duty of `p` is violated.
//! - Missing or suspect items authored by `p` are reported as degraded breach
//!   evaluation, never as a clean non-breach.
//! - A halt duty's absence is a breach only when the record establishes it
//!   ([`crate::slice::Absence::certain`]): a completion item that may have been the
//!   trigger or the holder's halt leaves it to the readings, and is named instead.

use std::collections::BTreeMap;

use audita_evidence::{MessageId, Payload};
use serde::Serialize;

use crate::duty::{AggregationRule, Duty, DutyRegistry, Standard, Zone};
use crate::slice::{ItemKind, Node, Policy, Slice};

/// One violated duty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// Duty id (or `registry:<id>` for another holder's envelope under the
    /// reasonable-agent standard).
    pub duty: String,
    /// Standards under which it is a breach.
    pub standards: Vec<Standard>,
    /// Witnessing message ids (`author:hex`).
    pub evidence: Vec<String>,
    /// What was violated.
    pub detail: String,
}

/// Breach of one principal.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Breach {
    /// Breach under the specification standard.
    pub specification: bool,
    /// Breach under the reasonable-agent standard.
    pub reasonable_agent: bool,
    /// Violations found.
    pub violations: Vec<Violation>,
}

impl Breach {
    /// Breach under `standard`.
    pub fn under(&self, standard: Standard) -> bool {
        match standard {
            Standard::Specification => self.specification,
            Standard::ReasonableAgent => self.reasonable_agent,
        }
    }
}

/// Whether `node` faithfully relays one of its consumed certified inputs.
pub fn faithful(slice: &Slice, node: &Node) -> bool {
    matches!(node.policy, Policy::RelayAny | Policy::RelayAll)
        && node.cites.iter().any(|c| {
            slice
                .window
                .get(c)
                .is_some_and(|p| p.payload == node.payload)
        })
}

fn envelope_violation(duty: &Duty, payload: &Payload) -> Option<String> {
    let Duty::SafetyEnvelope {
        target,
        max_mm_per_s,
        param,
        min,
        max,
        ..
    } = duty
    else {
        return None;
    };
    match payload {
        Payload::SetSpeed {
            target: t,
            mm_per_s,
        } if t == target => max_mm_per_s
            .filter(|lim| mm_per_s > lim)
            .map(|lim| format!("set_speed {mm_per_s} mm/s on {t} exceeds {lim} mm/s")),
        Payload::SetParam {
            target: t,
            name,
            value,
        } if t == target && param.as_ref().is_none_or(|p| p == name) => {
            let below = min.is_some_and(|lo| *value < lo);
            let above = max.is_some_and(|hi| *value > hi);
            (below || above).then(|| format!("set_param {name}={value} on {t} outside range"))
        }
        _ => None,
    }
}

fn value_of(p: &Payload) -> Option<(&str, &'static str, i64)> {
    match p {
        Payload::SetSpeed { target, mm_per_s } => Some((
            target,
            "set_speed",
            i64::try_from(*mm_per_s).unwrap_or(i64::MAX),
        )),
        Payload::SetParam { target, value, .. } => Some((target, "set_param", *value)),
        _ => None,
    }
}

/// Breach of every principal with messages in the window or duties in the registry.
pub fn breaches(slice: &Slice, duties: &DutyRegistry) -> BTreeMap<String, Breach> {
    let mut out: BTreeMap<String, Breach> = BTreeMap::new();
    for node in slice.window.values() {
        // Breach reads certified messages only; an authentic suspect is named as
        // degraded evaluation instead.
        if node.policy == Policy::Root || slice.suspect_nodes.contains_key(&node.id) {
            continue;
        }
        for v in message_violations(slice, duties, node) {
            push(&mut out, node.id.author.as_str(), v);
        }
    }
    // VDA 5050 duties in the incident's scope (their target named by it): an order
    // to another vehicle is another incident's.
    for (holder, d) in duties.all() {
        if matches!(
            d,
            Duty::Vda5050EdgeRelease { .. } | Duty::Vda5050EdgeSpeed { .. }
        ) && slice.scope.duty_in_scope(holder, d)
        {
            for v in vda5050_violations(slice, duties, holder, d) {
                push(&mut out, holder, v);
            }
        }
    }
    // Only an absence the record establishes is a breach: one left open by a
    // completion item (a deleted trigger, a deleted halt of the holder) is not the
    // holder's certified conduct; the item is named in the finding instead.
    for a in slice.absences.iter().filter(|a| a.certain) {
        push(
            &mut out,
            &a.holder,
            Violation {
                duty: a.duty.clone(),
                standards: both_standards(),
                evidence: vec![crate::adverse::id_string(&a.trigger)],
                detail: format!(
                    "required halt of {} after the cited sensor report was not issued",
                    a.target
                ),
            },
        );
    }
    out
}

/// Adds violation `v` to `p`'s breach, marking the standards it breaches.
fn push(out: &mut BTreeMap<String, Breach>, p: &str, v: Violation) {
    let b = out.entry(p.to_string()).or_default();
    if v.standards.contains(&Standard::Specification) {
        b.specification = true;
    }
    if v.standards.contains(&Standard::ReasonableAgent) {
        b.reasonable_agent = true;
    }
    b.violations.push(v);
}

/// Both standards.
fn both_standards() -> Vec<Standard> {
    vec![Standard::Specification, Standard::ReasonableAgent]
}

/// The violations of one certified derived message by its author: the safety
/// envelopes it holds (or, for an originated message, any registered envelope of the
/// target), its review duties and its aggregation duties.
fn message_violations(slice: &Slice, duties: &DutyRegistry, node: &Node) -> Vec<Violation> {
    let mut out = Vec::new();
    let p = node.id.author.as_str();
    let ev = vec![crate::adverse::id_string(&node.id)];
    let own = duties.duties_of(p);
    // A relay with a consumed input the record lost cannot be shown to originate
    // its content: it gets the benefit of the doubt (the item is named instead).
    let lost_input = matches!(node.policy, Policy::RelayAny | Policy::RelayAll)
        && node.cites.iter().any(|c| slice.graded_item(c).is_some());
    let relay = faithful(slice, node) || lost_input;
    // Safety envelopes held by p (specification).
    let mut spec_hit = false;
    for d in own {
        if let Some(detail) = envelope_violation(d, &node.payload) {
            spec_hit = true;
            let mut standards = vec![Standard::Specification];
            if !relay {
                standards.push(Standard::ReasonableAgent);
            }
            out.push(Violation {
                duty: d.id().to_string(),
                standards,
                evidence: ev.clone(),
                detail,
            });
        }
    }
    // Any registered envelope of the target (reasonable agent, originated only).
    if !relay && !spec_hit {
        for (holder, d) in duties.all() {
            if holder == p {
                continue;
            }
            if let Some(detail) = envelope_violation(d, &node.payload) {
                out.push(Violation {
                    duty: format!("registry:{}", d.id()),
                    standards: vec![Standard::ReasonableAgent],
                    evidence: ev.clone(),
                    detail,
                });
                break;
            }
        }
    }
    for d in own {
        let v = match d {
            Duty::ReviewRequired { id, reviewer } => {
                let reviewed = node
                    .cites
                    .iter()
                    .any(|c| c.author.as_str() == reviewer && slice.window.contains_key(c));
                (!reviewed).then(|| Violation {
                    duty: id.clone(),
                    standards: both_standards(),
                    evidence: ev.clone(),
                    detail: format!("no certified review by {reviewer} cited"),
                })
            }
            Duty::Aggregation { id, target, rule } => {
                aggregation_violation(slice, node, id, target, *rule)
            }
            _ => None,
        };
        out.extend(v);
    }
    out
}

/// The violation of aggregation duty `id` by `node` (a value for `target` that is
/// not the `rule` of its certified inputs' values for it), if any.
fn aggregation_violation(
    slice: &Slice,
    node: &Node,
    id: &str,
    target: &str,
    rule: AggregationRule,
) -> Option<Violation> {
    let (t, kind, v) = value_of(&node.payload)?;
    if t != target {
        return None;
    }
    let ins: Vec<i64> = node
        .cites
        .iter()
        .filter_map(|c| slice.window.get(c))
        .filter_map(|n| value_of(&n.payload))
        .filter(|(tt, k, _)| *tt == target && *k == kind)
        .map(|(_, _, x)| x)
        .collect();
    if ins.is_empty() {
        return None;
    }
    let ok = match rule {
        AggregationRule::Min => ins.iter().min() == Some(&v),
        AggregationRule::Max => ins.iter().max() == Some(&v),
        AggregationRule::Copy => ins.contains(&v),
    };
    if ok {
        return None;
    }
    let mut evidence = vec![crate::adverse::id_string(&node.id)];
    evidence.extend(
        node.cites
            .iter()
            .filter(|c| slice.window.contains_key(c))
            .map(crate::adverse::id_string),
    );
    Some(Violation {
        duty: id.to_string(),
        standards: both_standards(),
        evidence,
        detail: format!("{kind} {v} is not the {rule:?} of inputs {ins:?}"),
    })
}

/// The violations of one VDA 5050 duty of `holder` over the certified window
/// (`crate::duty` module docs).
fn vda5050_violations(
    slice: &Slice,
    duties: &DutyRegistry,
    holder: &str,
    d: &Duty,
) -> Vec<Violation> {
    match d {
        Duty::Vda5050EdgeRelease {
            id,
            target,
            zone,
            max_mm_per_s,
        } => {
            let Some(z) = duties.zone(zone) else {
                return Vec::new();
            };
            edge_release_violations(slice, holder, id, target, (zone, z), *max_mm_per_s)
        }
        Duty::Vda5050EdgeSpeed {
            id,
            target,
            tolerance_mm_per_s,
        } => edge_speed_violations(slice, holder, id, target, *tolerance_mm_per_s)
            .into_iter()
            .collect(),
        _ => Vec::new(),
    }
}

/// Whether `n` is certified (not an attested suspect read for its content).
fn is_certified(slice: &Slice, n: &Node) -> bool {
    !slice.suspect_nodes.contains_key(&n.id)
}

/// The VDA 5050 order an agent-text message carries, if any.
fn order_of(n: &Node) -> Option<audita_vda5050::OrderView> {
    match &n.payload {
        Payload::AgentText { text } => audita_vda5050::OrderView::parse(text),
        _ => None,
    }
}

/// Edge release (duty `id`): every released edge of `holder`'s certified orders to
/// `target` whose path meets zone `zone` (named, on its map) without a maxSpeed of
/// at most `max_mm_per_s`.
fn edge_release_violations(
    slice: &Slice,
    holder: &str,
    id: &str,
    target: &str,
    (zone, z): (&str, &Zone),
    max_mm_per_s: u64,
) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut nodes: Vec<&Node> = slice
        .window
        .values()
        .filter(|n| is_certified(slice, n))
        .filter(|n| n.id.author.as_str() == holder && n.destination == *target)
        .collect();
    nodes.sort_by_key(|n| (n.timestamp, n.leaf));
    for n in nodes {
        let Some(order) = order_of(n) else { continue };
        for e in order.edges.iter().filter(|e| e.released) {
            let Some(path) = order.path(e) else { continue };
            let other_map = match (&z.map_id, order.map_of(e)) {
                (Some(want), Some(have)) => want != have,
                _ => false,
            };
            if other_map || !z.rect().meets_polyline(&path) {
                continue;
            }
            let released = e.max_speed_mm_per_s;
            if released.is_some_and(|v| v <= i64::try_from(max_mm_per_s).unwrap_or(i64::MAX)) {
                continue;
            }
            out.push(Violation {
                duty: id.to_string(),
                standards: both_standards(),
                evidence: vec![crate::adverse::id_string(&n.id)],
                detail: format!(
                    "edge {} (sequenceId {}) of order {} update {} to {target} meets zone {zone} \
                     released with {} (bound {max_mm_per_s} mm/s)",
                    e.edge_id,
                    e.seq,
                    order.order_id,
                    order.update_id,
                    match released {
                        Some(v) => format!("maxSpeed {v} mm/s"),
                        None => "no maxSpeed (unbounded)".into(),
                    }
                ),
            });
        }
    }
    out
}

/// Edge speed (duty `id`): `holder`'s certified states reporting a speed above the
/// maxSpeed (plus `tolerance_mm_per_s`) of the edge it is on, as released by the
/// first certified order update to `target` releasing it; one violation naming the
/// first such state (and how many there are).
fn edge_speed_violations(
    slice: &Slice,
    holder: &str,
    id: &str,
    target: &str,
    tolerance_mm_per_s: u64,
) -> Option<Violation> {
    // The orders addressed to the vehicle, by orderId.
    let orders: Vec<(audita_vda5050::OrderView, &Node)> = slice
        .window
        .values()
        .filter(|n| is_certified(slice, n))
        .filter(|n| n.destination == *target)
        .filter_map(|n| order_of(n).map(|o| (o, n)))
        .collect();
    let mut states: Vec<&Node> = slice
        .window
        .values()
        .filter(|n| is_certified(slice, n))
        .filter(|n| n.id.author.as_str() == holder)
        .filter(|n| {
            matches!(&n.payload, Payload::SensorReport { sensor, .. } if sensor == "vda5050.state")
        })
        .collect();
    states.sort_by_key(|n| (n.timestamp, n.leaf));
    let mut over: Vec<(&Node, &Node, String)> = Vec::new();
    for n in states {
        let Payload::SensorReport { reading, .. } = &n.payload else {
            continue;
        };
        let Some(state) = audita_vda5050::StateView::parse(reading) else {
            continue;
        };
        let Some(edge_seq) = audita_vda5050::progress(&state)
            .and_then(|p| p.edge)
            .map(|e| e.1)
        else {
            continue;
        };
        let Some(speed) = state.speed_mm_per_s else {
            continue;
        };
        let released = audita_vda5050::first_release(
            orders
                .iter()
                .filter(|(o, _)| o.order_id == state.order_id)
                .map(|(o, n)| (o, *n)),
            edge_seq,
            |u| u <= state.update_id,
        );
        let Some((order, order_node)) = released else {
            continue;
        };
        let Some(max) = order
            .released_edge(edge_seq)
            .and_then(|e| e.max_speed_mm_per_s)
        else {
            continue;
        };
        if speed > max.saturating_add(i64::try_from(tolerance_mm_per_s).unwrap_or(i64::MAX)) {
            over.push((
                n,
                order_node,
                format!(
                    "{holder} at {speed} mm/s on edge sequenceId {edge_seq} of order {} released \
                     with maxSpeed {max} mm/s (tolerance {tolerance_mm_per_s} mm/s)",
                    order.order_id
                ),
            ));
        }
    }
    let (state, order, detail) = over.first()?;
    Some(Violation {
        duty: id.to_string(),
        standards: both_standards(),
        evidence: vec![
            crate::adverse::id_string(&state.id),
            crate::adverse::id_string(&order.id),
        ],
        detail: if over.len() > 1 {
            format!("{detail}; {} states in all", over.len())
        } else {
            detail.clone()
        },
    })
}

/// Missing or attested-suspect items authored by `p` (degraded breach evaluation).
pub fn degraded(slice: &Slice, p: &str) -> Vec<MessageId> {
    let mut v: Vec<MessageId> = slice
        .items
        .iter()
        .filter(|i| matches!(i.kind, ItemKind::Missing | ItemKind::Suspect))
        .map(|i| &i.id)
        .chain(slice.suspect_nodes.keys())
        .filter(|id| id.author.as_str() == p)
        .cloned()
        .collect();
    v.sort();
    v.dedup();
    v
}
