//! Incremental detection: certified messages in, alerts and adverse declarations out.
//!
//! Design constraints:
//! - Input is certified messages only ([`Verified`] envelopes): a forged or unsealed
//!   report can neither fire a predicate nor move `t*`. Three kinds are read:
//!   telemetry reports (the latest observation of each entity, with the message that
//!   established it), **actuating commands** (a typed command with a committed
//!   effect, addressed to the actuator it targets) and **actuation reports** (a
//!   `tool_output` of tool `actuator`, authored by that actuator, citing the command
//!   it realised). A VDA 5050 fleet's evidence, as the bridge records it, reads as
//!   the same three kinds ([`crate::vda5050`]: vehicle states, master control's
//!   orders, vehicles' running or finished actions). Everything else is ignored.
//! - Predicates are evaluated on each telemetry report, for the entities it updates:
//!   at the first report at which a predicate holds for a subject, an
//!   [`AlertKind::Fired`] alert is emitted at once and the incident is kept pending;
//!   a near-miss margin gives an [`AlertKind::NearMiss`] alert. A subject re-arms when
//!   its predicate stops holding. `t*` is the timestamp of the telemetry report at
//!   which the predicate first holds.
//! - A pending incident becomes its declaration once the event-time watermark passes
//!   `t*` ([`Monitor::advance`]): then every message timestamped up to `t*` has been
//!   read, whatever order the stream delivered it in. The declaration's facts:
//!   * **realised**: every actuating command on the subject issued in the window
//!     whose actuation report is timestamped by `t*`;
//!   * **unrealised**: every other such command issued at least the realisation
//!     deadline before `t*` (its effect never arrived);
//!   * **anchors** (`combine: all`): for each kind of command other than `halt`, the
//!     last realised one on the subject — the actuations establishing the state the
//!     predicate reads at `t*` — unless the subject's telemetry at `t*` contradicts
//!     its committed effect (a speed other than the commanded one while moving, a
//!     parameter other than the one set: an unrecorded event superseded it). No
//!     anchor: an exogenous outcome.
//!   * **severity** by the predicate's rule, from the subject's registered mass and
//!     its telemetry at `t*`.
//!
//!   Each fact names the certified messages establishing it.
//! - Separation pairs only fresh observations (within the file's `stale_after_ms`
//!   of the report being evaluated, earlier or later); subjects are tried in the report's order, then by name, and
//!   the first other party below the threshold is the one named.
//! - Deterministic: maps are `BTreeMap`s, ties are broken by arrival order.
//! - Idempotent: a message read again (an epoch republished by a restarted sealer,
//!   a re-delivery) adds no command and no actuation report a second time, so it
//!   never becomes a second fact of a declaration.
//! - Memory: the latest observation per entity, and per actuator the commands of
//!   the last [`MAX_COMMANDS_PER_TARGET`] it was sent (older ones are forgotten;
//!   their count is [`Monitor::forgotten`]), and the actuation reports of those.
//!   When every predicate has a lookback, commands older than the watermark minus
//!   the longest lookback and [`PRUNE_MARGIN_MS`] are dropped too: they are in no
//!   window a declaration can have, so memory follows rate × lookback, not the
//!   per-actuator bound (at 10 commands/s, 4,096 commands are seven minutes).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use audita_evidence::{Effect, MessageId, Partition, Payload, SignedEnvelope, Verified};
use audita_verdict::{
    id_string, AdverseDecl, Combine, Declarer, DeclarerKind, Fact, FactKind, Severity,
};
use serde::Serialize;

use crate::predicate::{Condition, Predicates, Selector, SeverityRule};
use crate::telemetry::{self, Value};
use crate::vda5050;

/// One predicate's finding on one subject: (subject, holds, near, other party, detail).
type Finding = (String, bool, bool, Option<String>, String);

/// Commands remembered per actuator.
pub const MAX_COMMANDS_PER_TARGET: usize = 4096;

/// How far before the watermark a late report can still fire an incident, for
/// [`Monitor::advance`]'s pruning (ms of record time): well past the slicer's
/// largest grace.
pub const PRUNE_MARGIN_MS: u64 = 60_000;

/// Default declarer name of the monitor.
pub const MONITOR_NAME: &str = "audita-monitor";

/// What an alert reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    /// The predicate holds: an adverse outcome.
    Fired,
    /// The predicate missed by less than its near-miss margin.
    NearMiss,
}

/// An alert: emitted the moment a predicate (or its near-miss margin) holds, before
/// the incident's slice is complete.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Alert {
    /// Fired or near miss.
    pub kind: AlertKind,
    /// Predicate name.
    pub predicate: String,
    /// The incident the declaration will carry (fired alerts only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incident: Option<String>,
    /// Entities involved: the subject first.
    pub entities: Vec<String>,
    /// Record time of the telemetry report (`t*` for a fired alert), ms.
    pub t_ms: u64,
    /// Severity (J) when the predicate has a rule and the inputs are reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub severity_j: Option<f64>,
    /// Telemetry messages establishing it (`author:hex64`).
    pub messages: Vec<String>,
    /// One line saying what holds.
    pub detail: String,
}

