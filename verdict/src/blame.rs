//! Blame-shift certificates (SPEC §4): graded, replay-checkable evidence that other
//! principals' deviations from their declared reference policies raised a compliant
//! victim's causal involvement, and the same lifting at every higher order.
//!
//! Design constraints:
//! - **Selectors.** A deviation is a certified window message of a principal matching a
//!   rule of its reference policy ([`crate::duty::Rule`]). Reverting a deviation
//!   switches it from realised to reference conduct in the canonical reading (every
//!   touching completion item present, hypotheses off): the deviation is forced absent
//!   (its consumers lose it as an input) and, when the matching rule declares a
//!   [`crate::duty::Counterpart`] that realises the outcome, that reference command is
//!   issued instead — an exogenous variable owned by the deviator joined to `Y` by `|`.
//!   Reference conduct that is a *different command* (inevitability rigging: the
//!   reference plan routes a second unit through the crossing; the realised deviation
//!   parks it) is thus found although the deviation lies on no path to `Y`.
//! - **Order 1.** `g₁(S)` = the victim's ρ on the slice model with exactly the
//!   deviations in `S` kept. The meta-outcome is *victim pivotality raised*:
//!   `g₁(S) > g₁(∅)`. It is tabulated over all subsets and written as a structural
//!   model over selector variables (owned by the deviators); the modified HP engine
//!   grades it: each minimal cause is a minimal reversion set (with its smallest
//!   witness) and `ρ_frame(q)` = the engine's responsibility of deviator `q`.
//! - **Order k.** `g_k(S)` = `ρ_frame` of the chain's last principal in the order
//!   `k−1` certificate computed with only the deviations in `S` available: the same
//!   lifting applied to the previous order's grade.
//! - **Replay-checkable.** Every set carries the victim grade re-computed with the set
//!   reverted (and its witness frozen at actual values, i.e. kept), which must not
//!   exceed the reference grade.
//! - **Inert decoys** (deviations that change no grade) are in no minimal set and get
//!   `ρ_frame = 0`; they change no other grade. A framer is culpable at an order only
//!   on breach under the registry's standard ∧ `ρ_frame > 0`; a compliant deviator
//!   (no breach) never is.
//! - At most [`MAX_DEVIATIONS`] deviations and order [`MAX_ORDER`]; beyond, an error.

use std::collections::{BTreeMap, BTreeSet};

use audita_causal::{attribute, ModelBuilder};
use audita_evidence::{MessageId, Partition, Record};
use serde::Serialize;

use crate::adverse::{id_string, Adverse};
use crate::breach::breaches;
use crate::duty::{Counterpart, DutyRegistry, Rule};
use crate::reading::{var_names, Reading};
use crate::slice::{Policy, Slice};
use crate::VerdictError;

/// Largest number of deviations tabulated.
pub const MAX_DEVIATIONS: usize = 8;
/// Highest order of the lifting.
pub const MAX_ORDER: usize = 3;

/// One deviating principal in a certificate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Framer {
    /// Grade `ρ_frame`.
    pub rho_frame: f64,
    /// Its deviations (message ids).
    pub deviations: Vec<String>,
    /// Breach under the registry's standard.
    pub breach: bool,
    /// `breach ∧ ρ_frame > 0`.
    pub culpable: bool,
}

/// A minimal reversion set with its replay check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReversionSet {
    /// Deviations reverted (message ids).
    pub reverted: Vec<String>,
    /// Deviations frozen at their realised (kept) values.
    pub witness: Vec<String>,
    /// Grade `1/(|X|+|W|)`.
    pub grade: f64,
    /// The lifted grade of the victim re-computed with the set reverted.
    pub victim_grade_after: f64,
}

/// A blame-shift certificate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BlameCertificate {
    /// The chain: victim, then the principal whose framing grade is lifted at each
    /// higher order.
    pub chain: Vec<String>,
    /// Order (chain length).
    pub order: usize,
    /// Lifted grade under realised conduct.
    pub realised: f64,
    /// Lifted grade under reference conduct (all deviations reverted).
    pub reference: f64,
    /// Every deviation (message ids).
    pub deviations: Vec<String>,
    /// Deviations whose reversion issues a declared reference counterpart realising
    /// the outcome (message ids).
    pub counterparts: Vec<String>,
    /// Minimal reversion sets.
    pub sets: Vec<ReversionSet>,
    /// Every deviating principal with its grade.
    pub framers: BTreeMap<String, Framer>,
}

