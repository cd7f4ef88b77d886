//! The scenario library (SPEC §5): named families generated from seeds, each with its
//! planted ground truth.
//!
//! Design constraints:
//! - A scenario is a pure function of `(family, seed)`: geometry, speeds and issue
//!   ticks are drawn from a ChaCha8 stream seeded with the seed; principal names are
//!   fixed per family so profiles line up across draws.
//! - The planted truth is written down by construction (the paper's slice-model
//!   composition of each family); tests check it against the oracle's exact
//!   re-execution for many seeds. The planted causal profile includes conduits at
//!   their but-for grade; the culpable profile is the causal one restricted to
//!   principals in breach.
//! - Safety geometry: one AGV drives along the x axis of an aisle zone whose speed
//!   envelope is 1.0 m/s; a worker crosses the aisle at `x_c` timed so that the robot
//!   reaches the crossing together with the worker only when the planted hazard is
//!   effective. A registered halt, once actuated, stops the robot at least 1 m short.

use std::collections::{BTreeMap, BTreeSet};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::world::{
    Action, Batch, BatchId, Derivation, Destination, Duty, Exogenous, Human, Point, PrincipalId,
    Robot, RobotId, RobotKind, Role, WorldSpec,
};

pub(crate) use crate::blueprint::{
    arrival_tick, Builder, EDGE_TO_CROSSING, HORIZON, WALK, WALK_SPEED,
};
pub use crate::blueprint::{Family, Planted, AISLE_LIMIT};

/// A generated incident with its planted truth.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// Family name (a [`Family::name`] or `"generator"`).
    pub family: &'static str,
    /// Seed it was generated from.
    pub seed: u64,
    /// The world (initial state, command record, duty registry).
    pub spec: WorldSpec,
    /// Planted truth.
    pub planted: Planted,
}

impl Scenario {
    /// Names of the principals that carry responsibility profiles (non-sensors).
    pub fn principals(&self) -> Vec<String> {
        self.spec
            .principals
            .iter()
            .filter(|p| p.role != Role::Sensor)
            .map(|p| p.name.clone())
            .collect()
    }
}

fn rng_for(seed: u64, salt: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ salt)
}

