//! The verdict: per principal duty, breach, causation interval with replay receipts,
//! harm, flags and the evidence sub-graph; the JSON schema of `SCHEMA.md`; the flat
//! per-(incident, principal) row view.
//!
//! Design constraints:
//! - Deterministic: every map is a `BTreeMap`, every list sorted; equal inputs give
//!   byte-identical JSON ([`Verdict::to_json`]).
//! - Only certified messages, attested missing ids and attested suspect items (sealed
//!   in an intact epoch) are read, so injected items that fail verification change no
//!   byte of the verdict.
//! - Dilution invariance: only the incident's scope ([`crate::slice::Scope`]) is read,
//!   and the principals are the authors of its derived messages, the holders of duties
//!   in scope and the authors of attested items; certified traffic outside the scope
//!   (other targets, other principals) changes no byte but the record root.
//! - `culpable = breach(standard) ∧ ρ_lo > 0 ∧ claim = causal`: no causal verdict
//!   through a non-witness edge, and ρ_lo is lowered to the certified grade when replay
//!   does not confirm a cause (abstention, never accusation).
//! - No silent exoneration: a principal is `exonerated` only when ρ_hi = 0 and no
//!   completion item could carry its production path (a certified message of it
//!   outside the closure predating a touching item's citers); otherwise it is
//!   `unresolved` and the author-attributed items are named.

use std::collections::{BTreeMap, BTreeSet};

use audita_causal::certify::{
    certify, Certified, CertifyConfig, CertifyMode, ModelReplayer, Receipt,
};
use audita_causal::Replayer;
use audita_evidence::{MessageId, Partition, Payload, Record};
use serde::Serialize;

use crate::adverse::{id_string, Adverse};
use crate::breach::{breaches, degraded, faithful, Breach};
use crate::duty::{DutyRegistry, Standard};
use crate::interval::{intervals, Intervals};
use crate::reading::{var_names, Built, VarRef};
use crate::slice::{Absence, Edge, EdgeKind, Item, ItemKind, Node, Policy, Slice};
use crate::VerdictError;

/// Schema identifier written into every verdict.
pub const SCHEMA: &str = "audita.verdict/v1";

/// Claim level (causal-witness memo).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClaimLevel {
    /// Closure reaches the source through hash-match edges only.
    Causal,
    /// Temporal precedence with plausible mechanism (offending edges named).
    Temporal,
    /// The closure exits the window: external parent suspected (boundary named).
    Indeterminate,
}

impl ClaimLevel {
    /// Stable name.
    pub fn name(self) -> &'static str {
        match self {
            ClaimLevel::Causal => "causal",
            ClaimLevel::Temporal => "temporal",
            ClaimLevel::Indeterminate => "indeterminate",
        }
    }
}

/// An edge as written in the verdict.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct EdgeView {
    /// Citing message.
    pub child: String,
    /// Cited message.
    pub parent: String,
    /// Witness grade.
    pub kind: EdgeKind,
    /// Whether the child consumes the parent.
    pub consumed: bool,
}

impl From<&Edge> for EdgeView {
    fn from(e: &Edge) -> Self {
        EdgeView {
            child: id_string(&e.child),
            parent: id_string(&e.parent),
            kind: e.kind,
            consumed: e.consumed,
        }
    }
}

/// A claim with its justification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Claim {
    /// Level.
    pub level: ClaimLevel,
    /// Folded-transform and similarity edges that downgrade the claim.
    pub offending_edges: Vec<EdgeView>,
    /// Boundary artifact hashes (ids) where the closure exits the window.
    pub boundary: Vec<String>,
}

/// Flags of a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Flag {
    /// Faithful relay of upstream content.
    Conduit,
    /// ρ_hi = 0 with nothing missing that could implicate it.
    Exonerated,
    /// Graded through a duty absence.
    Omission,
    /// Missing items are named in the finding.
    EvidenceMissing,
    /// Attested suspect items are named in the finding.
    EvidenceSuspect,
    /// A cause of it was not confirmed by replay.
    Abstained,
    /// It issued a command to the outcome's subject that the record does not show
    /// realised, and nothing anchors the outcome: the record cannot exclude that the
    /// command produced it (never a silent exoneration).
    UnrealisedCommand,
}

impl Flag {
    /// Stable name.
    pub fn name(self) -> &'static str {
        match self {
            Flag::Conduit => "conduit",
            Flag::Exonerated => "exonerated",
            Flag::Omission => "omission",
            Flag::EvidenceMissing => "evidence_missing",
            Flag::EvidenceSuspect => "evidence_suspect",
            Flag::Abstained => "abstained",
            Flag::UnrealisedCommand => "unrealised_command",
        }
    }
}

/// Summary status of a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingStatus {
    /// Breach ∧ ρ_lo > 0 with a causal claim.
    Culpable,
    /// Breach without causation (ρ_hi = 0).
    NegligentButInert,
    /// Causation without breach.
    InvolvedCleared,
    /// Neither breach nor causation.
    Exonerated,
    /// The evidence does not settle it (interval straddles 0, a non-causal claim, or
    /// named missing/suspect items).
    Unresolved,
}

/// A missing or suspect item named in a finding.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct NamedItem {
    /// Id (`author:hex`).
    pub id: String,
    /// Its author.
    pub author: String,
    /// `missing`, `suspect`, `unresolved` or `claimed`.
    pub kind: ItemKind,
}

