//! The record's perimeter and verdict-guided repair, end to end on the world: signed
//! record (with chosen links off the bus) → verification → verdict → what it sees of
//! the oracle's truth, and the repair it implies → re-run world.

use std::collections::BTreeMap;

use audita_facility::generator::{self, Params};
use audita_facility::oracle::truth;
use audita_facility::perimeter::{off_bus, visibility};
use audita_facility::record::{sign_record, sign_record_off_bus, SignedRecord};
use audita_facility::repair::{guided, guided_by_grade, harm_after, Culprit};
use audita_facility::scenario::{generate, Family, Scenario};
use audita_load_tests::hosted::{findings, hosted_verdict};
use audita_verdict::Verdict;

fn verdict_on(sc: &Scenario, sr: &SignedRecord) -> Option<Verdict> {
    hosted_verdict(sc, &sr.record, sr, "reasonable_agent").unwrap()
}

fn seen(sc: &Scenario, v: Option<&Verdict>) -> BTreeMap<String, f64> {
    let mut out: BTreeMap<String, f64> = sc.principals().into_iter().map(|p| (p, 0.0)).collect();
    if let Some(v) = v {
        for r in v.rows() {
            out.insert(r.principal, r.rho_lo);
        }
    }
    out
}

fn incidents() -> Vec<Scenario> {
    let mut out = Vec::new();
    for family in Family::ALL {
        for seed in 0..2 {
            out.push(generate(family, 500 + seed));
        }
    }
    let params = Params::default();
    for seed in 0..10 {
        out.push(generator::generate(700 + seed, &params));
    }
    out
}

#[test]
fn off_bus_links_hide_responsibility_but_never_blame_the_uninvolved() {
    let fractions = [0.0, 0.25, 0.5, 1.0];
    let mut invisible = vec![0.0; fractions.len()];
    let mut counted = 0usize;
    for (i, sc) in incidents().iter().enumerate() {
        let t = truth(&sc.spec).unwrap();
        let mass: f64 = t.causal.values().sum();
        for (k, &f) in fractions.iter().enumerate() {
            let off = off_bus(&sc.spec, f, i as u64);
            let sr = sign_record_off_bus(sc, &off).unwrap();
            let v = verdict_on(sc, &sr);
            let vis = visibility(&t.causal, &seen(sc, v.as_ref()));
            assert_eq!(
                vis.over_attribution, 0.0,
                "{} seed {} at off-bus fraction {f}: {vis:?}",
                sc.family, sc.seed
            );
            if f == 0.0 {
                assert_eq!(vis.invisible, 0.0, "{} seed {}", sc.family, sc.seed);
            }
            if mass > 0.0 {
                invisible[k] += vis.invisible;
            }
        }
        counted += usize::from(mass > 0.0);
    }
    assert!(counted > 10);
    for w in invisible.windows(2) {
        assert!(
            w[0] < w[1],
            "invisible responsibility must rise: {invisible:?}"
        );
    }
}

fn culprits(v: &Verdict) -> Vec<Culprit> {
    findings(v, true)
}

#[test]
fn overdetermined_culprits_need_two_edits_and_the_grades_say_so() {
    // Redundancy: each planner is culpable at ρ = 1/2, so fixing one leaves its twin's
    // demand on the trunk; reading the grades sends the one edit to a but-for link.
    for seed in 0..6 {
        let sc = generate(Family::Redundancy, seed);
        let sr = sign_record(&sc).unwrap();
        let v = verdict_on(&sc, &sr).unwrap();
        let plain = guided(&sc.spec, &sr, &culprits(&v));
        assert!(harm_after(&sc.spec, plain).adverse, "seed {seed}");
        let graded = guided_by_grade(&sc.spec, &sr, &culprits(&v), &findings(&v, false));
        assert!(
            !harm_after(&sc.spec, graded).adverse,
            "seed {seed}: {graded:?}"
        );
    }
}

