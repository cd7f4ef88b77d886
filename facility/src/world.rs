//! The deterministic kinematic world (SPEC §5) and its re-execution semantics.
//!
//! Design constraints:
//! - Time is discrete: one tick is 0.1 s. Positions are integer millimetres, speeds
//!   integer millimetres per tick, batch parameters integer milli-units, masses integer
//!   kilograms; no floating point enters the state, so a run is bit-reproducible.
//! - Motion is axis-ordered: a robot or human moves along x first, then y, by at most
//!   its speed per tick, towards its current target. Separation is compared in squared
//!   millimetres (no square roots).
//! - The record of commands is fixed ([`WorldSpec::commands`]). A re-execution treats a
//!   set of commands as absent; a command is **effective** unless it is absent or its
//!   relay policy is unsatisfied by its effective cited inputs (a policy-chain ancestor
//!   is absent). Origin commands depend on no input. This is the consumption-level
//!   intervention of the paper: no new command is invented, except that an
//!   **omission variable** set to "fulfilled" inserts the dutiful halt the registered
//!   supervisor policy derives from the recorded sensor report.
//! - Sensor reports depend only on human paths and zones, which no command affects, so
//!   they are identical in every counterfactual run.
//! - The safety predicate fires at the first tick at which any human is closer than
//!   0.5 m to any robot; severity is ½·m·v² of that robot at that tick (millijoules,
//!   rounded down). The quality predicate fires at the first tick a batch parameter lies
//!   outside its acceptance range. The earliest predicate wins; ties go to safety.
//! - Hosted mode draws, from a ChaCha8 stream keyed by `(seed, replica)`, an extra
//!   actuation delay and a drop decision for every effective actuating command; the
//!   pinned mode has neither. Iteration orders are vectors and `BTreeMap`s only.

use std::collections::BTreeSet;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Duration of one tick in milliseconds.
pub const TICK_MS: u64 = 100;
/// Safety separation threshold in millimetres (0.5 m).
pub const SEPARATION_MM: i64 = 500;

/// Index of a principal in [`WorldSpec::principals`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PrincipalId(pub u16);
/// Index of a command in [`WorldSpec::commands`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CommandId(pub u32);
/// Index of a robot in [`WorldSpec::robots`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RobotId(pub u16);
/// Index of a batch in [`WorldSpec::batches`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BatchId(pub u16);
/// Index of a duty in [`WorldSpec::duties`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DutyId(pub u16);

/// Role of a principal in the facility.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Issues instructions on behalf of a human user.
    User,
    /// An AI planner proposing routes and speeds.
    Planner,
    /// Dispatches proposals to robot controllers.
    Dispatcher,
    /// Holds halt authority and halt duties.
    Supervisor,
    /// Reviews commands.
    Checker,
    /// A robot's controller: relays commands to its actuators.
    Controller,
    /// A zone sensor (authors sensor reports).
    Sensor,
}

impl Role {
    /// Lower-case name used in principal names and envelopes.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Planner => "planner",
            Role::Dispatcher => "dispatcher",
            Role::Supervisor => "supervisor",
            Role::Checker => "checker",
            Role::Controller => "controller",
            Role::Sensor => "sensor",
        }
    }
}

/// A principal: a named agent holding a signing key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// Name, unique in the world (`[a-z0-9-]`).
    pub name: String,
    /// Role.
    pub role: Role,
}

/// A point in millimetres.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Point {
    /// x in mm.
    pub x: i64,
    /// y in mm.
    pub y: i64,
}

impl Point {
    /// Constructs a point.
    pub const fn new(x: i64, y: i64) -> Self {
        Self { x, y }
    }
    /// Squared Euclidean distance in mm².
    pub fn dist2(self, o: Point) -> i128 {
        let dx = (self.x - o.x) as i128;
        let dy = (self.y - o.y) as i128;
        dx * dx + dy * dy
    }
    /// Moves at most `step` mm towards `to`, x first then y.
    fn step_towards(self, to: Point, step: i64) -> Point {
        let mut p = self;
        let mut left = step.max(0);
        let dx = to.x - p.x;
        let mx = dx.abs().min(left);
        p.x += mx * dx.signum();
        left -= mx;
        let dy = to.y - p.y;
        let my = dy.abs().min(left);
        p.y += my * dy.signum();
        p
    }
}

