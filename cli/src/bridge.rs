//! `audita bridge vda5050 …`: one sidecar of the VDA 5050 bridge (`audita_bridge`)
//! — a vehicle's (`--vehicle MANUFACTURER/SERIAL`) or master control's
//! (`--master-control`) — signing with that principal's key only.
//!
//! Design constraints:
//! - Runs until SIGTERM/SIGINT, then stops taking MQTT messages (what it did not
//!   acknowledge the broker delivers again to the next run), waits for deliveries in
//!   flight and prints its counters as one line of JSON on stdout; exit 0. A bad
//!   flag, key or registry exits 2 with one line on stderr.
//! - With `--summary-every SECS` the counters are also logged periodically, and
//!   `--metrics-file PATH` rewrites them in the Prometheus text format (for a
//!   node-exporter textfile collector) at the same cadence.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use audita_bridge::map::{VehicleNames, DEFAULT_VEHICLE_TEMPLATE};
use audita_bridge::topic::Interface;
use audita_bridge::{BridgeConfig, Counters, Role};
use audita_evidence::PrincipalId;

/// `audita bridge …`.
#[derive(clap::Args, Debug)]
pub struct BridgeArgs {
    /// The protocol bridged.
    #[command(subcommand)]
    pub protocol: BridgeProtocol,
}

/// Bridged protocols.
#[derive(clap::Subcommand, Debug)]
pub enum BridgeProtocol {
    /// Record a VDA 5050 fleet (2.x or 3.x JSON over MQTT) as signed evidence: one
    /// sidecar per vehicle and one for master control, each with its own key.
    Vda5050(Vda5050Args),
}

/// Flags of `audita bridge vda5050`.
#[derive(clap::Args, Debug)]
pub struct Vda5050Args {
    /// MQTT broker, HOST:PORT.
    #[arg(long, default_value = "127.0.0.1:1883")]
    pub mqtt: String,
    /// MQTT client id (the persistent session; keep it fixed across restarts).
    /// Default: `audita-bridge.<principal>`.
    #[arg(long)]
    pub client_id: Option<String>,
    /// VDA 5050 interface prefix `interfaceName/majorVersion` (e.g. `uagv/v2`).
    #[arg(long)]
    pub interface: String,
    /// Be the sidecar of this vehicle (`MANUFACTURER/SERIAL`).
    #[arg(
        long,
        conflicts_with = "master_control",
        required_unless_present = "master_control"
    )]
    pub vehicle: Option<String>,
    /// Be master control's sidecar.
    #[arg(long)]
    pub master_control: bool,
    /// This sidecar's principal (registered in the deployment).
    #[arg(long)]
    pub principal: String,
    /// The deployment (its `audita.toml`, or the directory): supplies `--registry`
    /// (`[registry] principals`), `--bootstrap` (`[kafka] bootstrap.servers`, with the
    /// other `[kafka]` settings), `--topic-prefix` (`[topics] prefix`) and the key
    /// (`keys/principals/<principal>.key`, where `audita principal add` writes it);
    /// an explicit flag wins.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Its private key: a key file (C2SP note key or PKCS#8 PEM, mode 0600) or
    /// `env:VAR`.
    #[arg(long, required_unless_present = "config")]
    pub key: Option<String>,
    /// Master control's principal (default: `--principal` for the master-control
    /// sidecar; required for a vehicle's).
    #[arg(long)]
    pub master: Option<String>,
    /// How vehicle principals are named, over `{manufacturer}` and `{serialNumber}`
    /// (the same for every sidecar of the fleet).
    #[arg(long, default_value = DEFAULT_VEHICLE_TEMPLATE)]
    pub vehicle_principal: String,
    /// Kafka bootstrap servers.
    #[arg(long, required_unless_present = "config")]
    pub bootstrap: Option<String>,
    /// The deployment's topic prefix (default: the deployment's, else none).
    #[arg(long)]
    pub topic_prefix: Option<String>,
    /// Further librdkafka settings, `KEY=VALUE` (repeatable).
    #[arg(long = "kafka", value_name = "KEY=VALUE")]
    pub kafka: Vec<String>,
    /// Spool directory (evidence and quarantine records wait here until Kafka
    /// acknowledged them).
    #[arg(long)]
    pub spool: PathBuf,
    /// The deployment's principal registry (`principals.json`,
    /// `audita.principals/v1`): peers' envelopes are checked against it before
    /// they are cited.
    #[arg(long, required_unless_present = "config")]
    pub registry: Option<PathBuf>,
    /// Largest MQTT payload recorded, in bytes (larger ones are quarantined).
    #[arg(long, default_value_t = audita_bridge::check::DEFAULT_MAX_PAYLOAD)]
    pub max_payload: usize,
    /// How long a command waits for the id of the state it cites, in ms.
    #[arg(long, default_value_t = 2000)]
    pub cite_wait_ms: u64,
    /// How far back the citation index starts reading the envelopes topic, in s.
    #[arg(long, default_value_t = 300)]
    pub index_lookback_s: u64,
    /// Kafka delivery timeout in ms (then the item waits in the spool).
    #[arg(long, default_value_t = 30_000)]
    pub delivery_timeout_ms: u64,
    /// Log the counters every SECS (0: only at exit).
    #[arg(long, default_value_t = 0)]
    pub summary_every: u64,
    /// Rewrite the counters (Prometheus text format) to this file at every summary.
    #[arg(long)]
    pub metrics_file: Option<PathBuf>,
}