#[test]
fn guided_repair_removes_the_adverse_outcome_on_every_trivial_and_omission_draw() {
    for family in [Family::Trivial, Family::Omission] {
        for seed in 0..12 {
            let sc = generate(family, seed);
            let sr = sign_record(&sc).unwrap();
            let v = verdict_on(&sc, &sr).expect("adverse");
            let edit = guided(&sc.spec, &sr, &culprits(&v));
            assert!(edit.is_some(), "{} seed {seed}: no repair", family.name());
            let h = harm_after(&sc.spec, edit);
            assert!(
                !h.adverse,
                "{} seed {seed}: {edit:?} leaves {h:?}",
                family.name()
            );
        }
    }
}

/// Inserts `cmd` at index `at` of the record, renumbering every later reference.
fn insert_command(
    spec: &mut audita_facility::world::WorldSpec,
    at: usize,
    cmd: audita_facility::world::Command,
) {
    use audita_facility::world::CommandId;
    let shift = |c: &mut CommandId| {
        if c.0 as usize >= at {
            c.0 += 1;
        }
    };
    for c in &mut spec.commands {
        c.cites.iter_mut().for_each(shift);
        if let Some(r) = c.reference_for.as_mut() {
            shift(r);
        }
    }
    spec.commands.insert(at, cmd);
}

/// An adversary of the guarantee: the victim's route demand reaches the dispatcher
/// twice (from planner-1, and a redundant copy from planner-2), while the insider's
/// conditioned speed-up consumes planner-1's demand through a citation it keeps off
/// the bus (it read the message out of band; the message itself is on the bus). In the
/// world Y = (m1 | m2) & m1 = m1: planner-2 is absorbed, true ρ = 0. On the record the
/// insider's command looks like its own decision, so the visible model is
/// Y = (m1 | m2) & x, whose minimal cause {m1, m2} replay confirms (removing both does
/// avert) — though in the world {m1} alone already averts, so {m1, m2} is not minimal.
/// Replay used to check only that a cause falsifies Y, not that it is minimal; with the
/// recorded-channel assumption broken that let a truly uninvolved principal in
/// (ρ_lo = ½ for planner-2). Certification now re-checks minimality by replay.
#[test]
fn hidden_citation_of_an_on_bus_message_never_credits_an_absorbed_principal() {
    use audita_facility::record::sign_record_hiding;
    use audita_facility::world::{CommandId, Destination, Principal, PrincipalId, Role};
    use std::collections::BTreeSet;
    let mut over = Vec::new();
    for seed in 0..4 {
        let mut sc = generate(Family::Conditioning, seed);
        let spec = &mut sc.spec;
        let dispatcher = spec.principal("dispatcher").unwrap();
        spec.principals.push(Principal {
            name: "planner-2".into(),
            role: Role::Planner,
        });
        let p2 = PrincipalId((spec.principals.len() - 1) as u16);
        // Command 0 is planner-1's route to the dispatcher; 1 the dispatcher's relay.
        let mut twin = spec.commands[0].clone();
        twin.author = p2;
        twin.destination = Destination::Principal(dispatcher);
        insert_command(spec, 1, twin);
        spec.commands[2].cites.push(CommandId(1));
        let t = truth(&sc.spec).unwrap();
        assert_eq!(t.causal["planner-2"], 0.0, "seed {seed}: absorbed");
        assert_eq!(t.causal["planner-1"], 1.0);
        // The insider's conditioned command (the relay-all citing command 0).
        let x = sc
            .spec
            .commands
            .iter()
            .position(|c| c.deviation)
            .map(|i| CommandId(i as u32))
            .unwrap();
        let hidden: BTreeSet<(CommandId, CommandId)> = [(x, CommandId(0))].into();
        let sr = sign_record_hiding(&sc, &BTreeSet::new(), &hidden).unwrap();
        let v = verdict_on(&sc, &sr).unwrap();
        let vis = visibility(&t.causal, &seen(&sc, Some(&v)));
        over.push(vis.over_attribution);
    }
    assert!(over.iter().all(|o| *o == 0.0), "{over:?}");
}