#[derive(Debug, Clone)]
struct Latest {
    class: String,
    fields: BTreeMap<String, Value>,
    evidence: MessageId,
    ts: u64,
}

#[derive(Debug, Clone)]
struct Actuating {
    id: MessageId,
    ts: u64,
    kind: &'static str,
    effect: Effect,
    /// A VDA 5050 order's reading (what it released), when the command is one.
    order: Option<std::sync::Arc<audita_vda5050::OrderView>>,
}

#[derive(Debug, Clone)]
struct Realisation {
    report: MessageId,
    author: String,
    ts: u64,
    seq: u64,
    /// A VDA 5050 progress report's order and the sequence ids it reached.
    progress: Option<(String, Vec<u64>)>,
}

impl Realisation {
    /// Whether this report can realise `c`: any actuation report, but a progress
    /// report only of an order with its `orderId` that released one of the elements
    /// it reports (a vehicle cannot realise an arbitrary command by citing it).
    fn realises(&self, c: &Actuating) -> bool {
        match (&self.progress, &c.order) {
            (None, _) => true,
            (Some((order_id, seqs)), Some(o)) => {
                o.order_id == *order_id && seqs.iter().any(|s| o.releases(*s))
            }
            (Some(_), None) => false,
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Arm {
    fired: bool,
    near: bool,
}

#[derive(Debug, Clone)]
struct Pending {
    pred: usize,
    subject: String,
    t_star: u64,
    evidence: Vec<MessageId>,
    subject_obs: Latest,
    detail: String,
}

/// The incremental monitor over one deployment's predicate file.
#[derive(Debug, Clone)]
pub struct Monitor {
    file: Predicates,
    name: String,
    latest: BTreeMap<String, Latest>,
    commands: BTreeMap<String, Vec<Actuating>>,
    /// The digests of the commands held (a membership test per command instead of
    /// a scan of its target's list; never iterated).
    command_ids: HashSet<[u8; 32]>,
    /// Realisations by the command they cite (point lookups only, never iterated).
    reports: HashMap<MessageId, Vec<Realisation>>,
    arms: BTreeMap<(usize, String), Arm>,
    pending: Vec<Pending>,
    seq: u64,
    malformed: u64,
    forgotten: u64,
    /// The watermark at which commands older than every window were last dropped.
    pruned_at: u64,
    /// VDA 5050 orders their vehicle refused in a state's `errors`, keyed by
    /// (vehicle, `orderId`, `orderUpdateId`): the earliest such state by (time, id).
    refusals: BTreeMap<(String, String, Option<u64>), Refusal>,
}

/// A vehicle state that refuses an order ([`audita_vda5050::rejections`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Refusal {
    ts: u64,
    state: MessageId,
    error_type: String,
}

/// At most this many refusals are held (older ones go with their windows).
const MAX_REFUSALS: usize = 65_536;

/// Everything the monitor derived from a whole record.
#[derive(Debug, Clone, PartialEq)]
pub struct Derivation {
    /// The declarations, in `t*` order.
    pub declarations: Vec<AdverseDecl>,
    /// The alerts, in emission order.
    pub alerts: Vec<Alert>,
    /// Telemetry reports that broke the format.
    pub malformed: u64,
}

impl Monitor {
    /// A monitor over a predicate file, declaring as [`MONITOR_NAME`].
    pub fn new(file: Predicates) -> Monitor {
        Monitor::named(file, MONITOR_NAME)
    }

    /// A monitor declaring under its own instance name.
    pub fn named(file: Predicates, name: &str) -> Monitor {
        Monitor {
            file,
            name: name.to_string(),
            latest: BTreeMap::new(),
            commands: BTreeMap::new(),
            command_ids: HashSet::new(),
            reports: HashMap::new(),
            arms: BTreeMap::new(),
            pending: Vec::new(),
            seq: 0,
            malformed: 0,
            forgotten: 0,
            pruned_at: 0,
            refusals: BTreeMap::new(),
        }
    }

    /// The predicate file.
    pub fn predicates(&self) -> &Predicates {
        &self.file
    }

    /// Telemetry reports that broke the format so far.
    pub fn malformed(&self) -> u64 {
        self.malformed
    }

    /// Commands held now (with their actuation reports), across actuators.
    pub fn commands_held(&self) -> usize {
        self.commands.values().map(Vec::len).sum()
    }

    /// Commands forgotten under the per-actuator bound so far.
    pub fn forgotten(&self) -> u64 {
        self.forgotten
    }

    /// Incidents fired and not yet declared.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Reads one certified message; returns the alerts it raises.
    pub fn observe(&mut self, msg: &Verified<SignedEnvelope>) -> Vec<Alert> {
        self.seq += 1;
        let env = msg.envelope();
        match &env.payload {
            Payload::SensorReport { sensor, reading } => {
                if sensor == vda5050::STATE_SENSOR {
                    self.remember_refusals(env.author.as_str(), msg.id(), env.timestamp, reading);
                }
                match self.telemetry(env, sensor, reading) {
                    None => Vec::new(),
                    Some(Err(_)) => {
                        self.malformed += 1;
                        Vec::new()
                    }
                    Some(Ok(obs)) => {
                        let mut updated = Vec::with_capacity(obs.len());
                        for o in obs {
                            if !updated.contains(&o.entity) {
                                updated.push(o.entity.clone());
                            }
                            self.latest.insert(
                                o.entity,
                                Latest {
                                    class: o.class,
                                    fields: o.fields,
                                    evidence: msg.id().clone(),
                                    ts: env.timestamp,
                                },
                            );
                        }
                        self.evaluate(&updated, env.timestamp)
                    }
                }
            }
            Payload::ToolOutput { tool, output } if realisation(tool, output) => {
                for c in &env.citations {
                    let list = self.reports.entry(c.clone()).or_default();
                    if list.len() < 16 && !list.iter().any(|r| r.report == *msg.id()) {
                        list.push(Realisation {
                            report: msg.id().clone(),
                            author: env.author.as_str().to_string(),
                            ts: env.timestamp,
                            seq: self.seq,
                            progress: (tool == vda5050::PROGRESS_TOOL)
                                .then(|| vda5050::progress_of(output))
                                .flatten(),
                        });
                    }
                }
                Vec::new()
            }
            _ => {
                if let Some((target, kind)) = vda5050::actuating(env) {
                    if env.destination.as_str() == target && env.effect != Effect::None {
                        // A digest names its message (author included): held already
                        // means this very command.
                        if !self.command_ids.insert(msg.id().digest) {
                            return Vec::new();
                        }
                        let list = self.commands.entry(target.to_string()).or_default();
                        list.push(Actuating {
                            id: msg.id().clone(),
                            ts: env.timestamp,
                            kind,
                            effect: env.effect.clone(),
                            order: vda5050::order_of(env).map(std::sync::Arc::new),
                        });
                        if list.len() > MAX_COMMANDS_PER_TARGET {
                            let gone = list.remove(0);
                            self.reports.remove(&gone.id);
                            self.command_ids.remove(&gone.id.digest);
                            self.forgotten += 1;
                        }
                    }
                }
                Vec::new()
            }
        }
    }

    /// Keeps the orders a vehicle state refuses, each under the earliest refusing
    /// state by (time, id), so the order messages arrive in changes nothing.
    fn remember_refusals(&mut self, vehicle: &str, id: &MessageId, ts: u64, reading: &str) {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(reading) else {
            return;
        };
        for r in audita_vda5050::rejections(&v) {
            let key = (vehicle.to_string(), r.order_id, r.update_id);
            let refusal = Refusal {
                ts,
                state: id.clone(),
                error_type: r.error_type,
            };
            let full = self.refusals.len() >= MAX_REFUSALS;
            match self.refusals.entry(key) {
                std::collections::btree_map::Entry::Occupied(mut held) => {
                    if refusal < *held.get() {
                        held.insert(refusal);
                    }
                }
                std::collections::btree_map::Entry::Vacant(slot) if !full => {
                    slot.insert(refusal);
                }
                std::collections::btree_map::Entry::Vacant(_) => self.forgotten += 1,
            }
        }
    }

    /// The earliest state of `vehicle` in `[from, to]` refusing `order` (its update,
    /// or the order as a whole).
    fn refusal(
        &self,
        vehicle: &str,
        order: &audita_vda5050::OrderView,
        from: u64,
        to: u64,
    ) -> Option<&Refusal> {
        [Some(order.update_id), None]
            .into_iter()
            .filter_map(|u| {
                self.refusals
                    .get(&(vehicle.to_string(), order.order_id.clone(), u))
            })
            .filter(|r| (from..=to).contains(&r.ts))
            .min()
    }

    /// The observations a sensor report gives: telemetry, or a VDA 5050 vehicle
    /// state (an observation of its author, [`vda5050`]); `None` for anything else.
    fn telemetry(
        &self,
        env: &audita_evidence::Envelope,
        sensor: &str,
        reading: &str,
    ) -> Option<Result<Vec<telemetry::Observation>, telemetry::TelemetryError>> {
        if sensor == vda5050::STATE_SENSOR {
            let entity = env.author.as_str();
            let class = self
                .file
                .entities
                .get(entity)
                .map_or(vda5050::DEFAULT_CLASS, |e| e.class.as_str());
            return Some(vda5050::observation(entity, class, reading).map(|o| vec![o]));
        }
        telemetry::parse(reading)
    }

    /// Declares every pending incident whose `t*` the event-time watermark has
    /// passed (`watermark_ms ≥ t*`), in `t*` order.
    pub fn advance(&mut self, watermark_ms: u64) -> Vec<AdverseDecl> {
        let (due, keep): (Vec<Pending>, Vec<Pending>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|p| p.t_star <= watermark_ms);
        self.pending = keep;
        let out = self.declare_in_order(&due);
        self.prune(watermark_ms);
        out
    }

    /// Declares every pending incident now, whatever the watermark: the stream has
    /// gone quiet and the caller judges everything published sealed. Unlike
    /// `advance(u64::MAX)` it claims no watermark, so it forgets no command: the
    /// stream may resume (a paused sealer, a restarted broker), and a later
    /// incident's anchor can be a command issued before the quiet.
    pub fn declare_pending(&mut self) -> Vec<AdverseDecl> {
        let due = std::mem::take(&mut self.pending);
        self.declare_in_order(&due)
    }

    /// The declarations of `due`, in `t*` order (then by incident name).
    fn declare_in_order(&self, due: &[Pending]) -> Vec<AdverseDecl> {
        let mut out: Vec<AdverseDecl> = due.iter().map(|p| self.declare(p)).collect();
        out.sort_by(|a, b| (a.t_star_ms, &a.incident).cmp(&(b.t_star_ms, &b.incident)));
        out
    }

    /// Drops commands (and their actuation reports) older than any window a future
    /// declaration can have: every pending incident's `t*` is past the watermark, and
    /// one fired later by a late report lies at most [`PRUNE_MARGIN_MS`] before it,
    /// so a command older than the watermark minus the longest lookback and that
    /// margin is in no window. Only when every predicate has a lookback (a window
    /// from 0 keeps the per-actuator bound alone); at most once a second of record
    /// time.
    fn prune(&mut self, watermark_ms: u64) {
        if watermark_ms < self.pruned_at.saturating_add(1_000) {
            return;
        }
        self.pruned_at = watermark_ms;
        let Some(longest) = self
            .file
            .predicates
            .iter()
            .map(|p| p.lookback_ms)
            .try_fold(0u64, |m, l| l.map(|l| m.max(l)))
        else {
            return;
        };
        let before = watermark_ms.saturating_sub(longest.saturating_add(PRUNE_MARGIN_MS));
        let (reports, ids) = (&mut self.reports, &mut self.command_ids);
        for list in self.commands.values_mut() {
            list.retain(|c| {
                let keep = c.ts >= before;
                if !keep {
                    reports.remove(&c.id);
                    ids.remove(&c.id.digest);
                }
                keep
            });
        }
        self.commands.retain(|_, list| !list.is_empty());
        self.refusals.retain(|_, r| r.ts >= before);
    }

    fn number(&self, entity: &str, field: &str) -> Option<f64> {
        self.latest.get(entity)?.fields.get(field)?.as_f64()
    }

    fn text(&self, entity: &str, field: &str) -> Option<&str> {
        match self.latest.get(entity)?.fields.get(field)? {
            Value::Str(s) => Some(s.as_str()),
            _ => None,
        }
    }

    /// Separation verdicts: for each fresh subject matching `a`, the nearest-first
    /// other party matching `b` on its site that is within `below_mm` (or, failing
    /// that, the first within the near-miss `margin`); updated subjects without one
    /// get a clear verdict.
    fn separation_verdicts(
        &self,
        updated: &[String],
        ts: u64,
        (a, b): (&Selector, &Selector),
        below_mm: f64,
        margin: f64,
    ) -> Vec<Finding> {
        let mut verdicts = Vec::new();
        // Subjects: updated ones first (report order), then the others
        // that are still fresh.
        // Fresh: within `stale_after_ms` of this report either way — a
        // stream sealed across partitions may deliver another author's
        // later reports first, and those are no more "here now" than
        // stale ones (regression: a 64-cell demo paired one cell's robot
        // with another cell's worker).
        let stale = self.file.stale_after_ms;
        let order: Vec<String> = updated
            .iter()
            .cloned()
            .chain(
                self.latest
                    .iter()
                    .filter(|(k, l)| !updated.contains(k) && l.ts.abs_diff(ts) <= stale)
                    .map(|(k, _)| k.clone()),
            )
            .collect();
        for s in &order {
            let Some(ls) = self.latest.get(s) else {
                continue;
            };
            if !a.matches(s, &ls.class) {
                continue;
            }
            let s_updated = updated.contains(s);
            let mut best: Option<(bool, bool, String, f64)> = None;
            for o in &order {
                if o == s || !(s_updated || updated.contains(o)) {
                    continue;
                }
                let Some(lo) = self.latest.get(o) else {
                    continue;
                };
                if !b.matches(o, &lo.class) || !self.same_site(s, o) {
                    continue;
                }
                let Some(d) = self.distance(s, o) else {
                    continue;
                };
                let holds = d < below_mm;
                let near = d < below_mm + margin;
                if holds {
                    best = Some((true, true, o.clone(), d));
                    break;
                }
                if near && best.is_none() {
                    best = Some((false, true, o.clone(), d));
                }
            }
            if !s_updated && best.is_none() {
                continue;
            }
            match best {
                Some((h, n, o, d)) => verdicts.push((
                    s.clone(),
                    h,
                    n,
                    Some(o.clone()),
                    format!("separation {d:.0} mm between {s} and {o} (threshold {below_mm} mm)"),
                )),
                None => verdicts.push((s.clone(), false, false, None, String::new())),
            }
        }
        verdicts
    }

    /// The entities of `updated` that `entity` selects, with their latest report.
    fn selected<'s>(
        &'s self,
        updated: &'s [String],
        entity: &'s Selector,
    ) -> impl Iterator<Item = (&'s String, &'s Latest)> + 's {
        updated.iter().filter_map(move |s| {
            let l = self.latest.get(s)?;
            entity.matches(s, &l.class).then_some((s, l))
        })
    }

