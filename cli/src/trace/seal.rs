//! `audita trace seal FILE --config DEPLOYMENT --record OUT_DIR | --bootstrap
//! HOST:PORT --spool DIR`: an agent trace sealed as evidence, so the verdict machinery runs on agent incidents.
//!
//! Each span becomes one envelope (`audita_traces::sealed::plan`): signed by its
//! agent's key through the client library (`audita_client::Principal`, the key file
//! `audita principal add` wrote), citing the messages of its hash-derived parents
//! with one `link:<id>@hash_match|folded|similarity` pin per citation, so the witness
//! grading survives sealing (a `replayed` citation is pinned `folded`, the verdict's
//! hypothesis grade); its payload is the span itself (`audita.trace-span/v2`), so the
//! trace can be rebuilt from certified messages.
//!
//! Design constraints:
//! - **Who signs.** An agent whose key file is at hand signs its own steps. A
//!   `--collector` (a registered principal) signs the steps of agents whose key is
//!   not at hand, as a **conduit**: pin `conduit@<agent>`, and the payload still
//!   names the agent. Without a collector such a step is refused. A span with no
//!   agent goes to `--unattributed AGENT` or is refused. Every refusal is one line,
//!   exit 2, before anything is written.
//! - **Receipts.** Each message is addressed to the collector when there is one (it
//!   received every span), else to its author (the agent's own record of its step);
//!   the destination signs the delivery receipt.
//! - **Sealing** is the sealer's own path (`audita_pipeline::sealed_log`): the
//!   deployment's log key and the registry in force bound into every epoch header,
//!   epochs of `--epoch-messages`, each checkpoint co-signed by the deployment's
//!   local keepers (keepers in other trust domains are named on stderr: their
//!   co-signatures are not collected here), segments, epochs and the tiled log
//!   written as the sealer stage writes them, so `audita verify`, `audita verdict`
//!   and `audita trace verdict` read it.
//! - The output directory must not hold a record already.
//! - `--bootstrap HOST:PORT --spool DIR` publishes the same envelopes and receipts
//!   instead, through the client library (`audita_client::BlockingPublisher`: durable
//!   spool, idempotent producer, each item acknowledged) to the deployment's
//!   `audita.envelopes` / `audita.receipts`; its ingest and sealer stages seal them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use audita_client::Principal;
use audita_deploy::Config;
use audita_evidence::{Envelope, MessageId, Payload, Receipt, ReplayPins, SignedEnvelope, ToolPin};
use audita_pipeline::sealed_log::{Offline, SealedLog};
use audita_traces::sealed::{self, Production};
use audita_verdict::id_string;
use serde_json::{json, Value};

use super::OtlpLimitArgs;

#[derive(clap::Args, Debug)]
pub(super) struct SealArgs {
    /// OTLP/JSON file (one export, or JSON lines of exports); `-` reads stdin.
    file: PathBuf,
    /// The deployment (its directory or its audita.toml): principal registry, log key,
    /// keepers.
    #[arg(long, value_name = "DEPLOYMENT")]
    config: PathBuf,
    /// Seal into this new record directory (read by `audita verify`, `audita
    /// verdict`, `audita trace verdict`).
    #[arg(
        long,
        value_name = "OUT_DIR",
        required_unless_present = "bootstrap",
        conflicts_with = "bootstrap"
    )]
    record: Option<PathBuf>,
    /// Instead of sealing here, publish the signed messages and receipts to the
    /// deployment's Kafka ingest through the client library (`audita_client`); its
    /// sealer stage seals them.
    #[arg(long, value_name = "HOST:PORT", requires = "spool")]
    bootstrap: Option<String>,
    /// The publisher's durable spool directory (with --bootstrap).
    #[arg(long, value_name = "DIR", requires = "bootstrap")]
    spool: Option<PathBuf>,
    /// Directory of the agents' private key files `NAME.key` (default: the
    /// deployment's keys/principals, where `audita principal add` writes them).
    #[arg(long, value_name = "DIR")]
    keys: Option<PathBuf>,
    /// A registered principal that signs, as a conduit, the steps of agents whose key
    /// is not at hand.
    #[arg(long, value_name = "NAME")]
    collector: Option<String>,
    /// The agent of spans that name none (no gen_ai.agent.name on them or an
    /// enclosing span); without it such spans are refused.
    #[arg(long, value_name = "AGENT")]
    unattributed: Option<String>,
    /// Messages per sealed epoch.
    #[arg(long, value_name = "N", default_value_t = 256)]
    epoch_messages: usize,
    #[command(flatten)]
    limits: OtlpLimitArgs,
}

