//! Engine workers: a consumer group over `audita.slices` that gates, grades, certifies
//! and writes the verdict of each incident slice to `audita.verdicts`.
//!
//! Design constraints:
//! - A verdict is a function of the slice bundle and the duty registry alone
//!   ([`judge`]): no worker state enters it, so any number of workers, and any
//!   re-delivery, yields the same verdict bytes.
//! - The bundle is verified from scratch with public keys
//!   ([`audita_evidence::verify_proven`]: each message's inclusion proof against the
//!   co-signed root of its epoch), never trusting the slicer. Ids that only a receipt
//!   names are outside the slice, not missing evidence; missing items that a slice
//!   member cites stay missing and widen intervals as the verdict layer defines.
//! - A record on `audita.verdicts` is JSON [`VerdictMessage`]
//!   (`audita_topics::VerdictRecord`, schema `audita.verdict-record/v1` in
//!   `topics/schema/verdict-record.schema.json`), keyed by incident name: the verdict,
//!   the declaration, the checkpoint it was computed against and the decoded messages
//!   it names — or an abstention with its reason. Like the verdict, it is a function of
//!   the bundle and the registries alone.
//! - Witnessing does not gate certification here: a message sealed in an epoch whose
//!   checkpoint the log signed is judged certified even when fewer keepers than the
//!   deployment's quorum co-signed it yet (keepers down or behind, [`Registries`]).
//!   The record then says so (`record.under_witnessed`, with the quorum), so a
//!   reader sees that the verdict stands on the log's signature alone; `audita
//!   verify` / `audita verdict` over the record keep requiring the quorum and accept
//!   it once the keepers caught up. Requiring it here would turn a keeper outage
//!   into verdicts that treat the whole fleet's evidence as unsealed.
//! - With the deployment's predicate file ([`Registries::predicates`],
//!   [`judge_checked`]) the
//!   declaration is checkable: the monitor re-derives it from the bundle's certified
//!   messages (which the slicer ships: `audita_monitor::reads`) and a declaration the
//!   slice does not support — `t*` moved, an anchor dropped, a realised command
//!   marked unrealised, no declarer — is refused: no verdict, an abstention record
//!   whose reason starts `declaration refused:`. A slice re-derives what its window
//!   holds; the whole-record check (`audita verdict --predicates`) also sees what
//!   precedes the window.

#![warn(missing_docs)]
#![warn(clippy::too_many_lines)]

use audita_bus::{BusError, Consumer, Delivery, Producer};
use audita_evidence::{
    verify_proven, Effect, KeyRegistry, Payload, Policy, Record, SignedCheckpoint, SignedEnvelope,
};
use audita_monitor::Predicates;
use audita_topics::names as topics;
use audita_topics::SliceBundle;
use audita_topics::{CosignatureView, DutyView, MessageView, RecordAnchor};
use audita_verdict::{Adverse, AdverseDecl, DutyRegistry, Verdict};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Why a slice could not be judged. All are permanent for that slice.
#[derive(Debug, thiserror::Error)]
pub enum JudgeError {
    /// The bundle bytes are malformed.
    #[error("slice bundle is malformed")]
    Bundle,
    /// The declaration is malformed.
    #[error("adverse declaration: {0}")]
    Declaration(String),
    /// The verdict layer refused (e.g. too many completions: abstention).
    #[error("verdict: {0}")]
    Verdict(String),
    /// The declaration is not what the slice's certified record supports.
    #[error("{0}")]
    Refused(audita_monitor::Refusal),
}

/// A record as published on `audita.verdicts` (a verdict or an abstention).
pub use audita_topics::VerdictRecord as VerdictMessage;

/// What a worker judges against: the deployment's keys and duties, and the keeper
/// quorum its verdict records state witnessing against.
#[derive(Clone, Copy, Debug)]
pub struct Registries<'a> {
    /// Principal, log and keeper keys.
    pub keys: &'a KeyRegistry,
    /// The duty registry.
    pub duties: &'a DutyRegistry,
    /// Valid keeper co-signatures an epoch needs to count as witnessed.
    pub quorum: usize,
    /// The deployment's predicate file: when given, every declaration is re-derived
    /// from the slice and refused unless it matches ([`judge_checked`]).
    pub predicates: Option<&'a Predicates>,
}

