//! Binary structural models: variables, mechanisms, the builder, validation.
//!
//! Design constraints:
//! - A variable has a name (a SPEC §7 identifier), an optional principal (`None` is the
//!   environment), a `candidate` flag, and exactly one mechanism: an exogenously set
//!   actual value or an equation over other variables.
//! - A [`Model`] is immutable and validated: every identifier resolves, names are unique,
//!   the equations are acyclic. It is compiled once (topological order, postfix programs,
//!   the monotonicity analysis, the contraction groups), so attributing many variants
//!   of one model (exogenous values overridden) costs no re-validation.
//! - Variables are kept in name order; [`VarId`]s index that order, so every iteration
//!   over a model is deterministic.

use std::collections::BTreeMap;

use crate::contract::Groups;
use crate::expr::{is_identifier, Expr, ParseError};
use crate::monotone::Signs;

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

enum EqSource {
    Text(String),
    Parsed(Expr),
}

/// Something usable as an equation: expression text or a parsed [`Expr`].
pub trait IntoEq {
    #[doc(hidden)]
    fn into_source(self) -> EqSourcePub;
}

/// Opaque carrier for [`IntoEq`].
pub struct EqSourcePub(EqSource);

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

struct Decl {
    name: String,
    principal: Option<String>,
    candidate: bool,
    mech: DeclMech,
}

enum DeclMech {
    Value(bool),
    Eq(EqSource),
    Invalid(ModelError),
}

/// Programmatic construction of a [`Model`]; errors surface at [`ModelBuilder::build`].
#[derive(Default)]
pub struct ModelBuilder {
    decls: Vec<Decl>,
    outcome: Option<EqSource>,
}

impl ModelBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares an exogenous variable with its actual value.
    pub fn exogenous(
        mut self,
        name: impl Into<String>,
        principal: Option<&str>,
        value: bool,
        candidate: bool,
    ) -> Self {
        self.decls.push(Decl {
            name: name.into(),
            principal: principal.map(str::to_string),
            candidate,
            mech: DeclMech::Value(value),
        });
        self
    }

    /// Declares an endogenous variable with its equation.
    pub fn endogenous(
        mut self,
        name: impl Into<String>,
        principal: Option<&str>,
        eq: impl IntoEq,
        candidate: bool,
    ) -> Self {
        self.decls.push(Decl {
            name: name.into(),
            principal: principal.map(str::to_string),
            candidate,
            mech: DeclMech::Eq(eq.into_source().0),
        });
        self
    }

    pub(crate) fn invalid(mut self, name: String, err: ModelError) -> Self {
        self.decls.push(Decl {
            name,
            principal: None,
            candidate: false,
            mech: DeclMech::Invalid(err),
        });
        self
    }

    /// Sets the outcome expression.
    pub fn outcome(mut self, outcome: impl IntoEq) -> Self {
        self.outcome = Some(outcome.into_source().0);
        self
    }

    /// Validates and compiles the model.
    pub fn build(self) -> Result<Model, ModelError> {
        let mut index = BTreeMap::new();
        for d in &self.decls {
            if let DeclMech::Invalid(e) = &d.mech {
                return Err(e.clone());
            }
            if !is_identifier(&d.name) {
                return Err(ModelError::InvalidName(d.name.clone()));
            }
            if index.insert(d.name.clone(), 0u32).is_some() {
                return Err(ModelError::Duplicate(d.name.clone()));
            }
        }
        for (i, v) in index.values_mut().enumerate() {
            *v = i as u32;
        }
        let mut decls = self.decls;
        decls.sort_by(|a, b| a.name.cmp(&b.name));

        let mut vars = Vec::with_capacity(decls.len());
        for d in decls {
            let (value, eq, source) = match d.mech {
                DeclMech::Value(b) => (Some(b), None, Mechanism::Value(b)),
                DeclMech::Eq(src) => {
                    let loc = Location::Eq(d.name.clone());
                    let expr = parse_source(src, &loc)?;
                    let node = resolve(&expr, &index, &loc)?;
                    (None, Some(node), Mechanism::Eq(expr))
                }
                DeclMech::Invalid(e) => return Err(e),
            };
            vars.push(Var {
                name: d.name,
                principal: d.principal,
                candidate: d.candidate,
                value,
                eq,
                source,
            });
        }
        let outcome_src = parse_source(
            self.outcome.ok_or(ModelError::MissingOutcome)?,
            &Location::Outcome,
        )?;
        let outcome = resolve(&outcome_src, &index, &Location::Outcome)?;
        let order = topo_order(&vars)?;

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
        compile(&outcome, &mut outcome_prog);

        let mut principals: Vec<String> = vars.iter().filter_map(|v| v.principal.clone()).collect();
        principals.sort();
        principals.dedup();

        let mut model = Model {
            vars,
            index,
            outcome,
            outcome_src,
            order,
            progs,
            outcome_prog,
            relevant: Vec::new(),
            principals,
            signs: None,
            groups: Groups::default(),
        };
        model.relevant = relevance(&model);
        model.signs = crate::monotone::analyse(&model);
        model.groups = crate::contract::find_groups(&model);
        Ok(model)
    }
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

