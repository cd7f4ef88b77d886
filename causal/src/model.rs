//! Binary structural models: variables, mechanisms, the compiled model and its
//! evaluation. Built and validated by `build.rs`.
//!
//! Design constraints:
//! - A variable has a name (a SPEC §7 identifier), an optional principal (`None` is the
//!   environment), a `candidate` flag, and exactly one mechanism: an exogenously set
//!   actual value or an equation over other variables.
//! - A [`Model`] is immutable and validated: every identifier resolves, names are unique,
//!   the equations are acyclic. It is compiled once (topological order, postfix programs,
//!   the monotonicity analysis, the contraction groups), so attributing many variants
//!   of one model (exogenous values overridden) costs no re-validation.
//! - This module is the bottom of the engine: it holds the model's data, including the
//!   results of the analyses (`Signs`, `Groups`), and imports none of the modules that
//!   compute them (`monotone.rs`, `contract.rs`, `build.rs` sit above it).
//! - Variables are kept in name order; [`VarId`]s index that order, so every iteration
//!   over a model is deterministic.

use std::collections::BTreeMap;

use crate::expr::{Expr, ParseError};

/// Index of a variable in a [`Model`] (variables are stored in name order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VarId(pub(crate) u32);

impl VarId {
    /// The position of the variable in name order.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// How a variable gets its actual value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mechanism {
    /// Set exogenously to this actual value.
    Value(bool),
    /// Determined by an equation over other variables.
    Eq(Expr),
}

/// Where in a model a problem was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// The `outcome` expression.
    Outcome,
    /// The `eq` of the named variable.
    Eq(String),
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Outcome => f.write_str("outcome"),
            Location::Eq(v) => write!(f, "variables.{v}.eq"),
        }
    }
}

/// A model that cannot be built. Every variant names the problem and its location;
/// all are permanent (retrying the same input cannot help).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// The JSON text is malformed or has the wrong shape.
    #[error("invalid model JSON at line {line} column {column}: {message}")]
    Json {
        /// 1-based line of the problem.
        line: usize,
        /// 1-based column of the problem.
        column: usize,
        /// What serde_json reported.
        message: String,
    },
    /// A variable's declaration has the wrong shape (unknown field, wrong type).
    #[error("variables.{var}: {message}")]
    InvalidVariable {
        /// The variable.
        var: String,
        /// What is wrong with it.
        message: String,
    },
    /// A variable name is not a valid identifier.
    #[error("variables.{0}: invalid variable name (identifiers match [A-Za-z_][A-Za-z0-9_.:-]* and are not true/false)")]
    InvalidName(String),
    /// The same variable is declared twice.
    #[error("variables.{0}: declared twice")]
    Duplicate(String),
    /// A variable declares both `value` and `eq`.
    #[error("variables.{0}: has both `value` and `eq`")]
    BothValueAndEq(String),
    /// A variable declares neither `value` nor `eq`.
    #[error("variables.{0}: missing field `value` or `eq`")]
    NeitherValueNorEq(String),
    /// No outcome was given.
    #[error("missing field `outcome`")]
    MissingOutcome,
    /// An expression does not parse.
    #[error("{location}: {source}")]
    Parse {
        /// Which expression.
        location: Location,
        /// The parse failure with its byte offset.
        source: ParseError,
    },
    /// An expression references an undeclared variable.
    #[error("{location}: unknown identifier `{name}`")]
    UnknownIdentifier {
        /// Which expression.
        location: Location,
        /// The unknown name.
        name: String,
    },
    /// The equations are cyclic.
    #[error("variables.{var}: cycle in equations ({})", cycle.join(" -> "))]
    Cycle {
        /// A variable on the cycle.
        var: String,
        /// The cycle, starting and ending at `var`.
        cycle: Vec<String>,
    },
}

/// One declared variable (public view).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variable {
    /// The variable's name.
    pub name: String,
    /// The owning principal; `None` for the environment.
    pub principal: Option<String>,
    /// Whether the variable may appear in cause sets.
    pub candidate: bool,
    /// Its mechanism.
    pub mechanism: Mechanism,
}

/// A resolved expression over variable indices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Node {
    Const(bool),
    Var(u32),
    Not(Box<Node>),
    And(Vec<Node>),
    Or(Vec<Node>),
}

impl Node {
    pub(crate) fn for_each_var(&self, f: &mut impl FnMut(u32)) {
        match self {
            Node::Const(_) => {}
            Node::Var(v) => f(*v),
            Node::Not(e) => e.for_each_var(f),
            Node::And(es) | Node::Or(es) => es.iter().for_each(|e| e.for_each_var(f)),
        }
    }
}

/// Postfix program evaluated over 64 lanes at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Const(bool),
    Load(u32),
    Not,
    And(u32),
    Or(u32),
}

