//! The client library of an Audita principal: a planner, a dispatcher, a robot
//! controller, a sensor gateway — anything that signs evidence.
//!
//! - [`Principal`]: the principal's name and private key (a key file written by
//!   `audita principal add`, or `env:NAME`), and everything it signs: envelopes
//!   (typed payload, citations of the messages it acted on, committed effect, replay
//!   pins) and delivery receipts for what it received.
//! - [`Publisher`] (async, tokio) and [`BlockingPublisher`]: publish signed
//!   envelopes and receipts to a deployment's Kafka topics (`<prefix>audita.envelopes`
//!   keyed by author, `<prefix>audita.receipts` keyed by recipient) with delivery
//!   reports, through a durable local [`Spool`].
//!
//! Design constraints:
//! - Nothing accepted is lost: every item is written to the spool (temp file, fsync,
//!   rename, fsync of the directory) before it is handed to the producer, and removed
//!   only after the broker acknowledged it (`acks=all`, idempotent producer). Items
//!   a broker outage left undelivered stay spooled, across process restarts, and are
//!   sent again by [`Publisher::resend_spool`] (also at [`Publisher::open`]).
//! - Nothing is duplicated in the record: a re-sent item may reach the topic twice
//!   (delivered, but the acknowledgement was lost), and the sealer seals each message
//!   id once (`audita_sealer` dedupes by id; receipts by their digest).
//! - The spool is bounded ([`SpoolConfig::max_bytes`]); past it `publish` fails with
//!   [`ClientError::SpoolFull`] instead of growing without limit, and the caller
//!   decides (back off, alarm). One publisher per spool directory (`flock`).
//! - The library signs only with the principal's own key and only as that
//!   principal: an envelope whose author is someone else is refused, as is a receipt
//!   for a message addressed to someone else.
//! - Clock: timestamps are the caller's (milliseconds of record time); [`unix_ms`]
//!   is the usual choice for a live deployment.
//!
//! ```no_run
//! use audita_client::{Principal, Payload, Effect, BlockingPublisher, PublisherConfig};
//!
//! let planner = Principal::load("planner", "keys/planner.key", std::path::Path::new("."))?;
//! let observation = planner.message("dispatcher", audita_client::unix_ms(),
//!     Payload::ExternalInput { source: "wms".into(), text: "order 7: crate to dock 2".into() })?;
//! let obs = planner.sign(observation)?;
//! let order = planner
//!     .message("dispatcher", audita_client::unix_ms(),
//!         Payload::AgentText { text: "send agv-7 to dock 2 via aisle 3".into() })?
//!     .cite([obs.id().clone()])
//!     .with_effect(Effect::Claim("crate 7 assigned to agv-7".into()));
//! let order = planner.sign(order)?;
//! let publisher = BlockingPublisher::open(PublisherConfig::new("127.0.0.1:9092", "spool/planner"))?;
//! publisher.publish(&obs)?;
//! publisher.publish(&order)?;
//! # Ok::<(), audita_client::ClientError>(())
//! ```

#![warn(missing_docs)]
#![warn(clippy::too_many_lines)]

mod principal;
mod publish;
mod spool;

pub use audita_evidence::{
    Effect, Envelope, MessageId, Payload, Receipt, ReplayPins, SignedEnvelope,
};
pub use principal::Principal;
pub use publish::{Accepted, BlockingPublisher, Delivered, Publisher, PublisherConfig, Resent};
pub use spool::{Lane, Spool, SpoolConfig, Spooled};

use std::path::PathBuf;

/// Milliseconds since the Unix epoch (the record time of a live deployment).
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Why a client call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The key cannot be read or is not the principal's.
    #[error("key: {0}")]
    Key(#[from] audita_keys::KeyError),
    /// A name is not a valid principal name.
    #[error("{what} {name:?} is not a valid name: {reason}")]
    Name {
        /// Which name.
        what: &'static str,
        /// The name.
        name: String,
        /// Why.
        reason: String,
    },
    /// The envelope breaks a rule of the format (e.g. a derived command citing
    /// nothing).
    #[error("envelope: {0}")]
    Envelope(#[from] audita_evidence::EnvelopeError),
    /// This principal may not sign it (another author, another recipient).
    #[error("not this principal's to sign: {0}")]
    NotOurs(String),
    /// The spool directory cannot be used.
    #[error("spool {path}: {reason}")]
    Spool {
        /// The spool directory or file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The spool holds its maximum; the item was not accepted.
    #[error("spool {path} is full ({bytes} bytes spooled, limit {max}); the broker is unreachable or too slow")]
    SpoolFull {
        /// The spool directory.
        path: PathBuf,
        /// Bytes spooled.
        bytes: u64,
        /// The limit.
        max: u64,
    },
    /// The Kafka producer could not be created (bad configuration).
    #[error("kafka producer: {0}")]
    Producer(String),
    /// The broker did not acknowledge the item in time; it stays spooled and is
    /// sent again by [`Publisher::resend_spool`]. Nothing is lost.
    #[error("not delivered (kept in the spool as item {seq}): {reason}")]
    Undelivered {
        /// The spool item.
        seq: u64,
        /// Why.
        reason: String,
    },
}

impl ClientError {
    /// Whether the item is safe in the spool (the call may simply be retried later).
    pub fn is_spooled(&self) -> bool {
        matches!(self, ClientError::Undelivered { .. })
    }
}
