//! The static-log attributor on the vendored Who&When Algorithm-Generated subset and
//! on the shared development half of the Hand-Crafted (Magentic-One) subset, scored
//! with the benchmark's rules beside every label-free floor: the figures
//! BENCHMARKS.md reports (Algorithm-Generated: development half, held-out half and the
//! whole subset; Hand-Crafted: the development half, the other half being scored from
//! outside).

use audita_traces::whowhen::{
    attribute, floor_first_worker, is_development, parse_whowhen, score, Limits, Tally,
};

fn dir() -> String {
    format!(
        "{}/testdata/whowhen/Algorithm-Generated",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// (development, held-out) tallies of a predictor over the 126 files.
fn tallies(
    predict: impl Fn(&[audita_traces::whowhen::Turn]) -> Option<(String, usize)>,
) -> (Tally, Tally) {
    let (mut dev, mut held) = (Tally::default(), Tally::default());
    for i in 1..=126 {
        let name = format!("{i}.json");
        let bytes = std::fs::read(format!("{}/{name}", dir())).unwrap();
        let c = parse_whowhen(&bytes, &Limits::default()).unwrap();
        let label = c.label.clone().unwrap();
        let p = predict(&c.history);
        let hits = score(p.as_ref().map(|(a, s)| (a.as_str(), *s)), &label);
        if is_development(&name) {
            dev.add(hits);
        } else {
            held.add(hits);
        }
    }
    (dev, held)
}

#[test]
fn the_split_is_fixed() {
    let (dev, held) = tallies(|_| None);
    assert_eq!((dev.n, held.n), (72, 54));
}

#[test]
fn attributor_scores_on_both_halves() {
    let (dev, held) = tallies(|h| attribute(h).map(|a| (a.agent, a.step)));
    // Benchmark rule (agent substring, step digits), as in BENCHMARKS.md.
    assert_eq!((dev.agent, dev.step), (48, 34), "development half");
    assert_eq!((held.agent, held.step), (35, 21), "held-out half");
    // The held-out half alone clears the target: agent > 0.511, step > 0.34.
    assert!(held.rate(held.agent) > 0.511 && held.rate(held.step) > 0.34);
}

#[test]
fn the_readmes_floor_is_reproduced() {
    let (dev, held) = tallies(floor_first_worker);
    let agent = (dev.agent + held.agent) as f64 / 126.0;
    let step = (dev.step + held.step) as f64 / 126.0;
    // shared/whowhen/README.md: ≈ 0.49 agent / 0.25 step.
    assert!((agent - 0.49).abs() < 0.02, "{agent}");
    assert!((step - 0.25).abs() < 0.02, "{step}");
}

#[test]
fn the_attributor_never_reads_the_label() {
    // Same history, label removed or changed: same answer.
    let bytes = std::fs::read(format!("{}/7.json", dir())).unwrap();
    let mut v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let a = attribute(&parse_whowhen(&bytes, &Limits::default()).unwrap().history).unwrap();
    v["mistake_agent"] = "Nobody".into();
    v["mistake_step"] = "9".into();
    let b2 = serde_json::to_vec(&v).unwrap();
    let b = attribute(&parse_whowhen(&b2, &Limits::default()).unwrap().history).unwrap();
    assert_eq!(a, b);
}

/// A Magentic-One log of the Hand-Crafted shape (`{role, content}` entries, no
/// `name`), written here: the held-out subset itself is never read.
fn magentic_log(stall: bool) -> Vec<u8> {
    let ledger = |progress: bool| {
        serde_json::json!({
            "is_request_satisfied": {"reason": "not yet", "answer": false},
            "is_in_loop": {"reason": "", "answer": false},
            "is_progress_being_made": {"reason": "", "answer": progress},
            "next_speaker": {"reason": "", "answer": "WebSurfer"},
            "instruction_or_question": {"reason": "", "answer": "Search the price list"}
        })
        .to_string()
    };
    serde_json::json!({
        "question": "What did the cheapest plan cost in 2023?",
        "ground_truth": "12",
        "mistake_agent": "WebSurfer",
        "mistake_step": "3",
        "mistake_reason": "clicked the wrong year",
        "history": [
            {"role": "human", "content": "What did the cheapest plan cost in 2023?"},
            {"role": "Orchestrator (thought)", "content": "Initial plan:\n1. search\n2. read"},
            {"role": "Orchestrator (-> WebSurfer)", "content": "Search the 2023 price list"},
            {"role": "WebSurfer", "content": ["I typed 'price list 2022'", {"screenshot": "..."}]},
            {"role": "Orchestrator (thought)", "content": format!("Updated Ledger:\n{}", ledger(!stall))},
            {"role": "Orchestrator (-> WebSurfer)", "content": "Scroll down"},
            {"role": "WebSurfer", "content": "Scrolled"},
            {"role": "ComputerTerminal", "content": "exitcode: 0"}
        ]
    })
    .to_string()
    .into_bytes()
}

#[test]
fn magentic_one_logs_read_with_base_agents_and_score_by_the_benchmark_rules() {
    use audita_traces::whowhen::{LogFormat, TurnKind};
    let c = parse_whowhen(&magentic_log(true), &Limits::default()).unwrap();
    assert_eq!(c.format, LogFormat::MagenticOne);
    assert_eq!(c.history[0].kind, TurnKind::Human);
    assert_eq!(c.history[1].name, "Orchestrator");
    assert_eq!(c.history[2].label, "Orchestrator (-> WebSurfer)");
    assert!(
        c.history[3].content.starts_with("[\"I typed"),
        "non-string content is kept as JSON"
    );
    let a = attribute(&c.history).unwrap();
    assert_eq!((a.agent.as_str(), a.step), ("WebSurfer", 3));
    let hits = score(Some((a.agent.as_str(), a.step)), c.label.as_ref().unwrap());
    assert!(hits.agent && hits.step && hits.agent_strict && hits.step_strict);
    // Without a stall in the ledger, another rule decides, still naming a base agent.
    let c = parse_whowhen(&magentic_log(false), &Limits::default()).unwrap();
    let a = attribute(&c.history).unwrap();
    assert!(
        ["WebSurfer", "Orchestrator"].contains(&a.agent.as_str()),
        "{a:?}"
    );
    // The floors skip the human's task statement.
    assert_eq!(
        audita_traces::whowhen::floor_step_zero(&c.history),
        Some(("Orchestrator".into(), 1))
    );
    assert_eq!(
        floor_first_worker(&c.history),
        Some(("WebSurfer".into(), 3))
    );
    // By file name alone a Magentic-One file is held out (the development half is a
    // directory of its own); the Algorithm-Generated split is unchanged.
    assert!(!audita_traces::whowhen::is_development_in(
        LogFormat::MagenticOne,
        "2.json"
    ));
    assert_eq!(
        audita_traces::whowhen::is_development_in(LogFormat::AlgorithmGenerated, "2.json"),
        is_development("2.json")
    );
}

#[test]
fn every_algorithm_generated_file_reads_as_that_format() {
    for i in 1..=126 {
        let bytes = std::fs::read(format!("{}/{i}.json", dir())).unwrap();
        let c = parse_whowhen(&bytes, &Limits::default()).unwrap();
        assert_eq!(
            c.format,
            audita_traces::whowhen::LogFormat::AlgorithmGenerated,
            "{i}"
        );
        assert!(c.history.iter().all(|t| t.label == t.name), "{i}");
    }
}

/// The development half of the Hand-Crafted (Magentic-One) subset, vendored from
/// `shared/whowhen/Hand-Crafted-dev` (29 files of the benchmark, byte for byte, MIT):
/// `testdata/whowhen/Hand-Crafted-dev`. The other half is scored from outside and is
/// never read here.
fn hand_crafted_dev() -> String {
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/testdata/whowhen/Hand-Crafted-dev"
    )
    .to_string()
}

/// A predictor's tally over the Hand-Crafted development half (benchmark rules).
fn hand_crafted_tally(
    predict: impl Fn(&[audita_traces::whowhen::Turn]) -> Option<(String, usize)>,
) -> Tally {
    let dir = hand_crafted_dev();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    let mut t = Tally::default();
    for name in names {
        let bytes = std::fs::read(format!("{dir}/{name}")).unwrap();
        let c = parse_whowhen(&bytes, &Limits::default()).unwrap();
        assert_eq!(
            c.format,
            audita_traces::whowhen::LogFormat::MagenticOne,
            "{name}"
        );
        let p = predict(&c.history);
        t.add(score(
            p.as_ref().map(|(a, s)| (a.as_str(), *s)),
            c.label.as_ref().unwrap(),
        ));
    }
    t
}

type Predictor = fn(&[audita_traces::whowhen::Turn]) -> Option<(String, usize)>;

/// Every label-free floor BENCHMARKS.md reports, by name.
fn floors() -> [(&'static str, Predictor); 5] {
    use audita_traces::whowhen::*;
    [
        ("first worker reply", floor_first_worker),
        ("step 0", floor_step_zero),
        ("first hand-off", floor_first_handoff),
        ("most frequent agent", floor_most_frequent),
        ("last agent reply", floor_last_reply),
    ]
}

#[test]
fn hand_crafted_development_half_beats_every_floor() {
    let attr = hand_crafted_tally(|h| attribute(h).map(|a| (a.agent, a.step)));
    assert_eq!(attr.n, 29, "the shared development half");
    // (agent, agent strict, step, step strict), as in BENCHMARKS.md.
    let counts = |t: Tally| (t.agent, t.agent_strict, t.step, t.step_strict);
    assert_eq!(counts(attr), (23, 23, 12, 12), "audita-static");
    let pinned = [
        (20, 20, 8, 8),
        (5, 5, 0, 0),
        (5, 5, 0, 0),
        (20, 20, 8, 7),
        (22, 22, 10, 8),
    ];
    for ((name, floor), pin) in floors().into_iter().zip(pinned) {
        let t = hand_crafted_tally(floor);
        assert_eq!(counts(t), pin, "floor: {name}");
        assert!(
            attr.agent > t.agent && attr.step > t.step,
            "audita-static {attr:?} must beat floor {name} {t:?} on agent and step"
        );
        assert!(attr.agent_strict > t.agent_strict && attr.step_strict > t.step_strict);
    }
}

#[test]
fn algorithm_generated_attributor_beats_every_floor_on_both_halves() {
    let (dev, held) = tallies(|h| attribute(h).map(|a| (a.agent, a.step)));
    for (name, floor) in floors() {
        let (fd, fh) = tallies(floor);
        for (half, a, f) in [("development", dev, fd), ("held-out", held, fh)] {
            assert!(
                a.agent > f.agent && a.step > f.step,
                "{half}: {a:?} vs floor {name} {f:?}"
            );
        }
    }
    // The floors added for Magentic-One, on this subset (BENCHMARKS.md).
    let (d, h) = tallies(audita_traces::whowhen::floor_most_frequent);
    assert_eq!((d.agent, d.step, h.agent, h.step), (37, 16, 31, 8));
    let (d, h) = tallies(audita_traces::whowhen::floor_last_reply);
    assert_eq!((d.agent, d.step, h.agent, h.step), (31, 4, 24, 2));
    // No hand-offs in CaptainAgent logs: that floor names nothing there.
    let (d, h) = tallies(audita_traces::whowhen::floor_first_handoff);
    assert_eq!((d.agent + h.agent, d.step + h.step), (0, 0));
}
