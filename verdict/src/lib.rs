//! From a verified record to a verdict (SPEC §3–4): the incident slice, the production
//! gate, witness-grade edges, intervals over completions, duties and breach standards,
//! replay certification, and blame-shift certificates. A pure library: no I/O, no
//! clock.
//!
//! One call: [`verdict()`] (or [`verdict_with`] with a replay hook) takes the raw
//! [`audita_evidence::Record`], its verification [`audita_evidence::Partition`], a
//! [`DutyRegistry`] and an [`Adverse`] declaration and returns a [`Verdict`], whose JSON
//! schema is documented in `verdict/SCHEMA.md`; [`Verdict::rows`] is the flat
//! per-(incident, principal) view.
//!
//! Guarantees (tested in `tests/`):
//! - **Forgery invariance.** Only certified messages, attested missing ids and suspect
//!   items sealed in intact epochs are read: injecting items that fail verification
//!   leaves the verdict JSON bitwise identical.
//! - **Deletion widens.** A deleted sealed message becomes an author-attributed
//!   completion item; readings with it present reproduce the consuming citers' edges.
//!   Any finding whose ρ_lo falls names the items (with authors) that could carry it.
//! - **Groundedness.** Culpable ⇔ breach under the declared standard ∧ ρ_lo > 0 ∧ a
//!   causal (witness-grade) claim; breach reads only the principal's own certified
//!   messages/absences and their certified inputs, so a duty-compliant principal is
//!   never culpable under any record edit.
//! - **No silent exoneration.** `exonerated` requires ρ_hi = 0 and nothing missing that
//!   could carry the principal's production path; otherwise `unresolved` with the items.
//! - **Dilution invariance.** Certified messages outside the slice (no citation path to
//!   an anchor) change no grade.
//! - **Abstention, never accusation.** Causes are certified by replay through the
//!   `audita-causal` hook; a failed replay lowers ρ_lo (to 0 when replay cannot run).
#![warn(missing_docs)]
#![warn(clippy::too_many_lines)]

pub mod adverse;
pub mod blame;
pub mod breach;
pub mod duty;
pub mod interval;
pub mod reading;
pub mod slice;
pub mod verdict;

pub use adverse::{
    id_string, parse_id, Adverse, AdverseDecl, Combine, Declarer, DeclarerKind, Fact, FactKind,
    Severity,
};
pub use blame::{certificate, BlameCertificate, Framer};
pub use breach::{Breach, Violation};
pub use duty::{
    AggregationRule, Counterpart, Duty, DutyRegistry, PrincipalDuties, Rule, Standard, Zone,
};
pub use slice::{Edge, EdgeKind, Evidence, KeptInEveryScope, Node, Outside, Slice};
pub use verdict::{
    verdict, verdict_with, Claim, ClaimLevel, DeclarationView, Finding, FindingStatus, Flag,
    Options, Status, Verdict, VerdictRow, SCHEMA,
};

/// Why a verdict could not be computed. Every variant is permanent for its input
/// (the library is pure); retrying the same input cannot help.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerdictError {
    /// The duty registry is malformed.
    #[error("duty registry: {0}")]
    Duties(String),
    /// The adverse declaration is malformed.
    #[error("adverse declaration: {0}")]
    Adverse(String),
    /// Too many readings of the completions to enumerate exactly: abstain.
    #[error("the completions of the missing/suspect items and hypothesis edges touching the slice need 2^{bits} readings (max 2^{max}): abstaining")]
    TooManyCompletions {
        /// Base-2 logarithm of the number of readings, rounded up.
        bits: usize,
        /// The cap.
        max: usize,
    },
    /// Too many deviations for an exact blame-shift certificate.
    #[error("{n} deviations (max {max}) for a blame-shift certificate")]
    TooManyDeviations {
        /// Deviations found.
        n: usize,
        /// The cap.
        max: usize,
    },
    /// The causal engine refused a query (budget).
    #[error("causal engine: {0}")]
    Engine(String),
    /// An internal invariant failed (a bug; reported, never a panic).
    #[error("internal: {0}")]
    Internal(String),
}
