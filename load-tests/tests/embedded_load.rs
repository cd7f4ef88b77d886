//! The load generator through the stages as `audita_pipeline` wires them, over the embedded bus (small and fast,
//! debug mode): every generated message passes ingest (none quarantined), every
//! envelope is sealed exactly once, and each injected incident is detected by the
//! monitor and gets exactly one verdict (no abstention). The slicer scopes its bundles with the duty registry;
//! replaying the same epochs through a slicer that ships whole windows judges every
//! incident to the same verdict, byte for byte, from larger bundles.

use audita_bus::embedded::EmbeddedBus;
use audita_bus::{Bus, TopicSpec};
use audita_evidence::SignedEnvelope;
use audita_load_tests::load::{feed, Lane, Load, LoadConfig, Placement};
use audita_monitor::Predicates;
use audita_pipeline::metrics::Metrics;
use audita_pipeline::Deployment;
use audita_slicer::stage::{Scoping, SlicerStage};
use audita_topics::names as topics;
use audita_topics::SliceBundle;
use audita_topics::{EpochMessage, EpochSeal};
use audita_verdict::DutyRegistry;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

const KEEPER: &str = "operator.example/keeper";

#[test]
fn live_incidents_pass_ingest_are_sealed_once_and_each_gets_one_verdict() {
    check(Placement::Live, Keeper::Up);
}

#[test]
fn own_slot_incidents_pass_ingest_are_sealed_once_and_each_gets_one_verdict() {
    check(Placement::OwnSlot, Keeper::Up);
}

