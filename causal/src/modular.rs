//! The modular path: ρ for every principal by decomposition along the model's modules.
//!
//! A *module* is a variable `u` whose live ancestors (its cone) are read by nothing
//! outside the cone but `u` itself: `u` is a cut vertex between its cone and the rest of
//! the model. Every binary tree, every attack-tree gadget and every relay is one. Inside
//! and outside then meet only through `u`'s counterfactual value, and the modified HP
//! definition factors through it exactly:
//!
//! - `X` with members inside the cone (`X_in ≠ ∅`) is a minimal cause of the outcome iff
//!   `X_in` is a minimal cause of "`u` keeps its value" in the cone and `X_out ∪ {u}` is
//!   a minimal cause of the outer model with `u` as a candidate; its smallest witness is
//!   the union of the two smallest witnesses. (AC2: the outer model sees the inside only
//!   through `u'`, and `u' = u*` makes `X_in` removable; AC3: a strict subset either
//!   keeps all of `X_in`, so `X_out ∪ {u}` loses a member, or does not flip `u`, so
//!   `X_out` alone would be a cause of the outer model.)
//! - `X` outside the cone is a minimal cause iff it is one of the outer model that does
//!   not hold `u`, with the same witness (nothing inside moves).
//!
//! So a module stands in its parent for a candidate whose flip costs `c_u`, the cost of
//! its cheapest cause, and the best cause holding a variable `v` inside costs
//! `best_cone(v) + best_outer(u) − c_u`. Costs add along the module tree: one local
//! model per module, solved once, answers every principal.
//!
//! Design constraints:
//! - Only *live* variables take part (relevant, and a candidate or reading a live
//!   variable); the others keep their actual value under every intervention and enter
//!   local models as constants. Modules are found on the post-dominator tree of the live
//!   variables towards the outcome: `u` is a module iff its post-dominator subtree is
//!   closed under inputs (linear time on an Euler tour). Modules nest (laminar).
//! - Each module's *local model* holds the variables whose nearest enclosing module it
//!   is; child modules and input-free live variables enter it as exogenous candidates
//!   at their actual values, weighted by their cheapest cause (1 for a variable). Its
//!   outcome is "the root keeps its actual value" (the model's outcome at the top).
//! - A local model is solved exactly by the first path that finishes: the cut sets if
//!   it is monotone (within 64 MiB and an eighth of the cut-set work), the general search if it has at most 12 variables
//!   (within an eighth of the probe budget), else the optimisation path with weights
//!   (core-guided). Each gives the cheapest local cause, the best cause
//!   of every principal among the local variables and of every child module.
//! - Causes are composed, not enumerated: each principal's best cause is its local best
//!   with every child module replaced by that module's cheapest cause, joined with its
//!   module's best cause in the parent, and so up to the outcome. When every local list
//!   is complete and the composed causes number at most `max_causes`, all of them are
//!   listed (`complete`); else the cheapest cause and each principal's best.
//! - Every composed cause is re-evaluated on the model (the flip with its witness must
//!   falsify the outcome) and its size must equal the composed cost, or nothing is
//!   reported ([`Stop::Inconsistent`]). Deadline, solver steps (summed over local
//!   models) and memory are bounded as on the other paths.

use std::collections::BTreeMap;

use crate::deadline::Deadline;
use crate::general::{Search, Stop as SearchStop};
use crate::model::{compile_all, relevance, Groups, Mechanism, Model, Node, Var};
use crate::optimise::{all_falsify, Halt, Keys, Limits};

/// Why the modular path stopped without an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The caller's deadline passed.
    Deadline,
    /// The solver steps, summed over the local models, ran out.
    Steps,
    /// A local encoding or the composed causes outgrew the memory bound.
    Memory,
    /// A composed or local answer failed its re-check (an internal fault).
    Inconsistent,
}

impl From<Halt> for Stop {
    fn from(h: Halt) -> Stop {
        match h {
            Halt::Deadline => Stop::Deadline,
            Halt::Steps => Stop::Steps,
            Halt::Memory => Stop::Memory,
            Halt::Inconsistent => Stop::Inconsistent,
        }
    }
}

/// A cause `X` with one smallest witness `W`, as variable ids of the model.
pub(crate) type CauseSet = (Vec<u32>, Vec<u32>);

