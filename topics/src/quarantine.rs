//! `audita.suspect`: input that did not pass a check, with the reason. Ingest
//! quarantines what fails form, citation or signature checks; the sealer quarantines
//! envelopes older than its dedupe horizon (`late`).

/// A record that failed a check, as published on `audita.suspect`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Quarantined {
    /// Topic the bytes came from.
    pub source_topic: String,
    /// Partition they came from.
    pub partition: u32,
    /// Offset they came from.
    pub offset: u64,
    /// Short machine-readable reason (`decode`, `signature`, `citation`, `unknown_topic`;
    /// `late` from the sealer).
    pub reason: String,
    /// Human-readable detail, one line.
    pub detail: String,
    /// The rejected bytes, hex.
    pub bytes_hex: String,
}
