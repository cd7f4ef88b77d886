//! The integration tests of `causal`, one binary: each module was a test binary of its own;
//! one binary links the crate and its dependencies once instead of once per file.

mod certify;
mod common;
mod golden;
mod hp2sat;
mod modular;
mod optimise;
mod oracle_crosscheck;
mod properties;
