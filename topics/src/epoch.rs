//! `audita.epochs`: what the sealer decided, not what it read again — each epoch's
//! signed header, checkpoint, the leaves (ids) it sealed in log order and the
//! digests of the receipts sealed with them ([`EpochSeal`]). The bytes of the
//! messages travel once, on `audita.accepted`; a stage that needs them joins the two
//! topics by id (`audita_join`) into an [`EpochMessage`].
//!
//! Design constraints:
//! - Epoch numbers are the log's: consecutive, one writer. A restarted sealer
//!   republishes its last epoch (read back from disk, watermark 0, no positions), so
//!   the topic can hold one epoch number twice; every consumer takes each number
//!   once and skips one at or below the last it took (the join does).
//! - A seal names, for every partition of `audita.accepted` the sealer read, the
//!   offset of the last record it took before closing the epoch
//!   ([`EpochSeal::positions`]): every message it sealed so far, and every record it
//!   read and did not seal (a duplicate, a `late` envelope), lies at or below them. A
//!   reader that has read that far and still lacks a sealed message's bytes knows
//!   they are gone (the accepted topic's retention dropped them), not late.
//! - The segment kind differs from the former epoch message's (which carried the
//!   envelopes too), so an old reader refuses a seal instead of misreading it.

use audita_evidence::Hash;
use audita_record::{decode_segment, encode_segment};
use std::path::Path;

/// Segment kind of an epoch seal on `audita.epochs` (positions with the index of the
/// last frame taken in its record).
const EPOCH_SEAL_KIND: u8 = b'T';

/// Segment kind of the seals published before `audita.accepted` carried batches
/// (positions name whole records); still read.
const EPOCH_SEAL_KIND_V1: u8 = b'S';

/// The index of a position that names its whole record ([`EpochSeal::positions`]).
pub const WHOLE_RECORD: u32 = u32::MAX;

/// An epoch as published on `audita.epochs`: its seals and where the sealer stood
/// in `audita.accepted`, without the message bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpochSeal {
    /// Signed header bytes.
    pub header: Vec<u8>,
    /// Checkpoint note with co-signatures.
    pub checkpoint: Vec<u8>,
    /// The log's compact range before this epoch
    /// ([`audita_evidence::merkle::CompactRange::nodes`]): with the leaves, all a
    /// consumer needs to prove this epoch's messages, so it can start at any epoch
    /// (e.g. after the topic's retention dropped older ones).
    pub prefix: Vec<Hash>,
    /// Sealed leaves (`audita_evidence::MessageId::leaf_bytes`) in log order: the
    /// digest in each is the SHA-256 of the envelope's signed bytes.
    pub leaves: Vec<Vec<u8>>,
    /// SHA-256 of the signed bytes of each receipt that arrived with this epoch, in
    /// arrival order (a receipt older than the sealer's dedupe horizon may be named
    /// again by a later epoch).
    pub receipts: Vec<Hash>,
    /// (partition of `audita.accepted`, offset of the last record the sealer took
    /// from before closing, index of the last frame it took in that record),
    /// ascending by partition; empty on a republished epoch. The index is
    /// [`WHOLE_RECORD`] when the record was taken whole (always, in seals of the first
    /// format).
    pub positions: Vec<(u32, u64, u32)>,
    /// Event-time low watermark (the sealer's): every accepted message stamped
    /// earlier is sealed by now (0 until ingest watermarks cover every source
    /// partition).
    pub watermark: u64,
}

impl EpochSeal {
    /// Encodes as one segment: header, checkpoint, counts and watermark, prefix
    /// nodes, receipt digests, positions, then one frame per leaf.
    pub fn encode(&self) -> Vec<u8> {
        let counts: Vec<u8> = [
            self.leaves.len() as u64,
            self.receipts.len() as u64,
            self.positions.len() as u64,
            self.watermark,
        ]
        .iter()
        .flat_map(|n| n.to_be_bytes())
        .collect();
        let prefix: Vec<u8> = self.prefix.concat();
        let receipts: Vec<u8> = self.receipts.concat();
        let positions: Vec<u8> = self
            .positions
            .iter()
            .flat_map(|(p, o, i)| {
                p.to_be_bytes()
                    .into_iter()
                    .chain(o.to_be_bytes())
                    .chain(i.to_be_bytes())
            })
            .collect();
        let mut frames: Vec<&[u8]> = vec![
            &self.header,
            &self.checkpoint,
            &counts,
            &prefix,
            &receipts,
            &positions,
        ];
        frames.extend(self.leaves.iter().map(Vec::as_slice));
        encode_segment(EPOCH_SEAL_KIND, &frames)
    }

