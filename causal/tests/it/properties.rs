//! Property tests of the engine's guarantees: granularity (dilution) invariance,
//! determinism, overrides, and totality on malformed input.

use crate::common;

use audita_causal::{
    attribute, attribute_with, AttributeOptions, Expr, Mechanism, Model, ModelBuilder,
};
use common::{random_model, Shape};
use proptest::prelude::*;

/// Rebuilds `model` with variable `target` split into `k` same-author chunks that every
/// mechanism reads through their conjunction.
fn rechunk(model: &Model, target: &str, k: usize) -> Model {
    fn subst(e: &Expr, target: &str, k: usize) -> Expr {
        match e {
            Expr::Var(v) if v == target => Expr::And(
                (1..=k)
                    .map(|i| Expr::var(format!("{target}.chunk{i}")))
                    .collect(),
            ),
            Expr::Var(_) | Expr::Const(_) => e.clone(),
            Expr::Not(x) => Expr::Not(Box::new(subst(x, target, k))),
            Expr::And(xs) => Expr::And(xs.iter().map(|x| subst(x, target, k)).collect()),
            Expr::Or(xs) => Expr::Or(xs.iter().map(|x| subst(x, target, k)).collect()),
        }
    }
    let mut b = ModelBuilder::new();
    // Declare in reverse order on purpose: declaration order must not matter.
    let vars: Vec<_> = model.variables().collect();
    for v in vars.iter().rev() {
        let p = v.principal.as_deref();
        match &v.mechanism {
            Mechanism::Value(val) if v.name == target => {
                for i in 1..=k {
                    b = b.exogenous(format!("{target}.chunk{i}"), p, *val, v.candidate);
                }
            }
            Mechanism::Value(val) => b = b.exogenous(v.name.clone(), p, *val, v.candidate),
            Mechanism::Eq(e) => {
                b = b.endogenous(v.name.clone(), p, subst(e, target, k), v.candidate)
            }
        }
    }
    b.outcome(subst(model.outcome(), target, k))
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn rechunking_a_message_changes_no_grade(seed in any::<u64>(), mono in any::<bool>(), exo in 1usize..5, endo in 0usize..5, k in 2usize..4, pick in any::<prop::sample::Index>()) {
        let json = random_model(seed, Shape { exogenous: exo, endogenous: endo, monotone: mono, max_depth: 2 });
        let model = Model::from_json(&json).unwrap();
        let owned: Vec<String> = model.variables()
            .filter(|v| v.principal.is_some() && matches!(v.mechanism, Mechanism::Value(_)))
            .map(|v| v.name).collect();
        if owned.is_empty() {
            // Nothing owned to re-chunk (all environment or endogenous).
            return Ok(());
        }
        let target = &owned[pick.index(owned.len())];
        let split = rechunk(&model, target, k);
        let a = attribute(&model).unwrap();
        let b = attribute(&split).unwrap();
        prop_assert_eq!(&a.responsibility, &b.responsibility, "target {} in\n{}\n{}\n{}", target, json, a.to_json(), b.to_json());
        prop_assert_eq!(a.outcome, b.outcome);
    }

    #[test]
    fn output_is_deterministic_and_order_free(seed in any::<u64>(), exo in 1usize..5, endo in 0usize..5) {
        let json = random_model(seed, Shape { exogenous: exo, endogenous: endo, monotone: false, max_depth: 2 });
        let model = Model::from_json(&json).unwrap();
        let once = attribute(&model).unwrap().to_json();
        prop_assert_eq!(&once, &attribute(&model).unwrap().to_json());
        // Same model declared in reverse order through the builder.
        let mut b = ModelBuilder::new();
        for v in model.variables().collect::<Vec<_>>().into_iter().rev() {
            b = match v.mechanism {
                Mechanism::Value(x) => b.exogenous(v.name, v.principal.as_deref(), x, v.candidate),
                Mechanism::Eq(e) => b.endogenous(v.name, v.principal.as_deref(), e, v.candidate),
            };
        }
        let rebuilt = b.outcome(model.outcome()).build().unwrap();
        prop_assert_eq!(once, attribute(&rebuilt).unwrap().to_json());
    }

    #[test]
    fn overrides_equal_rebuilt_models(seed in any::<u64>(), exo in 1usize..6, endo in 0usize..5, flips in any::<u64>()) {
        let json = random_model(seed, Shape { exogenous: exo, endogenous: endo, monotone: false, max_depth: 2 });
        let model = Model::from_json(&json).unwrap();
        let mut overrides = Vec::new();
        let mut b = ModelBuilder::new();
        for (i, v) in model.variables().enumerate() {
            b = match v.mechanism {
                Mechanism::Value(x) => {
                    let y = if flips >> i & 1 == 1 { !x } else { x };
                    overrides.push((model.var(&v.name).unwrap(), y));
                    b.exogenous(v.name, v.principal.as_deref(), y, v.candidate)
                }
                Mechanism::Eq(e) => b.endogenous(v.name, v.principal.as_deref(), e, v.candidate),
            };
        }
        let rebuilt = b.outcome(model.outcome()).build().unwrap();
        let via_overrides = attribute_with(&model, &overrides, &AttributeOptions::default()).unwrap();
        prop_assert_eq!(via_overrides.to_json(), attribute(&rebuilt).unwrap().to_json());
    }

    #[test]
    fn arbitrary_text_never_panics(text in ".{0,200}") {
        let _ = Model::from_json(&text);
    }

    #[test]
    fn mutated_models_never_panic(seed in any::<u64>(), cut in any::<prop::sample::Index>(), junk in "[a-z!&|() {}\":,]{0,8}") {
        let json = random_model(seed, Shape { exogenous: 3, endogenous: 3, monotone: false, max_depth: 2 });
        let mut at = cut.index(json.len());
        while !json.is_char_boundary(at) { at -= 1; }
        let broken = format!("{}{}{}", &json[..at], junk, &json[at..]);
        if let Ok(m) = Model::from_json(&broken) {
            let _ = attribute(&m);
        }
    }
}

