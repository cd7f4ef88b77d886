//! The simulated fleet feeding the pipeline ([`fleet`]) and the fleet load generator:
//! configurable robots, command rate, incident rate and duration, bounded in count and
//! time, loopback only.

#![warn(missing_docs)]

pub mod fleet;
