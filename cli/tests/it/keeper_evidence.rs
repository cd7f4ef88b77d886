//! `audita verify --keeper-evidence`: the conflicts a real keeper (audita-keeper on
//! loopback) refused and kept are judged against the record. A fork of the
//! record's log (same origin and key, other history) shown to the keeper is
//! refused and, from its evidence, `audita verify` reports the fork and names the
//! branch the record holds (exit 1); a request that only carried a bad proof is
//! cleared by the record's own leaves; a log-signed checkpoint past the record's
//! end is a problem; tampered evidence and another log's evidence prove nothing.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use audita_evidence::merkle::{leaf_hash, root_from_leaf_hashes};
use audita_evidence::sample::SAMPLE_ORIGIN;
use audita_evidence::{derive_signing_key, Checkpoint, ConsistencyProof, Hash, SignedCheckpoint};
use audita_keeper::{log_vkey, KeeperConfig, Outcome, WitnessClient};
use serde_json::Value;

fn audita(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_audita"))
        .args(args)
        .output()
        .expect("run audita")
}

fn note(origin: &str, seed: u64, leaves: &[Hash]) -> Vec<u8> {
    SignedCheckpoint::sign(
        Checkpoint {
            origin: origin.into(),
            size: leaves.len() as u64,
            root: root_from_leaf_hashes(leaves),
        },
        &derive_signing_key(seed, origin),
    )
    .to_text()
    .into_bytes()
}

fn proof(leaves: &[Hash], old: usize) -> Vec<Hash> {
    ConsistencyProof::generate(leaves, old as u64).unwrap().path
}

