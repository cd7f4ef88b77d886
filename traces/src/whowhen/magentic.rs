//! Magentic-One logs (the Who&When Hand-Crafted subset's format): speakers from
//! `role`, the orchestrator's progress ledger, and a static attributor that reads it.
//!
//! **Speakers.** `role` is `human`, `Orchestrator (thought)`, `Orchestrator (-> X)` or
//! an agent's name (`WebSurfer`, `FileSurfer`, `Assistant`, `ComputerTerminal`). The
//! base agent is the role with a trailing ` (thought)` or ` (-> X)` removed: the
//! benchmark labels the orchestrator's thoughts and hand-offs `Orchestrator`.
//!
//! **The ledger.** After each step the orchestrator answers five questions in JSON
//! (Magentic-One's progress-ledger prompt): `is_request_satisfied`, `is_in_loop`,
//! `is_progress_being_made`, `next_speaker`, `instruction_or_question`, each
//! `{reason, answer}`. [`Ledger::parse`] reads the first balanced `{…}` of a thought
//! that holds any of these keys; a thought without one has no ledger.
//!
//! **The attributor.** A failed run's decisive step is where it stopped advancing:
//! 1. the first ledger that reports no progress or a loop marks a stall; the
//!    orchestrator's last hand-off before it started the stalled work, and the
//!    instructed agent's first reply to it is the decisive step (the agent failed
//!    the instruction); without a reply, the hand-off itself (the orchestrator gave
//!    an instruction nobody could carry out);
//! 2. without a stall, a ledger that declares the request satisfied accepted a wrong
//!    answer: the agent reply it accepted (the last before it) is decisive;
//! 3. otherwise the first agent reply after the first hand-off, else the first
//!    hand-off, else the first step that is not the human's.
//!
//! The orchestrator carries a quarter share for its oversight duty when it is not the
//! decisive agent. The rule reads structure only; it was not tuned on labelled
//! Magentic-One logs (the Hand-Crafted subset is held out entirely) and is checked on
//! synthetic logs of the format for totality and for each branch.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{is_tool, Attribution, Turn, TurnKind};

/// The orchestrator's base name.
pub const ORCHESTRATOR: &str = "Orchestrator";

/// The base agent and the kind of a step from its `role`.
pub fn speaker(role: &str) -> (String, TurnKind) {
    let r = role.trim();
    if r.eq_ignore_ascii_case("human") || r.eq_ignore_ascii_case("user") {
        return (r.to_string(), TurnKind::Human);
    }
    if let Some(base) = r.strip_suffix("(thought)") {
        return (base.trim().to_string(), TurnKind::Thought);
    }
    if let Some(open) = r.rfind("(->") {
        if let Some(inner) = r[open + 3..].strip_suffix(')') {
            return (
                r[..open].trim().to_string(),
                TurnKind::Handoff {
                    to: inner.trim().to_string(),
                },
            );
        }
    }
    (r.to_string(), TurnKind::Agent)
}

/// One progress ledger.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ledger {
    /// `is_request_satisfied.answer`.
    pub satisfied: Option<bool>,
    /// `is_in_loop.answer`.
    pub in_loop: Option<bool>,
    /// `is_progress_being_made.answer`.
    pub progress: Option<bool>,
    /// `next_speaker.answer`.
    pub next_speaker: Option<String>,
    /// `instruction_or_question.answer`.
    pub instruction: Option<String>,
}

const KEYS: [&str; 5] = [
    "is_request_satisfied",
    "is_in_loop",
    "is_progress_being_made",
    "next_speaker",
    "instruction_or_question",
];

