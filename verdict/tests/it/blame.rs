//! Blame-shift certificates on hand-built records: conditioning, inert decoys, the
//! higher-order lifting, and compliant deviators never culpable at any order.

use crate::common;

use audita_evidence::MessageId;
use audita_verdict::{certificate, id_string, verdict, DutyRegistry};
use common::*;

/// The victim routes agv-1 (compliant). `insider-1` conditions a fast command on the
/// victim's message and on the checker's advisory (all-relay); the checker's advisory
/// was prompted by `insider-2`. Optionally `insider-3` issues an inert decoy.
fn world(decoy: bool) -> (Fleet, MessageId, MessageId) {
    let mut f = Fleet::new();
    let o = f.order("operator", 0, "shift");
    let mv = f.cmd(
        "planner-1",
        "dispatcher",
        10,
        route("agv-1"),
        &[&o],
        "origin",
        None,
    );
    let md = f.cmd(
        "dispatcher",
        "controller-agv-1",
        20,
        route("agv-1"),
        &[&mv],
        "relay-any",
        None,
    );
    let a_move = f.cmd(
        "controller-agv-1",
        "agv-1",
        30,
        route("agv-1"),
        &[&md],
        "relay-any",
        None,
    );
    let z = f.cmd(
        "insider-2",
        "checker",
        11,
        slow("agv-1"),
        &[&o],
        "origin",
        None,
    );
    let c = f.cmd(
        "checker",
        "insider-1",
        12,
        slow("agv-1"),
        &[&z],
        "relay-any",
        None,
    );
    if decoy {
        f.cmd(
            "insider-3",
            "dispatcher",
            13,
            slow("agv-1"),
            &[&o],
            "origin",
            None,
        );
    }
    let x = f.cmd(
        "insider-1",
        "controller-agv-1",
        40,
        fast("agv-1"),
        &[&mv, &c],
        "relay-all",
        None,
    );
    let a_speed = f.cmd(
        "controller-agv-1",
        "agv-1",
        50,
        fast("agv-1"),
        &[&x],
        "relay-any",
        None,
    );
    (f, a_move, a_speed)
}

fn registry() -> DutyRegistry {
    DutyRegistry::from_json(
        r#"{"standard": "reasonable_agent", "principals": {
          "planner-1": {"duties": [{"kind": "safety_envelope", "id": "env-p1", "target": "agv-1", "max_mm_per_s": 1000}]},
          "insider-1": {"duties": [{"kind": "safety_envelope", "id": "env-i1", "target": "agv-1", "max_mm_per_s": 1000}],
                        "reference": [{"id": "no-conditioning", "cites_author": "planner-1"}]},
          "insider-2": {"reference": [{"id": "no-prompt", "kind": "set_speed", "target": "agv-1"}]},
          "insider-3": {"reference": [{"id": "no-advice", "kind": "set_speed"}]},
          "checker":   {"reference": [{"id": "no-advisory", "kind": "set_speed", "cites_author": "insider-2"}]}}}"#,
    )
    .unwrap()
}

fn setup(
    decoy: bool,
) -> (
    audita_evidence::Record,
    audita_evidence::Partition,
    audita_verdict::Adverse,
) {
    let (f, a1, a2) = world(decoy);
    let (rec, keys) = f.seal(4);
    let part = verify(&rec, &keys);
    let mut adv = adverse(&[&a1, &a2], 1000, &[]);
    adv.decl.combine = audita_verdict::Combine::All;
    (rec, part, adv)
}

