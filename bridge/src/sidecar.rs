//! A sidecar's run loop: MQTT in (QoS 1, persistent session, manual acks), checked
//! and mapped messages signed with the sidecar's one key, evidence and quarantine
//! records durable in the spool before the MQTT acknowledgement, Kafka out.
//!
//! Design constraints:
//! - Three tasks: the MQTT event loop (keeps the connection, reconnects, forwards
//!   publishes in arrival order), the processing loop (checks, maps, signs, spools,
//!   then acknowledges — in arrival order, one message at a time), and the
//!   completion loop (awaits the broker's delivery reports in acceptance order and
//!   empties the spool). The producer is handed items in acceptance order, so each
//!   author's envelopes reach Kafka in time order.
//! - **The MQTT event loop is always polled**: its task awaits nothing but
//!   `EventLoop::poll` (and the back-off after a connection error). rumqttc sends
//!   keep-alive pings, reads, and writes the processing loop's acknowledgements
//!   (queued on its bounded request channel) only inside `poll`, so a task that
//!   parks elsewhere silences the connection. It therefore hands publishes to the
//!   processing loop on an unbounded queue (never awaiting space) and queues its
//!   subscriptions directly on the event loop (never awaiting the request channel).
//!   Regression (issue 14): with a bounded hand-off, a burst filled it, the event
//!   loop task parked in `send`, the acknowledgements piled up in rumqttc's request
//!   channel until the processing loop parked in `ack` — each waiting on the other,
//!   the broker dropped the silent client on keep-alive and it never reconnected.
//! - Back-pressure is the broker's: a message is acknowledged only once its
//!   evidence is spooled, so the broker keeps everything not yet acknowledged. An
//!   MQTT 3.1.1 client cannot slow the broker down short of not reading, which
//!   would also stop its pings and acknowledgements; so the hand-off holds what the
//!   broker sends ahead of the acknowledgements — its in-flight window for this
//!   client where it enforces one, else its whole queue for it (the tests'
//!   Mosquitto 2.0.11 sent 5,656 of a 6,000-message burst ahead despite
//!   `max_inflight_messages 1000`). Its depth is the `backlog` gauge, with a
//!   rate-limited warning past `BACKLOG_WARN` (10,000).
//! - A message is acknowledged only after everything it produced (envelopes or the
//!   quarantine record) is durable; if spooling fails (disk, spool full) it is
//!   retried and the message stays unacknowledged, so the broker holds it.
//! - Every message taken is counted as recorded, quarantined or peer (read only);
//!   `received = recorded + quarantined + peer` once the loop is idle.
//! - Subscriptions: a vehicle sidecar its vehicle's `state`, `connection`,
//!   `factsheet`, `visualization` (its own) and `order`, `instantActions` (peer);
//!   the master-control sidecar every vehicle's `order`, `instantActions`,
//!   `responses`, `zoneSet` (its own) and `state` (peer). They are (re)made on every
//!   connection the broker did not resume a session for.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use audita_client::{Principal, Publisher, PublisherConfig, Receipt, SignedEnvelope};
use audita_evidence::{sha256, Envelope, Hash, KeyRegistry, MessageId, PrincipalId};
use audita_topics::names as topics;
use rumqttc::{
    AsyncClient, Event, MqttOptions, Packet, Publish, QoS, Request, Subscribe, SubscribeFilter,
};

use crate::bounded::Bounded;
use crate::check::{Intake, Message, Rejection};
pub use crate::error::{now_ms, BridgeError};
use crate::map::{self, ActionMemory, VehicleNames};
use crate::peers::{FeedConfig, Peers};
use crate::quarantine::{self, SuspectSink};
use crate::receipts::Receipts;
use crate::schema::Schemas;
use crate::topic::{self, Interface, Kind, Side};

/// A backlog (messages taken from MQTT, not yet processed) worth a warning.
const BACKLOG_WARN: u64 = 10_000;

/// How long a subscribed sidecar may receive nothing before it warns that its
/// interface may not be the fleet's.
const QUIET_WARN: Duration = Duration::from_secs(30);

/// Order updates a vehicle sidecar keeps per `orderId` (the oldest go first; an
/// element released by a forgotten update is reported without that citation).
const MAX_UPDATES_PER_ORDER: usize = 64;

/// Which principal a sidecar is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// The sidecar of one vehicle.
    Vehicle {
        /// Its `manufacturer`.
        manufacturer: String,
        /// Its `serialNumber`.
        serial: String,
    },
    /// The sidecar of master control.
    MasterControl,
}

/// A sidecar's settings, validated by [`run`].
pub struct BridgeConfig {
    /// MQTT broker host.
    pub mqtt_host: String,
    /// MQTT broker port.
    pub mqtt_port: u16,
    /// The fixed MQTT client id of this sidecar (its persistent session).
    pub client_id: String,
    /// MQTT keep-alive.
    pub keep_alive: Duration,
    /// The served interface (`interfaceName/majorVersion`).
    pub interface: Interface,
    /// Payload bound in bytes.
    pub max_payload: usize,
    /// Which principal this sidecar is.
    pub role: Role,
    /// Its principal and key.
    pub principal: Principal,
    /// Master control's principal name.
    pub master: PrincipalId,
    /// How vehicle principals are named.
    pub vehicles: VehicleNames,
    /// Kafka bootstrap servers, the deployment's topic prefix, librdkafka settings.
    pub bootstrap: String,
    /// Topic prefix.
    pub topic_prefix: String,
    /// Further librdkafka settings.
    pub kafka: Vec<(String, String)>,
    /// The spool directory (`evidence/` and `suspect/` below it).
    pub spool_dir: PathBuf,
    /// How long one Kafka delivery may take before it is left to the spool.
    pub delivery_timeout: Duration,
    /// The registry the citation index verifies peers' envelopes against.
    pub registry: KeyRegistry,
    /// How long a command (or an actuation report) waits for the id it cites.
    pub cite_wait: Duration,
    /// How far back the citation index starts reading.
    pub index_lookback: Duration,
    /// Citation index bound (entries).
    pub index_cap: usize,
}

