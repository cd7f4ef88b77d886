//! Head to head with HP2SAT (Ibrahim, Rehwald, Pretschner 2019): its benchmark models,
//! translated into SPEC §7 by `benchmarks/hp2sat/translate.py`, and every single-cause
//! query of its test suite with the answer HP2SAT expects (AC1, AC2, AC3, a witness).
//! The engine's `check_cause` must agree on AC1–AC3; where HP2SAT gives a witness, the
//! engine's is no larger and is re-checked against the independent oracle.
//!
//! Beyond HP2SAT's queries: ρ for every principal of every model, answered within the
//! default bounds in a few seconds (up to 4,103 principals), checked three ways: the
//! closed form on the binary trees, the optimisation path on the whole model (no
//! decomposition) where it runs in about a second, and per-principal `check_cause`
//! queries on a sample of principals of every model.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use audita_causal::{
    attribute_until, attribute_with, check_cause, AttributeOptions, Attribution, Model, NoDeadline,
    Path,
};
use audita_oracle::{brute, OracleModel};
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../benchmarks/hp2sat")
}

/// The model of a query: its context as exogenous values and its effect as outcome.
fn model_json(q: &Value) -> String {
    let name = q["model"].as_str().unwrap();
    let text = std::fs::read_to_string(root().join(format!("models/{name}.json"))).unwrap();
    let mut doc: Value = serde_json::from_str(&text).unwrap();
    for (k, v) in q["context"].as_object().unwrap() {
        doc["variables"][k]["value"] = v.clone();
    }
    doc["outcome"] = q["phi"].clone();
    doc.to_string()
}

#[test]
fn every_hp2sat_query_gets_hp2sat_s_answer() {
    let text = std::fs::read_to_string(root().join("queries.json")).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    let queries = doc["queries"].as_array().unwrap();
    assert!(queries.len() > 100, "{}", queries.len());
    let opts = AttributeOptions {
        contract: false,
        ..Default::default()
    };
    let mut smaller_witness = Vec::new();
    let mut disagree = Vec::new();
    for q in queries {
        let test = q["test"].as_str().unwrap();
        let json = model_json(q);
        let m = Model::from_json(&json).unwrap_or_else(|e| panic!("{test}: {e}"));
        let cause: Vec<_> = q["cause"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (m.var(k).unwrap(), v.as_bool().unwrap()))
            .collect();
        let chk = check_cause(&m, &cause, None, &opts, &NoDeadline).unwrap();
        let e = &q["expected"];
        let theirs = (
            e["ac1"].as_bool().unwrap(),
            e["ac2"].as_bool().unwrap(),
            e["ac3"].as_bool().unwrap(),
        );
        if (chk.ac1, chk.ac2, chk.ac3) != theirs {
            disagree.push(format!(
                "{test} (ignored upstream: {}): ours {:?}, HP2SAT {theirs:?}, witness {:?}",
                q["ignored_upstream"],
                (chk.ac1, chk.ac2, chk.ac3),
                chk.witness
            ));
            continue;
        }
        if let (Some(ours), Some(theirs)) = (&chk.witness, e["witness"].as_object()) {
            assert!(ours.len() <= theirs.len(), "{test}: {ours:?} vs {theirs:?}");
            if ours.len() < theirs.len() {
                smaller_witness.push(test.to_string());
            }
            // The oracle re-checks witnesses of causes at their actual values.
            if chk.ac1 && m.len() <= 400 {
                let om = OracleModel::from_json(&json).unwrap();
                let mut xs: Vec<String> = q["cause"].as_object().unwrap().keys().cloned().collect();
                xs.sort();
                assert!(
                    brute::check_witness(&om, &xs, ours).unwrap(),
                    "{test}: {ours:?}"
                );
            }
        }
    }
    // HP2SAT's listed witnesses are minimal wherever its suite says so; record the rest.
    eprintln!("queries where the engine's witness is smaller: {smaller_witness:?}");
    for d in &disagree {
        eprintln!("disagreement: {d}");
    }
    // One expectation of HP2SAT's suite is wrong, and the test holding it is @Ignore'd
    // upstream: it claims AC3 fails for a single-variable cause, but a singleton has no
    // nonempty strict subset, so AC3 holds by definition. Both tools find the same
    // witness {B, E, G, H}.
    const KNOWN: &[&str] = &["Should_FulfillAC1AC2Only_When_L4094_IsCauseFor_F_Given_4094Exo_BExo"];
    let unexplained: Vec<&String> = disagree
        .iter()
        .filter(|d| !KNOWN.iter().any(|k| d.starts_with(&format!("{k} "))))
        .collect();
    assert!(unexplained.is_empty(), "{unexplained:?}");
    assert_eq!(disagree.len(), KNOWN.len(), "{disagree:?}");
}

fn models() -> Vec<(String, Model)> {
    let mut out: Vec<(String, Model)> = std::fs::read_dir(root().join("models"))
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&path).unwrap();
            (name, Model::from_json(&text).unwrap())
        })
        .collect();
    out.sort_by_key(|(n, m)| (m.len(), n.clone()));
    out
}

