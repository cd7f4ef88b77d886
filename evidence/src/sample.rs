//! A deterministic, signed and sealed sample fleet record for demos, tests and
//! benchmarks.
//!
//! Design constraints:
//! - Pure and deterministic in `(seed, messages)`: keys come from
//!   [`derive_signing_key`], times are synthetic ticks (ms), no clock is read.
//! - The record is valid end to end: every derived command cites what it acts on,
//!   every message has its destination's receipt, the messages are sealed into at
//!   least two epochs, and every checkpoint carries every keeper's co-signature.
//! - The first two episodes carry an operator note in the payload store; the first
//!   note is crypto-shredded, so the sample shows a shredded payload under intact seals.
//! - Episodes follow a warehouse shift: operator order → planner text → dispatcher
//!   `move_to`/`set_speed` → robot report; sensor reports → supervisor `halt`;
//!   quality checks → `set_param` on a batch.

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

use crate::envelope::{Effect, Envelope, MessageId, Payload, ReplayPins, SignedEnvelope, ToolPin};
use crate::epoch::{SealedEpoch, Sealer};
use crate::keeper::Keeper;
use crate::merkle::ConsistencyProof;
use crate::principal::{derive_signing_key, KeyRegistry, PrincipalId};
use crate::receipt::Receipt;
use crate::store::PayloadStore;
use crate::verify::Record;
use crate::SigningKey;

/// Log origin of the sample record.
pub const SAMPLE_ORIGIN: &str = "audita.example/fleet-log";
/// Principals of the sample record.
pub const SAMPLE_PRINCIPALS: &[&str] = &[
    "operator",
    "planner",
    "dispatcher",
    "supervisor",
    "agv-1",
    "agv-2",
    "arm-1",
    "lidar-3",
    "qc-station",
];
/// Keepers of the sample record.
pub const SAMPLE_KEEPERS: &[&str] = &[
    "operator.example/keeper",
    "vendor.example/keeper",
    "insurer.example/keeper",
];

/// A generated record with its public keys and, for tests, the in-memory parts.
#[derive(Debug, Clone)]
pub struct Sample {
    /// The raw record.
    pub record: Record,
    /// Public keys of principals, keepers and the log.
    pub keys: KeyRegistry,
    /// The signed envelopes in record order.
    pub envelopes: Vec<SignedEnvelope>,
    /// The receipts in record order.
    pub receipts: Vec<Receipt>,
    /// The sealed epochs (checkpoints co-signed).
    pub epochs: Vec<SealedEpoch>,
    /// Payload store: one available payload and one crypto-shredded one.
    pub payloads: PayloadStore,
}

struct Fleet {
    seed: u64,
    rng: ChaCha20Rng,
    time: u64,
    out: Vec<(SignedEnvelope, Receipt)>,
}

impl Fleet {
    fn key(&self, name: &str) -> SigningKey {
        derive_signing_key(self.seed, name)
    }
    fn send(&mut self, env: Envelope) -> MessageId {
        self.time += 1 + self.rng.next_u64() % 250;
        let mut env = env;
        env.timestamp = self.time;
        let author = env.author.to_string();
        let dest = env.destination.clone();
        // Sample envelopes are built to satisfy the citation rule.
        let signed = match env.sign(&self.key(&author)) {
            Ok(s) => s,
            Err(e) => unreachable_sample(e),
        };
        let id = signed.id().clone();
        let receipt = Receipt::sign(
            id.clone(),
            dest.clone(),
            self.time + 3,
            &self.key(dest.as_str()),
        );
        self.out.push((signed, receipt));
        id
    }
}

fn unreachable_sample(e: crate::EnvelopeError) -> SignedEnvelope {
    panic!("sample generator built an invalid envelope: {e}")
}

fn p(name: &str) -> PrincipalId {
    PrincipalId::new(name).unwrap_or_else(|e| panic!("sample principal {name}: {e}"))
}