/// The verdict about one principal.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Registered duties of the principal.
    pub duties: Vec<String>,
    /// Breach under both standards.
    pub breach: Breach,
    /// Involvement bound.
    pub rho_lo: f64,
    /// Upper end of the interval.
    pub rho_hi: f64,
    /// `breach(standard) ∧ ρ_lo > 0 ∧ claim causal`.
    pub culpable: bool,
    /// Summary status.
    pub status: FindingStatus,
    /// Claim level of its causal finding.
    pub claim: Claim,
    /// Flags.
    pub flags: Vec<Flag>,
    /// Certified evidence sub-graph (message ids) justifying the findings.
    pub evidence: Vec<String>,
    /// Author-attributed missing/suspect items bearing on this finding.
    pub items: Vec<NamedItem>,
    /// Human-readable notes (exoneration, preemption, abstention).
    pub notes: Vec<String>,
}

/// A replay receipt of a proposed cause.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayReceipt {
    /// Cause variables.
    pub vars: Vec<String>,
    /// Witness variables.
    pub witness: Vec<String>,
    /// Grade.
    pub grade: f64,
    /// Factual risk.
    pub q0: f64,
    /// Interventional risk.
    pub q1: f64,
    /// Hoeffding half-width.
    pub epsilon: f64,
    /// Runs per arm.
    pub runs: u32,
    /// Action match of the factual arm.
    pub action_match: f64,
    /// Whether the cause was certified.
    pub certified: bool,
    /// Justification.
    pub note: String,
}

/// Overall status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Graded and certified by replay.
    Graded,
    /// Replay could not run or no reading is admissible: no causal finding stands.
    Abstained,
}

/// The slice as written in the verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SliceView {
    /// Closure message ids.
    pub messages: Vec<String>,
    /// Closure edges with witness grades.
    pub edges: Vec<EdgeView>,
    /// Duty absences.
    pub absences: Vec<AbsenceView>,
}

/// A duty absence as written in the verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AbsenceView {
    /// Variable name.
    pub variable: String,
    /// Duty id.
    pub duty: String,
    /// Holder.
    pub holder: String,
    /// Triggering report.
    pub trigger: String,
    /// Whether it enters `Y`.
    pub in_outcome: bool,
    /// Whether the record establishes it (else the readings decide).
    pub certain: bool,
    /// Completion items that leave it open.
    pub uncertain_by: Vec<String>,
}

/// A completion item as written in the verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ItemView {
    /// Id.
    pub id: String,
    /// Author.
    pub author: String,
    /// Kind.
    pub kind: ItemKind,
    /// Certified closure messages consuming it.
    pub citers: Vec<String>,
    /// Whether it is an anchor.
    pub anchor: bool,
    /// Whether it is enumerated.
    pub enumerated: bool,
    /// Who attests it: `seal`, `cited by <id>` (citers the slice holds), `receipt by
    /// <principal>`. A receipt or citation is its signer's claim, not the named
    /// author's conduct.
    pub attested_by: Vec<String>,
}

/// Completion statistics.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Completions {
    /// Items (missing, attested suspect, unresolved anchors).
    pub items: Vec<ItemView>,
    /// Hypothesis edges enumerated on/off.
    pub hypotheses: Vec<EdgeView>,
    /// Readings enumerated.
    pub readings: u64,
    /// Admissible readings.
    pub admissible: u64,
}

/// The verdict of one incident (schema [`SCHEMA`], documented in `SCHEMA.md`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// Schema id.
    pub schema: &'static str,
    /// Incident name.
    pub incident: String,
    /// Declared predicate.
    pub outcome: String,
    /// `t*` (ms).
    pub t_star_ms: u64,
    /// Harm severity (J).
    pub severity_j: f64,
    /// Standard culpability was computed under.
    pub standard: Standard,
    /// Hex log root of the last intact epoch.
    pub record_root: String,
    /// Overall status.
    pub status: Status,
    /// Incident-level claim.
    pub claim: Claim,
    /// Declared anchors.
    pub anchors: Vec<String>,
    /// The slice.
    pub slice: SliceView,
    /// Model variable → message id or duty absence.
    pub variables: BTreeMap<String, String>,
    /// Completion statistics.
    pub completions: Completions,
    /// Equivocations found by verification.
    pub equivocations: usize,
    /// Replay receipts of the canonical reading.
    pub replay: Vec<ReplayReceipt>,
    /// Findings per principal.
    pub principals: BTreeMap<String, Finding>,
    /// Incident-level notes.
    pub notes: Vec<String>,
    /// How the adverse outcome was declared and the facts it rests on, each with the
    /// certified messages establishing it (only for declarations that carry a
    /// declarer: monitor-derived or checked operator declarations).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub declaration: Option<DeclarationView>,
}

/// The declaration's provenance in a verdict: the predicate (`outcome`), who declared
/// it, and each fact with its evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeclarationView {
    /// The declared predicate's name.
    pub predicate: String,
    /// Who declared it.
    pub declarer: crate::adverse::Declarer,
    /// The facts, each linked to its evidence.
    pub facts: Vec<crate::adverse::Fact>,
}

impl DeclarationView {
    /// The view of a declaration (none when it names no declarer).
    pub fn of(adverse: &Adverse) -> Option<DeclarationView> {
        adverse.decl.declarer.as_ref().map(|d| DeclarationView {
            predicate: adverse.decl.outcome.clone(),
            declarer: d.clone(),
            facts: adverse.decl.facts.clone(),
        })
    }
}

/// The flat per-(incident, principal) row (the Parquet sink's columns), one
/// definition shared with the topic records (`audita-verdict-types`).
pub use audita_verdict_types::VerdictRow;

