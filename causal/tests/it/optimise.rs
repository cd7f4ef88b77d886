//! The optimisation path against the brute-force oracle and the general path on random
//! non-monotone models, causes on demand (a shortened list with exact ρ), and the
//! bounds every query has (deadline, solver steps, memory), each a named error.

use crate::common;

use audita_causal::{
    attribute_until, attribute_with, check_cause, AttributeError, AttributeOptions, Attribution,
    Model, ModelBuilder, NoDeadline, Path,
};
use audita_oracle::{brute, OracleModel};
use common::{random_model, Shape};
use proptest::prelude::*;

fn run(m: &Model, path: Path, contract: bool) -> Attribution {
    let opts = AttributeOptions {
        contract,
        path,
        ..Default::default()
    };
    attribute_with(m, &[], &opts).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

fn sizes(a: &Attribution) -> Vec<(Vec<String>, usize)> {
    a.causes
        .iter()
        .map(|c| (c.vars.clone(), c.witness.len()))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn optimisation_path_matches_brute_force(seed in any::<u64>(), exo in 1usize..5, endo in 0usize..6, depth in 2u32..4) {
        let json = random_model(seed, Shape { exogenous: exo, endogenous: endo, monotone: false, max_depth: depth });
        let m = Model::from_json(&json).unwrap();
        let om = OracleModel::from_json(&json).unwrap();
        let want = brute::attribute(&om).unwrap();
        let got = run(&m, Path::Optimisation, false);
        prop_assert_eq!(got.outcome, want.outcome);
        prop_assert!(got.causes_complete);
        let w: Vec<(Vec<String>, usize)> = want.causes.iter().map(|c| (c.vars.clone(), c.witness.len())).collect();
        prop_assert_eq!(sizes(&got), w, "{}\n{}", json, got.to_json());
        for c in &got.causes {
            prop_assert!(brute::check_witness(&om, &c.vars, &c.witness).unwrap(), "witness fails AC2: {:?}\n{}", c, json);
        }
        prop_assert_eq!(&got.responsibility, &want.responsibility, "{}", json);
    }

    #[test]
    fn optimisation_and_general_paths_agree_with_contraction(seed in any::<u64>(), exo in 2usize..7, endo in 2usize..8) {
        let json = random_model(seed, Shape { exogenous: exo, endogenous: endo, monotone: false, max_depth: 3 });
        let m = Model::from_json(&json).unwrap();
        for contract in [true, false] {
            let g = run(&m, Path::General, contract);
            let o = run(&m, Path::Optimisation, contract);
            prop_assert_eq!(&g.responsibility, &o.responsibility, "contract={} {}", contract, json);
            prop_assert_eq!(sizes(&g), sizes(&o), "contract={} {}", contract, json);
        }
    }

    #[test]
    fn a_shortened_list_keeps_rho_exact(seed in any::<u64>(), exo in 2usize..7, endo in 2usize..8, keep in 0usize..3) {
        let json = random_model(seed, Shape { exogenous: exo, endogenous: endo, monotone: false, max_depth: 3 });
        let m = Model::from_json(&json).unwrap();
        let full = run(&m, Path::General, true);
        for path in [Path::Optimisation, Path::General, Path::Auto] {
            let opts = AttributeOptions { max_causes: keep, max_solver_causes: keep, path, ..Default::default() };
            let short = attribute_with(&m, &[], &opts).unwrap();
            prop_assert_eq!(&short.responsibility, &full.responsibility, "{:?} {}", path, json);
            prop_assert_eq!(short.causes_complete, short.causes.len() == full.causes.len(), "{:?} {}", path, json);
            for c in &short.causes {
                prop_assert!(full.causes.iter().any(|f| f.vars == c.vars && f.grade == c.grade), "{:?} listed a non-cause {:?}", path, c);
            }
        }
    }

    #[test]
    fn check_agrees_with_the_attribution(seed in any::<u64>(), exo in 1usize..5, endo in 0usize..6, pick in any::<prop::sample::Index>()) {
        let json = random_model(seed, Shape { exogenous: exo, endogenous: endo, monotone: false, max_depth: 2 });
        let m = Model::from_json(&json).unwrap();
        let om = OracleModel::from_json(&json).unwrap();
        let all = run(&m, Path::General, false);
        // Every listed cause checks as a cause with a witness of the same size.
        for c in &all.causes {
            let x: Vec<_> = c.vars.iter().map(|v| (m.var(v).unwrap(), m.evaluate(&[])[m.var(v).unwrap().index()])).collect();
            let opts = AttributeOptions { contract: false, ..Default::default() };
            let chk = check_cause(&m, &x, None, &opts, &NoDeadline).unwrap();
            prop_assert!(chk.is_cause, "{:?}\n{}", c, json);
            prop_assert_eq!(chk.witness.as_ref().map(Vec::len), Some(c.witness.len()));
            prop_assert_eq!(chk.grade, Some(c.grade));
        }
        // An arbitrary set of candidates is a cause iff the attribution lists it.
        let cands: Vec<_> = m.variables().filter(|v| v.candidate).map(|v| v.name).collect();
        if !cands.is_empty() && all.outcome {
            let n = cands.len();
            let mask = pick.index((1usize << n.min(10)) - 1) + 1;
            let set: Vec<String> = (0..n.min(10)).filter(|i| mask >> i & 1 == 1).map(|i| cands[i].clone()).collect();
            let actual = m.evaluate(&[]);
            let x: Vec<_> = set.iter().map(|v| { let id = m.var(v).unwrap(); (id, actual[id.index()]) }).collect();
            let opts = AttributeOptions { contract: false, ..Default::default() };
            let chk = check_cause(&m, &x, None, &opts, &NoDeadline).unwrap();
            let mut sorted = set.clone();
            sorted.sort();
            let listed = all.causes.iter().any(|c| c.vars == sorted);
            prop_assert_eq!(chk.is_cause, listed, "{:?}\n{}", set, json);
            if let Some(w) = &chk.witness {
                prop_assert!(brute::check_witness(&om, &sorted, w).unwrap());
            }
        }
    }
}

/// A long chain of relays: 100k minimal causes (one per link).
fn relay_chain(n: usize) -> Model {
    let mut b = ModelBuilder::new().exogenous("m0", Some("planner"), true, true);
    for i in 1..n {
        b = b.endogenous(
            format!("m{i}"),
            Some(&format!("relay-{}", i % 7)),
            format!("m{}", i - 1),
            true,
        );
    }
    b.outcome(format!("m{}", n - 1)).build().unwrap()
}

#[test]
fn a_chain_with_100k_minimal_causes_answers_with_a_shortened_list() {
    // Regression (issue 10): failed with "more than 1048576 minimal causes".
    let m = relay_chain(100_000);
    let t = std::time::Instant::now();
    let a = audita_causal::attribute(&m).unwrap();
    assert!(!a.causes_complete);
    assert_eq!(a.causes.len(), AttributeOptions::default().max_causes);
    assert!(
        a.responsibility.values().all(|&r| r == 1.0),
        "{:?}",
        a.responsibility
    );
    assert!(a.to_json().contains("\"causes_complete\":false"));
    assert!(t.elapsed().as_secs_f64() < 20.0, "{:?}", t.elapsed());
}

#[test]
fn a_disjunction_of_100k_variables_stays_small() {
    // Regression (issue 10): the cut-set families held a universe-wide bitset per
    // variable (2.6 GB). One minimal cause holding every variable.
    let n = 100_000;
    let mut b = ModelBuilder::new();
    let mut names = Vec::new();
    for i in 0..n {
        b = b.exogenous(format!("m{i}"), Some(&format!("p{}", i % 10)), true, true);
        names.push(format!("m{i}"));
    }
    let m = b.outcome(names.join(" | ")).build().unwrap();
    let opts = AttributeOptions {
        max_memory_bytes: 256 << 20,
        ..Default::default()
    };
    let a = attribute_with(&m, &[], &opts).unwrap();
    assert_eq!(a.causes.len(), 1);
    assert_eq!(a.causes[0].vars.len(), n);
    assert_eq!(a.responsibility_of("p3"), 1.0 / n as f64);
}

/// A random non-monotone model of `k` variables in the style of the benchmark.
fn nonmono(k: usize, seed: u64) -> Model {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut b = ModelBuilder::new();
    let mut names: Vec<String> = Vec::new();
    let n_exo = k.div_ceil(2);
    for i in 0..n_exo {
        let name = format!("m{i}");
        b = b.exogenous(
            name.clone(),
            Some(&format!("p{}", i % 5)),
            rng.gen_bool(0.7),
            true,
        );
        names.push(name);
    }
    let lit = |rng: &mut rand_chacha::ChaCha8Rng, v: &str| {
        if rng.gen_bool(0.3) {
            format!("!{v}")
        } else {
            v.to_string()
        }
    };
    for i in 0..(k - n_exo) {
        let w = rng.gen_range(2..=3);
        let ops: Vec<String> = (0..w)
            .map(|_| {
                let v = names[rng.gen_range(0..names.len())].clone();
                lit(&mut rng, &v)
            })
            .collect();
        let op = if rng.gen_bool(0.5) { " & " } else { " | " };
        let name = format!("r{i}");
        b = b.endogenous(
            name.clone(),
            Some(&format!("p{}", i % 5)),
            ops.join(op),
            true,
        );
        names.push(name);
    }
    let picks: Vec<String> = (0..6)
        .map(|_| {
            let v = names[rng.gen_range(names.len() / 2..names.len())].clone();
            lit(&mut rng, &v)
        })
        .collect();
    b.outcome(format!(
        "({} | {}) & ({} | {}) & ({} | {})",
        picks[0], picks[1], picks[2], picks[3], picks[4], picks[5]
    ))
    .build()
    .unwrap()
}

#[test]
fn a_40_variable_non_monotone_model_answers_within_seconds() {
    // Regression (issue 10): ran 321 s before its budget error on the general path.
    for seed in 0..5 {
        let m = nonmono(40, 7000 * 40 + seed);
        let t = std::time::Instant::now();
        let a = audita_causal::attribute(&m).unwrap();
        assert!(
            t.elapsed().as_secs_f64() < 10.0,
            "seed {seed}: {:?}",
            t.elapsed()
        );
        let g = attribute_with(
            &m,
            &[],
            &AttributeOptions {
                path: Path::Optimisation,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(a.responsibility, g.responsibility);
    }
}

#[test]
fn every_bound_is_a_named_error() {
    let m = nonmono(60, 11);
    let opts = AttributeOptions {
        path: Path::Optimisation,
        ..Default::default()
    };
    // A deadline that has already passed.
    let e = attribute_until(&m, &[], &opts, &|| true).unwrap_err();
    assert!(matches!(e, AttributeError::DeadlineExceeded(_)), "{e}");
    assert!(e.to_string().contains("--timeout-ms"), "{e}");
    // No solver steps.
    let e = attribute_with(
        &m,
        &[],
        &AttributeOptions {
            max_solver_steps: 0,
            ..opts
        },
    )
    .unwrap_err();
    assert!(matches!(e, AttributeError::SolverBudgetExhausted(0)), "{e}");
    assert!(e.to_string().contains("--max-solver-steps"), "{e}");
    // No memory.
    let e = attribute_with(
        &m,
        &[],
        &AttributeOptions {
            max_memory_bytes: 1024,
            ..opts
        },
    )
    .unwrap_err();
    assert!(matches!(e, AttributeError::MemoryBound(1024)), "{e}");
    assert!(e.to_string().contains("--max-memory-mb"), "{e}");
    // The forced general search with a tiny budget.
    let e = attribute_with(
        &m,
        &[],
        &AttributeOptions {
            path: Path::General,
            max_evaluations: 10,
            ..opts
        },
    )
    .unwrap_err();
    assert!(matches!(e, AttributeError::BudgetExhausted(10)), "{e}");
    assert!(e.to_string().contains("--max-evaluations"), "{e}");
    assert!(e.is_bound());
}

#[test]
fn answers_that_finish_are_deterministic() {
    let m = nonmono(64, 3);
    let a = audita_causal::attribute(&m).unwrap().to_json();
    let b = audita_causal::attribute(&m).unwrap().to_json();
    assert_eq!(a, b);
}
