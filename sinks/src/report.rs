//! Self-contained HTML incident reports (no scripts, no external assets) rendered from
//! a verdict JSON (`audita.verdict/v1`): an SVG of the slice with every node coloured
//! certified / suspect / missing and every edge drawn by its witness grade,
//! responsibility bars with their intervals, and the duty and breach table.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn short(id: &str) -> String {
    match id.rsplit_once(':') {
        Some((author, hex)) => format!("{author}:{}", &hex[..hex.len().min(8)]),
        None => id.to_string(),
    }
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Renders the report of one verdict.
pub fn render(verdict: &Value) -> String {
    let incident = verdict["incident"].as_str().unwrap_or("?");
    let mut html = String::new();
    let _ = write!(
        html,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>Audita incident {i}</title><style>\
         body{{font-family:system-ui,sans-serif;margin:2em;color:#222}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #ccc;padding:4px 8px;text-align:left;font-size:14px}}\
         .k{{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px}}</style></head><body>\
         <h1>Incident {i}</h1><p><b>Outcome</b> {o} at t* = {t} ms · severity {s:.1} J · standard <b>{st}</b> · \
         claim <b>{c}</b> · status {status}</p>",
        i = esc(incident),
        o = esc(verdict["outcome"].as_str().unwrap_or("")),
        t = verdict["t_star_ms"].as_u64().unwrap_or(0),
        s = verdict["severity_j"].as_f64().unwrap_or(0.0),
        st = esc(verdict["standard"].as_str().unwrap_or("")),
        c = esc(verdict["claim"]["level"].as_str().unwrap_or("")),
        status = esc(verdict["status"].as_str().unwrap_or("")),
    );
    html.push_str(&slice_svg(verdict));
    html.push_str(&responsibility_svg(verdict));
    html.push_str(&duty_table(verdict));
    let notes = strs(&verdict["notes"]);
    if !notes.is_empty() {
        html.push_str("<h2>Notes</h2><ul>");
        for n in notes {
            let _ = write!(html, "<li>{}</li>", esc(&n));
        }
        html.push_str("</ul>");
    }
    html.push_str("</body></html>\n");
    html
}

fn slice_svg(v: &Value) -> String {
    let messages = strs(&v["slice"]["messages"]);
    let anchors: BTreeSet<String> = strs(&v["anchors"]).into_iter().collect();
    let mut status: BTreeMap<String, &str> =
        messages.iter().map(|m| (m.clone(), "certified")).collect();
    for item in v["completions"]["items"].as_array().into_iter().flatten() {
        if let Some(id) = item["id"].as_str() {
            let kind = match item["kind"].as_str() {
                Some("suspect") => "suspect",
                _ => "missing",
            };
            status.insert(id.to_string(), kind);
        }
    }
    let edges: Vec<(String, String, String)> = v["slice"]["edges"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| {
            Some((
                e["child"].as_str()?.to_string(),
                e["parent"].as_str()?.to_string(),
                e["kind"].as_str()?.to_string(),
            ))
        })
        .collect();
    for (c, p, _) in &edges {
        status.entry(c.clone()).or_insert("missing");
        status.entry(p.clone()).or_insert("missing");
    }
    // Layer = distance from an anchor along citations (anchors at the right).
    let mut layer: BTreeMap<String, usize> = anchors.iter().map(|a| (a.clone(), 0)).collect();
    for _ in 0..status.len() {
        let mut changed = false;
        for (c, p, _) in &edges {
            if let Some(&l) = layer.get(c) {
                if layer.get(p).is_none_or(|&lp| lp < l + 1) && l < status.len() {
                    layer.insert(p.clone(), l + 1);
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    let depth = layer.values().copied().max().unwrap_or(0) + 1;
    for n in status.keys() {
        layer.entry(n.clone()).or_insert(depth);
    }
    let mut columns: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for (n, l) in &layer {
        columns.entry(*l).or_default().push(n.clone());
    }
    let cols = columns.len().max(1);
    let rows = columns.values().map(Vec::len).max().unwrap_or(1);
    let (w, h) = (cols * 210 + 40, rows * 56 + 60);
    let pos: BTreeMap<String, (usize, usize)> = columns
        .iter()
        .flat_map(|(l, ns)| {
            let x = w - 220 - l * 210;
            ns.iter()
                .enumerate()
                .map(move |(i, n)| (n.clone(), (x, 40 + i * 56)))
        })
        .collect();
    let mut s = format!(
        "<h2>Incident slice</h2><p><span class=\"k\" style=\"background:#2e7d32\"></span>certified\
         <span class=\"k\" style=\"background:#ef6c00\"></span>suspect<span class=\"k\" style=\"background:#c62828\"></span>missing\
         · edges: solid = hash match (causal witness), dashed = folded/similarity (temporal), dotted = window exit</p>\
         <svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-size=\"11\">"
    );
    for (c, p, kind) in &edges {
        let (Some(a), Some(b)) = (pos.get(c), pos.get(p)) else {
            continue;
        };
        let dash = match kind.as_str() {
            "hash_match" => "",
            "window_exit" => " stroke-dasharray=\"2,3\"",
            _ => " stroke-dasharray=\"6,4\"",
        };
        let _ = write!(
            s,
            "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#555\"{dash}><title>{} cites {} ({kind})</title></line>",
            a.0 + 20,
            a.1 + 12,
            b.0 + 180,
            b.1 + 12,
            esc(&short(c)),
            esc(&short(p))
        );
    }
    for (n, (x, y)) in &pos {
        let colour = match status.get(n).copied() {
            Some("certified") => "#2e7d32",
            Some("suspect") => "#ef6c00",
            _ => "#c62828",
        };
        let stroke = if anchors.contains(n) { "#000" } else { "none" };
        let _ = write!(
            s,
            "<rect x=\"{x}\" y=\"{y}\" width=\"200\" height=\"24\" rx=\"4\" fill=\"{colour}\" stroke=\"{stroke}\" stroke-width=\"2\"/>\
             <text x=\"{}\" y=\"{}\" fill=\"#fff\">{}</text>",
            x + 6,
            y + 16,
            esc(&short(n))
        );
    }
    s.push_str("</svg>");
    let absences: Vec<String> = v["slice"]["absences"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| {
            format!(
                "<li><b>absence</b> <code>{}</code>: {} did not discharge duty {} (trigger {}){}</li>",
                esc(a["variable"].as_str().unwrap_or("")),
                esc(a["holder"].as_str().unwrap_or("")),
                esc(a["duty"].as_str().unwrap_or("")),
                esc(&short(a["trigger"].as_str().unwrap_or(""))),
                if a["in_outcome"].as_bool().unwrap_or(false) { " — in the outcome" } else { "" }
            )
        })
        .collect();
    if !absences.is_empty() {
        s.push_str("<p>Duty-indexed absence variables (required messages never issued):</p><ul>");
        s.push_str(&absences.concat());
        s.push_str("</ul>");
    }
    s
}

fn responsibility_svg(v: &Value) -> String {
    let Some(principals) = v["principals"].as_object() else {
        return String::new();
    };
    let h = principals.len() * 28 + 30;
    let mut s = format!(
        "<h2>Responsibility ρ with interval [ρ_lo, ρ_hi]</h2><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"860\" height=\"{h}\" font-size=\"12\">"
    );
    for (i, (name, f)) in principals.iter().enumerate() {
        let (lo, hi) = (
            f["rho_lo"].as_f64().unwrap_or(0.0),
            f["rho_hi"].as_f64().unwrap_or(0.0),
        );
        let y = 10 + i * 28;
        let culpable = f["culpable"].as_bool().unwrap_or(false);
        let colour = if culpable { "#c62828" } else { "#1565c0" };
        let _ = write!(
            s,
            "<text x=\"0\" y=\"{}\">{}</text><rect x=\"220\" y=\"{y}\" width=\"400\" height=\"18\" fill=\"#eee\"/>\
             <rect x=\"220\" y=\"{y}\" width=\"{:.1}\" height=\"18\" fill=\"{colour}\"/>\
             <rect x=\"{:.1}\" y=\"{}\" width=\"{:.1}\" height=\"8\" fill=\"{colour}\" opacity=\"0.4\"/>\
             <text x=\"630\" y=\"{}\">[{lo:.3}, {hi:.3}]{}</text>",
            y + 13,
            esc(name),
            lo * 400.0,
            220.0 + lo * 400.0,
            y + 5,
            (hi - lo).max(0.0) * 400.0,
            y + 13,
            if culpable { " culpable" } else { "" }
        );
    }
    s.push_str("</svg>");
    s
}

fn duty_table(v: &Value) -> String {
    let Some(principals) = v["principals"].as_object() else {
        return String::new();
    };
    let mut s = String::from(
        "<h2>Duty, breach, causation</h2><table><tr><th>principal</th><th>duties</th><th>breach (spec / reasonable)</th>\
         <th>ρ interval</th><th>status</th><th>claim</th><th>flags</th><th>evidence</th></tr>",
    );
    for (name, f) in principals {
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{} / {}</td><td>[{:.3}, {:.3}]</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(name),
            esc(&strs(&f["duties"]).join(", ")),
            f["breach"]["specification"].as_bool().unwrap_or(false),
            f["breach"]["reasonable_agent"].as_bool().unwrap_or(false),
            f["rho_lo"].as_f64().unwrap_or(0.0),
            f["rho_hi"].as_f64().unwrap_or(0.0),
            esc(f["status"].as_str().unwrap_or("")),
            esc(f["claim"]["level"].as_str().unwrap_or("")),
            esc(&strs(&f["flags"]).join(", ")),
            esc(&strs(&f["evidence"]).iter().map(|e| short(e)).collect::<Vec<_>>().join(" ")),
        );
    }
    s.push_str("</table>");
    s
}
