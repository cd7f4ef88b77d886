//! The sustained fleet load generator, in the manner of Tessera's `internal/hammer`:
//! a warehouse of robots under continuous control, with facility incidents injected
//! into it at a fixed rate, pre-signed and then offered to the bus at the target rate.
//!
//! Design constraints:
//! - **Background traffic is a realistic control loop** from registered principals.
//!   Robot `fleet/r<i>` publishes a `sensor_report` of its pose at
//!   [`LoadConfig::reports_per_s`] (a root message); at [`LoadConfig::commands_per_s`]
//!   its aisle's planner (`fleet/planner-<i/50>`) or dispatcher
//!   (`fleet/dispatcher-<i/10>`), alternately, issues a `move_to` or a `set_speed` to
//!   it citing the latest report (and, for `set_speed`, the `move_to` it refines); the
//!   robot answers every command with an actuation report (`tool_output` of tool
//!   `actuator`, citing the command), so the slicer's citation graph and its realised
//!   effects look like a fleet's. Every envelope has one receipt, signed by its
//!   recipient. Background principals hold keys but no registered duties, and no
//!   sensor reading contains a duty trigger (`entered`).
//! - **Incidents are facility cells** ([`crate::fleet::build_cell`]) laid into the run
//!   at [`LoadConfig::incidents_per_s`], cycling through [`crate::fleet::DEMO_MIX`], each
//!   with the facility's own duty registry entries and adverse predicates
//!   ([`Fleet::predicates_json`]). Nothing declares the incident: the deployment's
//!   monitor detects it from the sealed record; the schedule only marks its instant
//!   (`t*` + 1 ms, [`Lane::Adverse`]) for measuring latencies. A cell is only laid
//!   where its window and the slicer's grace period end before the run does, so
//!   every declaration can settle.
//! - **Time.** A record is offered when the wall clock since the first send reaches
//!   its offset; the fleet's record time is [`LIVE_ORIGIN_MS`] + that offset (plus,
//!   with [`Placement::OwnSlot`], one [`OWN_SLOT_MS`] gap per incident injected so
//!   far), so record time advances with wall time as in production. Incident cells
//!   are offered at the same pace; where they sit in record time is [`Placement`]:
//!   live (realistic: an incident's window then holds the whole fleet's traffic of
//!   those seconds) or each in its own slot (its window holds only its own messages).
//!   Messages of one author are offered in timestamp order.
//! - **Bounded.** At most [`MAX_DURATION_S`] seconds, [`MAX_ROBOTS`] robots and
//!   [`MAX_MESSAGES`] envelopes per run, checked before anything is signed; the
//!   generator only talks to the [`Producer`] it is given (loopback Kafka or the
//!   embedded bus) and stops when the schedule is exhausted.
//! - **Signing is the fleet's cost**: [`Load::build`] signs everything before the
//!   timed phase; [`feed`] only sends bytes. Deterministic: the same config gives the
//!   same bytes, whatever the number of signing threads.

use crate::fleet::{self, Cell, CellError, Fleet};
use audita_bus::{BusError, Producer};
use audita_evidence::{
    derive_signing_key, Effect, Envelope, KeyRegistry, MessageId, Payload, PrincipalId, Receipt,
    SigningKey,
};
use audita_facility::scenario::generate;
use audita_topics::names as topics;
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Longest run.
pub const MAX_DURATION_S: f64 = 3_600.0;
/// Most robots.
pub const MAX_ROBOTS: usize = 100_000;
/// Most envelopes one run may pre-sign (about 0.5 KiB each with its receipt).
pub const MAX_MESSAGES: u64 = 8_000_000;
/// Record time (ms) a cell's window must end before the run does: the slicer's grace
/// period plus a margin for the watermark to pass it.
pub const CELL_TAIL_MS: u64 = 3_000;
/// Robots per dispatcher (an aisle).
pub const ROBOTS_PER_DISPATCHER: usize = 10;
/// Robots per planner.
pub const ROBOTS_PER_PLANNER: usize = 50;

/// A scheduled record with its sort key: (record time, tie-break, record).
type Timed = (u64, u64, Scheduled);

