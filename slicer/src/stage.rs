//! The slicer stage: sealed epochs and adverse declarations in, self-contained
//! incident slices out.
//!
//! Design constraints:
//! - The citation graph grows only from sealed epochs (`audita.epochs`): a message
//!   enters the graph when an epoch seals it, so slices hold sealed messages only.
//! - A message's committed effect counts as realised when a sealed actuation report
//!   (`tool_output` of tool `actuator`) cites it.
//! - An adverse declaration (`audita.adverse`, the JSON of `audita-verdict`'s
//!   `AdverseDecl`) waits until every anchor it names is sealed, then its slice is
//!   emitted once, keyed by the incident name. Declarations whose anchors are never
//!   sealed are reported by [`SlicerStage::waiting`].
//! - A [`SliceBundle`] is self-contained: the declaration, the slice's signed
//!   envelopes and their receipts, and every epoch header, leaf list and checkpoint
//!   sealed so far, so an engine worker verifies it from scratch with public keys.

use crate::{EpochBatch, IncidentId, NodeId, Slicer};
use audita_bus::{topics, BusError, Consumer, Delivery, Producer};
use audita_evidence::{Payload, SignedEnvelope};
use audita_sealer::disk::{decode_segment, encode_segment};
use audita_sealer::stage::EpochMessage;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const BUNDLE_KIND: u8 = b'S';
const EPOCH_KIND: u8 = b'H';

/// A self-contained incident slice, as published on `audita.slices`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceBundle {
    /// The adverse declaration JSON, exactly as declared.
    pub declaration: Vec<u8>,
    /// Signed envelopes of the slice, in message-id order.
    pub envelopes: Vec<Vec<u8>>,
    /// Receipts of those envelopes.
    pub receipts: Vec<Vec<u8>>,
    /// Every sealed epoch so far: (header bytes, leaves).
    pub epochs: Vec<(Vec<u8>, Vec<Vec<u8>>)>,
    /// Every checkpoint note so far.
    pub checkpoints: Vec<Vec<u8>>,
}

impl SliceBundle {
    /// Encodes the bundle as one segment.
    pub fn encode(&self) -> Vec<u8> {
        let counts: Vec<u8> = [
            self.envelopes.len(),
            self.receipts.len(),
            self.epochs.len(),
            self.checkpoints.len(),
        ]
        .iter()
        .flat_map(|n| (*n as u64).to_be_bytes())
        .collect();
        let epochs: Vec<Vec<u8>> = self
            .epochs
            .iter()
            .map(|(h, leaves)| {
                let mut frames: Vec<&[u8]> = vec![h];
                frames.extend(leaves.iter().map(Vec::as_slice));
                encode_segment(EPOCH_KIND, &frames)
            })
            .collect();
        let mut frames: Vec<&[u8]> = vec![&self.declaration, &counts];
        frames.extend(self.envelopes.iter().map(Vec::as_slice));
        frames.extend(self.receipts.iter().map(Vec::as_slice));
        frames.extend(epochs.iter().map(Vec::as_slice));
        frames.extend(self.checkpoints.iter().map(Vec::as_slice));
        encode_segment(BUNDLE_KIND, &frames)
    }

    /// Decodes [`Self::encode`]'s output; `None` on any malformation.
    pub fn decode(bytes: &[u8]) -> Option<SliceBundle> {
        let frames = decode_segment(BUNDLE_KIND, bytes, Path::new("audita.slices")).ok()?;
        let mut it = frames.into_iter();
        let declaration = it.next()?;
        let counts = it.next()?;
        if counts.len() != 32 {
            return None;
        }
        let n = |i: usize| {
            u64::from_be_bytes(counts[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8])) as usize
        };
        let rest: Vec<Vec<u8>> = it.collect();
        if rest.len()
            != n(0)
                .checked_add(n(1))?
                .checked_add(n(2))?
                .checked_add(n(3))?
        {
            return None;
        }
        let mut it = rest.into_iter();
        let envelopes = it.by_ref().take(n(0)).collect();
        let receipts = it.by_ref().take(n(1)).collect();
        let mut epochs = Vec::new();
        for e in it.by_ref().take(n(2)) {
            let mut f = decode_segment(EPOCH_KIND, &e, Path::new("audita.slices"))
                .ok()?
                .into_iter();
            let header = f.next()?;
            epochs.push((header, f.collect()));
        }
        let checkpoints = it.collect();
        Some(SliceBundle {
            declaration,
            envelopes,
            receipts,
            epochs,
            checkpoints,
        })
    }
}

