//! Conduct attacks by valid-key insiders and the blame-shift certificate on the world.
//!
//! Design constraints:
//! - A conduct attack is protocol-valid: every message is signed by its author's own
//!   key. Each principal's declared reference policy is "do not issue the commands
//!   marked `deviation`"; those commands are the selector variables.
//! - The certificate is computed by exact re-execution: for every subset `R` of the
//!   deviations, the world is re-run with `R` reverted (absent) and the victim's causal
//!   grade recomputed by the oracle; the meta-outcome is "the victim's grade exceeds
//!   its reference grade" (all deviations reverted). Minimal reversion sets are the
//!   minimal transversals of that meta-function, graded `1/|R|` (`ρ_frame`).
//! - At most [`MAX_DEVIATIONS`] selector variables are tabulated.

use std::collections::{BTreeMap, BTreeSet};

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::blueprint::{arrival_tick, Aisle, Builder, Family, Planted, HORIZON};
use crate::oracle::{minimal_causes, truth_given, OracleError};
use crate::world::{Action, CommandId, Point, PrincipalId, Role, WorldSpec};

/// Largest number of deviations the certificate tabulates.
pub const MAX_DEVIATIONS: usize = 10;

/// A blame-shift certificate.
#[derive(Debug, Clone, PartialEq)]
pub struct Certificate {
    /// The victim.
    pub victim: String,
    /// Victim's causal grade under realised conduct.
    pub realised: f64,
    /// Victim's causal grade under reference conduct.
    pub reference: f64,
    /// Minimal reversion sets (deviating command ids).
    pub sets: Vec<Vec<CommandId>>,
    /// Framers and their grade `ρ_frame`; every deviating principal is listed.
    pub framers: BTreeMap<String, f64>,
}

/// Computes the blame-shift certificate for `victim`. Returns `None` when the
/// deviations did not raise the victim's involvement.
pub fn certificate(spec: &WorldSpec, victim: &str) -> Result<Option<Certificate>, OracleError> {
    let devs: Vec<CommandId> = spec
        .commands
        .iter()
        .enumerate()
        .filter(|(_, c)| c.deviation)
        .map(|(i, _)| CommandId(i as u32))
        .collect();
    if devs.len() > MAX_DEVIATIONS {
        return Err(OracleError::TooManyCandidates(devs.len()));
    }
    let n = devs.len();
    let mut grade = Vec::with_capacity(1 << n);
    // mask bit i set = deviation i kept (at its actual value).
    for mask in 0..1u64 << n {
        let reverted: BTreeSet<CommandId> = devs
            .iter()
            .enumerate()
            .filter(|(i, _)| mask & (1 << i) == 0)
            .map(|(_, c)| *c)
            .collect();
        let t = truth_given(spec, &reverted)?;
        grade.push(t.causal.get(victim).copied().unwrap_or(0.0));
    }
    let full = (1usize << n) - 1;
    let realised = grade[full];
    let reference = grade[0];
    if realised <= reference {
        return Ok(None);
    }
    let table: Vec<bool> = grade.iter().map(|g| *g > reference).collect();
    let causes = minimal_causes(n, &table)?;
    let mut framers: BTreeMap<String, f64> = devs
        .iter()
        .map(|c| {
            (
                spec.name(spec.commands[c.0 as usize].author).to_string(),
                0.0,
            )
        })
        .collect();
    for x in &causes {
        let g = 1.0 / x.len() as f64;
        for &i in x {
            let e = framers
                .entry(
                    spec.name(spec.commands[devs[i].0 as usize].author)
                        .to_string(),
                )
                .or_insert(0.0);
            if g > *e {
                *e = g;
            }
        }
    }
    let sets = causes
        .iter()
        .map(|x| x.iter().map(|&i| devs[i]).collect())
        .collect();
    Ok(Some(Certificate {
        victim: victim.to_string(),
        realised,
        reference,
        sets,
        framers,
    }))
}

