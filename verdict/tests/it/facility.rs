//! Golden tests per SPEC §5 family at record level: the facility's signed, sealed record
//! of each scenario, a duty registry and adverse declaration derived from the world's
//! declarations (never from the planted truth), and the verdict compared with the
//! planted causal profile, breach set and conduit flags. Record attacks (forge, drop,
//! reorder, equivocate) on every family: forgery is bitwise invisible, drops are named.

use std::collections::{BTreeMap, BTreeSet};

use audita_evidence::verify_record;
use audita_facility::oracle::envelope;
use audita_facility::record::{attack, sign_record, Attack};
use audita_facility::scenario::{generate, Family, Scenario};
use audita_facility::world::{Action, Adverse as WorldAdverse, Destination, Duty, Mode, Source};
use audita_verdict::{
    id_string, verdict, Adverse, AdverseDecl, Combine, DutyRegistry, Flag, Severity, Verdict,
};
use serde_json::json;

/// The duty registry the facility declares: every principal holds the speed envelope of
/// every robot and the acceptance range of every batch; supervisors hold their halt
/// duties. Judged under the reasonable-agent standard.
fn registry(sc: &Scenario) -> DutyRegistry {
    let spec = &sc.spec;
    let mut principals = serde_json::Map::new();
    for p in &spec.principals {
        let mut duties = Vec::new();
        for (ri, r) in spec.robots.iter().enumerate() {
            let lim = envelope(spec, ri);
            if lim != i64::MAX {
                duties.push(
                    json!({"kind": "safety_envelope", "id": format!("env.{}.{}", p.name, r.name),
                    "target": r.name, "max_mm_per_s": lim * 10}),
                );
            }
        }
        for b in &spec.batches {
            duties.push(
                json!({"kind": "safety_envelope", "id": format!("range.{}.{}", p.name, b.name),
                "target": b.name, "param": "param", "min": b.range.0, "max": b.range.1}),
            );
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
                    duties.push(json!({"kind": "halt_authority", "id": format!("halt.{di}"),
                        "target": spec.robots[robot.0 as usize].name,
                        "trigger_contains": format!("entered {}", spec.zones[*zone as usize].name),
                        "deadline_ms": u64::from(*deadline) * 100}));
                }
            }
        }
        // Reference policy: the world's declared deviations, as content rules.
        let mut reference = Vec::new();
        for (ci, c) in spec.commands.iter().enumerate() {
            if c.deviation && spec.name(c.author) == p.name {
                let cites = c
                    .cites
                    .first()
                    .map(|x| spec.name(spec.commands[x.0 as usize].author).to_string());
                let mut rule = json!({"id": format!("ref.{ci}"), "kind": c.action.name(),
                    "cites_author": cites});
                // The reference plan's counterpart of the deviation, if it issues a
                // different command (inevitability rigging), with its declared
                // actuation semantics: alone it makes the run adverse.
                if let Some((ri, r)) = spec
                    .commands
                    .iter()
                    .enumerate()
                    .find(|(_, r)| r.reference_for.map(|d| d.0 as usize) == Some(ci))
                {
                    let target = match r.action {
                        Action::MoveTo { robot, .. }
                        | Action::SetSpeed { robot, .. }
                        | Action::Halt { robot } => spec.robots[robot.0 as usize].name.clone(),
                        Action::SetParam { batch, .. } => {
                            spec.batches[batch.0 as usize].name.clone()
                        }
                    };
                    rule["counterpart"] = json!({"kind": r.action.name(), "target": target,
                        "realises_outcome": alone_adverse(spec, ri)});
                }
                reference.push(rule);
            }
        }
        principals.insert(
            p.name.clone(),
            json!({"duties": duties, "reference": reference}),
        );
    }
    DutyRegistry::from_json(
        &json!({"standard": "reasonable_agent", "principals": principals}).to_string(),
    )
    .expect("registry")
}

/// Whether command `r` alone (every other realised command absent) makes the run
/// adverse, and the run is not adverse without it.
fn alone_adverse(spec: &audita_facility::world::WorldSpec, r: usize) -> bool {
    use audita_facility::world::{CommandId, Intervention};
    let mut absent: BTreeSet<CommandId> = (0..spec.commands.len())
        .filter(|i| *i != r && !spec.commands[*i].is_reference())
        .map(|i| CommandId(i as u32))
        .collect();
    let adverse = |absent: &BTreeSet<CommandId>| {
        let iv = Intervention {
            absent: absent.clone(),
            ..Intervention::default()
        };
        spec.run(&iv, Mode::Pinned).adverse.is_some()
    };
    let with = adverse(&absent);
    absent.insert(CommandId(r as u32));
    with && !adverse(&absent)
}

