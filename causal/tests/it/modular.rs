//! The modular path against the brute-force oracle and the engine's other exact paths,
//! on random models built of modules (nested gadgets with negation, preemption and
//! shared reads inside, the occasional cross read that breaks a module) and on the
//! unstructured random models: the same minimal causes with witnesses of the same size
//! when every cause is listed, the same ρ always, a shortened list that keeps ρ exact,
//! and local models forced through the solver (weighted candidates) as well as the
//! cheap local paths.

use crate::common;

use audita_causal::{attribute_with, AttributeOptions, Attribution, Model, Path};
use audita_oracle::{brute, OracleModel, OracleReport};
use common::{random_model, random_modular_model, Shape};
use proptest::prelude::*;

fn run(m: &Model, opts: AttributeOptions) -> Attribution {
    attribute_with(m, &[], &opts).unwrap_or_else(|e| panic!("{:?}: {e}", opts.path))
}

fn modular(contract: bool) -> AttributeOptions {
    AttributeOptions {
        contract,
        path: Path::Modular,
        ..Default::default()
    }
}

/// Local models past the general search: every non-monotone one on the solver.
fn modular_on_solver(contract: bool) -> AttributeOptions {
    AttributeOptions {
        probe_work: 0,
        ..modular(contract)
    }
}

fn sizes(a: &Attribution) -> Vec<(Vec<String>, usize)> {
    a.causes
        .iter()
        .map(|c| (c.vars.clone(), c.witness.len()))
        .collect()
}

