//! The SPEC §7 JSON interchange format: model input and attribution output.
//!
//! Design constraints:
//! - Input is `{"variables": {name: {"principal", "value" | "eq", "candidate"}},
//!   "outcome": expr}`. Unknown fields are rejected at every level, a variable declared
//!   twice is rejected, `principal` may be null or absent (environment), `candidate`
//!   defaults to true, and exactly one of `value` / `eq` must be present.
//! - Every error names its location: a line and column for JSON syntax, the variable
//!   path for field errors, a byte offset inside an expression for parse errors.
//! - Output ([`crate::Attribution`]) serialises with fixed key order and sorted causes,
//!   variables and principals, so equal inputs give byte-identical output.

use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use crate::build::ModelBuilder;
use crate::model::{Model, ModelError};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelDoc {
    variables: VarsDoc,
    outcome: Option<String>,
}

struct VarsDoc(Vec<(String, serde_json::Value)>);

impl<'de> Deserialize<'de> for VarsDoc {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = VarsDoc;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object mapping variable names to declarations")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<VarsDoc, A::Error> {
                let mut out: Vec<(String, serde_json::Value)> = Vec::new();
                let mut seen = std::collections::BTreeSet::new();
                while let Some((k, v)) = map.next_entry::<String, serde_json::Value>()? {
                    if !seen.insert(k.clone()) {
                        return Err(serde::de::Error::custom(format!(
                            "variable `{k}` declared twice"
                        )));
                    }
                    out.push((k, v));
                }
                Ok(VarsDoc(out))
            }
        }
        d.deserialize_map(V)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VarDoc {
    #[serde(default)]
    principal: Option<String>,
    #[serde(default)]
    value: Option<bool>,
    #[serde(default)]
    eq: Option<String>,
    #[serde(default = "default_candidate")]
    candidate: bool,
}

fn default_candidate() -> bool {
    true
}

impl Model {
    /// Parses a model from SPEC §7 JSON.
    pub fn from_json(text: &str) -> Result<Model, ModelError> {
        parse_model(text)
    }
}

pub(crate) fn parse_model(text: &str) -> Result<Model, ModelError> {
    let doc: ModelDoc = serde_json::from_str(text).map_err(|e| ModelError::Json {
        line: e.line(),
        column: e.column(),
        message: strip_position(&e.to_string()),
    })?;
    let mut b = ModelBuilder::new();
    for (name, raw) in doc.variables.0 {
        if !raw.is_object() {
            b = b.invalid(
                name.clone(),
                ModelError::InvalidVariable {
                    var: name,
                    message: "expected an object".into(),
                },
            );
            continue;
        }
        let v: VarDoc = match serde_json::from_value(raw) {
            Ok(v) => v,
            Err(e) => {
                let message = strip_position(&e.to_string());
                b = b.invalid(
                    name.clone(),
                    ModelError::InvalidVariable { var: name, message },
                );
                continue;
            }
        };
        let p = v.principal.as_deref();
        b = match (v.value, v.eq) {
            (Some(_), Some(_)) => b.invalid(name.clone(), ModelError::BothValueAndEq(name)),
            (None, None) => b.invalid(name.clone(), ModelError::NeitherValueNorEq(name)),
            (Some(val), None) => b.exogenous(name, p, val, v.candidate),
            (None, Some(eq)) => b.endogenous(name, p, eq, v.candidate),
        };
    }
    if let Some(o) = doc.outcome {
        b = b.outcome(o);
    }
    b.build()
}

fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}