/// Kind of robot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RobotKind {
    /// Automated guided vehicle.
    Agv,
    /// Manipulator arm (its end effector moves in the plane).
    Arm,
}

/// Initial state of a robot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Robot {
    /// Name.
    pub name: String,
    /// Kind.
    pub kind: RobotKind,
    /// Mass in kilograms (for severity).
    pub mass_kg: u32,
    /// Initial position.
    pub pos: Point,
    /// Initial target (none: stationary).
    pub target: Option<Point>,
    /// Initial speed in mm per tick.
    pub speed: i64,
}

/// A human walking a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Human {
    /// Name.
    pub name: String,
    /// Waypoints; the human stands at the first until `start_tick`.
    pub path: Vec<Point>,
    /// Walking speed in mm per tick.
    pub speed: i64,
    /// Tick at which walking starts.
    pub start_tick: u32,
}

/// An axis-aligned zone with a speed envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Zone {
    /// Name.
    pub name: String,
    /// Lower corner.
    pub min: Point,
    /// Upper corner.
    pub max: Point,
    /// Registered speed envelope (mm per tick) for robots commanded in this zone.
    pub speed_limit: i64,
    /// Sensor principal reporting human entries (none: unsensed).
    pub sensor: Option<PrincipalId>,
}

impl Zone {
    fn contains(&self, p: Point) -> bool {
        p.x >= self.min.x && p.x <= self.max.x && p.y >= self.min.y && p.y <= self.max.y
    }
}

/// A production batch with one parameter and its acceptance range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// Name.
    pub name: String,
    /// Initial parameter value (milli-units).
    pub value: i64,
    /// Acceptance range, inclusive.
    pub range: (i64, i64),
}

/// A typed command action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Action {
    /// Drive a robot to a point.
    MoveTo {
        /// Robot.
        robot: RobotId,
        /// Target.
        to: Point,
    },
    /// Set a robot's speed (mm per tick).
    SetSpeed {
        /// Robot.
        robot: RobotId,
        /// Speed.
        speed: i64,
    },
    /// Halt a robot (latched for the rest of the run).
    Halt {
        /// Robot.
        robot: RobotId,
    },
    /// Set a batch parameter.
    SetParam {
        /// Batch.
        batch: BatchId,
        /// New value (milli-units).
        value: i64,
    },
}

impl Action {
    /// Command name as on the wire.
    pub fn name(&self) -> &'static str {
        match self {
            Action::MoveTo { .. } => "move_to",
            Action::SetSpeed { .. } => "set_speed",
            Action::Halt { .. } => "halt",
            Action::SetParam { .. } => "set_param",
        }
    }
}

/// How a command comes about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Derivation {
    /// The author's own decision; its citations are context, not consumed inputs.
    Origin,
    /// Produced by the author's policy from its cited inputs: effective iff at least one
    /// cited input is effective.
    RelayAny,
    /// Produced by the author's policy from its cited inputs: effective iff every cited
    /// input is effective.
    RelayAll,
}

/// Where a command goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Destination {
    /// To another principal (a proposal, a delegation, a veto).
    Principal(PrincipalId),
    /// To the actuators (the author is the robot's controller or the batch line).
    Actuator,
}

