//! `audita verify DIR`: offline verification of an on-disk sealed record with
//! public keys only.
//!
//! Prints a JSON summary on stdout; exit 0 when everything certifies; 1 when
//! anything is suspect or missing, a seal, receipt, checkpoint or payload is broken,
//! or (with `--trust`) the record's keys differ from the pinned ones (a one-line
//! summary of what failed goes to stderr); 2 with one line on stderr when an input
//! cannot be read at all or exceeds a size limit (`--max-*`, see `audita_record::Limits`).
//!
//! Design constraints (the summary, schema `audita.verify/v1`):
//! - `counts` are always complete; every list (`certified`, `suspect`, `missing`,
//!   `receipt_problems`, `epochs`, `checkpoints`, `equivocations`,
//!   `held_checkpoints`, `payloads`, and each epoch's `faults`) holds at most
//!   `--max-list` entries (default 1000), in record order; `more` says how many
//!   entries each capped list left out (`more.<list>`, `more.epoch_faults`), so a
//!   huge damaged record prints a bounded summary.
//! - `problem_codes` aggregates every problem by its stable code, with counts:
//!   `suspect` (reason codes), `receipt_problems`, `epoch_faults`,
//!   `checkpoint_faults`, `payloads` (`corrupted`, `missing_key`, `absent`), `trust`.
//! - `trust` says where the log and keeper keys came from: `{"source": "record"}`
//!   (the record's own `keys/`, which whoever rewrites the record rewrites too) or
//!   `{"source": "pinned", "file", "logs", "keepers", "quorum", "problems"}` with
//!   `--trust FILE` (format in `evidence::trust`): then the pinned keys are the
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
//! - `keeper_evidence` (only with `--keeper-evidence`) judges the conflicting
//!   checkpoints keepers refused against the record (statuses in
//!   `keeper_evidence.rs`): a `fork` or a log-signed checkpoint `beyond_record` is a
//!   problem (exit 1); evidence that does not check is reported as `invalid` and
//!   proves nothing against the log.

use std::path::PathBuf;

use audita_evidence::{
    verify_record_with, CheckpointFault, EpochFault, Partition, Payload, PayloadStatus, Policy,
    ReceiptFault, SuspectItem,
};
use serde_json::{json, Map, Value};

use crate::inputs::{read_input, LimitArgs, Trust};