/// What to generate. Resolve once with [`LoadConfig::validate`].
#[derive(Clone, Debug, PartialEq)]
pub struct LoadConfig {
    /// Robots in the warehouse.
    pub robots: usize,
    /// Commands per second per robot.
    pub commands_per_s: f64,
    /// Sensor reports per second per robot.
    pub reports_per_s: f64,
    /// Facility incidents injected per second (0: none).
    pub incidents_per_s: f64,
    /// Length of the run.
    pub duration: Duration,
    /// Seed of keys, phases and scenarios.
    pub seed: u64,
    /// Where incident cells sit in record time.
    pub placement: Placement,
}

/// Where incident cells sit in record time (they are offered at the same wall times
/// either way).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Placement {
    /// At the current record time, like the fleet around them: each incident's window
    /// (5–14 s of the facility world) then also holds every fleet message of those
    /// seconds, and the slicer carries all of them in the slice.
    #[default]
    Live,
    /// Each cell in its own record-time slot: when cell `k` is injected, the fleet's
    /// record time skips [`OWN_SLOT_MS`] ahead and the cell takes the skipped slot,
    /// so its window holds only its own messages. The cell's messages are then late
    /// for the event-time watermark by at most `OWN_SLOT_MS × (1 + incidents during
    /// the cell)` — 160 s at 0.5 incidents/s — well inside the sealer's and slicer's
    /// ten-minute horizons; the fleet's record time runs ahead of wall time.
    OwnSlot,
}

/// Record time of the start of the run (ms).
pub const LIVE_ORIGIN_MS: u64 = 10_000_000_000;
/// Width of one own-slot cell's record-time slot (ms): longer than any facility
/// cell (at most ~14 s) plus the slicer's grace period.
pub const OWN_SLOT_MS: u64 = 20_000;

/// Record time of the fleet's messages offered at `offset` (ms from the start).
fn fleet_time(c: &LoadConfig, incidents: &[u64], offset: u64) -> u64 {
    match c.placement {
        Placement::Live => LIVE_ORIGIN_MS + offset,
        Placement::OwnSlot => {
            let gaps = incidents.partition_point(|w| *w <= offset) as u64;
            LIVE_ORIGIN_MS + offset + OWN_SLOT_MS * gaps
        }
    }
}

impl Default for LoadConfig {
    fn default() -> Self {
        LoadConfig {
            robots: 1_000,
            commands_per_s: 10.0,
            reports_per_s: 1.0,
            incidents_per_s: 0.5,
            duration: Duration::from_secs(60),
            seed: 1,
            placement: Placement::Live,
        }
    }
}

/// Why a load cannot be generated.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A configuration value is out of range (permanent: fix the flag).
    #[error("{0}")]
    Config(String),
    /// A facility cell could not be laid (permanent).
    #[error(transparent)]
    Cell(#[from] CellError),
    /// The bus refused a record for good (a transient refusal is retried).
    #[error("bus: {0}")]
    Bus(#[from] BusError),
}

impl LoadConfig {
    /// Envelopes of the background traffic (reports, commands, actuation reports).
    pub fn background_messages(&self) -> u64 {
        let per_robot = (self.duration.as_secs_f64() * self.reports_per_s).ceil()
            + 2.0 * (self.duration.as_secs_f64() * self.commands_per_s).ceil();
        (per_robot * self.robots as f64) as u64
    }

    /// Checks every bound; the one-line error names the offending flag.
    pub fn validate(&self) -> Result<(), LoadError> {
        let bad = |m: String| Err(LoadError::Config(m));
        let secs = self.duration.as_secs_f64();
        if self.robots == 0 || self.robots > MAX_ROBOTS {
            return bad(format!("--robots must be in 1..={MAX_ROBOTS}"));
        }
        if !(self.commands_per_s > 0.0 && self.commands_per_s <= 1_000.0) {
            return bad("--rate (commands/s per robot) must be in (0, 1000]".into());
        }
        if !(self.reports_per_s > 0.0 && self.reports_per_s <= self.commands_per_s) {
            return bad("--report-rate must be in (0, --rate]".into());
        }
        if !(self.incidents_per_s >= 0.0 && self.incidents_per_s <= 100.0) {
            return bad("--incident-rate must be in [0, 100]".into());
        }
        if !(1.0..=MAX_DURATION_S).contains(&secs) {
            return bad(format!("--duration must be in 1..={MAX_DURATION_S} s"));
        }
        let n = self.background_messages();
        if n > MAX_MESSAGES {
            return bad(format!(
                "{n} messages exceed the bound of {MAX_MESSAGES} per run: lower --robots, --rate or --duration"
            ));
        }
        Ok(())
    }

    /// Offered envelopes per second (background only).
    pub fn offered_per_s(&self) -> f64 {
        self.robots as f64 * (self.reports_per_s + 2.0 * self.commands_per_s)
    }
}

/// Which topic a scheduled record goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Lane {
    /// `audita.envelopes`, keyed by author.
    Envelope,
    /// `audita.receipts`, keyed by recipient.
    Receipt,
    /// The instant a cell's adverse predicate holds (`t*` + 1 ms), keyed by incident
    /// name, with the planted declaration as its bytes: a marker for measuring, never
    /// sent — a real fleet declares nothing; the deployment's monitor stage detects
    /// the incident from the sealed record.
    Adverse,
}