impl Verdict {
    /// Pretty JSON (deterministic).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Every string in a field that holds a message id, a duty id or a model
    /// variable: what a record of the verdict looks up to list the certified
    /// messages and registered duties it names (`audita_engine_workers::record`).
    /// Read from the verdict's types, field by field; free text (notes, details) and
    /// principals' names are not ids and are left out.
    pub fn named_ids(&self) -> BTreeSet<&str> {
        fn strs<'a>(v: impl IntoIterator<Item = &'a String>) -> impl Iterator<Item = &'a str> {
            v.into_iter().map(String::as_str)
        }
        fn edges(e: &[EdgeView]) -> impl Iterator<Item = &str> {
            e.iter().flat_map(|e| [e.child.as_str(), e.parent.as_str()])
        }
        fn claim(c: &Claim) -> impl Iterator<Item = &str> {
            edges(&c.offending_edges).chain(strs(&c.boundary))
        }
        let mut out: BTreeSet<&str> = strs(&self.anchors).collect();
        out.extend(claim(&self.claim));
        out.extend(strs(&self.slice.messages));
        out.extend(edges(&self.slice.edges));
        for a in &self.slice.absences {
            out.extend([a.variable.as_str(), a.duty.as_str(), a.trigger.as_str()]);
            out.extend(strs(&a.uncertain_by));
        }
        for (var, named) in &self.variables {
            out.extend([var.as_str(), named.as_str()]);
        }
        for i in &self.completions.items {
            out.insert(i.id.as_str());
            out.extend(strs(i.citers.iter().chain(&i.attested_by)));
        }
        out.extend(edges(&self.completions.hypotheses));
        for r in &self.replay {
            out.extend(strs(r.vars.iter().chain(&r.witness)));
        }
        for f in self.principals.values() {
            out.extend(strs(f.duties.iter().chain(&f.evidence)));
            for v in &f.breach.violations {
                out.insert(v.duty.as_str());
                out.extend(strs(&v.evidence));
            }
            out.extend(claim(&f.claim));
            out.extend(f.items.iter().map(|i| i.id.as_str()));
        }
        for fact in self.declaration.iter().flat_map(|d| &d.facts) {
            out.extend(strs(fact.message.iter().chain(&fact.evidence)));
        }
        out
    }

    /// One row per principal.
    pub fn rows(&self) -> Vec<VerdictRow> {
        self.principals
            .iter()
            .map(|(p, f)| VerdictRow {
                incident: self.incident.clone(),
                principal: p.clone(),
                outcome: self.outcome.clone(),
                t_star_ms: self.t_star_ms,
                severity_j: self.severity_j,
                standard: self.standard.name().to_string(),
                duties: f.duties.clone(),
                breach_specification: f.breach.specification,
                breach_reasonable: f.breach.reasonable_agent,
                rho_lo: f.rho_lo,
                rho_hi: f.rho_hi,
                culpable: f.culpable,
                claim: f.claim.level.name().to_string(),
                flags: f.flags.iter().map(|x| x.name().to_string()).collect(),
                evidence: f.evidence.clone(),
                record_root: self.record_root.clone(),
            })
            .collect()
    }

    /// The finding of `principal`.
    pub fn finding(&self, principal: &str) -> Option<&Finding> {
        self.principals.get(principal)
    }

    /// The verdict of an incident that could not be graded at all (the error is one
    /// for which [`VerdictError::abstains`] holds): status `abstained`, no finding
    /// about anyone, the reason as the only note — abstention, never accusation.
    /// Header fields (incident, outcome, `t*`, severity, standard, record root,
    /// anchors) are those a graded verdict of the same inputs would carry.
    pub fn abstained(
        partition: &Partition,
        duties: &DutyRegistry,
        adverse: &Adverse,
        reason: &VerdictError,
    ) -> Verdict {
        Verdict {
            notes: vec![format!("abstained: {reason}")],
            ..Verdict::ungraded(partition, duties, adverse)
        }
    }
}

impl VerdictError {
    /// Whether this error is an abstention (the inputs are well-formed but the
    /// incident cannot be graded within the engine's bounds), to be published as a
    /// [`Verdict::abstained`] verdict, rather than malformed input or a bug.
    pub fn abstains(&self) -> bool {
        match self {
            VerdictError::TooManyCompletions { .. } | VerdictError::Engine(_) => true,
            VerdictError::Duties(_)
            | VerdictError::Adverse(_)
            | VerdictError::TooManyDeviations { .. }
            | VerdictError::Internal(_) => false,
        }
    }
}

/// Knobs of a verdict computation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Options {
    /// Certification mode (exact by default).
    pub mode: CertifyMode,
    /// Tolerance for action matching.
    pub tolerance: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            mode: CertifyMode::Exact,
            tolerance: 0.0,
        }
    }
}

/// Computes the verdict, certifying causes on the slice model itself.
pub fn verdict(
    record: &Record,
    partition: &Partition,
    duties: &DutyRegistry,
    adverse: &Adverse,
) -> Result<Verdict, VerdictError> {
    verdict_with(
        record,
        partition,
        duties,
        adverse,
        &Options::default(),
        None,
    )
}

fn record_root(partition: &Partition) -> String {
    partition
        .epochs
        .iter()
        .filter(|e| e.intact())
        .filter_map(|e| e.header.as_ref())
        .max_by_key(|h| h.number)
        .map(|h| hex::encode(h.log_root))
        .unwrap_or_default()
}

