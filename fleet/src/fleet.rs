//! A simulated fleet feeding the pipeline: facility scenarios laid side by side as
//! *cells* of one warehouse, each a live stream of signed envelopes and receipts plus
//! its duty registry entries and, when the world's predicate fires, its adverse
//! declaration.
//!
//! Design constraints:
//! - Cell `i` is the facility scenario of (family, seed), re-signed under cell-local
//!   principal names (`c<i>.<name>`) with keys from a [`KeySource`] — the keys a
//!   deployment registered for the fleet ([`build_with`]), or, for tests and the
//!   insecure demo mode only, `derive_signing_key(fleet_seed, name)` ([`build`]) —
//!   and shifted to its own time slot (`i × CELL_SLOT_MS` in [`build`]; any base in
//!   [`build_cell`]), so one key registry holds the whole fleet. Citations are
//!   remapped to the re-signed ids in record order (a topological order).
//! - The duty registry and the adverse predicates are the facility's own
//!   ([`audita_facility::record::registry_json`],
//!   [`audita_facility::record::predicates_json`]), renamed into the cell
//!   (principals, actuators, entities, duty ids). A cell's declaration is what the
//!   monitor (`audita-monitor`) derives from the cell's own signed messages — never
//!   the simulator's planted truth; the pipeline's monitor derives the same from the
//!   sealed stream.
//! - Deterministic: the same (mix, seed) gives the same bytes.

use audita_bus::{BusError, Producer};
use audita_evidence::{
    derive_signing_key, Effect, Envelope, KeyRegistry, MessageId, Payload, PrincipalId, Receipt,
    SignedEnvelope, SigningKey,
};
use audita_facility::record::{registry_json, sign_record};
use audita_facility::scenario::{generate, Family, Scenario};
use audita_topics::names as topics;
use audita_verdict::{AdverseDecl, DutyRegistry};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Duration;

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

/// Where a fleet's signing keys come from: called once per principal name.
pub type KeySource<'a> = &'a mut dyn FnMut(&str) -> SigningKey;

/// A fleet of cells with one key registry and one duty registry.
#[derive(Clone, Debug)]
pub struct Fleet {
    /// Public keys of every principal of every cell.
    pub keys: KeyRegistry,
    /// The role of every principal (registry `role`: planner, controller, sensor,
    /// actuator, batch, operator, monitor, …).
    pub roles: BTreeMap<String, String>,
    /// The cells.
    pub cells: Vec<Cell>,
    /// Duty registry JSON (standard `reasonable_agent`).
    pub duties_json: String,
    /// The adverse predicates the fleet's deployment declares (`audita-monitor`
    /// predicate-file JSON): the facility's, over every cell.
    pub predicates_json: String,
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

    /// The planted causal profile of every declared incident, by incident name (for
    /// checking verdicts; never read by the pipeline).
    pub fn planted(&self) -> BTreeMap<String, &BTreeMap<String, f64>> {
        self.cells
            .iter()
            .filter_map(|c| {
                c.adverse
                    .as_ref()
                    .map(|a| (a.incident.clone(), &c.planted_causal))
            })
            .collect()
    }

    /// Number of envelopes.
    pub fn messages(&self) -> usize {
        self.cells.iter().map(|c| c.envelopes.len()).sum()
    }

    /// Number of incidents the fleet declares.
    pub fn incidents(&self) -> usize {
        self.cells.iter().filter(|c| c.adverse.is_some()).count()
    }

