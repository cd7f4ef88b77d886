//! The facility register (SPEC §5): a deterministic kinematic world at 0.1 s ticks,
//! principals issuing signed commands, and the scenario library with planted ground truth.
#![warn(missing_docs)]
