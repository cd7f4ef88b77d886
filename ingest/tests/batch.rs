//! Batched signature checks decide exactly like one-by-one checks, delivery by
//! delivery, on honest input mixed with every kind of bad input.

use audita_bus::Delivery;
use audita_evidence::sample::sample_record;
use audita_ingest::{check, check_batch, Checked};
use audita_topics::names as topics;
use proptest::prelude::*;

fn delivery(topic: &str, offset: u64, payload: Vec<u8>) -> Delivery {
    Delivery {
        topic: topic.to_string(),
        partition: (offset % 3) as u32,
        offset,
        key: Vec::new(),
        payload,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn batch_equals_one_by_one(seed in 0u64..500, damage in proptest::collection::vec((any::<usize>(), 0u8..5), 0..6)) {
        let s = sample_record(seed, 30);
        let mut ds: Vec<Delivery> = Vec::new();
        for (i, (e, r)) in s.envelopes.iter().zip(&s.receipts).enumerate() {
            ds.push(delivery(topics::ENVELOPES, 2 * i as u64, e.as_bytes().to_vec()));
            ds.push(delivery(topics::RECEIPTS, 2 * i as u64 + 1, r.as_bytes().to_vec()));
        }
        for (at, how) in damage {
            let i = at % ds.len();
            let p = &mut ds[i].payload;
            match how {
                0 => { let j = p.len() - 1; p[j] ^= 1; }           // signature byte
                1 => { let j = (at / 7) % p.len(); p[j] ^= 0x40; }  // anywhere
                2 => p.truncate(p.len() / 2),                        // torn
                3 => ds[i].topic = "audita.elsewhere".into(),        // wrong topic
                _ => ds.push(delivery(topics::ENVELOPES, 999, b"garbage".to_vec())),
            }
        }
        let one: Vec<Checked> = ds.iter().map(|d| check(d, &s.keys)).collect();
        prop_assert_eq!(check_batch(&ds, &s.keys), one);
    }
}