fn profile(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// Generates a scenario of a named family from a seed.
pub fn generate(family: Family, seed: u64) -> Scenario {
    let mut rng = rng_for(seed, family as u64 + 1);
    let (spec, planted) = match family {
        Family::Redundancy | Family::InertTwin => redundancy(&mut rng, family == Family::InertTwin),
        Family::Preemption => preemption(&mut rng),
        Family::Omission => omission(&mut rng),
        Family::Chain => chain(&mut rng),
        Family::UnexpectedStartup => startup(&mut rng),
        Family::NoCause => no_cause(&mut rng),
        Family::Trivial => trivial(&mut rng),
        Family::Conditioning | Family::InevitabilityRigging | Family::Scapegoat => {
            crate::conduct::build(family, &mut rng)
        }
    };
    Scenario {
        family: family.name(),
        seed,
        spec,
        planted,
    }
}

/// Hazardous speed-up through dispatcher and controller; returns the tick at which
/// the controller's actuation takes effect.
fn redundancy(rng: &mut ChaCha8Rng, inert: bool) -> (WorldSpec, Planted) {
    let mut b = Builder::new(HORIZON);
    let a = b.aisle(rng, true, false);
    let p1 = b.principal("planner-1", Role::Planner);
    let p2 = b.principal("planner-2", Role::Planner);
    let d = b.principal("dispatcher", Role::Dispatcher);
    let r = b.principal("controller-agv-1", Role::Controller);
    let _s = b.principal("supervisor", Role::Supervisor);
    let fast = Action::SetSpeed {
        robot: a.robot,
        speed: a.fast,
    };
    let m1 = b.origin(p1, a.t0, d, fast);
    let m2 = b.origin(p2, a.t0, d, fast);
    let cites = if inert { vec![m1] } else { vec![m1, m2] };
    let md = b.relay(d, a.t0 + 1, Some(r), fast, cites, false);
    b.relay(r, a.t0 + 2, None, fast, vec![md], false);
    if inert {
        b.cmd_mut(m2).reviewed = false;
        b.spec.duties.push(Duty::ReviewRequired { principal: p2 });
    }
    let hit =
        arrival_tick(a.crossing_x, a.slow, 1, &[(a.t0 + 3, a.fast)], HORIZON).unwrap_or(HORIZON);
    b.crossing_worker(a.crossing_x, hit);
    let planted = if inert {
        Planted {
            adverse: true,
            causal: profile(&[
                ("planner-1", 1.0),
                ("dispatcher", 1.0),
                ("controller-agv-1", 1.0),
            ]),
            breach: set(&["planner-1", "planner-2"]),
            conduit: set(&["dispatcher", "controller-agv-1"]),
            ..Planted::default()
        }
    } else {
        Planted {
            adverse: true,
            causal: profile(&[
                ("planner-1", 0.5),
                ("planner-2", 0.5),
                ("dispatcher", 1.0),
                ("controller-agv-1", 1.0),
            ]),
            breach: set(&["planner-1", "planner-2"]),
            conduit: set(&["dispatcher", "controller-agv-1"]),
            ..Planted::default()
        }
    };
    (b.spec, planted)
}

fn preemption(rng: &mut ChaCha8Rng) -> (WorldSpec, Planted) {
    let mut b = Builder::new(HORIZON);
    let a = b.aisle(rng, true, false);
    let p1 = b.principal("planner-1", Role::Planner);
    let p3 = b.principal("planner-3", Role::Planner);
    let d = b.principal("dispatcher", Role::Dispatcher);
    let _r = b.principal("controller-agv-1", Role::Controller);
    let s = b.principal("supervisor", Role::Supervisor);
    let fast = Action::SetSpeed {
        robot: a.robot,
        speed: a.fast,
    };
    let m1 = b.origin(p1, a.t0, d, fast);
    // The supervisor's veto reaches the dispatcher first; the dispatcher discards m1.
    let veto = b.origin(s, a.t0, d, Action::Halt { robot: a.robot });
    b.cmd_mut(veto).cites = vec![m1];
    let later = a.t0 + rng.gen_range(5..=15);
    // The later command goes directly to the robot (planner-3 holds direct control of
    // the aisle AGV), so its production path has no relay.
    b.command(
        p3,
        later,
        Destination::Actuator,
        fast,
        Vec::new(),
        Derivation::Origin,
    );
    let hit =
        arrival_tick(a.crossing_x, a.slow, 1, &[(later + 1, a.fast)], HORIZON).unwrap_or(HORIZON);
    b.crossing_worker(a.crossing_x, hit);
    let planted = Planted {
        adverse: true,
        causal: profile(&[("planner-3", 1.0)]),
        breach: set(&["planner-1", "planner-3"]),
        conduit: set(&[]),
        ..Planted::default()
    };
    (b.spec, planted)
}

fn omission(rng: &mut ChaCha8Rng) -> (WorldSpec, Planted) {
    let mut b = Builder::new(HORIZON);
    let a = b.aisle(rng, false, true);
    let p = b.principal("planner-1", Role::Planner);
    let d = b.principal("dispatcher", Role::Dispatcher);
    let r = b.principal("controller-agv-1", Role::Controller);
    let s = b.principal("supervisor", Role::Supervisor);
    b.spec.robots[a.robot.0 as usize].speed = a.compliant;
    let route = Action::MoveTo {
        robot: a.robot,
        to: Point::new(40_000, 0),
    };
    let m = b.origin(p, a.t0, d, route);
    let md = b.relay(d, a.t0 + 1, Some(r), route, vec![m], false);
    b.relay(r, a.t0 + 2, None, route, vec![md], false);
    b.spec.duties.push(Duty::HaltOnEntry {
        supervisor: s,
        zone: a.zone,
        robot: a.robot,
        deadline: 5,
    });
    let hit = arrival_tick(a.crossing_x, a.compliant, a.t0 + 3, &[], HORIZON).unwrap_or(HORIZON);
    b.crossing_worker(a.crossing_x, hit);
    let planted = Planted {
        adverse: true,
        causal: profile(&[
            ("planner-1", 1.0),
            ("dispatcher", 1.0),
            ("controller-agv-1", 1.0),
            ("supervisor", 1.0),
        ]),
        breach: set(&["supervisor"]),
        conduit: set(&["dispatcher", "controller-agv-1"]),
        ..Planted::default()
    };
    (b.spec, planted)
}

fn chain(rng: &mut ChaCha8Rng) -> (WorldSpec, Planted) {
    let mut b = Builder::new(HORIZON);
    let a = b.aisle(rng, true, false);
    let depth = rng.gen_range(1..=3usize);
    let u = b.principal("user", Role::User);
    let p1 = b.principal("planner-1", Role::Planner);
    let relays: Vec<PrincipalId> = (0..depth)
        .map(|i| b.principal(&format!("planner-{}", i + 2), Role::Planner))
        .collect();
    let d = b.principal("dispatcher", Role::Dispatcher);
    let r = b.principal("controller-agv-1", Role::Controller);
    let fast = Action::SetSpeed {
        robot: a.robot,
        speed: a.fast,
    };
    let ask = b.origin(
        u,
        a.t0,
        p1,
        Action::SetSpeed {
            robot: a.robot,
            speed: a.compliant,
        },
    );
    let mut t = a.t0 + 1;
    let first = relays.first().copied().unwrap_or(d);
    let mut prev = b.relay(p1, t, Some(first), fast, vec![ask], false);
    for (i, &p) in relays.iter().enumerate() {
        t += 1;
        let to = relays.get(i + 1).copied().unwrap_or(d);
        prev = b.relay(p, t, Some(to), fast, vec![prev], false);
    }
    t += 1;
    let md = b.relay(d, t, Some(r), fast, vec![prev], false);
    t += 1;
    b.relay(r, t, None, fast, vec![md], false);
    let hit = arrival_tick(a.crossing_x, a.slow, 1, &[(t + 1, a.fast)], HORIZON).unwrap_or(HORIZON);
    b.crossing_worker(a.crossing_x, hit);
    let mut causal = profile(&[
        ("user", 1.0),
        ("planner-1", 1.0),
        ("dispatcher", 1.0),
        ("controller-agv-1", 1.0),
    ]);
    let mut conduit = set(&["dispatcher", "controller-agv-1"]);
    for i in 0..depth {
        causal.insert(format!("planner-{}", i + 2), 1.0);
        conduit.insert(format!("planner-{}", i + 2));
    }
    let planted = Planted {
        adverse: true,
        causal,
        breach: set(&["planner-1"]),
        conduit,
        ..Planted::default()
    };
    (b.spec, planted)
}

fn startup(rng: &mut ChaCha8Rng) -> (WorldSpec, Planted) {
    let mut b = Builder::new(HORIZON);
    let a = b.aisle(rng, false, true);
    let d = b.principal("dispatcher", Role::Dispatcher);
    let r = b.principal("controller-agv-1", Role::Controller);
    let s = b.principal("supervisor", Role::Supervisor);
    b.spec.robots[a.robot.0 as usize].speed = a.compliant;
    // The worker walks in for maintenance and stays on the robot's line.
    let x_w = rng.gen_range(30..=60) * 100;
    let enter = rng.gen_range(5..=20);
    b.spec.humans.push(Human {
        name: "worker-1".into(),
        path: vec![Point::new(x_w, -WALK), Point::new(x_w, 0)],
        speed: WALK_SPEED,
        start_tick: enter,
    });
    let start = enter + 2 * EDGE_TO_CROSSING + rng.gen_range(10..=40);
    let route = Action::MoveTo {
        robot: a.robot,
        to: Point::new(40_000, 0),
    };
    let md = b.origin(d, start, r, route);
    b.relay(r, start + 1, None, route, vec![md], false);
    b.spec.duties.push(Duty::HaltOnEntry {
        supervisor: s,
        zone: a.zone,
        robot: a.robot,
        deadline: 5,
    });
    let planted = Planted {
        adverse: true,
        causal: profile(&[
            ("dispatcher", 1.0),
            ("controller-agv-1", 1.0),
            ("supervisor", 1.0),
        ]),
        breach: set(&["supervisor"]),
        conduit: set(&["controller-agv-1"]),
        ..Planted::default()
    };
    (b.spec, planted)
}

fn no_cause(rng: &mut ChaCha8Rng) -> (WorldSpec, Planted) {
    let mut b = Builder::new(HORIZON);
    let a = b.aisle(rng, true, false);
    let p = b.principal("planner-1", Role::Planner);
    let d = b.principal("dispatcher", Role::Dispatcher);
    let r = b.principal("controller-agv-1", Role::Controller);
    let _s = b.principal("supervisor", Role::Supervisor);
    let line = b.principal("line-controller", Role::Controller);
    b.spec.batches.push(Batch {
        name: "batch-1".into(),
        value: 5000,
        range: (4000, 6000),
    });
    // Routine, compliant traffic: a speed change and a parameter adjustment in range.
    let ok = Action::SetSpeed {
        robot: a.robot,
        speed: a.compliant,
    };
    let m = b.origin(p, a.t0, d, ok);
    let md = b.relay(d, a.t0 + 1, Some(r), ok, vec![m], false);
    b.relay(r, a.t0 + 2, None, ok, vec![md], false);
    let adj = Action::SetParam {
        batch: BatchId(0),
        value: rng.gen_range(4500..=5500),
    };
    let mp = b.origin(p, a.t0 + 3, line, adj);
    b.relay(line, a.t0 + 4, None, adj, vec![mp], false);
    let when = a.t0 + rng.gen_range(20..=80);
    if rng.gen_bool(0.5) {
        b.spec.exogenous.push(Exogenous::Drift {
            tick: when,
            batch: BatchId(0),
            value: rng.gen_range(6500..=9000),
        });
    } else {
        // A second, idle robot lurches into a worker standing next to it.
        b.spec.robots.push(Robot {
            name: "arm-2".into(),
            kind: RobotKind::Arm,
            mass_kg: rng.gen_range(50..=200),
            pos: Point::new(20_000, 8000),
            target: None,
            speed: 0,
        });
        b.spec.humans.push(Human {
            name: "worker-2".into(),
            path: vec![Point::new(21_500, 8000)],
            speed: 0,
            start_tick: 0,
        });
        let to = Point::new(22_000, 8000);
        b.spec.exogenous.push(Exogenous::Lurch {
            tick: when,
            robot: RobotId(1),
            to,
            speed: 80,
        });
    }
    let planted = Planted {
        adverse: true,
        ..Planted::default()
    };
    (b.spec, planted)
}

fn trivial(rng: &mut ChaCha8Rng) -> (WorldSpec, Planted) {
    let mut b = Builder::new(HORIZON);
    let a = b.aisle(rng, true, false);
    let p = b.principal("planner-1", Role::Planner);
    let _s = b.principal("supervisor", Role::Supervisor);
    let fast = Action::SetSpeed {
        robot: a.robot,
        speed: a.fast,
    };
    // A single command with a direct path to the robot.
    b.command(
        p,
        a.t0,
        Destination::Actuator,
        fast,
        Vec::new(),
        Derivation::Origin,
    );
    let hit =
        arrival_tick(a.crossing_x, a.slow, 1, &[(a.t0 + 1, a.fast)], HORIZON).unwrap_or(HORIZON);
    b.crossing_worker(a.crossing_x, hit);
    let planted = Planted {
        adverse: true,
        causal: profile(&[("planner-1", 1.0)]),
        breach: set(&["planner-1"]),
        conduit: set(&[]),
        ..Planted::default()
    };
    (b.spec, planted)
}

/// A duty-registry fact resolved to names, as the verdict layer needs it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum DutyFact {
    /// `principal` must halt `robot` within `deadline_ms` of a human entering `zone`;
    /// `triggered_at_ms` is the recorded entry report's time (none: never triggered).
    HaltOnEntry {
        /// Duty holder.
        principal: String,
        /// Robot to halt.
        robot: String,
        /// Watched zone.
        zone: String,
        /// Deadline after the report, in milliseconds.
        deadline_ms: u64,
        /// Time of the triggering report, if any.
        triggered_at_ms: Option<u64>,
    },
    /// Speeds commanded for `robot` must not exceed `max_mm_per_s` (safety envelope of
    /// the zone it operates in); binds every author of a non-relayed speed command.
    SpeedEnvelope {
        /// Robot.
        robot: String,
        /// Envelope in mm/s.
        max_mm_per_s: u64,
    },
    /// `batch`'s parameter must stay within `[lo, hi]` (milli-units); binds every author
    /// of a non-relayed `set_param`.
    AcceptanceRange {
        /// Batch.
        batch: String,
        /// Lower bound.
        lo: i64,
        /// Upper bound.
        hi: i64,
    },
    /// Every command of `principal` must pass its registered review step.
    ReviewRequired {
        /// Duty holder.
        principal: String,
    },
}

