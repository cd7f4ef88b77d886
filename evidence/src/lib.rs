//! The accountable record (SPEC §2): signed envelopes, receipts, Merkle epochs,
//! C2SP checkpoints, keeper co-signatures, the payload store and the verification
//! partition. A pure library: no I/O, no clock, no Kafka.
#![warn(missing_docs)]