/// What a sidecar did (counters, live).
#[derive(Debug, Default)]
pub struct Counters {
    /// MQTT messages taken.
    pub received: AtomicU64,
    /// Taken and recorded as evidence.
    pub recorded: AtomicU64,
    /// Taken and quarantined.
    pub quarantined: AtomicU64,
    /// Taken as a peer's message (read for citations, recorded by its author's
    /// sidecar).
    pub peer: AtomicU64,
    /// Acknowledged to the MQTT broker.
    pub acked: AtomicU64,
    /// Envelopes signed and spooled (reports, commands, actuation reports, roots).
    pub envelopes: AtomicU64,
    /// Delivery receipts signed and spooled (for peers' envelopes addressed to this
    /// principal).
    pub receipts: AtomicU64,
    /// Items the Kafka broker acknowledged.
    pub delivered: AtomicU64,
    /// Items whose delivery failed (left in the spool, sent again).
    pub undelivered: AtomicU64,
    /// MQTT connection errors (each followed by a reconnect).
    pub mqtt_errors: AtomicU64,
    /// Subscriptions the broker confirmed (one per connection without a resumed
    /// session).
    pub subscribed: AtomicU64,
    /// Commands citing the state last seen over MQTT.
    pub cited_seen_state: AtomicU64,
    /// Commands citing an older state (the latest one seen was not indexed in time).
    pub cited_older_state: AtomicU64,
    /// Commands citing master control's own root (no state of the vehicle known).
    pub cited_no_state: AtomicU64,
    /// Actuation reports without the requesting order's id.
    pub uncited_actions: AtomicU64,
    /// Releasing order updates a progress report could not cite (unknown to the
    /// vehicle's sidecar, or their ids did not arrive in time).
    pub uncited_progress: AtomicU64,
    /// Messages taken from MQTT and waiting for the processing loop (a gauge).
    pub backlog: AtomicU64,
    /// The largest `backlog` seen.
    pub backlog_peak: AtomicU64,
    reasons: Mutex<BTreeMap<&'static str, u64>>,
}

