//! A pure reading of VDA 5050 (2.x, 3.x) JSON as Audita judges it: orders with their
//! released nodes and edges (positions, `maxSpeed`, trajectory), vehicle states with
//! their order progress, and instant actions. One reading shared by the bridge (what a
//! vehicle's state says it is executing), the monitor (which order released the edge
//! the vehicle is on at `t*`) and the verdict's duties (what an order released through
//! a zone, at which speed), so the three can never read one payload two ways.
//!
//! Design constraints:
//! - Pure and total: text in, a typed view (or `None`) out; no I/O, no clock, no
//!   panic on any input. Lengths in metres become integer millimetres, rounded; a
//!   non-finite or absurd number (|x| ≥ 10¹⁵ mm) is absent, never a wrong value.
//! - **Released is the protocol's**: an element (node or edge, keyed by its
//!   `sequenceId`, even for nodes, odd for edges) is released by an order message
//!   that lists it with `released: true`. A later update of the same `orderId` cannot
//!   change a released element (VDA 5050 §6.6.2: the base is not changed), so the
//!   message that released an element is the first accepted update that lists it
//!   released ([`first_release`]).
//! - **Progress is the protocol's** (§6.10.2): a state of order `O` has reached node
//!   `(lastNodeId, lastNodeSequenceId)` when that node is no longer in its
//!   `nodeStates`, and has entered the edge of sequence id `k + 1` when node `k` is
//!   reached, the edge is in its `edgeStates` released, and the vehicle is driving (a
//!   vehicle paused on a node enters the edge when it starts moving). [`progress`] is
//!   a pure function of one state.
//! - Third-party deviations read as their writers mean them, each named where it is
//!   read: the 2.0.0 schema's `allowedDeviationXy`, and the `instantActions` key
//!   vda-5050-lib 1.4 writes for 2.0 instant actions instead of `actions`.
#![warn(missing_docs)]
#![warn(clippy::too_many_lines)]

use serde_json::Value;

/// Millimetres from metres, rounded; `None` for a missing, non-finite or absurd value.
pub fn mm(v: &Value) -> Option<i64> {
    let m = (v.as_f64()? * 1000.0).round();
    (m.is_finite() && m.abs() < 1e15).then_some(m as i64)
}

/// A position on a map, in millimetres.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pos {
    /// x in the map frame.
    pub x_mm: i64,
    /// y in the map frame.
    pub y_mm: i64,
    /// `mapId`, when given.
    pub map_id: Option<String>,
    /// `allowedDeviationXY` (2.0.0 schema spelling `allowedDeviationXy` read too).
    pub deviation_mm: Option<i64>,
}

impl Pos {
    fn parse(p: &Value) -> Option<Pos> {
        let deviation = if p["allowedDeviationXY"].is_number() {
            &p["allowedDeviationXY"]
        } else {
            &p["allowedDeviationXy"]
        };
        Some(Pos {
            x_mm: mm(&p["x"])?,
            y_mm: mm(&p["y"])?,
            map_id: p["mapId"].as_str().map(str::to_string),
            deviation_mm: mm(deviation).filter(|d| *d >= 0),
        })
    }
}

/// A node of an order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeView {
    /// `nodeId`.
    pub node_id: String,
    /// `sequenceId` (even).
    pub seq: u64,
    /// In the base (`released: true`).
    pub released: bool,
    /// `nodePosition`, when given (line-guided vehicles have none).
    pub pos: Option<Pos>,
}

/// An edge of an order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EdgeView {
    /// `edgeId`.
    pub edge_id: String,
    /// `sequenceId` (odd).
    pub seq: u64,
    /// In the base (`released: true`).
    pub released: bool,
    /// `startNodeId`.
    pub start_node_id: String,
    /// `endNodeId`.
    pub end_node_id: String,
    /// `maxSpeed` in mm/s; `None`: the order sets no limit on this edge.
    pub max_speed_mm_per_s: Option<i64>,
    /// The NURBS control points of `trajectory`, when given (the curve lies in their
    /// convex hull).
    pub trajectory: Vec<(i64, i64)>,
}

/// An `order` message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderView {
    /// `orderId`.
    pub order_id: String,
    /// `orderUpdateId`.
    pub update_id: u64,
    /// Nodes in traversal order.
    pub nodes: Vec<NodeView>,
    /// Edges in traversal order.
    pub edges: Vec<EdgeView>,
}

impl OrderView {
    /// The order a message's exact payload text holds; `None` if it is not an order
    /// (no `orderId`, or no node list).
    pub fn parse(text: &str) -> Option<OrderView> {
        let v: Value = serde_json::from_str(text).ok()?;
        OrderView::from_value(&v)
    }