/// Judges one slice bundle (certification does not wait for keepers: module doc).
pub fn judge(
    bundle: &SliceBundle,
    keys: &KeyRegistry,
    duties: &DutyRegistry,
) -> Result<Verdict, JudgeError> {
    judge_checked(bundle, keys, duties, None)
}

/// Judges one slice bundle, first checking its declaration against the slice's
/// certified messages with the predicate file when one is given.
pub fn judge_checked(
    bundle: &SliceBundle,
    keys: &KeyRegistry,
    duties: &DutyRegistry,
    predicates: Option<&Predicates>,
) -> Result<Verdict, JudgeError> {
    let decl: AdverseDecl = serde_json::from_slice(&bundle.declaration)
        .map_err(|e| JudgeError::Declaration(e.to_string()))?;
    Adverse::new(decl.clone()).map_err(|e| JudgeError::Declaration(e.to_string()))?;
    let evidence = &bundle.evidence;
    let policy = Policy {
        keeper_quorum: Some(0),
        ..Policy::default()
    };
    let mut partition = verify_proven(evidence, keys, &policy);
    // Named by a receipt, cited by nothing in the slice: outside the slice.
    partition.missing.retain(|m| !m.certified_citers.is_empty());
    let decl = match predicates {
        None => decl,
        Some(file) => {
            let derived = audita_monitor::derive(&partition, file);
            audita_monitor::check(&decl, file, &derived).map_err(JudgeError::Refused)?
        }
    };
    let adverse = Adverse::new(decl).map_err(|e| JudgeError::Declaration(e.to_string()))?;
    // The verdict layer reads messages, receipts and the partition; the epochs'
    // leaf lists are not part of a proven slice.
    let record = Record {
        envelopes: evidence.envelopes.clone(),
        receipts: evidence.receipts.clone(),
        epochs: Vec::new(),
        checkpoints: evidence.checkpoints.clone(),
    };
    let duties = relevant_duties(duties, &record);
    audita_verdict::verdict(&record, &partition, &duties, &adverse)
        .map_err(|e| JudgeError::Verdict(e.to_string()))
}

/// The part of the registry that can bear on a slice: principals that authored a slice
/// message, and holders of a duty whose target a slice message names. A duty on a
/// target the slice never touches can neither be breached in it nor enter its outcome,
/// so leaving it out changes no finding — it only keeps a fleet-wide registry from
/// listing every principal of the fleet in every incident.
pub fn relevant_duties(duties: &DutyRegistry, record: &Record) -> DutyRegistry {
    let mut authors = BTreeSet::new();
    let mut targets = BTreeSet::new();
    for bytes in &record.envelopes {
        if let Ok(env) = audita_evidence::SignedEnvelope::decode(bytes.clone()) {
            authors.insert(env.envelope().author.as_str().to_string());
            if let Some(t) = env.envelope().payload.target() {
                targets.insert(t.to_string());
            }
        }
    }
    let mut out = duties.clone();
    out.principals.retain(|name, held| {
        authors.contains(name)
            || serde_json::to_value(held)
                .map(|v| names_a_target(&v, &targets))
                .unwrap_or(true)
    });
    out
}

fn names_a_target(v: &serde_json::Value, targets: &BTreeSet<String>) -> bool {
    match v {
        serde_json::Value::Object(m) => m.iter().any(|(k, x)| {
            (k == "target" && x.as_str().is_some_and(|t| targets.contains(t)))
                || names_a_target(x, targets)
        }),
        serde_json::Value::Array(a) => a.iter().any(|x| names_a_target(x, targets)),
        _ => false,
    }
}

/// Turns a verdict into its bus message (verdict and rows; [`record`] adds what the
/// bundle tells about it).
pub fn message(v: &Verdict) -> VerdictMessage {
    VerdictMessage {
        schema: audita_topics::RECORD_SCHEMA.to_string(),
        incident: v.incident.clone(),
        verdict: Some(serde_json::from_str(&v.to_json()).unwrap_or(serde_json::Value::Null)),
        abstained: None,
        declaration: None,
        record: None,
        messages: BTreeMap::new(),
        duties: BTreeMap::new(),
        rows: v.rows(),
    }
}

