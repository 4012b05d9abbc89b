//! OffsetCommit: a group's consumed positions, written to `__consumer_offsets` and
//! acknowledged once appended. v2–v4 may ask for a retention time of their own.
//! Kafka's checks: READ on the group (else every partition answers
//! GROUP_AUTHORIZATION_FAILED), READ on each topic (else its partitions answer
//! TOPIC_AUTHORIZATION_FAILED).

use std::sync::Arc;

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};

use kafka_protocol::error::ResponseError;

use super::commit_slots::CommitSlots;
use super::now_ms;
use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::coordinator::group::shard::{CommitRequest, Committer};
use crate::router::RequestContext;

/// The last version carrying `retention_time_ms`.
const RETENTION_VERSION_MAX: i16 = 4;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: OffsetCommitRequest,
) -> OffsetCommitResponse {
    if !ctx.authorize(AclOperation::Read, ResourceType::Group, &req.group_id) {
        return refused(&req, ResponseError::GroupAuthorizationFailed);
    }
    let expire = (ctx.api_version <= RETENTION_VERSION_MAX && req.retention_time_ms >= 0)
        .then(|| now_ms().saturating_add(req.retention_time_ms));
    let mut slots = CommitSlots::default();
    for (t, topic) in req.topics.iter().enumerate() {
        if !ctx.authorize(AclOperation::Read, ResourceType::Topic, &topic.name) {
            for p in &topic.partitions {
                slots.refuse(
                    t,
                    p.partition_index,
                    ResponseError::TopicAuthorizationFailed,
                );
            }
            continue;
        }
        let known = broker.controller.topic(&topic.name);
        for p in &topic.partitions {
            let commit = CommitRequest {
                topic: topic.name.to_string(),
                partition: p.partition_index,
                offset: p.committed_offset,
                leader_epoch: p.committed_leader_epoch,
                metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
            };
            slots.add(t, known.as_deref(), commit);
        }
    }
    let commits = std::mem::take(&mut slots.commits);
    let results = broker
        .groups
        .commit_offsets(
            &req.group_id,
            Committer {
                member_id: req.member_id.to_string(),
                instance: req.group_instance_id.as_ref().map(|s| s.to_string()),
                generation_id_or_member_epoch: req.generation_id_or_member_epoch,
                api_version: ctx.api_version,
            },
            expire,
            commits,
        )
        .await;
    let mut topics: Vec<OffsetCommitResponseTopic> = req
        .topics
        .iter()
        .map(|t| OffsetCommitResponseTopic::default().with_name(t.name.clone()))
        .collect();
    for (t, partition, error) in slots.answers(&results) {
        topics[t].partitions.push(
            OffsetCommitResponsePartition::default()
                .with_partition_index(partition)
                .with_error_code(error.map_or(0, |e| e.code())),
        );
    }
    OffsetCommitResponse::default().with_topics(topics)
}

/// Every partition of the request answering `error` (Kafka's `getErrorResponse`).
fn refused(req: &OffsetCommitRequest, error: ResponseError) -> OffsetCommitResponse {
    let topics = req
        .topics
        .iter()
        .map(|t| {
            OffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(error.code())
                        })
                        .collect(),
                )
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}