pub(crate) fn compile(node: &Node, out: &mut Vec<Op>) {
    match node {
        Node::Const(b) => out.push(Op::Const(*b)),
        Node::Var(v) => out.push(Op::Load(*v)),
        Node::Not(e) => {
            compile(e, out);
            out.push(Op::Not);
        }
        Node::And(es) | Node::Or(es) => {
            for e in es {
                compile(e, out);
            }
            let n = es.len() as u32;
            out.push(if matches!(node, Node::And(_)) {
                Op::And(n)
            } else {
                Op::Or(n)
            });
        }
    }
}

/// Runs a postfix program; `vals` holds one 64-lane word per variable.
pub(crate) fn run(ops: &[Op], vals: &[u64], stack: &mut Vec<u64>) -> u64 {
    stack.clear();
    for op in ops {
        match *op {
            Op::Const(b) => stack.push(if b { !0 } else { 0 }),
            Op::Load(v) => stack.push(vals[v as usize]),
            Op::Not => {
                if let Some(top) = stack.last_mut() {
                    *top = !*top;
                }
            }
            Op::And(n) | Op::Or(n) => {
                let is_and = matches!(op, Op::And(_));
                let base = stack.len().saturating_sub(n as usize);
                let mut acc = if is_and { !0u64 } else { 0 };
                for w in &stack[base..] {
                    if is_and {
                        acc &= *w;
                    } else {
                        acc |= *w;
                    }
                }
                stack.truncate(base);
                stack.push(acc);
            }
        }
    }
    stack.pop().unwrap_or(0)
}

#[derive(Debug, Clone)]
pub(crate) struct Var {
    pub name: String,
    pub principal: Option<String>,
    pub candidate: bool,
    /// `Some(value)` for exogenous variables.
    pub value: Option<bool>,
    pub eq: Option<Node>,
    pub source: Mechanism,
}

/// A validated, compiled structural model.
#[derive(Debug, Clone)]
pub struct Model {
    pub(crate) vars: Vec<Var>,
    pub(crate) index: BTreeMap<String, u32>,
    pub(crate) outcome: Node,
    pub(crate) outcome_src: Expr,
    /// Variables in topological order (parents first).
    pub(crate) order: Vec<u32>,
    pub(crate) progs: Vec<Vec<Op>>,
    pub(crate) outcome_prog: Vec<Op>,
    /// Whether each variable is an ancestor of the outcome.
    pub(crate) relevant: Vec<bool>,
    /// Sorted non-null principals.
    pub(crate) principals: Vec<String>,
    pub(crate) signs: Option<Signs>,
    pub(crate) groups: Groups,
}

impl Model {
    /// For each variable, the index of its principal in `principals` (`None`: no
    /// principal).
    pub(crate) fn principal_index(&self) -> Vec<Option<usize>> {
        self.vars
            .iter()
            .map(|v| {
                v.principal
                    .as_ref()
                    .and_then(|p| self.principals.binary_search(p).ok())
            })
            .collect()
    }

    /// Looks a variable up by name.
    pub fn var(&self, name: &str) -> Option<VarId> {
        self.index.get(name).map(|&i| VarId(i))
    }

    /// Number of variables.
    pub fn len(&self) -> usize {
        self.vars.len()
    }

    /// Whether the model has no variables.
    pub fn is_empty(&self) -> bool {
        self.vars.is_empty()
    }

    /// The name of a variable.
    pub fn name(&self, id: VarId) -> &str {
        &self.vars[id.index()].name
    }

    /// The principal owning a variable (`None` for the environment).
    pub fn principal(&self, id: VarId) -> Option<&str> {
        self.vars[id.index()].principal.as_deref()
    }

    /// Whether a variable is exogenous (has a `value`).
    pub fn is_exogenous(&self, id: VarId) -> bool {
        self.vars[id.index()].value.is_some()
    }

    /// Whether a variable may appear in causes.
    pub fn is_candidate(&self, id: VarId) -> bool {
        self.vars[id.index()].candidate
    }

