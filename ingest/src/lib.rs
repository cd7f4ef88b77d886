//! Ingest stage: consumes signed envelopes and receipts, checks form, citation rule
//! and signature, and passes accepted bytes on unchanged; everything else goes to the
//! suspect topic with the reason.
//!
//! Design constraints:
//! - Nothing is dropped silently: every input record is either forwarded to
//!   `audita.accepted` or quarantined to `audita.suspect` before its offset is
//!   committed ([`audita_bus::pump`] commits only after the producer flushed).
//! - Accepted records are framed as one kind byte ([`FRAME_ENVELOPE`] or
//!   [`FRAME_RECEIPT`]) followed by the exact signed bytes; nothing is re-encoded.
//! - A quarantine record is JSON [`Quarantined`], keyed by the source topic.
//! - After each batch, before its offsets commit, ingest sends a
//!   [`audita_sealer::stage::Watermark`] per source partition it took records from to
//!   every accepted partition ([`Watermarks`]), so the sealer knows how far event
//!   time has been forwarded whatever the number of ingest instances.

#![warn(missing_docs)]

use audita_bus::{topics, BusError, Delivery, Producer};
use audita_evidence::{KeyRegistry, Receipt, SignedEnvelope};

pub use audita_sealer::stage::{Watermark, FRAME_ENVELOPE, FRAME_RECEIPT};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// A record that failed ingest checks, as published on `audita.suspect`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Quarantined {
    /// Topic the bytes came from.
    pub source_topic: String,
    /// Partition they came from.
    pub partition: u32,
    /// Offset they came from.
    pub offset: u64,
    /// Short machine-readable reason (`decode`, `signature`, `citation`, `unknown_topic`).
    pub reason: String,
    /// Human-readable detail, one line.
    pub detail: String,
    /// The rejected bytes, hex.
    pub bytes_hex: String,
}

/// The verdict of ingest on one input record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Checked {
    /// Forward this frame to `audita.accepted` under this key.
    Accepted {
        /// Record key (author or recipient principal).
        key: String,
        /// Kind byte + exact signed bytes.
        frame: Vec<u8>,
        /// The record's own timestamp (event time).
        timestamp: u64,
    },
    /// Quarantine with the reason.
    Suspect(Quarantined),
}

/// Checks one delivery from `audita.envelopes` or `audita.receipts`.
pub fn check(d: &Delivery, keys: &KeyRegistry) -> Checked {
    let suspect = |reason: &str, detail: String| {
        Checked::Suspect(Quarantined {
            source_topic: d.topic.clone(),
            partition: d.partition,
            offset: d.offset,
            reason: reason.to_string(),
            detail: detail.replace('\n', " "),
            bytes_hex: hex::encode(&d.payload),
        })
    };
    if d.topic.ends_with(topics::RECEIPTS) {
        return match Receipt::decode(d.payload.clone()) {
            Err(e) => suspect("decode", format!("receipt: {e}")),
            Ok(r) => match r.verify(keys) {
                Err(e) => suspect("signature", format!("receipt: {e}")),
                Ok(()) => Checked::Accepted {
                    key: r.recipient().as_str().to_string(),
                    frame: frame(FRAME_RECEIPT, &d.payload),
                    timestamp: r.timestamp(),
                },
            },
        };
    }
    if !d.topic.ends_with(topics::ENVELOPES) {
        return suspect(
            "unknown_topic",
            format!("ingest does not read topic {}", d.topic),
        );
    }
    match SignedEnvelope::decode(d.payload.clone()) {
        Err(e) => suspect("decode", format!("envelope: {e}")),
        Ok(env) => match env.check(keys) {
            Err(audita_evidence::MessageCheck::Signature(e)) => suspect("signature", e.to_string()),
            Err(audita_evidence::MessageCheck::Envelope(e)) => suspect("citation", e.to_string()),
            Ok(()) => Checked::Accepted {
                key: env.envelope().author.as_str().to_string(),
                frame: frame(FRAME_ENVELOPE, &d.payload),
                timestamp: env.envelope().timestamp,
            },
        },
    }
}

