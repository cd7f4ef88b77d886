//! The invariants an edit of the record must keep (issue 10, SPEC §2–4), shared by
//! the adversarial suites: `load-tests/tests/adversarial.rs` (a fleet sealed in
//! streaming order, every facility family) and `cli/tests/it/adversarial_demo.rs` (the
//! record `audita demo` writes).
//!
//! Design constraints:
//! - [`check_edit`] compares an incident's verdict on the clean record with its
//!   verdict after an edit and returns every broken invariant as a line of text
//!   (empty: all held): containment of every clean interval, a lowered `ρ_lo` naming
//!   items, no compliant principal culpable, no involved principal silently
//!   exonerated, and no principal moved into the verdict unless an item of the edit
//!   is its own or its finding names one.
//! - [`cut`] deletes envelopes and/or receipts by message id; [`ids_in`] lists every
//!   message id a verdict mentions.

use std::collections::BTreeSet;

use audita_evidence::{MessageId, Receipt, Record, SignedEnvelope};
use audita_verdict::{parse_id, FindingStatus, Standard, Verdict};

/// Every message id the verdict JSON mentions (what the verdict reads).
pub fn ids_in(v: &Verdict) -> BTreeSet<MessageId> {
    fn walk(v: &serde_json::Value, out: &mut BTreeSet<MessageId>) {
        match v {
            serde_json::Value::String(s) => {
                if let Ok(id) = parse_id(s) {
                    out.insert(id);
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            serde_json::Value::Object(o) => o.values().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = BTreeSet::new();
    if let Ok(json) = serde_json::from_str(&v.to_json()) {
        walk(&json, &mut out);
    }
    out
}

/// Whether `p` is in breach under the verdict's standard.
pub fn breach_under(v: &Verdict, p: &str) -> bool {
    v.finding(p).is_some_and(|f| match v.standard {
        Standard::Specification => f.breach.specification,
        Standard::ReasonableAgent => f.breach.reasonable_agent,
    })
}

/// The invariants `edited` (the verdict after an edit whose items are authored by
/// `edit_authors`) breaks against `clean`, one line each.
pub fn check_edit(
    clean: &Verdict,
    edited: &Verdict,
    edit_authors: &BTreeSet<String>,
) -> Vec<String> {
    let mut bad = Vec::new();
    for (p, c) in &clean.principals {
        let Some(f) = edited.finding(p) else {
            bad.push(format!("{p} lost its finding"));
            continue;
        };
        if !(f.rho_lo <= c.rho_lo && c.rho_hi <= f.rho_hi) {
            bad.push(format!(
                "{p}: [{}, {}] {:?} does not contain the clean [{}, {}] {:?}",
                f.rho_lo, f.rho_hi, f.status, c.rho_lo, c.rho_hi, c.status
            ));
        }
        if f.rho_lo < c.rho_lo && f.items.is_empty() {
            bad.push(format!("{p}: rho_lo lowered without naming items"));
        }
        if !breach_under(clean, p) && f.culpable {
            bad.push(format!("{p}: compliant but culpable"));
        }
        if c.rho_hi > 0.0 && f.status == FindingStatus::Exonerated {
            bad.push(format!("{p}: silently exonerated"));
        }
    }
    for (p, f) in &edited.principals {
        if clean.principals.contains_key(p) || edit_authors.contains(p) {
            continue;
        }
        if !f.items.iter().any(|i| edit_authors.contains(&i.author)) {
            bad.push(format!(
                "{p} moved into the verdict without naming the edit: {:?} [{}, {}]",
                f.status, f.rho_lo, f.rho_hi
            ));
        }
    }
    bad
}

/// `record` without the envelopes (`envelope`) and/or receipts (`receipt`) of `ids`.
pub fn cut(record: &Record, ids: &[MessageId], envelope: bool, receipt: bool) -> Record {
    let mut r = record.clone();
    if envelope {
        r.envelopes
            .retain(|e| SignedEnvelope::decode(e.clone()).map_or(true, |s| !ids.contains(s.id())));
    }
    if receipt {
        r.receipts
            .retain(|e| Receipt::decode(e.clone()).map_or(true, |x| !ids.contains(x.message())));
    }
    r
}
