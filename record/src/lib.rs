//! The on-disk sealed record: a directory any party can verify offline with
//! public keys only.
//!
//! This crate is the format alone (files in, items out, and the writer the sealer
//! stage uses): it links no transport, so an offline verifier (`audita verify`, a
//! fuzz target, a third party's tool) depends on it without the pipeline.
//!
//! Its rooms, none reaching back into this root: [`layout`] (the `FORMAT` line,
//! segment framing, file names), [`read`] (bounded reads, the whole directory),
//! [`write`] ([`RecordWriter`]), [`tiles`] (the static tiled log beside it) and
//! [`report`] (the verify report, `audita.verify/v1`, with the trust it was
//! checked under).
//!
//! Design constraints (format `audita-record v1`; how versions change and which old
//! records every reader must keep reading: `record/FORMAT.md`, with the fixtures in
//! `record/fixtures/`):
//! ```text
//! DIR/FORMAT                         "audita-record v1\n" (exactly)
//! DIR/keys/principals.txt            "<name> <base64 Ed25519 public key>\n" per principal
//! DIR/keys/keepers.txt               same, one line per keeper (checkpoint co-signer)
//! DIR/keys/logs.txt                  same, one line per log (key name = checkpoint origin)
//! DIR/keys/registry/<hex>.json       a principal registry an epoch header names (audita.principals/v1;
//!                                    <hex> = its digest); the latest epoch's gives the principals'
//!                                    keys with their validity windows
//! DIR/segments/envelopes-NNNNNN.seg  framed signed envelopes, in append order
//! DIR/segments/receipts-NNNNNN.seg   framed signed receipts
//! DIR/epochs/epoch-NNNNNN.seg        frame 0: signed epoch header; frames 1..: leaves
//! DIR/checkpoints/checkpoint-NNNNNN.txt  C2SP checkpoint note with keeper co-signatures
//! DIR/payloads/<hex>.ct, <hex>.key   optional payload store: ciphertext and its key
//! DIR/payloads/<hex>.shredded        empty tombstone of a crypto-shredded payload
//! DIR/keys/log.vkey                  the log's C2SP verifier key (type 0x01), one line
//! DIR/keys/keepers.vkey              the keepers' C2SP verifier keys (cosignature/v1, type 0x04)
//! DIR/checkpoint                     the log as a C2SP static tiled log (c2sp.org/tlog-tiles):
//! DIR/tile/<L>/<N>[.p/<W>]           latest checkpoint, hash tiles and entry bundles of the
//! DIR/tile/entries/<N>[.p/<W>]       sealed leaves; written by the sealer after each epoch
//!                                    ([`tiles`]); optional (older records have none)
//! ```
//! - A payload is *shredded* only when its tombstone says so; a `.ct` whose `.key`
//!   is gone without a tombstone is a payload whose key is **missing** (a problem
//!   the verifier names), and a tombstone next to a key contradicts itself (the
//!   directory is not a record).
//! - A `.seg` file is the 8-byte magic `AUDSEG\x01` + kind byte (`E` envelopes,
//!   `R` receipts, `H` epoch), then frames `u32 big-endian length || bytes`.
//!   Frames hold the exact signed bytes; nothing is re-encoded on read.
//! - Reading is tolerant where the evidence can speak for itself: a frame whose
//!   length runs past the end of its file turns the rest of that file into one
//!   undecodable item, which the verifier reports (and whose sealed messages then
//!   show up as missing). A frame shorter than [`MIN_FRAME_BYTES`] cannot hold any
//!   item of the format (the shortest is a leaf with a one-character author), so a
//!   run of consecutive short frames is kept as one undecodable item holding the
//!   run's bytes: damage costs no more memory than its bytes. Only what makes the
//!   directory unreadable as a record — no `FORMAT`, a wrong magic, an unreadable
//!   key file, an I/O error, a limit exceeded — is a [`ReadError`].
//! - Every read is bounded ([`Limits`], each limit a one-line
//!   [`ReadError::TooLarge`] naming the flag that raises it); nothing reads a file
//!   to its end before checking it against a limit, so `/dev/zero` or an endless
//!   FIFO in place of any file ends the read at the limit. Defaults:
//!
//!   | limit | default | flag (`audita verify`, `audita verdict`) |
//!   |---|---|---|
//!   | all files of one record together | 1 GiB | `--max-record-bytes` |
//!   | one frame, and one file that is not a segment (key file, checkpoint note, payload file) | 16 MiB | `--max-frame-bytes` |
//!   | frames in one segment file | 1,048,576 (2^20) | `--max-segment-frames` |
//!   | one input file given on the command line (model, duties, adverse, `--checkpoint`, `--trust`) | 16 MiB | `--max-input-bytes` |
//!
//!   The sealer writes at most `epoch_messages + 1` frames per segment (`audita
//!   load` caps `epoch_messages` at 1,000,000) and a frame is one signed item
//!   (the bus carries at most 16 MiB per record), so every record the pipeline
//!   writes reads under the defaults up to 1 GiB in all. Verification then holds
//!   the record and its partition in memory: about 12x the record's bytes
//!   (BENCHMARKS.md).
//! - Files of one kind are read in file-name order (zero-padded numbers), so the
//!   record order is the append order. `keys/` holds public keys only.
//! - Writing creates files with their final content (no partial updates), each
//!   written atomically and durably (`audita_files::write_atomic`: temporary file,
//!   fsync, rename, fsync of the directory); the streaming sealer stage appends new
//!   numbered files rather than rewriting old ones.