/// ρ of every principal with the default options and the CLI's default deadline.
fn rho_for_all(name: &str, m: &Model) -> (Attribution, Duration) {
    let start = Instant::now();
    let limit = Duration::from_secs(10);
    let deadline = move || start.elapsed() >= limit;
    let a = attribute_until(m, &[], &AttributeOptions::default(), &deadline)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    (a, start.elapsed())
}

/// Every listed best cause of a sample of principals checks as a cause of that grade
/// (`--check`), and a principal with ρ = 0 is no cause on its own.
fn check_sample(name: &str, m: &Model, a: &Attribution, sample: usize) {
    let actual = m.evaluate(&[]);
    let principals = m.principals();
    let step = (principals.len() / sample).max(1);
    for p in principals.iter().step_by(step) {
        let rho = a.responsibility_of(p);
        let opts = AttributeOptions::default();
        match a.best_cause_of(p) {
            Some(c) => {
                assert_eq!(c.grade, rho, "{name}: {p}");
                let x: Vec<_> = c
                    .vars
                    .iter()
                    .map(|v| {
                        let id = m.var(v).unwrap();
                        (id, actual[id.index()])
                    })
                    .collect();
                let chk = check_cause(m, &x, None, &opts, &NoDeadline).unwrap();
                assert!(chk.is_cause, "{name}: best cause of {p} {c:?}: {chk:?}");
                assert_eq!(chk.grade, Some(rho), "{name}: {p} {c:?}");
            }
            None => {
                assert_eq!(rho, 0.0, "{name}: {p}");
                for v in m.variables().filter(|v| v.principal.as_deref() == Some(p)) {
                    let id = m.var(&v.name).unwrap();
                    let chk = check_cause(m, &[(id, actual[id.index()])], None, &opts, &NoDeadline)
                        .unwrap();
                    assert!(
                        !chk.is_cause,
                        "{name}: {p} has ρ = 0 but {} is a cause",
                        v.name
                    );
                }
            }
        }
    }
}

#[test]
fn rho_for_every_principal_of_every_hp2sat_model() {
    // The scale test: every model within the CLI's default deadline, the largest
    // (4,095 and 4,103 principals) within a few seconds even on a loaded CI machine.
    for (name, m) in models() {
        let (a, took) = rho_for_all(&name, &m);
        assert_eq!(a.responsibility.len(), m.principals().len(), "{name}");
        assert!(took < Duration::from_secs(5), "{name}: {took:?}");
        check_sample(&name, &m, &a, 12);
    }
}

#[test]
fn binary_trees_give_every_node_one_over_its_depth_plus_one() {
    // A node at depth d of an OR tree of true leaves: its cheapest minimal cut holds it
    // and one sibling per level above it, so ρ = 1/(d+1), for all 4,095 nodes.
    for (name, m) in models() {
        if !name.starts_with("binary_tree_") {
            continue;
        }
        let (a, _) = rho_for_all(&name, &m);
        for (p, &rho) in &a.responsibility {
            let i: u64 = p.trim_start_matches('n').parse().unwrap();
            let depth = 63 - (i + 1).leading_zeros() as u64;
            assert_eq!(rho, 1.0 / (depth + 1) as f64, "{name}: {p}");
        }
    }
}

#[test]
fn dummy_on_a_binary_tree_adds_the_dummy_s_witness_to_every_tree_node() {
    // F = C | D | E | G | H over A = n0 (the root of a depth-11 OR tree), B = B_exo & !A,
    // C = A | B, D = A, E = !A, G = !C, H = !C & !G. Flipping A (or cutting the tree
    // below it) needs W = {B, E, G, H}: B would restore C, and E, G, H would rise. So a
    // tree node at depth d has ρ = 1/(d + 1 + 4), A has 1/5; {C, D} with W = {G, H}
    // gives C and D 1/4; F is a cause alone; B, E, G, H are actually false and no flip
    // of theirs falsifies F.
    let (name, m) = models()
        .into_iter()
        .find(|(n, _)| n == "dummy_combined_with_binary_tree")
        .unwrap();
    let (a, _) = rho_for_all(&name, &m);
    for (p, &rho) in &a.responsibility {
        let want = match p.as_str() {
            "F" => 1.0,
            "C" | "D" => 0.25,
            "A" => 0.2,
            "B" | "E" | "G" | "H" => 0.0,
            node => {
                let i: u64 = node.trim_start_matches('n').parse().unwrap();
                let depth = 63 - (i + 1).leading_zeros() as u64;
                1.0 / (depth + 5) as f64
            }
        };
        assert_eq!(rho, want, "{p}");
    }
}

#[test]
fn the_modular_path_agrees_with_the_whole_model_on_the_solver() {
    // The optimisation path without decomposition (one solver over the whole model) as
    // the reference, on every model where it answers in about a second.
    for (name, m) in models() {
        if m.len() > 900 || ["binary_tree_7", "binary_tree_8"].contains(&name.as_str()) {
            continue;
        }
        let (auto, _) = rho_for_all(&name, &m);
        for path in [Path::Optimisation, Path::Modular] {
            let opts = AttributeOptions {
                path,
                ..Default::default()
            };
            let other = attribute_with(&m, &[], &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(
                auto.responsibility, other.responsibility,
                "{name}: {path:?}"
            );
        }
    }
}