    fn evaluate(&mut self, updated: &[String], ts: u64) -> Vec<Alert> {
        let mut alerts = Vec::new();
        for pi in 0..self.file.predicates.len() {
            let pred = self.file.predicates[pi].clone();
            let mut verdicts: Vec<Finding> = Vec::new();
            match &pred.condition {
                Condition::Separation { a, b, below_mm } => {
                    let margin = pred.near_miss_margin.unwrap_or(0.0);
                    verdicts = self.separation_verdicts(updated, ts, (a, b), *below_mm, margin);
                }
                Condition::SpeedInZone {
                    entity,
                    zone,
                    above_mm_per_s,
                    speed_field,
                } => {
                    let margin = pred.near_miss_margin.unwrap_or(0.0);
                    for (s, _) in self.selected(updated, entity) {
                        let (x, y, v) = (
                            self.number(s, "x_mm"),
                            self.number(s, "y_mm"),
                            self.number(s, speed_field),
                        );
                        let (holds, near, d) = match (x, y, v) {
                            (Some(x), Some(y), Some(v))
                                if zone.contains(x, y) && zone.on_map(self.text(s, "map_id")) =>
                            {
                                (v > *above_mm_per_s, v > above_mm_per_s - margin, v)
                            }
                            _ => (false, false, 0.0),
                        };
                        verdicts.push((
                            s.clone(),
                            holds,
                            near,
                            None,
                            format!("{s} reports {speed_field} {d} in the zone (limit {above_mm_per_s})"),
                        ));
                    }
                }
                Condition::OutOfRange {
                    entity,
                    field,
                    min,
                    max,
                } => {
                    let margin = pred.near_miss_margin.unwrap_or(0.0);
                    for (s, _) in self.selected(updated, entity) {
                        let (holds, near, v) = match self.number(s, field) {
                            Some(v) => (
                                v < *min || v > *max,
                                v < min + margin || v > max - margin,
                                v,
                            ),
                            None => (false, false, 0.0),
                        };
                        verdicts.push((
                            s.clone(),
                            holds,
                            near,
                            None,
                            format!("{s} reports {field} {v} outside [{min}, {max}]"),
                        ));
                    }
                }
                Condition::Expression { entity, when, expr } => {
                    for (s, l) in self.selected(updated, entity) {
                        let holds = expr.holds(&l.fields);
                        verdicts.push((s.clone(), holds, false, None, format!("{s}: {when}")));
                    }
                }
            }
            for (s, holds, near, other, detail) in verdicts {
                let arm = self.arms.entry((pi, s.clone())).or_default();
                let (was_fired, was_near) = (arm.fired, arm.near);
                arm.fired = holds;
                arm.near = near;
                let mut evidence: Vec<MessageId> = Vec::new();
                for e in std::iter::once(&s).chain(other.as_ref()) {
                    if let Some(l) = self.latest.get(e) {
                        if !evidence.contains(&l.evidence) {
                            evidence.push(l.evidence.clone());
                        }
                    }
                }
                let entities: Vec<String> = std::iter::once(s.clone()).chain(other).collect();
                if holds && !was_fired {
                    let Some(obs) = self.latest.get(&s).cloned() else {
                        continue;
                    };
                    let incident = format!("{}-{}-{}", pred.name, s, ts);
                    alerts.push(Alert {
                        kind: AlertKind::Fired,
                        predicate: pred.name.clone(),
                        incident: Some(incident),
                        entities,
                        t_ms: ts,
                        severity_j: self.severity(pi, &s, &obs).0.map(|s| s.joules()),
                        messages: evidence.iter().map(id_string).collect(),
                        detail: detail.clone(),
                    });
                    self.pending.push(Pending {
                        pred: pi,
                        subject: s,
                        t_star: ts,
                        evidence,
                        subject_obs: obs,
                        detail,
                    });
                } else if near && !holds && !was_near && !was_fired {
                    alerts.push(Alert {
                        kind: AlertKind::NearMiss,
                        predicate: pred.name.clone(),
                        incident: None,
                        entities,
                        t_ms: ts,
                        severity_j: None,
                        messages: evidence.iter().map(id_string).collect(),
                        detail,
                    });
                }
            }
        }
        alerts
    }

