//! The controller's requests laid out as each version carries them (Kafka's
//! `LeaderAndIsrRequest.Builder`, `UpdateMetadataRequest.Builder` and
//! `StopReplicaRequest.Builder`): partitions grouped by topic from LeaderAndIsr v2,
//! UpdateMetadata v5 and StopReplica v3, listed one by one with their topic's name before;
//! StopReplica below v3 has one `delete_partitions` flag for the whole request, so the
//! partitions to delete and those to keep go in two requests.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::leader_and_isr_request::{
    LeaderAndIsrLiveLeader, LeaderAndIsrPartitionState, LeaderAndIsrTopicState,
};
use kafka_protocol::messages::stop_replica_request::{
    StopReplicaPartitionState, StopReplicaPartitionV0, StopReplicaTopicState, StopReplicaTopicV1,
};
use kafka_protocol::messages::update_metadata_request::{
    UpdateMetadataBroker, UpdateMetadataPartitionState, UpdateMetadataTopicState,
};
use kafka_protocol::messages::{
    BrokerId, LeaderAndIsrRequest, StopReplicaRequest, TopicName, UpdateMetadataRequest,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::context::TopicPartition;
use super::requests::Header;

fn topic_name(t: &str) -> TopicName {
    TopicName(StrBytes::from_string(t.to_string()))
}

fn topic_id(ids: &BTreeMap<String, Uuid>, topic: &TopicName) -> Uuid {
    ids.get(topic.0.as_str()).copied().unwrap_or(Uuid::nil())
}

/// LeaderAndIsr for one broker; `states` carry their topic's name.
pub fn leader_and_isr(
    version: i16,
    header: Header,
    broker_epoch: i64,
    states: Vec<LeaderAndIsrPartitionState>,
    topic_ids: &BTreeMap<String, Uuid>,
    live_leaders: Vec<LeaderAndIsrLiveLeader>,
) -> LeaderAndIsrRequest {
    let states = states.into_iter().map(|s| {
        // Only v6 carries a recovery state; older brokers know only a recovered leader,
        // the one state a controller at their inter-broker protocol elects.
        match version >= 6 {
            true => s,
            false => s.with_leader_recovery_state(0),
        }
    });
    let request = LeaderAndIsrRequest::default()
        .with_controller_id(BrokerId(header.controller_id))
        .with_controller_epoch(header.controller_epoch)
        .with_broker_epoch(broker_epoch)
        .with_live_leaders(live_leaders);
    if version < 2 {
        return request.with_ungrouped_partition_states(states.collect());
    }
    let mut topics: BTreeMap<TopicName, LeaderAndIsrTopicState> = BTreeMap::new();
    for state in states {
        topics
            .entry(state.topic_name.clone())
            .or_insert_with(|| {
                LeaderAndIsrTopicState::default()
                    .with_topic_name(state.topic_name.clone())
                    .with_topic_id(topic_id(topic_ids, &state.topic_name))
            })
            .partition_states
            .push(state);
    }
    request.with_topic_states(topics.into_values().collect())
}

/// UpdateMetadata for one broker; `states` carry their topic's name.
pub fn update_metadata(
    version: i16,
    header: Header,
    broker_epoch: i64,
    states: Vec<UpdateMetadataPartitionState>,
    topic_ids: &BTreeMap<String, Uuid>,
    live_brokers: Vec<UpdateMetadataBroker>,
) -> UpdateMetadataRequest {
    let request = UpdateMetadataRequest::default()
        .with_controller_id(BrokerId(header.controller_id))
        .with_controller_epoch(header.controller_epoch)
        .with_broker_epoch(broker_epoch)
        .with_live_brokers(live_brokers);
    if version < 5 {
        return request.with_ungrouped_partition_states(states);
    }
    let mut topics: BTreeMap<TopicName, UpdateMetadataTopicState> = BTreeMap::new();
    for state in states {
        topics
            .entry(state.topic_name.clone())
            .or_insert_with(|| {
                UpdateMetadataTopicState::default()
                    .with_topic_name(state.topic_name.clone())
                    .with_topic_id(topic_id(topic_ids, &state.topic_name))
            })
            .partition_states
            .push(state);
    }
    request.with_topic_states(topics.into_values().collect())
}

/// StopReplica for one broker from (partition, leader epoch, delete): one request from
/// v3, else one with the partitions to delete and one with the rest (each only if it has
/// any). Each comes with the partitions it deletes.
pub fn stop_replica(
    version: i16,
    header: Header,
    broker_epoch: i64,
    states: Vec<(TopicPartition, i32, bool)>,
) -> Vec<(StopReplicaRequest, BTreeSet<TopicPartition>)> {
    let request = StopReplicaRequest::default()
        .with_controller_id(BrokerId(header.controller_id))
        .with_controller_epoch(header.controller_epoch)
        .with_broker_epoch(broker_epoch);
    if version >= 3 {
        return vec![stop_replica_grouped(request, states)];
    }
    let (delete, keep): (Vec<_>, Vec<_>) = states.into_iter().partition(|(_, _, d)| *d);
    let mut out = Vec::new();
    for (flag, group) in [(true, delete), (false, keep)] {
        if group.is_empty() {
            continue;
        }
        let partitions: BTreeSet<TopicPartition> = group.into_iter().map(|(tp, ..)| tp).collect();
        let request = stop_replica_listed(
            request.clone().with_delete_partitions(flag),
            version,
            &partitions,
        );
        let deleting = match flag {
            true => partitions,
            false => BTreeSet::new(),
        };
        out.push((request, deleting));
    }
    out
}

/// StopReplica v3+: every partition with its leader epoch and its own delete flag.
fn stop_replica_grouped(
    request: StopReplicaRequest,
    states: Vec<(TopicPartition, i32, bool)>,
) -> (StopReplicaRequest, BTreeSet<TopicPartition>) {
    let deleting = states
        .iter()
        .filter(|(_, _, delete)| *delete)
        .map(|(tp, _, _)| tp.clone())
        .collect();
    let mut topics: BTreeMap<String, StopReplicaTopicState> = BTreeMap::new();
    for (tp, leader_epoch, delete) in states {
        topics
            .entry(tp.topic.clone())
            .or_insert_with(|| {
                StopReplicaTopicState::default().with_topic_name(topic_name(&tp.topic))
            })
            .partition_states
            .push(
                StopReplicaPartitionState::default()
                    .with_partition_index(tp.partition)
                    .with_leader_epoch(leader_epoch)
                    .with_delete_partition(delete),
            );
    }
    (
        request.with_topic_states(topics.into_values().collect()),
        deleting,
    )
}

/// StopReplica v0–2: the partitions listed, one by one (v0) or by topic (v1, v2).
fn stop_replica_listed(
    request: StopReplicaRequest,
    version: i16,
    partitions: &BTreeSet<TopicPartition>,
) -> StopReplicaRequest {
    if version == 0 {
        return request.with_ungrouped_partitions(
            partitions
                .iter()
                .map(|tp| {
                    StopReplicaPartitionV0::default()
                        .with_topic_name(topic_name(&tp.topic))
                        .with_partition_index(tp.partition)
                })
                .collect(),
        );
    }
    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        topics.entry(&tp.topic).or_default().push(tp.partition);
    }
    request.with_topics(
        topics
            .into_iter()
            .map(|(name, indexes)| {
                StopReplicaTopicV1::default()
                    .with_name(topic_name(name))
                    .with_partition_indexes(indexes)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::Encodable;

    const HEADER: Header = Header {
        controller_id: 1,
        controller_epoch: 3,
    };

    fn states() -> Vec<(TopicPartition, i32, bool)> {
        vec![
            (TopicPartition::new("a", 0), 4, true),
            (TopicPartition::new("a", 1), 4, false),
            (TopicPartition::new("b", 0), 2, true),
        ]
    }

    #[test]
    fn stop_replica_below_v3_splits_deletes_from_the_rest() {
        for version in 0..=2 {
            let out = stop_replica(version, HEADER, 9, states());
            assert_eq!(out.len(), 2, "v{version}");
            let (delete, deleting) = &out[0];
            let (keep, keeping) = &out[1];
            assert!(delete.delete_partitions && !keep.delete_partitions);
            assert_eq!(
                deleting,
                &BTreeSet::from([TopicPartition::new("a", 0), TopicPartition::new("b", 0)])
            );
            assert!(keeping.is_empty(), "nothing deleted: no answer awaited");
            for (request, _) in &out {
                let mut buf = bytes::BytesMut::new();
                request.encode(&mut buf, version).unwrap();
            }
            match version {
                0 => assert_eq!(delete.ungrouped_partitions.len(), 2),
                _ => assert_eq!(
                    delete
                        .topics
                        .iter()
                        .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
                        .collect::<Vec<_>>(),
                    vec![("a".to_string(), vec![0]), ("b".to_string(), vec![0])]
                ),
            }
        }
        let out = stop_replica(1, HEADER, 9, vec![(TopicPartition::new("a", 1), 4, false)]);
        assert_eq!(out.len(), 1, "no empty request for the deletes");
    }

    #[test]
    fn stop_replica_from_v3_is_one_request_with_each_partitions_flag() {
        for version in 3..=4 {
            let out = stop_replica(version, HEADER, 9, states());
            assert_eq!(out.len(), 1);
            let (request, deleting) = &out[0];
            assert_eq!(deleting.len(), 2);
            assert!(!request.delete_partitions);
            let flags: Vec<(i32, bool)> = request.topic_states[0]
                .partition_states
                .iter()
                .map(|p| (p.leader_epoch, p.delete_partition))
                .collect();
            assert_eq!(flags, vec![(4, true), (4, false)]);
            let mut buf = bytes::BytesMut::new();
            request.encode(&mut buf, version).unwrap();
        }
    }

    #[test]
    fn leader_and_isr_and_update_metadata_encode_at_every_version() {
        let ids = BTreeMap::from([("a".to_string(), Uuid::from_u128(7))]);
        let state = LeaderAndIsrPartitionState::default()
            .with_topic_name(topic_name("a"))
            .with_leader_recovery_state(1);
        for version in 0..=7 {
            let request = leader_and_isr(version, HEADER, 9, vec![state.clone()], &ids, vec![]);
            let mut buf = bytes::BytesMut::new();
            request.encode(&mut buf, version).unwrap();
            assert_eq!(
                request.ungrouped_partition_states.len(),
                (version < 2) as usize
            );
            if version >= 2 {
                assert_eq!(request.topic_states[0].topic_id, Uuid::from_u128(7));
            }
        }
        let state = UpdateMetadataPartitionState::default().with_topic_name(topic_name("a"));
        for version in 3..=8 {
            let request = update_metadata(version, HEADER, 9, vec![state.clone()], &ids, vec![]);
            let mut buf = bytes::BytesMut::new();
            request.encode(&mut buf, version).unwrap();
            assert_eq!(
                request.ungrouped_partition_states.len(),
                (version < 5) as usize
            );
        }
    }
}
