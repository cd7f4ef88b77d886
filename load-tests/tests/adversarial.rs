//! The adversarial suite (issue 10): the verdict's guarantees against an outside
//! adversary who edits a realistic record — the demo fleet, sealed the way the
//! streaming sealer seals it, and every facility scenario family.
//!
//! Attacks, each on every incident:
//! - **deletion** of every message of the incident's cell (envelope alone, envelope
//!   with its receipt, receipt alone), and of pairs of the messages the verdict reads;
//! - **forged receipts**: a valid receipt of an in-scope principal naming a made-up
//!   id attributed to an in-scope principal, and to another cell's principal;
//! - **a sealed forgery**: a bad-signature envelope that got sealed.
//!
//! Invariants checked (SPEC §2–4):
//! - containment: every principal of the clean verdict keeps a finding whose
//!   interval contains its clean interval (deletion only widens);
//! - a lowered `ρ_lo` names author-attributed items; nobody compliant becomes
//!   culpable; nobody involved is silently exonerated;
//! - no principal is moved into a verdict unless an item of the edit is its own;
//! - verdicts of incidents the edit cannot reach stay bitwise identical, and a claim
//!   (receipt-only item) changes no grade anywhere and names its attester.
//!
//! The fleet is sealed as the streaming sealer seals it: ingest partitions by author,
//! and the sealer takes each partition's messages in time order but interleaves the
//! partitions, so a parent is often sealed after its child.

use audita_evidence::{
    derive_signing_key, verify_record, Envelope, KeyRegistry, MessageId, PrincipalId, Receipt,
    Record, SignedEnvelope,
};
use audita_load_tests::adversary::{check_edit, cut, ids_in};
use audita_load_tests::fleet::{build, Fleet, DEMO_MIX};
use audita_verdict::{id_string, verdict, Adverse, DutyRegistry, Verdict, VerdictError};
use std::collections::BTreeSet;

/// A sealed record with the declarations judged over it.
struct Case {
    name: String,
    record: Record,
    keys: KeyRegistry,
    duties: DutyRegistry,
    /// Incident name → (declaration, the cell's messages, in record order).
    incidents: Vec<(Adverse, Vec<MessageId>)>,
    /// Every envelope in record order.
    envelopes: Vec<SignedEnvelope>,
}

fn log_keys(mut keys: KeyRegistry, seed: u64) -> KeyRegistry {
    for k in audita_facility::record::KEEPERS {
        keys.add_keeper(k, derive_signing_key(seed, k).verifying_key())
            .expect("keeper name");
    }
    let origin = audita_facility::record::ORIGIN;
    keys.add_log(origin, derive_signing_key(seed, origin).verifying_key())
        .expect("log name");
    keys
}

/// The messages in the order a streaming sealer fed by `partitions` author-keyed
/// partitions takes them: each partition in time order, partitions taken in turn in
/// runs of `run` messages.
fn streamed(
    mut msgs: Vec<(SignedEnvelope, Receipt)>,
    partitions: usize,
    run: usize,
) -> Vec<(SignedEnvelope, Receipt)> {
    msgs.sort_by_key(|(e, _)| (e.envelope().timestamp, e.id().clone()));
    let mut parts: Vec<Vec<(SignedEnvelope, Receipt)>> = vec![Vec::new(); partitions];
    for m in msgs {
        let h =
            m.0.id()
                .author
                .as_str()
                .bytes()
                .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
        parts[(h % partitions as u64) as usize].push(m);
    }
    let total: usize = parts.iter().map(Vec::len).sum();
    let mut out = Vec::new();
    let mut pos = vec![0usize; partitions];
    while out.len() < total {
        for (p, part) in parts.iter().enumerate() {
            let end = (pos[p] + run).min(part.len());
            out.extend(part[pos[p]..end].iter().cloned());
            pos[p] = end;
        }
    }
    out
}

fn fleet_case(cells: usize, streamed_order: bool) -> Case {
    let fleet: Fleet = build(&DEMO_MIX, cells, 1);
    let msgs: Vec<(SignedEnvelope, Receipt)> = fleet
        .envelopes_in_time_order()
        .into_iter()
        .map(|(e, r)| (e.clone(), r.clone()))
        .collect();
    let msgs = if streamed_order {
        streamed(msgs, 4, 3)
    } else {
        msgs
    };
    let record = audita_facility::record::seal(1, &msgs).expect("seal");
    let incidents = fleet
        .cells
        .iter()
        .filter_map(|c| {
            let decl = c.adverse.clone()?;
            Some((
                Adverse::new(decl).expect("declaration"),
                c.envelopes.iter().map(|e| e.id().clone()).collect(),
            ))
        })
        .collect();
    Case {
        name: format!("fleet of {cells} cells"),
        record,
        keys: log_keys(fleet.keys.clone(), 1),
        duties: fleet.duties().expect("duties"),
        incidents,
        envelopes: msgs.into_iter().map(|(e, _)| e).collect(),
    }
}

