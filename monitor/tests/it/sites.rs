//! A declaration reads only its targets' sites: over streams of several sites
//! (each its own coordinate frame, their entities at overlapping coordinates),
//! with reports observing two sites at once, malformed reports and unregistered
//! entities, every declaration the monitor derives from the whole stream is derived
//! again, identically, from the messages [`reads`] keeps for it — and the check
//! accepts it there — while other sites' telemetry is left out.

use audita_evidence::{
    derive_signing_key, Envelope, KeyRegistry, MessageId, Payload, PrincipalId, SignedEnvelope,
    Verified,
};
use audita_monitor::{check, read_key, reads, Derivation, Monitor, Predicates, ReadKey};
use std::collections::BTreeMap;

const FILE: &str = r#"{"version": 1, "stale_after_ms": 400,
  "entities": {
    "c1.agv-1": {"class": "robot", "mass_kg": 100, "site": "c1"},
    "c1.agv-2": {"class": "robot", "mass_kg": 120, "site": "c1"},
    "c1.worker-1": {"class": "human", "site": "c1"},
    "c2.agv-1": {"class": "robot", "mass_kg": 100, "site": "c2"},
    "c2.worker-1": {"class": "human", "site": "c2"},
    "c3.agv-1": {"class": "robot", "mass_kg": 90, "site": "c3"},
    "c3.worker-1": {"class": "human", "site": "c3"}},
  "predicates": [
    {"name": "sep", "kind": "separation", "a": {"class": "robot"}, "b": {"class": "human"},
     "below_mm": 500, "near_miss_margin": 500, "lookback_ms": 3000,
     "severity": {"kinetic": {"speed_field": "speed_mm_per_s"}}},
    {"name": "fast", "kind": "out_of_range", "entity": {"class": "robot"},
     "field": "speed_mm_per_s", "min": 0, "max": 1800, "lookback_ms": 3000}]}"#;

/// Entities by the site their reports come from (`loose.*` is unregistered: the
/// default site).
const SITES: [(&str, &[(&str, &str)]); 4] = [
    (
        "c1",
        &[
            ("c1.agv-1", "robot"),
            ("c1.agv-2", "robot"),
            ("c1.worker-1", "human"),
        ],
    ),
    ("c2", &[("c2.agv-1", "robot"), ("c2.worker-1", "human")]),
    ("c3", &[("c3.agv-1", "robot"), ("c3.worker-1", "human")]),
    (
        "loose",
        &[("loose.agv-1", "robot"), ("loose.worker-1", "human")],
    ),
];

/// A small deterministic generator (the stream, not the property, is random).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

fn observation(entity: &str, class: &str, rng: &mut Lcg) -> String {
    // Everyone within 1.5 m of the origin: pairs across sites would often fire.
    let (x, y, v) = (rng.next(1500), rng.next(1500), rng.next(2200));
    format!(
        r#"{{"entity": "{entity}", "class": "{class}", "fields": {{"x_mm": {x}, "y_mm": {y}, "speed_mm_per_s": {v}}}}}"#
    )
}

fn signed(
    keys: &mut KeyRegistry,
    author: &str,
    t: u64,
    reading: String,
) -> Verified<SignedEnvelope> {
    let key = derive_signing_key(3, author);
    let pid = PrincipalId::new(author).unwrap();
    keys.add_principal(pid.clone(), key.verifying_key());
    Envelope::new(
        pid.clone(),
        pid,
        t,
        Payload::SensorReport {
            sensor: "rtls".into(),
            reading,
        },
    )
    .sign(&key)
    .unwrap()
    .verify(keys)
    .unwrap()
}

/// A stream of `steps` ticks of 100 ms: each tick one report per site observing a
/// random part of its entities, now and then one observing two sites at once, or a
/// malformed one.
fn stream(seed: u64, steps: u64) -> Vec<Verified<SignedEnvelope>> {
    let mut rng = Lcg(seed);
    let mut keys = KeyRegistry::new();
    let mut out = Vec::new();
    for step in 0..steps {
        let t = 1_000 + step * 100;
        for (i, (site, entities)) in SITES.iter().enumerate() {
            let mut obs: Vec<String> = Vec::new();
            for (e, c) in entities.iter() {
                if rng.next(3) > 0 {
                    obs.push(observation(e, c, &mut rng));
                }
            }
            if obs.is_empty() {
                continue;
            }
            let reading = format!(
                r#"{{"telemetry": 1, "observations": [{}]}}"#,
                obs.join(", ")
            );
            out.push(signed(
                &mut keys,
                &format!("{site}.rtls"),
                t + i as u64,
                reading,
            ));
        }
        match rng.next(10) {
            0 => {
                let (a, b) = (SITES[0].1[0], SITES[1].1[1]);
                let reading = format!(
                    r#"{{"telemetry": 1, "observations": [{}, {}]}}"#,
                    observation(a.0, a.1, &mut rng),
                    observation(b.0, b.1, &mut rng)
                );
                out.push(signed(&mut keys, "yard.rtls", t + 50, reading));
            }
            1 => {
                let reading = r#"{"telemetry": 1, "observations": [{"entity": ""}]}"#;
                out.push(signed(&mut keys, "c2.rtls", t + 60, reading.into()));
            }
            _ => {}
        }
    }
    out
}

