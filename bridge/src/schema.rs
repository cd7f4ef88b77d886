//! The official VDA 5050 JSON schemas (2.1.0 and 3.0.0), embedded and compiled once,
//! and the check of one message against the schema of its topic and version.
//!
//! Design constraints:
//! - The schema files are the published ones, committed unchanged under
//!   `bridge/schemas/` with their MIT licence, embedded with `include_str!`: the
//!   bridge validates against exactly what it ships, with no file or network access.
//! - A message is checked against the schema of its topic for the release its own
//!   `version` field names: `2.x.y` → 2.1.0, `3.x.y` → 3.0.0; any other version is
//!   refused (`version`), never checked against a schema it was not written for.
//! - **2.0.x messages meet the 2.1.0 schemas** (the bridge ships no 2.0.0 schemas).
//!   Compared with the published 2.0.0 ones, 2.1.0's are looser wherever a 2.0
//!   message can differ (battery `reach` a number, a node state's `theta`
//!   optional, extra properties allowed), with two exceptions, both errata of the
//!   2.0.0 schema files against the 2.0 text: their `instantActions` names the
//!   action type `actionName` (2.1.0 requires `actionType`, as the 2.0 text says),
//!   and their order node's `allowedDeviationXy` is the text's `allowedDeviationXY`
//!   (passes as an extra property; [`crate::map`] reads it in 2.0 orders). So a 2.0
//!   implementation sending `actionName` has its instant actions quarantined
//!   (`schema`). vda-5050-lib 1.4.0 (npm), a third-party 2.0.0 implementation,
//!   passes: `cli/tests/vda5050_incident.rs` records its fleet with nothing
//!   quarantined. VDA 5050 1.x (which it also speaks) is refused (`version`).
//! - Three 3.0.0 files carry a trailing comma before a closing brace (not strict
//!   JSON); [`strip_trailing_commas`] removes commas directly before `}`/`]` outside
//!   strings at load time, and nothing else (tested).
//! - `format` keywords are annotations (JSON Schema 2020-12 default): the bridge
//!   parses the one it relies on, `timestamp`, itself ([`crate::check`]).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::topic::Kind;

/// A VDA 5050 release the bridge holds schemas for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Release {
    /// VDA 5050 2.1.0 (checks every `2.x.y` message).
    V2_1_0,
    /// VDA 5050 3.0.0 (checks every `3.x.y` message).
    V3_0_0,
}

impl Release {
    /// The release whose schemas check a message of `version` (its header field).
    pub fn for_version(version: &str) -> Option<Release> {
        let major = version.split('.').next()?;
        match major {
            "2" => Some(Release::V2_1_0),
            "3" => Some(Release::V3_0_0),
            _ => None,
        }
    }

    /// Its major version as MQTT topics spell it (`v2`, `v3`).
    pub fn topic_major(self) -> &'static str {
        match self {
            Release::V2_1_0 => "v2",
            Release::V3_0_0 => "v3",
        }
    }

    /// `2.1.0` or `3.0.0`.
    pub fn name(self) -> &'static str {
        match self {
            Release::V2_1_0 => "2.1.0",
            Release::V3_0_0 => "3.0.0",
        }
    }
}

/// The embedded schema text of `kind` in `release`, if the release has that topic.
pub fn source(release: Release, kind: Kind) -> Option<&'static str> {
    use Kind::*;
    Some(match (release, kind) {
        (Release::V2_1_0, Order) => include_str!("../schemas/2.1.0/order.schema"),
        (Release::V2_1_0, InstantActions) => include_str!("../schemas/2.1.0/instantActions.schema"),
        (Release::V2_1_0, State) => include_str!("../schemas/2.1.0/state.schema"),
        (Release::V2_1_0, Connection) => include_str!("../schemas/2.1.0/connection.schema"),
        (Release::V2_1_0, Factsheet) => include_str!("../schemas/2.1.0/factsheet.schema"),
        (Release::V2_1_0, Visualization) => include_str!("../schemas/2.1.0/visualization.schema"),
        (Release::V2_1_0, Responses | ZoneSet) => return None,
        (Release::V3_0_0, Order) => include_str!("../schemas/3.0.0/order.schema"),
        (Release::V3_0_0, InstantActions) => include_str!("../schemas/3.0.0/instantActions.schema"),
        (Release::V3_0_0, State) => include_str!("../schemas/3.0.0/state.schema"),
        (Release::V3_0_0, Connection) => include_str!("../schemas/3.0.0/connection.schema"),
        (Release::V3_0_0, Factsheet) => include_str!("../schemas/3.0.0/factsheet.schema"),
        (Release::V3_0_0, Visualization) => include_str!("../schemas/3.0.0/visualization.schema"),
        (Release::V3_0_0, Responses) => include_str!("../schemas/3.0.0/responses.schema"),
        (Release::V3_0_0, ZoneSet) => include_str!("../schemas/3.0.0/zoneSet.schema"),
    })
}

