//! The simulated warehouse fleet: [`fleet`] (facility scenarios laid side by side as
//! cells of one warehouse, each a live stream of signed envelopes and receipts with
//! its duty registry entries and adverse predicates) and [`client`] (the fleet
//! enrolled in a deployment as its client, signing with the key files the deployment
//! registered).
//!
//! A crate of its own so that `audita demo`, `audita fleet register` and `audita stage
//! feed` run the fleet without linking the load generator and the benchmark harness
//! (`audita-load-tests`, which builds its load on this fleet).

#![warn(missing_docs)]
#![warn(clippy::too_many_lines)]

pub mod client;
pub mod fleet;
