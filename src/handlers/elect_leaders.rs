//! ElectLeaders (ZooKeeper mode): preferred or unclean leader elections, done by the
//! controller; as Kafka 3.9 does, any other broker answers NOT_CONTROLLER for each
//! partition (the admin client sends it to the controller). Without a partition list,
//! every partition is considered and those whose leader is already right are left out
//! of the answer.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse};

use super::{str_bytes, topic_name};
use crate::broker::Broker;
use crate::controller::zk::context::TopicPartition;
use crate::controller::zk::replica_election::{ElectionResults, ElectionType};
use crate::router::RequestContext;

/// Kafka bounds nothing here; a negative or absurd timeout still ends.
const MAX_TIMEOUT: Duration = Duration::from_secs(300);

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: ElectLeadersRequest,
) -> ElectLeadersResponse {
    let all = req.topic_partitions.is_none();
    let asked: BTreeSet<TopicPartition> = match &req.topic_partitions {
        Some(topics) => topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|&p| TopicPartition::new(t.topic.0.to_string(), p))
            })
            .collect(),
        None => broker
            .controller
            .topics()
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| TopicPartition::new(t.name.clone(), p.partition))
            })
            .collect(),
    };
    // v0 has no election type: preferred.
    let code = if ctx.api_version == 0 {
        0
    } else {
        req.election_type
    };
    let Some(election) = ElectionType::from_code(code) else {
        let e = (
            ResponseError::InvalidRequest,
            Some(format!("unknown election type {code}")),
        );
        let results = asked.into_iter().map(|tp| (tp, Err(e.clone()))).collect();
        return response(ResponseError::InvalidRequest.code(), results, all);
    };
    let timeout = Duration::from_millis(req.timeout_ms.max(0) as u64).min(MAX_TIMEOUT);
    let results = broker
        .controller
        .elect_leaders(asked, election, timeout)
        .await;
    response(0, results, all)
}

/// The response, by topic; for an all-partitions request, without the partitions whose
/// election was not needed.
fn response(error_code: i16, results: ElectionResults, all: bool) -> ElectLeadersResponse {
    let mut by_topic: BTreeMap<String, Vec<PartitionResult>> = BTreeMap::new();
    for (tp, result) in results {
        let (code, message) = match result {
            Ok(_) => (0, None),
            Err((e, m)) => (e.code(), m),
        };
        if all && code == ResponseError::ElectionNotNeeded.code() {
            continue;
        }
        by_topic.entry(tp.topic).or_default().push(
            PartitionResult::default()
                .with_partition_id(tp.partition)
                .with_error_code(code)
                .with_error_message(message.map(str_bytes)),
        );
    }
    ElectLeadersResponse::default()
        .with_error_code(error_code)
        .with_replica_election_results(
            by_topic
                .into_iter()
                .map(|(t, partitions)| {
                    ReplicaElectionResult::default()
                        .with_topic(topic_name(&t))
                        .with_partition_result(partitions)
                })
                .collect(),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn results() -> ElectionResults {
        [
            (TopicPartition::new("a", 0), Ok(2)),
            (
                TopicPartition::new("a", 1),
                Err((ResponseError::ElectionNotNeeded, None)),
            ),
            (
                TopicPartition::new("b", 0),
                Err((
                    ResponseError::PreferredLeaderNotAvailable,
                    Some("no".to_string()),
                )),
            ),
        ]
        .into_iter()
        .collect()
    }

    fn codes(r: &ElectLeadersResponse) -> Vec<(String, i32, i16)> {
        r.replica_election_results
            .iter()
            .flat_map(|t| {
                t.partition_result
                    .iter()
                    .map(|p| (t.topic.0.to_string(), p.partition_id, p.error_code))
            })
            .collect()
    }

    #[test]
    fn named_partitions_are_all_answered() {
        let r = response(0, results(), false);
        assert_eq!(
            codes(&r),
            vec![
                ("a".into(), 0, 0),
                ("a".into(), 1, ResponseError::ElectionNotNeeded.code()),
                (
                    "b".into(),
                    0,
                    ResponseError::PreferredLeaderNotAvailable.code()
                ),
            ]
        );
        let b = &r.replica_election_results[1].partition_result[0];
        assert_eq!(b.error_message.as_deref(), Some("no"));
    }

    #[test]
    fn all_partitions_leave_out_elections_not_needed() {
        let r = response(0, results(), true);
        assert_eq!(
            codes(&r),
            vec![
                ("a".into(), 0, 0),
                (
                    "b".into(),
                    0,
                    ResponseError::PreferredLeaderNotAvailable.code()
                ),
            ]
        );
    }
}
