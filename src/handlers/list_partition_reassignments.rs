//! ListPartitionReassignments (ZooKeeper mode, KIP-455): the partitions being moved,
//! with their full replica set and the replicas being added and removed. Answered by the
//! controller; NOT_CONTROLLER elsewhere, as Kafka 3.9 does.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    BrokerId, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};

use super::{str_bytes, topic_name};
use crate::broker::Broker;
use crate::controller::zk::context::TopicPartition;
use crate::controller::zk::partition_reassignment::OngoingReassignments;
use crate::controller::zk::reassignment::default_message;
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    _ctx: RequestContext,
    req: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    let asked: Option<BTreeSet<TopicPartition>> = req.topics.as_ref().map(|topics| {
        topics
            .iter()
            .flat_map(|t| {
                t.partition_indexes
                    .iter()
                    .map(|&p| TopicPartition::new(t.name.0.to_string(), p))
            })
            .collect()
    });
    let result = broker.controller.list_partition_reassignments(asked).await;
    response(result)
}

fn ids(v: &[i32]) -> Vec<BrokerId> {
    v.iter().map(|&b| BrokerId(b)).collect()
}

fn response(
    result: Result<OngoingReassignments, ResponseError>,
) -> ListPartitionReassignmentsResponse {
    let ongoing = match result {
        Ok(r) => r,
        Err(e) => {
            return ListPartitionReassignmentsResponse::default()
                .with_error_code(e.code())
                .with_error_message(default_message(e).map(str_bytes))
        }
    };
    let mut by_topic: BTreeMap<String, Vec<OngoingPartitionReassignment>> = BTreeMap::new();
    for (tp, a) in ongoing {
        by_topic.entry(tp.topic).or_default().push(
            OngoingPartitionReassignment::default()
                .with_partition_index(tp.partition)
                .with_replicas(ids(&a.replicas))
                .with_adding_replicas(ids(&a.adding))
                .with_removing_replicas(ids(&a.removing)),
        );
    }
    ListPartitionReassignmentsResponse::default().with_topics(
        by_topic
            .into_iter()
            .map(|(t, partitions)| {
                OngoingTopicReassignment::default()
                    .with_name(topic_name(&t))
                    .with_partitions(partitions)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::zk::reassignment::ReplicaAssignment;

    #[test]
    fn lists_full_adding_and_removing_replicas() {
        let a = ReplicaAssignment::settled(vec![1, 2]).reassign_to(&[2, 3]);
        let r = response(Ok([(TopicPartition::new("t", 0), a)].into_iter().collect()));
        let p = &r.topics[0].partitions[0];
        assert_eq!(ids(&[2, 3, 1]), p.replicas);
        assert_eq!(ids(&[3]), p.adding_replicas);
        assert_eq!(ids(&[1]), p.removing_replicas);
        let r = response(Err(ResponseError::NotController));
        assert_eq!(r.error_code, ResponseError::NotController.code());
    }
}
