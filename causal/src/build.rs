//! Building a [`Model`]: the builder, validation (identifiers resolve, names are
//! unique, equations acyclic) and compilation.
//!
//! Design constraints:
//! - Errors surface at [`ModelBuilder::build`], each naming the problem and its
//!   location ([`ModelError`]); no input panics.
//! - A model is compiled once: topological order, postfix programs, relevance, then
//!   the analyses over the compiled model (the monotonicity signs of
//!   [`crate::monotone`], the contraction groups of [`crate::contract`]). This module
//!   sits above the model and its analyses, so neither reaches up to the other.

use std::collections::BTreeMap;

use crate::contract::find_groups;
use crate::expr::{is_identifier, Expr};
use crate::model::{
    compile_all, relevance, EqSource, Groups, IntoEq, Location, Mechanism, Model, ModelError, Node,
    Var,
};
use crate::monotone::analyse;

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
        self,
        name: impl Into<String>,
        principal: Option<&str>,
        value: bool,
        candidate: bool,
    ) -> Self {
        self.declare(name.into(), principal, candidate, DeclMech::Value(value))
    }

    /// Declares an endogenous variable with its equation.
    pub fn endogenous(
        self,
        name: impl Into<String>,
        principal: Option<&str>,
        eq: impl IntoEq,
        candidate: bool,
    ) -> Self {
        let mech = DeclMech::Eq(eq.into_source().0);
        self.declare(name.into(), principal, candidate, mech)
    }

    /// Declares a variable whose declaration is malformed: `build` reports `err`.
    pub(crate) fn invalid(self, name: String, err: ModelError) -> Self {
        self.declare(name, None, false, DeclMech::Invalid(err))
    }

    /// Adds one declaration (errors surface at [`ModelBuilder::build`]).
    fn declare(
        mut self,
        name: String,
        principal: Option<&str>,
        candidate: bool,
        mech: DeclMech,
    ) -> Self {
        self.decls.push(Decl {
            name,
            principal: principal.map(str::to_string),
            candidate,
            mech,
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

        let (progs, outcome_prog) = compile_all(&vars, &outcome);

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
        model.signs = analyse(&model);
        model.groups = find_groups(&model);
        Ok(model)
    }
}

/// The expression of an equation source: parsed text, or the given expression.
fn parse_source(src: EqSource, loc: &Location) -> Result<Expr, ModelError> {
    match src {
        EqSource::Parsed(e) => Ok(e),
        EqSource::Text(t) => Expr::parse(&t).map_err(|source| ModelError::Parse {
            location: loc.clone(),
            source,
        }),
    }
}

/// Resolves an expression over variable names into a node over indices, flattening
/// nested conjunctions and disjunctions.
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
