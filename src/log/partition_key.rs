//! Looking up maps keyed by [`TopicPartition`] with a borrowed topic name.
//!
//! A produce request names each partition by a slice of its frame; building a
//! `TopicPartition` to find the partition would copy that name into a `String` for every
//! partition of every request. `TopicPartition` borrows as `dyn PartitionKey`, which a
//! `(&str, i32)` is too, so `map.get(&(topic, index) as &dyn PartitionKey)` finds it
//! without one.

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};

use super::TopicPartition;

/// A topic name and partition index, however held.
pub trait PartitionKey {
    fn topic(&self) -> &str;
    fn partition(&self) -> i32;
}

impl PartitionKey for TopicPartition {
    fn topic(&self) -> &str {
        &self.topic
    }
    fn partition(&self) -> i32 {
        self.partition
    }
}

impl PartitionKey for (&str, i32) {
    fn topic(&self) -> &str {
        self.0
    }
    fn partition(&self) -> i32 {
        self.1
    }
}

impl<'a> Borrow<dyn PartitionKey + 'a> for TopicPartition {
    fn borrow(&self) -> &(dyn PartitionKey + 'a) {
        self
    }
}

/// Hashes as `TopicPartition`'s derived `Hash` does (the topic as a `str`, then the
/// index), which `Borrow` requires for lookups to find what was inserted.
impl Hash for dyn PartitionKey + '_ {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.topic().hash(state);
        self.partition().hash(state);
    }
}

impl PartialEq for dyn PartitionKey + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.partition() == other.partition() && self.topic() == other.topic()
    }
}

impl Eq for dyn PartitionKey + '_ {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn a_borrowed_name_finds_the_partition() {
        let mut map = HashMap::new();
        for (topic, partition) in [("a", 0), ("a", 1), ("a-1", 0), ("b", 0)] {
            map.insert(
                TopicPartition::new(topic, partition),
                format!("{topic}/{partition}"),
            );
        }
        let get = |topic: &str, partition: i32| {
            map.get(&(topic, partition) as &dyn PartitionKey).cloned()
        };
        assert_eq!(get("a", 1).as_deref(), Some("a/1"));
        assert_eq!(get("a-1", 0).as_deref(), Some("a-1/0"));
        assert_eq!(get("b", 0).as_deref(), Some("b/0"));
        assert_eq!(get("a", 2), None);
        assert_eq!(get("b", 1), None);
        assert_eq!(get("a-", 10), None);
    }
}
