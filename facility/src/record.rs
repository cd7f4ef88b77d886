//! The signed record of a world run, and record attacks over it.
//!
//! Design constraints:
//! - [`sign_record`] turns a scenario into the accountable record of `audita-evidence`:
//!   one root `external_input` (the shift order, authored by `operator`), one root
//!   `sensor_report` per recorded report, one signed envelope per command, one
//!   `tool_output` per realised actuation (authored by the actuator, citing the command
//!   it realised) and the facility's telemetry — all merged in time order. The record
//!   carries what a real fleet reports and nothing the simulator alone knows: no
//!   adverse declaration, no incident report. `audita-monitor` detects the incident
//!   from the telemetry against the predicate file [`predicates_json`] declares.
//! - Telemetry (the `audita-monitor` telemetry format: a `sensor_report` whose reading
//!   is `{"telemetry": 1, "observations": [{"entity", "class", "fields"}]}`), stamped
//!   at the end of its tick (`tick × 100 + 99`) and receipted by [`MONITOR`]: the
//!   tracking system [`RTLS`] reports every robot's `x_mm`, `y_mm`, `speed_mm_per_s`
//!   (0 unless moving) and `halted`, and every human's `x_mm`, `y_mm`, at tick 0,
//!   every [`RTLS_PERIOD_TICKS`] ticks, at every tick at which a robot is within
//!   [`RTLS_BAND_MM`] of a human, and at the last simulated tick; the quality-control
//!   station [`QC`] reports every batch's `param` at tick 0 and whenever one changes. Keys come from `derive_signing_key(seed, name)`; timestamps
//!   are tick × 100 ms plus a sub-tick sequence number, so the record is a pure function
//!   of the scenario.
//! - Citations: a relay cites exactly its consumed inputs; an origin command cites its
//!   context (its recorded citations, the sensor reports it acts on) and otherwise the
//!   shift order, so no derived command is uncited. The policy that produced a command
//!   is pinned as a replay tool pin `policy@origin|relay-any|relay-all`, the scenario
//!   seed as the replay seed.
//! - Actuating commands go to the actuator (robot or batch line name), which signs the
//!   receipt; every other command is receipted by its destination principal.
//! - Epochs hold [`EPOCH_SIZE`] messages; each checkpoint is co-signed by every keeper.
//! - Attacks ([`attack`]) operate on the stored bytes only: forge (an envelope in a
//!   real principal's name signed with the wrong key), drop (an envelope deleted, its
//!   receipt and seal kept), reorder (two sealed leaves swapped), equivocate (the log
//!   signs a second, divergent checkpoint for the same size).

use audita_evidence::{
    derive_signing_key, Effect, Envelope, KeyRegistry, MessageId, Payload,
    PrincipalId as EvPrincipal, Receipt, Record, ReplayPins, Sealer, SignedEnvelope, ToolPin,
};

use crate::scenario::Scenario;
use crate::world::{Action, Adverse, CommandId, Derivation, Destination, Mode, Role, Source};

/// Log origin of facility records.
pub const ORIGIN: &str = "audita.example/facility";
/// Keepers co-signing every checkpoint.
pub const KEEPERS: &[&str] = &["operator.example/keeper", "insurer.example/keeper"];
/// Messages per epoch.
pub const EPOCH_SIZE: usize = 4;
/// The incident monitor: recipient (receipt signer) of every telemetry report.
pub const MONITOR: &str = "incident-monitor";
/// Author of the tracking system's telemetry (robot and human positions).
pub const RTLS: &str = "rtls";
/// Author of the quality-control station's batch readings.
pub const QC: &str = "qc-station";
/// The tracking system reports every [`RTLS_PERIOD_TICKS`] ticks, and at every tick
/// at which some robot is within this distance (mm) of some human.
pub const RTLS_BAND_MM: i64 = 3000;
/// Reporting period of the tracking system far from humans (ticks).
pub const RTLS_PERIOD_TICKS: u32 = 10;
/// Author of the shift order.
pub const OPERATOR: &str = "operator";

/// Errors building a record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// A name is not a valid principal id.
    #[error("invalid principal name {0:?}")]
    Name(String),
    /// The evidence layer refused an envelope.
    #[error("envelope rejected: {0}")]
    Envelope(String),
}

/// A signed, sealed record of a scenario.
#[derive(Debug, Clone)]
pub struct SignedRecord {
    /// The raw record.
    pub record: Record,
    /// Public keys (principals, actuators, keepers, log).
    pub keys: KeyRegistry,
    /// Envelopes in record order.
    pub envelopes: Vec<SignedEnvelope>,
    /// Message ids of the signed world commands, in record order.
    pub command_ids: Vec<MessageId>,
    /// Message id of each world command by command index (`None` for reference
    /// counterparts, which are never signed).
    pub command_map: Vec<Option<MessageId>>,
}

fn pid(name: &str) -> Result<EvPrincipal, RecordError> {
    EvPrincipal::new(name).map_err(|_| RecordError::Name(name.to_string()))
}