fn family_case(family: audita_facility::scenario::Family, seed: u64) -> Option<Case> {
    use audita_facility::record::{adverse_json, registry_json, sign_record};
    let sc = audita_facility::scenario::generate(family, seed);
    let sr = sign_record(&sc).expect("sign");
    let decl = adverse_json(&sc, &sr).expect("declaration")?;
    let duties = DutyRegistry::from_json(&registry_json(&sc, "reasonable_agent")).expect("duties");
    let adverse = Adverse::from_json(&decl).expect("declaration");
    let ids = sr.envelopes.iter().map(|e| e.id().clone()).collect();
    Some(Case {
        name: format!("{} seed {seed}", sc.family),
        record: sr.record.clone(),
        keys: sr.keys.clone(),
        duties,
        incidents: vec![(adverse, ids)],
        envelopes: sr.envelopes.clone(),
    })
}

/// The verdict, or `None` for an exact abstention (too many readings).
fn judge(case: &Case, record: &Record, adverse: &Adverse) -> Option<Verdict> {
    judge_verified(case, record, &verify_record(record, &case.keys), adverse)
}

/// [`judge`] over a record already verified (`part`): one edited record is verified
/// once, however many incidents are judged over it.
fn judge_verified(
    case: &Case,
    record: &Record,
    part: &audita_evidence::Partition,
    adverse: &Adverse,
) -> Option<Verdict> {
    match verdict(record, part, &case.duties, adverse) {
        Ok(v) => Some(v),
        Err(VerdictError::TooManyCompletions { .. }) => None,
        Err(e) => panic!("{}: {}: {e}", case.name, adverse.decl.incident),
    }
}

struct Tally {
    edits: usize,
    abstained: usize,
    failures: Vec<String>,
}

impl Tally {
    fn new() -> Self {
        Tally {
            edits: 0,
            abstained: 0,
            failures: Vec::new(),
        }
    }
    fn assert_clean(&self, what: &str) {
        assert!(
            self.failures.is_empty(),
            "{what}: {} of {} edits broke an invariant ({} abstained):\n{}",
            self.failures.len(),
            self.edits,
            self.abstained,
            self.failures[..self.failures.len().min(40)].join("\n")
        );
        println!(
            "{what}: {} edits, {} abstained, all invariants held",
            self.edits, self.abstained
        );
    }
}

/// Single deletions of every message of each incident's cell, in three forms, with
/// the other incidents' verdicts checked bitwise.
fn single_deletions(case: &Case, tally: &mut Tally, others: bool) {
    let cleans: Vec<Verdict> = case
        .incidents
        .iter()
        .map(|(a, _)| judge(case, &case.record, a).expect("clean verdict"))
        .collect();
    let part = verify_record(&case.record, &case.keys);
    assert!(part.is_clean(), "{}: clean record", case.name);
    for (k, (adverse, cell)) in case.incidents.iter().enumerate() {
        for d in cell {
            for (envelope, receipt, form) in [
                (true, false, "envelope"),
                (true, true, "envelope+receipt"),
                (false, true, "receipt"),
            ] {
                let rec = cut(&case.record, std::slice::from_ref(d), envelope, receipt);
                let rec_part = verify_record(&rec, &case.keys);
                tally.edits += 1;
                let authors: BTreeSet<String> = [d.author.to_string()].into();
                let Some(v) = judge_verified(case, &rec, &rec_part, adverse) else {
                    tally.abstained += 1;
                    if std::env::var("AUDITA_SHOW_ABSTAIN").is_ok() {
                        println!(
                            "abstain: {} {}: delete {form} of {} ({})",
                            case.name,
                            adverse.decl.incident,
                            d.short(),
                            kind_of(case, d)
                        );
                    }
                    continue;
                };
                for b in check_edit(&cleans[k], &v, &authors) {
                    tally.failures.push(format!(
                        "{} {}: delete {form} of {} ({}): {b}",
                        case.name,
                        adverse.decl.incident,
                        d.short(),
                        kind_of(case, d)
                    ));
                }
                if others {
                    // Another incident's verdict is unchanged unless the deleted
                    // message is in its scope.
                    for (j, (other, _)) in case.incidents.iter().enumerate() {
                        if j == k || ids_in(&cleans[j]).contains(d) {
                            continue;
                        }
                        let w = judge_verified(case, &rec, &rec_part, other).map(|w| w.to_json());
                        if w.as_deref() != Some(cleans[j].to_json().as_str()) {
                            tally.failures.push(format!(
                                "{} {}: delete {form} of {} changed {}",
                                case.name,
                                adverse.decl.incident,
                                d.short(),
                                other.decl.incident
                            ));
                        }
                    }
                }
            }
        }
    }
}

