//! Alertmanager's API v2 as the notifier uses it: `POST /api/v2/alerts` with a list
//! of `postableAlert`s, over HTTP or HTTPS (a deployment's CA bundle or the web's
//! roots), with basic auth when configured.
//!
//! Design constraints:
//! - One request per batch, bounded by the settings' timeout; no redirects followed.
//! - An answer says whether retrying can help ([`PostError::is_transient`]): no
//!   connection, a timeout, 5xx, 408 and 429 can heal; any other 4xx is Alertmanager
//!   refusing these alerts as posted (bad labels, a wrong path, bad credentials).

use crate::{NotifierError, Settings};
use base64::Engine;
use serde_json::Value;
use std::sync::Arc;

/// Bytes of an answer read at most (its first line goes into the error).
const MAX_ANSWER: u64 = 64 << 10;

/// A client of one Alertmanager.
#[derive(Clone, Debug)]
pub struct Alertmanager {
    agent: ureq::Agent,
    endpoint: String,
    authorization: Option<String>,
}

/// A post that did not go through.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PostError {
    /// No answer (connection refused, DNS, TLS, timeout): retry with backoff.
    #[error("Alertmanager at {url} unreachable: {reason}")]
    Unreachable {
        /// The endpoint.
        url: String,
        /// What failed.
        reason: String,
    },
    /// Alertmanager answered with a status.
    #[error("Alertmanager at {url} answered {status}: {body}")]
    Status {
        /// The endpoint.
        url: String,
        /// HTTP status.
        status: u16,
        /// The first line of its answer.
        body: String,
    },
}

impl PostError {
    /// Whether posting the same alerts again later can succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            PostError::Unreachable { .. } => true,
            PostError::Status { status, .. } => *status >= 500 || matches!(status, 408 | 429),
        }
    }
}

impl Alertmanager {
    /// A client for the Alertmanager of `s` (the CA bundle parsed here: a bad one is
    /// a configuration error).
    pub fn new(s: &Settings) -> Result<Alertmanager, NotifierError> {
        if !(s.url.starts_with("http://") || s.url.starts_with("https://")) {
            return Err(NotifierError::Config(format!(
                "url {:?} is not http:// or https://",
                s.url
            )));
        }
        let mut config = ureq::Agent::config_builder()
            .timeout_global(Some(s.timeout))
            .http_status_as_error(false)
            .max_redirects(0);
        if let Some(pem) = &s.ca_pem {
            let certs: Vec<ureq::tls::Certificate<'static>> = ureq::tls::parse_pem(pem)
                .filter_map(|item| match item {
                    Ok(ureq::tls::PemItem::Certificate(c)) => Some(Ok(c)),
                    Ok(_) => None,
                    Err(e) => Some(Err(e)),
                })
                .collect::<Result<_, _>>()
                .map_err(|e| NotifierError::Config(format!("CA bundle: {e}")))?;
            if certs.is_empty() {
                return Err(NotifierError::Config(
                    "CA bundle holds no PEM certificate".into(),
                ));
            }
            config = config.tls_config(
                ureq::tls::TlsConfig::builder()
                    .root_certs(ureq::tls::RootCerts::Specific(Arc::new(certs)))
                    .build(),
            );
        }
        let authorization = s.basic_auth.as_ref().map(|(user, password)| {
            let token =
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
            format!("Basic {token}")
        });
        Ok(Alertmanager {
            agent: config.build().new_agent(),
            endpoint: format!("{}/api/v2/alerts", s.url.trim_end_matches('/')),
            authorization,
        })
    }

    /// The alerts endpoint.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Posts `alerts` (Alertmanager's `postableAlerts`) in one request.
    pub fn post(&self, alerts: &[Value]) -> Result<(), PostError> {
        let body = serde_json::to_vec(alerts).unwrap_or_default();
        let mut req = self
            .agent
            .post(&self.endpoint)
            .header("content-type", "application/json");
        if let Some(a) = &self.authorization {
            req = req.header("authorization", a);
        }
        let unreachable = |reason: String| PostError::Unreachable {
            url: self.endpoint.clone(),
            reason,
        };
        let mut resp = req
            .send(&body[..])
            .map_err(|e| unreachable(e.to_string()))?;
        let status = resp.status().as_u16();
        if (200..300).contains(&status) {
            return Ok(());
        }
        let bytes = resp
            .body_mut()
            .with_config()
            .limit(MAX_ANSWER)
            .read_to_vec()
            .unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        let mut first = text.lines().next().unwrap_or("").trim().to_string();
        first.truncate(200);
        Err(PostError::Status {
            url: self.endpoint.clone(),
            status,
            body: first,
        })
    }
}