/// Seals signed messages with their receipts, in the given order, into a record under
/// the log and keeper keys derived from `seed`: epochs of [`EPOCH_SIZE`] messages,
/// each checkpoint co-signed by every keeper of [`KEEPERS`]; the record holds the
/// envelopes, then the receipts, then the epochs.
pub fn seal(seed: u64, msgs: &[(SignedEnvelope, Receipt)]) -> Result<Record, RecordError> {
    let key = |n: &str| derive_signing_key(seed, n);
    let mut sealer =
        Sealer::new(ORIGIN, key(ORIGIN)).map_err(|_| RecordError::Name(ORIGIN.into()))?;
    let mut epochs = Vec::new();
    let mut last = 0;
    for (env, _) in msgs {
        sealer.append_envelope(env);
        last = env.envelope().timestamp;
        if sealer.pending() == EPOCH_SIZE {
            epochs.push(sealer.close_epoch(last + 1));
        }
    }
    if sealer.pending() > 0 {
        epochs.push(sealer.close_epoch(last + 1));
    }
    for e in &mut epochs {
        for k in KEEPERS {
            e.checkpoint
                .cosign(k, &key(k), 1_800_000_000 + e.header.number);
        }
    }
    let mut record = Record::new();
    for (env, _) in msgs {
        record.push_envelope(env);
    }
    for (_, r) in msgs {
        record.push_receipt(r);
    }
    for e in &epochs {
        record.push_epoch(e);
    }
    Ok(record)
}

/// Signs and seals a scenario's record.
pub fn sign_record(sc: &Scenario) -> Result<SignedRecord, RecordError> {
    sign_record_off_bus(sc, &std::collections::BTreeSet::new())
}

/// Signs and seals a scenario's record with the commands in `off_bus` carried by an
/// unrecorded side channel ([`crate::perimeter`]): the world runs as before (their
/// effect happens), but they are never signed, sealed or receipted, and no recorded
/// message cites them. A relay whose every consumed input went off-bus cites the
/// shift order, as any uncited command does. Actuating commands and reference
/// counterparts in `off_bus` are ignored (an actuation is always recorded).
pub fn sign_record_off_bus(
    sc: &Scenario,
    off_bus: &std::collections::BTreeSet<CommandId>,
) -> Result<SignedRecord, RecordError> {
    sign_record_hiding(sc, off_bus, &std::collections::BTreeSet::new())
}

/// [`sign_record_off_bus`], and also the citations `(consumer, input)` in
/// `hidden_citations` dropped from the record while the input itself stays on the
/// bus: the consumer learned of it out of band (a forwarded copy, a shared screen) and
/// does not cite it, though the world still runs on it.
pub fn sign_record_hiding(
    sc: &Scenario,
    off_bus: &std::collections::BTreeSet<CommandId>,
    hidden_citations: &std::collections::BTreeSet<(CommandId, CommandId)>,
) -> Result<SignedRecord, RecordError> {
    let spec = &sc.spec;
    let seed = sc.seed;
    let key = |n: &str| derive_signing_key(seed, n);
    let (run, frames) = spec.run_observed();
    let keys = key_registry(spec, seed)?;

    // Items in time order: (timestamp ms, envelope, recipient).
    let mut out: Vec<(SignedEnvelope, String)> = Vec::new();
    let sign = |env: Envelope| -> Result<SignedEnvelope, RecordError> {
        let author = env.author.to_string();
        env.sign(&key(&author))
            .map_err(|e| RecordError::Envelope(e.to_string()))
    };
    let first = spec
        .principals
        .iter()
        .find(|p| p.role != Role::Sensor)
        .map(|p| p.name.clone());
    let order_to = first.unwrap_or_else(|| OPERATOR.to_string());
    let order = sign(Envelope::new(
        pid(OPERATOR)?,
        pid(&order_to)?,
        0,
        Payload::ExternalInput {
            source: "wms".into(),
            text: format!("{} shift, seed {seed}", sc.family),
        },
    ))?;
    let order_id = order.id().clone();
    out.push((order, order_to.clone()));
    let events = record_events(spec, &run, &frames, off_bus);
    let mut report_ids: Vec<Option<MessageId>> = vec![None; run.reports.len()];
    let mut command_ids: Vec<Option<MessageId>> = vec![None; spec.commands.len()];
    let to_super = supervisor_or(spec, &order_to);
    let mut n = 0u64;
    for &(tick, class, i) in &events {
        // Reports, actuations and commands take sub-tick sequence numbers; telemetry
        // closes its tick (it reports the state after the tick's actuations and motion).
        let stamp = if class >= 3 {
            u64::from(tick) * 100 + 99
        } else {
            n += 1;
            u64::from(tick) * 100 + ((n - 1) % 100)
        };
        match class {
            0 => {
                let s = sign(report_envelope(spec, &run.reports[i], &to_super, stamp)?)?;
                report_ids[i] = Some(s.id().clone());
                out.push((s, to_super.clone()));
            }
            1 => {
                let e = &run.actuations[i];
                let Source::Command(c) = e.source else {
                    continue;
                };
                let Some(cid) = command_ids.get(c.0 as usize).cloned().flatten() else {
                    continue;
                };
                let author = spec.name(spec.commands[c.0 as usize].author).to_string();
                let s = sign(actuation_envelope(spec, e, &author, cid, stamp)?)?;
                out.push((s, author));
            }
            2 => {
                let c = &spec.commands[i];
                let cites = Citations {
                    hidden: hidden_citations,
                    commands: &command_ids,
                    reports: &report_ids,
                    order: &order_id,
                }
                .of(CommandId(i as u32), c);
                let (env, dest) = command_envelope(spec, seed, c, cites, stamp)?;
                let s = sign(env)?;
                command_ids[i] = Some(s.id().clone());
                out.push((s, dest));
            }
            3 => {
                let reading = rtls_reading(spec, &frames[i]);
                let s = sign(telemetry(RTLS, stamp, reading)?)?;
                out.push((s, MONITOR.to_string()));
            }
            _ => {
                let reading = qc_reading(spec, &frames[i]);
                let s = sign(telemetry(QC, stamp, reading)?)?;
                out.push((s, MONITOR.to_string()));
            }
        }
    }
    let command_map = command_ids.clone();
    let command_ids: Vec<MessageId> = command_ids.into_iter().flatten().collect();

    let record = seal(seed, &receipted(seed, &out)?)?;
    Ok(SignedRecord {
        record,
        keys,
        envelopes: out.into_iter().map(|(e, _)| e).collect(),
        command_ids,
        command_map,
    })
}