/// One pre-signed record and when to offer it.
#[derive(Clone, Debug)]
pub struct Scheduled {
    /// Record time (ms from the start of the run) at which to offer it.
    pub at_ms: u64,
    /// Topic.
    pub lane: Lane,
    /// Record key (author, recipient or incident name).
    pub key: String,
    /// The exact bytes.
    pub bytes: Vec<u8>,
}

/// A generated load: the fleet (keys of every principal, duty registry, incident
/// cells) and, unless built registry-only, the pre-signed schedule in offer order.
#[derive(Clone, Debug)]
pub struct Load {
    /// The configuration it was built from.
    pub config: LoadConfig,
    /// Keys of background and cell principals; duties and declarations of the cells.
    pub fleet: Fleet,
    /// Every record in offer order (empty for [`Load::registry`]).
    pub schedule: Vec<Scheduled>,
}

impl Load {
    /// Keys, duty registry and incident cells only (what a pipeline stage needs):
    /// cheap, nothing of the background is signed.
    pub fn registry(config: &LoadConfig) -> Result<Load, LoadError> {
        config.validate()?;
        let mut keys = KeyRegistry::new();
        for name in background_principals(config.robots) {
            let key = derive_signing_key(config.seed, &name);
            keys.add_principal(principal(&name)?, key.verifying_key());
        }
        let mut principals = serde_json::Map::new();
        let mut cells = Vec::new();
        let mut files = Vec::new();
        for (k, offset) in incident_offsets(config).into_iter().enumerate() {
            let family = fleet::DEMO_MIX[k % fleet::DEMO_MIX.len()];
            let sc = generate(family, config.seed.wrapping_add(k as u64));
            let base = record_base(config, k, offset);
            let seed = config.seed;
            let cell = fleet::build_cell(
                k,
                &sc,
                &mut |n| derive_signing_key(seed, n),
                base,
                &mut keys,
                &mut principals,
            )?;
            if cell_end(&cell) - base + offset + CELL_TAIL_MS <= duration_ms(config) {
                files.push((k, fleet::cell_predicates(k, &sc)));
                cells.push(cell);
            }
        }
        let duties_json =
            json!({"standard": "reasonable_agent", "principals": principals}).to_string();
        Ok(Load {
            config: config.clone(),
            fleet: Fleet {
                roles: keys
                    .principals()
                    .map(|(p, _)| (p.to_string(), "principal".to_string()))
                    .collect(),
                keys,
                cells,
                duties_json,
                predicates_json: fleet::merge_predicates(&files).to_string(),
            },
            schedule: Vec::new(),
        })
    }

