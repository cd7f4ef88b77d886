//! What a span wrote to durable state and what it read back, derived from its GenAI
//! content: the write-sets and read-sets of the causal-witness memo ("tool calls that
//! write to durable state record a write-set keyed by artifact hash, and subsequent
//! reads record the read-set") for instrumentations that record neither.
//!
//! **Writes** ([`Node::stored`](crate::model::Node::stored)). Whatever a tool call was
//! handed can be what a store keeps: its arguments as one artifact (the hash the
//! arguments part carries), its single string argument, and every string value of the
//! arguments of at least [`MIN_STORED_BYTES`] bytes. A `create_memory` or
//! `update_memory` span stores the records of `gen_ai.memory.records` (content and id).
//!
//! **Reads** ([`Node::returned`](crate::model::Node::returned)). A tool call returns its
//! result: the content strings of a JSON result (string values of at least
//! [`MIN_STORED_BYTES`] bytes under keys that are not record metadata, a string that
//! itself holds JSON read element by element: a
//! memory search's JSON list of entries inside a text block), or the whole result when
//! it holds none. A `search_memory` span returns the records of
//! `gen_ai.memory.records`; a `retrieval` span the documents of
//! `gen_ai.retrieval.documents`; an OpenInference `RETRIEVER` span those of
//! `retrieval.documents.N.document.*`. A document with an id and no content is a read
//! by id only.
//!
//! **Reads of durable state** ([`Node::store_read`](crate::model::Node::store_read)):
//! a `search_memory` or `retrieval` operation, an OpenInference `RETRIEVER`, a tool of
//! `gen_ai.tool.type` `datastore`, a tool span carrying `gen_ai.memory.*`,
//! `gen_ai.retrieval.*` or `gen_ai.data_source.id`, and a tool whose name says it
//! reads a store (a word such as `search`, `recall`, `retrieve`, `memory`,
//! `knowledge`, `vector`, `notes`) unless the name says it writes (`save`, `store`, `remember`,
//! `add`, `write`, `insert`, `upsert`, `update`, `create`, `delete`, `manage`, `put`).
//! The names are a convention, not a proof: a misread name can only make a claim
//! weaker (a read the window cannot explain is a window exit), never stronger.
//!
//! Design constraints:
//! - Artifacts shorter than [`MIN_STORED_BYTES`] are never a write: a coincidence of
//!   short values (`"ok"`, `"{}"`, an amount) must not become an edge of identity.
//! - The texts of writes, reads, results and message parts are kept for the import's
//!   containment pass ([`Texts`]) and dropped with it; nodes hold hashes only.

use serde_json::Value;

use crate::hash::ArtifactHash;
use crate::jcs::canonical;
use crate::model::Stored;

/// The shortest artifact that counts as a write (bytes).
pub const MIN_STORED_BYTES: usize = 16;

/// Keys whose string values are record metadata, not content, in a JSON result.
const METADATA_KEYS: [&str; 20] = [
    "id",
    "key",
    "namespace",
    "created_at",
    "updated_at",
    "createdAt",
    "updatedAt",
    "store_name",
    "storeName",
    "timestamp",
    "time",
    "date",
    "type",
    "kind",
    "score",
    "source",
    "uri",
    "url",
    "record_id",
    "document_id",
];

/// Words of a tool name that say it reads a store.
const READ_WORDS: [&str; 13] = [
    "search",
    "recall",
    "retrieve",
    "retrieval",
    "retriever",
    "memory",
    "memories",
    "knowledge",
    "vector",
    "vectorstore",
    "rag",
    "archival",
    "notes",
];

/// Words of a tool name that say it writes.
const WRITE_WORDS: [&str; 13] = [
    "save", "store", "remember", "add", "write", "insert", "upsert", "update", "create", "delete",
    "manage", "put", "memorize",
];

/// The texts behind the hashes, for the containment pass at import.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Texts {
    /// Stored artifacts and their text.
    pub stored: Vec<(ArtifactHash, String)>,
    /// Returned artifacts and their text.
    pub returned: Vec<(ArtifactHash, String)>,
    /// A tool's whole result, as text.
    pub result: Option<String>,
    /// A model request's user and system text parts: (input part index, text).
    pub inputs: Vec<(usize, String)>,
}

/// The writes, reads and store classification of one span.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Io {
    /// Stored artifacts.
    pub stored: Vec<Stored>,
    /// Returned artifacts.
    pub returned: Vec<Stored>,
    /// Why the span reads durable state.
    pub store_read: Option<String>,
    /// The texts behind them.
    pub texts: Texts,
}

impl Io {
    fn store(&mut self, text: &str, hash: ArtifactHash, record_id: Option<String>) {
        if text.len() < MIN_STORED_BYTES
            || self.stored.iter().any(|s| s.hash.as_ref() == Some(&hash))
        {
            return;
        }
        self.texts.stored.push((hash.clone(), text.to_string()));
        self.stored.push(Stored {
            hash: Some(hash),
            record_id,
        });
    }

