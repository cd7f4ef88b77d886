//! Independent oracles for the causal engine: an analytic oracle (prime implicants to
//! minimal transversals) and a brute-force checker of the modified HP definition.
//! Shares no code with `audita-causal` by design.
#![warn(missing_docs)]