    /// Whether two entities' positions are in one coordinate frame (the registry's
    /// `site`; unregistered entities are in the default one).
    fn same_site(&self, a: &str, b: &str) -> bool {
        self.file.site_of(a) == self.file.site_of(b)
    }

    fn distance(&self, a: &str, b: &str) -> Option<f64> {
        let la = self.latest.get(a)?;
        let lb = self.latest.get(b)?;
        let (ax, ay, bx, by) = (
            la.fields.get("x_mm")?,
            la.fields.get("y_mm")?,
            lb.fields.get("x_mm")?,
            lb.fields.get("y_mm")?,
        );
        if let (Value::Int(ax), Value::Int(ay), Value::Int(bx), Value::Int(by)) = (ax, ay, bx, by) {
            // Exact on integer positions: compare squared distances in i128.
            let dx = *ax as i128 - *bx as i128;
            let dy = *ay as i128 - *by as i128;
            return Some(((dx * dx + dy * dy) as f64).sqrt());
        }
        let dx = ax.as_f64()? - bx.as_f64()?;
        let dy = ay.as_f64()? - by.as_f64()?;
        Some((dx * dx + dy * dy).sqrt())
    }

    /// Severity of a predicate's subject from an observation, with the fact's detail.
    fn severity(&self, pi: usize, subject: &str, obs: &Latest) -> (Option<Severity>, String) {
        let Some(SeverityRule::Kinetic { speed_field }) = &self.file.predicates[pi].severity else {
            return (None, String::new());
        };
        let mass = self.file.entities.get(subject).and_then(|e| e.mass_kg);
        let speed = obs.fields.get(speed_field).and_then(Value::as_f64);
        match (mass, speed) {
            (Some(m), Some(v)) if v.is_finite() && v >= 0.0 => {
                let s = Severity {
                    mass_kg: m,
                    speed_m_per_s: v / 1000.0,
                };
                let detail = format!(
                    "½·m·v² = ½ · {m} kg (registered) · ({} m/s, reported {speed_field})² = {} J",
                    s.speed_m_per_s,
                    s.joules()
                );
                (Some(s), detail)
            }
            (None, _) => (
                None,
                format!("no registered mass for {subject}: severity unknown"),
            ),
            _ => (
                None,
                format!("{subject} reports no {speed_field}: severity unknown"),
            ),
        }
    }

