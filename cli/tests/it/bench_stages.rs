//! `audita-load bench stages` end to end on a small fleet over the embedded bus: every
//! stage runs alone over what the previous one left, every envelope is sealed once,
//! the monitor declares the fleet's incidents, every declaration gets a verdict, and
//! each stage reports a positive CPU cost next to the Ed25519 references.

use serde_json::Value;

#[test]
fn every_stage_is_measured_alone_and_the_run_is_complete() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("stages.json");
    let out = crate::audita_load()
        .args([
            "bench",
            "stages",
            "--robots",
            "4",
            "--duration",
            "20",
            "--incident-rate",
            "0.5",
            "--json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench stages failed: {stderr}");
    let r: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let envelopes = r["envelopes"].as_u64().unwrap();
    assert!(envelopes > 1_000, "{r}");
    assert_eq!(r["sealed"].as_u64(), Some(envelopes), "{r}");
    let receipts = r["receipts"].as_u64().unwrap();
    assert_eq!(r["accepted"].as_u64(), Some(envelopes + receipts), "{r}");
    assert!(r["incident_cells"].as_u64().unwrap() >= 1, "{r}");
    let declared = r["declared"].as_u64().unwrap();
    assert!(declared >= 1, "the monitor declared nothing: {r}");
    assert_eq!(r["verdicts"].as_u64(), Some(declared), "{r}");
    assert!(r["verify_strict_us"].as_f64().unwrap() > 0.0);
    assert!(r["batch_verify_us"].as_f64().unwrap() > 0.0);
    let stages: Vec<&str> = r["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["stage"].as_str().unwrap())
        .collect();
    // The slicer process runs the monitor's detectors: one phase.
    assert_eq!(stages, ["ingest", "sealer", "slicer", "engine"]);
    for s in r["stages"].as_array().unwrap() {
        assert!(s["cpu_us_per_envelope"].as_f64().unwrap() > 0.0, "{s}");
        assert!(s["alone_envelopes_per_s"].as_f64().unwrap() > 0.0, "{s}");
    }
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("| ingest |"), "{table}");
}
