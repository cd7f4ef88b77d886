//! The notifier stage: every incident the monitor fires on `audita.alerts` posted to
//! Prometheus Alertmanager (`POST /api/v2/alerts`) as it is read, and the same alert
//! updated as the incident is declared (`audita.adverse`) and judged or abstained on
//! (`audita.verdicts`).
//!
//! Design constraints:
//! - **One alert per incident**, identified by its labels ([`incident::Incident::labels`]):
//!   `alertname` (the predicate), `incident`, `site`, `subject`, `severity` (the class
//!   of its severity in J, [`Settings::severity_class`]). Annotations: `summary` (one
//!   line), `status` (fired, declared, judged, abstained), `severity_j`, `report_url`
//!   (the deployment's public base URL, `reports/` and the report's file name; also the
//!   alert's `generatorURL`), `runbook_url`, `messages` (the certified messages that
//!   establish it), `culpable` (judged: the culpable principals with their ρ
//!   intervals) or `abstained` (the reason).
//! - **Alertmanager's conventions.** `startsAt` is when the incident fired (record
//!   time on the deployment's wall clock when `[clock]` says what record time is;
//!   else when the notifier first read it). An open incident (fired or declared) is
//!   posted with `endsAt` = now + 4 × `resend` and posted again every `resend`, as
//!   Prometheus does, so an Alertmanager that restarted (it keeps alerts in memory
//!   only) has every open alert back within `resend`, and one whose notifier is gone
//!   for good resolves them by itself. **What ends an incident's alert:** its verdict
//!   or abstention — posted at once with `endsAt` = the time it was read + `hold`,
//!   resent until then, so responders see the culpable principals (or the reason) on
//!   the firing alert, and Alertmanager resolves it at `endsAt`; or no verdict
//!   within `open_for` of its alert (resolved at that time). Grouping is
//!   Alertmanager's route's (`group_by: [alertname, site]` in the README).
//! - **At least once, loss-free.** The consumer group's offset of a record is
//!   committed only once the alert it belongs to has *ended* and its last state was
//!   accepted by Alertmanager (or refused for good): a restarted notifier re-reads
//!   every record of every alert still open from the committed offsets, rebuilds it
//!   and posts it again. An Alertmanager that is unreachable or answers 5xx, 408 or
//!   429 is retried with backoff (up to [`MAX_BACKOFF`]) while records keep being
//!   read into the table (bounded by `max_incidents`, past which reading waits).
//! - **Bad input** is one line and never retried forever: a malformed record
//!   (logged with topic, partition and offset, skipped, its offset committable), an
//!   alert Alertmanager refuses with another 4xx (logged with the status and its
//!   answer, not posted again until the incident moves).

#![warn(missing_docs)]
#![warn(clippy::too_many_lines)]

pub mod client;
pub mod incident;
pub mod stage;
pub mod testing;

pub use client::{Alertmanager, PostError};
pub use stage::{run, Stats, Topics};

use std::time::Duration;

/// Longest wait between two attempts to reach Alertmanager.
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// Why the notifier cannot start or go on.
#[derive(Debug, thiserror::Error)]
pub enum NotifierError {
    /// The configuration cannot work (bad URL, unreadable CA bundle): permanent.
    #[error("notifier: {0}")]
    Config(String),
    /// The bus failed (transient or not: see the source).
    #[error(transparent)]
    Bus(#[from] audita_bus::BusError),
}

/// The notifier's validated settings (`[notifier]` in `audita.toml`).
#[derive(Clone, Debug)]
pub struct Settings {
    /// Alertmanager's base URL (`http://alertmanager:9093`); alerts go to
    /// `<url>/api/v2/alerts`.
    pub url: String,
    /// The deployment's public base URL of the sink's reports, if published.
    pub public_base_url: Option<String>,
    /// The runbook's URL; `{predicate}` in it is replaced by the predicate.
    pub runbook_url: Option<String>,
    /// CA certificates (PEM) an `https://` Alertmanager is checked against (default:
    /// the web's roots).
    pub ca_pem: Option<Vec<u8>>,
    /// Basic-auth user and password.
    pub basic_auth: Option<(String, String)>,
    /// How often every open alert is posted again.
    pub resend: Duration,
    /// How long a judged or abstained incident's alert stays firing.
    pub hold: Duration,
    /// How long an incident without a verdict stays firing.
    pub open_for: Duration,
    /// Severity class `critical` from this many joules.
    pub critical_j: f64,
    /// Severity class `warning` from this many joules (below: `info`; an incident
    /// of unknown severity is `warning`).
    pub warning_j: f64,
    /// Each request's time limit.
    pub timeout: Duration,
    /// Incidents held at most (open and ended-but-held).
    pub max_incidents: usize,
    /// Unix ms of record time 0, when the deployment says (`[clock]`).
    pub record_origin_ms: Option<i64>,
}

impl Settings {
    /// Settings with the defaults for Alertmanager at `url`.
    pub fn new(url: &str) -> Settings {
        Settings {
            url: url.trim_end_matches('/').to_string(),
            public_base_url: None,
            runbook_url: None,
            ca_pem: None,
            basic_auth: None,
            resend: Duration::from_secs(60),
            hold: Duration::from_secs(3600),
            open_for: Duration::from_secs(24 * 3600),
            critical_j: 1000.0,
            warning_j: 100.0,
            timeout: Duration::from_secs(10),
            max_incidents: 10_000,
            record_origin_ms: None,
        }
    }

    /// `critical`, `warning` or `info`.
    pub fn severity_class(&self, severity_j: Option<f64>) -> &'static str {
        match severity_j {
            Some(j) if j >= self.critical_j => "critical",
            Some(j) if j < self.warning_j => "info",
            _ => "warning",
        }
    }

    /// The incident's report URL (the sink's file name under `reports/`).
    pub fn report_url(&self, incident: &str) -> Option<String> {
        self.public_base_url.as_ref().map(|b| {
            format!(
                "{}/reports/{}",
                b.trim_end_matches('/'),
                audita_topics::report_file_name(incident)
            )
        })
    }

    /// The runbook URL for `predicate`.
    pub fn runbook_url(&self, predicate: &str) -> Option<String> {
        self.runbook_url
            .as_ref()
            .map(|u| u.replace("{predicate}", predicate))
    }
}
