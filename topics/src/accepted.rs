//! Frames of `audita.accepted`: one kind byte, then the exact signed bytes of an
//! envelope or receipt that passed ingest, or the JSON of an ingest [`Watermark`].

/// Frame kind byte of an accepted envelope on `audita.accepted`.
pub const FRAME_ENVELOPE: u8 = b'E';
/// Frame kind byte of an accepted receipt on `audita.accepted`.
pub const FRAME_RECEIPT: u8 = b'R';
/// Frame kind byte of an ingest watermark on `audita.accepted` (JSON [`Watermark`]).
pub const FRAME_WATERMARK: u8 = b'W';

/// An ingest watermark, sent to every partition of `audita.accepted` after the
/// records it covers: ingest has forwarded every record it took from source
/// partition (`source`, `partition`) up to one stamped `time_ms`. Source partitions
/// are in time order (each is written by producers in time order), so once every
/// accepted partition carried a watermark of every one of the `sources` source
/// partitions, everything stamped before the smallest of them has reached the
/// sealer — whichever ingest instance owned which partition, and however their
/// outputs interleave.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Watermark {
    /// Source topic.
    pub source: String,
    /// Source partition.
    pub partition: u32,
    /// Number of source partitions of the deployment (all topics).
    pub sources: u32,
    /// Timestamp of the latest record forwarded from that partition.
    pub time_ms: u64,
}

impl Watermark {
    /// The accepted-topic frame.
    pub fn frame(&self) -> Vec<u8> {
        let mut f = vec![FRAME_WATERMARK];
        f.extend(serde_json::to_vec(self).unwrap_or_default());
        f
    }
}

/// An accepted frame, parsed by its kind byte (the signed bytes are not decoded).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// Signed envelope bytes.
    Envelope(&'a [u8]),
    /// Signed receipt bytes.
    Receipt(&'a [u8]),
    /// An ingest watermark.
    Watermark(Watermark),
}

impl<'a> Frame<'a> {
    /// Parses a frame; `None` for an empty frame, an unknown kind byte or a watermark
    /// that is not valid JSON.
    pub fn parse(bytes: &'a [u8]) -> Option<Frame<'a>> {
        match bytes.split_first()? {
            (&FRAME_ENVELOPE, rest) => Some(Frame::Envelope(rest)),
            (&FRAME_RECEIPT, rest) => Some(Frame::Receipt(rest)),
            (&FRAME_WATERMARK, rest) => serde_json::from_slice(rest).ok().map(Frame::Watermark),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watermark_frame_parses_back() {
        let w = Watermark {
            source: "audita.envelopes".into(),
            partition: 3,
            sources: 8,
            time_ms: 1_234,
        };
        assert_eq!(Frame::parse(&w.frame()), Some(Frame::Watermark(w)));
        assert_eq!(Frame::parse(b"Eabc"), Some(Frame::Envelope(b"abc")));
        assert_eq!(Frame::parse(b"Rxy"), Some(Frame::Receipt(b"xy")));
        for bad in [&b""[..], b"X", b"W{not json"] {
            assert_eq!(Frame::parse(bad), None, "{bad:?}");
        }
    }
}
