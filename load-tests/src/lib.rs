//! The simulated fleet feeding the pipeline ([`fleet`]: facility scenarios as cells of
//! one warehouse; [`client`]: the fleet enrolled in a deployment as its client) and the sustained fleet load generator ([`load`]: configurable
//! robots, command rate, incident rate and duration, pre-signed, offered at the target
//! rate, bounded in count and time, loopback only), and the invariants the
//! adversarial suites check after every edit of a record ([`adversary`]).

#![warn(missing_docs)]

pub mod adversary;
pub mod client;
pub mod fleet;
pub mod load;
