//! Static-log failure attribution on the Who&When benchmark's conversation logs
//! (`shared/whowhen/README.md`): a reader of both of its log formats, a duty- and
//! structure-aware attributor that reads the log alone (no replay, no model, no
//! cryptography), and the benchmark's own scorer.
//!
//! **Formats** ([`LogFormat`], detected per file). Algorithm-Generated (CaptainAgent,
//! AG2): every `history` entry is `{content, role, name}` and `name` is the speaker.
//! Hand-Crafted (Magentic-One): entries are `{role, content}` without `name`, and
//! `role` is `human`, `Orchestrator (thought)`, `Orchestrator (-> AgentName)` or an
//! agent's name; a [`Turn`]'s `name` is then the **base agent** (`Orchestrator` for its
//! thoughts, hand-offs and final answer, as the labels name it), `label` the role as
//! logged. Content that is not a string is kept as its JSON text. Magentic-One's
//! attributor reads the orchestrator's progress ledger ([`magentic`]).
//!
//! **The attributor.** A failed run's decisive step is the first step whose product
//! entered the run's data flow: the author of the first code the tool executor ran
//! (the step before the first `exitcode:` reply; its output is what every later step
//! builds on). When no code was ever executed, it is the first reply after the
//! plan restatement at step 0 that is not a tool's. The decisive agent is that step's
//! speaker. The graded responsibility profile adds the agents whose declared duty
//! covered the failure: every verifier (a name declaring verification, validation,
//! checking or review) that spoke after the decisive step and let the run end wrong
//! (a silent verifier) holds half the decisive agent's share, and the orchestrator
//! (the step-0 speaker who restated the manager's plan) a quarter; the shares are
//! normalised to sum to 1.
//!
//! **Development discipline.** The rule was chosen on the development half of the
//! Algorithm-Generated subset only ([`is_development`]: a fixed hash of the file name)
//! and is not tuned per trace; the held-out half is reported beside it
//! (BENCHMARKS.md). The Hand-Crafted subset's halves are fixed by directory (the
//! shared `Hand-Crafted-dev/` is the development half; the rest is scored from
//! outside).
//!
//! **Floors.** Label-free rules an attributor must beat, for both formats: the first
//! worker's reply ([`floor_first_worker`], the benchmark README's), the first step
//! ([`floor_step_zero`]), the orchestrator's first hand-off ([`floor_first_handoff`],
//! Magentic-One only), the most frequent agent at its first reply
//! ([`floor_most_frequent`]) and the last agent reply ([`floor_last_reply`]).
//!
//! Design constraints:
//! - Input is bounded ([`Limits`]); malformed logs are one [`WhoWhenError`].
//! - The labels (`mistake_agent`, `mistake_step`, `mistake_reason`) and the ground
//!   truth are read for scoring only; [`attribute`] never sees them (it takes the
//!   [`Conversation`]'s history and system prompts).
//! - Scoring follows the benchmark's `evaluate.py`: agent correct iff the label is a
//!   case-sensitive substring of the first run of word characters of the prediction;
//!   step correct iff the label's digits are a substring of the prediction's digits;
//!   the strict variants compare exactly.

pub mod judge;
pub mod magentic;

use std::collections::BTreeMap;

use serde::Deserialize;
use sha2::{Digest, Sha256};
use thiserror::Error;

/// Bounds on one log.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Most bytes of one file.
    pub max_bytes: usize,
    /// Most history entries.
    pub max_steps: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_bytes: 16 << 20,
            max_steps: 100_000,
        }
    }
}

/// Why a log was refused.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum WhoWhenError {
    /// Larger than [`Limits::max_bytes`].
    #[error("log of {bytes} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        /// Its size.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// More history entries than [`Limits::max_steps`].
    #[error("log holds more than {limit} history entries")]
    TooManySteps {
        /// The limit.
        limit: usize,
    },
    /// Not a Who&When log.
    #[error("not a Who&When log: {0}")]
    Json(String),
    /// A log without history.
    #[error("log has an empty history")]
    Empty,
}