    /// [`Self::parse`] of a parsed payload.
    pub fn from_value(v: &Value) -> Option<OrderView> {
        let order_id = v["orderId"].as_str()?.to_string();
        let update_id = v["orderUpdateId"].as_u64().unwrap_or(0);
        let nodes = v["nodes"]
            .as_array()?
            .iter()
            .filter_map(|n| {
                Some(NodeView {
                    node_id: n["nodeId"].as_str()?.to_string(),
                    seq: n["sequenceId"].as_u64()?,
                    released: n["released"].as_bool().unwrap_or(false),
                    pos: n["nodePosition"]
                        .is_object()
                        .then(|| Pos::parse(&n["nodePosition"]))
                        .flatten(),
                })
            })
            .collect();
        let edges = v["edges"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| {
                let trajectory = e["trajectory"]["controlPoints"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|p| Some((mm(&p["x"])?, mm(&p["y"])?)))
                    .collect();
                Some(EdgeView {
                    edge_id: e["edgeId"].as_str()?.to_string(),
                    seq: e["sequenceId"].as_u64()?,
                    released: e["released"].as_bool().unwrap_or(false),
                    start_node_id: e["startNodeId"].as_str().unwrap_or("").to_string(),
                    end_node_id: e["endNodeId"].as_str().unwrap_or("").to_string(),
                    max_speed_mm_per_s: mm(&e["maxSpeed"]).filter(|s| *s >= 0),
                    trajectory,
                })
            })
            .collect();
        Some(OrderView {
            order_id,
            update_id,
            nodes,
            edges,
        })
    }

    /// Whether this message releases the element of sequence id `seq`.
    pub fn releases(&self, seq: u64) -> bool {
        self.nodes.iter().any(|n| n.seq == seq && n.released)
            || self.edges.iter().any(|e| e.seq == seq && e.released)
    }

    /// The released edge of sequence id `seq`.
    pub fn released_edge(&self, seq: u64) -> Option<&EdgeView> {
        self.edges.iter().find(|e| e.seq == seq && e.released)
    }

    /// An edge's end positions: its start and end nodes in this message (in an update
    /// the start of its first edge is the stitching node, which the update repeats).
    pub fn endpoints(&self, edge: &EdgeView) -> Option<(&Pos, &Pos)> {
        let at = |seq: u64, id: &str| {
            self.nodes
                .iter()
                .find(|n| n.seq == seq && (id.is_empty() || n.node_id == id))
                .and_then(|n| n.pos.as_ref())
        };
        Some((
            at(edge.seq.checked_sub(1)?, &edge.start_node_id)?,
            at(edge.seq.checked_add(1)?, &edge.end_node_id)?,
        ))
    }

    /// The points an edge's path may pass near, for a conservative zone test: the
    /// trajectory's control points when given (their convex hull holds the curve),
    /// else the straight segment between its nodes. `None`: no positions to judge by.
    pub fn path(&self, edge: &EdgeView) -> Option<Vec<(i64, i64)>> {
        if edge.trajectory.len() >= 2 {
            return Some(edge.trajectory.clone());
        }
        let (a, b) = self.endpoints(edge)?;
        Some(vec![(a.x_mm, a.y_mm), (b.x_mm, b.y_mm)])
    }

    /// The map of an edge (its start node's), when named.
    pub fn map_of(&self, edge: &EdgeView) -> Option<&str> {
        self.endpoints(edge).and_then(|(a, _)| a.map_id.as_deref())
    }
}

/// Of the order messages `updates` (each `(orderUpdateId, message)` of one `orderId`),
/// the one that first released the element `seq` and was accepted (`accepted(u)`):
/// the lowest such update id.
pub fn first_release<'a, T>(
    updates: impl IntoIterator<Item = (&'a OrderView, T)>,
    seq: u64,
    accepted: impl Fn(u64) -> bool,
) -> Option<(&'a OrderView, T)> {
    updates
        .into_iter()
        .filter(|(o, _)| o.releases(seq) && accepted(o.update_id))
        .min_by_key(|(o, _)| o.update_id)
}

/// A node or edge a state still lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// `nodeId` / `edgeId`.
    pub id: String,
    /// `sequenceId`.
    pub seq: u64,
    /// `released`.
    pub released: bool,
}

/// A vehicle `state` message as order progress reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateView {
    /// `orderId` (`""`: never had an order).
    pub order_id: String,
    /// `orderUpdateId`.
    pub update_id: u64,
    /// `lastNodeId`.
    pub last_node_id: String,
    /// `lastNodeSequenceId`.
    pub last_node_seq: u64,
    /// `nodeStates`.
    pub node_states: Vec<Pending>,
    /// `edgeStates`.
    pub edge_states: Vec<Pending>,
    /// `driving`.
    pub driving: bool,
    /// `hypot(vx, vy)` of `velocity`, mm/s.
    pub speed_mm_per_s: Option<i64>,
}

