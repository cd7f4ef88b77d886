//! Message envelopes: the signed unit of evidence `m = (a, π, C, φ, σ)` and its id.
//!
//! Design constraints (wire format v1 of a signed envelope, all integers varints):
//! ```text
//! signed   = body || signature[64]          ; Ed25519 over PAE(ENVELOPE_TYPE, body)
//! body     = 0x01 version
//!            author:str destination:str timestamp:varint
//!            payload                          ; tag byte + fields, see Payload
//!            citations:count (author:str digest[32])*   ; strictly sorted, unique
//!            effect                           ; tag byte + fields, see Effect
//!            pins                             ; flags byte + present fields
//! str      = varint(len) || UTF-8
//! ```
//! - The stored/sent bytes are exactly `signed`; [`SignedEnvelope`] keeps them and
//!   verification reads them. A decoded [`Envelope`] is a view, never re-encoded
//!   for verification.
//! - The encoding is canonical (minimal varints, sorted citations, no trailing
//!   bytes), so one envelope value has one byte string.
//! - [`MessageId`] = `(author, SHA-256(signed))`: the id binds the author, and the
//!   sealed Merkle leaf encodes both (see [`MessageId::leaf_bytes`]).
//! - Citation rule: sensor reports and external inputs (and stored payloads of
//!   those kinds) are **roots** and may be uncited; every other payload is a
//!   **derived** command and must cite at least one message
//!   ([`EnvelopeError::UncitedDerived`]).
//! - Timestamps are caller-supplied ticks (milliseconds in the sample record); the
//!   library never reads a clock. Coordinates, speeds and parameters are integers
//!   (millimetres, mm/s, milli-units) so the encoding has no float ambiguity.

use std::fmt;

use ed25519_dalek::SigningKey;
use sha2::{Digest as _, Sha256};

use crate::codec::{Reader, Writer};
use crate::dsse::{self, ENVELOPE_TYPE};
use crate::error::{DecodeError, EnvelopeError, SignatureError};
use crate::principal::{check_name, KeyRegistry, PrincipalId};

/// Current envelope format version.
pub const ENVELOPE_VERSION: u8 = 1;
/// Length of an Ed25519 signature.
pub const SIGNATURE_LEN: usize = 64;

/// The signed part of stored bytes (`body || signature`); bytes too short to hold a
/// signature and a version byte are refused.
pub(crate) fn signed_body(bytes: &[u8]) -> Result<&[u8], DecodeError> {
    if bytes.len() < SIGNATURE_LEN + 1 {
        return Err(DecodeError::TooShort {
            len: bytes.len(),
            min: SIGNATURE_LEN + 1,
        });
    }
    Ok(&bytes[..bytes.len() - SIGNATURE_LEN])
}

/// A SHA-256 digest.
pub type Hash = [u8; 32];

/// SHA-256 of `data`.
pub fn sha256(data: &[u8]) -> Hash {
    Sha256::digest(data).into()
}

/// The id of a message: its author and the SHA-256 of its signed bytes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MessageId {
    /// The author the id is bound to.
    pub author: PrincipalId,
    /// SHA-256 of the signed envelope bytes.
    pub digest: Hash,
}

impl MessageId {
    /// The Merkle leaf content: `varint(len(author)) || author || digest`.
    pub fn leaf_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new();
        self.encode(&mut w);
        w.buf
    }
    /// Parses [`MessageId::leaf_bytes`] output.
    pub fn from_leaf_bytes(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        let id = Self::decode(&mut r)?;
        r.finish()?;
        Ok(id)
    }
    pub(crate) fn encode(&self, w: &mut Writer) {
        w.str(self.author.as_str());
        w.bytes(&self.digest);
    }
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let author = read_name(r)?;
        let digest = r.array32()?;
        Ok(Self { author, digest })
    }
    /// Short hex form of the digest (first 8 bytes) for display.
    pub fn short(&self) -> String {
        hex::encode(&self.digest[..8])
    }
}

impl fmt::Display for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.author, hex::encode(self.digest))
    }
}

