//! The Kafka transport against a real Apache Kafka broker (never a mock): bytes
//! arrive identical, per-key order holds, and a restarted group member resumes from
//! its committed offset. Fails loudly when no broker can be started.

use audita_bus::kafka::KafkaBus;
use audita_bus::testing::{unique_name, KafkaBroker};
use audita_bus::{drain, Bus, TopicSpec};
use std::time::Duration;

fn broker() -> KafkaBroker {
    KafkaBroker::start().unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn records_round_trip_byte_identical_and_in_key_order() {
    let broker = broker();
    let bus = Bus::Kafka(KafkaBus::new(broker.bootstrap()).unwrap());
    let topic = unique_name("roundtrip");
    bus.ensure_topics(&[TopicSpec {
        name: topic.clone(),
        partitions: 3,
    }])
    .unwrap();
    let mut p = bus.producer().unwrap();
    let sent: Vec<(Vec<u8>, Vec<u8>)> = (0..300u32)
        .map(|i| {
            let key = format!("robot-{}", i % 7).into_bytes();
            // Every byte value appears, including NUL and 0xff.
            let payload: Vec<u8> = (0..(i % 97 + 1))
                .map(|j| (i.wrapping_mul(31) + j) as u8)
                .chain(i.to_be_bytes())
                .collect();
            (key, payload)
        })
        .collect();
    for (k, v) in &sent {
        p.send(&topic, k, v).unwrap();
    }
    p.flush().unwrap();
    let mut c = bus.consumer(&unique_name("g"), &[&topic]).unwrap();
    let got = drain(c.as_mut(), sent.len(), Duration::from_secs(60)).unwrap();
    assert_eq!(got.len(), sent.len(), "every record must arrive");
    for key in 0..7 {
        let k = format!("robot-{key}").into_bytes();
        let want: Vec<&Vec<u8>> = sent
            .iter()
            .filter(|(kk, _)| *kk == k)
            .map(|(_, v)| v)
            .collect();
        let have: Vec<&Vec<u8>> = got
            .iter()
            .filter(|d| d.key == k)
            .map(|d| &d.payload)
            .collect();
        assert_eq!(
            have,
            want,
            "records of {} differ or are out of order",
            String::from_utf8_lossy(&k)
        );
    }
}

#[test]
fn a_restarted_member_resumes_after_its_last_commit() {
    let broker = broker();
    let bus = Bus::Kafka(KafkaBus::new(broker.bootstrap()).unwrap());
    let topic = unique_name("resume");
    bus.ensure_topics(&[TopicSpec {
        name: topic.clone(),
        partitions: 1,
    }])
    .unwrap();
    let mut p = bus.producer().unwrap();
    for i in 0..20u8 {
        p.send(&topic, b"k", &[i]).unwrap();
    }
    p.flush().unwrap();
    let group = unique_name("g");
    {
        let mut c = bus.consumer(&group, &[&topic]).unwrap();
        let first = drain(c.as_mut(), 8, Duration::from_secs(60)).unwrap();
        assert_eq!(first.len(), 8);
        c.commit(&first[4]).unwrap(); // records 0..=4 done; 5..8 read but not committed
    }
    let mut c = bus.consumer(&group, &[&topic]).unwrap();
    let rest: Vec<u8> = drain(c.as_mut(), 15, Duration::from_secs(60))
        .unwrap()
        .iter()
        .map(|d| d.payload[0])
        .collect();
    assert_eq!(rest, (5..20).collect::<Vec<u8>>());
}

#[test]
fn a_malformed_bootstrap_is_a_permanent_one_line_error() {
    let err = KafkaBus::new("no-port-here").unwrap_err();
    assert!(!err.is_transient());
    assert!(err.to_string().contains("no-port-here") && !err.to_string().contains('\n'));
}

/// A broker SIGKILLed and restarted on its data under a consumer and a producer: the
/// consumer's polls wait (never an error: a stage would stop and rebuild its state)
/// and it then reads what the producer sent after the restart.
#[test]
fn a_consumer_waits_through_a_broker_killed_and_restarted() {
    let broker = KafkaBroker::start_private().unwrap_or_else(|e| panic!("{e}"));
    let bus = Bus::Kafka(KafkaBus::new(broker.bootstrap()).unwrap());
    let topic = unique_name("restart");
    bus.ensure_topics(&[TopicSpec {
        name: topic.clone(),
        partitions: 1,
    }])
    .unwrap();
    let mut p = bus.producer().unwrap();
    p.send(&topic, b"k", b"before").unwrap();
    p.flush().unwrap();
    let mut c = bus.consumer(&unique_name("g"), &[&topic]).unwrap();
    let first = drain(c.as_mut(), 1, Duration::from_secs(60)).unwrap();
    assert_eq!(first[0].payload, b"before");
    c.commit(&first[0]).unwrap();
    broker.kill().unwrap();
    let down = std::time::Instant::now();
    while down.elapsed() < Duration::from_secs(8) {
        match c.poll(Duration::from_millis(200)) {
            Ok(None) => {}
            Ok(Some(d)) => panic!("a record from a dead broker: {d:?}"),
            Err(e) => panic!("a poll failed while the broker was down: {e}"),
        }
    }
    broker.restart().unwrap();
    p.send(&topic, b"k", b"after").unwrap();
    p.flush().unwrap();
    let got = drain(c.as_mut(), 1, Duration::from_secs(90)).unwrap();
    assert_eq!(got.len(), 1, "the record sent after the restart arrives");
    assert_eq!(got[0].payload, b"after");
}
