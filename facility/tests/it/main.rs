//! The integration tests of `facility`, one binary: each module was a test binary of its own;
//! one binary links the crate and its dependencies once instead of once per file.

mod families;
mod props;
mod record;
mod scope_reasons;
mod verdict;
mod world;