/// The deployment's one keeper is a tlog-witness service that does not answer (a
/// closed loopback port): the sealer keeps sealing under-witnessed epochs, every
/// incident still gets its one verdict with the planted ρ, and each verdict record
/// states that it stands on un-co-signed checkpoints.
#[test]
fn with_the_keeper_down_every_incident_is_judged_and_marked_under_witnessed() {
    check(Placement::Live, Keeper::Down);
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Keeper {
    /// Co-signs inside the sealer's process.
    Up,
    /// A remote keeper whose endpoint refuses connections.
    Down,
}

fn check(placement: Placement, keeper: Keeper) {
    let config = LoadConfig {
        robots: 20,
        commands_per_s: 2.0,
        reports_per_s: 1.0,
        incidents_per_s: 0.5,
        duration: Duration::from_secs(16),
        seed: 7,
        placement,
    };
    let load = Load::build(&config, 2, &AtomicU64::new(0)).expect("load builds");
    let incidents: BTreeSet<String> = load.incidents().into_iter().collect();
    assert!(
        incidents.len() >= 2,
        "the run injects incidents: {incidents:?}"
    );
    // The schedule is in time order and every author's envelopes keep their order.
    assert!(load.schedule.windows(2).all(|w| w[0].at_ms <= w[1].at_ms));
    let envelopes: BTreeSet<Vec<u8>> = load
        .schedule
        .iter()
        .filter(|s| s.lane == Lane::Envelope)
        .map(|s| s.bytes.clone())
        .collect();
    assert_eq!(envelopes.len(), load.envelopes(), "no envelope twice");

    // The stages exactly as a deployment wires them (audita_pipeline::start), on a
    // throw-away deployment with the load's principals and duties.
    let duties = load.fleet.duties().expect("duty registry parses");
    let prefix = "lt.";
    let mut d = Deployment::ephemeral(load.fleet.keys.clone(), duties.clone(), prefix, &[KEEPER])
        .expect("deployment");
    // The load declares nothing: the monitor detects every incident from the record.
    d.predicates = Some(
        audita_monitor::Predicates::from_json(&load.fleet.predicates_json)
            .expect("predicate file parses"),
    );
    if keeper == Keeper::Down {
        // Port 9 (discard) on loopback: nothing listens, connections are refused.
        d.keepers.clear();
        d.remote_keepers = vec![(KEEPER.to_string(), "http://127.0.0.1:9".to_string())];
    }
    let d = Arc::new(d);
    let keys = d.keys.clone();
    let topic = |t: &str| d.topic(t);
    let bus = Bus::Embedded(EmbeddedBus::new(4).with_pending_limit(100_000));
    let dir = tempfile::tempdir().unwrap();
    let running = audita_pipeline::start(
        d.clone(),
        &bus,
        &dir.path().join("record"),
        1,
        Duration::from_millis(1_500),
        &Metrics::new(),
    )
    .expect("stages start");

    let mut producer = bus.producer().unwrap();
    let stats = feed(&load.schedule, producer.as_mut(), prefix, 8.0, |_, _| {}).unwrap();
    assert_eq!(stats.envelopes as usize, load.envelopes());
    assert_eq!(stats.incidents as usize, incidents.len());

    // Watch the outputs until every envelope is sealed and every incident judged.
    let mut watch = bus
        .consumer(
            "watch",
            &[
                &topic(topics::EPOCHS),
                &topic(topics::ACCEPTED),
                &topic(topics::VERDICTS),
                &topic(topics::SUSPECT),
                &topic(topics::ADVERSE),
            ],
        )
        .unwrap();
    let mut sealed_count = 0;
    let mut seals: Vec<EpochSeal> = Vec::new();
    let mut accepted: Vec<(u32, u64, Vec<u8>)> = Vec::new();
    let mut declarations: Vec<Vec<u8>> = Vec::new();
    let mut verdicts: BTreeMap<String, Vec<serde_json::Value>> = BTreeMap::new();
    let mut quarantined = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline
        && (sealed_count < load.envelopes() || verdicts.len() < incidents.len())
    {
        let Some(d) = watch.poll(Duration::from_millis(100)).unwrap() else {
            continue;
        };
        if d.topic.ends_with(topics::EPOCHS) {
            let seal = EpochSeal::decode(&d.payload).unwrap();
            sealed_count += seal.leaves.len();
            seals.push(seal);
        } else if d.topic.ends_with(topics::ACCEPTED) {
            accepted.push((d.partition, d.offset, d.payload));
        } else if d.topic.ends_with(topics::ADVERSE) {
            declarations.push(d.payload);
        } else if d.topic.ends_with(topics::SUSPECT) {
            quarantined.push(String::from_utf8_lossy(&d.payload).into_owned());
        } else {
            let v: serde_json::Value = serde_json::from_slice(&d.payload).unwrap();
            let incident = v["incident"].as_str().unwrap().to_string();
            verdicts.entry(incident).or_default().push(v);
        }
    }
    // A little longer, so a duplicate verdict would show up.
    let settle = Instant::now() + Duration::from_secs(2);
    while Instant::now() < settle {
        if let Some(d) = watch.poll(Duration::from_millis(100)).unwrap() {
            if d.topic.ends_with(topics::VERDICTS) {
                let v: serde_json::Value = serde_json::from_slice(&d.payload).unwrap();
                let incident = v["incident"].as_str().unwrap().to_string();
                verdicts.entry(incident).or_default().push(v);
            } else if d.topic.ends_with(topics::EPOCHS) {
                seals.push(EpochSeal::decode(&d.payload).unwrap());
            } else if d.topic.ends_with(topics::ACCEPTED) {
                accepted.push((d.partition, d.offset, d.payload));
            } else if d.topic.ends_with(topics::ADVERSE) {
                declarations.push(d.payload);
            } else if d.topic.ends_with(topics::SUSPECT) {
                quarantined.push(String::from_utf8_lossy(&d.payload).into_owned());
            }
        }
    }
    running.stop().expect("every stage drains cleanly");

    assert!(quarantined.is_empty(), "quarantined: {quarantined:?}");
    // The seals joined with the accepted bytes, as the slicer and monitor read them.
    let (epochs, joined) = audita_join::join_all(accepted, seals.clone());
    assert_eq!(
        joined.missing, 0,
        "every sealed message's bytes are on audita.accepted"
    );
    // ... and what the sealer published before the bytes left `audita.epochs` (its
    // epoch message carried the envelopes it wrote to disk, in leaf order, and the
    // receipts it wrote with them) is exactly what the join hands the slicer and
    // the monitor.
    let old_path = epochs_from_disk(&dir.path().join("record"), &seals);
    assert_eq!(epochs.len(), old_path.len());
    for (joined, old) in epochs.iter().zip(&old_path) {
        assert!(joined == old, "a joined epoch differs from the record's");
    }
    let sealed: Vec<Vec<u8>> = epochs.iter().flat_map(|e| e.envelopes.clone()).collect();
    let sealed_set: BTreeSet<Vec<u8>> = sealed.iter().cloned().collect();
    assert_eq!(
        sealed_set.len(),
        sealed.len(),
        "an envelope was sealed twice"
    );
    assert_eq!(sealed_set, envelopes, "every generated envelope is sealed");
    for env in &sealed {
        assert!(SignedEnvelope::decode(env.clone()).is_ok());
    }
    let judged: BTreeSet<String> = verdicts.keys().cloned().collect();
    assert_eq!(judged, incidents, "every injected incident is judged");
    for (incident, vs) in &verdicts {
        assert_eq!(vs.len(), 1, "{incident}: {} verdicts", vs.len());
        assert!(
            vs[0].get("abstained").is_none(),
            "{incident} abstained: {}",
            vs[0]["abstained"]
        );
        let anchor = &vs[0]["record"];
        assert_eq!(anchor["quorum"], 1, "{incident}: {anchor}");
        assert_eq!(
            anchor["under_witnessed"],
            keeper == Keeper::Down,
            "{incident}: {anchor}"
        );
        let cosigners = anchor["cosignatures"].as_array().unwrap().len();
        assert_eq!(cosigners, usize::from(keeper == Keeper::Up), "{incident}");
    }
    // Through the whole pipeline, every incident's ρ equals its cell's planted causal
    // profile (fleet principals sharing the window get ρ = 0).
    for cell in &load.fleet.cells {
        let Some(a) = &cell.adverse else { continue };
        let rows = verdicts[&a.incident][0]["rows"].as_array().unwrap().clone();
        for r in &rows {
            let p = r["principal"].as_str().unwrap();
            let want = cell.planted_causal.get(p).copied().unwrap_or(0.0);
            assert_eq!(
                (r["rho_lo"].as_f64().unwrap(), r["rho_hi"].as_f64().unwrap()),
                (want, want),
                "{}: {p}",
                a.incident
            );
        }
        for (p, want) in cell.planted_causal.iter().filter(|(_, w)| **w > 0.0) {
            assert!(
                rows.iter().any(|r| r["principal"] == p.as_str()),
                "{}: {p} (ρ = {want}) has no row",
                a.incident
            );
        }
    }

    // The old path's epochs, through a fresh slicer and the engine: every verdict
    // record equals the pipeline's, but for the record it is anchored to (a bundle
    // carries the latest checkpoint the slicer holds when it emits, and this slicer
    // emits after reading every epoch).
    let (bundles, _) = replay(
        &old_path,
        &declarations,
        Some(&duties),
        d.predicates.as_ref(),
        Scoping::Narrowed,
    );
    let registries = audita_engine_workers::Registries {
        keys: &d.keys,
        duties: &d.duties,
        quorum: d.quorum,
        predicates: d.predicates.as_ref(),
    };
    assert_eq!(bundles.len(), verdicts.len());
    for (incident, bundle) in &bundles {
        let v =
            audita_engine_workers::judge_checked(bundle, &d.keys, &d.duties, d.predicates.as_ref())
                .unwrap_or_else(|e| panic!("{incident}: {e}"));
        let old =
            serde_json::to_value(audita_engine_workers::record(&v, bundle, &registries)).unwrap();
        assert_eq!(
            without_anchor(old),
            without_anchor(verdicts[incident][0].clone()),
            "{incident}: the verdict differs from the old path's"
        );
    }

    // Scoping changes no verdict: the same epochs and declarations through a slicer
    // that ships whole windows, and through a scoping one (with the duty registry
    // and the predicate file, as the pipeline runs it), judge identically; the
    // scoped bundles are what the pipeline judged, and smaller.
    let predicates = d.predicates.as_ref();
    let (whole, _) = replay(&epochs, &declarations, None, None, Scoping::Narrowed);
    let (scoped, (narrowed, _)) = replay(
        &epochs,
        &declarations,
        Some(&duties),
        predicates,
        Scoping::Narrowed,
    );
    assert_eq!(
        narrowed as usize,
        scoped.len(),
        "a complete record scopes every incident over its narrowed window"
    );
    // The narrowed window is an optimisation only: the bundles equal, byte for byte,
    // those computed over the whole window ...
    let (exhaustive, _) = replay(
        &epochs,
        &declarations,
        Some(&duties),
        predicates,
        Scoping::Exhaustive,
    );
    assert_same_bundles(&scoped, &exhaustive, "complete record");
    // ... and so they do when an envelope is missing from the epochs (deleted after
    // sealing: its citers' citations dangle, completion items appear, and the
    // narrowed path must give way to the whole window wherever that matters).
    let cuts = if (placement, keeper) == (Placement::Live, Keeper::Up) {
        0..6u64
    } else {
        0..0
    };
    let (mut narrowed_cut, mut whole_window_cut) = (0, 0);
    for seed in cuts.clone() {
        let cut = cut_envelopes(&epochs, seed);
        let (narrow, (n, x)) = replay(
            &cut,
            &declarations,
            Some(&duties),
            predicates,
            Scoping::Narrowed,
        );
        let (whole_cut, _) = replay(
            &cut,
            &declarations,
            Some(&duties),
            predicates,
            Scoping::Exhaustive,
        );
        assert_same_bundles(&narrow, &whole_cut, &format!("cut {seed}"));
        assert_eq!((n + x) as usize, narrow.len());
        narrowed_cut += n;
        whole_window_cut += x;
    }
    if !cuts.is_empty() {
        // Both paths were taken: windows the cuts missed, and windows they reached.
        assert!(
            narrowed_cut > 0 && whole_window_cut > 0,
            "narrowed {narrowed_cut}, whole window {whole_window_cut}"
        );
        // ... and when a short horizon evicted the oldest parents of a window before
        // its declaration came (they are then judged missing).
        let short = Some((4_000, Duration::ZERO));
        let (narrow, (_, x)) = replay_with(
            &epochs,
            &declarations,
            Some(&duties),
            predicates,
            Scoping::Narrowed,
            short,
        );
        let (whole_short, _) = replay_with(
            &epochs,
            &declarations,
            Some(&duties),
            predicates,
            Scoping::Exhaustive,
            short,
        );
        assert_same_bundles(&narrow, &whole_short, "short horizon");
        assert!(
            x > 0,
            "an evicted parent sends its window to the whole-window path"
        );
    }
    assert_eq!(
        whole.keys().collect::<Vec<_>>(),
        scoped.keys().collect::<Vec<_>>()
    );
    let size = |b: &BTreeMap<String, SliceBundle>| -> usize {
        b.values().map(|x| x.evidence.envelopes.len()).sum()
    };
    // Without the predicate file the bundles carry every site's telemetry: the
    // engine's check of each declaration against the record, run as the pipeline
    // runs it, derives the same declaration from only its targets' site.
    let (every_site, _) = replay(
        &epochs,
        &declarations,
        Some(&duties),
        None,
        Scoping::Narrowed,
    );
    let telemetry = |b: &SliceBundle| {
        b.evidence
            .envelopes
            .iter()
            .filter(|e| {
                let env = SignedEnvelope::decode((*e).clone()).unwrap();
                matches!(
                    audita_monitor::read_key(env.envelope(), None),
                    Some(audita_monitor::ReadKey::Site(_) | audita_monitor::ReadKey::Always)
                )
            })
            .count()
    };
    let (mut site_telemetry, mut all_telemetry) = (0, 0);
    for (incident, w) in &whole {
        let judged = |b: &SliceBundle| {
            audita_engine_workers::judge_checked(b, &keys, &duties, predicates)
                .unwrap_or_else(|e| panic!("{incident}: {e}"))
        };
        let (vw, vs) = (judged(w), judged(&scoped[incident]));
        assert_eq!(
            vw.to_json(),
            vs.to_json(),
            "{incident}: scoping changed the verdict"
        );
        assert_eq!(
            judged(&every_site[incident]).to_json(),
            vs.to_json(),
            "{incident}: leaving other sites' telemetry out changed the verdict"
        );
        site_telemetry += telemetry(&scoped[incident]);
        all_telemetry += telemetry(&every_site[incident]);
        // The record root names the latest epoch when the slice was cut: the replay
        // cut it after the last.
        let rootless = |mut r: serde_json::Value| {
            r.as_object_mut().unwrap().remove("record_root");
            r.to_string()
        };
        let piped: Vec<String> = verdicts[incident][0]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| rootless(r.clone()))
            .collect();
        let replayed: Vec<String> = audita_engine_workers::message(&vs)
            .rows
            .iter()
            .map(|r| rootless(serde_json::to_value(r).unwrap()))
            .collect();
        assert_eq!(
            piped, replayed,
            "{incident}: the pipeline judged another slice"
        );
    }
    if placement == Placement::Live {
        // Live incidents share their window with the rest of the fleet.
        assert!(
            size(&scoped) * 2 < size(&whole),
            "scoped bundles carry {} messages, whole windows {}",
            size(&scoped),
            size(&whole)
        );
        // ... and with its other cells' telemetry.
        assert!(
            site_telemetry < all_telemetry,
            "bundles carry {site_telemetry} telemetry reports of their sites, \
             {all_telemetry} of every site"
        );
    }
}

