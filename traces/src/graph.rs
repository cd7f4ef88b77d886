//! Edges derived from artifact hashes, each graded on its own (CONVENTIONS, "Deriving
//! the closure").
//!
//! For every consumed part `h` of a span `C` the first rule that applies decides:
//! 1. `h` is a root (`audita.roots`): no edge;
//! 2. **hash_match P→C**: a span `P ≠ C` that started no later than `C` produced `h`
//!    (`audita.output.hash` or an `audita.output.parts` entry);
//! 3. **folded H→C**: `h` is the output of a mutation recorded on span `H`;
//! 4. **window_exit**: a link target or the `parentSpanId` of `C` is absent from the
//!    export (the absent ids are the locator);
//! 5. **hash_mismatch P→C**: `C` has a `framework` link to a present span `P` none of
//!    whose outputs `C` consumed (an error naming both hashes; not traversed);
//! 6. **window_exit** otherwise.
//!
//! Every read-set entry is a **hash_match W→C** when a span `W` that started earlier
//! wrote the same record id with the same hash, else a **window_exit** with the entry
//! as boundary. Every `embedding_similarity` link is a **similarity S→C**.
//!
//! Design constraints:
//! - Nesting gives no edge; links give no edge except similarity links (a
//!   `framework` link is a narrative claim, only checked against hashes).
//! - Deterministic: when several spans produced `h` (content identity), the edge goes
//!   to the one that started last no later than `C`, ties to the smaller span id;
//!   likewise for writers of an entry and for mutations folded on several spans.
//! - [`Graph::new`] indexes producers, folded outputs and writes once, so deriving
//!   every node's edges is `O(parts · log n)`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::hash::{ArtifactHash, Entry, SpanId};
use crate::model::{LinkBasis, Node, Trace};

/// The grade of one edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EdgeKind {
    /// The child consumed exactly what the parent produced (or read exactly what it
    /// wrote): a witness edge.
    HashMatch,
    /// The child consumed the output of a mutation folded into the parent span.
    Folded,
    /// Linked by embedding proximity: a hypothesis, not an edge of identity.
    Similarity,
    /// The consumed artifact has no producer inside the window.
    WindowExit,
    /// The framework's link claims a parent whose outputs the child did not consume.
    HashMismatch,
}

impl EdgeKind {
    /// The name used in JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::HashMatch => "hash_match",
            Self::Folded => "folded",
            Self::Similarity => "similarity",
            Self::WindowExit => "window_exit",
            Self::HashMismatch => "hash_mismatch",
        }
    }

    /// Whether an edge of this kind refuses a causal claim when it lies in the closure.
    pub fn is_offending(self) -> bool {
        matches!(self, Self::Folded | Self::Similarity | Self::HashMismatch)
    }

    /// Whether the backward walk continues into the parent (for reachability).
    pub fn is_traversed(self) -> bool {
        matches!(self, Self::HashMatch | Self::Folded | Self::Similarity)
    }
}

/// What part of the child an edge explains.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Basis {
    /// An `audita.input.parts` entry.
    InputPart,
    /// An `audita.read_set` entry.
    ReadSet,
    /// An `embedding_similarity` link.
    SimilarityLink,
}

/// Where the closure leaves the window: the artifact to look for when extending it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Boundary {
    /// The artifact without a producer in the window.
    pub artifact: ArtifactHash,
    /// The record id, for a read-set entry.
    pub record_id: Option<String>,
    /// Span ids absent from the export that the child points at (link targets, its
    /// nesting parent).
    pub locator: Vec<SpanId>,
    /// Why this is a boundary.
    pub reason: String,
}

/// One graded edge into `child`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Edge {
    /// The parent span; `None` for a window exit.
    pub parent: Option<SpanId>,
    /// The consuming span.
    pub child: SpanId,
    /// The grade.
    pub kind: EdgeKind,
    /// The artifact the edge carries (for a similarity edge: what the child returned,
    /// which is only similar to the parent's).
    pub artifact: Option<ArtifactHash>,
    /// The record id, for read-set edges.
    pub record_id: Option<String>,
    /// What part of the child the edge explains.
    pub basis: Basis,
    /// The boundary this edge opens (window exits and hash mismatches).
    pub boundary: Option<Boundary>,
    /// For a hash mismatch: the error naming both hashes.
    pub error: Option<String>,
}

