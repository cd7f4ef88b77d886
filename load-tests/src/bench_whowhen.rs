//! `audita-load bench whowhen DIR`: Audita's static attributor scored on the Who&When
//! benchmark's logs (`audita_traces::whowhen`) beside the label-free floors (the first
//! worker's reply, step 0, the orchestrator's first hand-off on Magentic-One logs, the
//! most frequent agent at its first reply, the last agent reply) and, when
//! `AUDITA_JUDGE_ENDPOINT` names an OpenAI-compatible endpoint, the three LLM-judge
//! formats (`audita_baselines::judge`).
//!
//! Each file counts in its subset (`Algorithm-Generated`, `Hand-Crafted`, or the
//! format it is in when the directory holds the files directly), in its half and in
//! `all`; with several subsets, `pooled` rows join them. The half: an
//! Algorithm-Generated file by its name (`whowhen::is_development_in`); a file of a
//! `Hand-Crafted-dev/` directory is the Hand-Crafted development half, any other
//! Hand-Crafted (Magentic-One) file is held out whatever its shape. A judge call that
//! fails counts as a miss, and the result says how many did.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use audita_traces::whowhen::{self, Tally};
use serde_json::{json, Value};

/// Reads one file under a byte limit; the error is one line naming the file.
pub type ReadFile = dyn Fn(&Path, u64) -> Result<Vec<u8>, String>;

/// A method under test: the (agent, step) it names in a history.
type Predictor = fn(&[whowhen::Turn]) -> Option<(String, usize)>;

/// One Who&When log file of a bench directory.
struct WhoWhenFile {
    /// The subset directory it came from (`None`: the directory itself).
    subset: Option<&'static str>,
    path: PathBuf,
    /// Its file name (`N.json`), which fixes its half.
    name: String,
}

/// The subset directories a bench directory may hold.
const SUBSET_DIRS: [&str; 3] = ["Algorithm-Generated", "Hand-Crafted", "Hand-Crafted-dev"];

/// The Who&When files under `dir`: `N.json` files directly, and those of the
/// subset directories `Algorithm-Generated/`, `Hand-Crafted/` and
/// `Hand-Crafted-dev/` when present. Files directly in a directory named like one
/// of those count in it.
fn whowhen_files(dir: &Path) -> Result<Vec<WhoWhenFile>, String> {
    let numbered = |d: &Path| -> Result<Vec<(u64, String)>, String> {
        let mut v: Vec<(u64, String)> = std::fs::read_dir(d)
            .map_err(|e| format!("{}: {e}", d.display()))?
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter_map(|n| {
                n.strip_suffix(".json")
                    .and_then(|s| s.parse::<u64>().ok())
                    .map(|i| (i, n.clone()))
            })
            .collect();
        v.sort();
        Ok(v)
    };
    let mut out = Vec::new();
    let own = dir
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| SUBSET_DIRS.into_iter().find(|s| *s == n));
    for (_, name) in numbered(dir)? {
        out.push(WhoWhenFile {
            subset: own,
            path: dir.join(&name),
            name,
        });
    }
    for sub in SUBSET_DIRS {
        let d = dir.join(sub);
        if d.is_dir() {
            for (_, name) in numbered(&d)? {
                out.push(WhoWhenFile {
                    subset: Some(sub),
                    path: d.join(&name),
                    name,
                });
            }
        }
    }
    if out.is_empty() {
        return Err(format!(
            "{}: no N.json files (directly or under Algorithm-Generated/, Hand-Crafted/ or Hand-Crafted-dev/)",
            dir.display()
        ));
    }
    Ok(out)
}

