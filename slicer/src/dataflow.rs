//! The differential dataflow behind [`Slicer`]: two recursive closures (slice and
//! production set) over the citation graph, updated one epoch at a time.

use crate::{EpochBatch, IncidentId, IncidentSlice, NodeId, Slices};
use differential_dataflow::input::Input;
use differential_dataflow::operators::iterate::Iterate;
use differential_dataflow::VecCollection;
use std::collections::BTreeMap;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use timely::dataflow::operators::probe::Handle as Probe;
use timely::dataflow::operators::{Inspect, Probe as _};

type Change = ((IncidentId, NodeId), u64, isize);

/// Records of merge work per operator step while an arrangement is not compact.
const IDLE_MERGE_EFFORT: isize = 1_000;

enum Command {
    Epoch(EpochBatch),
}

/// Handle to the running dataflow. Dropping it shuts the workers down.
pub struct Slicer {
    commands: Option<mpsc::Sender<Command>>,
    done: mpsc::Receiver<(Vec<Change>, Vec<Change>)>,
    threads: Option<JoinHandle<()>>,
    epoch: u64,
    slice_counts: BTreeMap<(IncidentId, NodeId), isize>,
    produced_counts: BTreeMap<(IncidentId, NodeId), isize>,
}

/// One incident's closure: anchors, then every parent cited by a member.
fn closure<'s>(
    anchors: VecCollection<'s, u64, (IncidentId, NodeId)>,
    cites: VecCollection<'s, u64, (NodeId, NodeId)>,
) -> VecCollection<'s, u64, (IncidentId, NodeId)> {
    anchors.clone().iterate(|scope, inner| {
        let cites = cites.enter(scope);
        let anchors = anchors.enter(scope);
        inner
            .map(|(incident, node)| (node, incident))
            .join_map(cites, |_child, incident, parent| (*incident, *parent))
            .concat(anchors)
            .distinct()
    })
}

impl Slicer {
    /// Starts the dataflow on `workers` threads.
    pub fn new(workers: usize) -> Slicer {
        Slicer::with_idle_merge_effort(workers, Some(IDLE_MERGE_EFFORT))
    }

