//! A stage reopened in its own process (its supervisor, after a broker restart, a
//! partition or a pause) rebuilds its state from the beginning of its topics: its
//! join commits the positions it read (for a member rejoining its group), so a
//! reopen that joined the same group resumed there with empty state, and the
//! detectors declared without the commands read before it (issue 58: an anchor
//! "dropped", an abstention where the fault-free run judged).

use audita_bus::kafka::KafkaBus;
use audita_bus::testing::{unique_name, KafkaBroker};
use audita_bus::Bus;
use audita_join::Input;
use audita_load_tests::fleet::{self, DEMO_MIX};
use audita_pipeline::Deployment;
use audita_topics::names as topics;
use std::time::{Duration, Instant};

/// Reads `input` until it delivered `n` records of the adverse topic (or `within`
/// passed); then keeps polling for `linger`, past the join's commit interval.
fn records(
    input: &mut audita_join::SealedInput,
    n: usize,
    within: Duration,
    linger: Duration,
) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let deadline = Instant::now() + within;
    while got.len() < n && Instant::now() < deadline {
        if let Some(Input::Record(d)) = input.poll(Duration::from_millis(100)).unwrap() {
            got.push(d.key);
        }
    }
    let until = Instant::now() + linger;
    while Instant::now() < until {
        if let Some(Input::Record(d)) = input.poll(Duration::from_millis(100)).unwrap() {
            got.push(d.key);
        }
    }
    got
}

#[test]
fn a_stage_reopened_in_its_process_reads_its_topics_from_the_beginning_again() {
    let broker = KafkaBroker::start().unwrap_or_else(|e| panic!("{e}"));
    let fleet = fleet::build(&DEMO_MIX, 2, 1);
    let prefix = format!("{}.", unique_name("reopen"));
    let d = Deployment::ephemeral(
        fleet.keys.clone(),
        fleet.duties().expect("duties"),
        &prefix,
        &["keeper.test/k1"],
    )
    .expect("deployment");
    let bus = Bus::Kafka(KafkaBus::new(broker.bootstrap()).unwrap());
    d.ensure_topics(&bus).unwrap();
    let mut p = bus.producer().unwrap();
    let sent: Vec<Vec<u8>> = (0..20).map(|i| format!("decl-{i}").into_bytes()).collect();
    for k in &sent {
        p.send(&d.topic(topics::ADVERSE), k, b"{}").unwrap();
    }
    p.flush().unwrap();

    let mut first = d.sealed_input(&bus, "slicer", &[topics::ADVERSE]).unwrap();
    // Past the join's commit interval, so its positions are committed.
    let linger = audita_join::input::KEEP_POSITIONS_EVERY * 3;
    let read = records(&mut first, sent.len(), Duration::from_secs(60), linger);
    assert_eq!(
        read, sent,
        "the first start read every record once, in order"
    );
    drop(first);

    let mut again = d.sealed_input(&bus, "slicer", &[topics::ADVERSE]).unwrap();
    let reread = records(&mut again, sent.len(), Duration::from_secs(60), linger);
    assert_eq!(
        reread, sent,
        "a reopened stage resumed where its previous start stopped, not at the beginning"
    );
}
