//! A small fleet-record builder for verdict tests: signs, receipts and seals messages
//! through `audita-evidence` exactly as the recorder does.
#![allow(dead_code)]

use audita_evidence::{
    derive_signing_key, verify_record, Envelope, KeyRegistry, MessageId, Partition, Payload,
    PrincipalId, Receipt, Record, ReplayPins, Sealer, SignedEnvelope, ToolPin,
};
use audita_verdict::{id_string, Adverse, AdverseDecl, Combine, DutyRegistry};

pub const ORIGIN: &str = "audita.example/test";
pub const KEEPER: &str = "insurer.example/keeper";
pub const SEED: u64 = 7;

/// Messages in sign order with their receipt recipient.
#[derive(Clone, Default)]
pub struct Fleet {
    pub msgs: Vec<(SignedEnvelope, String)>,
}

fn pid(n: &str) -> PrincipalId {
    PrincipalId::new(n).expect("valid name")
}

impl Fleet {
    pub fn new() -> Self {
        Self::default()
    }

    fn push(&mut self, env: Envelope, to: &str) -> MessageId {
        let key = derive_signing_key(SEED, env.author.as_str());
        let s = env.sign(&key).expect("sign");
        let id = s.id().clone();
        self.msgs.push((s, to.to_string()));
        id
    }

    /// A root external input.
    pub fn order(&mut self, author: &str, ts: u64, text: &str) -> MessageId {
        let e = Envelope::new(
            pid(author),
            pid(author),
            ts,
            Payload::ExternalInput {
                source: "wms".into(),
                text: text.into(),
            },
        );
        self.push(e, author)
    }

    /// A root sensor report.
    pub fn sensor(&mut self, author: &str, to: &str, ts: u64, reading: &str) -> MessageId {
        let e = Envelope::new(
            pid(author),
            pid(to),
            ts,
            Payload::SensorReport {
                sensor: author.into(),
                reading: reading.into(),
            },
        );
        self.push(e, to)
    }

    /// A derived command with a production policy and optional link grade pin.
    #[allow(clippy::too_many_arguments)]
    pub fn cmd(
        &mut self,
        author: &str,
        to: &str,
        ts: u64,
        payload: Payload,
        cites: &[&MessageId],
        policy: &str,
        link: Option<&str>,
    ) -> MessageId {
        let mut tools = vec![ToolPin {
            name: "policy".into(),
            version: policy.into(),
        }];
        if let Some(l) = link {
            tools.push(ToolPin {
                name: "link".into(),
                version: l.into(),
            });
        }
        let e = Envelope::new(pid(author), pid(to), ts, payload)
            .cite(cites.iter().map(|c| (*c).clone()))
            .with_pins(ReplayPins {
                tools,
                ..ReplayPins::default()
            });
        self.push(e, to)
    }

    /// Signs receipts, seals epochs of `epoch` messages, co-signs checkpoints.
    pub fn seal(&self, epoch: usize) -> (Record, KeyRegistry) {
        let mut keys = KeyRegistry::new();
        let mut names: Vec<String> = Vec::new();
        for (s, to) in &self.msgs {
            names.push(s.envelope().author.to_string());
            names.push(to.clone());
        }
        names.sort();
        names.dedup();
        for n in &names {
            keys.add_principal(pid(n), derive_signing_key(SEED, n).verifying_key());
        }
        keys.add_keeper(KEEPER, derive_signing_key(SEED, KEEPER).verifying_key())
            .expect("keeper");
        keys.add_log(ORIGIN, derive_signing_key(SEED, ORIGIN).verifying_key())
            .expect("log");
        let mut sealer = Sealer::new(ORIGIN, derive_signing_key(SEED, ORIGIN)).expect("sealer");
        let mut epochs = Vec::new();
        let mut last = 0;
        for (s, _) in &self.msgs {
            sealer.append_envelope(s);
            last = s.envelope().timestamp;
            if sealer.pending() == epoch {
                epochs.push(sealer.close_epoch(last + 1));
            }
        }
        if sealer.pending() > 0 {
            epochs.push(sealer.close_epoch(last + 1));
        }
        for e in &mut epochs {
            e.checkpoint.cosign(
                KEEPER,
                &derive_signing_key(SEED, KEEPER),
                1_000 + e.header.number,
            );
        }
        let mut record = Record::new();
        for (s, _) in &self.msgs {
            record.push_envelope(s);
        }
        for (s, to) in &self.msgs {
            let r = Receipt::sign(
                s.id().clone(),
                pid(to),
                s.envelope().timestamp + 1,
                &derive_signing_key(SEED, to),
            );
            record.push_receipt(&r);
        }
        for e in &epochs {
            record.push_epoch(e);
        }
        (record, keys)
    }
}

