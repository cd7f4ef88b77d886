//! Sealer stage: closes windows into Merkle epochs, chains and signs checkpoints,
//! gathers keeper co-signatures and writes durable segments (the on-disk record).
#![warn(missing_docs)]