fn assert_same_bundles(
    a: &BTreeMap<String, SliceBundle>,
    b: &BTreeMap<String, SliceBundle>,
    case: &str,
) {
    assert_eq!(
        a.keys().collect::<Vec<_>>(),
        b.keys().collect::<Vec<_>>(),
        "{case}"
    );
    for (incident, x) in a {
        assert!(
            x.encode() == b[incident].encode(),
            "{case}: {incident}: the narrowed window shipped {} messages, the whole window {}",
            x.evidence.envelopes.len(),
            b[incident].evidence.envelopes.len()
        );
    }
}

/// `epochs` with one envelope left out (chosen by `seed` among all, in id order, so
/// the choice does not depend on how the run cut its epochs), as if deleted between
/// sealing and the slicer: its leaf stays, so the log and its proofs are unchanged.
fn cut_envelopes(epochs: &[EpochMessage], seed: u64) -> Vec<EpochMessage> {
    use rand::{Rng, SeedableRng};
    let id = |b: &Vec<u8>| SignedEnvelope::decode(b.clone()).unwrap().id().digest;
    let mut all: Vec<[u8; 32]> = epochs
        .iter()
        .flat_map(|e| e.envelopes.iter())
        .map(id)
        .collect();
    all.sort_unstable();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let gone = all[rng.gen_range(0..all.len())];
    epochs
        .iter()
        .map(|e| {
            let mut m = e.clone();
            m.envelopes.retain(|b| id(b) != gone);
            m
        })
        .collect()
}

