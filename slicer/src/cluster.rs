//! The slicer as a cluster of processes, in timely dataflow's own cluster mode: one
//! worker per process, connected over TCP, each reading a share of the
//! `audita.accepted` partitions.
//!
//! Design constraints:
//! - The members and their addresses come from the deployment (`audita stage slicer
//!   --peers A0,A1,… --index I`; the chart's StatefulSet gives each pod a stable
//!   name). Member `i` listens on its own address and connects to every member
//!   below it, as timely's own `create_sockets` does, then the sockets are handed to
//!   timely's networking (`initialize_networking_from_sockets`): the exchange is
//!   timely's, only the connection set-up is ours, so that it can wait for a member
//!   that is restarting without blocking a stop, and refuse a process that is not a
//!   member of this cluster.
//! - A handshake before the hand-over: a magic line, the cluster's size, the
//!   member's index and a digest of the address list. A process with another idea of
//!   the cluster (a different list, size or a duplicate index) is refused with a
//!   one-line error, never admitted.
//! - Fail-stop, as timely is: there is no membership change while running. A member
//!   whose connection fails, or that sees no progress from the others for
//!   [`STALL`], stops ([`crate::stage::SlicerError::Cluster`]); every member then
//!   connects again, and the cluster reforms once all are back (a pause shorter than
//!   the stall limit reforms nothing).
//! - The slicer's state is rebuilt from its topics whenever a member starts, so a
//!   reformed cluster holds what the old one held.
//! - The links are not authenticated beyond the handshake: deploy the members on a
//!   network only they reach (the chart's headless Service and NetworkPolicy).

use crate::stage::SlicerError;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use timely::communication::allocator::zero_copy::initialize::initialize_networking_from_sockets;
use timely::communication::allocator::ProcessBuilder;
use timely::communication::{Allocator, Hooks};

/// How long a member waits for progress from the others before the cluster
/// reforms: longer than any one turn takes, and than a pause the cluster should
/// ride out.
pub const STALL: Duration = Duration::from_secs(20);

/// How often a member retries connecting to one that is not listening yet.
const RETRY: Duration = Duration::from_millis(200);

/// How long the handshake of one connection may take.
const HANDSHAKE: Duration = Duration::from_secs(10);

const MAGIC: &[u8; 24] = b"audita-slicer-cluster/1\n";

/// One member's view of its cluster.
#[derive(Clone, Debug)]
pub struct Cluster {
    /// This member's index.
    pub index: usize,
    /// Every member's address (`host:port`), in index order.
    pub addresses: Vec<String>,
    /// How long a turn may wait for the other members ([`STALL`]).
    pub stall: Duration,
}

impl Cluster {
    /// A cluster of `addresses` in which this process is member `index`; a bad
    /// index or an empty or duplicate address list is a one-line error.
    pub fn new(index: usize, addresses: Vec<String>) -> Result<Cluster, String> {
        if addresses.is_empty() {
            return Err("a slicer cluster needs at least one member address".into());
        }
        if index >= addresses.len() {
            return Err(format!(
                "slicer member index {index} is not below the number of members ({})",
                addresses.len()
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for a in &addresses {
            if !seen.insert(a) {
                return Err(format!("slicer member address {a} is listed twice"));
            }
            if !a.contains(':') {
                return Err(format!("slicer member address {a} is not host:port"));
            }
        }
        Ok(Cluster {
            index,
            addresses,
            stall: STALL,
        })
    }

    fn digest(&self) -> [u8; 32] {
        audita_evidence::sha256(self.addresses.join("\n").as_bytes())
    }

    fn hello(&self) -> Vec<u8> {
        let mut h = MAGIC.to_vec();
        h.extend((self.addresses.len() as u64).to_be_bytes());
        h.extend((self.index as u64).to_be_bytes());
        h.extend(self.digest());
        h
    }

    /// Reads a peer's hello; returns its index.
    fn check(&self, stream: &mut TcpStream) -> Result<usize, String> {
        let mut h = [0u8; 24 + 8 + 8 + 32];
        stream
            .read_exact(&mut h)
            .map_err(|e| format!("reading a member's handshake: {e}"))?;
        if &h[..24] != MAGIC {
            return Err("a connection that is not a slicer member's (bad handshake)".into());
        }
        let size = u64::from_be_bytes(h[24..32].try_into().unwrap_or_default()) as usize;
        let index = u64::from_be_bytes(h[32..40].try_into().unwrap_or_default()) as usize;
        if size != self.addresses.len() || h[40..] != self.digest() {
            return Err(format!(
                "member {index} describes another cluster (its address list differs from this one's)"
            ));
        }
        if index >= size || index == self.index {
            return Err(format!(
                "a member claims the index {index}, which it cannot have"
            ));
        }
        Ok(index)
    }
}

/// A member's lost connection surfaces in timely as panics of its communication
/// threads and then of the worker (its channels poisoned), which the stage contains
/// and turns into [`SlicerError::Cluster`]: they are logged as one line each, not as
/// panics with backtraces. Every other panic goes to the hook that was installed.
fn quiet_peer_failures() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let text = info
                .payload()
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| info.payload().downcast_ref::<&str>().copied())
                .unwrap_or("");
            if text.starts_with("timely communication error")
                || text.starts_with("MergeQueue poisoned")
            {
                tracing::warn!(
                    thread = std::thread::current().name().unwrap_or("?"),
                    "slicer cluster connection lost: {text}"
                );
            } else {
                previous(info);
            }
        }));
    });
}