/// Each envelope with the receipt its recipient signs (1 ms after it).
fn receipted(
    seed: u64,
    out: &[(SignedEnvelope, String)],
) -> Result<Vec<(SignedEnvelope, Receipt)>, RecordError> {
    let mut signed = Vec::with_capacity(out.len());
    for (env, to) in out {
        let r = Receipt::sign(
            env.id().clone(),
            pid(to)?,
            env.envelope().timestamp + 1,
            &derive_signing_key(seed, to),
        );
        signed.push((env.clone(), r));
    }
    Ok(signed)
}

/// What a command's citations are drawn from: the citations hidden from the record,
/// the ids of the commands and reports signed so far, and the shift order's id.
struct Citations<'a> {
    hidden: &'a std::collections::BTreeSet<(CommandId, CommandId)>,
    commands: &'a [Option<MessageId>],
    reports: &'a [Option<MessageId>],
    order: &'a MessageId,
}

impl Citations<'_> {
    /// The citations of command `id`: its recorded inputs (those signed and not
    /// hidden) and reports, else the shift order.
    fn of(&self, id: CommandId, c: &crate::world::Command) -> Vec<MessageId> {
        let mut cites: Vec<MessageId> = c
            .cites
            .iter()
            .filter(|x| !self.hidden.contains(&(id, **x)))
            .filter_map(|x| self.commands.get(x.0 as usize).cloned().flatten())
            .collect();
        cites.extend(
            c.cites_reports
                .iter()
                .filter_map(|r| self.reports.get(*r as usize).cloned().flatten()),
        );
        if cites.is_empty() {
            cites.push(self.order.clone());
        }
        cites
    }
}

/// The registry of a facility record: every principal (operator, monitor, tracking
/// system, quality-control station, the spec's principals, robots and batch lines),
/// the keepers and the log, each with its key derived from `seed`.
fn key_registry(spec: &crate::world::WorldSpec, seed: u64) -> Result<KeyRegistry, RecordError> {
    let key = |n: &str| derive_signing_key(seed, n);
    let mut keys = KeyRegistry::new();
    let mut names: Vec<String> = vec![
        OPERATOR.to_string(),
        MONITOR.to_string(),
        RTLS.to_string(),
        QC.to_string(),
    ];
    names.extend(spec.principals.iter().map(|p| p.name.clone()));
    names.extend(spec.robots.iter().map(|r| r.name.clone()));
    names.extend(spec.batches.iter().map(|b| b.name.clone()));
    for n in &names {
        keys.add_principal(pid(n)?, key(n).verifying_key());
    }
    for k in KEEPERS {
        keys.add_keeper(k, key(k).verifying_key())
            .map_err(|_| RecordError::Name(k.to_string()))?;
    }
    keys.add_log(ORIGIN, key(ORIGIN).verifying_key())
        .map_err(|_| RecordError::Name(ORIGIN.into()))?;
    Ok(keys)
}

/// What the record holds after the shift order, as `(tick, class, index)` in time
/// order: sensor reports (class 0), realised actuations of commands (1), commands
/// on the bus (2, not reference counterparts nor `off_bus` ones), then telemetry
/// last in its tick — tracking frames (3) and batch readings (4).
fn record_events(
    spec: &crate::world::WorldSpec,
    run: &crate::world::Run,
    frames: &[crate::world::Frame],
    off_bus: &std::collections::BTreeSet<CommandId>,
) -> Vec<(u32, u8, usize)> {
    // Sensor reports, commands, realised actuations and the incident report, merged in
    // time order: within a tick, reports, then actuations, then commands (index order),
    // then the incident report.
    let mut events: Vec<(u32, u8, usize)> = Vec::new();
    events.extend(run.reports.iter().enumerate().map(|(i, r)| (r.tick, 0, i)));
    events.extend(
        run.actuations
            .iter()
            .enumerate()
            .filter(|(_, e)| matches!(e.source, Source::Command(_)))
            .map(|(i, e)| (e.tick, 1, i)),
    );
    // Reference counterparts are declared policy, not conduct: they are never signed.
    events.extend(
        spec.commands
            .iter()
            .enumerate()
            .filter(|(i, c)| {
                let hidden = off_bus.contains(&CommandId(*i as u32))
                    && matches!(c.destination, Destination::Principal(_));
                !c.is_reference() && !hidden
            })
            .map(|(i, c)| (c.tick, 2, i)),
    );
    // Telemetry, last in its tick: the tracking system's frames (class 3) and the
    // quality-control station's batch readings (class 4).
    for (i, f) in frames.iter().enumerate() {
        let last = i + 1 == frames.len();
        let near = f.robots.iter().any(|r| {
            f.humans
                .iter()
                .any(|h| r.pos.dist2(*h) < (RTLS_BAND_MM as i128) * (RTLS_BAND_MM as i128))
        });
        let tracked = !f.robots.is_empty() || !f.humans.is_empty();
        if tracked && (f.tick % RTLS_PERIOD_TICKS == 0 || near || last) {
            events.push((f.tick, 3, i));
        }
        let changed = i == 0 || frames[i - 1].batches != f.batches;
        if !f.batches.is_empty() && changed {
            events.push((f.tick, 4, i));
        }
    }
    events.sort();
    events
}

