//! The bounded read: at most `limit` bytes, from a file or any reader.
//!
//! Design constraints:
//! - Never holds more than `limit + 1` bytes, so an endless stream ends at the limit.
//! - A regular file longer than the limit fails before any byte is read.

use std::io::Read;
use std::path::Path;

/// Why a bounded read failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadBoundedError {
    /// The file could not be opened or read.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// More than the limit arrived (or the file is longer).
    #[error("larger than {limit} bytes")]
    TooLarge {
        /// The limit.
        limit: u64,
    },
}

/// Reads at most `limit` bytes from `r`; more is [`ReadBoundedError::TooLarge`].
pub fn read_bounded_from(r: impl Read, limit: u64) -> Result<Vec<u8>, ReadBoundedError> {
    let mut buf = Vec::new();
    r.take(limit.saturating_add(1)).read_to_end(&mut buf)?;
    if buf.len() as u64 > limit {
        return Err(ReadBoundedError::TooLarge { limit });
    }
    Ok(buf)
}

/// Reads the whole file `path` if it holds at most `limit` bytes.
pub fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, ReadBoundedError> {
    let file = std::fs::File::open(path)?;
    if let Ok(meta) = file.metadata() {
        if meta.is_file() && meta.len() > limit {
            return Err(ReadBoundedError::TooLarge { limit });
        }
    }
    read_bounded_from(file, limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_up_to_the_limit_and_refuses_more() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"12345").unwrap();
        assert_eq!(read_bounded(&path, 5).unwrap(), b"12345");
        assert!(matches!(
            read_bounded(&path, 4),
            Err(ReadBoundedError::TooLarge { limit: 4 })
        ));
        let endless = std::io::repeat(0);
        assert!(matches!(
            read_bounded_from(endless, 1 << 10),
            Err(ReadBoundedError::TooLarge { .. })
        ));
        assert!(matches!(
            read_bounded(&dir.path().join("none"), 4),
            Err(ReadBoundedError::Io(_))
        ));
    }
}