#[test]
fn conditioning_on_the_victim_is_certified_and_graded() {
    let (rec, part, adv) = setup(false);
    let duties = registry();
    let v = verdict(&rec, &part, &duties, &adv).unwrap();
    let victim = v.finding("planner-1").unwrap();
    assert_eq!(victim.rho_lo, 1.0, "the victim is a true but-for cause");
    assert!(!victim.culpable, "but compliant");
    let cert = certificate(&rec, &part, &duties, &adv, &["planner-1"])
        .unwrap()
        .expect("certificate");
    assert_eq!(cert.order, 1);
    assert_eq!((cert.realised, cert.reference), (1.0, 0.0));
    for p in ["insider-1", "insider-2", "checker"] {
        assert_eq!(cert.framers[p].rho_frame, 1.0, "{p}");
    }
    assert!(
        cert.framers["insider-1"].culpable,
        "insider-1 breached the envelope"
    );
    assert!(!cert.framers["checker"].culpable && !cert.framers["insider-2"].culpable);
    assert_eq!(cert.sets.len(), 3);
    for s in &cert.sets {
        assert_eq!(s.reverted.len(), 1);
        assert!(s.victim_grade_after <= cert.reference, "replay check");
    }
}

#[test]
fn inert_decoy_changes_no_grade() {
    let duties = registry();
    let (rec, part, adv) = setup(false);
    let plain = certificate(&rec, &part, &duties, &adv, &["planner-1"])
        .unwrap()
        .unwrap();
    let (rec2, part2, adv2) = setup(true);
    let with = certificate(&rec2, &part2, &duties, &adv2, &["planner-1"])
        .unwrap()
        .unwrap();
    assert_eq!(with.framers["insider-3"].rho_frame, 0.0);
    for (p, f) in &plain.framers {
        assert_eq!(with.framers[p].rho_frame, f.rho_frame, "{p}");
    }
    assert_eq!(with.sets.len(), plain.sets.len());
    assert_eq!(
        (with.realised, with.reference),
        (plain.realised, plain.reference)
    );
    // And the verdict grades are unchanged by the decoy.
    let v1 = verdict(&rec, &part, &duties, &adv).unwrap();
    let v2 = verdict(&rec2, &part2, &duties, &adv2).unwrap();
    for (p, f) in &v1.principals {
        let g = v2.finding(p).unwrap();
        assert_eq!(
            (g.rho_lo, g.rho_hi, g.culpable),
            (f.rho_lo, f.rho_hi, f.culpable),
            "{p}"
        );
    }
}

#[test]
fn higher_order_lifting_grades_who_framed_the_framer() {
    let duties = registry();
    let (rec, part, adv) = setup(true);
    let c2 = certificate(&rec, &part, &duties, &adv, &["planner-1", "checker"])
        .unwrap()
        .expect("order-2 certificate");
    assert_eq!(c2.order, 2);
    assert!(c2.realised > c2.reference);
    // insider-2's prompt raised the checker's framing grade.
    assert!(c2.framers["insider-2"].rho_frame > 0.0);
    assert_eq!(
        c2.framers["insider-3"].rho_frame, 0.0,
        "decoy inert at order 2"
    );
    let c3 = certificate(
        &rec,
        &part,
        &duties,
        &adv,
        &["planner-1", "checker", "insider-2"],
    )
    .unwrap();
    // Compliant deviators are never culpable at any order.
    let v = verdict(&rec, &part, &duties, &adv).unwrap();
    for cert in [Some(c2), c3].into_iter().flatten() {
        for (p, f) in &cert.framers {
            if !v.finding(p).unwrap().breach.reasonable_agent {
                assert!(!f.culpable, "{p} at order {}", cert.order);
            }
        }
    }
    for p in ["checker", "insider-2", "insider-3", "planner-1"] {
        assert!(!v.finding(p).unwrap().culpable, "{p}");
    }
    assert!(certificate(&rec, &part, &duties, &adv, &[]).is_err());
}