/// A sensor report: a root `sensor_report` of its sensor, addressed to `to_super`.
fn report_envelope(
    spec: &crate::world::WorldSpec,
    r: &crate::world::SensorReport,
    to_super: &str,
    stamp: u64,
) -> Result<Envelope, RecordError> {
    let sensor = spec.name(r.sensor).to_string();
    Ok(Envelope::new(
        pid(&sensor)?,
        pid(to_super)?,
        stamp,
        Payload::SensorReport {
            sensor: sensor.clone(),
            reading: format!(
                "human {} entered {}",
                spec.humans
                    .get(r.human as usize)
                    .map(|h| h.name.as_str())
                    .unwrap_or("?"),
                spec.zones[r.zone as usize].name
            ),
        },
    ))
}

/// A realised actuation: a `tool_output` of the actuator, addressed to the command's
/// `author` and citing the command `cid` it realised.
fn actuation_envelope(
    spec: &crate::world::WorldSpec,
    e: &crate::world::ActuationEvent,
    author: &str,
    cid: MessageId,
    stamp: u64,
) -> Result<Envelope, RecordError> {
    let actuator = target_name(spec, e.action);
    Ok(Envelope::new(
        pid(&actuator)?,
        pid(author)?,
        stamp,
        Payload::ToolOutput {
            tool: "actuator".into(),
            output: format!("{} realised at tick {}", e.action.name(), e.tick),
        },
    )
    .cite([cid]))
}

/// A command as signed: its payload and declared effect, its citations `cites`, the
/// policy that produced it pinned for replay; and its recipient (the destination
/// principal, or the actuator).
fn command_envelope(
    spec: &crate::world::WorldSpec,
    seed: u64,
    c: &crate::world::Command,
    cites: Vec<MessageId>,
    stamp: u64,
) -> Result<(Envelope, String), RecordError> {
    let author = spec.name(c.author).to_string();
    let (dest, target) = match (c.destination, c.action) {
        (Destination::Principal(p), a) => (spec.name(p).to_string(), target_name(spec, a)),
        (Destination::Actuator, a) => (target_name(spec, a), target_name(spec, a)),
    };
    let (payload, effect) = payload_and_effect(c.action, target);
    let policy = match c.derivation {
        Derivation::Origin => "origin",
        Derivation::RelayAny => "relay-any",
        Derivation::RelayAll => "relay-all",
    };
    let env = Envelope::new(pid(&author)?, pid(&dest)?, stamp, payload)
        .cite(cites)
        .with_effect(effect)
        .with_pins(ReplayPins {
            model_id: Some(format!(
                "{}-policy",
                spec.principals[c.author.0 as usize].role.as_str()
            )),
            model_hash: None,
            seed: Some(seed),
            tools: vec![ToolPin {
                name: "policy".into(),
                version: policy.into(),
            }],
        });
    Ok((env, dest))
}

/// The payload of `action` on `target` and the effect it declares.
fn payload_and_effect(action: Action, target: String) -> (Payload, Effect) {
    match action {
        Action::MoveTo { to, .. } => (
            Payload::MoveTo {
                target: target.clone(),
                x_mm: to.x,
                y_mm: to.y,
            },
            Effect::AtPosition {
                target,
                x_mm: to.x,
                y_mm: to.y,
                tolerance_mm: 50,
            },
        ),
        Action::SetSpeed { speed, .. } => (
            Payload::SetSpeed {
                target: target.clone(),
                mm_per_s: speed.max(0) as u64 * 10,
            },
            Effect::Speed {
                target,
                mm_per_s: speed.max(0) as u64 * 10,
            },
        ),
        Action::Halt { .. } => (
            Payload::Halt {
                target: target.clone(),
            },
            Effect::Halted { target },
        ),
        Action::SetParam { value, .. } => (
            Payload::SetParam {
                target: target.clone(),
                name: "param".into(),
                value,
            },
            Effect::Param {
                target,
                name: "param".into(),
                value,
            },
        ),
    }
}

/// A telemetry report: a root `sensor_report` of `author`, addressed to the incident
/// monitor (which receipts it).
fn telemetry(author: &str, stamp: u64, reading: String) -> Result<Envelope, RecordError> {
    Ok(Envelope::new(
        pid(author)?,
        pid(MONITOR)?,
        stamp,
        Payload::SensorReport {
            sensor: author.to_string(),
            reading,
        },
    ))
}