/// An adverse declaration waiting for its anchors to be sealed.
struct Waiting {
    incident: IncidentId,
    /// `[window_start_ms, window_end_ms]` of the declaration.
    window: (u64, u64),
    name: String,
    declaration: Vec<u8>,
    anchors: Vec<NodeId>,
    arrived: Instant,
    anchored_at: Option<Instant>,
}

/// Record time (ms) past a window's end after which the window counts as settled.
pub const GRACE_MS: u64 = 1_000;

/// The slicer stage's state.
pub struct SlicerStage {
    slicer: Slicer,
    envelopes: BTreeMap<NodeId, (u64, Vec<u8>)>,
    /// Sealed messages by (timestamp, id), for window queries.
    by_time: BTreeSet<(u64, NodeId)>,
    /// Citations of each sealed message.
    parents: BTreeMap<NodeId, Vec<NodeId>>,
    /// Number of the last epoch taken.
    last_epoch: Option<u64>,
    /// Event-time low watermark from the sealer: every message earlier is sealed.
    watermark: u64,
    /// Wall time after which an incomplete declaration is emitted as it stands.
    max_wait: Duration,
    receipts: BTreeMap<NodeId, Vec<Vec<u8>>>,
    epochs: Vec<(Vec<u8>, Vec<Vec<u8>>)>,
    checkpoints: Vec<Vec<u8>>,
    waiting: Vec<Waiting>,
    emitted: BTreeSet<String>,
    next_incident: IncidentId,
    seq: u64,
    topic_prefix: String,
    /// Slices emitted, with the time their declaration waited.
    pub emitted_latencies: Vec<Duration>,
}

/// Why the slicer stage stopped.
#[derive(Debug, thiserror::Error)]
pub enum SlicerError {
    /// The bus failed.
    #[error(transparent)]
    Bus(#[from] BusError),
}

fn parse_anchor(s: &str) -> Option<NodeId> {
    let (_, hex_digest) = s.rsplit_once(':')?;
    let bytes = hex::decode(hex_digest).ok()?;
    bytes.try_into().ok()
}

impl SlicerStage {
    /// A slicer stage with `workers` dataflow workers. `max_wait` bounds how long a
    /// declaration waits for the event-time watermark when the stream goes quiet
    /// (it must exceed the time a crashed upstream stage takes to come back, or a
    /// quiet stream's last windows are judged before they are complete).
    pub fn new(workers: usize, topic_prefix: &str, max_wait: Duration) -> SlicerStage {
        SlicerStage {
            slicer: Slicer::new(workers),
            envelopes: BTreeMap::new(),
            by_time: BTreeSet::new(),
            parents: BTreeMap::new(),
            last_epoch: None,
            watermark: 0,
            max_wait,
            receipts: BTreeMap::new(),
            epochs: Vec::new(),
            checkpoints: Vec::new(),
            waiting: Vec::new(),
            emitted: BTreeSet::new(),
            next_incident: 0,
            seq: 0,
            topic_prefix: topic_prefix.to_string(),
            emitted_latencies: Vec::new(),
        }
    }

    /// Declarations still waiting for anchors: (incident name, unsealed anchor count).
    pub fn waiting(&self) -> Vec<(String, usize)> {
        self.waiting
            .iter()
            .map(|w| {
                (
                    w.name.clone(),
                    w.anchors
                        .iter()
                        .filter(|a| !self.envelopes.contains_key(*a))
                        .count(),
                )
            })
            .collect()
    }

    /// Messages in the citation graph.
    pub fn graph_messages(&self) -> usize {
        self.envelopes.len()
    }