pub fn fast(target: &str) -> Payload {
    Payload::SetSpeed {
        target: target.into(),
        mm_per_s: 2000,
    }
}

pub fn slow(target: &str) -> Payload {
    Payload::SetSpeed {
        target: target.into(),
        mm_per_s: 500,
    }
}

pub fn halt(target: &str) -> Payload {
    Payload::Halt {
        target: target.into(),
    }
}

pub fn route(target: &str) -> Payload {
    Payload::MoveTo {
        target: target.into(),
        x_mm: 40_000,
        y_mm: 0,
    }
}

pub fn adverse(anchors: &[&MessageId], t_star: u64, unrealised: &[&MessageId]) -> Adverse {
    Adverse::new(AdverseDecl {
        incident: "inc-1".into(),
        outcome: "separation_below_0.5m".into(),
        t_star_ms: t_star,
        severity: Some(audita_verdict::Severity {
            mass_kg: 400.0,
            speed_m_per_s: 2.0,
        }),
        anchors: anchors.iter().map(|a| id_string(a)).collect(),
        combine: Combine::Any,
        targets: Vec::new(),
        unrealised: unrealised.iter().map(|a| id_string(a)).collect(),
        window_start_ms: 0,
        window_end_ms: None,
        delta: 1.0,
        declarer: None,
        facts: Vec::new(),
    })
    .expect("adverse")
}

pub fn envelope_registry(holders: &[&str], standard: &str) -> DutyRegistry {
    let mut principals = serde_json::Map::new();
    for (i, h) in holders.iter().enumerate() {
        principals.insert(
            h.to_string(),
            serde_json::json!({"duties": [{"kind": "safety_envelope", "id": format!("env-{i}"),
                "target": "agv-1", "max_mm_per_s": 1000}]}),
        );
    }
    let v = serde_json::json!({"standard": standard, "principals": principals});
    DutyRegistry::from_json(&v.to_string()).expect("registry")
}

pub fn verify(record: &Record, keys: &KeyRegistry) -> Partition {
    verify_record(record, keys)
}

/// Verdict over a record (panics in tests only).
pub fn judge(
    record: &Record,
    keys: &KeyRegistry,
    duties: &DutyRegistry,
    adv: &Adverse,
) -> audita_verdict::Verdict {
    let p = verify(record, keys);
    audita_verdict::verdict(record, &p, duties, adv).expect("verdict")
}

/// A controller actuating on eighteen dispatcher relays of one order, the relays then
/// deleted from the sealed record: more missing items than a verdict enumerates (an
/// abstention). Returns the actuation, the record and its keys.
pub fn eighteen_deleted_relays() -> (MessageId, Record, KeyRegistry) {
    let mut f = Fleet::new();
    let o = f.order("operator", 0, "shift");
    let ms: Vec<_> = (0..18)
        .map(|i| {
            f.cmd(
                &format!("p{i}"),
                "dispatcher",
                10 + i,
                fast("agv-1"),
                &[&o],
                "origin",
                None,
            )
        })
        .collect();
    let refs: Vec<&_> = ms.iter().collect();
    let a = f.cmd(
        "controller",
        "agv-1",
        100,
        fast("agv-1"),
        &refs,
        "relay-any",
        None,
    );
    let (mut rec, keys) = f.seal(8);
    rec.envelopes.drain(1..19);
    (a, rec, keys)
}
