//! The incident slice `S(Y)`: backward citation closure from the anchors over certified
//! messages across epochs, witness-grade edge classification, completion items and
//! duty-indexed absences.
//!
//! Design constraints:
//! - Input is the verification partition: only **certified** messages enter the
//!   slice. Missing ids (from the partition) and suspect items whose id is sealed in
//!   an intact epoch are the only non-certified items considered ("attested"); both
//!   are facts an injector cannot create, so injected (forged) items change nothing.
//! - Time window: certified messages with `window_start_ms ≤ timestamp ≤ window_end_ms`
//!   (anchors always). The closure is walked over the whole time window.
//! - **Scope** ([`Scope`]; dilution invariance, SPEC §3–4). In a fleet the time window
//!   is mostly traffic of other robots and cells; the slice's `window` keeps only what
//!   can bear on this incident:
//!   * targets `T`: the declaration's `targets`, and every target named by a closure
//!     message (anchors included) or by a certified message a closure message cites;
//!   * principals `P`: authors of closure messages and of anchor items, holders of a
//!     duty whose target is in `T`, and the actuators in `T` themselves;
//!   * a time-window message is kept iff it is in the closure, names a target in `T`,
//!     is authored by a principal in `P`, is a sensor report triggering a halt duty
//!     on a target in `T`, or is a deviation whose declared reference counterpart
//!     realises the outcome (the registry ties that counterpart to `Y` itself, not to
//!     a target); the certified parents of kept messages are kept too (breach reads a
//!     principal's certified inputs);
//!   * duties in scope: those on a target in `T`, and target-less (review) duties of a
//!     principal in `P`. Only they give absences, and only their holders (with the
//!     authors of kept derived messages and of the completion items the incident
//!     enumerates) are principals of the verdict;
//!   * a deleted or unresolved **anchor** keeps the scope known through the
//!     declaration's `targets` (the entities `Y` names, added to `T`); only when the
//!     declaration names none is `T` unknown and the scope the whole time window.
//!
//!   Why it is sound. Nothing outside the scope is on a production path to `Y` in
//!   the certified graph (the closure is inside it), names the harmed targets, is
//!   authored by anyone involved or duty-bound on them, or triggers a duty on them;
//!   duties on other targets cannot enter `Y` (an absence enters `Y` only through an
//!   anchor target). The one way such a message could still matter is as an input of
//!   a *completion item* (a deleted message, whose citations are gone). Those inputs
//!   are not restricted to the scope alone: an item's possible inputs are drawn from
//!   the kept window **and** from every time-window message its author can have
//!   consumed — its own messages, messages addressed to it (the recipient signs the
//!   receipt, SPEC §2), and their certified ancestors. A message outside both is
//!   unrelated to the incident and never reached the item's author over the
//!   accountable bus; reading it as consumed would need an off-record channel, which
//!   the record cannot attest either way.
//! - **Completion items and who attests them.** A missing id is attested by the
//!   log's seal (an intact epoch lists it: the sealer accepted a message signed by
//!   its author), by certified citers (each citer's authored claim that it consumed
//!   it) and by receipts (each signer's claim that it was delivered to it); an
//!   attested suspect is sealed. Items attested by a seal or a certified citer are
//!   *graded*; an id named only by receipts is a **claim** ([`ItemKind::Claimed`]):
//!   a message that was never sealed is not certified evidence in any completion of
//!   the record, so a receipt can name it but never move a grade. Every item reports
//!   its attesters.
//! - **Item scope.** An item belongs to this incident iff it touches the slice
//!   (below), its author or a receipt signer of it is a principal in scope or the
//!   author of a derived message the slice keeps, or a message the slice keeps cites
//!   it (with an unknown scope, every item). Items of other incidents change no byte
//!   of this verdict.
//! - Record conventions (what the envelope format lets us derive, documented in
//!   `SCHEMA.md`):
//!   * **Production policy** from the replay pin `policy@origin|relay-any|relay-all`.
//!     Without the pin a root payload (sensor report, external input) is a root and a
//!     derived payload is `relay-any`: citation is consent and, by default, a claim of
//!     consumption. An `origin` message's citations are context, not consumed inputs.
//!   * **Edge grade.** A citation names the parent's id, the SHA-256 of its signed
//!     bytes, so a citation of a certified in-window parent is a **hash match** (the
//!     child's input artifact hash equals the parent's output artifact hash). A child
//!     pinned `link@folded` declares that it applied an unlogged transformation to
//!     its inputs (**folded transform**); `link@similarity` declares inputs matched by
//!     embedding proximity (**similarity match**). A pin `link:<author:hex64>@<grade>`
//!     grades that one citation (`hash_match`, `folded`, `similarity`; the weaker of
//!     two pins for one citation holds), so one message can have a hash-matched and
//!     a folded input (how `audita trace seal` keeps each span edge's grade). A
//!     transformation logged as its own
//!     message is an ordinary node with hash-match edges in and out. A citation of a
//!     certified message outside the window, or of an id nobody attests, is a
//!     **window exit**; its id is the boundary artifact hash.
//! - A completion item touches the slice when it is an anchor, a consumed input of a
//!   closure message (or of a message of the possible-input region below), a
//!   possible input of another touching item, or an item a halt duty in scope reads
//!   (see absences); only those are enumerated (others cannot change any grade).
//! - **Possible inputs of an item.** A touching item's own production is unknown (its
//!   bytes are gone or untrustworthy), so completions must also choose what it
//!   consumed: any certified, realised, derived message of the scoped window, or of
//!   the time window and known to its author (see Scope), that is not its
//!   descendant (a message citing it, directly or through certified messages, was
//!   signed after it: content addressing forbids the cycle). Sealed order is no
//!   bound: the streaming sealer seals in arrival order across partitions, so a
//!   parent may be sealed after its child. Roots and unrealised messages are not
//!   candidates: a root input supplies the item from outside the model and an
//!   unrealised one supplies nothing, which the `external`, `origin` and subset
//!   choices of [`crate::reading::Production`] already cover. Another graded item is
//!   a candidate too (a chain of deletions) when the author can have consumed it:
//!   its own, receipted by it, delivered to nobody the record names (no receipt
//!   survives), delivered to anybody during the time window (a receipt's signed
//!   time; a citer need not be the destination), or cited by a message the author
//!   knows; it then touches the slice.
//!   Two items consuming each other close a citation cycle, which no reading admits.
//!   The certified messages reachable backwards from the candidates that are not in
//!   the closure form the **possible-input region** (`reach`, with `reach_edges`);
//!   items consumed there touch the slice too (iterated to a fixed point). The region
//!   enters models only through an item's production; it is not part of the closure.
//!   It joins `window` (its authors are principals of the verdict).
//! - A halt-authority duty in scope is active when a certified triggering sensor report
//!   (signed by the duty's `trigger_sensor`, when it names one) in the time window
//!   has its deadline expire by `t*` without a certified halt of the target by the
//!   holder in `[report, report + deadline]`; it adds the absence variable
//!   `absent.<duty id>` owned by the holder. It enters `Y` (as a necessary condition)
//!   when its target is an anchor target (certified anchors' and declared targets).
//!   The absence is **certain** only when no graded item of the holder may have been
//!   the halt. A graded item that may have been a trigger (by the trigger sensor; by
//!   anyone when none is named) opens an absence that no certified trigger
//!   establishes. An uncertain absence holds in some readings and not in others
//!   (deleting a trigger never exonerates the holder, deleting the holder's halt
//!   never frames it), and only a certain one is a breach.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use audita_evidence::{MessageId, Partition, Payload, Record, SuspectReason};
use serde::Serialize;