/// A trace with its hash indexes, ready to derive edges.
pub struct Graph<'t> {
    trace: &'t Trace,
    /// Artifact → (start, span) of every span producing it.
    producers: HashMap<&'t ArtifactHash, Vec<(u64, &'t SpanId)>>,
    /// Folded mutation output → spans it was recorded on.
    folded: HashMap<&'t ArtifactHash, BTreeSet<&'t SpanId>>,
    /// (record id, hash) → (start, span) of every writer.
    writers: HashMap<(&'t str, &'t ArtifactHash), Vec<(u64, &'t SpanId)>>,
}

impl<'t> Graph<'t> {
    /// Indexes `trace`.
    pub fn new(trace: &'t Trace) -> Self {
        let mut producers: HashMap<&ArtifactHash, Vec<(u64, &SpanId)>> = HashMap::new();
        let mut folded: HashMap<&ArtifactHash, BTreeSet<&SpanId>> = HashMap::new();
        let mut writers: HashMap<(&str, &ArtifactHash), Vec<(u64, &SpanId)>> = HashMap::new();
        for n in trace.nodes() {
            let outs: BTreeSet<&ArtifactHash> =
                n.output_hash.iter().chain(n.output_parts.iter()).collect();
            for h in outs {
                producers
                    .entry(h)
                    .or_default()
                    .push((n.start_ns, &n.span_id));
            }
            for m in &n.folded {
                folded.entry(&m.output_hash).or_default().insert(&n.span_id);
            }
            for e in &n.write_set {
                writers
                    .entry((e.record_id.as_str(), &e.hash))
                    .or_default()
                    .push((n.start_ns, &n.span_id));
            }
        }
        for v in producers.values_mut().chain(writers.values_mut()) {
            v.sort();
        }
        Self {
            trace,
            producers,
            folded,
            writers,
        }
    }

