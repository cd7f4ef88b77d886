//! The pieces every scenario is built from: the named families, the planted ground
//! truth, and the incremental world builder with the aisle geometry the safety
//! families share.
//!
//! Design constraints:
//! - Pure construction: nothing here draws a seed or decides a family's truth; the
//!   family generators (`scenario`, `conduct`, `generator`) do, on top of this.
//! - The aisle's speed envelope is [`AISLE_LIMIT`]; a registered halt, once actuated,
//!   stops the robot at least 1 m short of the crossing.

use std::collections::{BTreeMap, BTreeSet};

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::world::{
    Action, Command, CommandId, Derivation, Destination, Human, Point, Principal, PrincipalId,
    Robot, RobotId, RobotKind, Role, WorldSpec, Zone,
};

/// Horizon (ticks) of every family's world.
pub(crate) const HORIZON: u32 = 300;

/// Speed envelope of the aisle (mm per tick): 1.0 m/s.
pub const AISLE_LIMIT: i64 = 100;
/// Ticks a worker needs from the aisle edge to the crossing point.
pub(crate) const EDGE_TO_CROSSING: u32 = 20;
/// Worker path half-length (mm).
pub(crate) const WALK: i64 = 4000;
/// Worker walking speed (mm per tick): 1.0 m/s.
pub(crate) const WALK_SPEED: i64 = 100;

/// A scenario family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// Two independently sufficient hazardous commands: ½, ½.
    Redundancy,
    /// Transcript-identical to redundancy; the second command is never consumed.
    InertTwin,
    /// The accused command is vetoed before effect; a later command is the cause.
    Preemption,
    /// A registered halt is never issued.
    Omission,
    /// A reckless transformation relayed by faithful conduits.
    Chain,
    /// Worker struck during maintenance; the pre-entry halt was never issued.
    UnexpectedStartup,
    /// Exogenous event: nobody is responsible.
    NoCause,
    /// One culprit, ρ = 1.
    Trivial,
    /// Conduct attack: an insider conditions its hazard on a compliant victim.
    Conditioning,
    /// Conduct attack: an insider's innocuous deviation from its reference plan turns
    /// an otherwise inevitable harm into one that hinges on the compliant victim.
    InevitabilityRigging,
    /// Level-2 conduct attack: a framer cites a benign scapegoat and a victim; a decoy
    /// deviation is inert.
    Scapegoat,
}

impl Family {
    /// Every named family.
    pub const ALL: [Family; 11] = [
        Family::Redundancy,
        Family::InertTwin,
        Family::Preemption,
        Family::Omission,
        Family::Chain,
        Family::UnexpectedStartup,
        Family::NoCause,
        Family::Trivial,
        Family::Conditioning,
        Family::InevitabilityRigging,
        Family::Scapegoat,
    ];
    /// The five core structures of the paper's Table 2.
    pub const CORE: [Family; 5] = [
        Family::Redundancy,
        Family::InertTwin,
        Family::Preemption,
        Family::Omission,
        Family::Chain,
    ];

    /// Stable snake-case name (used in JSON output).
    pub fn name(self) -> &'static str {
        match self {
            Family::Redundancy => "redundancy",
            Family::InertTwin => "inert_twin",
            Family::Preemption => "preemption",
            Family::Omission => "omission",
            Family::Chain => "chain",
            Family::UnexpectedStartup => "unexpected_startup",
            Family::NoCause => "no_cause",
            Family::Trivial => "trivial",
            Family::Conditioning => "conditioning",
            Family::InevitabilityRigging => "inevitability_rigging",
            Family::Scapegoat => "scapegoat",
        }
    }

    /// Whether the family is a conduct attack.
    pub fn is_conduct_attack(self) -> bool {
        matches!(
            self,
            Family::Conditioning | Family::InevitabilityRigging | Family::Scapegoat
        )
    }
}

/// Planted ground truth of a scenario.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Planted {
    /// Whether the outcome is adverse.
    pub adverse: bool,
    /// Causal profile (conduits included at their grade); unlisted principals are 0.
    pub causal: BTreeMap<String, f64>,
    /// Principals in breach.
    pub breach: BTreeSet<String>,
    /// Conduit-flagged principals.
    pub conduit: BTreeSet<String>,
    /// Conduct attacks: the compliant victim.
    pub victim: Option<String>,
    /// Conduct attacks: framers and their certificate grade `ρ_frame` (deviating
    /// principals absent from the map have grade 0).
    pub framers: BTreeMap<String, f64>,
}

impl Planted {
    /// Culpable profile over `principals`: causal grade where in breach, else 0.
    pub fn culpable(&self, principals: &[String]) -> BTreeMap<String, f64> {
        principals
            .iter()
            .map(|p| {
                let v = if self.breach.contains(p) {
                    self.causal.get(p).copied().unwrap_or(0.0)
                } else {
                    0.0
                };
                (p.clone(), v)
            })
            .collect()
    }
    /// Causal profile over `principals`, zero-filled.
    pub fn causal_over(&self, principals: &[String]) -> BTreeMap<String, f64> {
        principals
            .iter()
            .map(|p| (p.clone(), self.causal.get(p).copied().unwrap_or(0.0)))
            .collect()
    }
}

