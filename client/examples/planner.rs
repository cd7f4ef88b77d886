//! A planner that signs an order it received and the command it derives from it,
//! citing the order, and publishes both through the durable spool.
//!
//! ```sh
//! audita principal add DEPLOYMENT planner --role planner      # writes keys/planner.key, registers it
//! cargo run -p audita-client --example planner -- 127.0.0.1:9092 DEPLOYMENT/keys/planner.key spool/planner
//! ```
//!
//! Without a key file argument of an existing file it generates a throw-away key
//! and prints its vkey (register it to have the pipeline certify its messages).

use audita_client::{
    unix_ms, BlockingPublisher, ClientError, Effect, Payload, Principal, PublisherConfig,
};

fn main() -> Result<(), ClientError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let bootstrap = args.first().map_or("127.0.0.1:9092", String::as_str);
    let key = args.get(1).map(String::as_str);
    let spool = args.get(2).map_or("spool/planner", String::as_str);
    let planner = match key.filter(|k| std::path::Path::new(k).exists()) {
        Some(k) => Principal::load("planner", k, std::path::Path::new("."))?,
        None => {
            let p = Principal::from_key("planner", audita_keys::generate())?;
            println!("throw-away key; register: {}", p.vkey());
            p
        }
    };
    // What the planner acted on: an order from outside the recorded system.
    let order = planner.sign(planner.message(
        "planner",
        unix_ms(),
        Payload::ExternalInput {
            source: "wms".into(),
            text: "order 7: crate 7 to dock 2".into(),
        },
    )?)?;
    // Its command cites the order and commits to where the robot ends up.
    let command = planner.sign(
        planner
            .message(
                "agv-7",
                unix_ms(),
                Payload::MoveTo {
                    target: "agv-7".into(),
                    x_mm: 12_500,
                    y_mm: -3_000,
                },
            )?
            .cite([order.id().clone()])
            .with_effect(Effect::AtPosition {
                target: "agv-7".into(),
                x_mm: 12_500,
                y_mm: -3_000,
                tolerance_mm: 50,
            }),
    )?;
    let mut config = PublisherConfig::new(bootstrap, spool);
    config.delivery_timeout = std::time::Duration::from_secs(5);
    let publisher = BlockingPublisher::open(config)?;
    for env in [&order, &command] {
        match publisher.publish(env) {
            Ok(d) => println!(
                "{} -> partition {} offset {}",
                env.id(),
                d.partition,
                d.offset
            ),
            Err(e) if e.is_spooled() => println!("{} spooled: {e}", env.id()),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
