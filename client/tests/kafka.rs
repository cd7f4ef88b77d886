//! The client against a real Apache Kafka broker (`audita_bus::testing`):
//! - what registered principals sign and publish passes the ingest stage (its
//!   signature checks certify it onto `audita.accepted`), while a stranger's
//!   envelope and a tampered one are quarantined on `audita.suspect` with the reason;
//! - killing the broker mid-stream loses nothing: items published while it is down
//!   stay in the spool, across a restart of the publishing process, and are all
//!   delivered once the broker is back.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use audita_bus::kafka::KafkaBus;
use audita_bus::testing::{unique_name, KafkaBroker};
use audita_bus::TopicSpec;
use audita_client::{
    BlockingPublisher, ClientError, Effect, Payload, Principal, Publisher, PublisherConfig,
    SignedEnvelope,
};
use audita_evidence::{KeyRegistry, SigningKey};
use audita_topics::names as topics;

fn key() -> SigningKey {
    audita_keys::generate()
}

#[test]
fn registered_principals_pass_ingest_and_strangers_and_tampering_are_quarantined() {
    let broker = KafkaBroker::start().expect("a Kafka broker");
    let prefix = unique_name("client.") + ".";
    let bus = KafkaBus::new(broker.bootstrap()).unwrap();
    common::topics_of(&bus, &prefix);

    let planner = Principal::from_key("planner", key()).unwrap();
    let agv = Principal::from_key("agv-1", key()).unwrap();
    let stranger = Principal::from_key("stranger", key()).unwrap();
    let mut registry = KeyRegistry::new();
    for p in [&planner, &agv] {
        let (_, k) = audita_evidence::trust::parse_vkey(&p.vkey(), &[1]).unwrap();
        registry.add_principal(p.id().clone(), k);
    }

    let order = planner
        .sign(
            planner
                .message(
                    "planner",
                    1_000,
                    Payload::ExternalInput {
                        source: "wms".into(),
                        text: "crate 7 to dock 2".into(),
                    },
                )
                .unwrap(),
        )
        .unwrap();
    let mv = planner
        .sign(
            planner
                .message(
                    "agv-1",
                    1_010,
                    Payload::MoveTo {
                        target: "agv-1".into(),
                        x_mm: 4_000,
                        y_mm: 2_500,
                    },
                )
                .unwrap()
                .cite([order.id().clone()])
                .with_effect(Effect::AtPosition {
                    target: "agv-1".into(),
                    x_mm: 4_000,
                    y_mm: 2_500,
                    tolerance_mm: 50,
                }),
        )
        .unwrap();
    let receipt = agv.receipt(&mv, 1_012).unwrap();
    // The library refuses to sign for someone else.
    assert!(matches!(
        agv.receipt(&order, 1_013),
        Err(ClientError::NotOurs(_))
    ));
    assert!(matches!(
        agv.sign(
            planner
                .message(
                    "agv-1",
                    1,
                    Payload::Halt {
                        target: "agv-1".into()
                    }
                )
                .unwrap()
        ),
        Err(ClientError::NotOurs(_))
    ));
    let foreign = stranger
        .sign(
            stranger
                .message(
                    "agv-1",
                    1_020,
                    Payload::ExternalInput {
                        source: "x".into(),
                        text: "go".into(),
                    },
                )
                .unwrap(),
        )
        .unwrap();
    let mut bytes = mv.as_bytes().to_vec();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    let tampered = SignedEnvelope::decode(bytes).unwrap();

    let spool = tempfile::tempdir().unwrap();
    let mut config = PublisherConfig::new(broker.bootstrap(), spool.path());
    config.topic_prefix = prefix.clone();
    let publisher = BlockingPublisher::open(config).unwrap();
    for e in [&order, &mv, &foreign, &tampered] {
        publisher.publish(e).unwrap();
    }
    publisher.publish_receipt(&receipt).unwrap();
    assert_eq!(
        publisher.spooled(),
        0,
        "every delivered item left the spool"
    );

    // The ingest stage, over the same broker, with the deployment's registry.
    let (accepted, suspect) = common::ingest(&bus, &prefix, &registry, 2);
    let want: BTreeSet<Vec<u8>> = [order.as_bytes(), mv.as_bytes(), receipt.as_bytes()]
        .into_iter()
        .map(<[u8]>::to_vec)
        .collect();
    assert_eq!(
        accepted, want,
        "the registered principals' evidence is accepted"
    );
    assert_eq!(suspect.len(), 2, "{suspect:?}");
    for q in &suspect {
        assert_eq!(q.reason, "signature", "{q:?}");
        assert!(!q.detail.is_empty());
    }
    let quarantined: BTreeSet<String> = suspect.iter().map(|q| q.bytes_hex.clone()).collect();
    assert_eq!(
        quarantined,
        [foreign.as_bytes(), tampered.as_bytes()]
            .into_iter()
            .map(hex::encode)
            .collect()
    );
}

#[test]
fn killing_the_broker_mid_stream_loses_nothing() {
    let broker = KafkaBroker::start_private().expect("a private Kafka broker");
    let prefix = unique_name("spool.") + ".";
    let topic = format!("{prefix}{}", topics::ENVELOPES);
    let bus = KafkaBus::new(broker.bootstrap()).unwrap();
    bus.ensure_topics(&[TopicSpec {
        name: topic.clone(),
        partitions: 2,
    }])
    .unwrap();
    let sensor = Principal::from_key("lidar-1", key()).unwrap();
    let reports: Vec<SignedEnvelope> = (0..30u64)
        .map(|i| {
            sensor
                .sign(
                    sensor
                        .message(
                            "supervisor",
                            1_000 + i,
                            Payload::SensorReport {
                                sensor: "lidar-1".into(),
                                reading: format!("human@{},{}", 100 * i, 200),
                            },
                        )
                        .unwrap(),
                )
                .unwrap()
        })
        .collect();
    let spool = tempfile::tempdir().unwrap();
    let config = || {
        let mut c = PublisherConfig::new(broker.bootstrap(), spool.path());
        c.topic_prefix = prefix.clone();
        c.delivery_timeout = Duration::from_secs(3);
        c
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let (p, resent) = Publisher::open(config()).await.unwrap();
        assert_eq!(resent, Default::default());
        for r in &reports[..20] {
            p.publish(r).await.unwrap();
        }
        // The broker dies; the next ten are accepted into the spool and reported
        // undelivered, not lost.
        broker.stop().unwrap();
        let sends = reports[20..].iter().map(|r| p.publish(r));
        let results = futures::future::join_all(sends).await;
        for r in &results {
            assert!(matches!(r, Err(e) if e.is_spooled()), "{r:?}");
        }
        assert_eq!(p.spooled(), 10);
        // The publishing process goes away with them spooled.
    });
    assert_eq!(
        std::fs::read_dir(spool.path()).unwrap().count(),
        11,
        "ten items and the lock"
    );

    broker.restart().unwrap();
    runtime.block_on(async {
        let (p, resent) = Publisher::open(config()).await.unwrap();
        assert_eq!((resent.delivered, resent.spooled), (10, 0));
        assert_eq!(p.spooled(), 0);
    });
    let bus = KafkaBus::new(broker.bootstrap()).unwrap();
    let got: BTreeSet<Vec<u8>> = common::drain(&bus, &topic, 30, Duration::from_secs(60))
        .into_iter()
        .collect();
    let want: BTreeSet<Vec<u8>> = reports.iter().map(|r| r.as_bytes().to_vec()).collect();
    assert_eq!(
        got.len(),
        30,
        "every report reached the topic (duplicates aside)"
    );
    assert_eq!(got, want);
}
