//! Record-level golden scenarios built message by message: each SPEC §5 structure,
//! witness grades, window exits, deletions and forgeries.

use crate::common;

use audita_evidence::{derive_signing_key, Envelope, Payload, PrincipalId};
use audita_verdict::{ClaimLevel, EdgeKind, FindingStatus, Flag, Verdict};
use common::*;

fn rho(v: &Verdict, p: &str) -> (f64, f64) {
    let f = v.finding(p).unwrap_or_else(|| panic!("no finding for {p}"));
    (f.rho_lo, f.rho_hi)
}

fn trivial() -> (
    Fleet,
    audita_evidence::MessageId,
    audita_evidence::MessageId,
) {
    let mut f = Fleet::new();
    let o = f.order("operator", 0, "shift");
    let m = f.cmd(
        "planner-1",
        "controller-agv-1",
        10,
        fast("agv-1"),
        &[&o],
        "origin",
        None,
    );
    let a = f.cmd(
        "controller-agv-1",
        "agv-1",
        20,
        fast("agv-1"),
        &[&m],
        "relay-any",
        None,
    );
    (f, m, a)
}

#[test]
fn trivial_control_one_culprit_and_a_conduit() {
    let (f, _, a) = trivial();
    let (rec, keys) = f.seal(2);
    let duties = envelope_registry(&["planner-1"], "reasonable_agent");
    let v = judge(&rec, &keys, &duties, &adverse(&[&a], 1000, &[]));
    assert_eq!(rho(&v, "planner-1"), (1.0, 1.0));
    let p = v.finding("planner-1").unwrap();
    assert!(p.culpable);
    assert_eq!(p.status, FindingStatus::Culpable);
    assert_eq!(p.claim.level, ClaimLevel::Causal);
    assert!(!p.evidence.is_empty());
    let c = v.finding("controller-agv-1").unwrap();
    assert_eq!((c.rho_lo, c.rho_hi), (1.0, 1.0));
    assert!(!c.culpable);
    assert!(c.flags.contains(&Flag::Conduit));
    assert_eq!(c.status, FindingStatus::InvolvedCleared);
    assert_eq!(v.severity_j, 800.0);
    assert!(v.replay.iter().all(|r| r.certified));
    assert!(!v.record_root.is_empty());
    let rows = v.rows();
    assert_eq!(rows.len(), v.principals.len());
    assert!(rows
        .iter()
        .any(|r| r.principal == "planner-1" && r.culpable && r.claim == "causal"));
}

#[test]
fn redundancy_halves_and_inert_twin_is_negligent_but_inert() {
    for inert in [false, true] {
        let mut f = Fleet::new();
        let o = f.order("operator", 0, "shift");
        let m1 = f.cmd(
            "planner-1",
            "dispatcher",
            10,
            fast("agv-1"),
            &[&o],
            "origin",
            None,
        );
        let m2 = f.cmd(
            "planner-2",
            "dispatcher",
            11,
            fast("agv-1"),
            &[&o],
            "origin",
            None,
        );
        let cites: Vec<&audita_evidence::MessageId> =
            if inert { vec![&m1] } else { vec![&m1, &m2] };
        let d = f.cmd(
            "dispatcher",
            "controller-agv-1",
            20,
            fast("agv-1"),
            &cites,
            "relay-any",
            None,
        );
        let a = f.cmd(
            "controller-agv-1",
            "agv-1",
            30,
            fast("agv-1"),
            &[&d],
            "relay-any",
            None,
        );
        let (rec, keys) = f.seal(4);
        let duties = envelope_registry(&["planner-1", "planner-2"], "reasonable_agent");
        let v = judge(&rec, &keys, &duties, &adverse(&[&a], 1000, &[]));
        if inert {
            assert_eq!(rho(&v, "planner-1"), (1.0, 1.0));
            assert_eq!(rho(&v, "planner-2"), (0.0, 0.0));
            let p2 = v.finding("planner-2").unwrap();
            assert_eq!(p2.status, FindingStatus::NegligentButInert);
            assert!(p2.breach.reasonable_agent && !p2.culpable);
        } else {
            assert_eq!(rho(&v, "planner-1"), (0.5, 0.5));
            assert_eq!(rho(&v, "planner-2"), (0.5, 0.5));
            assert!(v.finding("planner-2").unwrap().culpable);
        }
        assert_eq!(rho(&v, "dispatcher"), (1.0, 1.0));
        assert!(v
            .finding("dispatcher")
            .unwrap()
            .flags
            .contains(&Flag::Conduit));
    }
}

