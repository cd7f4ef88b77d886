//! Signed envelopes through a real Apache Kafka broker (never a mock): published with
//! rdkafka, consumed back byte-identical with identical ids, all verify; and the ingest
//! stage forwards them unchanged while quarantining a forged one with its reason.

use audita_bus::kafka::KafkaBus;
use audita_bus::testing::{unique_name, KafkaBroker};
use audita_bus::{drain, Bus, TopicSpec};
use audita_evidence::sample::sample_record;
use audita_evidence::SignedEnvelope;
use audita_ingest::{Quarantined, Topics, FRAME_ENVELOPE};
use audita_topics::names as topics;
use std::collections::BTreeMap;
use std::time::Duration;

#[test]
fn signed_envelopes_arrive_byte_identical_with_identical_ids_and_verify() {
    let broker = KafkaBroker::start().unwrap_or_else(|e| panic!("{e}"));
    let bus = Bus::Kafka(KafkaBus::new(broker.bootstrap()).unwrap());
    let sample = sample_record(42, 200);
    let topic = unique_name("envelopes");
    bus.ensure_topics(&[TopicSpec {
        name: topic.clone(),
        partitions: 4,
    }])
    .unwrap();
    let mut p = bus.producer().unwrap();
    for e in &sample.envelopes {
        p.send(
            &topic,
            e.envelope().author.as_str().as_bytes(),
            e.as_bytes(),
        )
        .unwrap();
    }
    p.flush().unwrap();
    let mut c = bus.consumer(&unique_name("g"), &[&topic]).unwrap();
    let got = drain(c.as_mut(), sample.envelopes.len(), Duration::from_secs(60)).unwrap();
    assert_eq!(got.len(), sample.envelopes.len());
    let sent: BTreeMap<_, _> = sample
        .envelopes
        .iter()
        .map(|e| (e.id().clone(), e.as_bytes().to_vec()))
        .collect();
    for d in got {
        let env = SignedEnvelope::decode(d.payload.clone()).expect("decodes");
        assert_eq!(
            sent.get(env.id()),
            Some(&d.payload),
            "bytes or id changed in transit"
        );
        env.check(&sample.keys)
            .expect("verifies after the round trip");
    }
}

#[test]
fn ingest_over_kafka_forwards_valid_envelopes_unchanged_and_quarantines_a_forgery() {
    let broker = KafkaBroker::start().unwrap_or_else(|e| panic!("{e}"));
    let bus = Bus::Kafka(KafkaBus::new(broker.bootstrap()).unwrap());
    let names = Topics {
        prefix: format!("{}.", unique_name("ingest")),
    };
    let sample = sample_record(7, 40);
    let mut p = bus.producer().unwrap();
    let mut forged = sample.envelopes[3].as_bytes().to_vec();
    let last = forged.len() - 1;
    forged[last] ^= 1; // signature no longer matches
    for e in &sample.envelopes {
        p.send(&names.name(topics::ENVELOPES), b"k", e.as_bytes())
            .unwrap();
    }
    p.send(&names.name(topics::ENVELOPES), b"k", &forged)
        .unwrap();
    p.flush().unwrap();
    let mut input = bus
        .consumer(&unique_name("ingest"), &[&names.name(topics::ENVELOPES)])
        .unwrap();
    let mut out = bus.producer().unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let handled = audita_bus::pump(
        input.as_mut(),
        out.as_mut(),
        &stop,
        64,
        Some(Duration::from_secs(8)),
        |d, out| audita_ingest::handle(d, &sample.keys, &names, out).map(|_| ()),
    )
    .unwrap();
    assert_eq!(
        handled as usize,
        sample.envelopes.len() + 1,
        "every record handled, none dropped"
    );
    let mut acc = bus
        .consumer(&unique_name("g"), &[&names.name(topics::ACCEPTED)])
        .unwrap();
    let accepted = drain(
        acc.as_mut(),
        sample.envelopes.len(),
        Duration::from_secs(60),
    )
    .unwrap();
    assert_eq!(accepted.len(), sample.envelopes.len());
    for d in &accepted {
        assert_eq!(d.payload[0], FRAME_ENVELOPE);
        assert!(
            sample
                .envelopes
                .iter()
                .any(|e| e.as_bytes() == &d.payload[1..]),
            "forwarded bytes changed"
        );
    }
    let mut sus = bus
        .consumer(&unique_name("g"), &[&names.name(topics::SUSPECT)])
        .unwrap();
    let suspect = drain(sus.as_mut(), 1, Duration::from_secs(60)).unwrap();
    assert_eq!(suspect.len(), 1);
    let q: Quarantined = serde_json::from_slice(&suspect[0].payload).unwrap();
    assert_eq!(q.reason, "signature");
    assert_eq!(q.bytes_hex, hex::encode(&forged));
}

