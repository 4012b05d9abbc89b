//! DeleteShareGroupOffsets (KIP-932, v0): an empty share group forgets its state for
//! whole topics (`kafka-share-groups.sh --delete-offsets`): the share coordinator deletes
//! each share-partition's state, the group drops the topics from its share-partitions,
//! and share-partitions loaded here for them are dropped.
//!
//! Kafka's checks: share groups enabled (`share.version`), else UNSUPPORTED_VERSION;
//! DELETE on the group (GROUP_AUTHORIZATION_FAILED); the group empty (NON_EMPTY_GROUP);
//! READ on each topic (TOPIC_AUTHORIZATION_FAILED); a topic that does not exist or has no
//! state in the group answers UNKNOWN_TOPIC_OR_PARTITION.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic;
use kafka_protocol::messages::{DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse};
use uuid::Uuid;

use super::{str_bytes, topic_name};
use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: DeleteShareGroupOffsetsRequest,
) -> DeleteShareGroupOffsetsResponse {
    let refuse = |e: ResponseError, why: Option<String>| {
        DeleteShareGroupOffsetsResponse::default()
            .with_error_code(e.code())
            .with_error_message(why.map(str_bytes))
    };
    if !broker.groups.share_groups_enabled() {
        return refuse(ResponseError::UnsupportedVersion, None);
    }
    let group_id = req.group_id.0.to_string();
    if !ctx.authorize(AclOperation::Delete, ResourceType::Group, &group_id) {
        return refuse(ResponseError::GroupAuthorizationFailed, None);
    }
    let mut answers: Vec<(String, Uuid, Result<usize, ResponseError>)> = Vec::new();
    let mut ids: Vec<Uuid> = Vec::new();
    for t in &req.topics {
        let name = t.topic_name.0.to_string();
        let topic_id = broker.controller.topic(&name).map(|t| t.topic_id);
        let checked = match topic_id {
            _ if !ctx.authorize(AclOperation::Read, ResourceType::Topic, &name) => {
                Err(ResponseError::TopicAuthorizationFailed)
            }
            None => Err(ResponseError::UnknownTopicOrPartition),
            Some(id) => {
                ids.push(id);
                Ok(ids.len() - 1)
            }
        };
        answers.push((name, topic_id.unwrap_or_default(), checked));
    }
    let outcomes = match broker
        .groups
        .delete_share_group_offsets(&group_id, &ids)
        .await
    {
        Ok(o) => o,
        Err(e) => {
            let why = match e {
                ResponseError::NonEmptyGroup => Some(format!(
                    "Share group {group_id} is not empty: its offsets cannot be deleted."
                )),
                ResponseError::GroupIdNotFound => Some(format!("Group {group_id} not found.")),
                _ => None,
            };
            return refuse(e, why);
        }
    };
    let dropped: Vec<_> = broker
        .shares
        .partitions
        .keys()
        .into_iter()
        .filter(|k| k.group_id == group_id && ids.contains(&k.topic_id))
        .collect();
    for key in dropped {
        broker.shares.partitions.remove(&key);
    }
    let topics = answers
        .into_iter()
        .map(|(name, topic_id, checked)| {
            let error = match checked {
                Ok(i) => outcomes.get(i).cloned().unwrap_or(Ok(())).err(),
                Err(e) => Some(e),
            };
            DeleteShareGroupOffsetsResponseTopic::default()
                .with_topic_name(topic_name(&name))
                .with_topic_id(topic_id)
                .with_error_code(error.map_or(0, |e| e.code()))
        })
        .collect();
    DeleteShareGroupOffsetsResponse::default().with_responses(topics)
}
