//! The reading over what a third-party fleet (vda-5050-lib 1.4.0) really published
//! (`testdata/`), and the geometry on hand-checked cases.

use super::*;

fn messages(name: &str) -> Vec<(String, Value)> {
    let path = format!("{}/testdata/{name}.jsonl", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (v["topic"].as_str().unwrap().to_string(), v["msg"].clone())
        })
        .collect()
}

/// The progress a run's states report, each once, in order (what the bridge reports).
fn progress_keys(msgs: &[(String, Value)]) -> Vec<Progress> {
    let mut out: Vec<Progress> = Vec::new();
    for (topic, v) in msgs {
        if topic != "state" {
            continue;
        }
        let s = StateView::from_value(v).unwrap();
        if let Some(p) = progress(&s) {
            if p.advances(out.last()) {
                out.push(p);
            }
        }
    }
    out
}

fn key(order: &str, node: (&str, u64), edge: Option<(&str, u64)>) -> Progress {
    Progress {
        order_id: order.into(),
        node: (node.0.into(), node.1),
        edge: edge.map(|(e, s)| (e.into(), s)),
    }
}

#[test]
fn a_rerouting_update_is_progress_on_the_edge_it_released() {
    let msgs = messages("reroute");
    let orders: Vec<OrderView> = msgs
        .iter()
        .filter(|(t, _)| t == "order")
        .map(|(_, v)| OrderView::from_value(v).unwrap())
        .collect();
    assert_eq!(orders.len(), 2);
    // Update 0 releases A, A-B, B; B-C is its horizon. Update 1 stitches at B and
    // releases B-D (seq 3) and D.
    assert!(orders[0].releases(1) && !orders[0].releases(3));
    assert!(orders[1].releases(3) && orders[1].releases(2));
    assert_eq!(orders[1].released_edge(3).unwrap().edge_id, "B-D");
    assert_eq!(
        orders[1].released_edge(3).unwrap().max_speed_mm_per_s,
        Some(2000)
    );
    let first = |seq| {
        first_release(orders.iter().map(|o| (o, ())), seq, |_| true).map(|(o, _)| o.update_id)
    };
    assert_eq!(first(1), Some(0), "A-B: released by update 0");
    assert_eq!(
        first(2),
        Some(0),
        "the stitching node: update 0 released it"
    );
    assert_eq!(
        first(3),
        Some(1),
        "B-D: released by update 1 (update 0's horizon)"
    );
    assert_eq!(first(5), None);
    // An update that was not accepted releases nothing.
    assert_eq!(
        first_release(orders.iter().map(|o| (o, ())), 3, |u| u != 1).map(|(o, _)| o.update_id),
        None
    );
    assert_eq!(
        progress_keys(&msgs),
        vec![
            key("order-1", ("A", 0), None),
            key("order-1", ("A", 0), Some(("A-B", 1))),
            key("order-1", ("B", 2), None),
            key("order-1", ("B", 2), Some(("B-D", 3))),
            key("order-1", ("D", 4), None),
        ]
    );
    // Geometry of the released edge: B (2, 0) m to D (2, 3) m on hall-1.
    let e = orders[1].released_edge(3).unwrap();
    assert_eq!(orders[1].path(e), Some(vec![(2000, 0), (2000, 3000)]));
    assert_eq!(orders[1].map_of(e), Some("hall-1"));
}

