//! A burst of several thousand QoS 1 messages published at once, against a real
//! Mosquitto and a real Kafka broker: the sidecar takes every one, acknowledges
//! each after its evidence is spooled, and keeps its MQTT session throughout (no
//! keep-alive disconnect, no reconnect, one subscription).
//!
//! Regression (issue 14): under a burst the MQTT event-loop task stopped being
//! polled and the sidecar took ~400 of 5,000 messages, then hung: Mosquitto dropped
//! it for its keep-alive and it never reconnected.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use audita_bridge::check::DEFAULT_MAX_PAYLOAD;
use audita_bridge::map::VehicleNames;
use audita_bridge::testing::{self, Mosquitto, MqttPublisher};
use audita_bridge::topic::Interface;
use audita_bridge::{BridgeConfig, Counters, Role};
use audita_bus::kafka::KafkaBus;
use audita_bus::testing::{unique_name, KafkaBroker};
use audita_bus::TopicSpec;
use audita_client::Principal;
use audita_evidence::{KeyRegistry, PrincipalId};
use audita_topics::names as topics;

const TOPIC: &str = "uagv/v2/acme/7/state";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_thousands_of_qos1_messages_is_taken_whole_and_the_session_kept() {
    const N: u64 = 6_000;
    let kafka = KafkaBroker::start().expect("a Kafka broker");
    let tmp = tempfile::tempdir().unwrap();
    let mq = Mosquitto::start(tmp.path()).expect("mosquitto");
    let prefix = unique_name("burst.") + ".";
    KafkaBus::new(kafka.bootstrap())
        .unwrap()
        .ensure_topics(
            &[topics::ENVELOPES, topics::RECEIPTS, topics::SUSPECT].map(|t| TopicSpec {
                name: format!("{prefix}{t}"),
                partitions: 1,
            }),
        )
        .unwrap();
    let config = BridgeConfig {
        mqtt_host: "127.0.0.1".into(),
        mqtt_port: mq.port(),
        client_id: unique_name("bridge-burst"),
        // Short, so a stalled event loop is dropped by the broker well within the
        // test (Mosquitto allows 1.5 × keep-alive of silence).
        keep_alive: Duration::from_secs(2),
        interface: Interface::parse("uagv/v2").unwrap(),
        max_payload: DEFAULT_MAX_PAYLOAD,
        role: Role::Vehicle {
            manufacturer: "acme".into(),
            serial: "7".into(),
        },
        principal: Principal::from_key("acme.7", audita_keys::generate()).unwrap(),
        master: PrincipalId::new("master").unwrap(),
        vehicles: VehicleNames::default(),
        bootstrap: kafka.bootstrap().into(),
        topic_prefix: prefix.clone(),
        kafka: Vec::new(),
        spool_dir: tmp.path().join("spool"),
        delivery_timeout: Duration::from_secs(10),
        registry: KeyRegistry::new(),
        cite_wait: Duration::from_millis(0),
        index_lookback: Duration::from_secs(1),
        index_cap: 1024,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let counters = Arc::new(Counters::default());
    let bridge = tokio::spawn(audita_bridge::run(config, stop.clone(), counters.clone()));
    let deadline = Instant::now() + Duration::from_secs(30);
    while counters.subscribed.load(Ordering::Relaxed) == 0 {
        assert!(Instant::now() < deadline, "the sidecar never subscribed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // The whole burst is queued at once; the broker holds what the sidecar has not
    // taken yet and pushes it as fast as the sidecar acknowledges.
    let vehicle = MqttPublisher::connect(mq.port(), &unique_name("vehicle"));
    for h in 0..N {
        let s = testing::state("2.1.0", "acme", "7", h, h as f64 * 0.01, 1.0, 0.5);
        vehicle.publish(TOPIC, s).await;
    }
    let t = Instant::now();
    let mut last = (0, Instant::now());
    while counters.acked.load(Ordering::Relaxed) < N {
        let taken = counters.received.load(Ordering::Relaxed);
        if taken != last.0 {
            last = (taken, Instant::now());
        }
        assert!(
            last.1.elapsed() < Duration::from_secs(10) && t.elapsed() < Duration::from_secs(120),
            "stalled: {} of {N} published, {:?}; mosquitto:\n{}",
            vehicle.acked(),
            counters.summary(),
            mq.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let took = t.elapsed();
    stop.store(true, Ordering::Relaxed);
    let summary = bridge.await.unwrap().unwrap();
    eprintln!("{N} messages taken and acknowledged in {took:?}: {summary:?}");
    assert_eq!(vehicle.acked(), N, "the broker took the whole burst");
    assert_eq!(
        (summary.received, summary.recorded, summary.acked),
        (N, N, N),
        "every message taken, recorded and acknowledged once: {summary:?}"
    );
    assert_eq!(summary.quarantined, 0, "{summary:?}");
    assert_eq!(
        (summary.mqtt_errors, summary.subscribed),
        (0, 1),
        "the session was kept: no connection error, no reconnect: {summary:?}; mosquitto:\n{}",
        mq.log_tail()
    );
}