#[test]
fn no_deviation_no_certificate() {
    let (rec, part, adv) = setup(false);
    let duties = DutyRegistry::from_json(r#"{"principals": {}}"#).unwrap();
    assert!(certificate(&rec, &part, &duties, &adv, &["planner-1"])
        .unwrap()
        .is_none());
    let _ = id_string;
}

/// Inevitability rigging on a hand-built record: the victim routes agv-1 (compliant),
/// `insider-2` speeds it up on its own account (breach), and `insider-1` parks agv-2 —
/// a command on no path to `Y` — where its reference plan routes agv-2 through the
/// crossing, which alone would have realised `Y`. The registry declares that
/// counterpart with `realises_outcome`; `inert` declares it as realising nothing.
fn rigging(
    counterpart: Option<bool>,
) -> (
    DutyRegistry,
    audita_evidence::Record,
    audita_evidence::Partition,
    audita_verdict::Adverse,
) {
    let mut f = Fleet::new();
    let o = f.order("operator", 0, "shift");
    let mv = f.cmd(
        "planner-1",
        "dispatcher",
        10,
        route("agv-1"),
        &[&o],
        "origin",
        None,
    );
    let md = f.cmd(
        "dispatcher",
        "controller-agv-1",
        20,
        route("agv-1"),
        &[&mv],
        "relay-any",
        None,
    );
    let a_move = f.cmd(
        "controller-agv-1",
        "agv-1",
        30,
        route("agv-1"),
        &[&md],
        "relay-any",
        None,
    );
    f.cmd(
        "insider-1",
        "agv-2",
        11,
        route("agv-2"),
        &[&o],
        "origin",
        None,
    );
    let x = f.cmd(
        "insider-2",
        "controller-agv-1",
        12,
        fast("agv-1"),
        &[&o],
        "origin",
        None,
    );
    let a_speed = f.cmd(
        "controller-agv-1",
        "agv-1",
        40,
        fast("agv-1"),
        &[&x],
        "relay-any",
        None,
    );
    let (rec, keys) = f.seal(4);
    let part = verify(&rec, &keys);
    let mut adv = adverse(&[&a_move, &a_speed], 1000, &[]);
    adv.decl.combine = audita_verdict::Combine::All;
    let cp = match counterpart {
        None => String::new(),
        Some(r) => format!(
            r#", "counterpart": {{"kind": "move_to", "target": "agv-2", "realises_outcome": {r}}}"#
        ),
    };
    let duties = DutyRegistry::from_json(&format!(
        r#"{{"standard": "reasonable_agent", "principals": {{
          "planner-1": {{"duties": [{{"kind": "safety_envelope", "id": "env-p1", "target": "agv-1", "max_mm_per_s": 1000}}]}},
          "insider-2": {{"duties": [{{"kind": "safety_envelope", "id": "env-i2", "target": "agv-1", "max_mm_per_s": 1000}}]}},
          "insider-1": {{"reference": [{{"id": "park-agv-2", "kind": "move_to", "target": "agv-2"{cp}}}]}}}}}}"#
    ))
    .unwrap();
    (duties, rec, part, adv)
}

#[test]
fn inevitability_rigging_is_certified_through_the_declared_reference_counterpart() {
    let (duties, rec, part, adv) = rigging(Some(true));
    let v = verdict(&rec, &part, &duties, &adv).unwrap();
    let victim = v.finding("planner-1").unwrap();
    assert_eq!(victim.rho_lo, 1.0, "the rigged harm hinges on the victim");
    assert!(!victim.culpable);
    assert_eq!(
        v.finding("insider-1").map(|f| f.rho_hi),
        Some(0.0),
        "no path to Y"
    );
    let cert = certificate(&rec, &part, &duties, &adv, &["planner-1"])
        .unwrap()
        .expect("the counterpart makes the reference harm inevitable");
    // Reference: Y = (route ∧ fast) ∨ counterpart, the victim is no longer pivotal.
    assert_eq!((cert.realised, cert.reference), (1.0, 0.5));
    assert_eq!(cert.framers["insider-1"].rho_frame, 1.0);
    assert!(!cert.framers["insider-1"].culpable, "parking is no breach");
    assert_eq!(cert.counterparts, cert.deviations);
    assert_eq!(cert.sets.len(), 1);
    assert!(cert.sets[0].victim_grade_after <= cert.reference);
}

#[test]
fn a_removal_or_an_inert_counterpart_frames_no_one() {
    for counterpart in [None, Some(false)] {
        let (duties, rec, part, adv) = rigging(counterpart);
        let cert = certificate(&rec, &part, &duties, &adv, &["planner-1"]).unwrap();
        assert!(cert.is_none(), "{counterpart:?}: {cert:?}");
    }
}
