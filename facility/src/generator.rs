//! The parameterised generator: random series-parallel incidents composed of monotone
//! gadgets, only some adverse.
//!
//! Design constraints:
//! - Gadgets: disjunction of width `w` (a dispatcher relaying any of `w` proposals),
//!   conjunction of width `k` (a checker relaying only when all `k` inputs arrive),
//!   chains of depth `d` (faithful relays in series) and a duty-conditioned absence (a
//!   supervisor's registered halt, issued or not). They nest into a random tree whose
//!   root feeds a robot (safety unit) or a batch line (quality unit).
//! - Each leaf proposal is issued with a drawn probability, and the supervisor may
//!   fulfil its duty, so structure, not construction, decides whether harm occurs.
//! - The planted truth is computed analytically from the composed Boolean function of
//!   the gadget tree (no world run); tests compare it with the oracle's re-execution.
//! - Incidents are kept to at most [`crate::oracle::MAX_CANDIDATES`] variables.

use std::collections::{BTreeMap, BTreeSet};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::oracle::{grade, minimal_causes, OracleError};
use crate::scenario::{arrival_tick, Builder, Planted, Scenario};
use crate::world::{Action, Batch, BatchId, CommandId, Derivation, Duty, PrincipalId, Role};

/// Generator parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// Maximum disjunction width.
    pub max_width: usize,
    /// Maximum conjunction width.
    pub max_conj: usize,
    /// Maximum chain depth.
    pub max_depth: usize,
    /// Maximum nesting of composite gadgets.
    pub max_nesting: usize,
    /// Probability that a leaf proposal is issued.
    pub p_issue: f64,
    /// Probability that a duty-conditioned absence gadget is present.
    pub p_duty: f64,
    /// Probability that a present duty is fulfilled.
    pub p_fulfilled: f64,
    /// Probability of the quality unit instead of the safety unit.
    pub p_quality: f64,
}

impl Default for Params {
    fn default() -> Self {
        Self {
            max_width: 3,
            max_conj: 3,
            max_depth: 3,
            max_nesting: 2,
            p_issue: 0.65,
            p_duty: 0.35,
            p_fulfilled: 0.25,
            p_quality: 0.25,
        }
    }
}

/// A gadget of the composed outcome function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gadget {
    /// A leaf proposal (`compliant` leaves are co-causes without breach).
    Leaf {
        /// Whether the proposal is within the registered envelope.
        compliant: bool,
    },
    /// Any input suffices.
    Or(Vec<Gadget>),
    /// Every input is needed.
    And(Vec<Gadget>),
    /// Faithful relays in series.
    Chain(usize, Box<Gadget>),
}

fn draw(rng: &mut ChaCha8Rng, p: &Params, nesting: usize, in_and: bool) -> Gadget {
    let composite = nesting < p.max_nesting && rng.gen_bool(if nesting == 0 { 0.9 } else { 0.45 });
    if !composite {
        return Gadget::Leaf {
            compliant: in_and && rng.gen_bool(0.3),
        };
    }
    match rng.gen_range(0..3) {
        0 => {
            let w = rng.gen_range(2..=p.max_width.max(2));
            Gadget::Or((0..w).map(|_| draw(rng, p, nesting + 1, false)).collect())
        }
        1 => {
            let k = rng.gen_range(2..=p.max_conj.max(2));
            Gadget::And((0..k).map(|_| draw(rng, p, nesting + 1, true)).collect())
        }
        _ => {
            let d = rng.gen_range(1..=p.max_depth.max(1));
            Gadget::Chain(d, Box::new(draw(rng, p, nesting + 1, in_and)))
        }
    }
}

fn leaves(g: &Gadget) -> usize {
    match g {
        Gadget::Leaf { .. } => 1,
        Gadget::Or(c) | Gadget::And(c) => c.iter().map(leaves).sum(),
        Gadget::Chain(_, c) => leaves(c),
    }
}

fn nodes(g: &Gadget) -> usize {
    match g {
        Gadget::Leaf { .. } => 1,
        Gadget::Or(c) | Gadget::And(c) => 1 + c.iter().map(nodes).sum::<usize>(),
        Gadget::Chain(d, c) => d + nodes(c),
    }
}

