//! A record's static tiled log (c2sp.org/tlog-tiles; written by the sealer,
//! `audita_record::tiles`) served over HTTP (`audita serve-log RECORD_DIR --listen
//! ADDR`), so standard tlog clients can fetch, verify and monitor it.
//!
//! Design constraints:
//! - Exactly three kinds of path are served, `GET` and `HEAD` only:
//!   `/checkpoint` (`text/plain; charset=utf-8`, `Cache-Control: no-cache`: it
//!   changes with every epoch), `/tile/<L>/<N>[.p/<W>]` and
//!   `/tile/entries/<N>[.p/<W>]` (`application/octet-stream`, `Cache-Control:
//!   public, max-age=31536000, immutable`: a tile path's bytes never change).
//!   A request path is parsed into a tile id ([`TileId::parse`], canonical form
//!   only) and the file name is rebuilt from the parsed numbers, so nothing else
//!   in the record directory — keys, segments, `..`, a directory listing — can be
//!   reached; everything else is 404 (405 for other methods).
//! - Every read is bounded by the tile's largest legal size; every request has a
//!   time limit ([`crate::REQUEST_TIMEOUT`], 408 past it); request headers not received
//!   within that time close the connection, and at most
//!   `audita_http::MAX_CONNECTIONS` connections are served at once (the shared
//!   accept loop, `audita_http::serve_connections`), so clients that open
//!   connections and never finish a request cannot exhaust the server.
//! - `audita serve-log` prints `serving RECORD_DIR on http://ADDR` once it listens.

use std::path::Path;
use std::sync::Arc;

use audita_record::tiles::{read_tile, TileId};
use axum::body::Body;
use axum::http::{header, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;

use crate::REQUEST_TIMEOUT;

/// The largest checkpoint note served.
const MAX_CHECKPOINT_BYTES: u64 = 1 << 20;

/// The server's routes (one fallback that parses every path), with the request
/// time limit.
pub fn router(dir: &Path) -> Router {
    let dir = Arc::new(dir.to_owned());
    Router::new()
        .fallback(move |method: Method, uri: Uri| {
            let dir = dir.clone();
            async move { respond(&dir, &method, uri.path()).await }
        })
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            REQUEST_TIMEOUT,
        ))
}

/// 404.
fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "not found\n").into_response()
}

/// The answer to `method path`: the checkpoint, a tile, 404 or 405.
async fn respond(dir: &Path, method: &Method, path: &str) -> Response {
    if method != Method::GET && method != Method::HEAD {
        return (
            StatusCode::METHOD_NOT_ALLOWED,
            [(header::ALLOW, "GET, HEAD")],
            "method not allowed\n",
        )
            .into_response();
    }
    let Some(rel) = path.strip_prefix('/') else {
        return not_found();
    };
    let dir = dir.to_owned();
    let rel = rel.to_owned();
    let found = tokio::task::spawn_blocking(move || -> Result<Option<(Vec<u8>, bool)>, String> {
        if rel == "checkpoint" {
            return match audita_record::read_bounded(
                &dir.join("checkpoint"),
                MAX_CHECKPOINT_BYTES,
                audita_record::Limit::FrameBytes,
            ) {
                Ok(b) => Ok(Some((b, true))),
                Err(audita_record::ReadError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound =>
                {
                    Ok(None)
                }
                Err(e) => Err(e.to_string()),
            };
        }
        let Some(id) = TileId::parse(&rel) else {
            return Ok(None);
        };
        read_tile(&dir, &id)
            .map(|b| b.map(|b| (b, false)))
            .map_err(|e| e.to_string())
    })
    .await;
    match found {
        Ok(Ok(Some((bytes, true)))) => (
            [
                (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            Body::from(bytes),
        )
            .into_response(),
        Ok(Ok(Some((bytes, false)))) => (
            [
                (header::CONTENT_TYPE, "application/octet-stream"),
                (header::CACHE_CONTROL, "public, max-age=31536000, immutable"),
            ],
            Body::from(bytes),
        )
            .into_response(),
        Ok(Ok(None)) => not_found(),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "serve-log: read failed");
            (StatusCode::INTERNAL_SERVER_ERROR, "read failed\n").into_response()
        }
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "read failed\n").into_response(),
    }
}
