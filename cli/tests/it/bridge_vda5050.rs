//! `audita bridge vda5050` end to end over a real Mosquitto and a real Kafka broker:
//! a vehicle sidecar and a master-control sidecar, each its own process with its
//! own key file, record a vehicle's states, master control's order citing the state
//! it reacted to, and the vehicle's actuation report citing the order; the ingest
//! stage certifies all of it under the deployment's registry, and schema-invalid or
//! misaddressed messages land in `audita.suspect` with their reasons. Every MQTT
//! message is accounted for in the sidecars' summaries.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use audita_bridge::testing::{self, Mosquitto, MqttPublisher};
use audita_bus::kafka::KafkaBus;
use audita_bus::testing::{unique_name, KafkaBroker};
use audita_bus::{Consumer as _, TopicSpec};
use audita_evidence::{
    verify_record, KeyRegistry, MessageId, Payload, PrincipalRegistry, Receipt, Record, Sealer,
    SignedEnvelope,
};
use audita_topics::names as topics;
use serde_json::Value;

fn drain(bus: &KafkaBus, topic: &str, want: usize, within: Duration) -> Vec<Vec<u8>> {
    let mut c = bus.consumer(&unique_name("drain"), &[topic]).unwrap();
    let mut out = Vec::new();
    let deadline = Instant::now() + within;
    while Instant::now() < deadline && out.len() < want {
        if let Some(d) = c.poll(Duration::from_millis(200)).unwrap() {
            out.push(d.payload);
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn sidecar(
    dir: &Path,
    role: &[&str],
    principal: &str,
    mqtt_port: u16,
    bootstrap: &str,
    prefix: &str,
    metrics: &Path,
) -> Child {
    Command::new(env!("CARGO_BIN_EXE_audita"))
        .current_dir(dir)
        .args(["bridge", "vda5050", "--interface", "uagv/v2"])
        .args(role)
        .args(["--principal", principal, "--master", "master-control"])
        .arg("--key")
        .arg(format!("keys/{principal}.key"))
        .args(["--mqtt", &format!("127.0.0.1:{mqtt_port}")])
        .args(["--bootstrap", bootstrap, "--topic-prefix", prefix])
        .arg("--spool")
        .arg(dir.join(format!("spool-{principal}")))
        .args(["--registry", "principals.json", "--cite-wait-ms", "10000"])
        .args(["--summary-every", "1", "--metrics-file"])
        .arg(metrics)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("audita runs")
}

fn metric(path: &Path, name: &str) -> u64 {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or(0)
}

fn stop(child: Child) -> Value {
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    serde_json::from_slice(&out.stdout).expect("a JSON summary on stdout")
}

#[test]
fn sidecars_record_what_ingest_certifies_and_quarantine_the_invalid_with_the_reason() {
    let kafka = KafkaBroker::start().expect("a Kafka broker");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mq = Mosquitto::start(dir).expect("mosquitto");
    let prefix = unique_name("vda.") + ".";
    let bus = KafkaBus::new(kafka.bootstrap()).unwrap();
    bus.ensure_topics(
        &[
            topics::ENVELOPES,
            topics::RECEIPTS,
            topics::ACCEPTED,
            topics::SUSPECT,
        ]
        .map(|t| TopicSpec {
            name: format!("{prefix}{t}"),
            partitions: 1,
        }),
    )
    .unwrap();

    // The deployment: two principals, each key in its own file.
    let mut registry = PrincipalRegistry::default();
    for (name, role) in [("master-control", "master-control"), ("acme.7", "vehicle")] {
        let key = audita_deploy::keys::generate();
        audita_deploy::keys::write(&dir.join(format!("keys/{name}.key")), name, &key, false)
            .unwrap();
        registry
            .add(name, role, &key.verifying_key(), None)
            .unwrap();
    }
    std::fs::write(dir.join("principals.json"), registry.to_json_pretty()).unwrap();
    let keys: KeyRegistry = registry.key_registry().unwrap();

    let (vm, mm) = (dir.join("vehicle.prom"), dir.join("master.prom"));
    let vehicle = sidecar(
        dir,
        &["--vehicle", "acme/7"],
        "acme.7",
        mq.port(),
        kafka.bootstrap(),
        &prefix,
        &vm,
    );
    let master = sidecar(
        dir,
        &["--master-control"],
        "master-control",
        mq.port(),
        kafka.bootstrap(),
        &prefix,
        &mm,
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while metric(&vm, "audita_bridge_mqtt_subscribed_total") == 0
        || metric(&mm, "audita_bridge_mqtt_subscribed_total") == 0
    {
        assert!(Instant::now() < deadline, "the sidecars never subscribed");
        std::thread::sleep(Duration::from_millis(100));
    }

    let state_1 = testing::state("2.1.0", "acme", "7", 1, 1.0, 2.0, 0.0);
    let order = testing::order("2.1.0", "acme", "7", 1, "o-1", &[("a-1", "pick")]);
    let state_2 = testing::state_with_actions(
        "2.1.0",
        "acme",
        "7",
        2,
        1.0,
        2.0,
        0.0,
        "o-1",
        &[("a-1", "pick", "RUNNING")],
    );
    let schema_invalid_state = state_1.replace("\"driving\"", "\"drivng\"");
    let schema_invalid_order = order.replace("\"nodes\"", "\"knots\"");
    let other_vehicle = testing::state("2.1.0", "acme", "8", 3, 0.0, 0.0, 0.0);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let agv = MqttPublisher::connect(mq.port(), "agv-7");
        let mc = MqttPublisher::connect(mq.port(), "master-control");
        agv.publish("uagv/v2/acme/7/state", state_1.clone()).await;
        assert!(agv.wait_acked(1, Duration::from_secs(10)).await);
        tokio::time::sleep(Duration::from_millis(300)).await;
        mc.publish("uagv/v2/acme/7/order", order.clone()).await;
        mc.publish("uagv/v2/acme/7/order", schema_invalid_order)
            .await;
        assert!(mc.wait_acked(2, Duration::from_secs(10)).await);
        tokio::time::sleep(Duration::from_millis(300)).await;
        agv.publish("uagv/v2/acme/7/state", state_2.clone()).await;
        agv.publish("uagv/v2/acme/7/state", schema_invalid_state)
            .await;
        agv.publish("uagv/v2/acme/7/state", other_vehicle).await;
        assert!(agv.wait_acked(4, Duration::from_secs(10)).await);
    });

    // Four envelopes: state 1, the order (citing it), state 2, the actuation report.
    let envelopes = drain(
        &bus,
        &format!("{prefix}{}", topics::ENVELOPES),
        4,
        Duration::from_secs(60),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    // Vehicle: 3 envelopes, 2 quarantine records, the order's receipt; master
    // control: the order, 1 quarantine record, receipts of both states and of the
    // actuation report.
    while metric(&vm, "audita_bridge_delivered_total") < 6
        || metric(&mm, "audita_bridge_delivered_total") < 5
    {
        assert!(Instant::now() < deadline, "deliveries pending");
        std::thread::sleep(Duration::from_millis(100));
    }
    let vsum = stop(vehicle);
    let msum = stop(master);
    assert_eq!(vsum["received"], 6, "{vsum}");
    assert_eq!(vsum["recorded"], 2, "{vsum}");
    assert_eq!(vsum["quarantined"], 2, "{vsum}");
    assert_eq!(vsum["peer"], 2, "{vsum}");
    assert_eq!(vsum["uncited_actions"], 0, "{vsum}");
    assert_eq!(msum["received"], 6, "{msum}");
    assert_eq!(msum["recorded"], 1, "{msum}");
    assert_eq!(msum["quarantined"], 1, "{msum}");
    assert_eq!(msum["peer"], 4, "{msum}");
    assert_eq!(msum["cited_seen_state"], 1, "{msum}");
    assert_eq!(vsum["receipts"], 1, "{vsum}");
    assert_eq!(msum["receipts"], 3, "{msum}");

    let envs: Vec<SignedEnvelope> = envelopes
        .into_iter()
        .map(|b| SignedEnvelope::decode(b).unwrap())
        .collect();
    assert_eq!(envs.len(), 4);
    let by_text: BTreeMap<String, &SignedEnvelope> = envs
        .iter()
        .map(|e| {
            let text = match &e.envelope().payload {
                Payload::SensorReport { reading, .. } => reading.clone(),
                Payload::AgentText { text } => text.clone(),
                Payload::ToolOutput { output, .. } => output.clone(),
                p => panic!("unexpected payload {p:?}"),
            };
            (text, e)
        })
        .collect();
    let s1 = by_text[&state_1];
    let s2 = by_text[&state_2];
    let o = by_text[&order];
    assert_eq!(s1.envelope().author.as_str(), "acme.7");
    assert_eq!(o.envelope().author.as_str(), "master-control");
    assert_eq!(
        o.envelope().citations,
        vec![s1.id().clone()],
        "the order cites the state master control had seen"
    );
    let report = envs
        .iter()
        .find(|e| matches!(e.envelope().payload, Payload::ToolOutput { .. }))
        .unwrap();
    let mut want: Vec<MessageId> = vec![o.id().clone(), s2.id().clone()];
    want.sort();
    assert_eq!(
        report.envelope().citations,
        want,
        "the actuation report cites the order that requested the action and the state"
    );
    for e in &envs {
        e.check(&keys).expect("signed with the registered key");
    }

    // Ingest certifies every envelope the bridge published.
    let mut input = bus
        .consumer(
            &unique_name("ingest"),
            &[
                &format!("{prefix}{}", topics::ENVELOPES),
                &format!("{prefix}{}", topics::RECEIPTS),
            ],
        )
        .unwrap();
    let mut out = bus.producer().unwrap();
    let layout = audita_ingest::Layout {
        names: audita_ingest::Topics {
            prefix: prefix.clone(),
        },
        source_partitions: 2,
        accepted_partitions: 1,
        watermark_every: Duration::from_millis(200),
    };
    audita_ingest::run(
        &mut input,
        &mut out,
        &keys,
        &layout,
        &AtomicBool::new(false),
        Some(Duration::from_secs(8)),
        |_, _| {},
    )
    .unwrap();
    // Ingest publishes batches: one record of many frames per batch and partition.
    let frames: Vec<Vec<u8>> = drain(
        &bus,
        &format!("{prefix}{}", topics::ACCEPTED),
        usize::MAX,
        Duration::from_secs(8),
    )
    .iter()
    .flat_map(|r| audita_topics::accepted::frames(r).map(<[u8]>::to_vec))
    .collect();
    let of_kind = |k: u8| -> Vec<Vec<u8>> {
        frames
            .iter()
            .filter(|f| f.first() == Some(&k))
            .map(|f| f[1..].to_vec())
            .collect()
    };
    let accepted = of_kind(audita_topics::accepted::FRAME_ENVELOPE);
    assert_eq!(accepted.len(), 4, "ingest accepted every envelope");
    for e in &envs {
        assert!(accepted.contains(&e.as_bytes().to_vec()));
    }
    let receipts: Vec<Receipt> = of_kind(audita_topics::accepted::FRAME_RECEIPT)
        .into_iter()
        .map(|b| Receipt::decode(b).unwrap())
        .collect();
    assert_eq!(
        receipts.len(),
        4,
        "one receipt per envelope, by its recipient"
    );

    // Sealed, the record certifies every envelope: signed, receipted by its
    // destination, every citation resolving.
    let log = audita_deploy::keys::generate();
    let mut vkeys = keys.clone();
    vkeys
        .add_log("audita.test/vda5050", log.verifying_key())
        .unwrap();
    let mut sealer = Sealer::new("audita.test/vda5050", log).unwrap();
    let mut record = Record::new();
    for e in &envs {
        sealer.append_envelope(e);
        record.push_envelope(e);
    }
    for r in &receipts {
        record.push_receipt(r);
    }
    record.push_epoch(&sealer.close_epoch(u64::MAX / 2));
    let partition = verify_record(&record, &vkeys);
    assert!(
        partition.suspect.is_empty() && partition.missing.is_empty(),
        "{partition:?}"
    );
    assert_eq!(partition.certified.len(), 4, "{partition:?}");

    // The bridges' quarantine records, and nothing from ingest.
    let suspect: Vec<audita_topics::Quarantined> = drain(
        &bus,
        &format!("{prefix}{}", topics::SUSPECT),
        usize::MAX,
        Duration::from_secs(5),
    )
    .iter()
    .map(|b| serde_json::from_slice(b).unwrap())
    .collect();
    let mut reasons: Vec<(String, String)> = suspect
        .iter()
        .map(|q| (q.source_topic.clone(), q.reason.clone()))
        .collect();
    reasons.sort();
    assert_eq!(
        reasons,
        vec![
            (
                "mqtt:uagv/v2/acme/7/order".to_string(),
                "schema".to_string()
            ),
            (
                "mqtt:uagv/v2/acme/7/state".to_string(),
                "schema".to_string()
            ),
            (
                "mqtt:uagv/v2/acme/7/state".to_string(),
                "vehicle_mismatch".to_string()
            ),
        ],
        "{suspect:?}"
    );
    for q in &suspect {
        assert!(!q.detail.is_empty() && !q.detail.contains('\n'), "{q:?}");
        assert!(!q.bytes_hex.is_empty());
    }
}