use crate::adverse::Adverse;
use crate::duty::{Duty, DutyRegistry};

/// Largest base-2 logarithm of the number of readings enumerated.
pub const MAX_BITS: usize = 16;

/// Most touching items a slice can have within [`MAX_BITS`]: each has at least three
/// choices (absent, external, origin), `log2 3 ≈ 1.58` bits, so eleven exceed it.
pub const MAX_TOUCHING: usize = 10;

/// How a message's presence depends on its citations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// Sensor report or external input: environment.
    Root,
    /// The author's own decision; citations are context.
    Origin,
    /// Produced iff at least one consumed input is.
    RelayAny,
    /// Produced iff every consumed input is.
    RelayAll,
}

/// Witness grade of a closure edge (causal-witness memo).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EdgeKind {
    /// Child's input hash equals parent's output hash (citation by id).
    HashMatch,
    /// A transformation folded into the child, not logged as its own node.
    FoldedTransform,
    /// Matched by embedding proximity: a hypothesis, not an edge.
    SimilarityMatch,
    /// The closure leaves the slice window.
    WindowExit,
}

impl EdgeKind {
    /// Whether the edge is a causal witness.
    pub fn is_witness(self) -> bool {
        self == EdgeKind::HashMatch
    }
}

/// One citation edge of the closure.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Edge {
    /// Citing message.
    pub child: MessageId,
    /// Cited message (the boundary artifact for a window exit).
    pub parent: MessageId,
    /// Witness grade.
    pub kind: EdgeKind,
    /// Whether the child consumes the parent (not an origin's context citation).
    pub consumed: bool,
}

/// A certified message of the window.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Its id.
    pub id: MessageId,
    /// Timestamp (ms).
    pub timestamp: u64,
    /// Payload.
    pub payload: Payload,
    /// Production policy.
    pub policy: Policy,
    /// Citations.
    pub cites: Vec<MessageId>,
    /// Declared grade of its citation edges (`link@…`).
    pub link: EdgeKind,
    /// Per-citation grades (`link:<author:hex64>@…`), overriding `link` for that
    /// citation: a message with one hash-matched and one folded input.
    pub cite_grades: BTreeMap<MessageId, EdgeKind>,
    /// Its leaf index in the sealed log (sealed order; `u64::MAX` when unknown).
    pub leaf: u64,
    /// The principal it was addressed to (who receipts it).
    pub destination: String,
}

impl Node {
    /// The node of message `id` (its envelope `env`) sealed at leaf `leaf` of the log.
    pub fn of(id: MessageId, env: &audita_evidence::Envelope, leaf: u64) -> Node {
        Node {
            id,
            timestamp: env.timestamp,
            payload: env.payload.clone(),
            policy: policy_of(env),
            cites: env.citations.clone(),
            link: link_of(env),
            cite_grades: cite_grades_of(env),
            leaf,
            destination: env.destination.as_str().to_string(),
        }
    }
}

/// What is known of a certified message outside the time window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outside {
    /// Its leaf index in the sealed log.
    pub leaf: u64,
    /// The target its payload names.
    pub target: Option<String>,
}

/// Looks up a certified message outside the time window.
pub type Lookup<'a> = Box<dyn Fn(&MessageId) -> Option<Outside> + 'a>;

/// A missing id and who attests it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingEvidence {
    /// The absent message's id (its author included).
    pub id: MessageId,
    /// Certified messages citing it (each one's authored claim that it existed).
    pub citers: Vec<MessageId>,
    /// Principals whose valid receipts name it (each one's claim that it was
    /// delivered to them).
    pub receipted_by: Vec<String>,
    /// The delivery times those receipts state (record time, ms).
    pub delivered_at: Vec<u64>,
    /// Whether an intact epoch seals it (the log attests it was accepted, signed by
    /// its author, at sealing time).
    pub sealed: bool,
}

/// What a slice is built from: the certified messages of the incident's time window
/// (anchors included, whatever their time), a lookup of certified messages outside
/// it, and the attested completion items. [`Evidence::of`] reads it off a verified
/// record or proven slice; a slicer builds it from the messages it holds, to learn
/// which of them the slice reads ([`Slice::reads`]).
pub struct Evidence<'a> {
    /// Certified messages of the time window and the certified anchors, by id.
    pub window: BTreeMap<MessageId, Node>,
    /// A certified message outside `window`, if the evidence holds it.
    pub outside: Lookup<'a>,
    /// Attested suspect items, by id.
    pub suspect: Vec<AttestedSuspect>,
    /// Missing ids with who attests them, by id.
    pub missing: Vec<MissingEvidence>,
    /// Window messages (in `window`) that are **authentic suspects**: sealed in an
    /// intact epoch, signed by their registered author, failing only a receipt or a
    /// suspect ancestor. Their content is their author's own signed claim, so the
    /// slice reads their citations like a certified message's; breach never reads
    /// them, and every finding they bear on names them. By id, with reason codes.
    pub suspect_nodes: BTreeMap<MessageId, Vec<String>>,
}

