//! What a stage downstream of the sealer reads: each sealed epoch with the bytes of
//! its messages, joined from `audita.epochs` (the seals) and `audita.accepted` (the
//! bytes, published once by ingest in batches), in epoch order — the join itself
//! ([`state`], pure), the reader that drives it over the bus with a bounded read-ahead
//! ([`input::SealedInput`]), and the grace past a window's end the stages wait for
//! late sources ([`grace::Grace`]).
//!
//! Design constraints:
//! - One join per process after the sealer: the slicer's process reads through it
//!   and hands each joined epoch to its other operators (the monitor's detectors)
//!   before the slicer takes it, so the bytes are fetched, hashed and joined once.
//! - Only what a seal names leaves the join; bytes gone from the topic are counted
//!   missing and judged missing downstream, never present ([`state`]).
//! - Memory is bounded by the read-ahead and the seals queued ([`input`]).
//! - Depends on the record types ([`audita_topics`]) and the bus only: no stage
//!   depends on another to read sealed epochs.

#![warn(missing_docs)]
#![forbid(unsafe_code)]
#![warn(clippy::too_many_lines)]

pub mod grace;
pub mod input;
pub mod state;

pub use grace::Grace;
pub use input::{Input, SealedInput};
pub use state::{join_all, Join, JoinStats, Share, Taken};
