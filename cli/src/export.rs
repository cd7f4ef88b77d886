//! `audita export dsse RECORD_DIR OUT_DIR`: every envelope and receipt of a record
//! as a standard DSSE JSON envelope, for off-the-shelf DSSE verifiers.
//!
//! Design constraints:
//! - Every signature of the record is already an Ed25519 signature over
//!   `PAE(payloadType, body)` (`audita_evidence::dsse`), so the export re-encodes
//!   nothing: `payload` is the stored body, `sig` the stored signature
//!   ([`audita_evidence::dsse::DsseJson`]). `keyid` is the signer's C2SP verifier
//!   key (`name+hash+base64(0x01 || key)`) for the key the record registers for
//!   that signer at the message's time (rotated keys: the one whose window covers
//!   it); empty when it registers none (such items are counted, not skipped).
//! - Files: `OUT_DIR/envelope-<sha256>.dsse.json` and
//!   `OUT_DIR/receipt-<sha256>.dsse.json` (SHA-256 of the stored bytes: an
//!   envelope's file name is its message id digest), `OUT_DIR/keys.json` (every
//!   keyid used, as a securesystemslib key dictionary: `keytype`/`scheme`
//!   `ed25519`, `keyval.public` hex) and `OUT_DIR/index.json` (one entry per file:
//!   `file`, `kind`, `signer`, `message` id `author:hex64`, `keyid`). Existing files
//!   of those names are overwritten.
//! - Undecodable stored items are not exported (they have no signer to name) and
//!   are counted; a summary line of JSON goes to stdout. Exit 0, or 2 with one line
//!   when the record cannot be read or the output cannot be written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use audita_evidence::checkpoint::ED25519_NOTE_TYPE;
use audita_evidence::dsse::{DsseJson, ENVELOPE_TYPE, RECEIPT_TYPE};
use audita_evidence::trust::vkey;
use audita_evidence::{sha256, KeyRegistry, Receipt, SignedEnvelope};
use serde_json::{json, Value};

use crate::inputs::LimitArgs;

/// Arguments of `audita export`.
#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    /// What to export.
    #[command(subcommand)]
    pub format: ExportFormat,
}

/// Export formats.
#[derive(clap::Subcommand, Debug)]
pub enum ExportFormat {
    /// Every envelope and receipt as a DSSE JSON envelope (`NAME.dsse.json`), with
    /// the signers' keys (`keys.json`) and an index.
    Dsse {
        /// Record directory.
        dir: PathBuf,
        /// Output directory (created).
        out: PathBuf,
        /// Size limits of the record.
        #[command(flatten)]
        limits: LimitArgs,
    },
}

/// Runs the subcommand; returns the exit code.
pub fn run(args: &ExportArgs) -> i32 {
    let ExportFormat::Dsse { dir, out, limits } = &args.format;
    match dsse(dir, out, limits) {
        Ok(summary) => {
            println!("{summary}");
            0
        }
        Err(line) => {
            eprintln!("audita export: {line}");
            2
        }
    }
}

fn keyid(keys: &KeyRegistry, name: &str, t: u64, used: &mut BTreeMap<String, String>) -> String {
    match keys.principal_at(name, t) {
        Some(k) => {
            let id = vkey(name, ED25519_NOTE_TYPE, k);
            used.entry(id.clone())
                .or_insert_with(|| hex::encode(k.as_bytes()));
            id
        }
        None => String::new(),
    }
}

fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<(), String> {
    let text = serde_json::to_vec_pretty(value).map_err(|e| e.to_string())?;
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

fn dsse(dir: &Path, out: &Path, limits: &LimitArgs) -> Result<Value, String> {
    let rd = audita_record::read_dir(dir, &limits.record()).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let mut used: BTreeMap<String, String> = BTreeMap::new();
    let mut index = Vec::new();
    let (mut envelopes, mut receipts, mut undecodable, mut unkeyed) = (0u64, 0u64, 0u64, 0u64);
    for bytes in &rd.record.envelopes {
        let Ok(env) = SignedEnvelope::decode(bytes.clone()) else {
            undecodable += 1;
            continue;
        };
        let e = env.envelope();
        let id = keyid(&rd.keys, e.author.as_str(), e.timestamp, &mut used);
        unkeyed += u64::from(id.is_empty());
        let file = format!("envelope-{}.dsse.json", hex::encode(env.id().digest));
        write_json(
            &out.join(&file),
            &DsseJson::new(ENVELOPE_TYPE, env.body(), &env.signature(), id.clone()),
        )?;
        index.push(json!({
            "file": file, "kind": "envelope", "signer": e.author.as_str(),
            "message": env.id().to_string(), "keyid": id,
        }));
        envelopes += 1;
    }
    for bytes in &rd.record.receipts {
        let Ok(r) = Receipt::decode(bytes.clone()) else {
            undecodable += 1;
            continue;
        };
        let id = keyid(&rd.keys, r.recipient().as_str(), r.timestamp(), &mut used);
        unkeyed += u64::from(id.is_empty());
        let file = format!("receipt-{}.dsse.json", hex::encode(sha256(r.as_bytes())));
        write_json(
            &out.join(&file),
            &DsseJson::new(RECEIPT_TYPE, r.body(), &r.signature(), id.clone()),
        )?;
        index.push(json!({
            "file": file, "kind": "receipt", "signer": r.recipient().as_str(),
            "message": r.message().to_string(), "keyid": id,
        }));
        receipts += 1;
    }
    let keys: BTreeMap<&String, Value> = used
        .iter()
        .map(|(id, public)| {
            (
                id,
                json!({"keytype": "ed25519", "scheme": "ed25519", "keyval": {"public": public}}),
            )
        })
        .collect();
    write_json(&out.join("keys.json"), &keys)?;
    write_json(&out.join("index.json"), &index)?;
    Ok(json!({
        "schema": "audita.export-dsse/v1",
        "record": dir.display().to_string(),
        "out": out.display().to_string(),
        "envelopes": envelopes,
        "receipts": receipts,
        "keys": used.len(),
        "undecodable": undecodable,
        "unkeyed": unkeyed,
    }))
}
