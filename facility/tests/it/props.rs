//! Property tests over arbitrary seeds: generated incidents are well formed, their
//! planted truth equals the oracle's re-execution, and a seed fixes the record bytes.

use audita_facility::generator::{generate, Params};
use audita_facility::oracle::truth;
use audita_facility::record::sign_record;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn generator_truth_matches_reexecution(seed in any::<u64>(), width in 2usize..4, conj in 2usize..4, depth in 1usize..4) {
        let params = Params { max_width: width, max_conj: conj, max_depth: depth, ..Params::default() };
        let sc = generate(seed, &params);
        prop_assert!(sc.spec.validate().is_ok());
        let t = truth(&sc.spec).unwrap();
        prop_assert_eq!(t.adverse.is_some(), sc.planted.adverse);
        if sc.planted.adverse {
            prop_assert_eq!(t.causal, sc.planted.causal_over(&sc.principals()));
        }
        prop_assert_eq!(t.breach, sc.planted.breach);
    }

    #[test]
    fn same_seed_same_record_bytes(seed in any::<u64>()) {
        let params = Params::default();
        let a = sign_record(&generate(seed, &params)).unwrap();
        let b = sign_record(&generate(seed, &params)).unwrap();
        prop_assert_eq!(a.record, b.record);
    }
}