/// Connects this member to every other one (waiting for those not up yet, until
/// `stop` is set) and hands the sockets to timely's networking. Returns the worker's
/// allocator and the guard of the communication threads.
pub fn connect(
    c: &Cluster,
    stop: &AtomicBool,
) -> Result<(Allocator, Box<dyn std::any::Any + Send>), SlicerError> {
    quiet_peer_failures();
    let fail = |e: String| SlicerError::Cluster(e);
    let n = c.addresses.len();
    let mut sockets: Vec<Option<TcpStream>> = (0..n).map(|_| None).collect();
    let listener = if c.index + 1 < n {
        let addr = c.addresses[c.index]
            .to_socket_addrs()
            .map_err(|e| fail(format!("resolving {}: {e}", c.addresses[c.index])))?
            .next()
            .ok_or_else(|| fail(format!("{} resolves to no address", c.addresses[c.index])))?;
        let l = TcpListener::bind(addr)
            .map_err(|e| fail(format!("listening on {}: {e}", c.addresses[c.index])))?;
        l.set_nonblocking(true)
            .map_err(|e| fail(format!("listening on {}: {e}", c.addresses[c.index])))?;
        Some(l)
    } else {
        None
    };
    // Lower members: connect (they listen).
    for (j, address) in c.addresses.iter().enumerate().take(c.index) {
        let mut warned = false;
        let stream = loop {
            if stop.load(Ordering::SeqCst) {
                return Err(fail("stopped while connecting to the other members".into()));
            }
            match TcpStream::connect(address) {
                Ok(s) => break s,
                Err(e) => {
                    if !warned {
                        tracing::info!(member = j, %address, error = %e, "waiting for slicer member");
                        warned = true;
                    }
                    std::thread::sleep(RETRY);
                }
            }
        };
        let mut stream = stream;
        let greet = |s: &mut TcpStream| -> Result<usize, String> {
            s.set_read_timeout(Some(HANDSHAKE))
                .map_err(|e| e.to_string())?;
            s.write_all(&c.hello())
                .map_err(|e| format!("greeting member {j}: {e}"))?;
            c.check(s)
        };
        match greet(&mut stream) {
            Ok(i) if i == j => {}
            Ok(i) => return Err(fail(format!("{address} answered as member {i}, not {j}"))),
            Err(e) => return Err(fail(e)),
        }
        sockets[j] = Some(stream);
    }
    // Higher members: accept (they connect).
    if let Some(listener) = listener {
        let mut waiting_since = Instant::now();
        while sockets
            .iter()
            .enumerate()
            .any(|(i, s)| i > c.index && s.is_none())
        {
            if stop.load(Ordering::SeqCst) {
                return Err(fail("stopped while waiting for the other members".into()));
            }
            match listener.accept() {
                Ok((mut stream, from)) => {
                    let admitted = (|| -> Result<usize, String> {
                        stream.set_nonblocking(false).map_err(|e| e.to_string())?;
                        stream
                            .set_read_timeout(Some(HANDSHAKE))
                            .map_err(|e| e.to_string())?;
                        let i = c.check(&mut stream)?;
                        if i < c.index {
                            return Err(format!("member {i} connected to a higher member"));
                        }
                        stream.write_all(&c.hello()).map_err(|e| e.to_string())?;
                        Ok(i)
                    })();
                    match admitted {
                        Ok(i) => sockets[i] = Some(stream),
                        Err(e) => {
                            tracing::warn!(%from, error = %e, "refused a connection to the slicer cluster")
                        }
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if waiting_since.elapsed() >= Duration::from_secs(10) {
                        let missing: Vec<usize> =
                            (c.index + 1..n).filter(|i| sockets[*i].is_none()).collect();
                        tracing::info!(?missing, "waiting for slicer members to connect");
                        waiting_since = Instant::now();
                    }
                    std::thread::sleep(RETRY / 4);
                }
                Err(e) => return Err(fail(format!("accepting slicer members: {e}"))),
            }
        }
    }
    for s in sockets.iter().flatten() {
        s.set_read_timeout(None)
            .and_then(|()| s.set_nodelay(true))
            .map_err(|e| fail(format!("configuring a member connection: {e}")))?;
    }
    let hooks = Hooks::default();
    let process = ProcessBuilder::new_typed_vector(1, hooks.refill.clone(), hooks.spill.clone());
    let (mut builders, guard) =
        initialize_networking_from_sockets(process, sockets, c.index, 1, hooks)
            .map_err(|e| fail(format!("starting the cluster's networking: {e}")))?;
    let builder = builders
        .pop()
        .ok_or_else(|| fail("timely built no worker".into()))?;
    tracing::info!(member = c.index, members = n, "slicer cluster formed");
    Ok((Allocator::Tcp(builder.build()), Box::new(guard)))
}
