//! The pipeline detects every incident itself: a fleet publishing only what a real
//! fleet sends (commands, sensor, telemetry and actuation reports, receipts) is
//! judged through the monitor stage — an alert on `audita.alerts` and a declaration
//! on `audita.adverse` per incident, a verdict matching the planted truth — and a
//! hostile declaration an outsider puts on `audita.adverse` (a culprit's realised
//! command marked unrealised) is refused by the engine workers: an abstention naming
//! the reason, no verdict.

use audita_bus::embedded::EmbeddedBus;
use audita_bus::Bus;
use audita_facility::scenario::Family;
use audita_load_tests::fleet;
use audita_pipeline::metrics::Metrics;
use audita_pipeline::Deployment;
use audita_topics::names as topics;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

#[test]
fn the_monitor_stage_declares_every_incident_and_hostile_declarations_are_refused() {
    let mix = [
        Family::Trivial,
        Family::Redundancy,
        Family::NoCause,
        Family::Preemption,
        Family::Omission,
    ];
    let fleet = fleet::build(&mix, 5, 11);
    let honest: Vec<audita_verdict::AdverseDecl> = fleet
        .cells
        .iter()
        .filter_map(|c| c.adverse.clone())
        .collect();
    assert_eq!(honest.len(), mix.len(), "every cell is adverse");
    let mut hostile = honest
        .iter()
        .find(|a| !a.anchors.is_empty())
        .expect("an anchored incident")
        .clone();
    hostile.incident = "hostile-unrealised".into();
    hostile.facts.clear();
    hostile.unrealised.push(hostile.anchors[0].clone());

    let prefix = "mon.";
    let mut d = Deployment::ephemeral(
        fleet.keys.clone(),
        fleet.duties().expect("duties"),
        prefix,
        &["keeper.test/k1"],
    )
    .expect("deployment");
    d.predicates =
        Some(audita_monitor::Predicates::from_json(&fleet.predicates_json).expect("predicates"));
    let d = Arc::new(d);
    let bus = Bus::Embedded(EmbeddedBus::new(4));
    let dir = tempfile::tempdir().unwrap();
    let metrics = Metrics::new();
    let collected = audita_pipeline::run_all(
        d.clone(),
        &bus,
        dir.path(),
        1,
        &metrics,
        |bus| {
            let mut p = bus.producer()?;
            fleet.publish(p.as_mut(), prefix, None, |_| {})?;
            let bytes = serde_json::to_vec(&hostile).unwrap();
            p.send(
                &d.topic(topics::ADVERSE),
                hostile.incident.as_bytes(),
                &bytes,
            )?;
            p.flush()?;
            Ok(honest.len() + 1)
        },
        |_| {},
    )
    .expect("pipeline runs");

    // Every incident the monitor stage declared has its verdict, equal to the
    // planted causal profile.
    let planted = fleet.planted();
    for a in &honest {
        let rec = collected
            .verdicts
            .get(&a.incident)
            .unwrap_or_else(|| panic!("no verdict for {}: {:?}", a.incident, collected.abstained));
        let v = rec.verdict.as_ref().expect("verdict");
        assert_eq!(v["declaration"]["declarer"]["kind"], "monitor");
        for (p, want) in planted[&a.incident] {
            assert_eq!(
                v["principals"][p]["rho_lo"].as_f64(),
                Some(*want),
                "{}: {p}",
                a.incident
            );
        }
    }
    // The hostile declaration: refused, no verdict.
    let reason = collected
        .abstained
        .get("hostile-unrealised")
        .expect("the hostile declaration is answered");
    assert!(
        reason.contains("declaration refused") && reason.contains("effect realised"),
        "{reason}"
    );
    assert!(!collected.verdicts.contains_key("hostile-unrealised"));

    // One fired alert per incident on audita.alerts, naming its incident.
    let mut c = bus
        .consumer("alerts-check", &[&d.topic(topics::ALERTS)])
        .unwrap();
    let mut fired = BTreeSet::new();
    while let Some(rec) = c.poll(Duration::from_millis(300)).unwrap() {
        let a: audita_topics::AlertRecord = serde_json::from_slice(&rec.payload).unwrap();
        assert_eq!(a.schema, audita_topics::ALERT_SCHEMA);
        if a.kind == "fired" {
            fired.insert(a.incident.expect("a fired alert names its incident"));
        }
    }
    let want: BTreeSet<String> = honest.iter().map(|a| a.incident.clone()).collect();
    assert_eq!(fired, want);
    assert_eq!(
        metrics.monitor_alerts.with_label_values(&["fired"]).get(),
        honest.len() as u64
    );
    assert_eq!(metrics.monitor_declarations.get(), honest.len() as u64);
}
