//! A VDA 5050 fleet end to end (issues 14, 33): a third-party VDA 5050
//! implementation — the npm package `vda-5050-lib` 1.4.0, its `MasterController`,
//! `AgvController`s and `VirtualAgvAdapter` (simulated vehicle motion), driven by
//! `tests/vda5050/fleet.js` — runs seven vehicles and a master control over a real
//! Mosquitto, on an interface name of its own; one `audita bridge vda5050` sidecar
//! per principal, each its own process with its own key, records the fleet into a
//! real Kafka broker; ingest, sealer, slicer, monitor and an engine worker judge it
//! (the pipeline library, as `audita demo` runs it, over Kafka), with a duty registry
//! of VDA 5050 duties and the predicate file naming its zone.
//!
//! Every vehicle drives through a human aisle (x in [2, 6] m; over 1 m/s there is an
//! incident) on an order of an ordinary shape (`fleet.js` describes each), and each
//! gets the verdict its case states:
//! - a `drop` at the last node only, no actions at all, no `maxSpeed`: order progress
//!   is the actuation, the releasing order is the anchor, **master control is
//!   culpable** (its `vda5050_edge_release` duty breached), the vehicle is not;
//! - an order update that re-routes: the anchor is the update that released the edge
//!   the vehicle is on, and its release is the breach;
//! - a vehicle that exceeds its edge's `maxSpeed` on its own: its own progress report
//!   on the edge is a second anchor, **the vehicle is culpable**
//!   (`vda5050_edge_speed`), master control is involved and cleared;
//! - a compliant release and a cancelled order: no incident; the cancel (written the
//!   library's way, `instantActions`) is certified, not quarantined.
//!
//! Record time is Unix ms (the deployment's clock), so every date in the tables and
//! reports is the run's own. An independent MQTT subscriber sees every message the
//! broker carried, and each one is certified in the sealed record.
//!
//! Needs `node` and `npm ci` in `tests/vda5050` (`.ci/run` does both).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use audita_bridge::testing::{Mosquitto, MqttRecorder};
use audita_bus::kafka::KafkaBus;
use audita_bus::testing::{unique_name, KafkaBroker};
use audita_bus::Bus;
use audita_evidence::{verify_record, Payload, PrincipalRegistry};
use audita_topics::names as topics;
use serde_json::Value;

/// The predicate file: the aisle is named, defined once in the duty registry.
const PREDICATES: &str = r#"{"version": 1, "realisation_deadline_ms": 3000,
  "entities": {"heldout.s1": {"class": "robot", "mass_kg": 400},
               "heldout.s2": {"class": "robot", "mass_kg": 400},
               "heldout.s3": {"class": "robot", "mass_kg": 400},
               "heldout.s4": {"class": "robot", "mass_kg": 400},
               "heldout.s5": {"class": "robot", "mass_kg": 400},
               "heldout.s6": {"class": "robot", "mass_kg": 400},
               "heldout.s7": {"class": "robot", "mass_kg": 400}},
  "predicates": [{"name": "human_zone_overspeed", "kind": "speed_in_zone",
    "entity": {"class": "robot"}, "zone": "aisle",
    "above_mm_per_s": 1000,
    "severity": {"kinetic": {"speed_field": "speed_mm_per_s"}},
    "lookback_ms": 60000}]}"#;

/// The vehicles of `fleet.js`, in lane order.
const VEHICLES: [&str; 7] = ["s1", "s2", "s3", "s4", "s5", "s6", "s7"];

/// The duty registry: master control releases aisle edges at ≤ 1 m/s to every
/// vehicle; every vehicle keeps to its edges' maxSpeed.
fn duties() -> String {
    let release: Vec<String> = VEHICLES
        .iter()
        .map(|v| {
            format!(
                r#"{{"kind": "vda5050_edge_release", "id": "release-{v}", "target": "heldout.{v}", "zone": "aisle", "max_mm_per_s": 1000}}"#
            )
        })
        .collect();
    let vehicles: Vec<String> = VEHICLES
        .iter()
        .map(|v| {
            format!(
                r#""heldout.{v}": {{"duties": [{{"kind": "vda5050_edge_speed", "id": "speed-{v}", "target": "heldout.{v}"}}]}}"#
            )
        })
        .collect();
    format!(
        r#"{{"standard": "specification",
  "zones": {{"aisle": {{"min_mm": [2000, -1000], "max_mm": [6000, 15000], "map_id": "hall-1"}}}},
  "principals": {{"master-control": {{"duties": [{}]}}, {}}}}}"#,
        release.join(", "),
        vehicles.join(", ")
    )
}

