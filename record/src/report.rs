//! The verify report of a sealed record (schema `audita.verify/v1`): what `audita
//! verify` prints, and what any offline verifier built on this crate reports the
//! same way.
//!
//! Design constraints:
//! - `counts` are always complete; every list (`certified`, `suspect`, `missing`,
//!   `receipt_problems`, `epochs`, `checkpoints`, `equivocations`,
//!   `held_checkpoints`, `payloads`, and each epoch's `faults`) holds at most
//!   [`Options::max_list`] entries (`audita verify --max-list`, default 1000), in record order; `more` says how many
//!   entries each capped list left out (`more.<list>`, `more.epoch_faults`), so a
//!   huge damaged record gives a bounded report.
//! - `problem_codes` aggregates every problem by its stable code, with counts:
//!   `suspect` (reason codes), `receipt_problems`, `epoch_faults`,
//!   `checkpoint_faults`, `payloads` (`corrupted`, `missing_key`, `absent`), `trust`.
//! - `trust` says where the log and keeper keys came from: `{"source": "record"}`
//!   (the record's own `keys/`, which whoever rewrites the record rewrites too) or
//!   `{"source": "pinned", "file", "logs", "keepers", "quorum", "problems"}` with a
//!   trust file (`--trust FILE`, format in `evidence::trust`; [`Trust::pinned`]): then the pinned keys are the
//!   ones verified against, every checkpoint needs the quorum of pinned keepers'
//!   co-signatures, and every difference between the record's keys and the pins is
//!   a problem.
//! - `registries` says which principal registry applied to which epochs: runs of
//!   epochs whose headers name the same registry digest (SHA-256 of the canonical
//!   `principals.json`, all zeros when the sealer declared none); each epoch entry
//!   carries its `registry` too.
//! - Payload `status`: `available`, `shredded` (key destroyed and recorded so by a
//!   tombstone: clean), `missing_key` (key gone without a tombstone: a problem),
//!   `absent`, `corrupted`.
//! - `tiles` reports the record's static tiled log (c2sp.org/tlog-tiles,
//!   `audita_record::tiles`): `status` is `absent` (an older record without tiles:
//!   not a problem), `current` (the tiles hold every sealed leaf at the record's
//!   latest checkpoint), `behind` (a prefix, e.g. after a crash before the sealer's
//!   restart) or `problems`; every tile and entry bundle is recomputed from the
//!   record's leaves and compared, and each disagreement (`tile_mismatch`,
//!   `tile_missing`, `checkpoint_unreadable`, `checkpoint_not_in_record`,
//!   `checkpoint_unsigned`, `checkpoint_bad_signature`, `checkpoint_root_mismatch`, `tiles_ahead`,
//!   `vkey_mismatch`) is a problem
//!   (`counts.tile_problems`, `problem_codes.tiles`; exit 1).
//! - Every code is the `code()` of its fault (`audita_evidence`'s `SuspectReason`,
//!   `ReceiptFault`, `EpochFault`, `CheckpointFault`, `PayloadFinding`,
//!   `TrustProblem`; the tiles' problem codes), defined once beside the fault.
//! - Pure: the caller verifies (`audita_evidence::verify_record_with`,
//!   [`crate::tiles::check_tiles`]) and reads the trust file; this module reports.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use audita_evidence::{
    CheckpointFault, EpochFault, KeyRegistry, Partition, Payload, PayloadFinding, PayloadStatus,
    Policy, SuspectItem, TrustAnchors, TrustProblem,
};
use serde_json::{json, Map, Value};

use crate::tiles::TileReport;

/// The report's schema id.
pub const SCHEMA: &str = "audita.verify/v1";

/// What the report lists.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Leave out the list of certified messages (counts only), for large records.
    pub brief: bool,
    /// At most this many entries per list (counts stay complete).
    pub max_list: usize,
}