#[test]
fn preempted_command_is_exonerated_with_a_note_and_the_later_one_is_the_cause() {
    let mut f = Fleet::new();
    let o = f.order("operator", 0, "shift");
    let m1 = f.cmd(
        "planner-1",
        "dispatcher",
        10,
        fast("agv-1"),
        &[&o],
        "origin",
        None,
    );
    let _veto = f.cmd(
        "supervisor",
        "dispatcher",
        11,
        halt("agv-1"),
        &[&m1],
        "origin",
        None,
    );
    let m3 = f.cmd(
        "planner-3",
        "dispatcher",
        50,
        fast("agv-1"),
        &[&o],
        "origin",
        None,
    );
    let d = f.cmd(
        "dispatcher",
        "controller-agv-1",
        60,
        fast("agv-1"),
        &[&m3],
        "relay-any",
        None,
    );
    let a = f.cmd(
        "controller-agv-1",
        "agv-1",
        70,
        fast("agv-1"),
        &[&d],
        "relay-any",
        None,
    );
    let (rec, keys) = f.seal(3);
    let duties = envelope_registry(&["planner-1", "planner-3"], "reasonable_agent");
    let v = judge(&rec, &keys, &duties, &adverse(&[&a], 1000, &[]));
    let p1 = v.finding("planner-1").unwrap();
    assert_eq!((p1.rho_lo, p1.rho_hi), (0.0, 0.0));
    assert_eq!(p1.status, FindingStatus::NegligentButInert);
    assert!(p1.flags.contains(&Flag::Exonerated));
    assert!(
        p1.notes.iter().any(|n| n.contains("vetoed")),
        "{:?}",
        p1.notes
    );
    assert!(v.finding("planner-3").unwrap().culpable);
    let s = v.finding("supervisor").unwrap();
    assert_eq!(s.status, FindingStatus::Exonerated);
}

#[test]
fn declared_unrealised_actuation_is_cut_by_the_gate() {
    let mut f = Fleet::new();
    let o = f.order("operator", 0, "shift");
    let m1 = f.cmd(
        "planner-1",
        "dispatcher",
        10,
        fast("agv-1"),
        &[&o],
        "origin",
        None,
    );
    let m2 = f.cmd(
        "planner-2",
        "dispatcher",
        12,
        fast("agv-1"),
        &[&o],
        "origin",
        None,
    );
    let d = f.cmd(
        "dispatcher",
        "controller-agv-1",
        20,
        fast("agv-1"),
        &[&m1, &m2],
        "relay-any",
        None,
    );
    let a = f.cmd(
        "controller-agv-1",
        "agv-1",
        30,
        fast("agv-1"),
        &[&d],
        "relay-any",
        None,
    );
    let (rec, keys) = f.seal(4);
    let duties = envelope_registry(&["planner-1", "planner-2"], "specification");
    let v = judge(&rec, &keys, &duties, &adverse(&[&a], 1000, &[&m1]));
    assert_eq!(rho(&v, "planner-1"), (0.0, 0.0));
    assert_eq!(rho(&v, "planner-2"), (1.0, 1.0));
    assert!(v
        .finding("planner-1")
        .unwrap()
        .notes
        .iter()
        .any(|n| n.contains("preempted")));
}

fn omission_fleet(halt_issued: bool) -> (Fleet, audita_evidence::MessageId) {
    let mut f = Fleet::new();
    let o = f.order("operator", 0, "shift");
    let s = f.sensor("sensor-aisle", "supervisor", 100, "human 0 entered aisle-1");
    if halt_issued {
        f.cmd(
            "supervisor",
            "controller-agv-1",
            300,
            halt("agv-1"),
            &[&s],
            "origin",
            None,
        );
    }
    let m = f.cmd(
        "planner-1",
        "dispatcher",
        110,
        route("agv-1"),
        &[&o],
        "origin",
        None,
    );
    let d = f.cmd(
        "dispatcher",
        "controller-agv-1",
        120,
        route("agv-1"),
        &[&m],
        "relay-any",
        None,
    );
    let a = f.cmd(
        "controller-agv-1",
        "agv-1",
        130,
        route("agv-1"),
        &[&d],
        "relay-any",
        None,
    );
    (f, a)
}

fn halt_registry() -> audita_verdict::DutyRegistry {
    audita_verdict::DutyRegistry::from_json(
        r#"{"standard": "specification", "principals": {
            "supervisor": {"duties": [{"kind": "halt_authority", "id": "halt-aisle",
               "target": "agv-1", "trigger_contains": "aisle-1", "deadline_ms": 500}]},
            "planner-1": {"duties": [{"kind": "safety_envelope", "id": "env-p1",
               "target": "agv-1", "max_mm_per_s": 1000}]}}}"#,
    )
    .unwrap()
}