impl<'a> Evidence<'a> {
    /// The evidence of `adverse` in a verified record (or proven slice) and its
    /// partition.
    pub fn of(record: &Record, partition: &'a Partition, adverse: &Adverse) -> Evidence<'a> {
        let decl = &adverse.decl;
        let (lo, hi) = (decl.window_start_ms, decl.window_end());
        let mut window = BTreeMap::new();
        for (id, c) in &partition.certified {
            let env = c.envelope.envelope();
            if adverse.anchors.contains(id) || (env.timestamp >= lo && env.timestamp <= hi) {
                window.insert(id.clone(), Node::of(id.clone(), env, c.leaf_index));
            }
        }
        // Attested suspects: sealed in an intact epoch, not a mere duplicate copy.
        // An authentic one (its own signature and seal hold; only a receipt or an
        // ancestor fails) is read for its content.
        let mut suspect: Vec<AttestedSuspect> = Vec::new();
        let mut suspect_nodes = BTreeMap::new();
        for s in &partition.suspect {
            if let audita_evidence::SuspectItem::Message { id, record_index } = &s.item {
                let authentic = s.reasons.iter().all(|r| {
                    matches!(
                        r,
                        SuspectReason::Unreceipted | SuspectReason::CitesSuspect(_)
                    )
                });
                let env = record
                    .envelopes
                    .get(*record_index)
                    .and_then(|b| audita_evidence::SignedEnvelope::decode(b.clone()).ok())
                    .filter(|e| e.id() == id);
                if let (true, Some(env)) = (authentic, env) {
                    let e = env.envelope();
                    if !suspect_nodes.contains_key(id)
                        && (adverse.anchors.contains(id)
                            || (e.timestamp >= lo && e.timestamp <= hi))
                    {
                        window
                            .entry(id.clone())
                            .or_insert_with(|| Node::of(id.clone(), e, u64::MAX));
                        suspect_nodes.insert(
                            id.clone(),
                            s.reasons.iter().map(|r| r.code().to_string()).collect(),
                        );
                    }
                    continue;
                }
                let dup_only = s.reasons.iter().all(|r| *r == SuspectReason::Duplicate);
                if sealed_intact(&s.reasons) && !dup_only && !suspect.iter().any(|x| &x.id == id) {
                    suspect.push(AttestedSuspect {
                        id: id.clone(),
                        reasons: s.reasons.iter().map(|r| r.code().to_string()).collect(),
                    });
                }
            }
        }
        suspect.sort_by(|a, b| a.id.cmp(&b.id));
        Evidence {
            window,
            outside: Box::new(move |id| {
                partition.certified.get(id).map(|c| Outside {
                    leaf: c.leaf_index,
                    target: c.envelope.envelope().payload.target().map(str::to_string),
                })
            }),
            suspect,
            missing: partition
                .missing
                .iter()
                .map(|m| MissingEvidence {
                    id: m.id.clone(),
                    citers: m.certified_citers.clone(),
                    receipted_by: m.receipted_by.iter().map(|p| p.to_string()).collect(),
                    delivered_at: m.receipted_at.clone(),
                    sealed: m.sealed_in.is_some(),
                })
                .collect(),
            suspect_nodes,
        }
    }
}

/// Why a non-certified item is in the completion set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemKind {
    /// Attested (cited, receipted or sealed) but absent.
    Missing,
    /// Present, sealed in an intact epoch, but failing a check.
    Suspect,
    /// Declared anchor that nothing in the record attests.
    Unresolved,
    /// Named only by receipts: each is its signer's claim that a message with this
    /// id was delivered to it, not evidence of the named author's conduct. Never
    /// graded (a message that was never sealed is not certified evidence either way);
    /// listed, with who claims it, where the claimant or the named author is in the
    /// incident's scope.
    Claimed,
}

/// A non-certified item whose presence a completion decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// Its id (author-attributed).
    pub id: MessageId,
    /// Kind.
    pub kind: ItemKind,
    /// Closure (or possible-input region) messages consuming it.
    pub citers: Vec<MessageId>,
    /// Whether it is an anchor.
    pub anchor: bool,
    /// Whether it is enumerated (touches the slice).
    pub touches: bool,
    /// Certified messages and other attested items it may have consumed (sorted;
    /// see the module docs).
    pub inputs: Vec<MessageId>,
    /// Who attests it.
    pub attestation: Attestation,
}

/// Who attests a completion item: the log's seal, certified citers, receipt signers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attestation {
    /// Sealed in an intact epoch (attested suspects always are).
    pub sealed: bool,
    /// Certified messages citing it, anywhere in the evidence.
    pub citers: Vec<MessageId>,
    /// Principals whose valid receipts name it.
    pub receipted_by: Vec<String>,
    /// Delivery times its receipts state (ms, sorted).
    pub delivered_at: Vec<u64>,
}

impl Attestation {
    /// The attesters in words: `seal`, `cited by <id>`, `receipt by <principal>`.
    pub fn describe(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.sealed {
            out.push("seal".to_string());
        }
        out.extend(
            self.citers
                .iter()
                .map(|c| format!("cited by {}", crate::adverse::id_string(c))),
        );
        out.extend(self.receipted_by.iter().map(|r| format!("receipt by {r}")));
        out
    }
}

/// A duty-indexed absence variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Absence {
    /// Variable name `absent.<duty>`.
    pub variable: String,
    /// Duty id.
    pub duty: String,
    /// Holder.
    pub holder: String,
    /// Actuator that was not halted.
    pub target: String,
    /// The triggering certified sensor report (or, for an uncertain absence with no
    /// certified trigger, the first completion item that may have been it).
    pub trigger: MessageId,
    /// Whether it enters `Y` (its target is an anchor's target).
    pub in_outcome: bool,
    /// Whether the record establishes it: a certified trigger, no certified halt in
    /// time, and no completion item of the holder that may have been that halt.
    /// Otherwise a reading chooses whether it holds.
    pub certain: bool,
    /// The completion items that make it uncertain (a possibly deleted trigger, a
    /// possibly deleted halt of the holder), sorted.
    pub uncertain_by: Vec<MessageId>,
}

/// An attested suspect item (sealed in an intact epoch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttestedSuspect {
    /// Id.
    pub id: MessageId,
    /// Reason codes.
    pub reasons: Vec<String>,
}

/// The incident slice.
#[derive(Debug, Clone)]
pub struct Slice {
    /// Certified messages of the time window in the incident's scope (with the
    /// possible-input region), by id.
    pub window: BTreeMap<MessageId, Node>,
    /// Closure (certified, in window, reachable backwards from the anchors).
    pub closure: BTreeSet<MessageId>,
    /// Edges of the closure in (child, parent) order.
    pub edges: Vec<Edge>,
    /// Certified messages outside the closure that an item may have consumed, and
    /// their certified ancestors (the possible-input region).
    pub reach: BTreeSet<MessageId>,
    /// Edges of the possible-input region in (child, parent) order.
    pub reach_edges: Vec<Edge>,
    /// Certified anchors.
    pub anchors: Vec<MessageId>,
    /// Completion items in the incident's scope (missing, attested suspect,
    /// unresolved anchors, receipt-only claims), by id; see the module docs.
    pub items: Vec<Item>,
    /// Duty absences active in the window.
    pub absences: Vec<Absence>,
    /// Declared unrealised messages.
    pub unrealised: BTreeSet<MessageId>,
    /// Authentic suspects read for their content (see [`Evidence::suspect_nodes`]),
    /// those of `window`, with reason codes.
    pub suspect_nodes: BTreeMap<MessageId, Vec<String>>,
    /// Targets of the anchors (certified anchors' and declared).
    pub anchor_targets: BTreeSet<String>,
    /// Whether all anchors are needed for `Y` (`combine: all`).
    pub anchor_combine_all: bool,
    /// The incident's scope (see the module docs).
    pub scope: Scope,
}