    fn declare(&self, p: &Pending) -> AdverseDecl {
        let pred = &self.file.predicates[p.pred];
        let t_star = p.t_star;
        let start = pred
            .lookback_ms
            .map(|l| t_star.saturating_sub(l))
            .unwrap_or(0);
        let deadline = self.file.realisation_deadline_ms;
        let mut facts = vec![Fact {
            fact: FactKind::TStar,
            message: None,
            evidence: p.evidence.iter().map(id_string).collect(),
            detail: format!("{} first holds at {t_star} ms: {}", pred.name, p.detail),
        }];
        let (severity, sev_detail) = self.severity(p.pred, &p.subject, &p.subject_obs);
        if pred.severity.is_some() {
            facts.push(Fact {
                fact: FactKind::Severity,
                message: None,
                evidence: vec![id_string(&p.subject_obs.evidence)],
                detail: sev_detail,
            });
        }
        let mut realised: Vec<(&Actuating, &Realisation)> = Vec::new();
        let mut unrealised: Vec<&Actuating> = Vec::new();
        for c in self
            .commands
            .get(&p.subject)
            .into_iter()
            .flatten()
            .filter(|c| c.ts >= start && c.ts <= t_star)
        {
            let r = self
                .reports
                .get(&c.id)
                .into_iter()
                .flatten()
                .filter(|r| r.ts <= t_star && r.author == p.subject && r.realises(c))
                .min_by_key(|r| (r.ts, r.seq));
            match r {
                Some(r) => realised.push((c, r)),
                None if c.ts.saturating_add(deadline) <= t_star => unrealised.push(c),
                None => {}
            }
        }
        let mut anchors = state_anchors(p, &realised);
        anchors.extend(self.deviation_anchor(p, &realised));
        anchors.sort_by(|a, b| a.0.cmp(&b.0));
        realised.sort_by(|a, b| a.0.id.cmp(&b.0.id));
        unrealised.sort_by(|a, b| a.id.cmp(&b.id));
        facts.extend(anchors.iter().map(|(_, f)| f.clone()));
        facts.extend(realised.iter().map(|(c, r)| Fact {
            fact: FactKind::Realised,
            message: Some(id_string(&c.id)),
            evidence: vec![id_string(&r.report)],
            detail: format!("{} realised on {} at {} ms", c.kind, p.subject, r.ts),
        }));
        facts.extend(unrealised.iter().map(|c| {
            let refused = c
                .order
                .as_deref()
                .and_then(|o| self.refusal(&p.subject, o, c.ts, t_star));
            let mut evidence = vec![id_string(&c.id)];
            let mut detail = format!(
                "{} issued at {} ms; no actuation report of {} by t* (deadline {deadline} ms)",
                c.kind, c.ts, p.subject
            );
            if let Some(r) = refused {
                evidence.push(id_string(&r.state));
                detail.push_str(&format!(
                    "; {} refused it ({}) in its state at {} ms",
                    p.subject, r.error_type, r.ts
                ));
            }
            Fact {
                fact: FactKind::Unrealised,
                message: Some(id_string(&c.id)),
                evidence,
                detail,
            }
        }));
        AdverseDecl {
            incident: format!("{}-{}-{}", pred.name, p.subject, t_star),
            outcome: pred.name.clone(),
            t_star_ms: t_star,
            severity,
            anchors: anchors.iter().map(|(id, _)| id_string(id)).collect(),
            combine: Combine::All,
            targets: vec![p.subject.clone()],
            unrealised: unrealised.iter().map(|c| id_string(&c.id)).collect(),
            window_start_ms: start,
            window_end_ms: None,
            delta: 1.0,
            declarer: Some(Declarer {
                kind: DeclarerKind::Monitor,
                name: self.name.clone(),
            }),
            facts,
        }
    }
}

