//! The notifier's run loop against the real Alertmanager (Debian's
//! `prometheus-alertmanager`, started on a loopback port), over the embedded bus:
//! malformed records are skipped and the rest posted; an Alertmanager that is not
//! there yet gets every alert once it is; a 4xx is refused for good (counted, not
//! retried forever) and commits what it refused; what was read but not taken stays
//! uncommitted, so the next run posts it.

use audita_bus::embedded::EmbeddedBus;
use audita_bus::Bus;
use audita_notifier::{run, Alertmanager, Settings, Topics};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Child;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The real Alertmanager on `port`, its state in `dir`; killed when dropped.
struct Am(Child);

impl Am {
    fn start(port: u16, dir: &Path) -> Am {
        Am(audita_notifier::testing::start_alertmanager(port, dir))
    }
}

impl Drop for Am {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn alerts(port: u16) -> Vec<Value> {
    let mut r = ureq::get(&format!("http://127.0.0.1:{port}/api/v2/alerts"))
        .call()
        .unwrap();
    serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap()
}

fn topics() -> Topics {
    Topics {
        alerts: "audita.alerts".into(),
        adverse: "audita.adverse".into(),
        verdicts: "audita.verdicts".into(),
    }
}

fn fired(incident: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "schema": "audita.alert/v1", "kind": "fired", "predicate": "separation_below_0.5m",
        "incident": incident, "entities": ["c1.agv-1", "c1.worker-1"], "t_ms": 12399,
        "severity_j": 450.0, "messages": ["c1.rtls:3f"], "detail": "separation 412 mm",
        "site": "c1"
    }))
    .unwrap()
}

fn abstention(incident: &str) -> Vec<u8> {
    serde_json::to_vec(
        &json!({"incident": incident, "abstained": "slice exceeds the record limit"}),
    )
    .unwrap()
}

fn publish(bus: &Bus) {
    let mut p = bus.producer().unwrap();
    let t = topics();
    p.send(&t.alerts, b"p", &fired("inc-1")).unwrap();
    p.send(&t.alerts, b"p", b"{not json").unwrap();
    p.send(&t.alerts, b"p", br#"{"schema":"audita.alert/v1","kind":"fired","predicate":"x","entities":[],"t_ms":1,"messages":[],"detail":""}"#).unwrap();
    p.send(&t.alerts, b"p", &fired("inc-2")).unwrap();
    p.send(&t.verdicts, b"inc-2", &abstention("inc-2")).unwrap();
    p.flush().unwrap();
}

fn settings(port: u16) -> Settings {
    let mut s = Settings::new(&format!("http://127.0.0.1:{port}"));
    s.timeout = Duration::from_secs(2);
    s.resend = Duration::from_secs(1);
    s
}

#[test]
fn malformed_records_are_skipped_a_late_alertmanager_gets_every_alert_and_a_4xx_is_not_retried() {
    let bus = Bus::Embedded(EmbeddedBus::new(1));
    publish(&bus);
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let s = settings(port);
    let am = Alertmanager::new(&s).unwrap();
    let t = topics();

    // Alertmanager not there yet: the posts fail and are retried; it starts 1.5 s in.
    let stop = AtomicBool::new(false);
    let started = std::thread::scope(|sc| {
        let h = sc.spawn(|| {
            std::thread::sleep(Duration::from_millis(1500));
            Am::start(port, dir.path())
        });
        let mut c = bus
            .consumer("notifier", &[&t.alerts, &t.adverse, &t.verdicts])
            .unwrap();
        let stats = run(
            &s,
            &am,
            c.as_mut(),
            &t,
            &stop,
            Some(Duration::from_secs(4)),
            |_| {},
        )
        .unwrap();
        (stats, h.join().unwrap())
    });
    let (stats, _am) = started;
    assert_eq!(stats.records, 5);
    assert_eq!(stats.malformed, 2, "{stats:?}");
    assert!(
        stats.failures >= 1,
        "the first posts found no Alertmanager: {stats:?}"
    );
    assert_eq!(stats.rejected, 0);
    let got = alerts(port);
    let by: std::collections::BTreeMap<String, &Value> = got
        .iter()
        .map(|a| (a["labels"]["incident"].as_str().unwrap().to_string(), a))
        .collect();
    assert_eq!(by.len(), 2, "{got:?}");
    let one = by["inc-1"];
    assert_eq!(one["labels"]["alertname"], "separation_below_0.5m");
    assert_eq!(one["labels"]["site"], "c1");
    assert_eq!(one["labels"]["subject"], "c1.agv-1");
    assert_eq!(one["labels"]["severity"], "warning");
    assert_eq!(one["annotations"]["status"], "fired");
    assert_eq!(by["inc-2"]["annotations"]["status"], "abstained");
    assert_eq!(
        by["inc-2"]["annotations"]["abstained"],
        "slice exceeds the record limit"
    );

    // Nothing has ended (held an hour): the next run of the group reads both
    // incidents again and posts them; the malformed records before them, too, are
    // read again (the settled prefix stops at the first open incident).
    let mut c = bus
        .consumer("notifier", &[&t.alerts, &t.adverse, &t.verdicts])
        .unwrap();
    let again = run(
        &s,
        &am,
        c.as_mut(),
        &t,
        &stop,
        Some(Duration::from_millis(500)),
        |_| {},
    )
    .unwrap();
    assert_eq!(again.records, 5, "{again:?}");
    assert!(again.posted >= 2);

    // A wrong path: 404 for every alert, refused for good, one line each, and the
    // run ends (idle) instead of retrying forever.
    let mut wrong = settings(port);
    wrong.url = format!("http://127.0.0.1:{port}/nothing-here");
    let wrong_am = Alertmanager::new(&wrong).unwrap();
    let mut c = bus
        .consumer("notifier-wrong", &[&t.alerts, &t.adverse, &t.verdicts])
        .unwrap();
    let t0 = Instant::now();
    let refused = run(
        &wrong,
        &wrong_am,
        c.as_mut(),
        &t,
        &stop,
        Some(Duration::from_millis(500)),
        |_| {},
    )
    .unwrap();
    assert_eq!(refused.rejected, 2, "{refused:?}");
    assert_eq!(refused.posted, 0);
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "a 4xx is not retried"
    );

    // A held alert ends: with hold 0 an abstained incident is over once posted, its
    // records settle and the group's offset moves past them.
    let mut short = settings(port);
    short.hold = Duration::ZERO;
    {
        let mut c = bus
            .consumer("notifier-short", &[&t.alerts, &t.adverse, &t.verdicts])
            .unwrap();
        run(
            &short,
            &am,
            c.as_mut(),
            &t,
            &stop,
            Some(Duration::from_millis(500)),
            |_| {},
        )
        .unwrap();
    }
    let mut c = bus
        .consumer("notifier-short", &[&t.alerts, &t.adverse, &t.verdicts])
        .unwrap();
    let mut left = Vec::new();
    while let Some(d) = c.poll(Duration::from_millis(100)).unwrap() {
        left.push((d.topic, d.offset));
    }
    // inc-1 (no verdict) is still open: its alert record and everything after it on
    // audita.alerts is read again; inc-2's abstention has settled.
    assert_eq!(
        left,
        vec![
            ("audita.alerts".to_string(), 0),
            ("audita.alerts".to_string(), 1),
            ("audita.alerts".to_string(), 2),
            ("audita.alerts".to_string(), 3),
        ]
    );
}
