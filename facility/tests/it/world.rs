//! Kinematics, predicates and re-execution semantics of the world.

use std::collections::BTreeSet;

use audita_facility::model::model_json;
use audita_facility::oracle::truth;
use audita_facility::scenario::{generate, Family};
use audita_facility::world::{
    Action, Adverse, CommandId, Derivation, Destination, Intervention, Mode, WorldError,
};

#[test]
fn severity_is_half_m_v_squared_of_the_striking_robot() {
    let sc = generate(Family::Trivial, 0);
    let run = sc.spec.run_actual(Mode::Pinned);
    let Some(Adverse::Safety {
        robot, severity_mj, ..
    }) = run.adverse
    else {
        panic!("no strike: {:?}", run.adverse)
    };
    let r = &sc.spec.robots[robot.0 as usize];
    let v = sc.spec.commands.iter().find_map(|c| match c.action {
        Action::SetSpeed { speed, .. } => Some(speed),
        _ => None,
    });
    let v_mps = v.unwrap() as f64 / 100.0;
    let expected = 0.5 * r.mass_kg as f64 * v_mps * v_mps * 1000.0;
    assert!(
        (severity_mj as f64 - expected).abs() <= 1.0,
        "{severity_mj} vs {expected}"
    );
}

#[test]
fn deleting_an_ancestor_disables_the_whole_policy_chain() {
    let sc = generate(Family::Chain, 1);
    let absent: BTreeSet<CommandId> = [CommandId(0)].into();
    let eff = sc.spec.effective(&absent);
    assert!(
        eff.iter().all(|e| !e),
        "every relay descends from the user's instruction"
    );
    let run = sc.spec.run(
        &Intervention {
            absent,
            fulfilled: BTreeSet::new(),
        },
        Mode::Pinned,
    );
    assert!(run.adverse.is_none());
    assert!(run.actuations.is_empty());
}

#[test]
fn dutiful_halt_averts_the_omission_and_startup_harms() {
    for family in [Family::Omission, Family::UnexpectedStartup] {
        for seed in 0..5 {
            let sc = generate(family, seed);
            let duties = sc.spec.unfulfilled_duties();
            assert_eq!(duties.len(), 1);
            let iv = Intervention {
                absent: BTreeSet::new(),
                fulfilled: duties.into_iter().collect(),
            };
            let run = sc.spec.run(&iv, Mode::Pinned);
            assert!(
                run.adverse.is_none(),
                "{} seed {seed}: the halt must avert the harm",
                family.name()
            );
            assert!(run
                .actuations
                .iter()
                .any(|e| matches!(e.action, Action::Halt { .. })));
        }
    }
}

#[test]
fn malformed_worlds_are_errors_not_panics() {
    let mut sc = generate(Family::Redundancy, 0);
    sc.spec.commands[0].cites = vec![CommandId(5)];
    assert!(matches!(
        sc.spec.validate(),
        Err(WorldError::BadCitation { .. })
    ));
    let mut sc = generate(Family::Redundancy, 0);
    sc.spec.commands[1].derivation = Derivation::RelayAll;
    sc.spec.commands[1].cites.clear();
    assert_eq!(sc.spec.validate(), Err(WorldError::EmptyRelay(1)));
    let mut sc = generate(Family::Redundancy, 0);
    sc.spec.commands[0].destination =
        Destination::Principal(audita_facility::world::PrincipalId(99));
    assert!(matches!(
        sc.spec.validate(),
        Err(WorldError::OutOfRange { .. })
    ));
}

#[test]
fn independent_oracle_agrees_on_the_derived_models() {
    // Cross-check against audita-oracle (the colleague's analytic oracle, which shares
    // code with neither this crate nor the engine).
    for family in Family::ALL {
        for seed in 0..3 {
            let sc = generate(family, seed);
            let t = truth(&sc.spec).unwrap();
            let m = audita_oracle::OracleModel::from_json(&model_json(&sc.spec).unwrap()).unwrap();
            let rep = audita_oracle::analytic::attribute(&m).unwrap();
            for (p, rho) in &t.causal {
                assert_eq!(
                    rep.responsibility.get(p).copied().unwrap_or(0.0),
                    *rho,
                    "{} seed {seed}: {p}",
                    family.name()
                );
            }
        }
    }
}

#[test]
fn duty_facts_name_the_halt_duty_and_its_trigger() {
    use audita_facility::scenario::DutyFact;
    let sc = generate(Family::Omission, 2);
    let facts = sc.duty_facts();
    assert!(facts.iter().any(|f| matches!(f, DutyFact::HaltOnEntry { principal, triggered_at_ms: Some(_), .. } if principal == "supervisor")));
    assert!(facts.iter().any(|f| matches!(
        f,
        DutyFact::SpeedEnvelope {
            max_mm_per_s: 1000,
            ..
        }
    )));
    let facts = generate(Family::InertTwin, 2).duty_facts();
    assert!(facts.contains(&DutyFact::ReviewRequired {
        principal: "planner-2".into()
    }));
}
