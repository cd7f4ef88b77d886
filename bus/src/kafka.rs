//! The Apache Kafka transport, through rdkafka (librdkafka).
//!
//! Design constraints:
//! - Producers are idempotent (`enable.idempotence=true`, `acks=all`): a record is
//!   durable once [`Producer::flush`] returns `Ok`, and broker-side retries never
//!   duplicate it. Each failed delivery is counted and reported by the next flush.
//! - Consumers never auto-commit: a stage commits an offset only after the effect of
//!   the record is itself durable, which gives at-least-once delivery.
//! - Records are read and written as opaque bytes; no re-serialization happens here,
//!   so a signed envelope arrives byte-identical.

use crate::{BusError, Consumer, Delivery, Producer, TopicSpec};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer as _};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Message as _};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer as _, ProducerContext};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Connection settings for a Kafka cluster.
#[derive(Clone, Debug)]
pub struct KafkaBus {
    bootstrap: String,
    replication: i32,
    flush_timeout: Duration,
    /// librdkafka settings of the deployment (`security.protocol`, `sasl.*`,
    /// `ssl.*`, tuning such as `compression.type` or `linger.ms`), applied to every
    /// client after its defaults; never one of [`FIXED_SETTINGS`].
    settings: Vec<(String, String)>,
}

/// librdkafka settings Audita sets itself and a deployment may not change, because
/// a guarantee rests on them: the producers' idempotence and `acks=all` (an
/// accepted envelope is on every in-sync replica before its offset is committed,
/// none is written twice by a retry), the consumers' manual commits after the
/// stage's output is durable (nothing accepted is lost, nothing skipped on a
/// restart), the consumer groups (one per stage) and where a new group starts.
pub const FIXED_SETTINGS: &[&str] = &[
    "enable.idempotence",
    "acks",
    "request.required.acks",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "auto.offset.reset",
    "group.id",
    "isolation.level",
];

impl KafkaBus {
    /// A bus on the cluster reachable at `bootstrap` (`host:port[,host:port...]`).
    pub fn new(bootstrap: &str) -> Result<Self, BusError> {
        if bootstrap.trim().is_empty()
            || !bootstrap.split(',').all(|s| {
                s.rsplit_once(':')
                    .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
            })
        {
            return Err(BusError::Permanent(format!(
                "kafka bootstrap '{bootstrap}' is not a list of host:port"
            )));
        }
        Ok(KafkaBus {
            bootstrap: bootstrap.to_string(),
            replication: 1,
            flush_timeout: Duration::from_secs(30),
            settings: Vec::new(),
        })
    }

    /// A bus configured by a deployment's `[kafka]` settings, passed to librdkafka
    /// as given (`bootstrap.servers` is required; an explicit `bootstrap` overrides
    /// it). Settings librdkafka rejects fail when the first client is created, with
    /// its message.
    pub fn from_settings(
        settings: &std::collections::BTreeMap<String, String>,
        bootstrap: Option<&str>,
    ) -> Result<Self, BusError> {
        let servers = bootstrap
            .map(str::to_string)
            .or_else(|| settings.get("bootstrap.servers").cloned())
            .ok_or_else(|| {
                BusError::Permanent("kafka: bootstrap.servers is not configured".into())
            })?;
        KafkaBus::new(&servers)?.with_settings(
            settings
                .iter()
                .filter(|(k, _)| k.as_str() != "bootstrap.servers")
                .map(|(k, v)| (k.clone(), v.clone())),
        )
    }

