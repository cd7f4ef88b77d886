//! The bridge against a real Mosquitto and a real Kafka broker:
//! - Mosquitto stopped and restarted mid-stream: every state the vehicle
//!   published is recorded, none twice (redeliveries sign to the same id), and the
//!   record holds exactly the envelopes the pure mapping gives for the payloads;
//! - Kafka stopped mid-stream: the sidecar keeps acknowledging MQTT messages
//!   because their evidence is durable in its spool, and all of it reaches Kafka
//!   once the broker is back.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use audita_bridge::check::{Intake, DEFAULT_MAX_PAYLOAD};
use audita_bridge::map::{self, VehicleNames};
use audita_bridge::schema::Schemas;
use audita_bridge::testing::{self, Mosquitto, MqttPublisher};
use audita_bridge::topic::Interface;
use audita_bridge::{BridgeConfig, Counters, Role};
use audita_bus::kafka::KafkaBus;
use audita_bus::testing::{unique_name, KafkaBroker};
use audita_bus::{Consumer as _, TopicSpec};
use audita_client::Principal;
use audita_evidence::{KeyRegistry, MessageId, PrincipalId, SignedEnvelope, SigningKey};
use audita_topics::names as topics;

const TOPIC: &str = "uagv/v2/acme/7/state";

fn topics_of(bus: &KafkaBus, prefix: &str) {
    bus.ensure_topics(
        &[topics::ENVELOPES, topics::RECEIPTS, topics::SUSPECT].map(|t| TopicSpec {
            name: format!("{prefix}{t}"),
            partitions: 1,
        }),
    )
    .unwrap();
}

fn vehicle_config(
    mqtt_port: u16,
    bootstrap: &str,
    prefix: &str,
    key: SigningKey,
    spool: &Path,
) -> BridgeConfig {
    BridgeConfig {
        mqtt_host: "127.0.0.1".into(),
        mqtt_port,
        client_id: unique_name("bridge-vehicle"),
        keep_alive: Duration::from_secs(5),
        interface: Interface::parse("uagv/v2").unwrap(),
        max_payload: DEFAULT_MAX_PAYLOAD,
        role: Role::Vehicle {
            manufacturer: "acme".into(),
            serial: "7".into(),
        },
        principal: Principal::from_key("acme.7", key).unwrap(),
        master: PrincipalId::new("master").unwrap(),
        vehicles: VehicleNames::default(),
        bootstrap: bootstrap.into(),
        topic_prefix: prefix.into(),
        kafka: Vec::new(),
        spool_dir: spool.into(),
        delivery_timeout: Duration::from_secs(5),
        registry: KeyRegistry::new(),
        cite_wait: Duration::from_millis(100),
        index_lookback: Duration::from_secs(60),
        index_cap: 1024,
    }
}

/// The envelope ids the mapping gives for state `h` signed with `key`.
fn expected(key: &SigningKey, states: &[String]) -> BTreeSet<MessageId> {
    let intake = Intake {
        interface: Interface::parse("uagv/v2").unwrap(),
        schemas: Schemas::load().unwrap(),
        max_payload: DEFAULT_MAX_PAYLOAD,
    };
    let agv = PrincipalId::new("acme.7").unwrap();
    let master = PrincipalId::new("master").unwrap();
    states
        .iter()
        .map(|s| {
            let m = intake.check(TOPIC, s.as_bytes()).unwrap();
            map::vehicle_report(&m, &agv, &master, m.timestamp_ms.unwrap())
                .sign(key)
                .unwrap()
                .id()
                .clone()
        })
        .collect()
}

/// Distinct envelope ids on the topic, read from the start until `want` distinct
/// ones arrived or `within` passed; also the number of records read.
fn recorded(
    bus: &KafkaBus,
    topic: &str,
    want: usize,
    within: Duration,
) -> (BTreeSet<MessageId>, usize) {
    let mut c = bus.consumer(&unique_name("drain"), &[topic]).unwrap();
    let mut ids = BTreeSet::new();
    let mut records = 0;
    let deadline = Instant::now() + within;
    while Instant::now() < deadline && ids.len() < want {
        if let Some(d) = c.poll(Duration::from_millis(200)).unwrap() {
            records += 1;
            ids.insert(SignedEnvelope::decode(d.payload).unwrap().id().clone());
        }
    }
    // Whatever else is already there (a duplicate beyond `want`).
    let quiet = Instant::now() + Duration::from_secs(2);
    while Instant::now() < quiet {
        if let Some(d) = c.poll(Duration::from_millis(200)).unwrap() {
            records += 1;
            ids.insert(SignedEnvelope::decode(d.payload).unwrap().id().clone());
        }
    }
    (ids, records)
}

