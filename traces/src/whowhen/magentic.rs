//! Magentic-One logs (the Who&When Hand-Crafted subset's format): speakers from
//! `role`, the orchestrator's progress ledger, and a static attributor that reads it.
//!
//! **Speakers.** `role` is `human`, `Orchestrator (thought)`, `Orchestrator (-> X)`,
//! `Orchestrator (termination condition)` or an agent's name (`WebSurfer`,
//! `FileSurfer`, `Assistant`, `ComputerTerminal`). The base agent is the role with a
//! trailing parenthesis removed: the benchmark labels the orchestrator's thoughts,
//! hand-offs and final answer `Orchestrator`. A hand-off is a [`TurnKind::Handoff`];
//! any other annotated step of the orchestrator (its thoughts, the termination
//! condition that carries the final answer) is a [`TurnKind::Thought`], never an
//! agent's reply.
//!
//! **The ledger.** After each step the orchestrator answers five questions in JSON
//! (Magentic-One's progress-ledger prompt): `is_request_satisfied`, `is_in_loop`,
//! `is_progress_being_made`, `next_speaker`, `instruction_or_question`, each
//! `{reason, answer}`. [`Ledger::parse`] reads the first balanced `{…}` of a thought
//! that holds any of these keys; a thought without one has no ledger.
//!
//! **Pages.** A `WebSurfer` reply reports its action and the page it is on (`Here is
//! a screenshot of [title](url)`); a `FileSurfer` reply opens with `Address: <url>`.
//! [`page`] reads that address (without its `#fragment`); a reply that states an
//! answer in prose has none.
//!
//! **The attributor.** The decisive step is where the content the run failed on
//! entered it; the ledger says which kind of failure the run had:
//! 1. **A wrong answer accepted.** When a ledger declares the request satisfied, the
//!    run ended on an answer the orchestrator accepted (an earlier stall was
//!    recovered from). The accepted reply is the last non-tool agent reply before
//!    that ledger. If it states an answer, its author is decisive there. If it only
//!    shows a page (a navigation report), no agent answered: the orchestrator read
//!    the answer off the page and declared success itself, so that ledger is the
//!    decisive step and the orchestrator the decisive agent.
//! 2. **A stall.** Otherwise the first ledger that reports no progress or a loop
//!    judged the last non-tool agent reply before it (instructions that went
//!    unanswered in between add nothing the ledger could judge). When that reply and
//!    the same agent's replies just before it are all on one page, the agent was
//!    stuck there: the decisive step is the reply that brought it to that page (the
//!    start of the repeated actions), where the run took the source it then could not
//!    get past. Without any agent reply before the stall, the last instruction
//!    nobody carried out (the orchestrator's hand-off), else the stalled ledger.
//! 3. **Broken off.** With neither (the run ended in an error, such as a model call
//!    refused on a page's text, or hit its round limit while the ledger still
//!    reported progress), the last non-tool agent reply: the state the run broke off
//!    in, from which the final answer was forced. Without any reply, the first
//!    hand-off, else the first step that is not the human's.
//!
//! The orchestrator carries a quarter share for its oversight duty when it is not the
//! decisive agent.
//!
//! **Development discipline.** Rules 1–3 read structure and the logged format only
//! (ledger answers, hand-offs, which speaker replied, the page a reply shows); they
//! were chosen by an error analysis of the development half of the Hand-Crafted
//! subset (`shared/whowhen/Hand-Crafted-dev/`, 29 files) and name no file, question,
//! site or answer. The other half is scored from outside. The first version of this
//! module (the reply to the last instruction before the first stall, before any
//! accepted answer) scored at the label-free floors on that half; BENCHMARKS.md has
//! both, beside the floors.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{is_tool, Attribution, Turn, TurnKind};

/// The orchestrator's base name.
pub const ORCHESTRATOR: &str = "Orchestrator";

