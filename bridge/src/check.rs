//! Intake: from an MQTT topic and payload to a checked VDA 5050 [`Message`], or a
//! [`Rejection`] with a one-line reason for `audita.suspect`.
//!
//! Design constraints (checked in this order; the first failure is the reason):
//! 1. `oversize` — the payload is larger than the bound (checked before anything
//!    reads it).
//! 2. `unknown_topic` — not `interface/manufacturer/serialNumber/topic` of the
//!    served interface, or a topic VDA 5050 does not define.
//! 3. `json` — not UTF-8, not JSON, a duplicated object key (two readers could see
//!    two different messages), deeper than serde_json's recursion limit, or not an
//!    object.
//! 4. `version` — no `version` string, a release the bridge holds no schemas for, a
//!    release whose major version is not the topic's (`3.0.0` on `…/v2/…`), or a
//!    topic the release does not have.
//! 5. `schema` — invalid against the official schema of its topic and release.
//! 6. `vehicle_mismatch` — `manufacturer`/`serialNumber` in the message are not the
//!    topic's: a message claiming another vehicle on this vehicle's topic.
//! 7. `timestamp` — a `timestamp` that is not an ISO 8601 / RFC 3339 instant at or
//!    after the Unix epoch.
//! - The exact payload text is kept ([`Message::text`]): evidence carries the bytes
//!   the fleet sent, never a re-serialisation.

use std::collections::BTreeSet;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::schema::{Release, Schemas};
pub use crate::text::one_line;
use crate::topic::{self, Interface, Topic};

/// Default bound of one MQTT payload (256 KiB); a factsheet or a long order is
/// tens of kilobytes.
pub const DEFAULT_MAX_PAYLOAD: usize = 256 << 10;
/// The largest bound allowed: the payload rides inside an envelope, which must fit
/// the client's spool item limit with room for the rest of the envelope.
pub const MAX_PAYLOAD_LIMIT: usize = (1 << 20) - (16 << 10);

/// Why a message was quarantined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// Machine-readable reason (see the module doc).
    pub reason: &'static str,
    /// One line of detail.
    pub detail: String,
}

impl Rejection {
    pub(crate) fn new(reason: &'static str, detail: impl AsRef<str>) -> Rejection {
        Rejection {
            reason,
            detail: one_line(detail.as_ref(), 400),
        }
    }
}

/// A checked VDA 5050 message.
#[derive(Debug, Clone)]
pub struct Message {
    /// Its topic.
    pub topic: Topic,
    /// The release whose schema it passed.
    pub release: Release,
    /// Its `headerId` (0 when the topic does not require one and it has none).
    pub header_id: u64,
    /// Its `timestamp` in ms since the Unix epoch, if it has one.
    pub timestamp_ms: Option<u64>,
    /// The exact payload text.
    pub text: String,
    /// The parsed payload.
    pub value: Value,
}

/// The checks of one bridge: its interface, the schemas, the payload bound.
#[derive(Debug)]
pub struct Intake {
    /// The served interface.
    pub interface: Interface,
    /// Compiled schemas.
    pub schemas: Schemas,
    /// Payload bound in bytes.
    pub max_payload: usize,
}

