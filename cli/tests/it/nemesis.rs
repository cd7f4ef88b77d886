//! The nemesis at a small load (issue 48): every fault once — a stage killed, the sealer
//! and ingest paused together, the broker SIGKILLed and restarted on its data, the
//! sealer cut from the broker by Toxiproxy, the sealer's record filesystem full, the
//! sealer's wall clock stepped by minutes — while every stage runs as its own process
//! over a real broker. The run's own history check must pass: every acknowledged
//! envelope sealed exactly once, the record verifying clean, every incident judged on
//! its planted profile with the verdict of a fault-free run of the same load (record
//! root aside), and every verdict once in the sink's Parquet tables.

use audita_bus::testing::KafkaBroker;
use serde_json::Value;

#[test]
fn every_fault_once_at_a_small_load_loses_nothing_and_changes_no_verdict() {
    // Proxied listeners for the stages a partition may cut (`.ci/kafka.sh`).
    let broker = KafkaBroker::start_private_proxied(7).unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("nemesis.json");
    let run = crate::audita_load()
        .args(["load", "--quiet", "--robots", "24", "--rate", "2"])
        .args(["--incident-rate", "0.25", "--duration", "170"])
        .args(["--nemesis", "once", "--fault-seconds", "8"])
        // The fault-free run at twice the pace: verdicts are functions of record
        // time, and the check would say so if they were not.
        .args(["--baseline-speedup", "2"])
        .args(["--disk-mib", "256"])
        .args(["--drain-timeout", "240", "--bootstrap", broker.bootstrap()])
        .arg("--broker-dir")
        .arg(broker.run_dir().unwrap())
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{table}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let r: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let h = &r["history"];
    assert_eq!(h["passed"], true, "{table}");
    let faults = r["faults"].as_array().unwrap();
    let labels: Vec<&str> = faults
        .iter()
        .map(|f| f["fault"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels,
        [
            "kill slicer",
            "pause sealer+ingest",
            "broker-restart",
            "partition sealer",
            "disk-full sealer",
            "clock-jump sealer"
        ]
    );
    for f in faults {
        assert!(f["recovery_s"].is_number(), "not recovered: {f}");
        assert_eq!(f["during_feed"], true, "injected after the feed: {f}");
    }
    // Every stage a broker restart touches said it could not reach the broker.
    let broker = &faults[2]["logged"];
    for stage in ["ingest", "sealer", "slicer", "sink"] {
        assert!(
            broker[stage].as_array().is_some_and(|l| !l.is_empty()),
            "{stage} logged nothing while the broker was down: {broker}"
        );
    }
    // Something was judged and compared, and nothing acknowledged went missing.
    assert!(h["verdicts_compared"].as_u64().unwrap() >= 5, "{h}");
    assert_eq!(h["acknowledged_not_sealed"], 0);
    assert_eq!(h["record"]["clean"], true);
    // The sealer said so while its disk was full.
    let disk = &faults[4]["logged"]["sealer"];
    assert!(
        disk.as_array().is_some_and(|l| !l.is_empty()),
        "the sealer logged nothing while its disk was full: {}",
        faults[4]
    );
    assert!(table.contains("History: offered"), "{table}");
}