/// Which of the benchmark's two log formats a file is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogFormat {
    /// CaptainAgent (AG2) logs: every entry names its speaker.
    AlgorithmGenerated,
    /// Magentic-One logs: the speaker is in `role`.
    MagenticOne,
}

impl LogFormat {
    /// The subset the format belongs to, as the benchmark names it.
    pub fn subset(self) -> &'static str {
        match self {
            Self::AlgorithmGenerated => "Algorithm-Generated",
            Self::MagenticOne => "Hand-Crafted",
        }
    }
}

/// What kind of step a turn is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TurnKind {
    /// The human's task statement (Magentic-One `human`): never a predicted agent.
    Human,
    /// The orchestrator's own step other than a hand-off: its reasoning
    /// (`Orchestrator (thought)`, holding its ledger) or another annotated step such
    /// as `Orchestrator (termination condition)`, which carries the final answer.
    Thought,
    /// The orchestrator's instruction to an agent (`Orchestrator (-> X)`).
    Handoff {
        /// The instructed agent.
        to: String,
    },
    /// An agent's (or a tool's) step.
    Agent,
}

/// One history entry: one step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Turn {
    /// The speaker: the base agent (`Orchestrator` for its thoughts and hand-offs).
    pub name: String,
    /// `assistant` or `user` (Algorithm-Generated); the role as logged (Magentic-One).
    pub role: String,
    /// The message.
    pub content: String,
    /// The speaker as the log shows it (`Orchestrator (-> WebSurfer)`).
    pub label: String,
    /// What kind of step it is.
    pub kind: TurnKind,
}

impl Turn {
    /// An agent's step with `name` as speaker (the Algorithm-Generated shape).
    pub fn new(name: &str, role: &str, content: &str) -> Self {
        Self {
            name: name.to_string(),
            role: role.to_string(),
            content: content.to_string(),
            label: name.to_string(),
            kind: TurnKind::Agent,
        }
    }

    /// A Magentic-One step from its `role`.
    pub fn magentic(role: &str, content: &str) -> Self {
        let (name, kind) = magentic::speaker(role);
        Self {
            name,
            role: role.to_string(),
            content: content.to_string(),
            label: role.to_string(),
            kind,
        }
    }
}

#[derive(Deserialize)]
struct RawTurn {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    role: String,
    #[serde(default)]
    content: serde_json::Value,
}

impl RawTurn {
    fn content(&self) -> String {
        match &self.content {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Null => String::new(),
            v => v.to_string(),
        }
    }
}

/// The annotators' label of a log (for scoring only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Label {
    /// `mistake_agent`.
    pub agent: String,
    /// `mistake_step`, as written (a string of digits).
    pub step: String,
}

/// A conversation log with its label kept apart.
#[derive(Clone, Debug)]
pub struct Conversation {
    /// The task.
    pub question: String,
    /// The steps, in order.
    pub history: Vec<Turn>,
    /// Agent name → system prompt.
    pub system_prompts: BTreeMap<String, String>,
    /// The label, when the file carries one.
    pub label: Option<Label>,
    /// The correct final answer (`ground_truth`; given to the LLM judges, as the
    /// benchmark does; never to [`attribute`]).
    pub ground_truth: String,
    /// The log's format.
    pub format: LogFormat,
}

#[derive(Deserialize)]
struct Raw {
    #[serde(default)]
    question: String,
    history: Vec<RawTurn>,
    #[serde(default)]
    system_prompt: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    ground_truth: Option<serde_json::Value>,
    #[serde(default)]
    mistake_agent: Option<serde_json::Value>,
    #[serde(default)]
    mistake_step: Option<serde_json::Value>,
}