/// Bounds of one modular query.
pub(crate) struct Bounds<'d> {
    /// Causes listed at most when listing all of them.
    pub max_causes: usize,
    /// Causes a local optimisation path lists in order of cost before it resolves only
    /// the open keys.
    pub max_solver_causes: usize,
    /// Work granted to the general search per local model (evaluations × variables).
    pub probe_work: u64,
    /// Model evaluations of one local general search at most.
    pub max_evaluations: u64,
    /// Elementary steps of one local model's cut-set families at most.
    pub cut_set_work: u64,
    /// Solver steps over all local models.
    pub max_steps: u64,
    /// Memory bound in bytes.
    pub max_memory_bytes: u64,
    /// Bytes counted per encoded literal.
    pub literal_bytes: u64,
    /// The caller's deadline.
    pub deadline: &'d dyn Deadline,
}

/// The causes the modular path lists: `(X, W)` as variable ids of the model.
pub(crate) struct Answer {
    pub causes: Vec<CauseSet>,
    /// Whether every minimal cause is listed.
    pub complete: bool,
}

/// Whether some module lies below the outcome (the modular path has work to share).
pub(crate) fn decomposes(model: &Model) -> bool {
    Tree::find(model).roots.len() > 1
}

/// Lists the causes of `model` (outcome actually true at `actual`) by modules: every
/// principal's best cause, or all causes when few. `None` when no module lies below
/// the outcome and `force` is false (the optimisation path answers such a model alone).
pub(crate) fn attribute(
    model: &Model,
    actual: &[bool],
    bounds: &Bounds<'_>,
    force: bool,
) -> Result<Option<Answer>, Stop> {
    let tree = Tree::find(model);
    if tree.roots.len() <= 1 && !force {
        return Ok(None);
    }
    let principal_ix = model.principal_index();
    let mut steps_left = bounds.max_steps;
    let mut solved: Vec<Solved> = Vec::with_capacity(tree.roots.len());
    let mut held = 0u64;
    for m in 0..tree.roots.len() {
        if bounds.deadline.expired() {
            return Err(Stop::Deadline);
        }
        let local = Local::build(model, actual, &tree, m, &solved, &principal_ix)?;
        let s = local.solve(bounds, &mut steps_left)?;
        held += s.bytes();
        if held > bounds.max_memory_bytes {
            return Err(Stop::Memory);
        }
        solved.push(s);
    }
    let comp = Composition {
        principals: model.principals.len(),
        tree: &tree,
        solved: &solved,
    };
    let total = comp.count();
    let answer = match total {
        Some(t) if t <= bounds.max_causes as u64 => Answer {
            causes: comp.enumerate(),
            complete: true,
        },
        _ => {
            let causes = comp.bests(bounds)?;
            Answer {
                complete: total == Some(causes.len() as u64),
                causes,
            }
        }
    };
    if !all_falsify(model, actual, &answer.causes) {
        return Err(Stop::Inconsistent);
    }
    Ok(Some(answer))
}

/// Local models of at most this many variables try the general search before the
/// solver (its cost grows exponentially with the candidates; the solver's setup is
/// about 0.1 ms).
const SEARCH_VARS: usize = 12;

/// Memory a local model's cut-set families may take before the solver takes over
/// (filling 1 GiB takes about half a second; 64 MiB a few tens of milliseconds).
const LOCAL_CUT_SET_BYTES: u64 = 64 << 20;

/// A complete local list is kept whole up to this many causes (or `max_causes`), so
/// that small models are listed whole even under a small `max_causes`.
const LOCAL_KEEP: usize = 1024;

/// Local models of at most this many variables are listed whole on the solver.
const LIST_WHOLE_VARS: usize = 16;

/// No module (the outcome's own, or "not a module root").
const NONE: usize = usize::MAX;

/// The module tree of a model's live variables.
struct Tree {
    /// Per module, children before parents, the outcome's last: its root variable
    /// (`None` for the outcome).
    roots: Vec<Option<u32>>,
    /// Per module: its parent module (the outcome's: itself).
    parent: Vec<usize>,
    /// Per module: the live variables whose nearest enclosing module it is (the root
    /// excluded), in topological order.
    members: Vec<Vec<u32>>,
    /// Per variable: the module it roots, or [`NONE`].
    module_of: Vec<usize>,
    /// Per variable: live (relevant, and a candidate or reading a live variable).
    live: Vec<bool>,
}