#[test]
fn an_accepted_order_is_no_progress_before_its_first_node_is_reached() {
    // Right after accepting, the vehicle still names the previous order's last node
    // while the new first node is still in nodeStates (seen in every capture).
    let s = StateView::parse(
        r#"{"orderId":"o2","orderUpdateId":0,"lastNodeId":"B","lastNodeSequenceId":2,
            "nodeStates":[{"nodeId":"B","sequenceId":2,"released":true}],
            "edgeStates":[],"driving":false}"#,
    )
    .unwrap();
    assert_eq!(progress(&s), None);
    let none = StateView::parse(r#"{"orderId":"","lastNodeId":"","driving":false}"#).unwrap();
    assert_eq!(progress(&none), None);
    // Paused on a node: the edge is entered only once the vehicle drives.
    let waiting = StateView::parse(
        r#"{"orderId":"o","lastNodeId":"A","lastNodeSequenceId":0,"nodeStates":[],
            "edgeStates":[{"edgeId":"A-B","sequenceId":1,"released":true}],"driving":false}"#,
    )
    .unwrap();
    assert_eq!(progress(&waiting), Some(key("o", ("A", 0), None)));
    // A horizon edge is never entered.
    let horizon = StateView::parse(
        r#"{"orderId":"o","lastNodeId":"A","lastNodeSequenceId":0,"nodeStates":[],
            "edgeStates":[{"edgeId":"A-B","sequenceId":1,"released":false}],"driving":true}"#,
    )
    .unwrap();
    assert_eq!(progress(&horizon), Some(key("o", ("A", 0), None)));
}

#[test]
fn a_vehicle_ignoring_max_speed_reports_more_than_its_edge_allows() {
    let msgs = messages("selfspeed");
    let order = msgs
        .iter()
        .find(|(t, _)| t == "order")
        .map(|(_, v)| OrderView::from_value(v).unwrap())
        .unwrap();
    let limit = order.released_edge(1).unwrap().max_speed_mm_per_s.unwrap();
    let on_edge: Vec<i64> = msgs
        .iter()
        .filter(|(t, _)| t == "state")
        .map(|(_, v)| StateView::from_value(v).unwrap())
        .filter(|s| progress(s).is_some_and(|p| p.element_seq() == 1))
        .filter_map(|s| s.speed_mm_per_s)
        .collect();
    assert!(!on_edge.is_empty());
    assert!(
        on_edge.iter().any(|v| *v > limit),
        "speeds {on_edge:?} against maxSpeed {limit}"
    );
}

#[test]
fn the_libraries_instant_actions_spelling_is_read_for_2_0_only() {
    let msgs = messages("cancel");
    let (_, v) = msgs.iter().find(|(t, _)| t == "instantActions").unwrap();
    assert!(
        v["actions"].is_null(),
        "vda-5050-lib writes `instantActions`"
    );
    assert_eq!(
        instant_actions(v)
            .into_iter()
            .map(|(_, t)| t)
            .collect::<Vec<_>>(),
        vec!["cancelOrder".to_string()]
    );
    let mut v3 = v.clone();
    v3["version"] = "3.0.0".into();
    assert!(instant_actions(&v3).is_empty());
    let spec: Value = serde_json::from_str(
        r#"{"version":"2.1.0","actions":[{"actionId":"p","actionType":"startPause"}]}"#,
    )
    .unwrap();
    assert_eq!(
        instant_actions(&spec),
        vec![("p".to_string(), "startPause".to_string())]
    );
}

#[test]
fn hostile_numbers_are_absent_never_wrong() {
    for text in [
        r#"{"orderId":"o","nodes":[{"nodeId":"A","sequenceId":0,"released":true,"nodePosition":{"x":1e300,"y":0}}],"edges":[]}"#,
        r#"{"orderId":"o","nodes":[{"nodeId":"A","sequenceId":0,"released":true,"nodePosition":{"x":"1","y":0}}],"edges":[]}"#,
    ] {
        let o = OrderView::parse(text).unwrap();
        assert_eq!(o.nodes[0].pos, None, "{text}");
    }
    let o = OrderView::parse(
        r#"{"orderId":"o","nodes":[],"edges":[{"edgeId":"e","sequenceId":1,"released":true,"maxSpeed":-2}]}"#,
    )
    .unwrap();
    assert_eq!(o.edges[0].max_speed_mm_per_s, None);
    for text in ["", "[]", "{", r#"{"nodes":[]}"#, r#"{"orderId":"o"}"#] {
        assert_eq!(OrderView::parse(text), None, "{text}");
    }
    assert_eq!(StateView::parse("[1]"), None);
}

