//! `audita.slices`: a self-contained incident slice, what an engine worker judges.

use audita_evidence::ProvenSlice;
use audita_record::{decode_segment, encode_segment};
use std::path::Path;

const BUNDLE_KIND: u8 = b'S';

/// A self-contained incident slice, as published on `audita.slices`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceBundle {
    /// The adverse declaration JSON, exactly as declared.
    pub declaration: Vec<u8>,
    /// The slice's messages in message-id order, with their proofs of sealing.
    pub evidence: ProvenSlice,
}

impl SliceBundle {
    /// Encodes the bundle as one segment: declaration, proven slice.
    pub fn encode(&self) -> Vec<u8> {
        let evidence = self.evidence.encode();
        encode_segment(BUNDLE_KIND, &[&self.declaration, &evidence])
    }

    /// Decodes [`Self::encode`]'s output; `None` on any malformation.
    pub fn decode(bytes: &[u8]) -> Option<SliceBundle> {
        let frames = decode_segment(BUNDLE_KIND, bytes, Path::new("audita.slices")).ok()?;
        let [declaration, evidence]: [Vec<u8>; 2] = frames.try_into().ok()?;
        Some(SliceBundle {
            declaration,
            evidence: ProvenSlice::decode(&evidence).ok()?,
        })
    }
}
