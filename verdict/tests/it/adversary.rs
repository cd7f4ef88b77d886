//! Regression tests for what the outside adversarial pass (issue 10) found, each on the
//! smallest record that shows it; `load-tests/tests/adversarial.rs` runs the same
//! attacks over the demo fleet and every scenario family.

use crate::common;

use audita_evidence::{derive_signing_key, MessageId, PrincipalId, Receipt, Record};
use audita_verdict::{
    id_string, verdict, AdverseDecl, Combine, DutyRegistry, FindingStatus, Flag, VerdictError,
};
use common::*;

fn registry(json: serde_json::Value) -> DutyRegistry {
    DutyRegistry::from_json(&json.to_string()).expect("registry")
}

/// The supervisor holds the halt authority on agv-1 after "entered aisle-1" from
/// sensor-aisle; the planner's speed-up reaches agv-1 through the dispatcher.
fn omission() -> (Fleet, MessageId, MessageId, MessageId, DutyRegistry) {
    let mut f = Fleet::new();
    let o = f.order("operator", 0, "shift");
    let p = f.cmd(
        "planner",
        "dispatcher",
        10,
        fast("agv-1"),
        &[&o],
        "origin",
        None,
    );
    let d = f.cmd(
        "dispatcher",
        "controller",
        20,
        fast("agv-1"),
        &[&p],
        "relay-any",
        None,
    );
    let trig = f.sensor("sensor-aisle", "supervisor", 30, "human entered aisle-1");
    let a = f.cmd(
        "controller",
        "agv-1",
        40,
        fast("agv-1"),
        &[&d],
        "relay-any",
        None,
    );
    let duties = registry(
        serde_json::json!({"standard": "reasonable_agent", "principals": {
        "supervisor": {"duties": [{"kind": "halt_authority", "id": "halt-aisle",
            "target": "agv-1", "trigger_contains": "entered aisle-1",
            "trigger_sensor": "sensor-aisle", "deadline_ms": 5}]},
        "planner": {"duties": [{"kind": "safety_envelope", "id": "env-p",
            "target": "agv-1", "max_mm_per_s": 1000}]}}}),
    );
    (f, a, trig, d, duties)
}

fn declared(anchor: &MessageId) -> audita_verdict::Adverse {
    audita_verdict::Adverse::new(AdverseDecl {
        incident: "inc".into(),
        outcome: "separation_below_0.5m".into(),
        t_star_ms: 100,
        severity: None,
        anchors: vec![id_string(anchor)],
        combine: Combine::Any,
        targets: vec!["agv-1".into()],
        unrealised: Vec::new(),
        window_start_ms: 0,
        window_end_ms: None,
        delta: 1.0,
        declarer: None,
        facts: Vec::new(),
    })
    .expect("declaration")
}

fn drop(record: &Record, id: &MessageId) -> Record {
    let mut r = record.clone();
    r.envelopes.retain(|e| {
        audita_evidence::SignedEnvelope::decode(e.clone()).map_or(true, |s| s.id() != id)
    });
    r
}

#[test]
fn deleting_the_halt_trigger_does_not_exonerate_the_omitter() {
    let (f, a, trig, _, duties) = omission();
    let (rec, keys) = f.seal(3);
    let adv = declared(&a);
    let clean = judge(&rec, &keys, &duties, &adv);
    let s = clean.finding("supervisor").expect("supervisor");
    assert!(s.culpable && (s.rho_lo, s.rho_hi) == (1.0, 1.0), "{s:?}");
    let v = judge(&drop(&rec, &trig), &keys, &duties, &adv);
    let s = v.finding("supervisor").expect("supervisor");
    // Was `exonerated [0, 0]`: the absence vanished with its trigger.
    assert_eq!((s.rho_lo, s.rho_hi), (0.0, 1.0), "{s:?}");
    assert_eq!(s.status, FindingStatus::Unresolved);
    assert!(!s.culpable, "an unproven absence is no breach");
    assert!(s.items.iter().any(|i| i.author == "sensor-aisle"), "{s:?}");
    let absence = &v.slice.absences[0];
    assert!(!absence.certain && absence.uncertain_by == vec![id_string(&trig)]);
}

#[test]
fn deleting_the_holders_halt_does_not_frame_it() {
    // The supervisor halted in time; the operator deletes the halt.
    let (mut f, a, trig, _, duties) = omission();
    let h = f.cmd(
        "supervisor",
        "controller",
        32,
        halt("agv-1"),
        &[&trig],
        "origin",
        None,
    );
    let (rec, keys) = f.seal(3);
    let adv = declared(&a);
    let clean = judge(&rec, &keys, &duties, &adv);
    let s = clean.finding("supervisor").expect("supervisor");
    assert_eq!((s.rho_lo, s.rho_hi, s.culpable), (0.0, 0.0, false), "{s:?}");
    let v = judge(&drop(&rec, &h), &keys, &duties, &adv);
    let s = v.finding("supervisor").expect("supervisor");
    assert!(
        !s.culpable && !s.breach.reasonable_agent && !s.breach.specification,
        "{s:?}"
    );
    assert_eq!(s.rho_lo, 0.0, "{s:?}");
    assert!(s.items.iter().any(|i| i.id == id_string(&h)), "{s:?}");
}

