//! One reading of the slice — a completion of the missing/suspect items plus an
//! on/off choice for every non-witness (hypothesis) edge — gated and turned into an
//! `audita-causal` structural model.
//!
//! Design constraints:
//! - **Production gate.** A certified message is a candidate iff it has a production
//!   path to an anchor: a chain of enabled consuming citation edges through certified,
//!   realised messages (or present completion items). Hash-match edges are always
//!   enabled; folded-transform and similarity edges only when the reading turns the
//!   hypothesis on. Messages declared unrealised (preempted) are cut: they and
//!   everything reaching `Y` only through them get no variable (ρ = 0).
//! - **Mechanisms** from citation structure: origin → exogenous `true`; `relay-any` →
//!   `|` of its consumed candidate inputs, `relay-all` → `&`. A consumed input that is
//!   a root, a window exit or a disabled hypothesis edge is supplied from outside the
//!   model (constant `true`); an absent completion item is `false`; an unrealised
//!   (preempted) input supplies nothing to a `relay-any` (`false`) and is not what
//!   decided a `relay-all` (`true`).
//! - **Completion items** (missing, attested suspect, unresolved anchors) carry a
//!   [`Production`] chosen by the reading: `external` (present, supplied from outside
//!   the model like a root: consumers read constant `true`, no variable), `origin`
//!   (present, its own decision: exogenous `true` owned by its author), `any(S)` /
//!   `all(S)` (present, a `relay-any` / `relay-all` of the certified messages `S`, a
//!   subset of its possible inputs [`crate::slice::Item::inputs`]; the gate continues
//!   through it into `S`). Absent items supply `false`. With the item's true production
//!   among the choices, the reading of a record with a deletion can reproduce the
//!   model of the record before the deletion, so deletion only widens intervals.
//!   Content addressing forbids citation cycles, so a reading whose productions close
//!   a cycle is not admissible.
//! - **Outcome** from recorded actuation semantics: the anchors combined by the
//!   declaration (`|` or `&`), conjoined with every absence variable whose target is an
//!   anchor target (the dutiful halt would have stopped the actuation) or that the
//!   reading conjoins because an anchor item's unknown target may be its target. No
//!   anchors: the outcome is exogenous (`true`, no variable can be a cause).
//! - **Admissible** readings reproduce the recorded facts: `Y` holds and every
//!   certified candidate evaluates present.
//! - Variable names: `m_<first 16 hex of the digest>` (suffixed on collision) and
//!   `absent.<duty>`.

use std::collections::{BTreeMap, BTreeSet};

use audita_causal::{Model, ModelBuilder};
use audita_evidence::MessageId;

use crate::slice::{EdgeKind, Policy, Slice};
use crate::VerdictError;

/// How a present completion item was produced (its own consumed inputs are unknown).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Production {
    /// Supplied from outside the model (a root): constant `true`, no variable.
    External,
    /// The author's own decision: an exogenous variable.
    #[default]
    Origin,
    /// Produced iff at least one of these certified messages is.
    Any(Vec<MessageId>),
    /// Produced iff every one of these certified messages is.
    All(Vec<MessageId>),
}

impl Production {
    /// The certified messages it consumes.
    pub fn inputs(&self) -> &[MessageId] {
        match self {
            Production::Any(s) | Production::All(s) => s,
            Production::External | Production::Origin => &[],
        }
    }
}

/// A completion and hypothesis choice.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reading {
    /// Completion items taken as present (others absent).
    pub present: BTreeSet<MessageId>,
    /// Production of present items ([`Production::Origin`] when not listed).
    pub production: BTreeMap<MessageId, Production>,
    /// Hypothesis edges `(child, parent)` turned on.
    pub hypotheses: BTreeSet<(MessageId, MessageId)>,
    /// Absences (indices into [`Slice::absences`]) conjoined to `Y` although no
    /// certified anchor targets them (an anchor item's unknown target may).
    pub outcome_absences: BTreeSet<usize>,
    /// Absences (indices into [`Slice::absences`]) the reading takes as not holding
    /// (only uncertain ones: a completion item may have been the trigger or the halt).
    pub absences_off: BTreeSet<usize>,
    /// Certified messages forced absent (blame-shift reversions).
    pub reverted: BTreeSet<MessageId>,
    /// Reverted deviations whose declared reference counterpart realises the outcome:
    /// each adds an exogenous `ref_<digest>` variable owned by the deviator, joined to
    /// `Y` by `|` (blame-shift readings only).
    pub substituted: BTreeSet<MessageId>,
}