fn frame(kind: u8, bytes: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(bytes.len() + 1);
    f.push(kind);
    f.extend_from_slice(bytes);
    f
}

/// Topic names of one pipeline instance (a prefix lets tests share a broker).
#[derive(Clone, Debug)]
pub struct Topics {
    /// Prefix prepended to every topic name (empty in production).
    pub prefix: String,
}

impl Topics {
    /// The full name of `base` (one of [`audita_bus::topics`]).
    pub fn name(&self, base: &str) -> String {
        format!("{}{}", self.prefix, base)
    }
}

/// Handles one delivery: forwards or quarantines it. Returns whether it was accepted.
pub fn handle(
    d: &Delivery,
    keys: &KeyRegistry,
    names: &Topics,
    out: &mut dyn Producer,
) -> Result<bool, BusError> {
    forward(check(d, keys), names, out)
}

fn forward(checked: Checked, names: &Topics, out: &mut dyn Producer) -> Result<bool, BusError> {
    match checked {
        Checked::Accepted { key, frame, .. } => {
            out.send(&names.name(topics::ACCEPTED), key.as_bytes(), &frame)?;
            Ok(true)
        }
        Checked::Suspect(q) => {
            tracing::warn!(reason = %q.reason, topic = %q.source_topic, partition = q.partition, offset = q.offset, "quarantined");
            let json = serde_json::to_vec(&q).map_err(|e| BusError::Permanent(e.to_string()))?;
            out.send(
                &names.name(topics::SUSPECT),
                q.source_topic.as_bytes(),
                &json,
            )?;
            Ok(false)
        }
    }
}

/// The event time ingest has forwarded per source partition, published as
/// [`Watermark`] frames to every accepted partition (see the module docs).
#[derive(Debug)]
pub struct Watermarks {
    times: BTreeMap<(String, u32), u64>,
    sources: u32,
    accepted_partitions: u32,
    dirty: bool,
    last_sent: Option<Instant>,
    every: Duration,
}

impl Watermarks {
    /// Watermarks of a deployment with `sources` source partitions (all input
    /// topics) and `accepted_partitions` partitions of `audita.accepted`, sent at
    /// most once per `every`.
    pub fn new(sources: u32, accepted_partitions: u32, every: Duration) -> Watermarks {
        Watermarks {
            times: BTreeMap::new(),
            sources,
            accepted_partitions,
            dirty: false,
            last_sent: None,
            every,
        }
    }

    /// Notes a forwarded (or quarantined) record of `d` stamped `time_ms`.
    pub fn observe(&mut self, d: &Delivery, time_ms: u64) {
        let t = self
            .times
            .entry((d.topic.clone(), d.partition))
            .or_insert(time_ms);
        if time_ms >= *t {
            *t = time_ms;
            self.dirty = true;
        }
    }

    /// Sends the watermarks if anything moved and `every` passed since the last send.
    pub fn publish(
        &mut self,
        out: &mut dyn Producer,
        accepted_topic: &str,
    ) -> Result<(), BusError> {
        if !self.dirty || self.last_sent.is_some_and(|t| t.elapsed() < self.every) {
            return Ok(());
        }
        for ((source, partition), time_ms) in &self.times {
            let frame = Watermark {
                source: source.clone(),
                partition: *partition,
                sources: self.sources,
                time_ms: *time_ms,
            }
            .frame();
            for p in 0..self.accepted_partitions {
                out.send_to(accepted_topic, p, b"watermark", &frame)?;
            }
        }
        self.dirty = false;
        self.last_sent = Some(Instant::now());
        Ok(())
    }
}

/// [`handle`] that also notes the record's event time in `marks`.
pub fn handle_marked(
    d: &Delivery,
    keys: &KeyRegistry,
    names: &Topics,
    marks: &mut Watermarks,
    out: &mut dyn Producer,
) -> Result<bool, BusError> {
    let checked = check(d, keys);
    if let Checked::Accepted { timestamp, .. } = &checked {
        marks.observe(d, *timestamp);
    }
    forward(checked, names, out)
}
