//! The integration tests of `bridge`, one binary: each module was a test binary of its own;
//! one binary links the crate and its dependencies once instead of once per file.

mod adversary;
mod burst;
mod mqtt;