/// An envelope over [`audita_ingest::MAX_ENVELOPE_BYTES`] travels through a real broker
/// (whose record limit is far larger) and is quarantined as `too_large` before it is
/// decoded; the quarantine record keeps only the first
/// [`audita_topics::MAX_QUARANTINED_BYTES`] with the length and SHA-256 in
/// its detail, and the valid envelopes around it are forwarded: nothing accepted is
/// lost to a bulky neighbour.
#[test]
fn ingest_over_kafka_quarantines_an_oversized_envelope_and_keeps_its_neighbours() {
    let broker = KafkaBroker::start().unwrap_or_else(|e| panic!("{e}"));
    let bus = Bus::Kafka(KafkaBus::new(broker.bootstrap()).unwrap());
    let names = Topics {
        prefix: format!("{}.", unique_name("large")),
    };
    let sample = sample_record(11, 20);
    // A real envelope padded past the limit: its first bytes decode as the envelope
    // they were, so only the size check can stop it.
    let mut bulky = sample.envelopes[5].as_bytes().to_vec();
    bulky.resize(audita_ingest::MAX_ENVELOPE_BYTES + 4096, 0xab);
    let mut p = bus.producer().unwrap();
    let (head, tail) = sample.envelopes.split_at(10);
    for e in head {
        p.send(&names.name(topics::ENVELOPES), b"k", e.as_bytes())
            .unwrap();
    }
    p.send(&names.name(topics::ENVELOPES), b"k", &bulky)
        .unwrap();
    for e in tail {
        p.send(&names.name(topics::ENVELOPES), b"k", e.as_bytes())
            .unwrap();
    }
    p.flush().unwrap();
    let mut input = bus
        .consumer(&unique_name("ingest"), &[&names.name(topics::ENVELOPES)])
        .unwrap();
    let mut out = bus.producer().unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let handled = audita_bus::pump(
        input.as_mut(),
        out.as_mut(),
        &stop,
        64,
        Some(Duration::from_secs(8)),
        |d, out| audita_ingest::handle(d, &sample.keys, &names, out).map(|_| ()),
    )
    .unwrap();
    assert_eq!(handled as usize, sample.envelopes.len() + 1);
    let mut acc = bus
        .consumer(&unique_name("g"), &[&names.name(topics::ACCEPTED)])
        .unwrap();
    let accepted = drain(
        acc.as_mut(),
        sample.envelopes.len(),
        Duration::from_secs(60),
    )
    .unwrap();
    assert_eq!(
        accepted.len(),
        sample.envelopes.len(),
        "every valid envelope forwarded"
    );
    assert!(accepted.iter().all(|d| d.payload.len() <= 1 << 16));
    let mut sus = bus
        .consumer(&unique_name("g"), &[&names.name(topics::SUSPECT)])
        .unwrap();
    let suspect = drain(sus.as_mut(), 1, Duration::from_secs(60)).unwrap();
    assert_eq!(suspect.len(), 1);
    assert!(
        suspect[0].payload.len() < 200 << 10,
        "quarantine record stays small"
    );
    let q: Quarantined = serde_json::from_slice(&suspect[0].payload).unwrap();
    assert_eq!(q.reason, "too_large");
    let kept = audita_topics::MAX_QUARANTINED_BYTES;
    assert_eq!(q.bytes_hex, hex::encode(&bulky[..kept]));
    assert!(q.detail.contains(&bulky.len().to_string()), "{}", q.detail);
    let sha = hex::encode(audita_evidence::sha256(&bulky));
    assert!(
        q.detail.contains(&sha),
        "detail names the SHA-256: {}",
        q.detail
    );
    assert!(!q.detail.contains('\n'));
}
