//! `audita serve-log RECORD_DIR --listen ADDR`: serves the record's static tiled
//! log (c2sp.org/tlog-tiles; written by the sealer, `audita_record::tiles`) over
//! HTTP, so standard tlog clients can fetch, verify and monitor it.
//!
//! Design constraints:
//! The server is `audita_serve::tiles`; here are its arguments and exit code.
//!
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
//!   time limit (`audita_serve::REQUEST_TIMEOUT`, 408 past it); request headers not received
//!   within that time close the connection, and at most
//!   `audita_http::MAX_CONNECTIONS` connections are served at once (the shared
//!   accept loop, `audita_http::serve_connections`), so clients that open
//!   connections and never finish a request cannot exhaust the server.
//! - The server prints `serving RECORD_DIR on http://ADDR` (the bound address: port
//!   0 picks a free one) on stdout once it listens, and runs until SIGINT/SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;

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
    audita_serve::serve_until_signalled(
        "serve-log",
        args.listen,
        audita_serve::tiles::router(&args.dir),
        |bound| format!("serving {} on http://{bound}", args.dir.display()),
    )
}