/// The slice bundles a fresh slicer emits for `epochs` and `declarations`, scoped
/// with `duties` and the telemetry of `predicates`' sites when given, by incident; and how many were scoped over a narrowed
/// window and over the whole window.
fn replay(
    epochs: &[EpochMessage],
    declarations: &[Vec<u8>],
    duties: Option<&DutyRegistry>,
    predicates: Option<&Predicates>,
    scoping: Scoping,
) -> (BTreeMap<String, SliceBundle>, (u64, u64)) {
    replay_with(epochs, declarations, duties, predicates, scoping, None)
}

/// [`replay`] with a retention horizon (record-time ms, hold) instead of the default.
fn replay_with(
    epochs: &[EpochMessage],
    declarations: &[Vec<u8>],
    duties: Option<&DutyRegistry>,
    predicates: Option<&Predicates>,
    scoping: Scoping,
    horizon: Option<(u64, Duration)>,
) -> (BTreeMap<String, SliceBundle>, (u64, u64)) {
    let bus = Bus::Embedded(EmbeddedBus::new(1));
    let slices = format!("r.{}", topics::SLICES);
    bus.ensure_topics(&[TopicSpec {
        name: slices.clone(),
        partitions: 1,
    }])
    .unwrap();
    let mut stage = SlicerStage::new("r.", Duration::ZERO).with_scoping(scoping);
    if let Some((ms, hold)) = horizon {
        stage = stage.with_horizon(ms, hold);
    }
    if let Some(d) = duties {
        stage = stage.with_registry(d.clone());
    }
    stage = stage.with_predicates(predicates.cloned());
    for e in epochs {
        stage.add_epoch(e.clone());
    }
    for d in declarations {
        stage.declare(d.clone()).unwrap();
    }
    let mut out = bus.producer().unwrap();
    stage.emit_ready(out.as_mut()).unwrap();
    let mut c = bus.consumer("r", &[&slices]).unwrap();
    let mut bundles = BTreeMap::new();
    while let Some(d) = c.poll(Duration::from_millis(50)).unwrap() {
        let name = String::from_utf8(d.key.clone()).unwrap();
        bundles.insert(name, SliceBundle::decode(&d.payload).unwrap());
    }
    (bundles, stage.scopes())
}

