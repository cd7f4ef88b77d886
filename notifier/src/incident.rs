//! An incident as the notifier knows it, and the Alertmanager alert it becomes.
//!
//! Design constraints:
//! - An incident's state is a function of the *set* of records read about it, not
//!   of their order: `status` only moves forward (fired < declared < judged /
//!   abstained), and a field, once known, is kept (an alert record's fields win over
//!   the ones a declaration or a verdict fills in). So a record re-read after a
//!   restart, or a verdict read before its alert, never moves an alert back.
//! - The labels are the alert's identity in Alertmanager and never change for an
//!   incident: `alertname` (the predicate), `incident`, `site` (when the predicate
//!   file registers the subject at one), `subject`, `severity` (the class). Posting
//!   the same labels again updates the one alert: posts are idempotent.
//! - Pure: the caller passes the wall-clock time in.

use crate::Settings;
use audita_topics::{AlertRecord, FindingView, VerdictRecord, VerdictView};
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

/// How far an incident has moved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    /// The monitor's alert: the predicate holds.
    Fired,
    /// Its declaration is on `audita.adverse`.
    Declared,
    /// A verdict was computed.
    Judged,
    /// The engine abstained, with a reason.
    Abstained,
}

impl Status {
    /// The name in annotations.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Fired => "fired",
            Status::Declared => "declared",
            Status::Judged => "judged",
            Status::Abstained => "abstained",
        }
    }

    /// Whether the incident is over (its alert ends `hold` after this).
    pub fn is_final(self) -> bool {
        matches!(self, Status::Judged | Status::Abstained)
    }
}

/// At most this many message ids in the `messages` annotation (the rest counted).
pub const MAX_MESSAGE_IDS: usize = 16;

/// One incident and what its alert says.
#[derive(Clone, Debug, PartialEq)]
pub struct Incident {
    /// Incident name (the declaration's).
    pub incident: String,
    /// Predicate (`alertname`).
    pub predicate: String,
    /// The predicate's subject.
    pub subject: Option<String>,
    /// The subject's site (cell, floor, building).
    pub site: Option<String>,
    /// Severity in joules.
    pub severity_j: Option<f64>,
    /// The monitor's one line.
    pub detail: Option<String>,
    /// Certified messages establishing it.
    pub messages: Vec<String>,
    /// How far it moved.
    pub status: Status,
    /// Judged: the culpable principals with their ρ intervals, one line.
    pub culpable: Option<String>,
    /// Abstained: why.
    pub abstained: Option<String>,
    /// When it fired (Alertmanager's `startsAt`).
    pub starts_at: SystemTime,
    /// When its final state (judged or abstained) was first read.
    pub final_at: Option<SystemTime>,
}

/// The one-line reason a record cannot be read (logged, then skipped).
pub type Malformed = String;

impl Incident {
    fn new(incident: &str, predicate: &str, status: Status, now: SystemTime) -> Incident {
        Incident {
            incident: incident.to_string(),
            predicate: predicate.to_string(),
            subject: None,
            site: None,
            severity_j: None,
            detail: None,
            messages: Vec::new(),
            status,
            culpable: None,
            abstained: None,
            starts_at: now,
            final_at: None,
        }
    }

    fn advance(&mut self, status: Status, now: SystemTime) {
        if status > self.status {
            self.status = status;
        }
        if self.status.is_final() && self.final_at.is_none() {
            self.final_at = Some(now);
        }
    }

    /// A fired alert record: its incident (near misses name none: `Ok(None)`).
    pub fn from_alert(a: &AlertRecord) -> Result<Option<(String, AlertFacts)>, Malformed> {
        if a.kind != "fired" {
            return Ok(None);
        }
        let incident = a
            .incident
            .clone()
            .filter(|i| !i.is_empty())
            .ok_or("a fired alert names no incident")?;
        if a.predicate.is_empty() {
            return Err("an alert names no predicate".into());
        }
        Ok(Some((
            incident,
            AlertFacts {
                predicate: a.predicate.clone(),
                subject: a.entities.first().cloned(),
                site: a.site.clone(),
                severity_j: a.severity_j.filter(|s| s.is_finite()),
                detail: a.detail.clone(),
                messages: a.messages.clone(),
                t_ms: a.t_ms,
            },
        )))
    }

