//! Resident memory of the slicer's citation graph (its one arrangement) per retained message over a sliding
//! window: synthetic citations are inserted and retracted `retained` messages later
//! (as the stage evicts past its horizon), for `windows` windows. Without `--effort`
//! it runs itself once per idle merge effort (each in its own process, so RSS is not
//! shared) and prints them side by side:
//!
//! `cargo run --release -p audita-slicer --example dataflow_memory -- 50000 16`
use audita_slicer::{Graph, Key};
use std::time::Instant;

fn node(i: u64) -> Key {
    (u128::from(i.wrapping_mul(0x9E37_79B9_7F4A_7C15)) << 64) | u128::from(i)
}

fn rss_mib() -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|k| k.parse::<f64>().ok())
        .map_or(0.0, |k| k / 1024.0)
}

/// Each message cites the previous one and, every other message, one 7 back.
fn edges(m: u64, d: isize, b: &mut Vec<((Key, Key), isize)>) {
    if m > 0 {
        b.push(((node(m), node(m - 1)), d));
    }
    if m >= 7 && m.is_multiple_of(2) {
        b.push(((node(m), node(m - 7)), d));
    }
}

/// One run: (bytes per retained message at the end, peak, seconds).
fn run(retained: u64, windows: u64, effort: Option<isize>) -> (f64, f64, f64) {
    let per_epoch = 256u64;
    let mut graph = Graph::with_idle_merge_effort(effort);
    let base = rss_mib();
    let started = Instant::now();
    let mut peak: f64 = 0.0;
    let mut m = 0u64;
    while m < retained * windows {
        let mut batch = Vec::new();
        for k in m..m + per_epoch {
            edges(k, 1, &mut batch);
            if k >= retained {
                edges(k - retained, -1, &mut batch);
            }
        }
        graph.apply(batch, Vec::new());
        m += per_epoch;
        if m >= retained {
            peak = peak.max(rss_mib() - base);
        }
    }
    let per = |mib: f64| mib * 1_048_576.0 / retained as f64;
    (
        per(rss_mib() - base),
        per(peak),
        started.elapsed().as_secs_f64(),
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let num = |i: usize, d: u64| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let (retained, windows) = (num(1, 50_000), num(2, 16));
    if let Some(i) = args.iter().position(|a| a == "--effort") {
        let effort = args.get(i + 1).and_then(|e| e.parse().ok());
        let (end, peak, secs) = run(retained, windows, effort);
        println!("{end:.0} {peak:.0} {secs:.2}");
        return;
    }
    println!(
        "{retained} retained messages, {windows} windows ({} messages through)\n",
        retained * windows
    );
    println!("| idle merge effort | B per retained message (end) | peak | seconds | messages/s |");
    println!("|---|---|---|---|---|");
    for effort in ["none", "100", "1000", "10000"] {
        let out = std::process::Command::new(&args[0])
            .args([
                retained.to_string(),
                windows.to_string(),
                "--effort".into(),
                effort.into(),
            ])
            .output()
            .expect("running the measurement");
        let text = String::from_utf8_lossy(&out.stdout);
        let f: Vec<f64> = text
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        if let [end, peak, secs] = f[..] {
            let label = if effort == "1000" {
                "1000 (default)"
            } else {
                effort
            };
            println!(
                "| {label} | {end:.0} | {peak:.0} | {secs:.1} | {:.0} |",
                (retained * windows) as f64 / secs
            );
        }
    }
}
