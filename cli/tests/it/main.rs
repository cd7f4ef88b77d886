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
mod old_records;
mod pipeline;
mod readme_vda5050;
mod report_screens;
mod republished_epoch;
mod tlog_interop;
mod trace_cli;
mod trace_frameworks;
mod trace_seal;
mod vda5050_incident;
mod verdict_cli;
mod verify_cli;
mod verify_golden;
