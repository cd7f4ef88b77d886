//! The engine against the independent oracle on random models: the brute force of the
//! modified HP definition (all models) and the analytic oracle (monotone models).

use crate::common;

use audita_causal::{attribute_with, AttributeOptions, Attribution, Model, Path};
use audita_oracle::{analytic, brute, OracleModel, OracleReport};
use common::{random_model, Shape};
use proptest::prelude::*;

fn engine(json: &str, path: Path) -> Attribution {
    let m = Model::from_json(json).unwrap_or_else(|e| panic!("{e}\n{json}"));
    let opts = AttributeOptions {
        contract: false,
        path,
        ..Default::default()
    };
    attribute_with(&m, &[], &opts).unwrap()
}

fn same(json: &str, got: &Attribution, want: &OracleReport, om: &OracleModel) {
    assert_eq!(got.outcome, want.outcome, "outcome\n{json}");
    let g: Vec<(Vec<String>, usize)> = got
        .causes
        .iter()
        .map(|c| (c.vars.clone(), c.witness.len()))
        .collect();
    let w: Vec<(Vec<String>, usize)> = want
        .causes
        .iter()
        .map(|c| (c.vars.clone(), c.witness.len()))
        .collect();
    assert_eq!(g, w, "causes (vars, |W|)\n{json}\n{}", got.to_json());
    for c in &got.causes {
        assert!(
            brute::check_witness(om, &c.vars, &c.witness).unwrap(),
            "witness fails AC2: {c:?}\n{json}"
        );
        assert_eq!(c.grade, 1.0 / (c.vars.len() + c.witness.len()) as f64);
    }
    assert_eq!(got.responsibility, want.responsibility, "rho\n{json}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn general_path_matches_brute_force(seed in any::<u64>(), exo in 1usize..5, endo in 0usize..5) {
        let json = random_model(seed, Shape { exogenous: exo, endogenous: endo, monotone: false, max_depth: 2 });
        let om = OracleModel::from_json(&json).unwrap();
        let want = brute::attribute(&om).unwrap();
        same(&json, &engine(&json, Path::Auto), &want, &om);
        same(&json, &engine(&json, Path::General), &want, &om);
    }

    #[test]
    fn deeper_models_match_brute_force(seed in any::<u64>(), exo in 2usize..5, endo in 3usize..7) {
        let json = random_model(seed, Shape { exogenous: exo, endogenous: endo, monotone: false, max_depth: 3 });
        let om = OracleModel::from_json(&json).unwrap();
        let want = brute::attribute(&om).unwrap();
        same(&json, &engine(&json, Path::Auto), &want, &om);
    }

    #[test]
    fn monotone_path_matches_analytic_and_brute(seed in any::<u64>(), exo in 1usize..6, endo in 0usize..5) {
        let json = random_model(seed, Shape { exogenous: exo, endogenous: endo, monotone: true, max_depth: 2 });
        let om = OracleModel::from_json(&json).unwrap();
        let want = brute::attribute(&om).unwrap();
        let analytic = analytic::attribute(&om).unwrap();
        prop_assert_eq!(&analytic, &want, "analytic vs brute\n{}", json);
        let m = Model::from_json(&json).unwrap();
        prop_assert!(m.is_monotone());
        same(&json, &engine(&json, Path::Monotone), &want, &om);
        same(&json, &engine(&json, Path::General), &want, &om);
    }
}