fn policy_of(env: &audita_evidence::Envelope) -> Policy {
    if env.payload.is_root() {
        return Policy::Root;
    }
    for t in &env.pins.tools {
        if t.name == "policy" {
            match t.version.as_str() {
                "origin" => return Policy::Origin,
                "relay-all" => return Policy::RelayAll,
                "relay-any" => return Policy::RelayAny,
                _ => {}
            }
        }
    }
    Policy::RelayAny
}

fn link_of(env: &audita_evidence::Envelope) -> EdgeKind {
    for t in &env.pins.tools {
        if t.name == "link" {
            match t.version.as_str() {
                "folded" => return EdgeKind::FoldedTransform,
                "similarity" => return EdgeKind::SimilarityMatch,
                _ => {}
            }
        }
    }
    EdgeKind::HashMatch
}

/// The per-citation grade pins `link:<author:hex64>@hash_match|folded|similarity` of a
/// message, for citations it actually makes (a pin naming anything else is ignored).
fn cite_grades_of(env: &audita_evidence::Envelope) -> BTreeMap<MessageId, EdgeKind> {
    let mut out = BTreeMap::new();
    for t in &env.pins.tools {
        let Some(id) = t.name.strip_prefix("link:") else {
            continue;
        };
        let Ok(id) = crate::adverse::parse_id(id) else {
            continue;
        };
        if !env.citations.contains(&id) {
            continue;
        }
        let kind = match t.version.as_str() {
            "hash_match" => EdgeKind::HashMatch,
            "folded" => EdgeKind::FoldedTransform,
            "similarity" => EdgeKind::SimilarityMatch,
            _ => continue,
        };
        // Two pins for one citation: the weaker grade holds.
        let e = out.entry(id).or_insert(kind);
        if kind > *e {
            *e = kind;
        }
    }
    out
}

/// Whether a suspect finding's message is nevertheless sealed in an intact epoch:
/// the verifier adds [`SuspectReason::Unsealed`] or [`SuspectReason::SealBroken`]
/// exactly when it is not, so this reads the same fact from a full record and from
/// a proof-carrying slice (where no epoch's leaf list is at hand).
pub fn sealed_intact(reasons: &[SuspectReason]) -> bool {
    !reasons.iter().any(|r| {
        matches!(
            r,
            SuspectReason::Unsealed | SuspectReason::SealBroken { .. }
        )
    })
}

/// Walks citations backwards from `queue` through the window: `enter(parent)` says
/// whether a window parent is newly reached (then it is walked too); every citation
/// becomes an edge, and a consumed citation of a completion item marks the item as
/// touching the slice, with its citer.
fn walk_back(
    window: &BTreeMap<MessageId, Node>,
    items: &mut BTreeMap<MessageId, Item>,
    mut queue: VecDeque<MessageId>,
    edges: &mut Vec<Edge>,
    mut enter: impl FnMut(&MessageId) -> bool,
) {
    while let Some(child) = queue.pop_front() {
        let Some(node) = window.get(&child) else {
            continue;
        };
        let consumed = matches!(node.policy, Policy::RelayAny | Policy::RelayAll);
        for c in &node.cites {
            let declared = node.cite_grades.get(c).copied().unwrap_or(node.link);
            let kind = if window.contains_key(c) {
                if enter(c) {
                    queue.push_back(c.clone());
                }
                declared
            } else if let Some(it) = items.get_mut(c) {
                if consumed {
                    it.touches = true;
                    if !it.citers.contains(&child) {
                        it.citers.push(child.clone());
                    }
                }
                declared
            } else {
                EdgeKind::WindowExit
            };
            edges.push(Edge {
                child: child.clone(),
                parent: c.clone(),
                kind,
                consumed,
            });
        }
    }
}

/// The declared anchors that are certified messages of the window; the others
/// become (or stay) unresolved anchor items of `items`.
fn resolve_anchors(
    all: &BTreeMap<MessageId, Node>,
    items: &mut BTreeMap<MessageId, Item>,
    adverse: &Adverse,
) -> Vec<MessageId> {
    let mut anchors = Vec::new();
    for a in &adverse.anchors {
        if all.contains_key(a) {
            anchors.push(a.clone());
        } else {
            let it = items.entry(a.clone()).or_insert(Item {
                id: a.clone(),
                kind: ItemKind::Unresolved,
                citers: Vec::new(),
                anchor: true,
                touches: true,
                inputs: Vec::new(),
                attestation: Attestation::default(),
            });
            if it.kind == ItemKind::Claimed {
                // A declared anchor named by a receipt only: nothing sealed it.
                it.kind = ItemKind::Unresolved;
            }
            it.anchor = true;
            it.touches = true;
        }
    }
    anchors
}

/// The messages of `all` the scope keeps (given the closure and the halt duties in
/// scope), with the certified inputs of every kept message (breach reads them).
fn scoped_window(
    all: &BTreeMap<MessageId, Node>,
    scope: &Scope,
    closure: &BTreeSet<MessageId>,
    duties: &DutyRegistry,
) -> BTreeMap<MessageId, Node> {
    let halts: Vec<&Duty> = duties
        .all()
        .filter(|(h, d)| matches!(d, Duty::HaltAuthority { .. }) && scope.duty_in_scope(h, d))
        .map(|(_, d)| d)
        .collect();
    let mut window: BTreeMap<MessageId, Node> = all
        .iter()
        .filter(|(_, n)| scope.keeps(n, closure, &halts, duties))
        .map(|(id, n)| (id.clone(), n.clone()))
        .collect();
    // A kept message's certified inputs stay (breach reads them).
    let parents: Vec<MessageId> = window
        .values()
        .flat_map(|n| n.cites.iter())
        .filter(|c| !window.contains_key(*c) && all.contains_key(*c))
        .cloned()
        .collect();
    for c in parents {
        if let Some(n) = all.get(&c) {
            window.insert(c, n.clone());
        }
    }
    window
}

/// What the possible inputs of a touching item are drawn from.
struct InputRegion<'a> {
    /// Every certified message of the time window.
    all: &'a BTreeMap<MessageId, Node>,
    /// The scoped window.
    window: &'a BTreeMap<MessageId, Node>,
    /// Commands declared not realised.
    unrealised: BTreeSet<MessageId>,
    /// The time window `[lo, hi]` (ms).
    window_ms: (u64, u64),
    /// Citing messages per message.
    children: BTreeMap<&'a MessageId, Vec<&'a MessageId>>,
}