    /// The whole load, pre-signed on `threads` threads; `signed` counts envelopes as
    /// they are signed (for a progress display).
    pub fn build(
        config: &LoadConfig,
        threads: usize,
        signed: &AtomicU64,
    ) -> Result<Load, LoadError> {
        let mut load = Load::registry(config)?;
        let threads = threads.clamp(1, 64).min(config.robots);
        let chunk = config.robots.div_ceil(threads);
        let offsets = incident_offsets(config);
        let incidents = &offsets;
        let parts: Vec<Result<Vec<Timed>, LoadError>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let range = (t * chunk)..((t + 1) * chunk).min(config.robots);
                    s.spawn(move || {
                        let mut out = Vec::new();
                        for robot in range {
                            robot_traffic(config, incidents, robot, &mut out, signed)?;
                        }
                        Ok(out)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(LoadError::Config("a signing thread panicked".into()))
                    })
                })
                .collect()
        });
        // (at, tie-break, record): the tie-break orders robots, then their sequence.
        let mut all: Vec<Timed> = Vec::new();
        for p in parts {
            all.extend(p?);
        }
        for cell in &load.fleet.cells {
            let offset = offsets.get(cell.index).copied().unwrap_or(0);
            all.extend(cell_traffic(
                cell,
                record_base(config, cell.index, offset),
                offset,
            ));
        }
        all.sort_by_key(|(at, tie, s)| (*at, s.lane == Lane::Adverse, *tie));
        load.schedule = all.into_iter().map(|(_, _, s)| s).collect();
        Ok(load)
    }

    /// Envelopes in the schedule.
    pub fn envelopes(&self) -> usize {
        self.schedule
            .iter()
            .filter(|s| s.lane == Lane::Envelope)
            .count()
    }

    /// Incident names, in injection order.
    pub fn incidents(&self) -> Vec<String> {
        self.fleet
            .cells
            .iter()
            .filter_map(|c| c.adverse.as_ref().map(|a| a.incident.clone()))
            .collect()
    }
}

fn duration_ms(c: &LoadConfig) -> u64 {
    c.duration.as_millis() as u64
}

/// Offset (ms from the start of the run) at which incident cell `k` is offered:
/// evenly spaced from 1 s on.
fn incident_offsets(c: &LoadConfig) -> Vec<u64> {
    if c.incidents_per_s <= 0.0 {
        return Vec::new();
    }
    let gap = 1_000.0 / c.incidents_per_s;
    let n = ((c.duration.as_secs_f64() - 1.0) * c.incidents_per_s)
        .floor()
        .max(0.0) as usize;
    (0..n).map(|k| 1_000 + (k as f64 * gap) as u64).collect()
}

/// Record time at which incident cell `k`, offered from `offset`, starts.
fn record_base(c: &LoadConfig, k: usize, offset: u64) -> u64 {
    match c.placement {
        Placement::Live => LIVE_ORIGIN_MS + offset,
        Placement::OwnSlot => LIVE_ORIGIN_MS + offset + OWN_SLOT_MS * k as u64,
    }
}

/// The latest record time of a cell: its last message or its window's end.
fn cell_end(cell: &Cell) -> u64 {
    let last = cell
        .envelopes
        .iter()
        .map(|e| e.envelope().timestamp + 1)
        .max()
        .unwrap_or(0);
    let window = cell
        .adverse
        .as_ref()
        .map(|a| a.window_end_ms.unwrap_or(a.t_star_ms) + 1)
        .unwrap_or(0);
    last.max(window)
}

/// A cell's records, offered at `offset + (record time − base)`.
fn cell_traffic(cell: &Cell, base: u64, offset: u64) -> Vec<Timed> {
    let tie = u64::MAX - 1_000_000 + cell.index as u64; // after background at the same ms
    let at = |t: u64| t.saturating_sub(base) + offset;
    let mut out = Vec::new();
    for (e, r) in cell.envelopes.iter().zip(&cell.receipts) {
        let t = at(e.envelope().timestamp);
        out.push((
            t,
            tie,
            Scheduled {
                at_ms: t,
                lane: Lane::Envelope,
                key: e.envelope().author.as_str().to_string(),
                bytes: e.as_bytes().to_vec(),
            },
        ));
        out.push((
            t + 1,
            tie,
            Scheduled {
                at_ms: t + 1,
                lane: Lane::Receipt,
                key: r.recipient().as_str().to_string(),
                bytes: r.as_bytes().to_vec(),
            },
        ));
    }
    if let Some(a) = &cell.adverse {
        let t = at(a.t_star_ms) + 1;
        out.push((
            t,
            tie,
            Scheduled {
                at_ms: t,
                lane: Lane::Adverse,
                key: a.incident.clone(),
                bytes: serde_json::to_vec(a).unwrap_or_default(),
            },
        ));
    }
    out
}

