//! Every named family's planted truth matches the oracle's exact re-execution.

use std::collections::BTreeMap;

use audita_facility::conduct::certificate;
use audita_facility::oracle::truth;
use audita_facility::scenario::{generate, Family};
use audita_facility::world::Mode;

fn check(family: Family, seed: u64) {
    let sc = generate(family, seed);
    sc.spec.validate().unwrap();
    let t = truth(&sc.spec).unwrap_or_else(|e| panic!("{} seed {seed}: {e}", family.name()));
    assert_eq!(
        t.adverse.is_some(),
        sc.planted.adverse,
        "{} seed {seed}: adverse",
        family.name()
    );
    let names = sc.principals();
    assert_eq!(
        t.causal,
        sc.planted.causal_over(&names),
        "{} seed {seed}: causal",
        family.name()
    );
    assert_eq!(
        t.culpable,
        sc.planted.culpable(&names),
        "{} seed {seed}: culpable",
        family.name()
    );
    assert_eq!(
        t.breach,
        sc.planted.breach,
        "{} seed {seed}: breach",
        family.name()
    );
    assert_eq!(
        t.conduit,
        sc.planted.conduit,
        "{} seed {seed}: conduit",
        family.name()
    );
    if let Some(v) = &sc.planted.victim {
        let cert = certificate(&sc.spec, v)
            .unwrap()
            .expect("involvement raised");
        assert_eq!(
            cert.framers,
            sc.planted.framers,
            "{} seed {seed}: framers",
            family.name()
        );
        assert!(cert.reference < cert.realised);
        assert_eq!(t.culpable.get(v).copied(), Some(0.0), "victim culpability");
    }
}

#[test]
fn planted_truth_matches_reexecution_for_every_family() {
    for family in Family::ALL {
        for seed in 0..12 {
            check(family, seed);
        }
    }
}

#[test]
fn same_seed_same_world_and_run() {
    for family in Family::ALL {
        let a = generate(family, 7);
        let b = generate(family, 7);
        assert_eq!(a, b);
        assert_eq!(
            a.spec.run_actual(Mode::Pinned),
            b.spec.run_actual(Mode::Pinned)
        );
        assert_ne!(
            generate(family, 8).spec,
            a.spec,
            "{}: seeds must vary the world",
            family.name()
        );
    }
}

#[test]
fn single_site_deletion_cannot_falsify_redundancy() {
    // The structural fact the single-site baseline trips on.
    let sc = generate(Family::Redundancy, 3);
    let t = truth(&sc.spec).unwrap();
    assert_eq!(t.causes.iter().filter(|c| c.len() == 2).count(), 1);
    let expected: BTreeMap<String, f64> = sc.planted.causal_over(&sc.principals());
    assert_eq!(t.causal, expected);
}

#[test]
fn generator_planted_truth_matches_world_reexecution() {
    use audita_facility::generator::{generate as draw, Params};
    let params = Params::default();
    let mut adverse = 0;
    for seed in 0..150 {
        let sc = draw(seed, &params);
        sc.spec.validate().unwrap();
        let t = truth(&sc.spec).unwrap_or_else(|e| panic!("generator seed {seed}: {e}"));
        assert_eq!(
            t.adverse.is_some(),
            sc.planted.adverse,
            "generator seed {seed}: adverse"
        );
        let names = sc.principals();
        if t.adverse.is_some() {
            adverse += 1;
            assert_eq!(
                t.causal,
                sc.planted.causal_over(&names),
                "generator seed {seed}: causal"
            );
            assert_eq!(
                t.conduit, sc.planted.conduit,
                "generator seed {seed}: conduit"
            );
        }
        assert_eq!(t.breach, sc.planted.breach, "generator seed {seed}: breach");
    }
    // Only some draws are adverse.
    assert!(adverse > 30 && adverse < 150, "adverse draws: {adverse}");
}