#[test]
fn deleting_a_relay_sealed_before_its_parent_keeps_the_planner_in_the_interval() {
    // The streaming sealer seals in arrival order: here the dispatcher's relay is
    // sealed before the planner's command it cites.
    let (mut f, a, _, d, duties) = omission();
    let pos = |f: &Fleet, id: &MessageId| f.msgs.iter().position(|(s, _)| s.id() == id).unwrap();
    let p = f.msgs[pos(&f, &d)].0.envelope().citations[0].clone();
    let (i, j) = (pos(&f, &p), pos(&f, &d));
    f.msgs.swap(i, j);
    let (rec, keys) = f.seal(2);
    let adv = declared(&a);
    let clean = judge(&rec, &keys, &duties, &adv);
    assert_eq!(clean.finding("planner").map(|f| f.rho_lo), Some(1.0));
    let v = judge(&drop(&rec, &d), &keys, &duties, &adv);
    let pl = v.finding("planner").expect("planner");
    // Was `[0, 0]`: the planner's command was sealed after the relay, so it was not
    // a possible input.
    assert!(pl.rho_lo <= 1.0 && pl.rho_hi >= 1.0, "{pl:?}");
    assert!(pl.items.iter().any(|i| i.author == "dispatcher"), "{pl:?}");
}

#[test]
fn a_receipt_for_a_made_up_id_is_a_claim_that_moves_no_grade() {
    let (f, a, _, _, duties) = omission();
    let (rec, keys) = f.seal(3);
    let adv = declared(&a);
    let clean = judge(&rec, &keys, &duties, &adv);
    let fake = MessageId {
        author: PrincipalId::new("supervisor").unwrap(),
        digest: [0xab; 32],
    };
    let mut forged = rec.clone();
    let r = Receipt::sign(
        fake.clone(),
        PrincipalId::new("dispatcher").unwrap(),
        33,
        &derive_signing_key(SEED, "dispatcher"),
    );
    forged.receipts.push(r.as_bytes().to_vec());
    let v = judge(&forged, &keys, &duties, &adv);
    assert_eq!(
        serde_json::to_value(&v.principals).unwrap(),
        serde_json::to_value(&clean.principals).unwrap(),
        "a receipt is its signer's claim, not the named author's conduct"
    );
    let item = v
        .completions
        .items
        .iter()
        .find(|i| i.id == id_string(&fake))
        .expect("the claim is listed: its signer is in scope");
    assert_eq!(item.attested_by, vec!["receipt by dispatcher".to_string()]);
    assert!(!item.enumerated);
}

#[test]
fn a_deleted_receipt_reads_the_signed_message_instead_of_abstaining() {
    // Deleting the operator order's receipt made every message citing it suspect
    // (cites_suspect): as unknown items they needed 2^16+ readings.
    let (f, a, _, _, duties) = omission();
    let (rec, keys) = f.seal(3);
    let order = f.msgs[0].0.id().clone();
    let mut cut = rec.clone();
    cut.receipts
        .retain(|r| Receipt::decode(r.clone()).map_or(true, |r| r.message() != &order));
    let adv = declared(&a);
    let clean = judge(&rec, &keys, &duties, &adv);
    let v = judge(&cut, &keys, &duties, &adv);
    for (p, c) in &clean.principals {
        let e = v.finding(p).expect("finding");
        assert!(e.rho_lo <= c.rho_lo && c.rho_hi <= e.rho_hi, "{p}");
    }
    let pl = v.finding("planner").unwrap();
    assert!(pl.flags.contains(&Flag::EvidenceSuspect), "{pl:?}");
    assert!(
        !pl.breach.reasonable_agent,
        "breach reads certified messages only"
    );
}

#[test]
fn sixteen_thousand_unresolved_anchors_abstain_at_once() {
    // Made-up anchors sharing a digest prefix: variable naming was quadratic (20 s).
    let (f, _, _, _, duties) = omission();
    let (rec, keys) = f.seal(3);
    let anchors: Vec<String> = (0..16_000u32)
        .map(|i| {
            let mut d = [0u8; 32];
            d[28..].copy_from_slice(&i.to_be_bytes());
            id_string(&MessageId {
                author: PrincipalId::new("controller").unwrap(),
                digest: d,
            })
        })
        .collect();
    let mut adv = declared(&f.msgs[0].0.id().clone()).decl;
    adv.anchors = anchors;
    let adv = audita_verdict::Adverse::new(adv).unwrap();
    let started = std::time::Instant::now();
    let err = verdict(&rec, &verify(&rec, &keys), &duties, &adv).unwrap_err();
    assert!(
        matches!(err, VerdictError::TooManyCompletions { .. }),
        "{err}"
    );
    // A guard against quadratic work on hostile input, not a benchmark.
    assert!(started.elapsed().as_secs() < 10, "{:?}", started.elapsed());
}