/// Where the log and keeper keys of a verification came from.
pub enum Trust {
    /// The record's own `keys/` directory (no `--trust`).
    Record,
    /// A trust file: its path, the pins, and how the record's keys differ from them.
    Pinned {
        /// The trust file.
        file: PathBuf,
        /// The pinned keys.
        anchors: TrustAnchors,
        /// Differences between the record's keys and the pins.
        problems: Vec<TrustProblem>,
    },
}

impl Trust {
    /// Applies the trust file `file` (its `text`, format in `audita_evidence::trust`)
    /// to the record's keys: the registry to verify with, the policy's keeper
    /// requirement set, and the trust. The error is one line naming the file.
    pub fn pinned(
        file: &Path,
        text: &str,
        record_keys: &KeyRegistry,
        policy: &mut Policy,
    ) -> Result<(KeyRegistry, Trust), String> {
        let anchors = TrustAnchors::parse(text).map_err(|e| format!("{}: {e}", file.display()))?;
        let (keys, problems) = anchors.apply(record_keys);
        policy.required_keepers = Some(anchors.keeper_names());
        policy.keeper_quorum = Some(anchors.quorum());
        Ok((
            keys,
            Trust::Pinned {
                file: file.to_owned(),
                anchors,
                problems,
            },
        ))
    }

    /// Differences between the record's keys and the pins (none without pins).
    pub fn problems(&self) -> &[TrustProblem] {
        match self {
            Trust::Record => &[],
            Trust::Pinned { problems, .. } => problems,
        }
    }

    /// One line naming the first problems, if any.
    pub fn failure_line(&self) -> Option<String> {
        let p = self.problems();
        (!p.is_empty()).then(|| {
            let first: Vec<String> = p.iter().take(3).map(TrustProblem::detail).collect();
            format!("{} trust problems ({})", p.len(), first.join("; "))
        })
    }

    /// The `trust` object of a JSON summary.
    pub fn json(&self) -> Value {
        match self {
            Trust::Record => json!({
                "source": "record",
                "note": "log and keeper keys were taken from the record's own keys/ directory: \
                         whoever can rewrite the record can rewrite them; pin them with --trust FILE",
            }),
            Trust::Pinned {
                file,
                anchors,
                problems,
            } => json!({
                "source": "pinned",
                "file": file.display().to_string(),
                "logs": anchors.logs().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
                "keepers": anchors.keepers().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
                "quorum": anchors.quorum(),
                "problems": problems.iter().map(|p| json!({
                    "code": p.code(), "name": p.name(), "detail": p.detail(),
                })).collect::<Vec<_>>(),
            }),
        }
    }
}

/// One line naming what failed verification in `p` (empty when it is clean).
pub fn failure_line(p: &Partition) -> String {
    let mut parts = Vec::new();
    if !p.suspect.is_empty() {
        let first = &p.suspect[0];
        let what = match &first.item {
            SuspectItem::Message { id, .. } => format!("{}:{}", id.author, id.short()),
            SuspectItem::Undecodable { record_index } => format!("envelope #{record_index}"),
        };
        let why: Vec<&str> = first.reasons.iter().map(|r| r.code()).collect();
        parts.push(format!(
            "{} suspect (first: {what} {})",
            p.suspect.len(),
            why.join("+")
        ));
    }
    if !p.missing.is_empty() {
        let names: Vec<String> = p
            .missing
            .iter()
            .take(3)
            .map(|m| format!("{}:{}", m.id.author, m.id.short()))
            .collect();
        parts.push(format!(
            "{} missing (authors: {})",
            p.missing.len(),
            names.join(", ")
        ));
    }
    if !p.receipt_problems.is_empty() {
        parts.push(format!("{} bad receipts", p.receipt_problems.len()));
    }
    let broken: Vec<String> = p
        .epochs
        .iter()
        .filter(|e| !e.intact())
        .map(|e| {
            e.header
                .as_ref()
                .map_or(format!("#{}", e.record_index), |h| h.number.to_string())
        })
        .collect();
    if !broken.is_empty() {
        let more = broken.len().saturating_sub(5);
        let shown = broken[..broken.len().min(5)].join(", ");
        parts.push(if more > 0 {
            format!("broken seal of epoch {shown} and {more} more")
        } else {
            format!("broken seal of epoch {shown}")
        });
    }
    let bad_cps = p
        .checkpoints
        .iter()
        .filter(|c| !c.faults.is_empty())
        .count();
    if bad_cps > 0 {
        parts.push(format!("{bad_cps} invalid checkpoints"));
    }
    if !p.equivocations.is_empty() {
        parts.push(format!("{} equivocations", p.equivocations.len()));
    }
    for h in &p.held {
        parts.push(h.fault.detail());
    }
    let bad_payloads = p
        .payloads
        .iter()
        .filter(|f| f.corrupted || f.status == PayloadStatus::Absent)
        .count();
    if bad_payloads > 0 {
        parts.push(format!("{bad_payloads} corrupted or absent payloads"));
    }
    let lost_keys = p
        .payloads
        .iter()
        .filter(|f| f.status == PayloadStatus::KeyMissing)
        .count();
    if lost_keys > 0 {
        parts.push(format!(
            "{lost_keys} payloads whose key is missing (not recorded as shredded)"
        ));
    }
    parts.join("; ")
}