impl<'a> InputRegion<'a> {
    /// The region over `all` and the scoped `window` of `adverse`.
    fn new(
        all: &'a BTreeMap<MessageId, Node>,
        window: &'a BTreeMap<MessageId, Node>,
        adverse: &Adverse,
    ) -> InputRegion<'a> {
        let mut children: BTreeMap<&MessageId, Vec<&MessageId>> = BTreeMap::new();
        for n in all.values() {
            for c in &n.cites {
                children.entry(c).or_default().push(&n.id);
            }
        }
        InputRegion {
            all,
            window,
            unrealised: adverse.unrealised.iter().cloned().collect(),
            window_ms: (adverse.decl.window_start_ms, adverse.decl.window_end()),
            children,
        }
    }

    /// Possible inputs of the touching items and the region they open outside the
    /// `closure`, to a fixed point (an item consumed in the region, or chosen as
    /// another item's possible input, touches the slice too): the region and its
    /// edges. Each touching item's `inputs` are set.
    fn grow(
        &self,
        closure: &BTreeSet<MessageId>,
        items: &mut BTreeMap<MessageId, Item>,
    ) -> (BTreeSet<MessageId>, Vec<Edge>) {
        let mut reach: BTreeSet<MessageId> = BTreeSet::new();
        let mut reach_edges = Vec::new();
        let mut done: BTreeSet<MessageId> = BTreeSet::new();
        loop {
            let pending: Vec<MessageId> = items
                .values()
                .filter(|i| i.touches && i.kind != ItemKind::Claimed && !done.contains(&i.id))
                .map(|i| i.id.clone())
                .collect();
            if pending.is_empty() {
                break;
            }
            // Past this many touching items the readings exceed the cap whatever
            // their inputs (each has at least three choices): the verdict abstains,
            // so the (quadratic) input search is not worth running.
            let touching = items
                .values()
                .filter(|i| i.touches && i.kind != ItemKind::Claimed)
                .count();
            if touching > MAX_TOUCHING {
                break;
            }
            for id in pending {
                done.insert(id.clone());
                let inputs = self.possible_inputs(&id, items);
                let mut queue: VecDeque<MessageId> = VecDeque::new();
                for c in inputs.iter().filter(|c| self.all.contains_key(*c)) {
                    if !closure.contains(c) && reach.insert(c.clone()) {
                        queue.push_back(c.clone());
                    }
                }
                if let Some(it) = items.get_mut(&id) {
                    it.inputs = inputs;
                }
                walk_back(self.all, items, queue, &mut reach_edges, |c| {
                    !closure.contains(c) && reach.insert(c.clone())
                });
            }
        }
        reach_edges.sort();
        reach_edges.dedup();
        (reach, reach_edges)
    }

    /// The possible inputs of item `id` (sorted): the derived certified messages its
    /// author knows or the window holds, neither unrealised nor downstream of it, and
    /// the other items its author can have consumed (which then touch the slice).
    fn possible_inputs(
        &self,
        id: &MessageId,
        items: &mut BTreeMap<MessageId, Item>,
    ) -> Vec<MessageId> {
        let all = self.all;
        let (window_lo, window_hi) = self.window_ms;
        let descendants = descendants(id, &self.children);
        let author = id.author.as_str();
        let known = known_to(author, all);
        let mut inputs: Vec<MessageId> = all
            .values()
            .filter(|n| self.window.contains_key(&n.id) || known.contains(&n.id))
            .filter(|n| n.policy != Policy::Root)
            .filter(|n| !self.unrealised.contains(&n.id))
            .filter(|n| !descendants.contains(&n.id))
            .map(|n| n.id.clone())
            .collect();
        // Another attested item its author can have consumed (a chain of
        // deletions): its own, one receipted by it, one whose delivery nobody
        // attests (no receipt survives), one delivered to anybody during the
        // time window (window traffic: a citer need not be the destination),
        // or one cited by a message it knows. It then touches the slice. Two
        // items consuming each other close a citation cycle, which no reading
        // admits.
        let cited_by_known = |j: &MessageId| {
            known
                .iter()
                .filter_map(|k| all.get(k))
                .any(|n| n.cites.contains(j))
        };
        let more: Vec<MessageId> = items
            .values()
            .filter(|j| j.id != *id)
            .filter(|j| !matches!(j.kind, ItemKind::Unresolved | ItemKind::Claimed))
            .filter(|j| {
                j.id.author.as_str() == author
                    || j.attestation.receipted_by.is_empty()
                    || j.attestation.receipted_by.iter().any(|r| r == author)
                    || j.attestation
                        .delivered_at
                        .iter()
                        .any(|t| *t >= window_lo && *t <= window_hi)
                    || cited_by_known(&j.id)
            })
            .map(|j| j.id.clone())
            .collect();
        for e in &more {
            if let Some(it) = items.get_mut(e) {
                it.touches = true;
            }
        }
        inputs.extend(more);
        inputs.sort();
        inputs.dedup();
        inputs
    }
}

/// The items of this incident: those that touch it, and those its scope names
/// (authored by or delivered to a principal in scope, or cited by a message the
/// window keeps); anything else is another incident's business. Their citers are
/// sorted, and only the attested citers the window holds are kept.
fn items_in_scope(
    items: BTreeMap<MessageId, Item>,
    window: &BTreeMap<MessageId, Node>,
    scope: &Scope,
) -> Vec<Item> {
    let authors: BTreeSet<&str> = window
        .values()
        .filter(|n| n.policy != Policy::Root)
        .map(|n| n.id.author.as_str())
        .chain(scope.principals.iter().map(String::as_str))
        .collect();
    let in_scope = |it: &Item| {
        it.touches
            || authors.contains(it.id.author.as_str())
            || it
                .attestation
                .receipted_by
                .iter()
                .any(|r| authors.contains(r.as_str()))
            || it.attestation.citers.iter().any(|c| window.contains_key(c))
            || scope.unknown_anchor
    };
    let mut items: Vec<Item> = items.into_values().filter(|i| in_scope(i)).collect();
    for it in &mut items {
        it.citers.sort();
        // Only the citers the slice holds are reported (a proof-carrying slice
        // holds no others).
        it.attestation.citers.retain(|c| window.contains_key(c));
    }
    items
}

impl Slice {
    /// Builds the slice of `adverse` over a verified record.
    pub fn build(
        record: &Record,
        partition: &Partition,
        duties: &DutyRegistry,
        adverse: &Adverse,
    ) -> Slice {
        Slice::from_evidence(&Evidence::of(record, partition, adverse), duties, adverse)
    }

