//! Canonical contraction of same-author conjunctive groups (granularity invariance).
//!
//! Design constraints:
//! - A *group* is a set of at least two exogenous variables with the same non-null
//!   principal and the same candidate flag, each of which occurs only as a direct
//!   operand of conjunctions, and all of which occur in exactly the same conjunctions.
//!   Every mechanism then reads them only through their conjunction, as the paper's
//!   definition requires; the test is syntactic on flattened conjunctions.
//! - The contracted model keeps one representative per group (the first member by
//!   name) and drops the other members from every conjunction; at attribution time the
//!   representative takes the conjunction of the members' values.
//! - Causes are computed and graded on the contracted model and lifted back: if the
//!   group holds actually, a cause through the representative stands for one cause per
//!   member (falsifying any one member falsifies the group); if it does not, it stands
//!   for the single set of the members that are actually false. The grade is the
//!   contracted one, so splitting one message into several chunks changes no grade.

use std::collections::BTreeMap;

use crate::model::{compile_all, relevance, Group, Groups, Model, Node};
use crate::monotone::analyse;

#[derive(Default)]
struct Occurrences {
    /// Conjunction ids in which the variable is a direct operand.
    ands: Vec<usize>,
    /// Whether it occurs anywhere else.
    elsewhere: bool,
}

fn scan(node: &Node, under_and: Option<usize>, next_id: &mut usize, occ: &mut [Occurrences]) {
    match node {
        Node::Const(_) => {}
        Node::Var(v) => {
            let o = &mut occ[*v as usize];
            match under_and {
                Some(id) => o.ands.push(id),
                None => o.elsewhere = true,
            }
        }
        Node::Not(e) => scan(e, None, next_id, occ),
        Node::And(es) => {
            let id = *next_id;
            *next_id += 1;
            for e in es {
                scan(e, Some(id), next_id, occ);
            }
        }
        Node::Or(es) => {
            for e in es {
                scan(e, None, next_id, occ);
            }
        }
    }
}

/// Finds the groups of a model and builds its contraction.
pub(crate) fn find_groups(model: &Model) -> Groups {
    let n = model.vars.len();
    let mut occ: Vec<Occurrences> = (0..n).map(|_| Occurrences::default()).collect();
    let mut next_id = 0;
    for v in &model.vars {
        if let Some(eq) = &v.eq {
            scan(eq, None, &mut next_id, &mut occ);
        }
    }
    scan(&model.outcome, None, &mut next_id, &mut occ);

    let mut by_key: BTreeMap<(String, bool, Vec<usize>), Vec<u32>> = BTreeMap::new();
    for (i, v) in model.vars.iter().enumerate() {
        let (Some(p), Some(_)) = (&v.principal, v.value) else {
            continue;
        };
        let o = &mut occ[i];
        if o.elsewhere || o.ands.is_empty() {
            continue;
        }
        o.ands.sort_unstable();
        o.ands.dedup();
        by_key
            .entry((p.clone(), v.candidate, o.ands.clone()))
            .or_default()
            .push(i as u32);
    }
    let groups: Vec<Group> = by_key
        .into_values()
        .filter(|m| m.len() >= 2)
        .map(|mut members| {
            members.sort_unstable();
            Group { members }
        })
        .collect();
    if groups.is_empty() {
        return Groups::default();
    }
    let mut dropped = vec![false; n];
    for g in &groups {
        for &m in &g.members[1..] {
            dropped[m as usize] = true;
        }
    }
    let mut contracted = model.clone();
    contracted.groups = Groups::default();
    for v in contracted.vars.iter_mut() {
        if let Some(eq) = v.eq.as_mut() {
            drop_members(eq, &dropped);
        }
    }
    drop_members(&mut contracted.outcome, &dropped);
    (contracted.progs, contracted.outcome_prog) =
        compile_all(&contracted.vars, &contracted.outcome);
    contracted.relevant = relevance(&contracted);
    contracted.signs = analyse(&contracted);
    Groups {
        groups,
        contracted: Some(Box::new(contracted)),
    }
}

fn drop_members(node: &mut Node, dropped: &[bool]) {
    match node {
        Node::Const(_) | Node::Var(_) => {}
        Node::Not(e) => drop_members(e, dropped),
        Node::And(es) => {
            es.retain(|e| !matches!(e, Node::Var(v) if dropped[*v as usize]));
            es.iter_mut().for_each(|e| drop_members(e, dropped));
        }
        Node::Or(es) => es.iter_mut().for_each(|e| drop_members(e, dropped)),
    }
}

impl Groups {
    /// Exogenous values for the contracted model: representatives take the conjunction.
    pub(crate) fn contracted_values(&self, exo: &[bool]) -> Vec<bool> {
        let mut out = exo.to_vec();
        for g in &self.groups {
            out[g.members[0] as usize] = g.members.iter().all(|&m| exo[m as usize]);
        }
        out
    }

    /// Lifts a cause of the contracted model to the causes of the original model: at
    /// most `cap` of them (at least one), and whether more exist.
    pub(crate) fn lift(&self, xs: &[u32], exo: &[bool], cap: usize) -> (Vec<Vec<u32>>, bool) {
        let cap = cap.max(1);
        let mut alternatives: Vec<Vec<u32>> = vec![Vec::new()];
        let mut more = false;
        for &x in xs {
            let group = self.groups.iter().find(|g| g.members[0] == x);
            let options: Vec<Vec<u32>> = match group {
                None => vec![vec![x]],
                Some(g) => {
                    if g.members.iter().all(|&m| exo[m as usize]) {
                        g.members.iter().map(|&m| vec![m]).collect()
                    } else {
                        vec![g
                            .members
                            .iter()
                            .copied()
                            .filter(|&m| !exo[m as usize])
                            .collect()]
                    }
                }
            };
            let mut next =
                Vec::with_capacity(alternatives.len().saturating_mul(options.len()).min(cap));
            'fill: for a in &alternatives {
                for o in &options {
                    if next.len() == cap {
                        more = true;
                        break 'fill;
                    }
                    let mut s = a.clone();
                    s.extend_from_slice(o);
                    next.push(s);
                }
            }
            alternatives = next;
        }
        for a in alternatives.iter_mut() {
            a.sort_unstable();
        }
        (alternatives, more)
    }
}
