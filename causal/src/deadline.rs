//! The caller's stop condition: the engine has no clock, so every bounded query polls a
//! [`Deadline`] the caller supplies.
//!
//! Design constraints:
//! - This module sits at the bottom of the crate: every search path (monotone, general,
//!   optimisation) reaches down to it, and it imports nothing from the crate.

/// A caller-supplied stop condition, polled while a query runs. The engine has no
/// clock: a binary passes a wall-clock deadline (see `audita attribute --timeout-ms`),
/// a library caller may pass anything (a cancellation flag, a step counter).
pub trait Deadline {
    /// Whether the query must stop now.
    fn expired(&self) -> bool;
}

/// The deadline that never expires.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoDeadline;

impl Deadline for NoDeadline {
    fn expired(&self) -> bool {
        false
    }
}

impl<F: Fn() -> bool> Deadline for F {
    fn expired(&self) -> bool {
        self()
    }
}