fn hex32(h: &[u8; 32]) -> String {
    hex::encode(h)
}

/// Counts of each code.
fn tally<'a>(codes: impl Iterator<Item = &'a str>) -> Value {
    let mut m: BTreeMap<&str, u64> = BTreeMap::new();
    for c in codes {
        *m.entry(c).or_default() += 1;
    }
    json!(m)
}

/// At most `max` entries of `items`, mapped; records how many were left out.
fn capped<T>(
    name: &str,
    items: impl ExactSizeIterator<Item = T>,
    max: usize,
    more: &mut Map<String, Value>,
    f: impl FnMut(T) -> Value,
) -> Value {
    let n = items.len();
    if n > max {
        more.insert(name.to_string(), json!(n - max));
    }
    Value::Array(items.take(max).map(f).collect())
}

fn tiles_json(t: &TileReport, max: usize) -> Value {
    let status = if !t.present {
        "absent"
    } else if !t.problems.is_empty() {
        "problems"
    } else if t.size == t.record_size {
        "current"
    } else {
        "behind"
    };
    json!({
        "status": status,
        "size": t.size,
        "record_size": t.record_size,
        "files_checked": t.files_checked,
        "problems": t.problems.iter().take(max).map(|p| json!({"code": p.code, "path": p.path, "detail": p.detail})).collect::<Vec<_>>(),
        "problems_more": t.problems.len().saturating_sub(max),
    })
}

/// The report of a verified record (`audita.verify/v1`, the summary `audita
/// verify` prints): counts, problem codes and every list capped at
/// `options.max_list`, what the caps left out under `more`.
pub fn summary(
    record: &Path,
    p: &Partition,
    trust: &Trust,
    tiles: &TileReport,
    options: Options,
) -> Value {
    let max = options.max_list;
    let mut more = Map::new();
    let [certified, suspect, missing, receipts] = message_lists(p, max, &mut more);
    let [epochs, registries] = epoch_lists(p, max, &mut more);
    let [checkpoints, equivocations, held] = checkpoint_lists(p, max, &mut more);
    let payloads = capped("payloads", p.payloads.iter(), max, &mut more, |f| {
        json!({
            "message": hex32(&f.message.digest),
            "author": f.message.author.as_str(),
            "commitment": hex32(&f.digest),
            "status": f.code(),
        })
    });
    let mut out = json!({
        "schema": SCHEMA,
        "record": record.display().to_string(),
        "clean": p.is_clean() && trust.problems().is_empty() && tiles.problems.is_empty(),
        "trust": trust.json(),
        "counts": counts(p, trust, tiles),
        "problem_codes": problem_codes(p, trust, tiles),
        "suspect": suspect,
        "missing": missing,
        "receipt_problems": receipts,
        "epochs": epochs,
        "registries": registries,
        "checkpoints": checkpoints,
        "equivocations": equivocations,
        "held_checkpoints": held,
        "payloads": payloads,
        "tiles": tiles_json(tiles, max),
    });
    if !options.brief {
        out["certified"] = certified;
    } else {
        more.remove("certified");
    }
    out["more"] = Value::Object(more);
    out
}