    /// Builds the slice of `adverse` from its evidence.
    pub fn from_evidence(
        evidence: &Evidence<'_>,
        duties: &DutyRegistry,
        adverse: &Adverse,
    ) -> Slice {
        // Every certified message of the time window; the slice keeps only its scope.
        let all = &evidence.window;
        let mut items = candidate_items(evidence);
        let anchors = resolve_anchors(all, &mut items, adverse);
        // Backward closure.
        let mut closure = BTreeSet::new();
        let mut edges = Vec::new();
        let queue: VecDeque<MessageId> = anchors.iter().cloned().collect();
        for a in &anchors {
            closure.insert(a.clone());
        }
        walk_back(all, &mut items, queue, &mut edges, |c| {
            closure.insert(c.clone())
        });
        edges.sort();
        edges.dedup();
        // Without an anchor, the authors of commands declared issued but not shown
        // realised are in scope: the record cannot exclude that they produced the
        // outcome, so they are judged (never silently left out, never exonerated).
        let unshown: &[MessageId] = if adverse.anchors.is_empty() {
            &adverse.unrealised
        } else {
            &[]
        };
        let scope = Scope::of(
            &*evidence.outside,
            duties,
            all,
            &closure,
            &items,
            &adverse.decl.targets,
            unshown,
        );
        let mut window = scoped_window(all, &scope, &closure, duties);
        // Items a halt duty in scope reads: a possibly deleted trigger, a possibly
        // deleted halt of its holder. They touch the slice through the absence's
        // on/off choice.
        let duty_items = halt_duty_items(duties, &scope, &items);
        for ids in duty_items.values() {
            for id in ids.triggers.iter().chain(&ids.halts) {
                if let Some(it) = items.get_mut(id) {
                    it.touches = true;
                }
            }
        }
        let (reach, reach_edges) =
            InputRegion::new(all, &window, adverse).grow(&closure, &mut items);
        // The possible-input region joins the window: its messages enter models.
        for id in &reach {
            if let Some(n) = all.get(id) {
                window.entry(id.clone()).or_insert_with(|| n.clone());
            }
        }
        let items = items_in_scope(items, &window, &scope);
        let mut anchor_targets: BTreeSet<String> = anchors
            .iter()
            .filter_map(|a| window.get(a))
            .filter_map(|n| n.payload.target().map(str::to_string))
            .collect();
        anchor_targets.extend(adverse.decl.targets.iter().cloned());
        let suspect_nodes: BTreeMap<MessageId, Vec<String>> = evidence
            .suspect_nodes
            .iter()
            .filter(|(id, _)| window.contains_key(*id))
            .map(|(id, r)| (id.clone(), r.clone()))
            .collect();
        let absences = absences(
            &window,
            duties,
            adverse,
            &anchor_targets,
            &scope,
            &duty_items,
        );
        Slice {
            scope,
            window,
            closure,
            edges,
            reach,
            reach_edges,
            anchors,
            items,
            absences,
            unrealised: adverse.unrealised.iter().cloned().collect(),
            suspect_nodes,
            anchor_targets,
            anchor_combine_all: adverse.decl.combine == crate::adverse::Combine::All,
        }
    }

    /// The messages of `evidence` (the evidence this slice was built from) that the
    /// build reads: building the slice again from an evidence whose `window` holds
    /// only these (same items, same outside lookups) gives the same slice. A slicer
    /// ships them instead of the whole time window, which in a fleet is mostly other
    /// cells' traffic. They are:
    /// - the scoped window (kept messages, their certified parents, the
    ///   possible-input region), the closure and the certified citers of every
    ///   missing id (so each deletion the window attests is still listed);
    /// - when a completion item touches the slice: what its author can have consumed
    ///   (its inputs are drawn from there), its citers, and the window ancestors of
    ///   everything above (the paths that make a candidate an item's descendant, and
    ///   the region behind each candidate).
    ///
    /// Ids outside `evidence.window` may be among them (certified citers and closure
    /// members from before the window).
    pub fn reads(&self, evidence: &Evidence<'_>) -> BTreeSet<MessageId> {
        let mut out: BTreeSet<MessageId> = self
            .window
            .keys()
            .chain(&self.closure)
            .chain(&self.reach)
            .cloned()
            .collect();
        for it in &self.items {
            out.extend(it.attestation.citers.iter().cloned());
            out.extend(it.citers.iter().cloned());
        }
        let mut touching = self.touching_items().peekable();
        if touching.peek().is_some() {
            for it in touching {
                out.extend(known_to(it.id.author.as_str(), &evidence.window));
                out.extend(it.citers.iter().cloned());
            }
            let within: Vec<MessageId> = out
                .iter()
                .filter(|id| evidence.window.contains_key(*id))
                .cloned()
                .collect();
            out.extend(ancestors(within, &evidence.window));
        }
        out
    }

    /// Completion items that are enumerated.
    pub fn touching_items(&self) -> impl Iterator<Item = &Item> {
        self.items
            .iter()
            .filter(|i| i.touches && i.kind != ItemKind::Claimed)
    }

    /// The graded completion item `id` (missing or attested suspect), if the slice
    /// holds it.
    pub fn graded_item(&self, id: &MessageId) -> Option<&Item> {
        self.items
            .iter()
            .find(|i| &i.id == id && matches!(i.kind, ItemKind::Missing | ItemKind::Suspect))
    }

    /// Consumed non-witness edges of the closure and of the possible-input region
    /// (hypotheses).
    pub fn hypotheses(&self) -> Vec<&Edge> {
        self.edges
            .iter()
            .chain(&self.reach_edges)
            .filter(|e| {
                e.consumed
                    && matches!(
                        e.kind,
                        EdgeKind::FoldedTransform | EdgeKind::SimilarityMatch
                    )
            })
            .collect()
    }

    /// The author of a slice message or item.
    pub fn author_of(id: &MessageId) -> &str {
        id.author.as_str()
    }
}

/// The incident's scope: what of the time window can bear on this incident (see the
/// module docs for the rule and why it is sound).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    /// Targets named by the closure (anchors included) and by its cited parents.
    pub targets: BTreeSet<String>,
    /// Authors of closure members and of anchor items, holders of duties on a target
    /// in scope, and the actuators in scope themselves.
    pub principals: BTreeSet<String>,
    /// An anchor is a completion item: its target is unknown, so the scope is the
    /// whole window (every message, duty and absence).
    pub unknown_anchor: bool,
}

