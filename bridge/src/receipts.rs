//! The delivery receipts a sidecar signs, as its principal, for the evidence
//! addressed to that principal (SPEC §2: a message without its recipient's receipt
//! does not certify).
//!
//! Design constraints:
//! - A receipt is signed only for a peer's envelope whose signature verified under
//!   the registry ([`crate::peers`]) and whose destination is this principal, and —
//!   when the envelope carries a VDA 5050 payload — only once this sidecar has also
//!   received that payload over MQTT: the receipt then says "master control's side
//!   got this state" (or "the vehicle's side got this order"), not merely "the
//!   evidence topic had it". Envelopes without an MQTT counterpart (actuation
//!   reports, master control's own roots) are receipted on verification.
//! - The two arrivals may come in either order; whichever comes second signs.
//! - Deterministic: the receipt's time is the envelope's own timestamp, so a
//!   repeated receipt is the same bytes (the sealer keeps one). Each id is receipted
//!   once per run (bounded memory).
//! - Known gap: a receipt still pending when the sidecar stops (the other arrival
//!   not yet there) is not made by the next run; that message then shows as
//!   unreceipted in the record, which the verifier reports.
//! - `remove` is linear in the bound; the bound is small (pending arrivals), and a
//!   removal only happens once per receipted message.

use std::sync::{Arc, Mutex};

use audita_client::{Principal, Receipt, SignedEnvelope};
use audita_evidence::{sha256, Hash, MessageId};

use crate::bounded::Bounded;
use crate::peers::vda_text;

/// Receipt bookkeeping of one sidecar.
pub struct Receipts {
    principal: Arc<Principal>,
    inner: Mutex<Inner>,
}

struct Inner {
    /// Payload digests received over MQTT whose envelope is not indexed yet.
    seen: Bounded<Hash, ()>,
    /// Indexed envelopes whose payload has not been received over MQTT yet.
    waiting: Bounded<Hash, (MessageId, u64)>,
    /// Ids already receipted.
    done: Bounded<MessageId, ()>,
}

impl Receipts {
    /// Bookkeeping for `principal`, remembering at most `cap` items of each kind.
    pub fn new(principal: Arc<Principal>, cap: usize) -> Receipts {
        Receipts {
            principal,
            inner: Mutex::new(Inner {
                seen: Bounded::new(cap),
                waiting: Bounded::new(cap),
                done: Bounded::new(cap),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn make(&self, inner: &mut Inner, id: MessageId, at_ms: u64) -> Option<Receipt> {
        if inner.done.get(&id).is_some() {
            return None;
        }
        inner.done.insert(id.clone(), ());
        Some(self.principal.receipt_for(id, at_ms))
    }

    /// A peer's VDA 5050 payload with `digest` arrived over MQTT.
    pub fn seen(&self, digest: Hash) -> Option<Receipt> {
        let mut inner = self.lock();
        match inner.waiting.remove(&digest) {
            Some((id, at)) => self.make(&mut inner, id, at),
            None => {
                inner.seen.insert(digest, ());
                None
            }
        }
    }

    /// A peer's envelope verified under the registry.
    pub fn verified(&self, envelope: &SignedEnvelope) -> Option<Receipt> {
        let e = envelope.envelope();
        if e.destination != *self.principal.id() {
            return None;
        }
        let id = envelope.id().clone();
        let mut inner = self.lock();
        match vda_text(&e.payload) {
            None => self.make(&mut inner, id, e.timestamp),
            Some(text) => {
                let digest = sha256(text.as_bytes());
                if inner.seen.remove(&digest).is_some() {
                    self.make(&mut inner, id, e.timestamp)
                } else {
                    inner.waiting.insert(digest, (id, e.timestamp));
                    None
                }
            }
        }
    }

    /// The receipt of this principal's own envelope addressed to itself (master
    /// control's root).
    pub fn own(&self, envelope: &SignedEnvelope) -> Option<Receipt> {
        let e = envelope.envelope();
        if e.destination != *self.principal.id() || e.author != *self.principal.id() {
            return None;
        }
        let mut inner = self.lock();
        self.make(&mut inner, envelope.id().clone(), e.timestamp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use audita_evidence::{Envelope, KeyRegistry, Payload, PrincipalId, SigningKey};

    fn pid(s: &str) -> PrincipalId {
        PrincipalId::new(s).unwrap()
    }

    #[test]
    fn a_state_is_receipted_once_both_the_mqtt_payload_and_the_verified_envelope_are_in() {
        let mc_key = SigningKey::from_bytes(&[2; 32]);
        let mc = Arc::new(Principal::from_key("master", mc_key.clone()).unwrap());
        let agv = SigningKey::from_bytes(&[1; 32]);
        let r = Receipts::new(mc.clone(), 16);
        let state = |text: &str, t| {
            Envelope::new(
                pid("acme.7"),
                pid("master"),
                t,
                Payload::SensorReport {
                    sensor: "vda5050.state".into(),
                    reading: text.into(),
                },
            )
            .sign(&agv)
            .unwrap()
        };
        // Envelope first, then the MQTT payload.
        let a = state("s1", 5);
        assert!(r.verified(&a).is_none());
        let got = r.seen(sha256(b"s1")).expect("a receipt");
        let mut keys = KeyRegistry::new();
        keys.add_principal(pid("master"), mc_key.verifying_key());
        assert_eq!(got.message(), a.id());
        got.verify(&keys).unwrap();
        assert_eq!(got.recipient().as_str(), "master");
        // MQTT payload first, then the envelope; and only once.
        let b = state("s2", 6);
        assert!(r.seen(sha256(b"s2")).is_none());
        assert!(r.verified(&b).is_some());
        assert!(r.verified(&b).is_none(), "receipted once");
        // Not addressed to us: never.
        let other = Envelope::new(
            pid("acme.7"),
            pid("someone-else"),
            7,
            Payload::SensorReport {
                sensor: "vda5050.state".into(),
                reading: "s3".into(),
            },
        )
        .sign(&agv)
        .unwrap();
        assert!(r.seen(sha256(b"s3")).is_none());
        assert!(r.verified(&other).is_none());
        // An actuation report has no MQTT counterpart: receipted on verification.
        let report = Envelope::new(
            pid("acme.7"),
            pid("master"),
            8,
            Payload::ToolOutput {
                tool: "vda5050.action".into(),
                output: "{}".into(),
            },
        )
        .cite([a.id().clone()])
        .sign(&agv)
        .unwrap();
        assert!(r.verified(&report).is_some());
    }
}
