//! The bridge's error type and the clock, at the bottom of the crate so that every
//! module (the sidecar's run loop and the stores it drives) can reach down to them.

use audita_client::ClientError;

/// Milliseconds since the Unix epoch (the fallback time of a message without a
/// `timestamp`, and the index's look-back).
pub fn now_ms() -> u64 {
    audita_client::unix_ms()
}

/// Why a sidecar could not run.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// The configuration is inconsistent (one line naming the setting).
    #[error("config: {0}")]
    Config(String),
    /// The client library (spool, key) failed.
    #[error("{0}")]
    Client(ClientError),
    /// A Kafka client could not be created.
    #[error("kafka: {0}")]
    Kafka(String),
    /// A defect of the bridge itself (never input).
    #[error("internal: {0}")]
    Internal(String),
}
