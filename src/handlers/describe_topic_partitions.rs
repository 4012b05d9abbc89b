//! DescribeTopicPartitions: topics and partitions in pages, resumed from a cursor.
//! DESCRIBE on each topic: a topic named and denied answers TOPIC_AUTHORIZATION_FAILED,
//! and a request for every topic leaves it out; the operations are the requester's.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse,
};

use super::topic_name;
use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::controller::TopicInfo;
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    // An empty list asks for every topic. Topics are answered in name order so a cursor
    // (topic, first partition) can resume where the previous page stopped.
    let mut names: Vec<String> = if req.topics.is_empty() {
        let all: Vec<String> = broker
            .controller
            .topics()
            .iter()
            .map(|t| t.name.clone())
            .collect();
        ctx.filter_authorized(AclOperation::Describe, ResourceType::Topic, all, |n| n)
    } else {
        req.topics.iter().map(|t| t.name.0.to_string()).collect()
    };
    names.sort();
    names.dedup();
    let (start_topic, start_partition) = match &req.cursor {
        Some(c) => (Some(c.topic_name.0.to_string()), c.partition_index.max(0)),
        None => (None, 0),
    };
    let mut budget = req.response_partition_limit.max(1) as usize;
    let mut topics = Vec::new();
    let mut next_cursor = None;
    for name in names
        .into_iter()
        .filter(|n| start_topic.as_ref().is_none_or(|s| n >= s))
    {
        let first = if Some(&name) == start_topic.as_ref() {
            start_partition
        } else {
            0
        };
        let ops = ctx.authorized_operations(ResourceType::Topic, &name);
        let refused = |e: ResponseError| {
            DescribeTopicPartitionsResponseTopic::default()
                .with_name(Some(topic_name(&name)))
                .with_error_code(e.code())
                // Kafka answers the operations for an unknown name too.
                .with_topic_authorized_operations(ops)
        };
        if !ctx.authorize(AclOperation::Describe, ResourceType::Topic, &name) {
            topics.push(refused(ResponseError::TopicAuthorizationFailed));
            continue;
        }
        let Some(info) = broker.controller.topic(&name) else {
            topics.push(refused(ResponseError::UnknownTopicOrPartition));
            continue;
        };
        if budget == 0 {
            next_cursor = Some(
                Cursor::default()
                    .with_topic_name(topic_name(&name))
                    .with_partition_index(first),
            );
            break;
        }
        let (entry, stopped_at) = describe(&info, first, &mut budget, ops);
        topics.push(entry);
        if let Some(p) = stopped_at {
            next_cursor = Some(
                Cursor::default()
                    .with_topic_name(topic_name(&name))
                    .with_partition_index(p),
            );
            break;
        }
    }
    DescribeTopicPartitionsResponse::default()
        .with_topics(topics)
        .with_next_cursor(next_cursor)
}

/// Describes partitions from `first` while the budget lasts; returns where it stopped.
fn describe(
    info: &TopicInfo,
    first: i32,
    budget: &mut usize,
    ops: i32,
) -> (DescribeTopicPartitionsResponseTopic, Option<i32>) {
    let mut partitions = Vec::new();
    let mut stopped_at = None;
    for p in info.partitions.iter().filter(|p| p.partition >= first) {
        if *budget == 0 {
            stopped_at = Some(p.partition);
            break;
        }
        *budget -= 1;
        partitions.push(
            DescribeTopicPartitionsResponsePartition::default()
                .with_partition_index(p.partition)
                .with_leader_id(BrokerId(p.state.leader))
                .with_leader_epoch(p.state.leader_epoch)
                .with_replica_nodes(
                    p.assignment
                        .replicas
                        .iter()
                        .copied()
                        .map(BrokerId)
                        .collect(),
                )
                .with_isr_nodes(p.state.isr.iter().copied().map(BrokerId).collect())
                .with_eligible_leader_replicas(Some(Vec::new()))
                .with_last_known_elr(Some(Vec::new())),
        );
    }
    let topic = DescribeTopicPartitionsResponseTopic::default()
        .with_name(Some(topic_name(&info.name)))
        .with_topic_id(info.topic_id)
        .with_is_internal(info.is_internal())
        // The request has no flag: Kafka always answers the topic's operations.
        .with_topic_authorized_operations(ops)
        .with_partitions(partitions);
    (topic, stopped_at)
}