    /// Adds librdkafka settings applied to every client after its defaults (so a
    /// tuning setting such as `compression.type` replaces Audita's). A key of
    /// [`FIXED_SETTINGS`] is refused: a guarantee rests on its value.
    pub fn with_settings(
        mut self,
        settings: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, BusError> {
        for (k, v) in settings {
            if FIXED_SETTINGS.contains(&k.as_str()) {
                return Err(BusError::Permanent(format!(
                    "kafka setting '{k}' is fixed by Audita (its durability and \
                     exactly-once guarantees rest on it) and cannot be configured"
                )));
            }
            self.settings.retain(|(old, _)| *old != k);
            self.settings.push((k, v));
        }
        Ok(self)
    }

    /// Sets the replication factor used when this bus creates topics.
    pub fn with_replication(mut self, replication: i32) -> Self {
        self.replication = replication.max(1);
        self
    }

    /// The bootstrap servers.
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    /// A client configuration: the connection, the client's `defaults`, then the
    /// deployment's settings (which never name a [`FIXED_SETTINGS`] key).
    fn config(&self, defaults: &[(&str, &str)]) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.bootstrap)
            .set("socket.timeout.ms", "10000")
            .set("log_level", "3");
        for (k, v) in defaults {
            c.set(*k, *v);
        }
        for (k, v) in &self.settings {
            c.set(k, v);
        }
        c
    }

    /// An idempotent producer.
    pub fn producer(&self) -> Result<KafkaProducer, BusError> {
        let context = CountingContext::default();
        let producer: BaseProducer<CountingContext> = self
            .config(&[
                ("enable.idempotence", "true"),
                ("acks", "all"),
                // Stages produce a batch in a burst and then flush (wait for every
                // acknowledgement, `KafkaProducer::flush`): the burst is one
                // request whatever the linger, so only its delay matters. 5 ms
                // saves the broker CPU (200 robots: 0.57 → 0.42 cores) but every
                // flush waits it out, once per hop: verdict latency p99 rose
                // ≈ 150 ms (BENCHMARKS.md); a deployment may set it in `[kafka]`.
                ("linger.ms", "1"),
                ("message.timeout.ms", "30000"),
                ("compression.type", "lz4"),
                ("message.max.bytes", MAX_MESSAGE_BYTES_STR),
            ])
            .create_with_context(context)
            .map_err(|e| classify(&e))?;
        Ok(KafkaProducer {
            producer,
            flush_timeout: self.flush_timeout,
        })
    }

    /// A member of a new consumer group `group` subscribed to `topics` that reads only
    /// what arrives after it joined (a reader's tail, never a stage: a stage must read
    /// everything not committed).
    pub fn consumer_from_end(
        &self,
        group: &str,
        topics: &[&str],
    ) -> Result<KafkaConsumer, BusError> {
        self.consumer_with_reset(group, topics, "latest")
    }

    /// A member of consumer group `group` subscribed to `topics`, starting at the
    /// group's committed offsets (or the earliest offset for a new group).
    pub fn consumer(&self, group: &str, topics: &[&str]) -> Result<KafkaConsumer, BusError> {
        self.consumer_with_reset(group, topics, "earliest")
    }

    /// A reader of the partitions `partitions` of `topic` only, assigned (not
    /// subscribed: no rebalance moves them), from the beginning; commits to `group`.
    pub fn consumer_of(
        &self,
        group: &str,
        topic: &str,
        partitions: &[u32],
    ) -> Result<KafkaConsumer, BusError> {
        let consumer: BaseConsumer = self
            .config(&[
                ("group.id", group),
                ("enable.auto.commit", "false"),
                ("auto.offset.reset", "earliest"),
                ("fetch.min.bytes", "65536"),
                ("fetch.wait.max.ms", "10"),
            ])
            .create()
            .map_err(|e| classify(&e))?;
        let mut tpl = TopicPartitionList::new();
        for p in partitions {
            tpl.add_partition_offset(topic, *p as i32, Offset::Beginning)
                .map_err(|e| classify(&e))?;
        }
        consumer.assign(&tpl).map_err(|e| classify(&e))?;
        Ok(KafkaConsumer {
            consumer,
            warned: None,
        })
    }

    fn consumer_with_reset(
        &self,
        group: &str,
        topics: &[&str],
        reset: &str,
    ) -> Result<KafkaConsumer, BusError> {
        let consumer: BaseConsumer = self
            .config(&[
                ("group.id", group),
                ("enable.auto.commit", "false"),
                ("auto.offset.reset", reset),
                ("session.timeout.ms", "6000"),
                ("heartbeat.interval.ms", "1000"),
                ("partition.assignment.strategy", "roundrobin"),
                // A fetch returns once 64 KiB are there or after 10 ms, not at the
                // first record (librdkafka's defaults: 1 byte, 500 ms): at a steady
                // few thousand records per second the defaults make one fetch
                // round trip per handful of records, which the broker and every
                // consumer's threads pay. Measured with `audita-load load` at 200
                // robots: the machine's busy cores 1.58 → 1.28 (ingest 0.36 →
                // 0.26), verdict latency within the runs' spread. A hop on a quiet
                // topic waits at most 10 ms more.
                ("fetch.min.bytes", "65536"),
                ("fetch.wait.max.ms", "10"),
            ])
            .create()
            .map_err(|e| classify(&e))?;
        consumer.subscribe(topics).map_err(|e| classify(&e))?;
        Ok(KafkaConsumer {
            consumer,
            warned: None,
        })
    }

    /// Creates the topics that do not exist yet.
    pub fn ensure_topics(&self, specs: &[TopicSpec]) -> Result<(), BusError> {
        let admin: AdminClient<DefaultClientContext> =
            self.config(&[]).create().map_err(|e| classify(&e))?;
        let topics: Vec<NewTopic<'_>> = specs
            .iter()
            .map(|s| {
                NewTopic::new(
                    &s.name,
                    s.partitions as i32,
                    TopicReplication::Fixed(self.replication),
                )
                .set("max.message.bytes", MAX_MESSAGE_BYTES_STR)
            })
            .collect();
        let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
        let results = futures_executor::block_on(admin.create_topics(topics.iter(), &opts))
            .map_err(|e| classify(&e))?;
        for r in results {
            match r {
                Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((name, code)) => {
                    return Err(BusError::Permanent(format!(
                        "creating topic {name}: {code}"
                    )));
                }
            }
        }
        self.await_topics(specs, TOPICS_VISIBLE_WITHIN)
    }

    /// Waits until the broker's metadata lists every topic of `specs` with its
    /// partitions. A topic another process is creating at the same moment answers
    /// `TopicAlreadyExists` before brokers serve it, and a consumer subscribing then
    /// is told the topic is unknown: stages start together, so "created" must mean
    /// "served".
    fn await_topics(&self, specs: &[TopicSpec], within: Duration) -> Result<(), BusError> {
        let client: BaseConsumer = self.config(&[]).create().map_err(|e| classify(&e))?;
        let deadline = std::time::Instant::now() + within;
        for s in specs {
            loop {
                let served = client
                    .fetch_metadata(Some(&s.name), Duration::from_secs(5))
                    .map(|m| {
                        m.topics().iter().any(|t| {
                            t.name() == s.name && t.error().is_none() && !t.partitions().is_empty()
                        })
                    })
                    .unwrap_or(false);
                if served {
                    break;
                }
                if std::time::Instant::now() >= deadline {
                    return Err(BusError::Transient(format!(
                        "topic {} not served by the broker within {within:?} of its creation",
                        s.name
                    )));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Ok(())
    }
}

/// How long [`KafkaBus::ensure_topics`] waits for created topics to be served.
const TOPICS_VISIBLE_WITHIN: Duration = Duration::from_secs(30);

/// Maps a Kafka error onto the retry classes of [`BusError`].
fn classify(e: &KafkaError) -> BusError {
    let transient = match e.rdkafka_error_code() {
        Some(code) => matches!(
            code,
            RDKafkaErrorCode::BrokerTransportFailure
                | RDKafkaErrorCode::AllBrokersDown
                | RDKafkaErrorCode::OperationTimedOut
                | RDKafkaErrorCode::MessageTimedOut
                | RDKafkaErrorCode::RequestTimedOut
                | RDKafkaErrorCode::NetworkException
                | RDKafkaErrorCode::LeaderNotAvailable
                | RDKafkaErrorCode::NotLeaderForPartition
                | RDKafkaErrorCode::UnknownTopicOrPartition
                | RDKafkaErrorCode::CoordinatorNotAvailable
                | RDKafkaErrorCode::NotCoordinator
                | RDKafkaErrorCode::RebalanceInProgress
                // A member paused or cut off past its session timeout was removed
                // from its group: its commit is refused until it joins again, which
                // a stage reopened from its durable state does.
                | RDKafkaErrorCode::UnknownMemberId
                | RDKafkaErrorCode::IllegalGeneration
                | RDKafkaErrorCode::AssignmentLost
                | RDKafkaErrorCode::FencedMemberEpoch
                | RDKafkaErrorCode::StaleMemberEpoch
                // The group's coordinator is being found or loaded again (a broker
                // restarted): a commit waits for it. Seen at 400 robots under the
                // nemesis: the sink's commit refused with `WaitingForCoordinator`
                // right after a broker restart ended its process.
                | RDKafkaErrorCode::WaitingForCoordinator
                | RDKafkaErrorCode::CoordinatorLoadInProgress
                // What Kafka itself calls retriable: leadership moving, replicas
                // catching up, a log directory briefly unavailable, throttling.
                | RDKafkaErrorCode::Retry
                | RDKafkaErrorCode::Resolve
                | RDKafkaErrorCode::BrokerNotAvailable
                | RDKafkaErrorCode::ReplicaNotAvailable
                | RDKafkaErrorCode::NotEnoughReplicas
                | RDKafkaErrorCode::NotEnoughReplicasAfterAppend
                | RDKafkaErrorCode::KafkaStorageError
                | RDKafkaErrorCode::FencedLeaderEpoch
                | RDKafkaErrorCode::UnknownLeaderEpoch
                | RDKafkaErrorCode::OffsetNotAvailable
                | RDKafkaErrorCode::PreferredLeaderNotAvailable
                | RDKafkaErrorCode::EligibleLeadersNotAvailable
                | RDKafkaErrorCode::UnstableOffsetCommit
                | RDKafkaErrorCode::ThrottlingQuotaExceeded
                | RDKafkaErrorCode::FetchSessionIdNotFound
                | RDKafkaErrorCode::InvalidFetchSessionEpoch
        ),
        None => false,
    };
    if let KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull) = e {
        return BusError::Backpressure {
            topic: "(producer queue)".into(),
            pending: 0,
            limit: 0,
        };
    }
    if transient {
        BusError::Transient(e.to_string())
    } else {
        BusError::Permanent(e.to_string())
    }
}

/// Counts deliveries the broker refused, so [`KafkaProducer::flush`] can report them.
#[derive(Default)]
struct CountingContext {
    failed: AtomicU64,
    last_error: Mutex<Option<String>>,
}

impl ClientContext for CountingContext {}

impl ProducerContext for CountingContext {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((e, _)) = result {
            self.failed.fetch_add(1, Ordering::SeqCst);
            *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
        }
    }
}

