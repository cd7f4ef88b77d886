//! The integration tests of `keeper`, one binary: each module was a test binary of its own;
//! one binary links the crate and its dependencies once instead of once per file.

mod bin;
mod common;
mod crash;
mod fork;
mod interop;
mod protocol;
