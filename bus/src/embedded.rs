//! The embedded bus: an in-process, partitioned, append-only log with consumer groups.
//!
//! It mirrors the Kafka semantics the stages rely on, so the same stage code runs on
//! both transports:
//! - topics are created on first use with the bus's default partition count, or
//!   explicitly with [`EmbeddedBus::create_topic`];
//! - a consumer group's partitions are split among its live members (member `i` of `n`
//!   takes every `n`-th partition of the sorted list); when a member joins or leaves,
//!   every member restarts from the group's committed offsets, as after a Kafka
//!   rebalance;
//! - with a pending limit set ([`EmbeddedBus::with_pending_limit`]), a send to a
//!   topic whose slowest subscribed group lags by more than the limit fails with
//!   [`BusError::Backpressure`] instead of growing memory without bound.

use crate::{partition_for, BusError, Consumer, Delivery, Producer};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// One record of a partition: key and payload.
type Record = (Arc<[u8]>, Arc<[u8]>);

struct Topic {
    partitions: Vec<Vec<Record>>,
    subscribers: BTreeSet<String>,
}

#[derive(Default)]
struct Group {
    committed: BTreeMap<(String, u32), u64>,
    members: Vec<u64>,
    generation: u64,
}

struct State {
    topics: BTreeMap<String, Topic>,
    groups: BTreeMap<String, Group>,
    next_member: u64,
    default_partitions: u32,
    pending_limit: Option<u64>,
}

impl State {
    fn topic_mut(&mut self, name: &str) -> &mut Topic {
        let parts = self.default_partitions;
        self.topics
            .entry(name.to_string())
            .or_insert_with(|| Topic {
                partitions: (0..parts).map(|_| Vec::new()).collect(),
                subscribers: BTreeSet::new(),
            })
    }

    fn pending(&self, topic: &str) -> u64 {
        let Some(t) = self.topics.get(topic) else {
            return 0;
        };
        let total: u64 = t.partitions.iter().map(|p| p.len() as u64).sum();
        t.subscribers
            .iter()
            .map(|g| {
                let done: u64 = self.groups.get(g).map_or(0, |grp| {
                    (0..t.partitions.len() as u32)
                        .map(|p| {
                            grp.committed
                                .get(&(topic.to_string(), p))
                                .copied()
                                .unwrap_or(0)
                        })
                        .sum()
                });
                total - done.min(total)
            })
            .max()
            .unwrap_or(0)
    }
}

/// An in-process bus; clones share the same log.
#[derive(Clone)]
pub struct EmbeddedBus {
    shared: Arc<(Mutex<State>, Condvar)>,
}

impl EmbeddedBus {
    /// A bus whose auto-created topics have `default_partitions` partitions.
    pub fn new(default_partitions: u32) -> Self {
        EmbeddedBus {
            shared: Arc::new((
                Mutex::new(State {
                    topics: BTreeMap::new(),
                    groups: BTreeMap::new(),
                    next_member: 0,
                    default_partitions: default_partitions.max(1),
                    pending_limit: None,
                }),
                Condvar::new(),
            )),
        }
    }

