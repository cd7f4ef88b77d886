//! The integration tests of `verdict`, one binary: each module was a test binary of its own;
//! one binary links the crate and its dependencies once instead of once per file.

mod adversary;
mod blame;
mod common;
mod config;
mod dilution;
mod facility;
mod properties;
mod scenarios;