/// Builds a sample record of about `messages` messages (at least 8).
pub fn sample_record(seed: u64, messages: usize) -> Sample {
    let messages = messages.max(16);
    let mut payloads = PayloadStore::new();
    let mut store_rng = ChaCha20Rng::seed_from_u64(seed ^ 0x5eed);
    let mut f = Fleet {
        seed,
        rng: ChaCha20Rng::seed_from_u64(seed),
        time: 1_000,
        out: Vec::new(),
    };
    let mut episode = 0u64;
    while f.out.len() < messages {
        episode += 1;
        let robot = if episode & 1 == 0 { "agv-2" } else { "agv-1" };
        if episode <= 2 {
            f.shift_note(episode, &mut payloads, &mut store_rng);
        }
        f.delivery(episode, robot);
        if episode & 1 == 0 {
            f.quality_check(episode);
        }
    }

    let keys = sample_keys(seed);
    let (envelopes, receipts): (Vec<_>, Vec<_>) = f.out.into_iter().unzip();
    let mut epochs = seal_in_three(seed, &envelopes);
    cosign(seed, &keys, &envelopes, &mut epochs);
    let mut record = Record::new();
    for env in &envelopes {
        record.push_envelope(env);
    }
    for r in &receipts {
        record.push_receipt(r);
    }
    for e in &epochs {
        record.push_epoch(e);
    }
    Sample {
        record,
        keys,
        envelopes,
        receipts,
        epochs,
        payloads,
    }
}

impl Fleet {
    /// The operator's shift note of `episode`: personal data goes to the payload
    /// store, only its commitment is signed; the first note is then shredded.
    fn shift_note(&mut self, episode: u64, payloads: &mut PayloadStore, rng: &mut ChaCha20Rng) {
        let text =
            format!("shift note {episode}: worker badge 40{episode}7 cleared for aisle {episode}");
        let digest = payloads.put(text.as_bytes(), rng);
        self.send(Envelope::new(
            p("operator"),
            p("supervisor"),
            0,
            Payload::Stored {
                kind: crate::StoredKind::ExternalInput,
                digest,
                len: text.len() as u64,
            },
        ));
        if episode == 1 {
            payloads.shred(&digest);
        }
    }

    /// A delivery of `episode` by `robot`: operator order → planner text → dispatcher
    /// `move_to` and `set_speed`; a lidar report → supervisor `halt`; the robot's
    /// report.
    fn delivery(&mut self, episode: u64, robot: &str) {
        let seed = self.seed;
        let (x, y) = (
            (self.rng.next_u64() % 40_000) as i64,
            (self.rng.next_u64() % 20_000) as i64,
        );
        let order = self.send(Envelope::new(
            p("operator"),
            p("planner"),
            0,
            Payload::ExternalInput {
                source: "wms".into(),
                text: format!("deliver crate {episode} to dock {}", episode % 4),
            },
        ));
        let plan = self.send(
            Envelope::new(
                p("planner"),
                p("dispatcher"),
                0,
                Payload::AgentText {
                    text: format!("route {robot} via aisle {}", episode % 7),
                },
            )
            .cite([order])
            .with_effect(Effect::Claim(format!(
                "crate {episode} assigned to {robot}"
            )))
            .with_pins(ReplayPins {
                model_id: Some("planner-llm-8b".into()),
                model_hash: Some(crate::sha256(b"planner-llm-8b weights")),
                seed: Some(seed ^ episode),
                tools: vec![ToolPin {
                    name: "route-planner".into(),
                    version: "2.3.1".into(),
                }],
            }),
        );
        let mv = self.send(
            Envelope::new(
                p("dispatcher"),
                p(robot),
                0,
                Payload::MoveTo {
                    target: robot.into(),
                    x_mm: x,
                    y_mm: y,
                },
            )
            .cite([plan.clone()])
            .with_effect(Effect::AtPosition {
                target: robot.into(),
                x_mm: x,
                y_mm: y,
                tolerance_mm: 50,
            }),
        );
        let speed = 800 + self.rng.next_u64() % 1200;
        self.send(
            Envelope::new(
                p("dispatcher"),
                p(robot),
                0,
                Payload::SetSpeed {
                    target: robot.into(),
                    mm_per_s: speed,
                },
            )
            .cite([plan])
            .with_effect(Effect::Speed {
                target: robot.into(),
                mm_per_s: speed,
            }),
        );
        let seen = self.send(Envelope::new(
            p("lidar-3"),
            p("supervisor"),
            0,
            Payload::SensorReport {
                sensor: "lidar-3".into(),
                reading: format!("human@{},{}", x + 900, y),
            },
        ));
        self.send(
            Envelope::new(
                p("supervisor"),
                p(robot),
                0,
                Payload::Halt {
                    target: robot.into(),
                },
            )
            .cite([seen, mv.clone()])
            .with_effect(Effect::Halted {
                target: robot.into(),
            }),
        );
        self.send(
            Envelope::new(
                p(robot),
                p("planner"),
                0,
                Payload::ToolOutput {
                    tool: "nav".into(),
                    output: "halted short of target".into(),
                },
            )
            .cite([mv.clone()]),
        );
    }

