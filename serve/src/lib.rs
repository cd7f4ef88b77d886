//! Audita's HTTP endpoints that are not a stage: the static tiled log of a record
//! ([`tiles`], `audita serve-log`) and the OTLP/HTTP receiver of agent traces
//! ([`otlp`], `audita trace serve`), and [`serve_until_signalled`], which runs one
//! of them as a process's only job.
//!
//! Design constraints:
//! - The record format (`audita_record`) and the trace model (`audita_traces`) link no
//!   transport, so their servers live here, one floor above them; connections are
//!   accepted by the shared loop (`audita_http::serve_connections`: header timeout,
//!   a cap on open connections, graceful stop) and every request has a time limit
//!   ([`REQUEST_TIMEOUT`], 408 past it).
//! - A server prints one line naming its bound address on stdout once it listens
//!   (port 0 picks a free one; tests read the line), and runs until SIGINT/SIGTERM.
#![warn(missing_docs)]
#![forbid(unsafe_code)]
#![warn(clippy::too_many_lines)]

use std::net::SocketAddr;
use std::time::Duration;

pub mod otlp;
pub mod tiles;

/// Time limit of one request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `router` on `listen` (bounded connections and request time through
/// [`audita_http::serve_connections`]) until SIGTERM or Ctrl-C, after printing
/// the line `announce` makes of the bound address (tests read it to find the port).
pub fn serve_until_signalled(
    what: &'static str,
    listen: SocketAddr,
    router: axum::Router,
    announce: impl FnOnce(SocketAddr) -> String,
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

/// Resolves on SIGTERM or Ctrl-C (never, when the signal cannot be watched).
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