/// The deviations of the slice window (sorted by id).
pub fn deviations(slice: &Slice, duties: &DutyRegistry) -> Vec<MessageId> {
    slice
        .window
        .values()
        .filter(|n| n.policy != Policy::Root)
        .filter(|n| !rules_of(duties, n).is_empty())
        .map(|n| n.id.clone())
        .collect()
}

/// The reference rules of its author that `node` matches.
fn rules_of<'a>(duties: &'a DutyRegistry, node: &crate::slice::Node) -> Vec<&'a Rule> {
    duties
        .principals
        .get(node.id.author.as_str())
        .map(|d| {
            d.reference
                .iter()
                .filter(|r| r.matches(&node.payload, &node.cites))
                .collect()
        })
        .unwrap_or_default()
}

/// The declared counterpart of a deviation that realises the outcome (the first
/// matching rule declaring one).
fn realising_counterpart<'a>(
    slice: &Slice,
    duties: &'a DutyRegistry,
    deviation: &MessageId,
) -> Option<&'a Counterpart> {
    let node = slice.window.get(deviation)?;
    rules_of(duties, node)
        .into_iter()
        .filter_map(|r| r.counterpart.as_ref())
        .find(|c| c.realises_outcome)
}

struct Ctx<'a> {
    slice: &'a Slice,
    names: BTreeMap<MessageId, String>,
    devs: Vec<MessageId>,
    substitute: Vec<bool>,
    present: BTreeSet<MessageId>,
    memo: BTreeMap<(usize, u64), f64>,
}

struct Meta {
    realised: f64,
    reference: f64,
    sets: Vec<(Vec<usize>, Vec<usize>, f64)>,
    rho: BTreeMap<String, f64>,
}

impl Ctx<'_> {
    /// ρ of `victim` with the deviations in `kept` (bit mask) kept.
    fn base(&mut self, victim: &str, kept: u64) -> Result<f64, VerdictError> {
        if let Some(v) = self.memo.get(&(0, kept)) {
            return Ok(*v);
        }
        let reverted = |i: &usize| kept >> i & 1 == 0;
        let reading = Reading {
            present: self.present.clone(),
            reverted: (0..self.devs.len())
                .filter(reverted)
                .map(|i| self.devs[i].clone())
                .collect(),
            substituted: (0..self.devs.len())
                .filter(reverted)
                .filter(|i| self.substitute[*i])
                .map(|i| self.devs[i].clone())
                .collect(),
            ..Reading::default()
        };
        let g = match self.slice.model(&reading, &self.names, false)? {
            Some(b) => attribute(&b.model)
                .map_err(|e| VerdictError::Engine(e.to_string()))?
                .responsibility_of(victim),
            None => 0.0,
        };
        self.memo.insert((0, kept), g);
        Ok(g)
    }

    /// The lifted grade of `chain` with deviations `kept` available.
    fn grade(&mut self, chain: &[&str], kept: u64) -> Result<f64, VerdictError> {
        match chain {
            [] => Ok(0.0),
            [v] => self.base(v, kept),
            _ => {
                let level = chain.len() - 1;
                if let Some(v) = self.memo.get(&(level, kept)) {
                    return Ok(*v);
                }
                let last = chain[chain.len() - 1];
                let meta = self.meta(&chain[..chain.len() - 1], kept)?;
                let g = meta.rho.get(last).copied().unwrap_or(0.0);
                self.memo.insert((level, kept), g);
                Ok(g)
            }
        }
    }

    /// The certificate of `chain` over the deviations in `avail`.
    fn meta(&mut self, chain: &[&str], avail: u64) -> Result<Meta, VerdictError> {
        let idx: Vec<usize> = (0..self.devs.len())
            .filter(|i| avail >> i & 1 == 1)
            .collect();
        let realised = self.grade(chain, avail)?;
        let reference = self.grade(chain, 0)?;
        let mut meta = Meta {
            realised,
            reference,
            sets: Vec::new(),
            rho: BTreeMap::new(),
        };
        if realised <= reference {
            return Ok(meta);
        }
        let n = idx.len();
        let mut minterms = Vec::new();
        for sub in 0..1u64 << n {
            let mut kept = 0u64;
            for (j, &i) in idx.iter().enumerate() {
                if sub >> j & 1 == 1 {
                    kept |= 1 << i;
                }
            }
            if self.grade(chain, kept)? > reference {
                let lits: Vec<String> = idx
                    .iter()
                    .enumerate()
                    .map(|(j, &i)| {
                        if sub >> j & 1 == 1 {
                            format!("d{i}")
                        } else {
                            format!("!d{i}")
                        }
                    })
                    .collect();
                minterms.push(if lits.is_empty() {
                    "true".to_string()
                } else {
                    format!("({})", lits.join(" & "))
                });
            }
        }
        let mut b = ModelBuilder::new();
        for &i in &idx {
            b = b.exogenous(
                format!("d{i}"),
                Some(self.devs[i].author.as_str()),
                true,
                true,
            );
        }
        let outcome = if minterms.is_empty() {
            "false".to_string()
        } else {
            minterms.join(" | ")
        };
        let model = b
            .outcome(outcome)
            .build()
            .map_err(|e| VerdictError::Internal(format!("meta model: {e}")))?;
        let att = attribute(&model).map_err(|e| VerdictError::Engine(e.to_string()))?;
        let parse = |v: &String| v[1..].parse::<usize>().ok();
        for c in &att.causes {
            let x: Vec<usize> = c.vars.iter().filter_map(parse).collect();
            let w: Vec<usize> = c.witness.iter().filter_map(parse).collect();
            meta.sets.push((x, w, c.grade));
        }
        meta.rho = att.responsibility.clone();
        Ok(meta)
    }
}

