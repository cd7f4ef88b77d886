//! The transport the pipeline stages share.
//!
//! Every stage talks to one [`Bus`]: either the embedded in-process log
//! ([`embedded::EmbeddedBus`], used by `audita demo` with no external service) or an
//! Apache Kafka cluster ([`kafka::KafkaBus`], used in tests and deployments). The
//! stages do not know which one they run on: one code path, two transports.
//!
//! Design constraints:
//! - A topic is a set of partitions; a record's partition is a pure function of its
//!   key ([`partition_for`] on the embedded bus, librdkafka's default partitioner on
//!   Kafka), so all records of one key keep their order.
//! - Delivery is at-least-once: a consumer sees every record of its assigned
//!   partitions from the group's committed offset on, and a record is re-delivered
//!   after a crash unless its offset was committed. Stages make processing idempotent
//!   (the sealer dedupes by message id) so re-delivery never changes a result.
//! - Errors say whether retrying can help ([`BusError::is_transient`]); back-pressure
//!   is its own kind ([`BusError::Backpressure`]).

#![warn(missing_docs)]
#![warn(clippy::too_many_lines)]

pub mod embedded;
pub mod kafka;
pub mod testing;

use std::time::Duration;

/// A record read from the bus.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// Topic the record was read from.
    pub topic: String,
    /// Partition within the topic.
    pub partition: u32,
    /// Offset within the partition.
    pub offset: u64,
    /// The record key.
    pub key: Vec<u8>,
    /// The record bytes, exactly as produced.
    pub payload: Vec<u8>,
}

/// Failure of a bus operation.
#[derive(Debug, thiserror::Error)]
pub enum BusError {
    /// The broker could not be reached or timed out; retrying with backoff can help.
    #[error("bus temporarily unavailable: {0}")]
    Transient(String),
    /// The request can never succeed as made (bad configuration, unknown topic, oversized record).
    #[error("bus rejected the request: {0}")]
    Permanent(String),
    /// The topic is full for now: the producer must slow down and retry.
    #[error("back-pressure on topic {topic}: {pending} records pending (limit {limit})")]
    Backpressure {
        /// The topic that pushed back.
        topic: String,
        /// Records not yet consumed by the slowest group.
        pending: u64,
        /// The configured limit.
        limit: u64,
    },
}

impl BusError {
    /// Whether retrying the same operation later can succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, BusError::Transient(_) | BusError::Backpressure { .. })
    }
}

/// Sends records to topics.
pub trait Producer: Send {
    /// Queues one record to `partition`, or to the partition of its key when `None`;
    /// it is durable once [`Producer::flush`] returns `Ok`.
    fn send_record(
        &mut self,
        topic: &str,
        partition: Option<u32>,
        key: &[u8],
        payload: &[u8],
    ) -> Result<(), BusError>;
    /// Queues one record to the partition of its key.
    fn send(&mut self, topic: &str, key: &[u8], payload: &[u8]) -> Result<(), BusError> {
        self.send_record(topic, None, key, payload)
    }
    /// Queues one record to an explicit partition (e.g. a watermark every partition
    /// of a topic must see, in order after the records before it).
    fn send_to(
        &mut self,
        topic: &str,
        partition: u32,
        key: &[u8],
        payload: &[u8],
    ) -> Result<(), BusError> {
        self.send_record(topic, Some(partition), key, payload)
    }
    /// Blocks until every queued record is acknowledged, or fails naming why.
    fn flush(&mut self) -> Result<(), BusError>;
}

/// Reads records of the partitions assigned to this member of a consumer group.
pub trait Consumer: Send {
    /// Returns the next record, or `None` when nothing arrived within `timeout`.
    fn poll(&mut self, timeout: Duration) -> Result<Option<Delivery>, BusError>;
    /// Commits the group's offset past `delivery` (and everything before it in its partition).
    fn commit(&mut self, delivery: &Delivery) -> Result<(), BusError>;
    /// Commits past each of `deliveries` (one per partition) in one request, without
    /// waiting for the broker's answer where the transport allows: callers commit only
    /// what is already durable downstream, so a commit lost in a crash only means a
    /// re-delivery, which every stage deduplicates.
    fn commit_all(&mut self, deliveries: &[&Delivery]) -> Result<(), BusError> {
        for d in deliveries {
            self.commit(d)?;
        }
        Ok(())
    }
}

