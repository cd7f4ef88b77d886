//! Every envelope, whatever its payload, effect, citations and pins, signs,
//! decodes back to the same value from the exact bytes, re-encodes to the same
//! body (the encoding is canonical), verifies, and changes id under any flip.

use audita_evidence::*;
use proptest::prelude::*;

fn name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9.-]{0,12}"
}

fn text() -> impl Strategy<Value = String> {
    ".{0,40}"
}

fn payload() -> impl Strategy<Value = Payload> {
    prop_oneof![
        (name(), any::<i64>(), any::<i64>()).prop_map(|(target, x_mm, y_mm)| Payload::MoveTo {
            target,
            x_mm,
            y_mm
        }),
        (name(), any::<u64>())
            .prop_map(|(target, mm_per_s)| Payload::SetSpeed { target, mm_per_s }),
        name().prop_map(|target| Payload::Halt { target }),
        (name(), text(), any::<i64>()).prop_map(|(target, name, value)| Payload::SetParam {
            target,
            name,
            value
        }),
        text().prop_map(|text| Payload::AgentText { text }),
        (text(), text()).prop_map(|(tool, output)| Payload::ToolOutput { tool, output }),
        (text(), text()).prop_map(|(sensor, reading)| Payload::SensorReport { sensor, reading }),
        (text(), text()).prop_map(|(source, text)| Payload::ExternalInput { source, text }),
        (0u8..4, any::<[u8; 32]>(), any::<u64>()).prop_map(|(k, digest, len)| Payload::Stored {
            kind: [
                StoredKind::AgentText,
                StoredKind::ToolOutput,
                StoredKind::SensorReport,
                StoredKind::ExternalInput
            ][k as usize],
            digest,
            len
        }),
    ]
}

fn effect() -> impl Strategy<Value = Effect> {
    prop_oneof![
        Just(Effect::None),
        (name(), any::<i64>(), any::<i64>(), any::<u64>()).prop_map(
            |(target, x_mm, y_mm, tolerance_mm)| Effect::AtPosition {
                target,
                x_mm,
                y_mm,
                tolerance_mm
            }
        ),
        (name(), any::<u64>()).prop_map(|(target, mm_per_s)| Effect::Speed { target, mm_per_s }),
        name().prop_map(|target| Effect::Halted { target }),
        (name(), text(), any::<i64>()).prop_map(|(target, name, value)| Effect::Param {
            target,
            name,
            value
        }),
        text().prop_map(Effect::Claim),
    ]
}

fn pins() -> impl Strategy<Value = ReplayPins> {
    (
        proptest::option::of(text()),
        proptest::option::of(any::<[u8; 32]>()),
        proptest::option::of(any::<u64>()),
        proptest::collection::vec((text(), text()), 0..3),
    )
        .prop_map(|(model_id, model_hash, seed, tools)| ReplayPins {
            model_id,
            model_hash,
            seed,
            tools: tools
                .into_iter()
                .map(|(name, version)| ToolPin { name, version })
                .collect(),
        })
}

fn citations() -> impl Strategy<Value = Vec<MessageId>> {
    proptest::collection::vec((name(), any::<[u8; 32]>()), 1..5).prop_map(|v| {
        v.into_iter()
            .map(|(a, digest)| MessageId {
                author: PrincipalId::new(a).unwrap(),
                digest,
            })
            .collect()
    })
}

proptest! {
    #[test]
    fn envelopes_roundtrip_canonically(
        author in name(), dest in name(), ts in any::<u64>(),
        payload in payload(), effect in effect(), pins in pins(), cites in citations(),
        flip in any::<usize>(),
    ) {
        let key = derive_signing_key(1, &author);
        let mut keys = KeyRegistry::new();
        keys.add_principal(PrincipalId::new(author.clone()).unwrap(), key.verifying_key());
        let env = Envelope::new(PrincipalId::new(author).unwrap(), PrincipalId::new(dest).unwrap(), ts, payload)
            .cite(cites)
            .with_effect(effect)
            .with_pins(pins);
        let signed = env.clone().sign(&key).unwrap();
        let decoded = SignedEnvelope::decode(signed.as_bytes().to_vec()).unwrap();
        prop_assert_eq!(&decoded, &signed);
        prop_assert_eq!(decoded.envelope(), &env);
        prop_assert_eq!(decoded.envelope().encode_body(), decoded.body().to_vec());
        prop_assert!(decoded.check(&keys).is_ok());
        let mut bytes = signed.as_bytes().to_vec();
        let i = flip % bytes.len();
        bytes[i] ^= 0x01;
        if let Ok(tampered) = SignedEnvelope::decode(bytes) {
            prop_assert_ne!(tampered.id(), signed.id());
            prop_assert!(tampered.check(&keys).is_err());
        }
    }
}

proptest! {
    /// Proof verification is total and fast for any claimed index and size
    /// (regression companion of `huge_claimed_tree_size_fails_fast`).
    #[test]
    fn proof_verification_is_total(
        index in any::<u64>(), size in any::<u64>(), old in any::<u64>(),
        path in proptest::collection::vec(any::<[u8; 32]>(), 0..70),
        leaf in any::<[u8; 32]>(), root in any::<[u8; 32]>(),
    ) {
        let _ = InclusionProof { index, size, path: path.clone() }.verify(&leaf, &root);
        let _ = ConsistencyProof { old_size: old, size, path }.verify(&leaf, &root);
    }
}
