//! The full pipeline on the world: signed record → verification partition → verdict
//! (audita-verdict, with replay certification on the pinned world) recovers the
//! oracle's truth on every family.

use audita_evidence::verify_record;
use audita_facility::oracle::truth;
use audita_facility::record::{adverse_json, registry_json, sign_record, verdict_variables};
use audita_facility::replay::WorldReplayer;
use audita_facility::scenario::{generate, Family, Scenario};
use audita_verdict::{verdict_with, Adverse, DutyRegistry, Options};

/// (principal, ρ_lo, ρ_hi, culpable) per verdict row, and the verdict JSON.
type Rows = (Vec<(String, f64, f64, bool)>, String);

fn profiles(sc: &Scenario) -> Option<Rows> {
    let sr = sign_record(sc).unwrap();
    let part = verify_record(&sr.record, &sr.keys);
    let reg = DutyRegistry::from_json(&registry_json(sc, "reasonable_agent")).unwrap();
    let adv = Adverse::from_json(&adverse_json(sc, &sr).unwrap()?).unwrap();
    let mut rep = WorldReplayer::named(&sc.spec, None, verdict_variables(sc, &sr));
    let v = verdict_with(
        &sr.record,
        &part,
        &reg,
        &adv,
        &Options::default(),
        Some(&mut rep),
    )
    .unwrap();
    Some((
        v.rows()
            .into_iter()
            .map(|r| (r.principal, r.rho_lo, r.rho_hi, r.culpable))
            .collect(),
        v.to_json(),
    ))
}

#[test]
fn verdict_on_the_signed_record_matches_the_oracle() {
    let mut failures = Vec::new();
    for family in Family::ALL {
        for seed in 0..3 {
            let sc = generate(family, seed);
            let t = truth(&sc.spec).unwrap();
            let Some((rows, _)) = profiles(&sc) else {
                assert!(t.adverse.is_none());
                continue;
            };
            for p in sc.principals() {
                let (lo, hi, culp) = rows
                    .iter()
                    .find(|r| r.0 == p)
                    .map(|r| (r.1, r.2, r.3))
                    .unwrap_or((0.0, 0.0, false));
                let want_c = t.causal[&p];
                let want_k = t.culpable[&p];
                let got_k = if culp { lo } else { 0.0 };
                if lo != want_c || hi != want_c || got_k != want_k {
                    failures.push(format!(
                        "{} seed {seed} {p}: rho [{lo}, {hi}] culpable {culp} vs causal {want_c} culpable {want_k}",
                        family.name()
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn record_level_certificate_names_the_attackers_of_every_conduct_attack() {
    // The verdict layer's certificate reads only the signed record, the registry (with
    // its declared reference counterparts) and the adverse declaration; it must grade
    // exactly the planted framers, like the world-level certificate.
    for family in Family::ALL.into_iter().filter(|f| f.is_conduct_attack()) {
        for seed in 0..8 {
            let sc = generate(family, seed);
            let sr = sign_record(&sc).unwrap();
            let part = verify_record(&sr.record, &sr.keys);
            let reg = DutyRegistry::from_json(&registry_json(&sc, "reasonable_agent")).unwrap();
            let adv = Adverse::from_json(&adverse_json(&sc, &sr).unwrap().unwrap()).unwrap();
            let victim = sc.planted.victim.clone().unwrap();
            let cert = audita_verdict::certificate(&sr.record, &part, &reg, &adv, &[&victim])
                .unwrap()
                .unwrap_or_else(|| panic!("{} seed {seed}: no certificate", family.name()));
            let got: std::collections::BTreeMap<String, f64> = cert
                .framers
                .iter()
                .map(|(p, f)| (p.clone(), f.rho_frame))
                .collect();
            assert_eq!(got, sc.planted.framers, "{} seed {seed}", family.name());
        }
    }
}

#[test]
fn the_rigger_declares_its_reference_counterpart_as_realising_the_outcome() {
    let sc = generate(Family::InevitabilityRigging, 0);
    let reg = DutyRegistry::from_json(&registry_json(&sc, "reasonable_agent")).unwrap();
    let rules = &reg.principals["insider-1"].reference;
    assert_eq!(rules.len(), 1);
    let cp = rules[0].counterpart.as_ref().expect("declared counterpart");
    assert_eq!(cp.target.as_deref(), Some("agv-2"));
    assert!(cp.realises_outcome);
    // Conditioning's reference conduct is a plain removal: no counterpart.
    let sc = generate(Family::Conditioning, 0);
    let reg = DutyRegistry::from_json(&registry_json(&sc, "reasonable_agent")).unwrap();
    assert!(reg.principals["insider-1"]
        .reference
        .iter()
        .all(|r| r.counterpart.is_none()));
}