/// The state anchors of a pending incident: the last realised command of each kind on
/// its subject by `t*`, unless the telemetry at `t*` shows its effect superseded.
fn state_anchors(p: &Pending, realised: &[(&Actuating, &Realisation)]) -> Vec<(MessageId, Fact)> {
    // The last realised command of each kind (halts latch; they are no anchor).
    let mut last: BTreeMap<&'static str, (&Actuating, &Realisation)> = BTreeMap::new();
    for &(c, r) in realised {
        if c.kind == "halt" {
            continue;
        }
        let newer = last
            .get(c.kind)
            .is_none_or(|(_, q)| (r.ts, r.seq) > (q.ts, q.seq));
        if newer {
            last.insert(c.kind, (c, r));
        }
    }
    let mut anchors: Vec<(MessageId, Fact)> = Vec::new();
    for (kind, (c, r)) in last {
        let obs = &p.subject_obs;
        let num = |f: &str| obs.fields.get(f).and_then(Value::as_f64);
        let superseded = match &c.effect {
            Effect::Speed { mm_per_s, .. } => {
                num("speed_mm_per_s").is_some_and(|v| v > 0.0 && v != *mm_per_s as f64)
            }
            Effect::Param { name, value, .. } => {
                num(name.as_str()).is_some_and(|v| v != *value as f64)
            }
            _ => false,
        };
        if superseded {
            continue;
        }
        let mut evidence = vec![id_string(&c.id), id_string(&r.report)];
        let corroborated = matches!(c.effect, Effect::Speed { .. } | Effect::Param { .. });
        if corroborated {
            evidence.push(id_string(&obs.evidence));
        }
        anchors.push((
            c.id.clone(),
            Fact {
                fact: FactKind::Anchor,
                message: Some(id_string(&c.id)),
                evidence,
                detail: format!(
                    "last realised {kind} of {} by t* (actuation report at {} ms){}",
                    p.subject,
                    r.ts,
                    if corroborated {
                        "; its effect is what the telemetry at t* reports"
                    } else {
                        ""
                    }
                ),
            },
        ));
    }
    anchors
}

