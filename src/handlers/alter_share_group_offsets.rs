//! AlterShareGroupOffsets (KIP-932, v0): an empty share group's share-partitions start
//! again at the given offsets (`kafka-share-groups.sh --reset-offsets --execute`). As
//! Kafka's group coordinator: the partitions are recorded as initializing in the group,
//! the share coordinator initializes each one's state anew (under the group's epoch, or
//! past the state's own where it has some, `GroupCoordinator::alter_share_group_offsets`),
//! and the group records them as initialized; a share-partition loaded here under the
//! old state is dropped, so it reloads from the new one. A share group that does not
//! exist is created, empty (Kafka 4.2+'s "get or create"), by the first of those
//! records; a group of another kind is GROUP_ID_NOT_FOUND.
//!
//! Kafka's checks: share groups enabled (`share.version`), else UNSUPPORTED_VERSION;
//! READ on the group (GROUP_AUTHORIZATION_FAILED); the group empty (NON_EMPTY_GROUP);
//! READ on each topic (TOPIC_AUTHORIZATION_FAILED), the topic and partition existing
//! (UNKNOWN_TOPIC_OR_PARTITION), a start offset of at least 0 (INVALID_REQUEST).

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_share_group_offsets_response::{
    AlterShareGroupOffsetsResponsePartition, AlterShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::{AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse};
use uuid::Uuid;

use super::{str_bytes, topic_name};
use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::coordinator::share::SharePartitionKey;
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: AlterShareGroupOffsetsRequest,
) -> AlterShareGroupOffsetsResponse {
    let refuse = |e: ResponseError, why: Option<String>| {
        AlterShareGroupOffsetsResponse::default()
            .with_error_code(e.code())
            .with_error_message(why.map(str_bytes))
    };
    if !broker.groups.share_groups_enabled() {
        return refuse(ResponseError::UnsupportedVersion, None);
    }
    let group_id = req.group_id.0.to_string();
    if !ctx.authorize(AclOperation::Read, ResourceType::Group, &group_id) {
        return refuse(ResponseError::GroupAuthorizationFailed, None);
    }
    // Every partition in request order: its topic, and either the error it is answered
    // with or its place among those sent to the group coordinator.
    let mut answers: Vec<(String, Uuid, i32, Result<usize, ResponseError>)> = Vec::new();
    let mut offsets: Vec<(Uuid, String, i32, i64)> = Vec::new();
    for t in &req.topics {
        let name = t.topic_name.0.to_string();
        let topic = broker.controller.topic(&name);
        let topic_id = topic.as_ref().map_or(Uuid::nil(), |t| t.topic_id);
        for p in &t.partitions {
            let checked = if !ctx.authorize(AclOperation::Read, ResourceType::Topic, &name) {
                Err(ResponseError::TopicAuthorizationFailed)
            } else if !topic.as_ref().is_some_and(|t| {
                t.partitions
                    .iter()
                    .any(|q| q.partition == p.partition_index)
            }) {
                Err(ResponseError::UnknownTopicOrPartition)
            } else if p.start_offset < 0 {
                Err(ResponseError::InvalidRequest)
            } else {
                offsets.push((topic_id, name.clone(), p.partition_index, p.start_offset));
                Ok(offsets.len() - 1)
            };
            answers.push((name.clone(), topic_id, p.partition_index, checked));
        }
    }
    // The share coordinator's topic, as a first ShareGroupHeartbeat creates it: Kafka's
    // persister finds (so creates) the share coordinator itself.
    if !offsets.is_empty() {
        if let Err(e) = super::find_coordinator::ensure_share_state_topic(&broker).await {
            return refuse(e, None);
        }
    }
    let outcomes = match broker
        .groups
        .alter_share_group_offsets(&group_id, &offsets)
        .await
    {
        Ok(o) => o,
        Err(e) => {
            let why = match e {
                ResponseError::NonEmptyGroup => Some(format!(
                    "Share group {group_id} is not empty: its offsets cannot be altered."
                )),
                ResponseError::GroupIdNotFound => Some(format!("Group {group_id} not found.")),
                _ => None,
            };
            return refuse(e, why);
        }
    };
    // Share-partitions loaded here under the old state reload from the new one.
    for (topic_id, _, partition, _) in &offsets {
        broker.shares.partitions.remove(&SharePartitionKey {
            group_id: group_id.clone(),
            topic_id: *topic_id,
            partition: *partition,
        });
    }
    let mut topics: Vec<AlterShareGroupOffsetsResponseTopic> = Vec::new();
    for (name, topic_id, partition, checked) in answers {
        let error = match checked {
            Ok(i) => outcomes.get(i).cloned().unwrap_or(Ok(())).err(),
            Err(e) => Some(e),
        };
        let answer = AlterShareGroupOffsetsResponsePartition::default()
            .with_partition_index(partition)
            .with_error_code(error.map_or(0, |e| e.code()));
        match topics.iter_mut().find(|t| t.topic_name.0.as_str() == name) {
            Some(t) => t.partitions.push(answer),
            None => topics.push(
                AlterShareGroupOffsetsResponseTopic::default()
                    .with_topic_name(topic_name(&name))
                    .with_topic_id(topic_id)
                    .with_partitions(vec![answer]),
            ),
        }
    }
    AlterShareGroupOffsetsResponse::default().with_responses(topics)
}
