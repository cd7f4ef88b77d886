//! The nemesis of `audita-load load --nemesis`: faults beyond a clean kill, injected while
//! the load is offered, each followed until the pipeline recovers.
//!
//! Design constraints:
//! - Every fault is a real one of the operating system or of a real peer, never a stub:
//!   `kill` (SIGKILL and restart), `pause` (SIGSTOP, then SIGCONT), `broker-restart`
//!   (the broker SIGKILLed and started again on its data directory, `.ci/kafka.sh`),
//!   `partition` (a stage cut from the broker by Toxiproxy, built from its Go module,
//!   between the stage and a listener the broker advertises at the proxy: Kafka clients
//!   connect to the advertised address), `disk-full` (the sealer's record directory on
//!   a tmpfs of `--disk-mib` made by the run, filled with a ballast file, then freed),
//!   `clock-jump` (the stage's wall clock stepped forward and back by minutes through
//!   Debian's libfaketime; its monotonic clock is left alone).
//! - A fault is injected, held, healed, then followed until every envelope offered
//!   before the heal is sealed and the next verdict arrives (the sink's output is
//!   checked after the run), within [`RECOVERY_LIMIT`]; what the stages logged at WARN
//!   and ERROR meanwhile is kept with the fault.
//! - Loopback only; what the rig starts (Toxiproxy, the tmpfs) it stops and unmounts
//!   on drop, whatever happened.

use super::{LoadArgs, Setup, Shared, StageProc};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read as _, Seek as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The stages a fault can name (the load run's process names).
pub const STAGES: [&str; 5] = ["ingest", "sealer", "slicer", "engine-0", "sink"];

/// How long a fault is followed after it heals before it counts as not recovered.
pub const RECOVERY_LIMIT: Duration = Duration::from_secs(150);

/// Where Debian's `faketime` package puts the library.
pub const FAKETIME_LIB: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// One fault of a nemesis plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// SIGKILL a stage and start it again at once.
    Kill(String),
    /// SIGSTOP the stages for the hold, then SIGCONT.
    Pause(Vec<String>),
    /// SIGKILL the broker, restart it on its data directory after a few seconds.
    BrokerRestart,
    /// Cut a stage from the broker for the hold (Toxiproxy), then heal.
    Partition(String),
    /// Fill the sealer's record filesystem for the hold, then free it.
    DiskFull,
    /// Step a stage's wall clock forward by [`CLOCK_STEP_S`], then back by twice that,
    /// then to the true time, each for half the hold.
    ClockJump(String),
}

/// How far a clock jump steps (seconds).
pub const CLOCK_STEP_S: i64 = 300;

impl Fault {
    /// The faults of one `--nemesis` item: `all`, `once`, a fault's name (every stage
    /// it applies to) or `NAME:STAGE[+STAGE]`.
    pub fn parse(spec: &str) -> anyhow::Result<Vec<Fault>> {
        let (name, target) = match spec.split_once(':') {
            Some((n, t)) => (n.trim(), Some(t.trim())),
            None => (spec.trim(), None),
        };
        let stages = |t: Option<&str>, default: &[&str]| -> anyhow::Result<Vec<String>> {
            let named: Vec<String> = match t {
                Some(t) => t.split('+').map(|s| s.trim().to_string()).collect(),
                None => default.iter().map(|s| s.to_string()).collect(),
            };
            for s in &named {
                if !STAGES.contains(&s.as_str()) {
                    anyhow::bail!(
                        "--nemesis {spec}: no stage {s:?} (one of {})",
                        STAGES.join(", ")
                    );
                }
            }
            Ok(named)
        };
        Ok(match name {
            "all" if target.is_none() => {
                let mut v = Vec::new();
                for f in [
                    "kill",
                    "pause",
                    "pause:sealer+ingest",
                    "broker-restart",
                    "partition",
                    "disk-full",
                    "clock-jump",
                ] {
                    v.extend(Fault::parse(f)?);
                }
                v
            }
            "once" if target.is_none() => vec![
                Fault::Kill("slicer".into()),
                Fault::Pause(vec!["sealer".into(), "ingest".into()]),
                Fault::BrokerRestart,
                Fault::Partition("sealer".into()),
                Fault::DiskFull,
                Fault::ClockJump("sealer".into()),
            ],
            "kill" => stages(target, &STAGES)?
                .into_iter()
                .map(Fault::Kill)
                .collect(),
            "pause" => match target {
                Some(_) => vec![Fault::Pause(stages(target, &[])?)],
                None => STAGES
                    .iter()
                    .map(|s| Fault::Pause(vec![s.to_string()]))
                    .collect(),
            },
            "broker-restart" if target.is_none() => vec![Fault::BrokerRestart],
            "partition" => stages(target, &STAGES)?
                .into_iter()
                .map(Fault::Partition)
                .collect(),
            "disk-full" if target.is_none_or(|t| t == "sealer") => vec![Fault::DiskFull],
            "clock-jump" => stages(target, &["sealer", "slicer"])?
                .into_iter()
                .map(Fault::ClockJump)
                .collect(),
            _ => anyhow::bail!(
                "--nemesis {spec}: not a fault (all, once, kill, pause, broker-restart, partition, disk-full, clock-jump; NAME:STAGE[+STAGE] names stages)"
            ),
        })
    }

