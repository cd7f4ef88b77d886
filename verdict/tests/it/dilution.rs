//! Dilution invariance (SPEC §3–4, issue 3): unrelated traffic in the incident's window
//! changes no verdict.
//!
//! A facility scenario's signed record (scenario A, its own names) is merged with the
//! record of a second, independent scenario (B) re-signed under disjoint names
//! (`c1.<name>` for principals, actuators, sensors and zones, as the fleet lays out a
//! cell) in the **same** time range, sealed into one log, with both duty registries
//! merged. A's verdict must be byte-identical to its verdict on A's record alone
//! (up to the record root, which seals different logs), must not abstain, and B's
//! incident must likewise be unchanged by A's traffic. With a deletion in A, the
//! deleted command is named and its verdict still matches the one of A alone with the
//! same deletion — an anchor included: the declaration names the entity `Y` reads,
//! so a deleted anchor's target stays known.
//!
//! Every verdict here also checks what a scoping slicer relies on: a proven slice
//! carrying only what the slice reads ([`Slice::reads`]) builds the same slice as a
//! proven slice carrying every message of the record.

use std::collections::BTreeMap;

use audita_evidence::{
    derive_signing_key, verify_proven, verify_record, Effect, Envelope, KeyRegistry, MessageId,
    Payload, Policy, PrincipalId, ProvenSlice, Receipt, Record, SignedEnvelope,
};
use audita_facility::record::{adverse_json, registry_json, sign_record, SignedRecord};
use audita_facility::scenario::{generate, Family, Scenario};
use audita_verdict::{
    id_string, verdict, Adverse, AdverseDecl, DutyRegistry, Evidence, Slice, Status, Verdict,
};
use serde_json::Value;

/// Prefix of the second scenario's names.
const CELL: &str = "c1.";
/// Key seed of the re-signed scenario.
const CELL_SEED: u64 = 0xD11;

fn cell(name: &str) -> String {
    format!("{CELL}{name}")
}

fn pid(name: &str) -> PrincipalId {
    PrincipalId::new(name).expect("valid name")
}

/// A sensor reading with its zone renamed (`... entered <zone>`).
fn cell_reading(r: &str) -> String {
    r.replace("entered ", &format!("entered {CELL}"))
}

fn cell_payload(p: &Payload) -> Payload {
    let mut p = p.clone();
    match &mut p {
        Payload::MoveTo { target, .. }
        | Payload::SetSpeed { target, .. }
        | Payload::Halt { target }
        | Payload::SetParam { target, .. } => *target = cell(target),
        Payload::SensorReport { sensor, reading } => {
            *sensor = cell(sensor);
            *reading = cell_reading(reading);
        }
        _ => {}
    }
    p
}

fn cell_effect(e: &Effect) -> Effect {
    let mut e = e.clone();
    match &mut e {
        Effect::AtPosition { target, .. }
        | Effect::Speed { target, .. }
        | Effect::Halted { target }
        | Effect::Param { target, .. } => *target = cell(target),
        _ => {}
    }
    e
}

/// Scenario B's envelopes re-signed under cell names, with their receipts and the map
/// from B's ids to the re-signed ids. Keys are registered in `keys`.
fn resign(
    sr: &SignedRecord,
    keys: &mut KeyRegistry,
) -> (
    Vec<(SignedEnvelope, Receipt)>,
    BTreeMap<MessageId, MessageId>,
) {
    let mut recipient: BTreeMap<MessageId, PrincipalId> = BTreeMap::new();
    for r in &sr.record.receipts {
        if let Ok(r) = Receipt::decode(r.clone()) {
            recipient.insert(r.message().clone(), r.recipient().clone());
        }
    }
    let mut map = BTreeMap::new();
    let mut out = Vec::new();
    for env in &sr.envelopes {
        let old = env.envelope();
        let author = pid(&cell(old.author.as_str()));
        let new = Envelope::new(
            author.clone(),
            pid(&cell(old.destination.as_str())),
            old.timestamp,
            cell_payload(&old.payload),
        )
        .cite(old.citations.iter().filter_map(|c| map.get(c).cloned()))
        .with_effect(cell_effect(&old.effect))
        .with_pins(old.pins.clone());
        let key = derive_signing_key(CELL_SEED, author.as_str());
        keys.add_principal(author, key.verifying_key());
        let signed = new.sign(&key).expect("re-sign");
        let to = recipient
            .get(env.id())
            .map(|r| pid(&cell(r.as_str())))
            .unwrap_or_else(|| signed.envelope().destination.clone());
        let rkey = derive_signing_key(CELL_SEED, to.as_str());
        keys.add_principal(to.clone(), rkey.verifying_key());
        let receipt = Receipt::sign(
            signed.id().clone(),
            to,
            signed.envelope().timestamp + 1,
            &rkey,
        );
        map.insert(env.id().clone(), signed.id().clone());
        out.push((signed, receipt));
    }
    (out, map)
}