    /// A quality check of `episode`'s batch → supervisor `set_param` on it.
    fn quality_check(&mut self, episode: u64) {
        let qc = self.send(Envelope::new(
            p("qc-station"),
            p("supervisor"),
            0,
            Payload::SensorReport {
                sensor: "qc-station".into(),
                reading: format!("batch-{episode} temp 71.5C"),
            },
        ));
        self.send(
            Envelope::new(
                p("supervisor"),
                p("arm-1"),
                0,
                Payload::SetParam {
                    target: format!("batch-{episode}"),
                    name: "temp_c".into(),
                    value: 70_000,
                },
            )
            .cite([qc])
            .with_effect(Effect::Param {
                target: format!("batch-{episode}"),
                name: "temp_c".into(),
                value: 70_000,
            }),
        );
    }
}

/// The sample's public keys: principals, keepers and the log, derived from `seed`.
fn sample_keys(seed: u64) -> KeyRegistry {
    let mut keys = KeyRegistry::new();
    for name in SAMPLE_PRINCIPALS {
        keys.add_principal(p(name), derive_signing_key(seed, name).verifying_key());
    }
    for name in SAMPLE_KEEPERS {
        let _ = keys.add_keeper(name, derive_signing_key(seed, name).verifying_key());
    }
    let log_key = derive_signing_key(seed, SAMPLE_ORIGIN);
    let _ = keys.add_log(SAMPLE_ORIGIN, log_key.verifying_key());
    keys
}

/// Seals `envelopes` into three epochs (the last may be shorter), each closed 10 ms
/// after its last message.
fn seal_in_three(seed: u64, envelopes: &[SignedEnvelope]) -> Vec<SealedEpoch> {
    let log_key = derive_signing_key(seed, SAMPLE_ORIGIN);
    let mut sealer = match Sealer::new(SAMPLE_ORIGIN, log_key) {
        Ok(s) => s,
        Err(e) => panic!("sample origin: {e}"),
    };
    let per_epoch = envelopes.len().div_ceil(3);
    let mut epochs = Vec::new();
    let mut last_time = 0;
    for env in envelopes {
        sealer.append_envelope(env);
        last_time = env.envelope().timestamp;
        if sealer.pending() == per_epoch {
            epochs.push(sealer.close_epoch(last_time + 10));
        }
    }
    if sealer.pending() > 0 {
        epochs.push(sealer.close_epoch(last_time + 10));
    }
    epochs
}

/// Has every sample keeper co-sign every epoch's checkpoint, each against a
/// consistency proof from the previous one.
fn cosign(seed: u64, keys: &KeyRegistry, envelopes: &[SignedEnvelope], epochs: &mut [SealedEpoch]) {
    let all_leaves: Vec<crate::Hash> = envelopes
        .iter()
        .map(|e| crate::merkle::leaf_hash(&e.id().leaf_bytes()))
        .collect();
    for name in SAMPLE_KEEPERS {
        let mut keeper = match Keeper::new(name, derive_signing_key(seed, name)) {
            Ok(k) => k,
            Err(e) => panic!("sample keeper {name}: {e}"),
        };
        let mut old_size = 0u64;
        for e in epochs.iter_mut() {
            let size = e.header.size as usize;
            let proof = ConsistencyProof::generate(&all_leaves[..size], old_size)
                .unwrap_or_else(|err| panic!("sample consistency proof: {err}"));
            if let Err(err) = keeper.cosign(
                &mut e.checkpoint,
                &proof,
                keys,
                1_790_000_000 + e.header.number,
            ) {
                panic!("sample keeper refused: {err}");
            }
            old_size = size as u64;
        }
    }
}
