//! The slicer's dataflow on every worker: the shards, the citation graph and the
//! incidents' closures, and the questions the emitters ask, over timely dataflow and
//! differential dataflow.
//!
//! ```text
//!  arrivals ─exchange by key─▶ arrive (shard) ─┬─ edges ─▶ arrange by child ─▶ closure(anchors) ─exchange by incident─▶ closures
//!                                               ├─ links ─exchange─▶ link ─ held ─exchange─▶ link
//!                                               ├─ live ─exchange by epoch─▶ count (epoch keeper)
//!                                               └─ control ─┐
//!  control (fed, hold) ─────────────────────────────────────┴─broadcast─▶ hear (globals)
//!  queries ─broadcast─▶ answer (shard) ─┬─ answers ───────────────────────────────┐
//!                                        └─ forwards ─exchange─▶ forward (owner or keeper) ─┴─exchange by asker─▶ answers
//! ```
//!
//! Design constraints:
//! - One timestamp, the turn ([`crate::stage`]): every worker feeds what it read at
//!   turn `t`, advances every input past `t` and steps until the probe passes `t`.
//!   Then everything said at `t` has been taken everywhere — arrivals by their
//!   shards, links by their owners, questions answered, closures at their fixed
//!   point — so each turn is a consistent cut of the whole cluster.
//! - The state each operator reads or changes lives in the worker (`Rc<RefCell<_>>`,
//!   [`Shared`]); operators of one worker run on its one thread, one at a time.
//! - The closure of an incident is the set of messages with a citation path into its
//!   anchors: `iterate(anchors ∪ parents of members)` over the citation edges,
//!   arranged once by child and entered into the loop, so its memory is one
//!   arrangement of the live edges plus the incidents' closures.

use crate::epochs::Epochs;
use crate::shard::{Globals, Said, Shard};
use crate::wire::{
    owner, AnchorUpdate, Answer, Arrival, Ask, Control, Forward, IncidentId, Key, Link, Live,
    Query, Reply,
};
use differential_dataflow::input::{Input as _, InputSession};
use differential_dataflow::operators::iterate::Iterate;
use differential_dataflow::{AsCollection, VecCollection};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::vec::{Broadcast, Map, Partition};
use timely::dataflow::operators::{Concat, Probe};
use timely::dataflow::{InputHandle, ProbeHandle, StreamVec};
use timely::worker::Worker;

/// The turn number: the dataflow's timestamp.
pub type Turn = u64;

/// The worker's state the operators share.
#[derive(Clone)]
pub struct Shared {
    /// The messages this worker owns.
    pub shard: Rc<RefCell<Shard>>,
    /// The epochs whose proofs this worker keeps.
    pub epochs: Rc<RefCell<Epochs>>,
    /// What every worker said.
    pub globals: Rc<RefCell<Globals>>,
    /// Answers to this worker's questions.
    pub answers: Rc<RefCell<Vec<Answer>>>,
    /// Changes to the closures of this worker's incidents.
    pub closures: Rc<RefCell<Vec<AnchorUpdate>>>,
    /// The sealer's watermark as far as this worker has fed (eviction reads it).
    pub watermark: Rc<Cell<u64>>,
    /// A reader of this worker's part of the citation edges' arrangement, for its
    /// size ([`crate::stage::SlicerStage::memory`]); the stage advances its
    /// compaction every turn, so it holds nothing back.
    pub edges: Rc<RefCell<Option<EdgeTrace>>>,
}

/// The citation edges arranged by child.
pub type EdgeTrace = differential_dataflow::operators::arrange::TraceAgent<
    differential_dataflow::trace::implementations::ValSpine<Key, Key, Turn, isize>,
>;

/// Updates in the batches of an edge arrangement (including batches being merged).
pub fn updates(trace: &EdgeTrace) -> usize {
    use differential_dataflow::trace::implementations::spine_fueled::SpineBatch;
    use differential_dataflow::trace::TraceReader;
    let mut n = 0;
    trace.map_spans(|s| n += s.inner.as_ref().map_or(0, |b| b.len()));
    n
}