    /// [`Slicer::new`] with another amount of idle merge work per operator step
    /// (`None`: merge only when new data forces it), for measurements.
    pub fn with_idle_merge_effort(workers: usize, effort: Option<isize>) -> Slicer {
        let (cmd_tx, cmd_rx) = mpsc::channel::<Command>();
        let (done_tx, done_rx) = mpsc::channel();
        let cmd_rx = Arc::new(Mutex::new(Some(cmd_rx)));
        let done_tx = Arc::new(Mutex::new(done_tx));
        let workers = workers.max(1);
        let threads = std::thread::Builder::new()
            .name("slicer-dataflow".into())
            .spawn(move || {
                let mut config = timely::Config::process(workers);
                // Merge arrangement batches while stepping, not only when new data
                // forces it: a retraction cancels its insertion only once their batches
                // merge, so without this a sliding window's traces hold several
                // windows of cancelled updates.
                differential_dataflow::configure(
                    &mut config.worker,
                    &differential_dataflow::Config::default().idle_merge_effort(effort),
                );
                // Shared by all workers: each worker's inspect appends what it saw.
                let slice_out: Arc<Mutex<Vec<Change>>> = Arc::new(Mutex::new(Vec::new()));
                let produced_out: Arc<Mutex<Vec<Change>>> = Arc::new(Mutex::new(Vec::new()));
                let result = timely::execute(config, move |worker| {
                    let probe = Probe::new();
                    let (s_out, p_out) = (slice_out.clone(), produced_out.clone());
                    let (mut cites_in, mut realised_in, mut anchors_in) = worker
                        .dataflow::<u64, _, _>(|scope| {
                            let (cites_in, cites) =
                                scope.new_collection::<(NodeId, NodeId), isize>();
                            let (realised_in, realised) = scope.new_collection::<NodeId, isize>();
                            let (anchors_in, anchors) =
                                scope.new_collection::<(IncidentId, NodeId), isize>();
                            let cites = cites.distinct();
                            let realised = realised.distinct();
                            // Links into a realised parent only: the production paths.
                            let productive = cites
                                .clone()
                                .map(|(c, p)| (p, c))
                                .semijoin(realised)
                                .map(|(p, c)| (c, p));
                            closure(anchors.clone(), cites)
                                .inner
                                .inspect(move |x| {
                                    s_out.lock().unwrap_or_else(|e| e.into_inner()).push(*x)
                                })
                                .probe_with(&probe);
                            closure(anchors, productive)
                                .inner
                                .inspect(move |x| {
                                    p_out.lock().unwrap_or_else(|e| e.into_inner()).push(*x)
                                })
                                .probe_with(&probe);
                            (cites_in, realised_in, anchors_in)
                        });
                    let leader = worker.index() == 0;
                    let rx = if leader {
                        cmd_rx.lock().unwrap_or_else(|e| e.into_inner()).take()
                    } else {
                        None
                    };
                    let mut epoch = 0u64;
                    if let Some(rx) = rx {
                        while let Ok(Command::Epoch(batch)) = rx.recv() {
                            for (e, d) in batch.cites {
                                cites_in.update(e, d);
                            }
                            for (n, d) in batch.realised {
                                realised_in.update(n, d);
                            }
                            for (a, d) in batch.anchors {
                                anchors_in.update(a, d);
                            }
                            epoch += 1;
                            cites_in.advance_to(epoch);
                            realised_in.advance_to(epoch);
                            anchors_in.advance_to(epoch);
                            cites_in.flush();
                            realised_in.flush();
                            anchors_in.flush();
                            worker.step_while(|| probe.less_than(&epoch));
                            // Every worker's inspect has run for times < epoch: collect.
                            let s = std::mem::take(
                                &mut *slice_out.lock().unwrap_or_else(|e| e.into_inner()),
                            );
                            let p = std::mem::take(
                                &mut *produced_out.lock().unwrap_or_else(|e| e.into_inner()),
                            );
                            if done_tx
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .send((s, p))
                                .is_err()
                            {
                                break;
                            }
                        }
                    }
                    // Closing the inputs lets every worker's dataflow complete.
                    drop((cites_in, realised_in, anchors_in));
                    while worker.step() {}
                });
                if let Err(e) = result {
                    tracing::error!(error = ?e, "slicer dataflow failed to start");
                }
            })
            .expect("spawning the slicer thread");
        Slicer {
            commands: Some(cmd_tx),
            done: done_rx,
            threads: Some(threads),
            epoch: 0,
            slice_counts: BTreeMap::new(),
            produced_counts: BTreeMap::new(),
        }
    }

    /// Applies one epoch's updates and returns the incidents whose slice or production
    /// set changed, with their new contents.
    pub fn apply(&mut self, batch: EpochBatch) -> Slices {
        let sender = self.commands.as_ref().expect("slicer running");
        if sender.send(Command::Epoch(batch)).is_err() {
            return Slices::new();
        }
        let Ok((s, p)) = self.done.recv() else {
            return Slices::new();
        };
        self.epoch += 1;
        let mut touched = std::collections::BTreeSet::new();
        for (key, _t, d) in s {
            touched.insert(key.0);
            *self.slice_counts.entry(key).or_insert(0) += d;
        }
        for (key, _t, d) in p {
            touched.insert(key.0);
            *self.produced_counts.entry(key).or_insert(0) += d;
        }
        self.slice_counts.retain(|_, c| *c != 0);
        self.produced_counts.retain(|_, c| *c != 0);
        touched.into_iter().map(|i| (i, self.incident(i))).collect()
    }

    /// The current slice of `incident` (empty if unknown).
    pub fn incident(&self, incident: IncidentId) -> IncidentSlice {
        let pick = |m: &BTreeMap<(IncidentId, NodeId), isize>| {
            m.range((incident, [0u8; 32])..=(incident, [0xffu8; 32]))
                .filter(|(_, c)| **c > 0)
                .map(|((_, n), _)| *n)
                .collect()
        };
        IncidentSlice {
            slice: pick(&self.slice_counts),
            produced: pick(&self.produced_counts),
        }
    }

    /// Every incident's current slice.
    pub fn all(&self) -> Slices {
        let mut ids: Vec<IncidentId> = self.slice_counts.keys().map(|(i, _)| *i).collect();
        ids.dedup();
        ids.into_iter().map(|i| (i, self.incident(i))).collect()
    }

    /// Number of epochs applied.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }
}

impl Drop for Slicer {
    fn drop(&mut self) {
        self.commands.take();
        if let Some(t) = self.threads.take() {
            let _ = t.join();
        }
    }
}