impl Monitor {
    /// A VDA 5050 vehicle on a released edge at `t*` faster than the `maxSpeed` the
    /// order released it with: the order's committed effect ("traverse this edge at
    /// no more than m") is contradicted by the telemetry, and the contradicting
    /// actuation is on record — the vehicle's own progress report on that edge. It
    /// is a second anchor (`combine: all`): the outcome needs both the release and
    /// the vehicle's conduct on it, and the duties decide who breached.
    fn deviation_anchor(
        &self,
        p: &Pending,
        realised: &[(&Actuating, &Realisation)],
    ) -> Option<(MessageId, Fact)> {
        let obs = &p.subject_obs;
        let order_id = match obs.fields.get("order_id") {
            Some(Value::Str(s)) => s.as_str(),
            _ => return None,
        };
        let edge_seq = u64::try_from(obs.fields.get("edge_sequence_id")?.as_f64()? as i64).ok()?;
        let speed = obs.fields.get("speed_mm_per_s")?.as_f64()?;
        // The update that first released the edge, among the realised commands.
        let (c, _) = realised
            .iter()
            .filter(|(c, _)| {
                c.order
                    .as_ref()
                    .is_some_and(|o| o.order_id == order_id && o.released_edge(edge_seq).is_some())
            })
            .min_by_key(|(c, _)| c.order.as_ref().map(|o| o.update_id))?;
        let order = c.order.as_ref()?;
        let edge = order.released_edge(edge_seq)?;
        let max = edge.max_speed_mm_per_s?;
        if speed <= max as f64 {
            return None;
        }
        let report = self
            .reports
            .get(&c.id)
            .into_iter()
            .flatten()
            .filter(|r| r.ts <= p.t_star && r.author == p.subject)
            .filter(|r| {
                r.progress
                    .as_ref()
                    .is_some_and(|(o, seqs)| o == order_id && seqs.contains(&edge_seq))
            })
            .min_by_key(|r| (r.ts, r.seq))?;
        Some((
            report.report.clone(),
            Fact {
                fact: FactKind::Anchor,
                message: Some(id_string(&report.report)),
                evidence: vec![
                    id_string(&report.report),
                    id_string(&c.id),
                    id_string(&obs.evidence),
                ],
                detail: format!(
                    "{} on edge {} (sequenceId {edge_seq}) of order {order_id} at {speed} mm/s at t*, \
                     above the maxSpeed {max} mm/s update {} released it with: its own progress \
                     on the edge (report at {} ms) is the actuation the telemetry reports",
                    p.subject, edge.edge_id, order.update_id, report.ts
                ),
            },
        ))
    }
}

/// Whether [`Monitor::observe`] can learn anything from this message: a sensor or
/// tool report, or an actuating command ([`vda5050::actuating`]); a stage may skip
/// every other message without changing what the monitor derives.
pub fn observes(env: &audita_evidence::Envelope) -> bool {
    matches!(
        env.payload,
        Payload::SensorReport { .. } | Payload::ToolOutput { .. }
    ) || vda5050::actuating(env).is_some()
}

