//! Quarantine to `audita.suspect`, through a durable spool of its own.
//!
//! Design constraints:
//! - A rejected MQTT message becomes one `audita_topics::Quarantined` record: the
//!   MQTT topic as `source_topic` (prefixed `mqtt:`), partition 0, `offset` = the
//!   sidecar's count of messages taken since it started (MQTT has no offsets; the
//!   count orders one run's records), the reason, one line of detail, and the
//!   payload in hex — at most [`MAX_KEPT_BYTES`] of it, the detail saying so.
//! - The record is durable in the sidecar's suspect spool (the client's [`Spool`],
//!   its own directory) before the MQTT message is acknowledged, exactly like
//!   evidence; it leaves the spool when the broker acknowledged it, and what a
//!   Kafka outage left there is sent again.

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use audita_client::{Lane, Spool, SpoolConfig};
use audita_topics::Quarantined;
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord, Producer as _};
use rdkafka::util::Timeout;
use rdkafka::ClientConfig;

use crate::check::Rejection;
use crate::error::BridgeError;

/// Most payload bytes a quarantine record keeps.
pub const MAX_KEPT_BYTES: usize = 64 << 10;

/// The quarantine record of `payload` on `topic`, the `seq`-th message taken.
pub fn record(topic: &str, seq: u64, payload: &[u8], r: &Rejection) -> Quarantined {
    let kept = &payload[..payload.len().min(MAX_KEPT_BYTES)];
    let mut detail = r.detail.clone();
    if kept.len() < payload.len() {
        detail.push_str(&format!(
            " (first {} of {} bytes kept)",
            kept.len(),
            payload.len()
        ));
    }
    Quarantined {
        source_topic: format!("mqtt:{topic}"),
        partition: 0,
        offset: seq,
        reason: r.reason.to_string(),
        detail,
        bytes_hex: hex::encode(kept),
    }
}

/// A quarantine record made durable and handed to the producer.
pub struct Accepted {
    seq: u64,
    delivery: Option<DeliveryFuture>,
}

/// The sidecar's way to `audita.suspect`.
pub struct SuspectSink {
    spool: Mutex<Spool>,
    producer: FutureProducer,
    topic: String,
}

impl SuspectSink {
    /// Opens the spool in `dir` and a producer to `topic`.
    pub fn open(
        dir: &Path,
        bootstrap: &str,
        topic: String,
        kafka: &[(String, String)],
        delivery_timeout: Duration,
    ) -> Result<SuspectSink, BridgeError> {
        let spool = Spool::open(&SpoolConfig::new(dir)).map_err(BridgeError::Client)?;
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", bootstrap)
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("linger.ms", "5")
            .set(
                "message.timeout.ms",
                delivery_timeout.as_millis().max(1).to_string(),
            )
            .set("log_level", "3");
        for (k, v) in kafka {
            c.set(k, v);
        }
        let producer = c.create().map_err(|e| BridgeError::Kafka(e.to_string()))?;
        Ok(SuspectSink {
            spool: Mutex::new(spool),
            producer,
            topic,
        })
    }

    fn spool(&self) -> std::sync::MutexGuard<'_, Spool> {
        self.spool
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Spools `q` durably and hands it to the producer.
    pub fn accept(&self, q: &Quarantined) -> Result<Accepted, BridgeError> {
        let bytes = serde_json::to_vec(q).map_err(|e| BridgeError::Internal(e.to_string()))?;
        let seq = self
            .spool()
            .put(Lane::Envelope, &bytes)
            .map_err(BridgeError::Client)?;
        let record = FutureRecord::to(&self.topic)
            .key(q.source_topic.as_bytes())
            .payload(&bytes);
        let delivery = self.producer.send_result(record).ok();
        Ok(Accepted { seq, delivery })
    }

    /// Waits for the broker's acknowledgement; `true` when delivered (and removed
    /// from the spool).
    pub async fn delivered(&self, a: Accepted) -> bool {
        let Some(d) = a.delivery else { return false };
        match d.await {
            Ok(Ok(_)) => self.spool().remove(a.seq).is_ok(),
            _ => false,
        }
    }

    /// Sends every spooled record again; returns (delivered, still spooled).
    pub async fn resend(&self) -> Result<(usize, usize), BridgeError> {
        let pending = self.spool().pending().map_err(BridgeError::Client)?;
        let (mut ok, mut left) = (0, 0);
        for item in pending {
            let key = serde_json::from_slice::<Quarantined>(&item.bytes)
                .map(|q| q.source_topic)
                .unwrap_or_default();
            let record = FutureRecord::to(&self.topic)
                .key(key.as_bytes())
                .payload(&item.bytes);
            match self
                .producer
                .send(record, Timeout::After(Duration::from_secs(1)))
                .await
            {
                Ok(_) => {
                    self.spool().remove(item.seq).map_err(BridgeError::Client)?;
                    ok += 1;
                }
                Err(_) => left += 1,
            }
        }
        Ok((ok, left))
    }

    /// Records spooled.
    pub fn spooled(&self) -> usize {
        self.spool().len()
    }

    /// Waits up to `timeout` for the producer queue to drain.
    pub fn flush(&self, timeout: Duration) {
        let _ = self.producer.flush(Timeout::After(timeout));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_keeps_the_reason_and_a_bounded_copy_of_the_bytes() {
        let r = Rejection::new("schema", "state 2.1.0: at /: \"x\" is a required property");
        let q = record("uagv/v2/a/b/state", 7, b"{}", &r);
        assert_eq!(q.source_topic, "mqtt:uagv/v2/a/b/state");
        assert_eq!(q.offset, 7);
        assert_eq!(q.reason, "schema");
        assert_eq!(q.bytes_hex, "7b7d");
        let big = vec![b'x'; MAX_KEPT_BYTES + 10];
        let q = record("t", 0, &big, &Rejection::new("oversize", "too big"));
        assert_eq!(q.bytes_hex.len(), 2 * MAX_KEPT_BYTES);
        assert!(q.detail.ends_with(&format!(
            "(first {MAX_KEPT_BYTES} of {} bytes kept)",
            big.len()
        )));
    }
}