/// Computes the blame-shift certificate for `chain` (`[victim]` at order 1,
/// `[victim, framer]` at order 2, ...). `None` when the deviations did not raise the
/// lifted grade.
pub fn certificate(
    record: &Record,
    partition: &Partition,
    duties: &DutyRegistry,
    adverse: &Adverse,
    chain: &[&str],
) -> Result<Option<BlameCertificate>, VerdictError> {
    if chain.is_empty() || chain.len() > MAX_ORDER {
        return Err(VerdictError::Internal(format!(
            "certificate order must be 1..={MAX_ORDER}"
        )));
    }
    let slice = Slice::build(record, partition, duties, adverse);
    let devs = deviations(&slice, duties);
    if devs.len() > MAX_DEVIATIONS {
        return Err(VerdictError::TooManyDeviations {
            n: devs.len(),
            max: MAX_DEVIATIONS,
        });
    }
    let names = var_names(&slice);
    let present = slice.touching_items().map(|i| i.id.clone()).collect();
    let substitute: Vec<bool> = devs
        .iter()
        .map(|d| realising_counterpart(&slice, duties, d).is_some())
        .collect();
    let mut ctx = Ctx {
        slice: &slice,
        names,
        devs: devs.clone(),
        substitute: substitute.clone(),
        present,
        memo: BTreeMap::new(),
    };
    let all = (1u64 << devs.len()) - 1;
    let meta = ctx.meta(chain, all)?;
    if meta.realised <= meta.reference {
        return Ok(None);
    }
    let brs = breaches(&slice, duties);
    let mut framers: BTreeMap<String, Framer> = BTreeMap::new();
    for d in &devs {
        let p = d.author.to_string();
        let breach = brs.get(&p).is_some_and(|b| b.under(duties.standard));
        let rho_frame = meta.rho.get(&p).copied().unwrap_or(0.0);
        let f = framers.entry(p).or_insert(Framer {
            rho_frame,
            deviations: Vec::new(),
            breach,
            culpable: breach && rho_frame > 0.0,
        });
        f.deviations.push(id_string(d));
    }
    let mut sets = Vec::new();
    for (x, w, grade) in &meta.sets {
        let mut kept = all;
        for i in x {
            kept &= !(1u64 << i);
        }
        let after = ctx.grade(chain, kept)?;
        sets.push(ReversionSet {
            reverted: x.iter().map(|i| id_string(&devs[*i])).collect(),
            witness: w.iter().map(|i| id_string(&devs[*i])).collect(),
            grade: *grade,
            victim_grade_after: after,
        });
    }
    Ok(Some(BlameCertificate {
        chain: chain.iter().map(|s| s.to_string()).collect(),
        order: chain.len(),
        realised: meta.realised,
        reference: meta.reference,
        deviations: devs.iter().map(id_string).collect(),
        counterparts: devs
            .iter()
            .zip(&substitute)
            .filter(|(_, s)| **s)
            .map(|(d, _)| id_string(d))
            .collect(),
        sets,
        framers,
    }))
}
