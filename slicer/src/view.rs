//! What an emitter has gathered of one incident's messages from the shards, and what
//! it computes over it: the scope of the slice, what the verdict and the monitor's
//! check read, and the self-contained bundle.
//!
//! Design constraints:
//! - Computed exactly as an engine worker will over the bundle ([`Slice::reads`],
//!   [`audita_monitor::reads`]), over the gathered messages only: the closure and
//!   anchors first, then the window messages the scope picks (or every one of the
//!   window), with their window parents.
//! - The narrowed window is used only when it provably reads the same as the whole
//!   window: every anchor and closure member held with every parent held, no window
//!   message unsettled at any shard, and no window second citing a parent stamped
//!   before the latest eviction point of any shard (then every parent of every
//!   window message is held, so nothing of the window is missing). Otherwise the
//!   whole window is gathered, with the parents of its messages, and missing
//!   citations are read off what came back.
//! - The bundle lists its members in canonical (message-id) order, each receipt in
//!   the order its epochs sealed it, each proof against its own epoch, so it does not
//!   depend on how many workers gathered it or in which order answers came.

use crate::wire::{key, Asked, Key, Record, WindowCheck};
use audita_evidence::{MessageId, ProvenSlice, SignedEnvelope};
use audita_monitor::predicate::site_of;
use audita_topics::SliceBundle;
use audita_verdict::slice::{Evidence, MissingEvidence, Node, Outside};
use audita_verdict::{Adverse, DutyRegistry, Slice};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A message id (the SHA-256 digest of its envelope).
pub type NodeId = [u8; 32];

/// A gathered message, decoded once.
pub struct Rec {
    /// Its id.
    pub id: MessageId,
    /// Its envelope, decoded.
    pub env: audita_evidence::Envelope,
    /// Its epoch.
    pub epoch: u64,
    /// Its leaf index.
    pub leaf: u64,
    /// Signed envelope bytes.
    pub bytes: Vec<u8>,
    /// Receipts, in sealing order.
    pub receipts: Vec<Vec<u8>>,
}

/// Messages gathered for one incident.
#[derive(Default)]
pub struct Gathered {
    recs: HashMap<Key, Rec>,
    /// What each shard said of the window's completeness.
    checks: Vec<WindowCheck>,
}

impl Gathered {
    /// Adds the records of one answer (an undecodable one is left out: the shard
    /// decoded it when it took it, so this is a spill read gone wrong).
    pub fn add(&mut self, records: Vec<Record>, check: Option<WindowCheck>) {
        self.checks.extend(check);
        for r in records {
            let Ok(env) = SignedEnvelope::decode(r.bytes) else {
                continue;
            };
            let k = key(&env.id().digest);
            let mut receipts = r.receipts;
            receipts.sort_by_key(|(e, i, _)| (*e, *i));
            self.recs.insert(
                k,
                Rec {
                    id: env.id().clone(),
                    env: env.envelope().clone(),
                    epoch: r.epoch,
                    leaf: r.leaf,
                    bytes: env.as_bytes().to_vec(),
                    receipts: receipts.into_iter().map(|(_, _, b)| b).collect(),
                },
            );
        }
    }

    /// A gathered message.
    pub fn get(&self, n: &NodeId) -> Option<&Rec> {
        self.recs.get(&key(n)).filter(|r| &r.id.digest == n)
    }

    /// A gathered message by key.
    pub fn by_key(&self, k: Key) -> Option<&Rec> {
        self.recs.get(&k)
    }

    /// Whether a message is among the gathered.
    pub fn holds(&self, n: &NodeId) -> bool {
        self.get(n).is_some()
    }

    /// The gathered messages stamped within `[lo, hi]`.
    pub fn in_time(&self, lo: u64, hi: u64) -> BTreeSet<NodeId> {
        self.recs
            .values()
            .filter(|r| r.env.timestamp >= lo && r.env.timestamp <= hi)
            .map(|r| r.id.digest)
            .collect()
    }

    /// Every window message of every shard is settled and none cites a parent
    /// stamped before `evicted` (the latest eviction point of any shard).
    pub fn window_whole(&self, evicted: u64) -> bool {
        self.checks
            .iter()
            .all(|c| !c.unsettled && c.oldest_cited >= evicted)
    }

