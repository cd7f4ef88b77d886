//! Abstentions the engine workers publish follow the verdict topic contract
//! (`topics/schema/verdict-record.schema.json`): an undecodable bundle and a bundle
//! whose declaration the verdict layer refuses are both abstentions with their reason,
//! the latter with its declaration.

use audita_bus::embedded::EmbeddedBus;
use audita_bus::{Bus, Delivery, TopicSpec};
use audita_evidence::{KeyRegistry, ProvenSlice};
use audita_topics::SliceBundle;
use audita_verdict::DutyRegistry;
use serde_json::Value;
use std::time::Duration;

fn publish(payload: Vec<u8>) -> Value {
    let bus = Bus::Embedded(EmbeddedBus::new(1));
    bus.ensure_topics(&[TopicSpec {
        name: "audita.verdicts".into(),
        partitions: 1,
    }])
    .unwrap();
    let mut out = bus.producer().unwrap();
    let d = Delivery {
        topic: "audita.slices".into(),
        partition: 0,
        offset: 0,
        key: b"inc-9".to_vec(),
        payload,
    };
    audita_engine_workers::handle(
        &d,
        &audita_engine_workers::Registries {
            keys: &KeyRegistry::default(),
            duties: &DutyRegistry::default(),
            quorum: 0,
            predicates: None,
        },
        "",
        out.as_mut(),
    )
    .unwrap();
    out.flush().unwrap();
    let mut c = bus.consumer("t", &["audita.verdicts"]).unwrap();
    let rec = c
        .poll(Duration::from_millis(500))
        .unwrap()
        .expect("a verdict record");
    serde_json::from_slice(&rec.payload).unwrap()
}

fn validate(record: &Value) {
    let schema: Value = serde_json::from_str(audita_topics::RECORD_JSON_SCHEMA).unwrap();
    let v = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = v.iter_errors(record).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{record}: {errors:?}");
}

#[test]
fn an_undecodable_bundle_is_a_schema_valid_abstention() {
    let r = publish(b"not a bundle".to_vec());
    validate(&r);
    assert_eq!(r["incident"], "inc-9");
    assert_eq!(r["abstained"], "slice bundle is malformed");
    assert!(r.get("verdict").is_none() && r.get("declaration").is_none());
}

#[test]
fn a_refused_declaration_is_a_schema_valid_abstention_carrying_it() {
    let decl = serde_json::json!({"incident": "inc-9", "outcome": "separation_below_0.5m",
                                  "t_star_ms": 1200, "delta": 1.5});
    let bundle = SliceBundle {
        declaration: serde_json::to_vec(&decl).unwrap(),
        evidence: ProvenSlice::default(),
    };
    let r = publish(bundle.encode());
    validate(&r);
    assert!(
        r["abstained"]
            .as_str()
            .unwrap()
            .contains("delta must lie in (0, 1]"),
        "{r}"
    );
    assert_eq!(r["declaration"], decl);
    assert_eq!(r["rows"], serde_json::json!([]));
}