impl Tree {
    fn find(model: &Model) -> Tree {
        let n = model.vars.len();
        let (live, inputs) = live_inputs(model);
        let pd = PostDominators::new(model, &live, &inputs);
        let is_root = |i: usize| {
            i != n && !inputs[i].is_empty() && pd.lo[i] > pd.tin[i] && pd.hi[i] <= pd.tout[i]
        };
        // Modules in post-order of the tree (children before parents), outcome last.
        let mut module_of = vec![NONE; n];
        let mut roots: Vec<Option<u32>> = Vec::new();
        for &node in &pd.post {
            if node == n {
                roots.push(None);
            } else if is_root(node) {
                module_of[node] = roots.len();
                roots.push(Some(node as u32));
            }
        }
        let top = roots.len() - 1;
        // Nearest enclosing module (strictly above) of every live variable, top-down.
        let mut near = vec![NONE; n + 1];
        near[n] = top;
        let mut enclosing = vec![NONE; n];
        for &node in &pd.pre {
            if node == n {
                continue;
            }
            let up = pd.ipdom[node];
            enclosing[node] = near[up];
            near[node] = if module_of[node] != NONE {
                module_of[node]
            } else {
                near[up]
            };
        }
        let mut parent = vec![top; roots.len()];
        for (m, r) in roots.iter().enumerate() {
            if let Some(r) = r {
                parent[m] = enclosing[*r as usize];
            }
        }
        let mut members: Vec<Vec<u32>> = vec![Vec::new(); roots.len()];
        for &v in &model.order {
            if live[v as usize] && enclosing[v as usize] != NONE {
                members[enclosing[v as usize]].push(v);
            }
        }
        Tree {
            roots,
            parent,
            members,
            module_of,
            live,
        }
    }
}

/// The live variables and, per variable (and the outcome, at index `n`), its live
/// inputs, sorted.
fn live_inputs(model: &Model) -> (Vec<bool>, Vec<Vec<u32>>) {
    let n = model.vars.len();
    let mut live = vec![false; n];
    let mut inputs: Vec<Vec<u32>> = vec![Vec::new(); n + 1];
    for &v in &model.order {
        let i = v as usize;
        if !model.relevant[i] {
            continue;
        }
        if let Some(eq) = &model.vars[i].eq {
            eq.for_each_var(&mut |u| {
                if live[u as usize] {
                    inputs[i].push(u);
                }
            });
        }
        inputs[i].sort_unstable();
        inputs[i].dedup();
        live[i] = model.vars[i].candidate || !inputs[i].is_empty();
        if !live[i] {
            inputs[i].clear();
        }
    }
    model.outcome.for_each_var(&mut |u| {
        if live[u as usize] {
            inputs[n].push(u);
        }
    });
    inputs[n].sort_unstable();
    inputs[n].dedup();
    (live, inputs)
}

/// The post-dominator tree of the live variables towards the outcome (node `n`), its
/// Euler tour, and per node the least and greatest tour index of an input in its
/// subtree.
struct PostDominators {
    ipdom: Vec<usize>,
    tin: Vec<usize>,
    tout: Vec<usize>,
    lo: Vec<usize>,
    hi: Vec<usize>,
    /// Nodes in preorder and in post-order.
    pre: Vec<usize>,
    post: Vec<usize>,
}

impl PostDominators {
    fn new(model: &Model, live: &[bool], inputs: &[Vec<u32>]) -> PostDominators {
        let n = model.vars.len();
        let sink = n;
        let mut readers: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (r, ins) in inputs.iter().enumerate() {
            for &u in ins {
                readers[u as usize].push(r as u32);
            }
        }
        // Readers come later in topological order: a reverse sweep sees them first.
        let mut ipdom = vec![NONE; n + 1];
        let mut depth = vec![0usize; n + 1];
        ipdom[sink] = sink;
        let mut kids: Vec<Vec<u32>> = vec![Vec::new(); n + 1];
        for &v in model.order.iter().rev() {
            let i = v as usize;
            if !live[i] {
                continue;
            }
            let mut acc = NONE;
            for &r in &readers[i] {
                let r = r as usize;
                if ipdom[r] == NONE {
                    continue;
                }
                acc = if acc == NONE {
                    r
                } else {
                    lca(acc, r, &ipdom, &depth)
                };
            }
            // A live relevant variable always has a live reader or is read by the
            // outcome; without one it stays outside every module.
            if acc != NONE {
                ipdom[i] = acc;
                depth[i] = depth[acc] + 1;
            }
        }
        for &v in &model.order {
            let i = v as usize;
            if ipdom[i] != NONE {
                kids[ipdom[i]].push(v);
            }
        }
        let mut tin = vec![0usize; n + 1];
        let mut tout = vec![0usize; n + 1];
        let mut pre: Vec<usize> = Vec::with_capacity(n + 1);
        let mut post: Vec<usize> = Vec::with_capacity(n + 1);
        let mut stack: Vec<(usize, usize)> = vec![(sink, 0)];
        while let Some((node, k)) = stack.pop() {
            if k == 0 {
                tin[node] = pre.len();
                pre.push(node);
            }
            if k < kids[node].len() {
                stack.push((node, k + 1));
                stack.push((kids[node][k] as usize, 0));
            } else {
                tout[node] = pre.len() - 1;
                post.push(node);
            }
        }
        let mut lo = vec![usize::MAX; n + 1];
        let mut hi = vec![0usize; n + 1];
        for &node in pre.iter().rev() {
            for &u in &inputs[node] {
                lo[node] = lo[node].min(tin[u as usize]);
                hi[node] = hi[node].max(tin[u as usize]);
            }
            for &c in &kids[node] {
                lo[node] = lo[node].min(lo[c as usize]);
                hi[node] = hi[node].max(hi[c as usize]);
            }
        }
        PostDominators {
            ipdom,
            tin,
            tout,
            lo,
            hi,
            pre,
            post,
        }
    }
}