/// Computes the verdict; `replayer` (when given) is the certification hook, called with
/// the variable names of [`Verdict::variables`].
pub fn verdict_with(
    record: &Record,
    partition: &Partition,
    duties: &DutyRegistry,
    adverse: &Adverse,
    opts: &Options,
    replayer: Option<&mut dyn Replayer>,
) -> Result<Verdict, VerdictError> {
    duties.validate()?;
    let slice = Slice::build(record, partition, duties, adverse);
    let names = var_names(&slice);
    let principals = principals_of(&slice, duties);
    let iv = intervals(&slice, &names, &principals)?;
    let brs = breaches(&slice, duties);
    let grading = Grading::of(&slice, &principals, &iv, adverse, opts, replayer);

    // Evidence reading: widest if admissible, else canonical.
    let evidence_reading = iv
        .widest
        .as_ref()
        .or(iv.canonical.as_ref())
        .map(|(_, built, _)| built);
    let touching: Vec<&Item> = slice.touching_items().collect();
    let inputs = FindingInputs {
        slice: &slice,
        duties,
        adverse,
        built: evidence_reading,
        latest_item_time: latest_item_time(&slice, &touching, adverse),
        touching,
        abstained: &grading.abstained,
    };
    let findings = principals
        .iter()
        .map(|p| {
            let breach = brs.get(p).cloned().unwrap_or_default();
            let rho_lo = grading.lo.get(p).copied().unwrap_or(0.0);
            let rho_hi = grading.hi.get(p).copied().unwrap_or(0.0).max(rho_lo);
            (p.clone(), inputs.finding(p, breach, rho_lo, rho_hi))
        })
        .collect();

    // Rewrite receipt variable names to message ids for readability is left to readers
    // through `variables`.
    Ok(Verdict {
        status: grading.status,
        claim: incident_claim(&slice),
        slice: slice_view(&slice),
        variables: variables(&slice, evidence_reading),
        completions: completions(&slice, adverse, &iv),
        replay: grading.receipts,
        principals: findings,
        notes: grading.notes,
        ..Verdict::ungraded(partition, duties, adverse)
    })
}

impl Verdict {
    /// The header of a verdict of these inputs (incident, outcome, `t*`, severity,
    /// standard, record root, anchors, equivocations, declaration) with nothing
    /// graded: status `abstained`, an indeterminate claim, an empty slice, no
    /// finding, no note.
    fn ungraded(partition: &Partition, duties: &DutyRegistry, adverse: &Adverse) -> Verdict {
        Verdict {
            schema: SCHEMA,
            incident: adverse.decl.incident.clone(),
            outcome: adverse.decl.outcome.clone(),
            t_star_ms: adverse.decl.t_star_ms,
            severity_j: adverse.severity_j(),
            standard: duties.standard,
            record_root: record_root(partition),
            status: Status::Abstained,
            claim: Claim {
                level: ClaimLevel::Indeterminate,
                offending_edges: Vec::new(),
                boundary: Vec::new(),
            },
            anchors: adverse.anchors.iter().map(id_string).collect(),
            slice: SliceView {
                messages: Vec::new(),
                edges: Vec::new(),
                absences: Vec::new(),
            },
            variables: BTreeMap::new(),
            completions: Completions {
                items: Vec::new(),
                hypotheses: Vec::new(),
                readings: 0,
                admissible: 0,
            },
            equivocations: partition.equivocations.len(),
            replay: Vec::new(),
            principals: BTreeMap::new(),
            notes: Vec::new(),
            declaration: DeclarationView::of(adverse),
        }
    }
}

/// The principals of an incident: authors of derived certified messages in the
/// (scoped) window, holders of duties in the incident's scope, authors of the
/// completion items it enumerates, and authors of graded items in scope.
fn principals_of(slice: &Slice, duties: &DutyRegistry) -> BTreeSet<String> {
    let mut principals: BTreeSet<String> = slice
        .window
        .values()
        .filter(|n| n.policy != Policy::Root)
        .map(|n| n.id.author.to_string())
        .collect();
    principals.extend(
        duties
            .all()
            .filter(|(h, d)| slice.scope.duty_in_scope(h, d))
            .map(|(h, _)| h.to_string()),
    );
    // Authors of the completion items this incident enumerates (others are named
    // where their scope is, never moved into this verdict).
    principals.extend(slice.touching_items().map(|i| i.id.author.to_string()));
    // A graded item of a principal in scope is named in its finding (a deletion is
    // always reported), even when it touches nothing.
    let in_scope: Vec<String> = slice
        .items
        .iter()
        .filter(|i| matches!(i.kind, ItemKind::Missing | ItemKind::Suspect))
        .filter(|i| {
            slice.scope.principals.contains(i.id.author.as_str())
                || principals.contains(i.id.author.as_str())
        })
        .map(|i| i.id.author.to_string())
        .collect();
    principals.extend(in_scope);
    principals
}

/// The incident's grade before the findings: the interval ends per principal once
/// replay has certified (or failed to certify) the causes of the canonical reading.
struct Grading {
    /// Overall status.
    status: Status,
    /// Incident-level notes.
    notes: Vec<String>,
    /// ρ_lo per principal, lowered where replay does not confirm a cause.
    lo: BTreeMap<String, f64>,
    /// ρ_hi per principal.
    hi: BTreeMap<String, f64>,
    /// Principals whose ρ_lo replay lowered.
    abstained: BTreeSet<String>,
    /// Replay receipts of the canonical reading.
    receipts: Vec<ReplayReceipt>,
}