/// The newest key file of `name` in `dir` (`NAME.key`, then `NAME.1.key`, … after
/// rotations).
fn key_file(dir: &Path, name: &str) -> Option<PathBuf> {
    let mut best = Some(dir.join(format!("{name}.key"))).filter(|p| p.exists());
    for n in 1.. {
        let p = dir.join(format!("{name}.{n}.key"));
        if !p.exists() {
            break;
        }
        best = Some(p);
    }
    best
}

fn load_principal(config: &Config, dir: &Path, name: &str) -> Result<Option<Principal>, String> {
    if config.principals.get(name).is_none() {
        return Ok(None);
    }
    let Some(file) = key_file(dir, name) else {
        return Ok(None);
    };
    Principal::load(name, &file.display().to_string(), dir)
        .map(Some)
        .map_err(|e| format!("{}: {e}", file.display()))
}

fn ms(ns: u64) -> u64 {
    ns / 1_000_000
}

pub(super) fn run(a: &SealArgs) -> Result<i32, String> {
    if a.epoch_messages == 0 {
        return Err("--epoch-messages must be at least 1".into());
    }
    let trace = super::read_trace(&a.file, &a.limits)?;
    let steps = sealed::plan(&trace).map_err(|e| format!("{}: {e}", a.file.display()))?;
    let config_file = audita_pipeline::process::config_path(&a.config);
    let config = Config::load(&config_file).map_err(|e| e.to_string())?;
    if let Some(out) = &a.record {
        if out.join("FORMAT").exists() {
            return Err(format!("{}: already holds a record", out.display()));
        }
    }
    let key_dir = a
        .keys
        .clone()
        .unwrap_or_else(|| config.dir.join("keys/principals"));
    // Every signer resolved before anything is signed or written.
    let signers = Signers::resolve(a, &config, &key_dir, &steps)?;
    let (signed, receipts, listing) = signers.sign(&steps)?;
    let mut out = json!({"messages": signed.len(), "steps": listing});
    deliver(a, &config, &signed, &receipts, &mut out)?;
    println!("{}", serde_json::to_string(&out).unwrap_or_default());
    Ok(0)
}

/// Who signs each step of the plan: its agent when the agent's key is at hand, else
/// the collector as a conduit.
struct Signers {
    collector: Option<Principal>,
    /// Agent name → its principal, `None` when its key is not at hand.
    agents: BTreeMap<String, Option<Principal>>,
    /// The agent of each step, in plan order.
    agent_of: Vec<String>,
}

/// The signed steps: envelopes and their receipts in plan order, and each step's
/// entry of the listing printed on stdout.
type SignedSteps = (Vec<SignedEnvelope>, Vec<Receipt>, Vec<Value>);

impl Signers {
    /// Resolves the collector and every step's agent; a step with no agent (and no
    /// `--unattributed`), or an agent with no key and no collector, is refused.
    fn resolve(
        a: &SealArgs,
        config: &Config,
        key_dir: &Path,
        steps: &[sealed::Step],
    ) -> Result<Signers, String> {
        let collector = match &a.collector {
            None => None,
            Some(name) => Some(load_principal(config, key_dir, name)?.ok_or_else(|| {
                format!(
                    "--collector {name}: not a registered principal with a key file in {}",
                    key_dir.display()
                )
            })?),
        };
        let mut agents: BTreeMap<String, Option<Principal>> = BTreeMap::new();
        let mut agent_of: Vec<String> = Vec::with_capacity(steps.len());
        for s in steps {
            let agent = match (&s.node.agent, &a.unattributed) {
                (Some(x), _) | (None, Some(x)) => x.clone(),
                (None, None) => {
                    return Err(format!(
                        "span {} names no agent (gen_ai.agent.name on it or an enclosing span): pass --unattributed AGENT",
                        s.node.span_id
                    ))
                }
            };
            if !agents.contains_key(&agent) {
                let p = load_principal(config, key_dir, &agent)?;
                if p.is_none() && collector.is_none() {
                    return Err(format!(
                        "agent {agent} (span {}) has no registered key in {}: register it with `audita principal add`, or pass --collector NAME to sign its steps as a conduit",
                        s.node.span_id,
                        key_dir.display()
                    ));
                }
                agents.insert(agent.clone(), p);
            }
            agent_of.push(agent);
        }
        Ok(Signers {
            collector,
            agents,
            agent_of,
        })
    }