    /// The slice's evidence from window messages and missing ids (with their
    /// citers); gathered messages outside the window are looked up.
    pub fn evidence(
        &self,
        window: BTreeMap<MessageId, Node>,
        missing: BTreeMap<MessageId, BTreeSet<MessageId>>,
    ) -> Evidence<'_> {
        Evidence {
            window,
            outside: Box::new(|id: &MessageId| {
                self.get(&id.digest).map(|r| Outside {
                    leaf: r.leaf,
                    target: r.env.payload.target().map(str::to_string),
                })
            }),
            suspect: Vec::new(),
            missing: missing
                .into_iter()
                .map(|(id, citers)| MissingEvidence {
                    id,
                    citers: citers.into_iter().collect(),
                    receipted_by: Vec::new(),
                    delivered_at: Vec::new(),
                    sealed: false,
                })
                .collect(),
            suspect_nodes: BTreeMap::new(),
        }
    }
}

/// The names the narrowed window of `adverse` is picked by, from its gathered
/// closure (`closure`: every key the dataflow's closure holds, anchors included), or
/// `None` when the narrowed window cannot be shown to read what the whole window
/// reads (module docs). `evicted`: the latest eviction point of any shard.
///
/// Why it is exact. When every anchor is held and no message of the window or the
/// closure cites an id not held, the slice has no completion items, and then
/// [`Slice::from_evidence`] reads the window only through its scope: the messages
/// [`audita_verdict::slice::Scope`] keeps (the closure; those naming a target in
/// scope or authored by a principal in scope; halt triggers; deviations realising
/// the outcome) and their window parents, while the region of possible inputs and
/// the item rules, which read every window message, are empty. The scope depends
/// only on the closure, so it is computed first from the closure alone. A window
/// message is then picked when its facets say the scope could keep it or the
/// monitor's derivation could read it ([`crate::shard::Shard::picks`]), and the
/// parents of every pick come with it: every message kept over the whole window is
/// picked, and a picked message that is not kept is read by nothing.
pub fn narrow(
    g: &Gathered,
    adverse: &Adverse,
    duties: &DutyRegistry,
    predicates: Option<&audita_monitor::Predicates>,
    closure: &BTreeSet<Key>,
    evicted: u64,
) -> Option<Asked> {
    let (lo, hi) = (adverse.decl.window_start_ms, adverse.decl.window_end());
    let in_time = |t: u64| t >= lo && t <= hi;
    let anchors: Vec<NodeId> = adverse.anchors.iter().map(|a| a.digest).collect();
    // Every anchor and closure member held, with every parent held.
    let mut ancestry: BTreeSet<NodeId> = BTreeSet::new();
    let mut stack: Vec<NodeId> = anchors.clone();
    for k in closure {
        stack.push(g.by_key(*k)?.id.digest);
    }
    while let Some(n) = stack.pop() {
        if !ancestry.insert(n) {
            continue;
        }
        let r = g.get(&n)?;
        for c in &r.env.citations {
            if !g.holds(&c.digest) {
                return None;
            }
            if !ancestry.contains(&c.digest) {
                stack.push(c.digest);
            }
        }
    }
    // The scope, from the closure alone.
    let mut core = BTreeMap::new();
    for n in &ancestry {
        let r = g.get(n)?;
        if anchors.contains(n) || in_time(r.env.timestamp) {
            core.insert(r.id.clone(), Node::of(r.id.clone(), &r.env, r.leaf));
        }
    }
    let scope = Slice::from_evidence(&g.evidence(core, BTreeMap::new()), duties, adverse).scope;
    if scope.unknown_anchor || !g.window_whole(evicted) {
        return None;
    }
    let every_site = adverse.decl.targets.is_empty();
    let sites: BTreeSet<Option<String>> = adverse
        .decl
        .targets
        .iter()
        .map(|t| site_of(predicates, t).map(str::to_string))
        .collect();
    Some(Asked {
        targets: scope.targets.into_iter().collect(),
        principals: scope.principals.into_iter().collect(),
        declared: adverse.decl.targets.clone(),
        sites: sites.into_iter().collect(),
        every_site,
    })
}