impl Scenario {
    /// The duty registry of the scenario, resolved to names (sorted).
    pub fn duty_facts(&self) -> Vec<DutyFact> {
        let spec = &self.spec;
        let reports = spec.sensor_reports();
        let mut out = Vec::new();
        for (i, r) in spec.robots.iter().enumerate() {
            let env = crate::oracle::envelope(spec, i);
            if env != i64::MAX {
                out.push(DutyFact::SpeedEnvelope {
                    robot: r.name.clone(),
                    max_mm_per_s: env.max(0) as u64 * 10,
                });
            }
        }
        for b in &spec.batches {
            out.push(DutyFact::AcceptanceRange {
                batch: b.name.clone(),
                lo: b.range.0,
                hi: b.range.1,
            });
        }
        for d in &spec.duties {
            match *d {
                Duty::HaltOnEntry {
                    supervisor,
                    zone,
                    robot,
                    deadline,
                } => out.push(DutyFact::HaltOnEntry {
                    principal: spec.name(supervisor).to_string(),
                    robot: spec
                        .robots
                        .get(robot.0 as usize)
                        .map(|r| r.name.clone())
                        .unwrap_or_default(),
                    zone: spec
                        .zones
                        .get(zone as usize)
                        .map(|z| z.name.clone())
                        .unwrap_or_default(),
                    deadline_ms: u64::from(deadline) * crate::world::TICK_MS,
                    triggered_at_ms: reports
                        .iter()
                        .find(|r| r.zone == zone)
                        .map(|r| u64::from(r.tick) * crate::world::TICK_MS),
                }),
                Duty::ReviewRequired { principal } => out.push(DutyFact::ReviewRequired {
                    principal: spec.name(principal).to_string(),
                }),
            }
        }
        out.sort();
        out
    }
}