/// The fleet's interface name (not `uagv`).
const INTERFACE: &str = "fleet";

fn driver_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vda5050")
}

/// One sidecar process: `role` is `--vehicle M/S` or `--master-control`.
fn sidecar(
    dir: &Path,
    role: &[&str],
    principal: &str,
    mqtt: u16,
    bootstrap: &str,
    prefix: &str,
) -> Child {
    Command::new(env!("CARGO_BIN_EXE_audita"))
        .current_dir(dir)
        .args([
            "bridge",
            "vda5050",
            "--interface",
            &format!("{INTERFACE}/v2"),
        ])
        .args(role)
        .args(["--principal", principal, "--master", "master-control"])
        .arg("--key")
        .arg(format!("keys/{principal}.key"))
        .args(["--mqtt", &format!("127.0.0.1:{mqtt}")])
        .args(["--bootstrap", bootstrap, "--topic-prefix", prefix])
        .arg("--spool")
        .arg(dir.join(format!("spool-{principal}")))
        .args(["--registry", "principals.json", "--summary-every", "1"])
        .arg("--metrics-file")
        .arg(dir.join(format!("{principal}.prom")))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("audita runs")
}

fn metrics(dir: &Path, principal: &str) -> BTreeMap<String, u64> {
    std::fs::read_to_string(dir.join(format!("{principal}.prom")))
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

/// Sidecar processes, killed if the test fails before it stops them.
struct Sidecars(Vec<(String, Child)>);

impl Drop for Sidecars {
    fn drop(&mut self) {
        for (_, c) in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
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

/// What the monitor derives from the whole record and from each slice bundle, and
/// what each bundle holds (for a failure message).
fn explain(
    bus: &Bus,
    d: &audita_pipeline::Deployment,
    record: &audita_evidence::Record,
    keys: &audita_evidence::KeyRegistry,
) {
    let file = d.predicates.as_ref().unwrap();
    let describe = |p: &audita_evidence::Partition| {
        let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
        for c in p.certified.values() {
            let e = c.envelope.envelope();
            let k = match &e.payload {
                Payload::SensorReport { sensor, .. } => sensor.clone(),
                Payload::ToolOutput { tool, output } => format!("{tool} {output}"),
                p => p.kind().to_string(),
            };
            *kinds.entry(format!("{} {k}", e.author)).or_default() += 1;
        }
        let derived = audita_monitor::derive(p, file);
        format!(
            "certified {kinds:#?}\nsuspect {:?}\nmissing {:?}\ndeclarations {}",
            p.suspect,
            p.missing,
            serde_json::to_string_pretty(&derived.declarations).unwrap()
        )
    };
    eprintln!(
        "== whole record: {}",
        describe(&verify_record(record, keys))
    );
    let mut c = bus
        .consumer(&unique_name("slices"), &[&d.topic(topics::SLICES)])
        .unwrap();
    let until = Instant::now() + Duration::from_secs(15);
    while Instant::now() < until {
        let Some(r) = c.poll(Duration::from_millis(500)).unwrap() else {
            continue;
        };
        let Some(b) = audita_topics::SliceBundle::decode(&r.payload) else {
            eprintln!("== an undecodable bundle");
            continue;
        };
        let policy = audita_evidence::Policy {
            keeper_quorum: Some(0),
            ..audita_evidence::Policy::default()
        };
        let p = audita_evidence::verify_proven(&b.evidence, &d.keys, &policy);
        eprintln!(
            "== bundle of {} envelopes, {} receipts: {}",
            b.evidence.envelopes.len(),
            b.evidence.receipts.len(),
            describe(&p)
        );
    }
}

/// The certified envelope of `id` (`author:hex`).
fn envelope<'a>(
    partition: &'a audita_evidence::Partition,
    id: &str,
) -> &'a audita_evidence::Envelope {
    partition
        .certified
        .iter()
        .find(|(mid, _)| audita_verdict::id_string(mid) == id)
        .map(|(_, c)| c.envelope.envelope())
        .unwrap_or_else(|| panic!("{id} is not certified"))
}

fn order_text(e: &audita_evidence::Envelope) -> Value {
    match &e.payload {
        Payload::AgentText { text } => serde_json::from_str(text).unwrap(),
        p => panic!("not an order: {p:?}"),
    }
}

#[test]
fn a_third_party_fleets_ordinary_orders_get_the_verdicts_their_cases_state() {
    let started = Instant::now();
    let started_ms = audita_sinks::tables::now_ms();
    assert!(
        driver_dir()
            .join("node_modules/vda-5050-lib/package.json")
            .exists(),
        "vda-5050-lib is not installed: run `npm ci` in {} (.ci/run does)",
        driver_dir().display()
    );
    let kafka = KafkaBroker::start().expect("a Kafka broker");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mq = Mosquitto::start(dir).expect("mosquitto");
    let prefix = unique_name("vda-fleet.") + ".";

    // The deployment: master control and seven vehicles, each key in its own file.
    let mut principals: Vec<(String, &str)> = vec![("master-control".into(), "master-control")];
    principals.extend(VEHICLES.iter().map(|v| (format!("heldout.{v}"), "vehicle")));
    let mut registry = PrincipalRegistry::default();
    for (name, role) in &principals {
        let key = audita_deploy::keys::generate();
        audita_deploy::keys::write(&dir.join(format!("keys/{name}.key")), name, &key, false)
            .unwrap();
        registry
            .add(name, role, &key.verifying_key(), None)
            .unwrap();
    }
    std::fs::write(dir.join("principals.json"), registry.to_json_pretty()).unwrap();
    let duties = audita_verdict::DutyRegistry::from_json(&duties()).expect("duties");
    duties
        .check_roles(|p| registry.role(p))
        .expect("every duty applies to what its holder issues");
    // The registry an operator first wrote for this fleet: master control given the
    // set_speed envelope, which no order ever meets — refused at load, naming the
    // VDA 5050 duty that bounds what its orders release.
    let misdeclared = self::duties().replace(
        r#""master-control": {"duties": ["#,
        r#""master-control": {"duties": [{"kind": "safety_envelope", "id": "aisle-speed", "target": "heldout.s1", "max_mm_per_s": 1000}, "#,
    );
    let err = audita_verdict::DutyRegistry::from_json(&misdeclared)
        .expect("well-formed")
        .check_roles(|p| registry.role(p))
        .expect_err("an envelope master control can never breach");
    let err = err.to_string();
    assert!(
        err.contains("aisle-speed") && err.contains("vda5050_edge_release") && !err.contains('\n'),
        "{err}"
    );
    let mut d = audita_pipeline::Deployment::ephemeral(
        registry.key_registry().unwrap(),
        duties.clone(),
        &prefix,
        &["keeper.test/vda5050"],
    )
    .unwrap();
    d.predicates =
        Some(audita_monitor::Predicates::from_json_with_zones(PREDICATES, &duties.zones).unwrap());
    // Record time is what the bridge stamps: Unix ms.
    d.record_origin =
        Some(audita_sinks::tables::RecordOrigin::parse("1970-01-01T00:00:00Z").unwrap());
    let d = Arc::new(d);
    let bus = Bus::Kafka(KafkaBus::new(kafka.bootstrap()).unwrap());
    let out = dir.join("out");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut witnessed = Vec::new();
    let mut summaries = BTreeMap::new();
    let mut fleet_events: Vec<Value> = Vec::new();

    let collected = audita_pipeline::run_all(
        d.clone(),
        &bus,
        &out,
        1,
        &audita_pipeline::metrics::Metrics::new(),
        |_| {
            // The stages are up and the topics exist: start the sidecars.
            let mut roles: Vec<(String, Vec<String>)> =
                vec![("master-control".into(), vec!["--master-control".into()])];
            roles.extend(VEHICLES.iter().map(|v| {
                (
                    format!("heldout.{v}"),
                    vec!["--vehicle".into(), format!("heldout/{v}")],
                )
            }));
            let mut children = Sidecars(
                roles
                    .iter()
                    .map(|(p, role)| {
                        let role: Vec<&str> = role.iter().map(String::as_str).collect();
                        (
                            p.clone(),
                            sidecar(dir, &role, p, mq.port(), kafka.bootstrap(), &prefix),
                        )
                    })
                    .collect(),
            );
            let deadline = Instant::now() + Duration::from_secs(60);
            while principals.iter().any(|(p, _)| {
                metrics(dir, p).get("audita_bridge_mqtt_subscribed_total") != Some(&1)
            }) {
                assert!(Instant::now() < deadline, "the sidecars never subscribed");
                std::thread::sleep(Duration::from_millis(100));
            }
            eprintln!(
                "sidecars subscribed at {:.1} s",
                started.elapsed().as_secs_f64()
            );
            // The witness subscribes before the fleet starts.
            let recorder = rt.block_on(async {
                let r = MqttRecorder::connect(mq.port(), "witness", &format!("{INTERFACE}/#"));
                assert!(r.wait_subscribed(Duration::from_secs(10)).await);
                r
            });

            // The fleet: vda-5050-lib's master control and seven virtual vehicles.
            let fleet = Command::new("node")
                .current_dir(driver_dir())
                .arg("fleet.js")
                .arg(mq.port().to_string())
                .arg(INTERFACE)
                .stderr(Stdio::inherit())
                .output()
                .expect("node runs (install Node.js; .ci/run does)");
            let fleet_out = String::from_utf8_lossy(&fleet.stdout).to_string();
            assert!(
                fleet.status.success(),
                "the fleet failed: {fleet_out}\n{}",
                mq.log_tail()
            );
            fleet_events = fleet_out
                .lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect();
            assert!(fleet_out.contains("\"done\":true"), "{fleet_out}");

            eprintln!("fleet done at {:.1} s", started.elapsed().as_secs_f64());
            // Every message the witness saw is taken by the sidecars, and everything
            // they signed or quarantined is delivered to Kafka (stable for 1.5 s).
            // What each sidecar must have taken: every message the witness saw for
            // master control, its own vehicle's topics for a vehicle's.
            let want = |seen: &[audita_bridge::testing::Received]| -> BTreeMap<String, u64> {
                let on = |serial: &str| {
                    seen.iter()
                        .filter(|m| {
                            m.topic
                                .starts_with(&format!("{INTERFACE}/v2/heldout/{serial}/"))
                        })
                        .count() as u64
                };
                let mut w: BTreeMap<String, u64> =
                    [("master-control".to_string(), seen.len() as u64)].into();
                for v in VEHICLES {
                    w.insert(format!("heldout.{v}"), on(v));
                }
                w
            };
            let taken = |m: &BTreeMap<String, u64>| -> u64 {
                ["recorded", "quarantined", "peer"]
                    .iter()
                    .map(|o| {
                        m.get(&format!(
                            "audita_bridge_mqtt_messages_total{{outcome=\"{o}\"}}"
                        ))
                        .copied()
                        .unwrap_or(0)
                    })
                    .sum()
            };
            let settled = |m: &BTreeMap<String, u64>| {
                let g = |k: &str| m.get(k).copied().unwrap_or(0);
                g("audita_bridge_delivered_total")
                    == g("audita_bridge_envelopes_total")
                        + g("audita_bridge_receipts_total")
                        + g("audita_bridge_mqtt_messages_total{outcome=\"quarantined\"}")
            };
            let deadline = Instant::now() + Duration::from_secs(90);
            let mut last = BTreeMap::new();
            let mut stable_since = Instant::now();
            loop {
                let now: BTreeMap<String, BTreeMap<String, u64>> = principals
                    .iter()
                    .map(|(p, _)| (p.clone(), metrics(dir, p)))
                    .collect();
                witnessed = recorder.received();
                let wanted = want(&witnessed);
                let done = principals
                    .iter()
                    .all(|(p, _)| taken(&now[p]) == wanted[p] && settled(&now[p]));
                if now != last {
                    last = now;
                    stable_since = Instant::now();
                } else if done && stable_since.elapsed() > Duration::from_millis(1500) {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "the sidecars did not settle: {last:?}, want {:?}",
                    want(&witnessed)
                );
                std::thread::sleep(Duration::from_millis(100));
            }
            eprintln!(
                "sidecars settled at {:.1} s",
                started.elapsed().as_secs_f64()
            );
            for (p, c) in std::mem::take(&mut children.0) {
                let t = Instant::now();
                summaries.insert(p.clone(), stop(c));
                // Regression: a stopping sidecar waited out its whole delivery
                // timeout (30 s) while its citation index still held a sender.
                assert!(
                    t.elapsed() < Duration::from_secs(10),
                    "{p} took {:?} to stop",
                    t.elapsed()
                );
            }
            // Five of the seven shapes are incidents.
            Ok(5)
        },
        |_| {},
    )
    .expect("the pipeline runs");

    eprintln!("pipeline done at {:.1} s", started.elapsed().as_secs_f64());
    let finished_ms = audita_sinks::tables::now_ms();
    let (record, keys) = audita_record::read_record(&out.join("record")).expect("the record reads");
    let partition = verify_record(&record, &keys);
    assert!(partition.suspect.is_empty(), "{:?}", partition.suspect);
    if !collected.abstained.is_empty() {
        explain(&bus, &d, &record, &keys);
    }
    assert_eq!(collected.abstained, BTreeMap::new(), "no abstention");

    // One incident per shape that drives too fast through the aisle, none for the
    // compliant release and the cancelled order.
    let by_vehicle: BTreeMap<String, &Value> = collected
        .verdicts
        .iter()
        .map(|(incident, rec)| {
            let vehicle = incident
                .strip_prefix("human_zone_overspeed-heldout.")
                .and_then(|r| r.split('-').next())
                .unwrap_or_else(|| panic!("{incident}"))
                .to_string();
            (vehicle, rec.verdict.as_ref().expect("a verdict"))
        })
        .collect();
    assert_eq!(
        by_vehicle.keys().map(String::as_str).collect::<Vec<_>>(),
        vec!["s1", "s2", "s4", "s5", "s6"],
        "incidents: {:?}",
        collected.verdicts.keys()
    );
    let finding = |v: &Value, p: &str| v["principals"][p].clone();
    let violated = |f: &Value| -> Vec<String> {
        f["breach"]["violations"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|x| x["duty"].as_str().unwrap().to_string())
            .collect()
    };
    let anchors = |v: &Value| -> Vec<String> {
        v["anchors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect()
    };
    // Master control released an aisle edge too fast (2.0 m/s, or no limit): its
    // order is the anchor, realised by the vehicle's progress (a drop at the last
    // node, or no action at all, realises nothing before the aisle); it is culpable.
    for s in ["s1", "s2", "s5"] {
        let v = by_vehicle[s];
        let a = anchors(v);
        assert_eq!(a.len(), 1, "{s}: {v}");
        let order = envelope(&partition, &a[0]);
        assert_eq!(order.author.as_str(), "master-control", "{s}");
        assert_eq!(order_text(order)["orderId"], format!("order-{s}"), "{s}");
        let mc = finding(v, "master-control");
        assert_eq!(mc["culpable"], true, "{s}: {mc}");
        assert_eq!(
            (mc["rho_lo"].as_f64(), mc["rho_hi"].as_f64()),
            (Some(1.0), Some(1.0)),
            "{s}: {mc}"
        );
        assert_eq!(violated(&mc), vec![format!("release-{s}")], "{s}: {mc}");
        let veh = finding(v, &format!("heldout.{s}"));
        assert_eq!(veh["culpable"], false, "{s}: {veh}");
        assert!(violated(&veh).is_empty(), "{s}: {veh}");
        assert_eq!(v["replay"][0]["certified"], true, "{s}: {v}");
        assert_eq!(
            v["severity_j"].as_f64(),
            Some(800.0),
            "{s}: ½ · 400 kg · (2 m/s)²"
        );
    }
    // The re-route: the anchor is the update that released the edge the vehicle was
    // on (update 1's B-D), and its release is the breach; update 0's horizon edge
    // crossed the aisle at 1.0 unreleased, which is no breach.
    {
        let v = by_vehicle["s4"];
        let a = anchors(v);
        assert_eq!(a.len(), 1, "s4: {v}");
        let update = order_text(envelope(&partition, &a[0]));
        assert_eq!(
            update["orderUpdateId"], 1,
            "s4: the anchor is update 1: {v}"
        );
        let mc = finding(v, "master-control");
        assert_eq!(mc["culpable"], true, "s4: {mc}");
        let evidence: Vec<&str> = mc["breach"]["violations"][0]["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_str().unwrap())
            .collect();
        assert_eq!(
            evidence,
            vec![a[0].as_str()],
            "s4: the breach is update 1's release"
        );
    }
    // The vehicle that ignored its edge's maxSpeed: its progress report on the edge
    // is a second anchor; it is culpable, master control (released 1.0) is cleared.
    {
        let v = by_vehicle["s6"];
        let a = anchors(v);
        assert_eq!(a.len(), 2, "s6: {v}");
        let authors: Vec<&str> = a
            .iter()
            .map(|x| envelope(&partition, x).author.as_str())
            .collect();
        assert!(
            authors.contains(&"master-control") && authors.contains(&"heldout.s6"),
            "s6: {v}"
        );
        let veh = finding(v, "heldout.s6");
        assert_eq!(veh["culpable"], true, "s6: {veh}");
        assert_eq!(violated(&veh), vec!["speed-s6".to_string()], "s6: {veh}");
        let mc = finding(v, "master-control");
        assert_eq!(mc["culpable"], false, "s6: {mc}");
        assert_eq!(mc["status"], "involved_cleared", "s6: {mc}");
    }
    // The cancel is certified (vda-5050-lib's `instantActions` spelling) as a halt.
    let cancel = partition
        .certified
        .values()
        .map(|c| c.envelope.envelope())
        .find(|e| matches!(&e.payload, Payload::AgentText { text } if text.contains("cancelOrder")))
        .expect("the cancel is certified");
    assert_eq!(
        cancel.effect,
        audita_evidence::Effect::Halted {
            target: "heldout.s7".into()
        }
    );
    assert!(
        fleet_events
            .iter()
            .any(|e| e["vehicle"] == "s7" && e["event"] == "processed" && e["canceled"] == true),
        "the library reports s7's order cancelled"
    );

    // Dates: record time is Unix ms, so every incident's wall-clock t* lies in this
    // run, in the tables and in the reports (not 2083).
    let rows = audita_sinks::tables::rows_of(
        collected.verdicts.values().next().unwrap(),
        &d.record_origin.unwrap(),
        finished_ms,
    );
    let t_star = rows.0.t_star.unwrap();
    assert!(
        (started_ms..=finished_ms).contains(&t_star),
        "t* {} outside the run [{}, {}]",
        audita_sinks::tables::rfc3339(t_star),
        audita_sinks::tables::rfc3339(started_ms),
        audita_sinks::tables::rfc3339(finished_ms)
    );
    let today = &audita_sinks::tables::rfc3339(started_ms)[..10];
    for incident in collected.verdicts.keys() {
        let html = std::fs::read_to_string(
            out.join("reports")
                .join(audita_sinks::report::file_name(incident)),
        )
        .unwrap();
        assert!(
            html.contains(today),
            "{incident}: the report's date is not {today}"
        );
    }

    // Every MQTT message the witness saw is certified in the sealed record (the
    // exact payload, signed by its author's sidecar, receipted); nothing is
    // quarantined.
    let mut certified: BTreeMap<String, String> = BTreeMap::new();
    for c in partition.certified.values() {
        let env = c.envelope.envelope();
        let text = match &env.payload {
            Payload::SensorReport { reading, .. } => reading.clone(),
            Payload::AgentText { text } => text.clone(),
            _ => continue,
        };
        certified.insert(text, env.author.as_str().to_string());
    }
    let mut c = bus
        .consumer(&unique_name("suspect"), &[&d.topic(topics::SUSPECT)])
        .unwrap();
    let mut quarantined: BTreeMap<String, String> = BTreeMap::new();
    let quiet = Instant::now() + Duration::from_secs(3);
    while Instant::now() < quiet {
        if let Some(r) = c.poll(Duration::from_millis(200)).unwrap() {
            let q: audita_topics::Quarantined = serde_json::from_slice(&r.payload).unwrap();
            quarantined.insert(q.bytes_hex.clone(), q.reason.clone());
        }
    }
    assert!(
        quarantined.is_empty(),
        "vda-5050-lib's 2.0.0 messages pass the 2.1.0 schemas: {quarantined:?}"
    );
    let mut by_topic: BTreeMap<String, usize> = BTreeMap::new();
    for m in &witnessed {
        let kind = m.topic.rsplit('/').next().unwrap().to_string();
        *by_topic.entry(kind).or_default() += 1;
        let text = String::from_utf8_lossy(&m.payload).to_string();
        assert!(
            certified.contains_key(&text),
            "{} not certified: {text}",
            m.topic
        );
    }
    // Seven orders, one update, one cancel.
    assert_eq!(by_topic.get("order"), Some(&8), "{by_topic:?}");
    assert_eq!(by_topic.get("instantActions"), Some(&1), "{by_topic:?}");
    for (p, s) in &summaries {
        assert_eq!(s["quarantined"], 0, "{p}: {s}");
        assert_eq!(
            s["uncited_progress"], 0,
            "{p}: every progress report cites its order: {s}"
        );
    }
    assert_eq!(
        summaries["master-control"]["cited_no_state"], 0,
        "{summaries:?}"
    );
    eprintln!(
        "{} MQTT messages ({by_topic:?}) all certified; {} incidents; {:.1} s",
        witnessed.len(),
        collected.verdicts.len(),
        started.elapsed().as_secs_f64()
    );
}
