//! `audita tail alerts|suspect|adverse|verdicts` and `audita topics create`: what an
//! operator reads off a running deployment's topics, and how its topics come to exist
//! before the first producer (a VDA 5050 sidecar, a client) writes.
//!
//! Design constraints:
//! - `tail` prints one JSON line per record, as the topic holds it (`audita.alerts`:
//!   `AlertRecord`; `audita.suspect`: `Quarantined`; `audita.adverse`: declarations;
//!   `audita.verdicts`: verdict records), with a throw-away consumer group, so it never
//!   moves a stage's offsets. `--from-beginning` reads the topic from its start,
//!   otherwise only what arrives after it subscribed. It stops after `--count`
//!   records or `--timeout-s` seconds without one; a record that is not JSON is
//!   printed as `{"undecodable": <bytes as hex>}`, never dropped.
//! - `topics create` creates every topic of the deployment with its partition count
//!   (existing ones are kept) and returns once the broker serves them: what every
//!   stage does at start, for a deployment whose producers start first.

use std::io::Write as _;
use std::time::{Duration, Instant};

use audita_pipeline::process::Connect;
use audita_topics::names as topics;
use clap::{Args, Subcommand, ValueEnum};

/// `audita tail`.
#[derive(Args, Debug)]
pub struct TailArgs {
    /// Which topic.
    #[arg(value_enum)]
    pub topic: TailTopic,
    /// The deployment and its broker.
    #[command(flatten)]
    pub connect: Connect,
    /// Read the topic from its start (default: only records that arrive from now).
    #[arg(long)]
    pub from_beginning: bool,
    /// Stop after this many records.
    #[arg(long)]
    pub count: Option<usize>,
    /// Stop after this many seconds without a record.
    #[arg(long, default_value_t = 30)]
    pub timeout_s: u64,
}

/// The topics `tail` reads.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum TailTopic {
    /// `audita.alerts`: the monitor's alerts, as a predicate holds.
    Alerts,
    /// `audita.suspect`: quarantined input, with the reason.
    Suspect,
    /// `audita.adverse`: adverse declarations.
    Adverse,
    /// `audita.verdicts`: verdict records and abstentions.
    Verdicts,
}

impl TailTopic {
    fn base(self) -> &'static str {
        match self {
            TailTopic::Alerts => topics::ALERTS,
            TailTopic::Suspect => topics::SUSPECT,
            TailTopic::Adverse => topics::ADVERSE,
            TailTopic::Verdicts => topics::VERDICTS,
        }
    }
}

/// `audita topics`.
#[derive(Args, Debug)]
pub struct TopicsArgs {
    #[command(subcommand)]
    pub command: TopicsCommand,
}

/// `audita topics create`.
#[derive(Subcommand, Debug)]
pub enum TopicsCommand {
    /// Create the deployment's topics (existing ones are kept) and wait until the
    /// broker serves them.
    Create {
        /// The deployment and its broker.
        #[command(flatten)]
        connect: Connect,
    },
}

/// Runs `audita topics`.
pub fn run_topics(args: &TopicsArgs) -> i32 {
    let TopicsCommand::Create { connect } = &args.command;
    match connect.open(false) {
        Ok((d, _, _)) => {
            println!("topics of {} created under prefix {:?}", d.origin, d.prefix);
            0
        }
        Err(e) => {
            eprintln!("audita topics create: {e}");
            2
        }
    }
}

/// Runs `audita tail`.
pub fn run(args: &TailArgs) -> i32 {
    match tail(args) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("audita tail: {e}");
            2
        }
    }
}

fn tail(args: &TailArgs) -> Result<(), String> {
    let (d, bus, _) = args.connect.open(false).map_err(|e| e.to_string())?;
    let topic = d.topic(args.topic.base());
    let group = format!(
        "{}tail-{}-{}",
        d.prefix,
        std::process::id(),
        audita_deploy::now_ms()
    );
    let mut c: Box<dyn audita_bus::Consumer> = match (&bus, args.from_beginning) {
        // Only what arrives from now: a group whose reset point is the end.
        (audita_bus::Bus::Kafka(k), false) => Box::new(
            k.consumer_from_end(&group, &[&topic])
                .map_err(|e| e.to_string())?,
        ),
        _ => bus.consumer(&group, &[&topic]).map_err(|e| e.to_string())?,
    };
    let mut out = std::io::stdout().lock();
    let mut seen = 0usize;
    let mut last = Instant::now();
    while args.count.is_none_or(|n| seen < n) {
        match c
            .poll(Duration::from_millis(200))
            .map_err(|e| e.to_string())?
        {
            Some(rec) => {
                last = Instant::now();
                seen += 1;
                let line = line(args.topic, &rec.payload);
                if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
                    return Ok(());
                }
            }
            None if last.elapsed() >= Duration::from_secs(args.timeout_s) => break,
            None => {}
        }
    }
    Ok(())
}

/// One record as the line `tail` prints: its JSON on one line (a quarantine record
/// with its reason and detail first and the rejected bytes last), or the hex of
/// bytes that are not JSON.
fn line(topic: TailTopic, payload: &[u8]) -> String {
    if let TailTopic::Suspect = topic {
        if let Ok(q) = serde_json::from_slice::<audita_topics::Quarantined>(payload) {
            if let Ok(text) = serde_json::to_string(&q) {
                return text;
            }
        }
    }
    match serde_json::from_slice::<serde_json::Value>(payload) {
        Ok(v) => v.to_string(),
        Err(_) => serde_json::json!({"undecodable": hex::encode(payload)}).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_suspect_line_gives_the_reason_before_the_bytes() {
        let q = audita_topics::Quarantined {
            reason: "signature".into(),
            detail: "bad signature of planner-1".into(),
            source_topic: "audita.commands".into(),
            partition: 2,
            offset: 7,
            bytes_hex: "00ff".repeat(40),
        };
        let text = line(TailTopic::Suspect, &serde_json::to_vec(&q).unwrap());
        let at = |k: &str| text.find(k).unwrap();
        assert!(
            at("\"reason\"") < at("\"detail\"") && at("\"detail\"") < at("\"bytes_hex\""),
            "{text}"
        );
        assert!(text.starts_with("{\"reason\":\"signature\""), "{text}");
        assert_eq!(
            line(TailTopic::Suspect, b"\x01\x02"),
            "{\"undecodable\":\"0102\"}"
        );
    }
}
