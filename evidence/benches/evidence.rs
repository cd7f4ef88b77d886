//! Evidence-layer throughput and size benchmark.
//!
//! `cargo bench -p audita-evidence --bench evidence` first prints a summary table
//! (messages/s for sign, verify, seal and full-record verify, side by side with raw
//! `ed25519-dalek` single and batch verification measured in the same run, the
//! overhead ratio, bytes per signed message versus the research prototype's 393 B,
//! and Merkle proof sizes), then runs the criterion groups.

use std::hint::black_box;
use std::time::Instant;

use audita_evidence::dsse::{pae, ENVELOPE_TYPE};
use audita_evidence::merkle::leaf_hash;
use audita_evidence::sample::sample_record;
use audita_evidence::*;
use criterion::{BatchSize, Criterion, Throughput};
use ed25519_dalek::{Signature, Signer, Verifier};

const N: usize = 2_000;
const PROTOTYPE_BYTES: f64 = 393.0;

fn typical(env: &SignedEnvelope) -> bool {
    matches!(
        env.envelope().payload,
        Payload::MoveTo { .. }
            | Payload::SetSpeed { .. }
            | Payload::Halt { .. }
            | Payload::SetParam { .. }
    )
}

/// On-CPU time of this thread in nanoseconds (`CLOCK_THREAD_CPUTIME_ID`), so that
/// other processes sharing the machine do not inflate the numbers.
fn cpu_ns() -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// Runs every operation round-robin for `rounds` rounds (so background load hits
/// all of them alike) and returns the best wall time per item of each, in seconds.
fn interleaved(items: usize, rounds: usize, ops: &mut [&mut dyn FnMut()]) -> Vec<f64> {
    let mut best = vec![f64::INFINITY; ops.len()];
    for op in ops.iter_mut() {
        op();
    }
    for _ in 0..rounds {
        for (i, op) in ops.iter_mut().enumerate() {
            let (t, c) = (Instant::now(), cpu_ns());
            op();
            let secs = match (c, cpu_ns()) {
                (Some(a), Some(b)) => (b - a) as f64 * 1e-9,
                _ => t.elapsed().as_secs_f64(),
            };
            best[i] = best[i].min(secs / items as f64);
        }
    }
    best
}

struct Raw {
    msgs: Vec<Vec<u8>>,
    sigs: Vec<Signature>,
    keys: Vec<VerifyingKey>,
}

fn raw_inputs(envs: &[SignedEnvelope], keys: &KeyRegistry) -> Raw {
    let msgs: Vec<Vec<u8>> = envs.iter().map(|e| pae(ENVELOPE_TYPE, e.body())).collect();
    let sigs = envs
        .iter()
        .map(|e| Signature::from_bytes(&e.signature()))
        .collect();
    let keys = envs
        .iter()
        .map(|e| *keys.principal(e.envelope().author.as_str()).unwrap())
        .collect();
    Raw { msgs, sigs, keys }
}

