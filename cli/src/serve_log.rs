//! `audita serve-log RECORD_DIR --listen ADDR`: serves the record's static tiled
//! log (c2sp.org/tlog-tiles; written by the sealer, `audita_record::tiles`) over
//! HTTP, so standard tlog clients can fetch, verify and monitor it.
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
//!   time limit ([`REQUEST_TIMEOUT`], 408 past it); request headers not received
//!   within that time close the connection, and at most
//!   `audita_http::MAX_CONNECTIONS` connections are served at once (the shared
//!   accept loop, `audita_http::serve_connections`), so clients that open
//!   connections and never finish a request cannot exhaust the server.
//! - The server prints `serving RECORD_DIR on http://ADDR` (the bound address: port
//!   0 picks a free one) on stdout once it listens, and runs until SIGINT/SIGTERM.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use audita_record::tiles::{read_tile, TileId};
use axum::body::Body;
use axum::http::{header, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;

/// Time limit of one request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest checkpoint note served.
const MAX_CHECKPOINT_BYTES: u64 = 1 << 20;

/// Arguments of `audita serve-log`.
#[derive(clap::Args, Debug)]
pub struct ServeLogArgs {
    /// Record directory (with its tiled log: `checkpoint`, `tile/`).
    pub dir: PathBuf,
    /// Address to listen on (port 0: a free port, printed on stdout).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
}

/// Runs the subcommand; returns the exit code.
pub fn run(args: &ServeLogArgs) -> i32 {
    match serve(args) {
        Ok(()) => 0,
        Err(line) => {
            eprintln!("audita serve-log: {line}");
            2
        }
    }
}

fn serve(args: &ServeLogArgs) -> Result<(), String> {
    if !args.dir.join("checkpoint").is_file() {
        return Err(format!(
            "{} has no tiled log (no checkpoint file; records written before tiles were \
             added get one from the sealer on its next start)",
            args.dir.display()
        ));
    }
    serve_http("serve-log", args.listen, router(&args.dir), |bound| {
        format!("serving {} on http://{bound}", args.dir.display())
    })
}

/// Serves `router` on `listen` (bounded connections and request time through
/// [`audita_http::serve_connections`]) until SIGTERM or Ctrl-C, after printing
/// the line `announce` makes of the bound address (tests read it to find the port).
pub(crate) fn serve_http(
    what: &'static str,
    listen: std::net::SocketAddr,
    router: axum::Router,
    announce: impl FnOnce(std::net::SocketAddr) -> String,
) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
        let bound = listener.local_addr().map_err(|e| e.to_string())?;
        println!("{}", announce(bound));
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
        let (stop, stopped) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            shutdown().await;
            let _ = stop.send(());
        });
        audita_http::serve_connections(what, listener, router, REQUEST_TIMEOUT, stopped).await;
        Ok(())
    })
}

async fn shutdown() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

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

fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "not found\n").into_response()
}

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
