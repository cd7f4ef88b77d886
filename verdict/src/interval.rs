//! Intervals over completions: `[ρ_lo, ρ_hi]` per principal as the min/max of ρ over
//! every admissible reading of the slice.
//!
//! Design constraints:
//! - The enumerated bits are the completion items that touch the slice (anchors and
//!   consumed inputs of closure messages) and the non-witness hypothesis edges;
//!   untouched items cannot change any model and are not enumerated. More than
//!   [`MAX_BITS`] bits is a [`VerdictError::TooManyCompletions`] (abstention, never a
//!   guess).
//! - Readings are visited in increasing bit-mask order; the first reading attaining
//!   each principal's minimum is kept (deterministic).
//! - With no missing item and no hypothesis there is exactly one reading, so a clean
//!   record gives point intervals.

use std::collections::{BTreeMap, BTreeSet};

use audita_causal::{attribute, Attribution};
use audita_evidence::MessageId;

use crate::reading::{Built, Reading};
use crate::slice::Slice;
use crate::VerdictError;

/// Largest number of enumerated completion bits (items + hypotheses).
pub const MAX_BITS: usize = 16;

/// The result of the enumeration.
#[derive(Debug, Clone)]
pub struct Intervals {
    /// ρ_lo per principal.
    pub lo: BTreeMap<String, f64>,
    /// ρ_hi per principal.
    pub hi: BTreeMap<String, f64>,
    /// Readings enumerated.
    pub total: u64,
    /// Admissible readings.
    pub admissible: u64,
    /// All touching items present, hypotheses off (if admissible).
    pub canonical: Option<(Reading, Built, Attribution)>,
    /// All touching items present, hypotheses on (if admissible): the widest reading.
    pub widest: Option<(Reading, Built, Attribution)>,
}

/// Enumerates the readings of `slice`.
pub fn intervals(
    slice: &Slice,
    names: &BTreeMap<MessageId, String>,
    principals: &BTreeSet<String>,
) -> Result<Intervals, VerdictError> {
    let items: Vec<MessageId> = slice.touching_items().map(|i| i.id.clone()).collect();
    let hyps: Vec<(MessageId, MessageId)> = slice
        .hypotheses()
        .into_iter()
        .map(|e| (e.child.clone(), e.parent.clone()))
        .collect();
    let bits = items.len() + hyps.len();
    if bits > MAX_BITS {
        return Err(VerdictError::TooManyCompletions {
            bits,
            max: MAX_BITS,
        });
    }
    let mut out = Intervals {
        lo: BTreeMap::new(),
        hi: BTreeMap::new(),
        total: 0,
        admissible: 0,
        canonical: None,
        widest: None,
    };
    let all_items = (1u64 << items.len()) - 1;
    let all = (1u64 << bits) - 1;
    for mask in 0..=all {
        let reading = Reading {
            present: items
                .iter()
                .enumerate()
                .filter(|(i, _)| mask >> i & 1 == 1)
                .map(|(_, id)| id.clone())
                .collect(),
            hypotheses: hyps
                .iter()
                .enumerate()
                .filter(|(i, _)| mask >> (items.len() + i) & 1 == 1)
                .map(|(_, e)| e.clone())
                .collect(),
            reverted: BTreeSet::new(),
        };
        out.total += 1;
        let Some(built) = slice.model(&reading, names, true)? else {
            continue;
        };
        out.admissible += 1;
        let att = attribute(&built.model).map_err(|e| VerdictError::Engine(e.to_string()))?;
        for p in principals {
            let r = att.responsibility_of(p);
            let lo = out.lo.entry(p.clone()).or_insert(r);
            if r < *lo {
                *lo = r;
            }
            let hi = out.hi.entry(p.clone()).or_insert(r);
            if r > *hi {
                *hi = r;
            }
        }
        if mask == all_items {
            out.canonical = Some((reading.clone(), built.clone(), att.clone()));
        }
        if mask == all {
            out.widest = Some((reading, built, att));
        }
    }
    Ok(out)
}
