//! `audita proof inclusion|consistency`: RFC 9162 proofs over an on-disk record
//! for third parties, with the checkpoint each is against, in standard text forms
//! that need only SHA-256 and base64 to check (and Ed25519 for the signatures).
//!
//! Design constraints (output formats):
//! - `audita proof inclusion RECORD_DIR MESSAGE_ID` prints a c2sp.org/tlog-proof
//!   (`.tlog-proof`) against the record's latest checkpoint:
//!   ```text
//!   c2sp.org/tlog-proof@v1
//!   extra <base64 of the leaf: the entry whose RFC 6962 hash SHA-256(0x00 || leaf) is proven>
//!   index <leaf index, decimal>
//!   <base64 hash>            one per line, from the leaf's sibling up to the root's child
//!   <empty line>
//!   <checkpoint note, verbatim, with its keeper cosignatures>
//!   ```
//!   `MESSAGE_ID` is `author:hex` (as `audita verify` prints ids) or the 64-digit
//!   hex digest alone. The leaf is the message id's leaf bytes (`author` length,
//!   `author`, digest; `MessageId::leaf_bytes`).
//! - `audita proof consistency RECORD_DIR OLD_SIZE [NEW_SIZE]` prints exactly a
//!   c2sp.org/tlog-witness `add-checkpoint` request body (it can be POSTed to a
//!   witness as is):
//!   ```text
//!   old <OLD_SIZE>
//!   <base64 hash>            the RFC 9162 consistency proof, one per line
//!   <empty line>
//!   <checkpoint note of NEW_SIZE (default: the latest), verbatim>
//!   ```
//!   The old tree's root is the one the verifier already holds (a checkpoint of
//!   `OLD_SIZE`; `--json` includes the record's).
//! - `--json` prints one object instead: `schema` `audita.proof.inclusion/v1`
//!   (`message_id`, `author`, `digest` hex, `index`, `tree_size`, `leaf`,
//!   `leaf_hash`, `root`, `proof` — base64 — and `checkpoint`, the note text) or
//!   `audita.proof.consistency/v1` (`old_size`, `new_size`, `old_root`,
//!   `new_root`, `proof`, `old_checkpoint` — `null` for size 0 — and
//!   `new_checkpoint`).
//! - Exit 0 with a proof that was checked against the checkpoint's root before it
//!   is printed; 1 if the record's leaves do not reproduce that root (a damaged
//!   record: no proof is printed); 2 with one line on stderr for a message id not
//!   in the log, `OLD_SIZE > NEW_SIZE`, a size that no checkpoint of the record
//!   has (0, the empty tree, always has one), or an unreadable record.
//! - Proofs come from `evidence::merkle` (`InclusionProof::generate`,
//!   `ConsistencyProof::generate`); nothing here hashes a tree itself.

use std::collections::BTreeMap;
use std::path::PathBuf;

use audita_evidence::merkle::{empty_root, leaf_hash};
use audita_evidence::{ConsistencyProof, Hash, InclusionProof, MessageId, SignedCheckpoint};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::json;

use crate::inputs::LimitArgs;

/// Arguments of `audita proof`.
#[derive(clap::Args, Debug)]
pub struct ProofArgs {
    #[command(subcommand)]
    pub kind: ProofKind,
}

