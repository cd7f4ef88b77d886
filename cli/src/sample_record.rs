//! `audita sample-record DIR`: writes a small signed, sealed sample fleet record
//! (planner, dispatcher, supervisor, robot controllers, sensors; receipts; at
//! least two epochs; every checkpoint co-signed by three keepers; one shredded
//! payload) in the on-disk format that `audita verify` reads.

use std::path::PathBuf;

use audita_evidence::sample::sample_record;
use audita_record::RecordWriter;

/// Arguments of `audita sample-record`.
#[derive(clap::Args, Debug)]
pub struct SampleRecordArgs {
    /// Output directory (created; existing record files are overwritten).
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
    let result = (|| {
        let mut w = RecordWriter::create(&args.dir, &sample.keys)?;
        // One envelope and one receipt segment per epoch, as the sealer stage writes them.
        let mut start = 0usize;
        for e in &sample.epochs {
            let n = e.leaves.len();
            w.write_signed_envelopes(&sample.envelopes[start..start + n])?;
            let receipts: Vec<&[u8]> = sample.receipts[start..start + n]
                .iter()
                .map(|r| r.as_bytes())
                .collect();
            w.write_receipts(&receipts)?;
            w.write_epoch(e)?;
            start += n;
        }
        w.write_payloads(&sample.payloads)
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