/// Largest record a stage may produce (an epoch or a slice bundle): 16 MiB. The Kafka
/// transport sets it on its producers and on every topic it creates.
pub const MAX_RECORD_BYTES: usize = 16 << 20;

/// A topic to create, with its partition count.
#[derive(Clone, Debug)]
pub struct TopicSpec {
    /// Topic name.
    pub name: String,
    /// Number of partitions (at least 1).
    pub partitions: u32,
}

/// One of the two transports.
#[derive(Clone)]
pub enum Bus {
    /// In-process log, no external service.
    Embedded(embedded::EmbeddedBus),
    /// An Apache Kafka cluster.
    Kafka(kafka::KafkaBus),
}

impl Bus {
    /// A producer on this bus.
    pub fn producer(&self) -> Result<Box<dyn Producer>, BusError> {
        match self {
            Bus::Embedded(b) => Ok(Box::new(b.producer())),
            Bus::Kafka(b) => Ok(Box::new(b.producer()?)),
        }
    }

    /// A member of consumer group `group` subscribed to `topics`.
    pub fn consumer(&self, group: &str, topics: &[&str]) -> Result<Box<dyn Consumer>, BusError> {
        match self {
            Bus::Embedded(b) => Ok(Box::new(b.consumer(group, topics)?)),
            Bus::Kafka(b) => Ok(Box::new(b.consumer(group, topics)?)),
        }
    }

    /// A reader of the partitions `partitions` of `topic` only, from their beginning,
    /// outside any group's assignment (a slicer cluster member's share: the split
    /// is fixed by the cluster, never moved by a rebalance); it commits to `group`.
    pub fn consumer_of(
        &self,
        group: &str,
        topic: &str,
        partitions: &[u32],
    ) -> Result<Box<dyn Consumer>, BusError> {
        match self {
            Bus::Embedded(b) => Ok(Box::new(b.consumer_of(group, topic, partitions)?)),
            Bus::Kafka(b) => Ok(Box::new(b.consumer_of(group, topic, partitions)?)),
        }
    }

    /// Creates the topics that do not exist yet (existing ones are left as they are).
    pub fn ensure_topics(&self, specs: &[TopicSpec]) -> Result<(), BusError> {
        match self {
            Bus::Embedded(b) => {
                for s in specs {
                    b.create_topic(&s.name, s.partitions)?;
                }
                Ok(())
            }
            Bus::Kafka(b) => b.ensure_topics(specs),
        }
    }

    /// A short name of the transport for logs and summaries.
    pub fn transport(&self) -> &'static str {
        match self {
            Bus::Embedded(_) => "embedded",
            Bus::Kafka(_) => "kafka",
        }
    }
}

/// The partition of `key` among `partitions`: FNV-1a of the key, so the embedded bus
/// is deterministic across runs and platforms.
pub fn partition_for(key: &[u8], partitions: u32) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % u64::from(partitions.max(1))) as u32
}

/// Polls `consumer` until `n` records arrived or `deadline` passed; returns what arrived.
pub fn drain(
    consumer: &mut dyn Consumer,
    n: usize,
    deadline: Duration,
) -> Result<Vec<Delivery>, BusError> {
    let start = std::time::Instant::now();
    let mut out = Vec::with_capacity(n);
    while out.len() < n && start.elapsed() < deadline {
        if let Some(d) = consumer.poll(Duration::from_millis(100))? {
            out.push(d);
        }
    }
    Ok(out)
}

/// Longest a [`pump`] batch stays open after its first record: under a steady
/// stream that never runs dry a batch closes by count at high rates and by this
/// bound at low ones, so batching adds at most this much latency.
pub const MAX_BATCH_WAIT: Duration = Duration::from_millis(20);