/// What a model variable stands for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum VarRef {
    /// A message (certified or completion item).
    Message(MessageId),
    /// An absence variable (index into [`Slice::absences`]).
    Absence(usize),
    /// The declared reference counterpart of a reverted deviation.
    Counterpart(MessageId),
}

/// A gated model of one reading.
#[derive(Debug, Clone)]
pub struct Built {
    /// The structural model.
    pub model: Model,
    /// Variable name → what it stands for.
    pub vars: BTreeMap<String, VarRef>,
    /// Message → variable name.
    pub names: BTreeMap<MessageId, String>,
    /// Certified candidate messages (passed the gate).
    pub gated: BTreeSet<MessageId>,
    /// Enabled consuming edges `(child, parent)` among model variables.
    pub links: BTreeSet<(MessageId, MessageId)>,
}

/// Stable variable names for every message of the slice and its items.
pub fn var_names(slice: &Slice) -> BTreeMap<MessageId, String> {
    let mut out = BTreeMap::new();
    // Ids sharing a digest prefix (crafted ones, say) get `_1`, `_2`, … in id order;
    // a counter per prefix keeps that linear.
    let mut taken: BTreeMap<String, usize> = BTreeMap::new();
    let ids = slice.window.keys().chain(slice.items.iter().map(|i| &i.id));
    for id in ids {
        if out.contains_key(id) {
            continue;
        }
        let base = format!("m_{}", hex::encode(&id.digest[..8]));
        let k = taken.entry(base.clone()).or_insert(0);
        let name = if *k == 0 {
            base.clone()
        } else {
            format!("{base}_{k}")
        };
        *k += 1;
        out.insert(id.clone(), name);
    }
    out
}

enum Input {
    True,
    False,
    Var(MessageId),
}

/// Declares `n` as a `relay-any` (`any`) or `relay-all` of `inputs`: a constant when an
/// input decides it (or none is left), else the `|` / `&` of the variable inputs.
fn relay(
    b: ModelBuilder,
    n: String,
    principal: Option<&str>,
    any: bool,
    inputs: &[Input],
    names: &BTreeMap<MessageId, String>,
) -> Result<ModelBuilder, VerdictError> {
    let name = |id: &MessageId| {
        names
            .get(id)
            .ok_or_else(|| VerdictError::Internal(format!("no variable name for {id}")))
    };
    let mut terms = Vec::new();
    let mut constant: Option<bool> = None;
    if inputs.is_empty() {
        constant = Some(true);
    }
    for i in inputs {
        match i {
            Input::True if any => constant = Some(true),
            Input::False if !any => constant = Some(false),
            Input::Var(p) => terms.push(name(p)?.clone()),
            _ => {}
        }
    }
    if constant.is_none() && terms.is_empty() {
        constant = Some(!any);
    }
    Ok(match constant {
        Some(v) => b.exogenous(n, principal, v, true),
        None => {
            terms.sort();
            terms.dedup();
            let eq = terms.join(if any { " | " } else { " & " });
            b.endogenous(n, principal, eq, true)
        }
    })
}

impl Slice {
    fn enabled(&self, child: &MessageId, parent: &MessageId, kind: EdgeKind, r: &Reading) -> bool {
        match kind {
            EdgeKind::HashMatch => true,
            EdgeKind::FoldedTransform | EdgeKind::SimilarityMatch => {
                r.hypotheses.contains(&(child.clone(), parent.clone()))
            }
            EdgeKind::WindowExit => false,
        }
    }