pub(crate) fn read_name(r: &mut Reader<'_>) -> Result<PrincipalId, DecodeError> {
    let offset = r.position();
    let s = r.string()?;
    PrincipalId::new(s).map_err(|reason| DecodeError::InvalidName { offset, reason })
}

/// Kind of an externally stored payload (see [`Payload::Stored`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StoredKind {
    /// Agent text (derived).
    AgentText,
    /// Tool output (derived).
    ToolOutput,
    /// Sensor report (root).
    SensorReport,
    /// External input (root).
    ExternalInput,
}

impl StoredKind {
    fn tag(self) -> u8 {
        match self {
            Self::AgentText => 1,
            Self::ToolOutput => 2,
            Self::SensorReport => 3,
            Self::ExternalInput => 4,
        }
    }
    fn from_tag(tag: u8, offset: usize) -> Result<Self, DecodeError> {
        Ok(match tag {
            1 => Self::AgentText,
            2 => Self::ToolOutput,
            3 => Self::SensorReport,
            4 => Self::ExternalInput,
            _ => {
                return Err(DecodeError::UnknownTag {
                    what: "stored kind",
                    tag,
                    offset,
                })
            }
        })
    }
}

/// The typed payload `π` of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// Drive `target` to `(x_mm, y_mm)`. Tag 1.
    MoveTo {
        /// Actuator (robot) name.
        target: String,
        /// X in millimetres.
        x_mm: i64,
        /// Y in millimetres.
        y_mm: i64,
    },
    /// Set the speed of `target`. Tag 2.
    SetSpeed {
        /// Actuator name.
        target: String,
        /// Speed in mm/s.
        mm_per_s: u64,
    },
    /// Halt `target`. Tag 3.
    Halt {
        /// Actuator name.
        target: String,
    },
    /// Set parameter `name` of `target` (a machine or a batch). Tag 4.
    SetParam {
        /// Machine or batch name.
        target: String,
        /// Parameter name.
        name: String,
        /// Value in milli-units.
        value: i64,
    },
    /// An agent's text output. Tag 5.
    AgentText {
        /// The text.
        text: String,
    },
    /// A tool's output. Tag 6.
    ToolOutput {
        /// Tool name.
        tool: String,
        /// Output text.
        output: String,
    },
    /// A sensor report (root: may be uncited). Tag 7.
    SensorReport {
        /// Sensor name.
        sensor: String,
        /// Reading, as text (e.g. `human@1200,3400`).
        reading: String,
    },
    /// Input from outside the recorded system, e.g. an operator's order (root). Tag 8.
    ExternalInput {
        /// Source of the input.
        source: String,
        /// The input text.
        text: String,
    },
    /// A payload kept in the payload store; only its hash is signed and sealed. Tag 9.
    Stored {
        /// What the stored payload is (decides root/derived).
        kind: StoredKind,
        /// SHA-256 of the plaintext.
        digest: Hash,
        /// Plaintext length in bytes.
        len: u64,
    },
}