fn text(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Reads one Who&When log.
pub fn parse_whowhen(bytes: &[u8], limits: &Limits) -> Result<Conversation, WhoWhenError> {
    if bytes.len() > limits.max_bytes {
        return Err(WhoWhenError::TooLarge {
            bytes: bytes.len(),
            limit: limits.max_bytes,
        });
    }
    let raw: Raw = serde_json::from_slice(bytes).map_err(|e| WhoWhenError::Json(e.to_string()))?;
    if raw.history.len() > limits.max_steps {
        return Err(WhoWhenError::TooManySteps {
            limit: limits.max_steps,
        });
    }
    if raw.history.is_empty() {
        return Err(WhoWhenError::Empty);
    }
    let label = match (
        raw.mistake_agent.as_ref().and_then(text),
        raw.mistake_step.as_ref().and_then(text),
    ) {
        (Some(agent), Some(step)) => Some(Label { agent, step }),
        _ => None,
    };
    let format = if raw.history.iter().all(|t| t.name.is_some()) {
        LogFormat::AlgorithmGenerated
    } else {
        LogFormat::MagenticOne
    };
    let history = raw
        .history
        .iter()
        .map(|t| match (format, &t.name) {
            (LogFormat::AlgorithmGenerated, Some(name)) => Turn::new(name, &t.role, &t.content()),
            _ => Turn::magentic(&t.role, &t.content()),
        })
        .collect();
    Ok(Conversation {
        question: raw.question,
        history,
        format,
        system_prompts: raw
            .system_prompt
            .into_iter()
            .map(|(k, v)| (k, text(&v).unwrap_or_default()))
            .collect(),
        label,
        ground_truth: raw.ground_truth.as_ref().and_then(text).unwrap_or_default(),
    })
}

/// The attributor's answer for one log.
#[derive(Clone, Debug, PartialEq)]
pub struct Attribution {
    /// The decisive agent.
    pub agent: String,
    /// The decisive step (0-based index into the history).
    pub step: usize,
    /// Graded responsibility: agent → share (sums to 1).
    pub responsibility: BTreeMap<String, f64>,
    /// Which rule decided the step.
    pub rule: &'static str,
}

impl Attribution {
    /// The attribution of `agent` at `step` with responsibility shared in proportion
    /// to `weights` (normalised to sum 1, rounded to thousandths).
    pub(crate) fn weighted(
        agent: String,
        step: usize,
        weights: BTreeMap<String, f64>,
        rule: &'static str,
    ) -> Attribution {
        let total: f64 = weights.values().sum();
        let responsibility = weights
            .into_iter()
            .map(|(k, w)| (k, (w / total * 1000.0).round() / 1000.0))
            .collect();
        Attribution {
            agent,
            step,
            responsibility,
            rule,
        }
    }
}

/// Whether a turn is a tool's (the code executor's) reply.
pub(crate) fn is_tool(t: &Turn) -> bool {
    t.content.trim_start().starts_with("exitcode:")
        || t.name == "Computer_terminal"
        || t.name.to_ascii_lowercase().contains("terminal")
}

/// Whether an agent's name declares a verification duty.
fn is_verifier(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["verif", "valid", "check", "review", "critic"]
        .iter()
        .any(|w| n.contains(w))
}

/// Names the decisive agent and step of a failed run, with the responsibility
/// profile (see the module documentation for the rule; a Magentic-One log —
/// turns with an orchestrator's thoughts or hand-offs, or a human — goes to
/// [`magentic::attribute`]).
pub fn attribute(history: &[Turn]) -> Option<Attribution> {
    if history.iter().any(|t| t.kind != TurnKind::Agent) {
        return magentic::attribute(history);
    }
    let first = history.first()?;
    // The first executed code: a tool reply reporting an exit code, and the nearest
    // non-tool step before it (its author).
    let executed = history.iter().enumerate().find_map(|(j, t)| {
        (j > 0 && t.content.trim_start().starts_with("exitcode:"))
            .then(|| (0..j).rev().find(|&k| !is_tool(&history[k])))
            .flatten()
    });
    let (step, rule) = match executed {
        Some(k) => (k, "author of the first executed code"),
        None => match history
            .iter()
            .enumerate()
            .skip(1)
            .find(|(_, t)| !is_tool(t))
        {
            Some((k, _)) => (k, "first reply after the plan without executed code"),
            None => (0, "only the plan restatement"),
        },
    };
    let agent = history[step].name.clone();
    let mut weights: BTreeMap<String, f64> = BTreeMap::new();
    weights.insert(agent.clone(), 1.0);
    for t in &history[step + 1..] {
        if is_verifier(&t.name) && !is_tool(t) && !weights.contains_key(&t.name) {
            weights.insert(t.name.clone(), 0.5);
        }
    }
    weights.entry(first.name.clone()).or_insert(0.25);
    Some(Attribution::weighted(agent, step, weights, rule))
}

/// Which half of the Algorithm-Generated subset a file belongs to: `true` for the
/// development half (the first byte of SHA-256 of `whowhen-ag/<file name>` is even),
/// `false` for held-out.
pub fn is_development(file_name: &str) -> bool {
    Sha256::digest(format!("whowhen-ag/{file_name}").as_bytes())[0] % 2 == 0
}

/// The half of a file of `format` by its name alone: the Algorithm-Generated split of
/// [`is_development`]; a Hand-Crafted (Magentic-One) file is held-out — that subset's
/// development half is a directory of its own (`Hand-Crafted-dev/`, which the bench
/// scores as development), not a function of the file name.
pub fn is_development_in(format: LogFormat, file_name: &str) -> bool {
    match format {
        LogFormat::AlgorithmGenerated => is_development(file_name),
        LogFormat::MagenticOne => false,
    }
}

/// The hits of one prediction against one label under the benchmark's rules.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hits {
    /// Label is a substring of the prediction's first word run (`evaluate.py`).
    pub agent: bool,
    /// Exact agent name.
    pub agent_strict: bool,
    /// Label digits are a substring of the prediction's digits.
    pub step: bool,
    /// Exact step integer.
    pub step_strict: bool,
}

