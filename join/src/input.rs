//! What a stage downstream of the sealer reads: sealed epochs with their bytes,
//! joined from `audita.epochs` (the seals) and `audita.accepted` (the bytes, read
//! once), plus the other records of the topics it reads (adverse declarations).
//! The slicer and the monitor read through it.
//!
//! Design constraints:
//! - Two consumers, so the join decides which topic to read next: the accepted
//!   topic while a seal waits for its bytes or while fewer than
//!   [`READ_AHEAD_BYTES`] are held ahead of their seals; the seal topic (and the
//!   others) while fewer than [`MAX_QUEUED_SEALS`] seals wait. Memory is thus
//!   bounded by the read-ahead and the span of offsets one epoch covers, whichever
//!   topic the broker serves faster — on a replay from the beginning too.
//! - A seal whose bytes do not come although the reader has read past its
//!   positions leaves without them at once ([`crate::state`]); one that names
//!   no positions (a republication) or whose partitions stop delivering leaves
//!   without them after [`GIVE_UP`] with no accepted record read. Either is logged
//!   as an error and counted ([`JoinStats::missing`]): the message is then judged
//!   missing downstream, never present.
//! - Like the stages it feeds, it commits no offsets: each process reads both topics
//!   from the beginning in its own groups and rebuilds its state.

use crate::state::{Join, JoinStats, Taken};
use audita_bus::{BusError, Consumer, Delivery};
use audita_topics::{EpochMessage, EpochSeal};
use std::time::{Duration, Instant};

/// Bytes of accepted records held ahead of their seals before the reader stops
/// reading the accepted topic (unless the head seal waits for bytes).
pub const READ_AHEAD_BYTES: usize = 64 << 20;

/// Seals queued before the reader stops reading the seal topic.
pub const MAX_QUEUED_SEALS: usize = 1024;

/// Wall time without an accepted record after which a waiting seal leaves without
/// the bytes it still lacks.
pub const GIVE_UP: Duration = Duration::from_secs(10);

/// Accepted records read per turn before the seal topic is looked at again.
const BURST: usize = 512;

/// One input of a stage reading through [`SealedInput`].
pub enum Input {
    /// A sealed epoch with its bytes, in epoch order.
    Epoch(EpochMessage),
    /// A record of another topic the stage reads.
    Record(Delivery),
}

/// The seal topic (and the stage's other topics) joined with the accepted topic.
pub struct SealedInput {
    records: Box<dyn Consumer>,
    accepted: Box<dyn Consumer>,
    epochs_topic: String,
    join: Join,
    /// The last time the join moved: a seal reached the head, or an accepted
    /// record was read.
    progress: Instant,
    missing_reported: u64,
}

impl SealedInput {
    /// Reads seals from `records`' deliveries on `epochs_topic` (its other topics
    /// pass through as [`Input::Record`]) and bytes from `accepted`.
    pub fn new(
        records: Box<dyn Consumer>,
        accepted: Box<dyn Consumer>,
        epochs_topic: &str,
    ) -> SealedInput {
        SealedInput {
            records,
            accepted,
            epochs_topic: epochs_topic.to_string(),
            join: Join::new(),
            progress: Instant::now(),
            missing_reported: 0,
        }
    }

    /// The join's counters.
    pub fn stats(&self) -> JoinStats {
        self.join.stats()
    }

    /// Bytes held ahead of their seals, and seals waiting for their bytes.
    pub fn backlog(&self) -> (usize, usize) {
        (self.join.held_bytes(), self.join.queued())
    }

    /// The next input, or `None` when none is ready within `timeout`.
    pub fn poll(&mut self, timeout: Duration) -> Result<Option<Input>, BusError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(epoch) = self.ready() {
                return Ok(Some(Input::Epoch(epoch)));
            }
            let mut moved = false;
            if self.join.waiting() || self.join.held_bytes() < READ_AHEAD_BYTES {
                for _ in 0..BURST {
                    let Some(d) = self.accepted.poll(Duration::ZERO)? else {
                        break;
                    };
                    self.join.take_accepted(d.partition, d.offset, &d.payload);
                    self.progress = Instant::now();
                    moved = true;
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if self.join.queued() < MAX_QUEUED_SEALS {
                // After a burst of bytes, a look at the seals without waiting: a
                // steady stream of bytes must not keep its seals unread.
                let wait = if moved {
                    Duration::ZERO
                } else {
                    left.min(Duration::from_millis(2))
                };
                if let Some(d) = self.records.poll(wait)? {
                    if d.topic != self.epochs_topic {
                        return Ok(Some(Input::Record(d)));
                    }
                    self.take_seal(&d);
                    continue;
                }
                if moved {
                    continue;
                }
            } else if !moved {
                // Seals enough: wait on the bytes they need.
                if let Some(d) = self.accepted.poll(left.min(Duration::from_millis(2)))? {
                    self.join.take_accepted(d.partition, d.offset, &d.payload);
                    self.progress = Instant::now();
                    continue;
                }
            }
            if Instant::now() >= deadline {
                return Ok(self.ready().map(Input::Epoch));
            }
        }
    }

    fn take_seal(&mut self, d: &Delivery) {
        let Some(seal) = EpochSeal::decode(&d.payload) else {
            tracing::warn!(offset = d.offset, "undecodable epoch seal skipped");
            return;
        };
        let empty = self.join.queued() == 0;
        match self.join.take_seal(seal) {
            Taken::Queued if empty => self.progress = Instant::now(),
            Taken::Queued => {}
            Taken::Repeated => {
                tracing::debug!(offset = d.offset, "republished epoch skipped")
            }
            Taken::Undecodable => {
                tracing::warn!(
                    offset = d.offset,
                    "epoch seal with an undecodable header skipped"
                )
            }
        }
    }

    /// The head epoch if it may leave, reporting what it lacks.
    fn ready(&mut self) -> Option<EpochMessage> {
        let give_up = self.join.queued() > 0 && self.progress.elapsed() >= GIVE_UP;
        let epoch = self.join.next(give_up)?;
        self.progress = Instant::now();
        let missing = self.join.stats().missing;
        if missing > self.missing_reported {
            tracing::error!(
                lacking = missing - self.missing_reported,
                missing_total = missing,
                "an epoch left without the bytes of messages it sealed (gone from audita.accepted, \
                 or the topic stopped delivering): they are judged missing downstream"
            );
            self.missing_reported = missing;
        }
        Some(epoch)
    }
}