    /// Gates and builds the model of `reading`. Returns `Ok(None)` when the reading is
    /// not admissible (unless `check` is false, as for blame-shift reversions).
    pub fn model(
        &self,
        reading: &Reading,
        names: &BTreeMap<MessageId, String>,
        check: bool,
    ) -> Result<Option<Built>, VerdictError> {
        let view = ReadingView::new(self, reading);
        let Gate {
            gated,
            present_items,
            links,
        } = view.gate();
        let name = |id: &MessageId| -> Result<&String, VerdictError> {
            names
                .get(id)
                .ok_or_else(|| VerdictError::Internal(format!("no variable name for {id}")))
        };
        let mut b = ModelBuilder::new();
        let mut vars = BTreeMap::new();
        let mut name_of = BTreeMap::new();
        for id in &gated {
            let node = self
                .window
                .get(id)
                .ok_or_else(|| VerdictError::Internal(format!("gated unknown {id}")))?;
            let n = name(id)?.clone();
            let principal = Some(id.author.as_str());
            vars.insert(n.clone(), VarRef::Message(id.clone()));
            name_of.insert(id.clone(), n.clone());
            if reading.reverted.contains(id) {
                b = b.exogenous(n, principal, false, true);
                continue;
            }
            let inputs = view.relay_inputs(id, node, &gated, &present_items);
            let any = node.policy == Policy::RelayAny;
            b = relay(b, n, principal, any, &inputs, names)?;
        }
        for id in &present_items {
            let n = name(id)?.clone();
            vars.insert(n.clone(), VarRef::Message(id.clone()));
            name_of.insert(id.clone(), n.clone());
            let principal = Some(id.author.as_str());
            let any = match view.production(id) {
                Production::Any(_) => true,
                Production::All(_) => false,
                Production::External | Production::Origin => {
                    b = b.exogenous(n, principal, true, true);
                    continue;
                }
            };
            let inputs = view.item_inputs(id, &gated, &present_items);
            b = relay(b, n, principal, any, &inputs, names)?;
        }
        let mut conj = Vec::new();
        for (i, a) in self.absences.iter().enumerate() {
            if reading.absences_off.contains(&i) {
                continue;
            }
            vars.insert(a.variable.clone(), VarRef::Absence(i));
            b = b.exogenous(a.variable.clone(), Some(a.holder.as_str()), true, true);
            if a.in_outcome || reading.outcome_absences.contains(&i) {
                conj.push(a.variable.clone());
            }
        }
        // Outcome.
        let mut outcome = match self.anchor_expr(reading, &present_items, names)? {
            None => "true".to_string(),
            Some(anchor_expr) => std::iter::once(anchor_expr)
                .chain(conj)
                .collect::<Vec<_>>()
                .join(" & "),
        };
        // Reference counterparts that would alone have realised the outcome.
        let mut alternatives = Vec::new();
        for id in &reading.substituted {
            let n = format!("ref_{}", hex::encode(&id.digest[..8]));
            vars.insert(n.clone(), VarRef::Counterpart(id.clone()));
            b = b.exogenous(n.clone(), Some(id.author.as_str()), true, true);
            alternatives.push(n);
        }
        if !alternatives.is_empty() {
            outcome = std::iter::once(format!("({outcome})"))
                .chain(alternatives)
                .collect::<Vec<_>>()
                .join(" | ");
        }
        let model = match b.outcome(outcome).build() {
            Ok(m) => m,
            // Productions closing a citation cycle: no such world exists.
            Err(audita_causal::ModelError::Cycle { .. }) => return Ok(None),
            Err(e) => return Err(VerdictError::Internal(format!("model: {e}"))),
        };
        let built = Built {
            model,
            vars,
            names: name_of,
            gated,
            links,
        };
        if check && !built.admissible(self) {
            return Ok(None);
        }
        Ok(Some(built))
    }

