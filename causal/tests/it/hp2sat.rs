//! Head to head with HP2SAT (Ibrahim, Rehwald, Pretschner 2019): its benchmark models,
//! translated into SPEC §7 by `benchmarks/hp2sat/translate.py`, and every single-cause
//! query of its test suite with the answer HP2SAT expects (AC1, AC2, AC3, a witness).
//! The engine's `check_cause` must agree on AC1–AC3; where HP2SAT gives a witness, the
//! engine's is no larger and is re-checked against the independent oracle.

use std::path::PathBuf;

use audita_causal::{check_cause, AttributeOptions, Model, NoDeadline};
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