impl Scope {
    fn of(
        outside: &dyn Fn(&MessageId) -> Option<Outside>,
        duties: &DutyRegistry,
        all: &BTreeMap<MessageId, Node>,
        closure: &BTreeSet<MessageId>,
        items: &BTreeMap<MessageId, Item>,
        declared: &[String],
        unshown: &[MessageId],
    ) -> Scope {
        let mut targets: BTreeSet<String> = declared.iter().cloned().collect();
        let mut principals: BTreeSet<String> =
            unshown.iter().map(|u| u.author.to_string()).collect();
        for id in closure {
            principals.insert(id.author.to_string());
            let Some(n) = all.get(id) else { continue };
            targets.extend(n.payload.target().map(str::to_string));
            for c in &n.cites {
                let target = match all.get(c) {
                    Some(p) => p.payload.target().map(str::to_string),
                    None => outside(c).and_then(|o| o.target),
                };
                targets.extend(target);
            }
        }
        // A missing anchor's target is gone with its payload: the declared targets
        // name it; without them the scope cannot be known.
        let mut unknown_anchor = false;
        for it in items.values().filter(|i| i.anchor) {
            unknown_anchor = declared.is_empty();
            principals.insert(it.id.author.to_string());
        }
        principals.extend(targets.iter().cloned());
        let mut scope = Scope {
            targets,
            principals,
            unknown_anchor,
        };
        let holders: Vec<String> = duties
            .all()
            .filter(|(_, d)| scope.duty_targets_scope(d))
            .map(|(h, _)| h.to_string())
            .collect();
        scope.principals.extend(holders);
        scope
    }

    /// Whether a duty names a target in scope.
    fn duty_targets_scope(&self, duty: &Duty) -> bool {
        match duty {
            Duty::SafetyEnvelope { target, .. }
            | Duty::HaltAuthority { target, .. }
            | Duty::Aggregation { target, .. }
            | Duty::Vda5050EdgeRelease { target, .. }
            | Duty::Vda5050EdgeSpeed { target, .. } => self.targets.contains(target),
            Duty::ReviewRequired { .. } => false,
        }
    }

    /// Whether `holder`'s `duty` is in scope: it names a target in scope, or it has no
    /// target and its holder is in scope. With an unknown anchor every halt duty is.
    pub fn duty_in_scope(&self, holder: &str, duty: &Duty) -> bool {
        match duty {
            _ if self.unknown_anchor => true,
            Duty::ReviewRequired { .. } => self.principals.contains(holder),
            d => self.duty_targets_scope(d),
        }
    }

    /// Whether a window message is kept: in the closure, naming a target in scope,
    /// authored by a principal in scope, or triggering a halt duty in scope.
    /// `halts` are the halt duties in scope.
    fn keeps(
        &self,
        n: &Node,
        closure: &BTreeSet<MessageId>,
        halts: &[&Duty],
        duties: &DutyRegistry,
    ) -> bool {
        self.unknown_anchor
            || closure.contains(&n.id)
            || n.payload.target().is_some_and(|t| self.targets.contains(t))
            || self.principals.contains(n.id.author.as_str())
            || halts.iter().any(|d| triggers(d, n))
            || realises_outcome_when_reverted(n, duties)
    }
}

/// The window messages `author` can have consumed: its own, those delivered to it
/// (addressed to it; the recipient signs the receipt), and their certified ancestors
/// in the window.
fn known_to(author: &str, all: &BTreeMap<MessageId, Node>) -> BTreeSet<MessageId> {
    let seeds = all
        .values()
        .filter(|n| n.id.author.as_str() == author || n.destination == author)
        .map(|n| n.id.clone());
    ancestors(seeds, all)
}

/// `seeds` and their certified ancestors in `all`.
pub(crate) fn ancestors(
    seeds: impl IntoIterator<Item = MessageId>,
    all: &BTreeMap<MessageId, Node>,
) -> BTreeSet<MessageId> {
    let mut out = BTreeSet::new();
    let mut stack: Vec<MessageId> = seeds.into_iter().collect();
    while let Some(id) = stack.pop() {
        if !all.contains_key(&id) || !out.insert(id.clone()) {
            continue;
        }
        for c in &all[&id].cites {
            if all.contains_key(c) && !out.contains(c) {
                stack.push(c.clone());
            }
        }
    }
    out
}

/// Whether `n` is a deviation from its author's reference policy whose declared
/// counterpart realises the outcome: the registry ties such a counterpart to `Y`
/// itself (not to a target), so the deviation is in every incident's scope.
fn realises_outcome_when_reverted(n: &Node, duties: &DutyRegistry) -> bool {
    n.policy != Policy::Root
        && duties
            .principals
            .get(n.id.author.as_str())
            .is_some_and(|d| {
                d.reference.iter().any(|r| {
                    r.counterpart.as_ref().is_some_and(|c| c.realises_outcome)
                        && r.matches(&n.payload, &n.cites)
                })
            })
}

/// Whether `n` is a triggering sensor report of a halt duty. `trigger_sensor` names
/// the principal that signs the report (the payload's `sensor` field is the signer's
/// own label: it cannot make another principal's report a trigger).
fn triggers(duty: &Duty, n: &Node) -> bool {
    let Duty::HaltAuthority {
        trigger_contains,
        trigger_sensor,
        ..
    } = duty
    else {
        return false;
    };
    match &n.payload {
        Payload::SensorReport { reading, .. } => {
            reading.contains(trigger_contains.as_str())
                && trigger_sensor
                    .as_ref()
                    .is_none_or(|s| s == n.id.author.as_str())
        }
        _ => false,
    }
}

/// The part of [`Scope`]'s rule for keeping a window message that does not depend
/// on the incident: the message triggers one of the registry's halt duties, or it
/// is a deviation whose declared counterpart realises the outcome. With its author,
/// its target and membership of the citation closure, this is every reason a scope
/// keeps a message, so a slicer can classify each message once, on arrival, and
/// narrow a window to a superset of what a slice keeps without decoding the window
/// again (a superset: it does not ask whether the halt duty is in the incident's
/// scope). Prepared once per registry: a message costs a lookup by its author.
#[derive(Debug, Clone, Default)]
pub struct KeptInEveryScope {
    /// Trigger substrings of halt duties naming their trigger sensor, by sensor.
    by_sensor: BTreeMap<String, Vec<String>>,
    /// Trigger substrings of halt duties naming none (any author's report).
    any_sensor: Vec<String>,
    /// Reference rules whose counterpart realises the outcome, by principal.
    deviations: BTreeMap<String, Vec<crate::Rule>>,
}

impl KeptInEveryScope {
    /// Prepares the test for `duties`.
    pub fn new(duties: &DutyRegistry) -> KeptInEveryScope {
        let mut out = KeptInEveryScope::default();
        for (_, d) in duties.all() {
            if let Duty::HaltAuthority {
                trigger_contains,
                trigger_sensor,
                ..
            } = d
            {
                match trigger_sensor {
                    Some(s) => out
                        .by_sensor
                        .entry(s.clone())
                        .or_default()
                        .push(trigger_contains.clone()),
                    None => out.any_sensor.push(trigger_contains.clone()),
                }
            }
        }
        for (p, d) in &duties.principals {
            let rules: Vec<crate::Rule> = d
                .reference
                .iter()
                .filter(|r| r.counterpart.as_ref().is_some_and(|c| c.realises_outcome))
                .cloned()
                .collect();
            if !rules.is_empty() {
                out.deviations.insert(p.clone(), rules);
            }
        }
        out
    }