#[test]
fn overriding_an_endogenous_variable_is_an_error() {
    let m = Model::from_json(
        r#"{"variables": {"a": {"value": true}, "b": {"eq": "a"}}, "outcome": "b"}"#,
    )
    .unwrap();
    let b = m.var("b").unwrap();
    let err = attribute_with(&m, &[(b, false)], &AttributeOptions::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "variable `b` is endogenous; only exogenous values can be overridden"
    );
}

#[test]
fn conjunction_of_disjunctions_has_few_causes() {
    // 16 disjunctions of width 4: 4^16 prime implicants, 16 minimal causes of size 4.
    let mut b = ModelBuilder::new();
    let mut clauses = Vec::new();
    for i in 0..16 {
        let mut lits = Vec::new();
        for j in 0..4 {
            let name = format!("m{i}_{j}");
            b = b.exogenous(name.clone(), Some(&format!("p{j}")), true, true);
            lits.push(name);
        }
        clauses.push(format!("({})", lits.join(" | ")));
    }
    let m = b.outcome(clauses.join(" & ")).build().unwrap();
    assert!(m.is_monotone());
    let t = std::time::Instant::now();
    let a = attribute(&m).unwrap();
    assert!(t.elapsed().as_secs_f64() < 1.0);
    assert_eq!(a.causes.len(), 16);
    assert!(a
        .causes
        .iter()
        .all(|c| c.vars.len() == 4 && c.grade == 0.25));
    assert_eq!(a.responsibility_of("p0"), 0.25);
}

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
fn long_relay_chains_are_linear_not_quadratic() {
    // Regression: every link cloned its predecessor's cut sets (quadratic time and
    // memory; a 100k chain exhausted memory).
    let m = relay_chain(5000);
    let t = std::time::Instant::now();
    let a = attribute(&m).unwrap();
    assert_eq!(a.causes.len(), 5000);
    assert!(a.causes.iter().all(|c| c.vars.len() == 1 && c.grade == 1.0));
    assert!(t.elapsed().as_secs_f64() < 10.0, "{:?}", t.elapsed());
}