    /// Takes one sealed epoch into the graph. An epoch number already taken (the
    /// sealer republishes its last epoch after a restart) is ignored.
    pub fn add_epoch(&mut self, msg: EpochMessage) {
        let number = audita_evidence::EpochHeader::decode(msg.header.clone())
            .ok()
            .map(|h| h.number);
        if let (Some(n), Some(last)) = (number, self.last_epoch) {
            if n <= last {
                return;
            }
        }
        if number.is_some() {
            self.last_epoch = number;
        }
        let mut batch = EpochBatch::default();
        for bytes in msg.envelopes {
            let Ok(env) = SignedEnvelope::decode(bytes.clone()) else {
                continue;
            };
            let child = env.id().digest;
            for c in &env.envelope().citations {
                batch.cites.push(((child, c.digest), 1));
            }
            if let Payload::ToolOutput { tool, .. } = &env.envelope().payload {
                if tool == "actuator" {
                    for c in &env.envelope().citations {
                        batch.realised.push((c.digest, 1));
                    }
                }
            }
            self.seq += 1;
            self.by_time.insert((env.envelope().timestamp, child));
            self.parents.insert(
                child,
                env.envelope().citations.iter().map(|c| c.digest).collect(),
            );
            self.envelopes.insert(child, (self.seq, bytes));
        }
        for r in msg.receipts {
            if let Ok(receipt) = audita_evidence::Receipt::decode(r.clone()) {
                self.receipts
                    .entry(receipt.message().digest)
                    .or_default()
                    .push(r);
            }
        }
        self.watermark = self.watermark.max(msg.watermark);
        self.epochs.push((msg.header, msg.leaves));
        self.checkpoints.push(msg.checkpoint);
        self.slicer.apply(batch);
    }

    /// Takes one adverse declaration (JSON). Returns an error line for a malformed one.
    pub fn declare(&mut self, declaration: Vec<u8>) -> Result<(), String> {
        let v: serde_json::Value = serde_json::from_slice(&declaration)
            .map_err(|e| format!("adverse declaration is not JSON: {e}"))?;
        let name = v
            .get("incident")
            .and_then(|n| n.as_str())
            .ok_or("adverse declaration without incident name")?
            .to_string();
        let anchors = v
            .get("anchors")
            .and_then(|a| a.as_array())
            .map(|a| {
                a.iter()
                    .map(|s| {
                        s.as_str()
                            .and_then(parse_anchor)
                            .ok_or(format!("bad anchor {s}"))
                    })
                    .collect()
            })
            .unwrap_or(Ok(Vec::new()))?;
        if self.emitted.contains(&name) || self.waiting.iter().any(|w| w.name == name) {
            return Ok(()); // re-delivered declaration
        }
        let t_star = v
            .get("t_star_ms")
            .and_then(|t| t.as_u64())
            .ok_or("adverse declaration without t_star_ms")?;
        let start = v
            .get("window_start_ms")
            .and_then(|t| t.as_u64())
            .unwrap_or(0);
        let end = v
            .get("window_end_ms")
            .and_then(|t| t.as_u64())
            .unwrap_or(t_star);
        let incident = self.next_incident;
        self.next_incident += 1;
        self.waiting.push(Waiting {
            incident,
            window: (start, end),
            name,
            declaration,
            anchors,
            arrived: Instant::now(),
            anchored_at: None,
        });
        Ok(())
    }

    /// The messages a declaration's bundle carries: the citation closure of its
    /// anchors plus every sealed message of its window, by message id.
    fn members(&self, w: &Waiting) -> BTreeSet<NodeId> {
        let mut ids: BTreeSet<NodeId> = self.slicer.incident(w.incident).slice;
        ids.extend(
            self.by_time
                .range((w.window.0, [0u8; 32])..=(w.window.1, [0xffu8; 32]))
                .map(|(_, n)| *n),
        );
        ids
    }