/// The tracking system's reading of one frame (telemetry format of `audita-monitor`):
/// every robot's position, speed (mm/s, 0 unless moving) and halt latch, every human's
/// position.
fn rtls_reading(spec: &crate::world::WorldSpec, f: &crate::world::Frame) -> String {
    let mut obs = Vec::new();
    for (r, st) in spec.robots.iter().zip(&f.robots) {
        obs.push(
            serde_json::json!({"entity": r.name, "class": "robot", "fields": {
            "x_mm": st.pos.x, "y_mm": st.pos.y, "speed_mm_per_s": st.speed * 10,
            "halted": st.halted}}),
        );
    }
    for (h, p) in spec.humans.iter().zip(&f.humans) {
        obs.push(
            serde_json::json!({"entity": h.name, "class": "human", "fields": {
            "x_mm": p.x, "y_mm": p.y}}),
        );
    }
    serde_json::json!({"telemetry": 1, "observations": obs}).to_string()
}

/// The quality-control station's reading of every batch parameter in one frame.
fn qc_reading(spec: &crate::world::WorldSpec, f: &crate::world::Frame) -> String {
    let obs: Vec<serde_json::Value> = spec
        .batches
        .iter()
        .zip(&f.batches)
        .map(|(b, v)| serde_json::json!({"entity": b.name, "class": "batch", "fields": {"param": v}}))
        .collect();
    serde_json::json!({"telemetry": 1, "observations": obs}).to_string()
}

fn supervisor_or(spec: &crate::world::WorldSpec, fallback: &str) -> String {
    spec.principals
        .iter()
        .find(|p| p.role == Role::Supervisor)
        .map(|p| p.name.clone())
        .unwrap_or_else(|| fallback.to_string())
}

fn target_name(spec: &crate::world::WorldSpec, a: Action) -> String {
    match a {
        Action::MoveTo { robot, .. } | Action::SetSpeed { robot, .. } | Action::Halt { robot } => {
            spec.robots
                .get(robot.0 as usize)
                .map(|r| r.name.clone())
                .unwrap_or_default()
        }
        Action::SetParam { batch, .. } => spec
            .batches
            .get(batch.0 as usize)
            .map(|b| b.name.clone())
            .unwrap_or_default(),
    }
}

/// A record attack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Attack {
    /// Inject an envelope in a real principal's name, signed with the wrong key.
    Forge,
    /// Delete one envelope (its receipt and seal remain).
    Drop,
    /// Swap two sealed leaves of one epoch.
    Reorder,
    /// The log signs a second, divergent checkpoint for an existing size.
    Equivocate,
}

impl Attack {
    /// All attacks.
    pub const ALL: [Attack; 4] = [
        Attack::Forge,
        Attack::Drop,
        Attack::Reorder,
        Attack::Equivocate,
    ];
    /// Stable name.
    pub fn name(self) -> &'static str {
        match self {
            Attack::Forge => "forge",
            Attack::Drop => "drop",
            Attack::Reorder => "reorder",
            Attack::Equivocate => "equivocate",
        }
    }
}

/// What an attack did, for scoring detection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttackReport {
    /// The attacked record.
    pub record: Record,
    /// For drops: the deleted id (its author is bound into it).
    pub dropped: Option<MessageId>,
}

/// Applies an attack to a signed record. `pick` chooses the target deterministically
/// (e.g. a draw index). Drops target a world command (never the shift order).
pub fn attack(sr: &SignedRecord, which: Attack, pick: u64) -> AttackReport {
    let mut record = sr.record.clone();
    let mut dropped = None;
    match which {
        Attack::Forge => {
            // A message in the name of an existing command author, signed by the
            // operator's key: a signature failure.
            if let Some(victim) = sr
                .envelopes
                .get(1 + (pick as usize) % sr.envelopes.len().saturating_sub(1).max(1))
            {
                let e = victim.envelope();
                let forged = Envelope::new(
                    e.author.clone(),
                    e.destination.clone(),
                    e.timestamp + 1,
                    Payload::Halt {
                        target: e.payload.target().unwrap_or("agv-1").to_string(),
                    },
                )
                .cite([victim.id().clone()]);
                let wrong = derive_signing_key(u64::MAX ^ pick, "forger");
                if let Ok(s) = forged.sign(&wrong) {
                    record.envelopes.push(s.as_bytes().to_vec());
                }
            }
        }
        Attack::Drop => {
            if !sr.command_ids.is_empty() {
                let target = &sr.command_ids[(pick as usize) % sr.command_ids.len()];
                if let Some(i) = sr.envelopes.iter().position(|e| e.id() == target) {
                    record.envelopes.remove(i);
                    dropped = Some(target.clone());
                }
            }
        }
        Attack::Reorder => {
            let n = record.epochs.len();
            if n > 0 {
                let e = &mut record.epochs[(pick as usize) % n];
                if e.leaves.len() >= 2 {
                    let i = (pick as usize / n.max(1)) % (e.leaves.len() - 1);
                    e.leaves.swap(i, i + 1);
                } else if let Some(e) = record.epochs.iter_mut().find(|e| e.leaves.len() >= 2) {
                    e.leaves.swap(0, 1);
                }
            }
        }
        Attack::Equivocate => {
            // Re-seal the same log with one message replaced and publish the
            // divergent checkpoint for the same size.
            let seed_key = sr.keys.log(ORIGIN).is_some();
            if seed_key {
                let mut alt = Sealer::new(ORIGIN, log_key_of(sr)).ok();
                if let Some(s) = alt.as_mut() {
                    let skip = (pick as usize) % sr.envelopes.len().max(1);
                    let mut closed = None;
                    for (i, env) in sr.envelopes.iter().enumerate() {
                        if i == skip {
                            s.append(MessageId {
                                author: env.id().author.clone(),
                                digest: [0xEE; 32],
                            });
                        } else {
                            s.append_envelope(env);
                        }
                        if s.pending() == EPOCH_SIZE {
                            closed = Some(s.close_epoch(env.envelope().timestamp + 1));
                            if i >= skip {
                                break;
                            }
                        }
                    }
                    let closed = match closed {
                        Some(c) if c.header.size as usize > skip => Some(c),
                        _ => Some(s.close_epoch(0)),
                    };
                    if let Some(c) = closed {
                        record.checkpoints.push(c.checkpoint.to_text().into_bytes());
                    }
                }
            }
        }
    }
    AttackReport { record, dropped }
}