/// Arguments of `audita verify`.
#[derive(clap::Args, Debug)]
pub struct VerifyArgs {
    /// Record directory (format `audita-record v1`).
    pub dir: PathBuf,
    /// Verify envelope signatures with one Ed25519 batch first (strict single
    /// verification is the default).
    #[arg(long)]
    pub batch: bool,
    /// Threads for signature checks (default: available parallelism).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Omit the list of certified messages (counts only) for large records.
    #[arg(long)]
    pub brief: bool,
    /// A checkpoint note held outside the record (a keeper's latest copy); the
    /// record must reproduce it, which detects a record cut short (repeatable).
    #[arg(long = "checkpoint", value_name = "NOTE")]
    pub checkpoints: Vec<PathBuf>,
    /// Trust file pinning the log and keeper keys (C2SP vkeys) and the keeper
    /// quorum, instead of the record's own keys/ (format in README).
    #[arg(long, value_name = "FILE")]
    pub trust: Option<PathBuf>,
    /// Equivocation evidence kept by a keeper (`audita.keeper-evidence/v1`: a file
    /// of one record or of the array `audita keeper evidence` prints, or the
    /// keeper's state directory), judged against this record (repeatable).
    #[arg(long = "keeper-evidence", value_name = "PATH")]
    pub keeper_evidence: Vec<PathBuf>,
    /// At most this many entries per list in the summary (counts stay complete).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub max_list: usize,
    /// Size limits of the inputs.
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// Runs the subcommand; returns the exit code.
pub fn run(args: &VerifyArgs) -> i32 {
    match run_inner(args) {
        Ok(code) => code,
        Err(line) => {
            eprintln!("audita verify: {line}");
            2
        }
    }
}

fn run_inner(args: &VerifyArgs) -> Result<i32, String> {
    let dir =
        audita_record::read_dir(&args.dir, &args.limits.record()).map_err(|e| e.to_string())?;
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let mut held = Vec::new();
    for path in &args.checkpoints {
        held.push(read_input(path, args.limits.max_input_bytes)?);
    }
    let mut policy = Policy {
        batch_signatures: args.batch,
        threads,
        held_checkpoints: held,
        ..Policy::default()
    };
    let tiles = audita_record::tiles::check_tiles(&args.dir, &dir.record, &dir.keys);
    let (keys, trust) = Trust::load(
        args.trust.as_deref(),
        dir.keys,
        &mut policy,
        args.limits.max_input_bytes,
    )?;
    let found = crate::keeper_evidence::read(&args.keeper_evidence, args.limits.max_input_bytes)?;
    let partition = verify_record_with(&dir.record, &keys, &policy, dir.payloads.as_ref());
    let evidence = audita_keeper::judge::judge(found, &dir.record, &keys);
    let mut summary = summarize(&partition, &trust, &tiles, args);
    if !args.keeper_evidence.is_empty() {
        summary["keeper_evidence"] = audita_keeper::judge::summary(&evidence, args.max_list);
        if evidence.iter().any(|j| j.is_problem()) {
            summary["clean"] = json!(false);
        }
    }
    println!(
        "{}",
        serde_json::to_string_pretty(&summary).unwrap_or_else(|_| "{}".into())
    );
    let mut failures: Vec<String> = Vec::new();
    if !partition.is_clean() {
        failures.push(failure_line(&partition));
    }
    failures.extend(trust.failure_line());
    if !tiles.problems.is_empty() {
        failures.push(format!(
            "{} problem(s) in the tiled log",
            tiles.problems.len()
        ));
    }
    failures.extend(audita_keeper::judge::failure_line(&evidence));
    if failures.is_empty() {
        Ok(0)
    } else {
        eprintln!("audita verify: {}", failures.join("; "));
        Ok(1)
    }
}

fn failure_line(p: &Partition) -> String {
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
    audita_evidence_hex(h)
}

fn audita_evidence_hex(h: &[u8]) -> String {
    h.iter().map(|b| format!("{b:02x}")).collect()
}

fn epoch_fault(f: &EpochFault) -> String {
    match f {
        EpochFault::HeaderUndecodable(e) => format!("header undecodable: {e}"),
        EpochFault::Signature(e) => format!("header signature: {e}"),
        EpochFault::NumberOutOfOrder { expected, got } => {
            format!("number {got}, expected {expected}")
        }
        EpochFault::ChainBroken => "prev hash does not match the previous header".into(),
        EpochFault::RangeMismatch => "start/size do not match the log".into(),
        EpochFault::LeafUndecodable { index } => format!("leaf {index} undecodable"),
        EpochFault::DuplicateLeaf { index } => format!("leaf {index} duplicates an earlier leaf"),
        EpochFault::WindowRootMismatch => "window root does not match the leaves".into(),
        EpochFault::LogRootMismatch => "log root does not match the leaves".into(),
        EpochFault::WrongOrigin => "origin is not a registered log".into(),
        EpochFault::NoCheckpoint => "no log-signed checkpoint matches".into(),
        EpochFault::NotWitnessed { missing } => format!("not co-signed by {}", missing.join(", ")),
    }
}

fn checkpoint_fault(f: &CheckpointFault) -> String {
    match f {
        CheckpointFault::Unparseable(e) => e.to_string(),
        CheckpointFault::NoLogSignature => "no valid log signature".into(),
        CheckpointFault::UnknownSigner(n) => format!("signature line by unknown key {n}"),
        CheckpointFault::InvalidSignature(n) => format!("signature by {n} does not verify"),
        CheckpointFault::MissingCosignature(n) => format!("missing co-signature of {n}"),
        CheckpointFault::NoMatchingEpoch => "matches no epoch header".into(),
        CheckpointFault::Equivocating => "equivocates with another checkpoint".into(),
    }
}

fn epoch_fault_code(f: &EpochFault) -> &'static str {
    match f {
        EpochFault::HeaderUndecodable(_) => "header_undecodable",
        EpochFault::Signature(_) => "header_signature",
        EpochFault::NumberOutOfOrder { .. } => "number_out_of_order",
        EpochFault::ChainBroken => "chain_broken",
        EpochFault::RangeMismatch => "range_mismatch",
        EpochFault::LeafUndecodable { .. } => "leaf_undecodable",
        EpochFault::DuplicateLeaf { .. } => "duplicate_leaf",
        EpochFault::WindowRootMismatch => "window_root_mismatch",
        EpochFault::LogRootMismatch => "log_root_mismatch",
        EpochFault::WrongOrigin => "wrong_origin",
        EpochFault::NoCheckpoint => "no_checkpoint",
        EpochFault::NotWitnessed { .. } => "not_witnessed",
    }
}