/// Removes every `,` that is followed (after whitespace) by `}` or `]`, outside JSON
/// strings; everything else is kept byte for byte.
pub fn strip_trailing_commas(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b',' => {
                let next = bytes[i + 1..].iter().find(|c| !c.is_ascii_whitespace());
                if matches!(next, Some(b'}' | b']')) {
                    out.push_str(&text[start..i]);
                    start = i + 1;
                }
            }
            _ => {}
        }
    }
    out.push_str(&text[start..]);
    out
}

/// Why the embedded schemas could not be compiled (a build defect, never input).
#[derive(Debug, thiserror::Error)]
#[error("VDA 5050 {release} schema of {kind}: {reason}")]
pub struct SchemaError {
    release: &'static str,
    kind: &'static str,
    reason: String,
}

/// Every embedded schema, compiled.
pub struct Schemas {
    validators: BTreeMap<(Release, Kind), jsonschema::Validator>,
}

impl std::fmt::Debug for Schemas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Schemas")
            .field("compiled", &self.validators.len())
            .finish()
    }
}

/// The first violations of a message against its schema, one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation(pub String);

impl Schemas {
    /// Compiles every schema of both releases.
    pub fn load() -> Result<Schemas, SchemaError> {
        let mut validators = BTreeMap::new();
        for release in [Release::V2_1_0, Release::V3_0_0] {
            for kind in Kind::ALL {
                let Some(text) = source(release, kind) else {
                    continue;
                };
                let fail = |reason: String| SchemaError {
                    release: release.name(),
                    kind: kind.name(),
                    reason,
                };
                let value: Value = serde_json::from_str(&strip_trailing_commas(text))
                    .map_err(|e| fail(e.to_string()))?;
                let v = jsonschema::validator_for(&value).map_err(|e| fail(e.to_string()))?;
                validators.insert((release, kind), v);
            }
        }
        Ok(Schemas { validators })
    }

    /// Whether `release` has a `kind` topic.
    pub fn has(&self, release: Release, kind: Kind) -> bool {
        self.validators.contains_key(&(release, kind))
    }

    /// Checks `message` against the `release` schema of `kind`: `Ok` or the first
    /// few violations (instance path and message), one line, bounded.
    pub fn check(&self, release: Release, kind: Kind, message: &Value) -> Result<(), Violation> {
        let Some(v) = self.validators.get(&(release, kind)) else {
            return Err(Violation(format!(
                "VDA 5050 {} has no {} topic",
                release.name(),
                kind.name()
            )));
        };
        let mut errors = v.iter_errors(message);
        let Some(first) = errors.next() else {
            return Ok(());
        };
        let mut line = describe(&first);
        let more = errors.take(64).count();
        if more > 0 {
            line.push_str(&format!(
                " (and {more}{} more)",
                if more == 64 { "+" } else { "" }
            ));
        }
        Err(Violation(crate::text::one_line(&line, 400)))
    }
}

fn describe(e: &jsonschema::ValidationError<'_>) -> String {
    let path = e.instance_path().to_string();
    let path = if path.is_empty() {
        "/".to_string()
    } else {
        path
    };
    format!("at {path}: {e}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_embedded_schema_compiles() {
        let s = Schemas::load().unwrap();
        assert_eq!(s.validators.len(), 6 + 8);
        assert!(!s.has(Release::V2_1_0, Kind::ZoneSet));
        assert!(s.has(Release::V3_0_0, Kind::Responses));
    }

    #[test]
    fn only_three_published_files_need_the_comma_repair_and_it_changes_nothing_else() {
        let mut repaired = Vec::new();
        for release in [Release::V2_1_0, Release::V3_0_0] {
            for kind in Kind::ALL {
                let Some(text) = source(release, kind) else {
                    continue;
                };
                let fixed = strip_trailing_commas(text);
                if serde_json::from_str::<Value>(text).is_err() {
                    repaired.push(format!("{}/{}", release.name(), kind.name()));
                } else {
                    // A file that is already JSON is left byte for byte.
                    assert_eq!(fixed, text, "{} {}", release.name(), kind.name());
                }
                // Only commas were removed.
                assert_eq!(
                    text.chars().filter(|c| *c != ',').collect::<String>(),
                    fixed.chars().filter(|c| *c != ',').collect::<String>()
                );
            }
        }
        assert_eq!(
            repaired,
            ["3.0.0/order", "3.0.0/factsheet", "3.0.0/visualization"]
        );
    }

    #[test]
    fn commas_inside_strings_are_kept() {
        assert_eq!(
            strip_trailing_commas(r#"{"a": ",}", "b": [1, 2, ], }"#),
            r#"{"a": ",}", "b": [1, 2 ] }"#
        );
        assert_eq!(
            strip_trailing_commas(r#"{"a": "\",]", }"#),
            r#"{"a": "\",]" }"#
        );
    }

    #[test]
    fn versions_pick_their_release() {
        assert_eq!(Release::for_version("2.1.0"), Some(Release::V2_1_0));
        assert_eq!(Release::for_version("2.0.0"), Some(Release::V2_1_0));
        assert_eq!(Release::for_version("3.0.0"), Some(Release::V3_0_0));
        assert_eq!(Release::for_version("1.1"), None);
        assert_eq!(Release::for_version(""), None);
        assert_eq!(Release::for_version("22.0"), None);
    }
}
