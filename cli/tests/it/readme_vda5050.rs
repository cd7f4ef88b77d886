//! The README's VDA 5050 walkthrough, followed word for word (issue 33): the commands
//! of its `sh` block run in order as a user types them, each its own process, and the
//! duty registry and the predicate file are the README's own JSON blocks. Only what a
//! user's machine supplies is filled in: the deployment directory for `DIR`, this
//! build's `audita` binary, a real Mosquitto for `broker:1883` and a real Kafka broker
//! for step 3's "set the broker" (plus a topic prefix of this run's own, so a broker
//! shared with other tests holds nothing of theirs). The commands the README leaves
//! running (stages, sidecars, tails) run in the background.
//!
//! The fleet is the third-party one of `vda5050_incident` (`vda-5050-lib` 1.4.0):
//! master control sends the README's vehicle an ordinary transport order through the
//! aisle — one edge released at `maxSpeed` 2.0 m/s, a `drop` at its last node only.
//! What the README promises must come out: master control culpable (ρ [1, 1], its
//! `release-001` duty breached, its order the anchor), the vehicle not culpable, the
//! alert on `audita tail alerts`, nothing on `audita tail suspect`, and the incident's
//! real date in `audita query`.
//!
//! Needs `node` and `npm ci` in `tests/vda5050`, Mosquitto and Kafka (`.ci/run`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use audita_bridge::testing::Mosquitto;
use audita_bus::testing::{unique_name, KafkaBroker};
use serde_json::Value;

/// The README's "Recording a VDA 5050 fleet" section.
fn section() -> String {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"))
            .expect("README.md");
    let start = readme
        .find("\n## Recording a VDA 5050 fleet")
        .expect("the README has its VDA 5050 section");
    let rest = &readme[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |e| e + 3);
    rest[..end].to_string()
}

/// The fenced blocks of `text` in the language `lang`.
fn blocks(text: &str, lang: &str) -> Vec<String> {
    let open = format!("```{lang}\n");
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(s) = rest.find(&open) {
        let body = &rest[s + open.len()..];
        let e = body.find("```").expect("a closed block");
        out.push(body[..e].to_string());
        rest = &body[e + 3..];
    }
    out
}

/// One command line of the walkthrough, and whether the README leaves it running.
#[derive(Debug)]
struct Line {
    words: Vec<String>,
    background: bool,
}

/// The commands of an `sh` block: comments dropped, `\` continuations joined, `&`
/// separating background commands.
fn commands(block: &str) -> Vec<Line> {
    let mut joined = Vec::new();
    let mut cur = String::new();
    for l in block.lines() {
        let l = l.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        if let Some(head) = l.strip_suffix('\\') {
            cur.push_str(head);
            cur.push(' ');
        } else {
            cur.push_str(l);
            joined.push(std::mem::take(&mut cur));
        }
    }
    let mut out = Vec::new();
    for j in joined {
        let parts = split(&j);
        let n = parts.len();
        for (i, words) in parts.into_iter().enumerate() {
            if words.is_empty() {
                continue;
            }
            // `a & b &`: every part but an unterminated last one is backgrounded.
            let background = i + 1 < n || is_service(&words);
            out.push(Line { words, background });
        }
    }
    out
}

