//! Baselines of SPEC §6: single-site counterfactual scoring, exact Shapley values,
//! an anomaly detector and the LLM-judge interface.
#![warn(missing_docs)]