    /// The fault in a report's words, e.g. `pause sealer+ingest`.
    pub fn label(&self) -> String {
        match self {
            Fault::Kill(s) => format!("kill {s}"),
            Fault::Pause(s) => format!("pause {}", s.join("+")),
            Fault::BrokerRestart => "broker-restart".into(),
            Fault::Partition(s) => format!("partition {s}"),
            Fault::DiskFull => "disk-full sealer".into(),
            Fault::ClockJump(s) => format!("clock-jump {s}"),
        }
    }

    /// The stages whose logs tell how the fault went (every stage for the broker).
    fn stages(&self) -> Vec<String> {
        match self {
            Fault::Kill(s) | Fault::Partition(s) | Fault::ClockJump(s) => vec![s.clone()],
            Fault::Pause(s) => s.clone(),
            Fault::BrokerRestart => STAGES.iter().map(|s| s.to_string()).collect(),
            Fault::DiskFull => vec!["sealer".into()],
        }
    }

    /// How long the fault is held before it heals.
    fn hold(&self, hold: Duration) -> Duration {
        match self {
            Fault::Kill(_) => Duration::ZERO,
            Fault::BrokerRestart => Duration::from_secs(5),
            _ => hold,
        }
    }
}

/// The whole plan of a run from its `--nemesis` items (and `--kill-each`).
pub fn plan(args: &LoadArgs) -> anyhow::Result<Vec<Fault>> {
    let mut plan = Vec::new();
    if args.kill_each {
        plan.extend(Fault::parse("kill")?);
    }
    for item in args.nemesis.iter().flat_map(|s| s.split(',')) {
        if !item.trim().is_empty() {
            plan.extend(Fault::parse(item)?);
        }
    }
    Ok(plan)
}

/// The shortest feed a plan fits in (s): every fault's hold and a recovery allowance
/// of 15 s, 15 s before the first.
pub fn needed_s(plan: &[Fault], hold: Duration) -> f64 {
    15.0 + plan
        .iter()
        .map(|f| f.hold(hold).as_secs_f64() + 15.0)
        .sum::<f64>()
}

/// What a plan needs set up before its stages start, and sets up: Toxiproxy with one
/// proxy per stage a partition names, the tmpfs under the sealer's directory,
/// libfaketime for the stages a clock jump names. Torn down on drop.
pub struct Rig {
    broker_dir: Option<PathBuf>,
    toxiproxy: Option<Child>,
    api: u16,
    /// Stage → the proxy port its Kafka clients bootstrap at.
    proxies: BTreeMap<String, u16>,
    /// The mounted tmpfs (the sealer's directory).
    tmpfs: Option<PathBuf>,
    /// Stage → its libfaketime offset file.
    clocks: BTreeMap<String, PathBuf>,
}