/// The inputs of the dataflow on one worker.
pub struct Handles {
    /// Sealed items this worker read.
    pub arrivals: InputHandle<Turn, CapacityContainerBuilder<Vec<Arrival>>>,
    /// This worker's questions.
    pub queries: InputHandle<Turn, CapacityContainerBuilder<Vec<Query>>>,
    /// What this worker tells every other.
    pub control: InputHandle<Turn, CapacityContainerBuilder<Vec<Control>>>,
    /// `(anchor, incident)`: the anchors of this worker's incidents.
    pub anchors: InputSession<Turn, (Key, IncidentId), isize>,
    /// Passes a turn once everything said in it was taken everywhere.
    pub probe: ProbeHandle<Turn>,
}

impl Handles {
    /// Inputs attached to no dataflow (what a torn-down stage leaves in place of its
    /// own, so that they are dropped where a panic is contained).
    pub fn detached() -> Handles {
        Handles {
            arrivals: InputHandle::new(),
            queries: InputHandle::new(),
            control: InputHandle::new(),
            anchors: InputSession::new(),
            probe: ProbeHandle::new(),
        }
    }

    /// Advances every input past `turn`.
    pub fn advance_to(&mut self, turn: Turn) {
        self.arrivals.advance_to(turn);
        self.queries.advance_to(turn);
        self.control.advance_to(turn);
        self.anchors.advance_to(turn);
        self.anchors.flush();
    }
}

/// One incident's closure: its anchors, then every parent a member cites.
pub(crate) fn closure<'s, Tr>(
    anchors: VecCollection<'s, Turn, (Key, IncidentId)>,
    edges: differential_dataflow::operators::arrange::Arranged<'s, Tr>,
) -> VecCollection<'s, Turn, (Key, IncidentId)>
where
    Tr: differential_dataflow::trace::TraceReader<
            Time = Turn,
            Batch: differential_dataflow::trace::Navigable,
        > + Clone
        + 'static,
    for<'a> differential_dataflow::trace::BatchCursor<Tr>: differential_dataflow::trace::Cursor<
        Key<'a> = &'a Key,
        Val<'a> = &'a Key,
        Time = Turn,
        Diff = isize,
    >,
{
    anchors.clone().iterate(|scope, inner| {
        let edges = edges.enter(scope);
        let anchors = anchors.enter(scope);
        inner
            .join_core(edges, |_child, incident, parent| Some((*parent, *incident)))
            .concat(anchors)
            .distinct()
    })
}

/// What the shard says, split into its four streams.
enum Out {
    Edge(((Key, Key), Turn, isize)),
    Link(Link),
    Live(Live),
    Control(Control),
}

fn split(said: Said, turn: Turn, out: &mut Vec<Out>) {
    out.extend(said.edges.into_iter().map(|(e, d)| Out::Edge((e, turn, d))));
    out.extend(said.links.into_iter().map(Out::Link));
    out.extend(
        said.live
            .into_iter()
            .filter(|(_, d)| *d != 0)
            .map(|(epoch, delta)| Out::Live(Live { epoch, delta })),
    );
    out.extend(said.control.into_iter().map(Out::Control));
}

/// An answer or a request an answering operator passes on.
enum Said2 {
    Answer(Answer),
    Forward(Forward),
}

/// Builds the dataflow on `worker`.
pub fn build(worker: &mut Worker, shared: &Shared) -> Handles {
    let peers = worker.peers();
    let me = worker.index() as u32;
    let probe = ProbeHandle::new();
    let mut arrivals_in = InputHandle::new();
    let mut queries_in = InputHandle::new();
    let mut control_in = InputHandle::new();
    let anchors_in = worker.dataflow::<Turn, _, _>(|scope| {
        let (anchors_in, anchors) = scope.new_collection::<(Key, IncidentId), isize>();
        let said = arrive(arrivals_in.to_stream(scope), shared);
        let mut parts = said.partition(4, |o| match o {
            Out::Edge(_) => (0, o),
            Out::Link(_) => (1, o),
            Out::Live(_) => (2, o),
            Out::Control(_) => (3, o),
        });
        let control = parts.pop().expect("four parts");
        let live = parts.pop().expect("four parts");
        let links = parts.pop().expect("four parts");
        let edges = parts.pop().expect("four parts");
        graph(edges, anchors, shared, &probe);
        completeness(links, shared, &probe);
        count(live, shared, &probe);
        let control = control
            .flat_map(|o| match o {
                Out::Control(c) => Some(c),
                _ => None,
            })
            .container::<Vec<_>>()
            .concat(control_in.to_stream(scope));
        hear(control, shared, &probe);
        questions(queries_in.to_stream(scope), shared, me, peers, &probe);
        anchors_in
    });
    Handles {
        arrivals: arrivals_in,
        queries: queries_in,
        control: control_in,
        anchors: anchors_in,
        probe,
    }
}

