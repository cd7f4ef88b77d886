//! The incident reports as a responder sees them: headless Chromium (Debian's package,
//! installed by `.ci/run`) renders the reports of a redundancy, an omission, a
//! no-cause and an abstained incident of a demo run, and the index, at desktop (1,400
//! px) and phone (390 px) widths. The rendered DOM must show the summary, the times, the graph with
//! arrowheads and the verify commands; the screenshots (kept in
//! `target/tmp/report-screens/` to look at) must be non-trivial PNGs of the width asked.

use audita_facility::scenario::Family;
use audita_load_tests::fleet::DEMO_MIX;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn chromium() -> PathBuf {
    for c in ["/usr/bin/chromium", "/usr/bin/chromium-browser"] {
        if Path::new(c).exists() {
            return c.into();
        }
    }
    panic!(
        "Chromium is required for the report screenshot tests (.ci/run installs Debian's chromium)"
    );
}

fn headless(profile: &Path) -> Command {
    let mut c = Command::new(chromium());
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-quic",
        "--no-first-run",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    c
}

fn dom(page: &Path, profile: &Path) -> String {
    let out = headless(profile)
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "chromium --dump-dom: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The width (px) of the narrowest "duties" block of `page`'s findings, as Chromium
/// lays the page out in a viewport `width` px wide (-1 without findings): a wrapper
/// page frames the report and reads its layout.
fn narrowest_duties(page: &Path, profile: &Path, width: u32) -> f64 {
    let wrapper = profile.join(format!("measure-{width}.html"));
    std::fs::write(
        &wrapper,
        format!(
            r#"<html><body style="margin:0"><iframe id="f" src="file://{}" style="width:{width}px;height:2000px;border:0"></iframe><script>
document.getElementById("f").onload = () => {{
  const d = document.getElementById("f").contentDocument;
  const ws = [...d.querySelectorAll(".detail .duties")].map(e => e.getBoundingClientRect().width);
  document.body.setAttribute("data-duties", ws.length ? Math.min(...ws) : -1);
}};
</script></body></html>"#,
            page.display()
        ),
    )
    .unwrap();
    let out = headless(profile)
        .args([
            "--allow-file-access-from-files",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--window-size={},2000", width + 20))
        .arg("--dump-dom")
        .arg(format!("file://{}", wrapper.display()))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.split("data-duties=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no layout measured: {text}"))
}

/// Takes a screenshot; returns the PNG's (width, height, bytes).
fn screenshot(page: &Path, profile: &Path, png: &Path, width: u32) -> (u32, u32, usize) {
    let out = headless(profile)
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("--window-size={width},2000"))
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "chromium --screenshot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(png).unwrap_or_else(|e| panic!("{}: {e}", png.display()));
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    let be = |i: usize| u32::from_be_bytes(bytes[i..i + 4].try_into().unwrap());
    (be(16), be(20), bytes.len())
}

#[test]
fn reports_of_every_kind_render_in_chromium_at_desktop_and_phone_widths() {
    let dir = tempfile::tempdir().unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_audita"))
        .args([
            "demo",
            "--quiet",
            "--cells",
            "24",
            "--max-slice-bytes",
            "32500",
        ])
        .args(["--record-origin", "2026-11-20T08:00:00Z", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let records: Vec<Value> = std::fs::read_to_string(dir.path().join("journal.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["record"].clone())
        .collect();
    let pick = |f: &dyn Fn(&Value) -> bool| -> String {
        let r = records
            .iter()
            .find(|r| f(r))
            .expect("such an incident in the demo run");
        r["incident"].as_str().unwrap().to_string()
    };
    // The monitor names incidents by predicate, entity and t*; the demo's cell `cK`
    // runs family K mod 8 of its mix.
    let family = |incident: &str| -> Family {
        let cell: usize = incident
            .split("-c")
            .nth(1)
            .and_then(|rest| rest.split('.').next())
            .and_then(|k| k.parse().ok())
            .unwrap_or_else(|| panic!("{incident}: no cell"));
        DEMO_MIX[cell % DEMO_MIX.len()]
    };
    let graded = |f: Family| {
        move |r: &Value| r.get("verdict").is_some() && family(r["incident"].as_str().unwrap()) == f
    };
    let cases = [
        ("redundancy", pick(&graded(Family::Redundancy))),
        ("omission", pick(&graded(Family::Omission))),
        ("no-cause", pick(&graded(Family::NoCause))),
        ("abstained", pick(&|r: &Value| r.get("abstained").is_some())),
    ];
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-screens");
    std::fs::create_dir_all(&shots).unwrap();
    let profile = tempfile::tempdir().unwrap();
    for (kind, incident) in &cases {
        let page = dir
            .path()
            .join("reports")
            .join(audita_sinks::report::file_name(incident));
        let text = dom(&page, profile.path());
        let has = |s: &str| assert!(text.contains(s), "{kind} report of {incident} lacks {s:?}");
        has("Summary");
        has("t* (UTC)");
        has("2026-11-2"); // wall-clock times from the declared record origin
        has("t* (record time)");
        has("audita verify RECORD_DIR");
        has("audita verdict RECORD_DIR --duties duties.json --adverse reports/");
        has("by audita ");
        match *kind {
            "redundancy" => {
                has("are culpable for separation_below_0.5m");
                has("marker-end=\"url(#arrow)\"");
                has("time (to t*)");
                has("Messages behind the nodes");
                has("--checkpoint reports/");
                has("insurer.example/keeper");
                // Declared by the monitor: the command re-derives the declaration.
                has("--predicates predicates.json");
            }
            "omission" => {
                has("culpable under the");
                has("the halt it never issued is");
                has("absent: ");
                has("Halt authority: after a certified sensor report containing");
                has("marker-end=\"url(#arrow");
            }
            "no-cause" => {
                has("No principal is responsible");
                // Issue 57: the summary says no causal claim is made, and the
                // findings table claims none for any principal either.
                assert!(
                    !text.contains("<td>causal</td>"),
                    "a causal claim on a principal of an exogenous outcome"
                );
                assert!(
                    !text.contains("Incident claim"),
                    "no-cause page claims nothing"
                );
            }
            "abstained" => {
                has("Audita abstained on incident");
                has("exceeds the 32500-byte record limit");
                has("never an accusation");
            }
            _ => unreachable!(),
        }
        for (width, label) in [(1400, "desktop"), (390, "phone")] {
            // Issue 57: at 1,400 px the duties wrapped one or two words a line.
            let duties = narrowest_duties(&page, profile.path(), width);
            let floor = if width >= 1400 { 300.0 } else { 250.0 };
            assert!(
                duties < 0.0 || duties >= floor,
                "{kind} at {width} px: a duties block {duties} px wide"
            );
            let png = shots.join(format!("{kind}-{label}.png"));
            let (w, h, size) = screenshot(&page, profile.path(), &png, width);
            assert_eq!((w, h), (width, 2000), "{}", png.display());
            assert!(
                size > 20_000,
                "{} is nearly blank ({size} bytes)",
                png.display()
            );
        }
    }
    let index = dir.path().join("reports/index.html");
    let text = dom(&index, profile.path());
    assert!(text.contains("24 incidents"), "index lists every incident");
    for (_, incident) in &cases {
        assert!(text.contains(incident.as_str()), "index lists {incident}");
    }
    for (width, label) in [(1400, "desktop"), (390, "phone")] {
        let png = shots.join(format!("index-{label}.png"));
        let (w, _, size) = screenshot(&index, profile.path(), &png, width);
        assert_eq!(w, width);
        assert!(size > 20_000);
    }
}
