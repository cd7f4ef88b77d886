//! The causal engine (SPEC §3, §7): binary structural models, the modified
//! Halpern–Pearl definition of actual causality, graded responsibility, and the
//! replay certification hook. A pure library: no I/O, no clock, no global state.
//!
//! Guarantees:
//! - **Exact.** [`attribute`] returns every minimal cause `X` with one smallest witness
//!   `W`, its grade `1/(|X|+|W|)`, and `ρ_p` = the maximum grade over the causes holding
//!   a variable of principal `p` (0.0 if none) for every non-null principal. Monotone
//!   models take the minimal-cut-set fast path ([`monotone`]); others the exact search
//!   ([`general`]) while it is cheap, then the modular path (one local model per module
//!   of the model, each solved exactly, composed along the module tree) or, for a model
//!   without modules, the optimisation path (minimal causes in order of grade on the
//!   CaDiCaL SAT solver with a core-guided cost search, [`optimise`]); both compute ρ
//!   per principal exactly without enumerating every cause. Past
//!   [`AttributeOptions::max_causes`] the list of causes is shortened
//!   (`causes_complete: false`), never ρ.
//! - **Bounded.** Every query has a caller-supplied [`Deadline`] (the library has no
//!   clock), deterministic work budgets and a memory bound; hitting one is an
//!   [`AttributeError`] naming the bound and how to raise it, never an approximation.
//! - **Granularity invariant.** Same-author conjunctive groups are contracted before
//!   grading ([`contract`]), so re-chunking one principal's output changes no grade.
//! - **Deterministic.** Equal inputs give byte-identical JSON ([`Attribution::to_json`]).
//! - **Total.** Malformed input yields a [`ModelError`] naming the problem and its
//!   location; no input makes the library panic.
//! - **Sound reporting.** [`certify::certify`] filters causes through a [`Replayer`]:
//!   a cause that fails replay is withheld with a note (abstention, never accusation).
//!
//! ```
//! use audita_causal::{attribute, ModelBuilder};
//! let model = ModelBuilder::new()
//!     .exogenous("a1", Some("planner-1"), true, true)
//!     .exogenous("a2", Some("planner-2"), true, true)
//!     .endogenous("d", Some("dispatcher"), "a1 | a2", true)
//!     .outcome("d")
//!     .build()
//!     .unwrap();
//! let att = attribute(&model).unwrap();
//! assert_eq!(att.responsibility_of("planner-1"), 0.5);
//! assert_eq!(att.responsibility_of("dispatcher"), 1.0);
//! ```
#![warn(missing_docs)]
#![warn(clippy::too_many_lines)]

mod attribution;
pub mod build;
pub mod certify;
mod check;
pub mod contract;
mod deadline;
pub mod expr;
mod family;
pub mod general;
mod json;
pub mod model;
mod modular;
pub mod monotone;
pub mod optimise;

pub use attribution::{
    attribute, attribute_until, attribute_with, AttributeError, AttributeOptions, Attribution,
    Cause, Path,
};
pub use build::ModelBuilder;
pub use certify::{CertifyConfig, Replayer};
pub use check::{check_cause, CauseCheck};
pub use deadline::{Deadline, NoDeadline};
pub use expr::{Expr, ParseError, ParseErrorKind};
pub use model::{Location, Mechanism, Model, ModelError, VarId, Variable};
