//! The capacity curve: saved `audita-load load` runs, one per fleet size, as one table and
//! one SVG (sustained rate, verdict and alert latency, CPU per envelope per stage,
//! resident memory per stage), with two marks: the knee, the smallest fleet the
//! machine no longer keeps up with (sustained < 95 % of offered, or a verdict p50
//! over 1 s: a backlog), and the smallest fleet past the latency promise (verdict
//! p99 over 1 s, or t* → alert p99 over 250 ms), which can come earlier.

use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Sustained share of the offered rate below which a run is past the knee.
const KEPT_UP: f64 = 0.95;
/// Verdict p99 (ms) above which a run is past the knee.
const VERDICT_P99_MS: f64 = 1_000.0;
/// Adverse instant → alert p99 (ms) above which a run is past the knee.
const ALERT_P99_MS: f64 = 250.0;

/// One saved run, reduced to the curve's figures.
struct Point {
    robots: f64,
    offered: f64,
    sustained: f64,
    verdict_p50: f64,
    verdict_p99: f64,
    alert_p99: f64,
    /// Cores busy per process while the load was offered ("machine" included).
    cores: BTreeMap<String, f64>,
    /// Largest resident memory per stage over the run (MiB).
    rss: BTreeMap<String, f64>,
}

impl Point {
    fn read(path: &Path) -> anyhow::Result<Point> {
        let bytes = std::fs::read(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let r: Value = serde_json::from_slice(&bytes)
            .map_err(|e| anyhow::anyhow!("{}: not a saved measurement: {e}", path.display()))?;
        let samples = r["samples"].as_array().ok_or_else(|| {
            anyhow::anyhow!("{}: not a saved measurement (no samples)", path.display())
        })?;
        let num = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
        let mut rss: BTreeMap<String, f64> = BTreeMap::new();
        for s in samples {
            for (k, v) in s["rss_mib"].as_object().into_iter().flatten() {
                let e = rss.entry(k.clone()).or_insert(0.0);
                *e = e.max(num(v));
            }
        }
        Ok(Point {
            robots: num(&r["config"]["robots"]),
            offered: num(&r["offered_per_s"]),
            sustained: num(&r["e2e_per_s"]),
            verdict_p50: num(&r["latency_ms"]["p50"]),
            verdict_p99: num(&r["latency_ms"]["p99"]),
            alert_p99: num(&r["alerts"]["instant_to_alert_ms"]["p99"]),
            cores: cores_while_offered(samples)
                .map(|(_, c)| c)
                .unwrap_or_default(),
            rss,
        })
    }

    /// Whether the machine kept up with the run's load.
    fn keeps_up(&self) -> bool {
        self.sustained >= KEPT_UP * self.offered && self.verdict_p50 <= VERDICT_P99_MS
    }

    /// Whether the run kept the machine's whole promise, tails included.
    fn holds(&self) -> bool {
        self.sustained >= KEPT_UP * self.offered
            && self.verdict_p99 <= VERDICT_P99_MS
            && self.alert_p99 <= ALERT_P99_MS
    }

    /// CPU per sustained envelope (µs) of a process.
    fn us_per_envelope(&self, process: &str) -> f64 {
        self.cores.get(process).copied().unwrap_or(f64::NAN) / self.sustained * 1e6
    }
}

/// Cores busy per process from the first sample to the last at which the offered
/// count grew (the feed), the machine's as "machine", with that span (s); none for
/// a feed under a second.
pub(crate) fn cores_while_offered(samples: &[Value]) -> Option<(f64, BTreeMap<String, f64>)> {
    let f = |v: &Value, k: &str| v[k].as_f64();
    let first = samples.first()?;
    let last = samples
        .windows(2)
        .rev()
        .find(|w| f(&w[1], "offered") > f(&w[0], "offered"))
        .map(|w| &w[1])?;
    let dt = f(last, "t")? - f(first, "t")?;
    if dt < 1.0 {
        return None;
    }
    let mut out = BTreeMap::new();
    for (name, b) in last["cpu_s"].as_object()? {
        if let (Some(a), Some(b)) = (first["cpu_s"][name].as_f64(), b.as_f64()) {
            out.insert(name.clone(), (b - a) / dt);
        }
    }
    if let (Some(a), Some(b)) = (f(first, "machine_busy_s"), f(last, "machine_busy_s")) {
        out.insert("machine".to_string(), (b - a) / dt);
    }
    Some((dt, out))
}

/// The processes the curve shows CPU and memory for, in pipeline order.
const PROCESSES: [&str; 6] = ["ingest", "sealer", "slicer", "broker", "load", "machine"];

/// Renders the capacity curve of the saved runs at `paths`: a markdown table to `out`
/// and, with `svg`, the plot.
pub fn render(paths: &[PathBuf], svg: Option<&Path>, out: &mut dyn Write) -> anyhow::Result<()> {
    let mut points = paths
        .iter()
        .map(|p| Point::read(p))
        .collect::<anyhow::Result<Vec<Point>>>()?;
    points.sort_by(|a, b| a.robots.total_cmp(&b.robots));
    if let Some(path) = svg {
        std::fs::write(path, plot(&points))
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    }
    writeln!(out, "{}", table(&points))?;
    Ok(())
}

/// The smallest fleet the machine does not keep up with, if any run is.
fn knee(points: &[Point]) -> Option<f64> {
    points.iter().find(|p| !p.keeps_up()).map(|p| p.robots)
}

/// The smallest fleet past the latency promise, if any run is.
fn promise(points: &[Point]) -> Option<f64> {
    points.iter().find(|p| !p.holds()).map(|p| p.robots)
}

fn table(points: &[Point]) -> String {
    let mut s = String::from(
        "| robots | offered msg/s | sustained msg/s | kept up / promise | verdict p50 / p99 ms | t* → alert p99 ms | µs/env ingest | sealer | slicer | broker | generator | machine (cores) | RSS MiB ingest / sealer / slicer |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for p in points {
        let us = |n: &str| format!("{:.1}", p.us_per_envelope(n));
        let rss = |n: &str| format!("{:.0}", p.rss.get(n).copied().unwrap_or(f64::NAN));
        s.push_str(&format!(
            "| {:.0} | {:.0} | {:.0} ({:.1} %) | {} / {} | {:.0} / {:.0} | {:.0} | {} | {} | {} | {} | {} | {} ({:.2}) | {} / {} / {} |\n",
            p.robots,
            p.offered,
            p.sustained,
            100.0 * p.sustained / p.offered,
            if p.keeps_up() { "yes" } else { "**no**" },
            if p.holds() { "yes" } else { "**no**" },
            p.verdict_p50,
            p.verdict_p99,
            p.alert_p99,
            us("ingest"),
            us("sealer"),
            us("slicer"),
            us("broker"),
            us("load"),
            us("machine"),
            p.cores.get("machine").copied().unwrap_or(f64::NAN),
            rss("ingest"),
            rss("sealer"),
            rss("slicer"),
        ));
    }
    match knee(points) {
        Some(r) => s.push_str(&format!(
            "\nKnee: {r:.0} robots, the smallest fleet whose sustained rate is below {:.0} % of the offered or whose verdict p50 exceeds {VERDICT_P99_MS:.0} ms (a backlog).",
            KEPT_UP * 100.0
        )),
        None => s.push_str("\nNo run is past the knee."),
    }
    match promise(points) {
        Some(r) => s.push_str(&format!(
            " Latency promise (verdict p99 ≤ {VERDICT_P99_MS:.0} ms, t* → alert p99 ≤ {ALERT_P99_MS:.0} ms) missed from {r:.0} robots.\n"
        )),
        None => s.push_str(" Every run kept the latency promise.\n"),
    }
    s
}

const PALETTE: [&str; 6] = [
    "#1b7f79", "#b84a4a", "#3a5fb0", "#c98a1b", "#7a4fb0", "#555555",
];

/// One panel of the plot: robots on x, each series a polyline with its label.
struct Panel<'a> {
    top: f64,
    title: &'a str,
    /// Log-scaled y (latencies span milliseconds to minutes).
    log: bool,
    series: Vec<(String, &'a str, Vec<f64>)>,
}

fn plot(points: &[Point]) -> String {
    let xs: Vec<f64> = points.iter().map(|p| p.robots).collect();
    let by = |f: &dyn Fn(&Point) -> f64| points.iter().map(f).collect::<Vec<f64>>();
    let (w, left, pw, ph, gap) = (760.0, 70.0, 520.0, 150.0, 60.0);
    let mut panels = vec![
        Panel {
            top: 40.0,
            title: "envelopes per second: offered and sustained end to end",
            log: false,
            series: vec![
                ("offered".into(), "#999999", by(&|p| p.offered)),
                ("sustained".into(), PALETTE[0], by(&|p| p.sustained)),
            ],
        },
        Panel {
            top: 0.0,
            title: "latency (ms, log scale): verdict p50, p99; adverse instant → alert p99",
            log: true,
            series: vec![
                ("verdict p50".into(), PALETTE[0], by(&|p| p.verdict_p50)),
                ("verdict p99".into(), PALETTE[1], by(&|p| p.verdict_p99)),
                ("t* → alert p99".into(), PALETTE[2], by(&|p| p.alert_p99)),
            ],
        },
        Panel {
            top: 0.0,
            title: "CPU per sustained envelope (µs) per process",
            log: false,
            series: PROCESSES
                .iter()
                .enumerate()
                .map(|(k, n)| {
                    let label = if *n == "load" { "generator" } else { n };
                    (label.to_string(), PALETTE[k], by(&|p| p.us_per_envelope(n)))
                })
                .collect(),
        },
        Panel {
            top: 0.0,
            title: "largest resident memory per stage (MiB)",
            log: false,
            series: ["ingest", "sealer", "slicer", "sink"]
                .iter()
                .enumerate()
                .map(|(k, n)| {
                    let v = by(&|p| p.rss.get(*n).copied().unwrap_or(f64::NAN));
                    (n.to_string(), PALETTE[k], v)
                })
                .collect(),
        },
    ];
    for k in 1..panels.len() {
        panels[k].top = panels[k - 1].top + ph + gap;
    }
    let h = panels.last().map_or(0.0, |p| p.top) + ph + 40.0;
    let (xmin, xmax) = (
        xs.iter().copied().fold(f64::INFINITY, f64::min),
        xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    );
    let span = (xmax - xmin).max(1.0);
    let x_at = |x: f64| left + pw * (x - xmin) / span;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"11\">\n\
         <text x=\"{left}\" y=\"18\" font-size=\"13\">audita-load load: capacity of one machine by fleet size (robots)</text>\n"
    );
    let (knee, promise) = (knee(points), promise(points));
    for panel in &panels {
        let values = panel.series.iter().flat_map(|(_, _, v)| v.iter().copied());
        let finite: Vec<f64> = values.filter(|v| v.is_finite() && *v > 0.0).collect();
        let vmax = finite.iter().copied().fold(1.0, f64::max) * 1.1;
        let vmin = if panel.log {
            finite.iter().copied().fold(vmax, f64::min).max(1.0) / 1.5
        } else {
            0.0
        };
        let y_at = |v: f64| {
            let r = if panel.log {
                (v.max(vmin).ln() - vmin.ln()) / (vmax.ln() - vmin.ln())
            } else {
                v / vmax
            };
            panel.top + ph * (1.0 - r)
        };
        s.push_str(&format!(
            "<text x=\"{left}\" y=\"{:.1}\" fill=\"#555\">{}</text>\n",
            panel.top - 6.0,
            panel.title
        ));
        for i in 0..=4 {
            let frac = i as f64 / 4.0;
            let v = if panel.log {
                (vmin.ln() + frac * (vmax.ln() - vmin.ln())).exp()
            } else {
                vmax * frac
            };
            let y = y_at(v);
            s.push_str(&format!(
                "<line x1=\"{left}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{v:.0}</text>\n",
                left + pw,
                left - 4.0,
                y + 4.0
            ));
        }
        for x in &xs {
            s.push_str(&format!(
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{x:.0}</text>\n",
                x_at(*x),
                panel.top + ph + 14.0
            ));
        }
        for (at, color, label, dy) in [
            (knee, "#b84a4a", "knee", 10.0),
            (promise, "#888888", "latency promise missed", 22.0),
        ] {
            let Some(k) = at else {
                continue;
            };
            let x = x_at(k);
            s.push_str(&format!(
                "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"{color}\" stroke-dasharray=\"4 3\"/><text x=\"{:.1}\" y=\"{:.1}\" fill=\"{color}\">{label}</text>\n",
                panel.top,
                panel.top + ph,
                x + 3.0,
                panel.top + dy
            ));
        }
        for (k, (label, color, v)) in panel.series.iter().enumerate() {
            let pts: Vec<String> = xs
                .iter()
                .zip(v)
                .filter(|(_, y)| y.is_finite())
                .map(|(x, y)| format!("{:.1},{:.1}", x_at(*x), y_at(*y)))
                .collect();
            s.push_str(&format!(
                "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/>\n<text x=\"{:.1}\" y=\"{:.1}\" fill=\"{color}\">{label}</text>\n",
                pts.join(" "),
                left + pw + 10.0,
                panel.top + 12.0 + 14.0 * k as f64
            ));
        }
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(robots: u64, offered: f64, sustained: f64, p99: f64, alert: f64) -> Value {
        let sample = |t: f64, offered_n: f64, cpu: f64, rss: f64| {
            serde_json::json!({"t": t, "offered": offered_n, "machine_busy_s": 2.0 * cpu,
                "cpu_s": {"ingest": cpu, "slicer": cpu / 2.0},
                "rss_mib": {"ingest": rss, "slicer": 4.0 * rss}})
        };
        serde_json::json!({
            "config": {"robots": robots}, "offered_per_s": offered, "e2e_per_s": sustained,
            "latency_ms": {"p50": p99 / 2.0, "p99": p99},
            "alerts": {"instant_to_alert_ms": {"p99": alert}},
            "samples": [sample(0.0, 0.0, 0.0, 10.0), sample(10.0, offered * 10.0, 5.0, 30.0),
                        sample(12.0, offered * 10.0, 6.0, 20.0)],
        })
    }

    #[test]
    fn the_knee_is_the_smallest_fleet_that_breaks_a_promise() {
        let dir = tempfile::tempdir().unwrap();
        let runs = [
            (200, run(200, 4000.0, 4000.0, 400.0, 120.0)),
            (1400, run(1400, 29000.0, 20000.0, 30000.0, 9000.0)),
            (800, run(800, 16000.0, 15900.0, 1500.0, 200.0)),
        ];
        let paths: Vec<PathBuf> = runs
            .iter()
            .map(|(r, v)| {
                let p = dir.path().join(format!("r{r}.json"));
                std::fs::write(&p, serde_json::to_vec(v).unwrap()).unwrap();
                p
            })
            .collect();
        let svg = dir.path().join("curve.svg");
        let mut out = Vec::new();
        render(&paths, Some(&svg), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        // Sorted by fleet size; 800 keeps up but misses the promise on its verdict
        // p99 alone; 1,400 is past the knee.
        let rows: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("| ") && !l.starts_with("| robots"))
            .collect();
        assert_eq!(rows.len(), 3);
        assert!(rows[0].starts_with("| 200 |") && rows[0].contains("| yes / yes |"));
        assert!(rows[1].starts_with("| 800 |") && rows[1].contains("| yes / **no** |"));
        assert!(rows[2].starts_with("| 1400 |") && rows[2].contains("| **no** / **no** |"));
        assert!(text.contains("Knee: 1400 robots"), "{text}");
        assert!(text.contains("missed from 800 robots"), "{text}");
        // CPU per envelope from the feed's samples: 0.5 ingest cores at 4,000/s.
        assert!(rows[0].contains("| 125.0 |"), "{}", rows[0]);
        let drawn = std::fs::read_to_string(&svg).unwrap();
        assert!(drawn.starts_with("<svg") && drawn.contains(">knee</text>"));
        assert!(drawn.contains(">latency promise missed</text>"));
    }

    #[test]
    fn a_file_that_is_not_a_run_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.json");
        std::fs::write(&p, b"{\"a\": 1}").unwrap();
        let err = render(&[p], None, &mut Vec::new())
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("x.json") && err.contains("no samples"),
            "{err}"
        );
    }
}