impl Rig {
    /// Sets up what `plan` needs under the run's scratch directory `work`.
    pub fn prepare(args: &LoadArgs, plan: &[Fault], work: &Path) -> anyhow::Result<Rig> {
        let mut rig = Rig {
            broker_dir: args.broker_dir.clone(),
            toxiproxy: None,
            api: 0,
            proxies: BTreeMap::new(),
            tmpfs: None,
            clocks: BTreeMap::new(),
        };
        let needs_broker = plan
            .iter()
            .any(|f| matches!(f, Fault::BrokerRestart | Fault::Partition(_)));
        if needs_broker && rig.broker_dir.is_none() {
            anyhow::bail!("--nemesis broker-restart and partition need --broker-dir (the directory of `bash .ci/kafka.sh start DIR`; with AUDITA_KAFKA_PROXIED=6 for partitions)");
        }
        let partitioned: BTreeSet<&String> = plan
            .iter()
            .filter_map(|f| match f {
                Fault::Partition(s) => Some(s),
                _ => None,
            })
            .collect();
        if !partitioned.is_empty() {
            rig.start_toxiproxy(args, &partitioned)?;
        }
        if plan.contains(&Fault::DiskFull) {
            let dir = work.join("sealer");
            std::fs::create_dir_all(&dir)?;
            let out = Command::new("mount")
                .args(["-t", "tmpfs", "-o"])
                .arg(format!("size={}m", args.disk_mib))
                .arg("audita-nemesis")
                .arg(&dir)
                .output()?;
            if !out.status.success() {
                anyhow::bail!(
                    "--nemesis disk-full: cannot mount a {} MiB tmpfs at {} (needs root): {}",
                    args.disk_mib,
                    dir.display(),
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
            rig.tmpfs = Some(dir);
        }
        for f in plan {
            if let Fault::ClockJump(s) = f {
                if !Path::new(FAKETIME_LIB).exists() {
                    anyhow::bail!("--nemesis clock-jump needs libfaketime ({FAKETIME_LIB}: apt-get install faketime)");
                }
                let file = work.join(format!("{s}.faketime"));
                std::fs::write(&file, "+0\n")?;
                rig.clocks.insert(s.clone(), file);
            }
        }
        Ok(rig)
    }

    /// Starts Toxiproxy and one proxy per stage in `stages`, each on one of the
    /// broker's proxied listeners.
    fn start_toxiproxy(
        &mut self,
        args: &LoadArgs,
        stages: &BTreeSet<&String>,
    ) -> anyhow::Result<()> {
        let dir = self.broker_dir.clone().unwrap_or_default();
        let listeners: Vec<(u16, u16)> = std::fs::read_to_string(dir.join("proxied"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let (a, b) = l.split_once(' ')?;
                Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
            })
            .collect();
        if listeners.len() < stages.len() {
            anyhow::bail!(
                "--nemesis partition: the broker of {} has {} proxied listener(s), {} needed (start it with AUDITA_KAFKA_PROXIED={})",
                dir.display(),
                listeners.len(),
                stages.len(),
                STAGES.len() + 1
            );
        }
        let bin = args
            .toxiproxy
            .clone()
            .unwrap_or_else(|| PathBuf::from("toxiproxy-server"));
        self.api = free_port()?;
        let child = Command::new(&bin)
            .args(["-host", "127.0.0.1", "-port", &self.api.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| anyhow::anyhow!("--nemesis partition: cannot start {} ({e}); build it with `go install github.com/Shopify/toxiproxy/v2/cmd/server@v2.5.0` or name it with --toxiproxy", bin.display()))?;
        self.toxiproxy = Some(child);
        let up = Instant::now() + Duration::from_secs(20);
        while self.http("GET", "/version", None).is_err() {
            if Instant::now() >= up {
                anyhow::bail!(
                    "--nemesis partition: Toxiproxy did not answer on 127.0.0.1:{}",
                    self.api
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        for (stage, (upstream, proxy)) in stages.iter().zip(listeners) {
            // The broker advertises these ports: one still held (a Toxiproxy of an
            // earlier run killed before it could stop its own) cannot be proxied.
            if std::net::TcpListener::bind(("127.0.0.1", proxy)).is_err() {
                anyhow::bail!(
                    "--nemesis partition: port {proxy}, where the broker advertises its listener for {stage}, is taken (a toxiproxy-server left by an earlier run? stop it: pkill -f toxiproxy-server)"
                );
            }
            self.http(
                "POST",
                "/proxies",
                Some(json!({
                    "name": stage,
                    "listen": format!("127.0.0.1:{proxy}"),
                    "upstream": format!("127.0.0.1:{upstream}"),
                    "enabled": true,
                })),
            )?;
            self.proxies.insert(stage.to_string(), proxy);
        }
        Ok(())
    }

    /// One request to Toxiproxy's HTTP API; `Err` unless it answers 2xx.
    fn http(&self, method: &str, path: &str, body: Option<Value>) -> anyhow::Result<String> {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.api))?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )?;
        let mut answer = String::new();
        s.read_to_string(&mut answer)?;
        let status = answer.split(' ').nth(1).unwrap_or("");
        if !status.starts_with('2') {
            anyhow::bail!(
                "toxiproxy {method} {path}: {}",
                answer.lines().next().unwrap_or("")
            );
        }
        Ok(answer)
    }

    /// The bootstrap a stage's Kafka clients use when a partition may cut it.
    pub fn bootstrap_for(&self, stage: &str) -> Option<String> {
        self.proxies.get(stage).map(|p| format!("127.0.0.1:{p}"))
    }

    /// The environment of a stage whose clock may jump: libfaketime, reading its offset
    /// from a file each second, the monotonic clock left true.
    pub fn env_for(&self, stage: &str) -> Vec<(String, String)> {
        match self.clocks.get(stage) {
            Some(file) => vec![
                ("LD_PRELOAD".into(), FAKETIME_LIB.into()),
                ("FAKETIME_TIMESTAMP_FILE".into(), file.display().to_string()),
                ("FAKETIME_CACHE_DURATION".into(), "1".into()),
                ("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into()),
            ],
            None => Vec::new(),
        }
    }

    fn broker(&self, what: &str) -> anyhow::Result<()> {
        let dir = self
            .broker_dir
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("no --broker-dir"))?;
        let script = std::fs::read_to_string(dir.join("script")).map_err(|e| {
            anyhow::anyhow!(
                "{}/script: {e} (a broker of .ci/kafka.sh start)",
                dir.display()
            )
        })?;
        let out = Command::new("bash")
            .arg(script.trim())
            .arg(what)
            .arg(dir)
            .output()?;
        if !out.status.success() {
            anyhow::bail!(
                "kafka {what}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }

    fn cut(&self, stage: &str, on: bool) -> anyhow::Result<()> {
        for stream in ["upstream", "downstream"] {
            let name = format!("cut-{stream}");
            if on {
                self.http(
                    "POST",
                    &format!("/proxies/{stage}/toxics"),
                    Some(json!({
                        "name": name, "type": "timeout", "stream": stream,
                        "toxicity": 1.0, "attributes": {"timeout": 0},
                    })),
                )?;
            } else {
                self.http("DELETE", &format!("/proxies/{stage}/toxics/{name}"), None)?;
            }
        }
        Ok(())
    }

    /// Fills the tmpfs with a ballast file until the filesystem refuses; returns its
    /// bytes.
    fn fill(&self) -> anyhow::Result<u64> {
        let dir = self
            .tmpfs
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("no tmpfs"))?;
        let mut f = std::fs::File::create(dir.join("nemesis.ballast"))?;
        let chunk = vec![0u8; 1 << 20];
        let mut written = 0u64;
        loop {
            match f.write(&chunk) {
                Ok(0) => break,
                Ok(n) => written += n as u64,
                Err(_) => break,
            }
        }
        Ok(written)
    }

    fn free(&self) -> anyhow::Result<()> {
        if let Some(dir) = &self.tmpfs {
            std::fs::remove_file(dir.join("nemesis.ballast"))?;
        }
        Ok(())
    }

    fn set_clock(&self, stage: &str, offset_s: i64) -> anyhow::Result<()> {
        let file = self
            .clocks
            .get(stage)
            .ok_or_else(|| anyhow::anyhow!("no clock for {stage}"))?;
        let tmp = file.with_extension("tmp");
        std::fs::write(&tmp, format!("{offset_s:+}\n"))?;
        std::fs::rename(&tmp, file)?;
        Ok(())
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        if let Some(c) = &mut self.toxiproxy {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(dir) = &self.tmpfs {
            let _ = Command::new("umount").arg("-l").arg(dir).status();
        }
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn signal(pid: u32, sig: &str) -> anyhow::Result<()> {
    let st = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()?;
    if !st.success() {
        anyhow::bail!("kill -{sig} {pid} failed");
    }
    Ok(())
}

/// Runs `plan` while the load is offered: each fault injected, held, healed and
/// followed until the pipeline recovers; returns one report per fault.
pub fn run(
    setup: &Setup,
    shared: &Shared,
    procs: &mut [StageProc],
    pids: &Mutex<Vec<(String, u32)>>,
    start: Instant,
    rig: &Rig,
    plan: &[Fault],
) -> anyhow::Result<Vec<Value>> {
    let mut next = start + Duration::from_secs(15);
    let mut reports = Vec::new();
    for fault in plan {
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        reports.push(one(setup, shared, procs, pids, start, rig, fault)?);
        next = Instant::now() + Duration::from_secs(5);
    }
    Ok(reports)
}

/// One fault of the plan, injected, held, healed and followed; its report.
fn one(
    setup: &Setup,
    shared: &Shared,
    procs: &mut [StageProc],
    pids: &Mutex<Vec<(String, u32)>>,
    start: Instant,
    rig: &Rig,
    fault: &Fault,
) -> anyhow::Result<Value> {
    let hold = Duration::from_secs_f64(setup.args.fault_seconds);
    let log_from: BTreeMap<String, u64> = procs
        .iter()
        .map(|p| {
            (
                p.name.clone(),
                std::fs::metadata(&p.log).map_or(0, |m| m.len()),
            )
        })
        .collect();
    let watched: Vec<(String, std::net::SocketAddr)> = fault
        .stages()
        .iter()
        .filter_map(|s| procs.iter().find(|p| p.name == *s))
        .map(|p| (p.name.clone(), p.metrics))
        .collect();
    let counted = |a: std::net::SocketAddr| {
        scrape(a)
            .get("audita_stage_faults_total")
            .copied()
            .unwrap_or(0.0)
    };
    let faults_before: Vec<f64> = watched.iter().map(|(_, a)| counted(*a)).collect();
    let verdicts_before = judged(shared);
    let injected = Instant::now();
    let feed_running = shared.offered.load(Ordering::Relaxed) < setup.envelopes;
    // The stages' own alarm (`audita_stage_stalled`), sampled until recovery.
    let stalled: Mutex<BTreeSet<String>> = Mutex::default();
    let watching = std::sync::atomic::AtomicBool::new(true);
    let outcome = std::thread::scope(|sc| {
        sc.spawn(|| {
            while watching.load(Ordering::Relaxed) {
                for (n, a) in &watched {
                    if scrape(*a)
                        .get("audita_stage_stalled")
                        .is_some_and(|v| *v > 0.0)
                    {
                        stalled
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(n.clone());
                    }
                }
                std::thread::sleep(Duration::from_millis(250));
            }
        });
        let outcome = inject(setup, procs, pids, rig, fault, fault.hold(hold)).map(|note| {
            let healed = Instant::now();
            eprintln!(
                "audita-load load: nemesis {} at {:.0} s, healed after {:.1} s",
                fault.label(),
                injected.duration_since(start).as_secs_f64(),
                healed.duration_since(injected).as_secs_f64()
            );
            (note, healed, follow(setup, shared, fault, verdicts_before))
        });
        watching.store(false, Ordering::Relaxed);
        outcome
    });
    let (note, healed, recovered) = outcome?;
    // What the stages' metrics said: the faults they counted (a restarted process
    // counts from 0 again) and whether they showed themselves stalled.
    let stalled = stalled.into_inner().unwrap_or_else(|e| e.into_inner());
    let alerted: BTreeMap<String, Value> = watched
        .iter()
        .zip(faults_before)
        .map(|((n, a), before)| {
            let counted = (counted(*a) - before).max(0.0);
            (
                n.clone(),
                json!({"faults_counted": counted, "stalled_seen": stalled.contains(n)}),
            )
        })
        .filter(|(_, v)| {
            v["faults_counted"].as_f64().unwrap_or(0.0) > 0.0 || v["stalled_seen"] == true
        })
        .collect();
    let logged = fault
        .stages()
        .iter()
        .filter_map(|s| procs.iter().find(|p| p.name == *s))
        .map(|p| {
            let from = log_from.get(&p.name).copied().unwrap_or(0);
            (p.name.clone(), warnings(&p.log, from))
        })
        .filter(|(_, w)| !w.is_empty())
        .collect::<BTreeMap<_, _>>();
    Ok(json!({
        "fault": fault.label(),
        "at_s": injected.duration_since(start).as_secs_f64(),
        "held_s": healed.duration_since(injected).as_secs_f64(),
        "during_feed": feed_running,
        "recovery_s": recovered.map(|d| d.as_secs_f64()),
        "recovered_by": if matches!(fault, Fault::Kill(s) if s == "sink") {
            "checked after the run (the sink's tables hold every verdict)"
        } else {
            "every envelope offered before the heal sealed, and the next verdict"
        },
        "note": note,
        "logged": logged,
        "alerted": alerted,
    }))
}

/// Follows a healed fault until every envelope offered by now is sealed and the next
/// verdict arrives, within [`RECOVERY_LIMIT`]: the time that took.
fn follow(
    setup: &Setup,
    shared: &Shared,
    fault: &Fault,
    verdicts_before: usize,
) -> Option<Duration> {
    let healed = Instant::now();
    let offered_at_heal = shared.offered.load(Ordering::Relaxed);
    loop {
        let sealed = shared.seen.lock().unwrap_or_else(|e| e.into_inner()).sealed;
        let all_judged = judged(shared) >= setup.incidents.len();
        let done = sealed >= offered_at_heal
            && (judged(shared) > verdicts_before
                || all_judged
                || matches!(fault, Fault::Kill(s) if s == "sink"));
        if done {
            return Some(healed.elapsed());
        }
        if healed.elapsed() >= RECOVERY_LIMIT {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The value of each `audita_stage_*` metric a stage's /metrics serves, summed over
/// its labels (empty when it does not answer: a stage paused or restarting).
fn scrape(addr: std::net::SocketAddr) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return out;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    if write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .is_err()
    {
        return out;
    }
    let mut text = String::new();
    let _ = s.take(4 << 20).read_to_string(&mut text);
    for line in text.lines().filter(|l| l.starts_with("audita_stage_")) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let name = series.split('{').next().unwrap_or(series).to_string();
        if let Ok(v) = value.parse::<f64>() {
            *out.entry(name).or_insert(0.0) += v;
        }
    }
    out
}

fn judged(shared: &Shared) -> usize {
    let s = shared.seen.lock().unwrap_or_else(|e| e.into_inner());
    s.latencies.len() + s.abstained.len()
}

/// Injects one fault, holds it for `hold` and heals it; returns a note of what was
/// done (e.g. the ballast's size).
fn inject(
    setup: &Setup,
    procs: &mut [StageProc],
    pids: &Mutex<Vec<(String, u32)>>,
    rig: &Rig,
    fault: &Fault,
    hold: Duration,
) -> anyhow::Result<String> {
    let pid_of = |procs: &[StageProc], name: &str| -> anyhow::Result<u32> {
        procs
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.child.id())
            .ok_or_else(|| anyhow::anyhow!("--nemesis: no stage process {name} in this run"))
    };
    Ok(match fault {
        Fault::Kill(name) => {
            let i = procs
                .iter()
                .position(|p| p.name == *name)
                .ok_or_else(|| anyhow::anyhow!("--nemesis: no stage process {name} in this run"))?;
            let p = &mut procs[i];
            p.child.kill()?;
            let _ = p.child.wait();
            let again = setup.spawner.spawn(p.stage, &p.name)?;
            *p = again;
            let new_pid = p.child.id();
            if let Some(slot) = pids
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter_mut()
                .find(|(n, _)| n == name)
            {
                slot.1 = new_pid;
            }
            "SIGKILL, started again at once".into()
        }
        Fault::Pause(names) => {
            let ids: Vec<u32> = names
                .iter()
                .map(|n| pid_of(procs, n))
                .collect::<anyhow::Result<_>>()?;
            for id in &ids {
                signal(*id, "STOP")?;
            }
            std::thread::sleep(hold);
            for id in ids.iter().rev() {
                signal(*id, "CONT")?;
            }
            format!("SIGSTOP for {:.0} s, then SIGCONT", hold.as_secs_f64())
        }
        Fault::BrokerRestart => {
            rig.broker("kill")?;
            std::thread::sleep(hold);
            let t = Instant::now();
            rig.broker("restart")?;
            format!(
                "broker SIGKILLed, down {:.0} s, restarted on its data in {:.1} s",
                hold.as_secs_f64(),
                t.elapsed().as_secs_f64()
            )
        }
        Fault::Partition(name) => {
            rig.cut(name, true)?;
            std::thread::sleep(hold);
            rig.cut(name, false)?;
            format!(
                "cut from the broker for {:.0} s (Toxiproxy timeout toxic, both directions)",
                hold.as_secs_f64()
            )
        }
        Fault::DiskFull => {
            let ballast = rig.fill()?;
            std::thread::sleep(hold);
            rig.free()?;
            format!(
                "record filesystem filled ({} MiB ballast) for {:.0} s, then freed",
                ballast >> 20,
                hold.as_secs_f64()
            )
        }
        Fault::ClockJump(name) => {
            rig.set_clock(name, CLOCK_STEP_S)?;
            std::thread::sleep(hold / 2);
            rig.set_clock(name, -CLOCK_STEP_S)?;
            std::thread::sleep(hold / 2);
            rig.set_clock(name, 0)?;
            format!(
                "wall clock +{CLOCK_STEP_S} s for {:.0} s, then -{CLOCK_STEP_S} s for {:.0} s, then true",
                (hold / 2).as_secs_f64(),
                (hold / 2).as_secs_f64()
            )
        }
    })
}

/// The WARN and ERROR lines a stage logged from byte `from` of its log, each distinct
/// message once with its count (timestamps and numbers aside), at most 8.
fn warnings(log: &Path, from: u64) -> Vec<Value> {
    let mut text = String::new();
    if let Ok(mut f) = std::fs::File::open(log) {
        let _ = f.seek(std::io::SeekFrom::Start(from));
        let _ = f.take(8 << 20).read_to_string(&mut text);
    }
    let mut seen: Vec<(String, String, u64)> = Vec::new();
    for line in text.lines() {
        let line = plain(line);
        let line = line.as_str();
        if !(line.contains(" ERROR ") || line.contains(" WARN ")) {
            continue;
        }
        // The timestamp is the first word; the rest, without digits, is the message.
        let rest = line.split_once(' ').map_or(line, |(_, r)| r).trim();
        let shape: String = rest
            .chars()
            .filter(|c| !c.is_ascii_digit())
            .take(200)
            .collect();
        match seen.iter_mut().find(|(s, _, _)| *s == shape) {
            Some(e) => e.2 += 1,
            None => seen.push((shape, rest.chars().take(400).collect(), 1)),
        }
    }
    seen.into_iter()
        .take(8)
        .map(|(_, first, n)| json!({"line": first, "count": n}))
        .collect()
}

/// `line` without ANSI colour sequences (`ESC [ … m`).
fn plain(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_parse_and_name_their_stages() {
        assert_eq!(
            Fault::parse("pause:sealer+ingest").unwrap(),
            vec![Fault::Pause(vec!["sealer".into(), "ingest".into()])]
        );
        assert_eq!(Fault::parse("kill").unwrap().len(), STAGES.len());
        assert_eq!(Fault::parse("once").unwrap().len(), 6);
        let all = Fault::parse("all").unwrap();
        for f in [
            "broker-restart",
            "disk-full sealer",
            "clock-jump slicer",
            "partition sink",
        ] {
            assert!(all.iter().any(|x| x.label() == f), "{f} in all");
        }
        let e = Fault::parse("partition:brokr").unwrap_err().to_string();
        assert!(e.contains("no stage \"brokr\""), "{e}");
        let e = Fault::parse("flood").unwrap_err().to_string();
        assert!(e.contains("not a fault"), "{e}");
        assert!(needed_s(&Fault::parse("once").unwrap(), Duration::from_secs(10)) > 60.0);
    }

    #[test]
    fn warnings_are_counted_once_per_message() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("sealer.log");
        std::fs::write(
            &log,
            "2026-12-06T12:00:00.1Z  INFO audita: fine\n\
             2026-12-06T12:00:01.2Z  WARN audita_bus::kafka: kafka: the broker is unreachable\n\
             2026-12-06T12:00:06.3Z  WARN audita_bus::kafka: kafka: the broker is unreachable\n\
             2026-12-06T12:00:07.0Z ERROR audita_pipeline::supervise: stage cannot keep its promise wait_s=1\n\
             \u{1b}[2m2026-12-06T12:00:08.0Z\u{1b}[0m \u{1b}[33m WARN\u{1b}[0m audita_bus::kafka: kafka: the broker is unreachable\n",
        )
        .unwrap();
        let w = warnings(&log, 0);
        assert_eq!(w.len(), 2);
        assert_eq!(
            w[0]["count"], 3,
            "a coloured line counts as the same message"
        );
        assert!(w[1]["line"].as_str().unwrap().starts_with("ERROR"));
        assert!(warnings(&log, std::fs::metadata(&log).unwrap().len()).is_empty());
    }
}
