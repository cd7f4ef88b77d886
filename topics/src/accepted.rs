//! Records of `audita.accepted`: **batches** of frames ([`encode_batch`], an
//! `audita-record` segment of kind [`BATCH_KIND`]), one per ingest batch and accepted
//! partition; each frame is one kind byte, then the exact signed bytes of an envelope
//! or receipt that passed ingest, or the JSON of an ingest [`Watermark`]. A record
//! that is a single frame (what ingest published before batches) still reads, as a
//! batch of one ([`frames`]).
//!
//! Design constraints:
//! - A batch is paid for once by the broker and by every reader (one record, one
//!   fetch, one allocation), whatever the number of frames in it; a frame keeps its
//!   position as (record offset, index in the record).
//! - Frames keep their order: an author's messages go to one partition, in the
//!   order ingest read them, and a batch's watermarks follow its messages.
//! - A batch stays below [`MAX_BATCH_BYTES`] (ingest starts another record), far below
//!   the bus's record limit.
//! - Decoding is total: a damaged batch yields the frames before the damage and
//!   says it was damaged ([`Frames::damaged`]); never a panic.

/// Segment kind of a batch record on `audita.accepted`.
pub const BATCH_KIND: u8 = b'A';

/// Bytes at which ingest starts another batch record for the same partition.
pub const MAX_BATCH_BYTES: usize = 1 << 20;

/// One batch record holding `frames` in order.
pub fn encode_batch(frames: &[&[u8]]) -> Vec<u8> {
    audita_record::encode_segment(BATCH_KIND, frames)
}

/// The frames of one `audita.accepted` record, in order, borrowed from it: a batch's
/// frames, or the record itself when it is a single frame.
pub fn frames(record: &[u8]) -> Frames<'_> {
    let batch = record.len() >= 8
        && &record[..7] == audita_record::SEGMENT_MAGIC
        && record[7] == BATCH_KIND;
    Frames {
        rest: if batch { &record[8..] } else { record },
        single: !batch,
        damaged: false,
    }
}

/// Iterator over the frames of one accepted record ([`frames`]).
pub struct Frames<'a> {
    rest: &'a [u8],
    single: bool,
    damaged: bool,
}

impl Frames<'_> {
    /// Whether the record was cut or overlong where a frame should have been: the
    /// frames before the damage were yielded, nothing after it.
    pub fn damaged(&self) -> bool {
        self.damaged
    }
}

impl<'a> Iterator for Frames<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.single {
            self.single = false;
            let all = std::mem::take(&mut self.rest);
            return (!all.is_empty()).then_some(all);
        }
        if self.rest.is_empty() {
            return None;
        }
        let Some((len, body)) = self.rest.split_first_chunk::<4>() else {
            self.damaged = true;
            self.rest = &[];
            return None;
        };
        let len = u32::from_be_bytes(*len) as usize;
        if len > body.len() {
            self.damaged = true;
            self.rest = &[];
            return None;
        }
        let (frame, rest) = body.split_at(len);
        self.rest = rest;
        Some(frame)
    }
}

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

    #[test]
    fn a_batch_yields_its_frames_in_order_and_a_single_frame_is_a_batch_of_one() {
        let w = Watermark {
            source: "audita.envelopes".into(),
            partition: 0,
            sources: 1,
            time_ms: 7,
        }
        .frame();
        let batch = encode_batch(&[b"Eone", b"Rtwo", &w]);
        let got: Vec<&[u8]> = frames(&batch).collect();
        assert_eq!(got, vec![&b"Eone"[..], b"Rtwo", &w[..]]);
        assert_eq!(frames(b"Ealone").collect::<Vec<_>>(), vec![&b"Ealone"[..]]);
        assert_eq!(frames(b"").count(), 0);
        assert_eq!(frames(&encode_batch(&[])).count(), 0);
    }

    #[test]
    fn a_damaged_batch_yields_what_precedes_the_damage_and_says_so() {
        let batch = encode_batch(&[b"Eone", b"Rtwo"]);
        for cut in 9..batch.len() {
            let mut it = frames(&batch[..cut]);
            let got: Vec<&[u8]> = it.by_ref().collect();
            assert!(got.len() < 2, "cut at {cut}");
            assert!(
                it.damaged() || got.len() == 1 && cut == 8 + 4 + 4,
                "cut at {cut}"
            );
        }
        let mut it = frames(&batch);
        assert_eq!(it.by_ref().count(), 2);
        assert!(!it.damaged());
    }
}