#[test]
fn omission_grades_the_absence_and_clears_the_compliant_issuer() {
    let (f, a) = omission_fleet(false);
    let (rec, keys) = f.seal(4);
    let v = judge(&rec, &keys, &halt_registry(), &adverse(&[&a], 5000, &[]));
    let s = v.finding("supervisor").unwrap();
    assert_eq!((s.rho_lo, s.rho_hi), (1.0, 1.0));
    assert!(s.flags.contains(&Flag::Omission));
    assert!(s.culpable && s.breach.specification);
    let p = v.finding("planner-1").unwrap();
    assert_eq!(p.rho_lo, 1.0);
    assert_eq!(p.status, FindingStatus::InvolvedCleared);
    assert_eq!(v.slice.absences.len(), 1);
    // Dutiful halt issued: no absence, supervisor clean.
    let (f, a) = omission_fleet(true);
    let (rec, keys) = f.seal(4);
    let v = judge(&rec, &keys, &halt_registry(), &adverse(&[&a], 5000, &[]));
    assert!(v.slice.absences.is_empty());
    assert!(!v.finding("supervisor").unwrap().breach.specification);
}

#[test]
fn a_deleted_anchor_keeps_the_omission_in_the_interval() {
    // The anchor's target made the unissued halt a condition of Y. Once the anchor is
    // deleted its target is unknown: the completions must still read the absence as
    // conjoined (the record before the deletion), not only as irrelevant.
    let (f, a) = omission_fleet(false);
    let (rec, keys) = f.seal(4);
    let adv = adverse(&[&a], 5000, &[]);
    let clean = judge(&rec, &keys, &halt_registry(), &adv);
    let mut cut = rec.clone();
    let idx = f.msgs.iter().position(|(s, _)| s.id() == &a).unwrap();
    cut.envelopes.remove(idx);
    let v = judge(&cut, &keys, &halt_registry(), &adv);
    assert_eq!(v.slice.absences.len(), 1);
    assert!(
        !v.slice.absences[0].in_outcome,
        "no certified anchor targets agv-1"
    );
    for (p, c) in &clean.principals {
        let e = v.finding(p).unwrap();
        assert!(
            e.rho_lo <= c.rho_lo && c.rho_hi <= e.rho_hi,
            "{p}: [{}, {}] does not contain [{}, {}]",
            e.rho_lo,
            e.rho_hi,
            c.rho_lo,
            c.rho_hi
        );
    }
    let s = v.finding("supervisor").unwrap();
    assert_eq!(s.rho_hi, 1.0);
    assert!(!s.items.is_empty());
}

#[test]
fn similarity_edge_downgrades_to_temporal_and_blocks_culpability() {
    let mut f = Fleet::new();
    let o = f.order("operator", 0, "shift");
    let m = f.cmd(
        "planner-1",
        "agent",
        10,
        fast("agv-1"),
        &[&o],
        "origin",
        None,
    );
    let r = f.cmd(
        "agent",
        "controller-agv-1",
        20,
        fast("agv-1"),
        &[&m],
        "relay-any",
        Some("similarity"),
    );
    let a = f.cmd(
        "controller-agv-1",
        "agv-1",
        30,
        fast("agv-1"),
        &[&r],
        "relay-any",
        None,
    );
    let (rec, keys) = f.seal(4);
    let duties = envelope_registry(&["planner-1"], "reasonable_agent");
    let v = judge(&rec, &keys, &duties, &adverse(&[&a], 1000, &[]));
    let p = v.finding("planner-1").unwrap();
    assert_eq!((p.rho_lo, p.rho_hi), (0.0, 1.0));
    assert_eq!(p.claim.level, ClaimLevel::Temporal);
    assert_eq!(p.claim.offending_edges.len(), 1);
    assert_eq!(p.claim.offending_edges[0].kind, EdgeKind::SimilarityMatch);
    assert!(!p.culpable);
    assert_eq!(p.status, FindingStatus::Unresolved);
    assert_eq!(v.claim.level, ClaimLevel::Temporal);
    assert!(v
        .slice
        .edges
        .iter()
        .any(|e| e.kind == EdgeKind::SimilarityMatch));
}

#[test]
fn window_exit_is_indeterminate_and_names_the_boundary() {
    let mut f = Fleet::new();
    let o = f.order("operator", 0, "shift");
    let m = f.cmd(
        "planner-1",
        "agent",
        10,
        fast("agv-1"),
        &[&o],
        "origin",
        None,
    );
    let r = f.cmd(
        "agent",
        "controller-agv-1",
        200,
        fast("agv-1"),
        &[&m],
        "relay-any",
        None,
    );
    let a = f.cmd(
        "controller-agv-1",
        "agv-1",
        300,
        fast("agv-1"),
        &[&r],
        "relay-any",
        None,
    );
    let (rec, keys) = f.seal(4);
    let duties = envelope_registry(&["agent"], "specification");
    let mut adv = adverse(&[&a], 1000, &[]);
    adv.decl.window_start_ms = 100;
    let v = judge(&rec, &keys, &duties, &adv);
    let g = v.finding("agent").unwrap();
    assert_eq!(g.claim.level, ClaimLevel::Indeterminate);
    assert_eq!(g.claim.boundary, vec![audita_verdict::id_string(&m)]);
    assert!(!g.culpable, "no causal verdict through a window exit");
    assert_eq!(v.claim.level, ClaimLevel::Indeterminate);
    assert!(v.slice.edges.iter().any(|e| e.kind == EdgeKind::WindowExit));
}

