//! Golden tests: classic actual-causality cases and the SPEC §5 families at model
//! level. Each `golden/NAME.json` model has its engine output in
//! `golden/NAME.expected.json` (refresh with `UPDATE_GOLDEN=1`). The expected files are
//! not trusted on their own: every model is also checked against the independent
//! brute-force oracle, and the ρ profiles below were derived by hand.

use std::path::PathBuf;

use audita_causal::{attribute, attribute_with, AttributeOptions, Model, Path};
use audita_oracle::{brute, OracleModel};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// Runs the engine on `golden/NAME.json` and compares with the expected file.
fn check(name: &str) -> audita_causal::Attribution {
    let input = std::fs::read_to_string(dir().join(format!("{name}.json"))).unwrap();
    let model = Model::from_json(&input).unwrap_or_else(|e| panic!("{name}: {e}"));
    let att = attribute(&model).unwrap();
    let got = serde_json::to_string_pretty(&att).unwrap() + "\n";
    let path = dir().join(format!("{name}.expected.json"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &got).unwrap();
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("{name}: no expected file (run with UPDATE_GOLDEN=1)"));
    assert_eq!(got, want, "{name}: output differs from {}", path.display());
    att
}

/// Hand-derived ρ profiles and cause counts.
/// (model, number of causes, ρ per principal).
type Hand = (&'static str, usize, &'static [(&'static str, f64)]);

const HAND: &[Hand] = &[
    // Suzy's throw is a cause only with witness {billy_hits} frozen: grade 1/2.
    ("late_preemption", 1, &[("suzy", 0.5), ("billy", 0.0)]),
    // Billy's firing prevents the preventer: a but-for cause, as is Suzy's going.
    ("double_prevention", 2, &[("suzy", 1.0), ("billy", 1.0)]),
    // Unanimous 3-0 majority: every pair is a minimal cause.
    (
        "voting_3_0",
        3,
        &[("voter-1", 0.5), ("voter-2", 0.5), ("voter-3", 0.5)],
    ),
    // 3-2 vote: each yes voter is pivotal, no voter is involved.
    (
        "voting_3_2",
        3,
        &[
            ("voter-1", 1.0),
            ("voter-2", 1.0),
            ("voter-3", 1.0),
            ("voter-4", 0.0),
            ("voter-5", 0.0),
        ],
    ),
    // Bogus prevention: only the conjunction (no poison, antidote) is a cause.
    (
        "bogus_prevention",
        1,
        &[("assassin", 0.5), ("bodyguard", 0.5)],
    ),
    (
        "overdetermination",
        1,
        &[("shooter-a", 0.5), ("shooter-b", 0.5)],
    ),
    ("forest_fire_conjunctive", 2, &[("arsonist", 1.0)]),
    ("forest_fire_disjunctive", 1, &[("arsonist", 0.5)]),
    (
        "family_redundancy",
        1,
        &[("planner-1", 0.5), ("planner-2", 0.5), ("controller", 0.0)],
    ),
    (
        "family_inert_twin",
        1,
        &[("planner-1", 1.0), ("planner-2", 0.0), ("controller", 0.0)],
    ),
    (
        "family_preemption",
        1,
        &[("planner-a", 0.0), ("planner-b", 1.0), ("supervisor", 0.0)],
    ),
    (
        "family_omission",
        2,
        &[("dispatcher", 1.0), ("supervisor", 1.0)],
    ),
    (
        "family_delegation_chain",
        3,
        &[("planner", 1.0), ("relay", 1.0), ("executor", 1.0)],
    ),
    (
        "family_unexpected_startup",
        2,
        &[("controller", 1.0), ("supervisor", 1.0)],
    ),
    ("family_trivial", 1, &[("planner", 1.0)]),
    ("family_no_cause", 0, &[("planner", 0.0), ("checker", 0.0)]),
    (
        "rechunk_single",
        3,
        &[("driver", 1.0), ("supervisor", 1.0), ("planner", 1.0)],
    ),
    // Contracted: {m_halt.*} counts once, each route chunk is its own cause.
    (
        "rechunk_split",
        4,
        &[("driver", 1.0), ("supervisor", 1.0), ("planner", 1.0)],
    ),
    // The quake holds, so the outcome is false: no causes.
    (
        "spec_example",
        0,
        &[("planner-1", 0.0), ("planner-2", 0.0), ("dispatcher", 0.0)],
    ),
    ("xor_switch", 2, &[("alice", 1.0), ("bob", 1.0)]),
];

#[test]
fn golden_outputs_and_hand_profiles() {
    let mut files: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().into_string().unwrap();
            n.strip_suffix(".json")
                .filter(|s| !s.ends_with(".expected"))
                .map(String::from)
        })
        .collect();
    files.sort();
    let mut hand: Vec<&str> = HAND.iter().map(|h| h.0).collect();
    hand.sort();
    assert_eq!(files, hand, "every golden model needs a hand profile");
    for (name, n_causes, profile) in HAND {
        let att = check(name);
        assert_eq!(
            att.causes.len(),
            *n_causes,
            "{name}: number of causes\n{}",
            att.to_json()
        );
        for (p, rho) in *profile {
            assert_eq!(att.responsibility.get(*p), Some(rho), "{name}: rho of {p}");
        }
        assert_eq!(
            att.responsibility.len(),
            profile.len(),
            "{name}: principals listed"
        );
    }
}

#[test]
fn golden_models_agree_with_brute_force_oracle() {
    for (name, _, _) in HAND {
        let input = std::fs::read_to_string(dir().join(format!("{name}.json"))).unwrap();
        let model = Model::from_json(&input).unwrap();
        let plain = attribute_with(
            &model,
            &[],
            &AttributeOptions {
                contract: false,
                ..Default::default()
            },
        )
        .unwrap();
        let general = attribute_with(
            &model,
            &[],
            &AttributeOptions {
                contract: false,
                path: Path::General,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(
            plain.to_json(),
            general.to_json(),
            "{name}: monotone and general paths differ"
        );
        let om = OracleModel::from_json(&input).unwrap();
        let want = brute::attribute(&om).unwrap();
        let got: Vec<(Vec<String>, usize)> = plain
            .causes
            .iter()
            .map(|c| (c.vars.clone(), c.witness.len()))
            .collect();
        let exp: Vec<(Vec<String>, usize)> = want
            .causes
            .iter()
            .map(|c| (c.vars.clone(), c.witness.len()))
            .collect();
        assert_eq!(got, exp, "{name}: causes differ from brute force");
        assert_eq!(plain.responsibility, want.responsibility, "{name}");
    }
}

#[test]
fn rechunking_changes_no_grade() {
    let single = check("rechunk_single");
    let split = check("rechunk_split");
    assert_eq!(single.responsibility, split.responsibility);
    // Without contraction the split halt dilutes the supervisor to 1/3.
    let input = std::fs::read_to_string(dir().join("rechunk_split.json")).unwrap();
    let model = Model::from_json(&input).unwrap();
    let plain = attribute_with(
        &model,
        &[],
        &AttributeOptions {
            contract: false,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(plain.responsibility_of("supervisor"), 1.0 / 3.0);
}

#[test]
fn accessors_group_causes_by_principal() {
    let att = check("family_redundancy");
    let cause = &att.causes[0];
    assert_eq!(att.principals_of(cause), vec!["planner-1", "planner-2"]);
    assert_eq!(att.causes_of("planner-1").count(), 1);
    assert_eq!(att.causes_of("controller").count(), 0);
    assert_eq!(att.best_cause_of("planner-2").map(|c| c.grade), Some(0.5));
    assert_eq!(att.exonerated().collect::<Vec<_>>(), vec!["controller"]);
    assert!(att.is_cause_member("m_speed_p1"));
    assert!(!att.is_cause_member("agv_fast"));
}
