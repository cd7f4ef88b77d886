//! Checking a declaration against the record: re-derive it and refuse what the
//! record does not support.
//!
//! Design constraints:
//! - A declaration — the monitor's or an operator's, by hand — is accepted only if
//!   the monitor, re-run over the certified record with the deployment's predicate
//!   file, derives the same incident: the same predicate and subject, `t*`, window,
//!   anchors and `combine`, severity (the registered mass, and ½·m·v² to
//!   [`SEVERITY_TOLERANCE_J`]), and
//!   realisation facts (nothing declared unrealised that the record shows realised,
//!   nothing unrealised left undeclared). Facts it declares must be the derived ones.
//! - The declaration must name its declarer (monitor or operator); the checked
//!   declaration keeps the declarer, the incident name and δ and carries the derived
//!   facts, so the verdict shows what the record establishes.
//! - A refusal is one line naming the first difference and the evidence that
//!   contradicts it.

use audita_verdict::{id_string, parse_id, AdverseDecl, Severity};
use std::collections::BTreeSet;

use crate::detect::Derivation;
use crate::predicate::Predicates;

/// Why a declaration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("declaration refused: {0}")]
pub struct Refusal(pub String);

fn ids(list: &[String]) -> Result<BTreeSet<String>, Refusal> {
    list.iter()
        .map(|s| {
            parse_id(s)
                .map(|id| id_string(&id))
                .map_err(|e| Refusal(e.to_string()))
        })
        .collect()
}

/// How far a declared severity may lie from the record's (J): the telemetry's speed
/// resolution (1 mm/s) and a declaration's decimal rounding, far below any harm scale.
pub const SEVERITY_TOLERANCE_J: f64 = 5e-3;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

fn sev(s: &Option<Severity>) -> String {
    match s {
        Some(s) => format!(
            "{} kg at {} m/s ({} J)",
            s.mass_kg,
            s.speed_m_per_s,
            s.joules()
        ),
        None => "none".into(),
    }
}

/// The derived declaration `decl` speaks of: the record's incident for its predicate
/// (and subject, when it names one), at its `t*` or the latest before it.
fn find_derived<'a>(
    decl: &AdverseDecl,
    derived: &'a Derivation,
) -> Result<&'a AdverseDecl, Refusal> {
    let refuse = |s: String| Err(Refusal(s));
    let mine: Vec<&AdverseDecl> = derived
        .declarations
        .iter()
        .filter(|d| d.outcome == decl.outcome)
        .collect();
    let targets: BTreeSet<&String> = decl.targets.iter().collect();
    let candidates: Vec<&AdverseDecl> = if targets.is_empty() {
        mine.clone()
    } else {
        mine.iter()
            .copied()
            .filter(|d| d.targets.iter().collect::<BTreeSet<_>>() == targets)
            .collect()
    };
    match candidates.as_slice() {
        [] => refuse(format!(
            "{} never holds{} in the certified record",
            decl.outcome,
            if targets.is_empty() {
                String::new()
            } else {
                format!(" for {}", decl.targets.join(", "))
            }
        )),
        [one] => Ok(*one),
        many => Ok(match many.iter().find(|d| d.t_star_ms == decl.t_star_ms) {
            Some(d) => *d,
            None => *many
                .iter()
                .rfind(|d| d.t_star_ms <= decl.t_star_ms)
                .unwrap_or(&many[0]),
        }),
    }
}

/// The declared anchors are exactly the derived ones: none dropped, none added.
fn check_anchors(decl: &AdverseDecl, found: &AdverseDecl) -> Result<(), Refusal> {
    let refuse = |s: String| Err(Refusal(s));
    let (want, have) = (ids(&found.anchors)?, ids(&decl.anchors)?);
    if let Some(a) = want.difference(&have).next() {
        let why = found
            .facts
            .iter()
            .find(|f| f.message.as_deref() == Some(a.as_str()))
            .map(|f| f.detail.clone())
            .unwrap_or_default();
        return refuse(format!("anchor {a} dropped ({why})"));
    }
    if let Some(a) = have.difference(&want).next() {
        return refuse(format!(
            "{a} is declared an anchor but is no realised actuation establishing the state {} reads at t*",
            decl.outcome
        ));
    }
    Ok(())
}