    /// Whether every incident's scope whose window holds `env` keeps it (the same
    /// test as `triggers` over every halt duty and `realises_outcome_when_reverted`).
    pub fn keeps(&self, env: &audita_evidence::Envelope) -> bool {
        let author = env.author.as_str();
        if let Payload::SensorReport { reading, .. } = &env.payload {
            let hit = |cs: &Vec<String>| cs.iter().any(|c| reading.contains(c.as_str()));
            if hit(&self.any_sensor) || self.by_sensor.get(author).is_some_and(hit) {
                return true;
            }
        }
        self.deviations.get(author).is_some_and(|rules| {
            policy_of(env) != Policy::Root
                && rules
                    .iter()
                    .any(|r| r.matches(&env.payload, &env.citations))
        })
    }
}

/// The completion items of the evidence, keyed by id, each with who attests it. A
/// missing id attested neither by a seal nor by a certified citer is named only by
/// receipts ([`ItemKind::Claimed`]).
fn candidate_items(evidence: &Evidence<'_>) -> BTreeMap<MessageId, Item> {
    let mut items = BTreeMap::new();
    for m in &evidence.missing {
        let mut receipted_by = m.receipted_by.clone();
        receipted_by.sort();
        receipted_by.dedup();
        let mut citers = m.citers.clone();
        citers.sort();
        citers.dedup();
        let mut delivered_at = m.delivered_at.clone();
        delivered_at.sort();
        delivered_at.dedup();
        let kind = if !m.sealed && citers.is_empty() {
            ItemKind::Claimed
        } else {
            ItemKind::Missing
        };
        items.insert(
            m.id.clone(),
            Item {
                id: m.id.clone(),
                kind,
                citers: Vec::new(),
                anchor: false,
                touches: false,
                inputs: Vec::new(),
                attestation: Attestation {
                    sealed: m.sealed,
                    citers,
                    receipted_by,
                    delivered_at,
                },
            },
        );
    }
    for s in &evidence.suspect {
        items.insert(
            s.id.clone(),
            Item {
                id: s.id.clone(),
                kind: ItemKind::Suspect,
                citers: Vec::new(),
                anchor: false,
                touches: false,
                inputs: Vec::new(),
                attestation: Attestation {
                    sealed: true,
                    ..Attestation::default()
                },
            },
        );
    }
    items
}

/// The completion items a halt duty reads.
#[derive(Debug, Clone, Default)]
struct DutyItems {
    /// Items that may have been a triggering report (by the trigger sensor; by
    /// anyone when the duty names none).
    triggers: Vec<MessageId>,
    /// Items of the holder that may have been the required halt.
    halts: Vec<MessageId>,
}

/// For every halt duty in scope (by duty id), the graded completion items that may
/// have been its trigger or its holder's halt: their content is gone, so the record
/// no longer decides whether the duty's absence holds.
fn halt_duty_items(
    duties: &DutyRegistry,
    scope: &Scope,
    items: &BTreeMap<MessageId, Item>,
) -> BTreeMap<String, DutyItems> {
    let mut out = BTreeMap::new();
    for (holder, duty) in duties.all() {
        let Duty::HaltAuthority {
            id, trigger_sensor, ..
        } = duty
        else {
            continue;
        };
        if !scope.duty_in_scope(holder, duty) {
            continue;
        }
        let graded = || {
            items
                .values()
                .filter(|i| matches!(i.kind, ItemKind::Missing | ItemKind::Suspect))
        };
        let d = DutyItems {
            triggers: graded()
                .filter(|i| {
                    trigger_sensor
                        .as_ref()
                        .is_none_or(|s| s == i.id.author.as_str())
                })
                .map(|i| i.id.clone())
                .collect(),
            halts: graded()
                .filter(|i| i.id.author.as_str() == holder)
                .map(|i| i.id.clone())
                .collect(),
        };
        if !d.triggers.is_empty() || !d.halts.is_empty() {
            out.insert(id.clone(), d);
        }
    }
    out
}

/// Window messages citing `id`, directly or through other window messages.
fn descendants(
    id: &MessageId,
    children: &BTreeMap<&MessageId, Vec<&MessageId>>,
) -> BTreeSet<MessageId> {
    let mut out = BTreeSet::new();
    let mut stack = vec![id];
    while let Some(m) = stack.pop() {
        for c in children.get(m).into_iter().flatten() {
            if out.insert((*c).clone()) {
                stack.push(c);
            }
        }
    }
    out
}

fn absences(
    window: &BTreeMap<MessageId, Node>,
    duties: &DutyRegistry,
    adverse: &Adverse,
    anchor_targets: &BTreeSet<String>,
    scope: &Scope,
    duty_items: &BTreeMap<String, DutyItems>,
) -> Vec<Absence> {
    let t_star = adverse.decl.t_star_ms;
    let mut out = Vec::new();
    for (holder, duty) in duties.all() {
        if !scope.duty_in_scope(holder, duty) {
            continue;
        }
        let Duty::HaltAuthority {
            id,
            target,
            deadline_ms,
            ..
        } = duty
        else {
            continue;
        };
        let mut triggers: Vec<&Node> = window
            .values()
            .filter(|n| self::triggers(duty, n))
            .filter(|n| n.timestamp.saturating_add(*deadline_ms) <= t_star)
            .collect();
        triggers.sort_by_key(|n| (n.timestamp, n.id.clone()));
        let unfulfilled = triggers.into_iter().find(|trig| {
            let end = trig.timestamp.saturating_add(*deadline_ms);
            !window.values().any(|n| {
                n.id.author.as_str() == holder
                    && matches!(&n.payload, Payload::Halt { target: t } if t == target)
                    && n.timestamp >= trig.timestamp
                    && n.timestamp <= end
            })
        });
        let items = duty_items.get(id).cloned().unwrap_or_default();
        // A certified unfulfilled trigger establishes the absence unless a completion
        // item of the holder may have been the halt; without one, a completion item
        // that may have been a trigger leaves it open.
        let (trigger, certain, mut uncertain_by) = match unfulfilled {
            Some(t) => (t.id.clone(), items.halts.is_empty(), items.halts.clone()),
            None => match items.triggers.first() {
                Some(first) => {
                    let mut by = items.triggers.clone();
                    by.extend(items.halts.iter().cloned());
                    (first.clone(), false, by)
                }
                None => continue,
            },
        };
        uncertain_by.sort();
        uncertain_by.dedup();
        out.push(Absence {
            variable: format!("absent.{id}"),
            duty: id.clone(),
            holder: holder.to_string(),
            target: target.clone(),
            trigger,
            in_outcome: anchor_targets.contains(target),
            certain,
            uncertain_by,
        });
    }
    out
}