/// One recorded command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// Author.
    pub author: PrincipalId,
    /// Tick at which it was issued.
    pub tick: u32,
    /// Destination.
    pub destination: Destination,
    /// Typed action (the committed effect).
    pub action: Action,
    /// Cited commands (consumed inputs for relays, context for origins).
    pub cites: Vec<CommandId>,
    /// Cited sensor reports (by index into the run's report list).
    pub cites_reports: Vec<u32>,
    /// Derivation.
    pub derivation: Derivation,
    /// True if the command followed its author's registered review step.
    pub reviewed: bool,
    /// True if the command departs from the author's declared reference policy
    /// (conduct-attack selector variables).
    pub deviation: bool,
    /// Set on a **reference counterpart**: the command the author's declared reference
    /// policy would have issued instead of the given deviation. It is not part of the
    /// record (never signed, never effective in the actual world) and takes effect only
    /// when that deviation is reverted (treated as absent).
    pub reference_for: Option<CommandId>,
}

impl Command {
    /// Whether this is a reference counterpart (not realised conduct).
    pub fn is_reference(&self) -> bool {
        self.reference_for.is_some()
    }
}

/// A registered duty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Duty {
    /// On a sensor report of human entry into `zone`, `supervisor` must halt `robot`
    /// within `deadline` ticks.
    HaltOnEntry {
        /// Duty holder.
        supervisor: PrincipalId,
        /// Zone watched.
        zone: u16,
        /// Robot to halt.
        robot: RobotId,
        /// Deadline in ticks after the report.
        deadline: u32,
    },
    /// Commands by `principal` must pass review.
    ReviewRequired {
        /// Duty holder.
        principal: PrincipalId,
    },
}

/// An environmental (principal-less) event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exogenous {
    /// A batch parameter drifts to a value.
    Drift {
        /// Tick.
        tick: u32,
        /// Batch.
        batch: BatchId,
        /// New value.
        value: i64,
    },
    /// A robot is set in motion by a mechanical fault.
    Lurch {
        /// Tick.
        tick: u32,
        /// Robot.
        robot: RobotId,
        /// Target.
        to: Point,
        /// Speed.
        speed: i64,
    },
}

/// Stochastic parameters of the hosted mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hosted {
    /// Seed of the stochastic components.
    pub seed: u64,
    /// Maximum extra actuation delay in ticks (uniform in `0..=jitter`).
    pub jitter: u32,
    /// Probability, per mille, that an actuation is dropped.
    pub drop_per_mille: u32,
}

/// Execution mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Deterministic: bitwise reproducible.
    Pinned,
    /// Seeded stochastic actuation; `replica` selects an independent draw.
    Hosted {
        /// Parameters.
        params: Hosted,
        /// Replica index.
        replica: u64,
    },
}

/// The full description of a world: initial state plus the fixed command record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorldSpec {
    /// Principals.
    pub principals: Vec<Principal>,
    /// Robots.
    pub robots: Vec<Robot>,
    /// Humans.
    pub humans: Vec<Human>,
    /// Zones.
    pub zones: Vec<Zone>,
    /// Batches.
    pub batches: Vec<Batch>,
    /// Command record, in issue order.
    pub commands: Vec<Command>,
    /// Duty registry.
    pub duties: Vec<Duty>,
    /// Environmental events.
    pub exogenous: Vec<Exogenous>,
    /// Ticks simulated.
    pub horizon: u32,
    /// Actuation latency in ticks (issue to effect).
    pub latency: u32,
}

/// A sensor report: a human entered a zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SensorReport {
    /// Tick of the report.
    pub tick: u32,
    /// Zone index.
    pub zone: u16,
    /// Human index.
    pub human: u16,
    /// Reporting sensor principal.
    pub sensor: PrincipalId,
}

/// Who or what caused an actuation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    /// A recorded command.
    Command(CommandId),
    /// A dutiful halt inserted by an omission variable.
    Dutiful(DutyId),
    /// An environmental event.
    Exogenous(u16),
}

/// A realised actuation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActuationEvent {
    /// Tick the effect took place.
    pub tick: u32,
    /// Source.
    pub source: Source,
    /// Action applied.
    pub action: Action,
}

