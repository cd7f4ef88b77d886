//! The integration tests of `monitor`, one binary: each module was a test binary of its own;
//! one binary links the crate and its dependencies once instead of once per file.

mod planted;
mod refusal;
mod sites;
mod stale;
