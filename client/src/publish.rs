//! Publishing signed evidence to a deployment's Kafka topics, through the spool.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use audita_evidence::{Receipt, SignedEnvelope};
use audita_topics::names as topics;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer as _};
use rdkafka::util::Timeout;

use crate::spool::{Lane, Spool, SpoolConfig};
use crate::ClientError;

/// How a publisher reaches the deployment.
#[derive(Debug, Clone)]
pub struct PublisherConfig {
    /// Kafka bootstrap servers (`host:port[,host:port…]`).
    pub bootstrap: String,
    /// The deployment's topic prefix (`[topics] prefix`, empty by default).
    pub topic_prefix: String,
    /// The spool.
    pub spool: SpoolConfig,
    /// How long one delivery may take before the item is left to the spool
    /// (librdkafka `message.timeout.ms`).
    pub delivery_timeout: Duration,
    /// Further librdkafka producer settings (e.g. `security.protocol`,
    /// `sasl.mechanism`, `ssl.ca.location`), applied last.
    pub kafka: Vec<(String, String)>,
}

impl PublisherConfig {
    /// A publisher to `bootstrap` spooling in `spool_dir`, with the defaults: no
    /// topic prefix, 30 s delivery timeout, 256 MiB spool.
    pub fn new(bootstrap: &str, spool_dir: impl Into<PathBuf>) -> PublisherConfig {
        PublisherConfig {
            bootstrap: bootstrap.to_string(),
            topic_prefix: String::new(),
            spool: SpoolConfig::new(spool_dir),
            delivery_timeout: Duration::from_secs(30),
            kafka: Vec::new(),
        }
    }
}

/// An item [`Publisher::accept`] made durable and handed to the producer.
pub struct Accepted {
    seq: u64,
    delivery: Option<rdkafka::producer::DeliveryFuture>,
}

impl std::fmt::Debug for Accepted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Accepted")
            .field("seq", &self.seq)
            .field("handed_to_producer", &self.delivery.is_some())
            .finish()
    }
}

impl Accepted {
    /// Its spool sequence number.
    pub fn seq(&self) -> u64 {
        self.seq
    }
}

/// Where an item landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivered {
    /// Kafka partition.
    pub partition: i32,
    /// Offset in it.
    pub offset: i64,
}

/// What [`Publisher::resend_spool`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Resent {
    /// Items delivered now (and removed from the spool).
    pub delivered: usize,
    /// Items still spooled (their delivery failed again).
    pub spooled: usize,
}

/// An async publisher (tokio). Cheap to share behind an `Arc`: sends may run
/// concurrently; the spool is guarded by a mutex held only for its file operations.
pub struct Publisher {
    producer: FutureProducer,
    spool: Mutex<Spool>,
    envelopes: String,
    receipts: String,
    timeout: Duration,
}

