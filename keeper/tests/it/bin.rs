//! The `audita-keeper` binary's key and evidence commands.

use crate::common;

use std::process::Command;

use common::*;

fn keeper_bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_audita-keeper"))
}

#[test]
fn generate_key_prints_the_vkey_and_never_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.key");
    let out = keeper_bin()
        .args([
            "generate-key",
            path.to_str().unwrap(),
            "insurer.example/keeper",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let vkey = String::from_utf8(out.stdout).unwrap();
    let key = audita_keeper::load_key(&path, "insurer.example/keeper").unwrap();
    assert_eq!(
        vkey.trim(),
        audita_keeper::keeper_vkey("insurer.example/keeper", &key.verifying_key())
    );
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let again = keeper_bin()
        .args([
            "generate-key",
            path.to_str().unwrap(),
            "insurer.example/keeper",
        ])
        .output()
        .unwrap();
    assert!(!again.status.success());
    assert_eq!(
        audita_keeper::load_key(&path, "insurer.example/keeper").unwrap(),
        key
    );
}

#[test]
fn evidence_command_exports_the_kept_conflicts_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let a = Log::new("log.example/bin", 2, 10);
    let b = a.fork(2);
    {
        let k = start(&config(dir.path(), &[&a]));
        let body = audita_keeper::protocol::format_request(0, &[], &a.note(4));
        assert_eq!(post(&k.url(), "/add-checkpoint", &body).0, 200);
        let body = audita_keeper::protocol::format_request(4, &[], &b.note(4));
        assert_eq!(post(&k.url(), "/add-checkpoint", &body).0, 409);
    }
    let out = keeper_bin()
        .args(["evidence", dir.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let records: Vec<audita_keeper::ConflictRecord> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(records.len(), 1);
    assert!(matches!(
        records[0].check(&a.key.verifying_key()),
        Ok(audita_keeper::Finding::Equivocation(_))
    ));
}