/// Runs the subcommand; returns the exit code.
pub fn run(args: &BridgeArgs) -> i32 {
    let BridgeProtocol::Vda5050(a) = &args.protocol;
    match vda5050(a) {
        Ok(summary) => {
            println!("{summary}");
            0
        }
        Err(e) => {
            eprintln!("audita bridge vda5050: {e:#}");
            2
        }
    }
}

fn config(a: &Vda5050Args) -> anyhow::Result<BridgeConfig> {
    let (host, port) = a
        .mqtt
        .rsplit_once(':')
        .ok_or_else(|| anyhow!("--mqtt {:?} is not HOST:PORT", a.mqtt))?;
    let port: u16 = port
        .parse()
        .map_err(|_| anyhow!("--mqtt {:?}: bad port", a.mqtt))?;
    let interface = Interface::parse(&a.interface).map_err(|e| anyhow!("--interface: {e}"))?;
    let vehicles =
        VehicleNames::new(&a.vehicle_principal).map_err(|e| anyhow!("--vehicle-principal: {e}"))?;
    let role = match &a.vehicle {
        Some(v) => {
            let (m, s) = v
                .split_once('/')
                .filter(|(m, s)| !m.is_empty() && !s.is_empty() && !s.contains('/'))
                .ok_or_else(|| anyhow!("--vehicle {v:?} is not MANUFACTURER/SERIAL"))?;
            Role::Vehicle {
                manufacturer: m.to_string(),
                serial: s.to_string(),
            }
        }
        None => Role::MasterControl,
    };
    let master = match (&a.master, &role) {
        (Some(m), _) => m.clone(),
        (None, Role::MasterControl) => a.principal.clone(),
        (None, Role::Vehicle { .. }) => bail!("--master is required for a vehicle's sidecar"),
    };
    let master =
        PrincipalId::new(master.clone()).map_err(|e| anyhow!("--master {master:?}: {e}"))?;
    let deployment = a
        .config
        .as_ref()
        .map(|c| audita_deploy::Config::load(&audita_pipeline::process::config_path(c)))
        .transpose()
        .map_err(|e| anyhow!("--config: {e}"))?;
    let base = std::env::current_dir().context("current directory")?;
    let (key, key_base) = match (&a.key, &deployment) {
        (Some(k), _) => (k.clone(), base.clone()),
        (None, Some(c)) => (
            format!("keys/principals/{}.key", a.principal),
            c.dir.clone(),
        ),
        (None, None) => bail!("--key is required without --config"),
    };
    let principal = audita_client::Principal::load(&a.principal, &key, &key_base)
        .map_err(|e| anyhow!("--key {key}: {e}"))?;
    let registry_path = match (&a.registry, &deployment) {
        (Some(r), _) => r.clone(),
        (None, Some(c)) => c.principals_path.clone(),
        (None, None) => bail!("--registry is required without --config"),
    };
    let text =
        audita_record::read_bounded(&registry_path, 64 << 20, audita_record::Limit::InputBytes)
            .map_err(|e| anyhow!("--registry {}: {e}", registry_path.display()))?;
    let text = String::from_utf8(text)
        .map_err(|_| anyhow!("--registry {}: not UTF-8", registry_path.display()))?;
    let registry = audita_evidence::registry::PrincipalRegistry::from_json(&text)
        .and_then(|r| r.key_registry())
        .map_err(|e| anyhow!("--registry {}: {e}", registry_path.display()))?;
    let mut kafka: Vec<(String, String)> = deployment
        .iter()
        .flat_map(|c| c.kafka.iter())
        .filter(|(k, _)| k.as_str() != "bootstrap.servers")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for kv in &a.kafka {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| anyhow!("--kafka {kv:?} is not KEY=VALUE"))?;
        kafka.retain(|(x, _)| x != k);
        kafka.push((k.to_string(), v.to_string()));
    }
    let bootstrap = match (&a.bootstrap, &deployment) {
        (Some(b), _) => b.clone(),
        (None, Some(c)) => c.kafka.get("bootstrap.servers").cloned().ok_or_else(|| {
            anyhow!(
                "--config {}: [kafka] sets no bootstrap.servers (pass --bootstrap)",
                c.file.display()
            )
        })?,
        (None, None) => bail!("--bootstrap is required without --config"),
    };
    let topic_prefix = a
        .topic_prefix
        .clone()
        .or_else(|| deployment.as_ref().map(|c| c.topic_prefix.clone()))
        .unwrap_or_default();
    if a.max_payload > audita_bridge::check::MAX_PAYLOAD_LIMIT {
        bail!(
            "--max-payload {} exceeds {}",
            a.max_payload,
            audita_bridge::check::MAX_PAYLOAD_LIMIT
        );
    }
    Ok(BridgeConfig {
        mqtt_host: host.to_string(),
        mqtt_port: port,
        client_id: a
            .client_id
            .clone()
            .unwrap_or_else(|| format!("audita-bridge.{}", a.principal)),
        keep_alive: Duration::from_secs(5),
        interface,
        max_payload: a.max_payload,
        role,
        principal,
        master,
        vehicles,
        bootstrap,
        topic_prefix,
        kafka,
        spool_dir: a.spool.clone(),
        delivery_timeout: Duration::from_millis(a.delivery_timeout_ms.max(1)),
        registry,
        cite_wait: Duration::from_millis(a.cite_wait_ms),
        index_lookback: Duration::from_secs(a.index_lookback_s),
        index_cap: 1 << 17,
    })
}

