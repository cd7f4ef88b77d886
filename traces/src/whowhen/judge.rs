//! The benchmark's three LLM-judge formats on a Who&When log (all-at-once, step-wise,
//! binary search), as prompts and answer parsing only: the model call is a closure
//! the caller supplies (the CLI passes `audita_baselines::judge::HttpTransport` when
//! `AUDITA_JUDGE_ENDPOINT` is set), so this module stays pure and is tested with
//! scripted answers.
//!
//! Design constraints:
//! - Every prompt carries the task, the correct final answer (the benchmark's judges
//!   are given it) and the steps numbered from 0, each cut to [`STEP_CHARS`]
//!   characters so a prompt is bounded.
//! - An answer that names no step or agent is "no prediction" (a miss), never a
//!   guess; a transport error ends that log's judging with the error.

use super::{Conversation, Turn};

/// Characters of one step's content shown to a judge.
pub const STEP_CHARS: usize = 3000;

/// Which format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Format {
    /// The whole log at once: name the agent and the step.
    AllAtOnce,
    /// One step at a time: the first step the judge calls decisive.
    StepWise,
    /// Halve the log until one step remains.
    BinarySearch,
}

impl Format {
    /// All formats, in the benchmark's order.
    pub const ALL: [Format; 3] = [Self::AllAtOnce, Self::StepWise, Self::BinarySearch];

    /// Stable name.
    pub fn name(self) -> &'static str {
        match self {
            Self::AllAtOnce => "judge: all-at-once",
            Self::StepWise => "judge: step-wise",
            Self::BinarySearch => "judge: binary search",
        }
    }
}

fn step_text(i: usize, t: &Turn) -> String {
    let content: String = t.content.chars().take(STEP_CHARS).collect();
    format!("Step {i} - {}: {content}\n", t.label)
}

fn preamble(c: &Conversation) -> String {
    format!(
        "A multi-agent system failed the task below. Find the agent whose step was the \
         decisive error and the step where it made it.\nTask: {}\nCorrect answer: {}\n\n",
        c.question, c.ground_truth
    )
}

/// The all-at-once prompt.
pub fn prompt_all(c: &Conversation) -> String {
    let mut p = preamble(c);
    for (i, t) in c.history.iter().enumerate() {
        p.push_str(&step_text(i, t));
    }
    p.push_str("\nReply exactly in two lines:\nAgent Name: <name>\nStep Number: <number>\n");
    p
}

/// The step-wise prompt for step `i` (the log up to and including it).
pub fn prompt_step(c: &Conversation, i: usize) -> String {
    let mut p = preamble(c);
    for (j, t) in c.history.iter().enumerate().take(i + 1) {
        p.push_str(&step_text(j, t));
    }
    p.push_str(&format!(
        "\nIs step {i} the decisive error? Reply with one word: yes or no.\n"
    ));
    p
}

/// The binary-search prompt: is the decisive error within `lo..mid` rather than
/// `mid..hi`?
pub fn prompt_half(c: &Conversation, lo: usize, mid: usize, hi: usize) -> String {
    let mut p = preamble(c);
    for (j, t) in c.history.iter().enumerate().take(hi).skip(lo) {
        p.push_str(&step_text(j, t));
    }
    p.push_str(&format!(
        "\nIs the decisive error in steps {lo} to {} (reply yes) or in steps {mid} to {} \
         (reply no)? Reply with one word: yes or no.\n",
        mid - 1,
        hi - 1
    ));
    p
}

fn yes(answer: &str) -> bool {
    answer.trim().to_ascii_lowercase().starts_with("yes")
}