struct Realiser<'a> {
    b: Builder,
    rng: &'a mut ChaCha8Rng,
    p_issue: f64,
    hazard: Action,
    safe: Action,
    counters: BTreeMap<Role, usize>,
}

impl Realiser<'_> {
    fn principal(&mut self, role: Role) -> PrincipalId {
        let n = self.counters.entry(role).or_insert(0);
        *n += 1;
        let name = format!("{}-{}", role.as_str(), n);
        self.b.principal(&name, role)
    }

    /// Realises `g` sending its output to `to`; returns the output command and its tick.
    fn realise(&mut self, g: &Gadget, to: PrincipalId, tick: u32) -> Option<(CommandId, u32)> {
        match g {
            Gadget::Leaf { compliant } => {
                let p = self.principal(Role::Planner);
                if !self.rng.gen_bool(self.p_issue) {
                    return None;
                }
                let a = if *compliant { self.safe } else { self.hazard };
                Some((self.b.origin(p, tick, to, a), tick))
            }
            Gadget::Or(children) | Gadget::And(children) => {
                let all = matches!(g, Gadget::And(_));
                let me = self.principal(if all { Role::Checker } else { Role::Dispatcher });
                let outs: Vec<Option<(CommandId, u32)>> =
                    children.iter().map(|c| self.realise(c, me, tick)).collect();
                let issued: Vec<(CommandId, u32)> = outs.iter().flatten().copied().collect();
                if issued.is_empty() || (all && issued.len() < children.len()) {
                    return None;
                }
                let t = issued.iter().map(|(_, t)| *t).max().unwrap_or(tick) + 1;
                let cites = issued.iter().map(|(c, _)| *c).collect();
                Some((self.b.relay(me, t, Some(to), self.hazard, cites, all), t))
            }
            Gadget::Chain(d, child) => {
                let relays: Vec<PrincipalId> =
                    (0..*d).map(|_| self.principal(Role::Planner)).collect();
                let (mut prev, mut t) = self.realise(child, relays[0], tick)?;
                for (i, &p) in relays.iter().enumerate() {
                    let next = relays.get(i + 1).copied().unwrap_or(to);
                    t += 1;
                    prev = self
                        .b
                        .relay(p, t, Some(next), self.hazard, vec![prev], false);
                }
                Some((prev, t))
            }
        }
    }
}

/// Draws one incident of the generator.
pub fn generate(seed: u64, params: &Params) -> Scenario {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6A09_E667_F3BC_C908);
    let mut gadget = draw(&mut rng, params, 0, false);
    while leaves(&gadget) > 6 || nodes(&gadget) > 12 {
        gadget = draw(&mut rng, params, 0, false);
    }
    let quality = rng.gen_bool(params.p_quality);
    let duty = !quality && rng.gen_bool(params.p_duty);
    let mut b = Builder::new(crate::scenario::HORIZON);
    let a = b.aisle(&mut rng, true, duty);
    let (hazard, safe) = if quality {
        b.spec.batches.push(Batch {
            name: "batch-1".into(),
            value: 5000,
            range: (4000, 6000),
        });
        (
            Action::SetParam {
                batch: BatchId(0),
                value: rng.gen_range(6500..=9000),
            },
            Action::SetParam {
                batch: BatchId(0),
                value: rng.gen_range(4500..=5500),
            },
        )
    } else {
        (
            Action::SetSpeed {
                robot: a.robot,
                speed: a.fast,
            },
            Action::SetSpeed {
                robot: a.robot,
                speed: a.compliant,
            },
        )
    };
    let mut r = Realiser {
        b,
        rng: &mut rng,
        p_issue: params.p_issue,
        hazard,
        safe,
        counters: BTreeMap::new(),
    };
    let ctrl_role = Role::Controller;
    let ctrl = r.principal(ctrl_role);
    let out = r.realise(&gadget, ctrl, a.t0);
    let mut b = r.b;
    let mut act_tick = None;
    if let Some((c, t)) = out {
        b.relay(ctrl, t + 1, None, hazard, vec![c], false);
        act_tick = Some(t + 2);
    }
    let mut supervisor = None;
    if duty {
        let s = b.principal("supervisor-1", Role::Supervisor);
        b.spec.duties.push(Duty::HaltOnEntry {
            supervisor: s,
            zone: a.zone,
            robot: a.robot,
            deadline: 5,
        });
        supervisor = Some(s);
    }
    if !quality {
        let hit = match act_tick {
            Some(t) => arrival_tick(
                a.crossing_x,
                a.slow,
                1,
                &[(t, a.fast)],
                crate::scenario::HORIZON,
            )
            .unwrap_or(crate::scenario::HORIZON),
            None => {
                arrival_tick(a.crossing_x, a.fast, 1, &[], crate::scenario::HORIZON)
                    .unwrap_or(crate::scenario::HORIZON)
                    + 30
            }
        };
        b.crossing_worker(a.crossing_x, hit);
        if let Some(s) = supervisor {
            if rng.gen_bool(params.p_fulfilled) {
                // The supervisor issues its registered halt on the entry report.
                let entry = hit.saturating_sub(20);
                let halt = b.command(
                    s,
                    entry + 1,
                    crate::world::Destination::Actuator,
                    Action::Halt { robot: a.robot },
                    Vec::new(),
                    Derivation::Origin,
                );
                b.cmd_mut(halt).cites_reports = vec![0];
            }
        }
    }
    let planted = analytic_truth(&b.spec).unwrap_or_default();
    Scenario {
        family: "generator",
        seed,
        spec: b.spec,
        planted,
    }
}