fn vda5050(a: &Vda5050Args) -> anyhow::Result<String> {
    let config = config(a)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("tokio runtime")?;
    let stop = Arc::new(AtomicBool::new(false));
    let counters = Arc::new(Counters::default());
    let summary = runtime.block_on(async {
        let s = stop.clone();
        tokio::spawn(async move {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("SIGTERM handler");
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            s.store(true, Ordering::Relaxed);
        });
        if a.summary_every > 0 {
            let (c, s, every, file) = (
                counters.clone(),
                stop.clone(),
                a.summary_every,
                a.metrics_file.clone(),
            );
            tokio::spawn(async move {
                while !s.load(Ordering::Relaxed) {
                    tokio::time::sleep(Duration::from_secs(every)).await;
                    let sum = c.summary();
                    tracing::info!(
                        received = sum.received,
                        recorded = sum.recorded,
                        quarantined = sum.quarantined,
                        peer = sum.peer,
                        delivered = sum.delivered,
                        "bridge"
                    );
                    if let Some(f) = &file {
                        let tmp = f.with_extension("tmp");
                        if std::fs::write(&tmp, c.prometheus()).is_ok() {
                            let _ = std::fs::rename(&tmp, f);
                        }
                    }
                }
            });
        }
        audita_bridge::run(config, stop.clone(), counters.clone()).await
    })?;
    Ok(serde_json::to_string(&summary)?)
}
