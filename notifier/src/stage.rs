//! The notifier's run loop: read `audita.alerts`, `audita.adverse` and
//! `audita.verdicts` from the group's committed offsets, keep one [`Incident`] per
//! open alert, post what changed (and every open alert each `resend`), commit what
//! has ended.
//!
//! Design constraints:
//! - A record's offset is committed only when every record before it in its
//!   partition is *settled*: skipped (malformed, a near miss), or belonging to an
//!   incident whose alert has ended and whose last state Alertmanager took (or
//!   refused for good). So what a restart re-reads is exactly what it must post
//!   again, and nothing accepted is lost.
//! - Posting never blocks reading: while Alertmanager cannot be reached, records are
//!   read into the table (at most `max_incidents`) and posted once it answers.

use crate::incident::{after, Incident};
use crate::{Alertmanager, NotifierError, PostError, Settings, MAX_BACKOFF};
use audita_bus::{Consumer, Delivery};
use audita_topics::{AlertRecord, VerdictRecord};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Alerts posted per request at most.
pub const BATCH: usize = 64;

/// The topic names the notifier reads (with the deployment's prefix).
#[derive(Clone, Debug)]
pub struct Topics {
    /// `audita.alerts`.
    pub alerts: String,
    /// `audita.adverse`.
    pub adverse: String,
    /// `audita.verdicts`.
    pub verdicts: String,
}

/// What one run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Records read.
    pub records: u64,
    /// Alerts Alertmanager accepted (resends included).
    pub posted: u64,
    /// Alerts Alertmanager refused for good (a 4xx).
    pub rejected: u64,
    /// Records that could not be read (skipped).
    pub malformed: u64,
    /// Posts that failed and were retried.
    pub failures: u64,
    /// Incidents held now.
    pub incidents: usize,
}

type Position = (String, u32, u64);

struct Tracked {
    incident: Incident,
    /// Records read about it (settled when it ends).
    positions: Vec<Position>,
    /// When it was first read.
    read_at: SystemTime,
    /// Changed since Alertmanager last took it.
    dirty: bool,
    /// Alertmanager refused its current state for good.
    rejected: bool,
}

impl Tracked {
    fn ends_at(&self, s: &Settings, now: SystemTime) -> SystemTime {
        match self.incident.final_at {
            Some(at) => after(at, s.hold),
            None => after(now, s.resend * 4).min(after(self.read_at, s.open_for)),
        }
    }
}

/// Read-but-unsettled offsets per partition: the committed offset is the end of the
/// settled prefix.
#[derive(Default)]
struct Offsets {
    parts: BTreeMap<(String, u32), BTreeMap<u64, bool>>,
}

impl Offsets {
    fn read(&mut self, p: &Position) {
        self.parts
            .entry((p.0.clone(), p.1))
            .or_default()
            .entry(p.2)
            .or_insert(false);
    }

    fn settle(&mut self, p: &Position) {
        if let Some(o) = self
            .parts
            .get_mut(&(p.0.clone(), p.1))
            .and_then(|m| m.get_mut(&p.2))
        {
            *o = true;
        }
    }

    /// Removes each partition's settled prefix; returns the last offset of each.
    fn committable(&mut self) -> Vec<Delivery> {
        let mut out = Vec::new();
        for ((topic, partition), offsets) in &mut self.parts {
            let mut last = None;
            while let Some(entry) = offsets.first_entry() {
                if !*entry.get() {
                    break;
                }
                last = Some(entry.remove_entry().0);
            }
            if let Some(offset) = last {
                out.push(Delivery {
                    topic: topic.clone(),
                    partition: *partition,
                    offset,
                    key: Vec::new(),
                    payload: Vec::new(),
                });
            }
        }
        out
    }
}

/// Retries with a doubling wait, reset by a success.
struct Backoff {
    next: Instant,
    wait: Duration,
    failing_since: Option<Instant>,
    logged: Option<Instant>,
}

impl Backoff {
    fn new() -> Backoff {
        Backoff {
            next: Instant::now(),
            wait: Duration::from_millis(100),
            failing_since: None,
            logged: None,
        }
    }

    fn ready(&self) -> bool {
        Instant::now() >= self.next
    }

    fn failed(&mut self, e: &PostError, pending: usize) {
        let now = Instant::now();
        self.next = now + self.wait;
        self.wait = (self.wait * 2).min(MAX_BACKOFF);
        let since = *self.failing_since.get_or_insert(now);
        // One line when it starts failing, then one every 30 s while it goes on.
        if self
            .logged
            .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(30))
        {
            self.logged = Some(now);
            tracing::error!(
                error = %e,
                pending,
                failing_for_s = now.duration_since(since).as_secs(),
                "notifier: cannot post to Alertmanager; retrying with backoff, nothing is committed until it answers"
            );
        }
    }

    fn succeeded(&mut self) {
        if let Some(since) = self.failing_since.take() {
            tracing::info!(
                after_s = since.elapsed().as_secs(),
                "notifier: Alertmanager answers again"
            );
        }
        self.wait = Duration::from_millis(100);
        self.logged = None;
        self.next = Instant::now();
    }
}

