//! The facility register (SPEC §5): a deterministic kinematic world at 0.1 s ticks,
//! principals issuing typed commands, the scenario library with planted ground truth,
//! and the analytic oracle computing ground truth by exact re-execution.
//!
//! A pure library: no I/O, no wall clock; every random choice comes from a seeded
//! ChaCha stream, so one seed gives one world, one record and one truth.
#![warn(missing_docs)]

pub mod conduct;
pub mod generator;
pub mod model;
pub mod oracle;
pub mod record;
pub mod replay;
pub mod scenario;
pub mod world;