/// The adverse outcome `Y`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Adverse {
    /// Human–robot separation below 0.5 m.
    Safety {
        /// First violating tick.
        tick: u32,
        /// Robot.
        robot: RobotId,
        /// Human index.
        human: u16,
        /// ½·m·v² in millijoules at that tick.
        severity_mj: u64,
    },
    /// Batch parameter outside its acceptance range.
    Quality {
        /// First violating tick.
        tick: u32,
        /// Batch.
        batch: BatchId,
        /// Value at that tick.
        value: i64,
    },
}

impl Adverse {
    /// Tick `t*`.
    pub fn tick(&self) -> u32 {
        match *self {
            Adverse::Safety { tick, .. } | Adverse::Quality { tick, .. } => tick,
        }
    }
}

/// The result of running a world.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// Effective commands (sorted).
    pub effective: Vec<CommandId>,
    /// Realised actuation events in time order (up to `t*` or the horizon).
    pub actuations: Vec<ActuationEvent>,
    /// Sensor reports in time order.
    pub reports: Vec<SensorReport>,
    /// The adverse outcome, if any.
    pub adverse: Option<Adverse>,
}

/// The observable state of a robot after one tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RobotState {
    /// Position.
    pub pos: Point,
    /// Speed in mm per tick while moving (0 when stationary, arrived or halted) — the
    /// speed the safety predicate's severity reads.
    pub speed: i64,
    /// Whether a halt has latched.
    pub halted: bool,
}

/// The state of the world after one tick's actuations and motion — the state the
/// predicates read at that tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Tick.
    pub tick: u32,
    /// Robots, in [`WorldSpec::robots`] order.
    pub robots: Vec<RobotState>,
    /// Human positions, in [`WorldSpec::humans`] order.
    pub humans: Vec<Point>,
    /// Batch parameter values, in [`WorldSpec::batches`] order.
    pub batches: Vec<i64>,
}

/// A counterfactual: commands treated as absent and omission variables set to
/// fulfilled (the dutiful halt is inserted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Intervention {
    /// Commands treated as absent.
    pub absent: BTreeSet<CommandId>,
    /// Duties whose dutiful halt is inserted.
    pub fulfilled: BTreeSet<DutyId>,
}

/// Errors of a malformed world.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorldError {
    /// A command cites a command that is not earlier in the record.
    #[error("command {command} cites {cited}, which is not an earlier command")]
    BadCitation {
        /// Citing command.
        command: u32,
        /// Cited index.
        cited: u32,
    },
    /// An index is out of range.
    #[error("{what} index {index} out of range")]
    OutOfRange {
        /// What was indexed.
        what: &'static str,
        /// The index.
        index: u32,
    },
    /// A relay with no inputs.
    #[error("relay command {0} cites nothing")]
    EmptyRelay(u32),
    /// A reference counterpart that does not name a realised deviation.
    #[error("command {0} is a reference counterpart of no realised deviation")]
    BadReference(u32),
}