fn principal(name: &str) -> Result<PrincipalId, LoadError> {
    PrincipalId::new(name).map_err(|e| LoadError::Config(format!("principal {name}: {e}")))
}

fn robot_name(i: usize) -> String {
    format!("fleet/r{i}")
}
fn planner_name(i: usize) -> String {
    format!("fleet/planner-{}", i / ROBOTS_PER_PLANNER)
}
fn dispatcher_name(i: usize) -> String {
    format!("fleet/dispatcher-{}", i / ROBOTS_PER_DISPATCHER)
}

/// Every background principal of `robots` robots.
fn background_principals(robots: usize) -> Vec<String> {
    let mut names: Vec<String> = (0..robots).map(robot_name).collect();
    names.extend(
        (0..robots.div_ceil(ROBOTS_PER_PLANNER)).map(|p| planner_name(p * ROBOTS_PER_PLANNER)),
    );
    names.extend(
        (0..robots.div_ceil(ROBOTS_PER_DISPATCHER))
            .map(|d| dispatcher_name(d * ROBOTS_PER_DISPATCHER)),
    );
    names
}

/// A small deterministic mixer (splitmix64) for phases and poses.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

struct Signer {
    id: PrincipalId,
    key: SigningKey,
}

impl Signer {
    fn new(seed: u64, name: String) -> Result<Signer, LoadError> {
        Ok(Signer {
            key: derive_signing_key(seed, &name),
            id: principal(&name)?,
        })
    }
}

/// The principals of one robot's control loop.
struct Crew {
    robot: Signer,
    planner: Signer,
    dispatcher: Signer,
}

/// Where one robot's records go: the schedule being built, the robot's sequence
/// number (the low bits of its tie-breaks) and the run's count of signed envelopes.
struct RobotSchedule<'a> {
    out: &'a mut Vec<Timed>,
    /// The robot's index (the high bits of its tie-breaks).
    robot: usize,
    seq: u64,
    signed: &'a AtomicU64,
}

impl RobotSchedule<'_> {
    /// Signs `env` as `author` and its receipt as `recipient`, schedules the envelope
    /// at `at` and the receipt 1 ms later, and returns the envelope's id.
    fn push(
        &mut self,
        at: u64,
        env: Envelope,
        author: &Signer,
        recipient: &Signer,
    ) -> Result<MessageId, LoadError> {
        let robot = self.robot as u64;
        let tie = |seq: u64| (robot << 24) | seq;
        let s = env
            .sign(&author.key)
            .map_err(|e| LoadError::Config(format!("background envelope: {e}")))?;
        let id = s.id().clone();
        let r = Receipt::sign(
            id.clone(),
            recipient.id.clone(),
            s.envelope().timestamp + 1,
            &recipient.key,
        );
        self.out.push((
            at,
            tie(self.seq),
            Scheduled {
                at_ms: at,
                lane: Lane::Envelope,
                key: author.id.as_str().to_string(),
                bytes: s.into_bytes(),
            },
        ));
        self.out.push((
            at + 1,
            tie(self.seq + 1),
            Scheduled {
                at_ms: at + 1,
                lane: Lane::Receipt,
                key: recipient.id.as_str().to_string(),
                bytes: r.as_bytes().to_vec(),
            },
        ));
        self.seq += 2;
        self.signed.fetch_add(1, Ordering::Relaxed);
        Ok(id)
    }
}