/// Scores one prediction (`None`: no prediction, a miss on every count).
pub fn score(prediction: Option<(&str, usize)>, label: &Label) -> Hits {
    let Some((agent, step)) = prediction else {
        return Hits::default();
    };
    let word: String = agent
        .chars()
        .skip_while(|c| !(c.is_alphanumeric() || *c == '_'))
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    let digits = |s: &str| -> String { s.chars().filter(char::is_ascii_digit).collect() };
    let label_digits = digits(&label.step);
    let predicted = step.to_string();
    Hits {
        agent: word.contains(label.agent.as_str()),
        agent_strict: agent == label.agent,
        step: !label_digits.is_empty() && predicted.contains(&label_digits),
        step_strict: label.step.trim().parse::<usize>().ok() == Some(step),
    }
}

/// Accuracy counts over a set of logs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Logs scored (the denominator: every file, predicted or not).
    pub n: usize,
    /// Agent hits (benchmark rule).
    pub agent: usize,
    /// Agent hits (exact).
    pub agent_strict: usize,
    /// Step hits (benchmark rule).
    pub step: usize,
    /// Step hits (exact).
    pub step_strict: usize,
}

impl Tally {
    /// Adds one log's hits.
    pub fn add(&mut self, h: Hits) {
        self.n += 1;
        self.agent += usize::from(h.agent);
        self.agent_strict += usize::from(h.agent_strict);
        self.step += usize::from(h.step);
        self.step_strict += usize::from(h.step_strict);
    }

    /// `hits / n`, 0 for an empty tally.
    pub fn rate(&self, hits: usize) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            hits as f64 / self.n as f64
        }
    }
}