#![warn(missing_docs)]
#![forbid(unsafe_code)]
#![warn(clippy::too_many_lines)]

pub mod layout;
pub mod read;
pub mod report;
pub mod tiles;
pub mod write;

pub use layout::{
    encode_segment, registry_path, FORMAT_LINE, MIN_FRAME_BYTES, SEGMENT_FRAMES, SEGMENT_MAGIC,
};
pub use read::*;
pub use write::{write_record, RecordWriter};

#[cfg(test)]
mod tests {
    use crate::layout::*;
    use crate::read::*;
    use crate::write::*;
    use audita_evidence::sample::sample_record;
    use audita_evidence::verify_record;
    use audita_evidence::PrincipalId;
    use std::fs;
    use std::path::Path;

    #[test]
    fn write_then_read_is_identity_and_certifies() {
        let s = sample_record(1, 30);
        let dir = tempfile::tempdir().unwrap();
        write_record(dir.path(), &s.record, &s.keys).unwrap();
        let (record, keys) = read_record(dir.path()).unwrap();
        assert_eq!(record, s.record);
        assert_eq!(keys, s.keys);
        assert!(verify_record(&record, &keys).is_clean());
    }

    #[test]
    fn reopened_writer_appends_after_existing_files() {
        let s = sample_record(6, 16);
        let dir = tempfile::tempdir().unwrap();
        let mut w = RecordWriter::create(dir.path(), &s.keys).unwrap();
        let (first, rest) = s.epochs.split_at(1);
        let n0 = first[0].leaves.len();
        w.write_signed_envelopes(&s.envelopes[..n0]).unwrap();
        let r: Vec<&[u8]> = s.receipts[..n0].iter().map(|r| r.as_bytes()).collect();
        w.write_receipts(&r).unwrap();
        w.write_epoch(&first[0]).unwrap();
        drop(w);
        let mut w = RecordWriter::open(dir.path()).unwrap();
        w.write_signed_envelopes(&s.envelopes[n0..]).unwrap();
        let r: Vec<&[u8]> = s.receipts[n0..].iter().map(|r| r.as_bytes()).collect();
        w.write_receipts(&r).unwrap();
        for e in rest {
            w.write_epoch(e).unwrap();
        }
        let (record, keys) = read_record(dir.path()).unwrap();
        assert!(verify_record(&record, &keys).is_clean());
        assert_eq!(record.envelopes, s.record.envelopes);
    }

    fn read(bytes: &[u8], limits: &Limits) -> Result<Vec<Vec<u8>>, ReadError> {
        read_segment(&mut &bytes[..], b'E', Path::new("x"), limits)
    }

    #[test]
    fn min_frame_bytes_is_the_shortest_item() {
        let id = audita_evidence::MessageId {
            author: PrincipalId::new("a").unwrap(),
            digest: [7; 32],
        };
        assert_eq!(id.leaf_bytes().len(), MIN_FRAME_BYTES);
        let s = sample_record(1, 4);
        let shortest = [
            &s.record.envelopes,
            &s.record.receipts,
            &s.record.checkpoints,
        ]
        .into_iter()
        .flatten()
        .map(Vec::len)
        .chain(s.record.epochs.iter().map(|e| e.header.len()))
        .min()
        .unwrap();
        assert!(shortest > MIN_FRAME_BYTES);
    }

    #[test]
    fn streamed_segment_equals_the_in_memory_decoder_on_honest_frames() {
        let frames: Vec<Vec<u8>> = (0..50).map(|i| vec![i as u8; 34 + i * 7]).collect();
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        let seg = encode_segment(b'E', &refs);
        assert_eq!(read(&seg, &Limits::default()).unwrap(), frames);
        assert_eq!(decode_segment(b'E', &seg, Path::new("x")).unwrap(), frames);
        // A truncated last frame: the rest of the file (length included) is one item.
        let cut = &seg[..seg.len() - 3];
        let got = read(cut, &Limits::default()).unwrap();
        assert_eq!(got[..49], frames[..49]);
        assert_eq!(got[49].len(), 4 + frames[49].len() - 3);
    }

