//! ρ for every principal of the HP2SAT models (`benchmarks/hp2sat/models`), timed:
//! `cargo run --release -p audita-causal --example hp2sat_rho [NAME...]`.
//! Deadline 10 s per model unless `AUDITA_TIMEOUT_MS` says otherwise.

use std::time::{Duration, Instant};

use audita_causal::{attribute_until, AttributeOptions, Model, Path};

fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../benchmarks/hp2sat/models");
    let want: Vec<String> = std::env::args().skip(1).collect();
    let ms: u64 = std::env::var("AUDITA_TIMEOUT_MS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    let mut names: Vec<(u64, String)> = std::fs::read_dir(&root)
        .expect("models")
        .filter_map(|e| e.ok())
        .map(|e| {
            (
                e.metadata().map(|m| m.len()).unwrap_or(0),
                e.file_name()
                    .to_string_lossy()
                    .trim_end_matches(".json")
                    .to_string(),
            )
        })
        .filter(|(_, n)| want.is_empty() || want.contains(n))
        .collect();
    names.sort();
    if want.len() == 1 && want[0].ends_with(".json") {
        names = vec![(0, want[0].clone())];
    }
    let path = match std::env::var("AUDITA_PATH").as_deref() {
        Ok("opt") => Path::Optimisation,
        Ok("general") => Path::General,
        Ok("monotone") => Path::Monotone,
        Ok("modular") => Path::Modular,
        _ => Path::Auto,
    };
    for (_, n) in names {
        let file = if n.ends_with(".json") {
            std::path::PathBuf::from(&n)
        } else {
            root.join(format!("{n}.json"))
        };
        let text = std::fs::read_to_string(file).expect("read");
        let m = Model::from_json(&text).expect("parse");
        let start = Instant::now();
        let cutoff = Duration::from_millis(ms);
        let dl = move || start.elapsed() >= cutoff;
        let r = attribute_until(
            &m,
            &[],
            &AttributeOptions {
                path,
                ..Default::default()
            },
            &dl,
        );
        let t = start.elapsed();
        if std::env::var_os("AUDITA_COMPARE").is_some() {
            let o = attribute_until(
                &m,
                &[],
                &AttributeOptions {
                    path: Path::Optimisation,
                    ..Default::default()
                },
                &|| false,
            );
            let g = attribute_until(
                &m,
                &[],
                &AttributeOptions {
                    path: Path::Modular,
                    ..Default::default()
                },
                &|| false,
            );
            match (o, g) {
                (Ok(o), Ok(g)) => println!(
                    "{n}: optimisation and modular agree: {}",
                    o.responsibility == g.responsibility
                ),
                (o, g) => println!("{n}: {:?} {:?}", o.err(), g.err()),
            }
        }
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