/// The message lists of the summary: certified, suspect, missing messages and
/// receipt problems.
fn message_lists(p: &Partition, max: usize, more: &mut Map<String, Value>) -> [Value; 4] {
    let certified = capped("certified", p.certified.iter(), max, more, |(id, c)| {
        let env = c.envelope.envelope();
        json!({
            "id": hex32(&id.digest),
            "author": id.author.as_str(),
            "destination": env.destination.as_str(),
            "kind": env.payload.kind(),
            "timestamp": env.timestamp,
            "citations": env.citations.len(),
            "epoch": c.epoch,
            "leaf": c.leaf_index,
        })
    });
    let suspect = capped("suspect", p.suspect.iter(), max, more, |s| {
        let reasons: Vec<Value> = s
            .reasons
            .iter()
            .take(max)
            .map(|r| json!({"code": r.code(), "detail": r.detail()}))
            .collect();
        let (record_index, id, author) = match &s.item {
            SuspectItem::Message { id, record_index } => (
                *record_index,
                json!(hex32(&id.digest)),
                json!(id.author.as_str()),
            ),
            SuspectItem::Undecodable { record_index } => (*record_index, Value::Null, Value::Null),
        };
        json!({
            "record_index": record_index, "id": id, "author": author, "reasons": reasons,
            "reasons_more": s.reasons.len().saturating_sub(max),
        })
    });
    let missing = capped("missing", p.missing.iter(), max, more, |m| {
        json!({
            "id": hex32(&m.id.digest),
            "author": m.id.author.as_str(),
            "certified_citers": m.certified_citers.iter().take(max).map(|c| json!({"id": hex32(&c.digest), "author": c.author.as_str()})).collect::<Vec<_>>(),
            "certified_citers_more": m.certified_citers.len().saturating_sub(max),
            "receipted_by": m.receipted_by.iter().take(max).map(|r| r.as_str()).collect::<Vec<_>>(),
            "sealed_in_epoch": m.sealed_in,
        })
    });
    let receipts = capped(
        "receipt_problems",
        p.receipt_problems.iter(),
        max,
        more,
        |r| {
            json!({
                "record_index": r.record_index,
                "message": r.message.as_ref().map(|m| json!({"id": hex32(&m.digest), "author": m.author.as_str()})),
                "fault": r.fault.detail(),
            })
        },
    );
    [certified, suspect, missing, receipts]
}

/// The epoch lists of the summary: every epoch with its faults, and which registry
/// (principal keys with their windows) applied to which epochs.
fn epoch_lists(p: &Partition, max: usize, more: &mut Map<String, Value>) -> [Value; 2] {
    let mut epoch_faults_more = 0usize;
    let epochs = capped("epochs", p.epochs.iter(), max, more, |e| {
        let h = e.header.as_ref();
        epoch_faults_more += e.faults.len().saturating_sub(max);
        json!({
            "record_index": e.record_index,
            "number": h.map(|h| h.number),
            "start": h.map(|h| h.start),
            "size": h.map(|h| h.size),
            "leaves": e.leaves,
            "log_root": h.map(|h| hex32(&h.log_root)),
            "prev": h.map(|h| hex32(&h.prev)),
            "registry": h.map(|h| hex32(&h.registry)),
            "intact": e.intact(),
            "faults": e.faults.iter().take(max).map(EpochFault::detail).collect::<Vec<_>>(),
            "faults_more": e.faults.len().saturating_sub(max),
        })
    });
    if epoch_faults_more > 0 {
        more.insert("epoch_faults".into(), json!(epoch_faults_more));
    }
    // Which registry (principal keys with their windows) applied to which epochs:
    // runs of consecutive decodable headers naming the same digest (zeros: none
    // declared).
    let mut runs: Vec<(String, u64, u64)> = Vec::new();
    for h in p.epochs.iter().filter_map(|e| e.header.as_ref()) {
        let d = hex32(&h.registry);
        match runs.last_mut() {
            Some((last, _, to)) if *last == d && *to + 1 == h.number => *to = h.number,
            _ => runs.push((d, h.number, h.number)),
        }
    }
    let registries = capped(
        "registries",
        runs.iter(),
        max,
        more,
        |(d, from, to)| json!({"digest": d, "from_epoch": from, "to_epoch": to}),
    );
    [epochs, registries]
}