/// Runs the consume → handle → produce → flush → commit loop of a stateless stage
/// until `stop` is set or `max_idle` passes without input.
///
/// A batch is the records taken until `batch` of them, until the input runs dry, or
/// until [`MAX_BATCH_WAIT`] after its first, whichever comes first; it is flushed
/// and committed as one. `handle` turns one delivery into records on `producer`.
/// Offsets are committed
/// only after the producer flushed, so a crash between the two re-delivers the batch
/// (at-least-once); the stages downstream dedupe by message id. A handler error that
/// is transient stops the loop without committing the batch, so it is re-read.
pub fn pump(
    consumer: &mut dyn Consumer,
    producer: &mut dyn Producer,
    stop: &std::sync::atomic::AtomicBool,
    batch: usize,
    max_idle: Option<Duration>,
    handle: impl FnMut(&Delivery, &mut dyn Producer) -> Result<(), BusError>,
) -> Result<u64, BusError> {
    pump_with(
        consumer,
        producer,
        stop,
        batch,
        max_idle,
        handle,
        |_| Ok(()),
    )
}

/// [`pump`] with `before_flush` called after each batch is handled, before the
/// producer is flushed and the batch's offsets are committed (e.g. to publish a
/// watermark covering the batch).
pub fn pump_with(
    consumer: &mut dyn Consumer,
    producer: &mut dyn Producer,
    stop: &std::sync::atomic::AtomicBool,
    batch: usize,
    max_idle: Option<Duration>,
    mut handle: impl FnMut(&Delivery, &mut dyn Producer) -> Result<(), BusError>,
    mut before_flush: impl FnMut(&mut dyn Producer) -> Result<(), BusError>,
) -> Result<u64, BusError> {
    use std::sync::atomic::Ordering;
    let mut handled = 0u64;
    let mut idle_since = std::time::Instant::now();
    // Where the loop's time goes, reported at debug level every 10 s.
    let mut spent = [Duration::ZERO; 4];
    let mut report = std::time::Instant::now();
    while !stop.load(Ordering::SeqCst) {
        if report.elapsed() >= Duration::from_secs(10) {
            tracing::debug!(
                handled,
                poll_handle_ms = spent[0].as_millis() as u64,
                hook_ms = spent[1].as_millis() as u64,
                flush_ms = spent[2].as_millis() as u64,
                commit_ms = spent[3].as_millis() as u64,
                "pump"
            );
            spent = [Duration::ZERO; 4];
            report = std::time::Instant::now();
        }
        let t0 = std::time::Instant::now();
        let mut last: std::collections::BTreeMap<(String, u32), Delivery> =
            std::collections::BTreeMap::new();
        let mut taken = 0;
        let opened = std::time::Instant::now();
        while taken < batch.max(1) && (taken == 0 || opened.elapsed() < MAX_BATCH_WAIT) {
            let wait = if taken == 0 {
                Duration::from_millis(50)
            } else {
                MAX_BATCH_WAIT.saturating_sub(opened.elapsed())
            };
            match consumer.poll(wait)? {
                Some(d) => {
                    handle(&d, producer)?;
                    handled += 1;
                    taken += 1;
                    last.insert((d.topic.clone(), d.partition), d);
                }
                None => break,
            }
        }
        if last.is_empty() {
            // Idle: let the hook publish what it still holds (e.g. a watermark
            // throttled during the last batch).
            before_flush(producer)?;
            producer.flush()?;
            if max_idle.is_some_and(|m| idle_since.elapsed() >= m) {
                break;
            }
            continue;
        }
        idle_since = std::time::Instant::now();
        let t1 = std::time::Instant::now();
        before_flush(producer)?;
        let t2 = std::time::Instant::now();
        producer.flush()?;
        let t3 = std::time::Instant::now();
        consumer.commit_all(&last.values().collect::<Vec<_>>())?;
        spent[0] += t1 - t0;
        spent[1] += t2 - t1;
        spent[2] += t3 - t2;
        spent[3] += t3.elapsed();
    }
    Ok(handled)
}