/// Parses an all-at-once answer: the `Agent Name:` and `Step Number:` lines.
pub fn parse_all(answer: &str) -> Option<(String, usize)> {
    let mut agent = None;
    let mut step = None;
    for line in answer.lines() {
        let l = line.trim().trim_start_matches(['*', '-', ' ']);
        if let Some(a) = l.strip_prefix("Agent Name:") {
            agent = Some(a.trim().trim_matches(['*', '`', '"']).trim().to_string());
        } else if let Some(s) = l.strip_prefix("Step Number:") {
            let digits: String = s
                .chars()
                .skip_while(|c| !c.is_ascii_digit())
                .take_while(char::is_ascii_digit)
                .collect();
            step = digits.parse().ok();
        }
    }
    Some((agent.filter(|a| !a.is_empty())?, step?))
}

/// Runs one format on a log with `complete` as the model; `Ok(None)` when the judge
/// named nothing usable.
pub fn judge<E>(
    c: &Conversation,
    format: Format,
    complete: &mut dyn FnMut(&str) -> Result<String, E>,
) -> Result<Option<(String, usize)>, E> {
    let n = c.history.len();
    Ok(match format {
        Format::AllAtOnce => parse_all(&complete(&prompt_all(c))?)
            .filter(|(_, s)| *s < n.max(1))
            // A judge may answer with the role as logged: score its base agent.
            .map(|(a, s)| match c.format {
                super::LogFormat::MagenticOne => (super::magentic::speaker(&a).0, s),
                super::LogFormat::AlgorithmGenerated => (a, s),
            }),
        Format::StepWise => {
            let mut found = None;
            for i in 0..n {
                if yes(&complete(&prompt_step(c, i))?) {
                    found = Some((c.history[i].name.clone(), i));
                    break;
                }
            }
            found
        }
        Format::BinarySearch => {
            let (mut lo, mut hi) = (0usize, n);
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                if yes(&complete(&prompt_half(c, lo, mid, hi))?) {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
            c.history.get(lo).map(|t| (t.name.clone(), lo))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn conv() -> Conversation {
        let t = |n: &str, c: &str| Turn::new(n, "user", c);
        Conversation {
            question: "2+2?".into(),
            history: vec![
                t("A", "plan"),
                t("B", "5"),
                t("C", "agree"),
                t("A", "TERMINATE"),
            ],
            system_prompts: BTreeMap::new(),
            label: None,
            ground_truth: "4".into(),
            format: super::super::LogFormat::AlgorithmGenerated,
        }
    }

    fn scripted(answers: &[&str]) -> impl FnMut(&str) -> Result<String, String> {
        let mut a: Vec<String> = answers.iter().rev().map(|s| s.to_string()).collect();
        move |_| a.pop().ok_or_else(|| "script exhausted".to_string())
    }

    #[test]
    fn all_at_once_parses_the_two_lines() {
        let c = conv();
        // Markdown emphasis around the keys is tolerated.
        let mut f = scripted(&["**Agent Name:** B\n**Step Number:** 1"]);
        assert_eq!(
            judge(&c, Format::AllAtOnce, &mut f).unwrap(),
            Some(("B".into(), 1))
        );
        let mut f = scripted(&["Agent Name: B\nStep Number: step 1"]);
        assert_eq!(
            judge(&c, Format::AllAtOnce, &mut f).unwrap(),
            Some(("B".into(), 1))
        );
        let mut f = scripted(&["Agent Name: B\nStep Number: 9"]);
        assert_eq!(judge(&c, Format::AllAtOnce, &mut f).unwrap(), None);
    }

    #[test]
    fn step_wise_and_binary_search_walk_the_log() {
        let c = conv();
        let mut f = scripted(&["no", "Yes."]);
        assert_eq!(
            judge(&c, Format::StepWise, &mut f).unwrap(),
            Some(("B".into(), 1))
        );
        // [0,4): mid 2, "yes" → [0,2): mid 1, "no" → [1,2) → step 1.
        let mut f = scripted(&["yes", "no"]);
        assert_eq!(
            judge(&c, Format::BinarySearch, &mut f).unwrap(),
            Some(("B".into(), 1))
        );
        let mut f = scripted(&[]);
        assert!(judge(&c, Format::StepWise, &mut f).is_err());
        assert!(prompt_all(&c).contains("Correct answer: 4"));
    }
}
