//! The sink's error type (the Parquet writers live in [`crate::tables`]).

use std::path::PathBuf;

/// Why writing the sink's output failed. All are permanent for the file at hand.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The file system refused (full disk, permissions).
    #[error("sink i/o at {path}: {source}")]
    Io {
        /// File involved.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// Arrow/Parquet encoding failed, or a file on disk does not read back.
    #[error("parquet: {0}")]
    Encode(String),
    /// The bus failed while the sink stage read `audita.verdicts` (see
    /// [`audita_bus::BusError::is_transient`]).
    #[error(transparent)]
    Bus(#[from] audita_bus::BusError),
}
