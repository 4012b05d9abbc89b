//! Committed offsets, kept apart from the groups (Kafka's OffsetMetadataManager): per
//! group, per partition, the last commit written, with the position of its record so
//! that replaying an older record never overwrites a newer commit.
//!
//! Transactional commits (TxnOffsetCommit) are pending per producer until the marker
//! ending its transaction is replayed: COMMIT makes each the committed offset unless a
//! later record already committed one, ABORT drops them. A tombstone removes a
//! partition's committed offset and its pending ones alike, as Kafka's does.

use std::collections::{BTreeMap, HashMap};

use super::records::OffsetValue;

/// A committed offset and where its record lies in `__consumer_offsets`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committed {
    pub value: OffsetValue,
    pub record_offset: i64,
}

pub type GroupOffsets = BTreeMap<(String, i32), Committed>;

#[derive(Default)]
pub struct Offsets {
    by_group: HashMap<String, GroupOffsets>,
    /// Transactional commits not yet ended: producer id → group → partition.
    pending: HashMap<i64, HashMap<String, GroupOffsets>>,
}

impl Offsets {
    pub fn group(&self, group_id: &str) -> Option<&GroupOffsets> {
        self.by_group.get(group_id)
    }

    /// Whether the group has offsets, committed or pending in a transaction.
    pub fn has_offsets(&self, group_id: &str) -> bool {
        self.by_group.get(group_id).is_some_and(|o| !o.is_empty())
            || self.has_pending_group(group_id)
    }

    pub fn get(&self, group_id: &str, topic: &str, partition: i32) -> Option<&Committed> {
        self.by_group
            .get(group_id)?
            .get(&(topic.to_string(), partition))
    }

    /// A commit record replayed.
    pub fn replay_commit(&mut self, group_id: &str, topic: String, partition: i32, c: Committed) {
        let offsets = self.by_group.entry(group_id.to_string()).or_default();
        match offsets.get(&(topic.clone(), partition)) {
            Some(old) if old.record_offset > c.record_offset => {}
            _ => {
                offsets.insert((topic, partition), c);
            }
        }
    }

    /// An offset tombstone replayed: the committed offset goes, and so do the pending
    /// transactional ones of the partition.
    pub fn replay_delete(&mut self, group_id: &str, topic: String, partition: i32) {
        let key = (topic, partition);
        if let Some(offsets) = self.by_group.get_mut(group_id) {
            offsets.remove(&key);
            if offsets.is_empty() {
                self.by_group.remove(group_id);
            }
        }
        for groups in self.pending.values_mut() {
            if let Some(offsets) = groups.get_mut(group_id) {
                offsets.remove(&key);
                if offsets.is_empty() {
                    groups.remove(group_id);
                }
            }
        }
        self.pending.retain(|_, groups| !groups.is_empty());
    }

    /// A transactional commit of `producer_id` replayed: pending until its marker.
    pub fn replay_pending(
        &mut self,
        producer_id: i64,
        group_id: &str,
        topic: String,
        partition: i32,
        c: Committed,
    ) {
        self.pending
            .entry(producer_id)
            .or_default()
            .entry(group_id.to_string())
            .or_default()
            .insert((topic, partition), c);
    }

    /// The marker ending `producer_id`'s transaction replayed: its pending commits become
    /// the committed offsets (unless a later record committed one) or are dropped.
    /// Returns the groups it had pending commits in.
    pub fn replay_end_txn(&mut self, producer_id: i64, commit: bool) -> Vec<String> {
        let Some(groups) = self.pending.remove(&producer_id) else {
            return Vec::new();
        };
        let touched = groups.keys().cloned().collect();
        if commit {
            for (group_id, offsets) in groups {
                for ((topic, partition), c) in offsets {
                    self.replay_commit(&group_id, topic, partition, c);
                }
            }
        }
        touched
    }

    /// Whether a transaction has a commit for the partition that is not yet ended.
    pub fn has_pending(&self, group_id: &str, topic: &str, partition: i32) -> bool {
        let key = (topic.to_string(), partition);
        self.pending
            .values()
            .any(|groups| groups.get(group_id).is_some_and(|o| o.contains_key(&key)))
    }

    /// Whether any transaction has a pending commit for the group.
    pub fn has_pending_group(&self, group_id: &str) -> bool {
        self.pending
            .values()
            .any(|groups| groups.contains_key(group_id))
    }

    /// The partitions of the group with a pending commit, in order.
    pub fn pending_partitions(&self, group_id: &str) -> Vec<(String, i32)> {
        let mut out: Vec<(String, i32)> = self
            .pending
            .values()
            .filter_map(|groups| groups.get(group_id))
            .flat_map(|o| o.keys().cloned())
            .collect();
        out.sort();
        out.dedup();
        out
    }

    pub fn groups(&self) -> impl Iterator<Item = (&String, &GroupOffsets)> {
        self.by_group.iter()
    }
}