/// The label-free floor of the benchmark README: the first reply of a worker that is
/// neither a verifier nor a tool after step 0 (Magentic-One: after the human's task,
/// and not the orchestrator's).
pub fn floor_first_worker(history: &[Turn]) -> Option<(String, usize)> {
    let magentic = history.iter().any(|t| t.kind != TurnKind::Agent);
    let start = history.iter().position(|t| t.kind != TurnKind::Human)?;
    history
        .iter()
        .enumerate()
        .skip(start + 1)
        .find(|(_, t)| {
            let orchestrator = magentic && t.name == magentic::ORCHESTRATOR;
            matches!(t.kind, TurnKind::Agent)
                && !orchestrator
                && !is_tool(t)
                && !is_verifier(&t.name)
        })
        .map(|(k, t)| (t.name.clone(), k))
        .or_else(|| Some((history[start].name.clone(), start)))
}

/// The floor "the plan's author at step 0" (Magentic-One: the first step that is not
/// the human's).
pub fn floor_step_zero(history: &[Turn]) -> Option<(String, usize)> {
    let k = history.iter().position(|t| t.kind != TurnKind::Human)?;
    Some((history[k].name.clone(), k))
}

/// Whether a step is an agent's reply for the floors: an agent's step (not the
/// orchestrator's, in a Magentic-One log) that is not a tool's.
fn is_reply(t: &Turn, magentic: bool) -> bool {
    t.kind == TurnKind::Agent && !(magentic && t.name == magentic::ORCHESTRATOR) && !is_tool(t)
}

/// The floor "the orchestrator's first hand-off" (Magentic-One; `None` in a log
/// without hand-offs).
pub fn floor_first_handoff(history: &[Turn]) -> Option<(String, usize)> {
    history
        .iter()
        .position(|t| matches!(t.kind, TurnKind::Handoff { .. }))
        .map(|k| (history[k].name.clone(), k))
}

/// The floor "the agent that replied most often, at its first reply" (ties: the one
/// that replied first; counting the orchestrator's own steps it would always be the
/// orchestrator, which is [`floor_step_zero`] on Magentic-One logs). Without any
/// reply, [`floor_step_zero`].
pub fn floor_most_frequent(history: &[Turn]) -> Option<(String, usize)> {
    let magentic = history.iter().any(|t| t.kind != TurnKind::Agent);
    let mut counts: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (k, t) in history.iter().enumerate() {
        if is_reply(t, magentic) {
            counts.entry(t.name.as_str()).or_insert((0, k)).0 += 1;
        }
    }
    counts
        .into_iter()
        .max_by(|(_, (n1, k1)), (_, (n2, k2))| n1.cmp(n2).then(k2.cmp(k1)))
        .map(|(name, (_, k))| (name.to_string(), k))
        .or_else(|| floor_step_zero(history))
}