fn verify(dir: &Path, evidence: &[&Path]) -> (i32, Value, String) {
    let mut args = vec!["verify".to_string(), dir.display().to_string()];
    for e in evidence {
        args.push("--keeper-evidence".into());
        args.push(e.display().to_string());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = audita(&args);
    (
        out.status.code().unwrap_or(-1),
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn statuses(summary: &Value) -> Vec<(String, String)> {
    summary["keeper_evidence"]["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["kind"].as_str().unwrap().to_string(),
                r["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_fork_refused_by_a_keeper_is_reported_by_verify_and_a_bad_proof_is_cleared() {
    const SEED: u64 = 4;
    let tmp = tempfile::tempdir().unwrap();
    let record = tmp.path().join("record");
    let out = audita(&[
        "sample-record",
        record.to_str().unwrap(),
        "--seed",
        &SEED.to_string(),
        "--messages",
        "60",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let (code, _, stderr) = verify(&record, &[]);
    assert_eq!(code, 0, "the sample record verifies: {stderr}");

    let rd = audita_record::read_dir(&record, &audita_record::Limits::default()).unwrap();
    let leaves: Vec<Hash> = rd
        .record
        .epochs
        .iter()
        .flat_map(|e| e.leaves.iter().map(|l| leaf_hash(l)))
        .collect();
    let n = leaves.len();
    assert!(n >= 20, "{n} leaves");
    let (a, b) = (n / 3, 2 * n / 3);

    // A real keeper of this log, with its own key.
    let state = tmp.path().join("keeper");
    let log_key = derive_signing_key(SEED, SAMPLE_ORIGIN).verifying_key();
    let config = KeeperConfig::new(
        "insurer.example/keeper",
        derive_signing_key(99, "insurer.example/keeper"),
        &[log_vkey(SAMPLE_ORIGIN, &log_key)],
        &state,
    )
    .unwrap();
    let handle =
        audita_keeper::serve(&config, std::net::TcpListener::bind("127.0.0.1:0").unwrap()).unwrap();
    let client = WitnessClient::new(&handle.url(), Duration::from_secs(10));
    let add =
        |old: usize, proof: &[Hash], note: &[u8]| client.add_checkpoint(old as u64, proof, note);

    // The record's tree at a is co-signed.
    let record_note = |size: usize| note(SAMPLE_ORIGIN, SEED, &leaves[..size]);
    assert!(matches!(
        add(0, &[], &record_note(a)),
        Ok(Outcome::Cosigned(_))
    ));
    // The record's own tree at b with a wrong proof: refused (422), kept as
    // `inconsistent` evidence, which the record's leaves clear.
    let wrong = vec![[7u8; 32]; proof(&leaves[..b], a).len()];
    assert!(add(a, &wrong, &record_note(b)).is_err());
    // With the right proof it is co-signed.
    assert!(matches!(
        add(a, &proof(&leaves[..b], a), &record_note(b)),
        Ok(Outcome::Cosigned(_))
    ));
    // The operator forks: same origin and key, history rewritten after a. At b
    // (the size the keeper holds) it is an equivocation, refused.
    let mut forked = leaves.clone();
    for (i, l) in forked.iter_mut().enumerate().skip(a) {
        *l = leaf_hash(format!("rewritten {i}").as_bytes());
    }
    let fork_note = note(SAMPLE_ORIGIN, SEED, &forked[..b]);
    assert!(matches!(add(b, &[], &fork_note), Ok(Outcome::Conflict(_))));
    // The log's real tree, grown past the record's end, with a bad proof: kept as
    // `inconsistent` evidence the record cannot settle.
    let mut grown = leaves.clone();
    grown.extend((0..5).map(|i| leaf_hash(format!("later {i}").as_bytes())));
    assert!(add(b, &wrong, &note(SAMPLE_ORIGIN, SEED, &grown)).is_err());
    handle.shutdown();

    // `audita keeper evidence` exports three records.
    let exported = audita(&["keeper", "evidence", state.to_str().unwrap()]);
    assert_eq!(exported.status.code(), Some(0), "{exported:?}");
    let file = tmp.path().join("evidence.json");
    std::fs::write(&file, &exported.stdout).unwrap();
    let all: Value = serde_json::from_slice(&exported.stdout).unwrap();
    assert_eq!(all.as_array().unwrap().len(), 3, "{all}");

    // From the exported file and from the state directory alike: the fork is
    // reported (exit 1) with the branch the record holds, the bad proof cleared,
    // the checkpoint past the record's end a problem.
    for source in [&file, &state] {
        let (code, summary, stderr) = verify(&record, &[source.as_path()]);
        assert_eq!(code, 1, "{stderr}");
        assert!(stderr.contains("proves 1 fork(s)"), "{stderr}");
        assert!(
            stderr.contains("1 log-signed checkpoint(s) beyond the record"),
            "{stderr}"
        );
        assert_eq!(summary["clean"], false);
        let mut got = statuses(&summary);
        got.sort();
        assert_eq!(
            got,
            vec![
                ("equivocation".into(), "fork".into()),
                ("inconsistent".into(), "beyond_record".into()),
                ("inconsistent".into(), "cleared".into()),
            ],
            "{summary}"
        );
        let fork = summary["keeper_evidence"]["records"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["status"] == "fork")
            .unwrap()
            .clone();
        assert_eq!(fork["cosigned"]["in_record"], true, "{fork}");
        assert_eq!(fork["refused"]["in_record"], false, "{fork}");
        assert!(
            fork["detail"]
                .as_str()
                .unwrap()
                .contains("the record holds the co-signed branch"),
            "{fork}"
        );
    }

    // Only the cleared record: the record verifies clean.
    let records = all.as_array().unwrap();
    let cleared: Vec<&Value> = records
        .iter()
        .filter(|r| {
            r["kind"] == "inconsistent"
                && SignedCheckpoint::parse(r["refused"].as_str().unwrap().as_bytes())
                    .unwrap()
                    .checkpoint()
                    .size
                    == b as u64
        })
        .collect();
    assert_eq!(cleared.len(), 1);
    let one = tmp.path().join("cleared.json");
    std::fs::write(&one, serde_json::to_vec(cleared[0]).unwrap()).unwrap();
    let (code, summary, stderr) = verify(&record, &[one.as_path()]);
    assert_eq!(code, 0, "{stderr} {summary}");
    assert_eq!(
        statuses(&summary),
        vec![("inconsistent".into(), "cleared".into())]
    );

    // Tampered evidence (the fork note's root changed: its log signature fails)
    // proves nothing; evidence about another log is not this record's.
    let fork = records
        .iter()
        .find(|r| r["kind"] == "equivocation")
        .unwrap();
    let mut tampered = fork.clone();
    let text = tampered["refused"].as_str().unwrap().to_string();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines[2] = base64_of(&[1u8; 32]);
    tampered["refused"] = Value::String(lines.join("\n") + "\n");
    let mut foreign = fork.clone();
    foreign["origin"] = Value::String("other.example/log".into());
    let bad = tmp.path().join("bad.json");
    std::fs::write(&bad, serde_json::to_vec(&vec![tampered, foreign]).unwrap()).unwrap();
    let (code, summary, stderr) = verify(&record, &[bad.as_path()]);
    assert_eq!(code, 0, "{stderr} {summary}");
    let got: Vec<String> = statuses(&summary).into_iter().map(|(_, s)| s).collect();
    assert_eq!(
        got,
        vec!["invalid".to_string(), "other_log".to_string()],
        "{summary}"
    );

    // Malformed evidence is an input error: exit 2, one line naming the file.
    let junk = tmp.path().join("junk.json");
    std::fs::write(&junk, b"{\"format\": 1}").unwrap();
    let (code, _, stderr) = verify(&record, &[junk.as_path()]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("junk.json") && stderr.lines().count() == 1,
        "{stderr}"
    );
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