/// Lowest common ancestor in the post-dominator tree.
fn lca(mut a: usize, mut b: usize, up: &[usize], depth: &[usize]) -> usize {
    while a != b {
        if depth[a] > depth[b] {
            a = up[a];
        } else if depth[b] > depth[a] {
            b = up[b];
        } else {
            a = up[a];
            b = up[b];
        }
    }
    a
}

/// One minimal cause of a local model, in the model's variable ids: `X` (child modules
/// standing for their causes), a smallest `W`, and its weighted cost.
struct LocalCause {
    xs: Vec<u32>,
    ws: Vec<u32>,
    cost: u64,
}

/// A solved local model.
struct Solved {
    /// Local minimal causes: all of them when `all`, else those the answer needs.
    causes: Vec<LocalCause>,
    all: bool,
    /// The cheapest local cause.
    cheapest: Option<usize>,
    /// Per principal among the local variables: its best local cause.
    best_principal: BTreeMap<usize, usize>,
    /// Per child module root: the best local cause holding it.
    best_child: BTreeMap<u32, usize>,
}

impl Solved {
    fn bytes(&self) -> u64 {
        let ids: usize = self
            .causes
            .iter()
            .map(|c| c.xs.len() + c.ws.len() + 8)
            .sum();
        (ids * 4 + (self.best_principal.len() + self.best_child.len()) * 48) as u64
    }

    fn cost(&self, i: usize) -> u64 {
        self.causes[i].cost
    }
}

/// The local model of one module.
struct Local {
    model: Model,
    /// Local index → model variable.
    global: Vec<u32>,
    actual: Vec<bool>,
    weight: Vec<u64>,
    key: Vec<Option<usize>>,
    keys: usize,
    /// Keys from `first_child_key` on name child modules: key → child root.
    first_child_key: usize,
    child_of_key: Vec<u32>,
}

