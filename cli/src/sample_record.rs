//! `audita sample-record DIR`: writes a small signed, sealed sample fleet record
//! (planner, dispatcher, supervisor, robot controllers, sensors; receipts; at
//! least two epochs; every checkpoint co-signed by three keepers; one shredded
//! payload) in the on-disk format that `audita verify` reads.

use std::path::PathBuf;

use audita_evidence::derive_signing_key;
use audita_evidence::sample::{sample_record, SAMPLE_KEEPERS, SAMPLE_ORIGIN};
use audita_pipeline::sealed_log::{Offline, SealedLog};

/// Arguments of `audita sample-record`.
#[derive(clap::Args, Debug)]
pub struct SampleRecordArgs {
    /// Output directory (created; must not hold a record).
    pub dir: PathBuf,
    /// Seed of the deterministic keys and content.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Approximate number of messages (at least 16).
    #[arg(long, default_value_t = 40)]
    pub messages: usize,
}

/// Runs the subcommand; returns the exit code.
pub fn run(args: &SampleRecordArgs) -> i32 {
    let sample = sample_record(args.seed, args.messages);
    // Sealed again through the sealer's own path, epoch by epoch as the sample cut
    // them: the sample's own headers and co-signed checkpoints, byte for byte.
    let keepers: Vec<(String, audita_evidence::SigningKey)> = SAMPLE_KEEPERS
        .iter()
        .map(|k| (k.to_string(), derive_signing_key(args.seed, k)))
        .collect();
    let result = (|| {
        let mut log = SealedLog::create(
            &args.dir,
            Offline {
                origin: SAMPLE_ORIGIN,
                log_key: derive_signing_key(args.seed, SAMPLE_ORIGIN),
                keys: &sample.keys,
                registry: None,
                keepers: &keepers,
            },
        )
        .map_err(|e| e.to_string())?;
        let mut start = 0usize;
        for e in &sample.epochs {
            let n = e.leaves.len();
            let receipts: Vec<&[u8]> = sample.receipts[start..start + n]
                .iter()
                .map(|r| r.as_bytes())
                .collect();
            // The keepers co-sign at the second they co-signed the sample at.
            let at = e
                .checkpoint
                .cosignatures(&sample.keys)
                .first()
                .map_or(e.header.closed_at / 1000, |c| c.timestamp);
            let closed = log
                .seal_at(
                    &sample.envelopes[start..start + n],
                    &receipts,
                    e.header.closed_at,
                    at,
                )
                .map_err(|e| e.to_string())?;
            if closed.epoch.header != e.header || closed.epoch.checkpoint != e.checkpoint {
                return Err(format!(
                    "epoch {} sealed to another header or checkpoint than the sample's",
                    e.header.number
                ));
            }
            start += n;
        }
        log.write_payloads(&sample.payloads)
            .map_err(|e| e.to_string())?;
        Ok::<(), String>(())
    })();
    match result {
        Ok(()) => {
            eprintln!(
                "audita sample-record: wrote {} messages, {} receipts, {} epochs to {}",
                sample.envelopes.len(),
                sample.receipts.len(),
                sample.epochs.len(),
                args.dir.display()
            );
            0
        }
        Err(e) => {
            eprintln!("audita sample-record: {e}");
            2
        }
    }
}