    /// Signs every step in plan order (every cited step is signed already), each
    /// with its delivery receipt.
    fn sign(&self, steps: &[sealed::Step]) -> Result<SignedSteps, String> {
        let mut ids: BTreeMap<String, MessageId> = BTreeMap::new();
        let mut signed: Vec<SignedEnvelope> = Vec::with_capacity(steps.len());
        let mut receipts: Vec<Receipt> = Vec::with_capacity(steps.len());
        let mut listing: Vec<Value> = Vec::with_capacity(steps.len());
        for (s, agent) in steps.iter().zip(&self.agent_of) {
            let (p, conduit) = match (self.agents.get(agent.as_str()), &self.collector) {
                (Some(Some(p)), _) => (p, false),
                (_, Some(c)) => (c, true),
                (_, None) => return Err(format!("internal: no signer for agent {agent}")),
            };
            let destination = self.collector.as_ref().unwrap_or(p);
            let (env, receipt, entry) = sign_step(s, agent, p, conduit, destination, &ids)?;
            listing.push(entry);
            ids.insert(s.node.span_id.to_string(), env.id().clone());
            signed.push(env);
            receipts.push(receipt);
        }
        Ok((signed, receipts, listing))
    }
}

/// One step signed by `p` (as a conduit for `agent` when `conduit`), addressed to
/// and receipted by `destination`, citing the messages `ids` holds for its parents;
/// with its entry of the listing.
fn sign_step(
    s: &sealed::Step,
    agent: &str,
    p: &Principal,
    conduit: bool,
    destination: &Principal,
    ids: &BTreeMap<String, MessageId>,
) -> Result<(SignedEnvelope, Receipt, Value), String> {
    let ts = ms(s.node.start_ns);
    let payload = match s.production {
        Production::Opening => Payload::ExternalInput {
            source: "otlp".into(),
            text: s.text.clone(),
        },
        _ => Payload::AgentText {
            text: s.text.clone(),
        },
    };
    let mut tools = Vec::new();
    match s.production {
        Production::Opening => {}
        Production::Origin => tools.push(ToolPin {
            name: "policy".into(),
            version: "origin".into(),
        }),
        Production::RelayAll => tools.push(ToolPin {
            name: "policy".into(),
            version: "relay-all".into(),
        }),
    }
    let mut cites = Vec::with_capacity(s.cites.len());
    let mut cite_view = Vec::with_capacity(s.cites.len());
    for c in &s.cites {
        let id = ids.get(c.parent.as_str()).cloned().ok_or_else(|| {
            format!(
                "internal: span {} signed before {}",
                s.node.span_id, c.parent
            )
        })?;
        if let Some(g) = c.grade {
            tools.push(ToolPin {
                name: format!("link:{}", id_string(&id)),
                version: g.pin().into(),
            });
        }
        cite_view.push(json!({
            "span_id": c.parent.to_string(),
            "message": id_string(&id),
            "grade": c.grade.map_or("context", |g| g.as_str()),
        }));
        cites.push(id);
    }
    if conduit {
        tools.push(ToolPin {
            name: "conduit".into(),
            version: agent.to_string(),
        });
    }
    let envelope: Envelope = p
        .message(destination.id().as_str(), ts, payload)
        .map_err(|e| e.to_string())?
        .cite(cites)
        .with_pins(ReplayPins {
            tools,
            ..ReplayPins::default()
        });
    let env = p
        .sign(envelope)
        .map_err(|e| format!("span {}: {e}", s.node.span_id))?;
    let receipt = destination
        .receipt(&env, ms(s.node.end_ns).max(ts))
        .map_err(|e| e.to_string())?;
    let entry = json!({
        "span_id": s.node.span_id.to_string(),
        "message": id_string(env.id()),
        "agent": agent,
        "signer": p.id().as_str(),
        "conduit": conduit,
        "production": match s.production {
            Production::Opening => "opening",
            Production::Origin => "origin",
            Production::RelayAll => "relay_all",
        },
        "cites": cite_view,
    });
    Ok((env, receipt, entry))
}

