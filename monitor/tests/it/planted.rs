//! The monitor against the planted truth: for every facility scenario family and
//! for generator draws, the declaration the monitor derives from the certified
//! record equals the planted one (the simulator's ground truth, `adverse_json` and
//! `planted_realisation`, kept as the test oracle only) — anchors, `t*`, severity,
//! realisation facts — and the verdict computed on it is the planted declaration's;
//! no-cause controls fire with no anchors; non-adverse draws fire nothing. Every
//! family's declaration is checkable: moving `t*`, dropping an anchor or marking a
//! realised command unrealised is refused with the reason, and the planted
//! declaration, declared by hand by an operator, is accepted.

use std::collections::BTreeSet;

use audita_evidence::{verify_record, Partition};
use audita_facility::generator::{generate as draw, Params};
use audita_facility::record::{
    adverse_json, planted_realisation, predicates_json, registry_json, sign_record, SignedRecord,
};
use audita_facility::scenario::{generate, Family, Scenario};
use audita_monitor::{check, derive, AlertKind, Derivation, Monitor, Predicates};
use audita_verdict::{
    id_string, verdict, Adverse, AdverseDecl, Declarer, DeclarerKind, DutyRegistry, FactKind,
};

struct Case {
    sc: Scenario,
    sr: SignedRecord,
    part: Partition,
    file: Predicates,
    derived: Derivation,
    planted: Option<AdverseDecl>,
}

fn case(sc: Scenario) -> Case {
    let sr = sign_record(&sc).expect("record");
    let part = verify_record(&sr.record, &sr.keys);
    assert!(
        part.is_clean(),
        "{} {}: record not clean",
        sc.family,
        sc.seed
    );
    let file = Predicates::from_json(&predicates_json(&sc)).expect("predicate file");
    let derived = derive(&part, &file);
    let planted = adverse_json(&sc, &sr)
        .expect("oracle")
        .map(|j| serde_json::from_str(&j).expect("planted declaration"));
    Case {
        sc,
        sr,
        part,
        file,
        derived,
        planted,
    }
}

fn set(v: &[String]) -> BTreeSet<String> {
    v.iter().cloned().collect()
}

fn joules(d: &AdverseDecl) -> Option<(f64, f64)> {
    d.severity.map(|s| (s.mass_kg, s.joules()))
}

/// Compares the monitor's declaration with the planted one; returns the differences.
fn compare(c: &Case) -> Vec<String> {
    let name = format!("{} seed {}", c.sc.family, c.sc.seed);
    let fired: Vec<_> = c
        .derived
        .alerts
        .iter()
        .filter(|a| a.kind == AlertKind::Fired)
        .collect();
    let Some(planted) = &c.planted else {
        if c.derived.declarations.is_empty() && fired.is_empty() {
            return Vec::new();
        }
        return vec![format!(
            "{name}: not adverse, yet the monitor fired {:?}",
            fired
        )];
    };
    let [d] = c.derived.declarations.as_slice() else {
        return vec![format!(
            "{name}: {} declarations derived, want 1",
            c.derived.declarations.len()
        )];
    };
    let mut out = Vec::new();
    let mut diff = |what: &str, a: String, b: String| {
        if a != b {
            out.push(format!("{name}: {what}: monitor {a} planted {b}"));
        }
    };
    diff("outcome", d.outcome.clone(), planted.outcome.clone());
    diff("t*", d.t_star_ms.to_string(), planted.t_star_ms.to_string());
    diff(
        "anchors",
        format!("{:?}", set(&d.anchors)),
        format!("{:?}", set(&planted.anchors)),
    );
    diff(
        "combine",
        format!("{:?}", d.combine),
        format!("{:?}", planted.combine),
    );
    diff(
        "targets",
        format!("{:?}", d.targets),
        format!("{:?}", planted.targets),
    );
    diff(
        "window",
        format!("{} {}", d.window_start_ms, d.window_end()),
        format!("{} {}", planted.window_start_ms, planted.window_end()),
    );
    match (joules(d), joules(planted)) {
        (Some((m1, e1)), Some((m2, e2))) if m1 == m2 && (e1 - e2).abs() <= 5e-3 => {}
        (None, None) => {}
        (a, b) => diff("severity", format!("{a:?}"), format!("{b:?}")),
    }
    let (realised, unrealised) = planted_realisation(&c.sc, &c.sr);
    let of = |k: FactKind| -> BTreeSet<String> {
        d.facts
            .iter()
            .filter(|f| f.fact == k)
            .filter_map(|f| f.message.clone())
            .collect()
    };
    diff(
        "realised",
        format!("{:?}", of(FactKind::Realised)),
        format!(
            "{:?}",
            realised.iter().map(id_string).collect::<BTreeSet<_>>()
        ),
    );
    diff(
        "unrealised",
        format!("{:?}", set(&d.unrealised)),
        format!(
            "{:?}",
            unrealised.iter().map(id_string).collect::<BTreeSet<_>>()
        ),
    );
    diff(
        "unrealised facts",
        format!("{:?}", of(FactKind::Unrealised)),
        format!("{:?}", set(&d.unrealised)),
    );
    if c.sc.family == Family::NoCause.name() && !d.anchors.is_empty() {
        out.push(format!(
            "{name}: a no-cause control has anchors {:?}",
            d.anchors
        ));
    }
    // Every fact's evidence is certified.
    for f in &d.facts {
        for e in &f.evidence {
            let id = audita_verdict::parse_id(e).expect("evidence id");
            if !c.part.certified.contains_key(&id) {
                out.push(format!("{name}: fact {:?} cites uncertified {e}", f.fact));
            }
        }
    }
    if fired.len() != 1 {
        out.push(format!("{name}: {} fired alerts, want 1", fired.len()));
    }
    out
}