/// The planted truth of a generated record, computed from the composed Boolean
/// function of the command topology (relay policies) and the absence gadget — no
/// kinematics involved.
pub fn analytic_truth(spec: &crate::world::WorldSpec) -> Result<Planted, OracleError> {
    use crate::world::Destination;
    // Variables: every issued command except the fulfilled halt, plus the absence.
    let cmds: Vec<CommandId> = (0..spec.commands.len())
        .map(|i| CommandId(i as u32))
        .filter(|c| !matches!(spec.commands[c.0 as usize].action, Action::Halt { .. }))
        .collect();
    let fulfilled_halt = spec
        .commands
        .iter()
        .any(|c| matches!(c.action, Action::Halt { .. }));
    let duty_absent = spec
        .duties
        .iter()
        .any(|d| matches!(d, Duty::HaltOnEntry { .. }))
        && !fulfilled_halt;
    let n = cmds.len() + usize::from(duty_absent);
    let root = spec.commands.iter().position(|c| {
        c.destination == Destination::Actuator && !matches!(c.action, Action::Halt { .. })
    });
    let Some(root) = root else {
        return Ok(Planted {
            breach: crate::oracle::breaches(spec),
            ..Planted::default()
        });
    };
    if fulfilled_halt {
        return Ok(Planted {
            breach: crate::oracle::breaches(spec),
            ..Planted::default()
        });
    }
    let table: Vec<bool> = (0..1u64 << n)
        .map(|mask| {
            let absent: BTreeSet<CommandId> = cmds
                .iter()
                .enumerate()
                .filter(|(i, _)| mask & (1 << i) == 0)
                .map(|(_, c)| *c)
                .collect();
            let eff = spec.effective(&absent);
            let absence_holds = !duty_absent || mask & (1 << cmds.len()) != 0;
            eff[root] && absence_holds
        })
        .collect();
    let causes = minimal_causes(n, &table)?;
    let mut owners: Vec<PrincipalId> = cmds
        .iter()
        .map(|c| spec.commands[c.0 as usize].author)
        .collect();
    if duty_absent {
        if let Some(Duty::HaltOnEntry { supervisor, .. }) = spec.duties.first() {
            owners.push(*supervisor);
        }
    }
    let causal = grade(spec, &owners, &causes);
    let breach = crate::oracle::breaches(spec);
    let conduit: BTreeSet<String> = spec
        .principals
        .iter()
        .enumerate()
        .filter(|(i, _)| {
            let mine: Vec<&crate::world::Command> = spec
                .commands
                .iter()
                .filter(|c| c.author.0 as usize == *i)
                .collect();
            !mine.is_empty()
                && mine.iter().all(|c| {
                    c.derivation != Derivation::Origin
                        && c.cites
                            .iter()
                            .any(|x| spec.commands[x.0 as usize].action == c.action)
                })
        })
        .map(|(_, p)| p.name.clone())
        .filter(|p| causal.get(p).is_some_and(|r| *r > 0.0))
        .collect();
    Ok(Planted {
        adverse: true,
        causal,
        breach,
        conduit,
        ..Planted::default()
    })
}