    /// Decodes [`Self::encode`]'s output (and the first format's); `None` on any
    /// malformation.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let v1 = bytes.get(7) == Some(&EPOCH_SEAL_KIND_V1);
        let kind = if v1 {
            EPOCH_SEAL_KIND_V1
        } else {
            EPOCH_SEAL_KIND
        };
        let width: u64 = if v1 { 12 } else { 16 };
        let frames = decode_segment(kind, bytes, Path::new("audita.epochs")).ok()?;
        // A damaged frame comes back holding the rest of the bytes, length prefix
        // included: the frames then no longer add up to the record.
        let framed: usize = 8 + frames.iter().map(|f| 4 + f.len()).sum::<usize>();
        if framed != bytes.len() {
            return None;
        }
        let mut frames = frames.into_iter();
        let header = frames.next()?;
        let checkpoint = frames.next()?;
        let counts = frames.next()?;
        if counts.len() != 32 {
            return None;
        }
        let n =
            |i: usize| u64::from_be_bytes(counts[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
        let (leaves, receipts, positions, watermark) = (n(0), n(1), n(2), n(3));
        let prefix = hashes(&frames.next()?)?;
        let receipt_digests = hashes(&frames.next()?)?;
        if receipt_digests.len() as u64 != receipts {
            return None;
        }
        let position_bytes = frames.next()?;
        if position_bytes.len() as u64 != positions.checked_mul(width)? {
            return None;
        }
        let positions: Vec<(u32, u64, u32)> = position_bytes
            .chunks_exact(width as usize)
            .map(|c| {
                (
                    u32::from_be_bytes(c[..4].try_into().unwrap_or([0; 4])),
                    u64::from_be_bytes(c[4..12].try_into().unwrap_or([0; 8])),
                    if v1 {
                        WHOLE_RECORD
                    } else {
                        u32::from_be_bytes(c[12..16].try_into().unwrap_or([0; 4]))
                    },
                )
            })
            .collect();
        let leaves_read: Vec<Vec<u8>> = frames.collect();
        if leaves_read.len() as u64 != leaves {
            return None;
        }
        Some(EpochSeal {
            header,
            checkpoint,
            prefix,
            leaves: leaves_read,
            receipts: receipt_digests,
            positions,
            watermark,
        })
    }

    /// The epoch's number, from its header (`None` if the header does not decode).
    pub fn number(&self) -> Option<u64> {
        audita_evidence::EpochHeader::decode(self.header.clone())
            .ok()
            .map(|h| h.number)
    }
}

/// Splits concatenated 32-byte digests; `None` when the length is not a multiple.
fn hashes(bytes: &[u8]) -> Option<Vec<Hash>> {
    if !bytes.len().is_multiple_of(32) {
        return None;
    }
    Some(
        bytes
            .chunks_exact(32)
            .map(|c| c.try_into().unwrap_or([0; 32]))
            .collect(),
    )
}

/// A sealed epoch with the bytes of what it sealed: an [`EpochSeal`] joined with
/// `audita.accepted` (`audita_join::Join`); everything a downstream stage needs to
/// extend its view of the record without reading the disk. Built in memory, never
/// published.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpochMessage {
    /// Signed header bytes.
    pub header: Vec<u8>,
    /// Checkpoint note with co-signatures.
    pub checkpoint: Vec<u8>,
    /// The log's compact range before this epoch (see [`EpochSeal::prefix`]).
    pub prefix: Vec<Hash>,
    /// Sealed leaves in log order.
    pub leaves: Vec<Vec<u8>>,
    /// The signed envelopes sealed in this epoch, in leaf order (a leaf whose bytes
    /// are gone from `audita.accepted` has none: see `audita_join`).
    pub envelopes: Vec<Vec<u8>>,
    /// Receipts that arrived with this epoch.
    pub receipts: Vec<Vec<u8>>,
    /// The seal's event-time low watermark.
    pub watermark: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seal() -> EpochSeal {
        EpochSeal {
            header: b"header".to_vec(),
            checkpoint: b"note\n".to_vec(),
            prefix: vec![[1; 32], [2; 32]],
            leaves: vec![b"leaf-a".to_vec(), b"leaf-b".to_vec()],
            receipts: vec![[3; 32]],
            positions: vec![(0, 17, 4), (3, u64::MAX, WHOLE_RECORD)],
            watermark: 1_234,
        }
    }

    #[test]
    fn a_seal_decodes_to_itself() {
        let s = seal();
        assert_eq!(EpochSeal::decode(&s.encode()), Some(s));
        let empty = EpochSeal {
            leaves: vec![],
            receipts: vec![],
            positions: vec![],
            prefix: vec![],
            ..seal()
        };
        assert_eq!(EpochSeal::decode(&empty.encode()), Some(empty));
    }

    #[test]
    fn a_seal_of_the_first_format_still_decodes_with_whole_records() {
        let s = seal();
        let counts: Vec<u8> = [2u64, 1, 2, s.watermark]
            .iter()
            .flat_map(|n| n.to_be_bytes())
            .collect();
        let prefix = s.prefix.concat();
        let receipts = s.receipts.concat();
        let positions: Vec<u8> = [(0u32, 17u64), (3, u64::MAX)]
            .iter()
            .flat_map(|(p, o)| p.to_be_bytes().into_iter().chain(o.to_be_bytes()))
            .collect();
        let mut frames: Vec<&[u8]> = vec![
            &s.header,
            &s.checkpoint,
            &counts,
            &prefix,
            &receipts,
            &positions,
        ];
        frames.extend(s.leaves.iter().map(Vec::as_slice));
        let old = encode_segment(EPOCH_SEAL_KIND_V1, &frames);
        let got = EpochSeal::decode(&old).expect("a first-format seal decodes");
        assert_eq!(
            got.positions,
            vec![(0, 17, WHOLE_RECORD), (3, u64::MAX, WHOLE_RECORD)]
        );
        assert_eq!(got.leaves, s.leaves);
    }

    #[test]
    fn every_truncation_or_miscount_is_refused() {
        let bytes = seal().encode();
        for cut in 0..bytes.len() {
            assert_eq!(EpochSeal::decode(&bytes[..cut]), None, "cut at {cut}");
        }
        // A count that disagrees with the frames.
        let mut s = seal();
        s.leaves.pop();
        let mut b = s.encode();
        // counts frame: after magic+kind (8), header frame (4+6), checkpoint (4+5), len (4)
        let at = 8 + 4 + 6 + 4 + 5 + 4;
        b[at + 7] = 2;
        assert_eq!(EpochSeal::decode(&b), None);
    }
}