fn kind_of(case: &Case, id: &MessageId) -> &'static str {
    case.envelopes
        .iter()
        .find(|e| e.id() == id)
        .map(|e| e.envelope().payload.kind())
        .unwrap_or("?")
}

/// Pairs of deletions among the messages each verdict reads.
fn pair_deletions(case: &Case, tally: &mut Tally) {
    for (adverse, cell) in &case.incidents {
        let clean = judge(case, &case.record, adverse).expect("clean verdict");
        let read: Vec<MessageId> = ids_in(&clean)
            .into_iter()
            .filter(|id| cell.contains(id))
            .collect();
        for (i, a) in read.iter().enumerate() {
            for b in &read[i + 1..] {
                let pair = [a.clone(), b.clone()];
                let rec = cut(&case.record, &pair, true, false);
                tally.edits += 1;
                let authors: BTreeSet<String> = pair.iter().map(|d| d.author.to_string()).collect();
                let Some(v) = judge(case, &rec, adverse) else {
                    tally.abstained += 1;
                    continue;
                };
                for bad in check_edit(&clean, &v, &authors) {
                    tally.failures.push(format!(
                        "{} {}: delete {} ({}) and {} ({}): {bad}",
                        case.name,
                        adverse.decl.incident,
                        a.short(),
                        kind_of(case, a),
                        b.short(),
                        kind_of(case, b)
                    ));
                }
            }
        }
    }
}

#[test]
fn deleting_any_message_of_a_streamed_fleet_only_widens_and_moves_no_other_verdict() {
    let case = fleet_case(8, true);
    let mut tally = Tally::new();
    single_deletions(&case, &mut tally, true);
    tally.assert_clean("single deletions, streamed fleet");
}

#[test]
fn deleting_any_message_of_a_time_ordered_fleet_only_widens() {
    let case = fleet_case(8, false);
    let mut tally = Tally::new();
    single_deletions(&case, &mut tally, false);
    tally.assert_clean("single deletions, time-ordered fleet");
}

#[test]
fn deleting_pairs_of_read_messages_only_widens() {
    let case = fleet_case(8, true);
    let mut tally = Tally::new();
    pair_deletions(&case, &mut tally);
    tally.assert_clean("pair deletions, streamed fleet");
}

#[test]
fn every_family_survives_single_and_pair_deletions() {
    let mut tally = Tally::new();
    for family in audita_facility::scenario::Family::ALL {
        for seed in 0..2 {
            let Some(case) = family_case(family, seed) else {
                continue;
            };
            single_deletions(&case, &mut tally, false);
            pair_deletions(&case, &mut tally);
        }
    }
    tally.assert_clean("deletions, every family");
}

/// A valid receipt signed by `signer` naming a made-up id of `author`.
fn forged_receipt(case: &Case, signer: &str, author: &str, seed: u64) -> (Receipt, MessageId) {
    let mut digest = [0u8; 32];
    digest[..8].copy_from_slice(&seed.to_be_bytes());
    digest[31] = 0xee;
    let id = MessageId {
        author: PrincipalId::new(author).expect("name"),
        digest,
    };
    let key = derive_signing_key(1, signer);
    assert_eq!(
        case.keys.principal(signer),
        Some(&key.verifying_key()),
        "the signer's registered key"
    );
    (
        Receipt::sign(id.clone(), PrincipalId::new(signer).expect("name"), 5, &key),
        id,
    )
}