    /// Publishes the fleet as a client of a deployment whose topics carry `prefix`,
    /// as a real fleet does: envelopes and receipts in time order (commands, sensor,
    /// telemetry and actuation reports) and no adverse declaration — the
    /// deployment's monitor stage detects every incident. Paced at `rate` messages
    /// per second when given (what is due is flushed, so the stream really arrives
    /// over time); a back-pressured send is retried. Calls `progress` per message.
    pub fn publish(
        &self,
        p: &mut dyn Producer,
        prefix: &str,
        rate: Option<f64>,
        mut progress: impl FnMut(usize),
    ) -> Result<(), BusError> {
        let started = std::time::Instant::now();
        let (env_topic, rec_topic) = (
            format!("{prefix}{}", topics::ENVELOPES),
            format!("{prefix}{}", topics::RECEIPTS),
        );
        let send = |p: &mut dyn Producer, topic: &str, key: &[u8], bytes: &[u8]| loop {
            match p.send(topic, key, bytes) {
                Ok(()) => return Ok(()),
                Err(e) if e.is_transient() => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => return Err(e),
            }
        };
        for (i, (env, receipt)) in self.envelopes_in_time_order().into_iter().enumerate() {
            send(
                p,
                &env_topic,
                env.envelope().author.as_str().as_bytes(),
                env.as_bytes(),
            )?;
            send(
                p,
                &rec_topic,
                receipt.recipient().as_str().as_bytes(),
                receipt.as_bytes(),
            )?;
            progress(i + 1);
            if let Some(rate) = rate.filter(|r| *r > 0.0) {
                let due = Duration::from_secs_f64((i + 1) as f64 / rate);
                if let Some(wait) = due.checked_sub(started.elapsed()) {
                    p.flush()?;
                    std::thread::sleep(wait);
                }
            }
        }
        p.flush()
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

/// Builds a fleet of `cells` cells cycling through `mix`, scenario seeds from `seed`,
/// with keys derived from `seed` (tests and the insecure demo mode only: these keys
/// are public knowledge).
pub fn build(mix: &[Family], cells: usize, seed: u64) -> Fleet {
    build_with(mix, cells, seed, &mut |name| derive_signing_key(seed, name))
}

/// Builds a fleet of `cells` cells cycling through `mix`, scenario seeds from `seed`,
/// signing with the keys `keys` gives each principal.
pub fn build_with(mix: &[Family], cells: usize, seed: u64, keys: KeySource<'_>) -> Fleet {
    let mut registry = KeyRegistry::new();
    let mut roles = BTreeMap::new();
    let mut principals = serde_json::Map::new();
    let mut out = Vec::new();
    let mut files = Vec::new();
    let mut cache: BTreeMap<String, SigningKey> = BTreeMap::new();
    let mut key = |name: &str| -> SigningKey {
        cache
            .entry(name.to_string())
            .or_insert_with(|| keys(name))
            .clone()
    };
    for i in 0..cells {
        let family = mix[i % mix.len().max(1)];
        let sc = generate(family, seed.wrapping_add(i as u64));
        let cell = build_cell(
            i,
            &sc,
            &mut key,
            i as u64 * CELL_SLOT_MS,
            &mut registry,
            &mut principals,
        )
        .unwrap_or_else(|e| panic!("facility scenario {} {}: {e}", sc.family, sc.seed));
        for (name, role) in roles_of(&sc) {
            roles.insert(cell_name(i, &name), role);
        }
        files.push((i, cell_predicates(i, &sc)));
        out.push(cell);
    }
    let duties_json = json!({"standard": "reasonable_agent", "principals": principals}).to_string();
    Fleet {
        keys: registry,
        roles,
        cells: out,
        duties_json,
        predicates_json: merge_predicates(&files).to_string(),
    }
}

/// The registry role of every name a scenario's record signs under.
fn roles_of(sc: &Scenario) -> Vec<(String, String)> {
    let spec = &sc.spec;
    let mut out: Vec<(String, String)> = vec![
        (audita_facility::record::OPERATOR.into(), "operator".into()),
        (audita_facility::record::MONITOR.into(), "monitor".into()),
        (audita_facility::record::RTLS.into(), "sensor".into()),
        (audita_facility::record::QC.into(), "sensor".into()),
    ];
    out.extend(
        spec.principals
            .iter()
            .map(|p| (p.name.clone(), p.role.as_str().to_string())),
    );
    out.extend(
        spec.robots
            .iter()
            .map(|r| (r.name.clone(), "actuator".into())),
    );
    out.extend(
        spec.batches
            .iter()
            .map(|b| (b.name.clone(), "batch".into())),
    );
    out
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
        Payload::SensorReport { sensor, reading } => {
            *sensor = cell_name(i, sensor);
            if let Some(renamed) = audita_monitor::telemetry::rename(reading, |n| cell_name(i, n)) {
                *reading = renamed;
            }
        }
        _ => {}
    }
    p
}

/// Record time before `t*` a fleet incident's window reaches back (ms): longer than
/// any facility scenario runs, far shorter than a cell's time slot, so a window
/// holds one cell's traffic.
pub const CELL_LOOKBACK_MS: u64 = 60_000;

/// The facility's predicate file for scenario `sc`, laid as cell `i`: registered
/// entities renamed into the cell and registered at site `c<i>` (each cell is its own
/// place: a separation pairs within a cell only, even when cells overlap in record
/// time, as in a live load), per-entity selectors generalised to their class,
/// windows limited to [`CELL_LOOKBACK_MS`].
pub fn cell_predicates(i: usize, sc: &Scenario) -> Value {
    let mut file: Value = serde_json::from_str(&audita_facility::record::predicates_json(sc))
        .unwrap_or_else(|_| json!({"version": 1, "predicates": []}));
    // Each cell is its own site, with its own coordinate frame: cells laid at the same
    // record time (a live load) never pair one's robot with another's worker.
    if let Some(entities) = file.get_mut("entities").and_then(Value::as_object_mut) {
        let renamed: serde_json::Map<String, Value> = entities
            .iter()
            .map(|(k, v)| {
                let mut v = v.clone();
                if let Some(o) = v.as_object_mut() {
                    o.insert("site".into(), json!(format!("c{i}")));
                }
                (cell_name(i, k), v)
            })
            .collect();
        *entities = renamed;
    }
    if let Some(list) = file.get_mut("predicates").and_then(Value::as_array_mut) {
        for p in list.iter_mut().filter_map(Value::as_object_mut) {
            if let Some(sel) = p.get_mut("entity").and_then(Value::as_object_mut) {
                if sel.remove("name").is_some() && !sel.contains_key("class") {
                    sel.insert("class".into(), json!("batch"));
                }
            }
            p.insert("lookback_ms".into(), json!(CELL_LOOKBACK_MS));
        }
    }
    file
}

/// Merges cell predicate files into the fleet's: every cell's registered entities;
/// each predicate once (a cell whose predicate of the same name differs keeps its
/// own, suffixed `.c<i>`, selecting its own entities by name pattern).
pub fn merge_predicates(cells: &[(usize, Value)]) -> Value {
    let mut entities = serde_json::Map::new();
    let mut predicates: Vec<Value> = Vec::new();
    let mut deadline = json!(1000);
    for (i, file) in cells {
        if let Some(d) = file.get("realisation_deadline_ms") {
            deadline = d.clone();
        }
        if let Some(e) = file.get("entities").and_then(Value::as_object) {
            entities.extend(e.clone());
        }
        for p in file
            .get("predicates")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = p.get("name").cloned().unwrap_or_default();
            match predicates.iter().find(|q| q.get("name") == Some(&name)) {
                None => predicates.push(p.clone()),
                Some(q) if q == p => {}
                Some(_) => {
                    let mut own = p.clone();
                    own["name"] = json!(format!("{}.c{i}", name.as_str().unwrap_or("")));
                    for sel in ["entity", "a"] {
                        if let Some(s) = own.get_mut(sel).and_then(Value::as_object_mut) {
                            s.insert("name".into(), json!(format!("c{i}.*")));
                        }
                    }
                    predicates.push(own);
                }
            }
        }
    }
    json!({"version": 1, "realisation_deadline_ms": deadline, "entities": entities,
           "predicates": predicates})
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

/// Why a facility scenario could not be laid as a cell.
#[derive(Debug, thiserror::Error)]
pub enum CellError {
    /// The facility could not sign or declare the scenario.
    #[error("facility scenario {family} {seed}: {detail}")]
    Facility {
        /// Scenario family.
        family: &'static str,
        /// Scenario seed.
        seed: u64,
        /// What failed.
        detail: String,
    },
    /// A renamed principal name broke the naming rule (cell index too long).
    #[error("cell principal name {0:?} is not a valid principal name")]
    Name(String),
}

/// Lays scenario `sc` as cell `i` whose record time starts at `base_ms`: re-signs its
/// envelopes and receipts under cell-local names (registering every key in `keys`),
/// adds its principals' duties to `principals` (the duty registry's `principals`
/// object), and renames its adverse declaration into the cell.
pub fn build_cell(
    i: usize,
    sc: &Scenario,
    key_of: &mut dyn FnMut(&str) -> SigningKey,
    base_ms: u64,
    keys: &mut KeyRegistry,
    principals: &mut serde_json::Map<String, Value>,
) -> Result<Cell, CellError> {
    let facility = |detail: String| CellError::Facility {
        family: sc.family,
        seed: sc.seed,
        detail,
    };
    let sr = sign_record(sc).map_err(|e| facility(e.to_string()))?;
    let base = base_ms;
    let pid = |name: String| PrincipalId::new(name.clone()).map_err(|_| CellError::Name(name));
    let rename = |p: &PrincipalId| pid(cell_name(i, p.as_str()));
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
        let old = env.envelope();
        let author = rename(&old.author)?;
        let mut new = Envelope::new(
            author.clone(),
            rename(&old.destination)?,
            base + old.timestamp,
            cell_payload(i, &old.payload),
        )
        .cite(old.citations.iter().filter_map(|c| id_map.get(c).cloned()))
        .with_effect(cell_effect(i, &old.effect))
        .with_pins(old.pins.clone());
        new.timestamp = base + old.timestamp;
        let key = key_of(author.as_str());
        keys.add_principal(author, key.verifying_key());
        let signed = new
            .sign(&key)
            .map_err(|e| facility(format!("re-signed envelope: {e}")))?;
        let recipient = match recipient_of.get(env.id()) {
            Some(r) => rename(r)?,
            None => signed.envelope().destination.clone(),
        };
        let rkey = key_of(recipient.as_str());
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
    let registry: Value = serde_json::from_str(&registry_json(sc, "reasonable_agent"))
        .map_err(|e| facility(format!("duty registry: {e}")))?;
    if let Some(ps) = registry.get("principals").and_then(Value::as_object) {
        for (name, entry) in ps {
            principals.insert(cell_name(i, name), cell_registry_entry(i, entry));
        }
    }
    let adverse = declare_cell(i, sc, &envelopes, keys).map_err(facility)?;
    let planted_causal = sc
        .planted
        .causal
        .iter()
        .map(|(p, r)| (cell_name(i, p), *r))
        .collect();
    Ok(Cell {
        index: i,
        family: sc.family,
        seed: sc.seed,
        envelopes,
        receipts,
        adverse,
        planted_causal,
    })
}

/// The cell's adverse declaration as the monitor derives it from the cell's signed
/// messages with the cell's predicate file (none when no predicate fires; at most
/// one per facility scenario, whose world stops at `t*`).
fn declare_cell(
    i: usize,
    sc: &Scenario,
    envelopes: &[SignedEnvelope],
    keys: &KeyRegistry,
) -> Result<Option<AdverseDecl>, String> {
    let file = audita_monitor::Predicates::from_json(&cell_predicates(i, sc).to_string())
        .map_err(|e| e.to_string())?;
    let mut monitor = audita_monitor::Monitor::new(file);
    let mut ordered: Vec<&SignedEnvelope> = envelopes.iter().collect();
    ordered.sort_by_key(|e| e.envelope().timestamp);
    for env in ordered {
        let verified = env
            .clone()
            .verify(keys)
            .map_err(|e| format!("re-signed envelope does not verify: {e}"))?;
        monitor.observe(&verified);
    }
    let mut decls = monitor.advance(u64::MAX);
    if decls.len() > 1 {
        return Err(format!(
            "{} incidents in one facility scenario",
            decls.len()
        ));
    }
    Ok(decls.pop())
}

/// One principal's registry entry (`{"duties": [...], "reference": [...]}`) renamed
/// into cell `i`: duty and rule ids get the cell prefix, and every field naming an
/// actuator, batch or principal (`target`, `trigger_sensor`, `reviewer`,
/// `cites_author`) is renamed; everything else is kept as the facility declared it.
fn cell_registry_entry(i: usize, entry: &Value) -> Value {
    let mut entry = entry.clone();
    for list in ["duties", "reference"] {
        let Some(items) = entry.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for item in items.iter_mut().filter_map(Value::as_object_mut) {
            for field in ["id", "target", "trigger_sensor", "reviewer", "cites_author"] {
                if let Some(Value::String(s)) = item.get_mut(field) {
                    *s = cell_name(i, s);
                }
            }
        }
    }
    entry
}
