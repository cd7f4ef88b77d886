//! The fleet load generator: configurable robots, command rate, incident rate and
//! duration, bounded in count and time, loopback only.
#![warn(missing_docs)]
