//! Batched signature checks against the one-by-one strict checks: whatever mix of
//! good signatures, forged ones, unknown signers and wrong keys a batch holds, every
//! item gets exactly the result [`SignedEnvelope::check`] gives it alone (the bad
//! ones found by bisection, the good ones vouched for by a passing batch).

use audita_evidence::{
    check_envelopes_batch, derive_signing_key, Effect, Envelope, KeyRegistry, Payload, PrincipalId,
    ReplayPins, SignedEnvelope,
};
use proptest::prelude::*;

fn envelope(author: &str, t: u64) -> Envelope {
    Envelope {
        author: PrincipalId::new(author).unwrap(),
        destination: PrincipalId::new("robot").unwrap(),
        timestamp: t,
        payload: Payload::SensorReport {
            sensor: "pose".into(),
            reading: format!("x={t}"),
        },
        citations: Vec::new(),
        effect: Effect::None,
        pins: ReplayPins::default(),
    }
}

/// What goes wrong with one item of the batch.
#[derive(Clone, Copy, Debug)]
enum Fault {
    None,
    /// Signed by someone else's key under the author's name.
    Forged,
    /// An author the registry does not know.
    Stranger,
}

fn fault() -> impl Strategy<Value = Fault> {
    prop_oneof![
        20 => Just(Fault::None),
        1 => Just(Fault::Forged),
        1 => Just(Fault::Stranger),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn batched_checks_equal_strict_checks_item_by_item(
        faults in prop::collection::vec(fault(), 1..300)
    ) {
        let mut keys = KeyRegistry::new();
        let authors = ["planner", "dispatcher", "supervisor"];
        for a in authors {
            keys.add_principal(PrincipalId::new(a).unwrap(), derive_signing_key(3, a).verifying_key());
        }
        let impostor = derive_signing_key(3, "impostor");
        let envs: Vec<SignedEnvelope> = faults
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let author = authors[i % authors.len()];
                match f {
                    Fault::None => envelope(author, i as u64).sign(&derive_signing_key(3, author)),
                    Fault::Forged => envelope(author, i as u64).sign(&impostor),
                    Fault::Stranger => envelope("stranger", i as u64).sign(&impostor),
                }
                .unwrap()
            })
            .collect();
        let refs: Vec<&SignedEnvelope> = envs.iter().collect();
        let batched = check_envelopes_batch(&refs, &keys);
        prop_assert_eq!(batched.len(), envs.len());
        for (i, (env, got)) in envs.iter().zip(&batched).enumerate() {
            prop_assert_eq!(got, &env.check(&keys), "item {} ({:?})", i, faults[i]);
        }
    }
}