impl Publisher {
    /// Creates the producer and opens the spool. Items a previous run left in the
    /// spool are not sent yet: call [`Self::resend_spool`] (the blocking
    /// [`BlockingPublisher::open`] does).
    pub fn new(config: PublisherConfig) -> Result<Publisher, ClientError> {
        let spool = Spool::open(&config.spool)?;
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &config.bootstrap)
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("linger.ms", "5")
            .set("compression.type", "lz4")
            .set(
                "message.timeout.ms",
                config.delivery_timeout.as_millis().max(1).to_string(),
            )
            .set("log_level", "3");
        for (k, v) in &config.kafka {
            c.set(k, v);
        }
        let producer: FutureProducer = c
            .create()
            .map_err(|e| ClientError::Producer(e.to_string()))?;
        Ok(Publisher {
            producer,
            spool: Mutex::new(spool),
            envelopes: format!("{}{}", config.topic_prefix, topics::ENVELOPES),
            receipts: format!("{}{}", config.topic_prefix, topics::RECEIPTS),
            timeout: config.delivery_timeout,
        })
    }

    /// [`Self::new`], then [`Self::resend_spool`].
    pub async fn open(config: PublisherConfig) -> Result<(Publisher, Resent), ClientError> {
        let p = Publisher::new(config)?;
        let resent = p.resend_spool().await?;
        Ok((p, resent))
    }

    fn spool(&self) -> std::sync::MutexGuard<'_, Spool> {
        self.spool
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn topic(&self, lane: Lane) -> &str {
        match lane {
            Lane::Envelope => &self.envelopes,
            Lane::Receipt => &self.receipts,
        }
    }

    async fn deliver(
        &self,
        lane: Lane,
        key: &[u8],
        bytes: &[u8],
        seq: u64,
    ) -> Result<Delivered, ClientError> {
        let record = FutureRecord::to(self.topic(lane)).key(key).payload(bytes);
        match self
            .producer
            .send(record, Timeout::After(self.timeout))
            .await
        {
            Ok(d) => {
                self.spool().remove(seq)?;
                Ok(Delivered {
                    partition: d.partition,
                    offset: d.offset,
                })
            }
            Err((e, _)) => Err(ClientError::Undelivered {
                seq,
                reason: e.to_string(),
            }),
        }
    }

    async fn send(&self, lane: Lane, key: &[u8], bytes: &[u8]) -> Result<Delivered, ClientError> {
        let seq = self.spool().put(lane, bytes)?;
        self.deliver(lane, key, bytes, seq).await
    }

    /// Makes `envelope` durable in the spool and hands it to the producer, without
    /// waiting for the broker: when this returns `Ok` the item survives a crash, and
    /// items accepted one after another are sent in that order. Await the delivery
    /// with [`Self::delivered`] (which removes it from the spool); an item whose
    /// producer queue was full is left to [`Self::resend_spool`]. For a caller that
    /// must acknowledge its own input once the evidence is durable (a bridge's MQTT
    /// acknowledgements).
    pub fn accept(&self, envelope: &SignedEnvelope) -> Result<Accepted, ClientError> {
        self.accept_bytes(
            Lane::Envelope,
            envelope.envelope().author.as_str().as_bytes(),
            envelope.as_bytes(),
        )
    }

    /// [`Self::accept`] for a delivery receipt (keyed by its recipient).
    pub fn accept_receipt(&self, receipt: &Receipt) -> Result<Accepted, ClientError> {
        self.accept_bytes(
            Lane::Receipt,
            receipt.recipient().as_str().as_bytes(),
            receipt.as_bytes(),
        )
    }

    fn accept_bytes(&self, lane: Lane, key: &[u8], bytes: &[u8]) -> Result<Accepted, ClientError> {
        let seq = self.spool().put(lane, bytes)?;
        let record = FutureRecord::to(self.topic(lane)).key(key).payload(bytes);
        let delivery = match self.producer.send_result(record) {
            Ok(d) => Some(d),
            Err((e, _)) => {
                tracing::warn!(seq, error = %e, "producer queue refused an item; it stays spooled");
                None
            }
        };
        Ok(Accepted { seq, delivery })
    }

    /// Waits for the broker's acknowledgement of an [`Accepted`] item and removes it
    /// from the spool; on [`ClientError::Undelivered`] it stays spooled.
    pub async fn delivered(&self, accepted: Accepted) -> Result<Delivered, ClientError> {
        let undelivered = |reason: String| ClientError::Undelivered {
            seq: accepted.seq,
            reason,
        };
        let Some(delivery) = accepted.delivery else {
            return Err(undelivered("the producer queue was full".into()));
        };
        match delivery.await {
            Ok(Ok(d)) => {
                self.spool().remove(accepted.seq)?;
                Ok(Delivered {
                    partition: d.partition,
                    offset: d.offset,
                })
            }
            Ok(Err((e, _))) => Err(undelivered(e.to_string())),
            Err(_) => Err(undelivered("the producer was dropped".into())),
        }
    }

    /// Publishes a signed envelope (keyed by its author). On
    /// [`ClientError::Undelivered`] it is safe in the spool.
    pub async fn publish(&self, envelope: &SignedEnvelope) -> Result<Delivered, ClientError> {
        self.send(
            Lane::Envelope,
            envelope.envelope().author.as_str().as_bytes(),
            envelope.as_bytes(),
        )
        .await
    }

    /// Publishes a delivery receipt (keyed by its recipient).
    pub async fn publish_receipt(&self, receipt: &Receipt) -> Result<Delivered, ClientError> {
        self.send(
            Lane::Receipt,
            receipt.recipient().as_str().as_bytes(),
            receipt.as_bytes(),
        )
        .await
    }

    /// Sends every spooled item again, in acceptance order; each delivered one
    /// leaves the spool. Items that are neither an envelope nor a receipt (a
    /// damaged file) are left in place and counted as still spooled.
    pub async fn resend_spool(&self) -> Result<Resent, ClientError> {
        let pending = self.spool().pending()?;
        let mut out = Resent::default();
        for item in pending {
            let key = match item.lane {
                Lane::Envelope => SignedEnvelope::decode(item.bytes.clone())
                    .map(|e| e.envelope().author.as_str().as_bytes().to_vec()),
                Lane::Receipt => Receipt::decode(item.bytes.clone())
                    .map(|r| r.recipient().as_str().as_bytes().to_vec()),
            };
            let Ok(key) = key else {
                tracing::warn!(
                    seq = item.seq,
                    "spool item does not decode; left in the spool"
                );
                out.spooled += 1;
                continue;
            };
            match self.deliver(item.lane, &key, &item.bytes, item.seq).await {
                Ok(_) => out.delivered += 1,
                Err(ClientError::Undelivered { .. }) => out.spooled += 1,
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Items waiting in the spool.
    pub fn spooled(&self) -> usize {
        self.spool().len()
    }

    /// Waits up to `timeout` for the producer's queue to drain.
    pub fn flush(&self, timeout: Duration) -> Result<(), ClientError> {
        self.producer
            .flush(Timeout::After(timeout))
            .map_err(|e| ClientError::Producer(e.to_string()))
    }
}

/// [`Publisher`] for code without an async runtime: each call blocks until the
/// broker acknowledged the item (or the delivery timeout left it in the spool).
pub struct BlockingPublisher {
    runtime: tokio::runtime::Runtime,
    inner: Publisher,
}

impl BlockingPublisher {
    /// Creates the publisher and sends what the spool holds from an earlier run.
    pub fn open(config: PublisherConfig) -> Result<BlockingPublisher, ClientError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ClientError::Producer(format!("runtime: {e}")))?;
        let inner = Publisher::new(config)?;
        let p = BlockingPublisher { runtime, inner };
        let resent = p.resend_spool()?;
        if resent.delivered + resent.spooled > 0 {
            tracing::info!(
                delivered = resent.delivered,
                spooled = resent.spooled,
                "spool from an earlier run"
            );
        }
        Ok(p)
    }

    /// [`Publisher::publish`].
    pub fn publish(&self, envelope: &SignedEnvelope) -> Result<Delivered, ClientError> {
        self.runtime.block_on(self.inner.publish(envelope))
    }

    /// [`Publisher::publish_receipt`].
    pub fn publish_receipt(&self, receipt: &Receipt) -> Result<Delivered, ClientError> {
        self.runtime.block_on(self.inner.publish_receipt(receipt))
    }

    /// [`Publisher::resend_spool`].
    pub fn resend_spool(&self) -> Result<Resent, ClientError> {
        self.runtime.block_on(self.inner.resend_spool())
    }

    /// [`Publisher::spooled`].
    pub fn spooled(&self) -> usize {
        self.inner.spooled()
    }
}
