//! Property tests of the verdict guarantees on random signed, sealed records: forgery
//! invariance (bitwise), deletion widens and names, compliant principals never culpable
//! under any edit, no silent exoneration, dilution invariance, determinism.

use crate::common;

use audita_evidence::{derive_signing_key, Envelope, MessageId, Payload, PrincipalId, Record};
use audita_verdict::{FindingStatus, Flag, Standard, Verdict};
use common::*;
use proptest::prelude::*;

const AUTHORS: [&str; 4] = ["p0", "p1", "p2", "p3"];

#[derive(Debug, Clone)]
struct Msg {
    author: usize,
    policy: usize,
    fast: bool,
    cites: u16,
}

#[derive(Debug, Clone)]
struct World {
    msgs: Vec<Msg>,
    anchor_cites: u16,
    holders: u8,
    reasonable: bool,
}

fn world() -> impl Strategy<Value = World> {
    (
        prop::collection::vec((0..4usize, 0..3usize, any::<bool>(), any::<u16>()), 1..8),
        any::<u16>(),
        any::<u8>(),
        any::<bool>(),
    )
        .prop_map(|(m, anchor_cites, holders, reasonable)| World {
            msgs: m
                .into_iter()
                .map(|(author, policy, fast, cites)| Msg {
                    author,
                    policy,
                    fast,
                    cites,
                })
                .collect(),
            anchor_cites,
            holders,
            reasonable,
        })
}

struct Built {
    fleet: Fleet,
    ids: Vec<MessageId>,
    anchor: MessageId,
    duties: audita_verdict::DutyRegistry,
    adverse: audita_verdict::Adverse,
}

fn subset(mask: u16, n: usize) -> Vec<usize> {
    let v: Vec<usize> = (0..n).filter(|i| mask >> i & 1 == 1).collect();
    if v.is_empty() && n > 0 {
        vec![(mask as usize) % n]
    } else {
        v
    }
}

fn build(w: &World) -> Built {
    let mut f = Fleet::new();
    let order = f.order("operator", 0, "shift");
    let mut ids: Vec<MessageId> = Vec::new();
    for (i, m) in w.msgs.iter().enumerate() {
        let payload = if m.fast { fast("agv-1") } else { slow("agv-1") };
        let policy = ["origin", "relay-any", "relay-all"][m.policy];
        let cites: Vec<&MessageId> = if policy == "origin" || i == 0 {
            vec![&order]
        } else {
            subset(m.cites, i).into_iter().map(|j| &ids[j]).collect()
        };
        let policy = if i == 0 { "origin" } else { policy };
        let id = f.cmd(
            AUTHORS[m.author],
            "dispatcher",
            10 + i as u64,
            payload,
            &cites,
            policy,
            None,
        );
        ids.push(id);
    }
    let cites: Vec<&MessageId> = subset(w.anchor_cites, ids.len())
        .into_iter()
        .map(|j| &ids[j])
        .collect();
    let anchor = f.cmd(
        "controller",
        "agv-1",
        100,
        fast("agv-1"),
        &cites,
        "relay-any",
        None,
    );
    let holders: Vec<&str> = AUTHORS
        .iter()
        .enumerate()
        .filter(|(i, _)| w.holders >> i & 1 == 1)
        .map(|(_, a)| *a)
        .collect();
    let duties = envelope_registry(
        &holders,
        if w.reasonable {
            "reasonable_agent"
        } else {
            "specification"
        },
    );
    let adverse = adverse(&[&anchor], 1000, &[]);
    Built {
        fleet: f,
        ids,
        anchor,
        duties,
        adverse,
    }
}

fn judge_rec(b: &Built, rec: &Record, keys: &audita_evidence::KeyRegistry) -> Verdict {
    judge(rec, keys, &b.duties, &b.adverse)
}