/// The end (exclusive) of the balanced JSON object starting at `start`, honouring
/// strings and escapes.
fn balanced(text: &[u8], start: usize) -> Option<usize> {
    let (mut depth, mut in_str, mut esc) = (0usize, false, false);
    for (i, &b) in text.iter().enumerate().skip(start) {
        if in_str {
            match (esc, b) {
                (true, _) => esc = false,
                (false, b'\\') => esc = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'{' => depth += 1,
            b'}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

fn answer(v: &Value) -> Option<&Value> {
    v.get("answer").or(Some(v))
}

fn boolean(v: Option<&Value>) -> Option<bool> {
    match answer(v?)? {
        Value::Bool(b) => Some(*b),
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" => Some(true),
            "false" | "no" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

fn string(v: Option<&Value>) -> Option<String> {
    answer(v?)?.as_str().map(|s| s.trim().to_string())
}

impl Ledger {
    /// The first ledger object in `text`, if any.
    pub fn parse(text: &str) -> Option<Self> {
        let bytes = text.as_bytes();
        let mut from = 0;
        while let Some(off) = text[from..].find('{') {
            let start = from + off;
            if let Some(end) = balanced(bytes, start) {
                if let Ok(Value::Object(o)) = serde_json::from_str::<Value>(&text[start..end]) {
                    if KEYS.iter().any(|k| o.contains_key(*k)) {
                        return Some(Self {
                            satisfied: boolean(o.get("is_request_satisfied")),
                            in_loop: boolean(o.get("is_in_loop")),
                            progress: boolean(o.get("is_progress_being_made")),
                            next_speaker: string(o.get("next_speaker")),
                            instruction: string(o.get("instruction_or_question")),
                        });
                    }
                }
            }
            from = start + 1;
        }
        None
    }

    /// Whether the ledger reports a stall (no progress, or a loop).
    pub fn stalled(&self) -> bool {
        self.progress == Some(false) || self.in_loop == Some(true)
    }
}

fn is_worker(t: &Turn) -> bool {
    t.kind == TurnKind::Agent && t.name != ORCHESTRATOR
}

/// The decisive step of a failed Magentic-One run (module documentation).
pub fn attribute(history: &[Turn]) -> Option<Attribution> {
    let ledgers: Vec<(usize, Ledger)> = history
        .iter()
        .enumerate()
        .filter(|(_, t)| t.kind == TurnKind::Thought)
        .filter_map(|(i, t)| Ledger::parse(&t.content).map(|l| (i, l)))
        .collect();
    let handoff_before = |end: usize| {
        (0..end).rev().find_map(|k| match &history[k].kind {
            TurnKind::Handoff { to } => Some((k, to.clone())),
            _ => None,
        })
    };
    let (step, rule) = if let Some((s, _)) = ledgers.iter().find(|(_, l)| l.stalled()) {
        match handoff_before(*s) {
            Some((h, to)) => {
                match (h + 1..*s).find(|&r| is_worker(&history[r]) && history[r].name == to) {
                    Some(r) => (
                        r,
                        "first reply to the instruction before the ledger reported a stall",
                    ),
                    None => (
                        h,
                        "the instruction before the ledger reported a stall, unanswered",
                    ),
                }
            }
            None => (*s, "the first ledger reporting a stall"),
        }
    } else if let Some((l, _)) = ledgers.iter().find(|(_, l)| l.satisfied == Some(true)) {
        match (0..*l)
            .rev()
            .find(|&r| is_worker(&history[r]) && !is_tool(&history[r]))
        {
            Some(r) => (r, "the reply the orchestrator accepted as the answer"),
            None => (*l, "the ledger that declared a wrong answer satisfactory"),
        }
    } else {
        let first_handoff = history
            .iter()
            .position(|t| matches!(t.kind, TurnKind::Handoff { .. }));
        match first_handoff {
            Some(h) => match (h + 1..history.len()).find(|&r| is_worker(&history[r])) {
                Some(r) => (r, "first agent reply after the first instruction"),
                None => (h, "the first instruction"),
            },
            None => (
                history.iter().position(|t| t.kind != TurnKind::Human)?,
                "the first step after the task",
            ),
        }
    };
    let agent = history[step].name.clone();
    let mut weights: BTreeMap<String, f64> = BTreeMap::new();
    weights.insert(agent.clone(), 1.0);
    if history.iter().any(|t| t.name == ORCHESTRATOR) {
        weights.entry(ORCHESTRATOR.to_string()).or_insert(0.25);
    }
    Some(Attribution::weighted(agent, step, weights, rule))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger(progress: bool, in_loop: bool, satisfied: bool, next: &str) -> String {
        format!(
            "Updated Ledger:\n{{\"is_request_satisfied\": {{\"reason\": \"r {{not json\", \"answer\": {satisfied}}}, \
             \"is_in_loop\": {{\"reason\": \"\", \"answer\": {in_loop}}}, \
             \"is_progress_being_made\": {{\"reason\": \"\", \"answer\": \"{progress}\"}}, \
             \"next_speaker\": {{\"reason\": \"\", \"answer\": \"{next}\"}}, \
             \"instruction_or_question\": {{\"reason\": \"\", \"answer\": \"search it\"}}}}"
        )
    }

    fn log(steps: &[(&str, String)]) -> Vec<Turn> {
        steps.iter().map(|(r, c)| Turn::magentic(r, c)).collect()
    }

    #[test]
    fn speakers_are_base_agents() {
        assert_eq!(
            speaker("Orchestrator (thought)"),
            ("Orchestrator".into(), TurnKind::Thought)
        );
        assert_eq!(
            speaker("Orchestrator (-> WebSurfer)"),
            (
                "Orchestrator".into(),
                TurnKind::Handoff {
                    to: "WebSurfer".into()
                }
            )
        );
        assert_eq!(speaker("human"), ("human".into(), TurnKind::Human));
        assert_eq!(
            speaker("FileSurfer"),
            ("FileSurfer".into(), TurnKind::Agent)
        );
    }

    #[test]
    fn the_ledger_is_read_from_the_first_balanced_object() {
        let l = Ledger::parse(&format!(
            "{{not a ledger}} {}",
            ledger(false, false, false, "WebSurfer")
        ))
        .unwrap();
        assert_eq!(l.progress, Some(false));
        assert_eq!(l.in_loop, Some(false));
        assert_eq!(l.next_speaker.as_deref(), Some("WebSurfer"));
        assert_eq!(l.instruction.as_deref(), Some("search it"));
        assert!(l.stalled());
        assert_eq!(Ledger::parse("Initial plan: {unbalanced"), None);
    }

    #[test]
    fn a_stall_points_back_at_the_reply_to_the_last_instruction() {
        let h = log(&[
            ("human", "Find X".into()),
            ("Orchestrator (thought)", "Initial plan".into()),
            ("Orchestrator (-> WebSurfer)", "Search X".into()),
            ("WebSurfer", "I typed X".into()),
            (
                "Orchestrator (thought)",
                ledger(true, false, false, "FileSurfer"),
            ),
            ("Orchestrator (-> FileSurfer)", "Open the file".into()),
            ("FileSurfer", "wrong file".into()),
            (
                "Orchestrator (thought)",
                ledger(false, false, false, "FileSurfer"),
            ),
            ("Orchestrator (-> FileSurfer)", "Try again".into()),
        ]);
        let a = attribute(&h).unwrap();
        assert_eq!((a.agent.as_str(), a.step), ("FileSurfer", 6));
        assert!(a.rule.contains("stall"));
        assert!((a.responsibility.values().sum::<f64>() - 1.0).abs() < 0.01);
        assert_eq!(a.responsibility["Orchestrator"], 0.2);
    }

    #[test]
    fn every_branch_answers() {
        // Unanswered instruction before the stall: the orchestrator's hand-off.
        let h = log(&[
            ("human", "Find X".into()),
            ("Orchestrator (-> WebSurfer)", "Search X".into()),
            (
                "Orchestrator (thought)",
                ledger(false, true, false, "WebSurfer"),
            ),
        ]);
        assert_eq!(
            attribute(&h).map(|a| (a.agent, a.step)),
            Some(("Orchestrator".into(), 1))
        );
        // No stall, a wrong answer accepted.
        let h = log(&[
            ("human", "Find X".into()),
            ("Orchestrator (-> Assistant)", "Compute".into()),
            ("Assistant", "42".into()),
            (
                "Orchestrator (thought)",
                ledger(true, false, true, "Assistant"),
            ),
        ]);
        assert_eq!(
            attribute(&h).map(|a| (a.agent, a.step)),
            Some(("Assistant".into(), 2))
        );
        // No ledger at all.
        let h = log(&[
            ("human", "Find X".into()),
            ("Orchestrator (thought)", "plan".into()),
            ("Orchestrator (-> WebSurfer)", "go".into()),
            ("WebSurfer", "done".into()),
        ]);
        assert_eq!(
            attribute(&h).map(|a| (a.agent, a.step)),
            Some(("WebSurfer".into(), 3))
        );
        let h = log(&[
            ("human", "Find X".into()),
            ("Orchestrator (thought)", "plan".into()),
        ]);
        assert_eq!(
            attribute(&h).map(|a| (a.agent, a.step)),
            Some(("Orchestrator".into(), 1))
        );
        assert!(attribute(&log(&[("human", "only".into())])).is_none());
    }
}
