//! The integration tests of `traces`, one binary: each module was a test binary of its own;
//! one binary links the crate and its dependencies once instead of once per file.

mod frameworks;
mod golden;
mod memo_props;
mod props;
mod provenance;
mod stores;
mod whowhen;
