//! The citation graph's closures alone, on one worker of this thread: what the
//! stage's dataflow computes for every incident ([`crate::dataflow`]), fed directly
//! with edges and anchors — for the test against [`crate::recompute`] and for
//! measuring the dataflow's memory.

use crate::wire::{IncidentId, Key};
use differential_dataflow::input::{Input as _, InputSession};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use timely::dataflow::operators::{Inspect, Probe};
use timely::dataflow::ProbeHandle;
use timely::worker::Worker;

type Changes = Rc<RefCell<Vec<((Key, IncidentId), isize)>>>;

/// Incidents' closures over a citation graph, updated one batch at a time.
pub struct Graph {
    worker: Worker,
    edges: InputSession<u64, (Key, Key), isize>,
    anchors: InputSession<u64, (Key, IncidentId), isize>,
    probe: ProbeHandle<u64>,
    changes: Changes,
    counts: BTreeMap<(IncidentId, Key), isize>,
    time: u64,
}

impl Default for Graph {
    fn default() -> Self {
        Graph::new()
    }
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Graph {
        Graph::with_idle_merge_effort(Some(1_000))
    }

    /// An empty graph whose arrangements merge `effort` records per step while not
    /// compact (`None`: only when new data forces it), for measurements.
    pub fn with_idle_merge_effort(effort: Option<isize>) -> Graph {
        let allocator = timely::communication::Allocator::Thread(
            timely::communication::allocator::thread::Thread::default(),
        );
        let mut config = timely::WorkerConfig::default();
        differential_dataflow::configure(
            &mut config,
            &differential_dataflow::Config::default().idle_merge_effort(effort),
        );
        let mut worker = Worker::new(config, allocator, None);
        let probe = ProbeHandle::new();
        let changes: Changes = Rc::new(RefCell::new(Vec::new()));
        let out = changes.clone();
        let (edges, anchors) = worker.dataflow::<u64, _, _>(|scope| {
            let (edges_in, edges) = scope.new_collection::<(Key, Key), isize>();
            let (anchors_in, anchors) = scope.new_collection::<(Key, IncidentId), isize>();
            crate::dataflow::closure(anchors, edges.arrange_by_key())
                .inner
                .inspect(move |(x, _, d)| out.borrow_mut().push((*x, *d)))
                .probe_with(&probe);
            (edges_in, anchors_in)
        });
        Graph {
            worker,
            edges,
            anchors,
            probe,
            changes,
            counts: BTreeMap::new(),
            time: 0,
        }
    }

    /// Applies one batch of edge updates (`((child, parent), ±1)`) and anchor updates
    /// (`((incident, anchor), ±1)`); returns the incidents whose closure changed.
    pub fn apply(
        &mut self,
        edges: Vec<((Key, Key), isize)>,
        anchors: Vec<((IncidentId, Key), isize)>,
    ) -> BTreeSet<IncidentId> {
        for (e, d) in edges {
            self.edges.update(e, d);
        }
        for ((i, a), d) in anchors {
            self.anchors.update((a, i), d);
        }
        self.time += 1;
        self.edges.advance_to(self.time);
        self.anchors.advance_to(self.time);
        self.edges.flush();
        self.anchors.flush();
        while self.probe.less_than(&self.time) {
            self.worker.step();
        }
        let mut touched = BTreeSet::new();
        for ((node, incident), d) in self.changes.borrow_mut().drain(..) {
            touched.insert(incident);
            let c = self.counts.entry((incident, node)).or_insert(0);
            *c += d;
            if *c == 0 {
                self.counts.remove(&(incident, node));
            }
        }
        touched
    }

    /// The closure of `incident` now (empty if unknown).
    pub fn closure(&self, incident: IncidentId) -> BTreeSet<Key> {
        self.counts
            .range((incident, 0)..=(incident, Key::MAX))
            .filter(|(_, c)| **c > 0)
            .map(|((_, k), _)| *k)
            .collect()
    }

    /// Every incident's closure now.
    pub fn all(&self) -> BTreeMap<IncidentId, BTreeSet<Key>> {
        let mut out: BTreeMap<IncidentId, BTreeSet<Key>> = BTreeMap::new();
        for ((i, k), c) in &self.counts {
            if *c > 0 {
                out.entry(*i).or_default().insert(*k);
            }
        }
        out
    }
}