/// The robot's `k`-th command, drawn from `h`: for odd `k` the planner's `move_to` a
/// pose near `pose` (which it moves there) citing the latest report, for even `k` the
/// dispatcher's `set_speed` citing the latest report and `move_to`. Returns its
/// author, payload, expected effect and citations.
fn command<'a>(
    crew: &'a Crew,
    k: u64,
    h: u64,
    pose: &mut (i64, i64),
    last_report: &Option<MessageId>,
    last_move: &Option<MessageId>,
) -> (&'a Signer, Payload, Effect, Vec<MessageId>) {
    let robot = &crew.robot;
    let report = last_report.clone().into_iter();
    let (x, y) = pose;
    if k % 2 == 1 {
        *x = (*x + (h % 2_001) as i64 - 1_000).clamp(0, 100_000);
        *y = (*y + ((h >> 16) % 2_001) as i64 - 1_000).clamp(0, 40_000);
        (
            &crew.planner,
            Payload::MoveTo {
                target: robot.id.as_str().to_string(),
                x_mm: *x,
                y_mm: *y,
            },
            Effect::AtPosition {
                target: robot.id.as_str().to_string(),
                x_mm: *x,
                y_mm: *y,
                tolerance_mm: 50,
            },
            report.collect(),
        )
    } else {
        let v = 300 + (h >> 40) % 1_200;
        (
            &crew.dispatcher,
            Payload::SetSpeed {
                target: robot.id.as_str().to_string(),
                mm_per_s: v,
            },
            Effect::Speed {
                target: robot.id.as_str().to_string(),
                mm_per_s: v,
            },
            report.chain(last_move.clone()).collect(),
        )
    }
}

/// One robot's control loop over the run: reports, commands, actuation reports and
/// their receipts, as (at, tie-break, record).
fn robot_traffic(
    c: &LoadConfig,
    incidents: &[u64],
    i: usize,
    out: &mut Vec<Timed>,
    signed: &AtomicU64,
) -> Result<(), LoadError> {
    let crew = Crew {
        robot: Signer::new(c.seed, robot_name(i))?,
        planner: Signer::new(c.seed, planner_name(i))?,
        dispatcher: Signer::new(c.seed, dispatcher_name(i))?,
    };
    let (robot, planner) = (&crew.robot, &crew.planner);
    let end = duration_ms(c);
    let cmd_gap = 1_000.0 / c.commands_per_s;
    let report_gap = 1_000.0 / c.reports_per_s;
    let phase = (mix(c.seed ^ (i as u64) << 1) % (cmd_gap.max(1.0) as u64)) as f64;
    // Actuation follows its command within the cycle.
    let act_delay = ((cmd_gap / 2.0).floor() as u64).clamp(1, 20);
    let mut schedule = RobotSchedule {
        out,
        robot: i,
        seq: 0,
        signed,
    };
    let mut next_report = phase;
    let mut next_cmd = phase + 1.0;
    let mut last_report: Option<MessageId> = None;
    let mut last_move: Option<MessageId> = None;
    let mut pose = (
        (mix(i as u64) % 100_000) as i64,
        (mix(!(i as u64)) % 40_000) as i64,
    );
    let mut k = 0u64;
    loop {
        let report_due = next_report <= next_cmd;
        let at = if report_due { next_report } else { next_cmd } as u64;
        if at + act_delay + 1 >= end {
            break;
        }
        if report_due || last_report.is_none() {
            let (x, y) = pose;
            let env = Envelope::new(
                robot.id.clone(),
                planner.id.clone(),
                fleet_time(c, incidents, at),
                Payload::SensorReport {
                    sensor: format!("{}/lidar", robot.id),
                    reading: format!("pose {x},{y} clear"),
                },
            );
            last_report = Some(schedule.push(at, env, robot, planner)?);
            next_report += report_gap;
            continue;
        }
        k += 1;
        let h = mix(c.seed ^ ((i as u64) << 32) ^ k);
        let (author, payload, effect, cites) =
            command(&crew, k, h, &mut pose, &last_report, &last_move);
        let is_move = matches!(payload, Payload::MoveTo { .. });
        let kind = payload.kind();
        let cmd = Envelope::new(
            author.id.clone(),
            robot.id.clone(),
            fleet_time(c, incidents, at),
            payload,
        )
        .cite(cites)
        .with_effect(effect);
        let cmd_id = schedule.push(at, cmd, author, robot)?;
        if is_move {
            last_move = Some(cmd_id.clone());
        }
        let done = at + act_delay;
        let act = Envelope::new(
            robot.id.clone(),
            author.id.clone(),
            fleet_time(c, incidents, done),
            Payload::ToolOutput {
                tool: "actuator".into(),
                output: format!("{kind} realised"),
            },
        )
        .cite([cmd_id]);
        schedule.push(done, act, robot, author)?;
        next_cmd += cmd_gap;
    }
    Ok(())
}

