//! The analytic oracle: ground truth by exact re-execution of the world.
//!
//! Written against the definitions (SPEC §3, §5) and sharing no code with
//! `audita-causal`. Guarantees:
//! - The candidate variables are the production-gated commands (backward closure of
//!   the actuations on the adverse entity realised by `t*`, through consumed relay
//!   inputs only) and one omission variable per triggered, unfulfilled halt duty on
//!   that entity. Citations of origin commands (vetoes, context) never create a
//!   candidate.
//! - The outcome function is tabulated by re-running the pinned world on every
//!   present/absent assignment of the candidates (others frozen at their actual
//!   values). The oracle refuses non-monotone functions ([`OracleError::NonMonotone`])
//!   rather than guess.
//! - Minimal causes are the minimal transversals of the prime implicants (on a
//!   monotone function: the minimal true sets); a variable's grade is `1/|X|` for the
//!   smallest minimal cause `X` containing it; a principal's ρ is the maximum over its
//!   variables, 0 when none.
//! - Profiles are `BTreeMap`s keyed by principal name and cover every non-sensor
//!   principal, so two runs compare bitwise.

use std::collections::{BTreeMap, BTreeSet};

use crate::world::{
    Action, Adverse, CommandId, Derivation, Destination, Duty, DutyId, Intervention, Mode,
    PrincipalId, Role, Source, WorldSpec,
};

/// Largest candidate set the oracle tabulates (2^n re-executions).
pub const MAX_CANDIDATES: usize = 18;

/// A binary variable of the structural model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Variable {
    /// Presence of a recorded command.
    Command(CommandId),
    /// The absence of a duty's required halt.
    Absence(DutyId),
}

/// Oracle errors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OracleError {
    /// Too many candidates to tabulate.
    #[error("{0} candidates exceed the oracle's exact limit of {MAX_CANDIDATES}")]
    TooManyCandidates(usize),
    /// The outcome function is not monotone in the candidates.
    #[error("outcome is not monotone in candidate {0}")]
    NonMonotone(usize),
}

/// Ground truth of one incident.
#[derive(Debug, Clone, PartialEq)]
pub struct Truth {
    /// The adverse outcome of the actual run.
    pub adverse: Option<Adverse>,
    /// Candidate variables in a fixed order.
    pub candidates: Vec<Variable>,
    /// Owner of each candidate.
    pub owners: Vec<PrincipalId>,
    /// Minimal causes as sorted candidate-index lists, sorted.
    pub causes: Vec<Vec<usize>>,
    /// Causal profile: Chockler–Halpern ρ per principal.
    pub causal: BTreeMap<String, f64>,
    /// Culpable profile: ρ where the principal is in breach, else 0.
    pub culpable: BTreeMap<String, f64>,
    /// Principals flagged conduit (faithful relays on the production path).
    pub conduit: BTreeSet<String>,
    /// Principals in breach of a registered duty.
    pub breach: BTreeSet<String>,
}

impl Truth {
    /// The causal profile with conduit-flagged principals set to 0.
    pub fn causal_originating(&self) -> BTreeMap<String, f64> {
        self.causal
            .iter()
            .map(|(k, v)| (k.clone(), if self.conduit.contains(k) { 0.0 } else { *v }))
            .collect()
    }
}

/// The production gate: candidate variables of the actual run.
pub fn candidates(spec: &WorldSpec) -> (Option<Adverse>, Vec<Variable>) {
    candidates_given(spec, &BTreeSet::new())
}