impl Payload {
    /// Stable kind name (used in errors and summaries).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::MoveTo { .. } => "move_to",
            Self::SetSpeed { .. } => "set_speed",
            Self::Halt { .. } => "halt",
            Self::SetParam { .. } => "set_param",
            Self::AgentText { .. } => "agent_text",
            Self::ToolOutput { .. } => "tool_output",
            Self::SensorReport { .. } => "sensor_report",
            Self::ExternalInput { .. } => "external_input",
            Self::Stored { .. } => "stored",
        }
    }
    /// Whether this is a root (sensor/exogenous) kind that may be uncited.
    pub fn is_root(&self) -> bool {
        match self {
            Self::SensorReport { .. } | Self::ExternalInput { .. } => true,
            Self::Stored { kind, .. } => {
                matches!(kind, StoredKind::SensorReport | StoredKind::ExternalInput)
            }
            _ => false,
        }
    }
    /// The actuator or machine this payload acts on, if it is a typed command.
    pub fn target(&self) -> Option<&str> {
        match self {
            Self::MoveTo { target, .. }
            | Self::SetSpeed { target, .. }
            | Self::Halt { target }
            | Self::SetParam { target, .. } => Some(target),
            _ => None,
        }
    }
    fn encode(&self, w: &mut Writer) {
        match self {
            Self::MoveTo { target, x_mm, y_mm } => {
                w.u8(1);
                w.str(target);
                w.zigzag(*x_mm);
                w.zigzag(*y_mm);
            }
            Self::SetSpeed { target, mm_per_s } => {
                w.u8(2);
                w.str(target);
                w.varint(*mm_per_s);
            }
            Self::Halt { target } => {
                w.u8(3);
                w.str(target);
            }
            Self::SetParam {
                target,
                name,
                value,
            } => {
                w.u8(4);
                w.str(target);
                w.str(name);
                w.zigzag(*value);
            }
            Self::AgentText { text } => {
                w.u8(5);
                w.str(text);
            }
            Self::ToolOutput { tool, output } => {
                w.u8(6);
                w.str(tool);
                w.str(output);
            }
            Self::SensorReport { sensor, reading } => {
                w.u8(7);
                w.str(sensor);
                w.str(reading);
            }
            Self::ExternalInput { source, text } => {
                w.u8(8);
                w.str(source);
                w.str(text);
            }
            Self::Stored { kind, digest, len } => {
                w.u8(9);
                w.u8(kind.tag());
                w.bytes(digest);
                w.varint(*len);
            }
        }
    }
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let offset = r.position();
        Ok(match r.u8()? {
            1 => Self::MoveTo {
                target: r.string()?,
                x_mm: r.zigzag()?,
                y_mm: r.zigzag()?,
            },
            2 => Self::SetSpeed {
                target: r.string()?,
                mm_per_s: r.varint()?,
            },
            3 => Self::Halt {
                target: r.string()?,
            },
            4 => Self::SetParam {
                target: r.string()?,
                name: r.string()?,
                value: r.zigzag()?,
            },
            5 => Self::AgentText { text: r.string()? },
            6 => Self::ToolOutput {
                tool: r.string()?,
                output: r.string()?,
            },
            7 => Self::SensorReport {
                sensor: r.string()?,
                reading: r.string()?,
            },
            8 => Self::ExternalInput {
                source: r.string()?,
                text: r.string()?,
            },
            9 => {
                let at = r.position();
                let kind = StoredKind::from_tag(r.u8()?, at)?;
                Self::Stored {
                    kind,
                    digest: r.array32()?,
                    len: r.varint()?,
                }
            }
            tag => {
                return Err(DecodeError::UnknownTag {
                    what: "payload",
                    tag,
                    offset,
                })
            }
        })
    }
}

/// The committed effect predicate `φ`: the state change the author commits to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// No physical or work-state commitment (e.g. a report). Tag 0.
    None,
    /// `target` is within `tolerance_mm` of `(x_mm, y_mm)`. Tag 1.
    AtPosition {
        /// Actuator name.
        target: String,
        /// X in millimetres.
        x_mm: i64,
        /// Y in millimetres.
        y_mm: i64,
        /// Tolerance radius in millimetres.
        tolerance_mm: u64,
    },
    /// `target` moves at `mm_per_s`. Tag 2.
    Speed {
        /// Actuator name.
        target: String,
        /// Speed in mm/s.
        mm_per_s: u64,
    },
    /// `target` is stopped. Tag 3.
    Halted {
        /// Actuator name.
        target: String,
    },
    /// Parameter `name` of `target` equals `value` (milli-units). Tag 4.
    Param {
        /// Machine or batch.
        target: String,
        /// Parameter name.
        name: String,
        /// Value in milli-units.
        value: i64,
    },
    /// Any other declared work-state predicate, as text. Tag 5.
    Claim(String),
}

