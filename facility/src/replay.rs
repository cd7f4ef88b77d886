//! Replay certification on the world: the `audita_causal::Replayer` hook.
//!
//! Design constraints:
//! - Variable names are those of [`crate::model`]: setting `m<i>` false treats command
//!   `i` as absent (consumption level); setting `absent.<d>` false inserts the dutiful
//!   halt. Frozen variables stay at their actual values, which on the world's monotone
//!   incidents is the no-op (the minimal witness is empty); a set to `true` of an
//!   actually-true variable is also a no-op. Setting an unknown name is a permanent
//!   error (the engine then abstains).
//! - Pinned mode re-runs the deterministic world: bitwise reproducible, so the engine's
//!   exact mode applies. Hosted mode draws replica `run` of the seeded stochastic
//!   actuation (common random numbers across arms); the recorded trace is the actual
//!   run's, and the engine's statistical mode (Hoeffding, action match) applies.

use audita_causal::certify::{
    ActuationEvent as EngineEvent, Intervention as EngineIntervention, ReplayError, ReplayRun,
};
use audita_causal::Replayer;

use crate::model::var_name;
use crate::oracle::{candidates, Variable};
use crate::world::{Action, Hosted, Intervention, Mode, WorldSpec};

/// Replays a facility world under engine interventions.
#[derive(Debug, Clone)]
pub struct WorldReplayer<'a> {
    spec: &'a WorldSpec,
    vars: Vec<(String, Variable)>,
    hosted: Option<Hosted>,
    recorded: Vec<EngineEvent>,
}

impl<'a> WorldReplayer<'a> {
    /// Replayer on the pinned world.
    pub fn pinned(spec: &'a WorldSpec) -> Self {
        Self::new(spec, None)
    }
    /// Replayer on the hosted world; the recorded trace is replica 0's.
    pub fn hosted(spec: &'a WorldSpec, params: Hosted) -> Self {
        Self::new(spec, Some(params))
    }
    /// Replayer whose variables carry caller-given names (e.g. the verdict layer's
    /// `m_<digest prefix>` and `absent.<duty id>`; see [`crate::record::verdict_variables`]).
    pub fn named(
        spec: &'a WorldSpec,
        hosted: Option<Hosted>,
        vars: Vec<(String, Variable)>,
    ) -> Self {
        let mut r = Self::new(spec, hosted);
        r.vars = vars;
        r
    }
    fn new(spec: &'a WorldSpec, hosted: Option<Hosted>) -> Self {
        let (_, vars) = candidates(spec);
        let vars = vars.into_iter().map(|v| (var_name(v), v)).collect();
        let mode = match hosted {
            None => Mode::Pinned,
            Some(params) => Mode::Hosted { params, replica: 0 },
        };
        let recorded = events(spec, &spec.run_actual(mode).actuations);
        Self {
            spec,
            vars,
            hosted,
            recorded,
        }
    }
}

/// Converts world actuations to the engine's event form.
pub fn events(spec: &WorldSpec, acts: &[crate::world::ActuationEvent]) -> Vec<EngineEvent> {
    let robot = |r: crate::world::RobotId| {
        spec.robots
            .get(r.0 as usize)
            .map(|r| r.name.clone())
            .unwrap_or_default()
    };
    acts.iter()
        .map(|e| {
            let (target, params) = match e.action {
                Action::MoveTo { robot: r, to } => (robot(r), vec![to.x as f64, to.y as f64]),
                Action::SetSpeed { robot: r, speed } => (robot(r), vec![speed as f64]),
                Action::Halt { robot: r } => (robot(r), Vec::new()),
                Action::SetParam { batch, value } => (
                    spec.batches
                        .get(batch.0 as usize)
                        .map(|b| b.name.clone())
                        .unwrap_or_default(),
                    vec![value as f64],
                ),
            };
            EngineEvent {
                kind: e.action.name().to_string(),
                target,
                params,
            }
        })
        .collect()
}

impl Replayer for WorldReplayer<'_> {
    fn recorded(&self) -> Vec<EngineEvent> {
        self.recorded.clone()
    }

    fn replay(&mut self, iv: &EngineIntervention, run: u32) -> Result<ReplayRun, ReplayError> {
        let mut w = Intervention::default();
        for (name, value) in &iv.set {
            let Some((_, v)) = self.vars.iter().find(|(n, _)| n == name) else {
                return Err(ReplayError {
                    message: format!("unknown variable {name}"),
                    transient: false,
                });
            };
            if !*value {
                match *v {
                    Variable::Command(c) => {
                        w.absent.insert(c);
                    }
                    Variable::Absence(d) => {
                        w.fulfilled.insert(d);
                    }
                }
            }
        }
        // Frozen variables stay at their actual values: on the consumption-level world
        // that is the no-op, whatever their name.
        let mode = match self.hosted {
            None => Mode::Pinned,
            Some(params) => Mode::Hosted {
                params,
                replica: u64::from(run),
            },
        };
        let r = self.spec.run(&w, mode);
        Ok(ReplayRun {
            adverse: r.adverse.is_some(),
            actions: events(self.spec, &r.actuations),
        })
    }
}
