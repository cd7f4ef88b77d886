//! The VDA 5050 bridge: records an AGV fleet's MQTT traffic (VDA 5050 2.x and 3.x)
//! as signed Audita evidence without changing the fleet.
//!
//! # Trust model: one sidecar per principal, each with its own key
//!
//! The bridge is a conduit, never the author of someone else's command. It runs as
//! **sidecars**, each holding the key of exactly one principal and signing only what
//! that principal published on MQTT:
//! - a **vehicle sidecar** per vehicle (`manufacturer`/`serialNumber`), next to the
//!   vehicle controller, signs that vehicle's `state`, `connection`, `factsheet` and
//!   `visualization` as its sensor roots, and each `actionStates` status change as
//!   an actuation report citing the order (or instant actions) that requested the
//!   action;
//! - one **master-control sidecar**, next to the fleet manager, signs `order` and
//!   `instantActions` (3.0: also `responses`, `zoneSet`) as master control's derived
//!   commands, each citing the latest `state` of that vehicle it had seen.
//!
//! A sidecar signs a message only if the topic's author side is its own and, for a
//! vehicle sidecar, only on its vehicle's topics with its vehicle's
//! `manufacturer`/`serialNumber` in the body; everything else it receives is either
//! a peer's message it only reads (to learn citations) or is quarantined. A
//! compromised vehicle sidecar can therefore lie only as its vehicle, a compromised
//! master-control sidecar only as master control — exactly what their keys allow
//! anyway.
//!
//! # How a sidecar learns the ids it cites
//!
//! A message id is the SHA-256 of the *signed* envelope, and an Ed25519 signature
//! cannot be computed without the signer's key: master control's sidecar cannot
//! derive the id of the vehicle's state envelope from the VDA header, however
//! deterministic the vehicle sidecar's encoding is. So each sidecar reads its
//! peers' signed envelopes from the deployment's `audita.envelopes` topic
//! ([`peers`]), **verifies each signature against the registry** (an envelope that
//! does not verify under the author's registered key is never cited) and indexes
//! it by `(author, SHA-256 of the VDA payload it carries)`. Over MQTT it sees the
//! same payloads the fleet exchanged, so when master control publishes an order the
//! master sidecar knows the payload digest of the last state of that vehicle it
//! received, and cites the id the index holds for it (waiting a bounded time,
//! `cite_wait`, for the vehicle sidecar's envelope to arrive; then the latest state
//! of that vehicle whose id it knows; with none, a root of master control's own —
//! the command is then recorded as master control's initiative). The vehicle
//! sidecar does the same for orders: it remembers which order payload requested
//! which `actionId`, and its actuation reports cite that order's id.
//!
//! Why this, and not a side channel: the deployment's topic is where the evidence
//! is anyway (no new MQTT topics, the fleet is untouched), and reading it through
//! the registry makes the index trust no bridge. **What a dishonest sidecar can
//! still do, and how it is caught.** A master sidecar can cite an id the vehicle
//! never produced. Ingest checks form, signature and the citation rule, not that
//! a cited id exists (it cannot, streaming); the record verifier reports such an id
//! as **missing**, attributed to the vehicle with the master's command as its only
//! certified citer — and since the vehicle sidecar records every state, with the
//! VDA `headerId` sequence inside the sealed payloads, an analyst sees there is no
//! gap where the "deleted" state could have been: the missing id is the citer's
//! claim, not the vehicle's deletion. A missing item can only widen intervals,
//! never clear the citer. A master sidecar that cites nothing at all only makes its
//! command look more spontaneous (more responsibility, not less).
//!
//! # Receipts
//!
//! A message certifies only with its recipient's receipt, so each sidecar signs,
//! as its own principal, the receipts of the peers' envelopes addressed to it
//! ([`receipts`]): master control's sidecar for the vehicle's reports and actuation
//! reports, a vehicle's sidecar for master control's commands — each only after the
//! envelope verified under the registry and, for a VDA 5050 payload, after the
//! sidecar received the same payload over MQTT itself.
//!
//! # Validation and quarantine
//!
//! Every MQTT message is checked ([`check`]): payload bound, topic, JSON (no
//! duplicate keys), `version` (2.x → the 2.1.0 schemas, 3.x → 3.0.0, matching the
//! topic's major version), the official schema of its topic, the vehicle named in
//! the body equal to the topic's, the timestamp. What fails goes to
//! `audita.suspect` as an `audita_topics::Quarantined` with the reason and the
//! bytes; nothing is dropped silently: every message a sidecar takes is published
//! as evidence, quarantined, or (a peer's message) only read, and the three are
//! counted ([`Counters`]).
//!
//! # Delivery
//!
//! QoS 1, a persistent session (`clean_session = false`, a fixed client id) and
//! manual acknowledgements: a message is acknowledged to the MQTT broker only after
//! its evidence (or its quarantine record) is durable in the sidecar's spool
//! ([`audita_client::Spool`]); a crash or a broker restart before that makes the
//! broker deliver it again, and since the envelope is a deterministic function of
//! the payload, a re-delivered message is the same message id, which the sealer
//! seals once. A Kafka outage is the client spool's: items stay spooled and are
//! sent when the broker is back.
//!
//! Modules: [`topic`] (topic names), [`schema`] (the embedded official schemas),
//! [`check`] (intake checks), [`map`] (the pure mapping), [`peers`] (the citation
//! index), [`receipts`] (what a sidecar receipts), [`quarantine`] (to `audita.suspect`), [`sidecar`] (the MQTT run loop),
//! [`testing`] (schema-valid messages for tests and benchmarks).

#![warn(missing_docs)]
#![warn(clippy::too_many_lines)]

mod bounded;
pub mod check;
mod error;
pub mod map;
pub mod peers;
pub mod quarantine;
pub mod receipts;
pub mod schema;
pub mod sidecar;
pub mod testing;
mod text;
pub mod topic;

pub use check::{Intake, Message, Rejection};
pub use sidecar::{run, run_many, BridgeConfig, BridgeError, Counters, Role, Summary};