/// The production gate of the world in which `base` commands are absent.
pub fn candidates_given(
    spec: &WorldSpec,
    base: &BTreeSet<CommandId>,
) -> (Option<Adverse>, Vec<Variable>) {
    let run = spec.run(
        &Intervention {
            absent: base.clone(),
            fulfilled: BTreeSet::new(),
        },
        Mode::Pinned,
    );
    let Some(adv) = run.adverse else {
        return (None, Vec::new());
    };
    let hits = |a: &Action| match (adv, *a) {
        (Adverse::Safety { robot, .. }, Action::MoveTo { robot: r, .. })
        | (Adverse::Safety { robot, .. }, Action::SetSpeed { robot: r, .. })
        | (Adverse::Safety { robot, .. }, Action::Halt { robot: r }) => robot == r,
        (Adverse::Quality { batch, .. }, Action::SetParam { batch: b, .. }) => batch == b,
        _ => false,
    };
    let mut gated: BTreeSet<CommandId> = BTreeSet::new();
    let mut stack: Vec<CommandId> = run
        .actuations
        .iter()
        .filter(|e| {
            e.tick <= adv.tick() && hits(&e.action) && !matches!(e.action, Action::Halt { .. })
        })
        .filter_map(|e| match e.source {
            Source::Command(c) => Some(c),
            _ => None,
        })
        .collect();
    while let Some(c) = stack.pop() {
        if base.contains(&c) || !gated.insert(c) {
            continue;
        }
        if let Some(cmd) = spec.commands.get(c.0 as usize) {
            if cmd.derivation != Derivation::Origin {
                stack.extend(cmd.cites.iter().copied());
            }
        }
    }
    let mut vars: Vec<Variable> = gated.into_iter().map(Variable::Command).collect();
    if let Adverse::Safety { robot, tick, .. } = adv {
        let reports = run.reports.clone();
        for d in spec.unfulfilled_duties() {
            if let Some(Duty::HaltOnEntry { robot: r, .. }) = spec.duties.get(d.0 as usize) {
                if *r == robot
                    && spec
                        .dutiful_halt(d, &reports)
                        .is_some_and(|(t, _, _)| t <= tick)
                {
                    vars.push(Variable::Absence(d));
                }
            }
        }
    }
    (Some(adv), vars)
}

/// Owner of a variable.
pub fn owner(spec: &WorldSpec, v: Variable) -> PrincipalId {
    match v {
        Variable::Command(c) => spec
            .commands
            .get(c.0 as usize)
            .map(|c| c.author)
            .unwrap_or(PrincipalId(0)),
        Variable::Absence(d) => match spec.duties.get(d.0 as usize) {
            Some(Duty::HaltOnEntry { supervisor, .. }) => *supervisor,
            Some(Duty::ReviewRequired { principal }) => *principal,
            None => PrincipalId(0),
        },
    }
}

/// The intervention realising a present-set `mask` over `vars`.
pub fn intervention(vars: &[Variable], mask: u64) -> Intervention {
    let mut iv = Intervention::default();
    for (i, v) in vars.iter().enumerate() {
        if mask & (1 << i) == 0 {
            match *v {
                Variable::Command(c) => {
                    iv.absent.insert(c);
                }
                Variable::Absence(d) => {
                    iv.fulfilled.insert(d);
                }
            }
        }
    }
    iv
}

/// Tabulates `Y` over all present-sets of `vars` by pinned re-execution, with the
/// extra commands in `also_absent` treated as absent throughout.
pub fn tabulate(
    spec: &WorldSpec,
    vars: &[Variable],
    also_absent: &BTreeSet<CommandId>,
) -> Result<Vec<bool>, OracleError> {
    if vars.len() > MAX_CANDIDATES {
        return Err(OracleError::TooManyCandidates(vars.len()));
    }
    let actual = Intervention {
        absent: also_absent.clone(),
        fulfilled: BTreeSet::new(),
    };
    let kind = spec
        .run(&actual, Mode::Pinned)
        .adverse
        .map(|a| matches!(a, Adverse::Safety { .. }));
    let reports = spec.sensor_reports();
    Ok((0..1u64 << vars.len())
        .map(|mask| {
            let mut iv = intervention(vars, mask);
            iv.absent.extend(also_absent.iter().copied());
            let run = spec.run_with_reports(&iv, Mode::Pinned, reports.clone());
            run.adverse.is_some_and(|a| {
                Some(matches!(a, Adverse::Safety { .. })) == kind || kind.is_none()
            })
        })
        .collect())
}

/// Prime implicants (minimal true sets, as bit masks) of a monotone function given
/// as a truth table over `n` variables.
pub(crate) fn prime_implicants(n: usize, table: &[bool]) -> Vec<u64> {
    let full = if n == 0 { 0 } else { (1u64 << n) - 1 };
    (0..=full)
        .filter(|&m| {
            table[m as usize]
                && (0..n).all(|i| m & (1 << i) == 0 || !table[(m & !(1 << i)) as usize])
        })
        .collect()
}

