//! Timers keyed by what they are for, ordered by deadline: the owner of a partition
//! sleeps until the earliest one instead of visiting every group on a fixed tick.

use std::collections::{BTreeSet, HashMap};
use std::hash::Hash;

use tokio::time::Instant;

pub struct Timers<K> {
    by_deadline: BTreeSet<(Instant, K)>,
    deadlines: HashMap<K, Instant>,
}

impl<K: Ord + Hash + Clone> Default for Timers<K> {
    fn default() -> Self {
        Timers {
            by_deadline: BTreeSet::new(),
            deadlines: HashMap::new(),
        }
    }
}

impl<K: Ord + Hash + Clone> Timers<K> {
    /// Sets (or moves) `key`'s timer to `at`.
    pub fn schedule(&mut self, key: K, at: Instant) {
        if let Some(old) = self.deadlines.insert(key.clone(), at) {
            self.by_deadline.remove(&(old, key.clone()));
        }
        self.by_deadline.insert((at, key));
    }

    /// Sets `key`'s timer to `at`, or removes it with None.
    pub fn set(&mut self, key: K, at: Option<Instant>) {
        match at {
            Some(at) => self.schedule(key, at),
            None => self.cancel(&key),
        }
    }

    pub fn cancel(&mut self, key: &K) {
        if let Some(old) = self.deadlines.remove(key) {
            self.by_deadline.remove(&(old, key.clone()));
        }
    }

    pub fn deadline(&self, key: &K) -> Option<Instant> {
        self.deadlines.get(key).copied()
    }

    /// The earliest deadline.
    pub fn next(&self) -> Option<Instant> {
        self.by_deadline.first().map(|(at, _)| *at)
    }

    /// Removes and returns the earliest key due by `now`.
    pub fn pop_first_due(&mut self, now: Instant) -> Option<K> {
        if self.by_deadline.first().is_none_or(|(at, _)| *at > now) {
            return None;
        }
        let (_, key) = self.by_deadline.pop_first()?;
        self.deadlines.remove(&key);
        Some(key)
    }

    /// Removes and returns the keys due by `now`, earliest first.
    pub fn pop_due(&mut self, now: Instant) -> Vec<K> {
        let mut due = Vec::new();
        while let Some((at, _)) = self.by_deadline.first() {
            if *at > now {
                break;
            }
            if let Some((_, key)) = self.by_deadline.pop_first() {
                self.deadlines.remove(&key);
                due.push(key);
            }
        }
        due
    }

    pub fn len(&self) -> usize {
        self.deadlines.len()
    }

    pub fn is_empty(&self) -> bool {
        self.deadlines.is_empty()
    }

    pub fn clear(&mut self) {
        self.by_deadline.clear();
        self.deadlines.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::Duration;

    #[test]
    fn due_keys_come_out_in_deadline_order_and_moved_ones_once() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let mut timers = Timers::default();
        timers.schedule("b", at(20));
        timers.schedule("a", at(30));
        timers.schedule("c", at(5));
        timers.schedule("a", at(10));
        assert_eq!(timers.next(), Some(at(5)));
        assert_eq!(timers.pop_due(at(15)), vec!["c", "a"]);
        assert_eq!(timers.len(), 1);
        timers.cancel(&"b");
        assert!(timers.is_empty());
        assert_eq!(timers.next(), None);
    }
}
