//! House rules read from the source tree, so they are checks rather than habits: no
//! function of the product over 150 lines (every crate root turns clippy's
//! `too_many_lines` on, at the threshold of `clippy.toml`, and CI fails on a warning),
//! and no doc comment naming a module path that does not exist (a path that outlived
//! a move, like `sealer::disk` after the record's reader left the sealer).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A workspace crate: its names in paths and its source directory and roots.
struct Crate {
    /// `audita_sealer`, and `sealer` (the folder's name).
    names: Vec<String>,
    src: PathBuf,
    /// Source files of its library and binaries.
    roots: Vec<PathBuf>,
}

fn workspace() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn crates() -> Vec<Crate> {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--no-deps",
        ])
        .current_dir(workspace())
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m: Value = serde_json::from_slice(&out.stdout).expect("metadata is JSON");
    let mut crates = Vec::new();
    for p in m["packages"].as_array().unwrap() {
        let manifest = PathBuf::from(p["manifest_path"].as_str().unwrap());
        let dir = manifest.parent().unwrap().to_path_buf();
        let name = p["name"].as_str().unwrap().replace('-', "_");
        let folder = dir.file_name().unwrap().to_string_lossy().replace('-', "_");
        let mut names = vec![name.clone(), folder];
        if let Some(short) = name.strip_prefix("audita_") {
            names.push(short.to_string());
        }
        let roots = p["targets"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| {
                t["kind"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|k| matches!(k.as_str(), Some("lib" | "bin" | "cdylib" | "rlib")))
            })
            .map(|t| PathBuf::from(t["src_path"].as_str().unwrap()))
            .collect();
        crates.push(Crate {
            names,
            src: dir.join("src"),
            roots,
        });
    }
    crates
}