/// Whether a `tool_output` is an actuation report: tool `actuator`, or a VDA 5050
/// vehicle's action running or finished ([`vda5050`]).
fn realisation(tool: &str, output: &str) -> bool {
    tool == "actuator"
        || (tool == vda5050::ACTION_TOOL && vda5050::realises(output))
        || (tool == vda5050::PROGRESS_TOOL && vda5050::progress_of(output).is_some())
}

/// Runs the monitor over a verified record's certified messages in record-time order
/// (ties in record order) and declares every incident.
pub fn derive(partition: &Partition, file: &Predicates) -> Derivation {
    let mut msgs: Vec<&audita_evidence::Certified> = partition.certified.values().collect();
    msgs.sort_by_key(|c| (c.envelope.envelope().timestamp, c.record_index));
    let mut m = Monitor::new(file.clone());
    let mut alerts = Vec::new();
    for c in msgs {
        alerts.extend(m.observe(&c.envelope));
    }
    let declarations = m.advance(u64::MAX);
    Derivation {
        declarations,
        alerts,
        malformed: m.malformed,
    }
}

/// What makes one message part of what a declaration's derivation reads
/// ([`reads`]), whatever the declaration: the part of the test that does not depend
/// on the declaration's targets, so a slicer can classify a message once, when it
/// arrives, and narrow a window without decoding it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadKey<'a> {
    /// Read by every declaration whose window holds it: telemetry observing
    /// entities of several sites, or telemetry that breaks the format.
    Always,
    /// Telemetry whose every observed entity is registered in this site (`None`:
    /// the default site): read by a declaration with a target there, or with none.
    Site(Option<&'a str>),
    /// Read by a declaration naming this principal among its targets (an actuation
    /// report of the target, an actuating command on it).
    IfTarget(&'a str),
}

/// The [`ReadKey`] of a message under the predicate file `file` (its entity
/// registry places entities in sites; without one every entity is in the default
/// site), `None` when no derivation reads it.
///
/// Why a declaration reads only its targets' sites. A declaration's subject is
/// one target; the predicates judge a subject by its own observations, and a
/// separation pairs it only with entities of its own site, whose reports a
/// report of another site cannot update. So a report observing no entity of a
/// target's site changes nothing the monitor derives for that target: no arm,
/// no `t*`, no severity, no evidence (the entities' order is the registry's, a
/// sorted map, which leaving entities out does not reorder).
pub fn read_key<'a>(
    env: &'a audita_evidence::Envelope,
    file: Option<&'a Predicates>,
) -> Option<ReadKey<'a>> {
    let site_of = |e: &str| crate::predicate::site_of(file, e);
    match &env.payload {
        Payload::SensorReport { sensor, .. } if sensor == vda5050::STATE_SENSOR => {
            Some(ReadKey::Site(site_of(env.author.as_str())))
        }
        Payload::SensorReport { reading, .. } => match telemetry::parse(reading)? {
            Err(_) => Some(ReadKey::Always),
            Ok(obs) => {
                let mut sites = obs.iter().map(|o| site_of(&o.entity));
                let first = sites.next().flatten();
                if sites.all(|s| s == first) {
                    Some(ReadKey::Site(first))
                } else {
                    Some(ReadKey::Always)
                }
            }
        },
        Payload::ToolOutput { tool, output } => {
            realisation(tool, output).then_some(ReadKey::IfTarget(env.author.as_str()))
        }
        _ => vda5050::actuating(env).map(|(t, _)| ReadKey::IfTarget(t)),
    }
}

/// The messages a declaration's derivation reads, for a self-contained slice: every
/// telemetry report timestamped in the declaration's window that observes an entity
/// of a target's site ([`read_key`]; all of them for a declaration without
/// targets), every actuation report of a target there, and every actuating command
/// there on one of its targets — what [`check()`](crate::check()) needs, with the
/// same predicate file, to re-derive the declaration from the slice.
pub fn reads<'a>(
    messages: impl IntoIterator<Item = (&'a MessageId, &'a audita_evidence::Envelope)>,
    decl: &AdverseDecl,
    file: Option<&Predicates>,
) -> BTreeSet<MessageId> {
    let (start, end) = (decl.window_start_ms, decl.window_end());
    let targets: BTreeSet<&str> = decl.targets.iter().map(String::as_str).collect();
    let sites: BTreeSet<Option<&str>> = targets
        .iter()
        .map(|t| crate::predicate::site_of(file, t))
        .collect();
    let mut out = BTreeSet::new();
    for (id, env) in messages {
        if env.timestamp < start || env.timestamp > end {
            continue;
        }
        let keep = match read_key(env, file) {
            Some(ReadKey::Always) => true,
            Some(ReadKey::Site(s)) => targets.is_empty() || sites.contains(&s),
            Some(ReadKey::IfTarget(t)) => targets.contains(t),
            None => false,
        };
        if keep {
            out.insert(id.clone());
        }
    }
    out
}