impl Counters {
    fn add(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    fn quarantine(&self, reason: &'static str) {
        Counters::add(&self.quarantined);
        *self
            .reasons
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(reason)
            .or_default() += 1;
    }

    /// A snapshot.
    pub fn summary(&self) -> Summary {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Summary {
            received: g(&self.received),
            recorded: g(&self.recorded),
            quarantined: g(&self.quarantined),
            peer: g(&self.peer),
            acked: g(&self.acked),
            envelopes: g(&self.envelopes),
            receipts: g(&self.receipts),
            delivered: g(&self.delivered),
            undelivered: g(&self.undelivered),
            mqtt_errors: g(&self.mqtt_errors),
            subscribed: g(&self.subscribed),
            cited_seen_state: g(&self.cited_seen_state),
            cited_older_state: g(&self.cited_older_state),
            cited_no_state: g(&self.cited_no_state),
            uncited_actions: g(&self.uncited_actions),
            uncited_progress: g(&self.uncited_progress),
            backlog_peak: g(&self.backlog_peak),
            quarantine_reasons: self
                .reasons
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
        }
    }

    /// The counters in the Prometheus text format
    /// (`audita_bridge_<name>_total`, the outcome and reason as labels).
    pub fn prometheus(&self) -> String {
        let s = self.summary();
        let mut out = String::new();
        out.push_str("# HELP audita_bridge_mqtt_messages_total MQTT messages taken, by outcome.\n# TYPE audita_bridge_mqtt_messages_total counter\n");
        for (o, v) in [
            ("recorded", s.recorded),
            ("quarantined", s.quarantined),
            ("peer", s.peer),
        ] {
            out.push_str(&format!(
                "audita_bridge_mqtt_messages_total{{outcome=\"{o}\"}} {v}\n"
            ));
        }
        out.push_str("# HELP audita_bridge_quarantined_total Quarantined MQTT messages, by reason.\n# TYPE audita_bridge_quarantined_total counter\n");
        for (r, v) in &s.quarantine_reasons {
            out.push_str(&format!(
                "audita_bridge_quarantined_total{{reason=\"{r}\"}} {v}\n"
            ));
        }
        for (name, help, v) in [
            ("envelopes", "Envelopes signed and spooled.", s.envelopes),
            (
                "receipts",
                "Delivery receipts signed and spooled.",
                s.receipts,
            ),
            (
                "delivered",
                "Items the Kafka broker acknowledged.",
                s.delivered,
            ),
            (
                "undelivered",
                "Deliveries that failed (item kept in the spool).",
                s.undelivered,
            ),
            ("mqtt_errors", "MQTT connection errors.", s.mqtt_errors),
            (
                "mqtt_subscribed",
                "Subscriptions the MQTT broker confirmed.",
                s.subscribed,
            ),
            (
                "mqtt_acked",
                "MQTT messages acknowledged (their evidence durable).",
                s.acked,
            ),
        ] {
            out.push_str(&format!(
                "# HELP audita_bridge_{name}_total {help}\n# TYPE audita_bridge_{name}_total counter\naudita_bridge_{name}_total {v}\n"
            ));
        }
        out.push_str(&format!(
            "# HELP audita_bridge_mqtt_backlog_messages MQTT messages taken and waiting to be processed.\n# TYPE audita_bridge_mqtt_backlog_messages gauge\naudita_bridge_mqtt_backlog_messages {}\n",
            self.backlog.load(Ordering::Relaxed)
        ));
        out
    }
}

/// A snapshot of [`Counters`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[allow(missing_docs)]
pub struct Summary {
    pub received: u64,
    pub recorded: u64,
    pub quarantined: u64,
    pub peer: u64,
    pub acked: u64,
    pub envelopes: u64,
    pub receipts: u64,
    pub delivered: u64,
    pub undelivered: u64,
    pub mqtt_errors: u64,
    pub subscribed: u64,
    pub cited_seen_state: u64,
    pub cited_older_state: u64,
    pub cited_no_state: u64,
    pub uncited_actions: u64,
    pub uncited_progress: u64,
    pub backlog_peak: u64,
    pub quarantine_reasons: BTreeMap<String, u64>,
}

/// What one MQTT message became.
#[derive(Debug)]
pub enum Outcome {
    /// Evidence, in publishing order, and receipts of this principal's own roots.
    Evidence(Vec<SignedEnvelope>, Vec<Receipt>),
    /// Quarantined with the reason.
    Quarantine(Rejection),
    /// A peer's message, read (for citations) and, where its verified envelope is
    /// in, receipted.
    Peer(Vec<Receipt>),
}

/// The mapping state of one sidecar: what it checks, signs and remembers. Pure but
/// for waiting on the citation index.
pub struct Core {
    intake: Arc<Intake>,
    role: Role,
    principal: Arc<Principal>,
    receipts: Arc<Receipts>,
    master: PrincipalId,
    vehicles: VehicleNames,
    peers: Arc<Peers>,
    cite_wait: Duration,
    counters: Arc<Counters>,
    /// Master control: the payload digest of the latest state seen per vehicle.
    latest_state: Bounded<PrincipalId, Hash>,
    /// Vehicle: the payload digest of the message that requested each action.
    requested: Bounded<String, Hash>,
    /// Vehicle: the last status of each action.
    actions: ActionMemory,
    /// Vehicle: the order messages seen, by `orderId`: each update's reading and
    /// payload digest (what a progress report cites as the releasing update).
    orders: Bounded<String, Vec<(audita_vda5050::OrderView, Hash)>>,
    /// Vehicle: the last order progress reported.
    last_progress: Option<audita_vda5050::Progress>,
    /// Master control: vehicles whose latest state id did not arrive in time.
    lagging: std::collections::HashSet<PrincipalId>,
}

impl Core {
    /// A core for `role` signing as `principal`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        intake: Arc<Intake>,
        role: Role,
        principal: Principal,
        master: PrincipalId,
        vehicles: VehicleNames,
        peers: Arc<Peers>,
        cite_wait: Duration,
        counters: Arc<Counters>,
    ) -> Result<Core, BridgeError> {
        match &role {
            Role::Vehicle {
                manufacturer,
                serial,
            } => {
                let want = vehicles
                    .principal(manufacturer, serial)
                    .map_err(|r| BridgeError::Config(r.detail))?;
                if *principal.id() != want {
                    return Err(BridgeError::Config(format!(
                        "the sidecar of vehicle {manufacturer}/{serial} signs as {want}, not as {}",
                        principal.id()
                    )));
                }
                if want == master {
                    return Err(BridgeError::Config(
                        "a vehicle cannot be master control".into(),
                    ));
                }
            }
            Role::MasterControl => {
                if *principal.id() != master {
                    return Err(BridgeError::Config(format!(
                        "the master-control sidecar signs as {master}, not as {}",
                        principal.id()
                    )));
                }
            }
        }
        let principal = Arc::new(principal);
        Ok(Core {
            intake,
            role,
            receipts: Arc::new(Receipts::new(principal.clone(), 1 << 16)),
            principal,
            master,
            vehicles,
            peers,
            cite_wait,
            counters,
            latest_state: Bounded::new(1 << 16),
            requested: Bounded::new(1 << 14),
            actions: ActionMemory::new(1 << 12),
            orders: Bounded::new(1 << 10),
            last_progress: None,
            lagging: std::collections::HashSet::new(),
        })
    }

    /// This sidecar's MQTT subscriptions.
    pub fn filters(&self) -> Vec<String> {
        let i = &self.intake.interface;
        match &self.role {
            Role::Vehicle {
                manufacturer,
                serial,
            } => [
                Kind::State,
                Kind::Connection,
                Kind::Factsheet,
                Kind::Visualization,
                Kind::Order,
                Kind::InstantActions,
                Kind::Responses,
                Kind::ZoneSet,
            ]
            .iter()
            .map(|k| i.topic(manufacturer, serial, *k))
            .collect(),
            Role::MasterControl => [
                Kind::Order,
                Kind::InstantActions,
                Kind::Responses,
                Kind::ZoneSet,
                Kind::State,
                Kind::Connection,
                Kind::Factsheet,
                Kind::Visualization,
            ]
            .iter()
            .map(|k| i.filter_all(*k))
            .collect(),
        }
    }

    fn side(&self) -> Side {
        match self.role {
            Role::Vehicle { .. } => Side::Vehicle,
            Role::MasterControl => Side::MasterControl,
        }
    }

    fn sign(&self, e: Envelope) -> Result<SignedEnvelope, Rejection> {
        self.principal
            .sign(e)
            .map_err(|e| Rejection::new("sign", e.to_string()))
    }

