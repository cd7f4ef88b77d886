//! Why a sealer stops: the one error of the stage and of the sealed log it writes
//! ([`crate::log::SealedLog`]).

use audita_bus::BusError;
use audita_record::tiles::TileError;
use audita_record::ReadError;
use std::path::PathBuf;

/// Why the sealer stage stopped.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    /// The bus failed (see [`BusError::is_transient`]).
    #[error(transparent)]
    Bus(#[from] BusError),
    /// The record directory could not be read or written.
    #[error(transparent)]
    Disk(#[from] ReadError),
    /// The record's tiled log could not be written.
    #[error(transparent)]
    Tiles(#[from] TileError),
    /// The record on disk does not reproduce its own seals; refusing to extend it.
    #[error("record directory {0} is inconsistent: {1}")]
    Inconsistent(PathBuf, String),
}