fn log_key_of(sr: &SignedRecord) -> audita_evidence::SigningKey {
    // The log key is derived from the scenario seed, which the signed record pins in
    // every command envelope; recover it from there.
    let seed = sr
        .envelopes
        .iter()
        .find_map(|e| e.envelope().pins.seed)
        .unwrap_or(0);
    derive_signing_key(seed, ORIGIN)
}

/// The duty registry of a scenario in the `audita-verdict` JSON format, under the given
/// standard (`specification` or `reasonable_agent`). Every non-sensor principal holds
/// the speed envelope of every robot and the acceptance range of every batch; halt and
/// review duties go to their holders; deviating principals get one reference rule per
/// deviation (kind + target). A deviation with a reference counterpart (the command the
/// author's reference plan issues in its place) declares it on the rule — kind, target
/// and its actuation semantics `realises_outcome`, read off the world the way
/// [`adverse_json`] reads the anchors' semantics: with every realised command absent
/// the counterpart alone makes the run adverse, and the run is not adverse without it.
pub fn registry_json(sc: &Scenario, standard: &str) -> String {
    let spec = &sc.spec;
    let q = |s: &str| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""));
    let mut principals = Vec::new();
    for (pi, p) in spec.principals.iter().enumerate() {
        if p.role == Role::Sensor {
            continue;
        }
        let mut duties = Vec::new();
        for (ri, r) in spec.robots.iter().enumerate() {
            let env = crate::oracle::envelope(spec, ri);
            if env != i64::MAX {
                duties.push(format!(
                    "{{\"kind\": \"safety_envelope\", \"id\": \"env-{pi}-{ri}\", \"target\": {}, \"max_mm_per_s\": {}}}",
                    q(&r.name),
                    env.max(0) * 10
                ));
            }
        }
        for (bi, b) in spec.batches.iter().enumerate() {
            duties.push(format!(
                "{{\"kind\": \"safety_envelope\", \"id\": \"range-{pi}-{bi}\", \"target\": {}, \"param\": \"param\", \"min\": {}, \"max\": {}}}",
                q(&b.name),
                b.range.0,
                b.range.1
            ));
        }
        for (di, d) in spec.duties.iter().enumerate() {
            match *d {
                crate::world::Duty::HaltOnEntry {
                    supervisor,
                    zone,
                    robot,
                    deadline,
                } if supervisor.0 as usize == pi => {
                    let z = &spec.zones[zone as usize];
                    let sensor = z.sensor.map(|s| spec.name(s).to_string());
                    duties.push(format!(
                        "{{\"kind\": \"halt_authority\", \"id\": \"halt-{di}\", \"target\": {}, \"trigger_contains\": {}{}, \"deadline_ms\": {}}}",
                        q(&spec.robots[robot.0 as usize].name),
                        q(&format!("entered {}", z.name)),
                        sensor.map(|s| format!(", \"trigger_sensor\": {}", q(&s))).unwrap_or_default(),
                        u64::from(deadline) * crate::world::TICK_MS
                    ));
                }
                crate::world::Duty::ReviewRequired { principal } if principal.0 as usize == pi => {
                    duties.push(format!("{{\"kind\": \"review_required\", \"id\": \"review-{di}\", \"reviewer\": \"checker\"}}"));
                }
                _ => {}
            }
        }
        let rules: Vec<String> = spec
            .commands
            .iter()
            .enumerate()
            .filter(|(_, c)| c.author.0 as usize == pi && c.deviation && !c.is_reference())
            .map(|(ci, c)| {
                let counterpart = spec
                    .commands
                    .iter()
                    .enumerate()
                    .find(|(_, r)| r.reference_for == Some(CommandId(ci as u32)))
                    .map(|(ri, r)| {
                        format!(
                            ", \"counterpart\": {{\"kind\": \"{}\", \"target\": {}, \"realises_outcome\": {}}}",
                            r.action.name(),
                            q(&target_name(spec, r.action)),
                            counterpart_realises_outcome(spec, CommandId(ri as u32))
                        )
                    })
                    .unwrap_or_default();
                format!(
                    "{{\"id\": \"dev-{ci}\", \"kind\": \"{}\", \"target\": {}{counterpart}}}",
                    c.action.name(),
                    q(&target_name(spec, c.action))
                )
            })
            .collect();
        principals.push(format!(
            "{}: {{\"duties\": [{}], \"reference\": [{}]}}",
            q(&p.name),
            duties.join(", "),
            rules.join(", ")
        ));
    }
    format!(
        "{{\"standard\": {}, \"principals\": {{{}}}}}",
        q(standard),
        principals.join(", ")
    )
}