    /// Takes an alert's facts (they win over what a declaration or verdict said).
    pub fn take_alert(
        slot: Option<Incident>,
        incident: &str,
        f: AlertFacts,
        starts_at: SystemTime,
        now: SystemTime,
    ) -> Incident {
        let mut i =
            slot.unwrap_or_else(|| Incident::new(incident, &f.predicate, Status::Fired, now));
        i.predicate = f.predicate;
        i.subject = f.subject.or(i.subject.take());
        i.site = f.site.or(i.site.take());
        i.severity_j = f.severity_j.or(i.severity_j);
        i.detail = Some(f.detail);
        if !f.messages.is_empty() {
            i.messages = f.messages;
        }
        i.starts_at = i.starts_at.min(starts_at);
        i.advance(Status::Fired, now);
        i
    }

    /// Takes a declaration from `audita.adverse` (`audita_verdict::AdverseDecl`'s JSON).
    pub fn take_declaration(
        slot: Option<Incident>,
        decl: &Value,
        now: SystemTime,
    ) -> Result<Incident, Malformed> {
        let name = decl
            .get("incident")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or("a declaration names no incident")?;
        let outcome = decl
            .get("outcome")
            .and_then(Value::as_str)
            .ok_or("a declaration names no outcome")?;
        let mut i = slot.unwrap_or_else(|| Incident::new(name, outcome, Status::Declared, now));
        if i.subject.is_none() {
            i.subject = first_str(decl, "targets");
        }
        i.advance(Status::Declared, now);
        Ok(i)
    }

    /// Takes a verdict record (a verdict, or an abstention with its reason).
    pub fn take_verdict(
        slot: Option<Incident>,
        r: &VerdictRecord,
        now: SystemTime,
    ) -> Result<Incident, Malformed> {
        if r.incident.is_empty() {
            return Err("a verdict record names no incident".into());
        }
        let view = r.verdict.as_ref().map(VerdictView::of).transpose()?;
        let predicate = view
            .as_ref()
            .map(|v| v.outcome.clone())
            .or_else(|| {
                r.declaration
                    .as_ref()
                    .and_then(|d| d.get("outcome")?.as_str().map(str::to_string))
            })
            .unwrap_or_else(|| "adverse_outcome".to_string());
        let mut i =
            slot.unwrap_or_else(|| Incident::new(&r.incident, &predicate, Status::Judged, now));
        if i.subject.is_none() {
            i.subject = r.declaration.as_ref().and_then(|d| first_str(d, "targets"));
        }
        let abstained = r
            .abstained
            .clone()
            .or_else(|| view.as_ref().and_then(VerdictView::abstain_reason));
        match (abstained, &view) {
            (Some(reason), _) => {
                i.abstained = Some(reason);
                i.advance(Status::Abstained, now);
            }
            (None, Some(v)) => {
                if i.severity_j.is_none() && v.severity_j > 0.0 {
                    i.severity_j = Some(v.severity_j);
                }
                i.culpable = Some(culpable_line(&v.principals));
                i.advance(Status::Judged, now);
            }
            (None, None) => {
                return Err("a verdict record carries neither a verdict nor a reason".into())
            }
        }
        Ok(i)
    }