/// The adverse declaration from the recorded state: anchors are the last realised
/// command actuation of each kind on Y's actuator before t* (unless an environmental
/// event of that kind superseded it); unrealised are actuating commands whose effect
/// never arrived.
fn declaration(sc: &Scenario, ids: &[audita_evidence::MessageId]) -> Adverse {
    let run = sc.spec.run_actual(Mode::Pinned);
    let y = run.adverse.expect("adverse scenario");
    let (target_is, severity) = match y {
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
                ) as Box<dyn Fn(&Action) -> bool>,
                Some(Severity {
                    mass_kg: mass,
                    speed_m_per_s: v,
                }),
            )
        }
        WorldAdverse::Quality { batch, .. } => (
            Box::new(
                move |a: &Action| matches!(a, Action::SetParam { batch: b, .. } if *b == batch),
            ) as Box<dyn Fn(&Action) -> bool>,
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
    Adverse::new(AdverseDecl {
        incident: format!("{}-{}", sc.family, sc.seed),
        outcome: "adverse".into(),
        t_star_ms: u64::from(y.tick()) * 100 + 99,
        severity,
        anchors,
        // Y references the actuator's realised state: its last actuation of every kind.
        combine: Combine::All,
        targets: Vec::new(),
        unrealised,
        window_start_ms: 0,
        window_end_ms: None,
        delta: 1.0,
        declarer: None,
        facts: Vec::new(),
    })
    .expect("declaration")
}

fn judge(
    sc: &Scenario,
) -> (
    Verdict,
    audita_facility::record::SignedRecord,
    Adverse,
    DutyRegistry,
) {
    let sr = sign_record(sc).expect("record");
    let part = verify_record(&sr.record, &sr.keys);
    assert!(part.is_clean());
    let adv = declaration(sc, &sr.command_ids);
    let duties = registry(sc);
    let v = verdict(&sr.record, &part, &duties, &adv).expect("verdict");
    (v, sr, adv, duties)
}

const FAMILIES: [Family; 10] = [
    Family::Conditioning,
    Family::Scapegoat,
    Family::Trivial,
    Family::Redundancy,
    Family::InertTwin,
    Family::Preemption,
    Family::Omission,
    Family::Chain,
    Family::UnexpectedStartup,
    Family::NoCause,
];

