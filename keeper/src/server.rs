//! The witness server: `POST /add-checkpoint` per c2sp.org/tlog-witness.
//!
//! Design constraints:
//! - Checks in the spec's order: malformed body or note 400; unknown origin 404;
//!   no valid signature of a trusted key of that origin 403 (signatures of unknown
//!   keys are ignored); old size above the checkpoint's size 400; old size other
//!   than the latest co-signed size (0 if none) 409 with that size
//!   (`text/x.tlog.size`); a checkpoint of the latest size with another root 409;
//!   a consistency proof that does not verify from the latest co-signed checkpoint
//!   422 (the proof must be empty from size 0, and from an equal size). Otherwise
//!   the keeper appends its `cosignature/v1` line (POSIX seconds), persists the
//!   co-signed note ([`crate::state`]) and only then answers 200 with that line.
//!   A body over the limit is 413 (a declared length before any byte is read), a
//!   request over the time limit 408; request headers not received within that
//!   time close the connection, and at most [`audita_http::MAX_CONNECTIONS`]
//!   connections are served at once (HTTP/1.1 keep-alive; the accept loop is
//!   [`audita_http::serve_connections`]).
//! - Per log, check-and-persist runs under one lock (the spec's rollback race): the
//!   latest co-signed checkpoint only grows, along one history, and every released
//!   cosignature is of a checkpoint consistent with every earlier one — across
//!   restarts, since the state is loaded at start and written before answering.
//! - A refused checkpoint the log did sign that conflicts with the co-signed one
//!   (same size, other root; or larger with a proof that fails) is kept as
//!   evidence ([`crate::evidence`](mod@crate::evidence)) before the answer.
//! - If the state cannot be written the log's slot is poisoned: every later request
//!   for it is 503 until the keeper restarts and reloads what is on disk (memory
//!   never runs ahead of the disk, nor behind what was answered).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use audita_evidence::{ConsistencyProof, Equivocation, KeyRegistry, SignedCheckpoint, SigningKey};
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use thiserror::Error;

use crate::config::{KeeperConfig, Limits};
use crate::evidence::{ConflictKind, ConflictRecord, EVIDENCE_FORMAT};
pub use crate::fault::{FaultHook, FaultPoint};
use crate::protocol::{parse_request, AddCheckpoint, SIZE_CONTENT_TYPE};
use crate::state::{StateDir, StateError};

/// What the keeper answers a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// 200: the keeper's cosignature line.
    Cosigned(String),
    /// 409: the latest co-signed size.
    Conflict(u64),
    /// 400.
    BadRequest(String),
    /// 403: no valid signature of a trusted key.
    Forbidden,
    /// 404: unknown origin.
    UnknownLog(String),
    /// 422: the consistency proof does not verify.
    BadProof(String),
    /// 503: the state could not be written.
    Unavailable(String),
}

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        let text = [(header::CONTENT_TYPE, "text/plain; charset=utf-8")];
        match self {
            Answer::Cosigned(line) => (StatusCode::OK, text, line).into_response(),
            Answer::Conflict(size) => (
                StatusCode::CONFLICT,
                [(header::CONTENT_TYPE, SIZE_CONTENT_TYPE)],
                format!("{size}\n"),
            )
                .into_response(),
            Answer::BadRequest(why) => (StatusCode::BAD_REQUEST, text, why + "\n").into_response(),
            Answer::Forbidden => (
                StatusCode::FORBIDDEN,
                text,
                "no valid signature of a trusted log key\n",
            )
                .into_response(),
            Answer::UnknownLog(origin) => (
                StatusCode::NOT_FOUND,
                text,
                format!("unknown log {origin}\n"),
            )
                .into_response(),
            Answer::BadProof(why) => {
                (StatusCode::UNPROCESSABLE_ENTITY, text, why + "\n").into_response()
            }
            Answer::Unavailable(why) => {
                (StatusCode::SERVICE_UNAVAILABLE, text, why + "\n").into_response()
            }
        }
    }
}

struct Slot {
    latest: Option<SignedCheckpoint>,
    poisoned: bool,
}

struct Log {
    /// One registry per trusted key of the origin.
    keys: Vec<KeyRegistry>,
    slot: Arc<tokio::sync::Mutex<Slot>>,
}

