//! The causal engine (SPEC §3, §7): structural models, the modified Halpern–Pearl
//! definition, the monotone fast path and the general exact path. A pure library.
#![warn(missing_docs)]