/// The epochs as the sealer published them before issue 36, rebuilt from the record
/// directory: each seal's header, checkpoint, prefix, leaves and watermark, with the
/// envelopes the sealer wrote to disk for its leaves (log order) and the receipts it
/// wrote with it (arrival order).
fn epochs_from_disk(record: &std::path::Path, seals: &[EpochSeal]) -> Vec<EpochMessage> {
    use audita_record::Stream;
    let mut envelopes = Stream::segments(record, "segments", "envelopes-", b'E').unwrap();
    let mut receipts = Stream::segments(record, "segments", "receipts-", b'R').unwrap();
    seals
        .iter()
        .map(|s| EpochMessage {
            header: s.header.clone(),
            checkpoint: s.checkpoint.clone(),
            prefix: s.prefix.clone(),
            leaves: s.leaves.clone(),
            envelopes: (0..s.leaves.len())
                .map(|_| envelopes.next().unwrap().unwrap())
                .collect(),
            receipts: (0..s.receipts.len())
                .map(|_| receipts.next().unwrap().unwrap())
                .collect(),
            watermark: s.watermark,
        })
        .collect()
}

/// A verdict record without what depends on when it was sliced: the checkpoint it
/// is anchored to (`record`) and that checkpoint's root in the verdict and its rows.
fn without_anchor(mut v: serde_json::Value) -> serde_json::Value {
    if let Some(o) = v.as_object_mut() {
        o.remove("record");
    }
    if let Some(o) = v["verdict"].as_object_mut() {
        o.remove("record_root");
    }
    if let Some(rows) = v["rows"].as_array_mut() {
        for r in rows {
            if let Some(o) = r.as_object_mut() {
                o.remove("record_root");
            }
        }
    }
    v
}
