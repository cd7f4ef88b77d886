//! Sealer stage: closes windows into Merkle epochs, chains and signs checkpoints,
//! gathers keeper co-signatures and writes durable segments of the on-disk record.
//!
//! The sealing logic itself is the pure [`audita_evidence::Sealer`]; the on-disk
//! format is `audita_record` (which offline verifiers use without this crate); the
//! records it reads and publishes are `audita_topics`'. This crate owns the stage's
//! I/O and run loop ([`stage::SealerStage::run`]), and the one path by which any
//! record is sealed to disk ([`log::SealedLog`]: the stage's epochs, and records
//! sealed offline by `audita trace seal` and `audita sample-record`).
#![warn(missing_docs)]
#![forbid(unsafe_code)]
#![warn(clippy::too_many_lines)]

mod error;
pub mod log;
mod parts;
pub mod stage;
pub mod witness;