/// What [`feed`] offered.
#[derive(Clone, Debug, Default)]
pub struct FeedStats {
    /// Envelopes sent.
    pub envelopes: u64,
    /// Receipts sent.
    pub receipts: u64,
    /// Incident instants passed ([`Lane::Adverse`] markers: nothing is sent).
    pub incidents: u64,
    /// Wall time from the first send to the last.
    pub elapsed: Duration,
    /// Largest delay of a send behind its scheduled time.
    pub max_behind: Duration,
    /// Envelopes and receipts the broker acknowledged (a flush of the batch holding
    /// them returned `Ok`).
    pub acknowledged: u64,
    /// Records sent again because the flush of their batch failed (the broker gone
    /// past the producer's delivery timeout), as a fleet client resends what was
    /// never acknowledged; the sealer tells the copies apart by id.
    pub resent: u64,
    /// Indices in the schedule of records never acknowledged ([`GIVE_UP`] passed).
    pub unacknowledged: Vec<usize>,
}

/// How often [`feed`] waits for the broker's acknowledgements of what it sent.
pub const ACK_EVERY: Duration = Duration::from_millis(250);
/// How long [`feed`] keeps resending one batch whose flush fails before it counts the
/// batch unacknowledged and goes on.
pub const GIVE_UP: Duration = Duration::from_secs(180);

