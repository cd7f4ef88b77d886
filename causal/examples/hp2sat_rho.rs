//! ρ for every principal of the HP2SAT models (`benchmarks/hp2sat/models`), timed:
//! `cargo run --release -p audita-causal --example hp2sat_rho [NAME... | FILE.json]`.
//!
//! Environment: `AUDITA_TIMEOUT_MS` (deadline, default 10 s), `AUDITA_PATH`
//! (`opt`, `general`, `monotone`, `modular`; default the automatic choice),
//! `AUDITA_MEM` (memory bound in bytes), `AUDITA_PROBE` (probe work),
//! `AUDITA_MAX_CAUSES` (listing bounds), `AUDITA_COMPARE` (also compare the ρ of the
//! optimisation and modular paths, without a deadline).

use std::time::{Duration, Instant};

use audita_causal::{attribute_until, AttributeOptions, Model, Path};

fn env<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|s| s.parse().ok())
}

fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../benchmarks/hp2sat/models");
    let want: Vec<String> = std::env::args().skip(1).collect();
    let ms: u64 = env("AUDITA_TIMEOUT_MS").unwrap_or(10_000);
    let d = AttributeOptions::default();
    let opts = AttributeOptions {
        path: match std::env::var("AUDITA_PATH").as_deref() {
            Ok("opt") => Path::Optimisation,
            Ok("general") => Path::General,
            Ok("monotone") => Path::Monotone,
            Ok("modular") => Path::Modular,
            _ => Path::Auto,
        },
        max_memory_bytes: env("AUDITA_MEM").unwrap_or(d.max_memory_bytes),
        probe_work: env("AUDITA_PROBE").unwrap_or(d.probe_work),
        max_causes: env("AUDITA_MAX_CAUSES").unwrap_or(d.max_causes),
        max_solver_causes: env("AUDITA_MAX_CAUSES").unwrap_or(d.max_solver_causes),
        ..d
    };
    let mut files: Vec<(u64, String, std::path::PathBuf)> = std::fs::read_dir(&root)
        .expect("models")
        .filter_map(|e| e.ok())
        .map(|e| {
            let name = e
                .file_name()
                .to_string_lossy()
                .trim_end_matches(".json")
                .to_string();
            (e.metadata().map(|m| m.len()).unwrap_or(0), name, e.path())
        })
        .filter(|(_, n, _)| want.is_empty() || want.contains(n))
        .collect();
    files.sort();
    for w in want.iter().filter(|w| w.ends_with(".json")) {
        files.push((0, w.clone(), std::path::PathBuf::from(w)));
    }
    for (_, n, file) in files {
        let text = std::fs::read_to_string(file).expect("read");
        let m = Model::from_json(&text).expect("parse");
        if std::env::var_os("AUDITA_COMPARE").is_some() {
            let run =
                |path| attribute_until(&m, &[], &AttributeOptions { path, ..opts }, &|| false);
            match (run(Path::Optimisation), run(Path::Modular)) {
                (Ok(o), Ok(g)) => println!(
                    "{n}: optimisation and modular agree: {}",
                    o.responsibility == g.responsibility
                ),
                (o, g) => println!("{n}: {:?} {:?}", o.err(), g.err()),
            }
        }
        let start = Instant::now();
        let cutoff = Duration::from_millis(ms);
        let dl = move || start.elapsed() >= cutoff;
        let r = attribute_until(&m, &[], &opts, &dl);
        let t = start.elapsed();
        match r {
            Ok(a) => {
                let nz = a.responsibility.values().filter(|&&r| r > 0.0).count();
                println!(
                    "{n}\t{}\t{}\t{:?}\t{:.3} ms\tcauses {}\tcomplete {}\tnonzero {nz}",
                    m.len(),
                    m.principals().len(),
                    a.path,
                    t.as_secs_f64() * 1e3,
                    a.causes.len(),
                    a.causes_complete
                );
            }
            Err(e) => println!(
                "{n}\t{}\t{}\terror after {:.3} ms: {e}",
                m.len(),
                m.principals().len(),
                t.as_secs_f64() * 1e3
            ),
        }
    }
}
