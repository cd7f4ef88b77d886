//! The signed record of a world run: clean, reproducible, and every attack detected.

use audita_evidence::verify_record;
use audita_facility::record::{attack, sign_record, Attack};
use audita_facility::scenario::{generate, Family};

#[test]
fn clean_record_certifies_and_is_bitwise_reproducible() {
    for family in Family::ALL {
        let sc = generate(family, 4);
        let a = sign_record(&sc).unwrap();
        let b = sign_record(&sc).unwrap();
        assert_eq!(
            a.record,
            b.record,
            "{}: same seed, same bytes",
            family.name()
        );
        let part = verify_record(&a.record, &a.keys);
        assert!(
            part.is_clean(),
            "{}: {:?} {:?} {:?}",
            family.name(),
            part.suspect,
            part.missing,
            part.receipt_problems
        );
        assert_eq!(part.certified.len(), a.envelopes.len());
    }
}

#[test]
fn every_attack_is_detected_and_forgery_changes_no_certified_item() {
    for family in Family::ALL {
        for pick in 0..3u64 {
            let sc = generate(family, pick);
            let sr = sign_record(&sc).unwrap();
            let clean = verify_record(&sr.record, &sr.keys);
            for which in Attack::ALL {
                let rep = attack(&sr, which, pick);
                let part = verify_record(&rep.record, &sr.keys);
                match which {
                    Attack::Forge => {
                        assert!(!part.suspect.is_empty(), "forge undetected");
                        assert_eq!(
                            part.certified.keys().collect::<Vec<_>>(),
                            clean.certified.keys().collect::<Vec<_>>()
                        );
                    }
                    Attack::Drop => {
                        let id = rep.dropped.clone().expect("a command was dropped");
                        assert!(part.missing.iter().any(|m| m.id == id), "drop undetected");
                    }
                    Attack::Reorder => assert!(
                        part.epochs.iter().any(|e| !e.intact()),
                        "reorder undetected"
                    ),
                    Attack::Equivocate => {
                        assert!(!part.equivocations.is_empty(), "equivocation undetected")
                    }
                }
            }
        }
    }
}