    /// The alert's labels: its identity in Alertmanager.
    pub fn labels(&self, s: &Settings) -> BTreeMap<&'static str, String> {
        let mut l = BTreeMap::new();
        l.insert("alertname", self.predicate.clone());
        l.insert("incident", self.incident.clone());
        if let Some(site) = &self.site {
            l.insert("site", site.clone());
        }
        if let Some(subject) = &self.subject {
            l.insert("subject", subject.clone());
        }
        l.insert("severity", s.severity_class(self.severity_j).to_string());
        l
    }

    /// The one-line summary.
    pub fn summary(&self) -> String {
        let at = match (&self.subject, &self.site) {
            (Some(s), Some(site)) => format!(" — {s} at {site}"),
            (Some(s), None) => format!(" — {s}"),
            _ => String::new(),
        };
        let head = format!("{} ({}){at}", self.predicate, self.incident);
        match self.status {
            Status::Judged => format!(
                "{head}: judged; culpable: {}",
                self.culpable.as_deref().unwrap_or("none")
            ),
            Status::Abstained => format!(
                "{head}: abstained: {}",
                self.abstained.as_deref().unwrap_or("no reason given")
            ),
            Status::Declared | Status::Fired => match &self.detail {
                Some(d) => format!("{head}: {}: {d}", self.status.as_str()),
                None => format!("{head}: {}", self.status.as_str()),
            },
        }
    }

    /// The alert as Alertmanager's `postableAlert` (API v2): labels, annotations,
    /// `startsAt`, `endsAt` (`ends_at`) and `generatorURL` (the report).
    pub fn postable(&self, s: &Settings, ends_at: SystemTime) -> Value {
        let mut ann = Map::new();
        let mut put = |k: &str, v: String| {
            ann.insert(k.to_string(), Value::String(v));
        };
        put("summary", self.summary());
        put("status", self.status.as_str().to_string());
        if let Some(j) = self.severity_j {
            put("severity_j", format!("{j:.1}"));
        }
        if let Some(d) = &self.detail {
            put("description", d.clone());
        }
        let report = s.report_url(&self.incident);
        if let Some(u) = &report {
            put("report_url", u.clone());
        }
        if let Some(u) = s.runbook_url(&self.predicate) {
            put("runbook_url", u);
        }
        if !self.messages.is_empty() {
            put("messages", messages_line(&self.messages));
        }
        if let Some(c) = &self.culpable {
            put("culpable", c.clone());
        }
        if let Some(r) = &self.abstained {
            put("abstained", r.clone());
        }
        let mut alert = json!({
            "labels": self.labels(s),
            "annotations": ann,
            "startsAt": rfc3339(self.starts_at),
            "endsAt": rfc3339(ends_at),
        });
        if let Some(u) = report {
            alert["generatorURL"] = Value::String(u);
        }
        alert
    }
}

/// What a fired alert record says of its incident.
#[derive(Clone, Debug, PartialEq)]
pub struct AlertFacts {
    /// Predicate.
    pub predicate: String,
    /// Subject.
    pub subject: Option<String>,
    /// Site.
    pub site: Option<String>,
    /// Severity (J).
    pub severity_j: Option<f64>,
    /// The one line.
    pub detail: String,
    /// Establishing messages.
    pub messages: Vec<String>,
    /// Record time (ms).
    pub t_ms: u64,
}

fn first_str(v: &Value, field: &str) -> Option<String> {
    v.get(field)?
        .as_array()?
        .first()?
        .as_str()
        .map(str::to_string)
}

/// `p ρ∈[lo, hi]` for every culpable principal, `;`-separated (`none` when none is).
pub fn culpable_line(principals: &BTreeMap<String, FindingView>) -> String {
    let culpable: Vec<String> = principals
        .iter()
        .filter(|(_, f)| f.culpable)
        .map(|(p, f)| format!("{p} ρ∈[{:.2}, {:.2}]", f.rho_lo, f.rho_hi))
        .collect();
    if culpable.is_empty() {
        "none".to_string()
    } else {
        culpable.join("; ")
    }
}

fn messages_line(ids: &[String]) -> String {
    let mut line = ids
        .iter()
        .take(MAX_MESSAGE_IDS)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if ids.len() > MAX_MESSAGE_IDS {
        line.push_str(&format!(", … {} more", ids.len() - MAX_MESSAGE_IDS));
    }
    line
}

