//! Intervals over completions: `[ρ_lo, ρ_hi]` per principal as the min/max of ρ over
//! every admissible reading of the slice.
//!
//! Design constraints:
//! - A reading chooses, for every completion item that touches the slice, whether it is
//!   absent or present and, when present, its [`Production`]: `external`, `origin`,
//!   `any(S)` for every non-empty subset `S` of its possible inputs, `all(S)` for every
//!   subset of two or more (a singleton `all` is the singleton `any`); and an on/off
//!   choice for every non-witness hypothesis edge. Untouched items cannot change any
//!   model and are not enumerated. The item's true production is among its choices,
//!   so the reading of the record before a deletion is among the readings after it:
//!   deletion only widens intervals.
//! - When an anchor is itself a completion item its target is unknown, so every
//!   absence not already conjoined to `Y` may be (its target may be the item's): one
//!   more on/off choice per such absence.
//! - The number of readings is the product of the items' choice counts times
//!   `2^(hypotheses + open absences)`; when its base-2 logarithm (rounded up) exceeds [`MAX_BITS`] the
//!   verdict is a [`VerdictError::TooManyCompletions`] (abstention, never a guess).
//! - Readings are visited in a fixed mixed-radix order (items in id order, choices in
//!   the order above, then hypotheses, open and uncertain absences); the canonical
//!   reading (every touching item present as `origin`, hypotheses off, an uncertain
//!   absence as the items' presence implies) and the widest one (hypotheses on) are
//!   kept.
//! - With no missing item and no hypothesis there is exactly one reading, so a clean
//!   record gives point intervals.

use std::collections::{BTreeMap, BTreeSet};

use audita_causal::{attribute, Attribution};
use audita_evidence::MessageId;
use sha2::{Digest, Sha256};

use crate::reading::{Built, Production, Reading};
use crate::slice::Slice;
use crate::VerdictError;

pub use crate::slice::{MAX_BITS, MAX_TOUCHING};

/// The choices of one touching item, `None` = absent, in enumeration order.
fn choices(inputs: &[MessageId]) -> Vec<Option<Production>> {
    let mut out = vec![None, Some(Production::External), Some(Production::Origin)];
    let k = inputs.len();
    if k >= usize::BITS as usize - 1 {
        return out;
    }
    let subset = |mask: usize| -> Vec<MessageId> {
        (0..k)
            .filter(|i| mask >> i & 1 == 1)
            .map(|i| inputs[i].clone())
            .collect()
    };
    for mask in 1..1usize << k {
        out.push(Some(Production::Any(subset(mask))));
    }
    for mask in 1..1usize << k {
        if mask.count_ones() >= 2 {
            out.push(Some(Production::All(subset(mask))));
        }
    }
    out
}

/// Base-2 logarithm of the number of choices of an item with `k` possible inputs:
/// absent, external, origin, `2^k - 1` any-subsets and `2^k - 1 - k` all-subsets.
fn choice_bits(k: usize) -> f64 {
    if k >= 60 {
        return (k + 1) as f64;
    }
    let any = (1u64 << k) - 1;
    ((3 + any + (any - k as u64)) as f64).log2()
}

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
    let items: Vec<&crate::slice::Item> = slice.touching_items().collect();
    let hyps: Vec<(MessageId, MessageId)> = slice
        .hypotheses()
        .into_iter()
        .map(|e| (e.child.clone(), e.parent.clone()))
        .collect();
    // A present anchor item whose target nobody declared: every absence not already
    // in `Y` may have been conjoined to it (its target may be the item's).
    let open: Vec<usize> = if slice.scope.unknown_anchor && items.iter().any(|i| i.anchor) {
        (0..slice.absences.len())
            .filter(|i| !slice.absences[*i].in_outcome)
            .collect()
    } else {
        Vec::new()
    };
    // An absence the record leaves open (a completion item may have been its trigger
    // or its holder's halt) holds in some readings and not in others. Flag 0 is the
    // reading with the items present: the absence holds when an item may be its
    // trigger (no certified one), not when a certified trigger is only contested by
    // the holder's items.
    let uncertain: Vec<usize> = (0..slice.absences.len())
        .filter(|i| !slice.absences[*i].certain)
        .collect();
    let holds_at_zero = |i: usize| !slice.window.contains_key(&slice.absences[i].trigger);
    let flags = hyps.len() + open.len() + uncertain.len();
    // log2 of the number of readings, rounded up (a small tolerance absorbs the
    // rounding of exact powers of two).
    let log2: f64 = items
        .iter()
        .map(|it| choice_bits(it.inputs.len()))
        .sum::<f64>()
        + flags as f64;
    let bits = (log2 - 1e-9).ceil().max(0.0) as usize;
    if bits > MAX_BITS {
        return Err(VerdictError::TooManyCompletions {
            bits,
            max: MAX_BITS,
        });
    }
    let options: Vec<Vec<Option<Production>>> =
        items.iter().map(|it| choices(&it.inputs)).collect();
    let mut out = Intervals {
        lo: BTreeMap::new(),
        hi: BTreeMap::new(),
        total: 0,
        admissible: 0,
        canonical: None,
        widest: None,
    };
    let all_hyps = (1u64 << hyps.len()) - 1;
    let all_flags = (1u64 << flags) - 1;
    let mut graded: BTreeMap<[u8; 32], Attribution> = BTreeMap::new();
    let mut digits = vec![0usize; items.len()];
    // `origin` is choice 2 of every item.
    let canonical_digits = vec![2usize; items.len()];
    loop {
        for hmask in 0..=all_flags {
            let mut reading = Reading {
                hypotheses: hyps
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| hmask >> i & 1 == 1)
                    .map(|(_, e)| e.clone())
                    .collect(),
                outcome_absences: open
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| hmask >> (hyps.len() + i) & 1 == 1)
                    .map(|(_, a)| *a)
                    .collect(),
                absences_off: uncertain
                    .iter()
                    .enumerate()
                    .filter(|(i, a)| {
                        let flipped = hmask >> (hyps.len() + open.len() + i) & 1 == 1;
                        flipped == holds_at_zero(**a)
                    })
                    .map(|(_, a)| *a)
                    .collect(),
                ..Reading::default()
            };
            for (it, (d, opts)) in items.iter().zip(digits.iter().zip(&options)) {
                if let Some(p) = &opts[*d] {
                    reading.present.insert(it.id.clone());
                    if *p != Production::Origin {
                        reading.production.insert(it.id.clone(), p.clone());
                    }
                }
            }
            out.total += 1;
            let Some(built) = slice.model(&reading, names, true)? else {
                continue;
            };
            out.admissible += 1;
            // Many readings gate to the same model (a subset choice that adds only
            // inputs the gate never reaches, say): grade each distinct model once.
            let key: [u8; 32] = Sha256::digest(format!("{:?}", built.model).as_bytes()).into();
            let att = match graded.get(&key) {
                Some(a) => a.clone(),
                None => {
                    let a =
                        attribute(&built.model).map_err(|e| VerdictError::Engine(e.to_string()))?;
                    graded.insert(key, a.clone());
                    a
                }
            };
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
            if digits == canonical_digits && hmask == 0 {
                out.canonical = Some((reading.clone(), built.clone(), att.clone()));
            }
            if digits == canonical_digits && hmask == all_hyps {
                out.widest = Some((reading, built, att));
            }
        }
        // Next item digits (mixed radix).
        let mut i = 0;
        loop {
            if i == digits.len() {
                return Ok(out);
            }
            digits[i] += 1;
            if digits[i] < options[i].len() {
                break;
            }
            digits[i] = 0;
            i += 1;
        }
    }
}