impl Local {
    /// Builds the local model of module `m` (its children already solved).
    fn build(
        model: &Model,
        actual: &[bool],
        tree: &Tree,
        m: usize,
        solved: &[Solved],
        principal_ix: &[Option<usize>],
    ) -> Result<Local, Stop> {
        let root = tree.roots[m];
        let mut global: Vec<u32> = tree.members[m].clone();
        if let Some(r) = root {
            global.push(r);
        }
        global.sort_unstable();
        let mut local_of: BTreeMap<u32, u32> = BTreeMap::new();
        for (l, &g) in global.iter().enumerate() {
            local_of.insert(g, l as u32);
        }
        let np = model.principals.len();
        let mut vars = Vec::with_capacity(global.len());
        let mut weight = vec![1u64; global.len()];
        let mut key: Vec<Option<usize>> = vec![None; global.len()];
        let mut child_of_key = Vec::new();
        for (l, &g) in global.iter().enumerate() {
            let gv = &model.vars[g as usize];
            let child = tree.module_of[g as usize];
            let is_child = child != NONE && Some(g) != root;
            let has_inputs = gv.eq.as_ref().is_some_and(|eq| {
                let mut any = false;
                eq.for_each_var(&mut |u| any |= tree.live[u as usize]);
                any
            });
            let var = if is_child {
                // A child module: a candidate flipping at the cost of its cheapest cause.
                let cost = solved[child].cheapest.map(|c| solved[child].cost(c));
                if let Some(c) = cost {
                    weight[l] = c;
                    key[l] = Some(np + child_of_key.len());
                    child_of_key.push(g);
                }
                Var {
                    name: gv.name.clone(),
                    principal: None,
                    candidate: cost.is_some(),
                    value: Some(actual[g as usize]),
                    eq: None,
                    source: Mechanism::Value(actual[g as usize]),
                }
            } else if Some(g) != root && !has_inputs {
                // A live variable reading nothing live: changes only when flipped.
                key[l] = principal_ix[g as usize];
                Var {
                    name: gv.name.clone(),
                    principal: None,
                    candidate: gv.candidate,
                    value: Some(actual[g as usize]),
                    eq: None,
                    source: Mechanism::Value(actual[g as usize]),
                }
            } else {
                let eq = match &gv.eq {
                    Some(eq) => rewrite(eq, &tree.live, &local_of, actual)?,
                    None => return Err(Stop::Inconsistent),
                };
                key[l] = principal_ix[g as usize];
                Var {
                    name: gv.name.clone(),
                    principal: None,
                    candidate: gv.candidate,
                    value: None,
                    eq: Some(eq),
                    source: gv.source.clone(),
                }
            };
            vars.push(var);
        }
        let outcome = match root {
            Some(r) => {
                let l = Node::Var(local_of[&r]);
                if actual[r as usize] {
                    l
                } else {
                    Node::Not(Box::new(l))
                }
            }
            None => rewrite(&model.outcome, &tree.live, &local_of, actual)?,
        };
        // Members are kept in topological order; the root reads them, so comes last.
        let order: Vec<u32> = tree.members[m]
            .iter()
            .chain(root.iter())
            .filter_map(|g| local_of.get(g).copied())
            .collect();
        let (progs, outcome_prog) = compile_all(&vars, &outcome);
        let index = vars
            .iter()
            .enumerate()
            .map(|(i, v)| (v.name.clone(), i as u32))
            .collect();
        let mut local = Model {
            vars,
            index,
            outcome,
            outcome_src: crate::expr::Expr::Const(true),
            order,
            progs,
            outcome_prog,
            relevant: Vec::new(),
            principals: Vec::new(),
            signs: None,
            groups: Groups::default(),
        };
        local.relevant = relevance(&local);
        local.signs = crate::monotone::analyse(&local);
        let exo: Vec<bool> = global.iter().map(|&g| actual[g as usize]).collect();
        let lanes = local.eval_lanes(&exo, &[], &[]);
        let local_actual: Vec<bool> = lanes.iter().map(|w| *w & 1 == 1).collect();
        if local_actual != exo {
            return Err(Stop::Inconsistent);
        }
        let keys = np + child_of_key.len();
        Ok(Local {
            model: local,
            global,
            actual: local_actual,
            weight,
            key,
            keys,
            first_child_key: np,
            child_of_key,
        })
    }

    /// Solves the local model exactly: every cause when a cheap path finishes, else the
    /// optimisation path's cheapest cause and the best cause of every key.
    fn solve(&self, bounds: &Bounds<'_>, steps_left: &mut u64) -> Result<Solved, Stop> {
        if let Some(all) = self.cheap_causes(bounds)? {
            return Ok(self.index_all(all, bounds.max_causes));
        }
        // A small local model is listed whole (its causes are few and cheap to list),
        // so that the answer can say it is complete.
        let listed = if self.model.vars.len() <= LIST_WHOLE_VARS {
            bounds.max_solver_causes.max(LOCAL_KEEP)
        } else {
            bounds.max_solver_causes.max(1)
        };
        let limits = Limits {
            max_causes: listed,
            max_steps: *steps_left,
            max_literals: bounds.max_memory_bytes / bounds.literal_bytes.max(1),
            deadline: bounds.deadline,
        };
        let keys = Keys {
            key: &self.key,
            count: self.keys,
            weight: &self.weight,
        };
        let listing = crate::optimise::list(&self.model, &self.actual, &keys, &limits)?;
        *steps_left = steps_left.saturating_sub(listing.steps);
        let causes: Vec<LocalCause> = listing
            .causes
            .into_iter()
            .zip(listing.costs)
            .map(|((xs, ws), cost)| self.globalise(xs, ws, cost))
            .collect();
        Ok(self.index(causes, listing.complete))
    }