    /// Emits the slice of every declaration that is complete: its anchors are sealed,
    /// every citation of every member resolves to a sealed message, and the record has
    /// moved past its window (the sealer's event-time watermark passed
    /// `window_end + GRACE_MS`, so every message of the window is sealed).
    /// Upstream partitions may seal a parent after its child, so completeness is
    /// waited for. After `max_wait` of wall time, a complete slice is emitted even if
    /// the stream went quiet, and an incomplete one once the record has moved past its
    /// window (what never arrived is then judged as missing); an incomplete slice of a
    /// window the record has not passed waits, however long a stage is down.
    pub fn emit_ready(&mut self, out: &mut dyn Producer) -> Result<usize, BusError> {
        let mut batch = EpochBatch::default();
        for w in &mut self.waiting {
            if w.anchored_at.is_none() && w.anchors.iter().all(|a| self.envelopes.contains_key(a)) {
                for a in &w.anchors {
                    batch.anchors.push(((w.incident, *a), 1));
                }
                w.anchored_at = Some(Instant::now());
            }
        }
        if !batch.anchors.is_empty() {
            self.slicer.apply(batch);
        }
        let topic = format!("{}{}", self.topic_prefix, topics::SLICES);
        let mut emitted = 0;
        for i in (0..self.waiting.len()).rev() {
            let w = &self.waiting[i];
            let waited_out = w.arrived.elapsed() >= self.max_wait;
            let settled = self.watermark >= w.window.1.saturating_add(GRACE_MS);
            let closed = w.anchored_at.is_some() && {
                let ids = self.members(w);
                ids.iter().all(|n| {
                    self.parents
                        .get(n)
                        .is_none_or(|ps| ps.iter().all(|p| self.envelopes.contains_key(p)))
                })
            };
            // Complete and settled: emit. Complete but the stream went quiet (no later
            // message moves the watermark): emit after max_wait. Incomplete although
            // the record moved past the window: the rest is missing evidence, emit
            // after max_wait. Incomplete and not settled (e.g. the sealer is down):
            // keep waiting — a delay must never turn into a different verdict.
            let ready = (closed && settled) || (waited_out && (closed || settled));
            if !ready {
                continue;
            }
            if w.anchored_at.is_none() {
                // Anchors never sealed: emit what the record holds (the verdict layer
                // reports the anchors as missing).
                let anchors: Vec<((IncidentId, NodeId), isize)> =
                    w.anchors.iter().map(|a| ((w.incident, *a), 1)).collect();
                self.slicer.apply(EpochBatch {
                    anchors,
                    ..Default::default()
                });
            }
            let w = self.waiting.remove(i);
            let ids = self.members(&w);
            // Canonical order (by message id), so the bundle does not depend on the
            // interleaving of partitions upstream.
            let bundle = SliceBundle {
                declaration: w.declaration.clone(),
                envelopes: ids
                    .iter()
                    .filter_map(|n| self.envelopes.get(n))
                    .map(|(_, b)| b.clone())
                    .collect(),
                receipts: ids
                    .iter()
                    .flat_map(|n| self.receipts.get(n).cloned().unwrap_or_default())
                    .collect(),
                epochs: self.epochs.clone(),
                checkpoints: self.checkpoints.clone(),
            };
            out.send(&topic, w.name.as_bytes(), &bundle.encode())?;
            self.emitted_latencies.push(w.arrived.elapsed());
            self.emitted.insert(w.name);
            emitted += 1;
        }
        if emitted > 0 {
            out.flush()?;
        }
        Ok(emitted)
    }

    /// Handles one delivery from `audita.epochs` or `audita.adverse`.
    pub fn handle(&mut self, d: &Delivery) -> Result<(), String> {
        if d.topic.ends_with(topics::EPOCHS) {
            let msg = EpochMessage::decode(&d.payload).ok_or("undecodable epoch message")?;
            self.add_epoch(msg);
            Ok(())
        } else if d.topic.ends_with(topics::ADVERSE) {
            self.declare(d.payload.clone())
        } else {
            Err(format!("slicer does not read topic {}", d.topic))
        }
    }

    /// Runs until `stop` is set or, with `max_idle`, until no input arrived for that
    /// long. The slicer commits no offsets: its state is a function of the epochs and
    /// declarations, so a restarted slicer re-reads both topics from the start and
    /// rebuilds it; slices it emits again are identical, and the sinks keep one verdict
    /// per incident.
    pub fn run(
        &mut self,
        input: &mut dyn Consumer,
        out: &mut dyn Producer,
        stop: &AtomicBool,
        max_idle: Option<Duration>,
    ) -> Result<(), SlicerError> {
        let mut idle_since = Instant::now();
        while !stop.load(Ordering::SeqCst) {
            match input.poll(Duration::from_millis(20))? {
                Some(d) => {
                    idle_since = Instant::now();
                    if let Err(e) = self.handle(&d) {
                        tracing::warn!(topic = %d.topic, offset = d.offset, error = %e, "slicer skipped a record");
                    }
                }
                None => {
                    self.emit_ready(out)?;
                    if max_idle.is_some_and(|m| idle_since.elapsed() >= m) {
                        break;
                    }
                }
            }
        }
        self.emit_ready(out)?;
        Ok(())
    }
}