/// A command line's words (double quotes group, as in sh), in the parts an unquoted
/// `&` separates.
fn split(line: &str) -> Vec<Vec<String>> {
    let (mut parts, mut words, mut word) = (Vec::new(), Vec::new(), None::<String>);
    let mut quoted = false;
    for ch in line.chars() {
        match ch {
            '"' => {
                quoted = !quoted;
                word.get_or_insert_with(String::new);
            }
            c if !quoted && c.is_whitespace() => words.extend(word.take()),
            '&' if !quoted => {
                words.extend(word.take());
                parts.push(std::mem::take(&mut words));
            }
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    assert!(!quoted, "an unclosed quote: {line}");
    words.extend(word.take());
    parts.push(words);
    parts
}

/// The commands that run until stopped: a user leaves them in a terminal of their own.
fn is_service(words: &[String]) -> bool {
    matches!(
        words.get(1).map(String::as_str),
        Some("stage" | "bridge" | "tail")
    )
}

/// A background process whose output goes to files, stopped (SIGTERM, then SIGKILL)
/// when the test ends.
struct Service {
    name: String,
    child: Child,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Service {
    fn output(&self) -> (String, String) {
        (
            std::fs::read_to_string(&self.stdout).unwrap_or_default(),
            std::fs::read_to_string(&self.stderr).unwrap_or_default(),
        )
    }
}

struct Services(Vec<Service>);

impl Services {
    fn dump(&self) -> String {
        self.0
            .iter()
            .map(|s| {
                let (o, e) = s.output();
                let tail = |t: &str| t.lines().rev().take(15).collect::<Vec<_>>().join("\n");
                format!(
                    "== {}\n-- stdout\n{}\n-- stderr\n{}",
                    s.name,
                    tail(&o),
                    tail(&e)
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Services {
    fn drop(&mut self) {
        for s in &self.0 {
            let _ = Command::new("kill")
                .args(["-TERM", &s.child.id().to_string()])
                .status();
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        for s in &mut self.0 {
            while Instant::now() < deadline && matches!(s.child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = s.child.kill();
            let _ = s.child.wait();
        }
    }
}

#[test]
fn the_readmes_vda5050_walkthrough_word_for_word_reaches_the_verdict() {
    let fleet_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vda5050");
    assert!(
        fleet_dir
            .join("node_modules/vda-5050-lib/package.json")
            .exists(),
        "vda-5050-lib is not installed: run `npm ci` in {} (.ci/run does)",
        fleet_dir.display()
    );
    let section = section();
    let sh = blocks(&section, "sh");
    assert_eq!(sh.len(), 1, "the walkthrough is one sh block");
    let lines = commands(&sh[0]);
    let json = blocks(&section, "json");
    let duties = json
        .iter()
        .find(|b| b.contains("\"zones\""))
        .expect("the README's duty registry");
    let predicates = json
        .iter()
        .find(|b| b.contains("\"predicates\""))
        .expect("the README's predicate file");

    let started_ms = audita_sinks::tables::now_ms();
    let kafka = KafkaBroker::start().expect("a Kafka broker");
    let tmp = tempfile::tempdir().unwrap();
    let mq = Mosquitto::start(tmp.path()).expect("mosquitto");
    let dir = tmp.path().join("site");
    let dir_s = dir.to_str().unwrap().to_string();
    let mqtt = format!("127.0.0.1:{}", mq.port());
    let prefix = unique_name("readme-vda.") + ".";
    let fill = |w: &str| -> String {
        if w == "audita" {
            env!("CARGO_BIN_EXE_audita").to_string()
        } else if w == "DIR" || w.starts_with("DIR/") {
            w.replacen("DIR", &dir_s, 1)
        } else {
            w.replace("broker:1883", &mqtt)
        }
    };

    // What the walkthrough's vehicle is, from its own sidecar line.
    let arg = |flag: &str| -> String {
        lines
            .iter()
            .find_map(|l| {
                let i = l.words.iter().position(|w| w == flag)?;
                l.words.get(i + 1).cloned()
            })
            .unwrap_or_else(|| panic!("no {flag} in the walkthrough"))
    };
    let vehicle = arg("--vehicle");
    let interface = arg("--interface");
    let (manufacturer, serial) = vehicle.split_once('/').unwrap();
    assert_eq!(manufacturer, "heldout", "fleet.js's manufacturer");
    let interface_name = interface.split('/').next().unwrap().to_string();

    let mut services = Services(Vec::new());
    let mut ran: Vec<String> = Vec::new();
    let last_service = lines.iter().rposition(|l| l.background).expect("services");
    let mut outputs = Vec::new();
    let mut run = |n: usize, line: &Line, services: &mut Services, ran: &mut Vec<String>| {
        let words: Vec<String> = line.words.iter().map(|w| fill(w)).collect();
        assert_eq!(line.words[0], "audita", "{:?}", line.words);
        let verb = line.words[1..]
            .iter()
            .take(2)
            .cloned()
            .collect::<Vec<_>>()
            .join(" ");
        if verb == "topics create" {
            // Step 3, which the README says in words: the duties and predicates into
            // the files audita.toml names, and the broker into [kafka].
            std::fs::write(dir.join("duties.json"), duties).unwrap();
            std::fs::write(dir.join("predicates.json"), predicates).unwrap();
            let config = dir.join("audita.toml");
            let text = std::fs::read_to_string(&config).unwrap();
            assert!(
                text.contains("\"bootstrap.servers\" = \"127.0.0.1:9092\""),
                "{text}"
            );
            assert!(text.contains("prefix = \"\""), "{text}");
            let text = text
                .replace(
                    "\"bootstrap.servers\" = \"127.0.0.1:9092\"",
                    &format!("\"bootstrap.servers\" = \"{}\"", kafka.bootstrap()),
                )
                .replace("prefix = \"\"", &format!("prefix = \"{prefix}\""));
            std::fs::write(&config, text).unwrap();
        }
        let mut c = Command::new(&words[0]);
        c.args(&words[1..]).current_dir(tmp.path());
        if line.background {
            let name = format!(
                "{n:02}-{}",
                line.words[1..]
                    .iter()
                    .take(2)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("-")
            );
            let stdout = tmp.path().join(format!("{name}.out"));
            let stderr = tmp.path().join(format!("{name}.err"));
            let child = c
                .stdout(std::fs::File::create(&stdout).unwrap())
                .stderr(std::fs::File::create(&stderr).unwrap())
                .spawn()
                .unwrap_or_else(|e| panic!("{words:?}: {e}"));
            services.0.push(Service {
                name,
                child,
                stdout,
                stderr,
            });
        } else {
            let out = c.output().unwrap();
            assert!(
                out.status.success(),
                "README step `{}` failed: {}{}",
                line.words.join(" "),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            outputs.push((
                verb.clone(),
                String::from_utf8_lossy(&out.stdout).to_string(),
            ));
        }
        ran.push(verb);
    };
    for (n, line) in lines.iter().enumerate().take(last_service + 1) {
        run(n, line, &mut services, &mut ran);
    }
    // Every stage and every sidecar says it is ready, at the default log level.
    let deadline = Instant::now() + Duration::from_secs(90);
    let ready = |s: &Service| {
        let (_, err) = s.output();
        !(s.name.contains("-stage-") || s.name.contains("-bridge-")) || err.contains(": ready — ")
    };
    while !services.0.iter().all(ready) {
        let exited = services
            .0
            .iter_mut()
            .find_map(|s| Some((s.name.clone(), s.child.try_wait().ok()??)));
        if let Some((name, status)) = exited {
            panic!(
                "{name} exited ({status}) before it was ready:\n{}",
                services.dump()
            );
        }
        assert!(
            Instant::now() < deadline,
            "not every stage and sidecar got ready:\n{}",
            services.dump()
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // The fleet: the README's vehicle on its interface, one ordinary transport order.
    let fleet = Command::new("node")
        .current_dir(&fleet_dir)
        .args([
            "fleet.js",
            &mq.port().to_string(),
            &interface_name,
            &format!("lastdrop={serial}"),
        ])
        .stderr(Stdio::inherit())
        .output()
        .expect("node runs (install Node.js; .ci/run does)");
    let fleet_out = String::from_utf8_lossy(&fleet.stdout);
    assert!(
        fleet.status.success() && fleet_out.contains("\"done\":true"),
        "the fleet failed: {fleet_out}"
    );

    // The sink's journal gets the incident's verdict.
    let journal = dir.join("out/journal.jsonl");
    let deadline = Instant::now() + Duration::from_secs(120);
    let record: Value = loop {
        let found = std::fs::read_to_string(&journal)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .map(|l| l.get("record").cloned().unwrap_or(l))
            .find(|r| r.get("verdict").is_some() || r.get("abstained").is_some());
        if let Some(r) = found {
            assert!(r.get("abstained").is_none(), "the incident abstained: {r}");
            break r;
        }
        assert!(
            Instant::now() < deadline,
            "no verdict in 120 s:\n{}",
            services.dump()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let verdict = &record["verdict"];
    let finished_ms = audita_sinks::tables::now_ms();

    let vehicle_principal = format!("{manufacturer}.{serial}");
    let mc = &verdict["principals"]["master-control"];
    assert_eq!(mc["culpable"], true, "master control: {verdict}");
    assert_eq!(
        (mc["rho_lo"].as_f64(), mc["rho_hi"].as_f64()),
        (Some(1.0), Some(1.0)),
        "{mc}"
    );
    let violated: Vec<&str> = mc["breach"]["violations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|x| x["duty"].as_str())
        .collect();
    assert_eq!(violated, vec!["release-001"], "{mc}");
    let veh = &verdict["principals"][vehicle_principal.as_str()];
    assert_eq!(veh["culpable"], false, "the vehicle: {verdict}");
    let anchors: Vec<&str> = verdict["anchors"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(anchors.len(), 1, "{verdict}");
    let anchor = &record["messages"][anchors[0]];
    assert_eq!(
        anchor["author"], "master-control",
        "the order is the anchor: {anchor}"
    );
    assert_eq!(
        anchor["destination"],
        vehicle_principal.as_str(),
        "{anchor}"
    );
    let order: Value = serde_json::from_str(anchor["params"]["text"].as_str().unwrap()).unwrap();
    assert_eq!(order["orderId"], format!("order-{serial}"), "{order}");
    assert_eq!(
        order["edges"][0]["maxSpeed"], 2,
        "the edge released too fast: {order}"
    );

    // The tails: the alert on audita.alerts, nothing quarantined.
    std::thread::sleep(Duration::from_secs(2));
    let tail = |verb: &str| {
        services
            .0
            .iter()
            .find(|s| s.name.ends_with(&format!("-tail-{verb}")))
            .unwrap_or_else(|| panic!("no tail {verb}"))
            .output()
            .0
    };
    let alerts = tail("alerts");
    assert!(
        alerts
            .lines()
            .any(|l| l.contains(&vehicle_principal) && l.contains("human_zone_overspeed")),
        "audita tail alerts printed no alert for {vehicle_principal}: {alerts}"
    );
    let suspect = tail("suspect");
    assert!(suspect.trim().is_empty(), "quarantined: {suspect}");

    // The steps after the fleet ran: the verdict in the sink's tables, with the
    // incident's real date.
    for (n, line) in lines.iter().enumerate().skip(last_service + 1) {
        run(n, line, &mut services, &mut ran);
    }
    let today = &audita_sinks::tables::rfc3339(started_ms)[..10];
    let table = &outputs
        .iter()
        .find(|(verb, _)| verb.starts_with("query"))
        .expect("the walkthrough ends with `audita query`")
        .1;
    eprintln!("{table}");
    let row = |p: &str| {
        table
            .lines()
            .find(|l| l.split_whitespace().any(|w| w == p))
            .unwrap_or_else(|| panic!("no row of {p}:\n{table}"))
    };
    let mc_row = row("master-control");
    assert!(
        mc_row.contains(today) && mc_row.contains("culpable") && mc_row.contains("release-001"),
        "master control's row: {mc_row}"
    );
    let veh_row = row(&vehicle_principal);
    assert!(
        veh_row.contains(today) && !veh_row.contains(" culpable "),
        "the vehicle's row: {veh_row}"
    );

    // The record verifies offline, and audita query shows the incident's real date.
    let v = Command::new(env!("CARGO_BIN_EXE_audita"))
        .arg("verify")
        .arg(dir.join("record"))
        .output()
        .unwrap();
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stderr));
    let q = Command::new(env!("CARGO_BIN_EXE_audita"))
        .args(["query", "--dir"])
        .arg(dir.join("out"))
        .args([
            "--format",
            "json",
            "SELECT incident, CAST(t_star AS VARCHAR) AS t_star, t_star_ms FROM incidents",
        ])
        .output()
        .unwrap();
    assert!(q.status.success(), "{}", String::from_utf8_lossy(&q.stderr));
    let rows: Vec<Value> = serde_json::from_slice(&q.stdout).unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let t_star = rows[0]["t_star_ms"].as_i64().unwrap();
    assert!(
        (started_ms..=finished_ms).contains(&t_star),
        "t* {} is not in this run: {:?}",
        audita_sinks::tables::rfc3339(t_star),
        rows[0]
    );
    assert!(
        rows[0]["t_star"].as_str().unwrap().starts_with(today),
        "{:?}",
        rows[0]
    );
    for want in [
        "init",
        "principal add",
        "topics create",
        "stage ingest",
        "stage sealer",
        "stage slicer",
        "stage monitor",
        "stage engine",
        "stage sink",
        "bridge vda5050",
        "tail alerts",
        "tail suspect",
        "query",
    ] {
        assert!(
            ran.iter().any(|v| v.starts_with(want)),
            "the walkthrough has no `audita {want}`: {ran:?}"
        );
    }
}