    /// Sets the back-pressure limit: sends fail once a subscribed group lags by more.
    pub fn with_pending_limit(self, limit: u64) -> Self {
        self.lock().pending_limit = Some(limit);
        self
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock means a stage thread panicked while appending; the log itself
        // is append-only and stays consistent, so keep serving it.
        self.shared.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Creates `name` with `partitions` partitions unless it exists.
    pub fn create_topic(&self, name: &str, partitions: u32) -> Result<(), BusError> {
        if partitions == 0 {
            return Err(BusError::Permanent(format!(
                "topic {name}: partitions must be at least 1"
            )));
        }
        let mut st = self.lock();
        st.topics.entry(name.to_string()).or_insert_with(|| Topic {
            partitions: (0..partitions).map(|_| Vec::new()).collect(),
            subscribers: BTreeSet::new(),
        });
        Ok(())
    }

    /// Number of records in `topic` (all partitions).
    pub fn len(&self, topic: &str) -> u64 {
        let st = self.lock();
        st.topics
            .get(topic)
            .map_or(0, |t| t.partitions.iter().map(|p| p.len() as u64).sum())
    }

    /// Records not yet committed by the slowest group subscribed to `topic`.
    pub fn pending(&self, topic: &str) -> u64 {
        self.lock().pending(topic)
    }

    /// A producer handle.
    pub fn producer(&self) -> EmbeddedProducer {
        EmbeddedProducer { bus: self.clone() }
    }

    /// Joins consumer group `group` subscribed to `topics`.
    pub fn consumer(&self, group: &str, topics: &[&str]) -> Result<EmbeddedConsumer, BusError> {
        if topics.is_empty() {
            return Err(BusError::Permanent(
                "a consumer needs at least one topic".into(),
            ));
        }
        let mut st = self.lock();
        for t in topics {
            st.topic_mut(t).subscribers.insert(group.to_string());
        }
        let id = st.next_member;
        st.next_member += 1;
        let g = st.groups.entry(group.to_string()).or_default();
        g.members.push(id);
        g.generation += 1;
        drop(st);
        self.shared.1.notify_all();
        Ok(EmbeddedConsumer {
            bus: self.clone(),
            group: group.to_string(),
            topics: topics.iter().map(|t| t.to_string()).collect(),
            member: id,
            generation: u64::MAX,
            positions: BTreeMap::new(),
            known_partitions: 0,
            cursor: 0,
            assigned: None,
        })
    }

    /// A reader of the partitions `partitions` of `topic` only, from the beginning,
    /// outside the group's assignment (it commits to `group`).
    pub fn consumer_of(
        &self,
        group: &str,
        topic: &str,
        partitions: &[u32],
    ) -> Result<EmbeddedConsumer, BusError> {
        let mut c = self.consumer(&format!("{group}\u{0}assigned"), &[topic])?;
        c.assigned = Some(partitions.iter().map(|p| (topic.to_string(), *p)).collect());
        Ok(c)
    }
}

/// Producer on the embedded bus.
pub struct EmbeddedProducer {
    bus: EmbeddedBus,
}

impl Producer for EmbeddedProducer {
    fn send_record(
        &mut self,
        topic: &str,
        partition: Option<u32>,
        key: &[u8],
        payload: &[u8],
    ) -> Result<(), BusError> {
        let mut st = self.bus.lock();
        if let Some(limit) = st.pending_limit {
            let pending = st.pending(topic);
            if pending >= limit {
                return Err(BusError::Backpressure {
                    topic: topic.to_string(),
                    pending,
                    limit,
                });
            }
        }
        let t = st.topic_mut(topic);
        let n = t.partitions.len() as u32;
        let p = match partition {
            Some(p) if p < n => p as usize,
            Some(p) => {
                return Err(BusError::Permanent(format!(
                    "topic {topic} has {n} partitions, no partition {p}"
                )))
            }
            None => partition_for(key, n) as usize,
        };
        t.partitions[p].push((Arc::from(key), Arc::from(payload)));
        drop(st);
        self.bus.shared.1.notify_all();
        Ok(())
    }

    fn flush(&mut self) -> Result<(), BusError> {
        Ok(())
    }
}

/// A member of a consumer group on the embedded bus. Leaves the group on drop.
pub struct EmbeddedConsumer {
    bus: EmbeddedBus,
    group: String,
    topics: Vec<String>,
    member: u64,
    generation: u64,
    positions: BTreeMap<(String, u32), u64>,
    known_partitions: usize,
    cursor: usize,
    /// Partitions read regardless of the group's members ([`EmbeddedBus::consumer_of`]).
    assigned: Option<Vec<(String, u32)>>,
}

impl EmbeddedConsumer {
    /// Recomputes this member's partitions. After a membership change every position
    /// restarts from the committed offset (as after a Kafka rebalance); when only new
    /// partitions appeared, positions already held are kept.
    fn rebalance(&mut self, st: &State, membership_changed: bool) {
        let g = &st.groups[&self.group];
        if let Some(assigned) = &self.assigned {
            for tp in assigned {
                let exists = st
                    .topics
                    .get(&tp.0)
                    .is_some_and(|t| (tp.1 as usize) < t.partitions.len());
                if exists && !self.positions.contains_key(tp) {
                    self.positions.insert(tp.clone(), 0);
                }
            }
            self.generation = g.generation;
            return;
        }
        let index = g
            .members
            .iter()
            .position(|m| *m == self.member)
            .unwrap_or(0);
        let n = g.members.len().max(1);
        let mut all = Vec::new();
        for t in &self.topics {
            if let Some(topic) = st.topics.get(t) {
                for p in 0..topic.partitions.len() as u32 {
                    all.push((t.clone(), p));
                }
            }
        }
        self.positions = all
            .into_iter()
            .enumerate()
            .filter(|(i, _)| i % n == index)
            .map(|(_, tp)| {
                let kept = (!membership_changed)
                    .then(|| self.positions.get(&tp).copied())
                    .flatten();
                let at = kept.unwrap_or_else(|| g.committed.get(&tp).copied().unwrap_or(0));
                (tp, at)
            })
            .collect();
        self.generation = g.generation;
    }