    /// What the message on `topic` with `payload` becomes.
    pub async fn decide(&mut self, mqtt_topic: &str, payload: &[u8]) -> Outcome {
        // Whose message is it? A peer's is read, never recorded nor quarantined here
        // (its author's sidecar does that).
        let kind = topic::parse(&self.intake.interface, mqtt_topic)
            .ok()
            .map(|t| t.kind);
        if let Some(k) = kind {
            if k.author() != self.side() {
                return Outcome::Peer(self.read_peer(mqtt_topic, payload));
            }
        }
        let result = match self.intake.check(mqtt_topic, payload) {
            Err(r) => Err(r),
            Ok(msg) => self.own(msg).await,
        };
        match result {
            Ok(envs) => {
                let receipts = envs.iter().filter_map(|e| self.receipts.own(e)).collect();
                Outcome::Evidence(envs, receipts)
            }
            Err(r) => Outcome::Quarantine(r),
        }
    }

    fn read_peer(&mut self, mqtt_topic: &str, payload: &[u8]) -> Vec<Receipt> {
        let Ok(msg) = self.intake.check(mqtt_topic, payload) else {
            return Vec::new();
        };
        let digest = sha256(msg.text.as_bytes());
        let receipt = self.receipts.seen(digest);
        match self.role {
            Role::MasterControl if msg.topic.kind == Kind::State => {
                if let Ok(v) = self
                    .vehicles
                    .principal(&msg.topic.manufacturer, &msg.topic.serial)
                {
                    self.latest_state.insert(v, digest);
                }
            }
            Role::Vehicle { .. } => {
                for (action_id, _) in map::requested_actions(&msg) {
                    self.requested.insert(action_id, digest);
                }
                if msg.topic.kind == Kind::Order {
                    if let Some(o) = audita_vda5050::OrderView::from_value(&msg.value) {
                        self.remember_order(o, digest);
                    }
                }
            }
            _ => {}
        }
        receipt.into_iter().collect()
    }

    /// Keeps an order update for the progress reports (at most
    /// [`MAX_UPDATES_PER_ORDER`] per order; a re-sent copy once).
    fn remember_order(&mut self, o: audita_vda5050::OrderView, digest: Hash) {
        let mut updates = self.orders.remove(&o.order_id).unwrap_or_default();
        if !updates.iter().any(|(_, d)| *d == digest) {
            updates.push((o.clone(), digest));
            if updates.len() > MAX_UPDATES_PER_ORDER {
                updates.remove(0);
            }
        }
        self.orders.insert(o.order_id, updates);
    }

    /// The progress report a vehicle state calls for (none if it shows no progress
    /// past the last one reported), citing the state and the releasing updates.
    async fn progress(
        &mut self,
        msg: &Message,
        state_id: &MessageId,
        t: u64,
    ) -> Result<Option<SignedEnvelope>, Rejection> {
        let Some(state) = audita_vda5050::StateView::from_value(&msg.value) else {
            return Ok(None);
        };
        let Some(p) = audita_vda5050::progress(&state) else {
            return Ok(None);
        };
        if !p.advances(self.last_progress.as_ref()) {
            return Ok(None);
        }
        let mut cites = vec![state_id.clone()];
        let seqs: Vec<u64> = std::iter::once(p.node.1)
            .chain(p.edge.as_ref().map(|e| e.1))
            .collect();
        for seq in seqs {
            let digest = self.orders.get(&p.order_id).and_then(|ups| {
                audita_vda5050::first_release(ups.iter().map(|(o, d)| (o, *d)), seq, |u| {
                    u <= state.update_id
                })
                .map(|(_, d)| d)
            });
            let id = match digest {
                Some(d) => self.peers.wait_for(&self.master, &d, self.cite_wait).await,
                None => None,
            };
            match id {
                Some(id) => cites.push(id),
                None => Counters::add(&self.counters.uncited_progress),
            }
        }
        let me = self.principal.id().clone();
        let env = map::progress_report(
            &me,
            &self.master,
            t,
            map::StateSeen {
                header_id: msg.header_id,
                update_id: state.update_id,
                driving: state.driving,
            },
            &p,
            cites,
        );
        self.last_progress = Some(p);
        Ok(Some(self.sign(env)?))
    }

    /// The receipts this core's principal signs for peers' envelopes.
    pub fn receipts(&self) -> Arc<Receipts> {
        self.receipts.clone()
    }