fn p(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

fn s(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// The planted truth of a framing of planner-1: the victim's chain (planner-1, the
/// dispatcher, the controller relaying to agv-1, the two relays conduits) and `others`
/// causal at ρ = 1, `breach` in breach, `framers` with their framing ρ.
fn framed(others: &[&str], breach: &str, framers: &[(&str, f64)]) -> Planted {
    let mut causal = p(&[
        ("planner-1", 1.0),
        ("dispatcher", 1.0),
        ("controller-agv-1", 1.0),
    ]);
    causal.extend(others.iter().map(|o| (o.to_string(), 1.0)));
    Planted {
        adverse: true,
        causal,
        breach: s(&[breach]),
        conduit: s(&["dispatcher", "controller-agv-1"]),
        victim: Some("planner-1".into()),
        framers: p(framers),
    }
}

/// The tick agv-1 reaches the crossing when it is sped up `lag` ticks into the
/// incident (the horizon if it never does).
fn crossing_hit(a: &Aisle, lag: u32) -> u32 {
    arrival_tick(
        a.crossing_x,
        a.slow,
        a.t0 + 3,
        &[(a.t0 + lag + 2, a.fast)],
        HORIZON,
    )
    .unwrap_or(HORIZON)
}

/// Inevitability rigging: adds agv-2 with insider-1's innocuous deviation (parking it)
/// and the declared reference plan that would have sent it through the crossing ahead
/// of agv-1.
fn rig_reference_plan(b: &mut Builder, a: &Aisle, i1: PrincipalId, lag: u32) {
    let t0 = a.t0;
    let hit = crossing_hit(a, lag);
    let pass = hit.saturating_sub(10);
    let ahead = i64::from(pass.saturating_sub(t0));
    let x2 = a.crossing_x - 80 * ahead;
    b.spec.robots.push(crate::world::Robot {
        name: "agv-2".into(),
        kind: crate::world::RobotKind::Agv,
        mass_kg: 400,
        pos: Point::new(x2, -1000),
        target: None,
        speed: 80,
    });
    let agv2 = crate::world::RobotId((b.spec.robots.len() - 1) as u16);
    let park = Action::MoveTo {
        robot: agv2,
        to: Point::new(x2 - 5000, -1000),
    };
    let through = Action::MoveTo {
        robot: agv2,
        to: Point::new(a.crossing_x + 20_000, -1000),
    };
    let dev = b.command(
        i1,
        t0,
        crate::world::Destination::Actuator,
        park,
        Vec::new(),
        crate::world::Derivation::Origin,
    );
    b.cmd_mut(dev).deviation = true;
    let reference = b.command(
        i1,
        t0,
        crate::world::Destination::Actuator,
        through,
        Vec::new(),
        crate::world::Derivation::Origin,
    );
    b.cmd_mut(reference).reference_for = Some(dev);
}

pub(crate) fn build(family: Family, rng: &mut ChaCha8Rng) -> (WorldSpec, Planted) {
    let mut b = Builder::new(HORIZON);
    let a = b.aisle(rng, false, false);
    let victim = b.principal("planner-1", Role::Planner);
    let d = b.principal("dispatcher", Role::Dispatcher);
    let r = b.principal("controller-agv-1", Role::Controller);
    let i1 = b.principal("insider-1", Role::Planner);
    let i2 = b.principal("insider-2", Role::Planner);
    let checker = b.principal("checker", Role::Checker);
    let route = Action::MoveTo {
        robot: a.robot,
        to: Point::new(40_000, 0),
    };
    let fast = Action::SetSpeed {
        robot: a.robot,
        speed: a.fast,
    };
    let t0 = a.t0;
    let mv = b.origin(victim, t0, d, route);
    let md = b.relay(d, t0 + 1, Some(r), route, vec![mv], false);
    b.relay(r, t0 + 2, None, route, vec![md], false);
    let lag = rng.gen_range(1..=4);
    let planted = match family {
        Family::Conditioning => {
            let x = b.relay(i1, t0 + lag, Some(r), fast, vec![mv], true);
            b.cmd_mut(x).deviation = true;
            b.relay(r, t0 + lag + 1, None, fast, vec![x], false);
            framed(&["insider-1"], "insider-1", &[("insider-1", 1.0)])
        }
        Family::InevitabilityRigging => {
            // The victim routes agv-1 (compliant); insider-2 breaches the speed duty on
            // agv-1 on its own account. insider-1 dispatches agv-2: its declared
            // reference plan routes agv-2 through the crossing ahead of agv-1 (so the
            // harm would have been inevitable whatever the victim did); its realised,
            // innocuous deviation parks agv-2 instead. The deviation is on no path to
            // the outcome and is no cause of it, yet it makes the harm hinge on the victim.
            let x = b.origin(i2, t0 + lag, r, fast);
            b.relay(r, t0 + lag + 1, None, fast, vec![x], false);
            rig_reference_plan(&mut b, &a, i1, lag);
            framed(&["insider-2"], "insider-2", &[("insider-1", 1.0)])
        }
        _ => {
            // Level 2: the framer conditions on the victim and on a benign advisory
            // the checker issued off-policy; a second insider's deviation is an inert decoy.
            let advice = Action::SetSpeed {
                robot: a.robot,
                speed: a.compliant,
            };
            let c = b.origin(checker, t0, i1, advice);
            b.cmd_mut(c).deviation = true;
            let decoy = b.origin(i2, t0, d, advice);
            b.cmd_mut(decoy).deviation = true;
            let x = b.relay(i1, t0 + lag, Some(r), fast, vec![mv, c], true);
            b.cmd_mut(x).deviation = true;
            b.relay(r, t0 + lag + 1, None, fast, vec![x], false);
            framed(
                &["insider-1", "checker"],
                "insider-1",
                &[("insider-1", 1.0), ("checker", 1.0), ("insider-2", 0.0)],
            )
        }
    };
    let hit = crossing_hit(&a, lag);
    b.crossing_worker(a.crossing_x, hit);
    (b.spec, planted)
}
