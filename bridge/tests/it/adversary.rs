//! What a dishonest master-control sidecar can do with a citation, and how the
//! record shows it: an order citing a vehicle state the vehicle never produced is
//! sealed like any other envelope (ingest checks form, signature and the citation
//! rule, not that a cited id exists), and the verifier reports the cited id as
//! **missing**, attributed to the vehicle, with the dishonest order as its only
//! citer — while the vehicle's own states, each carrying its VDA `headerId`, are all
//! certified with no gap where the "deleted" state could have been.

use audita_bridge::check::{Intake, DEFAULT_MAX_PAYLOAD};
use audita_bridge::map::{self, VehicleNames};
use audita_bridge::schema::Schemas;
use audita_bridge::testing;
use audita_bridge::topic::Interface;
use audita_evidence::{
    sha256, verify_record, KeyRegistry, MessageId, Payload, PrincipalId, Receipt, Record, Sealer,
    SignedEnvelope, SigningKey,
};

#[test]
fn a_citation_of_a_state_the_vehicle_never_sent_is_reported_missing_with_its_citer() {
    let intake = Intake {
        interface: Interface::parse("uagv/v2").unwrap(),
        schemas: Schemas::load().unwrap(),
        max_payload: DEFAULT_MAX_PAYLOAD,
    };
    let agv_key = SigningKey::from_bytes(&[7; 32]);
    let mc_key = SigningKey::from_bytes(&[9; 32]);
    let log_key = SigningKey::from_bytes(&[1; 32]);
    let agv = VehicleNames::default().principal("acme", "7").unwrap();
    let mc = PrincipalId::new("master-control").unwrap();
    let mut keys = KeyRegistry::new();
    keys.add_principal(agv.clone(), agv_key.verifying_key());
    keys.add_principal(mc.clone(), mc_key.verifying_key());
    keys.add_log("audita.test/bridge", log_key.verifying_key())
        .unwrap();

    let check = |topic: &str, text: &str| intake.check(topic, text.as_bytes()).unwrap();
    let states: Vec<SignedEnvelope> = (1..=3)
        .map(|h| {
            let m = check(
                "uagv/v2/acme/7/state",
                &testing::state("2.1.0", "acme", "7", h, 0.0, h as f64, 0.5),
            );
            map::vehicle_report(&m, &agv, &mc, m.timestamp_ms.unwrap())
                .sign(&agv_key)
                .unwrap()
        })
        .collect();
    let order_msg = check(
        "uagv/v2/acme/7/order",
        &testing::order("2.1.0", "acme", "7", 10, "o-1", &[]),
    );
    let honest = map::command(
        &order_msg,
        &mc,
        &agv,
        1_767_225_600_010,
        [states[2].id().clone()],
    )
    .sign(&mc_key)
    .unwrap();
    // The dishonest sidecar cites an id in the vehicle's name that no envelope has.
    let fabricated = MessageId {
        author: agv.clone(),
        digest: sha256(b"a state acme/7 never sent"),
    };
    let order_2 = check(
        "uagv/v2/acme/7/order",
        &testing::order("2.1.0", "acme", "7", 11, "o-2", &[]),
    );
    let dishonest = map::command(&order_2, &mc, &agv, 1_767_225_600_011, [fabricated.clone()])
        .sign(&mc_key)
        .unwrap();

    let mut sealer = Sealer::new("audita.test/bridge", log_key).unwrap();
    let mut record = Record::new();
    let all: Vec<&SignedEnvelope> = states.iter().chain([&honest, &dishonest]).collect();
    for e in &all {
        sealer.append_envelope(e);
        record.push_envelope(e);
        let dest = &e.envelope().destination;
        let key = if *dest == agv { &agv_key } else { &mc_key };
        record.push_receipt(&Receipt::sign(
            e.id().clone(),
            dest.clone(),
            e.envelope().timestamp + 1,
            key,
        ));
    }
    record.push_epoch(&sealer.close_epoch(1_767_225_700_000));

    let p = verify_record(&record, &keys);
    assert!(p.suspect.is_empty(), "{:?}", p.suspect);
    for e in &all {
        assert!(p.certified.contains_key(e.id()), "{} certified", e.id());
    }
    assert_eq!(p.missing.len(), 1, "{:?}", p.missing);
    let m = &p.missing[0];
    assert_eq!(m.id, fabricated);
    assert_eq!(m.id.author, agv, "attributed to the vehicle by its id…");
    assert_eq!(
        m.certified_citers,
        vec![dishonest.id().clone()],
        "…with the dishonest order as its only citer"
    );
    assert!(
        m.receipted_by.is_empty() && m.sealed_in.is_none(),
        "no one else attests it"
    );
    // The vehicle's sealed states carry consecutive headerIds: nothing was deleted.
    let mut headers: Vec<u64> = p
        .certified
        .keys()
        .filter(|id| id.author == agv)
        .map(|id| {
            let e = all.iter().find(|e| e.id() == id).unwrap();
            let Payload::SensorReport { reading, .. } = &e.envelope().payload else {
                panic!("a vehicle report")
            };
            let v: serde_json::Value = serde_json::from_str(reading).unwrap();
            v["headerId"].as_u64().unwrap()
        })
        .collect();
    headers.sort();
    assert_eq!(headers, vec![1, 2, 3]);
}