fn breach_under(v: &Verdict, p: &str) -> bool {
    v.finding(p).is_some_and(|f| match v.standard {
        Standard::Specification => f.breach.specification,
        Standard::ReasonableAgent => f.breach.reasonable_agent,
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn verdict_is_deterministic_and_grounded(w in world()) {
        let b = build(&w);
        let (rec, keys) = b.fleet.seal(3);
        let v = judge_rec(&b, &rec, &keys);
        prop_assert_eq!(v.to_json(), judge_rec(&b, &rec, &keys).to_json());
        for (p, f) in &v.principals {
            // Culpable ⇔ breach ∧ ρ_lo > 0 ∧ causal claim.
            prop_assert_eq!(f.culpable, breach_under(&v, p) && f.rho_lo > 0.0);
            prop_assert!(f.rho_lo <= f.rho_hi);
            if f.flags.contains(&Flag::Exonerated) {
                prop_assert_eq!(f.rho_hi, 0.0);
            }
            if f.culpable {
                prop_assert!(!f.evidence.is_empty(), "culpable finding without evidence");
            }
        }
        // Clean record: point intervals.
        for f in v.principals.values() {
            prop_assert_eq!(f.rho_lo, f.rho_hi);
        }
    }

    #[test]
    fn forgery_changes_no_byte(w in world(), victim in any::<prop::sample::Index>(), n in 1..4usize) {
        let b = build(&w);
        let (rec, keys) = b.fleet.seal(3);
        let before = judge_rec(&b, &rec, &keys).to_json();
        let mut forged = rec.clone();
        for k in 0..n {
            let cited = &b.ids[victim.index(b.ids.len())];
            let author = AUTHORS[k % AUTHORS.len()];
            let e = Envelope::new(
                PrincipalId::new(author).unwrap(),
                PrincipalId::new("agv-1").unwrap(),
                50 + k as u64,
                fast("agv-1"),
            )
            .cite([cited.clone(), b.anchor.clone()]);
            let s = e.sign(&derive_signing_key(1234 + k as u64, "forger")).unwrap();
            forged.envelopes.push(s.as_bytes().to_vec());
            // A forged receipt too.
            let r = audita_evidence::Receipt::sign(s.id().clone(), PrincipalId::new("agv-1").unwrap(), 60, &derive_signing_key(5, "x"));
            forged.receipts.push(r.as_bytes().to_vec());
        }
        prop_assert_eq!(before, judge_rec(&b, &forged, &keys).to_json());
    }

    #[test]
    fn deletion_names_its_author_widens_and_never_makes_the_compliant_culpable(
        w in world(), pick in any::<prop::sample::Index>()
    ) {
        let b = build(&w);
        let (rec, keys) = b.fleet.seal(3);
        let clean = judge_rec(&b, &rec, &keys);
        let all: Vec<MessageId> = b.ids.iter().cloned().chain([b.anchor.clone()]).collect();
        let d = all[pick.index(all.len())].clone();
        let mut cut = rec.clone();
        let idx = b.fleet.msgs.iter().position(|(s, _)| s.id() == &d).unwrap();
        cut.envelopes.remove(idx);
        let v = judge_rec(&b, &cut, &keys);
        // The deletion is reported, author-attributed.
        let did = audita_verdict::id_string(&d);
        // The deletion is named wherever it can bear on the incident: its author
        // stays a principal of the verdict.
        if v.finding(d.author.as_str()).is_some() {
            prop_assert!(v.completions.items.iter().any(|i| i.id == did && i.author == d.author.as_str()));
        }
        for (p, c) in &clean.principals {
            // Only a principal none of whose remaining messages is in scope may leave
            // the verdict, and then it was on no production path (ρ_hi = 0, never
            // culpable): a path message is cited by the closure, so it stays in scope.
            if v.finding(p).is_none() {
                prop_assert!(c.rho_hi == 0.0 && !c.culpable, "{} lost its finding", p);
                prop_assert_eq!(p.as_str(), d.author.as_str());
            }
        }
        // The deleted message is named where its author is in scope.
        if clean.slice.messages.contains(&did) {
            prop_assert!(v.completions.items.iter().any(|i| i.id == did), "closure deletion not named");
        }
        for (p, f) in &v.principals {
            let Some(c) = clean.finding(p) else { continue };
            // A compliant principal is never culpable under the edit.
            if !breach_under(&clean, p) {
                prop_assert!(!f.culpable, "{} became culpable", p);
            }
            // Any lowering of ρ_lo names author-attributed items.
            if f.rho_lo < c.rho_lo {
                prop_assert!(!f.items.is_empty(), "{} lowered silently", p);
            }
            // No silent exoneration: a principal involved before is not `exonerated`
            // without named items.
            if c.rho_hi > 0.0 && f.status == FindingStatus::Exonerated {
                prop_assert!(false, "{} silently exonerated", p);
            }
            // Deletion only widens (SPEC §3): the completions enumerate the missing
            // item's possible productions, the original one among them, so the edited
            // interval contains the original one.
            prop_assert!(
                f.rho_lo <= c.rho_lo && c.rho_hi <= f.rho_hi,
                "{}: [{}, {}] does not contain the original [{}, {}]",
                p, f.rho_lo, f.rho_hi, c.rho_lo, c.rho_hi
            );
            // A moved end names the author-attributed missing items in the finding.
            if (f.rho_lo, f.rho_hi) != (c.rho_lo, c.rho_hi) {
                prop_assert!(!f.items.is_empty(), "{} widened without naming missing items", p);
            }
        }
    }

    #[test]
    fn two_deletions_only_widen(
        w in world(), p1 in any::<prop::sample::Index>(), p2 in any::<prop::sample::Index>()
    ) {
        let b = build(&w);
        let (rec, keys) = b.fleet.seal(3);
        let clean = judge_rec(&b, &rec, &keys);
        let all: Vec<MessageId> = b.ids.iter().cloned().chain([b.anchor.clone()]).collect();
        let (d1, d2) = (&all[p1.index(all.len())], &all[p2.index(all.len())]);
        let mut cut = rec.clone();
        cut.envelopes.retain(|e| {
            audita_evidence::SignedEnvelope::decode(e.clone())
                .map_or(true, |s| s.id() != d1 && s.id() != d2)
        });
        let part = audita_evidence::verify_record(&cut, &keys);
        let v = match audita_verdict::verdict(&cut, &part, &b.duties, &b.adverse) {
            Ok(v) => v,
            // Too many readings: a clear abstention, not a verdict to compare.
            Err(audita_verdict::VerdictError::TooManyCompletions { .. }) => return Ok(()),
            Err(e) => return Err(TestCaseError::fail(e.to_string())),
        };
        for (p, c) in &clean.principals {
            let Some(f) = v.finding(p) else {
                // Left the verdict with its only in-scope messages (see above).
                prop_assert!(c.rho_hi == 0.0 && !c.culpable, "{} lost its finding", p);
                continue;
            };
            prop_assert!(
                f.rho_lo <= c.rho_lo && c.rho_hi <= f.rho_hi,
                "{}: [{}, {}] does not contain the original [{}, {}]",
                p, f.rho_lo, f.rho_hi, c.rho_lo, c.rho_hi
            );
        }
    }

    #[test]
    fn dilution_by_unrelated_certified_traffic_changes_no_grade(w in world(), extra in 1..5usize) {
        let b = build(&w);
        let (rec, keys) = b.fleet.seal(3);
        let clean = judge_rec(&b, &rec, &keys);
        let mut f2 = b.fleet.clone();
        let o = f2.order("operator", 1, "other shift");
        for k in 0..extra {
            let m = f2.cmd("bystander", "dispatcher", 200 + k as u64, fast("agv-9"), &[&o], "origin", None);
            f2.cmd("dispatcher", "agv-9", 300 + k as u64, fast("agv-9"), &[&m], "relay-any", None);
        }
        let (rec2, keys2) = f2.seal(3);
        let v = judge_rec(&b, &rec2, &keys2);
        for (p, c) in &clean.principals {
            let f = v.finding(p).unwrap();
            prop_assert_eq!((f.rho_lo, f.rho_hi, f.culpable), (c.rho_lo, c.rho_hi, c.culpable));
        }
        // The bystander's traffic (another target, no duty, never delivered to the
        // incident's principals) is outside the incident's scope: no finding at all.
        prop_assert!(v.finding("bystander").is_none());
        prop_assert_eq!(v.principals.len(), clean.principals.len());
    }
}

#[test]
fn a_dropped_sole_link_withholds_exoneration_and_names_the_item() {
    // p0 -> p1 (relay) -> controller; drop p1's relay: p0's only path is lost.
    let mut f = Fleet::new();
    let o = f.order("operator", 0, "shift");
    let m0 = f.cmd("p0", "p1", 10, fast("agv-1"), &[&o], "origin", None);
    let m1 = f.cmd(
        "p1",
        "controller",
        20,
        fast("agv-1"),
        &[&m0],
        "relay-any",
        None,
    );
    let a = f.cmd(
        "controller",
        "agv-1",
        30,
        fast("agv-1"),
        &[&m1],
        "relay-any",
        None,
    );
    let (rec, keys) = f.seal(2);
    let duties = envelope_registry(&["p0"], "reasonable_agent");
    let adv = adverse(&[&a], 1000, &[]);
    let clean = judge(&rec, &keys, &duties, &adv);
    assert!(clean.finding("p0").unwrap().culpable);
    let mut cut = rec.clone();
    let idx = f.msgs.iter().position(|(s, _)| s.id() == &m1).unwrap();
    cut.envelopes.remove(idx);
    let v = judge(&cut, &keys, &duties, &adv);
    let p0 = v.finding("p0").unwrap();
    assert!(!p0.culpable);
    assert_ne!(p0.status, FindingStatus::Exonerated);
    assert_ne!(p0.status, FindingStatus::NegligentButInert);
    assert!(p0.items.iter().any(|i| i.author == "p1"));
    assert!(p0.flags.contains(&Flag::EvidenceMissing));
    assert!(!p0.flags.contains(&Flag::Exonerated));
    let _ = Payload::Halt { target: "x".into() };
}

#[test]
fn a_deleted_relay_is_read_with_its_possible_inputs_so_its_inputs_keep_their_grade() {
    // a (p0) and b (p1) feed m1 = relay-all(a, b) (p3); m2 (p2) is an independent
    // origin; the anchor relays either: Y = (a & b) | m2, so ρ(p0) = ρ(p1) = ½.
    // Deleting m1 used to read it as an exogenous input, cutting p0 and p1 off the
    // model ([0, 0], a moved interval); its possible productions include relay-all(a, b).
    let mut f = Fleet::new();
    let o = f.order("operator", 0, "shift");
    let a = f.cmd("p0", "p3", 10, fast("agv-1"), &[&o], "origin", None);
    let b = f.cmd("p1", "p3", 11, fast("agv-1"), &[&o], "origin", None);
    let m1 = f.cmd(
        "p3",
        "controller",
        12,
        fast("agv-1"),
        &[&a, &b],
        "relay-all",
        None,
    );
    let m2 = f.cmd("p2", "controller", 13, fast("agv-1"), &[&o], "origin", None);
    let anchor = f.cmd(
        "controller",
        "agv-1",
        30,
        fast("agv-1"),
        &[&m1, &m2],
        "relay-any",
        None,
    );
    let (rec, keys) = f.seal(2);
    let duties = envelope_registry(&[], "specification");
    let adv = adverse(&[&anchor], 1000, &[]);
    let clean = judge(&rec, &keys, &duties, &adv);
    for p in ["p0", "p1", "p2"] {
        assert_eq!(
            clean.finding(p).map(|f| (f.rho_lo, f.rho_hi)),
            Some((0.5, 0.5)),
            "{p}"
        );
    }
    let mut cut = rec.clone();
    let idx = f.msgs.iter().position(|(s, _)| s.id() == &m1).unwrap();
    cut.envelopes.remove(idx);
    let v = judge(&cut, &keys, &duties, &adv);
    let item = v
        .completions
        .items
        .iter()
        .find(|i| i.id == audita_verdict::id_string(&m1))
        .expect("the deletion is reported");
    assert!(item.enumerated);
    for p in ["p0", "p1", "p2", "p3", "controller"] {
        let (c, e) = (clean.finding(p).unwrap(), v.finding(p).unwrap());
        assert!(
            e.rho_lo <= c.rho_lo && c.rho_hi <= e.rho_hi,
            "{p}: [{}, {}] does not contain [{}, {}]",
            e.rho_lo,
            e.rho_hi,
            c.rho_lo,
            c.rho_hi
        );
    }
    // p0's only path ran through the deleted relay: involvement is no longer forced,
    // and the item is named.
    let p0 = v.finding("p0").unwrap();
    assert_eq!(p0.rho_lo, 0.0);
    assert!(p0.items.iter().any(|i| i.author == "p3"));
}

#[test]
fn a_chain_of_deletions_keeps_every_link_in_the_interval() {
    // a (p0) -> r1 (p1) -> r2 (p2) -> anchor; r1 and r2 deleted. r1's only citer is
    // the deleted r2, so r1 is attested by its seal alone; r2's possible inputs must
    // include it, or p1 could never be read as involved.
    let mut f = Fleet::new();
    let o = f.order("operator", 0, "shift");
    let a = f.cmd("p0", "p1", 10, fast("agv-1"), &[&o], "origin", None);
    let r1 = f.cmd("p1", "p2", 11, fast("agv-1"), &[&a], "relay-any", None);
    let r2 = f.cmd(
        "p2",
        "controller",
        12,
        fast("agv-1"),
        &[&r1],
        "relay-any",
        None,
    );
    let anchor = f.cmd(
        "controller",
        "agv-1",
        30,
        fast("agv-1"),
        &[&r2],
        "relay-any",
        None,
    );
    let (rec, keys) = f.seal(2);
    let duties = envelope_registry(&[], "specification");
    let adv = adverse(&[&anchor], 1000, &[]);
    let clean = judge(&rec, &keys, &duties, &adv);
    let mut cut = rec.clone();
    cut.envelopes.retain(|e| {
        audita_evidence::SignedEnvelope::decode(e.clone())
            .map_or(true, |s| s.id() != &r1 && s.id() != &r2)
    });
    assert_eq!(cut.envelopes.len(), rec.envelopes.len() - 2);
    let v = judge(&cut, &keys, &duties, &adv);
    for p in ["p0", "p1", "p2", "controller"] {
        let (c, e) = (clean.finding(p).unwrap(), v.finding(p).unwrap());
        assert_eq!((c.rho_lo, c.rho_hi), (1.0, 1.0), "{p}");
        assert!(
            e.rho_lo <= c.rho_lo && c.rho_hi <= e.rho_hi,
            "{p}: [{}, {}] does not contain [{}, {}]",
            e.rho_lo,
            e.rho_hi,
            c.rho_lo,
            c.rho_hi
        );
    }
}