/// The base agent and the kind of a step from its `role`: `X (-> Y)` is X's hand-off
/// to Y, any other `X (…)` (a thought, the termination condition) is X's own step.
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
    if let Some(open) = r.rfind('(') {
        let base = r[..open].trim();
        if r.ends_with(')') && !base.is_empty() {
            return (base.to_string(), TurnKind::Thought);
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

/// The page a reply shows: the address of a `WebSurfer` screenshot
/// (`Here is a screenshot of [title](url)`) or of a `FileSurfer` view (a line
/// `Address: url`), without its `#fragment`; `None` for a reply in prose.
pub fn page(content: &str) -> Option<&str> {
    const SHOT: &str = "Here is a screenshot of [";
    let url = if let Some(at) = content.find(SHOT) {
        let rest = &content[at + SHOT.len()..];
        let open = rest.find("](")?;
        let raw = rest[open + 2..].split_whitespace().next()?;
        let raw = raw.strip_suffix('.').unwrap_or(raw);
        raw.strip_suffix(')').unwrap_or(raw)
    } else {
        content
            .lines()
            .find_map(|l| l.trim_start().strip_prefix("Address:"))?
            .split_whitespace()
            .next()?
    };
    let url = url.split('#').next().unwrap_or(url);
    (!url.is_empty()).then_some(url)
}

/// The last non-tool agent reply before step `end`.
fn reply_before(history: &[Turn], end: usize) -> Option<usize> {
    (0..end)
        .rev()
        .find(|&r| is_worker(&history[r]) && !is_tool(&history[r]))
}

/// The reply that brought `history[r]`'s agent to the page `history[r]` shows: the
/// earliest of that agent's consecutive replies, up to `r`, that all show it.
fn arrival(history: &[Turn], r: usize) -> usize {
    let Some(p) = page(&history[r].content) else {
        return r;
    };
    let agent = &history[r].name;
    let mut first = r;
    for k in (0..r).rev() {
        let t = &history[k];
        if !is_worker(t) || &t.name != agent {
            continue;
        }
        if page(&t.content) != Some(p) {
            break;
        }
        first = k;
    }
    first
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
        (0..end)
            .rev()
            .find(|&k| matches!(history[k].kind, TurnKind::Handoff { .. }))
    };
    let orchestrator = |k: usize| (ORCHESTRATOR.to_string(), k);
    let satisfied = ledgers.iter().find(|(_, l)| l.satisfied == Some(true));
    let stall = ledgers.iter().find(|(_, l)| l.stalled());
    let ((agent, step), rule) = if let Some((l, _)) = satisfied {
        match reply_before(history, *l) {
            Some(r) if page(&history[r].content).is_some() => (
                orchestrator(*l),
                "the ledger that accepted a page as the answer",
            ),
            Some(r) => (
                (history[r].name.clone(), r),
                "the reply the orchestrator accepted as the answer",
            ),
            None => (
                orchestrator(*l),
                "the ledger that declared a wrong answer satisfactory",
            ),
        }
    } else if let Some((s, _)) = stall {
        match reply_before(history, *s) {
            Some(r) => {
                let a = arrival(history, r);
                let rule = if a < r {
                    "the reply that reached the page the run stalled on"
                } else {
                    "the reply the first stalled ledger judged"
                };
                ((history[a].name.clone(), a), rule)
            }
            None => match handoff_before(*s) {
                Some(h) => (
                    orchestrator(h),
                    "the instruction before the ledger reported a stall, unanswered",
                ),
                None => (orchestrator(*s), "the first ledger reporting a stall"),
            },
        }
    } else if let Some(r) = reply_before(history, history.len()) {
        (
            (history[r].name.clone(), r),
            "the last reply of a run that broke off without a stall",
        )
    } else if let Some(h) = history
        .iter()
        .position(|t| matches!(t.kind, TurnKind::Handoff { .. }))
    {
        (orchestrator(h), "the first instruction")
    } else {
        let k = history.iter().position(|t| t.kind != TurnKind::Human)?;
        (
            (history[k].name.clone(), k),
            "the first step after the task",
        )
    };
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
        // The final answer's step is the orchestrator's, not an agent reply.
        assert_eq!(
            speaker("Orchestrator (termination condition)"),
            ("Orchestrator".into(), TurnKind::Thought)
        );
        assert_eq!(speaker("(odd)"), ("(odd)".into(), TurnKind::Agent));
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

    fn shot(action: &str, url: &str) -> String {
        format!("{action}.\n\nHere is a screenshot of [Some page]({url}). The viewport shows 9% of the webpage.")
    }

    #[test]
    fn pages_are_read_from_screenshots_and_addresses() {
        assert_eq!(
            page(&shot("I clicked 'x'", "https://a.example/wiki/X_(y)#top")),
            Some("https://a.example/wiki/X_(y)")
        );
        assert_eq!(
            page("Address: file:///workspace/a.pdf\nTitle: Error 404"),
            Some("file:///workspace/a.pdf")
        );
        assert_eq!(page("The answer is 42."), None);
        assert_eq!(page("Here is a screenshot of [unclosed"), None);
    }

    #[test]
    fn a_stall_on_one_page_points_at_the_reply_that_reached_it() {
        let video = "https://video.example/watch?v=1";
        let h = log(&[
            ("human", "Count the birds".into()),
            ("Orchestrator (-> WebSurfer)", "Open the video".into()),
            (
                "WebSurfer",
                shot("I typed 'video'", "https://search.example/?q=v"),
            ),
            (
                "Orchestrator (thought)",
                ledger(true, false, false, "WebSurfer"),
            ),
            ("Orchestrator (-> WebSurfer)", "Open it".into()),
            ("WebSurfer", shot("I clicked 'video'", video)),
            (
                "Orchestrator (thought)",
                ledger(true, false, false, "WebSurfer"),
            ),
            ("Orchestrator (-> WebSurfer)", "Scan it".into()),
            ("Assistant", "Meanwhile, a note".into()),
            (
                "WebSurfer",
                shot("I scrolled down", &format!("{video}#t=3")),
            ),
            (
                "Orchestrator (thought)",
                ledger(false, true, false, "WebSurfer"),
            ),
        ]);
        let a = attribute(&h).unwrap();
        assert_eq!((a.agent.as_str(), a.step), ("WebSurfer", 5));
        assert!(a.rule.contains("page"), "{}", a.rule);
        // Unanswered instructions before the stall: the last reply is still judged.
        let h = log(&[
            ("human", "Find X".into()),
            ("Orchestrator (-> WebSurfer)", "Search X".into()),
            (
                "WebSurfer",
                shot("I typed 'X'", "https://search.example/?q=X"),
            ),
            (
                "Orchestrator (thought)",
                ledger(true, false, false, "WebSurfer"),
            ),
            (
                "Orchestrator (-> WebSurfer)",
                "Open the first result".into(),
            ),
            ("Orchestrator (thought)", "Next speaker WebSurfer".into()),
            (
                "Orchestrator (thought)",
                ledger(false, false, false, "WebSurfer"),
            ),
        ]);
        assert_eq!(
            attribute(&h).map(|a| (a.agent, a.step)),
            Some(("WebSurfer".into(), 2))
        );
    }

    #[test]
    fn an_accepted_answer_outranks_an_earlier_stall() {
        let h = log(&[
            ("human", "Compute X".into()),
            ("Orchestrator (-> WebSurfer)", "Find the data".into()),
            (
                "WebSurfer",
                shot("I clicked 'data'", "https://data.example/"),
            ),
            (
                "Orchestrator (thought)",
                ledger(false, true, false, "Assistant"),
            ),
            ("Orchestrator (-> Assistant)", "Estimate it".into()),
            ("Assistant", "It is about 208.".into()),
            (
                "Orchestrator (thought)",
                ledger(true, false, true, "Assistant"),
            ),
            (
                "Orchestrator (termination condition)",
                "FINAL ANSWER: 208".into(),
            ),
        ]);
        let a = attribute(&h).unwrap();
        assert_eq!((a.agent.as_str(), a.step), ("Assistant", 5));
        // A page accepted as the answer: the orchestrator read it and declared success.
        let h = log(&[
            ("human", "Which word was deleted?".into()),
            ("Orchestrator (-> WebSurfer)", "Open the rule".into()),
            (
                "WebSurfer",
                shot("I clicked 'Rule 1'", "https://law.example/rule1"),
            ),
            (
                "Orchestrator (thought)",
                ledger(true, false, true, "Assistant"),
            ),
            (
                "Orchestrator (termination condition)",
                "FINAL ANSWER: but".into(),
            ),
        ]);
        let a = attribute(&h).unwrap();
        assert_eq!((a.agent.as_str(), a.step), ("Orchestrator", 3));
        assert_eq!(a.responsibility["Orchestrator"], 1.0);
    }

    #[test]
    fn a_run_that_broke_off_points_at_its_last_reply() {
        let h = log(&[
            ("human", "Find X".into()),
            ("Orchestrator (-> WebSurfer)", "Search X".into()),
            (
                "WebSurfer",
                shot("I typed 'X'", "https://search.example/?q=X"),
            ),
            (
                "Orchestrator (thought)",
                ledger(true, false, false, "WebSurfer"),
            ),
            ("Orchestrator (-> WebSurfer)", "Open it".into()),
            (
                "WebSurfer",
                format!(
                    "{}\nError processing publish message\nTraceback (most recent call last):",
                    shot("I clicked 'X'", "https://x.example/")
                ),
            ),
            (
                "Orchestrator (termination condition)",
                "FINAL ANSWER: 1".into(),
            ),
        ]);
        let a = attribute(&h).unwrap();
        assert_eq!((a.agent.as_str(), a.step), ("WebSurfer", 5));
    }
}