impl WorldSpec {
    /// Checks indices and citation order.
    pub fn validate(&self) -> Result<(), WorldError> {
        let oor = |what, index: usize| WorldError::OutOfRange {
            what,
            index: index as u32,
        };
        for (i, c) in self.commands.iter().enumerate() {
            if c.author.0 as usize >= self.principals.len() {
                return Err(oor("principal", c.author.0 as usize));
            }
            if let Destination::Principal(p) = c.destination {
                if p.0 as usize >= self.principals.len() {
                    return Err(oor("principal", p.0 as usize));
                }
            }
            match c.action {
                Action::MoveTo { robot, .. }
                | Action::SetSpeed { robot, .. }
                | Action::Halt { robot } => {
                    if robot.0 as usize >= self.robots.len() {
                        return Err(oor("robot", robot.0 as usize));
                    }
                }
                Action::SetParam { batch, .. } => {
                    if batch.0 as usize >= self.batches.len() {
                        return Err(oor("batch", batch.0 as usize));
                    }
                }
            }
            for &cid in &c.cites {
                if cid.0 as usize >= i {
                    return Err(WorldError::BadCitation {
                        command: i as u32,
                        cited: cid.0,
                    });
                }
            }
            if c.derivation != Derivation::Origin && c.cites.is_empty() {
                return Err(WorldError::EmptyRelay(i as u32));
            }
            if let Some(d) = c.reference_for {
                let names_deviation = matches!(self.commands.get(d.0 as usize), Some(x) if x.deviation && !x.is_reference());
                if !names_deviation {
                    return Err(WorldError::BadReference(i as u32));
                }
            }
        }
        for d in &self.duties {
            match *d {
                Duty::HaltOnEntry {
                    supervisor,
                    zone,
                    robot,
                    ..
                } => {
                    if supervisor.0 as usize >= self.principals.len() {
                        return Err(oor("principal", supervisor.0 as usize));
                    }
                    if zone as usize >= self.zones.len() {
                        return Err(oor("zone", zone as usize));
                    }
                    if robot.0 as usize >= self.robots.len() {
                        return Err(oor("robot", robot.0 as usize));
                    }
                }
                Duty::ReviewRequired { principal } => {
                    if principal.0 as usize >= self.principals.len() {
                        return Err(oor("principal", principal.0 as usize));
                    }
                }
            }
        }
        Ok(())
    }

    /// Looks a principal up by name.
    pub fn principal(&self, name: &str) -> Option<PrincipalId> {
        self.principals
            .iter()
            .position(|p| p.name == name)
            .map(|i| PrincipalId(i as u16))
    }

    /// Name of a principal (empty string when out of range).
    pub fn name(&self, p: PrincipalId) -> &str {
        self.principals
            .get(p.0 as usize)
            .map(|p| p.name.as_str())
            .unwrap_or("")
    }

    /// Which commands are effective under `absent` (consumption-level semantics).
    pub fn effective(&self, absent: &BTreeSet<CommandId>) -> Vec<bool> {
        let mut eff = vec![false; self.commands.len()];
        for (i, c) in self.commands.iter().enumerate() {
            if absent.contains(&CommandId(i as u32)) {
                continue;
            }
            if let Some(d) = c.reference_for {
                if !absent.contains(&d) {
                    continue;
                }
            }
            let ok = |cid: &CommandId| eff.get(cid.0 as usize).copied().unwrap_or(false);
            eff[i] = match c.derivation {
                Derivation::Origin => true,
                Derivation::RelayAny => c.cites.iter().any(ok),
                Derivation::RelayAll => !c.cites.is_empty() && c.cites.iter().all(ok),
            };
        }
        eff
    }

    /// Sensor reports of the world (independent of commands): one report per human
    /// entry into a sensed zone.
    pub fn sensor_reports(&self) -> Vec<SensorReport> {
        let mut reports = Vec::new();
        let mut pos: Vec<Point> = self
            .humans
            .iter()
            .map(|h| h.path.first().copied().unwrap_or_default())
            .collect();
        let mut leg: Vec<usize> = vec![1; self.humans.len()];
        let mut inside: Vec<Vec<bool>> = self
            .humans
            .iter()
            .map(|_| self.zones.iter().map(|_| false).collect())
            .collect();
        for tick in 0..=self.horizon {
            if tick > 0 {
                step_humans(&self.humans, &mut pos, &mut leg, tick);
            }
            for (h, p) in pos.iter().enumerate() {
                for (z, zone) in self.zones.iter().enumerate() {
                    let now = zone.contains(*p);
                    if now && !inside[h][z] {
                        if let Some(sensor) = zone.sensor {
                            reports.push(SensorReport {
                                tick,
                                zone: z as u16,
                                human: h as u16,
                                sensor,
                            });
                        }
                    }
                    inside[h][z] = now;
                }
            }
        }
        reports
    }

