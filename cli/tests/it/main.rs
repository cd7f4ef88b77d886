//! The integration tests of `cli`, one binary: each module was a test binary of its own;
//! one binary links the crate and its dependencies once instead of once per file.

mod adversarial_demo;
mod analytics;
mod attribute;
mod bench_stages;
mod bridge_vda5050;
mod contracts;
mod dashboard;
mod deployment;
mod dsse_interop;
mod keeper_evidence;
mod limits;
mod monitor_pipeline;
mod nemesis;
mod notifier;
mod old_records;
mod pipeline;
mod readme_vda5050;
mod reopen;
mod report_screens;
mod republished_epoch;
mod slicer_cluster;
mod tlog_interop;
mod trace_cli;
mod trace_frameworks;
mod trace_seal;
mod vda5050_incident;
mod verdict_cli;
mod verify_cli;
mod verify_golden;

/// The `audita-load` binary (load generator and benchmark harness, built by
/// `audita-load-tests` beside `audita`): the tests of its commands that read their
/// output with `audita` live here.
pub fn audita_load() -> std::process::Command {
    let path = std::path::Path::new(env!("CARGO_BIN_EXE_audita")).with_file_name("audita-load");
    assert!(
        path.exists(),
        "{} is not built: cargo build -p audita-load-tests --bin audita-load (cargo test --workspace builds it)",
        path.display()
    );
    std::process::Command::new(path)
}
