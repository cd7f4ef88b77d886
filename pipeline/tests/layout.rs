//! The workspace's boundaries, read from the resolved dependency graph (`cargo
//! metadata`): the stages depend on the shared record crates and the bus, never on
//! each other; the on-disk record format and the topic types link no transport, so an
//! offline verifier needs neither rdkafka nor the pipeline; the domain crates link no
//! stage; the light clients (client, Python package, bridge, keeper) link no engine.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

const STAGES: [&str; 6] = [
    "audita-ingest",
    "audita-sealer",
    "audita-slicer",
    "audita-engine-workers",
    "audita-sinks",
    "audita-notifier",
];

/// Each workspace package's direct normal dependencies, and the resolved graph.
struct Graph {
    direct: BTreeMap<String, BTreeSet<String>>,
    /// Package name → names of the packages it depends on (normal, resolved).
    resolved: BTreeMap<String, BTreeSet<String>>,
}

/// This machine's target triple (the graph is resolved for it alone, so no other
/// platform's crates need to be on disk).
fn host() -> String {
    let out = Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("rustc -vV runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc -vV names the host")
        .to_string()
}

fn graph() -> Graph {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--offline"])
        .args(["--filter-platform", &host()])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m: Value = serde_json::from_slice(&out.stdout).expect("metadata is JSON");
    let mut names = BTreeMap::new();
    let mut direct = BTreeMap::new();
    for p in m["packages"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap().to_string();
        names.insert(p["id"].as_str().unwrap().to_string(), name.clone());
        if name.starts_with("audita") {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null())
                .map(|d| d["name"].as_str().unwrap().to_string())
                .collect();
            direct.insert(name, deps);
        }
    }
    let mut resolved = BTreeMap::new();
    for n in m["resolve"]["nodes"].as_array().unwrap() {
        let deps = n["deps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| {
                d["dep_kinds"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|k| k["kind"].is_null())
            })
            .map(|d| names[d["pkg"].as_str().unwrap()].clone())
            .collect();
        resolved.insert(names[n["id"].as_str().unwrap()].clone(), deps);
    }
    Graph { direct, resolved }
}

impl Graph {
    /// Everything `root` links (normal dependencies, transitively).
    fn closure(&self, root: &str) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![root.to_string()];
        while let Some(n) = todo.pop() {
            for d in self.resolved.get(&n).into_iter().flatten() {
                if seen.insert(d.clone()) {
                    todo.push(d.clone());
                }
            }
        }
        seen
    }
}

#[test]
fn no_stage_depends_on_another_stage() {
    let g = graph();
    for stage in STAGES {
        let deps = &g.direct[stage];
        let others: Vec<&&str> = STAGES
            .iter()
            .filter(|s| **s != stage && deps.contains(**s))
            .collect();
        assert!(others.is_empty(), "{stage} depends on {others:?}");
        assert!(
            deps.contains("audita-topics"),
            "{stage} takes its record types from audita-topics: {deps:?}"
        );
    }
}

#[test]
fn the_join_is_below_every_stage_and_the_topic_types_hold_no_join() {
    let g = graph();
    let join = g.closure("audita-join");
    for stage in STAGES {
        assert!(!join.contains(stage), "audita-join links the stage {stage}");
    }
    assert!(
        !g.closure("audita-topics").contains("audita-join"),
        "audita-topics keeps record types only"
    );
    assert!(
        g.direct["audita-slicer"].contains("audita-join"),
        "the slicer reads sealed epochs through audita-join"
    );
}

#[test]
fn the_record_format_and_the_topic_types_link_no_transport() {
    let g = graph();
    for krate in [
        "audita-record",
        "audita-topics",
        "audita-evidence",
        "audita-files",
        "audita-keys",
        "audita-verdict-types",
    ] {
        let linked = g.closure(krate);
        for forbidden in [
            "rdkafka",
            "rdkafka-sys",
            "audita-bus",
            "tokio",
            "audita-pipeline",
        ] {
            assert!(!linked.contains(forbidden), "{krate} links {forbidden}");
        }
        for stage in STAGES {
            assert!(!linked.contains(stage), "{krate} links the stage {stage}");
        }
    }
}

#[test]
fn domain_crates_link_no_stage_and_no_transport() {
    let g = graph();
    for krate in [
        "audita-evidence",
        "audita-causal",
        "audita-oracle",
        "audita-verdict",
        "audita-facility",
        "audita-baselines",
        "audita-monitor",
        "audita-traces",
    ] {
        let linked = g.closure(krate);
        for other in STAGES.iter().copied().chain([
            "audita-bus",
            "rdkafka",
            "audita-pipeline",
            "audita-record",
        ]) {
            assert!(!linked.contains(other), "{krate} links {other}");
        }
    }
}

#[test]
fn the_cli_reaches_the_stages_only_through_the_pipeline() {
    let g = graph();
    let cli = &g.direct["audita"];
    assert!(cli.contains("audita-pipeline"));
    for stage in STAGES.iter().filter(|s| **s != "audita-sinks") {
        assert!(!cli.contains(*stage), "the cli depends on {stage} directly");
    }
}

#[test]
fn the_bridge_publishes_through_the_client_and_links_no_stage() {
    let g = graph();
    assert!(g.direct["audita-bridge"].contains("audita-client"));
    let linked = g.closure("audita-bridge");
    for other in STAGES
        .iter()
        .copied()
        // audita-record (the segment encoding the topic records use, through
        // audita-topics) links no transport and is allowed.
        .chain(["audita-bus", "audita-pipeline"])
    {
        assert!(!linked.contains(other), "audita-bridge links {other}");
    }
}

/// What runs next to a robot or an agent links only the evidence types it signs:
/// the client, its Python package, the bridge and the keeper link no verdict engine
/// (the causal engine and its SAT solver, the verdict layer, the monitor), so they
/// take their key files from `audita-keys`, never from `audita-deploy`.
#[test]
fn light_clients_link_no_engine() {
    let g = graph();
    for krate in [
        "audita-client",
        "audita-python",
        "audita-bridge",
        "audita-keeper",
    ] {
        let linked = g.closure(krate);
        for engine in ["audita-causal", "audita-verdict", "audita-monitor"] {
            assert!(!linked.contains(engine), "{krate} links {engine}");
        }
    }
}

/// The production binary is not the benchmark harness: `audita` (and so the image
/// operators run) links neither the load generator and benchmarks
/// (`audita-load-tests`, whose own binary is `audita-load`) nor the baselines; the
/// simulated fleet the demo runs is a crate of its own (`audita-fleet`).
#[test]
fn the_audita_binary_links_neither_the_harness_nor_the_baselines() {
    let g = graph();
    let linked = g.closure("audita");
    for harness in ["audita-load-tests", "audita-baselines"] {
        assert!(
            !linked.contains(harness),
            "the audita binary links {harness}"
        );
    }
    assert!(g.direct["audita"].contains("audita-fleet"));
    let fleet = g.closure("audita-fleet");
    for heavy in ["audita-load-tests", "audita-baselines", "audita-pipeline"] {
        assert!(!fleet.contains(heavy), "the fleet links {heavy}");
    }
}
