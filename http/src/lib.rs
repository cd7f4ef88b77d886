//! The accept loop every Audita HTTP endpoint serves through: the keepers' tlog-witness
//! server, the stages' metrics endpoint, `audita serve-log` and the OTLP receiver of
//! `audita trace serve`.
//!
//! Design constraints:
//! - A connection must send its request headers within the header timeout, or it is
//!   closed; the router bounds the rest of the request (its own time limit).
//! - At most [`MAX_CONNECTIONS`] connections are open at once: a further one is closed
//!   on accept, so a client that opens connections and never finishes a request
//!   cannot exhaust the server.
//! - On stop, idle connections close at once and requests in flight get 5 s to
//!   finish.
#![warn(missing_docs)]
#![forbid(unsafe_code)]
#![warn(clippy::too_many_lines)]

use std::sync::Arc;

use axum::Router;

/// Connections served at once; past it a new connection is closed at once.
pub const MAX_CONNECTIONS: usize = 256;

/// Accepts HTTP/1.1 connections (keep-alive) for `app` until `stopped`: each
/// connection must send its request headers within `header_timeout` (the router
/// bounds the rest of the request), at most [`MAX_CONNECTIONS`] at once (a further
/// one is closed on accept). On stop, idle connections close at once and requests
/// in flight get 5 s to finish. `what` names the server in log lines.
pub async fn serve_connections(
    what: &'static str,
    listener: tokio::net::TcpListener,
    app: Router,
    header_timeout: std::time::Duration,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let (closing, closing_rx) = tokio::sync::watch::channel(false);
    let mut conns = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stopped => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((s, _)) => s,
                    Err(e) => {
                        // Out of file descriptors and the like: back off, go on.
                        tracing::warn!(server = what, error = %e, "accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let Ok(permit) = slots.clone().try_acquire_owned() else {
                    tracing::warn!(server = what, max = MAX_CONNECTIONS, "connection limit reached, closing a new connection");
                    continue;
                };
                let svc = hyper_util::service::TowerToHyperService::new(app.clone());
                let mut closing = closing_rx.clone();
                conns.spawn(async move {
                    let _permit = permit;
                    let mut builder = hyper::server::conn::http1::Builder::new();
                    builder
                        .timer(hyper_util::rt::TokioTimer::new())
                        .header_read_timeout(header_timeout);
                    let conn = builder.serve_connection(hyper_util::rt::TokioIo::new(stream), svc);
                    tokio::pin!(conn);
                    tokio::select! {
                        _ = conn.as_mut() => {}
                        _ = closing.changed() => {
                            conn.as_mut().graceful_shutdown();
                            let _ = conn.await;
                        }
                    }
                });
            }
        }
    }
    let _ = closing.send(true);
    let drain = async { while conns.join_next().await.is_some() {} };
    if tokio::time::timeout(std::time::Duration::from_secs(5), drain)
        .await
        .is_err()
    {
        conns.abort_all();
    }
}