/// Minimal causes of a monotone function given as a truth table over `n` variables
/// whose actual assignment is all-present: prime implicants (minimal true sets), then
/// their minimal transversals. Returns sorted index lists.
pub fn minimal_causes(n: usize, table: &[bool]) -> Result<Vec<Vec<usize>>, OracleError> {
    let full = (1u64 << n) - 1;
    if !table.get(full as usize).copied().unwrap_or(false) {
        return Ok(Vec::new());
    }
    for mask in 0..=full {
        if table[mask as usize] {
            for i in 0..n {
                if !table[(mask | (1 << i)) as usize] {
                    return Err(OracleError::NonMonotone(i));
                }
            }
        }
    }
    let implicants: Vec<u64> = (0..=full)
        .filter(|&m| {
            table[m as usize]
                && (0..n).all(|i| m & (1 << i) == 0 || !table[(m & !(1 << i)) as usize])
        })
        .collect();
    let mut by_size: Vec<u64> = (0..=full).collect();
    by_size.sort_by_key(|m| (m.count_ones(), *m));
    let mut transversals: Vec<u64> = Vec::new();
    for h in by_size {
        if h == 0 {
            continue;
        }
        if implicants.iter().all(|p| p & h != 0) && transversals.iter().all(|t| t & h != *t) {
            transversals.push(h);
        }
    }
    let mut out: Vec<Vec<usize>> = transversals
        .into_iter()
        .map(|t| (0..n).filter(|i| t & (1 << i) != 0).collect())
        .collect();
    out.sort();
    Ok(out)
}

/// Grades principals from minimal causes: `ρ_p = max 1/|X|` over causes with a
/// variable owned by `p`.
pub fn grade(
    spec: &WorldSpec,
    owners: &[PrincipalId],
    causes: &[Vec<usize>],
) -> BTreeMap<String, f64> {
    let mut rho: BTreeMap<String, f64> = spec
        .principals
        .iter()
        .filter(|p| p.role != Role::Sensor)
        .map(|p| (p.name.clone(), 0.0))
        .collect();
    for x in causes {
        let g = 1.0 / x.len() as f64;
        for &i in x {
            if let Some(o) = owners.get(i) {
                let e = rho.entry(spec.name(*o).to_string()).or_insert(0.0);
                if g > *e {
                    *e = g;
                }
            }
        }
    }
    rho
}

/// The speed envelope of a robot: the smallest limit of the zones containing its
/// initial position (`i64::MAX` if none).
pub fn envelope(spec: &WorldSpec, robot: usize) -> i64 {
    let Some(r) = spec.robots.get(robot) else {
        return i64::MAX;
    };
    spec.zones
        .iter()
        .filter(|z| {
            r.pos.x >= z.min.x && r.pos.x <= z.max.x && r.pos.y >= z.min.y && r.pos.y <= z.max.y
        })
        .map(|z| z.speed_limit)
        .min()
        .unwrap_or(i64::MAX)
}

fn faithful(spec: &WorldSpec, c: &crate::world::Command) -> bool {
    c.derivation != Derivation::Origin
        && c.cites.iter().any(|i| {
            spec.commands
                .get(i.0 as usize)
                .is_some_and(|p| p.action == c.action)
        })
}

/// Content-determined breach: computed from each principal's own commands and
/// absences against the registry (speed envelope, acceptance range, review duty, halt
/// duty). Faithful relays are judged on their input, not re-judged.
pub fn breaches(spec: &WorldSpec) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for c in &spec.commands {
        if faithful(spec, c) || c.is_reference() {
            continue;
        }
        let bad = match c.action {
            Action::SetSpeed { robot, speed } => speed > envelope(spec, robot.0 as usize),
            Action::SetParam { batch, value } => spec
                .batches
                .get(batch.0 as usize)
                .is_some_and(|b| value < b.range.0 || value > b.range.1),
            _ => false,
        };
        if bad {
            out.insert(spec.name(c.author).to_string());
        }
    }
    for d in &spec.duties {
        if let Duty::ReviewRequired { principal } = d {
            if spec
                .commands
                .iter()
                .any(|c| c.author == *principal && !c.reviewed)
            {
                out.insert(spec.name(*principal).to_string());
            }
        }
    }
    for d in spec.unfulfilled_duties() {
        out.insert(spec.name(owner(spec, Variable::Absence(d))).to_string());
    }
    out
}