#[test]
fn segments_meet_rectangles_exactly() {
    let r = Rect {
        min_mm: [2000, -1000],
        max_mm: [6000, 4000],
    };
    // Through, touching a corner, inside, ending on the boundary, passing beside.
    assert!(r.meets_segment((0, 0), (8000, 0)));
    assert!(r.meets_segment((0, -3000), (3000, 0)));
    assert!(r.meets_segment((2500, 0), (2600, 10)));
    assert!(r.meets_segment((0, 0), (2000, 0)));
    assert!(
        r.meets_segment((1000, 5000), (3000, 3000)),
        "clips the corner region"
    );
    assert!(!r.meets_segment((0, 0), (1999, 0)));
    assert!(!r.meets_segment((0, 5000), (8000, 5000)));
    assert!(!r.meets_segment((0, 3001), (1000, 5000)));
    assert!(!r.meets_segment((7000, -2000), (9000, 6000)));
    // Huge coordinates do not overflow.
    assert!(r.meets_segment((-1_000_000_000_000, 0), (1_000_000_000_000, 0)));
    // A control polygon around the rectangle meets it; one beside it does not.
    assert!(r.meets_polyline(&[(0, -5000), (9000, -5000), (9000, 9000), (0, 9000)]));
    assert!(!r.meets_polyline(&[(7000, 0), (9000, 0), (9000, 3000)]));
    assert!(r.meets_polyline(&[(3000, 3000)]));
}

#[test]
fn a_refused_order_is_read_from_the_states_errors_and_never_progresses() {
    let msgs = messages("reject");
    let refused: Vec<Rejection> = msgs
        .iter()
        .filter(|(t, _)| t == "state")
        .flat_map(|(_, v)| rejections(v))
        .collect();
    assert!(
        !refused.is_empty(),
        "vda-5050-lib reports the refusal in errors"
    );
    assert!(refused.iter().all(|r| r.order_id == "order-1"
        && r.update_id == Some(0)
        && r.error_type == "noRouteError"));
    // The refused order is never the state's order: no progress of it.
    assert!(progress_keys(&msgs).iter().all(|p| p.order_id != "order-1"));
    // Errors without an order reference refuse nothing.
    let v: Value = serde_json::from_str(
        r#"{"errors":[{"errorType":"batteryLow","errorLevel":"WARNING","errorReferences":[]},{"errorType":"x"}]}"#,
    )
    .unwrap();
    assert!(rejections(&v).is_empty());
}

#[test]
fn sequence_ids_at_the_top_of_the_range_read_without_overflow() {
    // A sender may write any JSON unsigned integer as a sequence id; the reading is
    // total (found while writing the vda5050_read fuzz target).
    let max = u64::MAX;
    let order = OrderView::parse(&format!(
        r#"{{"orderId": "o", "nodes": [{{"nodeId": "a", "sequenceId": {}, "released": true,
             "nodePosition": {{"x": 0, "y": 0, "mapId": "m"}}}}],
            "edges": [{{"edgeId": "e", "sequenceId": {max}, "startNodeId": "a",
             "endNodeId": "b", "released": true}}]}}"#,
        max - 1
    ))
    .unwrap();
    assert_eq!(
        order.endpoints(&order.edges[0]),
        None,
        "no node after u64::MAX"
    );
    assert_eq!(order.path(&order.edges[0]), None);
    let state = StateView::parse(&format!(
        r#"{{"orderId": "o", "lastNodeId": "a", "lastNodeSequenceId": {max},
            "nodeStates": [], "edgeStates": [], "driving": true}}"#
    ))
    .unwrap();
    let p = progress(&state).unwrap();
    assert_eq!((p.node.1, p.edge), (max, None));
}
