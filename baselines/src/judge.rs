//! The LLM-judge interface in the three formats of the Who&When benchmark:
//! all-at-once, step-wise and binary-search.
//!
//! Design constraints:
//! - The judge runs only when a model endpoint is configured: [`Judge::from_env`] reads
//!   `AUDITA_JUDGE_ENDPOINT` (an `http://host:port/path` URL of an OpenAI-compatible
//!   chat-completions server) and `AUDITA_JUDGE_MODEL`; without the endpoint it returns
//!   `None` and callers report the method as **not run**. Nothing in this crate opens
//!   a connection otherwise; tests use an in-process [`Transport`].
//! - A judge returns a single culprit (grade 1) or nobody; answers are matched to the
//!   incident's principal names exactly, anything else is "nobody".
//! - Transport failures are errors with a `transient` flag, never panics.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::incident::{Incident, Profile};

/// Prompt format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Format {
    /// The whole transcript at once; name the responsible agent.
    AllAtOnce,
    /// One message at a time; stop at the first judged decisive.
    StepWise,
    /// Halve the transcript until one message remains.
    BinarySearch,
}

impl Format {
    /// All formats.
    pub const ALL: [Format; 3] = [Format::AllAtOnce, Format::StepWise, Format::BinarySearch];
    /// Stable name.
    pub fn name(self) -> &'static str {
        match self {
            Format::AllAtOnce => "judge_all_at_once",
            Format::StepWise => "judge_step_wise",
            Format::BinarySearch => "judge_binary_search",
        }
    }
}

/// A judge call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("judge call failed: {message}")]
pub struct JudgeError {
    /// What went wrong.
    pub message: String,
    /// Whether retrying can help.
    pub transient: bool,
}

/// Sends a prompt to a model and returns its text reply.
pub trait Transport {
    /// One completion.
    fn complete(&mut self, prompt: &str) -> Result<String, JudgeError>;
}

/// Plain-HTTP chat-completions transport.
#[derive(Debug, Clone)]
pub struct HttpTransport {
    host: String,
    port: u16,
    path: String,
    model: String,
}

impl HttpTransport {
    /// Parses an `http://host[:port]/path` endpoint.
    pub fn new(endpoint: &str, model: &str) -> Result<Self, JudgeError> {
        let bad = |m: &str| JudgeError {
            message: format!("endpoint {endpoint:?}: {m}"),
            transient: false,
        };
        let rest = endpoint
            .strip_prefix("http://")
            .ok_or_else(|| bad("only http:// endpoints are supported"))?;
        let (hostport, path) = rest
            .split_once('/')
            .map(|(h, p)| (h, format!("/{p}")))
            .unwrap_or((rest, "/".into()));
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), p.parse().map_err(|_| bad("bad port"))?),
            None => (hostport.to_string(), 80),
        };
        Ok(Self {
            host,
            port,
            path,
            model: model.to_string(),
        })
    }
}

impl Transport for HttpTransport {
    fn complete(&mut self, prompt: &str) -> Result<String, JudgeError> {
        let t = |e: std::io::Error| JudgeError {
            message: e.to_string(),
            transient: true,
        };
        let body = serde_json::json!({
            "model": self.model,
            "temperature": 0,
            "messages": [{"role": "user", "content": prompt}],
        })
        .to_string();
        let mut s = TcpStream::connect((self.host.as_str(), self.port)).map_err(t)?;
        s.set_read_timeout(Some(Duration::from_secs(120)))
            .map_err(t)?;
        let req = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
            self.path,
            self.host,
            body.len(),
            body
        );
        s.write_all(req.as_bytes()).map_err(t)?;
        let mut resp = Vec::new();
        s.read_to_end(&mut resp).map_err(t)?;
        let text = String::from_utf8_lossy(&resp);
        let json = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
        let v: serde_json::Value = serde_json::from_str(json.trim()).map_err(|e| JudgeError {
            message: format!("bad response body: {e}"),
            transient: false,
        })?;
        v["choices"][0]["message"]["content"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| JudgeError {
                message: "response has no message content".into(),
                transient: false,
            })
    }
}

/// An LLM judge over a transport.
pub struct Judge<T: Transport> {
    transport: T,
}

impl Judge<HttpTransport> {
    /// The configured judge, or `None` when `AUDITA_JUDGE_ENDPOINT` is unset.
    pub fn from_env() -> Option<Result<Self, JudgeError>> {
        let endpoint = std::env::var("AUDITA_JUDGE_ENDPOINT")
            .ok()
            .filter(|e| !e.is_empty())?;
        let model = std::env::var("AUDITA_JUDGE_MODEL").unwrap_or_else(|_| "default".into());
        Some(HttpTransport::new(&endpoint, &model).map(|transport| Self { transport }))
    }
}