fn summary() {
    let s = sample_record(1, N);
    let envs = &s.envelopes;
    let n = envs.len();
    let raw = raw_inputs(envs, &s.keys);
    let unsigned: Vec<(Envelope, SigningKey)> = envs
        .iter()
        .map(|e| {
            (
                e.envelope().clone(),
                derive_signing_key(1, e.envelope().author.as_str()),
            )
        })
        .collect();
    let bodies: Vec<Vec<u8>> = envs.iter().map(|e| e.body().to_vec()).collect();

    let mut op_sign = || {
        for (e, k) in &unsigned {
            black_box(e.clone().sign(k).unwrap());
        }
    };
    let mut op_raw_sign = || {
        for ((_, k), b) in unsigned.iter().zip(&bodies) {
            black_box(k.sign(b));
        }
    };
    let mut op_verify = || {
        for e in envs {
            let d = SignedEnvelope::decode(e.as_bytes().to_vec()).unwrap();
            d.check(&s.keys).unwrap();
        }
    };
    let mut op_raw_strict = || {
        for i in 0..n {
            raw.keys[i]
                .verify_strict(&raw.msgs[i], &raw.sigs[i])
                .unwrap();
        }
    };
    let mut op_raw_single = || {
        for i in 0..n {
            raw.keys[i].verify(&raw.msgs[i], &raw.sigs[i]).unwrap();
        }
    };
    let refs: Vec<&[u8]> = raw.msgs.iter().map(Vec::as_slice).collect();
    let mut op_raw_batch = || {
        ed25519_dalek::verify_batch(&refs, &raw.sigs, &raw.keys).unwrap();
    };
    let ids: Vec<MessageId> = envs.iter().map(|e| e.id().clone()).collect();
    let log_key = derive_signing_key(1, "bench-log");
    let mut op_seal = || {
        let mut sealer = Sealer::new("bench-log", log_key.clone()).unwrap();
        for (i, id) in ids.iter().enumerate() {
            sealer.append(id.clone());
            if (i + 1) % 1000 == 0 {
                black_box(sealer.close_epoch(i as u64));
            }
        }
        black_box(sealer.close_epoch(0));
    };
    let mut op_record = || {
        assert!(verify_record(&s.record, &s.keys).is_clean());
    };
    let batch_policy = Policy {
        batch_signatures: true,
        ..Policy::default()
    };
    let mut op_record_batch = || {
        assert!(verify_record_with(&s.record, &s.keys, &batch_policy, None).is_clean());
    };

    let t = interleaved(
        n,
        7,
        &mut [
            &mut op_sign,
            &mut op_raw_sign,
            &mut op_verify,
            &mut op_raw_strict,
            &mut op_raw_single,
            &mut op_raw_batch,
            &mut op_seal,
            &mut op_record,
            &mut op_record_batch,
        ],
    );
    let [t_sign, t_raw_sign, t_verify, t_raw_strict, t_raw_single, t_raw_batch, t_seal, t_record, t_record_batch] =
        [t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8]];

    // Wall time with all cores (shared machine: indicative only).
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threaded = Policy {
        threads: cores,
        ..Policy::default()
    };
    let wall_threaded = (0..5)
        .map(|_| {
            let t = Instant::now();
            assert!(verify_record_with(&s.record, &s.keys, &threaded, None).is_clean());
            t.elapsed().as_secs_f64() / n as f64
        })
        .fold(f64::INFINITY, f64::min);
    let wall_single = (0..5)
        .map(|_| {
            let t = Instant::now();
            assert!(verify_record(&s.record, &s.keys).is_clean());
            t.elapsed().as_secs_f64() / n as f64
        })
        .fold(f64::INFINITY, f64::min);

    let typical_sizes: Vec<usize> = envs
        .iter()
        .filter(|e| typical(e))
        .map(|e| e.as_bytes().len())
        .collect();
    let typical_avg = typical_sizes.iter().sum::<usize>() as f64 / typical_sizes.len() as f64;
    let all_avg = envs.iter().map(|e| e.as_bytes().len()).sum::<usize>() as f64 / n as f64;
    let receipt_avg =
        s.receipts.iter().map(|r| r.as_bytes().len()).sum::<usize>() as f64 / n as f64;
    let leaf_avg = ids.iter().map(|i| i.leaf_bytes().len()).sum::<usize>() as f64 / n as f64;
    let move_cmd = envs
        .iter()
        .find(|e| matches!(e.envelope().payload, Payload::MoveTo { .. }))
        .unwrap();

    let rate = |t: f64| 1.0 / t;
    println!(
        "\n## evidence layer summary ({n} messages, sample fleet record, 1 thread, {} time, best of 7 interleaved rounds)",
        if cpu_ns().is_some() { "on-CPU" } else { "wall" }
    );
    println!("| operation | messages/s | µs/message | vs raw ed25519 |");
    println!("|---|---:|---:|---:|");
    let row = |name: &str, t: f64, base: f64| {
        println!(
            "| {name} | {:.0} | {:.2} | {:.2}× |",
            rate(t),
            t * 1e6,
            t / base
        );
    };
    row(
        "raw ed25519-dalek sign (same bytes)",
        t_raw_sign,
        t_raw_sign,
    );
    row(
        "audita sign (validate + encode + PAE + sign + id)",
        t_sign,
        t_raw_sign,
    );
    row(
        "raw ed25519-dalek verify (single)",
        t_raw_single,
        t_raw_single,
    );
    row(
        "raw ed25519-dalek verify_strict (single)",
        t_raw_strict,
        t_raw_single,
    );
    row(
        "raw ed25519-dalek verify_batch (per message)",
        t_raw_batch,
        t_raw_single,
    );
    row(
        "audita verify (decode + id + PAE + verify_strict + rules)",
        t_verify,
        t_raw_single,
    );
    row(
        "audita seal (leaf hash + log root, epoch per 1000)",
        t_seal,
        t_raw_single,
    );
    row("audita full-record verify (strict)", t_record, t_raw_single);
    row(
        "audita full-record verify (batch signatures)",
        t_record_batch,
        t_raw_single,
    );
    println!(
        "full-record verify (strict), wall time: 1 thread {:.0} messages/s, {cores} threads {:.0} messages/s ({:.2}× speed-up)",
        1.0 / wall_single,
        1.0 / wall_threaded,
        wall_single / wall_threaded
    );
    println!(
        "overhead ratios: verify/raw single = {:.2}, verify/raw strict = {:.2}, full record (strict)/raw single = {:.2}, full record (batch)/raw batch = {:.2}",
        t_verify / t_raw_single,
        t_verify / t_raw_strict,
        t_record / t_raw_single,
        t_record_batch / t_raw_batch
    );
    println!(
        "bytes per signed message: typical fleet command {:.1} B (min {} max {}), all kinds {:.1} B, prototype 393 B → {:.2}× smaller; example move_to = {} B",
        typical_avg,
        typical_sizes.iter().min().unwrap(),
        typical_sizes.iter().max().unwrap(),
        all_avg,
        PROTOTYPE_BYTES / typical_avg,
        move_cmd.as_bytes().len()
    );
    println!(
        "per-message record overhead: receipt {:.1} B, sealed leaf {:.1} B, segment framing 2×4 B",
        receipt_avg, leaf_avg
    );
    for size in [1_000u64, 1_000_000, 1_000_000_000] {
        let depth = 64 - (size - 1).leading_zeros() as usize;
        let index = size - 1;
        let enc = InclusionProof {
            index,
            size,
            path: vec![[0; 32]; depth],
        }
        .encode()
        .len();
        println!("inclusion proof for a log of {size} leaves: {depth} hashes = {} B of hashes, {enc} B encoded", depth * 32);
    }
    let leaves: Vec<Hash> = ids.iter().map(|i| leaf_hash(&i.leaf_bytes())).collect();
    let p = InclusionProof::generate(&leaves, 1234).unwrap();
    let c = ConsistencyProof::generate(&leaves, 1000).unwrap();
    println!(
        "measured on this record ({} leaves): inclusion proof {} hashes / {} B encoded; consistency proof 1000→{}: {} hashes / {} B encoded\n",
        leaves.len(),
        p.path.len(),
        p.encode().len(),
        leaves.len(),
        c.path.len(),
        c.encode().len()
    );
}

