//! Committed offsets, kept apart from the groups (Kafka's OffsetMetadataManager): per
//! group, per partition, the last commit written, with the position of its record so
//! that replaying an older record never overwrites a newer commit.

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
}

impl Offsets {
    pub fn group(&self, group_id: &str) -> Option<&GroupOffsets> {
        self.by_group.get(group_id)
    }

    pub fn has_offsets(&self, group_id: &str) -> bool {
        self.by_group.get(group_id).is_some_and(|o| !o.is_empty())
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

    /// An offset tombstone replayed.
    pub fn replay_delete(&mut self, group_id: &str, topic: String, partition: i32) {
        if let Some(offsets) = self.by_group.get_mut(group_id) {
            offsets.remove(&(topic, partition));
            if offsets.is_empty() {
                self.by_group.remove(group_id);
            }
        }
    }

    pub fn groups(&self) -> impl Iterator<Item = (&String, &GroupOffsets)> {
        self.by_group.iter()
    }
}
