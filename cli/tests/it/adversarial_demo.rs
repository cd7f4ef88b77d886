//! The adversarial pass of issue 10 on what a new user has: the record `audita demo`
//! writes (sealed by the streaming sealer over the embedded bus, so parents are often
//! sealed after their children). Every message a verdict reads is deleted one at a
//! time — the envelope, the envelope with its receipt, the receipt alone — and the
//! incident is judged again from the edited record: every clean interval must be
//! contained, every lowered `ρ_lo` must name items, nobody compliant may become
//! culpable and nobody involved may be silently exonerated (the 98 narrowed intervals
//! the outside pass found on this record). The declarations and the duty registry are
//! the ones the demo wrote next to its record.

use std::collections::BTreeSet;
use std::process::Command;

use audita_evidence::{verify_record, SignedEnvelope};
use audita_load_tests::adversary::{check_edit, cut, ids_in};
use audita_verdict::{verdict, Adverse, VerdictError};

#[test]
fn deleting_any_message_a_demo_verdict_reads_only_widens() {
    let out = tempfile::tempdir().expect("tempdir");
    let cells = 16;
    let status = Command::new(env!("CARGO_BIN_EXE_audita"))
        .args(["demo", "--quiet", "--cells", &cells.to_string(), "--out"])
        .arg(out.path())
        .status()
        .expect("run demo");
    assert!(status.success());
    let (record, keys) =
        audita_record::read_record(&out.path().join("record")).expect("demo record");
    let duties = audita_verdict::DutyRegistry::from_json(
        &std::fs::read_to_string(out.path().join("duties.json")).expect("duties.json"),
    )
    .expect("duties");
    let part = verify_record(&record, &keys);
    assert!(part.is_clean(), "the demo record verifies clean");
    let mut failures = Vec::new();
    let (mut edits, mut abstained, mut out_of_order) = (0, 0, 0);
    let mut declarations: Vec<std::path::PathBuf> = std::fs::read_dir(out.path().join("adverse"))
        .expect("adverse/")
        .map(|e| e.expect("entry").path())
        .collect();
    declarations.sort();
    assert_eq!(declarations.len(), cells);
    for path in declarations {
        let adverse = Adverse::from_json(&std::fs::read_to_string(&path).expect("declaration"))
            .expect("declaration");
        let decl = &adverse.decl;
        let clean = verdict(&record, &part, &duties, &adverse).expect("clean verdict");
        for d in ids_in(&clean) {
            let Some(env) = record
                .envelopes
                .iter()
                .filter_map(|e| SignedEnvelope::decode(e.clone()).ok())
                .find(|e| e.id() == &d)
            else {
                continue;
            };
            // How often the streaming sealer sealed this message before a parent.
            let leaf =
                |id: &audita_evidence::MessageId| part.certified.get(id).map(|c| c.leaf_index);
            if env
                .envelope()
                .citations
                .iter()
                .any(|c| leaf(c).is_some_and(|l| Some(l) > leaf(&d)))
            {
                out_of_order += 1;
            }
            for (envelope, receipt, form) in [
                (true, false, "envelope"),
                (true, true, "envelope+receipt"),
                (false, true, "receipt"),
            ] {
                let rec = cut(&record, std::slice::from_ref(&d), envelope, receipt);
                let p = verify_record(&rec, &keys);
                edits += 1;
                let v = match verdict(&rec, &p, &duties, &adverse) {
                    Ok(v) => v,
                    Err(VerdictError::TooManyCompletions { .. }) => {
                        abstained += 1;
                        continue;
                    }
                    Err(e) => panic!("{}: {e}", decl.incident),
                };
                let authors: BTreeSet<String> = [d.author.to_string()].into();
                for b in check_edit(&clean, &v, &authors) {
                    failures.push(format!(
                        "{}: delete {form} of {} ({}): {b}",
                        decl.incident,
                        d.short(),
                        env.envelope().payload.kind()
                    ));
                }
            }
        }
    }
    println!(
        "{edits} edits, {abstained} abstained, {out_of_order} read messages sealed before a parent"
    );
    assert!(
        out_of_order > 0,
        "the demo record exercises out-of-order sealing"
    );
    assert!(
        failures.is_empty(),
        "{} of {edits} edits broke an invariant:\n{}",
        failures.len(),
        failures[..failures.len().min(40)].join("\n")
    );
    assert!(
        abstained * 10 <= edits,
        "{abstained} of {edits} edits abstained"
    );
}