/// The shards: every sealed item to its owner, which takes it (and evicts what the
/// horizon passed) and says what changed.
fn arrive<'s>(arrivals: StreamVec<'s, Turn, Arrival>, shared: &Shared) -> StreamVec<'s, Turn, Out> {
    let s = shared.clone();
    arrivals
        .unary(
            Exchange::new(|a: &Arrival| a.route()),
            "Arrive",
            move |_, _| {
                move |input, output| {
                    input.for_each_stamp(|cap, data| {
                        let turn = cap.least().copied().unwrap_or_default();
                        let out = take_arrivals(&s, data.flat_map(|d| d.drain(..)), turn);
                        output.session(&cap).give_iterator(out.into_iter());
                    });
                }
            },
        )
        .container::<Vec<Out>>()
}

fn take_arrivals(s: &Shared, arrivals: impl Iterator<Item = Arrival>, turn: Turn) -> Vec<Out> {
    let mut shard = s.shard.borrow_mut();
    let mut said = Said::default();
    let mut earliest = u64::MAX;
    for a in arrivals {
        match a {
            Arrival::Envelope {
                key,
                epoch,
                leaf,
                before,
                bytes,
            } => {
                if shard.take_envelope(key, epoch, leaf, before, bytes, &mut said) {
                    earliest = earliest.min(shard.time_of(key));
                }
            }
            Arrival::Receipt {
                of,
                epoch,
                index,
                time,
                bytes,
            } => shard.take_receipt(of, epoch, index, time, &bytes),
        }
    }
    if earliest != u64::MAX {
        shard.note_share(earliest);
    }
    let globals = s.globals.borrow();
    shard.evict(s.watermark.get(), &globals, &mut said);
    let mut out = Vec::new();
    split(said, turn, &mut out);
    out
}

/// The citation graph and the incidents' closures, each closure's changes to its
/// emitter.
fn graph<'s>(
    edges: StreamVec<'s, Turn, Out>,
    anchors: VecCollection<'s, Turn, (Key, IncidentId)>,
    shared: &Shared,
    probe: &ProbeHandle<Turn>,
) {
    let edges = edges
        .flat_map(|o| match o {
            Out::Edge(e) => Some(e),
            _ => None,
        })
        .container::<Vec<_>>()
        .as_collection()
        .arrange_by_key();
    *shared.edges.borrow_mut() = Some(edges.trace.clone());
    let closures = shared.closures.clone();
    closure(anchors, edges)
        .inner
        .unary(
            Exchange::new(|((_, inc), _, _): &((Key, IncidentId), Turn, isize)| *inc),
            "ToEmitter",
            |_, _| {
                move |input, output| {
                    input.for_each_stamp(|cap, data| {
                        let mut c = closures.borrow_mut();
                        for (x, _, d) in data.flat_map(|d| d.drain(..)) {
                            c.push((x, d));
                        }
                        output.session(&cap).give_iterator(std::iter::empty::<()>());
                    });
                }
            },
        )
        .container::<Vec<()>>()
        .probe_with(probe);
}

/// Completeness links: to the parent's owner (an await or a forget), whose answer
/// (held) goes to the child's.
fn completeness<'s>(links: StreamVec<'s, Turn, Out>, shared: &Shared, probe: &ProbeHandle<Turn>) {
    let s = shared.clone();
    let helds = links
        .flat_map(|o| match o {
            Out::Link(l) => Some(l),
            _ => None,
        })
        .container::<Vec<_>>()
        .unary(Exchange::new(|l: &Link| l.route()), "Await", move |_, _| {
            move |input, output| {
                input.for_each_stamp(|cap, data| {
                    let mut shard = s.shard.borrow_mut();
                    let mut said = Said::default();
                    for l in data.flat_map(|d| d.drain(..)) {
                        shard.take_link(l, &mut said);
                    }
                    output.session(&cap).give_iterator(said.links.into_iter());
                });
            }
        })
        .container::<Vec<Link>>();
    let s = shared.clone();
    helds
        .unary(Exchange::new(|l: &Link| l.route()), "Held", move |_, _| {
            move |input, output| {
                input.for_each_stamp(|cap, data| {
                    let mut shard = s.shard.borrow_mut();
                    let mut said = Said::default();
                    for l in data.flat_map(|d| d.drain(..)) {
                        shard.take_link(l, &mut said);
                    }
                    // A held message answers only an await, never a held.
                    debug_assert!(said.links.is_empty());
                    output.session(&cap).give_iterator(std::iter::empty::<()>());
                });
            }
        })
        .container::<Vec<()>>()
        .probe_with(probe);
}