/// Which proof.
#[derive(clap::Subcommand, Debug)]
pub enum ProofKind {
    /// Inclusion proof of one message in the record's latest checkpoint
    /// (c2sp.org/tlog-proof text, or --json).
    Inclusion {
        /// Record directory.
        dir: PathBuf,
        /// `author:hex` or the hex digest of the message id.
        message_id: String,
        /// Print JSON instead of the text form.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Consistency proof between two checkpointed sizes (c2sp.org/tlog-witness
    /// add-checkpoint body, or --json).
    Consistency {
        /// Record directory.
        dir: PathBuf,
        /// Size of the older tree (a checkpoint's size, or 0).
        old_size: u64,
        /// Size of the newer tree (default: the latest checkpoint's).
        new_size: Option<u64>,
        /// Print JSON instead of the text form.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        limits: LimitArgs,
    },
}

/// Why no proof was printed: `Input` exits 2, `Record` exits 1.
enum Failure {
    Input(String),
    Record(String),
}

/// Runs the subcommand; returns the exit code.
pub fn run(args: &ProofArgs) -> i32 {
    let result = match &args.kind {
        ProofKind::Inclusion {
            dir,
            message_id,
            json,
            limits,
        } => inclusion(dir, message_id, *json, limits),
        ProofKind::Consistency {
            dir,
            old_size,
            new_size,
            json,
            limits,
        } => consistency(dir, *old_size, *new_size, *json, limits),
    };
    match result {
        Ok(out) => {
            print!("{out}");
            0
        }
        Err(Failure::Input(line)) => {
            eprintln!("audita proof: {line}");
            2
        }
        Err(Failure::Record(line)) => {
            eprintln!("audita proof: {line}");
            1
        }
    }
}

/// The record's leaves, their hashes and its checkpoints by tree size (the last
/// note of each size).
struct Log {
    leaves: Vec<Vec<u8>>,
    hashes: Vec<Hash>,
    checkpoints: BTreeMap<u64, (Vec<u8>, Hash)>,
}

fn load(dir: &std::path::Path, limits: &LimitArgs) -> Result<Log, Failure> {
    let rd = audita_record::read_dir(dir, &limits.record())
        .map_err(|e| Failure::Input(e.to_string()))?;
    let leaves: Vec<Vec<u8>> = rd
        .record
        .epochs
        .into_iter()
        .flat_map(|e| e.leaves)
        .collect();
    let hashes = leaves.iter().map(|l| leaf_hash(l)).collect();
    let mut checkpoints = BTreeMap::new();
    for note in rd.record.checkpoints {
        if let Ok(cp) = SignedCheckpoint::parse(&note) {
            let (size, root) = (cp.checkpoint().size, cp.checkpoint().root);
            checkpoints.insert(size, (note, root));
        }
    }
    Ok(Log {
        leaves,
        hashes,
        checkpoints,
    })
}

fn b64(h: &[u8]) -> String {
    STANDARD.encode(h)
}

fn parse_id(text: &str) -> Result<(Option<&str>, Hash), Failure> {
    let (author, hex_text) = match text.rsplit_once(':') {
        Some((a, h)) => (Some(a), h),
        None => (None, text),
    };
    let bad = || {
        Failure::Input(format!(
            "message id {text:?} is not author:hex or a 64-digit hex digest"
        ))
    };
    let bytes = hex::decode(hex_text).map_err(|_| bad())?;
    let digest: Hash = bytes.try_into().map_err(|_| bad())?;
    Ok((author, digest))
}

fn inclusion(
    dir: &std::path::Path,
    id_text: &str,
    as_json: bool,
    limits: &LimitArgs,
) -> Result<String, Failure> {
    let (author, digest) = parse_id(id_text)?;
    let log = load(dir, limits)?;
    let Some((&size, (note, root))) = log.checkpoints.last_key_value() else {
        return Err(Failure::Input(format!(
            "{} has no checkpoint to prove against",
            dir.display()
        )));
    };
    let found = log.leaves.iter().enumerate().find_map(|(i, leaf)| {
        let id = MessageId::from_leaf_bytes(leaf).ok()?;
        (id.digest == digest && author.is_none_or(|a| id.author.as_str() == a))
            .then_some((i as u64, id))
    });
    let Some((index, id)) = found else {
        return Err(Failure::Input(format!(
            "message {id_text} is not in the log of {}",
            dir.display()
        )));
    };
    if index >= size || size as usize > log.hashes.len() {
        return Err(Failure::Input(format!(
            "message {id_text} (leaf {index}) is not covered by the latest checkpoint (size {size})"
        )));
    }
    let proof = InclusionProof::generate(&log.hashes[..size as usize], index)
        .map_err(|e| Failure::Record(e.to_string()))?;
    let leaf = &log.leaves[index as usize];
    proof
        .verify(&log.hashes[index as usize], root)
        .map_err(|e| {
            Failure::Record(format!(
                "the record's leaves do not reproduce its checkpoint of size {size}: {e}"
            ))
        })?;
    let note_text = String::from_utf8_lossy(note).into_owned();
    if as_json {
        let v = json!({
            "schema": "audita.proof.inclusion/v1",
            "message_id": id.to_string(),
            "author": id.author.as_str(),
            "digest": hex::encode(id.digest),
            "index": index,
            "tree_size": size,
            "leaf": b64(leaf),
            "leaf_hash": b64(&log.hashes[index as usize]),
            "root": b64(root),
            "proof": proof.path.iter().map(|h| b64(h)).collect::<Vec<_>>(),
            "checkpoint": note_text,
        });
        return Ok(format!(
            "{}\n",
            serde_json::to_string_pretty(&v).unwrap_or_default()
        ));
    }
    let mut out = format!(
        "c2sp.org/tlog-proof@v1\nextra {}\nindex {index}\n",
        b64(leaf)
    );
    for h in &proof.path {
        out.push_str(&b64(h));
        out.push('\n');
    }
    out.push('\n');
    out.push_str(&note_text);
    Ok(out)
}

fn consistency(
    dir: &std::path::Path,
    old: u64,
    new: Option<u64>,
    as_json: bool,
    limits: &LimitArgs,
) -> Result<String, Failure> {
    let log = load(dir, limits)?;
    let Some(&latest) = log.checkpoints.keys().next_back() else {
        return Err(Failure::Input(format!(
            "{} has no checkpoint to prove against",
            dir.display()
        )));
    };
    let new = new.unwrap_or(latest);
    if old > new {
        return Err(Failure::Input(format!(
            "OLD_SIZE {old} is larger than NEW_SIZE {new}"
        )));
    }
    let checkpoint_of = |size: u64| -> Result<Option<&(Vec<u8>, Hash)>, Failure> {
        if size == 0 {
            return Ok(None);
        }
        log.checkpoints.get(&size).map(Some).ok_or_else(|| {
            Failure::Input(format!(
                "no checkpoint of the record has size {size} (sizes: {})",
                sizes(&log.checkpoints)
            ))
        })
    };
    let old_cp = checkpoint_of(old)?;
    let Some((new_note, new_root)) = checkpoint_of(new)? else {
        return Err(Failure::Input(
            "NEW_SIZE 0: the empty tree has no checkpoint to prove against".into(),
        ));
    };
    if new as usize > log.hashes.len() {
        return Err(Failure::Record(format!(
            "the record's epochs hold {} leaves, fewer than its checkpoint of size {new}",
            log.hashes.len()
        )));
    }
    let old_root = old_cp.map_or_else(empty_root, |(_, r)| *r);
    let proof = ConsistencyProof::generate(&log.hashes[..new as usize], old)
        .map_err(|e| Failure::Record(e.to_string()))?;
    proof.verify(&old_root, new_root).map_err(|e| {
        Failure::Record(format!(
            "the record's leaves do not reproduce its checkpoints of sizes {old} and {new}: {e}"
        ))
    })?;
    let new_text = String::from_utf8_lossy(new_note).into_owned();
    if as_json {
        let v = json!({
            "schema": "audita.proof.consistency/v1",
            "old_size": old,
            "new_size": new,
            "old_root": b64(&old_root),
            "new_root": b64(new_root),
            "proof": proof.path.iter().map(|h| b64(h)).collect::<Vec<_>>(),
            "old_checkpoint": old_cp.map(|(n, _)| String::from_utf8_lossy(n).into_owned()),
            "new_checkpoint": new_text,
        });
        return Ok(format!(
            "{}\n",
            serde_json::to_string_pretty(&v).unwrap_or_default()
        ));
    }
    let mut out = format!("old {old}\n");
    for h in &proof.path {
        out.push_str(&b64(h));
        out.push('\n');
    }
    out.push('\n');
    out.push_str(&new_text);
    Ok(out)
}

fn sizes(cps: &BTreeMap<u64, (Vec<u8>, Hash)>) -> String {
    let all: Vec<String> = cps.keys().map(u64::to_string).collect();
    if all.len() > 8 {
        format!(
            "{} … {} ({} checkpoints)",
            all[..4].join(", "),
            all[all.len() - 2..].join(", "),
            all.len()
        )
    } else {
        all.join(", ")
    }
}