/// A keeper: its key, the logs it follows with their latest co-signed
/// checkpoints, its state directory.
pub struct Keeper {
    name: String,
    key: SigningKey,
    logs: BTreeMap<String, Log>,
    state: StateDir,
    limits: Limits,
    fault: Option<FaultHook>,
    /// Serializes evidence writes across logs (the count bound is exact).
    evidence_lock: std::sync::Mutex<()>,
    metrics: Metrics,
}

/// The keeper's Prometheus metrics (`GET /metrics`). Label values are bounded:
/// answers are the fixed set below, origins only the configured logs.
struct Metrics {
    registry: prometheus::Registry,
    /// Answers to `add-checkpoint`, by `answer` (`cosigned`, `conflict`,
    /// `bad_request`, `forbidden`, `unknown_log`, `bad_proof`, `unavailable`).
    answers: prometheus::IntCounterVec,
    /// Conflicting log-signed checkpoints refused, by `kind` (`equivocation`,
    /// `inconsistent`).
    conflicts: prometheus::IntCounterVec,
    /// The latest co-signed tree size, by `origin`.
    latest_size: prometheus::IntGaugeVec,
}

impl Metrics {
    fn new() -> Metrics {
        let registry = prometheus::Registry::new();
        let answers = prometheus::IntCounterVec::new(
            prometheus::Opts::new(
                "audita_keeper_answers_total",
                "Answers to add-checkpoint requests, by answer",
            ),
            &["answer"],
        )
        .expect("valid metric");
        let conflicts = prometheus::IntCounterVec::new(
            prometheus::Opts::new(
                "audita_keeper_conflicts_total",
                "Log-signed checkpoints refused because they conflict with the co-signed one, by kind",
            ),
            &["kind"],
        )
        .expect("valid metric");
        let latest_size = prometheus::IntGaugeVec::new(
            prometheus::Opts::new(
                "audita_keeper_latest_size",
                "Tree size of the latest checkpoint co-signed, by log origin",
            ),
            &["origin"],
        )
        .expect("valid metric");
        for c in [
            Box::new(answers.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(conflicts.clone()),
            Box::new(latest_size.clone()),
        ] {
            registry.register(c).expect("metric registered once");
        }
        Metrics {
            registry,
            answers,
            conflicts,
            latest_size,
        }
    }

    fn render(&self) -> String {
        use prometheus::Encoder as _;
        let mut buf = Vec::new();
        let _ = prometheus::TextEncoder::new().encode(&self.registry.gather(), &mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    }
}

impl Answer {
    /// The metric label of this answer.
    fn label(&self) -> &'static str {
        match self {
            Answer::Cosigned(_) => "cosigned",
            Answer::Conflict(_) => "conflict",
            Answer::BadRequest(_) => "bad_request",
            Answer::Forbidden => "forbidden",
            Answer::UnknownLog(_) => "unknown_log",
            Answer::BadProof(_) => "bad_proof",
            Answer::Unavailable(_) => "unavailable",
        }
    }
}

/// Why a keeper cannot start.
#[derive(Debug, Error)]
pub enum ServeError {
    /// The state directory cannot be read (or is corrupt: fails closed).
    #[error(transparent)]
    State(#[from] StateError),
    /// The listener or runtime could not be set up.
    #[error("listener: {0}")]
    Io(#[from] std::io::Error),
    /// A configured log name is not a valid note key name.
    #[error("log origin {0:?} is not a valid name")]
    BadOrigin(String),
}

fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Keeper {
    /// Opens the state directory and loads every followed log's latest co-signed
    /// checkpoint.
    pub fn open(config: &KeeperConfig, fault: Option<FaultHook>) -> Result<Self, ServeError> {
        let state = StateDir::open(&config.state_dir)?;
        let metrics = Metrics::new();
        let mut logs = BTreeMap::new();
        for (origin, keys) in &config.logs {
            let mut regs = Vec::new();
            for k in keys {
                let mut r = KeyRegistry::new();
                r.add_log(origin, *k)
                    .map_err(|_| ServeError::BadOrigin(origin.clone()))?;
                regs.push(r);
            }
            let latest = state.load(origin)?;
            metrics
                .latest_size
                .with_label_values(&[origin.as_str()])
                .set(latest.as_ref().map_or(0, |l| l.checkpoint().size) as i64);
            logs.insert(
                origin.clone(),
                Log {
                    keys: regs,
                    slot: Arc::new(tokio::sync::Mutex::new(Slot {
                        latest,
                        poisoned: false,
                    })),
                },
            );
        }
        Ok(Self {
            name: config.name.clone(),
            key: config.key.clone(),
            logs,
            state,
            limits: config.limits,
            fault,
            evidence_lock: std::sync::Mutex::new(()),
            metrics,
        })
    }

    /// The latest checkpoint co-signed for `origin` (as in memory, which never
    /// runs ahead of the disk).
    pub async fn latest(&self, origin: &str) -> Option<SignedCheckpoint> {
        self.logs.get(origin)?.slot.lock().await.latest.clone()
    }

    /// Handles one `add-checkpoint` body.
    pub async fn add_checkpoint(self: &Arc<Self>, body: &[u8]) -> Answer {
        let req = match parse_request(body) {
            Ok(r) => r,
            Err(e) => return Answer::BadRequest(e.to_string()),
        };
        let note = match SignedCheckpoint::parse(&req.note) {
            Ok(n) => n,
            Err(e) => return Answer::BadRequest(format!("checkpoint: {e}")),
        };
        let origin = note.checkpoint().origin.clone();
        let Some(log) = self.logs.get(&origin) else {
            return Answer::UnknownLog(origin);
        };
        let Some(keys) = log.keys.iter().find(|k| note.verify_log(k).is_ok()) else {
            return Answer::Forbidden;
        };
        if req.old_size > note.checkpoint().size {
            return Answer::BadRequest(format!(
                "old size {} is larger than the checkpoint's size {}",
                req.old_size,
                note.checkpoint().size
            ));
        }
        let keys = keys.clone();
        let guard = log.slot.clone().lock_owned().await;
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            let mut guard = guard;
            me.decide(&mut guard, req, note, &keys)
        })
        .await
        .unwrap_or_else(|e| Answer::Unavailable(format!("internal error: {e}")))
    }