    #[test]
    fn a_run_of_short_frames_is_one_item_of_its_bytes() {
        let long = vec![9u8; 40];
        let seg = encode_segment(b'E', &[&long, b"", b"", b"abc", &long, b"", &long, b"x"]);
        let got = read(&seg, &Limits::default()).unwrap();
        assert_eq!(
            got,
            vec![
                long.clone(),
                [
                    &0u32.to_be_bytes()[..],
                    &0u32.to_be_bytes()[..],
                    &3u32.to_be_bytes()[..],
                    &b"abc"[..]
                ]
                .concat(),
                long.clone(),
                0u32.to_be_bytes().to_vec(),
                long.clone(),
                [&1u32.to_be_bytes()[..], &b"x"[..]].concat(),
            ]
        );
        // A million empty frames: one item holding their 4 MB.
        let mut zeros = MAGIC.to_vec();
        zeros.push(b'E');
        zeros.resize(8 + 4 * 1_000_000, 0);
        let got = read(&zeros, &Limits::default()).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].len(), 4_000_000);
    }

    #[test]
    fn every_limit_is_a_one_line_error_naming_its_flag() {
        let f = vec![1u8; 100];
        let seg = encode_segment(b'E', &[&f, &f, &f]);
        let limits = Limits {
            segment_frames: 2,
            ..Limits::default()
        };
        let e = read(&seg, &limits).unwrap_err().to_string();
        assert!(
            e.contains("limit 2 frames per segment, raise with --max-segment-frames"),
            "{e}"
        );
        let limits = Limits {
            frame_bytes: 99,
            ..Limits::default()
        };
        let e = read(&seg, &limits).unwrap_err().to_string();
        assert!(e.contains("raise with --max-frame-bytes"), "{e}");
        // A length past the end is damage, not a limit: the rest is one item.
        let mut huge = MAGIC.to_vec();
        huge.push(b'E');
        huge.extend_from_slice(&u32::MAX.to_be_bytes());
        huge.extend_from_slice(&[5; 50]);
        assert_eq!(read(&huge, &limits).unwrap(), vec![huge[8..].to_vec()]);
        // The record budget.
        let s = sample_record(1, 30);
        let dir = tempfile::tempdir().unwrap();
        write_record(dir.path(), &s.record, &s.keys).unwrap();
        let limits = Limits {
            record_bytes: 5_000,
            ..Limits::default()
        };
        let e = read_dir(dir.path(), &limits).unwrap_err().to_string();
        assert!(e.contains("raise with --max-record-bytes"), "{e}");
        assert!(!e.contains('\n'));
        let whole = read_dir(dir.path(), &Limits::default()).unwrap();
        assert_eq!(whole.record, s.record);
    }

    #[test]
    fn a_deleted_key_is_missing_not_shredded() {
        let s = sample_record(1, 30);
        let dir = tempfile::tempdir().unwrap();
        let mut w = RecordWriter::create(dir.path(), &s.keys).unwrap();
        w.write_payloads(&s.payloads).unwrap();
        let store = read_payloads(dir.path()).unwrap().unwrap();
        let statuses: Vec<_> = store.entries().map(|(d, _)| store.status(d)).collect();
        assert!(statuses.contains(&audita_evidence::PayloadStatus::Shredded));
        assert!(statuses.contains(&audita_evidence::PayloadStatus::Available));
        let key = fs::read_dir(dir.path().join("payloads"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "key"))
            .unwrap();
        fs::remove_file(&key).unwrap();
        let store = read_payloads(dir.path()).unwrap().unwrap();
        let statuses: Vec<_> = store.entries().map(|(d, _)| store.status(d)).collect();
        assert!(statuses.contains(&audita_evidence::PayloadStatus::KeyMissing));
        assert_eq!(
            statuses
                .iter()
                .filter(|s| **s == audita_evidence::PayloadStatus::Shredded)
                .count(),
            1,
            "only the payload with a tombstone is shredded"
        );
        // A tombstone next to a key contradicts itself.
        let tomb = key.with_extension("shredded");
        fs::write(&tomb, b"").unwrap();
        fs::write(&key, [0u8; 32]).unwrap();
        let e = read_payloads(dir.path()).unwrap_err().to_string();
        assert!(e.contains("still has its key"), "{e}");
    }

    #[test]
    fn truncated_frame_becomes_one_reported_item() {
        let seg = encode_segment(b'E', &[b"abc", b"defg"]);
        let cut = &seg[..seg.len() - 1];
        let frames = decode_segment(b'E', cut, Path::new("x")).unwrap();
        assert_eq!(frames.len(), 2);
        assert_eq!(frames[0], b"abc");
    }
}