fn pending(list: &Value, id: &str) -> Vec<Pending> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| {
            Some(Pending {
                id: s[id].as_str()?.to_string(),
                seq: s["sequenceId"].as_u64()?,
                released: s["released"].as_bool().unwrap_or(false),
            })
        })
        .collect()
}

impl StateView {
    /// The state a payload text holds; `None` if it is not a JSON object.
    pub fn parse(text: &str) -> Option<StateView> {
        let v: Value = serde_json::from_str(text).ok()?;
        StateView::from_value(&v)
    }

    /// [`Self::parse`] of a parsed payload.
    pub fn from_value(v: &Value) -> Option<StateView> {
        if !v.is_object() {
            return None;
        }
        let vel = &v["velocity"];
        let speed_mm_per_s = (vel["vx"].is_number() || vel["vy"].is_number())
            .then(|| {
                let s = vel["vx"]
                    .as_f64()
                    .unwrap_or(0.0)
                    .hypot(vel["vy"].as_f64().unwrap_or(0.0));
                mm(&Value::from(s))
            })
            .flatten();
        Some(StateView {
            order_id: v["orderId"].as_str().unwrap_or("").to_string(),
            update_id: v["orderUpdateId"].as_u64().unwrap_or(0),
            last_node_id: v["lastNodeId"].as_str().unwrap_or("").to_string(),
            last_node_seq: v["lastNodeSequenceId"].as_u64().unwrap_or(0),
            node_states: pending(&v["nodeStates"], "nodeId"),
            edge_states: pending(&v["edgeStates"], "edgeId"),
            driving: v["driving"].as_bool().unwrap_or(false),
            speed_mm_per_s,
        })
    }
}

/// Where a state says the vehicle is in its order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Progress {
    /// `orderId`.
    pub order_id: String,
    /// The node reached: `(nodeId, sequenceId)`.
    pub node: (String, u64),
    /// The edge entered after it, if the vehicle is on it: `(edgeId, sequenceId)`.
    pub edge: Option<(String, u64)>,
}

impl Progress {
    /// The element the vehicle is on: the edge entered, else the node reached.
    pub fn element_seq(&self) -> u64 {
        self.edge.as_ref().map_or(self.node.1, |e| e.1)
    }

    /// Whether this progress goes past `prev` (the last progress reported): another
    /// order, or further along the same one. A vehicle that stops at the end of an
    /// edge before it reports the next node reads as "on the node" again (it is no
    /// longer driving); that is no new progress.
    pub fn advances(&self, prev: Option<&Progress>) -> bool {
        match prev {
            None => true,
            Some(p) if p.order_id != self.order_id => true,
            Some(p) => self.element_seq() > p.element_seq(),
        }
    }
}

/// The order progress one state reports (module docs); `None` without an order or
/// before its first node is reached.
pub fn progress(s: &StateView) -> Option<Progress> {
    if s.order_id.is_empty() || s.last_node_id.is_empty() {
        return None;
    }
    let k = s.last_node_seq;
    if s.node_states
        .iter()
        .any(|n| n.seq == k && n.id == s.last_node_id)
    {
        // The order's first node is still to be reached (the state still names the
        // previous order's last node).
        return None;
    }
    let edge = s
        .edge_states
        .iter()
        .find(|e| Some(e.seq) == k.checked_add(1) && e.released)
        .filter(|_| s.driving)
        .map(|e| (e.id.clone(), e.seq));
    Some(Progress {
        order_id: s.order_id.clone(),
        node: (s.last_node_id.clone(), k),
        edge,
    })
}

/// An order the vehicle refused: an entry of a state's `errors` whose
/// `errorReferences` name an `orderId` (VDA 5050 §6.10.6: `orderError`,
/// `orderUpdateError`, `noRouteError`, `validationError`, … reference the order they
/// refuse). A refused order is not executed, so nothing of it is realised; what the
/// rejection changes is the reason the record gives, not the realisation rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// The referenced `orderId`.
    pub order_id: String,
    /// The referenced `orderUpdateId`, when given.
    pub update_id: Option<u64>,
    /// `errorType`.
    pub error_type: String,
    /// `errorLevel` (`WARNING`, `FATAL`, …).
    pub level: String,
}

/// The orders a state's `errors` say the vehicle refused, in the order listed.
pub fn rejections(state: &Value) -> Vec<Rejection> {
    state["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let refs = e["errorReferences"].as_array()?;
            let value = |k: &str| {
                refs.iter()
                    .find(|r| r["referenceKey"] == k)
                    .and_then(|r| r["referenceValue"].as_str())
            };
            Some(Rejection {
                order_id: value("orderId")?.to_string(),
                update_id: value("orderUpdateId").and_then(|u| u.parse().ok()),
                error_type: e["errorType"].as_str().unwrap_or("").to_string(),
                level: e["errorLevel"].as_str().unwrap_or("").to_string(),
            })
        })
        .collect()
}

