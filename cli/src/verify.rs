//! `audita verify DIR`: offline verification of an on-disk sealed record with
//! public keys only.
//!
//! Prints a JSON summary on stdout (counts and lists of certified, suspect with
//! reasons, missing with authors and certified citers, receipt problems, epoch and
//! checkpoint status, equivocations, payload status). Exit 0 when everything
//! certifies; 1 when anything is suspect or missing or a seal, receipt or
//! checkpoint is broken (a one-line summary of what failed goes to stderr); 2 with
//! one line on stderr when the directory cannot be read as a record at all.

use std::path::PathBuf;

use audita_evidence::{
    verify_record_with, CheckpointFault, EpochFault, Partition, Payload, PayloadStatus, Policy,
    ReceiptFault, SuspectItem,
};
use serde_json::{json, Value};

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
}

/// Runs the subcommand; returns the exit code.
pub fn run(args: &VerifyArgs) -> i32 {
    let (record, keys) = match audita_sealer::disk::read_record(&args.dir) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("audita verify: {e}");
            return 2;
        }
    };
    let store = match audita_sealer::disk::read_payloads(&args.dir) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("audita verify: {e}");
            return 2;
        }
    };
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let mut held = Vec::new();
    for path in &args.checkpoints {
        match std::fs::read(path) {
            Ok(b) => held.push(b),
            Err(e) => {
                eprintln!("audita verify: checkpoint {}: {e}", path.display());
                return 2;
            }
        }
    }
    let policy = Policy {
        batch_signatures: args.batch,
        threads,
        held_checkpoints: held,
        ..Policy::default()
    };
    let partition = verify_record_with(&record, &keys, &policy, store.as_ref());
    let summary = summarize(&partition, args);
    println!(
        "{}",
        serde_json::to_string_pretty(&summary).unwrap_or_else(|_| "{}".into())
    );
    if partition.is_clean() {
        0
    } else {
        eprintln!("audita verify: {}", failure_line(&partition));
        1
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
        parts.push(format!("broken seal of epoch {}", broken.join(", ")));
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

fn summarize(p: &Partition, args: &VerifyArgs) -> Value {
    let certified: Vec<Value> = p
        .certified
        .iter()
        .map(|(id, c)| {
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
        })
        .collect();
    let suspect: Vec<Value> = p
        .suspect
        .iter()
        .map(|s| {
            let reasons: Vec<Value> =
                s.reasons.iter().map(|r| json!({"code": r.code(), "detail": r.detail()})).collect();
            match &s.item {
                SuspectItem::Message { id, record_index } => json!({
                    "record_index": record_index, "id": hex32(&id.digest), "author": id.author.as_str(), "reasons": reasons,
                }),
                SuspectItem::Undecodable { record_index } => json!({
                    "record_index": record_index, "id": null, "author": null, "reasons": reasons,
                }),
            }
        })
        .collect();
    let missing: Vec<Value> = p
        .missing
        .iter()
        .map(|m| {
            json!({
                "id": hex32(&m.id.digest),
                "author": m.id.author.as_str(),
                "certified_citers": m.certified_citers.iter().map(|c| json!({"id": hex32(&c.digest), "author": c.author.as_str()})).collect::<Vec<_>>(),
                "receipted_by": m.receipted_by.iter().map(|r| r.as_str()).collect::<Vec<_>>(),
                "sealed_in_epoch": m.sealed_in,
            })
        })
        .collect();
    let receipts: Vec<Value> = p
        .receipt_problems
        .iter()
        .map(|r| json!({
            "record_index": r.record_index,
            "message": r.message.as_ref().map(|m| json!({"id": hex32(&m.digest), "author": m.author.as_str()})),
            "fault": receipt_fault(&r.fault),
        }))
        .collect();
    let epochs: Vec<Value> = p
        .epochs
        .iter()
        .map(|e| {
            let h = e.header.as_ref();
            json!({
                "record_index": e.record_index,
                "number": h.map(|h| h.number),
                "start": h.map(|h| h.start),
                "size": h.map(|h| h.size),
                "leaves": e.leaves,
                "log_root": h.map(|h| hex32(&h.log_root)),
                "prev": h.map(|h| hex32(&h.prev)),
                "intact": e.intact(),
                "faults": e.faults.iter().map(epoch_fault).collect::<Vec<_>>(),
            })
        })
        .collect();
    let checkpoints: Vec<Value> = p
        .checkpoints
        .iter()
        .map(|c| {
            json!({
                "record_index": c.record_index,
                "origin": c.checkpoint.as_ref().map(|c| c.origin.clone()),
                "size": c.checkpoint.as_ref().map(|c| c.size),
                "root": c.checkpoint.as_ref().map(|c| hex32(&c.root)),
                "cosigned_by": c.cosigned_by,
                "valid": c.faults.is_empty(),
                "faults": c.faults.iter().map(checkpoint_fault).collect::<Vec<_>>(),
            })
        })
        .collect();
    let equivocations: Vec<Value> = p
        .equivocations
        .iter()
        .map(|e| {
            json!({
                "origin": e.first.checkpoint().origin,
                "size": e.first.checkpoint().size,
                "roots": [hex32(&e.first.checkpoint().root), hex32(&e.second.checkpoint().root)],
                "notes": [e.first.to_text(), e.second.to_text()],
            })
        })
        .collect();
    let payloads: Vec<Value> = p
        .payloads
        .iter()
        .map(|f| {
            json!({
                "message": hex32(&f.message.digest),
                "author": f.message.author.as_str(),
                "commitment": hex32(&f.digest),
                "status": if f.corrupted { "corrupted" } else { match f.status {
                    PayloadStatus::Available => "available",
                    PayloadStatus::Shredded => "shredded",
                    PayloadStatus::Absent => "absent",
                }},
            })
        })
        .collect();
    let stored = p
        .certified
        .values()
        .filter(|c| matches!(c.envelope.envelope().payload, Payload::Stored { .. }))
        .count();
    let mut out = json!({
        "record": args.dir.display().to_string(),
        "clean": p.is_clean(),
        "counts": {
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
            "shredded_payloads": p.payloads.iter().filter(|f| f.status == PayloadStatus::Shredded).count(),
        },
        "suspect": suspect,
        "missing": missing,
        "receipt_problems": receipts,
        "epochs": epochs,
        "checkpoints": checkpoints,
        "equivocations": equivocations,
        "held_checkpoints": p.held.iter().map(|h| json!({"index": h.index, "fault": h.fault.detail()})).collect::<Vec<Value>>(),
        "payloads": payloads,
    });
    if !args.brief {
        out["certified"] = Value::Array(certified);
    }
    out
}
