//! Identities in a trace: artifact hashes (`sha256:<hex>`), span ids (16 hex digits)
//! and durable-state entries (`recordId@sha256:<hex>`).
//!
//! Design constraints:
//! - A value of these types is well formed by construction: parsing checks the
//!   prefix, the length and the digits, and normalises hex to lower case, so two
//!   spellings of one digest compare equal.
//! - An [`Entry`] is identified by record id **and** hash together: a record
//!   rewritten under the same id is a different artifact (CONVENTIONS, read sets).

use std::fmt;

use sha2::{Digest, Sha256};

/// `sha256:<64 lower-case hex digits>`: the identity of one artifact.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ArtifactHash(String);

impl ArtifactHash {
    /// Parses `sha256:<hex>`; `None` unless it is exactly that with 64 hex digits.
    pub fn parse(s: &str) -> Option<Self> {
        let hex = s.strip_prefix("sha256:")?;
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        Some(Self(format!("sha256:{}", hex.to_ascii_lowercase())))
    }

    /// The hash of `content`.
    pub fn of(content: &[u8]) -> Self {
        Self(format!("sha256:{}", hex::encode(Sha256::digest(content))))
    }

    /// The hash whose SHA-256 digest is `digest` (32 bytes; anything else is hashed).
    pub fn of_digest(digest: &[u8]) -> Self {
        if digest.len() == 32 {
            Self(format!("sha256:{}", hex::encode(digest)))
        } else {
            Self::of(digest)
        }
    }

    /// The input artifact hash of a span that consumed `parts`, in order: SHA-256 over
    /// the part strings (`sha256:<hex>` each) joined by `\n` (CONVENTIONS,
    /// `audita.input.hash`).
    pub fn of_parts(parts: &[ArtifactHash]) -> Self {
        let joined: Vec<&str> = parts.iter().map(|p| p.as_str()).collect();
        Self::of(joined.join("\n").as_bytes())
    }

    /// The text form, `sha256:<hex>`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ArtifactHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A span id: 16 lower-case hex digits (OTLP/JSON spells ids in hex).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SpanId(String);

impl SpanId {
    /// Parses 16 hex digits; `None` otherwise (including the all-zero invalid id).
    pub fn parse(s: &str) -> Option<Self> {
        if s.len() != 16 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        if s.bytes().all(|b| b == b'0') {
            return None;
        }
        Some(Self(s.to_ascii_lowercase()))
    }

    /// The hex form.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SpanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One entry of a write set or read set: a record id and the hash of the content
/// written or returned under it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Entry {
    /// The record id in the store (document id, memory record id, cache key).
    pub record_id: String,
    /// The hash of the record's content.
    pub hash: ArtifactHash,
}

impl Entry {
    /// Parses `recordId@sha256:<hex>` (split at the last `@`; the id is non-empty).
    pub fn parse(s: &str) -> Option<Self> {
        let (id, hash) = s.rsplit_once('@')?;
        if id.is_empty() {
            return None;
        }
        Some(Self {
            record_id: id.to_string(),
            hash: ArtifactHash::parse(hash)?,
        })
    }
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.record_id, self.hash)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_parse_strictly_and_normalise_case() {
        let h = ArtifactHash::of(b"x");
        assert_eq!(ArtifactHash::parse(h.as_str()), Some(h.clone()));
        let upper = format!("sha256:{}", h.as_str()[7..].to_ascii_uppercase());
        assert_eq!(ArtifactHash::parse(&upper), Some(h.clone()));
        assert_eq!(ArtifactHash::parse(&h.as_str()[..70]), None);
        assert_eq!(ArtifactHash::parse(&h.as_str()[7..]), None);
        assert_eq!(ArtifactHash::parse("sha256:zz"), None);
    }

    #[test]
    fn span_ids_and_entries() {
        assert!(SpanId::parse("00000000000000a1").is_some());
        assert!(SpanId::parse("0000000000000000").is_none());
        assert!(SpanId::parse("a1").is_none());
        let h = ArtifactHash::of(b"doc");
        let e = Entry::parse(&format!("mem@x@{h}")).unwrap();
        assert_eq!(e.record_id, "mem@x");
        assert_eq!(e.hash, h);
        assert!(Entry::parse(&format!("@{h}")).is_none());
        assert!(Entry::parse("mem").is_none());
    }

    #[test]
    fn input_hash_joins_part_strings_with_newlines() {
        let a = ArtifactHash::of(b"a");
        let b = ArtifactHash::of(b"b");
        let expect = ArtifactHash::of(format!("{a}\n{b}").as_bytes());
        assert_eq!(ArtifactHash::of_parts(&[a, b]), expect);
    }
}