impl Grading {
    /// Grades the intervals `iv`: abstains when no reading is admissible, then
    /// certifies the canonical reading's causes by replay (on `replayer`, else on the
    /// model itself), lowering ρ_lo to the certified grade.
    fn of(
        slice: &Slice,
        principals: &BTreeSet<String>,
        iv: &Intervals,
        adverse: &Adverse,
        opts: &Options,
        replayer: Option<&mut dyn Replayer>,
    ) -> Grading {
        let mut grading = Grading {
            status: Status::Graded,
            notes: Vec::new(),
            lo: iv.lo.clone(),
            hi: iv.hi.clone(),
            abstained: BTreeSet::new(),
            receipts: Vec::new(),
        };
        if iv.admissible == 0 {
            grading.abstain_without_reading(slice, principals);
        }
        // Certification by replay on the canonical reading.
        if let Some((_, built, att)) = &iv.canonical {
            let cfg = CertifyConfig {
                delta: adverse.decl.delta,
                mode: opts.mode,
                tolerance: opts.tolerance,
            };
            let mut own;
            let rep: &mut dyn Replayer = match replayer {
                Some(r) => r,
                None => {
                    own = ModelReplayer::exact(built.model.clone());
                    &mut own
                }
            };
            match certify(&built.model, &[], att.clone(), rep, &cfg) {
                Ok(c) => grading.take_certified(&c, principals),
                Err(e) => {
                    grading.status = Status::Abstained;
                    grading
                        .notes
                        .push(format!("certification by replay failed, abstaining: {e}"));
                    grading.uncertify(principals);
                }
            }
        } else if iv.admissible > 0 {
            grading
                .notes
                .push("canonical reading not admissible: causes not replay-certified".into());
            grading.uncertify(principals);
            grading.status = Status::Abstained;
        }
        grading
    }

    /// No reading reproduces the outcome: abstain, ρ_lo = 0 for everyone and ρ_hi = 1
    /// for whoever the slice involves (0 for the others).
    fn abstain_without_reading(&mut self, slice: &Slice, principals: &BTreeSet<String>) {
        self.status = Status::Abstained;
        self.notes.push(
            "no reading of the evidence reproduces the declared outcome: no causal finding"
                .to_string(),
        );
        let involved: BTreeSet<String> = slice
            .closure
            .iter()
            .map(|m| m.author.to_string())
            .chain(slice.items.iter().map(|i| i.id.author.to_string()))
            .chain(slice.absences.iter().map(|a| a.holder.clone()))
            .collect();
        for p in principals {
            self.lo.insert(p.clone(), 0.0);
            self.hi
                .insert(p.clone(), if involved.contains(p) { 1.0 } else { 0.0 });
        }
    }

    /// Keeps the receipts of a certification and lowers each ρ_lo to the certified
    /// responsibility where that is smaller.
    fn take_certified(&mut self, c: &Certified, principals: &BTreeSet<String>) {
        self.receipts
            .extend(c.receipts.iter().map(ReplayReceipt::from));
        for p in principals {
            let certified = c.attribution.responsibility_of(p);
            if let Some(l) = self.lo.get_mut(p) {
                if certified < *l {
                    *l = certified;
                    self.abstained.insert(p.clone());
                }
            }
        }
    }

    /// No cause is replay-certified: ρ_lo = 0 for everyone, and whoever had ρ_lo > 0
    /// is marked abstained.
    fn uncertify(&mut self, principals: &BTreeSet<String>) {
        for p in principals {
            if self.lo.get(p).is_some_and(|l| *l > 0.0) {
                self.abstained.insert(p.clone());
            }
            self.lo.insert(p.clone(), 0.0);
        }
    }
}

impl From<&Receipt> for ReplayReceipt {
    fn from(r: &Receipt) -> Self {
        ReplayReceipt {
            vars: r.cause.vars.clone(),
            witness: r.cause.witness.clone(),
            grade: r.cause.grade,
            q0: r.q0,
            q1: r.q1,
            epsilon: r.epsilon,
            runs: r.runs,
            action_match: r.action_match,
            certified: r.certified,
            note: r.note.clone(),
        }
    }
}

/// The latest time a touching completion item could have been consumed: `t*` for an
/// anchor, else its latest citer's timestamp (`t*` when none is in the window).
fn latest_item_time(slice: &Slice, touching: &[&Item], adverse: &Adverse) -> Option<u64> {
    touching
        .iter()
        .map(|it| {
            if it.anchor {
                adverse.decl.t_star_ms
            } else {
                it.citers
                    .iter()
                    .filter_map(|c| slice.window.get(c))
                    .map(|n| n.timestamp)
                    .max()
                    .unwrap_or(adverse.decl.t_star_ms)
            }
        })
        .max()
}

/// What every finding of one incident reads.
struct FindingInputs<'a> {
    /// The incident's slice.
    slice: &'a Slice,
    /// The duty registry (its standard decides culpability).
    duties: &'a DutyRegistry,
    /// The declaration.
    adverse: &'a Adverse,
    /// The evidence reading's model (widest if admissible, else canonical).
    built: Option<&'a Built>,
    /// The completion items touching the outcome.
    touching: Vec<&'a Item>,
    /// See [`latest_item_time`].
    latest_item_time: Option<u64>,
    /// Principals a cause of whom replay did not confirm.
    abstained: &'a BTreeSet<String>,
}

/// A principal's evidence trail in the evidence reading.
struct Trail {
    /// Message ids: its violations' evidence, its gated messages and everything
    /// downstream of them, the triggers of its omissions.
    evidence: BTreeSet<String>,
    /// Consumed non-witness edges on its path.
    offending: BTreeSet<EdgeView>,
    /// Where its own messages' closure exits the window.
    boundary: BTreeSet<String>,
    /// Its gated (or named) messages.
    own_vars: Vec<MessageId>,
    /// Whether an absence of its enters the model while ρ_hi > 0.
    omission: bool,
}