/// The notifier's state over one run.
struct Notifier<'a> {
    s: &'a Settings,
    am: &'a Alertmanager,
    topics: &'a Topics,
    table: BTreeMap<String, Tracked>,
    offsets: Offsets,
    backoff: Backoff,
    stats: Stats,
}

impl Notifier<'_> {
    fn starts_at(&self, t_ms: u64, now: SystemTime) -> SystemTime {
        match self.s.record_origin_ms {
            Some(origin) => {
                let ms = origin.saturating_add(t_ms as i64).max(0) as u64;
                (UNIX_EPOCH + Duration::from_millis(ms)).min(now)
            }
            None => now,
        }
    }

    fn malformed(&mut self, d: &Delivery, reason: &str) {
        self.stats.malformed += 1;
        tracing::error!(
            topic = %d.topic,
            partition = d.partition,
            offset = d.offset,
            "notifier: record skipped: {reason}"
        );
    }

    /// Takes one record into the table.
    fn take(&mut self, d: &Delivery, now: SystemTime) {
        self.stats.records += 1;
        let pos: Position = (d.topic.clone(), d.partition, d.offset);
        self.offsets.read(&pos);
        let taken = if d.topic == self.topics.alerts {
            self.take_alert(&d.payload, now)
        } else if d.topic == self.topics.adverse {
            serde_json::from_slice(&d.payload)
                .map_err(|e| format!("declaration is not JSON: {e}"))
                .and_then(|v: serde_json::Value| {
                    let name = v
                        .get("incident")
                        .and_then(|i| i.as_str())
                        .unwrap_or_default()
                        .to_string();
                    let slot = self.table.get(&name).map(|t| t.incident.clone());
                    Incident::take_declaration(slot, &v, now).map(Some)
                })
        } else if d.topic == self.topics.verdicts {
            serde_json::from_slice::<VerdictRecord>(&d.payload)
                .map_err(|e| format!("verdict record unreadable: {e}"))
                .and_then(|r| {
                    let slot = self.table.get(&r.incident).map(|t| t.incident.clone());
                    Incident::take_verdict(slot, &r, now).map(Some)
                })
        } else {
            Err(format!(
                "a record of topic {} the notifier does not read",
                d.topic
            ))
        };
        match taken {
            Ok(Some(incident)) => self.track(incident, pos, now),
            Ok(None) => self.offsets.settle(&pos),
            Err(reason) => {
                self.malformed(d, &reason);
                self.offsets.settle(&pos);
            }
        }
    }

    fn take_alert(&mut self, payload: &[u8], now: SystemTime) -> Result<Option<Incident>, String> {
        let a: AlertRecord =
            serde_json::from_slice(payload).map_err(|e| format!("alert record unreadable: {e}"))?;
        let Some((name, facts)) = Incident::from_alert(&a)? else {
            return Ok(None);
        };
        let starts = self.starts_at(facts.t_ms, now);
        let slot = self.table.get(&name).map(|t| t.incident.clone());
        Ok(Some(Incident::take_alert(slot, &name, facts, starts, now)))
    }

    fn track(&mut self, incident: Incident, pos: Position, now: SystemTime) {
        let t = self
            .table
            .entry(incident.incident.clone())
            .or_insert_with(|| Tracked {
                incident: incident.clone(),
                positions: Vec::new(),
                read_at: now,
                dirty: true,
                rejected: false,
            });
        if t.incident != incident || t.positions.is_empty() {
            t.incident = incident;
            t.dirty = true;
            t.rejected = false;
        }
        t.positions.push(pos);
    }

    /// Posts every dirty alert (in batches); a refused batch is posted alert by alert
    /// so that one bad alert does not hold the others back.
    fn flush(&mut self, now: SystemTime) {
        if !self.backoff.ready() {
            return;
        }
        let names: Vec<String> = self
            .table
            .iter()
            .filter(|(_, t)| t.dirty && !t.rejected)
            .map(|(n, _)| n.clone())
            .collect();
        for chunk in names.chunks(BATCH) {
            match self.post(chunk, now) {
                Ok(()) => {}
                Err(e) if e.is_transient() => {
                    self.stats.failures += 1;
                    let pending = self.table.values().filter(|t| t.dirty).count();
                    self.backoff.failed(&e, pending);
                    return;
                }
                Err(_) => {
                    for name in chunk {
                        match self.post(std::slice::from_ref(name), now) {
                            Ok(()) => {}
                            Err(e) if e.is_transient() => {
                                self.stats.failures += 1;
                                self.backoff.failed(&e, chunk.len());
                                return;
                            }
                            Err(e) => self.refused(name, &e),
                        }
                    }
                }
            }
        }
    }

    fn post(&mut self, names: &[String], now: SystemTime) -> Result<(), PostError> {
        let alerts: Vec<serde_json::Value> = names
            .iter()
            .filter_map(|n| self.table.get(n))
            .map(|t| t.incident.postable(self.s, t.ends_at(self.s, now)))
            .collect();
        self.am.post(&alerts)?;
        self.backoff.succeeded();
        self.stats.posted += alerts.len() as u64;
        for n in names {
            if let Some(t) = self.table.get_mut(n) {
                t.dirty = false;
            }
        }
        Ok(())
    }

    fn refused(&mut self, name: &str, e: &PostError) {
        self.stats.rejected += 1;
        if let Some(t) = self.table.get_mut(name) {
            t.rejected = true;
            t.dirty = false;
            tracing::error!(
                incident = name,
                status = t.incident.status.as_str(),
                "notifier: Alertmanager refused the alert, not posted again until the incident moves: {e}"
            );
        }
    }

    /// Every open alert posted again.
    fn resend(&mut self) {
        for t in self.table.values_mut().filter(|t| !t.rejected) {
            t.dirty = true;
        }
    }

    /// Drops the incidents whose alert ended and whose last state was taken (or
    /// refused), settling their records.
    fn expire(&mut self, now: SystemTime) {
        let ended: Vec<String> = self
            .table
            .iter()
            .filter(|(_, t)| !t.dirty && t.ends_at(self.s, now) <= now)
            .map(|(n, _)| n.clone())
            .collect();
        for n in ended {
            self.forget(&n);
        }
    }

    fn forget(&mut self, name: &str) {
        if let Some(t) = self.table.remove(name) {
            for p in &t.positions {
                self.offsets.settle(p);
            }
        }
    }

    fn full(&self) -> bool {
        self.table.len() >= self.s.max_incidents
    }
}