/// The first and the longest nap of [`KafkaProducer::flush`] between polls that
/// found no delivery report: a flush returns at most this long after its last
/// acknowledgement arrived.
const FLUSH_NAP_MIN: Duration = Duration::from_micros(50);
const FLUSH_NAP_MAX: Duration = Duration::from_millis(1);

/// Producer on Kafka.
pub struct KafkaProducer {
    producer: BaseProducer<CountingContext>,
    flush_timeout: Duration,
}

impl Producer for KafkaProducer {
    fn send_record(
        &mut self,
        topic: &str,
        partition: Option<u32>,
        key: &[u8],
        payload: &[u8],
    ) -> Result<(), BusError> {
        loop {
            let mut record = BaseRecord::to(topic).key(key).payload(payload);
            if let Some(p) = partition {
                record = record.partition(p as i32);
            }
            match self.producer.send(record) {
                Ok(()) => {
                    self.producer.poll(Duration::ZERO);
                    return Ok(());
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    // Local queue full: serve a delivery report, which frees room, or
                    // nap while none is ready (not a blocking `poll`, which would
                    // wait out its whole timeout: see `flush`); then retry.
                    let before = self.producer.in_flight_count();
                    self.producer.poll(Duration::ZERO);
                    if self.producer.in_flight_count() >= before {
                        std::thread::sleep(FLUSH_NAP_MAX);
                    }
                }
                Err((e, _)) => return Err(classify(&e)),
            }
        }
    }
    fn flush(&mut self) -> Result<(), BusError> {
        // Serve delivery reports until nothing is in flight. Not the client
        // library's own flush: it waits in 100 ms steps, which capped a stage at one
        // batch per 100 ms whatever the broker's latency. Not `poll(1 ms)` in a loop
        // either: rdkafka's `poll(t)` runs until `t` has passed and hands librdkafka
        // the time left rounded down to whole milliseconds, so its last millisecond
        // (all of a 1 ms poll) is a busy loop of non-blocking polls; a stage spun a
        // core for as long as each flush waited for the broker (the sealer's profile
        // at 1,000 robots: a tenth of its CPU). Instead: non-blocking polls while
        // they make progress, naps of 50 µs doubling up to 1 ms while they do not.
        let deadline = std::time::Instant::now() + self.flush_timeout;
        let mut nap = FLUSH_NAP_MIN;
        let mut in_flight = self.producer.in_flight_count();
        while in_flight > 0 {
            self.producer.poll(Duration::ZERO);
            let now = self.producer.in_flight_count();
            if now < in_flight {
                in_flight = now;
                nap = FLUSH_NAP_MIN;
                continue;
            }
            if std::time::Instant::now() >= deadline {
                return Err(BusError::Transient(format!(
                    "{now} record(s) still unacknowledged after {:?}",
                    self.flush_timeout
                )));
            }
            std::thread::sleep(nap);
            nap = (nap * 2).min(FLUSH_NAP_MAX);
            in_flight = self.producer.in_flight_count();
        }
        let failed = self.producer.context().failed.swap(0, Ordering::SeqCst);
        if failed > 0 {
            let last = self
                .producer
                .context()
                .last_error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            return Err(BusError::Transient(format!(
                "{failed} record(s) not delivered; last error: {}",
                last.unwrap_or_default()
            )));
        }
        Ok(())
    }
}

