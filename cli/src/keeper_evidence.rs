//! `audita verify DIR --keeper-evidence PATH`: reads the conflicting checkpoints
//! keepers refused (`audita.keeper-evidence/v1`, `audita_keeper::evidence`), which
//! `audita_keeper::judge` then judges against the record.
//!
//! Design constraints: a PATH is a file holding one record or a JSON array of them
//! (what `audita keeper evidence` prints), or a keeper's state directory (its
//! `evidence/` files); every file is read with the `--max-input-bytes` bound, and an
//! unreadable or malformed input is an error (exit 2), never skipped.

use std::path::PathBuf;

use audita_keeper::ConflictRecord;
use serde_json::Value;

use crate::inputs::read_input;

/// Reads every record named by `paths` (files or keeper state directories).
pub fn read(paths: &[PathBuf], limit: u64) -> Result<Vec<(String, ConflictRecord)>, String> {
    let mut out = Vec::new();
    for path in paths {
        if path.is_dir() {
            let records = audita_keeper::evidence(path).map_err(|e| e.to_string())?;
            for r in records {
                out.push((format!("{}#{}", path.display(), r.id()), r));
            }
            continue;
        }
        let bytes = read_input(path, limit)?;
        let bad = |e: serde_json::Error| {
            format!(
                "{}: not audita.keeper-evidence/v1 JSON: {e}",
                path.display()
            )
        };
        let value: Value = serde_json::from_slice(&bytes).map_err(bad)?;
        let list = match value {
            Value::Array(items) => items,
            one => vec![one],
        };
        for (i, item) in list.into_iter().enumerate() {
            let r: ConflictRecord = serde_json::from_value(item).map_err(bad)?;
            out.push((format!("{}[{i}]", path.display()), r));
        }
    }
    Ok(out)
}
