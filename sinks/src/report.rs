//! Self-contained HTML pages for incident responders, rendered with askama templates
//! (`sinks/templates/`) from a verdict topic record (`audita_topics::VerdictRecord`):
//!
//! - one report per incident: wall-clock and record times, a one-paragraph summary
//!   (who is culpable under which standard and why, who was cleared and why), the slice
//!   graph on a time axis (arrowheads from cited to citing message, absence variables
//!   as nodes, the outcome as the sink node, each node's message on hover), the
//!   messages table, responsibility intervals, findings with the duties' meaning,
//!   replay receipts, the record root, checkpoint and keeper co-signatures with the
//!   `audita verify` / `audita verdict` commands that reproduce the verdict, and the
//!   generation time and version;
//! - the index of every incident, sortable by time, predicate, severity, status and
//!   culpable count (CSS only).
//!
//! Design constraints:
//! - One file, no scripts, no external assets; readable at phone width (viewport
//!   meta, tables and the graph scroll sideways inside their own boxes).
//! - Every text from the record is escaped by the template engine; rendering never
//!   fails on input (a template error yields a one-line error page).
//! - A no-cause incident says so instead of showing an empty analysis; an abstention
//!   says why and that no finding is made about anyone.

use crate::tables::{rfc3339, IncidentRow, RecordOrigin};
use askama::Template;
use audita_topics::{FindingView, MessageView, VerdictRecord, VerdictView};
use std::collections::{BTreeMap, BTreeSet};

/// Who rendered a page.
#[derive(Clone, Debug)]
pub struct Build {
    /// Version of the `audita` build.
    pub version: String,
    /// Generation time to print (Unix ms); `None`: now.
    pub generated_ms: Option<i64>,
}

impl Build {
    /// The current build, pages stamped at render time.
    pub fn current(version: &str) -> Build {
        Build {
            version: version.to_string(),
            generated_ms: None,
        }
    }

    fn generated(&self) -> String {
        rfc3339(self.generated_ms.unwrap_or_else(crate::tables::now_ms))
    }
}

pub use audita_topics::report_file_name as file_name;

fn short(id: &str) -> String {
    match id.rsplit_once(':') {
        Some((author, hex)) => format!("{author}:{}…", &hex[..hex.len().min(8)]),
        None => id.to_string(),
    }
}

fn anchor_of(id: &str) -> String {
    let hex = id.rsplit_once(':').map_or(id, |(_, h)| h);
    format!("m-{}", &hex[..hex.len().min(16)])
}

/// `s` cut to `n` characters (with an ellipsis) so it fits its box.
fn fit(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}

fn fmt_rho(x: f64) -> String {
    format!("{x:.3}")
}

fn offset(ms: i64) -> String {
    if ms == 0 {
        "t*".into()
    } else {
        format!(
            "t*{}{:.1} s",
            if ms < 0 { "−" } else { "+" },
            ms.abs() as f64 / 1000.0
        )
    }
}

/// What one duty declaration obliges, in a sentence.
pub fn duty_meaning(holder: &str, d: &serde_json::Value) -> String {
    let s = |k: &str| d[k].as_str().unwrap_or("?").to_string();
    let n = |k: &str| d[k].as_i64().map_or("?".into(), |v| v.to_string());
    match d["kind"].as_str() {
        Some("safety_envelope") => {
            let mut parts = Vec::new();
            if d.get("max_mm_per_s").is_some_and(|v| !v.is_null()) {
                parts.push(format!("never command {} faster than {} mm/s", s("target"), n("max_mm_per_s")));
            }
            if let Some(p) = d["param"].as_str() {
                parts.push(format!(
                    "keep parameter {p} of {} within [{}, {}] milli-units",
                    s("target"),
                    n("min"),
                    n("max")
                ));
            }
            if parts.is_empty() {
                parts.push(format!("keep commands to {} within the registered envelope", s("target")));
            }
            format!("Safety envelope: {holder} must {}.", parts.join(" and "))
        }
        Some("halt_authority") => format!(
            "Halt authority: after a certified sensor report containing “{}”{}, {holder} must issue a certified halt of {} within {} ms.",
            s("trigger_contains"),
            d["trigger_sensor"]
                .as_str()
                .map(|x| format!(" from {x}"))
                .unwrap_or_default(),
            s("target"),
            n("deadline_ms")
        ),
        Some("review_required") => format!(
            "Review required: every derived message of {holder} must cite a certified message of {}.",
            s("reviewer")
        ),
        Some("aggregation") => format!(
            "Aggregation: a command of {holder} on {} must carry the {} of its consumed certified inputs.",
            s("target"),
            s("rule")
        ),
        _ => format!("Declared duty of {holder}: {d}"),
    }
}

/// A node of the slice graph.
struct Node {
    x: i64,
    y: i64,
    w: i64,
    line1: String,
    line2: String,
    fill: &'static str,
    stroke: &'static str,
    dash: &'static str,
    tip: String,
    href: String,
}

/// An edge of the slice graph.
struct Edge {
    d: String,
    dash: &'static str,
    colour: &'static str,
    marker: &'static str,
    tip: String,
}

struct Tick {
    x: i64,
    top: String,
    bottom: String,
}

struct Lane {
    y: i64,
    name: String,
}

struct Graph {
    width: i64,
    height: i64,
    nodes: Vec<Node>,
    edges: Vec<Edge>,
    ticks: Vec<Tick>,
    lanes: Vec<Lane>,
    axis_y: i64,
}

struct MessageRow {
    anchor: String,
    id: String,
    wall: String,
    rel: String,
    author: String,
    kind: String,
    target: String,
    params: String,
    effect: String,
    cites: Vec<(String, String)>,
    role: String,
}