/// The full topic record of a verdict judged from `bundle`: [`message`] plus the
/// declaration, the checkpoint the verdict's record root belongs to, the decoded
/// certified messages and the registered duties the verdict names.
pub fn record(v: &Verdict, bundle: &SliceBundle, reg: &Registries<'_>) -> VerdictMessage {
    let (keys, duties) = (reg.keys, reg.duties);
    let mut m = message(v);
    m.declaration = serde_json::from_slice(&bundle.declaration).ok();
    m.record = anchor(&bundle.evidence.checkpoints, &v.record_root, keys).map(|mut a| {
        a.quorum = reg.quorum;
        a.under_witnessed = under_witnessed(&bundle.evidence.checkpoints, keys, reg.quorum);
        a
    });
    let named = v.named_ids();
    for bytes in &bundle.evidence.envelopes {
        let Ok(env) = SignedEnvelope::decode(bytes.clone()) else {
            continue;
        };
        let id = env.id().to_string();
        if named.contains(id.as_str()) {
            m.messages.insert(id, view(env.envelope()));
        }
    }
    for (holder, held) in &duties.principals {
        for duty in held.duties.iter().filter(|d| named.contains(d.id())) {
            let Ok(definition) = serde_json::to_value(duty) else {
                continue;
            };
            m.duties.insert(
                duty.id().to_string(),
                DutyView {
                    holder: holder.clone(),
                    definition,
                },
            );
        }
    }
    m
}

/// Whether some log-signed tree (origin, size, root) among `checkpoints` has fewer
/// than `quorum` distinct keepers whose co-signature verifies, counting every note
/// of that tree (a later copy may carry more lines).
fn under_witnessed(checkpoints: &[Vec<u8>], keys: &KeyRegistry, quorum: usize) -> bool {
    let mut trees: BTreeMap<(String, u64, [u8; 32]), BTreeSet<String>> = BTreeMap::new();
    for bytes in checkpoints {
        let Ok(c) = SignedCheckpoint::parse(bytes) else {
            continue;
        };
        if c.verify_log(keys).is_err() {
            continue;
        }
        let cp = c.checkpoint();
        trees
            .entry((cp.origin.clone(), cp.size, cp.root))
            .or_default()
            .extend(c.cosignatures(keys).into_iter().map(|s| s.keeper));
    }
    trees.values().any(|signers| signers.len() < quorum)
}

/// The checkpoint whose root is the verdict's record root (else the largest one).
fn anchor(checkpoints: &[Vec<u8>], root: &str, keys: &KeyRegistry) -> Option<RecordAnchor> {
    let parsed: Vec<(SignedCheckpoint, &Vec<u8>)> = checkpoints
        .iter()
        .filter_map(|b| SignedCheckpoint::parse(b).ok().map(|c| (c, b)))
        .filter(|(c, _)| c.verify_log(keys).is_ok())
        .collect();
    let hex = |c: &SignedCheckpoint| hex::encode(c.checkpoint().root);
    let (c, bytes) = parsed
        .iter()
        .find(|(c, _)| hex(c) == root)
        .or_else(|| parsed.iter().max_by_key(|(c, _)| c.checkpoint().size))?;
    Some(RecordAnchor {
        origin: c.checkpoint().origin.clone(),
        size: c.checkpoint().size,
        root: hex(c),
        checkpoint: String::from_utf8_lossy(bytes).into_owned(),
        cosignatures: c
            .cosignatures(keys)
            .into_iter()
            .map(|s| CosignatureView {
                keeper: s.keeper,
                timestamp: s.timestamp,
            })
            .collect(),
        quorum: 0,
        under_witnessed: false,
    })
}

/// A decoded envelope as the record shows it.
fn view(env: &audita_evidence::Envelope) -> MessageView {
    use serde_json::json;
    let mut params = BTreeMap::new();
    let mut put = |k: &str, v: serde_json::Value| {
        params.insert(k.to_string(), v);
    };
    match &env.payload {
        Payload::MoveTo { x_mm, y_mm, .. } => {
            put("x_mm", json!(x_mm));
            put("y_mm", json!(y_mm));
        }
        Payload::SetSpeed { mm_per_s, .. } => put("mm_per_s", json!(mm_per_s)),
        Payload::Halt { .. } => {}
        Payload::SetParam { name, value, .. } => {
            put("name", json!(name));
            put("value", json!(value));
        }
        Payload::AgentText { text } => put("text", json!(text)),
        Payload::ToolOutput { tool, output } => {
            put("tool", json!(tool));
            put("output", json!(output));
        }
        Payload::SensorReport { sensor, reading } => {
            put("sensor", json!(sensor));
            put("reading", json!(reading));
        }
        Payload::ExternalInput { source, text } => {
            put("source", json!(source));
            put("text", json!(text));
        }
        Payload::Stored { kind, digest, len } => {
            put("stored_kind", json!(format!("{kind:?}")));
            put("digest", json!(hex::encode(digest)));
            put("len", json!(len));
        }
    }
    MessageView {
        author: env.author.as_str().to_string(),
        destination: env.destination.as_str().to_string(),
        kind: env.payload.kind().to_string(),
        target: env.payload.target().map(str::to_string),
        params,
        effect: effect_text(&env.effect),
        timestamp_ms: env.timestamp,
        citations: env.citations.iter().map(|c| c.to_string()).collect(),
    }
}