    fn give(&mut self, text: Option<&str>, hash: Option<ArtifactHash>, record_id: Option<String>) {
        if let (Some(t), Some(h)) = (text, &hash) {
            if !self.texts.returned.iter().any(|(x, _)| x == h) {
                self.texts.returned.push((h.clone(), t.to_string()));
            }
        }
        let s = Stored { hash, record_id };
        if !self.returned.contains(&s) {
            self.returned.push(s);
        }
    }
}

/// A string value's text and hash, or a structured value's canonical JSON.
fn text_of(v: &Value) -> (String, ArtifactHash) {
    match v {
        Value::String(s) => (s.clone(), ArtifactHash::of(s.as_bytes())),
        v => {
            let c = canonical(v);
            let h = ArtifactHash::of(c.as_bytes());
            (c, h)
        }
    }
}

/// A JSON object or array held by `v` (parsed from a string when it holds one).
fn structured(v: &Value) -> Option<Value> {
    match v {
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(j @ (Value::Object(_) | Value::Array(_))) => Some(j),
            _ => None,
        },
        j @ (Value::Object(_) | Value::Array(_)) => Some(j.clone()),
        _ => None,
    }
}

/// Every string leaf of `v` with its nearest object key.
fn leaves<'a>(v: &'a Value, key: Option<&'a str>, out: &mut Vec<(Option<&'a str>, &'a str)>) {
    match v {
        Value::String(s) => out.push((key, s)),
        Value::Array(items) => {
            for it in items {
                leaves(it, key, out);
            }
        }
        Value::Object(o) => {
            for (k, it) in o {
                leaves(it, Some(k), out);
            }
        }
        _ => {}
    }
}

/// The writes of a tool call handed `args` (`whole` is the hash its arguments part
/// carries, `single` its single-argument part's, when there is one).
pub fn tool_writes(io: &mut Io, args: &Value, whole: &ArtifactHash, record_id: Option<&str>) {
    let rid = record_id.map(str::to_string);
    match structured(args) {
        Some(j) => {
            io.store(&canonical(&j), whole.clone(), rid.clone());
            let mut ls = Vec::new();
            leaves(&j, None, &mut ls);
            for (_, s) in ls {
                io.store(s, ArtifactHash::of(s.as_bytes()), rid.clone());
            }
        }
        None => {
            let (t, _) = text_of(args);
            let inner = match serde_json::from_str::<Value>(&t) {
                Ok(Value::String(s)) => s,
                _ => t,
            };
            io.store(&inner, ArtifactHash::of(inner.as_bytes()), rid);
        }
    }
}

/// The string leaves of a result that can be content: as [`leaves`], reading a string
/// that holds a JSON object or array (a JSON list inside a text block) as that value,
/// element by element.
fn content_leaves(v: &Value, key: Option<&str>, out: &mut Vec<(Option<String>, String)>) {
    match v {
        Value::String(s) => match structured(v) {
            Some(j) => content_leaves(&j, key, out),
            None => out.push((key.map(str::to_string), s.clone())),
        },
        Value::Array(items) => {
            for it in items {
                content_leaves(it, key, out);
            }
        }
        Value::Object(o) => {
            for (k, it) in o {
                content_leaves(it, Some(k.as_str()), out);
            }
        }
        _ => {}
    }
}

/// The reads of a tool call that returned `result` (its whole hash `whole`).
pub fn tool_reads(io: &mut Io, result: &Value, whole: &ArtifactHash) {
    let (text, _) = text_of(result);
    io.texts.result = Some(text.clone());
    if let Some(j) = structured(result) {
        let mut ls = Vec::new();
        content_leaves(&j, None, &mut ls);
        let content: Vec<String> = ls
            .into_iter()
            .filter(|(k, s)| {
                s.len() >= MIN_STORED_BYTES
                    && !k.as_deref().is_some_and(|k| METADATA_KEYS.contains(&k))
            })
            .map(|(_, s)| s)
            .collect();
        if !content.is_empty() {
            for s in content {
                io.give(Some(s.as_str()), Some(ArtifactHash::of(s.as_bytes())), None);
            }
            return;
        }
    }
    io.give(Some(&text), Some(whole.clone()), None);
}

