//! How long a producer flush of one batch takes on a broker (diagnostics).
//! `cargo run --release -p audita-bus --example flush_latency -- HOST:PORT`
use audita_bus::kafka::KafkaBus;
use audita_bus::{Bus, TopicSpec};
use std::time::Instant;

fn main() {
    let bootstrap = std::env::args().nth(1).expect("bootstrap");
    let kafka = KafkaBus::new(&bootstrap).expect("bus");
    let bus = Bus::Kafka(kafka);
    let topic = format!("flushlat{}", std::process::id());
    bus.ensure_topics(&[TopicSpec {
        name: topic.clone(),
        partitions: 4,
    }])
    .unwrap();
    let mut p = bus.producer().unwrap();
    for batch in [1usize, 16, 256, 1024] {
        let mut times = Vec::new();
        for round in 0..10 {
            let t = Instant::now();
            for i in 0..batch {
                p.send(&topic, format!("k{i}").as_bytes(), &[round as u8; 200])
                    .unwrap();
            }
            p.flush().unwrap();
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        times.sort_by(|a, b| a.partial_cmp(b).unwrap());
        println!(
            "batch {batch}: flush median {:.1} ms, max {:.1} ms",
            times[5], times[9]
        );
    }
}
