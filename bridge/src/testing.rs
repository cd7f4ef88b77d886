//! Schema-valid VDA 5050 messages for tests and benchmarks (2.x and 3.x), built from
//! a few parameters. Timestamps are `2026-01-01T00:00:00Z` plus `headerId` ms, so a
//! message's time is a function of its header.

use serde_json::{json, Value};

fn stamp(header_id: u64) -> String {
    let t = chrono::DateTime::from_timestamp_millis(1_767_225_600_000 + header_id as i64)
        .unwrap_or_default();
    t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

fn major(version: &str) -> bool {
    version.starts_with('3')
}

/// A `state` of vehicle `manufacturer`/`serial` at `(x, y)` m moving at `vx` m/s, no
/// actions.
pub fn state(
    version: &str,
    manufacturer: &str,
    serial: &str,
    header_id: u64,
    x: f64,
    y: f64,
    vx: f64,
) -> String {
    state_with_actions(version, manufacturer, serial, header_id, x, y, vx, "", &[])
}

/// A `state` reporting `actions` (`(actionId, actionType, actionStatus)`) of order
/// `order_id`.
#[allow(clippy::too_many_arguments)]
pub fn state_with_actions(
    version: &str,
    manufacturer: &str,
    serial: &str,
    header_id: u64,
    x: f64,
    y: f64,
    vx: f64,
    order_id: &str,
    actions: &[(&str, &str, &str)],
) -> String {
    let action_states: Vec<Value> = actions
        .iter()
        .map(|(id, ty, status)| json!({"actionId": id, "actionType": ty, "actionStatus": status}))
        .collect();
    let mut v = json!({
        "headerId": header_id,
        "timestamp": stamp(header_id),
        "version": version,
        "manufacturer": manufacturer,
        "serialNumber": serial,
        "orderId": order_id,
        "orderUpdateId": 0,
        "lastNodeId": "",
        "lastNodeSequenceId": 0,
        "nodeStates": [],
        "edgeStates": [],
        "driving": vx != 0.0,
        "actionStates": action_states,
        "operatingMode": "AUTOMATIC",
        "errors": [],
        "velocity": {"vx": vx, "vy": 0.0, "omega": 0.0},
    });
    let o = v.as_object_mut().expect("an object");
    if major(version) {
        o.insert("instantActionStates".into(), json!([]));
        o.insert(
            "powerSupply".into(),
            json!({"stateOfCharge": 80.0, "charging": false}),
        );
        o.insert(
            "mobileRobotPosition".into(),
            json!({"x": x, "y": y, "theta": 0.0, "mapId": "hall-1", "localized": true}),
        );
        o.insert(
            "safetyState".into(),
            json!({"activeEmergencyStop": "NONE", "fieldViolation": false}),
        );
    } else {
        o.insert(
            "batteryState".into(),
            json!({"batteryCharge": 80.0, "charging": false}),
        );
        o.insert(
            "agvPosition".into(),
            json!({"x": x, "y": y, "theta": 0.0, "mapId": "hall-1", "positionInitialized": true}),
        );
        o.insert(
            "safetyState".into(),
            json!({"eStop": "NONE", "fieldViolation": false}),
        );
    }
    v.to_string()
}

/// `(actionId, actionType)` pairs as blocking (`HARD`) VDA 5050 actions.
fn hard_actions(actions: &[(&str, &str)]) -> Vec<Value> {
    actions
        .iter()
        .map(|(id, ty)| json!({"actionId": id, "actionType": ty, "blockingType": "HARD"}))
        .collect()
}

/// The intake checks of interface `uagv/<major>` with the official schemas and the
/// default payload bound.
pub fn intake(major: &str) -> crate::check::Intake {
    crate::check::Intake {
        interface: crate::topic::Interface::parse(&format!("uagv/{major}"))
            .expect("a valid interface"),
        schemas: crate::schema::Schemas::load().expect("the embedded schemas load"),
        max_payload: crate::check::DEFAULT_MAX_PAYLOAD,
    }
}

/// An `order` `order_id` for one vehicle: one released node at (10, 5) m carrying
/// `actions` (`(actionId, actionType)`).
pub fn order(
    version: &str,
    manufacturer: &str,
    serial: &str,
    header_id: u64,
    order_id: &str,
    actions: &[(&str, &str)],
) -> String {
    let actions = hard_actions(actions);
    json!({
        "headerId": header_id,
        "timestamp": stamp(header_id),
        "version": version,
        "manufacturer": manufacturer,
        "serialNumber": serial,
        "orderId": order_id,
        "orderUpdateId": 0,
        "nodes": [{
            "nodeId": "n-1",
            "sequenceId": 0,
            "released": true,
            "nodePosition": {"x": 10.0, "y": 5.0, "mapId": "hall-1", "allowedDeviationXY": 0.25},
            "actions": actions,
        }],
        "edges": [],
    })
    .to_string()
}

/// An `instantActions` message with `actions` (`(actionId, actionType)`).
pub fn instant_actions(
    version: &str,
    manufacturer: &str,
    serial: &str,
    header_id: u64,
    actions: &[(&str, &str)],
) -> String {
    let actions = hard_actions(actions);
    json!({
        "headerId": header_id,
        "timestamp": stamp(header_id),
        "version": version,
        "manufacturer": manufacturer,
        "serialNumber": serial,
        "actions": actions,
    })
    .to_string()
}

/// A `connection` message (`ONLINE`, `OFFLINE`, `CONNECTIONBROKEN`).
pub fn connection(
    version: &str,
    manufacturer: &str,
    serial: &str,
    header_id: u64,
    connection_state: &str,
) -> String {
    json!({
        "headerId": header_id,
        "timestamp": stamp(header_id),
        "version": version,
        "manufacturer": manufacturer,
        "serialNumber": serial,
        "connectionState": connection_state,
    })
    .to_string()
}

/// A private Mosquitto broker for a test: loopback, a free port, persistence on
/// (so a restart keeps QoS 1 sessions and their queued messages), its own
/// directory; stopped on drop.
pub struct Mosquitto {
    port: u16,
    dir: std::path::PathBuf,
    child: Option<std::process::Child>,
}

fn mosquitto_binary() -> Result<std::path::PathBuf, String> {
    for p in [
        "/usr/sbin/mosquitto",
        "/usr/bin/mosquitto",
        "/usr/local/sbin/mosquitto",
    ] {
        if std::path::Path::new(p).exists() {
            return Ok(p.into());
        }
    }
    Err("mosquitto is not installed (Debian package `mosquitto`; .ci/run installs it)".into())
}

impl Mosquitto {
    /// Starts a broker in a fresh directory under `base`.
    pub fn start(base: &std::path::Path) -> Result<Mosquitto, String> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("free port: {e}"))?
            .port();
        let dir = base.join(format!("mosquitto-{port}"));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let conf = format!(
            // `user root`: started as root, mosquitto would otherwise drop to the
            // `mosquitto` user and could write neither its log nor its persistence
            // file in this directory (sessions would not survive a restart).
            "user root\nlistener {port} 127.0.0.1\nallow_anonymous true\npersistence true\n\
             persistence_location {}/\nautosave_interval 1\nmax_inflight_messages 1000\n\
             max_queued_messages 1000000\nlog_dest file {}/mosquitto.log\n",
            dir.display(),
            dir.display()
        );
        std::fs::write(dir.join("mosquitto.conf"), conf).map_err(|e| e.to_string())?;
        let mut m = Mosquitto {
            port,
            dir,
            child: None,
        };
        m.restart()?;
        Ok(m)
    }

    /// Its port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The last lines of its log (for failure messages).
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.join("mosquitto.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// Stops it gracefully (SIGTERM: it saves its sessions and queues) and waits.
    pub fn stop(&mut self) -> Result<(), String> {
        if let Some(mut c) = self.child.take() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            c.wait().map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// Starts it (again) on the same port and directory, waiting until it accepts.
    pub fn restart(&mut self) -> Result<(), String> {
        self.stop()?;
        let child = std::process::Command::new(mosquitto_binary()?)
            .arg("-c")
            .arg(self.dir.join("mosquitto.conf"))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| format!("mosquitto: {e}"))?;
        self.child = Some(child);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
        while std::time::Instant::now() < deadline {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Err(format!(
            "mosquitto did not listen on {} (log: {})",
            self.port,
            self.dir.join("mosquitto.log").display()
        ))
    }
}

impl Drop for Mosquitto {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A QoS 1 MQTT publisher for tests (persistent session, so what the broker had
/// not acknowledged when it went away is sent again after it is back).
pub struct MqttPublisher {
    client: rumqttc::AsyncClient,
    acked: std::sync::Arc<std::sync::atomic::AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl MqttPublisher {
    /// Connects (in the background, reconnecting on errors) to `127.0.0.1:port`.
    pub fn connect(port: u16, client_id: &str) -> MqttPublisher {
        let mut o = rumqttc::MqttOptions::new(client_id, "127.0.0.1", port);
        o.set_clean_session(false)
            .set_keep_alive(std::time::Duration::from_secs(5))
            .set_inflight(100)
            .set_max_packet_size(16 << 20, 16 << 20);
        let (client, mut el) = rumqttc::AsyncClient::new(o, 10_000);
        let acked = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let a = acked.clone();
        let task = tokio::spawn(async move {
            loop {
                match el.poll().await {
                    Ok(rumqttc::Event::Incoming(rumqttc::Packet::PubAck(_))) => {
                        a.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    Ok(_) => {}
                    Err(_) => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
                }
            }
        });
        MqttPublisher {
            client,
            acked,
            task,
        }
    }

    /// Queues `payload` on `topic` at QoS 1.
    pub async fn publish(&self, topic: &str, payload: impl Into<Vec<u8>>) {
        self.client
            .publish(topic, rumqttc::QoS::AtLeastOnce, false, payload.into())
            .await
            .expect("the publisher's request queue is open");
    }

    /// Publishes the broker acknowledged so far.
    pub fn acked(&self) -> u64 {
        self.acked.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Waits until `n` publishes were acknowledged (or `within` passed).
    pub async fn wait_acked(&self, n: u64, within: std::time::Duration) -> bool {
        let deadline = std::time::Instant::now() + within;
        while self.acked() < n {
            if std::time::Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        true
    }
}

impl Drop for MqttPublisher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One MQTT message as a subscriber received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// Its topic.
    pub topic: String,
    /// Its payload bytes.
    pub payload: Vec<u8>,
    /// Whether the broker delivered it as a retained message.
    pub retain: bool,
}

/// A QoS 1 MQTT subscriber for tests: an independent witness of every message the
/// broker carried on a topic filter (clean session; subscribe before the fleet
/// publishes).
pub struct MqttRecorder {
    received: std::sync::Arc<std::sync::Mutex<Vec<Received>>>,
    subscribed: std::sync::Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl MqttRecorder {
    /// Connects to `127.0.0.1:port` and subscribes to `filter` (e.g. `uagv/#`).
    pub fn connect(port: u16, client_id: &str, filter: &str) -> MqttRecorder {
        let mut o = rumqttc::MqttOptions::new(client_id, "127.0.0.1", port);
        o.set_clean_session(true)
            .set_keep_alive(std::time::Duration::from_secs(5))
            .set_max_packet_size(16 << 20, 16 << 20);
        let (client, mut el) = rumqttc::AsyncClient::new(o, 100);
        let received = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let subscribed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (r, s, filter) = (received.clone(), subscribed.clone(), filter.to_string());
        let task = tokio::spawn(async move {
            loop {
                match el.poll().await {
                    Ok(rumqttc::Event::Incoming(rumqttc::Packet::ConnAck(_))) => {
                        let _ = client
                            .subscribe(filter.clone(), rumqttc::QoS::AtLeastOnce)
                            .await;
                    }
                    Ok(rumqttc::Event::Incoming(rumqttc::Packet::SubAck(_))) => {
                        s.store(true, std::sync::atomic::Ordering::SeqCst);
                    }
                    Ok(rumqttc::Event::Incoming(rumqttc::Packet::Publish(p))) => {
                        if let Ok(mut v) = r.lock() {
                            v.push(Received {
                                topic: p.topic.clone(),
                                payload: p.payload.to_vec(),
                                retain: p.retain,
                            });
                        }
                    }
                    Ok(_) => {}
                    Err(_) => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
                }
            }
        });
        MqttRecorder {
            received,
            subscribed,
            task,
        }
    }

    /// Waits until the subscription is acknowledged (or `within` passed).
    pub async fn wait_subscribed(&self, within: std::time::Duration) -> bool {
        let deadline = std::time::Instant::now() + within;
        while !self.subscribed.load(std::sync::atomic::Ordering::SeqCst) {
            if std::time::Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        true
    }

    /// Every message received so far, in arrival order.
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

impl Drop for MqttRecorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}