/// Seals envelopes (in time order; ties keep the given order) into one log under A's
/// log and keeper keys.
fn seal(seed: u64, mut msgs: Vec<(SignedEnvelope, Receipt)>) -> Record {
    msgs.sort_by_key(|(e, _)| e.envelope().timestamp);
    audita_facility::record::seal(seed, &msgs).expect("seal")
}

/// A's own envelopes with the receipts of its record.
fn own(sr: &SignedRecord) -> Vec<(SignedEnvelope, Receipt)> {
    let mut by_id: BTreeMap<MessageId, Receipt> = BTreeMap::new();
    for r in &sr.record.receipts {
        if let Ok(r) = Receipt::decode(r.clone()) {
            by_id.insert(r.message().clone(), r);
        }
    }
    sr.envelopes
        .iter()
        .map(|e| (e.clone(), by_id.get(e.id()).expect("receipt").clone()))
        .collect()
}

/// B's registry entries renamed into the cell.
fn cell_registry(json: &str) -> serde_json::Map<String, Value> {
    let v: Value = serde_json::from_str(json).expect("registry");
    let mut out = serde_json::Map::new();
    for (name, entry) in v["principals"].as_object().expect("principals") {
        let mut entry = entry.clone();
        for list in ["duties", "reference"] {
            let Some(items) = entry.get_mut(list).and_then(Value::as_array_mut) else {
                continue;
            };
            for item in items.iter_mut().filter_map(Value::as_object_mut) {
                for field in ["id", "target", "trigger_sensor", "reviewer", "cites_author"] {
                    if let Some(Value::String(s)) = item.get_mut(field) {
                        *s = cell(s);
                    }
                }
                if let Some(Value::String(s)) = item.get_mut("trigger_contains") {
                    *s = cell_reading(s);
                }
                if let Some(Value::Object(c)) = item.get_mut("counterpart") {
                    if let Some(Value::String(s)) = c.get_mut("target") {
                        *s = cell(s);
                    }
                }
            }
        }
        out.insert(cell(name), entry);
    }
    out
}

fn merged_registry(a: &str, b: &str) -> DutyRegistry {
    let mut v: Value = serde_json::from_str(a).expect("registry");
    let ps = v["principals"].as_object_mut().expect("principals");
    ps.extend(cell_registry(b));
    DutyRegistry::from_json(&v.to_string()).expect("merged registry")
}

fn declaration(json: &str, rename: Option<&BTreeMap<MessageId, MessageId>>) -> Adverse {
    let mut decl: AdverseDecl = serde_json::from_str(json).expect("declaration");
    if let Some(map) = rename {
        let remap = |ids: &[String]| -> Vec<String> {
            ids.iter()
                .map(|s| id_string(&map[&audita_verdict::parse_id(s).expect("id")]))
                .collect()
        };
        decl.anchors = remap(&decl.anchors);
        decl.unrealised = remap(&decl.unrealised);
        decl.targets = decl.targets.iter().map(|t| cell(t)).collect();
        decl.incident = cell(&decl.incident);
    }
    Adverse::new(decl).expect("declaration")
}

/// The verdict JSON without the record root (the logs differ by construction).
fn comparable(v: &Verdict) -> Value {
    let mut j: Value = serde_json::from_str(&v.to_json()).expect("json");
    j.as_object_mut().expect("object").remove("record_root");
    j
}