/// The verdict on the monitor's declaration equals the verdict on the planted one
/// (all but the header's incident name and the declaration's provenance).
fn same_verdict(c: &Case) -> Result<(), String> {
    let (Some(planted), [d]) = (&c.planted, c.derived.declarations.as_slice()) else {
        return Ok(());
    };
    let duties = DutyRegistry::from_json(&registry_json(&c.sc, "reasonable_agent")).unwrap();
    let judge = |decl: &AdverseDecl| {
        let a = Adverse::new(decl.clone()).map_err(|e| e.to_string())?;
        let v = verdict(&c.sr.record, &c.part, &duties, &a).map_err(|e| e.to_string())?;
        let mut v = serde_json::to_value(&v).map_err(|e| e.to_string())?;
        let o = v.as_object_mut().unwrap();
        for k in ["incident", "declaration", "severity_j"] {
            o.remove(k);
        }
        Ok::<_, String>(v)
    };
    let (a, b) = (judge(d)?, judge(planted)?);
    if a != b {
        return Err(format!(
            "{} seed {}: verdicts differ:\nmonitor {a}\nplanted {b}",
            c.sc.family, c.sc.seed
        ));
    }
    Ok(())
}

#[test]
fn every_family_derives_its_planted_declaration_and_verdict() {
    let mut failures = Vec::new();
    for fam in Family::ALL {
        for seed in 0..12u64 {
            let c = case(generate(fam, seed));
            assert!(c.planted.is_some(), "{} is an adverse family", fam.name());
            failures.extend(compare(&c));
            if seed < 3 {
                if let Err(e) = same_verdict(&c) {
                    failures.push(e);
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_thousand_generator_draws_derive_their_planted_declarations() {
    let params = Params::default();
    let mut failures = Vec::new();
    let (mut adverse, mut quiet) = (0, 0);
    for seed in 0..1000u64 {
        let c = case(draw(seed, &params));
        if c.planted.is_some() {
            adverse += 1;
        } else {
            quiet += 1;
        }
        failures.extend(compare(&c));
        if seed % 25 == 0 {
            if let Err(e) = same_verdict(&c) {
                failures.push(e);
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        adverse > 100 && quiet > 100,
        "{adverse} adverse, {quiet} not"
    );
}

fn refused(c: &Case, d: &AdverseDecl, want: &str) -> Result<(), String> {
    match check(d, &c.file, &c.derived) {
        Ok(_) => Err(format!(
            "{} seed {}: accepted a declaration that should be refused ({want})",
            c.sc.family, c.sc.seed
        )),
        Err(e) if e.to_string().contains(want) && !e.to_string().contains('\n') => Ok(()),
        Err(e) => Err(format!(
            "{} seed {}: refused, but not for {want:?}: {e}",
            c.sc.family, c.sc.seed
        )),
    }
}

#[test]
fn hostile_declarations_are_refused_on_every_family() {
    let mut failures = Vec::new();
    for fam in Family::ALL {
        for seed in 0..3u64 {
            let c = case(generate(fam, seed));
            let d = c.derived.declarations[0].clone();
            // The monitor's own declaration passes.
            if let Err(e) = check(&d, &c.file, &c.derived) {
                failures.push(format!(
                    "{} {seed}: own declaration refused: {e}",
                    fam.name()
                ));
            }
            // The planted declaration, declared by hand by an operator, passes too.
            let mut manual = c.planted.clone().unwrap();
            manual.declarer = Some(Declarer {
                kind: DeclarerKind::Operator,
                name: "alice".into(),
            });
            match check(&manual, &c.file, &c.derived) {
                Ok(checked) => {
                    assert_eq!(checked.declarer, manual.declarer);
                    assert_eq!(checked.incident, manual.incident);
                    assert_eq!(checked.facts, d.facts);
                }
                Err(e) => failures.push(format!(
                    "{} {seed}: operator declaration refused: {e}",
                    fam.name()
                )),
            }
            // Without a declarer: refused.
            let mut anon = manual.clone();
            anon.declarer = None;
            failures.extend(refused(&c, &anon, "no declarer").err());
            // t* moved, either way.
            for shift in [100i64, -100] {
                let mut moved = d.clone();
                moved.facts.clear();
                moved.t_star_ms = (moved.t_star_ms as i64 + shift) as u64;
                failures.extend(refused(&c, &moved, "is not when").err());
            }
            // The culprit's realised command marked unrealised: the anchor when there
            // is one, else any realised command on the subject.
            let realised: Vec<String> = d
                .facts
                .iter()
                .filter(|f| f.fact == FactKind::Realised)
                .filter_map(|f| f.message.clone())
                .collect();
            let victim = d
                .anchors
                .first()
                .cloned()
                .or_else(|| realised.first().cloned());
            if let Some(a) = victim {
                let mut hostile = d.clone();
                hostile.facts.clear();
                hostile.unrealised.push(a.clone());
                hostile.anchors.retain(|x| *x != a);
                // The gate-relevant edit alone: keep the anchor, add it as unrealised.
                let mut only = d.clone();
                only.facts.clear();
                only.unrealised.push(a);
                failures.extend(refused(&c, &only, "the record shows its effect realised").err());
                if !d.anchors.is_empty() {
                    failures.extend(refused(&c, &hostile, "dropped").err());
                }
            } else if fam != Family::NoCause {
                failures.push(format!("{} {seed}: nothing realised to attack", fam.name()));
            }
            // An anchor dropped.
            if !d.anchors.is_empty() {
                let mut dropped = d.clone();
                dropped.facts.clear();
                dropped.anchors.pop();
                failures.extend(refused(&c, &dropped, "dropped").err());
            }
            // Severity inflated.
            if let Some(mut s) = d.severity {
                let mut worse = d.clone();
                worse.facts.clear();
                s.speed_m_per_s *= 2.0;
                worse.severity = Some(s);
                failures.extend(refused(&c, &worse, "severity").err());
            }
            // Facts that misstate the evidence.
            let mut lying = d.clone();
            if let Some(f) = lying.facts.first_mut() {
                f.evidence.clear();
            }
            failures.extend(refused(&c, &lying, "is not what the record establishes").err());
            // A predicate the file does not declare.
            let mut other = d.clone();
            other.outcome = "made_up".into();
            failures.extend(refused(&c, &other, "not in the predicate file").err());
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The incremental monitor, fed one message at a time with the watermark trailing
/// the stream, declares exactly what the whole-record derivation declares, and
/// raises its fired alert before the declaration is due.
#[test]
fn incremental_detection_equals_the_whole_record_derivation() {
    for fam in Family::ALL {
        for seed in 0..3u64 {
            let c = case(generate(fam, seed));
            let mut msgs: Vec<_> = c.part.certified.values().collect();
            msgs.sort_by_key(|m| (m.envelope.envelope().timestamp, m.record_index));
            let mut m = Monitor::new(c.file.clone());
            let mut decls = Vec::new();
            let mut fired_at = None;
            for (i, msg) in msgs.iter().enumerate() {
                let ts = msg.envelope.envelope().timestamp;
                decls.extend(m.advance(ts.saturating_sub(1)));
                for a in m.observe(&msg.envelope) {
                    if a.kind == AlertKind::Fired && fired_at.is_none() {
                        fired_at = Some(i);
                    }
                }
            }
            assert!(fired_at.is_some(), "{} {seed}: no alert", fam.name());
            decls.extend(m.advance(u64::MAX));
            assert_eq!(decls, c.derived.declarations, "{} {seed}", fam.name());
        }
    }
}

/// A message delivered twice in a row (a re-delivery) changes no declaration: a
/// command or an actuation report read again must not become a second fact
/// (regression: a realised command declared realised twice, which the engine's
/// re-derivation over the slice refused, turning a sealer restart into an
/// abstention). A whole epoch read again — a restarted sealer's republication — is
/// skipped by the monitor stage by its epoch number (`pipeline::monitor`; tested in
/// `cli/tests/it/republished_epoch.rs`): replaying older telemetry after newer would
/// re-arm a subject, so that guarantee is the stage's, not this state machine's.
#[test]
fn a_message_delivered_twice_changes_no_declaration() {
    for fam in Family::ALL {
        for seed in 0..3u64 {
            let c = case(generate(fam, seed));
            let mut msgs: Vec<_> = c.part.certified.values().collect();
            msgs.sort_by_key(|m| (m.envelope.envelope().timestamp, m.record_index));
            let mut m = Monitor::new(c.file.clone());
            let mut decls = Vec::new();
            for msg in msgs.iter().flat_map(|m| [*m, *m]) {
                decls.extend(m.advance(msg.envelope.envelope().timestamp.saturating_sub(1)));
                m.observe(&msg.envelope);
            }
            decls.extend(m.advance(u64::MAX));
            assert_eq!(decls, c.derived.declarations, "{} {seed}", fam.name());
            for d in &decls {
                check(d, &c.file, &c.derived)
                    .unwrap_or_else(|e| panic!("{} {seed}: {}: {e}", fam.name(), d.incident));
            }
        }
    }
}

#[test]
fn near_miss_alerts_precede_the_incident_on_safety_families() {
    let c = case(generate(Family::Trivial, 1));
    let kinds: Vec<AlertKind> = c.derived.alerts.iter().map(|a| a.kind).collect();
    assert_eq!(
        kinds,
        vec![AlertKind::NearMiss, AlertKind::Fired],
        "{:?}",
        c.derived.alerts
    );
    assert!(c.derived.alerts[0].t_ms < c.derived.alerts[1].t_ms);
}