    /// All variables in name order (public view).
    pub fn variables(&self) -> impl Iterator<Item = Variable> + '_ {
        self.vars.iter().map(|v| Variable {
            name: v.name.clone(),
            principal: v.principal.clone(),
            candidate: v.candidate,
            mechanism: v.source.clone(),
        })
    }

    /// The outcome expression.
    pub fn outcome(&self) -> &Expr {
        &self.outcome_src
    }

    /// The sorted non-null principals of the model.
    pub fn principals(&self) -> &[String] {
        &self.principals
    }

    /// Whether the automatic monotone fast path applies (every mechanism is unate in
    /// the candidate-dependent variables, after renaming negated literals).
    pub fn is_monotone(&self) -> bool {
        self.signs.is_some()
    }

    /// Actual values of all variables (name order) under exogenous `overrides`.
    pub fn evaluate(&self, overrides: &[(VarId, bool)]) -> Vec<bool> {
        let exo = self.exogenous_values(overrides);
        let vals = self.eval_lanes(&exo, &[], &[]);
        vals.iter().map(|w| *w & 1 == 1).collect()
    }

    pub(crate) fn exogenous_values(&self, overrides: &[(VarId, bool)]) -> Vec<bool> {
        let mut exo: Vec<bool> = self.vars.iter().map(|v| v.value.unwrap_or(false)).collect();
        for &(id, b) in overrides {
            if let Some(slot) = exo.get_mut(id.index()) {
                *slot = b;
            }
        }
        exo
    }

    /// Evaluates all variables over 64 lanes: variable `i` is forced to `force_val[i]`
    /// in the lanes of `force_mask[i]` (empty slices force nothing).
    pub(crate) fn eval_lanes(
        &self,
        exo: &[bool],
        force_mask: &[u64],
        force_val: &[u64],
    ) -> Vec<u64> {
        let mut vals = vec![0u64; self.vars.len()];
        let mut stack = Vec::new();
        self.eval_into(exo, force_mask, force_val, &mut vals, &mut stack);
        vals
    }

    pub(crate) fn eval_into(
        &self,
        exo: &[bool],
        force_mask: &[u64],
        force_val: &[u64],
        vals: &mut [u64],
        stack: &mut Vec<u64>,
    ) -> u64 {
        for &v in &self.order {
            let i = v as usize;
            let natural = match self.vars[i].value {
                Some(_) => {
                    if exo[i] {
                        !0
                    } else {
                        0
                    }
                }
                None => run(&self.progs[i], vals, stack),
            };
            vals[i] = match force_mask.get(i) {
                Some(&m) if m != 0 => (natural & !m) | (force_val[i] & m),
                _ => natural,
            };
        }
        run(&self.outcome_prog, vals, stack)
    }
}

pub(crate) enum EqSource {
    Text(String),
    Parsed(Expr),
}

/// Something usable as an equation: expression text or a parsed [`Expr`].
pub trait IntoEq {
    #[doc(hidden)]
    fn into_source(self) -> EqSourcePub;
}

/// Opaque carrier for [`IntoEq`].
pub struct EqSourcePub(pub(crate) EqSource);

impl IntoEq for &str {
    fn into_source(self) -> EqSourcePub {
        EqSourcePub(EqSource::Text(self.to_string()))
    }
}
impl IntoEq for String {
    fn into_source(self) -> EqSourcePub {
        EqSourcePub(EqSource::Text(self))
    }
}
impl IntoEq for &String {
    fn into_source(self) -> EqSourcePub {
        EqSourcePub(EqSource::Text(self.clone()))
    }
}
impl IntoEq for Expr {
    fn into_source(self) -> EqSourcePub {
        EqSourcePub(EqSource::Parsed(self))
    }
}
impl IntoEq for &Expr {
    fn into_source(self) -> EqSourcePub {
        EqSourcePub(EqSource::Parsed(self.clone()))
    }
}

/// The postfix programs of the variables' equations (empty for exogenous ones) and
/// of the outcome.
pub(crate) fn compile_all(vars: &[Var], outcome: &Node) -> (Vec<Vec<Op>>, Vec<Op>) {
    let progs = vars
        .iter()
        .map(|v| {
            let mut ops = Vec::new();
            if let Some(eq) = &v.eq {
                compile(eq, &mut ops);
            }
            ops
        })
        .collect();
    let mut outcome_prog = Vec::new();
    compile(outcome, &mut outcome_prog);
    (progs, outcome_prog)
}

/// Which variables are ancestors of the outcome.
pub(crate) fn relevance(model: &Model) -> Vec<bool> {
    let mut relevant = vec![false; model.vars.len()];
    model
        .outcome
        .for_each_var(&mut |v| relevant[v as usize] = true);
    for &v in model.order.iter().rev() {
        if relevant[v as usize] {
            if let Some(eq) = &model.vars[v as usize].eq {
                eq.for_each_var(&mut |u| relevant[u as usize] = true);
            }
        }
    }
    relevant
}

/// Signs of the live variables of a monotone model (computed by the analysis in
/// `monotone.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Signs {
    /// +1 / -1 for live ancestors of the outcome, 0 otherwise.
    pub sign: Vec<i8>,
    pub live: Vec<bool>,
}

/// One same-author conjunctive group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Group {
    /// Members, sorted by variable index; `members[0]` is the representative.
    pub members: Vec<u32>,
}

/// The groups of a model and its contraction (found by `contract.rs`; lifted back
/// there too).
#[derive(Debug, Clone, Default)]
pub(crate) struct Groups {
    pub groups: Vec<Group>,
    /// The contracted model (present iff there is at least one group).
    pub contracted: Option<Box<Model>>,
}
