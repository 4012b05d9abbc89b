//! The simple assignor of share groups (Kafka's `SimpleAssignor`): every assignable
//! partition of a subscribed topic goes to at least one member subscribed to it, and
//! every such member gets at least one partition of the topic. With more members than
//! partitions, partitions are shared (each by about members / partitions of them); with
//! more partitions than members, each partition goes to one member, spread evenly.
//!
//! Sharing a partition costs nothing here: its share-partition hands each record to one
//! member at a time. Unlike Kafka's, this assignor is not sticky; a share member gives
//! nothing up when its assignment moves (its acquired records stay locked to it until
//! acknowledged or timed out), so evenness is all that matters.

use std::collections::{BTreeMap, BTreeSet};

use super::Assignment;

/// `subscriptions`: member id → its topics; `assignable`: topic → the partitions that
/// may be assigned (those whose share-group state is initialized).
pub fn assign(
    subscriptions: &BTreeMap<String, BTreeSet<String>>,
    assignable: &BTreeMap<String, BTreeSet<i32>>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = subscriptions
        .keys()
        .map(|id| (id.clone(), Assignment::new()))
        .collect();
    // A rotating start, so that with several topics the members receiving one more
    // than the others are not always the first ones.
    let mut rotation = 0usize;
    for (topic, partitions) in assignable {
        let members: Vec<&String> = subscriptions
            .iter()
            .filter(|(_, topics)| topics.contains(topic))
            .map(|(id, _)| id)
            .collect();
        let partitions: Vec<i32> = partitions.iter().copied().collect();
        if members.is_empty() || partitions.is_empty() {
            continue;
        }
        let (m, n) = (members.len(), partitions.len());
        let mut give = |member: &String, p: i32| {
            if let Some(a) = out.get_mut(member) {
                a.entry(topic.clone()).or_default().insert(p);
            }
        };
        if m >= n {
            for (i, member) in members.iter().enumerate() {
                give(member, partitions[(i + rotation) % n]);
            }
        } else {
            for (j, p) in partitions.iter().enumerate() {
                give(members[(j + rotation) % m], *p);
            }
        }
        rotation += 1;
    }
    out
}