#[test]
fn engine_on_derived_model_agrees_with_oracle_and_certifies_on_pinned_world() {
    use audita_causal::certify::{attribute_certified, CertifyMode};
    use audita_causal::{CertifyConfig, Model};
    use audita_facility::model::model_json;
    use audita_facility::replay::WorldReplayer;
    let cfg = CertifyConfig {
        delta: 0.5,
        mode: CertifyMode::Exact,
        tolerance: 0.0,
    };
    for family in Family::ALL {
        for seed in 0..4 {
            let sc = generate(family, seed);
            let t = truth(&sc.spec).unwrap();
            let model = Model::from_json(&model_json(&sc.spec).unwrap()).unwrap();
            let mut rep = WorldReplayer::pinned(&sc.spec);
            let cert = attribute_certified(&model, &[], &mut rep, &cfg).unwrap();
            assert_eq!(
                cert.abstentions().count(),
                0,
                "{} seed {seed}",
                family.name()
            );
            for (p, rho) in &t.causal {
                assert_eq!(
                    cert.attribution.responsibility_of(p),
                    *rho,
                    "{} seed {seed}: {p}",
                    family.name()
                );
            }
        }
    }
}

#[test]
fn hosted_mode_is_seeded_and_certifies_statistically() {
    use audita_causal::certify::{attribute_certified, CertifyMode};
    use audita_causal::{CertifyConfig, Model};
    use audita_facility::model::model_json;
    use audita_facility::replay::WorldReplayer;
    use audita_facility::world::{Hosted, Mode};
    let sc = generate(Family::Trivial, 5);
    let params = Hosted {
        seed: 11,
        jitter: 0,
        drop_per_mille: 20,
    };
    let a = sc.spec.run_actual(Mode::Hosted { params, replica: 3 });
    let b = sc.spec.run_actual(Mode::Hosted { params, replica: 3 });
    assert_eq!(a, b, "same seed and replica, same run");
    let model = Model::from_json(&model_json(&sc.spec).unwrap()).unwrap();
    let cfg = CertifyConfig {
        delta: 0.5,
        mode: CertifyMode::Statistical {
            n: 200,
            alpha: 0.05,
        },
        tolerance: 0.0,
    };
    let mut rep = WorldReplayer::hosted(&sc.spec, params);
    let cert = attribute_certified(&model, &[], &mut rep, &cfg).unwrap();
    assert!(cert
        .receipts
        .iter()
        .all(|r| r.certified && r.epsilon > 0.0 && r.runs == 200));
    assert_eq!(cert.attribution.responsibility_of("planner-1"), 1.0);
    // A hosted stack that drops most actuations cannot certify anything: abstention.
    let noisy = Hosted {
        seed: 11,
        jitter: 3,
        drop_per_mille: 600,
    };
    let mut rep = WorldReplayer::hosted(&sc.spec, noisy);
    let cert = attribute_certified(&model, &[], &mut rep, &cfg).unwrap();
    assert!(cert.abstentions().count() > 0);
    assert_eq!(cert.attribution.responsibility_of("planner-1"), 0.0);
}

#[test]
fn same_seed_same_engine_output_bytes() {
    use audita_causal::{attribute, Model};
    use audita_facility::model::model_json;
    for family in Family::ALL {
        let a =
            attribute(&Model::from_json(&model_json(&generate(family, 9).spec).unwrap()).unwrap())
                .unwrap();
        let b =
            attribute(&Model::from_json(&model_json(&generate(family, 9).spec).unwrap()).unwrap())
                .unwrap();
        assert_eq!(a.to_json(), b.to_json(), "{}", family.name());
    }
}

#[test]
fn inevitability_rigging_deviation_is_no_cause_yet_framed_the_victim() {
    use audita_facility::oracle::{truth_given, Variable};
    use audita_facility::world::CommandId;
    use std::collections::BTreeSet;
    for seed in 0..6 {
        let sc = generate(Family::InevitabilityRigging, seed);
        let dev = sc
            .spec
            .commands
            .iter()
            .position(|c| c.deviation)
            .map(|i| CommandId(i as u32))
            .unwrap();
        let t = truth(&sc.spec).unwrap();
        assert!(
            !t.candidates.contains(&Variable::Command(dev)),
            "the deviation lies on no production path"
        );
        // Under the reference plan the harm happens anyway and the victim is not involved.
        let reverted: BTreeSet<CommandId> = [dev].into();
        let r = truth_given(&sc.spec, &reverted).unwrap();
        assert!(
            r.adverse.is_some(),
            "seed {seed}: harm inevitable under the reference plan"
        );
        assert_eq!(r.causal["planner-1"], 0.0);
        assert_eq!(t.causal["planner-1"], 1.0);
    }
}