    /// The trace.
    pub fn trace(&self) -> &'t Trace {
        self.trace
    }

    /// The latest span in `candidates` (sorted by start, then id) that started no
    /// later than `start` (strictly earlier when `strict`), other than `not`.
    fn latest<'a>(
        candidates: &'a [(u64, &'t SpanId)],
        start: u64,
        strict: bool,
        not: &SpanId,
    ) -> Option<&'t SpanId> {
        let end = candidates.partition_point(|&(s, _)| if strict { s < start } else { s <= start });
        let before = &candidates[..end];
        // Last start wins; among equal starts the smallest id (first in sorted order).
        let mut best: Option<(u64, &'t SpanId)> = None;
        for &(s, id) in before.iter().rev() {
            if id == not {
                continue;
            }
            match best {
                Some((bs, _)) if s < bs => break,
                _ => best = Some((s, id)),
            }
        }
        best.map(|(_, id)| id)
    }

    /// The graded edges into `c`: one per non-root input part, one per read-set
    /// entry, one per similarity link, in that order.
    pub fn edges_into(&self, c: &Node) -> Vec<Edge> {
        let mut out = Vec::new();
        let absent: Vec<SpanId> = {
            let mut ids: BTreeSet<SpanId> = c
                .links
                .iter()
                .map(|l| &l.span_id)
                .chain(c.parent.iter())
                .filter(|id| self.trace.get(id).is_none())
                .cloned()
                .collect();
            ids.remove(&c.span_id);
            ids.into_iter().collect()
        };
        let framework: Vec<&Node> = c
            .links
            .iter()
            .filter(|l| l.basis == Some(LinkBasis::Framework))
            .filter_map(|l| self.trace.get(&l.span_id))
            .filter(|p| p.span_id != c.span_id)
            .collect();
        for h in &c.input_parts {
            if self.trace.roots().contains(h) {
                continue;
            }
            let edge = |parent: Option<SpanId>, kind| Edge {
                parent,
                child: c.span_id.clone(),
                kind,
                artifact: Some(h.clone()),
                record_id: None,
                basis: Basis::InputPart,
                boundary: None,
                error: None,
            };
            if let Some(p) = self
                .producers
                .get(h)
                .and_then(|v| Self::latest(v, c.start_ns, false, &c.span_id))
            {
                out.push(edge(Some(p.clone()), EdgeKind::HashMatch));
                continue;
            }
            if let Some(hs) = self.folded.get(h) {
                // A mutation folded on several spans: the one that started last no
                // later than C, else the first by id.
                let on = hs
                    .iter()
                    .filter_map(|id| self.trace.get(id))
                    .filter(|n| n.start_ns <= c.start_ns)
                    .max_by(|a, b| {
                        a.start_ns
                            .cmp(&b.start_ns)
                            .then_with(|| b.span_id.cmp(&a.span_id))
                    })
                    .map(|n| &n.span_id)
                    .or_else(|| hs.iter().next().copied());
                if let Some(hid) = on {
                    out.push(edge(Some(hid.clone()), EdgeKind::Folded));
                    continue;
                }
            }
            if !absent.is_empty() {
                let mut e = edge(None, EdgeKind::WindowExit);
                e.boundary = Some(Boundary {
                    artifact: h.clone(),
                    record_id: None,
                    locator: absent.clone(),
                    reason: "consumed artifact has no producer in the window; the span points at spans absent from the export".into(),
                });
                out.push(e);
                continue;
            }
            if let Some(p) = framework
                .iter()
                .find(|p| !c.input_parts.iter().any(|x| p.produces(x)))
            {
                let theirs = p
                    .output_hash
                    .as_ref()
                    .or(p.output_parts.first())
                    .map_or_else(|| "no output hash".to_string(), |o| o.to_string());
                let mut e = edge(Some(p.span_id.clone()), EdgeKind::HashMismatch);
                e.error = Some(format!(
                    "hash mismatch on edge {}->{}: the framework links them, but {} consumed {} and {} produced {}",
                    p.span_id, c.span_id, c.span_id, h, p.span_id, theirs
                ));
                e.boundary = Some(Boundary {
                    artifact: h.clone(),
                    record_id: None,
                    locator: Vec::new(),
                    reason: format!(
                        "consumed artifact has no producer in the window; the framework link names {} which produced {}",
                        p.span_id, theirs
                    ),
                });
                out.push(e);
                continue;
            }
            let mut e = edge(None, EdgeKind::WindowExit);
            e.boundary = Some(Boundary {
                artifact: h.clone(),
                record_id: None,
                locator: Vec::new(),
                reason: "consumed artifact has no producer in the window".into(),
            });
            out.push(e);
        }
        for entry in &c.read_set {
            out.push(self.read_edge(c, entry));
        }
        for l in &c.links {
            if l.basis != Some(LinkBasis::EmbeddingSimilarity) {
                continue;
            }
            let artifact = c
                .output_hash
                .clone()
                .or_else(|| c.read_set.first().map(|e| e.hash.clone()));
            let mut e = Edge {
                parent: Some(l.span_id.clone()),
                child: c.span_id.clone(),
                kind: EdgeKind::Similarity,
                artifact: artifact.clone(),
                record_id: None,
                basis: Basis::SimilarityLink,
                boundary: None,
                error: None,
            };
            if self.trace.get(&l.span_id).is_none() {
                if let Some(a) = artifact {
                    e.boundary = Some(Boundary {
                        artifact: a,
                        record_id: None,
                        locator: vec![l.span_id.clone()],
                        reason: "similarity link to a span absent from the export".into(),
                    });
                }
            }
            out.push(e);
        }
        out
    }

    fn read_edge(&self, c: &Node, entry: &Entry) -> Edge {
        let w = self
            .writers
            .get(&(entry.record_id.as_str(), &entry.hash))
            .and_then(|v| Self::latest(v, c.start_ns, true, &c.span_id));
        let mut e = Edge {
            parent: w.cloned(),
            child: c.span_id.clone(),
            kind: EdgeKind::HashMatch,
            artifact: Some(entry.hash.clone()),
            record_id: Some(entry.record_id.clone()),
            basis: Basis::ReadSet,
            boundary: None,
            error: None,
        };
        if w.is_none() {
            e.kind = EdgeKind::WindowExit;
            e.boundary = Some(Boundary {
                artifact: entry.hash.clone(),
                record_id: Some(entry.record_id.clone()),
                locator: Vec::new(),
                reason: "read-set entry intersects no earlier write-set with matching record id and hash".into(),
            });
        }
        e
    }

    /// Every node's edges, in span-id order of the child.
    pub fn all_edges(&self) -> BTreeMap<&'t SpanId, Vec<Edge>> {
        self.trace
            .nodes()
            .map(|n| (&n.span_id, self.edges_into(n)))
            .collect()
    }
}