/// The checkpoint lists of the summary: checkpoints, equivocations and the held
/// (unreadable) checkpoints.
fn checkpoint_lists(p: &Partition, max: usize, more: &mut Map<String, Value>) -> [Value; 3] {
    let checkpoints = capped("checkpoints", p.checkpoints.iter(), max, more, |c| {
        json!({
            "record_index": c.record_index,
            "origin": c.checkpoint.as_ref().map(|c| c.origin.clone()),
            "size": c.checkpoint.as_ref().map(|c| c.size),
            "root": c.checkpoint.as_ref().map(|c| hex32(&c.root)),
            "cosigned_by": c.cosigned_by.iter().take(max).collect::<Vec<_>>(),
            "valid": c.faults.is_empty(),
            "faults": c.faults.iter().take(max).map(CheckpointFault::detail).collect::<Vec<_>>(),
            "faults_more": c.faults.len().saturating_sub(max),
        })
    });
    let equivocations = capped("equivocations", p.equivocations.iter(), max, more, |e| {
        json!({
            "origin": e.first.checkpoint().origin,
            "size": e.first.checkpoint().size,
            "roots": [hex32(&e.first.checkpoint().root), hex32(&e.second.checkpoint().root)],
            "notes": [e.first.to_text(), e.second.to_text()],
        })
    });
    let held = capped(
        "held_checkpoints",
        p.held.iter(),
        max,
        more,
        |h| json!({"index": h.index, "fault": h.fault.detail()}),
    );
    [checkpoints, equivocations, held]
}

/// The summary's `counts` section.
fn counts(p: &Partition, trust: &Trust, tiles: &TileReport) -> Value {
    let stored = p
        .certified
        .values()
        .filter(|c| matches!(c.envelope.envelope().payload, Payload::Stored { .. }))
        .count();
    let status_count = |want: &str| p.payloads.iter().filter(|f| f.code() == want).count();
    json!({
        "certified": p.certified.len(),
        "suspect": p.suspect.len(),
        "missing": p.missing.len(),
        "receipt_problems": p.receipt_problems.len(),
        "epochs": p.epochs.len(),
        "epochs_intact": p.epochs.iter().filter(|e| e.intact()).count(),
        "checkpoints": p.checkpoints.len(),
        "checkpoints_valid": p.checkpoints.iter().filter(|c| c.faults.is_empty()).count(),
        "equivocations": p.equivocations.len(),
        "stored_payloads": stored,
        "shredded_payloads": status_count("shredded"),
        "missing_key_payloads": status_count("missing_key"),
        "trust_problems": trust.problems().len(),
        "tile_problems": tiles.problems.len(),
    })
}

/// The summary's `problem_codes` section: each kind of problem tallied by code.
fn problem_codes(p: &Partition, trust: &Trust, tiles: &TileReport) -> Value {
    json!({
        "suspect": tally(p.suspect.iter().flat_map(|s| s.reasons.iter().map(|r| r.code()))),
        "receipt_problems": tally(p.receipt_problems.iter().map(|r| r.fault.code())),
        "epoch_faults": tally(p.epochs.iter().flat_map(|e| e.faults.iter().map(EpochFault::code))),
        "checkpoint_faults": tally(p.checkpoints.iter().flat_map(|c| c.faults.iter().map(CheckpointFault::code))),
        "payloads": tally(p.payloads.iter().map(PayloadFinding::code).filter(|s| !matches!(*s, "available" | "shredded"))),
        "trust": tally(trust.problems().iter().map(|t| t.code())),
        "tiles": tally(tiles.problems.iter().map(|t| t.code)),
    })
}