    /// The dutiful halt a duty's registered policy derives from the recorded reports:
    /// `(issue tick, robot, report index)`, or `None` if the duty was never triggered.
    pub fn dutiful_halt(
        &self,
        duty: DutyId,
        reports: &[SensorReport],
    ) -> Option<(u32, RobotId, u32)> {
        match self.duties.get(duty.0 as usize)? {
            Duty::HaltOnEntry { zone, robot, .. } => reports
                .iter()
                .position(|r| r.zone == *zone)
                .map(|i| (reports[i].tick + 1, *robot, i as u32)),
            Duty::ReviewRequired { .. } => None,
        }
    }

    /// True if the duty's required halt appears in the record (issued by the duty holder
    /// for that robot within the deadline).
    pub fn duty_fulfilled(&self, duty: DutyId, reports: &[SensorReport]) -> bool {
        match self.duties.get(duty.0 as usize) {
            Some(Duty::HaltOnEntry {
                supervisor,
                zone,
                robot,
                deadline,
            }) => {
                let Some(r) = reports.iter().find(|r| r.zone == *zone) else {
                    return true;
                };
                self.commands.iter().any(|c| {
                    c.author == *supervisor
                        && matches!(c.action, Action::Halt { robot: rr } if rr == *robot)
                        && c.tick >= r.tick
                        && c.tick <= r.tick + deadline
                })
            }
            Some(Duty::ReviewRequired { .. }) | None => true,
        }
    }

    /// Runs the world under an intervention.
    pub fn run(&self, iv: &Intervention, mode: Mode) -> Run {
        self.run_with_reports(iv, mode, self.sensor_reports())
    }

    /// Runs the world under an intervention, given its (command-independent) sensor
    /// reports as computed by [`WorldSpec::sensor_reports`] — the fast path for
    /// repeated re-execution.
    pub fn run_with_reports(
        &self,
        iv: &Intervention,
        mode: Mode,
        reports: Vec<SensorReport>,
    ) -> Run {
        self.run_recording(iv, mode, reports, None)
    }

    /// The recorded (pinned, intervention-free) run together with the state of the
    /// world at every tick up to `t*` (or the horizon): what the facility's tracking
    /// and quality-control systems observe and report.
    pub fn run_observed(&self) -> (Run, Vec<Frame>) {
        let mut frames = Vec::new();
        let run = self.run_recording(
            &Intervention::default(),
            Mode::Pinned,
            self.sensor_reports(),
            Some(&mut frames),
        );
        (run, frames)
    }

    /// Runs the world under an intervention, recording each tick's [`Frame`] into
    /// `frames` when given.
    fn run_recording(
        &self,
        iv: &Intervention,
        mode: Mode,
        reports: Vec<SensorReport>,
        mut frames: Option<&mut Vec<Frame>>,
    ) -> Run {
        let eff = self.effective(&iv.absent);
        let sched = self.schedule(iv, mode, &eff, &reports);
        let mut state = Motion::initial(self);
        let mut actuations = Vec::new();
        let mut next = 0usize;
        let mut adverse = None;
        for tick in 0..=self.horizon {
            // 1. Apply actuations due this tick.
            while next < sched.len() && sched[next].0 <= tick {
                let (_, _, source, action) = sched[next];
                next += 1;
                state.apply(action);
                actuations.push(ActuationEvent {
                    tick,
                    source,
                    action,
                });
            }
            // 2. Move.
            if tick > 0 {
                state.step(&self.humans, tick);
            }
            if let Some(frames) = frames.as_deref_mut() {
                frames.push(state.frame(tick));
            }
            // 3. Predicates.
            adverse = state.adverse(self, tick);
            if adverse.is_some() {
                break;
            }
        }
        let effective = eff
            .iter()
            .enumerate()
            .filter(|(_, e)| **e)
            .map(|(i, _)| CommandId(i as u32))
            .collect();
        Run {
            effective,
            actuations,
            reports,
            adverse,
        }
    }

