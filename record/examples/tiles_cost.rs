//! What keeping the tiled log costs the sealer per epoch, next to sealing and
//! writing the epoch itself (one run; BENCHMARKS.md "Tiled log cost per epoch").
//!
//! `cargo run --release -p audita-record --example tiles_cost`
//!
//! For epochs of 100, 1,000 and 10,000 leaves (40 epochs each, on a fresh record
//! directory on the same disk): the median time of `Sealer::close_epoch` (header and
//! checkpoint signatures) plus `RecordWriter::write_epoch` (epoch segment and
//! checkpoint, each written and fsync'd), against the median time of
//! `TileLog::append_epoch` (full tiles, partial tiles and `checkpoint`, each written
//! and fsync'd). Keeper cosignatures and the envelope segments are not included on
//! either side.

use std::time::{Duration, Instant};

use audita_evidence::{derive_signing_key, KeyRegistry, MessageId, PrincipalId, Sealer};
use audita_record::tiles::TileLog;
use audita_record::RecordWriter;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let origin = "bench.example/log";
    let key = derive_signing_key(1, origin);
    let mut keys = KeyRegistry::new();
    let _ = keys.add_log(origin, key.verifying_key());
    let author = PrincipalId::new("agv-1").expect("name");
    println!("| leaves per epoch | seal + write epoch (median) | append to tiles (median) | tiles / epoch |");
    println!("|---:|---:|---:|---:|");
    for per_epoch in [100usize, 1_000, 10_000] {
        let dir = tempfile::tempdir_in(".").expect("tempdir");
        let mut w = RecordWriter::create(dir.path(), &keys).expect("create");
        let (mut tiles, _) = TileLog::open(dir.path()).expect("open tiles");
        let mut sealer = Sealer::new(origin, key.clone()).expect("sealer");
        let (mut seal, mut tile) = (Vec::new(), Vec::new());
        let mut n = 0u64;
        for e in 0..40u64 {
            for _ in 0..per_epoch {
                sealer.append(MessageId {
                    author: author.clone(),
                    digest: audita_evidence::sha256(&n.to_be_bytes()),
                });
                n += 1;
            }
            let t = Instant::now();
            let epoch = sealer.close_epoch(e);
            w.write_epoch(&epoch).expect("write epoch");
            seal.push(t.elapsed());
            let leaves: Vec<Vec<u8>> = epoch.leaves.iter().map(MessageId::leaf_bytes).collect();
            let t = Instant::now();
            tiles
                .append_epoch(
                    epoch.header.start,
                    &leaves,
                    epoch.checkpoint.to_text().as_bytes(),
                )
                .expect("append tiles");
            tile.push(t.elapsed());
        }
        let (s, t) = (median(seal), median(tile));
        println!(
            "| {per_epoch} | {:.2} ms | {:.2} ms | {:.2} |",
            s.as_secs_f64() * 1e3,
            t.as_secs_f64() * 1e3,
            t.as_secs_f64() / s.as_secs_f64()
        );
    }
}
