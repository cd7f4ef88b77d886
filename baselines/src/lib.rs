//! Baselines of SPEC §6 run on the same incidents as Audita: single-site
//! counterfactual scoring, exact Shapley values over messages, a statistical anomaly
//! detector, and the LLM-judge interface; plus the responsibility metrics.
//!
//! Every baseline sees an incident only through [`Incident`]: the recorded messages
//! and an outcome oracle that re-runs the world with a set of messages deleted. None of
//! them sees the duty registry or absences — that blindness is what they measure.
#![warn(missing_docs)]
#![warn(clippy::too_many_lines)]

pub mod anomaly;
pub mod incident;
pub mod judge;
pub mod metrics;
pub mod shapley;
pub mod single_site;

pub use incident::{FacilityIncident, Incident, Message, Profile};