    /// The anchors' part of the outcome: the `&` (combine all) or `|` of the anchor
    /// variables, `true` for a present anchor item supplied from outside the model,
    /// `false` when an absent one decides it; `None` when there is no anchor.
    fn anchor_expr(
        &self,
        reading: &Reading,
        present_items: &BTreeSet<MessageId>,
        names: &BTreeMap<MessageId, String>,
    ) -> Result<Option<String>, VerdictError> {
        let name = |id: &MessageId| -> Result<&String, VerdictError> {
            names
                .get(id)
                .ok_or_else(|| VerdictError::Internal(format!("no variable name for {id}")))
        };
        let mut anchor_terms = Vec::new();
        let mut anchor_false = false;
        let mut n_anchor = 0;
        for a in &self.anchors {
            n_anchor += 1;
            anchor_terms.push(name(a)?.clone());
        }
        for it in self.items.iter().filter(|i| i.anchor) {
            n_anchor += 1;
            if present_items.contains(&it.id) {
                anchor_terms.push(name(&it.id)?.clone());
            } else if reading.present.contains(&it.id) {
                // Present, supplied from outside the model.
                anchor_terms.push("true".to_string());
            } else {
                anchor_false = true;
            }
        }
        if n_anchor == 0 {
            return Ok(None);
        }
        let all = self.anchor_combine_all;
        Ok(Some(if (all && anchor_false) || anchor_terms.is_empty() {
            "false".to_string()
        } else {
            format!("({})", anchor_terms.join(if all { " & " } else { " | " }))
        }))
    }
}

/// The messages and present items the gate lets into a reading's model.
struct Gate {
    /// Certified messages reached from the live anchors.
    gated: BTreeSet<MessageId>,
    /// Present completion items reached (produced inside the model).
    present_items: BTreeSet<MessageId>,
    /// Enabled consuming edges `(child, parent)` the gate followed.
    links: BTreeSet<(MessageId, MessageId)>,
}

impl Gate {
    /// Follows the consuming edge `child → parent` into a certified message (or, with
    /// `item`, a present item): the link is kept, and a parent seen for the first
    /// time is pushed on `stack`.
    fn follow(
        &mut self,
        child: &MessageId,
        parent: &MessageId,
        item: bool,
        stack: &mut Vec<MessageId>,
    ) {
        self.links.insert((child.clone(), parent.clone()));
        let seen = if item {
            &mut self.present_items
        } else {
            &mut self.gated
        };
        if seen.insert(parent.clone()) {
            stack.push(parent.clone());
        }
    }
}

/// A reading over a slice: which items are present and how produced, and the
/// slice's consuming edges by child.
struct ReadingView<'a> {
    slice: &'a Slice,
    reading: &'a Reading,
    /// Consuming edges (closure and input region) by child.
    by_child: BTreeMap<&'a MessageId, Vec<(&'a MessageId, EdgeKind)>>,
    /// The production of an item the reading does not list.
    origin: Production,
}