    /// Every minimal cause of the local model with a smallest witness, on the cut-set
    /// path or the general search within its probe budget; `None` when neither finishes.
    fn cheap_causes(&self, bounds: &Bounds<'_>) -> Result<Option<Vec<LocalCause>>, Stop> {
        let found: Option<Vec<CauseSet>> = if let Some(signs) = &self.model.signs {
            match crate::monotone::minimal_causes(
                &self.model,
                signs,
                &self.actual,
                bounds.max_memory_bytes.min(LOCAL_CUT_SET_BYTES),
                bounds.cut_set_work,
                bounds.deadline,
            ) {
                Ok(cuts) => Some(cuts.into_iter().map(|x| (x, Vec::new())).collect()),
                Err(crate::monotone::Stop::Deadline) => return Err(Stop::Deadline),
                Err(crate::monotone::Stop::Memory | crate::monotone::Stop::Work) => None,
            }
        } else {
            None
        };
        let found = match found {
            Some(f) => Some(f),
            None if self.model.vars.len() > SEARCH_VARS => None,
            None => {
                // A slice of the probe budget: a local model that needs more is cheaper
                // on the solver.
                let per_eval = self.model.vars.len().max(1) as u64;
                let budget = bounds.max_evaluations.min(bounds.probe_work / per_eval / 8);
                let exo = self.model.exogenous_values(&[]);
                let search = Search::new(
                    &self.model,
                    &exo,
                    self.actual.clone(),
                    budget,
                    bounds.max_causes.max(LOCAL_KEEP),
                    bounds.deadline,
                );
                match search.run() {
                    Ok(all) => Some(all),
                    Err(SearchStop::Deadline) => return Err(Stop::Deadline),
                    Err(SearchStop::Budget | SearchStop::TooMany) => None,
                }
            }
        };
        Ok(found.map(|all| {
            all.into_iter()
                .map(|(xs, ws)| {
                    let cost =
                        xs.iter().map(|&x| self.weight[x as usize]).sum::<u64>() + ws.len() as u64;
                    self.globalise(xs, ws, cost)
                })
                .collect()
        }))
    }

    fn globalise(&self, xs: Vec<u32>, ws: Vec<u32>, cost: u64) -> LocalCause {
        let g = |ids: Vec<u32>| -> Vec<u32> {
            let mut out: Vec<u32> = ids.into_iter().map(|i| self.global[i as usize]).collect();
            out.sort_unstable();
            out
        };
        LocalCause {
            xs: g(xs),
            ws: g(ws),
            cost,
        }
    }

    /// Indexes a complete list: cheapest, best per key; keeps every cause when there
    /// are at most `max_causes`, else only those indexed.
    fn index_all(&self, mut all: Vec<LocalCause>, max_causes: usize) -> Solved {
        all.sort_by(|a, b| a.cost.cmp(&b.cost).then_with(|| a.xs.cmp(&b.xs)));
        let keep_all = all.len() <= max_causes.max(LOCAL_KEEP);
        let mut s = self.index(all, true);
        if !keep_all {
            let mut used: Vec<usize> = s
                .cheapest
                .iter()
                .chain(s.best_principal.values())
                .chain(s.best_child.values())
                .copied()
                .collect();
            used.sort_unstable();
            used.dedup();
            let mut remap = BTreeMap::new();
            let mut kept = Vec::with_capacity(used.len());
            let mut causes: Vec<Option<LocalCause>> = s.causes.into_iter().map(Some).collect();
            for (j, &i) in used.iter().enumerate() {
                remap.insert(i, j);
                if let Some(c) = causes[i].take() {
                    kept.push(c);
                }
            }
            s.causes = kept;
            s.all = false;
            s.cheapest = s.cheapest.map(|i| remap[&i]);
            for v in s.best_principal.values_mut() {
                *v = remap[v];
            }
            for v in s.best_child.values_mut() {
                *v = remap[v];
            }
        }
        s
    }

    /// The cheapest cause and the best cause of every key among `causes` (in order of
    /// cost: the first holding a key is its best).
    fn index(&self, causes: Vec<LocalCause>, all: bool) -> Solved {
        let mut by_cost: Vec<usize> = (0..causes.len()).collect();
        by_cost.sort_by_key(|&i| causes[i].cost);
        let mut best_principal = BTreeMap::new();
        let mut best_child = BTreeMap::new();
        let local_of = |g: u32| self.global.binary_search(&g).ok();
        for &i in &by_cost {
            for &g in &causes[i].xs {
                let Some(l) = local_of(g) else { continue };
                match self.key[l] {
                    Some(k) if k >= self.first_child_key => {
                        let root = self.child_of_key[k - self.first_child_key];
                        best_child.entry(root).or_insert(i);
                    }
                    Some(p) => {
                        best_principal.entry(p).or_insert(i);
                    }
                    None => {}
                }
            }
        }
        Solved {
            cheapest: by_cost.first().copied(),
            causes,
            all,
            best_principal,
            best_child,
        }
    }
}

