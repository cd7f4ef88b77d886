//! `audita stage NAME --config DIR/audita.toml` and `audita feed`: one pipeline stage
//! as its own process over Apache Kafka ([`audita_pipeline::process`]), and the
//! simulated fleet publishing as a client of the deployment, signed with its
//! registered keys.

use audita_fleet::client;
use audita_pipeline::process::{Connect, StageArgs};
use clap::Args;

/// Arguments of `audita feed`.
#[derive(Args)]
pub struct FeedArgs {
    #[command(flatten)]
    pub connect: Connect,
    /// The simulated fleet (registered with `audita fleet register`).
    #[command(flatten)]
    pub fleet: crate::deployment::FleetShape,
    /// Messages per second (unset: as fast as the broker takes them).
    #[arg(long)]
    pub rate: Option<f64>,
}

pub fn run_stage(args: &StageArgs) -> i32 {
    match audita_pipeline::process::run(args) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("audita stage {:?}: {e}", args.name);
            2
        }
    }
}

pub fn run_feed(args: &FeedArgs) -> i32 {
    let result = (|| -> anyhow::Result<()> {
        let (d, bus, cfg) = args.connect.open(false)?;
        let fleet = client::fleet_of(&cfg, &args.fleet.shape())?;
        let mut p = bus.producer()?;
        fleet.publish(p.as_mut(), &d.prefix, args.rate, |_| {})?;
        Ok(())
    })();
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("audita feed: {e:#}");
            2
        }
    }
}
