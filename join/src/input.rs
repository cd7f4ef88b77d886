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

use crate::state::{Join, JoinStats, Share, Taken};
use audita_bus::{BusError, Consumer, Delivery};
use audita_topics::EpochSeal;
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

/// How often the read positions are committed (see [`SealedInput`]).
pub const KEEP_POSITIONS_EVERY: Duration = Duration::from_secs(1);

/// How far one consumer has read: the last offset delivered per topic and
/// partition, and whether that moved since it was last committed.
#[derive(Default)]
struct Positions {
    read: std::collections::BTreeMap<(String, u32), u64>,
    moved: bool,
}

impl Positions {
    fn note(&mut self, d: &Delivery) {
        self.read.insert((d.topic.clone(), d.partition), d.offset);
        self.moved = true;
    }

    /// Commits the positions read to `consumer`'s group (the offsets after them).
    fn keep(&mut self, consumer: &mut dyn Consumer) {
        if !std::mem::take(&mut self.moved) {
            return;
        }
        let at: Vec<Delivery> = self
            .read
            .iter()
            .map(|((topic, partition), offset)| Delivery {
                topic: topic.clone(),
                partition: *partition,
                offset: *offset,
                key: Vec::new(),
                payload: Vec::new(),
            })
            .collect();
        if let Err(e) = consumer.commit_all(&at.iter().collect::<Vec<_>>()) {
            // Only a rebalance reads these; the next turn commits again.
            tracing::debug!(error = %e, "read positions not committed");
            self.moved = true;
        }
    }
}

/// One input of a stage reading through [`SealedInput`].
pub enum Input {
    /// A sealed epoch with its bytes (those of the reader's share of the accepted
    /// partitions), in epoch order.
    Epoch(Share),
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
    /// How far each consumer has read, committed every [`KEEP_POSITIONS_EVERY`].
    /// The stage's state is in memory and its group is its process's own, so these
    /// offsets serve one case: a member that missed its session (a paused process,
    /// a partition from the broker) is removed from its group and rejoins, and its
    /// partitions restart at the group's committed offsets. Without them it read
    /// every topic again from the earliest offset — at 400 robots, minutes of
    /// accepted bytes held in memory before the head seal's were reached again.
    positions: (Positions, Positions),
    kept_at: Instant,
}

impl SealedInput {
    /// Reads seals from `records`' deliveries on `epochs_topic` (its other topics
    /// pass through as [`Input::Record`]) and bytes from `accepted`.
    pub fn new(
        records: Box<dyn Consumer>,
        accepted: Box<dyn Consumer>,
        epochs_topic: &str,
    ) -> SealedInput {
        SealedInput::with_join(records, accepted, epochs_topic, Join::new())
    }

    /// [`SealedInput::new`] for a cluster member that reads the accepted partitions
    /// `own` only (`accepted` must be assigned exactly those): each epoch leaves with
    /// the bytes of those partitions ([`Join::of_partitions`]).
    pub fn of_partitions(
        records: Box<dyn Consumer>,
        accepted: Box<dyn Consumer>,
        epochs_topic: &str,
        own: &[u32],
    ) -> SealedInput {
        SealedInput::with_join(
            records,
            accepted,
            epochs_topic,
            Join::of_partitions(own.iter().copied()),
        )
    }

    fn with_join(
        records: Box<dyn Consumer>,
        accepted: Box<dyn Consumer>,
        epochs_topic: &str,
        join: Join,
    ) -> SealedInput {
        SealedInput {
            records,
            accepted,
            epochs_topic: epochs_topic.to_string(),
            join,
            progress: Instant::now(),
            missing_reported: 0,
            positions: Default::default(),
            kept_at: Instant::now(),
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
        if self.kept_at.elapsed() >= KEEP_POSITIONS_EVERY {
            self.positions.0.keep(self.records.as_mut());
            self.positions.1.keep(self.accepted.as_mut());
            self.kept_at = Instant::now();
        }
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
                    self.positions.1.note(&d);
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
                    self.positions.0.note(&d);
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
                    self.positions.1.note(&d);
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
    fn ready(&mut self) -> Option<Share> {
        let give_up = self.join.queued() > 0 && self.progress.elapsed() >= GIVE_UP;
        let epoch = self.join.next_share(give_up)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use audita_bus::embedded::EmbeddedBus;
    use audita_bus::Producer;

    /// A member that leaves and rejoins its group (a missed session after a pause
    /// or a partition) resumes where it read: what it already passed on is not
    /// delivered again, which from the earliest offset it would be.
    #[test]
    fn a_rejoined_member_resumes_where_it_read() {
        let bus = EmbeddedBus::new(1);
        let mut p = bus.producer();
        for i in 0..3u8 {
            p.send("adverse", b"k", &[i]).unwrap();
        }
        let mut input = SealedInput::new(
            Box::new(bus.consumer("slicer", &["epochs", "adverse"]).unwrap()),
            Box::new(bus.consumer("slicer-accepted", &["accepted"]).unwrap()),
            "epochs",
        );
        let mut read = Vec::new();
        let drain = |input: &mut SealedInput, read: &mut Vec<Vec<u8>>| {
            while let Some(got) = input.poll(Duration::from_millis(20)).unwrap() {
                if let Input::Record(d) = got {
                    read.push(d.payload);
                }
            }
        };
        drain(&mut input, &mut read);
        assert_eq!(read, vec![vec![0], vec![1], vec![2]]);
        // The positions are kept at the next poll after KEEP_POSITIONS_EVERY.
        std::thread::sleep(KEEP_POSITIONS_EVERY);
        drain(&mut input, &mut read);
        // A second member joins and leaves: the group rebalances.
        drop(bus.consumer("slicer", &["epochs", "adverse"]).unwrap());
        p.send("adverse", b"k", &[3]).unwrap();
        drain(&mut input, &mut read);
        assert_eq!(
            read,
            vec![vec![0], vec![1], vec![2], vec![3]],
            "records read again after the rebalance"
        );
    }
}