#[test]
fn forged_message_changes_no_byte_of_the_verdict() {
    let (f, m, a) = trivial();
    let (rec, keys) = f.seal(2);
    let duties = envelope_registry(&["planner-1"], "reasonable_agent");
    let adv = adverse(&[&a], 1000, &[]);
    let before = judge(&rec, &keys, &duties, &adv).to_json();
    let mut forged = rec.clone();
    // A halt in the controller's name citing the victim, signed with the wrong key.
    let e = Envelope::new(
        PrincipalId::new("controller-agv-1").unwrap(),
        PrincipalId::new("agv-1").unwrap(),
        25,
        Payload::Halt {
            target: "agv-1".into(),
        },
    )
    .cite([m.clone()]);
    let s = e.sign(&derive_signing_key(99, "forger")).unwrap();
    forged.envelopes.push(s.as_bytes().to_vec());
    let after = judge(&forged, &keys, &duties, &adv).to_json();
    assert_eq!(before, after);
}

#[test]
fn deleted_breach_evidence_is_named_with_its_author() {
    let (f, m, a) = trivial();
    let (rec, keys) = f.seal(2);
    let duties = envelope_registry(&["planner-1"], "reasonable_agent");
    let adv = adverse(&[&a], 1000, &[]);
    let mut cut = rec.clone();
    let idx = f.msgs.iter().position(|(s, _)| s.id() == &m).unwrap();
    cut.envelopes.remove(idx);
    let v = judge(&cut, &keys, &duties, &adv);
    let p = v.finding("planner-1").unwrap();
    // The certified citer attests the deleted message, but not what it was: it may have
    // been the planner's own decision (ρ = 1, the record before the deletion) or an
    // input supplied from outside the model (ρ = 0). Deletion converts the forced
    // involvement into flagged, author-attributed uncertainty; the upper end stays.
    assert_eq!((p.rho_lo, p.rho_hi), (0.0, 1.0));
    assert!(!p.culpable, "breach evidence was deleted");
    assert_eq!(p.status, FindingStatus::Unresolved);
    assert!(p
        .items
        .iter()
        .any(|i| i.id == audita_verdict::id_string(&m) && i.author == "planner-1"));
    assert!(p.flags.contains(&Flag::EvidenceMissing));
}

#[test]
fn a_deleted_relay_keeps_an_out_of_scope_input_delivered_to_its_author() {
    // bystander -> p1 (about agv-9) ; p1 relays it as a command on agv-1 ; the relay is
    // deleted. Once deleted, the bystander's message is outside the incident's scope
    // (another target, not involved), but it was addressed to p1, so it stays among
    // the deleted relay's possible inputs: the bystander's clean grade stays in its
    // interval. Traffic never delivered to p1 ("other", agv-7) stays out.
    let mut f = Fleet::new();
    let o = f.order("operator", 0, "shift");
    let m = f.cmd("bystander", "p1", 10, fast("agv-9"), &[&o], "origin", None);
    f.cmd("other", "agv-7", 12, fast("agv-7"), &[&o], "origin", None);
    let r = f.cmd(
        "p1",
        "controller",
        20,
        fast("agv-1"),
        &[&m],
        "relay-any",
        None,
    );
    let a = f.cmd(
        "controller",
        "agv-1",
        30,
        fast("agv-1"),
        &[&r],
        "relay-any",
        None,
    );
    let (rec, keys) = f.seal(2);
    let duties = envelope_registry(&[], "specification");
    let adv = adverse(&[&a], 1000, &[]);
    let clean = judge(&rec, &keys, &duties, &adv);
    assert_eq!(rho(&clean, "bystander"), (1.0, 1.0));
    assert!(clean.finding("other").is_none(), "out of scope");
    let mut cut = rec.clone();
    cut.envelopes.retain(|e| {
        audita_evidence::SignedEnvelope::decode(e.clone()).map_or(true, |s| s.id() != &r)
    });
    let v = judge(&cut, &keys, &duties, &adv);
    let (lo, hi) = rho(&v, "bystander");
    assert!(lo <= 1.0 && hi >= 1.0, "[{lo}, {hi}]");
    assert!(v.finding("other").is_none(), "never delivered to p1");
    assert!(v.completions.items.iter().any(|i| i.author == "p1"));
}