/// Runs the notifier over `input` (a member of the notifier's consumer group,
/// subscribed to the three topics of `topics`) until `stop` is set, or nothing was
/// read and nothing is left to post for `idle`.
pub fn run(
    s: &Settings,
    am: &Alertmanager,
    input: &mut dyn Consumer,
    topics: &Topics,
    stop: &AtomicBool,
    idle: Option<Duration>,
    mut observe: impl FnMut(&Stats),
) -> Result<Stats, NotifierError> {
    let mut n = Notifier {
        s,
        am,
        topics,
        table: BTreeMap::new(),
        offsets: Offsets::default(),
        backoff: Backoff::new(),
        stats: Stats::default(),
    };
    let mut last_resend = Instant::now();
    let mut idle_since = Instant::now();
    let mut warned_full = false;
    while !stop.load(Ordering::SeqCst) {
        // Read what is there (up to a batch), without waiting once one arrived.
        let mut wait = Duration::from_millis(50);
        for _ in 0..BATCH {
            if n.full() {
                if !warned_full {
                    warned_full = true;
                    tracing::warn!(
                        held = n.table.len(),
                        "notifier: max_incidents alerts held; reading waits until some end"
                    );
                }
                std::thread::sleep(wait);
                break;
            }
            warned_full = false;
            let Some(d) = input.poll(wait)? else { break };
            wait = Duration::ZERO;
            idle_since = Instant::now();
            n.take(&d, SystemTime::now());
        }
        let now = SystemTime::now();
        if last_resend.elapsed() >= s.resend {
            last_resend = Instant::now();
            n.resend();
        }
        n.flush(now);
        n.expire(now);
        let commits = n.offsets.committable();
        let refs: Vec<&Delivery> = commits.iter().collect();
        input.commit_all(&refs)?;
        n.stats.incidents = n.table.len();
        observe(&n.stats);
        let pending = n.table.values().any(|t| t.dirty);
        if !pending && idle.is_some_and(|i| idle_since.elapsed() >= i) {
            break;
        }
    }
    // What is left open stays uncommitted: the next run posts it again.
    if let Some(t) = n.table.values().find(|t| t.dirty) {
        tracing::warn!(
            incident = %t.incident.incident,
            status = t.incident.status.as_str(),
            unposted = n.table.values().filter(|t| t.dirty).count(),
            "notifier stopping with alerts not yet taken by Alertmanager; the next run posts them"
        );
    }
    Ok(n.stats)
}