/// Where two verdicts differ: top-level fields and principals (added, removed, changed).
fn diff(a: &Value, b: &Value) -> String {
    let mut out = Vec::new();
    for (k, va) in a.as_object().into_iter().flatten() {
        let vb = &b[k];
        if va == vb {
            continue;
        }
        if k == "principals" {
            let (pa, pb) = (va.as_object(), vb.as_object());
            for (p, fa) in pa.into_iter().flatten() {
                match pb.and_then(|m| m.get(p)) {
                    None => out.push(format!("-{p}")),
                    Some(fb) if fb != fa => out.push(format!("~{p}")),
                    _ => {}
                }
            }
            for p in pb.into_iter().flatten().map(|m| m.0) {
                if pa.is_none_or(|m| !m.contains_key(p)) {
                    out.push(format!("+{p}"));
                }
            }
        } else if k == "status" || k == "notes" {
            out.push(format!("{k}: {va} -> {vb}"));
        } else {
            out.push(k.clone());
        }
    }
    out.join(", ")
}

fn judge(record: &Record, keys: &KeyRegistry, duties: &DutyRegistry, adv: &Adverse) -> Verdict {
    let part = verify_record(record, keys);
    check_reads(record, &part, keys, duties, adv);
    verdict(record, &part, duties, adv).expect("verdict")
}

/// The slice of a proven slice carrying every certified message equals the slice of
/// one carrying only what that slice reads (ids left out are proved sealed).
fn check_reads(
    record: &Record,
    part: &audita_evidence::Partition,
    keys: &KeyRegistry,
    duties: &DutyRegistry,
    adv: &Adverse,
) {
    let build = |ids: &std::collections::BTreeSet<MessageId>| {
        let proven = ProvenSlice::from_record(record, ids);
        let p = verify_proven(&proven, keys, &Policy::default());
        let r = Record {
            envelopes: proven.envelopes.clone(),
            receipts: proven.receipts.clone(),
            epochs: Vec::new(),
            checkpoints: proven.checkpoints.clone(),
        };
        let ev = Evidence::of(&r, &p, adv);
        let slice = Slice::from_evidence(&ev, duties, adv);
        let reads = slice.reads(&ev);
        (format!("{slice:?}"), reads)
    };
    let every: std::collections::BTreeSet<MessageId> = part.certified.keys().cloned().collect();
    let (whole, reads) = build(&every);
    let (scoped, _) = build(&reads);
    assert_eq!(
        whole, scoped,
        "{}: the slice of what it reads differs",
        adv.decl.incident
    );
}