async fn wait_subscribed(counters: &Counters) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while counters.subscribed.load(Ordering::Relaxed) == 0 {
        assert!(Instant::now() < deadline, "the sidecar never subscribed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mosquitto_restart_mid_stream_loses_no_state_and_records_none_twice() {
    let kafka = KafkaBroker::start().expect("a Kafka broker");
    let tmp = tempfile::tempdir().unwrap();
    let mut mq = Mosquitto::start(tmp.path()).expect("mosquitto");
    let prefix = unique_name("bridge.") + ".";
    let bus = KafkaBus::new(kafka.bootstrap()).unwrap();
    topics_of(&bus, &prefix);
    let key = audita_keys::generate();
    let config = vehicle_config(
        mq.port(),
        kafka.bootstrap(),
        &prefix,
        key.clone(),
        &tmp.path().join("spool"),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let counters = Arc::new(Counters::default());
    let bridge = tokio::spawn(audita_bridge::run(config, stop.clone(), counters.clone()));
    wait_subscribed(&counters).await;

    const N: u64 = 300;
    let states: Vec<String> = (0..N)
        .map(|h| testing::state("2.1.0", "acme", "7", h, h as f64 * 0.01, 1.0, 0.5))
        .collect();
    let vehicle = MqttPublisher::connect(mq.port(), &unique_name("vehicle"));
    for (h, s) in states.iter().enumerate() {
        vehicle.publish(TOPIC, s.clone()).await;
        if h as u64 == N / 2 {
            // Mid-stream: some states are with the broker, some with the sidecar
            // (spooled or not, acknowledged or not), some still with the vehicle.
            tokio::time::sleep(Duration::from_millis(30)).await;
            mq.stop().unwrap();
            tokio::time::sleep(Duration::from_millis(700)).await;
            mq.restart().unwrap();
        }
    }
    assert!(
        vehicle.wait_acked(N, Duration::from_secs(60)).await,
        "the broker acknowledged {} of {N} publishes",
        vehicle.acked()
    );
    let want = expected(&key, &states);
    let topic = format!("{prefix}{}", topics::ENVELOPES);
    let (ids, records) =
        tokio::task::block_in_place(|| recorded(&bus, &topic, N as usize, Duration::from_secs(90)));
    stop.store(true, Ordering::Relaxed);
    let summary = bridge.await.unwrap().unwrap();
    eprintln!("{summary:?}");
    assert_eq!(
        ids.len(),
        N as usize,
        "every state recorded ({records} records read; {summary:?}); mosquitto:\n{}",
        mq.log_tail()
    );
    assert_eq!(
        ids, want,
        "exactly the envelopes the mapping gives, nothing else"
    );
    assert!(
        summary.mqtt_errors > 0,
        "the sidecar saw the broker go away: {summary:?}"
    );
    assert_eq!(summary.quarantined, 0, "{summary:?}");
    assert!(summary.received >= N, "{summary:?}");
    assert_eq!(
        summary.received,
        summary.recorded + summary.peer,
        "{summary:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_kafka_down_the_spool_carries_the_evidence_and_mqtt_is_still_acknowledged() {
    let kafka = KafkaBroker::start_private().expect("a private Kafka broker");
    let tmp = tempfile::tempdir().unwrap();
    let mq = Mosquitto::start(tmp.path()).expect("mosquitto");
    let prefix = unique_name("bridge.") + ".";
    let bus = KafkaBus::new(kafka.bootstrap()).unwrap();
    topics_of(&bus, &prefix);
    let key = audita_keys::generate();
    let spool = tmp.path().join("spool");
    let mut config = vehicle_config(mq.port(), kafka.bootstrap(), &prefix, key.clone(), &spool);
    config.delivery_timeout = Duration::from_secs(3);
    let stop = Arc::new(AtomicBool::new(false));
    let counters = Arc::new(Counters::default());
    let bridge = tokio::spawn(audita_bridge::run(config, stop.clone(), counters.clone()));
    wait_subscribed(&counters).await;

    let states: Vec<String> = (0..40)
        .map(|h| testing::state("2.1.0", "acme", "7", h, 0.0, h as f64 * 0.1, 0.2))
        .collect();
    let vehicle = MqttPublisher::connect(mq.port(), &unique_name("vehicle"));
    for s in &states[..20] {
        vehicle.publish(TOPIC, s.clone()).await;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while counters.delivered.load(Ordering::Relaxed) < 20 {
        assert!(Instant::now() < deadline, "{:?}", counters.summary());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::task::block_in_place(|| kafka.stop()).unwrap();
    for s in &states[20..] {
        vehicle.publish(TOPIC, s.clone()).await;
    }
    // Acknowledged on MQTT although Kafka is down: the evidence is in the spool.
    let deadline = Instant::now() + Duration::from_secs(30);
    while counters.acked.load(Ordering::Relaxed) < 40 {
        assert!(Instant::now() < deadline, "{:?}", counters.summary());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let spooled = std::fs::read_dir(spool.join("evidence"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".item"))
        })
        .count();
    assert_eq!(
        spooled, 20,
        "the 20 states taken while Kafka was down wait in the spool"
    );
    // Down longer than the delivery timeout: the producer gives up on them, they
    // stay spooled, and the sidecar sends them again once the broker is back.
    let deadline = Instant::now() + Duration::from_secs(30);
    while counters.undelivered.load(Ordering::Relaxed) < 20 {
        assert!(Instant::now() < deadline, "{:?}", counters.summary());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::task::block_in_place(|| kafka.restart()).unwrap();
    let topic = format!("{prefix}{}", topics::ENVELOPES);
    let (ids, _) =
        tokio::task::block_in_place(|| recorded(&bus, &topic, 40, Duration::from_secs(120)));
    stop.store(true, Ordering::Relaxed);
    let summary = bridge.await.unwrap().unwrap();
    assert_eq!(ids, expected(&key, &states), "{summary:?}");
    assert!(summary.undelivered >= 20, "{summary:?}");
    assert_eq!(summary.acked, 40, "{summary:?}");
}
