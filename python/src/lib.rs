//! `audita._native`: the PyO3 core of the Python package `audita`, built from the
//! Rust crates themselves (`audita-client`, `audita-evidence`), so Python signs the
//! same bytes, checks the same rules and spools and publishes the same way.
//!
//! Design constraints:
//! - The boundary is narrow and typed by JSON: payloads, effects and pins cross it
//!   as JSON text in the documented shapes (`pysrc/audita/__init__.py`), parsed here
//!   with `deny_unknown_fields`; signed objects cross it as their exact bytes. A bad
//!   input raises `ValueError` with one line naming the problem; nothing panics.
//! - Private keys stay in Rust objects ([`Principal`]); Python never sees the seed.
//! - Blocking calls (publishing, resending the spool) release the interpreter.

#![warn(clippy::too_many_lines)]

use audita_client::{BlockingPublisher, ClientError, Principal as RustPrincipal, PublisherConfig};
use audita_evidence::checkpoint::ED25519_NOTE_TYPE;
use audita_evidence::trust::parse_vkey;
use audita_evidence::{
    Effect, MessageId, Payload, PrincipalId, Receipt, ReplayPins, SignedEnvelope, ToolPin,
};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use serde::Deserialize;
use serde_json::json;

create_exception!(
    _native,
    AuditaError,
    PyException,
    "An Audita operation failed."
);
create_exception!(
    _native,
    Undelivered,
    AuditaError,
    "The broker did not acknowledge the item in time; it is kept in the spool and sent again by Publisher.resend_spool(). Nothing is lost."
);

fn value_err(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn client_err(e: ClientError) -> PyErr {
    match e {
        e @ ClientError::Undelivered { .. } => Undelivered::new_err(e.to_string()),
        e @ (ClientError::Envelope(_) | ClientError::Name { .. } | ClientError::NotOurs(_)) => {
            value_err(e)
        }
        e => AuditaError::new_err(e.to_string()),
    }
}

#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum PayloadSpec {
    MoveTo {
        target: String,
        x_mm: i64,
        y_mm: i64,
    },
    SetSpeed {
        target: String,
        mm_per_s: u64,
    },
    Halt {
        target: String,
    },
    SetParam {
        target: String,
        name: String,
        value: i64,
    },
    AgentText {
        text: String,
    },
    ToolOutput {
        tool: String,
        output: String,
    },
    SensorReport {
        sensor: String,
        reading: String,
    },
    ExternalInput {
        source: String,
        text: String,
    },
}

impl From<PayloadSpec> for Payload {
    fn from(p: PayloadSpec) -> Payload {
        match p {
            PayloadSpec::MoveTo { target, x_mm, y_mm } => Payload::MoveTo { target, x_mm, y_mm },
            PayloadSpec::SetSpeed { target, mm_per_s } => Payload::SetSpeed { target, mm_per_s },
            PayloadSpec::Halt { target } => Payload::Halt { target },
            PayloadSpec::SetParam {
                target,
                name,
                value,
            } => Payload::SetParam {
                target,
                name,
                value,
            },
            PayloadSpec::AgentText { text } => Payload::AgentText { text },
            PayloadSpec::ToolOutput { tool, output } => Payload::ToolOutput { tool, output },
            PayloadSpec::SensorReport { sensor, reading } => {
                Payload::SensorReport { sensor, reading }
            }
            PayloadSpec::ExternalInput { source, text } => Payload::ExternalInput { source, text },
        }
    }
}

#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum EffectSpec {
    None,
    AtPosition {
        target: String,
        x_mm: i64,
        y_mm: i64,
        tolerance_mm: u64,
    },
    Speed {
        target: String,
        mm_per_s: u64,
    },
    Halted {
        target: String,
    },
    Param {
        target: String,
        name: String,
        value: i64,
    },
    Claim {
        text: String,
    },
}

