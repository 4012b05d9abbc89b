//! A consumer group's records in `__consumer_offsets`: the values a change writes and
//! the tombstones that delete a member or the whole group. Assignments are stored by
//! topic id, as Kafka stores them; a topic deleted meanwhile is left out.

use std::collections::{BTreeMap, BTreeSet};

use super::{Assignment, ConsumerGroup, ConsumerMember, TopicImage};
use crate::coordinator::group::records::consumer::{
    member_state, ConsumerKey, ConsumerValue, CurrentAssignment, MemberMetadata, RegularExpression,
    TopicMetadata, TopicPartitions,
};

/// Records of one group: key and value (None: a tombstone).
pub type ConsumerRecords = Vec<(ConsumerKey, Option<ConsumerValue>)>;

/// skua resolves regexes when the topics change and keeps no metadata image version;
/// version 0 makes a Kafka coordinator reading the record resolve it afresh.
const REGEX_VERSION: i64 = 0;

pub fn member_metadata(m: &ConsumerMember) -> MemberMetadata {
    MemberMetadata {
        instance_id: m.instance_id.clone(),
        rack_id: m.rack_id.clone(),
        client_id: m.client_id.clone(),
        client_host: m.client_host.clone(),
        subscribed_topic_names: m.subscribed.clone(),
        subscribed_topic_regex: m.subscribed_regex.clone(),
        rebalance_timeout_ms: m.rebalance_timeout_ms,
        // skua serves every assignor name with its uniform assignor and keeps none.
        server_assignor: None,
    }
}

pub fn member_record(m: &ConsumerMember) -> (ConsumerKey, Option<ConsumerValue>) {
    (
        ConsumerKey::Member(m.member_id.clone()),
        Some(ConsumerValue::Member(member_metadata(m))),
    )
}

/// Record 8: the member's epochs and current assignment, with Kafka's member state.
pub fn current_assignment_record(
    m: &ConsumerMember,
    target: Option<&Assignment>,
    assignment_epoch: i32,
    topics: &TopicImage,
) -> (ConsumerKey, Option<ConsumerValue>) {
    let state = if !m.pending_revocation.is_empty() {
        member_state::UNREVOKED_PARTITIONS
    } else if m.member_epoch == assignment_epoch && target.is_some_and(|t| *t != m.assigned) {
        member_state::UNRELEASED_PARTITIONS
    } else {
        member_state::STABLE
    };
    let value = CurrentAssignment {
        member_epoch: m.member_epoch,
        previous_member_epoch: m.previous_epoch,
        state,
        assigned: with_epochs(by_id(&m.assigned, topics), m, topics),
        pending_revocation: with_epochs(by_id(&m.pending_revocation, topics), m, topics),
    };
    (
        ConsumerKey::CurrentAssignment(m.member_id.clone()),
        Some(ConsumerValue::CurrentAssignment(value)),
    )
}

pub fn target_record(
    member_id: &str,
    target: &Assignment,
    topics: &TopicImage,
) -> (ConsumerKey, Option<ConsumerValue>) {
    (
        ConsumerKey::TargetAssignment(member_id.to_string()),
        Some(ConsumerValue::TargetAssignment(by_id(target, topics))),
    )
}

pub fn regex_record(
    regex: &str,
    matched: &[String],
    now_ms: i64,
) -> (ConsumerKey, Option<ConsumerValue>) {
    let value = RegularExpression {
        topics: matched.to_vec(),
        version: REGEX_VERSION,
        timestamp_ms: now_ms,
    };
    (
        ConsumerKey::RegularExpression(regex.to_string()),
        Some(ConsumerValue::RegularExpression(value)),
    )
}

pub fn partition_metadata_record(
    metadata: &BTreeMap<String, i32>,
    topics: &TopicImage,
) -> (ConsumerKey, Option<ConsumerValue>) {
    let value = metadata
        .iter()
        .filter_map(|(name, n)| {
            Some(TopicMetadata {
                topic_id: topics.topic_id(name)?,
                topic_name: name.clone(),
                num_partitions: *n,
            })
        })
        .collect();
    (
        ConsumerKey::PartitionMetadata,
        Some(ConsumerValue::PartitionMetadata(value)),
    )
}

/// The tombstones of one member, in Kafka's order: current assignment, target, member.
pub fn member_tombstones(member_id: &str) -> ConsumerRecords {
    vec![
        (ConsumerKey::CurrentAssignment(member_id.to_string()), None),
        (ConsumerKey::TargetAssignment(member_id.to_string()), None),
        (ConsumerKey::Member(member_id.to_string()), None),
    ]
}

/// The tombstones that delete a group and everything recorded about it, in Kafka's
/// order: the group epoch goes last, once nothing refers to the group.
pub fn tombstones(g: &ConsumerGroup) -> ConsumerRecords {
    let mut out = ConsumerRecords::new();
    for id in g.members.keys() {
        out.push((ConsumerKey::CurrentAssignment(id.clone()), None));
    }
    let targeted: BTreeSet<&String> = g.members.keys().chain(g.target.keys()).collect();
    for id in targeted {
        out.push((ConsumerKey::TargetAssignment(id.clone()), None));
    }
    out.push((ConsumerKey::TargetAssignmentMetadata, None));
    for id in g.members.keys() {
        out.push((ConsumerKey::Member(id.clone()), None));
    }
    for regex in g.regexes.keys() {
        out.push((ConsumerKey::RegularExpression(regex.clone()), None));
    }
    out.push((ConsumerKey::PartitionMetadata, None));
    out.push((ConsumerKey::Metadata, None));
    out
}

/// An assignment by topic id; a topic deleted meanwhile is left out.
pub fn by_id(a: &Assignment, topics: &TopicImage) -> Vec<TopicPartitions> {
    a.iter()
        .filter_map(|(name, ps)| {
            Some(TopicPartitions {
                topic_id: topics.topic_id(name)?,
                partitions: ps.iter().copied().collect(),
                assignment_epochs: Vec::new(),
            })
        })
        .collect()
}

/// Each partition's AssignmentEpochs entry, aligned with its partitions, as Kafka 4.4
/// writes them (a topic with no partitions has none, Kafka's default).
fn with_epochs(
    mut tps: Vec<TopicPartitions>,
    m: &ConsumerMember,
    topics: &TopicImage,
) -> Vec<TopicPartitions> {
    for tp in &mut tps {
        let Some(name) = topics.topic_name(tp.topic_id) else {
            continue;
        };
        tp.assignment_epochs = tp
            .partitions
            .iter()
            .map(|p| m.assignment_epoch_of(name, *p))
            .collect();
    }
    tps
}

/// An assignment by topic name; partitions of unknown topic ids are dropped.
pub fn by_name(tps: Vec<TopicPartitions>, topics: &TopicImage) -> Assignment {
    let mut out = Assignment::new();
    for tp in tps {
        match topics.topic_name(tp.topic_id) {
            Some(name) => out
                .entry(name.to_string())
                .or_default()
                .extend(tp.partitions),
            None => {
                tracing::debug!(topic_id = %tp.topic_id, "dropping partitions of a deleted topic")
            }
        }
    }
    out
}
