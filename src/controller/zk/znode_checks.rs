//! What the controller takes from the topic znodes, checked.
//!
//! `/brokers/topics` is writable by anyone who reaches ZooKeeper, and Kafka's controller
//! takes whatever it finds there: a child named with 300 characters became a
//! LeaderAndIsr whose `mkdir` failed on every broker, and a replica list `[1,1,1]` made
//! controlled shutdown fail. Here a topic whose name is not a legal one (Kafka's
//! `Topic.validate`) is skipped, with an error line naming it, before it reaches the
//! controller context, so no request ever carries it; an assignment's partitions with a
//! negative index are dropped and a broker listed twice in one replica list counts once.

use std::collections::BTreeSet;

use crate::controller::topic_name;
use crate::zk::znodes::{ReplicaMap, TopicAssignment};

/// Characters of an illegal name a log line shows.
const SHOWN_CHARS: usize = 300;

/// The legal names among `names` (children of `/brokers/topics`); each other one is
/// logged and left out.
pub fn legal_topic_names(names: Vec<String>) -> Vec<String> {
    names
        .into_iter()
        .filter(|name| match topic_name::validate(name) {
            Ok(()) => true,
            Err(_) => {
                let shown: String = name.chars().take(SHOWN_CHARS).collect();
                tracing::error!(
                    topic = %shown,
                    bytes = name.len(),
                    "topic znode skipped: not a legal topic name (empty, '.' or '..', longer than {} characters, or a character other than ASCII alphanumerics, '.', '_' and '-')",
                    topic_name::MAX_NAME_LENGTH
                );
                false
            }
        })
        .collect()
}

/// `a` (the assignment znode of `topic`) as the controller may act on it.
pub fn checked_assignment(topic: &str, mut a: TopicAssignment) -> TopicAssignment {
    for (what, map) in [
        ("replicas", &mut a.partitions),
        ("adding replicas", &mut a.adding_replicas),
        ("removing replicas", &mut a.removing_replicas),
    ] {
        check_replica_map(topic, what, map);
    }
    a
}

fn check_replica_map(topic: &str, what: &str, map: &mut ReplicaMap) {
    let negative: Vec<i32> = map.0.range(..0).map(|(&p, _)| p).collect();
    for p in negative {
        tracing::error!(
            topic,
            partition = p,
            "partition with a negative index in the topic znode; ignored"
        );
        map.0.remove(&p);
    }
    for (p, replicas) in map.0.iter_mut() {
        let mut seen = BTreeSet::new();
        let before = replicas.clone();
        replicas.retain(|b| seen.insert(*b));
        if replicas.len() != before.len() {
            tracing::error!(topic, partition = p, listed = ?before, kept = ?replicas, "a broker listed twice in the {what} of the topic znode counts once");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn illegal_names_are_left_out_and_assignments_cleaned() {
        let names = vec![
            "ok".to_string(),
            "L".repeat(300),
            "..".into(),
            "a b".into(),
            "fine.too_1-x".into(),
        ];
        assert_eq!(legal_topic_names(names), ["ok", "fine.too_1-x"]);
        let a = TopicAssignment::new(
            "id".into(),
            BTreeMap::from([(0, vec![1, 1, 1]), (1, vec![2, 1, 2]), (-1, vec![1])]),
        );
        let a = checked_assignment("t", a);
        assert_eq!(
            a.partitions.0,
            BTreeMap::from([(0, vec![1]), (1, vec![2, 1])])
        );
    }
}