    /// The actuation schedule, as `(effect tick, order key, source, action)` sorted:
    /// the effective actuating commands after their latency (under `mode`, jittered or
    /// dropped), the halts of the duties `iv` fulfils, and the exogenous events.
    fn schedule(
        &self,
        iv: &Intervention,
        mode: Mode,
        eff: &[bool],
        reports: &[SensorReport],
    ) -> Vec<(u32, u32, Source, Action)> {
        let mut sched: Vec<(u32, u32, Source, Action)> = Vec::new();
        let mut rng = match mode {
            Mode::Pinned => None,
            Mode::Hosted { params, replica } => Some((
                ChaCha8Rng::seed_from_u64(
                    params.seed ^ replica.wrapping_mul(0x9E37_79B9_7F4A_7C15),
                ),
                params,
            )),
        };
        for (i, c) in self.commands.iter().enumerate() {
            // The stochastic stream advances for every actuating command of the record,
            // effective or not, so that absent commands do not shift the draws of others.
            let mut delay = self.latency;
            let mut dropped = false;
            if c.destination == Destination::Actuator {
                if let Some((rng, p)) = rng.as_mut() {
                    delay += rng.gen_range(0..=p.jitter);
                    dropped = rng.gen_range(0..1000) < p.drop_per_mille;
                }
            }
            if c.destination == Destination::Actuator && eff[i] && !dropped {
                sched.push((
                    c.tick + delay,
                    i as u32,
                    Source::Command(CommandId(i as u32)),
                    c.action,
                ));
            }
        }
        for &d in &iv.fulfilled {
            if let Some((tick, robot, _)) = self.dutiful_halt(d, reports) {
                // Dutiful halts are ordered before same-tick commands.
                sched.push((
                    tick + self.latency,
                    0,
                    Source::Dutiful(d),
                    Action::Halt { robot },
                ));
            }
        }
        for (k, e) in self.exogenous.iter().enumerate() {
            let source = Source::Exogenous(k as u16);
            match *e {
                Exogenous::Drift { tick, batch, value } => {
                    sched.push((tick, 0, source, Action::SetParam { batch, value }))
                }
                Exogenous::Lurch {
                    tick,
                    robot,
                    to,
                    speed,
                } => {
                    sched.push((tick, 0, source, Action::SetSpeed { robot, speed }));
                    sched.push((tick, 0, source, Action::MoveTo { robot, to }));
                }
            }
        }
        sched.sort_by_key(|a| (a.0, a.1, a.2));
        sched
    }

    /// Runs the recorded world (no intervention).
    pub fn run_actual(&self, mode: Mode) -> Run {
        self.run(&Intervention::default(), mode)
    }

    /// Duties whose required halt is absent from the record although triggered.
    pub fn unfulfilled_duties(&self) -> Vec<DutyId> {
        let reports = self.sensor_reports();
        (0..self.duties.len())
            .map(|i| DutyId(i as u16))
            .filter(|d| {
                matches!(self.duties[d.0 as usize], Duty::HaltOnEntry { .. })
                    && self.dutiful_halt(*d, &reports).is_some()
                    && !self.duty_fulfilled(*d, &reports)
            })
            .collect()
    }
}

/// The moving state of a world during a run: robots (position, target, speed,
/// halted), batch values, and humans (position, next leg of their path).
struct Motion {
    rpos: Vec<Point>,
    rtarget: Vec<Option<Point>>,
    rspeed: Vec<i64>,
    halted: Vec<bool>,
    bval: Vec<i64>,
    hpos: Vec<Point>,
    hleg: Vec<usize>,
}

impl Motion {
    /// The state at tick 0, as `spec` declares it.
    fn initial(spec: &WorldSpec) -> Motion {
        Motion {
            rpos: spec.robots.iter().map(|r| r.pos).collect(),
            rtarget: spec.robots.iter().map(|r| r.target).collect(),
            rspeed: spec.robots.iter().map(|r| r.speed).collect(),
            halted: vec![false; spec.robots.len()],
            bval: spec.batches.iter().map(|b| b.value).collect(),
            hpos: spec
                .humans
                .iter()
                .map(|h| h.path.first().copied().unwrap_or_default())
                .collect(),
            hleg: vec![1; spec.humans.len()],
        }
    }

