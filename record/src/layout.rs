//! The record's layout: the `FORMAT` line, the segment framing (magic, kind byte,
//! length-prefixed frames) and where each file of a record lives.

use std::path::{Path, PathBuf};

use audita_evidence::checkpoint::{COSIGNATURE_V1_TYPE, ED25519_NOTE_TYPE};
use audita_evidence::trust::vkey;
use audita_evidence::{Hash, KeyRegistry, VerifyingKey};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

/// Content of the `FORMAT` file.
pub const FORMAT_LINE: &str = "audita-record v1\n";
pub(crate) const MAGIC: &[u8; 7] = SEGMENT_MAGIC;

/// The seven bytes every segment (a record file, or a bus record framed like one)
/// starts with; its kind byte follows.
pub const SEGMENT_MAGIC: &[u8; 7] = b"AUDSEG\x01";
/// Maximum frames per segment file written by [`write_record`].
pub const SEGMENT_FRAMES: usize = 4096;
/// The shortest item of any kind: a Merkle leaf with a one-character author
/// (1-byte length, 1 byte of name, 32-byte digest). Envelopes, receipts and epoch
/// headers carry a 64-byte signature and are longer. Shorter frames are damage and
/// are coalesced (see the module doc).
pub const MIN_FRAME_BYTES: usize = 34;

/// Encodes frames into a segment file body.
pub fn encode_segment(kind: u8, frames: &[&[u8]]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.push(kind);
    for f in frames {
        out.extend_from_slice(&(f.len() as u32).to_be_bytes());
        out.extend_from_slice(f);
    }
    out
}

pub(crate) fn key_lines<'a>(keys: impl Iterator<Item = (&'a str, &'a VerifyingKey)>) -> String {
    keys.map(|(n, k)| format!("{n} {}\n", STANDARD.encode(k.as_bytes())))
        .collect()
}

/// Where a record keeps the registry with `digest`.
pub fn registry_path(dir: &Path, digest: &Hash) -> PathBuf {
    dir.join("keys/registry")
        .join(format!("{}.json", hex::encode(digest)))
}

pub(crate) mod hex {
    pub fn decode_to_array(s: &str) -> Option<[u8; 32]> {
        if s.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, chunk) in s.as_bytes().chunks(2).enumerate() {
            let hi = (chunk[0] as char).to_digit(16)?;
            let lo = (chunk[1] as char).to_digit(16)?;
            out[i] = (hi * 16 + lo) as u8;
        }
        Some(out)
    }
    pub fn encode(d: &[u8]) -> String {
        d.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// The contents of `keys/log.vkey` (the logs' C2SP verifier keys, note type 0x01)
/// and `keys/keepers.vkey` (the keepers', cosignature/v1, type 0x04) for `keys`.
pub(crate) fn vkey_files(keys: &KeyRegistry) -> (String, String) {
    let logs = keys
        .logs()
        .map(|(n, k)| vkey(n, ED25519_NOTE_TYPE, k) + "\n")
        .collect();
    let keepers = keys
        .keepers()
        .map(|(n, k)| vkey(n, COSIGNATURE_V1_TYPE, k) + "\n")
        .collect();
    (logs, keepers)
}