/// The monitor's derivation over `messages` in the order given.
pub(crate) fn derive(messages: &[&Verified<SignedEnvelope>], file: &Predicates) -> Derivation {
    let mut m = Monitor::new(file.clone());
    let mut alerts = Vec::new();
    for msg in messages {
        alerts.extend(m.observe(msg));
    }
    Derivation {
        declarations: m.advance(u64::MAX),
        alerts,
        malformed: m.malformed(),
    }
}

#[test]
fn every_declaration_is_derived_again_from_its_targets_sites_alone() {
    let file = Predicates::from_json(FILE).unwrap();
    let (mut declared, mut kept, mut offered) = (0, 0, 0);
    for seed in 0..8 {
        let msgs = stream(seed, 120);
        let all: Vec<&Verified<SignedEnvelope>> = msgs.iter().collect();
        let whole = derive(&all, &file);
        let by_id: BTreeMap<&MessageId, &Verified<SignedEnvelope>> =
            msgs.iter().map(|m| (m.id(), m)).collect();
        for decl in &whole.declarations {
            let read = reads(
                msgs.iter().map(|m| (m.id(), m.envelope())),
                decl,
                Some(&file),
            );
            let every = reads(msgs.iter().map(|m| (m.id(), m.envelope())), decl, None);
            assert!(read.is_subset(&every), "{}", decl.incident);
            let subset: Vec<&Verified<SignedEnvelope>> =
                msgs.iter().filter(|m| read.contains(m.id())).collect();
            assert_eq!(subset.len(), read.len());
            assert!(read.iter().all(|id| by_id.contains_key(id)));
            let again = derive(&subset, &file);
            let same = again.declarations.iter().find(|d| {
                d.targets == decl.targets
                    && d.t_star_ms == decl.t_star_ms
                    && d.outcome == decl.outcome
            });
            assert_eq!(
                same,
                Some(decl),
                "seed {seed}: {} is not derived again from its sites' {} messages",
                decl.incident,
                read.len()
            );
            let checked = check(decl, &file, &again)
                .unwrap_or_else(|e| panic!("seed {seed}: {}: {e}", decl.incident));
            assert_eq!(&checked, decl, "seed {seed}");
            declared += 1;
            kept += read.len();
            offered += every.len();
        }
    }
    assert!(declared >= 20, "the streams fire: {declared} declarations");
    // The other sites' telemetry is left out: with four sites, well under half.
    assert!(kept * 2 < offered, "kept {kept} of {offered}");
}

#[test]
fn a_report_is_read_by_one_site_only_when_every_entity_it_observes_is_there() {
    let file = Predicates::from_json(FILE).unwrap();
    let mut keys = KeyRegistry::new();
    let key = |reading: &str| {
        let m = signed(&mut KeyRegistry::new(), "x.rtls", 1, reading.to_string());
        read_key(m.envelope(), Some(&file)).map(|k| format!("{k:?}"))
    };
    let one = r#"{"telemetry": 1, "observations": [
        {"entity": "c1.agv-1", "class": "robot", "fields": {}},
        {"entity": "c1.worker-1", "class": "human", "fields": {}}]}"#;
    assert_eq!(key(one), Some(format!("{:?}", ReadKey::Site(Some("c1")))));
    let two = r#"{"telemetry": 1, "observations": [
        {"entity": "c1.agv-1", "class": "robot", "fields": {}},
        {"entity": "c2.worker-1", "class": "human", "fields": {}}]}"#;
    assert_eq!(key(two), Some(format!("{:?}", ReadKey::Always)));
    // Registered and unregistered entities together: two sites.
    let mixed = r#"{"telemetry": 1, "observations": [
        {"entity": "c1.agv-1", "class": "robot", "fields": {}},
        {"entity": "loose.worker-1", "class": "human", "fields": {}}]}"#;
    assert_eq!(key(mixed), Some(format!("{:?}", ReadKey::Always)));
    let loose = r#"{"telemetry": 1, "observations": [
        {"entity": "loose.worker-1", "class": "human", "fields": {}}]}"#;
    assert_eq!(key(loose), Some(format!("{:?}", ReadKey::Site(None))));
    // What breaks the format is read by every declaration (the check counts it).
    let broken = r#"{"telemetry": 1, "observations": [{"entity": ""}]}"#;
    assert_eq!(key(broken), Some(format!("{:?}", ReadKey::Always)));
    assert_eq!(key("no telemetry here"), None);
    // Without a predicate file every entity is in the default site.
    let m = signed(&mut keys, "x.rtls", 1, two.to_string());
    assert_eq!(read_key(m.envelope(), None), Some(ReadKey::Site(None)));
}