/// Live counts to the epochs' keepers.
fn count<'s>(live: StreamVec<'s, Turn, Out>, shared: &Shared, probe: &ProbeHandle<Turn>) {
    let s = shared.clone();
    live.flat_map(|o| match o {
        Out::Live(l) => Some(l),
        _ => None,
    })
    .container::<Vec<_>>()
    .unary(Exchange::new(|l: &Live| l.epoch), "Count", move |_, _| {
        move |input, output| {
            input.for_each_stamp(|cap, data| {
                let mut epochs = s.epochs.borrow_mut();
                for l in data.flat_map(|d| d.drain(..)) {
                    epochs.count(l.epoch, l.delta);
                }
                output.session(&cap).give_iterator(std::iter::empty::<()>());
            });
        }
    })
    .container::<Vec<()>>()
    .probe_with(probe);
}

/// What every worker hears.
fn hear<'s>(control: StreamVec<'s, Turn, Control>, shared: &Shared, probe: &ProbeHandle<Turn>) {
    let s = shared.clone();
    control
        .broadcast()
        .unary(Pipeline, "Hear", move |_, _| {
            move |input, output| {
                input.for_each_stamp(|cap, data| {
                    let turn = cap.least().copied().unwrap_or_default();
                    let mut g = s.globals.borrow_mut();
                    for c in data.flat_map(|d| d.drain(..)) {
                        g.hear_at(turn, c);
                    }
                    output.session(&cap).give_iterator(std::iter::empty::<()>());
                });
            }
        })
        .container::<Vec<()>>()
        .probe_with(probe);
}

/// Questions, answered by every shard (or forwarded to the owner or keeper), the
/// answers to their askers.
fn questions<'s>(
    queries: StreamVec<'s, Turn, Query>,
    shared: &Shared,
    me: u32,
    peers: usize,
    probe: &ProbeHandle<Turn>,
) {
    let s = shared.clone();
    let said = queries
        .broadcast()
        .unary(Pipeline, "Answer", move |_, _| {
            move |input, output| {
                input.for_each_stamp(|cap, data| {
                    let mut out = Vec::new();
                    for q in data.flat_map(|d| d.drain(..)) {
                        answer(&s, me, peers, q, &mut out);
                    }
                    output.session(&cap).give_iterator(out.into_iter());
                });
            }
        })
        .container::<Vec<Said2>>();
    let mut parts = said.partition(2, |o| match o {
        Said2::Answer(_) => (0, o),
        Said2::Forward(_) => (1, o),
    });
    let forwards = parts.pop().expect("two parts");
    let direct = parts.pop().expect("two parts");
    let s = shared.clone();
    let forwarded = forwards
        .flat_map(|o| match o {
            Said2::Forward(f) => Some(f),
            Said2::Answer(_) => None,
        })
        .container::<Vec<_>>()
        .unary(
            Exchange::new(|f: &Forward| f.route()),
            "Forward",
            move |_, _| {
                move |input, output| {
                    input.for_each_stamp(|cap, data| {
                        let fs: Vec<Forward> = data.flat_map(|d| d.drain(..)).collect();
                        let out = forward(&s, fs);
                        output.session(&cap).give_iterator(out.into_iter());
                    });
                }
            },
        )
        .container::<Vec<Answer>>();
    let s = shared.clone();
    direct
        .flat_map(|o| match o {
            Said2::Answer(a) => Some(a),
            Said2::Forward(_) => None,
        })
        .container::<Vec<_>>()
        .concat(forwarded)
        .unary(
            Exchange::new(|a: &Answer| u64::from(a.to)),
            "ToAsker",
            move |_, _| {
                move |input, output| {
                    input.for_each_stamp(|cap, data| {
                        s.answers
                            .borrow_mut()
                            .extend(data.flat_map(|d| d.drain(..)));
                        output.session(&cap).give_iterator(std::iter::empty::<()>());
                    });
                }
            },
        )
        .container::<Vec<()>>()
        .probe_with(probe);
}

