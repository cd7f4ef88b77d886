//! The OTLP/HTTP receiver of agent traces (`audita trace serve --listen ADDR --out
//! FILE`): `POST /v1/traces` and `POST /v1/logs`, OTLP/JSON, each accepted export
//! appended as one line to FILE (spans and the GenAI events logged as log records of
//! one run in one file), which `audita trace import` reads.
//!
//! Design constraints:
//! - Every request is validated completely before it is appended (content type, no
//!   compression, the whole body parsed as OTLP/JSON within [`Limits`], its signal's
//!   top-level key present), so the file only ever holds exports that import on
//!   their own; a refusal is 415 or 400 with the reason as JSON, a body over the
//!   limit 413. Appends are serialised.
//! - Every request has a time limit ([`crate::REQUEST_TIMEOUT`], 408 past it).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;

use audita_traces::{parse_otlp_json, Limits};
use serde_json::json;

use crate::REQUEST_TIMEOUT;

/// The receiver's routes appending to `out` (created if absent, never truncated),
/// with `limits` per request.
pub fn receiver(out: &Path, limits: Limits) -> Result<axum::Router, String> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(out)
        .map_err(|e| format!("{}: cannot open for appending: {e}", out.display()))?;
    let max_body = limits.max_bytes;
    let state = Arc::new(Receiver {
        out: std::sync::Mutex::new(file),
        limits,
    });
    Ok(router(state, max_body))
}

/// The receiver's shared state: the output file and the per-request limits.
struct Receiver {
    out: std::sync::Mutex<std::fs::File>,
    limits: Limits,
}

/// The routes of [`receiver`].
fn router(state: Arc<Receiver>, max_body: usize) -> axum::Router {
    use axum::http::StatusCode;
    let logs = state.clone();
    axum::Router::new()
        .route(
            "/v1/traces",
            axum::routing::post(
                move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                    let state = state.clone();
                    async move { receive(&state, &headers, &body, Signal::Traces) }
                },
            ),
        )
        .route(
            "/v1/logs",
            axum::routing::post(
                move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                    let state = logs.clone();
                    async move { receive(&state, &headers, &body, Signal::Logs) }
                },
            ),
        )
        .layer(axum::extract::DefaultBodyLimit::max(max_body))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            REQUEST_TIMEOUT,
        ))
}

/// Which OTLP signal a request carries.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Signal {
    /// `ExportTraceServiceRequest` (`resourceSpans`).
    Traces,
    /// `ExportLogsServiceRequest` (`resourceLogs`): GenAI events as log records.
    Logs,
}

/// Validates one export and appends it: the status, content type and JSON body of
/// the answer.
fn receive(
    state: &Receiver,
    headers: &axum::http::HeaderMap,
    body: &[u8],
    signal: Signal,
) -> (
    axum::http::StatusCode,
    [(axum::http::HeaderName, &'static str); 1],
    String,
) {
    use axum::http::{header, StatusCode};
    let json_type = [(header::CONTENT_TYPE, "application/json")];
    let refuse = |code: StatusCode, msg: String| {
        tracing::warn!(reason = %msg, "trace serve: request refused");
        (code, json_type.clone(), json!({"error": msg}).to_string())
    };
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    if !content_type.starts_with("application/json") {
        return refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "content type {content_type} is not supported: send OTLP/JSON (application/json)"
            ),
        );
    }
    if let Some(enc) = headers.get(header::CONTENT_ENCODING) {
        if enc.as_bytes() != b"identity" {
            return refuse(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "compressed bodies are not supported: export uncompressed".into(),
            );
        }
    }
    let trace = match parse_otlp_json(body, &state.limits) {
        Ok(t) => t,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, e.to_string()),
    };
    // The body is one JSON document (checked above); its top level must hold its
    // signal's key.
    let (key, path) = match signal {
        Signal::Traces => ("resourceSpans", "/v1/traces"),
        Signal::Logs => ("resourceLogs", "/v1/logs"),
    };
    let has_key = serde_json::from_slice::<BTreeMap<String, serde::de::IgnoredAny>>(body)
        .is_ok_and(|top| top.contains_key(key));
    if !has_key {
        return refuse(
            StatusCode::BAD_REQUEST,
            format!("not OTLP/JSON for {path}: no {key} in the request"),
        );
    }
    let mut line = body.to_vec();
    line.retain(|&b| b != b'\n' && b != b'\r');
    line.push(b'\n');
    let written = state
        .out
        .lock()
        .map_err(|_| "output file lock poisoned".to_string())
        .and_then(|mut f| f.write_all(&line).map_err(|e| e.to_string()));
    if let Err(e) = written {
        tracing::error!(error = %e, "trace serve: cannot append");
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            json_type,
            json!({"error": "cannot store the export"}).to_string(),
        );
    }
    tracing::info!(spans = trace.len(), "trace serve: export accepted");
    (
        StatusCode::OK,
        json_type,
        json!({"partialSuccess": {}}).to_string(),
    )
}