/// Every cause and ρ as the oracle has them; every witness passes AC2 on the oracle.
fn same_as_oracle(json: &str, got: &Attribution, want: &OracleReport, om: &OracleModel) {
    assert_eq!(got.outcome, want.outcome, "outcome\n{json}");
    assert_eq!(
        got.responsibility,
        want.responsibility,
        "rho\n{json}\n{}",
        got.to_json()
    );
    for c in &got.causes {
        assert!(
            brute::check_witness(om, &c.vars, &c.witness).unwrap(),
            "witness fails AC2: {c:?}\n{json}"
        );
        assert_eq!(c.grade, 1.0 / (c.vars.len() + c.witness.len()) as f64);
    }
    let w: Vec<(Vec<String>, usize)> = want
        .causes
        .iter()
        .map(|c| (c.vars.clone(), c.witness.len()))
        .collect();
    if got.causes_complete {
        assert_eq!(
            sizes(got),
            w,
            "causes (vars, |W|)\n{json}\n{}",
            got.to_json()
        );
    } else {
        for c in sizes(got) {
            assert!(w.contains(&c), "listed a non-cause {c:?}\n{json}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn modular_models_match_brute_force(seed in any::<u64>(), budget in 3usize..10) {
        let json = random_modular_model(seed, budget);
        let m = Model::from_json(&json).unwrap_or_else(|e| panic!("{e}\n{json}"));
        prop_assume!(m.len() <= 13);
        let om = OracleModel::from_json(&json).unwrap();
        let want = brute::attribute(&om).unwrap();
        for opts in [modular(false), modular_on_solver(false), AttributeOptions { contract: false, ..Default::default() }] {
            same_as_oracle(&json, &run(&m, opts), &want, &om);
        }
    }

    #[test]
    fn unstructured_models_match_brute_force(seed in any::<u64>(), exo in 1usize..5, endo in 0usize..6, depth in 2u32..4) {
        let json = random_model(seed, Shape { exogenous: exo, endogenous: endo, monotone: false, max_depth: depth });
        let m = Model::from_json(&json).unwrap();
        let om = OracleModel::from_json(&json).unwrap();
        let want = brute::attribute(&om).unwrap();
        same_as_oracle(&json, &run(&m, modular(false)), &want, &om);
        same_as_oracle(&json, &run(&m, modular_on_solver(false)), &want, &om);
    }

    #[test]
    fn modular_and_general_paths_agree_with_contraction(seed in any::<u64>(), budget in 3usize..12) {
        let json = random_modular_model(seed, budget);
        let m = Model::from_json(&json).unwrap();
        for contract in [true, false] {
            let g = run(&m, AttributeOptions { contract, path: Path::General, ..Default::default() });
            for opts in [modular(contract), modular_on_solver(contract)] {
                let o = run(&m, opts);
                prop_assert_eq!(&g.responsibility, &o.responsibility, "contract={} {}", contract, json);
                prop_assert!(o.causes_complete, "{}", json);
                prop_assert_eq!(sizes(&g), sizes(&o), "contract={} {}", contract, json);
            }
        }
    }

    #[test]
    fn a_shortened_modular_list_keeps_rho_exact(seed in any::<u64>(), budget in 3usize..12, keep in 0usize..3) {
        let json = random_modular_model(seed, budget);
        let m = Model::from_json(&json).unwrap();
        let full = run(&m, AttributeOptions { path: Path::General, ..Default::default() });
        for opts in [modular(true), modular_on_solver(true)] {
            let short = run(&m, AttributeOptions { max_causes: keep, max_solver_causes: keep, ..opts });
            prop_assert_eq!(&short.responsibility, &full.responsibility, "{}", json);
            // Small local models are listed whole, so the count of causes is known.
            prop_assert_eq!(short.causes_complete, short.causes.len() == full.causes.len(), "{}", json);
            for c in &short.causes {
                prop_assert!(full.causes.iter().any(|f| f.vars == c.vars && f.grade == c.grade), "listed a non-cause {:?}\n{}", c, json);
            }
        }
    }
}

#[test]
fn the_generator_makes_modules() {
    // Guard on the generator: most of its models decompose (a root read only by the
    // rest of the model through itself), so the properties above exercise composition.
    let mut nested = 0;
    for seed in 0..200 {
        let json = random_modular_model(seed, 9);
        if json.matches("\"r").count() >= 2 {
            nested += 1;
        }
    }
    assert!(nested > 100, "{nested}");
}

/// Ten layers of 100 disjunctions, each reading two random nodes of the layer below:
/// cut-set families that share everything, and no module to split them.
fn shared_disjunctions(seed: u64) -> Model {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut b = audita_causal::ModelBuilder::new();
    let mut prev: Vec<String> = (0..100).map(|j| format!("l0_{j}")).collect();
    for name in &prev {
        b = b.exogenous(name.clone(), Some(name), true, true);
    }
    for i in 1..10 {
        let mut cur = Vec::new();
        for j in 0..100 {
            let x = &prev[rng.gen_range(0..100)];
            let y = &prev[rng.gen_range(0..100)];
            let name = format!("l{i}_{j}");
            b = b.endogenous(name.clone(), Some(&name), format!("{x} | {y}"), true);
            cur.push(name);
        }
        prev = cur;
    }
    b.outcome(prev[..4].join(" | ")).build().unwrap()
}

#[test]
fn cut_sets_of_a_shared_dag_stop_at_the_deadline_not_minutes_past_it() {
    // Regression: minimising one variable's cut-set family polled no deadline and had
    // no work bound; a 20 s query ended after 132 s.
    let m = shared_disjunctions(1);
    for path in [Path::Auto, Path::Monotone, Path::Modular] {
        let start = std::time::Instant::now();
        let limit = std::time::Duration::from_millis(800);
        let deadline = move || start.elapsed() >= limit;
        let opts = AttributeOptions {
            path,
            ..Default::default()
        };
        match audita_causal::attribute_until(&m, &[], &opts, &deadline) {
            Ok(a) => assert_eq!(a.responsibility.len(), 1000),
            Err(e) => assert!(e.is_bound(), "{path:?}: {e}"),
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(3),
            "{path:?}: {:?}",
            start.elapsed()
        );
    }
}