/// [`crate::MAX_RECORD_BYTES`] as a config value (the broker default is 1 MiB); a
/// little above it for the record's framing.
const MAX_MESSAGE_BYTES_STR: &str = "17825792";

/// A consumer-group member on Kafka.
pub struct KafkaConsumer {
    consumer: BaseConsumer,
    /// When the consumer last said the broker was unreachable.
    warned: Option<std::time::Instant>,
}

/// How often at most a consumer repeats that its broker is unreachable.
const QUIET_WARNINGS: Duration = Duration::from_secs(5);

impl Consumer for KafkaConsumer {
    fn poll(&mut self, timeout: Duration) -> Result<Option<Delivery>, BusError> {
        match self.consumer.poll(timeout) {
            None => Ok(None),
            Some(Err(KafkaError::PartitionEOF(_))) => Ok(None),
            // A subscribed topic the broker does not serve (yet): librdkafka keeps
            // the subscription and picks the topic up when it is served, so this is
            // a wait, not a failure of the stage.
            Some(Err(
                e @ KafkaError::MessageConsumption(RDKafkaErrorCode::UnknownTopicOrPartition),
            )) => {
                tracing::warn!(error = %e, "kafka: a subscribed topic is not served yet; waiting");
                Ok(None)
            }
            Some(Err(e)) => match classify(&e) {
                // The broker unreachable or restarting (transport failure, all
                // brokers down, a coordinator moving): librdkafka reconnects and the
                // member resumes from its position, so this is a wait, not a failure
                // of the stage — which keeps its state instead of rebuilding it. Said
                // once per [`QUIET_WARNINGS`] while it lasts.
                err if err.is_transient() => {
                    if self.warned.is_none_or(|at| at.elapsed() >= QUIET_WARNINGS) {
                        tracing::warn!(error = %e, "kafka: the broker is unreachable; the consumer waits and reconnects");
                        self.warned = Some(std::time::Instant::now());
                    }
                    Ok(None)
                }
                err => Err(err),
            },
            Some(Ok(m)) => Ok(Some(Delivery {
                topic: m.topic().to_string(),
                partition: m.partition().max(0) as u32,
                offset: m.offset().max(0) as u64,
                key: m.key().unwrap_or_default().to_vec(),
                payload: m.payload().unwrap_or_default().to_vec(),
            })),
        }
    }