    /// The checks that need the log's latest state, the cosignature and the
    /// durable write; runs under the log's lock.
    fn decide(
        &self,
        slot: &mut Slot,
        req: AddCheckpoint,
        note: SignedCheckpoint,
        keys: &KeyRegistry,
    ) -> Answer {
        if slot.poisoned {
            return Answer::Unavailable(
                "state of this log could not be written; restart the keeper".into(),
            );
        }
        let new = note.checkpoint().clone();
        let latest_size = slot.latest.as_ref().map_or(0, |l| l.checkpoint().size);
        if let Some(latest) = &slot.latest {
            let old = latest.checkpoint();
            if old.size == new.size && old.root != new.root {
                if Equivocation::detect(latest, &note, keys).is_some() {
                    self.keep(ConflictKind::Equivocation, latest, &req);
                }
                tracing::warn!(origin = %new.origin, size = new.size, "log equivocated: refused");
                return Answer::Conflict(old.size);
            }
        }
        if req.old_size != latest_size {
            return Answer::Conflict(latest_size);
        }
        let proof = ConsistencyProof {
            old_size: latest_size,
            size: new.size,
            path: req.proof.clone(),
        };
        let old_root = slot
            .latest
            .as_ref()
            .map_or(new.root, |l| l.checkpoint().root);
        if let Err(e) = proof.verify(&old_root, &new.root) {
            if let Some(latest) = &slot.latest {
                self.keep(ConflictKind::Inconsistent, latest, &req);
                tracing::warn!(origin = %new.origin, from = latest_size, to = new.size, "inconsistent checkpoint: refused");
            }
            return Answer::BadProof(format!(
                "consistency proof from {latest_size} to {} does not verify: {e}",
                new.size
            ));
        }
        let mut signed = note;
        signed.cosign(&self.name, &self.key, now_unix());
        let text = signed.to_text();
        let line = text
            .trim_end_matches('\n')
            .rsplit('\n')
            .next()
            .map(|l| format!("{l}\n"))
            .unwrap_or_default();
        self.fault_at(FaultPoint::BeforePersist);
        if let Err(e) = self.state.store(&signed, self.fault.as_ref()) {
            slot.poisoned = true;
            tracing::error!(origin = %new.origin, error = %e, "state write failed; log poisoned until restart");
            return Answer::Unavailable(format!("state write failed: {e}"));
        }
        slot.latest = Some(signed);
        self.metrics
            .latest_size
            .with_label_values(&[new.origin.as_str()])
            .set(new.size as i64);
        self.fault_at(FaultPoint::AfterPersist);
        tracing::debug!(origin = %new.origin, size = new.size, "co-signed");
        Answer::Cosigned(line)
    }

    fn fault_at(&self, point: FaultPoint) {
        if let Some(h) = &self.fault {
            h(point);
        }
    }