fn benches(c: &mut Criterion) {
    let s = sample_record(1, 1_000);
    let envs = &s.envelopes;
    let raw = raw_inputs(envs, &s.keys);
    let mv = envs
        .iter()
        .find(|e| matches!(e.envelope().payload, Payload::MoveTo { .. }))
        .unwrap();
    let key = derive_signing_key(1, mv.envelope().author.as_str());

    let mut g = c.benchmark_group("evidence/message");
    g.throughput(Throughput::Elements(1));
    g.bench_function("audita_sign_move_to", |b| {
        b.iter_batched(
            || mv.envelope().clone(),
            |e| e.sign(&key).unwrap(),
            BatchSize::SmallInput,
        )
    });
    g.bench_function("raw_ed25519_sign", |b| {
        b.iter(|| key.sign(black_box(mv.body())))
    });
    g.bench_function("audita_verify_move_to", |b| {
        b.iter(|| {
            SignedEnvelope::decode(black_box(mv.as_bytes()).to_vec())
                .unwrap()
                .check(&s.keys)
                .unwrap()
        })
    });
    let vk = key.verifying_key();
    let msg = pae(ENVELOPE_TYPE, mv.body());
    let sig = Signature::from_bytes(&mv.signature());
    g.bench_function("raw_ed25519_verify", |b| {
        b.iter(|| vk.verify(black_box(&msg), &sig).unwrap())
    });
    g.bench_function("raw_ed25519_verify_strict", |b| {
        b.iter(|| vk.verify_strict(black_box(&msg), &sig).unwrap())
    });
    g.finish();

    let mut g = c.benchmark_group("evidence/1000_messages");
    g.throughput(Throughput::Elements(envs.len() as u64));
    g.sample_size(20);
    let refs: Vec<&[u8]> = raw.msgs.iter().map(Vec::as_slice).collect();
    g.bench_function("raw_ed25519_verify_batch", |b| {
        b.iter(|| ed25519_dalek::verify_batch(&refs, &raw.sigs, &raw.keys).unwrap())
    });
    let ids: Vec<MessageId> = envs.iter().map(|e| e.id().clone()).collect();
    let log_key = derive_signing_key(1, "bench-log");
    g.bench_function("audita_seal", |b| {
        b.iter(|| {
            let mut sealer = Sealer::new("bench-log", log_key.clone()).unwrap();
            for id in &ids {
                sealer.append(id.clone());
            }
            sealer.close_epoch(0)
        })
    });
    g.bench_function("audita_verify_record_strict", |b| {
        b.iter(|| verify_record(&s.record, &s.keys))
    });
    let batch = Policy {
        batch_signatures: true,
        ..Policy::default()
    };
    g.bench_function("audita_verify_record_batch", |b| {
        b.iter(|| verify_record_with(&s.record, &s.keys, &batch, None))
    });
    g.finish();
}

fn main() {
    summary();
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
}