/// Whether the reference counterpart `r` alone realises the adverse outcome: the run
/// with every realised command absent (its deviation included, so `r` takes effect)
/// is adverse, and the same run without `r` is not.
fn counterpart_realises_outcome(spec: &crate::world::WorldSpec, r: CommandId) -> bool {
    let mut absent: std::collections::BTreeSet<CommandId> = spec
        .commands
        .iter()
        .enumerate()
        .filter(|(_, c)| !c.is_reference())
        .map(|(i, _)| CommandId(i as u32))
        .collect();
    let run = |absent: &std::collections::BTreeSet<CommandId>| {
        spec.run(
            &crate::world::Intervention {
                absent: absent.clone(),
                fulfilled: Default::default(),
            },
            Mode::Pinned,
        )
        .adverse
        .is_some()
    };
    let with = run(&absent);
    absent.insert(r);
    with && !run(&absent)
}

/// The adverse predicates a facility deployment declares for a scenario, in the
/// `audita-monitor` predicate-file format: human–robot separation below 0.5 m
/// (severity ½·m·v² from the registered mass and the tracked speed, near-miss margin
/// 0.5 m) and, per batch, its parameter outside the acceptance range. Entities are
/// registered with their class (and robots with their mass); actuations are due one
/// world latency after their command.
pub fn predicates_json(sc: &Scenario) -> String {
    use serde_json::json;
    let spec = &sc.spec;
    let mut entities = serde_json::Map::new();
    for r in &spec.robots {
        entities.insert(
            r.name.clone(),
            json!({"class": "robot", "mass_kg": r.mass_kg}),
        );
    }
    for h in &spec.humans {
        entities.insert(h.name.clone(), json!({"class": "human"}));
    }
    for b in &spec.batches {
        entities.insert(b.name.clone(), json!({"class": "batch"}));
    }
    let mut predicates = vec![json!({
        "name": SAFETY_PREDICATE, "kind": "separation",
        "a": {"class": "robot"}, "b": {"class": "human"},
        "below_mm": crate::world::SEPARATION_MM, "near_miss_margin": crate::world::SEPARATION_MM,
        "severity": {"kinetic": {"speed_field": "speed_mm_per_s"}}
    })];
    for b in &spec.batches {
        let name = if spec.batches.len() == 1 {
            QUALITY_PREDICATE.to_string()
        } else {
            format!("{QUALITY_PREDICATE}.{}", b.name)
        };
        predicates.push(json!({
            "name": name, "kind": "out_of_range", "entity": {"name": b.name},
            "field": "param", "min": b.range.0, "max": b.range.1
        }));
    }
    json!({
        "version": 1,
        "realisation_deadline_ms": u64::from(spec.latency) * crate::world::TICK_MS,
        "entities": entities,
        "predicates": predicates,
    })
    .to_string()
}

/// Name of the facility's safety predicate.
pub const SAFETY_PREDICATE: &str = "separation_below_0.5m";
/// Name of the facility's quality predicate (one batch).
pub const QUALITY_PREDICATE: &str = "batch_parameter_out_of_range";

/// The planted realisation facts of a scenario's incident, read off the world run
/// (test oracle only): the signed actuating commands on the adverse entity whose
/// effect the world applied by `t*` (realised), and those issued at least one
/// latency before `t*` whose effect it never applied (unrealised). Empty when the run
/// is not adverse.
pub fn planted_realisation(sc: &Scenario, sr: &SignedRecord) -> (Vec<MessageId>, Vec<MessageId>) {
    let spec = &sc.spec;
    let run = spec.run_actual(Mode::Pinned);
    let Some(adv) = run.adverse else {
        return (Vec::new(), Vec::new());
    };
    let on_entity = |a: Action| match (adv, a) {
        (Adverse::Safety { robot, .. }, Action::MoveTo { robot: r, .. })
        | (Adverse::Safety { robot, .. }, Action::SetSpeed { robot: r, .. })
        | (Adverse::Safety { robot, .. }, Action::Halt { robot: r }) => robot == r,
        (Adverse::Quality { batch, .. }, Action::SetParam { batch: b, .. }) => batch == b,
        _ => false,
    };
    let applied: std::collections::BTreeSet<u32> = run
        .actuations
        .iter()
        .filter_map(|e| match e.source {
            Source::Command(c) => Some(c.0),
            _ => None,
        })
        .collect();
    let mut realised = Vec::new();
    let mut unrealised = Vec::new();
    for (i, c) in spec.commands.iter().enumerate() {
        let Some(id) = sr.command_map.get(i).cloned().flatten() else {
            continue;
        };
        if c.destination != Destination::Actuator || !on_entity(c.action) {
            continue;
        }
        if applied.contains(&(i as u32)) {
            realised.push(id);
        } else if c.tick + spec.latency <= adv.tick() {
            unrealised.push(id);
        }
    }
    realised.sort();
    unrealised.sort();
    (realised, unrealised)
}