/// Writes the signed steps as a new sealed record (`--record`), or publishes them to
/// the deployment's topics (`--bootstrap`, `--spool`); says which in `out`.
fn deliver(
    a: &SealArgs,
    config: &Config,
    signed: &[SignedEnvelope],
    receipts: &[Receipt],
    out: &mut Value,
) -> Result<(), String> {
    match (&a.record, &a.bootstrap, &a.spool) {
        (Some(dir), _, _) => {
            let epochs = seal_record(config, dir, signed, receipts, a.epoch_messages)?;
            out["record"] = json!(dir.display().to_string());
            out["epochs"] = json!(epochs);
        }
        (None, Some(bootstrap), Some(spool)) => {
            publish(config, bootstrap, spool, signed, receipts)?;
            out["published"] = json!({
                "bootstrap": bootstrap,
                "topic_prefix": config.topic_prefix,
                "envelopes": signed.len(),
                "receipts": receipts.len(),
            });
        }
        _ => return Err("give --record OUT_DIR or --bootstrap HOST:PORT --spool DIR".into()),
    }
    Ok(())
}

/// Publishes every envelope and its receipt through the client library's durable
/// spool; each call returns once the broker acknowledged the item.
fn publish(
    config: &Config,
    bootstrap: &str,
    spool: &Path,
    signed: &[SignedEnvelope],
    receipts: &[Receipt],
) -> Result<(), String> {
    let mut pc = audita_client::PublisherConfig::new(bootstrap, spool);
    pc.topic_prefix = config.topic_prefix.clone();
    pc.kafka = config
        .kafka
        .iter()
        .filter(|(k, _)| k.as_str() != "bootstrap.servers")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let p = audita_client::BlockingPublisher::open(pc).map_err(|e| e.to_string())?;
    for (env, r) in signed.iter().zip(receipts) {
        p.publish(env)
            .map_err(|e| format!("publishing {}: {e}", id_string(env.id())))?;
        p.publish_receipt(r)
            .map_err(|e| format!("publishing the receipt of {}: {e}", id_string(r.message())))?;
    }
    Ok(())
}

/// Seals `signed` (with their `receipts`) into a new record directory `out` under the
/// deployment's log key and registry, through the sealer's own path
/// (`audita_pipeline::sealed_log::SealedLog`); returns the number of epochs.
fn seal_record(
    config: &Config,
    out: &Path,
    signed: &[SignedEnvelope],
    receipts: &[Receipt],
    per_epoch: usize,
) -> Result<usize, String> {
    let keys = config.keys().map_err(|e| e.to_string())?;
    let log_key = config.log_key().map_err(|e| e.to_string())?;
    let keepers = config.local_keeper_keys().map_err(|e| e.to_string())?;
    let remote: Vec<&str> = config
        .keepers
        .iter()
        .filter(|k| !keepers.iter().any(|(n, _)| *n == k.name))
        .map(|k| k.name.as_str())
        .collect();
    if !remote.is_empty() {
        eprintln!(
            "audita trace seal: keepers {} run in other trust domains: their co-signatures are not collected here, so `audita verify` reports the epochs under-witnessed",
            remote.join(", ")
        );
    }
    let mut log = SealedLog::create(
        out,
        Offline {
            origin: &config.origin,
            log_key,
            keys: &keys,
            registry: Some(&config.principals),
            keepers: &keepers,
        },
    )
    .map_err(|e| e.to_string())?;
    let mut epochs = 0;
    for (chunk, rs) in signed.chunks(per_epoch).zip(receipts.chunks(per_epoch)) {
        let last = chunk
            .iter()
            .map(|env| env.envelope().timestamp)
            .max()
            .unwrap_or(0);
        let frames: Vec<&[u8]> = rs.iter().map(Receipt::as_bytes).collect();
        log.seal(chunk, &frames, last + 1)
            .map_err(|e| e.to_string())?;
        epochs += 1;
    }
    Ok(epochs)
}