    async fn own(&mut self, msg: Message) -> Result<Vec<SignedEnvelope>, Rejection> {
        let t = msg.timestamp_ms.unwrap_or_else(now_ms);
        match self.role.clone() {
            Role::Vehicle {
                manufacturer,
                serial,
            } => {
                if msg.topic.manufacturer != manufacturer || msg.topic.serial != serial {
                    return Err(Rejection::new(
                        "vehicle_mismatch",
                        format!(
                            "a message of {}/{} reached the sidecar of {manufacturer}/{serial}",
                            msg.topic.manufacturer, msg.topic.serial
                        ),
                    ));
                }
                let me = self.principal.id().clone();
                let report = self.sign(map::vehicle_report(&msg, &me, &self.master, t))?;
                let state_id = report.id().clone();
                let mut out = vec![report];
                let changes = self.actions.transitions(&map::action_states(&msg));
                for tr in changes {
                    let mut cites = vec![state_id.clone()];
                    let order = match self.requested.get(&tr.action_id).copied() {
                        Some(d) => self.peers.wait_for(&self.master, &d, self.cite_wait).await,
                        None => None,
                    };
                    match order {
                        Some(id) => cites.push(id),
                        None => Counters::add(&self.counters.uncited_actions),
                    }
                    out.push(self.sign(map::actuation_report(
                        &me,
                        &self.master,
                        t,
                        msg.header_id,
                        &tr,
                        cites,
                    ))?);
                }
                if msg.topic.kind == Kind::State {
                    out.extend(self.progress(&msg, &state_id, t).await?);
                }
                Ok(out)
            }
            Role::MasterControl => {
                let vehicle = self
                    .vehicles
                    .principal(&msg.topic.manufacturer, &msg.topic.serial)?;
                let mut out = Vec::new();
                // A vehicle whose last state id did not arrive in time (its sidecar
                // down or lagging) is not waited for again until one arrives: one
                // silent vehicle must not stall master control's record.
                let wait = if self.lagging.contains(&vehicle) {
                    Duration::ZERO
                } else {
                    self.cite_wait
                };
                let seen = match self.latest_state.get(&vehicle).copied() {
                    Some(d) => {
                        let id = self.peers.wait_for(&vehicle, &d, wait).await;
                        if id.is_some() {
                            self.lagging.remove(&vehicle);
                        } else {
                            self.lagging.insert(vehicle.clone());
                        }
                        id
                    }
                    None => None,
                };
                let cite = if let Some(id) = seen {
                    Counters::add(&self.counters.cited_seen_state);
                    id
                } else if let Some(id) = self.peers.latest(&vehicle) {
                    Counters::add(&self.counters.cited_older_state);
                    id
                } else {
                    Counters::add(&self.counters.cited_no_state);
                    let root = self.sign(map::no_state_root(&msg, &self.master, &vehicle, t))?;
                    let id = root.id().clone();
                    out.push(root);
                    id
                };
                out.push(self.sign(map::command(&msg, &self.master, &vehicle, t, [cite]))?);
                Ok(out)
            }
        }
    }
}

enum Done {
    Envelope(audita_client::Accepted),
    Suspect(quarantine::Accepted),
}

/// Runs a sidecar until `stop` is set; returns its final counters.
pub async fn run(
    config: BridgeConfig,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
) -> Result<Summary, BridgeError> {
    run_many(config, Vec::new(), stop, counters).await
}

/// [`run`] with further principals served by the same process: **for benchmarks
/// only** (one process multiplexing a fleet's vehicles). Each principal still signs
/// with its own key and only its own topics, but the keys share a process, which
/// gives up the isolation the trust model rests on. A message reaches one core: its
/// vehicle's if this process serves that vehicle, else master control's, else the
/// first.
pub async fn run_many(
    config: BridgeConfig,
    also: Vec<(Role, Principal)>,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
) -> Result<Summary, BridgeError> {
    config.check_payload_bound()?;
    let schemas = Schemas::load().map_err(|e| BridgeError::Internal(e.to_string()))?;
    let intake = Arc::new(Intake {
        interface: config.interface.clone(),
        schemas,
        max_payload: config.max_payload,
    });
    let peers = Arc::new(Peers::new(config.index_cap));
    let me = config.principal.id().clone();
    let master = config.master.clone();
    // Settings resolved before the principal moves into its core.
    let publisher_config = config.publisher_config();
    let feed_config = config.feed_config(&me);
    let mqtt_options = config.mqtt_options();
    let mut cores = Vec::new();
    for (role, principal) in std::iter::once((config.role.clone(), config.principal)).chain(also) {
        cores.push(Core::new(
            intake.clone(),
            role,
            principal,
            config.master.clone(),
            config.vehicles.clone(),
            peers.clone(),
            config.cite_wait,
            counters.clone(),
        )?);
    }
    let routes = Routes::of(&cores)?;
    let mut filters: Vec<String> = cores.iter().flat_map(Core::filters).collect();
    filters.sort();
    filters.dedup();

    // Kafka: the evidence publisher, the suspect sink, the citation index.
    let publisher = Arc::new(Publisher::new(publisher_config).map_err(BridgeError::Client)?);
    let suspect = Arc::new(SuspectSink::open(
        &config.spool_dir.join("suspect"),
        &config.bootstrap,
        format!("{}{}", config.topic_prefix, topics::SUSPECT),
        &config.kafka,
        config.delivery_timeout,
    )?);
    let feeder_stop = Arc::new(AtomicBool::new(false));
    // Completion channel: delivery reports awaited in acceptance order.
    let (outlets, done_rx) = Outlets::new(publisher, suspect, counters.clone());
    let feeder = crate::peers::spawn_feeder(
        feed_config,
        peers.clone(),
        Arc::new(config.registry),
        peer_test(&config.role, master),
        outlets.on_verified(cores[0].receipts()),
        feeder_stop.clone(),
    )
    .map_err(BridgeError::Kafka)?;
    outlets.resend_earlier_spools().await?;

    // MQTT.
    let (client, eventloop) = AsyncClient::new(mqtt_options, 256);
    // Unbounded: the event-loop task must never wait for the processing loop (see
    // the module's design constraints); it holds what the broker sends ahead of
    // the acknowledgements.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Publish>();
    let mqtt = tokio::spawn(poll_mqtt(
        eventloop,
        tx,
        MqttWatch {
            stop: stop.clone(),
            counters: counters.clone(),
            filters,
            who: me.to_string(),
            where_: format!("{}:{}", config.mqtt_host, config.mqtt_port),
        },
    ));

    // Completion: delivery reports in acceptance order.
    let needs_resend = Arc::new(AtomicBool::new(false));
    let completer = tokio::spawn(outlets.complete(done_rx, needs_resend.clone()));
    let resender = tokio::spawn(outlets.resend_when_idle(needs_resend, stop.clone()));

    // Processing, in arrival order.
    let mut taken: u64 = 0;
    while let Some(p) = next_publish(&mut rx, &stop, &counters).await {
        taken += 1;
        Counters::add(&counters.received);
        let which = routes.core_for(&intake.interface, &p.topic);
        let outcome = cores[which].decide(&p.topic, &p.payload).await;
        if !outlets.record(&outcome, &p, taken, &stop).await {
            break;
        }
        if client.ack(&p).await.is_ok() {
            Counters::add(&counters.acked);
        }
    }

    // Stop: no more input; let the deliveries in flight finish (bounded). The
    // feeder stops first: its receipt callback holds a sender of the completion
    // channel, which must close for the completer to finish (regression: with the
    // feeder still running, every stop waited out the whole delivery timeout).
    stop.store(true, Ordering::Relaxed);
    feeder_stop.store(true, Ordering::Relaxed);
    let _ = tokio::task::spawn_blocking(move || feeder.join()).await;
    drop(outlets.done);
    let _ = tokio::time::timeout(config.delivery_timeout + Duration::from_secs(5), completer).await;
    resender.abort();
    mqtt.abort();
    outlets
        .publisher
        .flush(Duration::from_secs(5))
        .map_err(BridgeError::Client)?;
    outlets.suspect.flush(Duration::from_secs(5));
    Ok(counters.summary())
}

