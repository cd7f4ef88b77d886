//! The reasons a slice keeps a window message are the ones a slicer can test per
//! message (`audita_verdict::KeptInEveryScope`) plus the incident's scope (closure,
//! targets, principals): on the facility's signed records, intact and with a
//! message dropped, every message the slice keeps has one of them, is the window
//! parent of one that has, or lies in the region of possible inputs (which the
//! slicer reads over the whole window). If the slice ever keeps a message for a
//! new reason, the slicer's narrowed window (`audita_slicer::stage::Scoping`) would
//! miss it; this test fails first.

use audita_evidence::{verify_record, MessageId, Record};
use audita_facility::record::{adverse_json, attack, registry_json, sign_record, Attack};
use audita_facility::scenario::{generate, Family};
use audita_verdict::{Adverse, DutyRegistry, KeptInEveryScope, Slice};
use std::collections::BTreeSet;

fn check(
    record: &Record,
    keys: &audita_evidence::KeyRegistry,
    reg: &DutyRegistry,
    adv: &Adverse,
) -> usize {
    let part = verify_record(record, keys);
    let slice = Slice::build(record, &part, reg, adv);
    if slice.scope.unknown_anchor {
        return 0;
    }
    let always = KeptInEveryScope::new(reg);
    let reason = |id: &MessageId| -> bool {
        let Some(c) = part.certified.get(id) else {
            return false;
        };
        let env = c.envelope.envelope();
        slice.closure.contains(id)
            || env
                .payload
                .target()
                .is_some_and(|t| slice.scope.targets.contains(t))
            || slice.scope.principals.contains(env.author.as_str())
            || always.keeps(env)
    };
    let with_reason: BTreeSet<&MessageId> = slice.window.keys().filter(|id| reason(id)).collect();
    let parents: BTreeSet<&MessageId> = with_reason
        .iter()
        .flat_map(|id| slice.window[*id].cites.iter())
        .collect();
    for id in slice.window.keys() {
        assert!(
            with_reason.contains(id) || parents.contains(id) || slice.reach.contains(id),
            "{} is kept for a reason the slicer cannot test per message",
            audita_verdict::id_string(id)
        );
    }
    slice.window.len()
}

#[test]
fn every_kept_message_has_a_reason_the_slicer_tests() {
    let mut kept = 0;
    for family in Family::ALL {
        for seed in 0..6 {
            let sc = generate(family, seed);
            let sr = sign_record(&sc).unwrap();
            let Some(adv) = adverse_json(&sc, &sr).unwrap() else {
                continue;
            };
            let adv = Adverse::from_json(&adv).unwrap();
            let reg = DutyRegistry::from_json(&registry_json(&sc, "reasonable_agent")).unwrap();
            kept += check(&sr.record, &sr.keys, &reg, &adv);
            for pick in 0..3 {
                let cut = attack(&sr, Attack::Drop, pick);
                kept += check(&cut.record, &sr.keys, &reg, &adv);
            }
        }
    }
    assert!(kept > 100, "the slices kept {kept} messages in all");
}