/// One shard's answer to a question (and what it forwards).
fn answer(s: &Shared, me: u32, peers: usize, q: Query, out: &mut Vec<Said2>) {
    let reply = |reply| {
        Said2::Answer(Answer {
            to: q.asker,
            incident: q.incident,
            reply,
        })
    };
    match q.ask {
        Ask::Status { window, keys } => {
            let shard = s.shard.borrow();
            let mine: Vec<Key> = keys
                .into_iter()
                .filter(|k| owner(*k, peers) == me as usize)
                .collect();
            let (held, pending, window_pending) = shard.status(window, &mine);
            out.push(reply(Reply::Status {
                held,
                pending,
                window_pending,
            }));
        }
        Ask::Fetch { window, keys } => {
            let mut shard = s.shard.borrow_mut();
            let records = keys
                .into_iter()
                .filter(|k| owner(*k, peers) == me as usize)
                .filter_map(|k| shard.record(k))
                .collect();
            let check = Some(shard.check(window));
            out.push(reply(Reply::Records { records, check }));
        }
        Ask::Picks {
            window,
            asked,
            exhaustive,
            parents: with_parents,
        } => {
            let mut shard = s.shard.borrow_mut();
            let picked = if exhaustive {
                shard.in_window(window)
            } else {
                shard.picks(window, &asked)
            };
            let mut parents: BTreeSet<Key> = BTreeSet::new();
            if with_parents {
                for k in &picked {
                    parents.extend(shard.parents(*k).iter().copied());
                }
            }
            let records = picked.into_iter().filter_map(|k| shard.record(k)).collect();
            out.push(reply(Reply::Records {
                records,
                check: None,
            }));
            out.extend(parents.into_iter().map(|key| {
                Said2::Forward(Forward::Parent {
                    to: q.asker,
                    incident: q.incident,
                    key,
                })
            }));
        }
        Ask::Prove { keys, root } => {
            let shard = s.shard.borrow();
            for k in keys {
                if owner(k, peers) != me as usize {
                    continue;
                }
                if let Some((epoch, leaf)) = shard.position(k) {
                    out.push(Said2::Forward(Forward::Prove {
                        to: q.asker,
                        incident: q.incident,
                        key: k,
                        epoch,
                        leaf,
                    }));
                }
            }
            if (root % peers.max(1) as u64) as u32 == me {
                out.push(Said2::Forward(Forward::Epoch {
                    to: q.asker,
                    incident: q.incident,
                    epoch: root,
                }));
            }
        }
    }
}

/// Requests forwarded to this worker as a message's owner or an epoch's keeper.
fn forward(s: &Shared, fs: Vec<Forward>) -> Vec<Answer> {
    let mut out = Vec::new();
    let mut proofs: BTreeMap<(u32, IncidentId, u64), Vec<(Key, u64)>> = BTreeMap::new();
    let mut headers: BTreeSet<(u32, IncidentId, u64)> = BTreeSet::new();
    for f in fs {
        match f {
            Forward::Parent { to, incident, key } => {
                if let Some(r) = s.shard.borrow_mut().record(key) {
                    out.push(Answer {
                        to,
                        incident,
                        reply: Reply::Records {
                            records: vec![r],
                            check: None,
                        },
                    });
                }
            }
            Forward::Prove {
                to,
                incident,
                key,
                epoch,
                leaf,
            } => {
                proofs
                    .entry((to, incident, epoch))
                    .or_default()
                    .push((key, leaf));
                headers.insert((to, incident, epoch));
            }
            Forward::Epoch {
                to,
                incident,
                epoch,
            } => {
                headers.insert((to, incident, epoch));
            }
        }
    }
    let epochs = s.epochs.borrow();
    for ((to, incident, epoch), leaves) in proofs {
        for (key, proof) in epochs.prove(epoch, &leaves) {
            out.push(Answer {
                to,
                incident,
                reply: Reply::Proof { key, epoch, proof },
            });
        }
    }
    for (to, incident, epoch) in headers {
        if let Some((header, checkpoint)) = epochs.header(epoch) {
            out.push(Answer {
                to,
                incident,
                reply: Reply::Epoch {
                    number: epoch,
                    header,
                    checkpoint,
                },
            });
        }
    }
    out
}
