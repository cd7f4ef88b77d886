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
        let mut w = RecordWriter::create(&args.dir, &sample.keys).map_err(|e| e.to_string())?;
        // One envelope and one receipt segment per epoch, as the sealer stage writes them.
        let mut start = 0usize;
        for e in &sample.epochs {
            let n = e.leaves.len();
            w.write_signed_envelopes(&sample.envelopes[start..start + n])
                .map_err(|e| e.to_string())?;
            let receipts: Vec<&[u8]> = sample.receipts[start..start + n]
                .iter()
                .map(|r| r.as_bytes())
                .collect();
            w.write_receipts(&receipts).map_err(|e| e.to_string())?;
            w.write_epoch(e).map_err(|e| e.to_string())?;
            start += n;
        }
        w.write_payloads(&sample.payloads)
            .map_err(|e| e.to_string())?;
        // The log as a static tiled log (c2sp.org/tlog-tiles), as the sealer keeps it.
        audita_record::tiles::rebuild(&args.dir).map_err(|e| e.to_string())?;
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