/// `node` over the local model's indices: live variables by index, others as their
/// actual value.
fn rewrite(
    node: &Node,
    live: &[bool],
    local_of: &BTreeMap<u32, u32>,
    actual: &[bool],
) -> Result<Node, Stop> {
    Ok(match node {
        Node::Const(b) => Node::Const(*b),
        Node::Var(u) => {
            if live[*u as usize] {
                match local_of.get(u) {
                    Some(&l) => Node::Var(l),
                    // A live input outside the module: the tree is wrong.
                    None => return Err(Stop::Inconsistent),
                }
            } else {
                Node::Const(actual[*u as usize])
            }
        }
        Node::Not(e) => Node::Not(Box::new(rewrite(e, live, local_of, actual)?)),
        Node::And(es) | Node::Or(es) => {
            let mut out = Vec::with_capacity(es.len());
            for e in es {
                out.push(rewrite(e, live, local_of, actual)?);
            }
            if matches!(node, Node::And(_)) {
                Node::And(out)
            } else {
                Node::Or(out)
            }
        }
    })
}

/// The solved modules, composed into causes of the model.
struct Composition<'a> {
    principals: usize,
    tree: &'a Tree,
    solved: &'a [Solved],
}

impl Composition<'_> {
    fn top(&self) -> usize {
        self.tree.roots.len() - 1
    }

    /// Whether `x` in a cause of module `m` stands for a child module.
    fn child(&self, m: usize, x: u32) -> Option<usize> {
        let c = self.tree.module_of[x as usize];
        (c != NONE && c != m).then_some(c)
    }

    /// Local cause `i` of module `m` with every child module (but `skip`) replaced by
    /// its cheapest cause, recursively; appended to `xs`, `ws`.
    fn expand(
        &self,
        m: usize,
        i: usize,
        skip: Option<u32>,
        xs: &mut Vec<u32>,
        ws: &mut Vec<u32>,
    ) -> Result<(), Stop> {
        let mut stack = vec![(m, i, skip)];
        while let Some((m, i, skip)) = stack.pop() {
            let c = &self.solved[m].causes[i];
            ws.extend_from_slice(&c.ws);
            for &x in &c.xs {
                if Some(x) == skip {
                    // Stands for the cause inside, already expanded.
                    continue;
                }
                match self.child(m, x) {
                    Some(cm) => {
                        let Some(ci) = self.solved[cm].cheapest else {
                            return Err(Stop::Inconsistent);
                        };
                        stack.push((cm, ci, None));
                    }
                    _ => xs.push(x),
                }
            }
        }
        Ok(())
    }

    /// The extra cost of a cause inside each module on its way to the outcome:
    /// `best_parent(root) − c_root`, summed up the tree; `None` where the module's
    /// root is in no cause of its parent.
    fn extras(&self) -> Vec<Option<u64>> {
        let top = self.top();
        let mut extra: Vec<Option<u64>> = vec![None; self.tree.roots.len()];
        extra[top] = Some(0);
        for m in (0..top).rev() {
            let (Some(r), p) = (self.tree.roots[m], self.tree.parent[m]) else {
                continue;
            };
            let own = self.solved[m].cheapest.map(|i| self.solved[m].cost(i));
            let up = self.solved[p]
                .best_child
                .get(&r)
                .map(|&i| self.solved[p].cost(i));
            extra[m] = match (extra[p], up, own) {
                (Some(e), Some(u), Some(c)) => Some(e + u - c),
                _ => None,
            };
        }
        extra
    }

    /// The cheapest cause and each principal's best cause of the model.
    fn bests(&self, bounds: &Bounds<'_>) -> Result<Vec<CauseSet>, Stop> {
        let np = self.principals;
        let extra = self.extras();
        // Per principal: (total cost, module, local cause).
        let mut best: Vec<Option<(u64, usize, usize)>> = vec![None; np];
        for (m, s) in self.solved.iter().enumerate() {
            let Some(e) = extra[m] else { continue };
            for (&p, &i) in &s.best_principal {
                let total = s.cost(i) + e;
                if best[p].is_none_or(|(b, _, _)| total < b) {
                    best[p] = Some((total, m, i));
                }
            }
        }
        let mut out: Vec<CauseSet> = Vec::new();
        let mut ids = 0u64;
        let top = self.top();
        let mut wanted: Vec<(u64, usize, usize)> = best.into_iter().flatten().collect();
        if let Some(i) = self.solved[top].cheapest {
            wanted.push((self.solved[top].cost(i), top, i));
        }
        for (total, m, i) in wanted {
            if bounds.deadline.expired() {
                return Err(Stop::Deadline);
            }
            let (mut xs, mut ws) = (Vec::new(), Vec::new());
            self.expand(m, i, None, &mut xs, &mut ws)?;
            let mut cur = m;
            while let Some(r) = self.tree.roots[cur] {
                let p = self.tree.parent[cur];
                let Some(&j) = self.solved[p].best_child.get(&r) else {
                    return Err(Stop::Inconsistent);
                };
                self.expand(p, j, Some(r), &mut xs, &mut ws)?;
                cur = p;
            }
            xs.sort_unstable();
            ws.sort_unstable();
            if (xs.len() + ws.len()) as u64 != total {
                return Err(Stop::Inconsistent);
            }
            ids += (xs.len() + ws.len() + 8) as u64;
            if ids * 4 > bounds.max_memory_bytes {
                return Err(Stop::Memory);
            }
            out.push((xs, ws));
        }
        out.sort_unstable();
        out.dedup_by(|a, b| a.0 == b.0);
        Ok(out)
    }

    /// The modules the outcome's causes reach through child modules, when the lists
    /// on the way are complete (else `None`).
    fn reached(&self) -> Option<Vec<bool>> {
        let modules = self.solved.len();
        let mut needed = vec![false; modules];
        needed[self.top()] = true;
        // Parents come after their children: one sweep down the indices.
        for m in (0..modules).rev() {
            if !needed[m] {
                continue;
            }
            if !self.solved[m].all {
                return None;
            }
            for c in &self.solved[m].causes {
                for &x in &c.xs {
                    if let Some(cm) = self.child(m, x) {
                        needed[cm] = true;
                    }
                }
            }
        }
        Some(needed)
    }

    /// The number of minimal causes of the model (saturating) when the local lists it
    /// composes are complete, else `None`.
    fn count(&self) -> Option<u64> {
        let needed = self.reached()?;
        let mut count = vec![0u64; self.solved.len()];
        for (m, s) in self.solved.iter().enumerate() {
            if !needed[m] {
                continue;
            }
            let mut total = 0u64;
            for c in &s.causes {
                let mut prod = 1u64;
                for &x in &c.xs {
                    if let Some(cm) = self.child(m, x) {
                        prod = prod.saturating_mul(count[cm]);
                    }
                }
                total = total.saturating_add(prod);
            }
            count[m] = total;
        }
        count.last().copied()
    }

    /// Every minimal cause of the model (every local list complete, and few enough of
    /// them: the caller has counted).
    fn enumerate(&self) -> Vec<CauseSet> {
        let modules = self.solved.len();
        let top = self.top();
        let needed = self.reached().unwrap_or_default();
        let mut per: Vec<Vec<CauseSet>> = vec![Vec::new(); modules];
        for m in 0..modules {
            if !needed.get(m).copied().unwrap_or(false) {
                continue;
            }
            let mut all = Vec::new();
            for c in &self.solved[m].causes {
                let mut partial: Vec<CauseSet> = vec![(Vec::new(), c.ws.clone())];
                for &x in &c.xs {
                    match self.child(m, x) {
                        Some(cm) => {
                            let mut next = Vec::with_capacity(partial.len() * per[cm].len());
                            for (px, pw) in &partial {
                                for (sx, sw) in &per[cm] {
                                    let mut nx = px.clone();
                                    nx.extend_from_slice(sx);
                                    let mut nw = pw.clone();
                                    nw.extend_from_slice(sw);
                                    next.push((nx, nw));
                                }
                            }
                            partial = next;
                        }
                        None => partial.iter_mut().for_each(|(px, _)| px.push(x)),
                    }
                }
                all.extend(partial);
            }
            per[m] = all;
        }
        let mut out = std::mem::take(&mut per[top]);
        for (xs, ws) in out.iter_mut() {
            xs.sort_unstable();
            ws.sort_unstable();
        }
        out
    }
}
