//! `[notifier]` in `audita.toml`: where the notifier stage posts every incident's
//! alert (Prometheus Alertmanager) and how.
//!
//! Design constraints:
//! ```toml
//! [notifier]
//! url = "https://alertmanager.monitoring:9093"   # Alertmanager (API v2 under it)
//! public_base_url = "https://audita.example/"    # where the sink's reports/ are served
//! runbook_url = "https://runbooks.example/audita/{predicate}"
//! ca_file = "tls/alertmanager-ca.pem"            # an https URL's CA (default: web roots)
//! username = "audita"                            # basic auth, with:
//! password = "env:AUDITA_ALERTMANAGER_PASSWORD"  # or "file:/etc/audita/notifier/password"
//! resend_ms = 60000        # every open alert is posted again this often
//! hold_ms = 3600000        # a judged or abstained incident's alert fires this long
//! open_for_ms = 86400000   # an incident without a verdict fires at most this long
//! critical_j = 1000.0      # severity class critical from this many J,
//! warning_j = 100.0        # warning from this many (below: info; unknown: warning)
//! timeout_ms = 10000       # each request's limit
//! max_incidents = 10000    # alerts held at once
//! ```
//! - The password is never in the file: `env:NAME` or `file:PATH` (a mounted Secret),
//!   read by the notifier stage alone ([`Notifier::password`]), so other stages run
//!   without the secret.

use serde::Deserialize;
use std::path::{Path, PathBuf};

use crate::config::ConfigError;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawNotifier {
    url: String,
    #[serde(default)]
    public_base_url: Option<String>,
    #[serde(default)]
    runbook_url: Option<String>,
    #[serde(default)]
    ca_file: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default = "default_resend")]
    resend_ms: u64,
    #[serde(default = "default_hold")]
    hold_ms: u64,
    #[serde(default = "default_open_for")]
    open_for_ms: u64,
    #[serde(default = "default_critical")]
    critical_j: f64,
    #[serde(default = "default_warning")]
    warning_j: f64,
    #[serde(default = "default_timeout")]
    timeout_ms: u64,
    #[serde(default = "default_max_incidents")]
    max_incidents: usize,
}

fn default_resend() -> u64 {
    60_000
}
fn default_hold() -> u64 {
    3_600_000
}
fn default_open_for() -> u64 {
    86_400_000
}
fn default_critical() -> f64 {
    1000.0
}
fn default_warning() -> f64 {
    100.0
}
fn default_timeout() -> u64 {
    10_000
}
fn default_max_incidents() -> usize {
    10_000
}

/// The validated `[notifier]` table.
#[derive(Debug, Clone, PartialEq)]
pub struct Notifier {
    /// Alertmanager's base URL (http or https).
    pub url: String,
    /// The public base URL of the sink's reports.
    pub public_base_url: Option<String>,
    /// The runbook URL (`{predicate}` replaced).
    pub runbook_url: Option<String>,
    /// CA bundle for an https URL (resolved against the deployment's directory).
    pub ca_file: Option<PathBuf>,
    /// Basic-auth user.
    pub username: Option<String>,
    password: Option<String>,
    /// Every open alert posted again this often (ms).
    pub resend_ms: u64,
    /// A judged or abstained incident's alert fires this long (ms).
    pub hold_ms: u64,
    /// An incident without a verdict fires at most this long (ms).
    pub open_for_ms: u64,
    /// Severity class `critical` from (J).
    pub critical_j: f64,
    /// Severity class `warning` from (J).
    pub warning_j: f64,
    /// Each request's limit (ms).
    pub timeout_ms: u64,
    /// Alerts held at once.
    pub max_incidents: usize,
}

fn http_url(u: &str) -> bool {
    (u.starts_with("http://") || u.starts_with("https://"))
        && u.len() > "https://".len()
        && !u.contains(char::is_whitespace)
}

impl RawNotifier {
    pub(crate) fn resolve(
        self,
        dir: &Path,
        at: &dyn Fn(&str, String) -> ConfigError,
    ) -> Result<Notifier, ConfigError> {
        if !http_url(&self.url) {
            return Err(at(
                "notifier.url",
                format!("{:?} is not an http(s) URL", self.url),
            ));
        }
        if let Some(u) = self.public_base_url.as_ref().filter(|u| !http_url(u)) {
            return Err(at(
                "notifier.public_base_url",
                format!("{u:?} is not an http(s) URL"),
            ));
        }
        if let Some(u) = self.runbook_url.as_ref().filter(|u| !http_url(u)) {
            return Err(at(
                "notifier.runbook_url",
                format!("{u:?} is not an http(s) URL"),
            ));
        }
        match (&self.username, &self.password) {
            (Some(_), None) | (None, Some(_)) => {
                return Err(at(
                    "notifier.password",
                    "basic auth needs both username and password".into(),
                ))
            }
            (_, Some(p)) if !(p.starts_with("env:") || p.starts_with("file:")) => {
                return Err(at(
                    "notifier.password",
                    "write the source, not the password: env:NAME or file:PATH".into(),
                ))
            }
            _ => {}
        }
        if self.resend_ms < 1000 || self.resend_ms > 3_600_000 {
            return Err(at(
                "notifier.resend_ms",
                format!("{} (want 1000 to 3600000)", self.resend_ms),
            ));
        }
        if self.timeout_ms == 0 || self.timeout_ms > 120_000 {
            return Err(at(
                "notifier.timeout_ms",
                format!("{} (want 1 to 120000)", self.timeout_ms),
            ));
        }
        if !(self.critical_j.is_finite() && self.warning_j.is_finite())
            || self.warning_j > self.critical_j
        {
            return Err(at(
                "notifier.warning_j",
                format!(
                    "{} J above critical_j {} J (or not a number)",
                    self.warning_j, self.critical_j
                ),
            ));
        }
        if self.max_incidents == 0 {
            return Err(at("notifier.max_incidents", "0 (want at least 1)".into()));
        }
        Ok(Notifier {
            url: self.url.trim_end_matches('/').to_string(),
            public_base_url: self.public_base_url,
            runbook_url: self.runbook_url,
            ca_file: self.ca_file.map(|f| dir.join(f)),
            username: self.username,
            password: self.password,
            resend_ms: self.resend_ms,
            hold_ms: self.hold_ms,
            open_for_ms: self.open_for_ms,
            critical_j: self.critical_j,
            warning_j: self.warning_j,
            timeout_ms: self.timeout_ms,
            max_incidents: self.max_incidents,
        })
    }
}

impl Notifier {
    /// The basic-auth password, read from its source (`env:NAME`, `file:PATH`;
    /// trailing newline dropped); `None` without basic auth. One line on failure.
    pub fn password(&self, dir: &Path) -> Result<Option<String>, String> {
        let Some(source) = &self.password else {
            return Ok(None);
        };
        let text = if let Some(name) = source.strip_prefix("env:") {
            std::env::var(name)
                .map_err(|_| format!("notifier.password: environment variable {name} is not set"))?
        } else {
            let path = dir.join(source.trim_start_matches("file:"));
            std::fs::read_to_string(&path)
                .map_err(|e| format!("notifier.password: {}: {e}", path.display()))?
        };
        Ok(Some(text.trim_end_matches(['\r', '\n']).to_string()))
    }
}