impl BridgeConfig {
    /// Refuses a payload bound above [`crate::check::MAX_PAYLOAD_LIMIT`].
    fn check_payload_bound(&self) -> Result<(), BridgeError> {
        if self.max_payload > crate::check::MAX_PAYLOAD_LIMIT {
            return Err(BridgeError::Config(format!(
                "max payload {} exceeds {}",
                self.max_payload,
                crate::check::MAX_PAYLOAD_LIMIT
            )));
        }
        Ok(())
    }

    /// The evidence publisher's settings (its spool is `evidence/` below the spool
    /// directory).
    fn publisher_config(&self) -> PublisherConfig {
        let mut pc = PublisherConfig::new(&self.bootstrap, self.spool_dir.join("evidence"));
        pc.topic_prefix = self.topic_prefix.clone();
        pc.kafka = self.kafka.clone();
        pc.delivery_timeout = self.delivery_timeout;
        pc
    }

    /// The citation index's settings: it reads the envelopes topic, as a consumer
    /// named after `me`.
    fn feed_config(&self, me: &PrincipalId) -> FeedConfig {
        FeedConfig {
            bootstrap: self.bootstrap.clone(),
            topic: format!("{}{}", self.topic_prefix, topics::ENVELOPES),
            lookback: self.index_lookback,
            kafka: self.kafka.clone(),
            name: me.as_str().replace('/', "_"),
        }
    }

    /// The MQTT session's settings: persistent session, manual acknowledgements.
    fn mqtt_options(&self) -> MqttOptions {
        let mut opts = MqttOptions::new(&self.client_id, &self.mqtt_host, self.mqtt_port);
        opts.set_keep_alive(self.keep_alive)
            .set_clean_session(false)
            .set_manual_acks(true)
            // Larger than the payload bound, so an oversized message is taken and
            // quarantined rather than breaking the connection.
            .set_max_packet_size(16 << 20, 1 << 20);
        opts
    }
}

/// Which authors' envelopes the citation index reads: a vehicle's sidecar reads
/// master control's, master control's reads everyone else's.
fn peer_test(role: &Role, master: PrincipalId) -> Box<dyn Fn(&PrincipalId) -> bool + Send> {
    match role {
        Role::Vehicle { .. } => Box::new(move |a: &PrincipalId| *a == master),
        Role::MasterControl => Box::new(move |a: &PrincipalId| *a != master),
    }
}

/// Which core takes a message: its vehicle's if this process serves that vehicle,
/// else master control's, else the first.
struct Routes {
    /// Core index per served vehicle `(manufacturer, serial)`.
    vehicles: HashMap<(String, String), usize>,
    /// Master control's core, if served.
    master: Option<usize>,
}

impl Routes {
    /// The routes of `cores`; two cores for one vehicle are a configuration error.
    fn of(cores: &[Core]) -> Result<Routes, BridgeError> {
        let mut vehicles: HashMap<(String, String), usize> = HashMap::new();
        let mut master = None;
        for (i, c) in cores.iter().enumerate() {
            match &c.role {
                Role::Vehicle {
                    manufacturer,
                    serial,
                } => {
                    if vehicles
                        .insert((manufacturer.clone(), serial.clone()), i)
                        .is_some()
                    {
                        return Err(BridgeError::Config(format!(
                            "two sidecars for vehicle {manufacturer}/{serial}"
                        )));
                    }
                }
                Role::MasterControl => master = Some(i),
            }
        }
        Ok(Routes { vehicles, master })
    }

    /// The core for a message on `mqtt_topic`.
    fn core_for(&self, interface: &Interface, mqtt_topic: &str) -> usize {
        topic::parse(interface, mqtt_topic)
            .ok()
            .and_then(|t| self.vehicles.get(&(t.manufacturer, t.serial)).copied())
            .or(self.master)
            .unwrap_or(0)
    }
}

/// What the MQTT event-loop task watches and reports: the stop flag, the counters,
/// its subscriptions and the names in its ready line.
struct MqttWatch {
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
    /// The subscription filters (sorted, deduplicated).
    filters: Vec<String>,
    /// This sidecar's principal.
    who: String,
    /// The broker's `host:port`.
    where_: String,
}

