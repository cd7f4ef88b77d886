//! The citation index: the ids of peers' envelopes by the VDA 5050 payload they
//! carry, learned from the deployment's `audita.envelopes` topic and checked against
//! the registry.
//!
//! Design constraints:
//! - Only an envelope whose signature verifies under its author's registered key
//!   (at the envelope's time) is indexed; an envelope from a principal the sidecar
//!   does not read (not a peer), or of a payload kind that carries no VDA 5050
//!   message, is skipped. The index never trusts the topic, a bridge or ingest.
//! - Key: `(author, SHA-256 of the payload text)`; the text is the exact MQTT
//!   payload (a vehicle report's `reading`, a command's `text`), so a sidecar that
//!   saw the same bytes over MQTT finds the id.
//! - Bounded: at most `cap` entries, oldest forgotten first; per author the latest
//!   id by envelope time is kept as the fallback citation.
//! - [`Peers::wait_for`] waits a bounded time for an id that is on its way.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use audita_evidence::{sha256, Hash, KeyRegistry, MessageId, Payload, PrincipalId, SignedEnvelope};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Message as _, Offset, TopicPartitionList};

/// The VDA 5050 payload text an envelope carries, if it is one of the bridge's:
/// a `vda5050.*` sensor report's reading or an agent text (a command).
pub fn vda_text(payload: &Payload) -> Option<&str> {
    match payload {
        Payload::SensorReport { sensor, reading } if sensor.starts_with("vda5050.") => {
            Some(reading)
        }
        Payload::AgentText { text } => Some(text),
        _ => None,
    }
}

/// The bounded index.
#[derive(Debug)]
pub struct PeerIndex {
    by_payload: HashMap<(PrincipalId, Hash), MessageId>,
    fifo: VecDeque<(PrincipalId, Hash)>,
    latest: HashMap<PrincipalId, (u64, MessageId)>,
    cap: usize,
}

impl PeerIndex {
    /// An index of at most `cap` entries.
    pub fn new(cap: usize) -> PeerIndex {
        PeerIndex {
            by_payload: HashMap::new(),
            fifo: VecDeque::new(),
            latest: HashMap::new(),
            cap: cap.max(1),
        }
    }

    /// Indexes `id` (authored at `timestamp_ms`) under its payload digest.
    pub fn insert(&mut self, payload_digest: Hash, timestamp_ms: u64, id: MessageId) {
        let key = (id.author.clone(), payload_digest);
        let newer = self
            .latest
            .get(&id.author)
            .is_none_or(|(t, _)| *t <= timestamp_ms);
        if newer {
            self.latest
                .insert(id.author.clone(), (timestamp_ms, id.clone()));
        }
        if self.by_payload.insert(key.clone(), id).is_none() {
            self.fifo.push_back(key);
            while self.fifo.len() > self.cap {
                if let Some(old) = self.fifo.pop_front() {
                    self.by_payload.remove(&old);
                }
            }
        }
    }

    /// The id of `author`'s envelope carrying the payload with `digest`.
    pub fn get(&self, author: &PrincipalId, digest: &Hash) -> Option<MessageId> {
        self.by_payload.get(&(author.clone(), *digest)).cloned()
    }

    /// The id of `author`'s latest indexed envelope.
    pub fn latest(&self, author: &PrincipalId) -> Option<MessageId> {
        self.latest.get(author).map(|(_, id)| id.clone())
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.by_payload.len()
    }

    /// Whether nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.by_payload.is_empty()
    }
}

/// What [`Peers::learn`] did with an envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Learned {
    /// Verified and indexed.
    Indexed,
    /// Verified, but it carries no VDA 5050 payload (an actuation report, a root):
    /// not indexed.
    Verified,
    /// Not a peer's envelope; skipped.
    Skipped,
    /// Its signature does not verify under the registry; never cited.
    Refused,
}

/// The index shared by a sidecar's feeder and its processing loop.
#[derive(Debug)]
pub struct Peers {
    index: Mutex<PeerIndex>,
    changed: tokio::sync::Notify,
    /// Envelopes indexed.
    pub indexed: AtomicU64,
    /// Envelopes refused (signature or key window).
    pub refused: AtomicU64,
}