/// RFC 3339 in UTC, milliseconds.
pub fn rfc3339(t: SystemTime) -> String {
    DateTime::<Utc>::from(t).to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// `t` plus `d`, saturating.
pub fn after(t: SystemTime, d: Duration) -> SystemTime {
    t.checked_add(d).unwrap_or(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn alert() -> AlertRecord {
        serde_json::from_value(json!({
            "schema": "audita.alert/v1", "kind": "fired", "predicate": "separation_below_0.5m",
            "incident": "sep-c0-agv-1-12399", "entities": ["c0.agv-1", "c0.worker-1"],
            "t_ms": 12399, "severity_j": 1450.0, "messages": ["c0.rtls:ab"],
            "detail": "separation 412 mm", "site": "c0"
        }))
        .unwrap()
    }

    fn verdict() -> VerdictRecord {
        serde_json::from_value(json!({
            "incident": "sep-c0-agv-1-12399",
            "verdict": {
                "incident": "sep-c0-agv-1-12399", "outcome": "separation_below_0.5m",
                "t_star_ms": 12399, "severity_j": 1450.0, "standard": "specification",
                "record_root": "00", "status": "graded", "claim": {"level": "causal"},
                "principals": {
                    "c0.planner": {"breach": {"specification": true, "reasonable_agent": true},
                        "rho_lo": 0.5, "rho_hi": 1.0, "culpable": true, "status": "culpable",
                        "claim": {"level": "causal"}},
                    "c0.agv-1": {"breach": {"specification": false, "reasonable_agent": false},
                        "rho_lo": 0.0, "rho_hi": 0.0, "culpable": false, "status": "exonerated",
                        "claim": {"level": "causal"}}
                }
            }
        }))
        .unwrap()
    }

    fn through(order: &[u8]) -> Incident {
        let t0 = UNIX_EPOCH + Duration::from_secs(1_000);
        let decl = json!({"incident": "sep-c0-agv-1-12399", "outcome": "separation_below_0.5m", "t_star_ms": 12399});
        let mut slot = None;
        for (k, step) in order.iter().enumerate() {
            let now = t0 + Duration::from_secs(k as u64);
            slot = Some(match step {
                b'a' => {
                    let (name, f) = Incident::from_alert(&alert()).unwrap().unwrap();
                    Incident::take_alert(slot, &name, f, t0, now)
                }
                b'd' => Incident::take_declaration(slot, &decl, now).unwrap(),
                _ => Incident::take_verdict(slot, &verdict(), now).unwrap(),
            });
        }
        slot.unwrap()
    }

    #[test]
    fn an_incident_is_the_same_whatever_order_its_records_arrive_in() {
        let s = Settings::new("http://am");
        let want = through(b"adv");
        assert_eq!(want.status, Status::Judged);
        assert_eq!(want.culpable.as_deref(), Some("c0.planner ρ∈[0.50, 1.00]"));
        for order in [&b"avd"[..], b"vad", b"vda", b"dva", b"adva", b"avda"] {
            let got = through(order);
            assert_eq!(got.labels(&s), want.labels(&s), "{order:?}");
            assert_eq!(got.status, Status::Judged, "{order:?}");
            assert_eq!(got.culpable, want.culpable, "{order:?}");
            assert_eq!(got.detail, want.detail, "{order:?}");
        }
    }

    #[test]
    fn labels_and_annotations_say_what_the_issue_lists() {
        let mut s = Settings::new("http://am");
        s.public_base_url = Some("https://audita.example/".into());
        s.runbook_url = Some("https://runbooks.example/{predicate}".into());
        let fired = through(b"a");
        let p = fired.postable(&s, UNIX_EPOCH + Duration::from_secs(2_000));
        assert_eq!(
            p["labels"],
            json!({"alertname": "separation_below_0.5m", "incident": "sep-c0-agv-1-12399",
                   "site": "c0", "subject": "c0.agv-1", "severity": "critical"})
        );
        let a = &p["annotations"];
        assert_eq!(a["status"], "fired");
        assert_eq!(a["severity_j"], "1450.0");
        assert_eq!(a["messages"], "c0.rtls:ab");
        assert_eq!(
            a["report_url"],
            "https://audita.example/reports/sep-c0-agv-1-12399.html"
        );
        assert_eq!(
            a["runbook_url"],
            "https://runbooks.example/separation_below_0.5m"
        );
        assert_eq!(p["startsAt"], "1970-01-01T00:16:40.000Z");
        assert_eq!(p["endsAt"], "1970-01-01T00:33:20.000Z");
        let judged = through(b"adv").postable(&s, UNIX_EPOCH);
        assert_eq!(judged["labels"], p["labels"], "the same alert");
        assert_eq!(judged["annotations"]["status"], "judged");
        assert!(judged["annotations"]["summary"]
            .as_str()
            .unwrap()
            .contains("culpable: c0.planner ρ∈[0.50, 1.00]"));
    }

    #[test]
    fn a_malformed_record_is_one_line_and_a_near_miss_names_no_incident() {
        let mut a = alert();
        a.kind = "near_miss".into();
        assert_eq!(Incident::from_alert(&a), Ok(None));
        a.kind = "fired".into();
        a.incident = None;
        assert_eq!(
            Incident::from_alert(&a),
            Err("a fired alert names no incident".to_string())
        );
        let bad: VerdictRecord = serde_json::from_value(json!({"incident": "x"})).unwrap();
        let e = Incident::take_verdict(None, &bad, UNIX_EPOCH).unwrap_err();
        assert!(!e.contains('\n'), "{e}");
    }
}