struct Bar {
    name: String,
    lo_w: f64,
    span_x: f64,
    span_w: f64,
    label: String,
    colour: &'static str,
    y: i64,
}

struct FindingRowView {
    name: String,
    status: String,
    interval: String,
    breach: String,
    claim: String,
    flags: String,
    duties: Vec<(String, String)>,
    violations: Vec<String>,
    evidence: Vec<(String, String)>,
    notes: Vec<String>,
}

struct ReplayRow {
    vars: String,
    grade: String,
    risk: String,
    runs: u64,
    certified: bool,
}

#[derive(Template)]
#[template(path = "report.html")]
struct ReportPage {
    incident: String,
    kind: &'static str,
    status: String,
    predicate: String,
    t_wall: String,
    t_record: String,
    severity: String,
    standard: String,
    claim: String,
    summary: Vec<String>,
    graph: Option<Graph>,
    messages: Vec<MessageRow>,
    bars: Vec<Bar>,
    bars_height: i64,
    findings: Vec<FindingRowView>,
    replay: Vec<ReplayRow>,
    notes: Vec<String>,
    items: Vec<String>,
    record_root: String,
    checkpoint_size: String,
    log_origin: String,
    checkpoint: String,
    cosignatures: Vec<(String, u64)>,
    under_witnessed: String,
    declaration: String,
    declarer: String,
    detection: Vec<(String, String, String)>,
    verify_cmd: String,
    verdict_cmd: String,
    verdict_time: String,
    origin: String,
    generated: String,
    version: String,
}

#[derive(Template)]
#[template(path = "index.html")]
struct IndexPage {
    rows: Vec<IndexRow>,
    count: usize,
    abstained: usize,
    culpable: usize,
    origin: String,
    generated: String,
    version: String,
}

struct IndexRow {
    href: String,
    incident: String,
    time: String,
    predicate: String,
    severity: String,
    status: String,
    status_class: &'static str,
    culpable: String,
    ranks: String,
}

/// Renders the report of one verdict topic record.
pub fn render(
    record: &VerdictRecord,
    origin: &RecordOrigin,
    verdict_time: i64,
    build: &Build,
) -> String {
    let page = match record.verdict.as_ref().map(VerdictView::of) {
        Some(Ok(v)) => graded_page(record, &v, origin),
        Some(Err(e)) => abstention_page(record, &e, origin),
        None => abstention_page(
            record,
            record.abstained.as_deref().unwrap_or("no verdict"),
            origin,
        ),
    };
    let page = ReportPage {
        verdict_time: rfc3339(verdict_time),
        origin: origin.text(),
        generated: build.generated(),
        version: build.version.clone(),
        ..page
    };
    page.render().unwrap_or_else(|e| error_page(&e.to_string()))
}

fn error_page(e: &str) -> String {
    let esc = e
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    format!("<!doctype html><meta charset=\"utf-8\"><title>Audita report error</title><p>report could not be rendered: {esc}</p>\n")
}

