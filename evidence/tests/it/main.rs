//! The integration tests of `evidence`, one binary: each module was a test binary of its own;
//! one binary links the crate and its dependencies once instead of once per file.

mod batch_bisect;
mod independent_decoder;
mod proven;
mod record;
mod roundtrip_props;
mod tamper_props;
mod vectors;
