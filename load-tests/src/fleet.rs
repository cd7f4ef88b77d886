//! A simulated fleet feeding the pipeline: facility scenarios laid side by side as
//! *cells* of one warehouse, each a live stream of signed envelopes and receipts plus
//! its duty registry entries and, when the world's predicate fires, its adverse
//! declaration.
//!
//! Design constraints:
//! - Cell `i` is the facility scenario of (family, seed), re-signed under cell-local
//!   principal names (`c<i>.<name>`, keys from `derive_signing_key(fleet_seed, name)`)
//!   and shifted to its own time slot (`i × CELL_SLOT_MS`), so one key registry holds
//!   the whole fleet and no cell's messages fall into another's incident window.
//!   Citations are remapped to the re-signed ids in record order (a topological order).
//! - The duty registry and the adverse declaration are derived from the world's own
//!   declarations (zone speed envelopes, batch ranges, registered halt duties; the
//!   realised actuations before `t*`), never from the planted truth.
//! - Deterministic: the same (mix, seed) gives the same bytes.

use audita_evidence::{
    derive_signing_key, Effect, Envelope, KeyRegistry, MessageId, Payload, PrincipalId, Receipt,
    SignedEnvelope,
};
use audita_facility::oracle::envelope as speed_envelope;
use audita_facility::record::sign_record;
use audita_facility::scenario::{generate, Family, Scenario};
use audita_facility::world::{Action, Adverse as WorldAdverse, Destination, Duty, Mode, Source};
use audita_verdict::{id_string, AdverseDecl, Combine, DutyRegistry, Severity};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};

/// Width of one cell's time slot (ms of record time).
pub const CELL_SLOT_MS: u64 = 10_000_000;

/// One cell of the fleet.
#[derive(Clone, Debug)]
pub struct Cell {
    /// Cell number.
    pub index: usize,
    /// Scenario family name.
    pub family: &'static str,
    /// Scenario seed.
    pub seed: u64,
    /// Signed envelopes in record order, with the principal that must receipt each.
    pub envelopes: Vec<SignedEnvelope>,
    /// Receipts, one per envelope.
    pub receipts: Vec<Receipt>,
    /// The adverse declaration, when the world's predicate fired.
    pub adverse: Option<AdverseDecl>,
    /// Planted causal profile (cell-local names), for checks only.
    pub planted_causal: BTreeMap<String, f64>,
}

/// A fleet of cells with one key registry and one duty registry.
#[derive(Clone, Debug)]
pub struct Fleet {
    /// Public keys of every principal of every cell.
    pub keys: KeyRegistry,
    /// The cells.
    pub cells: Vec<Cell>,
    /// Duty registry JSON (standard `reasonable_agent`).
    pub duties_json: String,
}

impl Fleet {
    /// The duty registry.
    pub fn duties(&self) -> Result<DutyRegistry, audita_verdict::VerdictError> {
        DutyRegistry::from_json(&self.duties_json)
    }

    /// Every envelope of every cell, in time order (cells interleave).
    pub fn envelopes_in_time_order(&self) -> Vec<(&SignedEnvelope, &Receipt)> {
        let mut all: Vec<(&SignedEnvelope, &Receipt)> = self
            .cells
            .iter()
            .flat_map(|c| c.envelopes.iter().zip(&c.receipts))
            .collect();
        all.sort_by_key(|(e, _)| (e.envelope().timestamp, e.id().clone()));
        all
    }

    /// Number of envelopes.
    pub fn messages(&self) -> usize {
        self.cells.iter().map(|c| c.envelopes.len()).sum()
    }
}

/// The families a default demo mixes, in order.
pub const DEMO_MIX: [Family; 8] = [
    Family::Trivial,
    Family::Redundancy,
    Family::InertTwin,
    Family::Preemption,
    Family::Omission,
    Family::Chain,
    Family::UnexpectedStartup,
    Family::NoCause,
];

/// Builds a fleet of `cells` cells cycling through `mix`, scenario seeds from `seed`.
pub fn build(mix: &[Family], cells: usize, seed: u64) -> Fleet {
    let mut keys = KeyRegistry::new();
    let mut principals = serde_json::Map::new();
    let mut out = Vec::new();
    for i in 0..cells {
        let family = mix[i % mix.len().max(1)];
        let sc = generate(family, seed.wrapping_add(i as u64));
        let cell = build_cell(i, &sc, seed, &mut keys, &mut principals);
        out.push(cell);
    }
    let duties_json = json!({"standard": "reasonable_agent", "principals": principals}).to_string();
    Fleet {
        keys,
        cells: out,
        duties_json,
    }
}