/// The all-at-once prompt.
pub fn prompt_all_at_once(inc: &dyn Incident) -> String {
    format!(
        "A multi-agent robot fleet produced an adverse outcome (a worker came within 0.5 m of a moving robot, \
         or a batch left its acceptance range). Transcript of all commands:\n{}\nAgents: {}.\n\
         Which single agent is responsible for the adverse outcome? Answer with the agent name only, or `none`.",
        inc.transcript(),
        inc.principals().join(", ")
    )
}

/// The step-wise prompt for message `i`.
pub fn prompt_step(inc: &dyn Incident, i: usize) -> String {
    let t = inc.transcript();
    let lines: Vec<&str> = t.lines().take(i + 1).collect();
    format!(
        "A multi-agent robot fleet produced an adverse outcome. Transcript so far:\n{}\n\
         Is the last message (m{i}) the decisive error that caused the outcome? Answer `yes` or `no`.",
        lines.join("\n")
    )
}

/// The binary-search prompt for the window `lo..hi` split at `mid`.
pub fn prompt_half(inc: &dyn Incident, lo: usize, mid: usize, hi: usize) -> String {
    let t = inc.transcript();
    let lines: Vec<&str> = t.lines().skip(lo).take(hi - lo).collect();
    format!(
        "A multi-agent robot fleet produced an adverse outcome. Candidate messages m{lo}..m{}:\n{}\n\
         Is the decisive error among m{lo}..m{}? Answer `yes` or `no`.",
        hi - 1,
        lines.join("\n"),
        mid - 1
    )
}

fn yes(s: &str) -> bool {
    s.trim().to_ascii_lowercase().starts_with("yes")
}

impl<T: Transport> Judge<T> {
    /// A judge over an explicit transport.
    pub fn with_transport(transport: T) -> Self {
        Self { transport }
    }

    /// Runs one format on an incident and returns a single-culprit profile.
    pub fn judge(&mut self, inc: &dyn Incident, format: Format) -> Result<Profile, JudgeError> {
        let mut prof = inc.zero_profile();
        let names = inc.principals();
        let msgs = inc.messages();
        let culprit = match format {
            Format::AllAtOnce => {
                let a = self.transport.complete(&prompt_all_at_once(inc))?;
                let a = a.trim().trim_matches('`').to_string();
                names.iter().find(|n| **n == a).cloned()
            }
            Format::StepWise => {
                let mut found = None;
                for (i, m) in msgs.iter().enumerate() {
                    if yes(&self.transport.complete(&prompt_step(inc, i))?) {
                        found = Some(m.author.clone());
                        break;
                    }
                }
                found
            }
            Format::BinarySearch => {
                let (mut lo, mut hi) = (0usize, msgs.len());
                while hi - lo > 1 {
                    let mid = lo + (hi - lo) / 2;
                    if yes(&self.transport.complete(&prompt_half(inc, lo, mid, hi))?) {
                        hi = mid;
                    } else {
                        lo = mid;
                    }
                }
                msgs.get(lo).map(|m| m.author.clone())
            }
        };
        if let Some(c) = culprit {
            prof.insert(c, 1.0);
        }
        Ok(prof)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Scripted(Vec<String>);
    impl Transport for Scripted {
        fn complete(&mut self, _prompt: &str) -> Result<String, JudgeError> {
            if self.0.is_empty() {
                return Err(JudgeError {
                    message: "script exhausted".into(),
                    transient: false,
                });
            }
            Ok(self.0.remove(0))
        }
    }

    #[test]
    fn endpoint_parsing_rejects_https_and_reads_port() {
        assert!(HttpTransport::new("https://x/v1", "m").is_err());
        let t = HttpTransport::new("http://localhost:8080/v1/chat/completions", "m").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.path.as_str()),
            ("localhost", 8080, "/v1/chat/completions")
        );
    }

    #[test]
    fn formats_return_single_culprits() {
        use audita_facility::scenario::{generate, Family};
        let sc = generate(Family::Chain, 1);
        let inc = crate::FacilityIncident::new(&sc);
        let mut j = Judge::with_transport(Scripted(vec!["planner-1".into()]));
        let p = j.judge(&inc, Format::AllAtOnce).unwrap();
        assert_eq!(p.get("planner-1"), Some(&1.0));
        let mut j = Judge::with_transport(Scripted(vec!["no".into(), "yes".into()]));
        let p = j.judge(&inc, Format::StepWise).unwrap();
        assert_eq!(p.get("planner-1"), Some(&1.0));
        let mut j = Judge::with_transport(Scripted(vec!["yes".into(); 8]));
        let p = j.judge(&inc, Format::BinarySearch).unwrap();
        assert_eq!(p.get("user"), Some(&1.0));
        let mut j = Judge::with_transport(Scripted(vec!["somebody else".into()]));
        assert!(j
            .judge(&inc, Format::AllAtOnce)
            .unwrap()
            .values()
            .all(|v| *v == 0.0));
    }
}