#[test]
fn a_receipt_for_a_made_up_id_frames_nobody_and_names_its_signer() {
    let case = fleet_case(16, true);
    let cleans: Vec<String> = case
        .incidents
        .iter()
        .map(|(a, _)| judge(&case, &case.record, a).expect("clean").to_json())
        .collect();
    let mut failures = Vec::new();
    // Cell 4 (an omission cell)'s operator signs receipts naming a made-up message of
    // its own supervisor (in scope) and of cell 9's supervisor (out of scope).
    for (k, (author, in_cell)) in [("c4.supervisor", 4usize), ("c9.supervisor", 9usize)]
        .into_iter()
        .enumerate()
    {
        let (r, id) = forged_receipt(&case, "c4.operator", author, k as u64);
        let mut rec = case.record.clone();
        rec.receipts.push(r.as_bytes().to_vec());
        for (j, (adverse, _)) in case.incidents.iter().enumerate() {
            let v = judge(&case, &rec, adverse).expect("verdict");
            let same_grades = {
                let c: serde_json::Value = serde_json::from_str(&cleans[j]).expect("json");
                let e: serde_json::Value = serde_json::from_str(&v.to_json()).expect("json");
                c["principals"] == e["principals"]
            };
            if !same_grades {
                failures.push(format!(
                    "{}: a receipt moved a finding",
                    adverse.decl.incident
                ));
            }
            let named = v.completions.items.iter().find(|i| i.id == id_string(&id));
            let cell = matches!(cell_of(&adverse.decl.incident), Some(c) if c == 4 || c == in_cell);
            match named {
                Some(i) => {
                    if !cell {
                        failures.push(format!(
                            "{}: lists a claim about {author} from another cell",
                            adverse.decl.incident
                        ));
                    }
                    if i.attested_by != vec!["receipt by c4.operator".to_string()] || i.enumerated {
                        failures.push(format!(
                            "{}: claim not named as c4.operator's receipt: {:?}",
                            adverse.decl.incident, i
                        ));
                    }
                }
                None if !cell && v.to_json() != cleans[j] => failures.push(format!(
                    "{}: changed by a receipt about another cell",
                    adverse.decl.incident
                )),
                None => {}
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The verdict JSON without the record root (which any change of the log moves).
fn without_root(v: &Verdict) -> serde_json::Value {
    let mut j: serde_json::Value = serde_json::from_str(&v.to_json()).expect("json");
    j.as_object_mut().expect("object").remove("record_root");
    j
}

#[test]
fn a_sealed_bad_signature_message_changes_only_the_verdicts_of_its_scope() {
    let fleet: Fleet = build(&DEMO_MIX, 16, 1);
    let mut msgs: Vec<(SignedEnvelope, Receipt)> = fleet
        .envelopes_in_time_order()
        .into_iter()
        .map(|(e, r)| (e.clone(), r.clone()))
        .collect();
    let plain = audita_facility::record::seal(1, &msgs).unwrap();
    // A "c4.supervisor" halt (cell 4 is an omission cell: its supervisor never
    // halted) signed with a key that is not the registered one, sealed as if ingest
    // had let it through, with a valid receipt from its destination.
    let base = 4 * audita_load_tests::fleet::CELL_SLOT_MS;
    let context = fleet.cells[4].envelopes[0].id().clone();
    let forged = Envelope::new(
        PrincipalId::new("c4.supervisor").unwrap(),
        PrincipalId::new("c4.controller-agv-1").unwrap(),
        base + 50,
        audita_evidence::Payload::Halt {
            target: "c4.agv-1".into(),
        },
    )
    .cite([context])
    .sign(&derive_signing_key(77, "impostor"))
    .unwrap();
    let receipt = Receipt::sign(
        forged.id().clone(),
        PrincipalId::new("c4.controller-agv-1").unwrap(),
        base + 51,
        &derive_signing_key(1, "c4.controller-agv-1"),
    );
    msgs.push((forged.clone(), receipt));
    msgs.sort_by_key(|(e, _)| e.envelope().timestamp);
    let rec = audita_facility::record::seal(1, &msgs).unwrap();
    let keys = log_keys(fleet.keys.clone(), 1);
    let duties = fleet.duties().unwrap();
    let part = verify_record(&rec, &keys);
    assert!(
        part.suspect.iter().any(|s| matches!(&s.item,
            audita_evidence::SuspectItem::Message { id, .. } if id == forged.id())),
        "the forgery is suspect"
    );
    let plain_part = verify_record(&plain, &keys);
    let mut changed = Vec::new();
    for cell in &fleet.cells {
        let Some(decl) = &cell.adverse else { continue };
        let adverse = Adverse::new(decl.clone()).unwrap();
        let c = verdict(&plain, &plain_part, &duties, &adverse).unwrap();
        let v = verdict(&rec, &part, &duties, &adverse).unwrap();
        if without_root(&c) == without_root(&v) {
            continue;
        }
        changed.push(decl.incident.clone());
        let item = v
            .completions
            .items
            .iter()
            .find(|i| i.id == id_string(forged.id()))
            .expect("the forgery is named where it changes a verdict");
        assert_eq!(item.attested_by, vec!["seal".to_string()], "{item:?}");
        let bad = check_edit(&c, &v, &["c4.supervisor".to_string()].into());
        assert!(bad.is_empty(), "{}: {bad:?}", decl.incident);
    }
    assert_eq!(
        changed.iter().map(|i| cell_of(i)).collect::<Vec<_>>(),
        vec![Some(4)],
        "only its cell moves: {changed:?}"
    );
}

/// The fleet cell of a monitor-named incident (`<predicate>-c<K>.<entity>-<t*>`).
fn cell_of(incident: &str) -> Option<usize> {
    incident.match_indices("-c").find_map(|(at, _)| {
        let rest = &incident[at + 2..];
        let digits = rest.split('.').next()?;
        (!digits.is_empty() && rest.len() > digits.len())
            .then(|| digits.parse().ok())
            .flatten()
    })
}

#[test]
fn cell_of_reads_the_cell_from_a_monitor_incident_name() {
    assert_eq!(cell_of("separation_below_0.5m-c4.agv-1-40013999"), Some(4));
    assert_eq!(
        cell_of("batch_parameter_out_of_range-c15.batch-1-9"),
        Some(15)
    );
    assert_eq!(cell_of("separation_below_0.5m-cx.agv-1-4"), None);
    assert_eq!(cell_of("cell4-omission-5"), None);
}

/// Missing realisation evidence (a bridge or actuator that never reports what it
/// executed): every actuation report of a fleet is left out before sealing, and the
/// monitor declares the incidents from what is left. A principal culpable on the
/// whole record is never `exonerated` on the stripped one: where the declaration lost
/// its anchors, the commands it issued to the subject are named unrealised
/// (`unrealised_command`) and it stays unresolved.
#[test]
fn a_fleet_without_its_realisation_evidence_never_exonerates_a_culpable_principal() {
    use audita_evidence::Payload;
    use audita_verdict::{FindingStatus, Flag};
    let fleet: Fleet = build(&DEMO_MIX, 6, 1);
    let file = audita_monitor::Predicates::from_json(&fleet.predicates_json).expect("predicates");
    let duties = fleet.duties().expect("duties");
    let keys = log_keys(fleet.keys.clone(), 1);
    let judge_all = |msgs: &[(SignedEnvelope, Receipt)]| {
        let record = audita_facility::record::seal(1, msgs).expect("seal");
        let part = verify_record(&record, &keys);
        audita_monitor::derive(&part, &file)
            .declarations
            .into_iter()
            .map(|d| {
                let a = Adverse::new(d).expect("declaration");
                let v = verdict(&record, &part, &duties, &a).ok();
                (a.decl.incident.clone(), (a, v))
            })
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let all: Vec<(SignedEnvelope, Receipt)> = fleet
        .envelopes_in_time_order()
        .into_iter()
        .map(|(e, r)| (e.clone(), r.clone()))
        .collect();
    let stripped: Vec<(SignedEnvelope, Receipt)> = all
        .iter()
        .filter(|(e, _)| !matches!(e.envelope().payload, Payload::ToolOutput { .. }))
        .cloned()
        .collect();
    assert!(
        stripped.len() < all.len(),
        "the fleet reports its actuations"
    );
    let (clean, bare) = (judge_all(&all), judge_all(&stripped));
    let (mut culpable, mut unanchored) = (0, 0);
    for (incident, (_, v)) in &clean {
        let Some(v) = v else { continue };
        let (a, w) = bare
            .get(incident)
            .unwrap_or_else(|| panic!("{incident} is still declared without the reports"));
        let w = w
            .as_ref()
            .unwrap_or_else(|| panic!("{incident}: no verdict without the reports"));
        for (p, f) in &v.principals {
            if !f.culpable {
                continue;
            }
            culpable += 1;
            let g = &w
                .principals
                .get(p)
                .unwrap_or_else(|| panic!("{incident}: culpable {p} left the stripped verdict"));
            assert_ne!(
                g.status,
                FindingStatus::Exonerated,
                "{incident}: {p} culpable on the whole record is exonerated without \
                 its realisation evidence: {:?}",
                g.notes
            );
            if a.decl.anchors.is_empty() {
                unanchored += 1;
                assert!(
                    g.flags.contains(&Flag::UnrealisedCommand),
                    "{incident}: {p}: {g:?}"
                );
                assert_eq!(g.status, FindingStatus::Unresolved, "{incident}: {p}");
                assert!(
                    g.notes.iter().any(|n| n.contains("not shown realised")),
                    "{incident}: {p}: the report names the unrealised commands: {:?}",
                    g.notes
                );
            }
        }
    }
    assert!(
        culpable >= 3,
        "the fleet has culpable principals: {culpable}"
    );
    assert!(
        unanchored >= 1,
        "some incident lost its anchors: {unanchored}"
    );
    println!("{culpable} culpable findings, {unanchored} without anchors: none exonerated");
}