impl FindingInputs<'_> {
    /// The finding about `p`, given its breach and interval `[rho_lo, rho_hi]`.
    fn finding(&self, p: &str, breach: Breach, rho_lo: f64, rho_hi: f64) -> Finding {
        let slice = self.slice;
        let mut flags = BTreeSet::new();
        let mut notes = Vec::new();
        let trail = self.trail(p, &breach, rho_hi);
        if trail.omission {
            flags.insert(Flag::Omission);
        }
        if self.is_conduit(p, &trail.own_vars, rho_hi) {
            flags.insert(Flag::Conduit);
        }
        let orphan = self.has_orphan(p);
        let items = self.items_bearing_on(p, &trail, rho_lo, rho_hi, orphan);
        if items.iter().any(|i| i.kind != ItemKind::Suspect) {
            flags.insert(Flag::EvidenceMissing);
        }
        if items.iter().any(|i| i.kind == ItemKind::Suspect) {
            flags.insert(Flag::EvidenceSuspect);
        }
        if self.abstained.contains(p) {
            flags.insert(Flag::Abstained);
            notes.push("a cause of this principal was not confirmed by replay: abstained".into());
        }
        let claim = finding_claim(trail.offending, trail.boundary, rho_lo, rho_hi);
        let b = breach.under(self.duties.standard);
        let culpable = b && rho_lo > 0.0 && claim.level == ClaimLevel::Causal;
        let withheld = rho_hi == 0.0 && orphan && !self.touching.is_empty();
        let unshown = self.unshown_commands(p);
        let omitted = self.omitted_halts(p);
        for a in &omitted {
            flags.insert(Flag::UnrealisedCommand);
            notes.push(omitted_halt_note(a));
        }
        let withheld = withheld || !unshown.is_empty() || !omitted.is_empty();
        if !unshown.is_empty() {
            flags.insert(Flag::UnrealisedCommand);
            for (u, via) in &unshown {
                notes.push(self.unshown_command_note(u, via.as_ref()));
            }
        }
        let exonerated = rho_hi == 0.0 && !withheld && items.is_empty();
        let status = if culpable {
            FindingStatus::Culpable
        } else if exonerated {
            if b {
                FindingStatus::NegligentButInert
            } else {
                FindingStatus::Exonerated
            }
        } else if !b && rho_lo > 0.0 && degraded(slice, p).is_empty() {
            FindingStatus::InvolvedCleared
        } else {
            FindingStatus::Unresolved
        };
        if exonerated {
            flags.insert(Flag::Exonerated);
            notes.extend(exoneration_notes(slice, p));
        }
        if withheld {
            notes.push(
                "exoneration withheld: a missing item with unknown inputs could carry a production path of this principal"
                    .into(),
            );
        }
        match status {
            FindingStatus::NegligentButInert => {
                notes.push("negligent but inert: breach without causation".into())
            }
            FindingStatus::InvolvedCleared => {
                notes.push("involved, cleared: causation without breach".into())
            }
            _ => {}
        }
        Finding {
            duties: self
                .duties
                .duties_of(p)
                .iter()
                .map(|d| d.id().to_string())
                .collect(),
            breach,
            rho_lo,
            rho_hi,
            culpable,
            status,
            claim,
            flags: flags.into_iter().collect(),
            evidence: trail.evidence.into_iter().collect(),
            items: items.into_iter().collect(),
            notes,
        }
    }

    /// `p`'s evidence trail: its violations' evidence and, in the evidence reading,
    /// its gated messages and everything downstream of them to the anchors, the
    /// non-witness edges and window exits on that path, and its omissions.
    fn trail(&self, p: &str, breach: &Breach, rho_hi: f64) -> Trail {
        let slice = self.slice;
        let mut trail = Trail {
            evidence: BTreeSet::new(),
            offending: BTreeSet::new(),
            boundary: BTreeSet::new(),
            own_vars: Vec::new(),
            omission: false,
        };
        for v in &breach.violations {
            trail.evidence.extend(v.evidence.iter().cloned());
        }
        let Some(built) = self.built else {
            return trail;
        };
        // p's gated messages and everything downstream of them to the anchors.
        let mut frontier: Vec<MessageId> = built
            .gated
            .iter()
            .chain(built.names.keys())
            .filter(|id| id.author.as_str() == p)
            .cloned()
            .collect();
        frontier.sort();
        frontier.dedup();
        trail.own_vars = frontier.clone();
        let mut seen: BTreeSet<MessageId> = frontier.iter().cloned().collect();
        while let Some(m) = frontier.pop() {
            trail.evidence.insert(id_string(&m));
            for (child, parent) in &built.links {
                if parent == &m && seen.insert(child.clone()) {
                    frontier.push(child.clone());
                }
            }
        }
        for e in &slice.edges {
            let on_path = seen.contains(&e.child) && seen.contains(&e.parent);
            if on_path && e.consumed && !e.kind.is_witness() {
                trail.offending.insert(EdgeView::from(e));
            }
            if e.kind == EdgeKind::WindowExit && e.consumed && trail.own_vars.contains(&e.child) {
                trail.boundary.insert(id_string(&e.parent));
            }
        }
        for (name, r) in &built.vars {
            if let VarRef::Absence(i) = r {
                if let Some(a) = slice.absences.get(*i) {
                    if a.holder == *p && rho_hi > 0.0 && built.model.var(name).is_some() {
                        trail.omission = true;
                        trail.evidence.insert(id_string(&a.trigger));
                    }
                }
            }
        }
        trail
    }

    /// Conduit: `p` is involved, owns no absence in the outcome, and every gated
    /// message of its is a faithful relay.
    fn is_conduit(&self, p: &str, own_vars: &[MessageId], rho_hi: f64) -> bool {
        let slice = self.slice;
        let gated_own: Vec<&Node> = own_vars
            .iter()
            .filter_map(|id| slice.window.get(id))
            .collect();
        let owns_absence = slice
            .absences
            .iter()
            .any(|a| a.holder == *p && a.in_outcome);
        rho_hi > 0.0
            && !gated_own.is_empty()
            && !owns_absence
            && gated_own.iter().all(|n| faithful(slice, n))
    }

    /// Whether `p` has a certified derived message outside the closure predating a
    /// touching item's consumption (a completion item could carry its production path).
    fn has_orphan(&self, p: &str) -> bool {
        let slice = self.slice;
        slice.window.values().any(|n| {
            n.id.author.as_str() == p
                && n.policy != Policy::Root
                && !slice.closure.contains(&n.id)
                && self.latest_item_time.is_some_and(|t| n.timestamp <= t)
        })
    }

    /// The missing and suspect items bearing on `p`: its degraded items, those leaving
    /// an absence of its open, every touching item when it is in the model (or could
    /// be), and authentic suspects on its evidence path.
    fn items_bearing_on(
        &self,
        p: &str,
        trail: &Trail,
        rho_lo: f64,
        rho_hi: f64,
        orphan: bool,
    ) -> BTreeSet<NamedItem> {
        let slice = self.slice;
        let named = |id: &MessageId, kind: ItemKind| NamedItem {
            id: id_string(id),
            author: id.author.to_string(),
            kind,
        };
        let mut items: BTreeSet<NamedItem> = BTreeSet::new();
        for id in degraded(slice, p) {
            let kind = if slice.suspect_nodes.contains_key(&id) {
                ItemKind::Suspect
            } else {
                slice
                    .graded_item(&id)
                    .map(|i| i.kind)
                    .unwrap_or(ItemKind::Missing)
            };
            items.insert(named(&id, kind));
        }
        // An absence of p's that the record leaves open names the items that do.
        for a in slice
            .absences
            .iter()
            .filter(|a| a.holder == *p && !a.certain)
        {
            for id in &a.uncertain_by {
                if let Some(it) = slice.graded_item(id) {
                    items.insert(named(id, it.kind));
                }
            }
        }
        let widened = rho_lo < rho_hi;
        // A completion item reads with unknown inputs, so it can move the grade of
        // every principal in the model (and of any whose uncited message it may have
        // consumed): name it in all those findings.
        let in_model = !trail.own_vars.is_empty() || slice.absences.iter().any(|a| a.holder == *p);
        if widened || orphan || in_model || rho_hi > 0.0 {
            for it in &self.touching {
                items.insert(named(&it.id, it.kind));
            }
        }
        // An authentic suspect on p's evidence path (read for its signed content,
        // not certified) is named too.
        if let Some(built) = self.built {
            for id in slice.suspect_nodes.keys() {
                let on_path = built.gated.contains(id) && trail.evidence.contains(&id_string(id));
                if on_path {
                    items.insert(named(id, ItemKind::Suspect));
                }
            }
        }
        items
    }

    /// With no anchor, the commands to the subject the record does not show realised
    /// that are `p`'s: its own, or one it led to (a command `p`'s message was relayed
    /// into, named with that message). The outcome's production is unknown, not
    /// exogenous.
    fn unshown_commands(&self, p: &str) -> Vec<(&MessageId, Option<MessageId>)> {
        let slice = self.slice;
        if !(slice.anchors.is_empty() && self.adverse.anchors.is_empty()) {
            return Vec::new();
        }
        slice
            .unrealised
            .iter()
            .filter_map(|u| {
                if u.author.as_str() == p {
                    return Some((u, None));
                }
                crate::slice::ancestors([u.clone()], &slice.window)
                    .into_iter()
                    .find(|a| a.author.as_str() == p)
                    .map(|a| (u, Some(a)))
            })
            .collect()
    }

    /// With no anchor and commands not shown realised, the halts `p` owed the subject
    /// and omitted: had one of those commands moved it, the halt would have stopped it.
    fn omitted_halts(&self, p: &str) -> Vec<&Absence> {
        let slice = self.slice;
        let adverse = self.adverse;
        if !(slice.anchors.is_empty() && adverse.anchors.is_empty() && !slice.unrealised.is_empty())
        {
            return Vec::new();
        }
        slice
            .absences
            .iter()
            .filter(|a| a.holder == *p && adverse.decl.targets.contains(&a.target))
            .collect()
    }

    /// The note naming an unrealised command `u` (relaying `via` when not `p`'s own)
    /// with the declaration's detail of it.
    fn unshown_command_note(&self, u: &MessageId, via: Option<&MessageId>) -> String {
        let detail = self
            .adverse
            .decl
            .facts
            .iter()
            .find(|f| {
                f.fact == crate::FactKind::Unrealised
                    && f.message.as_deref() == Some(id_string(u).as_str())
            })
            .map(|f| f.detail.clone())
            .unwrap_or_else(|| "declared unrealised".into());
        let via = via
            .map(|a| format!(" (relaying {})", id_string(a)))
            .unwrap_or_default();
        format!(
            "{}{via} issued to {}: {detail}; not shown realised, so it is no anchor, and the \
             record cannot exclude that it produced the outcome",
            id_string(u),
            self.adverse.decl.targets.join(", ")
        )
    }
}