fn cell_name(i: usize, name: &str) -> String {
    format!("c{i}.{name}")
}

/// The payload with its actuator target renamed into the cell.
fn cell_payload(i: usize, p: &Payload) -> Payload {
    let mut p = p.clone();
    match &mut p {
        Payload::MoveTo { target, .. }
        | Payload::SetSpeed { target, .. }
        | Payload::Halt { target }
        | Payload::SetParam { target, .. } => *target = cell_name(i, target),
        _ => {}
    }
    p
}

/// The committed effect with its target renamed into the cell.
fn cell_effect(i: usize, e: &Effect) -> Effect {
    let mut e = e.clone();
    match &mut e {
        Effect::AtPosition { target, .. }
        | Effect::Speed { target, .. }
        | Effect::Halted { target }
        | Effect::Param { target, .. } => *target = cell_name(i, target),
        _ => {}
    }
    e
}

fn pid(name: &str) -> PrincipalId {
    PrincipalId::new(name).unwrap_or_else(|e| panic!("fleet principal {name}: {e}"))
}

fn build_cell(
    i: usize,
    sc: &Scenario,
    fleet_seed: u64,
    keys: &mut KeyRegistry,
    principals: &mut serde_json::Map<String, serde_json::Value>,
) -> Cell {
    let sr = sign_record(sc)
        .unwrap_or_else(|e| panic!("facility scenario {} {} signs: {e}", sc.family, sc.seed));
    let base = i as u64 * CELL_SLOT_MS;
    let rename = |p: &PrincipalId| pid(&cell_name(i, p.as_str()));
    let mut id_map: BTreeMap<MessageId, MessageId> = BTreeMap::new();
    let mut envelopes = Vec::new();
    let mut receipts = Vec::new();
    // Receipt signers of the original record, by message id.
    let mut recipient_of: BTreeMap<MessageId, PrincipalId> = BTreeMap::new();
    for r in &sr.record.receipts {
        if let Ok(r) = Receipt::decode(r.clone()) {
            recipient_of.insert(r.message().clone(), r.recipient().clone());
        }
    }
    for env in &sr.envelopes {
        let old = env.envelope().clone();
        let mut new = Envelope::new(
            rename(&old.author),
            rename(&old.destination),
            base + old.timestamp,
            cell_payload(i, &old.payload),
        )
        .cite(old.citations.iter().filter_map(|c| id_map.get(c).cloned()))
        .with_effect(cell_effect(i, &old.effect))
        .with_pins(old.pins.clone());
        new.timestamp = base + old.timestamp;
        let author = new.author.as_str().to_string();
        let key = derive_signing_key(fleet_seed, &author);
        keys.add_principal(new.author.clone(), key.verifying_key());
        let signed = new
            .sign(&key)
            .unwrap_or_else(|e| panic!("re-signed fleet envelope is valid: {e}"));
        let recipient = recipient_of
            .get(env.id())
            .map(&rename)
            .unwrap_or_else(|| signed.envelope().destination.clone());
        let rkey = derive_signing_key(fleet_seed, recipient.as_str());
        keys.add_principal(recipient.clone(), rkey.verifying_key());
        receipts.push(Receipt::sign(
            signed.id().clone(),
            recipient,
            signed.envelope().timestamp + 1,
            &rkey,
        ));
        id_map.insert(env.id().clone(), signed.id().clone());
        envelopes.push(signed);
    }
    for (name, duties) in registry(sc, i) {
        principals.insert(cell_name(i, &name), json!({"duties": duties}));
    }
    let ids: Vec<MessageId> = sr
        .command_ids
        .iter()
        .map(|id| id_map.get(id).cloned().unwrap_or_else(|| id.clone()))
        .collect();
    let adverse = declaration(sc, &ids, base, i);
    let planted_causal = sc
        .planted
        .causal
        .iter()
        .map(|(p, r)| (cell_name(i, p), *r))
        .collect();
    Cell {
        index: i,
        family: sc.family,
        seed: sc.seed,
        envelopes,
        receipts,
        adverse,
        planted_causal,
    }
}

