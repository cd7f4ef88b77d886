//! Reading untrusted input for the subcommands: size-limit flags, bounded reads of
//! the files named on the command line, and trust files.
//!
//! Every read goes through `audita_record::read_bounded` (or
//! `read_bounded_from` for standard input), so `/dev/zero` or an endless FIFO in
//! place of any input ends at its limit with one line naming the flag that raises
//! it. The limits and their defaults are documented with the record format
//! (`audita_record::Limits`) and in the README.

use std::path::Path;

use audita_evidence::{KeyRegistry, Policy};
pub use audita_record::report::Trust;
use audita_record::{self as disk, Limit, Limits};

/// Size limits of every read (see `audita_record::Limits`).
#[derive(clap::Args, Clone, Debug)]
pub struct LimitArgs {
    /// Refuse a record whose files hold more than this many bytes in all.
    #[arg(long, value_name = "BYTES", default_value_t = disk::DEFAULT_RECORD_BYTES)]
    pub max_record_bytes: u64,
    /// Refuse a record frame, key file, checkpoint or payload file larger than this.
    #[arg(long, value_name = "BYTES", default_value_t = disk::DEFAULT_FRAME_BYTES)]
    pub max_frame_bytes: u64,
    /// Refuse a segment file with more frames than this.
    #[arg(long, value_name = "N", default_value_t = disk::DEFAULT_SEGMENT_FRAMES)]
    pub max_segment_frames: u64,
    /// Refuse an input file (duties, adverse, --checkpoint, --trust) larger than this.
    #[arg(long, value_name = "BYTES", default_value_t = disk::DEFAULT_INPUT_BYTES)]
    pub max_input_bytes: u64,
}

impl LimitArgs {
    /// The record read limits.
    pub fn record(&self) -> Limits {
        Limits {
            record_bytes: self.max_record_bytes,
            frame_bytes: self.max_frame_bytes,
            segment_frames: self.max_segment_frames,
        }
    }
}

/// Reads one input file named on the command line (`-` = standard input) under
/// `limit` bytes; the error is one line naming the file.
pub fn read_input(path: &Path, limit: u64) -> Result<Vec<u8>, String> {
    let result = if path == Path::new("-") {
        disk::read_bounded_from(
            std::io::stdin().lock(),
            Path::new("<stdin>"),
            limit,
            Limit::InputBytes,
        )
    } else {
        disk::read_bounded(path, limit, Limit::InputBytes)
    };
    result.map_err(|e| match e {
        disk::ReadError::Io { path, source } => {
            format!("{}: cannot read: {source}", path.display())
        }
        e => e.to_string(),
    })
}

/// [`read_input`] as UTF-8 text.
pub fn read_text(path: &Path, limit: u64) -> Result<String, String> {
    let bytes = read_input(path, limit)?;
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "{}: not UTF-8 (byte {})",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}

/// Loads `--trust FILE` (if given) and applies it to the record's keys: the
/// registry to verify with, the policy's keeper requirement set, and the trust
/// ([`Trust`], reported by `audita_record::report`).
pub fn load_trust(
    file: Option<&Path>,
    record_keys: KeyRegistry,
    policy: &mut Policy,
    limit: u64,
) -> Result<(KeyRegistry, Trust), String> {
    let Some(file) = file else {
        return Ok((record_keys, Trust::Record));
    };
    let text = read_text(file, limit)?;
    Trust::pinned(file, &text, &record_keys, policy)
}