fn checkpoint_fault_code(f: &CheckpointFault) -> &'static str {
    match f {
        CheckpointFault::Unparseable(_) => "unparseable",
        CheckpointFault::NoLogSignature => "no_log_signature",
        CheckpointFault::UnknownSigner(_) => "unknown_signer",
        CheckpointFault::InvalidSignature(_) => "invalid_signature",
        CheckpointFault::MissingCosignature(_) => "missing_cosignature",
        CheckpointFault::NoMatchingEpoch => "no_matching_epoch",
        CheckpointFault::Equivocating => "equivocating",
    }
}

fn receipt_fault_code(f: &ReceiptFault) -> &'static str {
    match f {
        ReceiptFault::Undecodable(_) => "undecodable",
        ReceiptFault::Signature(_) => "signature",
        ReceiptFault::WrongRecipient { .. } => "wrong_recipient",
        ReceiptFault::Duplicate => "duplicate",
    }
}

fn payload_status(f: &audita_evidence::PayloadFinding) -> &'static str {
    if f.corrupted {
        return "corrupted";
    }
    match f.status {
        PayloadStatus::Available => "available",
        PayloadStatus::Shredded => "shredded",
        PayloadStatus::KeyMissing => "missing_key",
        PayloadStatus::Absent => "absent",
    }
}

/// Counts of each code.
fn tally<'a>(codes: impl Iterator<Item = &'a str>) -> Value {
    let mut m: std::collections::BTreeMap<&str, u64> = std::collections::BTreeMap::new();
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

fn receipt_fault(f: &ReceiptFault) -> String {
    match f {
        ReceiptFault::Undecodable(e) => format!("undecodable: {e}"),
        ReceiptFault::Signature(e) => e.to_string(),
        ReceiptFault::WrongRecipient { expected, got } => {
            format!("signed by {got}, destination is {expected}")
        }
        ReceiptFault::Duplicate => "duplicate".into(),
    }
}

fn tiles_json(t: &audita_record::tiles::TileReport, max: usize) -> Value {
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

/// The summary `audita verify` prints (`audita.verify/v1`): counts, problem codes
/// and every list capped at `--max-list`, what the caps left out under `more`.
fn summarize(
    p: &Partition,
    trust: &Trust,
    tiles: &audita_record::tiles::TileReport,
    args: &VerifyArgs,
) -> Value {
    let max = args.max_list;
    let mut more = Map::new();
    let [certified, suspect, missing, receipts] = message_lists(p, max, &mut more);
    let [epochs, registries] = epoch_lists(p, max, &mut more);
    let [checkpoints, equivocations, held] = checkpoint_lists(p, max, &mut more);
    let payloads = capped("payloads", p.payloads.iter(), max, &mut more, |f| {
        json!({
            "message": hex32(&f.message.digest),
            "author": f.message.author.as_str(),
            "commitment": hex32(&f.digest),
            "status": payload_status(f),
        })
    });
    let mut out = json!({
        "schema": "audita.verify/v1",
        "record": args.dir.display().to_string(),
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
        "tiles": tiles_json(tiles, args.max_list),
    });
    if !args.brief {
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
                "fault": receipt_fault(&r.fault),
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
            "faults": e.faults.iter().take(max).map(epoch_fault).collect::<Vec<_>>(),
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
            "faults": c.faults.iter().take(max).map(checkpoint_fault).collect::<Vec<_>>(),
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
fn counts(p: &Partition, trust: &Trust, tiles: &audita_record::tiles::TileReport) -> Value {
    let stored = p
        .certified
        .values()
        .filter(|c| matches!(c.envelope.envelope().payload, Payload::Stored { .. }))
        .count();
    let status_count = |want: &str| {
        p.payloads
            .iter()
            .filter(|f| payload_status(f) == want)
            .count()
    };
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
fn problem_codes(p: &Partition, trust: &Trust, tiles: &audita_record::tiles::TileReport) -> Value {
    json!({
        "suspect": tally(p.suspect.iter().flat_map(|s| s.reasons.iter().map(|r| r.code()))),
        "receipt_problems": tally(p.receipt_problems.iter().map(|r| receipt_fault_code(&r.fault))),
        "epoch_faults": tally(p.epochs.iter().flat_map(|e| e.faults.iter().map(epoch_fault_code))),
        "checkpoint_faults": tally(p.checkpoints.iter().flat_map(|c| c.faults.iter().map(checkpoint_fault_code))),
        "payloads": tally(p.payloads.iter().map(payload_status).filter(|s| !matches!(*s, "available" | "shredded"))),
        "trust": tally(trust.problems().iter().map(|t| t.code())),
        "tiles": tally(tiles.problems.iter().map(|t| t.code)),
    })
}