    fn keep(&self, kind: ConflictKind, cosigned: &SignedCheckpoint, req: &AddCheckpoint) {
        self.metrics
            .conflicts
            .with_label_values(&[match kind {
                ConflictKind::Equivocation => "equivocation",
                ConflictKind::Inconsistent => "inconsistent",
            }])
            .inc();
        let record = ConflictRecord {
            format: EVIDENCE_FORMAT.into(),
            kind,
            origin: cosigned.checkpoint().origin.clone(),
            keeper: self.name.clone(),
            cosigned: cosigned.to_text(),
            refused: String::from_utf8_lossy(&req.note).into_owned(),
            old_size: req.old_size,
            proof: req.proof.iter().map(|h| STANDARD.encode(h)).collect(),
            received_unix: now_unix(),
        };
        let _one_writer = self
            .evidence_lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match crate::evidence::store(
            &self.state.evidence_dir(),
            &record,
            self.limits.max_evidence,
        ) {
            Ok(true) => {}
            Ok(false) => tracing::warn!(
                origin = %record.origin,
                max = self.limits.max_evidence,
                "evidence limit reached: conflict refused but not kept"
            ),
            Err(e) => tracing::error!(error = %e, "evidence could not be written"),
        }
    }

    /// The HTTP routes (`POST /add-checkpoint`, `GET /healthz` for probes, `GET
    /// /metrics` in the Prometheus text format) with the body and time limits.
    pub fn router(self: &Arc<Self>) -> Router {
        Router::new()
            .route("/add-checkpoint", post(handle))
            .route("/healthz", axum::routing::get(|| async { "ok\n" }))
            .route("/metrics", axum::routing::get(metrics))
            .with_state(self.clone())
            .layer(DefaultBodyLimit::max(self.limits.max_body))
            // Refuses a declared length over the limit before reading the body.
            .layer(tower_http::limit::RequestBodyLimitLayer::new(
                self.limits.max_body,
            ))
            .layer(tower_http::timeout::TimeoutLayer::with_status_code(
                StatusCode::REQUEST_TIMEOUT,
                self.limits.request_timeout,
            ))
    }
}

async fn handle(State(keeper): State<Arc<Keeper>>, body: Bytes) -> Answer {
    let answer = keeper.add_checkpoint(&body).await;
    keeper
        .metrics
        .answers
        .with_label_values(&[answer.label()])
        .inc();
    answer
}

async fn metrics(State(keeper): State<Arc<Keeper>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        keeper.metrics.render(),
    )
        .into_response()
}

/// A running keeper: its address; stops when shut down or dropped.
pub struct KeeperHandle {
    addr: SocketAddr,
    vkey: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl KeeperHandle {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
    /// `http://<addr>`: the submission prefix.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
    /// The keeper's `cosignature/v1` verifier key.
    pub fn vkey(&self) -> &str {
        &self.vkey
    }
    /// Stops accepting, lets requests in flight finish (bounded), and returns.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }
    /// Blocks until the server stops (it only stops on shutdown or a fatal error).
    pub fn wait(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
    fn stop_and_join(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for KeeperHandle {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// Serves `config`'s keeper on `listener` from a background thread with its own
/// runtime. State errors (a corrupt state file) are returned here, before it
/// serves anything.
pub fn serve(
    config: &KeeperConfig,
    listener: std::net::TcpListener,
) -> Result<KeeperHandle, ServeError> {
    serve_with(config, listener, None)
}

/// [`serve`] with a fault-injection hook.
pub fn serve_with(
    config: &KeeperConfig,
    listener: std::net::TcpListener,
    fault: Option<FaultHook>,
) -> Result<KeeperHandle, ServeError> {
    let keeper = Arc::new(Keeper::open(config, fault)?);
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let app = keeper.router();
    let header_timeout = config.limits.request_timeout;
    let thread = std::thread::Builder::new()
        .name("keeper-http".into())
        .spawn(move || {
            runtime.block_on(async move {
                match tokio::net::TcpListener::from_std(listener) {
                    Ok(l) => {
                        audita_http::serve_connections("keeper", l, app, header_timeout, stopped)
                            .await
                    }
                    Err(e) => tracing::error!(error = %e, "keeper: listener"),
                }
            })
        })?;
    Ok(KeeperHandle {
        addr,
        vkey: config.vkey(),
        stop: Some(stop),
        thread: Some(thread),
    })
}