/// The declared unrealised commands are exactly the derived ones.
fn check_unrealised(decl: &AdverseDecl, found: &AdverseDecl) -> Result<(), Refusal> {
    let refuse = |s: String| Err(Refusal(s));
    let (want, have) = (ids(&found.unrealised)?, ids(&decl.unrealised)?);
    if let Some(u) = have.difference(&want).next() {
        let realised = found.facts.iter().find(|f| {
            f.fact == audita_verdict::FactKind::Realised && f.message.as_deref() == Some(u.as_str())
        });
        return refuse(match realised {
            Some(f) => format!(
                "{u} is declared unrealised but the record shows its effect realised (actuation report {})",
                f.evidence.join(", ")
            ),
            None => format!(
                "{u} is declared unrealised but is no actuating command on {} past its realisation deadline",
                found.targets.join(", ")
            ),
        });
    }
    if let Some(u) = want.difference(&have).next() {
        return refuse(format!(
            "{u} never realised its effect by t* but is not declared unrealised"
        ));
    }
    Ok(())
}

/// Checks `decl` against what the monitor derived from the record; returns the
/// checked declaration (declarer, incident name and δ kept, facts as derived).
pub fn check(
    decl: &AdverseDecl,
    file: &Predicates,
    derived: &Derivation,
) -> Result<AdverseDecl, Refusal> {
    let refuse = |s: String| Err(Refusal(s));
    let Some(declarer) = decl.declarer.clone() else {
        return refuse("it names no declarer (monitor or operator)".into());
    };
    if file.get(&decl.outcome).is_none() {
        return refuse(format!(
            "predicate {:?} is not in the predicate file",
            decl.outcome
        ));
    }
    let targets: BTreeSet<&String> = decl.targets.iter().collect();
    let found = find_derived(decl, derived)?;
    let evidence_of = |kind: audita_verdict::FactKind| {
        found
            .facts
            .iter()
            .find(|f| f.fact == kind)
            .map(|f| f.evidence.join(", "))
            .unwrap_or_default()
    };
    if decl.t_star_ms != found.t_star_ms {
        return refuse(format!(
            "t* {} ms is not when {} first holds for {}: the record shows {} ms (telemetry {})",
            decl.t_star_ms,
            decl.outcome,
            found.targets.join(", "),
            found.t_star_ms,
            evidence_of(audita_verdict::FactKind::TStar)
        ));
    }
    if decl.window_start_ms != found.window_start_ms || decl.window_end() != found.window_end() {
        return refuse(format!(
            "window [{}, {}] ms is not the predicate's [{}, {}] ms",
            decl.window_start_ms,
            decl.window_end(),
            found.window_start_ms,
            found.window_end()
        ));
    }
    if decl.combine != found.combine {
        return refuse(format!(
            "combine {:?} is not the derived {:?}",
            decl.combine, found.combine
        ));
    }
    check_anchors(decl, found)?;
    check_unrealised(decl, found)?;
    let severity_ok = match (&decl.severity, &found.severity) {
        (None, None) => true,
        (Some(a), Some(b)) => {
            close(a.mass_kg, b.mass_kg) && (a.joules() - b.joules()).abs() <= SEVERITY_TOLERANCE_J
        }
        _ => false,
    };
    if !severity_ok {
        return refuse(format!(
            "severity {} is not the record's {} (telemetry {})",
            sev(&decl.severity),
            sev(&found.severity),
            evidence_of(audita_verdict::FactKind::Severity)
        ));
    }
    if !targets.is_empty() && targets != found.targets.iter().collect::<BTreeSet<_>>() {
        return refuse(format!(
            "targets {} are not the predicate's subject {}",
            decl.targets.join(", "),
            found.targets.join(", ")
        ));
    }
    if !decl.facts.is_empty() && decl.facts != found.facts {
        let bad = decl
            .facts
            .iter()
            .find(|f| !found.facts.contains(f))
            .map(|f| format!("{:?} {}", f.fact, f.message.as_deref().unwrap_or("")))
            .unwrap_or_else(|| "a derived fact is missing".into());
        return refuse(format!("fact {bad} is not what the record establishes"));
    }
    let mut checked = found.clone();
    checked.incident = decl.incident.clone();
    checked.delta = decl.delta;
    checked.declarer = Some(declarer);
    Ok(checked)
}
