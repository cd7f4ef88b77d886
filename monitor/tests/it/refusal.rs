//! A VDA 5050 order the vehicle refused (a `state` whose `errors` reference the
//! order, as vda-5050-lib writes a `noRouteError`) is unrealised with the refusal
//! named and cited, and the declaration is derived again, and checked, from what
//! `reads` keeps for it. The messages are the library's own (`vda5050/testdata/`).

use audita_evidence::{
    derive_signing_key, Effect, Envelope, KeyRegistry, Payload, PrincipalId, SignedEnvelope,
    Verified,
};
use audita_monitor::{check, reads, Predicates};

use crate::sites::derive;
use audita_verdict::FactKind;
use serde_json::Value;

const VEHICLE: &str = "heldout.001";

const FILE: &str = r#"{"version": 1, "realisation_deadline_ms": 3000,
  "entities": {"heldout.001": {"class": "robot", "mass_kg": 400}},
  "predicates": [{"name": "overspeed", "kind": "speed_in_zone", "entity": {"class": "robot"},
    "zone": {"min_mm": [-1000, -1000], "max_mm": [1000, 1000]}, "above_mm_per_s": 1000,
    "lookback_ms": 60000}]}"#;

/// The captured run: its order (refused) and the vehicle's states, in order.
fn captured() -> (Value, Vec<Value>) {
    let text = std::fs::read_to_string(format!(
        "{}/../vda5050/testdata/reject.jsonl",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let (mut order, mut states) = (None, Vec::new());
    for l in text.lines() {
        let v: Value = serde_json::from_str(l).unwrap();
        match v["topic"].as_str().unwrap() {
            "order" => order = Some(v["msg"].clone()),
            "state" => states.push(v["msg"].clone()),
            _ => {}
        }
    }
    (order.unwrap(), states)
}

fn sign(keys: &mut KeyRegistry, env: Envelope) -> Verified<SignedEnvelope> {
    let key = derive_signing_key(5, env.author.as_str());
    keys.add_principal(env.author.clone(), key.verifying_key());
    env.sign(&key).unwrap().verify(keys).unwrap()
}

/// A state at 900 ms, the order at 1,000 ms, the states from 1,100 ms (200 ms apart), and then the
/// vehicle driving 2 m/s through the zone at 5,000 ms, past the deadline; with
/// `refusing` false the states' errors are cleared.
fn stream(refusing: bool) -> Vec<Verified<SignedEnvelope>> {
    let (order, states) = captured();
    let mut keys = KeyRegistry::new();
    let (master, vehicle) = (
        PrincipalId::new("master-control").unwrap(),
        PrincipalId::new(VEHICLE).unwrap(),
    );
    let state = |t: u64, mut s: Value, keys: &mut KeyRegistry| {
        if !refusing {
            s["errors"] = Value::Array(Vec::new());
        }
        sign(
            keys,
            Envelope::new(
                vehicle.clone(),
                vehicle.clone(),
                t,
                Payload::SensorReport {
                    sensor: audita_monitor::vda5050::STATE_SENSOR.into(),
                    reading: s.to_string(),
                },
            ),
        )
    };
    // Master control's order cites the last state it saw, as its sidecar does.
    let seen = state(900, states[0].clone(), &mut keys);
    let order = sign(
        &mut keys,
        Envelope::new(
            master,
            vehicle.clone(),
            1_000,
            Payload::AgentText {
                text: order.to_string(),
            },
        )
        .with_effect(Effect::AtPosition {
            target: VEHICLE.into(),
            x_mm: 5_000,
            y_mm: 0,
            tolerance_mm: 500,
        })
        .cite([seen.id().clone()]),
    );
    let mut out = vec![seen, order];
    let after: Vec<&Value> = states
        .iter()
        .skip_while(|s| s["errors"].as_array().is_none_or(Vec::is_empty))
        .collect();
    assert!(!after.is_empty(), "the capture holds the refusing states");
    for (i, s) in after.iter().enumerate() {
        out.push(state(1_100 + 200 * i as u64, (*s).clone(), &mut keys));
    }
    let mut fast = (*after.last().unwrap()).clone();
    fast["velocity"]["vx"] = 2.0.into();
    fast["driving"] = true.into();
    out.push(state(5_000, fast, &mut keys));
    out
}

#[test]
fn a_refused_order_is_unrealised_with_the_refusal_named_and_cited() {
    let file = Predicates::from_json(FILE).unwrap();
    for refusing in [true, false] {
        let msgs = stream(refusing);
        let all: Vec<&Verified<SignedEnvelope>> = msgs.iter().collect();
        let d = derive(&all, &file);
        assert_eq!(d.declarations.len(), 1, "refusing {refusing}: {d:?}");
        let decl = &d.declarations[0];
        assert!(decl.anchors.is_empty(), "a refused order is no anchor");
        let order_id = audita_verdict::id_string(msgs[1].id());
        assert_eq!(decl.unrealised, vec![order_id.clone()]);
        let fact = decl
            .facts
            .iter()
            .find(|f| f.fact == FactKind::Unrealised)
            .unwrap();
        let first_refusal = audita_verdict::id_string(msgs[2].id());
        if refusing {
            assert!(
                fact.detail.contains("refused it (noRouteError)"),
                "{}",
                fact.detail
            );
            assert_eq!(fact.evidence, vec![order_id, first_refusal]);
        } else {
            assert!(!fact.detail.contains("refused"), "{}", fact.detail);
            assert_eq!(fact.evidence, vec![order_id]);
        }
        // Derived again from what `reads` keeps, and the check accepts it there.
        let read = reads(
            msgs.iter().map(|m| (m.id(), m.envelope())),
            decl,
            Some(&file),
        );
        let kept: Vec<&Verified<SignedEnvelope>> =
            msgs.iter().filter(|m| read.contains(m.id())).collect();
        let again = derive(&kept, &file);
        assert_eq!(again.declarations.first(), Some(decl));
        assert_eq!(&check(decl, &file, &again).unwrap(), decl);
    }
}