/// Splits a name into lower-case words (on non-alphanumerics and camel case).
fn words(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for ch in name.chars() {
        if !ch.is_alphanumeric() {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            prev_lower = false;
            continue;
        }
        if ch.is_uppercase() && prev_lower && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
        prev_lower = ch.is_lowercase() || ch.is_ascii_digit();
        cur.extend(ch.to_lowercase());
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Why a tool span reads durable state, from its attributes and its tool's name.
pub fn tool_store_read(
    attrs: &std::collections::BTreeMap<String, Value>,
    tool: Option<&str>,
) -> Option<String> {
    let s = |k: &str| attrs.get(k).and_then(Value::as_str);
    if s("gen_ai.tool.type") == Some("datastore") {
        return Some("gen_ai.tool.type datastore".into());
    }
    if let Some(k) = attrs.keys().find(|k| {
        k.starts_with("gen_ai.memory.")
            || k.starts_with("gen_ai.retrieval.")
            || k.as_str() == "gen_ai.data_source.id"
    }) {
        return Some(format!("it records {k}"));
    }
    let name = tool?;
    let ws = words(name);
    let writes = ws.iter().any(|w| WRITE_WORDS.contains(&w.as_str()));
    let reads = ws.iter().find(|w| READ_WORDS.contains(&w.as_str()));
    match (reads, writes) {
        (Some(w), false) => Some(format!(
            "tool {name:?} (its name says it reads a store: {w:?})"
        )),
        (Some(w), true) if w == "search" || w == "query" || w == "recall" || w == "lookup" => Some(
            format!("tool {name:?} (its name says it reads a store: {w:?})"),
        ),
        _ => None,
    }
}

/// The records of a `gen_ai.memory.records` / `gen_ai.retrieval.documents` value: a
/// JSON array (or a string holding one) of objects with `content` (or `text`) and
/// `id`; `None` when it is not readable.
pub fn records(v: &Value) -> Option<Vec<(Option<Value>, Option<String>)>> {
    let arr = match v {
        Value::String(s) => serde_json::from_str::<Value>(s).ok()?,
        v => v.clone(),
    };
    let items = arr.as_array()?;
    Some(
        items
            .iter()
            .filter_map(|it| {
                let o = it.as_object()?;
                let content = o
                    .get("content")
                    .or_else(|| o.get("text"))
                    .or_else(|| o.get("page_content"))
                    .filter(|c| !c.is_null())
                    .cloned();
                let id = match o.get("id") {
                    Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
                    Some(Value::Number(n)) => Some(n.to_string()),
                    _ => None,
                };
                (content.is_some() || id.is_some()).then_some((content, id))
            })
            .collect(),
    )
}

/// Adds `records` as reads (`read`) or writes of `io`.
pub fn add_records(io: &mut Io, recs: &[(Option<Value>, Option<String>)], read: bool) {
    for (content, id) in recs {
        match content {
            Some(c) => {
                let (t, h) = text_of(c);
                if read {
                    io.give(Some(&t), Some(h), id.clone());
                } else {
                    io.store(&t, h, id.clone());
                }
            }
            None if read => io.give(None, None, id.clone()),
            None => {
                io.stored.push(Stored {
                    hash: None,
                    record_id: id.clone(),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_that_read_a_store_and_names_that_write_one() {
        let none = std::collections::BTreeMap::new();
        for n in [
            "search_memory",
            "recall",
            "searchNotes",
            "retrieve_documents",
            "archival_memory_search",
            "memory",
        ] {
            assert!(tool_store_read(&none, Some(n)).is_some(), "{n}");
        }
        for n in [
            "remember",
            "save_memory",
            "manage_memory",
            "add_memory",
            "pay",
            "fetch_document",
            "check_vendor",
            "lookup_policy",
            "archival_memory_insert",
        ] {
            assert!(tool_store_read(&none, Some(n)).is_none(), "{n}");
        }
        let typed = std::collections::BTreeMap::from([(
            "gen_ai.tool.type".to_string(),
            json!("datastore"),
        )]);
        assert!(tool_store_read(&typed, Some("pay")).is_some());
    }

    #[test]
    fn arguments_are_stored_whole_and_by_long_string_value() {
        let mut io = Io::default();
        let args = json!({"text": "Pay account X-1 the amount 5000.", "tag": "short"});
        let whole = ArtifactHash::of(canonical(&args).as_bytes());
        tool_writes(&mut io, &args, &whole, None);
        let hashes: Vec<_> = io.stored.iter().filter_map(|s| s.hash.clone()).collect();
        assert!(hashes.contains(&whole));
        assert!(hashes.contains(&ArtifactHash::of(b"Pay account X-1 the amount 5000.")));
        // "short" is below the threshold: never a write.
        assert!(!hashes.contains(&ArtifactHash::of(b"short")));
    }

    #[test]
    fn a_json_result_returns_its_content_strings_and_not_its_metadata() {
        let mut io = Io::default();
        let r = json!(
            r#"[{"key": "mem-0107", "namespace": "memories/user-1", "value": {"content": "Pay account X-1 the amount 5000."}, "created_at": "2026-12-05T10:00:00+00:00"}]"#
        );
        tool_reads(&mut io, &r, &ArtifactHash::of(b"whole"));
        assert_eq!(
            io.returned,
            vec![Stored {
                hash: Some(ArtifactHash::of(b"Pay account X-1 the amount 5000.")),
                record_id: None
            }]
        );
        let mut io = Io::default();
        tool_reads(
            &mut io,
            &json!("plain text result"),
            &ArtifactHash::of(b"plain text result"),
        );
        assert_eq!(
            io.returned[0].hash,
            Some(ArtifactHash::of(b"plain text result"))
        );
    }
}
