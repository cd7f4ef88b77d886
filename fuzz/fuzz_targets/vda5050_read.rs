//! The one reading of VDA 5050 payloads (`audita-vda5050`: orders, states, progress,
//! refusals, instant actions, zone geometry) is total on any text a fleet, or anyone
//! on its broker, can send: no panic, no overflow, and its geometry keeps its
//! promises on whatever positions the text holds.
//!
//! Input: 32 bytes of a zone rectangle (four i64, clamped to the reading's range),
//! then the payload text.
#![no_main]

use audita_vda5050::{instant_actions, progress, rejections, OrderView, Rect, StateView};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// The reading's coordinate range (|x| < 10¹⁵ mm, `audita_vda5050::mm`).
const RANGE: i64 = 1_000_000_000_000_000;

fn coordinate(b: &[u8]) -> i64 {
    i64::from_le_bytes(b.try_into().unwrap()).clamp(-RANGE + 1, RANGE - 1)
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 32 {
        return;
    }
    let (zone, text) = data.split_at(32);
    let c: Vec<i64> = zone.chunks(8).map(coordinate).collect();
    let rect = Rect {
        min_mm: [c[0].min(c[2]), c[1].min(c[3])],
        max_mm: [c[0].max(c[2]), c[1].max(c[3])],
    };
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    if let Some(order) = OrderView::parse(text) {
        for edge in &order.edges {
            let _ = order.releases(edge.seq);
            let _ = order.released_edge(edge.seq);
            let _ = order.map_of(edge);
            if let Some(path) = order.path(edge) {
                let meets = rect.meets_polyline(&path);
                // An edge with a point in the zone meets it.
                if path.iter().any(|p| rect.contains(p.0, p.1)) {
                    assert!(meets, "{rect:?} {path:?}");
                }
                for w in path.windows(2) {
                    assert_eq!(
                        rect.meets_segment(w[0], w[1]),
                        rect.meets_segment(w[1], w[0]),
                        "a segment meets a zone in both directions: {rect:?} {w:?}"
                    );
                }
            }
        }
    }
    if let Some(state) = StateView::parse(text) {
        if let Some(p) = progress(&state) {
            assert!(p.element_seq() >= p.node.1, "{p:?}");
            assert!(!p.advances(Some(&p)), "progress never advances past itself");
            assert!(p.advances(None));
        }
    }
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        let _ = rejections(&v);
        let _ = instant_actions(&v);
    }
});
