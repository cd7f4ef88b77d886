//! `audita.epochs`: a sealed epoch with everything a downstream stage needs to extend
//! its view of the record without reading the disk.
//!
//! Design constraints:
//! - Epoch numbers are the log's: consecutive, one writer. A restarted sealer
//!   republishes its last epoch (read back from disk, watermark 0), so the topic can
//!   hold one epoch number twice; every consumer takes each number once and skips
//!   one at or below the last it took (the slicer and the monitor do).

use audita_evidence::Hash;
use audita_record::{decode_segment, encode_segment};
use std::path::Path;

/// Segment kind of a published epoch on `audita.epochs`.
const EPOCH_MESSAGE_KIND: u8 = b'P';

/// An epoch as published on `audita.epochs`: everything a downstream stage needs to
/// extend its view of the record without reading the disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpochMessage {
    /// Signed header bytes.
    pub header: Vec<u8>,
    /// Checkpoint note with co-signatures.
    pub checkpoint: Vec<u8>,
    /// The log's compact range before this epoch ([`audita_evidence::merkle::CompactRange::nodes`]): with the
    /// leaves, all a consumer needs to prove this epoch's messages, so it can start
    /// at any epoch (e.g. after the topic's retention dropped older ones).
    pub prefix: Vec<Hash>,
    /// Sealed leaves (`audita_evidence::MessageId::leaf_bytes`) in log order.
    pub leaves: Vec<Vec<u8>>,
    /// The signed envelopes sealed in this epoch, in leaf order.
    pub envelopes: Vec<Vec<u8>>,
    /// Receipts that arrived with this epoch.
    pub receipts: Vec<Vec<u8>>,
    /// Event-time low watermark (the sealer's): every accepted message
    /// stamped earlier is sealed by now (0 until ingest watermarks cover every source
    /// partition).
    pub watermark: u64,
}

impl EpochMessage {
    /// Encodes as one segment: header, checkpoint, counts, prefix nodes, leaves,
    /// envelopes, receipts.
    pub fn encode(&self) -> Vec<u8> {
        let counts: Vec<u8> = [
            self.leaves.len() as u64,
            self.envelopes.len() as u64,
            self.receipts.len() as u64,
            self.watermark,
        ]
        .iter()
        .flat_map(|n| n.to_be_bytes())
        .collect();
        let prefix: Vec<u8> = self.prefix.concat();
        let mut frames: Vec<&[u8]> = vec![&self.header, &self.checkpoint, &counts, &prefix];
        frames.extend(self.leaves.iter().map(Vec::as_slice));
        frames.extend(self.envelopes.iter().map(Vec::as_slice));
        frames.extend(self.receipts.iter().map(Vec::as_slice));
        encode_segment(EPOCH_MESSAGE_KIND, &frames)
    }

    /// Decodes [`Self::encode`]'s output; `None` on any malformation.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let mut frames = decode_segment(EPOCH_MESSAGE_KIND, bytes, Path::new("audita.epochs"))
            .ok()?
            .into_iter();
        let header = frames.next()?;
        let checkpoint = frames.next()?;
        let counts = frames.next()?;
        if counts.len() != 32 {
            return None;
        }
        let prefix_bytes = frames.next()?;
        if prefix_bytes.len() % 32 != 0 {
            return None;
        }
        let prefix = prefix_bytes
            .chunks_exact(32)
            .map(|c| c.try_into().unwrap_or([0; 32]))
            .collect();
        let n = |i: usize| {
            u64::from_be_bytes(counts[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8])) as usize
        };
        let (l, e, r) = (n(0), n(1), n(2));
        let watermark = n(3) as u64;
        let rest: Vec<Vec<u8>> = frames.collect();
        if rest.len() != l.checked_add(e)?.checked_add(r)? {
            return None;
        }
        let mut it = rest.into_iter();
        let leaves = it.by_ref().take(l).collect();
        let envelopes = it.by_ref().take(e).collect();
        let receipts = it.collect();
        Some(EpochMessage {
            header,
            checkpoint,
            prefix,
            leaves,
            envelopes,
            receipts,
            watermark,
        })
    }
}