impl FeedStats {
    /// Achieved offered envelopes per second.
    pub fn offered_per_s(&self) -> f64 {
        self.envelopes as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Offers `schedule` to `producer` at its record times divided by `speedup` (1.0:
/// real time; `f64::INFINITY`: as fast as the bus takes it), topic names under
/// `prefix`, retrying transient refusals; calls `sent(index, record)` after each send
/// (and at each incident instant, which sends nothing: see [`Lane::Adverse`]).
pub fn feed(
    schedule: &[Scheduled],
    producer: &mut dyn Producer,
    prefix: &str,
    speedup: f64,
    mut sent: impl FnMut(usize, &Scheduled),
) -> Result<FeedStats, LoadError> {
    if speedup.is_nan() || speedup <= 0.0 {
        return Err(LoadError::Config("speedup must be positive".into()));
    }
    let names = [
        format!("{prefix}{}", topics::ENVELOPES),
        format!("{prefix}{}", topics::RECEIPTS),
    ];
    let started = Instant::now();
    let mut stats = FeedStats::default();
    // The records sent since the last acknowledged flush (indices into `schedule`).
    let mut batch: Vec<usize> = Vec::new();
    let mut last_ack = Instant::now();
    for (i, s) in schedule.iter().enumerate() {
        if last_ack.elapsed() >= ACK_EVERY && !batch.is_empty() {
            acknowledge(schedule, producer, &names, &mut batch, &mut stats)?;
            last_ack = Instant::now();
        }
        let due = Duration::from_secs_f64(s.at_ms as f64 / 1e3 / speedup);
        let now = started.elapsed();
        if let Some(wait) = due.checked_sub(now) {
            if wait >= Duration::from_millis(1) {
                std::thread::sleep(wait);
            }
        } else {
            stats.max_behind = stats.max_behind.max(now - due);
        }
        let (topic, count) = match s.lane {
            Lane::Envelope => (&names[0], &mut stats.envelopes),
            Lane::Receipt => (&names[1], &mut stats.receipts),
            Lane::Adverse => {
                stats.incidents += 1;
                sent(i, s);
                continue;
            }
        };
        send(producer, topic, s)?;
        batch.push(i);
        *count += 1;
        sent(i, s);
    }
    acknowledge(schedule, producer, &names, &mut batch, &mut stats)?;
    stats.elapsed = started.elapsed();
    Ok(stats)
}

/// Sends one record, retrying transient refusals (a full local queue).
fn send(producer: &mut dyn Producer, topic: &str, s: &Scheduled) -> Result<(), LoadError> {
    loop {
        match producer.send(topic, s.key.as_bytes(), &s.bytes) {
            Ok(()) => return Ok(()),
            Err(e) if e.is_transient() => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => return Err(e.into()),
        }
    }
}

/// Waits for the broker's acknowledgement of `batch`; while its flush fails (the
/// broker unreachable past the delivery timeout), sends the whole batch again and
/// waits again, for at most [`GIVE_UP`]. Empties `batch`.
fn acknowledge(
    schedule: &[Scheduled],
    producer: &mut dyn Producer,
    names: &[String; 2],
    batch: &mut Vec<usize>,
    stats: &mut FeedStats,
) -> Result<(), LoadError> {
    let since = Instant::now();
    loop {
        match producer.flush() {
            Ok(()) => {
                stats.acknowledged += batch.len() as u64;
                batch.clear();
                return Ok(());
            }
            Err(e) if !e.is_transient() => return Err(e.into()),
            Err(e) if since.elapsed() >= GIVE_UP => {
                tracing::error!(error = %e, records = batch.len(), "feed: a batch was never acknowledged; giving up on it");
                stats.unacknowledged.append(batch);
                return Ok(());
            }
            Err(e) => {
                tracing::warn!(error = %e, records = batch.len(), "feed: the broker did not acknowledge a batch; sending it again");
                std::thread::sleep(Duration::from_millis(500));
                for &i in batch.iter() {
                    let s = &schedule[i];
                    let topic = match s.lane {
                        Lane::Receipt => &names[1],
                        _ => &names[0],
                    };
                    send(producer, topic, s)?;
                    stats.resent += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A producer whose first `failures` flushes fail as a broker gone past the
    /// delivery timeout does; it keeps every record sent.
    struct Flaky {
        failures: usize,
        sent: Vec<Vec<u8>>,
    }

    impl Producer for Flaky {
        fn send_record(
            &mut self,
            _: &str,
            _: Option<u32>,
            _: &[u8],
            payload: &[u8],
        ) -> Result<(), BusError> {
            self.sent.push(payload.to_vec());
            Ok(())
        }
        fn flush(&mut self) -> Result<(), BusError> {
            if self.failures > 0 {
                self.failures -= 1;
                return Err(BusError::Transient("3 record(s) not delivered".into()));
            }
            Ok(())
        }
    }

    fn schedule(n: usize) -> Vec<Scheduled> {
        (0..n)
            .map(|i| Scheduled {
                at_ms: 0,
                lane: Lane::Envelope,
                key: format!("robot-{i}"),
                bytes: vec![i as u8],
            })
            .collect()
    }

    #[test]
    fn a_batch_whose_flush_fails_is_sent_again_until_acknowledged() {
        let s = schedule(3);
        let mut p = Flaky {
            failures: 2,
            sent: Vec::new(),
        };
        let stats = feed(&s, &mut p, "t.", f64::INFINITY, |_, _| {}).unwrap();
        assert_eq!(stats.acknowledged, 3);
        assert_eq!(
            stats.resent, 6,
            "the batch of 3 sent again after each failure"
        );
        assert!(stats.unacknowledged.is_empty());
        // Every record reached the broker at least once, in order each time.
        assert_eq!(p.sent.len(), 9);
        assert_eq!(p.sent[3..6], p.sent[0..3]);
    }

    #[test]
    fn a_feed_that_is_acknowledged_sends_each_record_once() {
        let s = schedule(5);
        let mut p = Flaky {
            failures: 0,
            sent: Vec::new(),
        };
        let stats = feed(&s, &mut p, "t.", f64::INFINITY, |_, _| {}).unwrap();
        assert_eq!((stats.acknowledged, stats.resent), (5, 0));
        assert_eq!(p.sent.len(), 5);
    }
}