/// The actions of an `instantActions` message (`actions`; for a 2.0 message without
/// it, vda-5050-lib's `instantActions`): `(actionId, actionType)`.
pub fn instant_actions(v: &Value) -> Vec<(String, String)> {
    let list = if v["actions"].is_array() {
        &v["actions"]
    } else if v["version"].as_str().is_some_and(|s| s.starts_with("2.0.")) {
        &v["instantActions"]
    } else {
        &Value::Null
    };
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| {
            Some((
                a["actionId"].as_str()?.to_string(),
                a["actionType"].as_str().unwrap_or("").to_string(),
            ))
        })
        .collect()
}

/// An axis-aligned rectangle in millimetres, bounds inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rect {
    /// Lower corner.
    pub min_mm: [i64; 2],
    /// Upper corner.
    pub max_mm: [i64; 2],
}

impl Rect {
    /// Whether a point lies in the rectangle.
    pub fn contains(&self, x: i64, y: i64) -> bool {
        (self.min_mm[0]..=self.max_mm[0]).contains(&x)
            && (self.min_mm[1]..=self.max_mm[1]).contains(&y)
    }

    /// Whether the segment `a`–`b` meets the rectangle (Liang–Barsky clipping in
    /// exact integer arithmetic).
    pub fn meets_segment(&self, a: (i64, i64), b: (i64, i64)) -> bool {
        if self.contains(a.0, a.1) || self.contains(b.0, b.1) {
            return true;
        }
        let (dx, dy) = (
            i128::from(b.0) - i128::from(a.0),
            i128::from(b.1) - i128::from(a.1),
        );
        // t in [0, 1] as the fraction num/den; keep (lo, hi) as fractions.
        let (mut lo_n, mut lo_d, mut hi_n, mut hi_d) = (0i128, 1i128, 1i128, 1i128);
        let checks = [
            (-dx, i128::from(a.0) - i128::from(self.min_mm[0])),
            (dx, i128::from(self.max_mm[0]) - i128::from(a.0)),
            (-dy, i128::from(a.1) - i128::from(self.min_mm[1])),
            (dy, i128::from(self.max_mm[1]) - i128::from(a.1)),
        ];
        for (p, q) in checks {
            if p == 0 {
                if q < 0 {
                    return false;
                }
                continue;
            }
            // t = q / p, normalised to a positive denominator.
            let (n, d) = if p < 0 { (-q, -p) } else { (q, p) };
            if p < 0 {
                // Entering: lo = max(lo, t).
                if n * lo_d > lo_n * d {
                    (lo_n, lo_d) = (n, d);
                }
            } else if n * hi_d < hi_n * d {
                // Leaving: hi = min(hi, t).
                (hi_n, hi_d) = (n, d);
            }
            if lo_n * hi_d > hi_n * lo_d {
                return false;
            }
        }
        true
    }

    /// Whether any segment of the polyline `points` meets the rectangle (for a
    /// trajectory's control polygon: a superset test of its convex hull's points on
    /// the polygon; a hull strictly around the rectangle is caught by its closing
    /// segment too).
    pub fn meets_polyline(&self, points: &[(i64, i64)]) -> bool {
        match points {
            [] => false,
            [p] => self.contains(p.0, p.1),
            _ => {
                let closed = points.len() > 2;
                points.windows(2).any(|w| self.meets_segment(w[0], w[1]))
                    || (closed && self.meets_segment(points[points.len() - 1], points[0]))
                    || (closed && self.inside_hull(points))
            }
        }
    }

    /// Whether the rectangle's corner lies inside the polygon (a polygon that
    /// surrounds the rectangle meets it without any edge crossing).
    fn inside_hull(&self, points: &[(i64, i64)]) -> bool {
        let (x, y) = (i128::from(self.min_mm[0]), i128::from(self.min_mm[1]));
        let mut inside = false;
        let n = points.len();
        for i in 0..n {
            let (xi, yi) = (i128::from(points[i].0), i128::from(points[i].1));
            let (xj, yj) = (
                i128::from(points[(i + n - 1) % n].0),
                i128::from(points[(i + n - 1) % n].1),
            );
            if (yi > y) != (yj > y) && (((x - xi) * (yj - yi) < (xj - xi) * (y - yi)) == (yj > yi))
            {
                inside = !inside;
            }
        }
        inside
    }
}

#[cfg(test)]
mod tests;