impl Effect {
    fn encode(&self, w: &mut Writer) {
        match self {
            Self::None => w.u8(0),
            Self::AtPosition {
                target,
                x_mm,
                y_mm,
                tolerance_mm,
            } => {
                w.u8(1);
                w.str(target);
                w.zigzag(*x_mm);
                w.zigzag(*y_mm);
                w.varint(*tolerance_mm);
            }
            Self::Speed { target, mm_per_s } => {
                w.u8(2);
                w.str(target);
                w.varint(*mm_per_s);
            }
            Self::Halted { target } => {
                w.u8(3);
                w.str(target);
            }
            Self::Param {
                target,
                name,
                value,
            } => {
                w.u8(4);
                w.str(target);
                w.str(name);
                w.zigzag(*value);
            }
            Self::Claim(text) => {
                w.u8(5);
                w.str(text);
            }
        }
    }
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let offset = r.position();
        Ok(match r.u8()? {
            0 => Self::None,
            1 => Self::AtPosition {
                target: r.string()?,
                x_mm: r.zigzag()?,
                y_mm: r.zigzag()?,
                tolerance_mm: r.varint()?,
            },
            2 => Self::Speed {
                target: r.string()?,
                mm_per_s: r.varint()?,
            },
            3 => Self::Halted {
                target: r.string()?,
            },
            4 => Self::Param {
                target: r.string()?,
                name: r.string()?,
                value: r.zigzag()?,
            },
            5 => Self::Claim(r.string()?),
            tag => {
                return Err(DecodeError::UnknownTag {
                    what: "effect",
                    tag,
                    offset,
                })
            }
        })
    }
}

/// A pinned tool version.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ToolPin {
    /// Tool name.
    pub name: String,
    /// Tool version.
    pub version: String,
}

/// Replay pins: what a replay must hold fixed to re-execute the author.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayPins {
    /// Model id (e.g. `llama-3.1-8b-instruct`). Flag bit 0.
    pub model_id: Option<String>,
    /// Hash of the model weights. Flag bit 1.
    pub model_hash: Option<Hash>,
    /// Sampling seed. Flag bit 2.
    pub seed: Option<u64>,
    /// Tool versions (encoded when non-empty). Flag bit 3.
    pub tools: Vec<ToolPin>,
}

impl ReplayPins {
    fn encode(&self, w: &mut Writer) {
        let flags = u8::from(self.model_id.is_some())
            | u8::from(self.model_hash.is_some()) << 1
            | u8::from(self.seed.is_some()) << 2
            | u8::from(!self.tools.is_empty()) << 3;
        w.u8(flags);
        if let Some(m) = &self.model_id {
            w.str(m);
        }
        if let Some(h) = &self.model_hash {
            w.bytes(h);
        }
        if let Some(s) = self.seed {
            w.varint(s);
        }
        if !self.tools.is_empty() {
            w.varint(self.tools.len() as u64);
            for t in &self.tools {
                w.str(&t.name);
                w.str(&t.version);
            }
        }
    }
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let offset = r.position();
        let flags = r.u8()?;
        if flags & !0x0f != 0 {
            return Err(DecodeError::UnknownTag {
                what: "pin flags",
                tag: flags,
                offset,
            });
        }
        let model_id = if flags & 1 != 0 {
            Some(r.string()?)
        } else {
            None
        };
        let model_hash = if flags & 2 != 0 {
            Some(r.array32()?)
        } else {
            None
        };
        let seed = if flags & 4 != 0 {
            Some(r.varint()?)
        } else {
            None
        };
        let mut tools = Vec::new();
        if flags & 8 != 0 {
            let at = r.position();
            let n = r.count(2)?;
            if n == 0 {
                return Err(DecodeError::LengthOutOfBounds {
                    offset: at,
                    length: 0,
                });
            }
            for _ in 0..n {
                tools.push(ToolPin {
                    name: r.string()?,
                    version: r.string()?,
                });
            }
        }
        Ok(Self {
            model_id,
            model_hash,
            seed,
            tools,
        })
    }
}

/// The decoded content of a message (everything but the signature).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// Author principal `a`.
    pub author: PrincipalId,
    /// Destination principal (the one that must sign the delivery receipt).
    pub destination: PrincipalId,
    /// Caller-supplied time (ticks; ms in the sample record).
    pub timestamp: u64,
    /// Payload `π`.
    pub payload: Payload,
    /// Citation set `C`, kept sorted and unique.
    pub citations: Vec<MessageId>,
    /// Committed effect `φ`.
    pub effect: Effect,
    /// Replay pins.
    pub pins: ReplayPins,
}