    fn commit(&mut self, delivery: &Delivery) -> Result<(), BusError> {
        self.commit_offsets(&[delivery], CommitMode::Sync)
    }

    fn commit_all(&mut self, deliveries: &[&Delivery]) -> Result<(), BusError> {
        if deliveries.is_empty() {
            return Ok(());
        }
        self.commit_offsets(deliveries, CommitMode::Async)
    }
}

impl KafkaConsumer {
    fn commit_offsets(
        &mut self,
        deliveries: &[&Delivery],
        mode: CommitMode,
    ) -> Result<(), BusError> {
        let mut tpl = TopicPartitionList::new();
        for d in deliveries {
            tpl.add_partition_offset(
                &d.topic,
                d.partition as i32,
                Offset::Offset(d.offset as i64 + 1),
            )
            .map_err(|e| classify(&e))?;
        }
        self.consumer.commit(&tpl, mode).map_err(|e| classify(&e))
    }
}

/// Keeps the compiler honest that handles can move to stage threads.
#[allow(dead_code)]
fn assert_send() {
    fn is_send<T: Send>() {}
    is_send::<KafkaProducer>();
    is_send::<KafkaConsumer>();
    is_send::<Arc<KafkaBus>>();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_refused_while_the_coordinator_moves_is_transient() {
        // What ended the sink's process after a broker restart: a stage's
        // supervisor reopens it only from a transient error.
        for code in [
            RDKafkaErrorCode::WaitingForCoordinator,
            RDKafkaErrorCode::CoordinatorLoadInProgress,
            RDKafkaErrorCode::NotCoordinator,
            RDKafkaErrorCode::UnknownMemberId,
            RDKafkaErrorCode::AllBrokersDown,
        ] {
            let e = classify(&KafkaError::ConsumerCommit(code));
            assert!(e.is_transient(), "{code:?}: {e}");
        }
        for code in [
            RDKafkaErrorCode::GroupAuthorizationFailed,
            RDKafkaErrorCode::InvalidCommitOffsetSize,
        ] {
            let e = classify(&KafkaError::ConsumerCommit(code));
            assert!(!e.is_transient(), "{code:?} is not healed by waiting");
        }
    }

    #[test]
    fn a_deployment_cannot_weaken_a_fixed_setting() {
        for key in FIXED_SETTINGS {
            let settings = [
                (
                    "bootstrap.servers".to_string(),
                    "127.0.0.1:9092".to_string(),
                ),
                (key.to_string(), "x".to_string()),
            ];
            let err = KafkaBus::from_settings(&settings.into_iter().collect(), None)
                .expect_err(key)
                .to_string();
            assert!(err.contains(key) && err.contains("fixed"), "{err}");
        }
    }

    #[test]
    fn tuning_settings_come_after_the_defaults() {
        let bus = KafkaBus::new("127.0.0.1:9092")
            .unwrap()
            .with_settings([
                ("compression.type".to_string(), "zstd".to_string()),
                ("linger.ms".to_string(), "3".to_string()),
                ("compression.type".to_string(), "none".to_string()),
            ])
            .unwrap();
        let c = bus.config(&[("compression.type", "lz4"), ("linger.ms", "1")]);
        assert_eq!(c.get("compression.type"), Some("none"));
        assert_eq!(c.get("linger.ms"), Some("3"));
        assert_eq!(bus.settings.len(), 2);
    }
}