    fn next_ready(&mut self, st: &State) -> Option<Delivery> {
        let keys: Vec<(String, u32)> = self.positions.keys().cloned().collect();
        if keys.is_empty() {
            return None;
        }
        for i in 0..keys.len() {
            let k = &keys[(self.cursor + i) % keys.len()];
            let pos = self.positions[k];
            let part = &st.topics[&k.0].partitions[k.1 as usize];
            if (pos as usize) < part.len() {
                let (key, payload) = &part[pos as usize];
                self.positions.insert(k.clone(), pos + 1);
                self.cursor = (self.cursor + i + 1) % keys.len();
                return Some(Delivery {
                    topic: k.0.clone(),
                    partition: k.1,
                    offset: pos,
                    key: key.to_vec(),
                    payload: payload.to_vec(),
                });
            }
        }
        None
    }
}

impl Consumer for EmbeddedConsumer {
    fn poll(&mut self, timeout: Duration) -> Result<Option<Delivery>, BusError> {
        let deadline = Instant::now() + timeout;
        let bus = self.bus.clone();
        let mut st = bus.lock();
        loop {
            let generation = st.groups[&self.group].generation;
            let partitions: usize = self
                .topics
                .iter()
                .filter_map(|t| st.topics.get(t))
                .map(|t| t.partitions.len())
                .sum();
            if generation != self.generation || partitions != self.known_partitions {
                self.rebalance(&st, generation != self.generation);
                self.known_partitions = partitions;
            }
            if let Some(d) = self.next_ready(&st) {
                return Ok(Some(d));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            st = bus
                .shared
                .1
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    fn commit(&mut self, delivery: &Delivery) -> Result<(), BusError> {
        let mut st = self.bus.lock();
        let g = st
            .groups
            .get_mut(&self.group)
            .expect("group exists while a member lives");
        let e = g
            .committed
            .entry((delivery.topic.clone(), delivery.partition))
            .or_insert(0);
        *e = (*e).max(delivery.offset + 1);
        drop(st);
        self.bus.shared.1.notify_all();
        Ok(())
    }
}

impl Drop for EmbeddedConsumer {
    fn drop(&mut self) {
        let mut st = self.bus.lock();
        if let Some(g) = st.groups.get_mut(&self.group) {
            g.members.retain(|m| *m != self.member);
            g.generation += 1;
        }
        drop(st);
        self.bus.shared.1.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(c: &mut EmbeddedConsumer) -> Vec<Delivery> {
        let mut out = Vec::new();
        while let Some(d) = c.poll(Duration::from_millis(20)).unwrap() {
            out.push(d);
        }
        out
    }

    #[test]
    fn records_of_one_key_keep_their_order_and_bytes() {
        let bus = EmbeddedBus::new(4);
        let mut p = bus.producer();
        for i in 0..50u32 {
            p.send("t", format!("k{}", i % 3).as_bytes(), &i.to_be_bytes())
                .unwrap();
        }
        let mut c = bus.consumer("g", &["t"]).unwrap();
        let got = collect(&mut c);
        assert_eq!(got.len(), 50);
        for k in 0..3 {
            let seq: Vec<u32> = got
                .iter()
                .filter(|d| d.key == format!("k{k}").as_bytes())
                .map(|d| u32::from_be_bytes(d.payload[..4].try_into().unwrap()))
                .collect();
            assert!(
                seq.windows(2).all(|w| w[0] < w[1]),
                "key k{k} out of order: {seq:?}"
            );
        }
    }

    #[test]
    fn a_restarted_member_resumes_from_the_committed_offset() {
        let bus = EmbeddedBus::new(1);
        let mut p = bus.producer();
        for i in 0..10u8 {
            p.send("t", b"k", &[i]).unwrap();
        }
        let mut c = bus.consumer("g", &["t"]).unwrap();
        for _ in 0..4 {
            let d = c.poll(Duration::from_millis(20)).unwrap().unwrap();
            c.commit(&d).unwrap();
        }
        // Read two more without committing, then "crash".
        c.poll(Duration::from_millis(20)).unwrap().unwrap();
        c.poll(Duration::from_millis(20)).unwrap().unwrap();
        drop(c);
        let mut c = bus.consumer("g", &["t"]).unwrap();
        let rest: Vec<u8> = collect(&mut c).iter().map(|d| d.payload[0]).collect();
        assert_eq!(rest, vec![4, 5, 6, 7, 8, 9]);
    }

    #[test]
    fn group_members_split_partitions_and_together_see_everything_once() {
        let bus = EmbeddedBus::new(4);
        let mut p = bus.producer();
        for i in 0..100u32 {
            p.send("t", &i.to_be_bytes(), &i.to_be_bytes()).unwrap();
        }
        let mut a = bus.consumer("g", &["t"]).unwrap();
        let mut b = bus.consumer("g", &["t"]).unwrap();
        let mut seen: Vec<u32> = collect(&mut a)
            .into_iter()
            .chain(collect(&mut b))
            .map(|d| u32::from_be_bytes(d.payload[..4].try_into().unwrap()))
            .collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn a_lagging_group_pushes_back_on_producers() {
        let bus = EmbeddedBus::new(1).with_pending_limit(3);
        let _c = bus.consumer("slow", &["t"]).unwrap();
        let mut p = bus.producer();
        for i in 0..3u8 {
            p.send("t", b"k", &[i]).unwrap();
        }
        let err = p.send("t", b"k", &[9]).unwrap_err();
        assert!(
            matches!(
                err,
                BusError::Backpressure {
                    pending: 3,
                    limit: 3,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.is_transient());
    }
}
