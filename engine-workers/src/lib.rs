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
//! - A record on `audita.verdicts` is JSON [`VerdictMessage`], keyed by incident name.

#![warn(missing_docs)]

use audita_bus::{topics, BusError, Consumer, Delivery, Producer};
use audita_evidence::{verify_proven, KeyRegistry, Policy, Record};
use audita_sinks::VerdictRow;
use audita_slicer::stage::SliceBundle;
use audita_verdict::{Adverse, AdverseDecl, DutyRegistry, Verdict};
use std::collections::BTreeSet;
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
}

/// A verdict as published on `audita.verdicts`.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct VerdictMessage {
    /// Incident name.
    pub incident: String,
    /// The full verdict JSON (schema in `verdict/SCHEMA.md`).
    pub verdict: serde_json::Value,
    /// The flat per-principal rows (the Parquet columns).
    pub rows: Vec<VerdictRow>,
}

/// Judges one slice bundle.
pub fn judge(
    bundle: &SliceBundle,
    keys: &KeyRegistry,
    duties: &DutyRegistry,
) -> Result<Verdict, JudgeError> {
    let decl: AdverseDecl = serde_json::from_slice(&bundle.declaration)
        .map_err(|e| JudgeError::Declaration(e.to_string()))?;
    let adverse = Adverse::new(decl).map_err(|e| JudgeError::Declaration(e.to_string()))?;
    let evidence = &bundle.evidence;
    let mut partition = verify_proven(evidence, keys, &Policy::default());
    // Named by a receipt, cited by nothing in the slice: outside the slice.
    partition.missing.retain(|m| !m.certified_citers.is_empty());
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

/// Turns a verdict into its bus message.
pub fn message(v: &Verdict) -> VerdictMessage {
    let rows = v
        .rows()
        .into_iter()
        .map(|r| VerdictRow {
            incident: r.incident,
            principal: r.principal,
            outcome: r.outcome,
            t_star_ms: r.t_star_ms,
            severity_j: r.severity_j,
            standard: r.standard,
            duties: r.duties,
            breach_specification: r.breach_specification,
            breach_reasonable: r.breach_reasonable,
            rho_lo: r.rho_lo,
            rho_hi: r.rho_hi,
            culpable: r.culpable,
            claim: r.claim,
            flags: r.flags,
            evidence: r.evidence,
            record_root: r.record_root,
        })
        .collect();
    VerdictMessage {
        incident: v.incident.clone(),
        verdict: serde_json::from_str(&v.to_json()).unwrap_or(serde_json::Value::Null),
        rows,
    }
}

/// Handles one slice delivery: judges it and publishes the verdict. A slice that
/// cannot be judged is published as an abstention with the reason, never dropped.
pub fn handle(
    d: &Delivery,
    keys: &KeyRegistry,
    duties: &DutyRegistry,
    topic_prefix: &str,
    out: &mut dyn Producer,
) -> Result<(), BusError> {
    let topic = format!("{topic_prefix}{}", topics::VERDICTS);
    let result = SliceBundle::decode(&d.payload)
        .ok_or(JudgeError::Bundle)
        .and_then(|b| judge(&b, keys, duties));
    let payload = match result {
        Ok(v) => serde_json::to_vec(&message(&v)),
        Err(e) => {
            tracing::warn!(incident = %String::from_utf8_lossy(&d.key), error = %e, "abstaining");
            serde_json::to_vec(&serde_json::json!({
                "incident": String::from_utf8_lossy(&d.key), "abstained": e.to_string(), "rows": []
            }))
        }
    }
    .map_err(|e| BusError::Permanent(e.to_string()))?;
    out.send(&topic, &d.key, &payload)
}

/// Runs one worker until `stop` or `max_idle` without input; returns slices judged.
pub fn run(
    input: &mut dyn Consumer,
    out: &mut dyn Producer,
    keys: &KeyRegistry,
    duties: &DutyRegistry,
    topic_prefix: &str,
    stop: &AtomicBool,
    max_idle: Option<Duration>,
) -> Result<u64, BusError> {
    run_observed(
        input,
        out,
        keys,
        duties,
        topic_prefix,
        stop,
        max_idle,
        |_| {},
    )
}

/// [`run`], calling `on_slice` with the time each slice took to verify and judge.
#[allow(clippy::too_many_arguments)]
pub fn run_observed(
    input: &mut dyn Consumer,
    out: &mut dyn Producer,
    keys: &KeyRegistry,
    duties: &DutyRegistry,
    topic_prefix: &str,
    stop: &AtomicBool,
    max_idle: Option<Duration>,
    mut on_slice: impl FnMut(Duration),
) -> Result<u64, BusError> {
    let started = Instant::now();
    let n = audita_bus::pump(input, out, stop, 8, max_idle, |d, out| {
        let t = Instant::now();
        handle(d, keys, duties, topic_prefix, out)?;
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