impl From<EffectSpec> for Effect {
    fn from(e: EffectSpec) -> Effect {
        match e {
            EffectSpec::None => Effect::None,
            EffectSpec::AtPosition {
                target,
                x_mm,
                y_mm,
                tolerance_mm,
            } => Effect::AtPosition {
                target,
                x_mm,
                y_mm,
                tolerance_mm,
            },
            EffectSpec::Speed { target, mm_per_s } => Effect::Speed { target, mm_per_s },
            EffectSpec::Halted { target } => Effect::Halted { target },
            EffectSpec::Param {
                target,
                name,
                value,
            } => Effect::Param {
                target,
                name,
                value,
            },
            EffectSpec::Claim { text } => Effect::Claim(text),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolSpec {
    name: String,
    version: String,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct PinsSpec {
    #[serde(default)]
    model_id: Option<String>,
    /// Hex of the 32-byte weights hash.
    #[serde(default)]
    model_hash: Option<String>,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    tools: Vec<ToolSpec>,
}

fn parse<T: for<'de> Deserialize<'de>>(what: &str, text: &str) -> PyResult<T> {
    serde_json::from_str(text).map_err(|e| value_err(format!("{what}: {e}")))
}

fn message_id(s: &str) -> PyResult<MessageId> {
    let bad = || value_err(format!("bad message id {s:?} (want author:hex64)"));
    let (author, digest) = s.rsplit_once(':').ok_or_else(bad)?;
    let digest: [u8; 32] = hex::decode(digest)
        .ok()
        .and_then(|d| d.try_into().ok())
        .ok_or_else(bad)?;
    let author = PrincipalId::new(author).map_err(|_| bad())?;
    Ok(MessageId { author, digest })
}

fn verifying_key(vkey: &str) -> PyResult<audita_evidence::VerifyingKey> {
    parse_vkey(vkey.trim(), &[ED25519_NOTE_TYPE])
        .map(|(_, k)| k)
        .map_err(|e| value_err(format!("vkey: {e}")))
}

/// A principal: its name and private key (held here, never given to Python).
#[pyclass(module = "audita._native", frozen)]
struct Principal {
    inner: RustPrincipal,
}

#[pymethods]
impl Principal {
    /// The principal `name` with the key file at `source` (relative to `base`) or
    /// `env:VAR`: a C2SP note private key named `name`, or PKCS#8 PEM, mode 0600.
    #[staticmethod]
    #[pyo3(signature = (name, source, base = "."))]
    fn load(name: &str, source: &str, base: &str) -> PyResult<Principal> {
        RustPrincipal::load(name, source, std::path::Path::new(base))
            .map(|inner| Principal { inner })
            .map_err(client_err)
    }

    /// A principal with a fresh key from OS randomness (register its `vkey`).
    #[staticmethod]
    fn generate(name: &str) -> PyResult<Principal> {
        RustPrincipal::from_key(name, audita_keys::generate())
            .map(|inner| Principal { inner })
            .map_err(client_err)
    }

    /// Its name.
    #[getter]
    fn name(&self) -> String {
        self.inner.id().as_str().to_string()
    }

    /// Its public key as a C2SP verifier key.
    #[getter]
    fn vkey(&self) -> String {
        self.inner.vkey()
    }

    /// Signs an envelope; returns its exact bytes.
    // The arguments are the Python method's keyword arguments.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (destination, timestamp_ms, payload_json, cites, effect_json = None, pins_json = None))]
    fn sign<'py>(
        &self,
        py: Python<'py>,
        destination: &str,
        timestamp_ms: u64,
        payload_json: &str,
        cites: Vec<String>,
        effect_json: Option<&str>,
        pins_json: Option<&str>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let payload: PayloadSpec = parse("payload", payload_json)?;
        let mut env = self
            .inner
            .message(destination, timestamp_ms, payload.into())
            .map_err(client_err)?;
        let ids = cites
            .iter()
            .map(|c| message_id(c))
            .collect::<PyResult<Vec<_>>>()?;
        env = env.cite(ids);
        if let Some(e) = effect_json {
            env = env.with_effect(parse::<EffectSpec>("effect", e)?.into());
        }
        if let Some(p) = pins_json {
            let p: PinsSpec = parse("pins", p)?;
            let model_hash = match p.model_hash {
                None => None,
                Some(h) => Some(
                    hex::decode(&h)
                        .ok()
                        .and_then(|d| <[u8; 32]>::try_from(d).ok())
                        .ok_or_else(|| value_err("pins.model_hash: want 64 hex digits"))?,
                ),
            };
            env = env.with_pins(ReplayPins {
                model_id: p.model_id,
                model_hash,
                seed: p.seed,
                tools: p
                    .tools
                    .into_iter()
                    .map(|t| ToolPin {
                        name: t.name,
                        version: t.version,
                    })
                    .collect(),
            });
        }
        let signed = self.inner.sign(env).map_err(client_err)?;
        Ok(PyBytes::new(py, signed.as_bytes()))
    }

    /// The delivery receipt for the envelope `envelope` (bytes), which must be
    /// addressed to this principal; returns the receipt's bytes.
    fn receipt<'py>(
        &self,
        py: Python<'py>,
        envelope: &[u8],
        timestamp_ms: u64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let env = SignedEnvelope::decode(envelope.to_vec())
            .map_err(|e| value_err(format!("envelope: {e}")))?;
        let r = self.inner.receipt(&env, timestamp_ms).map_err(client_err)?;
        Ok(PyBytes::new(py, r.as_bytes()))
    }
}

/// Decodes envelope bytes (no signature check) into JSON: author, destination,
/// timestamp_ms, payload, citations, effect, id.
#[pyfunction]
fn decode_envelope(bytes: &[u8]) -> PyResult<String> {
    let env =
        SignedEnvelope::decode(bytes.to_vec()).map_err(|e| value_err(format!("envelope: {e}")))?;
    let e = env.envelope();
    let payload = match &e.payload {
        Payload::MoveTo { target, x_mm, y_mm } => {
            json!({"kind": "move_to", "target": target, "x_mm": x_mm, "y_mm": y_mm})
        }
        Payload::SetSpeed { target, mm_per_s } => {
            json!({"kind": "set_speed", "target": target, "mm_per_s": mm_per_s})
        }
        Payload::Halt { target } => json!({"kind": "halt", "target": target}),
        Payload::SetParam {
            target,
            name,
            value,
        } => json!({"kind": "set_param", "target": target, "name": name, "value": value}),
        Payload::AgentText { text } => json!({"kind": "agent_text", "text": text}),
        Payload::ToolOutput { tool, output } => {
            json!({"kind": "tool_output", "tool": tool, "output": output})
        }
        Payload::SensorReport { sensor, reading } => {
            json!({"kind": "sensor_report", "sensor": sensor, "reading": reading})
        }
        Payload::ExternalInput { source, text } => {
            json!({"kind": "external_input", "source": source, "text": text})
        }
        Payload::Stored { kind, digest, len } => {
            json!({"kind": "stored", "stored_kind": format!("{kind:?}"), "digest": hex::encode(digest), "len": len})
        }
    };
    let effect = match &e.effect {
        Effect::None => json!({"kind": "none"}),
        Effect::AtPosition {
            target,
            x_mm,
            y_mm,
            tolerance_mm,
        } => {
            json!({"kind": "at_position", "target": target, "x_mm": x_mm, "y_mm": y_mm, "tolerance_mm": tolerance_mm})
        }
        Effect::Speed { target, mm_per_s } => {
            json!({"kind": "speed", "target": target, "mm_per_s": mm_per_s})
        }
        Effect::Halted { target } => json!({"kind": "halted", "target": target}),
        Effect::Param {
            target,
            name,
            value,
        } => json!({"kind": "param", "target": target, "name": name, "value": value}),
        Effect::Claim(text) => json!({"kind": "claim", "text": text}),
    };
    Ok(json!({
        "id": env.id().to_string(),
        "author": e.author.as_str(),
        "destination": e.destination.as_str(),
        "timestamp_ms": e.timestamp,
        "payload": payload,
        "citations": e.citations.iter().map(|c| c.to_string()).collect::<Vec<_>>(),
        "effect": effect,
    })
    .to_string())
}

/// Whether envelope bytes carry a valid signature of the key `vkey` (strict
/// Ed25519 over the DSSE PAE) and obey the format's rules.
#[pyfunction]
fn verify_envelope(bytes: &[u8], vkey: &str) -> PyResult<bool> {
    let key = verifying_key(vkey)?;
    let Ok(env) = SignedEnvelope::decode(bytes.to_vec()) else {
        return Ok(false);
    };
    let mut keys = audita_evidence::KeyRegistry::new();
    keys.add_principal(env.envelope().author.clone(), key);
    Ok(env.check(&keys).is_ok())
}

/// Decodes receipt bytes into JSON: message, recipient, timestamp_ms.
#[pyfunction]
fn decode_receipt(bytes: &[u8]) -> PyResult<String> {
    let r = Receipt::decode(bytes.to_vec()).map_err(|e| value_err(format!("receipt: {e}")))?;
    Ok(json!({
        "message": r.message().to_string(),
        "recipient": r.recipient().as_str(),
        "timestamp_ms": r.timestamp(),
    })
    .to_string())
}

/// Whether receipt bytes carry a valid signature of the key `vkey`.
#[pyfunction]
fn verify_receipt(bytes: &[u8], vkey: &str) -> PyResult<bool> {
    let key = verifying_key(vkey)?;
    let Ok(r) = Receipt::decode(bytes.to_vec()) else {
        return Ok(false);
    };
    let mut keys = audita_evidence::KeyRegistry::new();
    keys.add_principal(r.recipient().clone(), key);
    Ok(r.verify(&keys).is_ok())
}

/// Writes a new key file for `name` (OS randomness, mode 0600, never over an
/// existing file); returns its C2SP verifier key.
#[pyfunction]
fn generate_key_file(path: &str, name: &str) -> PyResult<String> {
    let key = audita_keys::generate();
    audita_keys::write(std::path::Path::new(path), name, &key, false)
        .map_err(|e| AuditaError::new_err(e.to_string()))?;
    Ok(audita_evidence::trust::vkey(
        name,
        ED25519_NOTE_TYPE,
        &key.verifying_key(),
    ))
}

/// Publishes signed bytes to a deployment's Kafka topics through a durable spool.
#[pyclass(module = "audita._native", frozen)]
struct Publisher {
    inner: BlockingPublisher,
}

#[pymethods]
impl Publisher {
    /// Connects lazily to `bootstrap`; opens (locks) the spool in `spool_dir` and
    /// sends what an earlier run left there.
    #[new]
    #[pyo3(signature = (bootstrap, spool_dir, topic_prefix = "", delivery_timeout_s = 30.0))]
    fn new(
        py: Python<'_>,
        bootstrap: &str,
        spool_dir: &str,
        topic_prefix: &str,
        delivery_timeout_s: f64,
    ) -> PyResult<Publisher> {
        if !(delivery_timeout_s.is_finite() && delivery_timeout_s > 0.0) {
            return Err(value_err(
                "delivery_timeout_s must be a positive number of seconds",
            ));
        }
        let mut config = PublisherConfig::new(bootstrap, spool_dir);
        config.topic_prefix = topic_prefix.to_string();
        config.delivery_timeout = std::time::Duration::from_secs_f64(delivery_timeout_s);
        py.detach(|| BlockingPublisher::open(config))
            .map(|inner| Publisher { inner })
            .map_err(client_err)
    }

    /// Publishes envelope bytes; returns (partition, offset). Raises `Undelivered`
    /// when the broker did not acknowledge in time (the envelope is spooled).
    fn publish(&self, py: Python<'_>, envelope: &[u8]) -> PyResult<(i32, i64)> {
        let env = SignedEnvelope::decode(envelope.to_vec())
            .map_err(|e| value_err(format!("envelope: {e}")))?;
        py.detach(|| self.inner.publish(&env))
            .map(|d| (d.partition, d.offset))
            .map_err(client_err)
    }

    /// Publishes receipt bytes; returns (partition, offset).
    fn publish_receipt(&self, py: Python<'_>, receipt: &[u8]) -> PyResult<(i32, i64)> {
        let r =
            Receipt::decode(receipt.to_vec()).map_err(|e| value_err(format!("receipt: {e}")))?;
        py.detach(|| self.inner.publish_receipt(&r))
            .map(|d| (d.partition, d.offset))
            .map_err(client_err)
    }

    /// Sends every spooled item again; returns (delivered, still spooled).
    fn resend_spool(&self, py: Python<'_>) -> PyResult<(usize, usize)> {
        py.detach(|| self.inner.resend_spool())
            .map(|r| (r.delivered, r.spooled))
            .map_err(client_err)
    }

    /// Items waiting in the spool.
    #[getter]
    fn spooled(&self) -> usize {
        self.inner.spooled()
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Principal>()?;
    m.add_class::<Publisher>()?;
    m.add_function(wrap_pyfunction!(decode_envelope, m)?)?;
    m.add_function(wrap_pyfunction!(verify_envelope, m)?)?;
    m.add_function(wrap_pyfunction!(decode_receipt, m)?)?;
    m.add_function(wrap_pyfunction!(verify_receipt, m)?)?;
    m.add_function(wrap_pyfunction!(generate_key_file, m)?)?;
    m.add("AuditaError", m.py().get_type::<AuditaError>())?;
    m.add("Undelivered", m.py().get_type::<Undelivered>())?;
    Ok(())
}