fn parse_source(src: EqSource, loc: &Location) -> Result<Expr, ModelError> {
    match src {
        EqSource::Parsed(e) => Ok(e),
        EqSource::Text(t) => Expr::parse(&t).map_err(|source| ModelError::Parse {
            location: loc.clone(),
            source,
        }),
    }
}

fn resolve(e: &Expr, index: &BTreeMap<String, u32>, loc: &Location) -> Result<Node, ModelError> {
    Ok(match e {
        Expr::Const(b) => Node::Const(*b),
        Expr::Var(name) => match index.get(name) {
            Some(&i) => Node::Var(i),
            None => {
                return Err(ModelError::UnknownIdentifier {
                    location: loc.clone(),
                    name: name.clone(),
                })
            }
        },
        Expr::Not(inner) => Node::Not(Box::new(resolve(inner, index, loc)?)),
        Expr::And(es) | Expr::Or(es) => {
            let is_and = matches!(e, Expr::And(_));
            let mut out = Vec::with_capacity(es.len());
            for x in es {
                match (resolve(x, index, loc)?, is_and) {
                    (Node::And(inner), true) | (Node::Or(inner), false) => out.extend(inner),
                    (n, _) => out.push(n),
                }
            }
            if is_and {
                Node::And(out)
            } else {
                Node::Or(out)
            }
        }
    })
}

/// Kahn's algorithm; on failure walks parents to report one cycle.
fn topo_order(vars: &[Var]) -> Result<Vec<u32>, ModelError> {
    let n = vars.len();
    let mut parents: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut children: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (i, v) in vars.iter().enumerate() {
        if let Some(eq) = &v.eq {
            eq.for_each_var(&mut |u| parents[i].push(u));
            parents[i].sort_unstable();
            parents[i].dedup();
            for &u in &parents[i] {
                children[u as usize].push(i as u32);
            }
        }
    }
    let mut indeg: Vec<usize> = parents.iter().map(Vec::len).collect();
    let mut ready: std::collections::BTreeSet<u32> =
        (0..n as u32).filter(|&i| indeg[i as usize] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(v) = ready.pop_first() {
        order.push(v);
        for &c in &children[v as usize] {
            indeg[c as usize] -= 1;
            if indeg[c as usize] == 0 {
                ready.insert(c);
            }
        }
    }
    if order.len() == n {
        return Ok(order);
    }
    // Every remaining variable has a remaining parent: walk until a repeat.
    let start = (0..n).find(|&i| indeg[i] > 0).unwrap_or(0);
    let mut seen = vec![usize::MAX; n];
    let mut path = Vec::new();
    let mut cur = start;
    while seen[cur] == usize::MAX {
        seen[cur] = path.len();
        path.push(cur);
        cur = parents[cur]
            .iter()
            .map(|&p| p as usize)
            .find(|&p| indeg[p] > 0)
            .unwrap_or(cur);
    }
    let mut cycle: Vec<String> = path[seen[cur]..]
        .iter()
        .map(|&i| vars[i].name.clone())
        .collect();
    cycle.reverse();
    // `cycle` now follows dependency direction child <- parent reversed: parent -> child.
    let first = cycle.first().cloned().unwrap_or_default();
    cycle.push(first.clone());
    Err(ModelError::Cycle { var: first, cycle })
}
