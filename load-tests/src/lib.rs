//! The simulated fleet feeding the pipeline ([`fleet`]: facility scenarios as cells of
//! one warehouse) and the sustained fleet load generator ([`load`]: configurable
//! robots, command rate, incident rate and duration, pre-signed, offered at the target
//! rate, bounded in count and time, loopback only).

#![warn(missing_docs)]

pub mod fleet;
pub mod load;
