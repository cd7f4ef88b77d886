//! The metrics endpoint serves every stage's metrics in the Prometheus text format.

#[test]
fn metrics_endpoint_serves_pipeline_metrics() {
    use std::io::{Read, Write};
    let m = audita_sinks::metrics::Metrics::new();
    m.ingest_envelopes
        .with_label_values(&["accepted"])
        .inc_by(3);
    let addr = m.serve("127.0.0.1:0".parse().unwrap()).unwrap();
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    assert!(
        body.contains("audita_ingest_envelopes_total{result=\"accepted\"} 3"),
        "{body}"
    );
    assert!(body.contains("audita_engine_judge_seconds_bucket"));
    assert!(body.contains("audita_slicer_slice_wait_seconds_bucket"));
}