impl Intake {
    /// Runs every check of the module doc.
    pub fn check(&self, mqtt_topic: &str, payload: &[u8]) -> Result<Message, Rejection> {
        if payload.len() > self.max_payload {
            return Err(Rejection::new(
                "oversize",
                format!(
                    "payload of {} bytes exceeds the bound of {} bytes",
                    payload.len(),
                    self.max_payload
                ),
            ));
        }
        let topic = topic::parse(&self.interface, mqtt_topic)
            .map_err(|e| Rejection::new("unknown_topic", format!("{mqtt_topic:?}: {e}")))?;
        let text = std::str::from_utf8(payload)
            .map_err(|e| Rejection::new("json", format!("not UTF-8: {e}")))?;
        no_duplicate_keys(text)?;
        let value: Value = serde_json::from_str(text)
            .map_err(|e| Rejection::new("json", format!("not JSON: {e}")))?;
        let Some(object) = value.as_object() else {
            return Err(Rejection::new("json", "not a JSON object"));
        };
        let version = object
            .get("version")
            .and_then(Value::as_str)
            .ok_or_else(|| Rejection::new("version", "no version string"))?;
        let release = Release::for_version(version).ok_or_else(|| {
            Rejection::new(
                "version",
                format!("version {version:?} is neither 2.x nor 3.x"),
            )
        })?;
        if release.topic_major() != self.interface.major {
            return Err(Rejection::new(
                "version",
                format!("version {version:?} on a {} topic", self.interface.major),
            ));
        }
        if !self.schemas.has(release, topic.kind) {
            return Err(Rejection::new(
                "version",
                format!(
                    "VDA 5050 {} has no {} topic",
                    release.name(),
                    topic.kind.name()
                ),
            ));
        }
        // vda-5050-lib 1.4 (a widely used implementation) writes a 2.0 instant
        // actions message's list under `instantActions`, not the schema's `actions`:
        // read as it means it, the normalised copy is checked (the record keeps the
        // exact payload; `audita_vda5050::instant_actions` reads either key).
        let normalised;
        let checked = if topic.kind == crate::topic::Kind::InstantActions
            && version.starts_with("2.0.")
            && object.get("actions").is_none()
            && object.get("instantActions").is_some_and(Value::is_array)
        {
            let mut copy = object.clone();
            if let Some(list) = copy.remove("instantActions") {
                copy.insert("actions".into(), list);
            }
            normalised = Value::Object(copy);
            &normalised
        } else {
            &value
        };
        self.schemas
            .check(release, topic.kind, checked)
            .map_err(|v| {
                Rejection::new(
                    "schema",
                    format!("{} {}: {}", topic.kind.name(), release.name(), v.0),
                )
            })?;
        for (field, want) in [
            ("manufacturer", &topic.manufacturer),
            ("serialNumber", &topic.serial),
        ] {
            let got = object.get(field).and_then(Value::as_str);
            if got != Some(want.as_str()) {
                return Err(Rejection::new(
                    "vehicle_mismatch",
                    format!("{field} {got:?} on the topic of {want:?}"),
                ));
            }
        }
        let header_id = object.get("headerId").and_then(Value::as_u64).unwrap_or(0);
        let timestamp_ms = match object.get("timestamp") {
            None => None,
            Some(t) => Some(
                parse_timestamp(t.as_str().unwrap_or_default()).ok_or_else(|| {
                    Rejection::new(
                        "timestamp",
                        format!("timestamp {t} is not an RFC 3339 instant after 1970"),
                    )
                })?,
            ),
        };
        Ok(Message {
            topic,
            release,
            header_id,
            timestamp_ms,
            text: text.to_string(),
            value,
        })
    }
}

/// Milliseconds since the Unix epoch of an RFC 3339 timestamp (VDA 5050's
/// `YYYY-MM-DDTHH:mm:ss.ffZ`).
pub fn parse_timestamp(s: &str) -> Option<u64> {
    let t = chrono::DateTime::parse_from_rfc3339(s).ok()?;
    u64::try_from(t.timestamp_millis()).ok()
}

fn no_duplicate_keys(text: &str) -> Result<(), Rejection> {
    let mut d = serde_json::Deserializer::from_str(text);
    NoDuplicates::deserialize(&mut d)
        .and_then(|_| d.end())
        .map_err(|e| Rejection::new("json", format!("not JSON: {e}")))
}

/// Walks a JSON value, failing on an object that repeats a key.
struct NoDuplicates;

impl<'de> Deserialize<'de> for NoDuplicates {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Walk)
    }
}

struct Walk;