/// The note naming a halt owed and (possibly) omitted while commands are not shown
/// realised.
fn omitted_halt_note(a: &Absence) -> String {
    format!(
        "{}: the halt of {} owed after {} was {}omitted while commands to it are not \
         shown realised; the record cannot exclude that one moved it and the halt would \
         have stopped it",
        a.duty,
        a.target,
        id_string(&a.trigger),
        if a.certain { "" } else { "possibly " }
    )
}

/// A finding's claim: indeterminate when its closure exits the window, temporal when
/// only non-witness edges carry a possible cause (ρ_lo = 0 < ρ_hi), else causal.
fn finding_claim(
    offending: BTreeSet<EdgeView>,
    boundary: BTreeSet<String>,
    rho_lo: f64,
    rho_hi: f64,
) -> Claim {
    let level = if !boundary.is_empty() {
        ClaimLevel::Indeterminate
    } else if !offending.is_empty() && rho_lo == 0.0 && rho_hi > 0.0 {
        ClaimLevel::Temporal
    } else {
        ClaimLevel::Causal
    };
    Claim {
        level,
        offending_edges: offending.into_iter().collect(),
        boundary: boundary.into_iter().collect(),
    }
}

/// The incident-level claim: indeterminate when the closure exits the window or an
/// anchor is unresolved, temporal when a folded-transform or similarity edge is
/// consumed, else causal.
fn incident_claim(slice: &Slice) -> Claim {
    let offending: Vec<EdgeView> = slice
        .edges
        .iter()
        .filter(|e| {
            e.consumed
                && matches!(
                    e.kind,
                    EdgeKind::FoldedTransform | EdgeKind::SimilarityMatch
                )
        })
        .map(EdgeView::from)
        .collect();
    let mut boundary: Vec<String> = slice
        .edges
        .iter()
        .filter(|e| e.consumed && e.kind == EdgeKind::WindowExit)
        .map(|e| id_string(&e.parent))
        .chain(
            slice
                .items
                .iter()
                .filter(|i| i.kind == ItemKind::Unresolved)
                .map(|i| id_string(&i.id)),
        )
        .collect();
    boundary.sort();
    boundary.dedup();
    Claim {
        level: if !boundary.is_empty() {
            ClaimLevel::Indeterminate
        } else if !offending.is_empty() {
            ClaimLevel::Temporal
        } else {
            ClaimLevel::Causal
        },
        offending_edges: offending,
        boundary,
    }
}

