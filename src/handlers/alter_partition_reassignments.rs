//! AlterPartitionReassignments (ZooKeeper mode, KIP-455): moves partitions to new
//! replicas, or cancels a move (no replicas). Done by the controller; as Kafka 3.9 does,
//! any other broker answers NOT_CONTROLLER as a whole (the admin client then sends it
//! to the controller). Each partition is answered once its reassignment is started.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
};

use super::{str_bytes, topic_name};
use crate::broker::Broker;
use crate::controller::zk::context::TopicPartition;
use crate::controller::zk::partition_reassignment::ReassignmentResults;
use crate::controller::zk::reassignment::default_message;
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    _ctx: RequestContext,
    req: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    // A partition named twice: the last one counts, as Kafka's map of them has it.
    let asked: BTreeMap<TopicPartition, Option<Vec<i32>>> = req
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                let tp = TopicPartition::new(t.name.0.to_string(), p.partition_index);
                let target = p.replicas.as_ref().map(|r| r.iter().map(|b| b.0).collect());
                (tp, target)
            })
        })
        .collect();
    let result = broker.controller.alter_partition_reassignments(asked).await;
    response(result)
}

fn response(
    result: Result<ReassignmentResults, ResponseError>,
) -> AlterPartitionReassignmentsResponse {
    let results = match result {
        Ok(r) => r,
        Err(e) => {
            return AlterPartitionReassignmentsResponse::default()
                .with_error_code(e.code())
                .with_error_message(default_message(e).map(str_bytes))
        }
    };
    let mut by_topic: BTreeMap<String, Vec<ReassignablePartitionResponse>> = BTreeMap::new();
    for (tp, r) in results {
        let (code, message) = match r {
            Ok(()) => (0, None),
            Err((e, m)) => (e.code(), m.or_else(|| default_message(e))),
        };
        by_topic.entry(tp.topic).or_default().push(
            ReassignablePartitionResponse::default()
                .with_partition_index(tp.partition)
                .with_error_code(code)
                .with_error_message(message.map(str_bytes)),
        );
    }
    AlterPartitionReassignmentsResponse::default().with_responses(
        by_topic
            .into_iter()
            .map(|(t, partitions)| {
                ReassignableTopicResponse::default()
                    .with_name(topic_name(&t))
                    .with_partitions(partitions)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_controller_is_a_top_level_error() {
        let r = response(Err(ResponseError::NotController));
        assert_eq!(r.error_code, ResponseError::NotController.code());
        assert!(r.responses.is_empty());
    }

    #[test]
    fn partitions_are_answered_by_topic() {
        let results: ReassignmentResults = [
            (TopicPartition::new("a", 0), Ok(())),
            (
                TopicPartition::new("a", 1),
                Err((ResponseError::NoReassignmentInProgress, None)),
            ),
        ]
        .into_iter()
        .collect();
        let r = response(Ok(results));
        assert_eq!(r.error_code, 0);
        let a = &r.responses[0];
        assert_eq!(a.name.0.as_str(), "a");
        assert_eq!(a.partitions[0].error_code, 0);
        assert_eq!(a.partitions[0].error_message, None);
        assert_eq!(a.partitions[1].error_code, 85);
        assert_eq!(
            a.partitions[1].error_message.as_deref(),
            Some("No partition reassignment is in progress.")
        );
    }
}
