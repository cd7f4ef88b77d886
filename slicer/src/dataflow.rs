//! The differential dataflow behind [`Slicer`]: two recursive closures (slice and
//! production set) over the citation graph, updated one epoch at a time.
//!
//! Inside the dataflow a message is a `u64` key, not its 32-byte id: the citation
//! graph is arranged several times over, and a quarter of the bytes per update is a
//! quarter of the memory. [`Slicer`] interns ids on the way in (with a count of the
//! live updates naming each) and translates outputs back; a key is released once no
//! live update names it and its outputs are translated, so the table holds exactly
//! the ids of the live graph.

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

/// A message inside the dataflow.
type Key = u64;

type Change = ((IncidentId, Key), u64, isize);

/// The updates of one epoch, on keys.
#[derive(Default)]
struct KeyBatch {
    cites: Vec<((Key, Key), isize)>,
    realised: Vec<(Key, isize)>,
    anchors: Vec<((IncidentId, Key), isize)>,
}

/// Message ids ↔ dataflow keys, with the number of live updates naming each id.
#[derive(Default)]
struct Interner {
    /// Griddle maps (resized a few entries per insert, see `stage::ById`).
    keys: griddle::HashMap<NodeId, (Key, isize), foldhash::fast::RandomState>,
    ids: griddle::HashMap<Key, NodeId, foldhash::fast::RandomState>,
    next: Key,
    /// Keys whose count reached zero in the current epoch.
    released: Vec<NodeId>,
}

impl Interner {
    /// The key of `id`, counting an update of multiplicity `d` that names it.
    fn key(&mut self, id: NodeId, d: isize) -> Key {
        let next = &mut self.next;
        let ids = &mut self.ids;
        let entry = self.keys.entry(id).or_insert_with(|| {
            let k = *next;
            *next += 1;
            ids.insert(k, id);
            (k, 0)
        });
        entry.1 += d;
        if entry.1 == 0 {
            self.released.push(id);
        }
        entry.0
    }

    /// The id of a key (outputs only name keys of live or just-retracted updates).
    fn id(&self, k: Key) -> Option<NodeId> {
        self.ids.get(&k).copied()
    }

    /// Forgets ids no live update names any more (after their outputs are read).
    fn release(&mut self) {
        for id in std::mem::take(&mut self.released) {
            if let Some((k, 0)) = self.keys.get(&id).copied() {
                self.keys.remove(&id);
                self.ids.remove(&k);
            }
        }
    }
}

/// Records of merge work per operator step while an arrangement is not compact.
const IDLE_MERGE_EFFORT: isize = 1_000;

enum Command {
    Epoch(KeyBatch),
}

/// Handle to the running dataflow. Dropping it shuts the workers down.
pub struct Slicer {
    commands: Option<mpsc::Sender<Command>>,
    done: mpsc::Receiver<(Vec<Change>, Vec<Change>)>,
    threads: Option<JoinHandle<()>>,
    epoch: u64,
    slice_counts: BTreeMap<(IncidentId, NodeId), isize>,
    produced_counts: BTreeMap<(IncidentId, NodeId), isize>,
    interner: Interner,
}

/// One incident's closure: anchors, then every parent cited by a member.
fn closure<'s>(
    anchors: VecCollection<'s, u64, (IncidentId, Key)>,
    cites: VecCollection<'s, u64, (Key, Key)>,
) -> VecCollection<'s, u64, (IncidentId, Key)> {
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
                            let (cites_in, cites) = scope.new_collection::<(Key, Key), isize>();
                            let (realised_in, realised) = scope.new_collection::<Key, isize>();
                            let (anchors_in, anchors) =
                                scope.new_collection::<(IncidentId, Key), isize>();
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
            interner: Interner::default(),
        }
    }

    /// Applies one epoch's updates and returns the incidents whose slice or production
    /// set changed, with their new contents.
    pub fn apply(&mut self, batch: EpochBatch) -> Slices {
        let i = &mut self.interner;
        let keyed = KeyBatch {
            cites: batch
                .cites
                .into_iter()
                .map(|((c, p), d)| ((i.key(c, d), i.key(p, d)), d))
                .collect(),
            realised: batch
                .realised
                .into_iter()
                .map(|(n, d)| (i.key(n, d), d))
                .collect(),
            anchors: batch
                .anchors
                .into_iter()
                .map(|((inc, n), d)| ((inc, i.key(n, d)), d))
                .collect(),
        };
        let sender = self.commands.as_ref().expect("slicer running");
        if sender.send(Command::Epoch(keyed)).is_err() {
            return Slices::new();
        }
        let Ok((s, p)) = self.done.recv() else {
            return Slices::new();
        };
        self.epoch += 1;
        let mut touched = std::collections::BTreeSet::new();
        for (counts, changes) in [(&mut self.slice_counts, s), (&mut self.produced_counts, p)] {
            for ((incident, key), _t, d) in changes {
                touched.insert(incident);
                match self.interner.id(key) {
                    Some(id) => *counts.entry((incident, id)).or_insert(0) += d,
                    None => tracing::error!(key, "slicer dataflow output names an unknown key"),
                }
            }
        }
        // Outputs are translated: ids no live update names can go.
        self.interner.release();
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

    /// Message ids the dataflow holds a key for (those named by live updates).
    pub fn interned(&self) -> usize {
        self.interner.keys.len()
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