/// The duties the world declares, per principal (cell-local names): every principal
/// holds the speed envelope of every robot and the acceptance range of every batch;
/// supervisors hold their registered halt duties.
fn registry(sc: &Scenario, cell: usize) -> BTreeMap<String, Vec<serde_json::Value>> {
    let spec = &sc.spec;
    let mut out = BTreeMap::new();
    for p in &spec.principals {
        let mut duties = Vec::new();
        for (ri, r) in spec.robots.iter().enumerate() {
            let lim = speed_envelope(spec, ri);
            if lim != i64::MAX {
                duties.push(json!({"kind": "safety_envelope", "id": format!("c{cell}.env.{}.{}", p.name, r.name),
                    "target": cell_name(cell, &r.name), "max_mm_per_s": lim * 10}));
            }
        }
        for b in &spec.batches {
            duties.push(json!({"kind": "safety_envelope", "id": format!("c{cell}.range.{}.{}", p.name, b.name),
                "target": cell_name(cell, &b.name), "param": "param", "min": b.range.0, "max": b.range.1}));
        }
        for (di, d) in spec.duties.iter().enumerate() {
            if let Duty::HaltOnEntry {
                supervisor,
                zone,
                robot,
                deadline,
            } = d
            {
                if spec.name(*supervisor) == p.name {
                    duties.push(
                        json!({"kind": "halt_authority", "id": format!("c{cell}.halt.{di}"),
                        "target": cell_name(cell, &spec.robots[robot.0 as usize].name),
                        "trigger_contains": format!("entered {}", spec.zones[*zone as usize].name),
                        "deadline_ms": u64::from(*deadline) * 100}),
                    );
                }
            }
        }
        out.insert(p.name.clone(), duties);
    }
    out
}

/// The adverse declaration from the recorded state: anchors are the last realised
/// command actuation of each kind on `Y`'s actuator before `t*`; unrealised are
/// actuating commands whose effect never arrived. `None` when `Y` never fired.
fn declaration(sc: &Scenario, ids: &[MessageId], base: u64, cell: usize) -> Option<AdverseDecl> {
    let run = sc.spec.run_actual(Mode::Pinned);
    let y = run.adverse?;
    let (target_is, severity): (Box<dyn Fn(&Action) -> bool>, Option<Severity>) = match y {
        WorldAdverse::Safety {
            robot, severity_mj, ..
        } => {
            let mass = sc.spec.robots[robot.0 as usize].mass_kg as f64;
            let v = if mass > 0.0 {
                (2.0 * severity_mj as f64 / 1000.0 / mass).sqrt()
            } else {
                0.0
            };
            (
                Box::new(
                    move |a: &Action| matches!(a, Action::MoveTo { robot: r, .. } | Action::SetSpeed { robot: r, .. } | Action::Halt { robot: r } if *r == robot),
                ),
                Some(Severity {
                    mass_kg: mass,
                    speed_m_per_s: v,
                }),
            )
        }
        WorldAdverse::Quality { batch, .. } => (
            Box::new(
                move |a: &Action| matches!(a, Action::SetParam { batch: b, .. } if *b == batch),
            ),
            None,
        ),
    };
    let mut last: BTreeMap<&'static str, Source> = BTreeMap::new();
    for e in &run.actuations {
        if e.tick <= y.tick() && target_is(&e.action) {
            last.insert(e.action.name(), e.source);
        }
    }
    let anchors: Vec<String> = last
        .values()
        .filter_map(|s| match s {
            Source::Command(c) => ids.get(c.0 as usize).map(id_string),
            _ => None,
        })
        .collect();
    let realised: BTreeSet<u32> = run
        .actuations
        .iter()
        .filter_map(|e| match e.source {
            Source::Command(c) => Some(c.0),
            _ => None,
        })
        .collect();
    let unrealised: Vec<String> = sc
        .spec
        .commands
        .iter()
        .enumerate()
        .filter(|(i, c)| c.destination == Destination::Actuator && !realised.contains(&(*i as u32)))
        .filter_map(|(i, _)| ids.get(i).map(id_string))
        .collect();
    Some(AdverseDecl {
        incident: format!("cell{cell}-{}-{}", sc.family, sc.seed),
        outcome: match y {
            WorldAdverse::Safety { .. } => "separation_below_0.5m".into(),
            WorldAdverse::Quality { .. } => "batch_parameter_out_of_range".into(),
        },
        t_star_ms: base + u64::from(y.tick()) * 100 + 99,
        severity,
        anchors,
        combine: Combine::Any,
        unrealised,
        window_start_ms: base,
        window_end_ms: None,
        delta: 1.0,
    })
}