impl Envelope {
    /// A new envelope with no citations, no effect and no pins.
    pub fn new(
        author: PrincipalId,
        destination: PrincipalId,
        timestamp: u64,
        payload: Payload,
    ) -> Self {
        Self {
            author,
            destination,
            timestamp,
            payload,
            citations: Vec::new(),
            effect: Effect::None,
            pins: ReplayPins::default(),
        }
    }
    /// Adds citations (the set is sorted and deduplicated).
    pub fn cite(mut self, ids: impl IntoIterator<Item = MessageId>) -> Self {
        self.citations.extend(ids);
        self.citations.sort();
        self.citations.dedup();
        self
    }
    /// Sets the committed effect.
    pub fn with_effect(mut self, effect: Effect) -> Self {
        self.effect = effect;
        self
    }
    /// Sets the replay pins.
    pub fn with_pins(mut self, pins: ReplayPins) -> Self {
        self.pins = pins;
        self
    }

    /// Checks the rules a message must satisfy before it is signed or accepted
    /// (the citation rule; names of targets in commands).
    pub fn validate(&self) -> Result<(), EnvelopeError> {
        if !self.payload.is_root() && self.citations.is_empty() {
            return Err(EnvelopeError::UncitedDerived {
                kind: self.payload.kind(),
                author: self.author.to_string(),
            });
        }
        if let Some(t) = self.payload.target() {
            check_name(t).map_err(|reason| EnvelopeError::InvalidName {
                field: "target",
                reason,
            })?;
        }
        Ok(())
    }

    /// The canonical body bytes (what the signature covers through PAE).
    pub fn encode_body(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u8(ENVELOPE_VERSION);
        w.str(self.author.as_str());
        w.str(self.destination.as_str());
        w.varint(self.timestamp);
        self.payload.encode(&mut w);
        let mut cites = self.citations.clone();
        cites.sort();
        cites.dedup();
        w.varint(cites.len() as u64);
        for c in &cites {
            c.encode(&mut w);
        }
        self.effect.encode(&mut w);
        self.pins.encode(&mut w);
        w.buf
    }

    /// Decodes body bytes (total; rejects non-canonical encodings).
    pub fn decode_body(body: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body);
        let version = r.u8()?;
        if version != ENVELOPE_VERSION {
            return Err(DecodeError::UnknownVersion(version));
        }
        let author = read_name(&mut r)?;
        let destination = read_name(&mut r)?;
        let timestamp = r.varint()?;
        let payload = Payload::decode(&mut r)?;
        let n = r.count(33)?;
        let mut citations: Vec<MessageId> = Vec::with_capacity(n);
        for _ in 0..n {
            let at = r.position();
            let id = MessageId::decode(&mut r)?;
            if citations.last().is_some_and(|last| *last >= id) {
                return Err(DecodeError::UnsortedCitations { offset: at });
            }
            citations.push(id);
        }
        let effect = Effect::decode(&mut r)?;
        let pins = ReplayPins::decode(&mut r)?;
        r.finish()?;
        Ok(Self {
            author,
            destination,
            timestamp,
            payload,
            citations,
            effect,
            pins,
        })
    }

    /// Validates, encodes and signs with the author's key.
    pub fn sign(mut self, key: &SigningKey) -> Result<SignedEnvelope, EnvelopeError> {
        self.validate()?;
        // The decoded view must equal what the bytes say: citations are a set.
        self.citations.sort();
        self.citations.dedup();
        let body = self.encode_body();
        let sig = dsse::sign(key, ENVELOPE_TYPE, &body);
        let mut bytes = body;
        bytes.extend_from_slice(&sig);
        let id = MessageId {
            author: self.author.clone(),
            digest: sha256(&bytes),
        };
        if self.citations.contains(&id) {
            return Err(EnvelopeError::SelfCitation);
        }
        Ok(SignedEnvelope {
            bytes,
            envelope: self,
            id,
        })
    }
}

/// A message as stored and sent: the exact signed bytes plus their decoded view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedEnvelope {
    bytes: Vec<u8>,
    envelope: Envelope,
    id: MessageId,
}