impl<'a> ReadingView<'a> {
    /// The view of `reading` over `slice`.
    fn new(slice: &'a Slice, reading: &'a Reading) -> ReadingView<'a> {
        let mut by_child: BTreeMap<&MessageId, Vec<(&MessageId, EdgeKind)>> = BTreeMap::new();
        for e in slice.edges.iter().chain(&slice.reach_edges) {
            if e.consumed {
                by_child
                    .entry(&e.child)
                    .or_default()
                    .push((&e.parent, e.kind));
            }
        }
        ReadingView {
            slice,
            reading,
            by_child,
            origin: Production::Origin,
        }
    }

    /// Whether `id` is a completion item of the slice.
    fn is_item(&self, id: &MessageId) -> bool {
        self.slice.items.iter().any(|i| &i.id == id)
    }

    /// Whether `id` is a completion item the reading takes as present.
    fn item_present(&self, id: &MessageId) -> bool {
        self.is_item(id) && self.reading.present.contains(id)
    }

    /// How the reading produces `id` ([`Production::Origin`] when not listed).
    fn production(&self, id: &MessageId) -> &Production {
        self.reading.production.get(id).unwrap_or(&self.origin)
    }

    /// Whether the reading supplies `id` from outside the model.
    fn external(&self, id: &MessageId) -> bool {
        matches!(self.production(id), Production::External)
    }

    /// The gate: reverse reachability from the live anchors (certified anchors and
    /// present anchor items produced inside the model) through enabled consuming
    /// edges of relays, and through the inputs of present items, never into a
    /// root, an unrealised command or past a reverted message.
    fn gate(&self) -> Gate {
        let (slice, reading) = (self.slice, self.reading);
        let mut gate = Gate {
            gated: BTreeSet::new(),
            present_items: BTreeSet::new(),
            links: BTreeSet::new(),
        };
        let mut stack: Vec<MessageId> = Vec::new();
        for a in &slice.anchors {
            if gate.gated.insert(a.clone()) {
                stack.push(a.clone());
            }
        }
        for it in slice.items.iter().filter(|i| i.anchor) {
            if reading.present.contains(&it.id) && !self.external(&it.id) {
                gate.present_items.insert(it.id.clone());
                stack.push(it.id.clone());
            }
        }
        while let Some(child) = stack.pop() {
            if reading.reverted.contains(&child) {
                continue;
            }
            let Some(node) = slice.window.get(&child) else {
                // A present item produced from certified inputs: the gate continues
                // into them.
                for parent in self.production(&child).inputs() {
                    if slice.window.contains_key(parent) {
                        gate.follow(&child, parent, false, &mut stack);
                    } else if self.item_present(parent) && !self.external(parent) {
                        gate.follow(&child, parent, true, &mut stack);
                    }
                }
                continue;
            };
            if !matches!(node.policy, Policy::RelayAny | Policy::RelayAll) {
                continue;
            }
            for (parent, kind) in self.by_child.get(&child).cloned().unwrap_or_default() {
                if !slice.enabled(&child, parent, kind, reading) {
                    continue;
                }
                if slice.unrealised.contains(parent) {
                    continue;
                }
                if let Some(p) = slice.window.get(parent) {
                    if p.policy == Policy::Root {
                        continue;
                    }
                    gate.follow(&child, parent, false, &mut stack);
                } else if self.item_present(parent) && !self.external(parent) {
                    gate.follow(&child, parent, true, &mut stack);
                }
            }
        }
        gate
    }

    /// The inputs of present item `id` (produced from certified inputs): a model
    /// variable where the input is gated or a present item in the model, else `true`
    /// for a present item supplied from outside, `false` for anything absent.
    fn item_inputs(
        &self,
        id: &MessageId,
        gated: &BTreeSet<MessageId>,
        present_items: &BTreeSet<MessageId>,
    ) -> Vec<Input> {
        self.production(id)
            .inputs()
            .iter()
            .map(|p| {
                if gated.contains(p) || present_items.contains(p) {
                    Input::Var(p.clone())
                } else if self.item_present(p) {
                    Input::True
                } else {
                    Input::False
                }
            })
            .collect()
    }

    /// The inputs of gated relay `id` (`node`): a model variable where the parent
    /// is gated or a present item produced inside the model, else the constant the
    /// parent supplies (a disabled edge or an input from outside supplies `true`).
    fn relay_inputs(
        &self,
        id: &MessageId,
        node: &crate::slice::Node,
        gated: &BTreeSet<MessageId>,
        present_items: &BTreeSet<MessageId>,
    ) -> Vec<Input> {
        if !matches!(node.policy, Policy::RelayAny | Policy::RelayAll) {
            return Vec::new();
        }
        self.by_child
            .get(id)
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|(parent, kind)| {
                if self.slice.unrealised.contains(parent) {
                    // A preempted input supplies nothing to an any-relay; an
                    // all-relay exists, so it is not what decided it.
                    if node.policy == Policy::RelayAny {
                        Input::False
                    } else {
                        Input::True
                    }
                } else if !self.slice.enabled(id, parent, kind, self.reading) {
                    Input::True
                } else if gated.contains(parent) {
                    Input::Var(parent.clone())
                } else if self.is_item(parent) {
                    if present_items.contains(parent) {
                        Input::Var(parent.clone())
                    } else if self.item_present(parent) {
                        // Present, supplied from outside the model.
                        Input::True
                    } else {
                        Input::False
                    }
                } else {
                    Input::True
                }
            })
            .collect()
    }
}

impl Built {
    /// Whether `Y` holds and every certified candidate evaluates present.
    pub fn admissible(&self, slice: &Slice) -> bool {
        let vals = self.model.evaluate(&[]);
        let y = self.model.outcome().eval(&|v: &str| {
            self.model
                .var(v)
                .map(|id| vals[id.index()])
                .unwrap_or(false)
        });
        if !y {
            return false;
        }
        self.gated.iter().all(|id| {
            !slice.window.contains_key(id)
                || self
                    .names
                    .get(id)
                    .and_then(|n| self.model.var(n))
                    .map(|v| vals[v.index()])
                    .unwrap_or(false)
        })
    }
}
