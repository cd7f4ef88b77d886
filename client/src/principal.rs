//! A principal's identity and key, and what it signs.

use std::path::Path;

use audita_evidence::checkpoint::ED25519_NOTE_TYPE;
use audita_evidence::{
    Envelope, MessageId, Payload, PrincipalId, Receipt, SignedEnvelope, SigningKey,
};

use crate::ClientError;

/// A principal: its registered name and its private key.
pub struct Principal {
    id: PrincipalId,
    key: SigningKey,
}

impl std::fmt::Debug for Principal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("Principal").field("id", &self.id).finish()
    }
}

fn name(what: &'static str, n: &str) -> Result<PrincipalId, ClientError> {
    PrincipalId::new(n).map_err(|e| ClientError::Name {
        what,
        name: n.to_string(),
        reason: e.to_string(),
    })
}

impl Principal {
    /// The principal `name` with the key at `source` (a key file path relative to
    /// `base`, or `env:VAR`): a C2SP note private key (whose name must be `name`) or
    /// PKCS#8 PEM, in a file only its owner can read.
    pub fn load(name_: &str, source: &str, base: &Path) -> Result<Principal, ClientError> {
        let id = name("principal", name_)?;
        let key = audita_keys::load(source, base, Some(name_))?;
        Ok(Principal { id, key })
    }

    /// The principal `name` signing with `key`.
    pub fn from_key(name_: &str, key: SigningKey) -> Result<Principal, ClientError> {
        Ok(Principal {
            id: name("principal", name_)?,
            key,
        })
    }

    /// Its name.
    pub fn id(&self) -> &PrincipalId {
        &self.id
    }

    /// Its public key as a C2SP verifier key (what `audita principal add` prints and
    /// the deployment registers).
    pub fn vkey(&self) -> String {
        audita_evidence::trust::vkey(
            self.id.as_str(),
            ED25519_NOTE_TYPE,
            &self.key.verifying_key(),
        )
    }

    /// A new envelope from this principal to `destination` at `timestamp_ms` (add
    /// citations, effect and pins on the returned builder, then [`Self::sign`]).
    pub fn message(
        &self,
        destination: &str,
        timestamp_ms: u64,
        payload: Payload,
    ) -> Result<Envelope, ClientError> {
        Ok(Envelope::new(
            self.id.clone(),
            name("destination", destination)?,
            timestamp_ms,
            payload,
        ))
    }

    /// Signs `envelope` (validated first: a derived command must cite what it acted
    /// on). Refused if its author is another principal.
    pub fn sign(&self, envelope: Envelope) -> Result<SignedEnvelope, ClientError> {
        if envelope.author != self.id {
            return Err(ClientError::NotOurs(format!(
                "the envelope's author is {}, this principal is {}",
                envelope.author, self.id
            )));
        }
        Ok(envelope.sign(&self.key)?)
    }

    /// The delivery receipt for `message`, received at `timestamp_ms`. Refused
    /// unless this principal is the message's destination.
    pub fn receipt(
        &self,
        message: &SignedEnvelope,
        timestamp_ms: u64,
    ) -> Result<Receipt, ClientError> {
        let dest = &message.envelope().destination;
        if *dest != self.id {
            return Err(ClientError::NotOurs(format!(
                "{} is addressed to {dest}, not to {}",
                message.id(),
                self.id
            )));
        }
        Ok(self.receipt_for(message.id().clone(), timestamp_ms))
    }

    /// The delivery receipt for the message `id` (when only its id is at hand; the
    /// verifier checks that this principal is its destination).
    pub fn receipt_for(&self, id: MessageId, timestamp_ms: u64) -> Receipt {
        Receipt::sign(id, self.id.clone(), timestamp_ms, &self.key)
    }
}