fn effect_text(e: &Effect) -> String {
    match e {
        Effect::None => "none".into(),
        Effect::AtPosition {
            target,
            x_mm,
            y_mm,
            tolerance_mm,
        } => format!("{target} within {tolerance_mm} mm of ({x_mm}, {y_mm}) mm"),
        Effect::Speed { target, mm_per_s } => format!("{target} moves at {mm_per_s} mm/s"),
        Effect::Halted { target } => format!("{target} halted"),
        Effect::Param {
            target,
            name,
            value,
        } => format!("{target}.{name} = {value} milli-units"),
        Effect::Claim(text) => text.clone(),
    }
}

/// Handles one slice delivery: judges it and publishes the verdict record. A slice
/// that cannot be judged is published as an abstention with the reason (and the
/// declaration, when the bundle decodes), never dropped.
pub fn handle(
    d: &Delivery,
    reg: &Registries<'_>,
    topic_prefix: &str,
    out: &mut dyn Producer,
) -> Result<(), BusError> {
    let topic = format!("{topic_prefix}{}", topics::VERDICTS);
    let started = std::time::Instant::now();
    let bundle = SliceBundle::decode(&d.payload);
    let result = bundle
        .as_ref()
        .ok_or(JudgeError::Bundle)
        .and_then(|b| judge_checked(b, reg.keys, reg.duties, reg.predicates).map(|v| (v, b)));
    let payload = match result {
        Ok((v, b)) => serde_json::to_vec(&record(&v, b, reg)),
        Err(e) => {
            let incident = String::from_utf8_lossy(&d.key);
            tracing::warn!(incident = %incident, error = %e, "abstaining");
            let declaration = bundle
                .as_ref()
                .and_then(|b| serde_json::from_slice(&b.declaration).ok());
            serde_json::to_vec(&VerdictMessage::abstention(
                &incident,
                &e.to_string(),
                declaration,
            ))
        }
    }
    .map_err(|e| BusError::Permanent(e.to_string()))?;
    tracing::debug!(
        incident = %String::from_utf8_lossy(&d.key),
        bytes = d.payload.len(),
        took_us = started.elapsed().as_micros() as u64,
        "judged"
    );
    out.send(&topic, &d.key, &payload)
}

/// Runs one worker until `stop` or `max_idle` without input; returns slices judged.
pub fn run(
    input: &mut dyn Consumer,
    out: &mut dyn Producer,
    reg: &Registries<'_>,
    topic_prefix: &str,
    stop: &AtomicBool,
    max_idle: Option<Duration>,
) -> Result<u64, BusError> {
    run_observed(input, out, reg, topic_prefix, stop, max_idle, |_| {})
}

/// [`run`], calling `on_slice` with the time each slice took to verify and judge.
/// With [`Registries::predicates`] every declaration is checked first (a refused one
/// becomes an abstention, never a verdict).
pub fn run_observed(
    input: &mut dyn Consumer,
    out: &mut dyn Producer,
    reg: &Registries<'_>,
    topic_prefix: &str,
    stop: &AtomicBool,
    max_idle: Option<Duration>,
    mut on_slice: impl FnMut(Duration),
) -> Result<u64, BusError> {
    let started = Instant::now();
    let n = audita_bus::pump(input, out, stop, 8, max_idle, |d, out| {
        let t = Instant::now();
        handle(d, reg, topic_prefix, out)?;
        on_slice(t.elapsed());
        Ok(())
    })?;
    tracing::info!(
        slices = n,
        elapsed_ms = started.elapsed().as_millis() as u64,
        stopped = stop.load(Ordering::SeqCst),
        "engine worker done"
    );
    Ok(n)
}