impl Peers {
    /// An empty index of at most `cap` entries.
    pub fn new(cap: usize) -> Peers {
        Peers {
            index: Mutex::new(PeerIndex::new(cap)),
            changed: tokio::sync::Notify::new(),
            indexed: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PeerIndex> {
        self.index
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Indexes `envelope` if `is_peer` accepts its author and its signature verifies
    /// under `keys`.
    pub fn learn(
        &self,
        envelope: &SignedEnvelope,
        keys: &KeyRegistry,
        is_peer: impl Fn(&PrincipalId) -> bool,
    ) -> Learned {
        let e = envelope.envelope();
        if !is_peer(&e.author) {
            return Learned::Skipped;
        }
        if envelope.check(keys).is_err() {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return Learned::Refused;
        }
        let Some(text) = vda_text(&e.payload) else {
            return Learned::Verified;
        };
        let digest = sha256(text.as_bytes());
        self.lock()
            .insert(digest, e.timestamp, envelope.id().clone());
        self.indexed.fetch_add(1, Ordering::Relaxed);
        self.changed.notify_waiters();
        Learned::Indexed
    }

    /// The id of `author`'s envelope carrying `digest`, now.
    pub fn get(&self, author: &PrincipalId, digest: &Hash) -> Option<MessageId> {
        self.lock().get(author, digest)
    }

    /// The latest id of `author`, now.
    pub fn latest(&self, author: &PrincipalId) -> Option<MessageId> {
        self.lock().latest(author)
    }

    /// Waits up to `within` for `author`'s envelope carrying `digest`.
    pub async fn wait_for(
        &self,
        author: &PrincipalId,
        digest: &Hash,
        within: Duration,
    ) -> Option<MessageId> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(id) = self.get(author, digest) {
                return Some(id);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.get(author, digest);
            }
        }
    }
}

/// Where the feeder reads.
#[derive(Debug, Clone)]
pub struct FeedConfig {
    /// Kafka bootstrap servers.
    pub bootstrap: String,
    /// The envelopes topic (with the deployment's prefix).
    pub topic: String,
    /// How far back to start reading at start-up (so a restarted sidecar can cite
    /// what its peers published just before).
    pub lookback: Duration,
    /// Further librdkafka settings.
    pub kafka: Vec<(String, String)>,
    /// A name for the consumer (logs, group id).
    pub name: String,
}

/// Reads `config.topic` from `lookback` ago on a background thread and feeds
/// [`Peers::learn`] until `stop` is set; `on_verified` sees every peer envelope
/// whose signature verified.
pub fn spawn_feeder(
    config: FeedConfig,
    peers: Arc<Peers>,
    keys: Arc<KeyRegistry>,
    is_peer: impl Fn(&PrincipalId) -> bool + Send + 'static,
    on_verified: impl Fn(&SignedEnvelope) + Send + 'static,
    stop: Arc<AtomicBool>,
) -> Result<std::thread::JoinHandle<()>, String> {
    let mut c = ClientConfig::new();
    let group = format!(
        "audita-bridge-index.{}.{}.{}",
        config.name,
        std::process::id(),
        crate::error::now_ms()
    );
    c.set("bootstrap.servers", &config.bootstrap)
        .set("group.id", &group)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("fetch.wait.max.ms", "10")
        .set("log_level", "3");
    for (k, v) in &config.kafka {
        c.set(k, v);
    }
    let consumer: BaseConsumer = c.create().map_err(|e| format!("kafka consumer: {e}"))?;
    std::thread::Builder::new()
        .name("bridge-index".into())
        .spawn(move || {
            // Assign every partition from `lookback` ago (retrying until the topic
            // exists).
            while !stop.load(Ordering::Relaxed) {
                match assign_from(&consumer, &config.topic, config.lookback) {
                    Ok(()) => break,
                    Err(e) => {
                        tracing::debug!(topic = %config.topic, error = %e, "index feeder waits for its topic");
                        std::thread::sleep(Duration::from_millis(500));
                    }
                }
            }
            while !stop.load(Ordering::Relaxed) {
                match consumer.poll(Duration::from_millis(100)) {
                    None => {}
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "index feeder");
                        std::thread::sleep(Duration::from_millis(200));
                    }
                    Some(Ok(m)) => {
                        let Some(bytes) = m.payload() else { continue };
                        if let Ok(env) = SignedEnvelope::decode(bytes.to_vec()) {
                            if matches!(
                                peers.learn(&env, &keys, &is_peer),
                                Learned::Indexed | Learned::Verified
                            ) {
                                on_verified(&env);
                            }
                        }
                    }
                }
            }
        })
        .map_err(|e| format!("index thread: {e}"))
}

