//! A bounded map: at most `cap` entries, the oldest insertion forgotten first (the
//! sidecars' memories of peers' payloads, actions and receipts).

use std::collections::{HashMap, VecDeque};

/// The map.
#[derive(Debug)]
pub(crate) struct Bounded<K, V> {
    map: HashMap<K, V>,
    fifo: VecDeque<K>,
    cap: usize,
}

impl<K: std::hash::Hash + Eq + Clone, V> Bounded<K, V> {
    pub(crate) fn new(cap: usize) -> Self {
        Bounded {
            map: HashMap::new(),
            fifo: VecDeque::new(),
            cap: cap.max(1),
        }
    }

    pub(crate) fn insert(&mut self, k: K, v: V) {
        if self.map.insert(k.clone(), v).is_none() {
            self.fifo.push_back(k);
            while self.fifo.len() > self.cap {
                if let Some(old) = self.fifo.pop_front() {
                    self.map.remove(&old);
                }
            }
        }
    }

    pub(crate) fn get(&self, k: &K) -> Option<&V> {
        self.map.get(k)
    }

    /// Removes `k` (its slot in the eviction order is reclaimed lazily).
    pub(crate) fn remove(&mut self, k: &K) -> Option<V> {
        let v = self.map.remove(k)?;
        if let Some(i) = self.fifo.iter().position(|x| x == k) {
            self.fifo.remove(i);
        }
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_goes_first_and_removal_frees_its_slot() {
        let mut b = Bounded::new(2);
        b.insert(1, 'a');
        b.insert(2, 'b');
        b.insert(3, 'c');
        assert_eq!(b.get(&1), None);
        assert_eq!(b.remove(&2), Some('b'));
        b.insert(4, 'd');
        assert_eq!((b.get(&3), b.get(&4)), (Some(&'c'), Some(&'d')));
    }
}