impl SignedEnvelope {
    /// Decodes stored bytes (total: errors, never panics; allocations bounded by
    /// the input length). Does **not** check the signature: see [`Self::verify`].
    pub fn decode(bytes: Vec<u8>) -> Result<Self, DecodeError> {
        let envelope = Envelope::decode_body(signed_body(&bytes)?)?;
        let id = MessageId {
            author: envelope.author.clone(),
            digest: sha256(&bytes),
        };
        Ok(Self {
            bytes,
            envelope,
            id,
        })
    }
    /// The exact stored bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }
    /// Consumes into the stored bytes.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
    /// The signed body bytes (stored bytes without the signature).
    pub fn body(&self) -> &[u8] {
        &self.bytes[..self.bytes.len() - SIGNATURE_LEN]
    }
    /// The signature bytes.
    pub fn signature(&self) -> [u8; 64] {
        let mut s = [0u8; 64];
        s.copy_from_slice(&self.bytes[self.bytes.len() - SIGNATURE_LEN..]);
        s
    }
    /// The decoded envelope.
    pub fn envelope(&self) -> &Envelope {
        &self.envelope
    }
    /// The message id `(author, SHA-256(bytes))`.
    pub fn id(&self) -> &MessageId {
        &self.id
    }
    /// Verifies the author's signature over the stored bytes and the citation rule.
    pub fn verify(self, keys: &KeyRegistry) -> Result<Verified<SignedEnvelope>, MessageCheck> {
        self.check(keys)?;
        Ok(Verified(self))
    }
    /// Like [`Self::verify`] without consuming.
    ///
    /// The signature must verify under one of the author's registered keys, and
    /// that key's validity window must cover the envelope's timestamp (else
    /// [`SignatureError::KeyNotValid`] says how it fails).
    pub fn check(&self, keys: &KeyRegistry) -> Result<(), MessageCheck> {
        let author = self.envelope.author.as_str();
        check_signer(
            keys,
            author,
            self.envelope.timestamp,
            ENVELOPE_TYPE,
            self.body(),
            &self.signature(),
        )
        .map_err(MessageCheck::Signature)?;
        self.envelope.validate().map_err(MessageCheck::Envelope)
    }
}

/// Verifies `signature` of `signer` over `PAE(payload_type, body)`: it must verify
/// under one of the signer's registered keys whose window covers `at_ms`. A signature
/// that verifies only under a key whose window does not cover `at_ms` is
/// [`SignatureError::KeyNotValid`].
pub(crate) fn check_signer(
    keys: &KeyRegistry,
    signer: &str,
    at_ms: u64,
    payload_type: &str,
    body: &[u8],
    signature: &[u8; 64],
) -> Result<(), SignatureError> {
    let candidates = keys.principal_keys(signer);
    if candidates.is_empty() {
        return Err(SignatureError::UnknownSigner(signer.to_owned()));
    }
    if let Some(k) = keys.principal_at(signer, at_ms) {
        if dsse::verify(k, payload_type, body, signature) {
            return Ok(());
        }
    }
    for (k, w) in candidates {
        if dsse::verify(k, payload_type, body, signature) {
            return match w.check(at_ms) {
                Ok(()) => Ok(()),
                Err(validity) => Err(SignatureError::KeyNotValid {
                    signer: signer.to_owned(),
                    at_ms,
                    validity,
                }),
            };
        }
    }
    Err(SignatureError::BadSignature(signer.to_owned()))
}

/// Why a single message failed its own checks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessageCheck {
    /// Signature or key failure.
    #[error(transparent)]
    Signature(SignatureError),
    /// Rule failure (e.g. uncited derived command).
    #[error(transparent)]
    Envelope(EnvelopeError),
}

/// A value whose signature has been checked against a [`KeyRegistry`].
///
/// Only this crate constructs it, so a function taking `Verified<T>` needs no flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified<T>(T);

impl<T> Verified<T> {
    pub(crate) fn new_unchecked(v: T) -> Self {
        Self(v)
    }
    /// Drops the proof of verification.
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> std::ops::Deref for Verified<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}