/// The MQTT event-loop task: polls the connection until stop, hands publishes to the
/// processing loop (never awaiting it), subscribes on every connection the broker
/// did not resume a session for, and reconnects with back-off.
async fn poll_mqtt(
    mut eventloop: rumqttc::EventLoop,
    tx: tokio::sync::mpsc::UnboundedSender<Publish>,
    watch: MqttWatch,
) {
    let MqttWatch {
        stop,
        counters,
        filters,
        who,
        where_,
    } = watch;
    let mut quiet_since: Option<std::time::Instant> = None;
    let mut backoff = Duration::from_millis(100);
    let mut warned = Duration::ZERO;
    let started = std::time::Instant::now();
    while !stop.load(Ordering::Relaxed) {
        // `poll` is not interrupted (it holds partial reads); the task is
        // aborted at stop instead. Nothing else in this loop may await.
        // Subscribed for 30 s and nothing arrived: a fleet on another interface
        // name or major version is never received (and nothing is quarantined),
        // so say so once.
        if quiet_since.is_some_and(|t| t.elapsed() >= QUIET_WARN)
            && counters.received.load(Ordering::Relaxed) == 0
        {
            tracing::warn!(
                filters = %filters.join(", "),
                "no MQTT message in 30 s: is --interface the fleet's interfaceName/majorVersion (e.g. uagv/v2)?"
            );
            quiet_since = None;
        }
        match eventloop.poll().await {
            Ok(Event::Incoming(Packet::Publish(p))) => {
                backoff = Duration::from_millis(100);
                // Counted before it is sent, so the gauge never goes below 0.
                let depth = counters.backlog.fetch_add(1, Ordering::Relaxed) + 1;
                if tx.send(p).is_err() {
                    break;
                }
                counters.backlog_peak.fetch_max(depth, Ordering::Relaxed);
                if depth >= BACKLOG_WARN && started.elapsed() >= warned {
                    warned = started.elapsed() + Duration::from_secs(10);
                    tracing::warn!(
                        backlog = depth,
                        "MQTT messages taken and waiting to be processed (the broker sends ahead of the acknowledgements)"
                    );
                }
            }
            Ok(Event::Incoming(Packet::SubAck(_))) => {
                Counters::add(&counters.subscribed);
                // One line at every log level: this sidecar is recording.
                eprintln!(
                    "audita bridge vda5050: ready — {who} subscribed to {} on {where_}",
                    filters.join(", ")
                );
                quiet_since = Some(std::time::Instant::now());
            }
            Ok(Event::Incoming(Packet::ConnAck(ack))) => {
                tracing::info!(session_present = ack.session_present, "MQTT connected");
                if !ack.session_present && !filters.is_empty() {
                    // Queued on the event loop itself, sent on its next `poll`:
                    // the request channel may be full of acknowledgements, and
                    // this task must not wait for it to drain (only it drains it).
                    let subs = filters
                        .iter()
                        .map(|f| SubscribeFilter::new(f.clone(), QoS::AtLeastOnce));
                    eventloop
                        .pending
                        .push_back(Request::Subscribe(Subscribe::new_many(subs)));
                }
            }
            Ok(_) => {}
            Err(e) => {
                Counters::add(&counters.mqtt_errors);
                tracing::warn!(error = %e, "MQTT connection; reconnecting");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// The next publish to process, or `None` at stop or when the event loop is gone.
/// A publish taken after stop is not acknowledged: the broker delivers it again to
/// the next run.
async fn next_publish(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<Publish>,
    stop: &AtomicBool,
    counters: &Counters,
) -> Option<Publish> {
    let p = loop {
        tokio::select! {
            p = rx.recv() => break p?,
            _ = tokio::time::sleep(Duration::from_millis(200)) => {
                if stop.load(Ordering::Relaxed) { return None }
            }
        }
    };
    counters.backlog.fetch_sub(1, Ordering::Relaxed);
    if stop.load(Ordering::Relaxed) {
        return None;
    }
    Some(p)
}

/// Where a sidecar's output goes: the evidence publisher and the suspect sink, with
/// the completion channel on which their acceptances are awaited in order.
struct Outlets {
    publisher: Arc<Publisher>,
    suspect: Arc<SuspectSink>,
    /// Acceptances whose delivery reports are still to be awaited.
    done: tokio::sync::mpsc::UnboundedSender<Done>,
    /// Acceptances sent on `done` and not yet completed.
    inflight: Arc<AtomicU64>,
    counters: Arc<Counters>,
}

impl Outlets {
    /// Outlets to `publisher` and `suspect`, and the receiving end of their
    /// completion channel.
    fn new(
        publisher: Arc<Publisher>,
        suspect: Arc<SuspectSink>,
        counters: Arc<Counters>,
    ) -> (Outlets, tokio::sync::mpsc::UnboundedReceiver<Done>) {
        let (done, done_rx) = tokio::sync::mpsc::unbounded_channel::<Done>();
        let outlets = Outlets {
            publisher,
            suspect,
            done,
            inflight: Arc::new(AtomicU64::new(0)),
            counters,
        };
        (outlets, done_rx)
    }

    /// The citation index's callback: spools the receipt of a verified peer envelope
    /// (when `receipts` issues one) and hands it to the completion loop.
    fn on_verified(&self, receipts: Arc<Receipts>) -> impl Fn(&SignedEnvelope) + Send + 'static {
        let (publisher, done, inflight, counters) = (
            self.publisher.clone(),
            self.done.clone(),
            self.inflight.clone(),
            self.counters.clone(),
        );
        move |e: &SignedEnvelope| {
            let Some(r) = receipts.verified(e) else {
                return;
            };
            match publisher.accept_receipt(&r) {
                Ok(a) => {
                    Counters::add(&counters.receipts);
                    inflight.fetch_add(1, Ordering::Relaxed);
                    let _ = done.send(Done::Envelope(a));
                }
                Err(err) => tracing::error!(error = %err, "cannot spool a receipt"),
            }
        }
    }

    /// Sends what an earlier run left in the spools.
    async fn resend_earlier_spools(&self) -> Result<(), BridgeError> {
        let resent = self
            .publisher
            .resend_spool()
            .await
            .map_err(BridgeError::Client)?;
        let (s_ok, s_left) = self.suspect.resend().await?;
        if resent.delivered + resent.spooled + s_ok + s_left > 0 {
            tracing::info!(
                delivered = resent.delivered + s_ok,
                spooled = resent.spooled + s_left,
                "spool from an earlier run"
            );
        }
        Ok(())
    }

    /// The completion loop: awaits delivery reports in acceptance order until the
    /// channel closes, counting them and flagging a resend when one failed.
    fn complete(
        &self,
        mut done_rx: tokio::sync::mpsc::UnboundedReceiver<Done>,
        needs_resend: Arc<AtomicBool>,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let (publisher, suspect, counters, inflight) = (
            self.publisher.clone(),
            self.suspect.clone(),
            self.counters.clone(),
            self.inflight.clone(),
        );
        async move {
            while let Some(d) = done_rx.recv().await {
                let ok = match d {
                    Done::Envelope(a) => publisher.delivered(a).await.is_ok(),
                    Done::Suspect(a) => suspect.delivered(a).await,
                };
                Counters::add(if ok {
                    &counters.delivered
                } else {
                    &counters.undelivered
                });
                if !ok {
                    needs_resend.store(true, Ordering::Relaxed);
                }
                inflight.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// The resend loop: every 500 ms until stop, once nothing is in flight, resends
    /// the spools if a delivery failed (and again while something stays spooled).
    fn resend_when_idle(
        &self,
        needs_resend: Arc<AtomicBool>,
        stop: Arc<AtomicBool>,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let (publisher, suspect, inflight) = (
            self.publisher.clone(),
            self.suspect.clone(),
            self.inflight.clone(),
        );
        async move {
            while !stop.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(500)).await;
                if needs_resend.load(Ordering::Relaxed) && inflight.load(Ordering::Relaxed) == 0 {
                    needs_resend.store(false, Ordering::Relaxed);
                    let a = publisher.resend_spool().await;
                    let b = suspect.resend().await;
                    let left = a.map(|r| r.spooled).unwrap_or(1) + b.map(|r| r.1).unwrap_or(1);
                    if left > 0 {
                        needs_resend.store(true, Ordering::Relaxed);
                    }
                }
            }
        }
    }

    /// Records what message `p` (the `taken`-th) became: spools everything it
    /// produced, counts it, and hands the acceptances to the completion loop.
    /// Whether all of it is durable (so `p` may be acknowledged); not when stop came
    /// while the spool refused.
    async fn record(&self, outcome: &Outcome, p: &Publish, taken: u64, stop: &AtomicBool) -> bool {
        let pending = self.spool(outcome, p, taken, stop).await;
        let complete = match outcome {
            Outcome::Evidence(envs, receipts) => pending.len() == envs.len() + receipts.len(),
            Outcome::Quarantine(_) => pending.len() == 1,
            Outcome::Peer(receipts) => pending.len() == receipts.len(),
        };
        let counters = &self.counters;
        match outcome {
            Outcome::Evidence(envs, _) => {
                let e = pending.len().min(envs.len()) as u64;
                counters.envelopes.fetch_add(e, Ordering::Relaxed);
                counters
                    .receipts
                    .fetch_add(pending.len() as u64 - e, Ordering::Relaxed);
                if complete {
                    Counters::add(&counters.recorded);
                }
            }
            Outcome::Quarantine(r) => {
                if complete {
                    counters.quarantine(r.reason);
                }
            }
            Outcome::Peer(_) => {
                counters
                    .receipts
                    .fetch_add(pending.len() as u64, Ordering::Relaxed);
                if complete {
                    Counters::add(&counters.peer);
                }
            }
        }
        for d in pending {
            self.inflight.fetch_add(1, Ordering::Relaxed);
            let _ = self.done.send(d);
        }
        complete
    }

    /// Spools everything `outcome` produced, retrying every second while the spool
    /// refuses (until stop); the acceptances, in order.
    async fn spool(
        &self,
        outcome: &Outcome,
        p: &Publish,
        taken: u64,
        stop: &AtomicBool,
    ) -> Vec<Done> {
        let (publisher, suspect) = (&self.publisher, &self.suspect);
        let mut pending: Vec<Done> = Vec::new();
        loop {
            let r: Result<(), BridgeError> = match outcome {
                Outcome::Evidence(envs, receipts) => envs
                    .iter()
                    .map(Ok)
                    .chain(receipts.iter().map(Err))
                    .skip(pending.len())
                    .try_for_each(|item| {
                        let a = match item {
                            Ok(e) => publisher.accept(e),
                            Err(r) => publisher.accept_receipt(r),
                        }
                        .map_err(BridgeError::Client)?;
                        pending.push(Done::Envelope(a));
                        Ok(())
                    }),
                Outcome::Quarantine(r) => {
                    let q = quarantine::record(&p.topic, taken, &p.payload, r);
                    suspect.accept(&q).map(|a| pending.push(Done::Suspect(a)))
                }
                Outcome::Peer(receipts) => receipts[pending.len()..].iter().try_for_each(|r| {
                    let a = publisher.accept_receipt(r).map_err(BridgeError::Client)?;
                    pending.push(Done::Envelope(a));
                    Ok(())
                }),
            };
            match r {
                Ok(()) => return pending,
                Err(e) => {
                    tracing::error!(error = %e, "cannot spool; the message stays unacknowledged");
                    if stop.load(Ordering::Relaxed) {
                        return pending;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }
}