/// Checks one (A, B) pair; returns failure descriptions.
fn check_pair(a: &Scenario, b: &Scenario) -> Vec<String> {
    let mut failures = Vec::new();
    let tag = format!("{} {} + {} {}", a.family, a.seed, b.family, b.seed);
    let sa = sign_record(a).expect("record A");
    let sb = sign_record(b).expect("record B");
    let mut keys = sa.keys.clone();
    let (b_msgs, b_map) = resign(&sb, &mut keys);
    let a_msgs = own(&sa);
    let reg_a = registry_json(a, "reasonable_agent");
    let reg_b = registry_json(b, "reasonable_agent");
    let duties_a = DutyRegistry::from_json(&reg_a).expect("registry A");
    let duties = merged_registry(&reg_a, &reg_b);
    // B alone, under cell names, sealed by A's log.
    let b_only = seal(a.seed, b_msgs.clone());
    let mut duties_b: Value = serde_json::from_str(&reg_b).expect("registry");
    duties_b["principals"] = Value::Object(cell_registry(&reg_b));
    let duties_b = DutyRegistry::from_json(&duties_b.to_string()).expect("registry B");
    let mut all = a_msgs.clone();
    all.extend(b_msgs);
    let merged = seal(a.seed, all);
    let part = verify_record(&merged, &keys);
    assert!(
        part.is_clean(),
        "{tag}: merged record does not verify clean"
    );

    if let Some(json) = adverse_json(a, &sa).expect("declaration A") {
        let adv = declaration(&json, None);
        let alone = judge(&sa.record, &sa.keys, &duties_a, &adv);
        let diluted = judge(&merged, &keys, &duties, &adv);
        if diluted.status == Status::Abstained {
            failures.push(format!(
                "{tag}: A abstains when diluted: {:?}",
                diluted.notes
            ));
        }
        if comparable(&alone) != comparable(&diluted) {
            failures.push(format!(
                "{tag}: A's verdict changed by unrelated traffic: {}",
                diff(&comparable(&alone), &comparable(&diluted))
            ));
        }
        // A deletion in A: the diluted verdict equals A alone with the same deletion.
        for (k, victim) in sa.command_ids.iter().enumerate().take(3) {
            let drop = |r: &Record| -> Record {
                let mut r = r.clone();
                r.envelopes.retain(|bytes| {
                    SignedEnvelope::decode(bytes.clone())
                        .map(|e| e.id() != victim)
                        .unwrap_or(true)
                });
                r
            };
            let alone_d = judge(&drop(&sa.record), &sa.keys, &duties_a, &adv);
            let diluted_d = judge(&drop(&merged), &keys, &duties, &adv);
            // Named exactly where A alone names it (in A's scope; a command of a
            // principal outside it, cited by nothing in it, is another incident's).
            let named = |v: &Verdict| {
                v.completions
                    .items
                    .iter()
                    .any(|i| i.id == id_string(victim))
            };
            if named(&diluted_d) != named(&alone_d) {
                failures.push(format!(
                    "{tag}: dropped command {k} named {} alone, {} diluted",
                    named(&alone_d),
                    named(&diluted_d)
                ));
            }
            let in_closure = alone.slice.messages.contains(&id_string(victim));
            if in_closure && !named(&diluted_d) {
                failures.push(format!("{tag}: dropped closure command {k} not named"));
            }
            if diluted_d.status != alone_d.status {
                failures.push(format!(
                    "{tag}: drop of command {k}: status {:?} alone, {:?} diluted",
                    alone_d.status, diluted_d.status
                ));
            }
            if comparable(&alone_d) != comparable(&diluted_d) {
                failures.push(format!(
                    "{tag}: drop of command {k}: diluted verdict differs: {}",
                    diff(&comparable(&alone_d), &comparable(&diluted_d))
                ));
            }
        }
    }
    // A deletion in B: no finding of A's principals moves, and B's author, if listed
    // at all, gains no responsibility (it is outside A's scope).
    if let (Some(json), Some(victim)) = (
        adverse_json(a, &sa).expect("declaration A"),
        b_map.get(&sb.command_ids[0]),
    ) {
        let adv = declaration(&json, None);
        let alone = judge(&sa.record, &sa.keys, &duties_a, &adv);
        let mut cut = merged.clone();
        cut.envelopes.retain(|bytes| {
            SignedEnvelope::decode(bytes.clone())
                .map(|e| e.id() != victim)
                .unwrap_or(true)
        });
        let diluted = judge(&cut, &keys, &duties, &adv);
        if diluted.status != alone.status {
            failures.push(format!("{tag}: drop in B changes A's status"));
        }
        for (p, f) in &alone.principals {
            if diluted.finding(p) != Some(f) {
                failures.push(format!("{tag}: drop in B moves A's finding of {p}"));
            }
        }
        for (p, f) in &diluted.principals {
            if alone.finding(p).is_none()
                && (p != victim.author.as_str() || f.rho_hi != 0.0 || f.culpable)
            {
                failures.push(format!("{tag}: drop in B adds a finding for {p}: {f:?}"));
            }
        }
    }
    if let Some(json) = adverse_json(b, &sb).expect("declaration B") {
        let adv = declaration(&json, Some(&b_map));
        let alone = judge(&b_only, &keys, &duties_b, &adv);
        let diluted = judge(&merged, &keys, &duties, &adv);
        if comparable(&alone) != comparable(&diluted) {
            failures.push(format!(
                "{tag}: B's verdict changed by A's traffic: {}",
                diff(&comparable(&alone), &comparable(&diluted))
            ));
        }
    }
    failures
}

const FAMILIES: [Family; 10] = [
    Family::Trivial,
    Family::Redundancy,
    Family::InertTwin,
    Family::Preemption,
    Family::Omission,
    Family::Chain,
    Family::UnexpectedStartup,
    Family::NoCause,
    Family::Conditioning,
    Family::Scapegoat,
];

#[test]
fn unrelated_traffic_in_the_window_changes_no_verdict() {
    let mut failures = Vec::new();
    for (i, fa) in FAMILIES.iter().enumerate() {
        for seed in 0..2u64 {
            // Pair every family with a different family, and with itself.
            for fb in [FAMILIES[(i + 1 + seed as usize) % FAMILIES.len()], *fa] {
                let a = generate(*fa, seed);
                let b = generate(fb, seed + 100);
                failures.extend(check_pair(&a, &b));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
