//! The simulated fleet and the harness that loads and measures the pipeline with it.
//!
//! The fleet: [`fleet`] (facility scenarios as cells of one warehouse), [`client`]
//! (the fleet enrolled in a deployment as its client), [`load`] (the sustained fleet
//! load generator: configurable robots, command rate, incident rate and duration,
//! pre-signed, offered at the target rate, bounded in count and time, loopback only)
//! and [`adversary`] (the invariants the adversarial suites check after every edit of
//! a record).
//!
//! The harness, which the `audita` command line only parses arguments for:
//! [`kafka_run`] (`audita-load load`: every stage its own process over Kafka),
//! [`bench_pipeline`], [`bench_stages`], [`bench_attribution`] and
//! [`bench_perimeter`] (`audita-load bench …`) and [`bench_whowhen`] (`audita trace
//! whowhen-bench`), on top of [`host`] (what `/proc` says of
//! the processes and the machine, the Ed25519 reference) and [`hosted`] (the verdict
//! on a facility scenario's signed record, shared by the attribution and perimeter
//! benchmarks).

#![warn(missing_docs)]
#![warn(clippy::too_many_lines)]

/// The fleet this crate loads the pipeline with (`audita-fleet`).
pub use audita_fleet::{client, fleet};

pub mod adversary;
pub mod bench_attribution;
pub mod bench_perimeter;
pub mod bench_pipeline;
pub mod bench_stages;
pub mod bench_whowhen;
pub mod capacity;
pub mod host;
pub mod hosted;
pub mod kafka_run;
pub mod load;
