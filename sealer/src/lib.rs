//! Sealer stage: closes windows into Merkle epochs, chains and signs checkpoints,
//! gathers keeper co-signatures and writes durable segments (the on-disk record).
//!
//! The sealing logic itself is the pure [`audita_evidence::Sealer`]; this crate
//! owns the I/O around it. [`disk`] is the on-disk record format read by
//! `audita verify`. The stage needs the bus and sits behind the default `stage`
//! feature; without it the crate is the record format alone.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod disk;
#[cfg(feature = "stage")]
pub mod stage;