/// What the verdict of `adverse` reads, computed over the gathered window messages
/// `among` with the anchors and the `closure`: every one of them in the time window
/// (and the anchors) is certified evidence, held messages outside the window are
/// looked up — exactly as an engine worker builds the slice from the bundle — and,
/// with `missing_known`, a citation of an id not gathered is missing (with its
/// citers). Also what the monitor reads to re-derive the declaration. Returns the
/// number of window messages decoded, and the reads.
pub fn reads_among(
    g: &Gathered,
    adverse: &Adverse,
    duties: &DutyRegistry,
    predicates: Option<&audita_monitor::Predicates>,
    closure: &BTreeSet<NodeId>,
    among: impl IntoIterator<Item = NodeId>,
    missing_known: bool,
) -> (usize, BTreeSet<NodeId>) {
    let (lo, hi) = (adverse.decl.window_start_ms, adverse.decl.window_end());
    let anchors: BTreeSet<NodeId> = adverse.anchors.iter().map(|a| a.digest).collect();
    let mut around: BTreeSet<NodeId> = among.into_iter().collect();
    around.extend(closure);
    around.extend(&anchors);
    let mut window = BTreeMap::new();
    let mut missing: BTreeMap<MessageId, BTreeSet<MessageId>> = BTreeMap::new();
    let mut decoded: Vec<(&MessageId, &audita_evidence::Envelope)> = Vec::new();
    for n in &around {
        let Some(r) = g.get(n) else {
            continue;
        };
        if missing_known {
            for c in &r.env.citations {
                if !g.holds(&c.digest) {
                    missing.entry(c.clone()).or_default().insert(r.id.clone());
                }
            }
        }
        let in_time = r.env.timestamp >= lo && r.env.timestamp <= hi;
        if anchors.contains(n) || in_time {
            window.insert(r.id.clone(), Node::of(r.id.clone(), &r.env, r.leaf));
        }
        if in_time {
            decoded.push((&r.id, &r.env));
        }
    }
    let evidence = g.evidence(window, missing);
    let slice = Slice::from_evidence(&evidence, duties, adverse);
    let mut reads: BTreeSet<NodeId> = slice
        .reads(&evidence)
        .into_iter()
        .map(|id| id.digest)
        .collect();
    reads.extend(
        audita_monitor::reads(decoded.iter().copied(), &adverse.decl, predicates)
            .into_iter()
            .map(|id| id.digest),
    );
    (decoded.len(), reads)
}

/// The proofs an emitter received: by key, the epoch and encoded proof; by epoch,
/// header and checkpoint.
#[derive(Default)]
pub struct Proofs {
    /// Per held message asked about.
    pub by_key: HashMap<Key, (u64, Vec<u8>)>,
    /// Per epoch.
    pub epochs: BTreeMap<u64, (Vec<u8>, Vec<u8>)>,
}

/// The keys a bundle of `members` needs proofs for: the members, and every id they
/// cite (proved sealed elsewhere when held).
pub fn to_prove(g: &Gathered, members: &BTreeSet<NodeId>) -> Vec<Key> {
    let mut keys: BTreeSet<Key> = BTreeSet::new();
    for n in members {
        if let Some(r) = g.get(n) {
            keys.insert(key(n));
            keys.extend(r.env.citations.iter().map(|c| key(&c.digest)));
        }
    }
    keys.into_iter().collect()
}

/// The bundle of a declaration: its gathered members in canonical order, each with
/// its proof against its epoch; cited ids left out but held as proofs of sealing
/// elsewhere; those epochs' and the root's headers and checkpoints. Also returns the
/// citations of members that no shard holds.
pub fn bundle(
    declaration: &[u8],
    g: &Gathered,
    members: &BTreeSet<NodeId>,
    proofs: &Proofs,
    root: u64,
) -> (SliceBundle, u64) {
    let mut evidence = ProvenSlice::default();
    let mut used: BTreeSet<u64> = BTreeSet::from([root]);
    let mut unresolved = 0;
    let mut cited: BTreeSet<MessageId> = BTreeSet::new();
    for n in members {
        let Some(r) = g.get(n) else {
            continue;
        };
        unresolved += r
            .env
            .citations
            .iter()
            .filter(|c| !proofs.by_key.contains_key(&key(&c.digest)))
            .count() as u64;
        cited.extend(
            r.env
                .citations
                .iter()
                .filter(|c| !members.contains(&c.digest))
                .cloned(),
        );
        evidence.envelopes.push(r.bytes.clone());
        used.insert(r.epoch);
        let proof = proofs
            .by_key
            .get(&key(n))
            .map(|(_, p)| p.clone())
            .unwrap_or_default();
        evidence.proofs.push(proof);
        evidence.receipts.extend(r.receipts.iter().cloned());
    }
    for c in cited {
        let Some((epoch, proof)) = proofs.by_key.get(&key(&c.digest)) else {
            continue;
        };
        if proof.is_empty() {
            continue;
        }
        used.insert(*epoch);
        evidence.elsewhere.push(c.leaf_bytes());
        evidence.elsewhere_proofs.push(proof.clone());
    }
    for e in used {
        if let Some((header, checkpoint)) = proofs.epochs.get(&e) {
            evidence.headers.push(header.clone());
            evidence.checkpoints.push(checkpoint.clone());
        }
    }
    (
        SliceBundle {
            declaration: declaration.to_vec(),
            evidence,
        },
        unresolved,
    )
}