/// The floor "the last agent reply before the final answer" (not a tool's, not the
/// orchestrator's). Without any reply, [`floor_step_zero`].
pub fn floor_last_reply(history: &[Turn]) -> Option<(String, usize)> {
    let magentic = history.iter().any(|t| t.kind != TurnKind::Agent);
    history
        .iter()
        .rposition(|t| is_reply(t, magentic))
        .map(|k| (history[k].name.clone(), k))
        .or_else(|| floor_step_zero(history))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(name: &str, content: &str) -> Turn {
        Turn::new(name, "user", content)
    }

    #[test]
    fn the_author_of_the_first_executed_code_is_decisive() {
        let h = vec![
            turn("Planner_Expert", "plan"),
            turn(
                "Computer_terminal",
                "There is no code from the last 1 message",
            ),
            turn("Coder_Expert", "```python\nprint(1)```"),
            turn(
                "Computer_terminal",
                "exitcode: 0 (execution succeeded)\nCode output: 1",
            ),
            turn("Verification_Expert", "Looks right. TERMINATE"),
        ];
        let a = attribute(&h).unwrap();
        assert_eq!((a.agent.as_str(), a.step), ("Coder_Expert", 2));
        // Coder 1, silent verifier 0.5, orchestrator 0.25 → /1.75
        assert_eq!(a.responsibility["Coder_Expert"], 0.571);
        assert_eq!(a.responsibility["Verification_Expert"], 0.286);
        assert_eq!(a.responsibility["Planner_Expert"], 0.143);
    }

    #[test]
    fn without_executed_code_the_first_reply_after_the_plan_is_decisive() {
        let h = vec![
            turn("Planner_Expert", "plan"),
            turn("Computer_terminal", "There is no code"),
            turn("Facts_Expert", "The answer is 4"),
            turn("Planner_Expert", "TERMINATE"),
        ];
        let a = attribute(&h).unwrap();
        assert_eq!((a.agent.as_str(), a.step), ("Facts_Expert", 2));
        assert!(attribute(&[]).is_none());
    }

    #[test]
    fn the_floors_name_natural_steps_of_both_formats() {
        let m = |r: &str, c: &str| Turn::magentic(r, c);
        let h = vec![
            m("human", "task"),
            m("Orchestrator (thought)", "plan"),
            m("Orchestrator (-> WebSurfer)", "search"),
            m("WebSurfer", "I typed"),
            m("Orchestrator (-> Assistant)", "compute"),
            m("Assistant", "1"),
            m("WebSurfer", "I clicked"),
            m("ComputerTerminal", "exitcode: 0"),
            m("Orchestrator (termination condition)", "FINAL ANSWER: 1"),
        ];
        assert_eq!(floor_step_zero(&h), Some(("Orchestrator".into(), 1)));
        assert_eq!(floor_first_handoff(&h), Some(("Orchestrator".into(), 2)));
        assert_eq!(floor_first_worker(&h), Some(("WebSurfer".into(), 3)));
        assert_eq!(floor_most_frequent(&h), Some(("WebSurfer".into(), 3)));
        // The final answer is the orchestrator's step, the terminal a tool.
        assert_eq!(floor_last_reply(&h), Some(("WebSurfer".into(), 6)));
        // Algorithm-Generated: no hand-offs; a tie goes to the earlier speaker.
        let h = vec![
            turn("Planner_Expert", "plan"),
            turn("Coder_Expert", "code"),
            turn("Computer_terminal", "exitcode: 0"),
            turn("Verification_Expert", "ok"),
            turn("Coder_Expert", "more"),
            turn("Verification_Expert", "TERMINATE"),
        ];
        assert_eq!(floor_first_handoff(&h), None);
        assert_eq!(floor_most_frequent(&h), Some(("Coder_Expert".into(), 1)));
        assert_eq!(
            floor_last_reply(&h),
            Some(("Verification_Expert".into(), 5))
        );
        assert_eq!(floor_last_reply(&[]), None);
    }

    #[test]
    fn scoring_follows_evaluate_py() {
        let label = Label {
            agent: "Data_Expert".into(),
            step: "3".into(),
        };
        let hit = score(Some(("Data_Expert (the coder)", 3)), &label);
        assert!(hit.agent && !hit.agent_strict && hit.step && hit.step_strict);
        // The benchmark keeps the first word run only: a label with '-' never scores.
        let dash = Label {
            agent: "Location-Based_Services_Expert".into(),
            step: "1".into(),
        };
        assert!(!score(Some(("Location-Based_Services_Expert", 1)), &dash).agent);
        assert!(score(Some(("Location-Based_Services_Expert", 1)), &dash).agent_strict);
        // Digit substring: step 13 scores a label "3" leniently, not strictly.
        let s = score(Some(("x", 13)), &label);
        assert!(s.step && !s.step_strict);
        assert_eq!(score(None, &label), Hits::default());
    }

    #[test]
    fn bad_logs_are_errors() {
        let l = Limits::default();
        assert!(matches!(
            parse_whowhen(b"{", &l),
            Err(WhoWhenError::Json(_))
        ));
        assert_eq!(
            parse_whowhen(br#"{"history": []}"#, &l).unwrap_err(),
            WhoWhenError::Empty
        );
        let small = Limits {
            max_bytes: 4,
            max_steps: 1,
        };
        assert!(matches!(
            parse_whowhen(br#"{"history": []}"#, &small),
            Err(WhoWhenError::TooLarge { .. })
        ));
    }
}