    /// Applies an actuation: a halted robot takes no new target or speed; a halt
    /// latches and stops it.
    fn apply(&mut self, action: Action) {
        match action {
            Action::MoveTo { robot, to } => {
                if let Some(t) = self.rtarget.get_mut(robot.0 as usize) {
                    if !self.halted[robot.0 as usize] {
                        *t = Some(to);
                    }
                }
            }
            Action::SetSpeed { robot, speed } => {
                if let Some(s) = self.rspeed.get_mut(robot.0 as usize) {
                    if !self.halted[robot.0 as usize] {
                        *s = speed.max(0);
                    }
                }
            }
            Action::Halt { robot } => {
                if let Some(h) = self.halted.get_mut(robot.0 as usize) {
                    *h = true;
                    self.rspeed[robot.0 as usize] = 0;
                }
            }
            Action::SetParam { batch, value } => {
                if let Some(v) = self.bval.get_mut(batch.0 as usize) {
                    *v = value;
                }
            }
        }
    }

    /// One tick of motion: every unhalted robot towards its target, every human
    /// along its path.
    fn step(&mut self, humans: &[Human], tick: u32) {
        for r in 0..self.rpos.len() {
            if let Some(t) = self.rtarget[r] {
                if !self.halted[r] {
                    self.rpos[r] = self.rpos[r].step_towards(t, self.rspeed[r]);
                }
            }
        }
        step_humans(humans, &mut self.hpos, &mut self.hleg, tick);
    }

    /// Whether robot `r` is moving (a target not yet reached, not halted).
    fn moving(&self, r: usize) -> bool {
        self.rtarget[r].is_some_and(|t| t != self.rpos[r]) && !self.halted[r]
    }

    /// What the tracking and quality-control systems observe at `tick`.
    fn frame(&self, tick: u32) -> Frame {
        Frame {
            tick,
            robots: (0..self.rpos.len())
                .map(|r| RobotState {
                    pos: self.rpos[r],
                    speed: if self.moving(r) { self.rspeed[r] } else { 0 },
                    halted: self.halted[r],
                })
                .collect(),
            humans: self.hpos.clone(),
            batches: self.bval.clone(),
        }
    }

    /// The adverse outcome at `tick`, if any: a robot within the separation of a
    /// human (severity its kinetic energy), else a batch value out of range.
    fn adverse(&self, spec: &WorldSpec, tick: u32) -> Option<Adverse> {
        for (r, rp) in self.rpos.iter().enumerate() {
            for (h, hp) in self.hpos.iter().enumerate() {
                if rp.dist2(*hp) < (SEPARATION_MM as i128) * (SEPARATION_MM as i128) {
                    let v = if self.moving(r) {
                        self.rspeed[r] as u128
                    } else {
                        0
                    };
                    // v mm/tick = v/100 m/s; ½·m·v² J = m·v²/20000 J = m·v²/20 mJ.
                    let sev = (spec.robots[r].mass_kg as u128 * v * v / 20) as u64;
                    return Some(Adverse::Safety {
                        tick,
                        robot: RobotId(r as u16),
                        human: h as u16,
                        severity_mj: sev,
                    });
                }
            }
        }
        for (b, v) in self.bval.iter().enumerate() {
            let (lo, hi) = spec.batches[b].range;
            if *v < lo || *v > hi {
                return Some(Adverse::Quality {
                    tick,
                    batch: BatchId(b as u16),
                    value: *v,
                });
            }
        }
        None
    }
}

fn step_humans(humans: &[Human], pos: &mut [Point], leg: &mut [usize], tick: u32) {
    for (h, human) in humans.iter().enumerate() {
        if tick <= human.start_tick {
            continue;
        }
        if let Some(&to) = human.path.get(leg[h]) {
            pos[h] = pos[h].step_towards(to, human.speed);
            if pos[h] == to {
                leg[h] += 1;
            }
        }
    }
}
