//! What keeper evidence shows about a record (`audita verify DIR --keeper-evidence
//! PATH`): the conflicting checkpoints keepers refused (`audita.keeper-evidence/v1`,
//! [`crate::evidence`]), judged against the record's own tree.
//!
//! A keeper keeps a checkpoint it refused because it conflicts with one it had
//! co-signed. Each record is first checked with the log's public key alone
//! ([`ConflictRecord::check`]); then both of its notes are compared with the
//! record's own tree: the root of the record's first `size` leaves, for each note's
//! size. Each record gets one status:
//!
//! | status | meaning | a problem? |
//! |---|---|---|
//! | `fork` | the log signed two histories: an `equivocation` (same size, two roots), or a note whose root the record's leaves at that size contradict | yes |
//! | `beyond_record` | log-signed and unresolved, and a note is larger than the record: the log signed leaves the record does not hold (cut short, or the fork lies past it) | yes |
//! | `cleared` | an `inconsistent` record whose two notes are both the record's tree at their sizes: the log did not fork, the refused request only carried a bad proof | no |
//! | `invalid` | does not check (not log-signed, no conflict, malformed): it proves nothing against the log | no |
//! | `other_log` | its origin is not a log of this record (or the pinned trust) | no |
//!
//! Each note also says whether it is the record's tree (`in_record`: true, false, or
//! null when larger than the record), which names the branch the record holds.
//!
//! Design constraints: pure — the records come in already read (the command line
//! reads them, bounded); the record's roots at all the sizes named are computed in
//! one pass over its leaves.

use std::collections::BTreeMap;

use audita_evidence::merkle::{leaf_hash, CompactRange};
use audita_evidence::{Hash, KeyRegistry, Record, SignedCheckpoint};
use serde_json::{json, Value};

use crate::evidence::{ConflictKind, ConflictRecord};

/// One evidence record and what it shows about the record.
#[derive(Debug)]
pub struct Judged {
    source: String,
    record: ConflictRecord,
    status: &'static str,
    detail: String,
    notes: [Option<(u64, Hash, Option<bool>)>; 2],
}

impl Judged {
    /// Whether it is a problem of the record (`fork`, `beyond_record`).
    pub fn is_problem(&self) -> bool {
        matches!(self.status, "fork" | "beyond_record")
    }

    /// The record's entry in the summary.
    fn json(&self) -> Value {
        let note = |n: &Option<(u64, Hash, Option<bool>)>| {
            n.map(|(size, root, in_record)| {
                json!({"size": size, "root": hex::encode(root), "in_record": in_record})
            })
        };
        json!({
            "source": self.source,
            "id": self.record.id(),
            "kind": self.record.kind,
            "keeper": self.record.keeper,
            "origin": self.record.origin,
            "status": self.status,
            "detail": self.detail,
            "cosigned": note(&self.notes[0]),
            "refused": note(&self.notes[1]),
            "received_unix": self.record.received_unix,
        })
    }
}

/// Roots of the record's first `n` leaves for every `n` in `sizes` that the record
/// reaches, in one pass.
fn roots_at(record: &Record, mut sizes: Vec<u64>) -> BTreeMap<u64, Hash> {
    sizes.sort_unstable();
    sizes.dedup();
    let mut out = BTreeMap::new();
    let mut want = sizes.into_iter().peekable();
    let mut range = CompactRange::new();
    let mut take = |range: &CompactRange, want: &mut std::iter::Peekable<_>| {
        while want.peek() == Some(&range.size()) {
            out.insert(range.size(), range.root());
            want.next();
        }
    };
    take(&range, &mut want);
    for leaf in record.epochs.iter().flat_map(|e| e.leaves.iter()) {
        if want.peek().is_none() {
            break;
        }
        range.append(leaf_hash(leaf));
        take(&range, &mut want);
    }
    out
}

/// Judges each record against the record's log keys (`keys`) and leaves.
pub fn judge(
    found: Vec<(String, ConflictRecord)>,
    record: &Record,
    keys: &KeyRegistry,
) -> Vec<Judged> {
    let parsed = |text: &str| {
        SignedCheckpoint::parse(text.as_bytes())
            .ok()
            .map(|c| (c.checkpoint().size, c.checkpoint().root))
    };
    let sizes: Vec<u64> = found
        .iter()
        .flat_map(|(_, r)| [parsed(&r.cosigned), parsed(&r.refused)])
        .flatten()
        .map(|(size, _)| size)
        .collect();
    let roots = roots_at(record, sizes);
    let note = |text: &str| {
        parsed(text).map(|(size, root)| (size, root, roots.get(&size).map(|r| *r == root)))
    };
    found
        .into_iter()
        .map(|(source, r)| {
            let notes = [note(&r.cosigned), note(&r.refused)];
            let (status, detail) = match keys.log(&r.origin) {
                None => (
                    "other_log",
                    "the origin is not a log of this record".to_string(),
                ),
                Some(log_key) => match r.check(log_key) {
                    Err(e) => ("invalid", e.to_string()),
                    Ok(_) => status(&r, &notes),
                },
            };
            Judged {
                source,
                record: r,
                status,
                detail,
                notes,
            }
        })
        .collect()
}

fn status(
    r: &ConflictRecord,
    notes: &[Option<(u64, Hash, Option<bool>)>; 2],
) -> (&'static str, String) {
    let in_record: Vec<Option<bool>> = notes.iter().map(|n| n.and_then(|n| n.2)).collect();
    let branch = match (in_record[0], in_record[1]) {
        (Some(true), _) => "the record holds the co-signed branch",
        (_, Some(true)) => "the record holds the refused branch",
        (Some(false), Some(false)) => "the record holds neither branch",
        _ => "the record does not reach the conflict",
    };
    match r.kind {
        ConflictKind::Equivocation => (
            "fork",
            format!("the log signed two roots for one tree size; {branch}"),
        ),
        ConflictKind::Inconsistent => match (in_record[0], in_record[1]) {
            (Some(true), Some(true)) => (
                "cleared",
                "both checkpoints are the record's tree at their sizes: no fork, the request carried a bad proof".into(),
            ),
            (Some(false), _) | (_, Some(false)) => (
                "fork",
                format!("a log-signed checkpoint contradicts the record's leaves at its size; {branch}"),
            ),
            _ => (
                "beyond_record",
                "the log signed a checkpoint larger than the record, which cannot settle the conflict".into(),
            ),
        },
    }
}

/// The summary section (`keeper_evidence`): counts by status and at most `max`
/// records.
pub fn summary(judged: &[Judged], max: usize) -> Value {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for j in judged {
        *counts.entry(j.status).or_default() += 1;
    }
    json!({
        "checked": judged.len(),
        "statuses": counts,
        "records": judged.iter().take(max).map(Judged::json).collect::<Vec<_>>(),
        "records_more": judged.len().saturating_sub(max),
    })
}

/// The failure line for the problems among `judged`, if any.
pub fn failure_line(judged: &[Judged]) -> Option<String> {
    let forks = judged.iter().filter(|j| j.status == "fork").count();
    let beyond = judged
        .iter()
        .filter(|j| j.status == "beyond_record")
        .count();
    let mut parts = Vec::new();
    if forks > 0 {
        parts.push(format!("keeper evidence proves {forks} fork(s) of the log"));
    }
    if beyond > 0 {
        parts.push(format!(
            "keeper evidence holds {beyond} log-signed checkpoint(s) beyond the record"
        ));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}