fn pretty(v: &serde_json::Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

/// The stem of the files written next to a report (`<stem>.checkpoint`,
/// `<stem>.adverse.json`).
pub fn stem(incident: &str) -> String {
    file_name(incident).trim_end_matches(".html").to_string()
}

fn commands(incident: &str, anchor: bool) -> (String, String) {
    let file = stem(incident);
    (
        if anchor {
            format!("audita verify RECORD_DIR --checkpoint reports/{file}.checkpoint")
        } else {
            "audita verify RECORD_DIR".to_string()
        },
        format!(
            "audita verdict RECORD_DIR --duties duties.json --adverse reports/{file}.adverse.json"
        ),
    )
}

fn base(record: &VerdictRecord, origin: &RecordOrigin) -> ReportPage {
    let anchor = record.record.as_ref();
    let (verify_cmd, mut verdict_cmd) = commands(&record.incident, anchor.is_some());
    let decl = record.declaration.as_ref();
    if decl.is_some_and(|d| d.get("declarer").is_some()) {
        verdict_cmd.push_str(" --predicates predicates.json");
    }
    let t_ms = decl.and_then(|d| d["t_star_ms"].as_u64());
    ReportPage {
        incident: record.incident.clone(),
        kind: "abstained",
        status: "abstained".into(),
        predicate: decl
            .and_then(|d| d["outcome"].as_str())
            .unwrap_or("(not declared in the record)")
            .to_string(),
        t_wall: t_ms.map_or("unknown".into(), |t| rfc3339(origin.wall(t))),
        t_record: t_ms.map_or("unknown".into(), |t| format!("{t} ms")),
        severity: String::new(),
        standard: String::new(),
        claim: String::new(),
        summary: Vec::new(),
        graph: None,
        messages: Vec::new(),
        bars: Vec::new(),
        bars_height: 0,
        findings: Vec::new(),
        replay: Vec::new(),
        notes: Vec::new(),
        items: Vec::new(),
        record_root: anchor.map_or("(unknown: no verdict was computed)".into(), |a| {
            a.root.clone()
        }),
        checkpoint_size: anchor.map_or(String::new(), |a| a.size.to_string()),
        log_origin: anchor.map_or(String::new(), |a| a.origin.clone()),
        checkpoint: anchor.map_or(String::new(), |a| a.checkpoint.clone()),
        cosignatures: anchor
            .map(|a| {
                a.cosignatures
                    .iter()
                    .map(|c| (c.keeper.clone(), c.timestamp))
                    .collect()
            })
            .unwrap_or_default(),
        under_witnessed: anchor
            .filter(|a| a.under_witnessed)
            .map(|a| {
                format!(
                    "When this verdict was computed, a checkpoint it rests on carried fewer \
                     valid keeper co-signatures than the deployment's quorum of {}: it stands \
                     on the log operator's signature alone until the keepers catch up. \
                     Re-run the commands below once they have; a verifier that requires the \
                     quorum refuses the record until then.",
                    a.quorum
                )
            })
            .unwrap_or_default(),
        declaration: decl.map(pretty).unwrap_or_default(),
        declarer: decl
            .and_then(|d| d.get("declarer"))
            .map(|d| {
                format!(
                    "{} {}",
                    d["kind"].as_str().unwrap_or("?"),
                    d["name"].as_str().unwrap_or("?")
                )
            })
            .unwrap_or_default(),
        detection: decl
            .and_then(|d| d.get("facts"))
            .and_then(|f| f.as_array())
            .map(|facts| {
                facts
                    .iter()
                    .map(|f| {
                        let evidence: Vec<&str> = f["evidence"]
                            .as_array()
                            .map(|e| e.iter().filter_map(|x| x.as_str()).collect())
                            .unwrap_or_default();
                        (
                            f["fact"].as_str().unwrap_or("?").replace('_', " "),
                            f["detail"].as_str().unwrap_or("").to_string(),
                            evidence.join(" "),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default(),
        verify_cmd,
        verdict_cmd,
        verdict_time: String::new(),
        origin: String::new(),
        generated: String::new(),
        version: String::new(),
    }
}

fn abstention_page(record: &VerdictRecord, reason: &str, origin: &RecordOrigin) -> ReportPage {
    let mut page = base(record, origin);
    page.summary = vec![
        format!(
            "Audita abstained on incident {}: {reason}.",
            record.incident
        ),
        "No finding is made about any principal: an abstention is never an accusation. \
         The commands below compute the verdict offline from the sealed record and the \
         declaration (where the abstention came from a limit of the pipeline, such as \
         the record size, they give the verdict the pipeline could not publish)."
            .into(),
    ];
    page
}

fn status_phrase(p: &str, f: &FindingView, standard: &str, predicate: &str) -> String {
    let interval = format!("ρ ∈ [{}, {}]", fmt_rho(f.rho_lo), fmt_rho(f.rho_hi));
    let breached: Vec<String> = f
        .breach
        .violations
        .iter()
        .map(|v| {
            if v.detail.is_empty() {
                format!("duty {}", v.duty)
            } else {
                format!("duty {} ({})", v.duty, v.detail)
            }
        })
        .collect();
    let omission = f.flags.iter().any(|x| x == "omission");
    let conduit = f.flags.iter().any(|x| x == "conduit");
    match f.status.as_str() {
        "culpable" => format!(
            "{p} is culpable under the {standard} standard ({interval}): it breached {} and {} a certified cause of {predicate}{}.",
            if breached.is_empty() { "a registered duty".into() } else { breached.join("; ") },
            if omission { "the halt it never issued is" } else { "its own certified conduct is" },
            if conduit { ", relaying upstream content (flagged conduit)" } else { "" }
        ),
        "negligent_but_inert" => format!(
            "{p} breached {} but is not culpable: its conduct did not cause {predicate} ({interval}) — negligent but inert.",
            if breached.is_empty() { "a registered duty".into() } else { breached.join("; ") }
        ),
        "involved_cleared" => {
            let other: Vec<&str> = [
                (f.breach.specification, "specification"),
                (f.breach.reasonable_agent, "reasonable agent"),
            ]
            .into_iter()
            .filter(|(b, name)| *b && *name != standard)
            .map(|(_, name)| name)
            .collect();
            format!(
                "{p} was involved ({interval}) but is cleared: {}{}.",
                if other.is_empty() {
                    "it breached no duty under either standard".to_string()
                } else {
                    format!(
                        "it breached {} under the {} standard only, not under the {standard} standard culpability uses",
                        if breached.is_empty() { "a duty".into() } else { breached.join("; ") },
                        other.join(" and ")
                    )
                },
                if conduit { "; it faithfully relayed upstream content (conduit)" } else { "" }
            )
        }
        "exonerated" => format!(
            "{p} is exonerated: none of its certified messages has an intact production path to {predicate}{}.",
            f.notes.first().map(|n| format!(" ({n})")).unwrap_or_default()
        ),
        _ => format!(
            "{p} is unresolved ({interval}): the evidence does not settle it{}.",
            if f.items.is_empty() {
                String::new()
            } else {
                format!(
                    " — missing or suspect items by {} are named",
                    f.items.iter().map(|i| i.author.clone()).collect::<BTreeSet<_>>().into_iter().collect::<Vec<_>>().join(", ")
                )
            }
        ),
    }
}

/// The page of a graded (or abstained) verdict: its kind, header, summary, evidence
/// graph, message table, responsibility bars, findings and replay receipts.
fn graded_page(record: &VerdictRecord, v: &VerdictView, origin: &RecordOrigin) -> ReportPage {
    let mut page = base(record, origin);
    // No actuation anchor: the outcome is exogenous to the record. The slice's
    // principals may still be listed, each exonerated (ρ = [0, 0]).
    // Unless a principal issued a command to the subject the record does not show
    // realised: then the outcome's production is unknown, not exogenous.
    let unshown: Vec<(&String, &audita_topics::FindingView)> = v
        .principals
        .iter()
        .filter(|(_, f)| f.flags.iter().any(|x| x == "unrealised_command"))
        .collect();
    let no_cause = v.anchors.is_empty()
        && unshown.is_empty()
        && v.principals
            .values()
            .all(|f| !f.culpable && f.rho_hi == 0.0);
    page.kind = if v.status == "abstained" {
        "abstained"
    } else if !unshown.is_empty() && v.anchors.is_empty() {
        "unresolved"
    } else if no_cause {
        "no-cause"
    } else if v.principals.values().any(|f| f.culpable) {
        "culpable"
    } else {
        "cleared"
    };
    page.status = v.status.clone();
    page.predicate = v.outcome.clone();
    page.t_wall = rfc3339(origin.wall(v.t_star_ms));
    page.t_record = format!("{} ms", v.t_star_ms);
    page.severity = format!("{:.1} J", v.severity_j);
    page.standard = v.standard.replace('_', " ");
    page.claim = v.claim.level.clone();
    page.record_root = v.record_root.clone();
    page.notes = v.notes.clone();
    page.items = v
        .completions
        .items
        .iter()
        .map(|i| format!("{} ({}, by {})", i.id, i.kind, i.author))
        .collect();
    // Summary.
    page.summary = if page.kind == "unresolved" {
        vec![unresolved_summary(record, v, &page.t_wall, &unshown)]
    } else if no_cause {
        vec![format!(
            "No principal is responsible for {} at {}: the declaration names no actuation \
             anchor, so the outcome is exogenous to the certified record (an event no \
             recorded command produced). Nobody is culpable, nobody is accused, and no \
             causal claim is made.",
            v.outcome, page.t_wall
        )]
    } else {
        graded_summary(v, &page.standard, &page.severity)
    };
    page.graph = graph(record, v, origin);
    page.messages = message_rows(record, v, origin);
    page.bars = bars(v);
    page.bars_height = v.principals.len() as i64 * 28 + 20;
    page.findings = v
        .principals
        .iter()
        .map(|(name, f)| finding_row(record, name, f))
        .collect();
    page.replay = v
        .replay
        .iter()
        .map(|r| ReplayRow {
            vars: r.vars.join(" ∧ "),
            grade: fmt_rho(r.grade),
            risk: format!("{:.3} → {:.3}", r.q0, r.q1),
            runs: r.runs,
            certified: r.certified,
        })
        .collect();
    page
}

/// The summary of an unresolved incident: no anchor, and the `unshown` principals
/// issued commands to the subject that the record does not show realised.
fn unresolved_summary(
    record: &VerdictRecord,
    v: &VerdictView,
    t_wall: &str,
    unshown: &[(&String, &FindingView)],
) -> String {
    format!(
        "Unresolved: the declaration names no actuation anchor for {} at {}, but {} \
         issued commands to {} that the record does not show realised. They are not \
         anchors, and the record cannot exclude that they produced the outcome, so \
         nobody is exonerated: {}.",
        v.outcome,
        t_wall,
        unshown
            .iter()
            .map(|(p, _)| p.as_str())
            .collect::<Vec<_>>()
            .join(" and "),
        record
            .declaration
            .as_ref()
            .and_then(|d| d["targets"].as_array())
            .map(|t| t
                .iter()
                .filter_map(|x| x.as_str())
                .collect::<Vec<_>>()
                .join(", "))
            .unwrap_or_default(),
        unshown
            .iter()
            .flat_map(|(_, f)| f.notes.iter().filter(|n| n.contains("not shown realised")))
            .cloned()
            .collect::<Vec<_>>()
            .join("; ")
    )
}

/// The summary of a graded (or abstained) incident with a cause: the abstention,
/// who is culpable under `standard`, one phrase per principal (culpable first), and
/// the incident-level claim when it is not causal.
fn graded_summary(v: &VerdictView, standard: &str, severity: &str) -> Vec<String> {
    let mut summary = Vec::new();
    if v.status == "abstained" {
        summary.push(format!(
            "Audita abstained: {} No principal is found culpable on this incident.",
            v.abstain_reason().unwrap_or_default()
        ));
    }
    let culpable: Vec<&String> = v
        .principals
        .iter()
        .filter(|(_, f)| f.culpable)
        .map(|(p, _)| p)
        .collect();
    summary.push(if culpable.is_empty() {
        format!(
            "No principal is culpable for {} under the {standard} standard.",
            v.outcome
        )
    } else {
        format!(
            "Under the {standard} standard, {} {} culpable for {} (severity {}).",
            culpable
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(" and "),
            if culpable.len() == 1 { "is" } else { "are" },
            v.outcome,
            severity
        )
    });
    let rank = |status: &str| match status {
        "culpable" => 0,
        "unresolved" => 1,
        "negligent_but_inert" => 2,
        "involved_cleared" => 3,
        _ => 4,
    };
    let mut ordered: Vec<(&String, &FindingView)> = v.principals.iter().collect();
    ordered.sort_by_key(|(p, f)| (rank(&f.status), p.as_str()));
    for (p, f) in ordered {
        summary.push(status_phrase(p, f, standard, &v.outcome));
    }
    if v.claim.level != "causal" {
        summary.push(claim_sentence(v));
    }
    summary
}

/// The incident-level claim when it is not causal, naming where the witness breaks:
/// each offending edge (its kind, the citing and the cited message) and the boundary
/// artifacts to extend the window with.
fn claim_sentence(v: &VerdictView) -> String {
    let short = |id: &str| id.chars().take(12).collect::<String>();
    let mut s = format!(
        "The incident-level claim is {}: no causal verdict is made through a non-witness edge.",
        v.claim.level
    );
    let edges: Vec<String> = v
        .claim
        .offending_edges
        .iter()
        .take(6)
        .map(|e| {
            format!(
                "message {} consumed what {} produced only through a {} edge",
                short(&e.child),
                short(&e.parent),
                e.kind.replace('_', " ")
            )
        })
        .collect();
    if !edges.is_empty() {
        let more = v.claim.offending_edges.len().saturating_sub(edges.len());
        s.push_str(&format!(" The witness breaks where {}", edges.join("; ")));
        if more > 0 {
            s.push_str(&format!(" (and {more} more)"));
        }
        s.push_str(
            ": record that transformation as its own logged step (input and output hashes) to make the record a witness.",
        );
    }
    if !v.claim.boundary.is_empty() {
        let ids: Vec<String> = v.claim.boundary.iter().take(6).map(|b| short(b)).collect();
        s.push_str(&format!(
            " The closure leaves the window at {}: extend the window to their producers.",
            ids.join(", ")
        ));
    }
    s
}

/// One responsibility bar per principal: ρ_lo solid, the interval's span beside it.
fn bars(v: &VerdictView) -> Vec<Bar> {
    v.principals
        .iter()
        .enumerate()
        .map(|(i, (name, f))| Bar {
            name: name.clone(),
            lo_w: f.rho_lo.clamp(0.0, 1.0) * 400.0,
            span_x: 200.0 + f.rho_lo.clamp(0.0, 1.0) * 400.0,
            span_w: (f.rho_hi - f.rho_lo).clamp(0.0, 1.0) * 400.0,
            label: format!(
                "[{}, {}] {}",
                fmt_rho(f.rho_lo),
                fmt_rho(f.rho_hi),
                f.status.replace('_', " ")
            ),
            colour: if f.culpable { "#c62828" } else { "#1565c0" },
            y: 10 + i as i64 * 28,
        })
        .collect()
}

/// The finding of principal `name` as a table row, its duties with their meaning
/// from the record's declarations.
fn finding_row(record: &VerdictRecord, name: &str, f: &FindingView) -> FindingRowView {
    FindingRowView {
        name: name.to_string(),
        status: f.status.replace('_', " "),
        interval: format!("[{}, {}]", fmt_rho(f.rho_lo), fmt_rho(f.rho_hi)),
        breach: format!(
            "specification: {} · reasonable agent: {}",
            if f.breach.specification { "yes" } else { "no" },
            if f.breach.reasonable_agent {
                "yes"
            } else {
                "no"
            }
        ),
        // A causal claim concerns a principal only where it is a cause in some
        // reading (ρ_hi > 0): an exogenous outcome's principals, or one cleared in
        // every completion, carry none, whatever level the finding's closure has.
        claim: if f.rho_hi > 0.0 || f.culpable {
            f.claim.level.clone()
        } else {
            "none (not a cause in any reading)".to_string()
        },
        flags: f.flags.join(", "),
        duties: f
            .duties
            .iter()
            .map(|d| {
                let meaning = record
                    .duties
                    .get(d)
                    .map(|x| duty_meaning(&x.holder, &x.definition))
                    .unwrap_or_else(|| "(declaration not in the record)".into());
                (d.clone(), meaning)
            })
            .collect(),
        violations: f
            .breach
            .violations
            .iter()
            .map(|x| format!("{} [{}]: {}", x.duty, x.standards.join(", "), x.detail))
            .collect(),
        evidence: f
            .evidence
            .iter()
            .map(|e| (anchor_of(e), short(e)))
            .collect(),
        notes: f.notes.clone(),
    }
}

fn role_of(id: &str, v: &VerdictView) -> String {
    if v.anchors.iter().any(|a| a == id) {
        "anchor".into()
    } else if v.slice.absences.iter().any(|a| a.trigger == id) {
        "halt trigger".into()
    } else if v.slice.messages.iter().any(|m| m == id) {
        "slice".into()
    } else {
        "evidence".into()
    }
}

fn params_text(m: &MessageView) -> String {
    m.params
        .iter()
        .map(|(k, x)| match x {
            serde_json::Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn message_rows(record: &VerdictRecord, v: &VerdictView, origin: &RecordOrigin) -> Vec<MessageRow> {
    let mut rows: Vec<(u64, MessageRow)> = record
        .messages
        .iter()
        .map(|(id, m)| {
            (
                m.timestamp_ms,
                MessageRow {
                    anchor: anchor_of(id),
                    id: id.clone(),
                    wall: rfc3339(origin.wall(m.timestamp_ms)),
                    rel: format!(
                        "{} ms · {}",
                        m.timestamp_ms,
                        offset(m.timestamp_ms as i64 - v.t_star_ms as i64)
                    ),
                    author: m.author.clone(),
                    kind: m.kind.clone(),
                    target: m.target.clone().unwrap_or_default(),
                    params: params_text(m),
                    effect: m.effect.clone(),
                    cites: m
                        .citations
                        .iter()
                        .map(|c| (anchor_of(c), short(c)))
                        .collect(),
                    role: role_of(id, v),
                },
            )
        })
        .collect();
    rows.sort_by(|a, b| (a.0, &a.1.id).cmp(&(b.0, &b.1.id)));
    rows.into_iter().map(|(_, r)| r).collect()
}

const COL_W: i64 = 160;
const NODE_W: i64 = 140;
const LANE_H: i64 = 54;
const LEFT: i64 = 150;
const TOP: i64 = 46;

/// The evidence graph: messages in author lanes by time, citation edges, duty
/// absences, and the outcome node the anchors and absences lead into (none when the
/// slice is empty).
fn graph(record: &VerdictRecord, v: &VerdictView, origin: &RecordOrigin) -> Option<Graph> {
    let ids = graph_ids(v);
    if ids.is_empty() && v.slice.absences.is_empty() {
        return None;
    }
    let item_kind: BTreeMap<&str, &str> = v
        .completions
        .items
        .iter()
        .map(|i| (i.id.as_str(), i.kind.as_str()))
        .collect();
    let time = graph_times(record, v, &ids);
    let abs = absence_marks(record, v, &time);
    let mut grid = Grid::new(record, &time, &abs, v.t_star_ms);
    let mut pos: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    let mut nodes = Vec::new();
    for (id, t) in &time {
        let at = grid.cell(*t, &author_of(record, id));
        pos.insert(id.clone(), at);
        nodes.push(message_node(record, v, origin, &item_kind, id, at));
    }
    let mut edges = citation_edges(v, &pos);
    // Outcome node.
    let (ox, oy) = grid.outcome_cell();
    for a in &v.anchors {
        if let Some(p) = pos.get(a) {
            edges.push(Edge {
                d: curve(*p, (ox, oy)),
                dash: "",
                colour: "#000000",
                marker: "arrow",
                tip: format!("{} realises {}", short(a), v.outcome),
            });
        }
    }
    for a in &abs {
        let at = grid.cell(a.t, &a.holder);
        edges.extend(a.edges(at, (ox, oy), &pos));
        nodes.push(a.node(at));
    }
    nodes.push(Node {
        x: ox,
        y: oy,
        w: NODE_W,
        line1: fit(&format!("Y: {}", v.outcome), 22),
        line2: fit(&format!("t* = {} ms", v.t_star_ms), 24),
        fill: "#000000",
        stroke: "#000000",
        dash: "",
        tip: format!(
            "adverse outcome {} at t* = {} ({} ms record time)",
            v.outcome,
            rfc3339(origin.wall(v.t_star_ms)),
            v.t_star_ms
        ),
        href: "#summary".into(),
    });
    let axis_y = oy + LANE_H + 6;
    Some(Graph {
        width: ox + NODE_W + 20,
        height: axis_y + 40,
        nodes,
        edges,
        ticks: grid.ticks(v.t_star_ms, origin, ox),
        lanes: grid.lane_views(oy),
        axis_y,
    })
}

/// The graph's message nodes: slice, anchors, edge endpoints, absence triggers.
fn graph_ids(v: &VerdictView) -> BTreeSet<String> {
    let mut ids: BTreeSet<String> = v.slice.messages.iter().cloned().collect();
    ids.extend(v.anchors.iter().cloned());
    for e in &v.slice.edges {
        ids.insert(e.child.clone());
        ids.insert(e.parent.clone());
    }
    for a in &v.slice.absences {
        ids.insert(a.trigger.clone());
    }
    ids
}

/// The time of each node: a message's own; an unknown one just before its earliest
/// citer (`t*` when no citer has a time).
fn graph_times(
    record: &VerdictRecord,
    v: &VerdictView,
    ids: &BTreeSet<String>,
) -> BTreeMap<String, u64> {
    let mut time: BTreeMap<String, u64> = BTreeMap::new();
    for id in ids {
        if let Some(m) = record.messages.get(id) {
            time.insert(id.clone(), m.timestamp_ms);
        }
    }
    for id in ids {
        if !time.contains_key(id) {
            let t = v
                .slice
                .edges
                .iter()
                .filter(|e| &e.parent == id)
                .filter_map(|e| time.get(&e.child).copied())
                .min()
                .map_or(v.t_star_ms, |t| t.saturating_sub(1));
            time.insert(id.clone(), t);
        }
    }
    time
}

/// A message's author: from the record, else from its id.
fn author_of(record: &VerdictRecord, id: &str) -> String {
    record
        .messages
        .get(id)
        .map(|m| m.author.clone())
        .unwrap_or_else(|| id.rsplit_once(':').map_or(id, |(a, _)| a).to_string())
}

/// A duty absence as drawn: in its holder's lane, when the halt was due.
struct AbsenceMark {
    holder: String,
    /// The trigger's time plus the duty's deadline (at most `t*`).
    t: u64,
    label: String,
    trigger: String,
    in_outcome: bool,
    tip: String,
}

/// The absences of the slice as drawn, timed from their triggers' times in `time`.
fn absence_marks(
    record: &VerdictRecord,
    v: &VerdictView,
    time: &BTreeMap<String, u64>,
) -> Vec<AbsenceMark> {
    v.slice
        .absences
        .iter()
        .map(|a| {
            let meaning = record
                .duties
                .get(&a.duty)
                .map(|d| duty_meaning(&d.holder, &d.definition))
                .unwrap_or_default();
            // Drawn when the halt was due: the trigger's time plus the deadline.
            let deadline = record
                .duties
                .get(&a.duty)
                .and_then(|d| d.definition["deadline_ms"].as_u64())
                .unwrap_or(0);
            let trigger_t = time.get(&a.trigger).copied().unwrap_or(v.t_star_ms);
            AbsenceMark {
                holder: a.holder.clone(),
                t: trigger_t.saturating_add(deadline).min(v.t_star_ms),
                label: format!("no halt: {}", a.duty),
                // (due at `t`: trigger + deadline)
                trigger: a.trigger.clone(),
                in_outcome: a.in_outcome,
                tip: format!(
                    "absence variable {} — {} never issued the message duty {} requires{}. {}",
                    a.variable,
                    a.holder,
                    a.duty,
                    if a.in_outcome {
                        " (enters the outcome)"
                    } else {
                        ""
                    },
                    meaning
                ),
            }
        })
        .collect()
}

impl AbsenceMark {
    /// Its edges, drawn at `at`: from its trigger (when drawn, at `pos`), and into
    /// the outcome at `outcome` when it enters it.
    fn edges(
        &self,
        at: (i64, i64),
        outcome: (i64, i64),
        pos: &BTreeMap<String, (i64, i64)>,
    ) -> Vec<Edge> {
        let mut edges = Vec::new();
        if let Some(t) = pos.get(&self.trigger) {
            edges.push(Edge {
                d: curve(*t, at),
                dash: "2,3",
                colour: "#c62828",
                marker: "arrow-red",
                tip: format!(
                    "{} triggers the duty whose halt never came",
                    short(&self.trigger)
                ),
            });
        }
        if self.in_outcome {
            edges.push(Edge {
                d: curve(at, outcome),
                dash: "6,4",
                colour: "#c62828",
                marker: "arrow-red",
                tip: "the absence enters the outcome".into(),
            });
        }
        edges
    }

    /// Its node, at `at`.
    fn node(&self, (x, y): (i64, i64)) -> Node {
        Node {
            x,
            y,
            w: NODE_W,
            line1: fit(&format!("absent: {}", self.holder), 21),
            line2: fit(&self.label, 24),
            fill: "#fff3e0",
            stroke: "#c62828",
            dash: "4,3",
            tip: self.tip.clone(),
            href: "#findings".into(),
        }
    }
}

/// The graph's grid: a column per distinct time (the outcome's after them), a lane
/// per author by first appearance (the outcome's below them); nodes sharing a cell
/// are stacked.
struct Grid {
    times: Vec<u64>,
    lanes: Vec<String>,
    /// Nodes placed so far per `(column, lane)`.
    used: BTreeMap<(i64, i64), i64>,
}

impl Grid {
    /// The grid of the nodes timed in `time` and the absences `abs`.
    fn new(
        record: &VerdictRecord,
        time: &BTreeMap<String, u64>,
        abs: &[AbsenceMark],
        t_star_ms: u64,
    ) -> Grid {
        // Columns: distinct times, t* last.
        let mut times: BTreeSet<u64> = time.values().copied().collect();
        times.extend(abs.iter().map(|a| a.t));
        if times.is_empty() {
            times.insert(t_star_ms);
        }
        // (The outcome gets its own column after these, at t*.)
        let times: Vec<u64> = times.into_iter().collect();
        // Lanes: authors by first appearance.
        let mut lanes: Vec<String> = Vec::new();
        let mut order: Vec<(u64, String)> = time
            .iter()
            .map(|(id, t)| (*t, author_of(record, id)))
            .collect();
        order.extend(abs.iter().map(|a| (a.t, a.holder.clone())));
        order.sort();
        for (_, a) in order {
            if !lanes.contains(&a) {
                lanes.push(a);
            }
        }
        Grid {
            times,
            lanes,
            used: BTreeMap::new(),
        }
    }

    /// Places a node of `author` at time `t`: its top-left corner, stacked below
    /// the nodes already in that cell.
    fn cell(&mut self, t: u64, author: &str) -> (i64, i64) {
        let c = self
            .times
            .iter()
            .position(|x| *x >= t)
            .unwrap_or(self.times.len() - 1) as i64;
        let l = self.lanes.iter().position(|x| x == author).unwrap_or(0) as i64;
        let k = self.used.entry((c, l)).or_insert(0);
        let y = TOP + l * LANE_H + (*k * 10);
        *k += 1;
        (LEFT + c * COL_W, y)
    }

    /// The outcome node's corner: its own column and lane, after all others.
    fn outcome_cell(&self) -> (i64, i64) {
        (
            LEFT + self.times.len() as i64 * COL_W,
            TOP + self.lanes.len() as i64 * LANE_H,
        )
    }

    /// The lane labels, the outcome's (at `oy`) last.
    fn lane_views(&self, oy: i64) -> Vec<Lane> {
        let mut lanes: Vec<Lane> = self
            .lanes
            .iter()
            .enumerate()
            .map(|(i, a)| Lane {
                y: TOP + i as i64 * LANE_H + 18,
                name: a.clone(),
            })
            .collect();
        lanes.push(Lane {
            y: oy + 18,
            name: "outcome".into(),
        });
        lanes
    }

    /// The time axis: per column its offset from `t*` and wall-clock time, then the
    /// outcome's column (at `ox`).
    fn ticks(&self, t_star_ms: u64, origin: &RecordOrigin, ox: i64) -> Vec<Tick> {
        let mut ticks: Vec<Tick> = self
            .times
            .iter()
            .enumerate()
            .map(|(i, t)| Tick {
                x: LEFT + i as i64 * COL_W + NODE_W / 2,
                top: offset(*t as i64 - t_star_ms as i64),
                bottom: rfc3339(origin.wall(*t))
                    .get(11..23)
                    .unwrap_or("")
                    .to_string(),
            })
            .collect();
        ticks.push(Tick {
            x: ox + NODE_W / 2,
            top: "Y".into(),
            bottom: rfc3339(origin.wall(t_star_ms))
                .get(11..23)
                .unwrap_or("")
                .to_string(),
        });
        ticks
    }
}

/// The node of message `id` at `(x, y)`: certified (green), suspect (orange) or
/// missing (dashed red), outlined black when it is an anchor.
fn message_node(
    record: &VerdictRecord,
    v: &VerdictView,
    origin: &RecordOrigin,
    item_kind: &BTreeMap<&str, &str>,
    id: &str,
    (x, y): (i64, i64),
) -> Node {
    let m = record.messages.get(id);
    let kind = item_kind.get(id).copied();
    let (fill, stroke, dash) = match kind {
        Some("suspect") => ("#ef6c00", "#ef6c00", ""),
        Some(_) => ("#ffffff", "#c62828", "4,3"),
        None if m.is_some() || v.slice.messages.iter().any(|s| s == id) => {
            ("#2e7d32", "#2e7d32", "")
        }
        None => ("#ffffff", "#c62828", "4,3"),
    };
    let anchor = v.anchors.iter().any(|a| a == id);
    let line2 = match m {
        Some(m) => format!("{} {}", m.kind, m.target.clone().unwrap_or_default()),
        None => kind.unwrap_or("missing").to_string(),
    };
    let hex = id.rsplit_once(':').map_or("", |(_, h)| h);
    let tip = match m {
        Some(m) => format!(
            "{id}\nauthor {} → {}\n{} {} {}\neffect: {}\nrecord time {} ms ({}) · {}\ncites {}",
            m.author,
            m.destination,
            m.kind,
            m.target.clone().unwrap_or_default(),
            params_text(m),
            m.effect,
            m.timestamp_ms,
            offset(m.timestamp_ms as i64 - v.t_star_ms as i64),
            rfc3339(origin.wall(m.timestamp_ms)),
            if m.citations.is_empty() {
                "nothing (a root)".into()
            } else {
                m.citations
                    .iter()
                    .map(|c| short(c))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ),
        None => format!(
            "{id}\n{}: its author is known from its id, its content is not in the certified record",
            kind.unwrap_or("missing")
        ),
    };
    Node {
        x,
        y,
        w: NODE_W,
        line1: fit(
            &format!("{} {}", author_of(record, id), &hex[..hex.len().min(6)]),
            22,
        ),
        line2: fit(&line2, 24),
        fill,
        stroke: if anchor { "#000000" } else { stroke },
        dash,
        tip,
        href: format!("#{}", anchor_of(id)),
    }
}

/// An edge's path from the right of node `a` to the left of node `b` (a loop
/// below when they share a column).
fn curve(a: (i64, i64), b: (i64, i64)) -> String {
    let (x1, y1) = (a.0 + NODE_W, a.1 + 14);
    let (x2, y2) = (b.0 - 2, b.1 + 14);
    if x2 > x1 {
        let mid = (x1 + x2) / 2;
        format!("M{x1},{y1} C{mid},{y1} {mid},{y2} {x2},{y2}")
    } else {
        // Same column: loop below.
        let (sx, ex) = (a.0 + NODE_W / 2, b.0 + NODE_W / 2);
        format!(
            "M{sx},{} C{sx},{} {ex},{} {ex},{}",
            a.1 + 28,
            a.1 + 48,
            b.1 - 20,
            b.1 - 2
        )
    }
}

/// The slice's citation edges between drawn nodes, styled by witness grade.
fn citation_edges(v: &VerdictView, pos: &BTreeMap<String, (i64, i64)>) -> Vec<Edge> {
    let mut edges = Vec::new();
    for e in &v.slice.edges {
        let (Some(p), Some(c)) = (pos.get(&e.parent), pos.get(&e.child)) else {
            continue;
        };
        let (dash, colour) = match e.kind.as_str() {
            "hash_match" => ("", "#444444"),
            "window_exit" => ("2,3", "#c62828"),
            _ => ("6,4", "#8e24aa"),
        };
        edges.push(Edge {
            d: curve(*p, *c),
            dash,
            colour,
            marker: "arrow",
            tip: format!(
                "{} cites {} ({})",
                short(&e.child),
                short(&e.parent),
                e.kind.replace('_', " ")
            ),
        });
    }
    edges
}

/// Renders the index of incidents (rows in any order; the page sorts them).
pub fn render_index(rows: &[&IncidentRow], origin: &RecordOrigin, build: &Build) -> String {
    let rank = |key: &dyn Fn(&IncidentRow) -> String| -> BTreeMap<String, usize> {
        let mut v: Vec<(String, &String)> = rows.iter().map(|r| (key(r), &r.incident)).collect();
        v.sort();
        v.into_iter()
            .enumerate()
            .map(|(i, (_, inc))| (inc.clone(), i))
            .collect()
    };
    let by_time = rank(&|r| format!("{:020}", r.t_star.unwrap_or(r.verdict_time)));
    let by_pred = rank(&|r| r.predicate.clone().unwrap_or_default());
    let by_sev = rank(&|r| format!("{:020.3}", 1e12 - r.severity_j.unwrap_or(0.0)));
    let by_status = rank(&|r| r.status.clone());
    let by_culp = rank(&|r| format!("{:010}", u32::MAX - r.culpable));
    let mut out: Vec<IndexRow> = rows
        .iter()
        .map(|r| {
            let status = if r.status == "abstained" {
                "abstained"
            } else if r.unresolved > 0 && r.culpable == 0 {
                "unresolved"
            } else if r.principals == 0 {
                "no cause"
            } else if r.culpable > 0 {
                "culpable"
            } else {
                "cleared"
            };
            IndexRow {
                href: file_name(&r.incident),
                incident: r.incident.clone(),
                time: r.t_star.map_or("unknown".into(), rfc3339),
                predicate: r.predicate.clone().unwrap_or_else(|| "?".into()),
                severity: r.severity_j.map_or("–".into(), |s| format!("{s:.1} J")),
                status: status.to_string(),
                status_class: match status {
                    "culpable" => "st-culpable",
                    "abstained" => "st-abstained",
                    "no cause" => "st-nocause",
                    "unresolved" => "st-unresolved",
                    _ => "st-cleared",
                },
                culpable: if r.culpable_principals.is_empty() {
                    "–".into()
                } else {
                    r.culpable_principals.join(", ")
                },
                ranks: format!(
                    "--t:{};--p:{};--s:{};--st:{};--c:{}",
                    by_time[&r.incident],
                    by_pred[&r.incident],
                    by_sev[&r.incident],
                    by_status[&r.incident],
                    by_culp[&r.incident]
                ),
            }
        })
        .collect();
    out.sort_by(|a, b| a.incident.cmp(&b.incident));
    let page = IndexPage {
        count: rows.len(),
        abstained: rows.iter().filter(|r| r.status == "abstained").count(),
        culpable: rows.iter().filter(|r| r.culpable > 0).count(),
        rows: out,
        origin: origin.text(),
        generated: build.generated(),
        version: build.version.clone(),
    };
    page.render().unwrap_or_else(|e| error_page(&e.to_string()))
}