/// The **planted** adverse declaration of a scenario's incident in the
/// `audita-verdict` JSON format (`None` when the run is not adverse), computed from
/// the simulator's ground truth by exact re-execution of the world. It is the test
/// oracle the monitor's record-derived declaration is compared against; nothing a
/// deployment runs publishes or reads it. Anchors are the signed actuating
/// commands on the adverse entity realised by `t*` that the outcome needs: all of them
/// (`combine: all`) when the recorded actuation semantics is one conjunction, any of
/// them when it is a disjunction of single commands; none for an exogenous outcome.
pub fn adverse_json(
    sc: &Scenario,
    sr: &SignedRecord,
) -> Result<Option<String>, crate::oracle::OracleError> {
    use crate::oracle::{candidates, minimal_causes, prime_implicants, tabulate, Variable};
    let spec = &sc.spec;
    let (adverse, vars) = candidates(spec);
    let Some(adv) = adverse else { return Ok(None) };
    let act: Vec<Variable> = vars
        .iter()
        .copied()
        .filter(|v| matches!(v, Variable::Command(c) if spec.commands[c.0 as usize].destination == Destination::Actuator))
        .collect();
    let table = tabulate(spec, &act, &std::collections::BTreeSet::new())?;
    minimal_causes(act.len(), &table)?;
    let n = act.len();
    let implicants = prime_implicants(n, &table);
    let id_of = |i: usize| match act[i] {
        Variable::Command(c) => sr.command_map.get(c.0 as usize).cloned().flatten(),
        Variable::Absence(_) => None,
    };
    let (anchors, combine): (Vec<MessageId>, &str) = if implicants.len() == 1 {
        (
            (0..n)
                .filter(|i| implicants[0] & (1 << i) != 0)
                .filter_map(id_of)
                .collect(),
            "all",
        )
    } else {
        (
            implicants
                .iter()
                .flat_map(|m| (0..n).filter(move |i| m & (1 << i) != 0))
                .collect::<std::collections::BTreeSet<usize>>()
                .into_iter()
                .filter_map(id_of)
                .collect(),
            "any",
        )
    };
    // The entity the predicate names: its target keeps the scope known even when an
    // anchor is missing from the record.
    let entity = match adv {
        Adverse::Safety { robot, .. } => spec.robots.get(robot.0 as usize).map(|r| r.name.clone()),
        Adverse::Quality { batch, .. } => {
            spec.batches.get(batch.0 as usize).map(|b| b.name.clone())
        }
    };
    let targets = entity
        .map(|e| {
            format!(
                ", \"targets\": [\"{}\"]",
                e.replace('\\', "\\\\").replace('"', "\\\"")
            )
        })
        .unwrap_or_default();
    let (outcome, severity) = match adv {
        Adverse::Safety {
            robot, severity_mj, ..
        } => {
            let m = spec
                .robots
                .get(robot.0 as usize)
                .map(|r| r.mass_kg)
                .unwrap_or(1)
                .max(1) as f64;
            let v = (2.0 * severity_mj as f64 / 1000.0 / m).sqrt();
            (
                "separation_below_0.5m",
                format!(", \"severity\": {{\"mass_kg\": {m:.1}, \"speed_m_per_s\": {v:.6}}}"),
            )
        }
        Adverse::Quality { .. } => ("batch_parameter_out_of_range", String::new()),
    };
    let anchors: Vec<String> = anchors.iter().map(|a| format!("\"{a}\"")).collect();
    Ok(Some(format!(
        "{{\"incident\": \"{}-{}\", \"outcome\": \"{outcome}\", \"t_star_ms\": {}{severity}, \"anchors\": [{}], \"combine\": \"{combine}\"{targets}, \"unrealised\": [], \"window_start_ms\": 0}}",
        sc.family,
        sc.seed,
        u64::from(adv.tick()) * crate::world::TICK_MS + 99,
        anchors.join(", ")
    )))
}

/// The verdict layer's variable names for the world's variables: `m_<first 8 digest
/// bytes, hex>` for each signed command, `absent.halt-<duty>` for each halt duty.
pub fn verdict_variables(
    sc: &Scenario,
    sr: &SignedRecord,
) -> Vec<(String, crate::oracle::Variable)> {
    use crate::oracle::Variable;
    let mut out = Vec::new();
    for (i, id) in sr.command_map.iter().enumerate() {
        if let Some(id) = id {
            let hex: String = id.digest[..8].iter().map(|b| format!("{b:02x}")).collect();
            out.push((
                format!("m_{hex}"),
                Variable::Command(crate::world::CommandId(i as u32)),
            ));
        }
    }
    for (d, duty) in sc.spec.duties.iter().enumerate() {
        if matches!(duty, crate::world::Duty::HaltOnEntry { .. }) {
            out.push((
                format!("absent.halt-{d}"),
                Variable::Absence(crate::world::DutyId(d as u16)),
            ));
        }
    }
    out
}
