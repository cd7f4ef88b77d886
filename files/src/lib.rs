//! The files a party keeps on its own disk, written and read one way everywhere:
//! [`write_atomic`] (the one atomic, durable file write) and [`read_bounded`] (the
//! one bounded file read).
//!
//! This crate does file I/O, and nothing else: no transport, no clock, no Audita
//! types (std and `thiserror` only). It sits below every crate that keeps files — the
//! record writer, the sealer's watermark, the sink's tables, the keeper's state, a
//! deployment's configuration, the client's spool and the key files (`audita-keys`).
//!
//! Design constraints:
//! - A file written with [`write_atomic`] is either the old file or the new one after
//!   a crash at any point, and durable once the call returns: the bytes go to a
//!   hidden temporary sibling (`.<name>.tmp`, [`temp_path`]), which is fsync'd and
//!   renamed over the file, then the directory is fsync'd.
//! - [`read_bounded`] never holds more than `limit + 1` bytes: a regular file over
//!   the limit fails before any byte is read, and an endless stream (`/dev/zero`, a
//!   FIFO) fails once `limit + 1` bytes arrived.
//! - Errors carry the `std::io::Error` and say which file; each caller maps them into
//!   its own error type, so retry information stays where the caller keeps it.
#![warn(missing_docs)]
#![forbid(unsafe_code)]
#![warn(clippy::too_many_lines)]

mod atomic;
mod bounded;

pub use atomic::{temp_path, write_atomic, write_atomic_observed, WriteError, WriteStep};
pub use bounded::{read_bounded, read_bounded_from, ReadBoundedError};