fn assign_from(consumer: &BaseConsumer, topic: &str, lookback: Duration) -> Result<(), String> {
    let md = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(5))
        .map_err(|e| e.to_string())?;
    let t = md
        .topics()
        .iter()
        .find(|t| t.name() == topic)
        .ok_or("no such topic")?;
    if t.error().is_some() || t.partitions().is_empty() {
        return Err(format!("topic not ready: {:?}", t.error()));
    }
    let since = crate::error::now_ms().saturating_sub(lookback.as_millis() as u64) as i64;
    let mut want = TopicPartitionList::new();
    for p in t.partitions() {
        want.add_partition_offset(topic, p.id(), Offset::Offset(since))
            .map_err(|e| e.to_string())?;
    }
    let found = consumer
        .offsets_for_times(want, Duration::from_secs(5))
        .map_err(|e| e.to_string())?;
    consumer.assign(&found).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use audita_evidence::{Envelope, SigningKey};

    fn pid(s: &str) -> PrincipalId {
        PrincipalId::new(s).unwrap()
    }

    fn report(author: &str, text: &str, t: u64, key: &SigningKey) -> SignedEnvelope {
        Envelope::new(
            pid(author),
            pid("master"),
            t,
            Payload::SensorReport {
                sensor: "vda5050.state".into(),
                reading: text.into(),
            },
        )
        .sign(key)
        .unwrap()
    }

    #[test]
    fn only_registered_signatures_of_peers_are_indexed() {
        let agv = SigningKey::from_bytes(&[1; 32]);
        let forger = SigningKey::from_bytes(&[2; 32]);
        let mut keys = KeyRegistry::new();
        keys.add_principal(pid("agv"), agv.verifying_key());
        let peers = Peers::new(16);
        let real = report("agv", "s1", 10, &agv);
        let forged = report("agv", "s2", 11, &forger);
        let stranger = report("other", "s3", 12, &forger);
        let is_peer = |p: &PrincipalId| p.as_str() != "other";
        assert_eq!(peers.learn(&real, &keys, is_peer), Learned::Indexed);
        assert_eq!(peers.learn(&forged, &keys, is_peer), Learned::Refused);
        assert_eq!(peers.learn(&stranger, &keys, is_peer), Learned::Skipped);
        assert_eq!(
            peers.get(&pid("agv"), &sha256(b"s1")),
            Some(real.id().clone())
        );
        assert_eq!(
            peers.get(&pid("agv"), &sha256(b"s2")),
            None,
            "a forgery is never cited"
        );
        assert_eq!(peers.latest(&pid("agv")), Some(real.id().clone()));
    }

    #[test]
    fn the_index_is_bounded_and_keeps_the_latest_per_author() {
        let k = SigningKey::from_bytes(&[1; 32]);
        let mut i = PeerIndex::new(2);
        let a = report("agv", "a", 5, &k);
        let b = report("agv", "b", 3, &k);
        let c = report("agv", "c", 4, &k);
        for (e, t) in [(&a, 5), (&b, 3), (&c, 4)] {
            i.insert(
                sha256(vda_text(&e.envelope().payload).unwrap().as_bytes()),
                t,
                e.id().clone(),
            );
        }
        assert_eq!(i.len(), 2);
        assert_eq!(i.get(&pid("agv"), &sha256(b"a")), None, "oldest forgotten");
        assert_eq!(
            i.latest(&pid("agv")),
            Some(a.id().clone()),
            "latest by time"
        );
    }

    #[test]
    fn waiting_returns_as_soon_as_the_id_arrives_and_gives_up_at_the_bound() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let k = SigningKey::from_bytes(&[1; 32]);
            let mut keys = KeyRegistry::new();
            keys.add_principal(pid("agv"), k.verifying_key());
            let peers = Arc::new(Peers::new(16));
            let e = report("agv", "s", 1, &k);
            let p2 = peers.clone();
            let e2 = e.clone();
            let feeder = tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                p2.learn(&e2, &keys, |_| true);
            });
            let t0 = std::time::Instant::now();
            let got = peers
                .wait_for(&pid("agv"), &sha256(b"s"), Duration::from_secs(10))
                .await;
            assert_eq!(got, Some(e.id().clone()));
            assert!(t0.elapsed() < Duration::from_secs(5));
            feeder.await.unwrap();
            let none = peers
                .wait_for(&pid("agv"), &sha256(b"never"), Duration::from_millis(30))
                .await;
            assert_eq!(none, None);
        });
    }
}