/// Incremental world construction.
#[derive(Debug)]
pub(crate) struct Builder {
    pub spec: WorldSpec,
}

impl Builder {
    pub fn new(horizon: u32) -> Self {
        Self {
            spec: WorldSpec {
                principals: Vec::new(),
                robots: Vec::new(),
                humans: Vec::new(),
                zones: Vec::new(),
                batches: Vec::new(),
                commands: Vec::new(),
                duties: Vec::new(),
                exogenous: Vec::new(),
                horizon,
                latency: 1,
            },
        }
    }
    pub fn principal(&mut self, name: &str, role: Role) -> PrincipalId {
        self.spec.principals.push(Principal {
            name: name.to_string(),
            role,
        });
        PrincipalId((self.spec.principals.len() - 1) as u16)
    }
    #[allow(clippy::too_many_arguments)]
    pub fn command(
        &mut self,
        author: PrincipalId,
        tick: u32,
        destination: Destination,
        action: Action,
        cites: Vec<CommandId>,
        derivation: Derivation,
    ) -> CommandId {
        self.spec.commands.push(Command {
            author,
            tick,
            destination,
            action,
            cites,
            cites_reports: Vec::new(),
            derivation,
            reviewed: true,
            deviation: false,
            reference_for: None,
        });
        CommandId((self.spec.commands.len() - 1) as u32)
    }
    pub fn origin(
        &mut self,
        author: PrincipalId,
        tick: u32,
        to: PrincipalId,
        action: Action,
    ) -> CommandId {
        self.command(
            author,
            tick,
            Destination::Principal(to),
            action,
            Vec::new(),
            Derivation::Origin,
        )
    }
    pub fn relay(
        &mut self,
        author: PrincipalId,
        tick: u32,
        to: Option<PrincipalId>,
        action: Action,
        cites: Vec<CommandId>,
        all: bool,
    ) -> CommandId {
        let dest = to
            .map(Destination::Principal)
            .unwrap_or(Destination::Actuator);
        let d = if all {
            Derivation::RelayAll
        } else {
            Derivation::RelayAny
        };
        self.command(author, tick, dest, action, cites, d)
    }
    pub fn cmd_mut(&mut self, c: CommandId) -> &mut Command {
        &mut self.spec.commands[c.0 as usize]
    }
}

/// The aisle geometry shared by the safety families.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Aisle {
    pub robot: RobotId,
    pub crossing_x: i64,
    pub slow: i64,
    pub fast: i64,
    pub compliant: i64,
    pub t0: u32,
    pub zone: u16,
}

/// First tick at which a robot starting at x = 0 reaches `x_c`, given its speed
/// profile: `moving_from` (tick at which motion starts, after actuation) and speed
/// changes `(tick, speed)` (actuation ticks).
pub(crate) fn arrival_tick(
    x_c: i64,
    v0: i64,
    moving_from: u32,
    changes: &[(u32, i64)],
    horizon: u32,
) -> Option<u32> {
    let mut x = 0i64;
    let mut v = v0;
    for t in 1..=horizon {
        for &(ct, cv) in changes {
            if ct == t {
                v = cv;
            }
        }
        if t >= moving_from {
            x += v;
        }
        if x >= x_c - 100 {
            return Some(t);
        }
    }
    None
}

impl Builder {
    /// Adds the aisle: a sensed zone with the 1.0 m/s envelope and one AGV at the
    /// origin. `moving` gives the AGV its route from the start.
    pub fn aisle(&mut self, rng: &mut ChaCha8Rng, moving: bool, sensor: bool) -> Aisle {
        let crossing_x = rng.gen_range(80..=120) * 100;
        let slow = rng.gen_range(30..=45);
        let fast = rng.gen_range(130..=180);
        let compliant = rng.gen_range(70..=AISLE_LIMIT);
        let t0 = rng.gen_range(2..=8);
        let sensor_id = if sensor {
            Some(self.principal("sensor-aisle", Role::Sensor))
        } else {
            None
        };
        self.spec.zones.push(Zone {
            name: "aisle".into(),
            min: Point::new(-1000, -2000),
            max: Point::new(40_000, 2000),
            speed_limit: AISLE_LIMIT,
            sensor: sensor_id,
        });
        self.spec.robots.push(Robot {
            name: "agv-1".into(),
            kind: RobotKind::Agv,
            mass_kg: rng.gen_range(300..=900),
            pos: Point::new(0, 0),
            target: if moving {
                Some(Point::new(40_000, 0))
            } else {
                None
            },
            speed: slow,
        });
        Aisle {
            robot: RobotId((self.spec.robots.len() - 1) as u16),
            crossing_x,
            slow,
            fast,
            compliant,
            t0,
            zone: (self.spec.zones.len() - 1) as u16,
        }
    }
    /// A worker crossing the aisle at `x` who reaches the robot's line at tick `at`.
    pub fn crossing_worker(&mut self, x: i64, at: u32) {
        let start = at.saturating_sub(2 * EDGE_TO_CROSSING);
        self.spec.humans.push(Human {
            name: "worker-1".into(),
            path: vec![Point::new(x, -WALK), Point::new(x, WALK)],
            speed: WALK_SPEED,
            start_tick: start,
        });
    }
}
