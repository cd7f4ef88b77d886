//! The atomic, durable file write: temporary sibling, fsync, rename, fsync of the
//! directory.
//!
//! Design constraints:
//! - The temporary file is `.<name>.tmp` beside the target: hidden, and matched by no
//!   glob of the target's kind (`*.parquet`, `*.json`, `*.checkpoint`), so a leftover
//!   of a crash is never read as a file of the directory.
//! - The call returns only after the directory entry is durable; an error names the
//!   file (temporary file, target or directory) the step failed on.

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// A step of [`write_atomic_observed`] that has just completed (fault injection:
/// tests kill the process there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteStep {
    /// The temporary file is written and fsync'd, not yet renamed.
    TempSynced,
    /// Renamed over the target; the directory is not yet fsync'd.
    Renamed,
}

/// Why an atomic write failed: the file of the failing step and the cause.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", .path.display())]
pub struct WriteError {
    /// The temporary file, the target or its directory.
    pub path: PathBuf,
    /// The cause.
    pub source: std::io::Error,
}

/// The temporary sibling [`write_atomic`] writes `path` through: `.<name>.tmp` in
/// the same directory.
pub fn temp_path(path: &Path) -> PathBuf {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    directory_of(path).join(format!(".{name}.tmp"))
}

/// The directory holding `path` (`.` for a bare file name).
fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Writes `bytes` to `path` atomically and durably: temporary sibling, fsync,
/// rename, fsync of the directory.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    write_atomic_observed(path, bytes, |_| {})
}

/// [`write_atomic`], calling `observe` after each [`WriteStep`].
pub fn write_atomic_observed(
    path: &Path,
    bytes: &[u8],
    mut observe: impl FnMut(WriteStep),
) -> Result<(), WriteError> {
    let at = |path: &Path| {
        let path = path.to_owned();
        move |source| WriteError { path, source }
    };
    let dir = directory_of(path);
    let tmp = temp_path(path);
    {
        let mut f = std::fs::File::create(&tmp).map_err(at(&tmp))?;
        f.write_all(bytes).map_err(at(&tmp))?;
        f.sync_all().map_err(at(&tmp))?;
    }
    observe(WriteStep::TempSynced);
    std::fs::rename(&tmp, path).map_err(at(path))?;
    observe(WriteStep::Renamed);
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(at(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_replaces_the_file_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        write_atomic(&path, b"one").unwrap();
        let mut steps = Vec::new();
        write_atomic_observed(&path, b"two", |s| steps.push(s)).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_eq!(steps, [WriteStep::TempSynced, WriteStep::Renamed]);
        assert_eq!(temp_path(&path), dir.path().join(".state.json.tmp"));
        assert!(!temp_path(&path).exists());
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn a_bare_file_name_is_written_in_the_current_directory() {
        assert_eq!(directory_of(Path::new("audita.toml")), Path::new("."));
        assert_eq!(temp_path(Path::new("a.toml")), Path::new("./.a.toml.tmp"));
    }

    #[test]
    fn a_failed_write_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing/x");
        let e = write_atomic(&path, b"x").unwrap_err();
        assert_eq!(e.path, temp_path(&path));
    }
}