impl<'de> Visitor<'de> for Walk {
    type Value = NoDuplicates;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
    fn visit_i64<E>(self, _: i64) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
    fn visit_u64<E>(self, _: u64) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
    fn visit_f64<E>(self, _: f64) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
    fn visit_str<E>(self, _: &str) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
    fn visit_unit<E>(self) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<NoDuplicates, A::Error> {
        while a.next_element::<NoDuplicates>()?.is_some() {}
        Ok(NoDuplicates)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<NoDuplicates, A::Error> {
        let mut keys = BTreeSet::new();
        while let Some(k) = a.next_key::<String>()? {
            if !keys.insert(k.clone()) {
                return Err(de::Error::custom(format!(
                    "duplicate key {:?}",
                    one_line(&k, 64)
                )));
            }
            a.next_value::<NoDuplicates>()?;
        }
        Ok(NoDuplicates)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{order, state};

    use crate::testing::intake;

    #[test]
    fn valid_messages_of_both_releases_pass() {
        let i = intake("v2");
        let s = state("2.1.0", "acme", "agv-7", 5, 1.0, 2.0, 0.5);
        let m = i.check("uagv/v2/acme/agv-7/state", s.as_bytes()).unwrap();
        assert_eq!(m.release, Release::V2_1_0);
        assert_eq!(m.header_id, 5);
        assert_eq!(m.text, s);
        assert_eq!(m.timestamp_ms, Some(1_767_225_600_005));
        let o = order("2.1.0", "acme", "agv-7", 6, "o-1", &[("a-1", "pick")]);
        assert!(i.check("uagv/v2/acme/agv-7/order", o.as_bytes()).is_ok());
        let i3 = intake("v3");
        let s3 = state("3.0.0", "acme", "agv-7", 5, 1.0, 2.0, 0.5);
        let m3 = i3.check("uagv/v3/acme/agv-7/state", s3.as_bytes()).unwrap();
        assert_eq!(m3.release, Release::V3_0_0);
    }

    fn reason(i: &Intake, topic: &str, payload: &str) -> &'static str {
        i.check(topic, payload.as_bytes()).unwrap_err().reason
    }

    #[test]
    fn every_failure_has_its_reason() {
        let i = intake("v2");
        let s = state("2.1.0", "acme", "agv-7", 5, 1.0, 2.0, 0.5);
        let t = "uagv/v2/acme/agv-7/state";
        assert_eq!(reason(&i, "uagv/v2/acme/agv-7/status", &s), "unknown_topic");
        assert_eq!(reason(&i, t, "{\"headerId\": 1,"), "json");
        assert_eq!(reason(&i, t, "[1]"), "json");
        assert_eq!(
            i.check(t, b"{\"a\":\xff}").unwrap_err().reason,
            "json",
            "not UTF-8"
        );
        // Two readers would see two serial numbers.
        let dup = s.replacen('{', "{\"serialNumber\": \"agv-8\", ", 1);
        let r = i.check(t, dup.as_bytes()).unwrap_err();
        assert_eq!(r.reason, "json");
        assert!(r.detail.contains("duplicate key"), "{r:?}");
        assert_eq!(
            reason(&i, t, &s.replace("\"2.1.0\"", "\"1.1.0\"")),
            "version"
        );
        assert_eq!(
            reason(&i, t, &s.replace("\"2.1.0\"", "\"3.0.0\"")),
            "version"
        );
        assert_eq!(
            reason(&i, t, &s.replace("\"driving\"", "\"drivingX\"")),
            "schema"
        );
        let r = i
            .check(t, s.replace("\"safetyState\"", "\"safety\"").as_bytes())
            .unwrap_err();
        assert_eq!(r.reason, "schema");
        assert!(r.detail.contains("safetyState"), "{r:?}");
        assert!(!r.detail.contains('\n'));
        let other = state("2.1.0", "acme", "agv-8", 5, 1.0, 2.0, 0.5);
        assert_eq!(reason(&i, t, &other), "vehicle_mismatch");
        assert_eq!(
            reason(&i, t, &s.replace("2026-01-01T00:00:00.005Z", "yesterday")),
            "timestamp"
        );
        let small = Intake {
            max_payload: 100,
            ..intake("v2")
        };
        assert_eq!(reason(&small, t, &s), "oversize");
        // 3.x-only topics are refused on 2.x.
        assert_eq!(reason(&i, "uagv/v2/acme/agv-7/zoneSet", &s), "version");
    }

    #[test]
    fn deep_nesting_is_refused_without_overflowing_the_stack() {
        let i = intake("v2");
        let deep = "[".repeat(100_000) + &"]".repeat(100_000);
        assert_eq!(reason(&i, "uagv/v2/acme/agv-7/state", &deep), "json");
    }

    #[test]
    fn one_line_cuts_at_a_char_boundary() {
        assert_eq!(one_line("a\nb", 10), "a b");
        assert_eq!(one_line("ééé", 3), "é…");
    }
}