#[test]
fn every_crate_root_enforces_the_150_line_limit() {
    let conf = std::fs::read_to_string(workspace().join("clippy.toml")).expect("clippy.toml");
    assert!(
        conf.lines()
            .any(|l| l.trim() == "too-many-lines-threshold = 150"),
        "clippy.toml must set too-many-lines-threshold = 150"
    );
    let mut missing = Vec::new();
    for c in crates() {
        for root in &c.roots {
            let text = std::fs::read_to_string(root).unwrap();
            let on = ["warn", "deny", "forbid"]
                .iter()
                .any(|l| text.contains(&format!("#![{l}(clippy::too_many_lines)]")));
            if !on {
                missing.push(root.display().to_string());
            }
        }
    }
    assert!(
        missing.is_empty(),
        "crate roots without #![warn(clippy::too_many_lines)]: {missing:?}"
    );
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The file of module `seg` under `dir`, if there is one.
fn module_file(dir: &Path, seg: &str) -> Option<PathBuf> {
    [dir.join(format!("{seg}.rs")), dir.join(seg).join("mod.rs")]
        .into_iter()
        .find(|p| p.exists())
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The identifiers of `text`, in order.
fn words(text: &str) -> Vec<&str> {
    text.split(|c: char| !is_ident(c))
        .filter(|w| !w.is_empty())
        .collect()
}

/// Whether `text` (a module's source) defines or re-exports `seg`: an item of that
/// name, a `pub use` naming it, or — for a capitalised name (a type, a variant) — any
/// use of the word.
fn defines(text: &str, seg: &str) -> bool {
    const ITEMS: [&str; 9] = [
        "fn",
        "struct",
        "enum",
        "trait",
        "type",
        "const",
        "static",
        "mod",
        "macro_rules",
    ];
    let w = words(text);
    if w.windows(2).any(|p| ITEMS.contains(&p[0]) && p[1] == seg) {
        return true;
    }
    // A `pub use` statement (over as many lines as it takes) naming it.
    if text
        .match_indices("pub use ")
        .map(|(i, _)| &text[i..text[i..].find(';').map_or(text.len(), |e| i + e)])
        .any(|stmt| words(stmt).contains(&seg))
    {
        return true;
    }
    seg.starts_with(|c: char| c.is_ascii_uppercase()) && w.contains(&seg)
}

/// The module paths in backticks on a doc comment line (`a::b::c`).
fn doc_paths(line: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (i, span) in line.split('`').enumerate() {
        if i % 2 == 0 {
            continue;
        }
        let path: String = span
            .chars()
            .take_while(|c| is_ident(*c) || *c == ':')
            .collect();
        let segs: Vec<String> = path.split("::").map(str::to_string).collect();
        if segs.len() >= 2
            && segs.iter().all(|s| !s.is_empty())
            && segs[0].starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        {
            out.push(segs);
        }
    }
    out
}

#[test]
fn doc_paths_name_modules_and_items_that_exist() {
    let crates = crates();
    let mut stale = Vec::new();
    for c in &crates {
        let mut files = Vec::new();
        rust_files(&c.src, &mut files);
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let shadows = |name: &str| {
                module_file(&c.src, name).is_some()
                    || text.lines().any(|l| {
                        let t = l.trim_start();
                        (t.starts_with("use ")
                            || t.starts_with("pub use ")
                            || t.starts_with("mod "))
                            && words(t).contains(&name)
                    })
            };
            for (n, line) in text.lines().enumerate() {
                let t = line.trim_start();
                if !(t.starts_with("///") || t.starts_with("//!")) {
                    continue;
                }
                for segs in doc_paths(t) {
                    let target = if segs[0] == "crate" {
                        c
                    } else if shadows(&segs[0]) {
                        continue;
                    } else if let Some(other) = crates.iter().find(|o| o.names.contains(&segs[0])) {
                        other
                    } else {
                        continue;
                    };
                    let Some(root) = target.roots.iter().find(|r| r.starts_with(&target.src))
                    else {
                        continue;
                    };
                    let (mut dir, mut module) = (target.src.clone(), root.clone());
                    for seg in &segs[1..] {
                        if seg.ends_with('_') {
                            break;
                        }
                        if let Some(f) = module_file(&dir, seg) {
                            dir = dir.join(seg);
                            module = f;
                            continue;
                        }
                        let body = std::fs::read_to_string(&module).unwrap_or_default();
                        // A glob re-export (`pub use verdict::*`) brings its module's items.
                        let globbed = body
                            .lines()
                            .filter_map(|l| l.trim().strip_prefix("pub use ")?.strip_suffix("::*;"))
                            .filter_map(|m| module_file(&dir, m))
                            .any(|f| defines(&std::fs::read_to_string(f).unwrap_or_default(), seg));
                        if !defines(&body, seg) && !globbed {
                            stale.push(format!(
                                "{}:{}: `{}` names no {seg} in {}",
                                file.display(),
                                n + 1,
                                segs.join("::"),
                                module.display()
                            ));
                        }
                        break;
                    }
                }
            }
        }
    }
    assert!(
        stale.is_empty(),
        "doc comments naming paths that do not exist:\n{}",
        stale.join("\n")
    );
}

#[test]
fn the_doc_path_check_catches_a_stale_path() {
    assert_eq!(
        doc_paths("/// limits (see `sealer::disk`) and `Foo` and `a::b::C`"),
        vec![
            vec!["sealer".to_string(), "disk".into()],
            vec!["a".into(), "b".into(), "C".into()]
        ]
    );
    assert!(defines("pub fn read_dir() {}", "read_dir"));
    assert!(!defines("fn read_dir() {}\n// disk", "disk"));
    assert!(defines("enum E { Kill(u8) }", "Kill"));
    assert!(defines(
        "pub use verify::{\n    check, verify_record,\n};",
        "verify_record"
    ));
    let sealer = crates()
        .into_iter()
        .find(|c| c.names.contains(&"sealer".to_string()))
        .unwrap();
    let lib = std::fs::read_to_string(&sealer.roots[0]).unwrap();
    assert!(module_file(&sealer.src, "disk").is_none() && !defines(&lib, "disk"));
}