/// Conduit candidates: principals all of whose gated commands are faithful relays
/// ([`truth`] keeps those with a positive grade).
pub fn conduits(spec: &WorldSpec, vars: &[Variable]) -> BTreeSet<String> {
    let mut per: BTreeMap<PrincipalId, bool> = BTreeMap::new();
    for v in vars {
        if let Variable::Command(c) = v {
            if let Some(cmd) = spec.commands.get(c.0 as usize) {
                let f = faithful(spec, cmd);
                let e = per.entry(cmd.author).or_insert(true);
                *e = *e && f;
            }
        } else {
            per.insert(owner(spec, *v), false);
        }
    }
    per.into_iter()
        .filter(|(_, f)| *f)
        .map(|(p, _)| spec.name(p).to_string())
        .collect()
}

/// Computes the full ground truth of a world.
pub fn truth(spec: &WorldSpec) -> Result<Truth, OracleError> {
    truth_given(spec, &BTreeSet::new())
}

/// Ground truth of the world in which the `base` commands are absent (the record is
/// otherwise unchanged; breach findings still read the whole record).
pub fn truth_given(spec: &WorldSpec, base: &BTreeSet<CommandId>) -> Result<Truth, OracleError> {
    let (adverse, vars) = candidates_given(spec, base);
    let owners: Vec<PrincipalId> = vars.iter().map(|v| owner(spec, *v)).collect();
    let causes = if adverse.is_some() {
        let table = tabulate(spec, &vars, base)?;
        minimal_causes(vars.len(), &table)?
    } else {
        Vec::new()
    };
    let causal = grade(spec, &owners, &causes);
    let breach = breaches(spec);
    let culpable = causal
        .iter()
        .map(|(k, v)| (k.clone(), if breach.contains(k) { *v } else { 0.0 }))
        .collect();
    let conduit = conduits(spec, &vars)
        .into_iter()
        .filter(|p| causal.get(p).is_some_and(|r| *r > 0.0))
        .collect();
    Ok(Truth {
        adverse,
        candidates: vars,
        owners,
        causes,
        causal,
        culpable,
        conduit,
        breach,
    })
}

/// Whether an actuating command reaches the world directly.
pub fn is_actuating(spec: &WorldSpec, c: CommandId) -> bool {
    spec.commands
        .get(c.0 as usize)
        .is_some_and(|c| c.destination == Destination::Actuator)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(n: usize, f: impl Fn(u64) -> bool) -> Vec<bool> {
        (0..1u64 << n).map(f).collect()
    }

    #[test]
    fn disjunction_gives_one_cause_of_size_two() {
        let t = table(2, |m| m != 0);
        assert_eq!(minimal_causes(2, &t).unwrap(), vec![vec![0, 1]]);
    }

    #[test]
    fn conjunction_gives_singletons() {
        let t = table(3, |m| m == 7);
        assert_eq!(
            minimal_causes(3, &t).unwrap(),
            vec![vec![0], vec![1], vec![2]]
        );
    }

    #[test]
    fn series_parallel_mixture() {
        // Y = (a | b) & c
        let t = table(3, |m| (m & 3 != 0) && (m & 4 != 0));
        assert_eq!(minimal_causes(3, &t).unwrap(), vec![vec![0, 1], vec![2]]);
    }

    #[test]
    fn non_monotone_is_refused() {
        let t = table(2, |m| m == 1 || m == 3 || m == 0);
        assert!(matches!(
            minimal_causes(2, &t),
            Err(OracleError::NonMonotone(_))
        ));
    }

    #[test]
    fn false_outcome_has_no_cause() {
        let t = table(2, |_| false);
        assert!(minimal_causes(2, &t).unwrap().is_empty());
    }
}