#[test]
fn every_family_matches_its_planted_truth_at_record_level() {
    let mut failures = Vec::new();
    for fam in FAMILIES {
        for seed in 0..4u64 {
            let sc = generate(fam, seed);
            let (v, ..) = judge(&sc);
            for p in sc.principals() {
                let want = sc.planted.causal.get(&p).copied().unwrap_or(0.0);
                let Some(f) = v.finding(&p) else {
                    if want != 0.0 {
                        failures.push(format!("{} seed {seed}: {p} missing", fam.name()));
                    }
                    continue;
                };
                if f.rho_lo != want || f.rho_hi != want {
                    failures.push(format!(
                        "{} seed {seed}: {p} rho [{}, {}] want {want}",
                        fam.name(),
                        f.rho_lo,
                        f.rho_hi
                    ));
                }
                let breach = f.breach.reasonable_agent;
                if breach != sc.planted.breach.contains(&p) {
                    failures.push(format!("{} seed {seed}: {p} breach {breach}", fam.name()));
                }
                let conduit = f.flags.contains(&Flag::Conduit);
                if conduit != sc.planted.conduit.contains(&p) {
                    failures.push(format!("{} seed {seed}: {p} conduit {conduit}", fam.name()));
                }
                let culpable = breach && want > 0.0;
                if f.culpable != culpable {
                    failures.push(format!(
                        "{} seed {seed}: {p} culpable {}",
                        fam.name(),
                        f.culpable
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn record_attacks_are_invisible_or_named_on_every_family() {
    for fam in FAMILIES {
        let sc = generate(fam, 1);
        let (clean, sr, adv, duties) = judge(&sc);
        for which in Attack::ALL {
            for pick in 0..3u64 {
                let rep = attack(&sr, which, pick);
                let part = verify_record(&rep.record, &sr.keys);
                let v = verdict(&rep.record, &part, &duties, &adv).expect("verdict");
                match which {
                    Attack::Forge => {
                        assert_eq!(v.to_json(), clean.to_json(), "{} forge", fam.name())
                    }
                    Attack::Drop => {
                        let d = rep.dropped.expect("dropped");
                        let named = v
                            .completions
                            .items
                            .iter()
                            .any(|i| i.id == id_string(&d) && i.author == d.author.as_str());
                        // Named wherever it can bear on the incident: its author is
                        // a principal of the clean verdict (an exogenous outcome's
                        // verdict reads nobody's messages).
                        if clean.finding(d.author.as_str()).is_some() {
                            assert!(named, "{} drop of {d} not named", fam.name());
                        }
                        // Nobody compliant becomes culpable; culpability needs breach.
                        for (p, f) in &v.principals {
                            if f.culpable {
                                assert!(f.breach.reasonable_agent, "{p}");
                            }
                        }
                        // A culprit whose ρ_lo fell has the items named.
                        for (p, f) in &v.principals {
                            if let Some(c) = clean.finding(p) {
                                if c.culpable && f.rho_lo < c.rho_lo {
                                    assert!(
                                        !f.items.is_empty(),
                                        "{} {p} lowered silently",
                                        fam.name()
                                    );
                                }
                                if c.culpable && !f.culpable {
                                    assert!(
                                        !f.items.is_empty() || f.rho_lo < c.rho_lo,
                                        "{} {p}",
                                        fam.name()
                                    );
                                }
                            }
                        }
                    }
                    Attack::Reorder | Attack::Equivocate => {
                        for (p, f) in &v.principals {
                            if f.culpable {
                                assert!(f.breach.reasonable_agent, "{p}");
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn blame_shift_certificates_match_the_planted_framers() {
    for fam in [
        Family::Conditioning,
        Family::InevitabilityRigging,
        Family::Scapegoat,
    ] {
        for seed in 0..3u64 {
            let sc = generate(fam, seed);
            let (v, sr, adv, duties) = judge(&sc);
            let victim = sc.planted.victim.clone().expect("victim");
            let part = verify_record(&sr.record, &sr.keys);
            let cert = audita_verdict::certificate(&sr.record, &part, &duties, &adv, &[&victim])
                .expect("certificate")
                .expect("deviations raised the victim's grade");
            assert!(cert.realised > cert.reference);
            for (p, want) in &sc.planted.framers {
                let got = cert.framers.get(p).map(|f| f.rho_frame).unwrap_or(0.0);
                assert_eq!(got, *want, "{} seed {seed}: rho_frame of {p}", fam.name());
            }
            // Replay check of every minimal set: the victim's grade falls to reference.
            for set in &cert.sets {
                assert!(set.victim_grade_after <= cert.reference, "{set:?}");
            }
            // The compliant victim is never culpable; compliant deviators neither.
            assert!(!v.finding(&victim).unwrap().culpable);
            for (p, f) in &cert.framers {
                if !v.finding(p).unwrap().breach.reasonable_agent {
                    assert!(!f.culpable, "{p}");
                }
            }
        }
    }
}

/// Maps the verdict's variable names onto the facility world replayer's (`m<i>`,
/// `absent.<duty>`), so causes are certified by exact re-execution of the world.
struct WorldHook<'a> {
    inner: audita_facility::replay::WorldReplayer<'a>,
    names: BTreeMap<String, String>,
}

impl audita_causal::Replayer for WorldHook<'_> {
    fn recorded(&self) -> Vec<audita_causal::certify::ActuationEvent> {
        self.inner.recorded()
    }
    fn replay(
        &mut self,
        iv: &audita_causal::certify::Intervention,
        run: u32,
    ) -> Result<audita_causal::certify::ReplayRun, audita_causal::certify::ReplayError> {
        let map = |v: &Vec<(String, bool)>| -> Result<Vec<(String, bool)>, audita_causal::certify::ReplayError> {
            v.iter()
                .map(|(n, b)| {
                    self.names.get(n).map(|m| (m.clone(), *b)).ok_or_else(|| {
                        audita_causal::certify::ReplayError { message: format!("unmapped {n}"), transient: false }
                    })
                })
                .collect()
        };
        let mapped = audita_causal::certify::Intervention {
            set: map(&iv.set)?,
            freeze: map(&iv.freeze)?,
        };
        self.inner.replay(&mapped, run)
    }
}

#[test]
fn causes_are_certified_by_exact_world_replay() {
    for fam in [
        Family::Trivial,
        Family::Redundancy,
        Family::Omission,
        Family::Chain,
        Family::UnexpectedStartup,
    ] {
        let sc = generate(fam, 2);
        let (v, sr, adv, duties) = judge(&sc);
        let by_id: BTreeMap<String, usize> = sr
            .command_ids
            .iter()
            .enumerate()
            .map(|(i, m)| (id_string(m), i))
            .collect();
        let mut names = BTreeMap::new();
        for (var, what) in &v.variables {
            if let Some(i) = by_id.get(what) {
                names.insert(var.clone(), format!("m{i}"));
            } else if let Some(d) = what.strip_prefix("absence:halt.") {
                names.insert(var.clone(), format!("absent.{d}"));
            }
        }
        let mut hook = WorldHook {
            inner: audita_facility::replay::WorldReplayer::pinned(&sc.spec),
            names,
        };
        let part = verify_record(&sr.record, &sr.keys);
        let w = audita_verdict::verdict_with(
            &sr.record,
            &part,
            &duties,
            &adv,
            &Default::default(),
            Some(&mut hook),
        )
        .expect("verdict");
        assert_eq!(
            w.status,
            audita_verdict::Status::Graded,
            "{}: {:?}",
            fam.name(),
            w.notes
        );
        assert!(!w.replay.is_empty());
        assert!(
            w.replay.iter().all(|r| r.certified),
            "{}: {:?}",
            fam.name(),
            w.replay
        );
        for (p, f) in &v.principals {
            let g = w.finding(p).unwrap();
            assert_eq!(
                (g.rho_lo, g.culpable),
                (f.rho_lo, f.culpable),
                "{} {p}",
                fam.name()
            );
        }
    }
}

/// Every string of a JSON value, object keys included.
fn strings_in(v: &serde_json::Value, out: &mut BTreeSet<String>) {
    match v {
        serde_json::Value::String(s) => {
            out.insert(s.clone());
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| strings_in(x, out)),
        serde_json::Value::Object(m) => m.iter().for_each(|(k, x)| {
            out.insert(k.clone());
            strings_in(x, out)
        }),
        _ => {}
    }
}

/// `Verdict::named_ids`, read from the verdict's types, finds exactly the record's
/// message ids and the registry's duty ids that appear anywhere in the verdict's
/// JSON (how a verdict's record once found them): on every family, clean and with
/// each message of the record dropped in turn (completion items, lowered grades).
#[test]
fn named_ids_are_the_ids_anywhere_in_the_verdicts_json() {
    let mut verdicts = 0;
    for fam in FAMILIES {
        let sc = generate(fam, 2);
        let (clean, sr, adv, duties) = judge(&sc);
        let mut candidates: BTreeSet<String> = sr
            .record
            .envelopes
            .iter()
            .filter_map(|b| audita_evidence::SignedEnvelope::decode(b.clone()).ok())
            .map(|e| id_string(e.id()))
            .collect();
        candidates.extend(
            duties
                .principals
                .values()
                .flat_map(|h| h.duties.iter().map(|d| d.id().to_string())),
        );
        let mut judged = vec![clean];
        for pick in 0..6u64 {
            let rep = attack(&sr, Attack::Drop, pick);
            let part = verify_record(&rep.record, &sr.keys);
            judged.push(verdict(&rep.record, &part, &duties, &adv).expect("verdict"));
        }
        for v in judged {
            let mut in_json = BTreeSet::new();
            strings_in(&serde_json::from_str(&v.to_json()).unwrap(), &mut in_json);
            let want: BTreeSet<&str> = in_json
                .iter()
                .map(String::as_str)
                .filter(|s| candidates.contains(*s))
                .collect();
            let got: BTreeSet<&str> = v
                .named_ids()
                .into_iter()
                .filter(|s| candidates.contains(*s))
                .collect();
            assert_eq!(got, want, "{} {}", fam.name(), v.incident);
            // An exogenous outcome's verdict reads nobody's messages.
            if !matches!(fam, Family::NoCause) {
                assert!(!got.is_empty(), "{}: names no id", fam.name());
            }
            verdicts += 1;
        }
    }
    assert_eq!(verdicts, FAMILIES.len() * 7);
}