/// Scores the static attributor, the floors and (with `AUDITA_JUDGE_ENDPOINT`) the
/// three LLM-judge formats on every Who&When log under `dir`, reading each file with
/// `read` (path, byte limit): one row per subset, method and split.
pub fn run(dir: &Path, read: &ReadFile) -> Result<Value, String> {
    let files = whowhen_files(dir)?;
    // (name, predictor, the only format it applies to)
    let methods: [(&str, Predictor, Option<whowhen::LogFormat>); 6] = [
        (
            "audita-static",
            |h| whowhen::attribute(h).map(|a| (a.agent, a.step)),
            None,
        ),
        (
            "floor: first worker reply",
            whowhen::floor_first_worker,
            None,
        ),
        ("floor: step 0", whowhen::floor_step_zero, None),
        (
            "floor: first hand-off",
            whowhen::floor_first_handoff,
            Some(whowhen::LogFormat::MagenticOne),
        ),
        (
            "floor: most frequent agent",
            whowhen::floor_most_frequent,
            None,
        ),
        ("floor: last agent reply", whowhen::floor_last_reply, None),
    ];
    // (subset, method, split) → tally
    let mut tallies: BTreeMap<(&str, &str, &str), Tally> = BTreeMap::new();
    // The LLM judges run only with a configured endpoint (audita_baselines::judge).
    let endpoint = std::env::var("AUDITA_JUDGE_ENDPOINT")
        .ok()
        .filter(|e| !e.is_empty());
    let mut transport = match &endpoint {
        None => None,
        Some(e) => {
            let model = std::env::var("AUDITA_JUDGE_MODEL").unwrap_or_else(|_| "default".into());
            Some(
                audita_baselines::judge::HttpTransport::new(e, &model)
                    .map_err(|e| e.to_string())?,
            )
        }
    };
    let mut judge_errors = 0usize;
    let mut subsets: std::collections::BTreeSet<&str> = Default::default();
    for WhoWhenFile {
        subset: dir_subset,
        path,
        name,
    } in &files
    {
        let bytes = read(path, 16 << 20)?;
        let c = whowhen::parse_whowhen(&bytes, &whowhen::Limits::default())
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let label = c
            .label
            .clone()
            .ok_or_else(|| format!("{}: no mistake_agent/mistake_step label", path.display()))?;
        // The Hand-Crafted development directory is that subset's development half;
        // any other file of a Hand-Crafted directory is held out whatever its shape.
        let (subset, development) = match dir_subset {
            Some("Hand-Crafted-dev") => ("Hand-Crafted", true),
            Some("Hand-Crafted") => ("Hand-Crafted", false),
            Some(s) => (*s, whowhen::is_development_in(c.format, name)),
            None => (
                c.format.subset(),
                whowhen::is_development_in(c.format, name),
            ),
        };
        subsets.insert(subset);
        let half = if development {
            "development"
        } else {
            "held-out"
        };
        let mut add = |m: &'static str, hits| {
            for split in [half, "all"] {
                tallies.entry((subset, m, split)).or_default().add(hits);
                tallies.entry(("pooled", m, split)).or_default().add(hits);
            }
        };
        for (m, f, only) in &methods {
            if only.is_some_and(|format| format != c.format) {
                continue;
            }
            let p = f(&c.history);
            add(
                m,
                whowhen::score(p.as_ref().map(|(a, s)| (a.as_str(), *s)), &label),
            );
        }
        if let Some(t) = transport.as_mut() {
            use audita_baselines::judge::Transport as _;
            for format in whowhen::judge::Format::ALL {
                let p = whowhen::judge::judge(&c, format, &mut |prompt: &str| t.complete(prompt))
                    .unwrap_or_else(|e| {
                        tracing::warn!(file = %path.display(), error = %e, "judge call failed");
                        judge_errors += 1;
                        None
                    });
                add(
                    format.name(),
                    whowhen::score(p.as_ref().map(|(a, s)| (a.as_str(), *s)), &label),
                );
            }
        }
    }
    let pooled = subsets.len() > 1;
    let rows: Vec<Value> = tallies
        .iter()
        .filter(|((subset, _, _), _)| pooled || *subset != "pooled")
        .map(|((subset, m, half), t)| {
            json!({
                "subset": subset, "method": m, "split": half, "n": t.n,
                "agent": round3(t.rate(t.agent)), "step": round3(t.rate(t.step)),
                "agent_strict": round3(t.rate(t.agent_strict)),
                "step_strict": round3(t.rate(t.step_strict)),
            })
        })
        .collect();
    let judges = match &endpoint {
        None => "not run (AUDITA_JUDGE_ENDPOINT unset)".to_string(),
        Some(e) => format!("run against {e} ({judge_errors} failed calls counted as misses)"),
    };
    Ok(json!({"files": files.len(), "subsets": subsets, "judges": judges, "rows": rows}))
}

/// `x` rounded to three decimals.
fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