/// Model variable → the message id, duty absence or counterpart it stands for (empty
/// without an evidence reading).
fn variables(slice: &Slice, built: Option<&Built>) -> BTreeMap<String, String> {
    let mut variables = BTreeMap::new();
    if let Some(built) = built {
        for (name, r) in &built.vars {
            let v = match r {
                VarRef::Message(id) => id_string(id),
                VarRef::Absence(i) => slice
                    .absences
                    .get(*i)
                    .map(|a| format!("absence:{}", a.duty))
                    .unwrap_or_default(),
                VarRef::Counterpart(id) => format!("counterpart:{}", id_string(id)),
            };
            variables.insert(name.clone(), v);
        }
    }
    variables
}

/// The slice as written in the verdict: closure, edges, absences.
fn slice_view(slice: &Slice) -> SliceView {
    SliceView {
        messages: slice.closure.iter().map(id_string).collect(),
        edges: slice.edges.iter().map(EdgeView::from).collect(),
        absences: slice
            .absences
            .iter()
            .map(|a| AbsenceView {
                variable: a.variable.clone(),
                duty: a.duty.clone(),
                holder: a.holder.clone(),
                trigger: id_string(&a.trigger),
                in_outcome: a.in_outcome,
                certain: a.certain,
                uncertain_by: a.uncertain_by.iter().map(id_string).collect(),
            })
            .collect(),
    }
}

/// The completion statistics: attested suspects, then the slice's items, the
/// hypothesis edges and the reading counts.
fn completions(slice: &Slice, adverse: &Adverse, iv: &Intervals) -> Completions {
    Completions {
        items: slice
            .suspect_nodes
            .iter()
            .map(|(id, reasons)| ItemView {
                id: id_string(id),
                author: id.author.to_string(),
                kind: ItemKind::Suspect,
                citers: Vec::new(),
                anchor: adverse.anchors.contains(id),
                enumerated: false,
                attested_by: std::iter::once("seal".to_string())
                    .chain(std::iter::once(format!(
                        "signed by its author; read for its content ({})",
                        reasons.join(", ")
                    )))
                    .collect(),
            })
            .chain(slice.items.iter().map(|i| ItemView {
                id: id_string(&i.id),
                author: i.id.author.to_string(),
                kind: i.kind,
                citers: i.citers.iter().map(id_string).collect(),
                anchor: i.anchor,
                enumerated: i.touches && i.kind != ItemKind::Claimed,
                attested_by: i.attestation.describe(),
            }))
            .collect(),
        hypotheses: slice.hypotheses().into_iter().map(EdgeView::from).collect(),
        readings: iv.total,
        admissible: iv.admissible,
    }
}

fn exoneration_notes(slice: &Slice, p: &str) -> Vec<String> {
    let mut out = Vec::new();
    for n in slice.window.values() {
        if n.id.author.as_str() != p || n.policy == Policy::Root {
            continue;
        }
        let Some(t) = n.payload.target() else {
            continue;
        };
        if !slice.anchor_targets.contains(t) || slice.closure.contains(&n.id) {
            continue;
        }
        let veto = slice
            .window
            .values()
            .find(|v| matches!(v.payload, Payload::Halt { .. }) && v.cites.contains(&n.id));
        let why = if slice.unrealised.contains(&n.id) {
            "its committed effect never arrived (recorded unrealised)".to_string()
        } else if let Some(v) = veto {
            format!("vetoed by {} before effect", id_string(&v.id))
        } else {
            "not consumed by any message producing the outcome".to_string()
        };
        out.push(format!(
            "{}: no intact production path to the outcome; {why}; rho = 0",
            id_string(&n.id)
        ));
    }
    for n in slice.closure.iter().filter_map(|id| slice.window.get(id)) {
        if n.id.author.as_str() == p && slice.unrealised.contains(&n.id) {
            out.push(format!(
                "{}: preempted (effect never arrived); rho = 0",
                id_string(&n.id)
            ));
        }
    }
    out
}
