//! DeleteTopics: by name (all versions) or by topic id (v6); the partitions' files are removed.
//! DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED (UNKNOWN_TOPIC_ID for a topic
//! named by id that the requester may not even DESCRIBE, as Kafka hides it).

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse};
use uuid::Uuid;

use super::{str_bytes, topic_name};
use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::quota::MutationQuota;
use crate::router::RequestContext;

/// From v5 a controller mutation quota refuses topics once exhausted (KIP-599).
const STRICT_QUOTA_SINCE: i16 = 5;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: DeleteTopicsRequest,
) -> DeleteTopicsResponse {
    // Versions before 6 list names; v6 lists (name or id) pairs.
    let targets: Vec<(Option<String>, Uuid)> = if req.topics.is_empty() {
        req.topic_names
            .iter()
            .map(|n| (Some(n.0.to_string()), Uuid::nil()))
            .collect()
    } else {
        req.topics
            .iter()
            .map(|t| (t.name.as_ref().map(|n| n.0.to_string()), t.topic_id))
            .collect()
    };
    let mut responses = Vec::with_capacity(targets.len());
    let mut quota = broker.mutation_quota(&ctx, STRICT_QUOTA_SINCE);
    for (name, id) in targets {
        responses.push(delete(&broker, &ctx, name, id, &mut quota).await);
    }
    DeleteTopicsResponse::default()
        .with_responses(responses)
        .with_throttle_time_ms(quota.throttle_time_ms())
}

async fn delete(
    broker: &Broker,
    ctx: &RequestContext,
    name: Option<String>,
    id: Uuid,
    quota: &mut MutationQuota,
) -> DeletableTopicResult {
    let by_id = name.is_none();
    let name = name.or_else(|| broker.controller.topic_by_id(id).map(|t| t.name.clone()));
    let result = DeletableTopicResult::default()
        .with_name(name.as_deref().map(topic_name))
        .with_topic_id(id);
    let Some(name) = name else {
        return result.with_error_code(ResponseError::UnknownTopicId.code());
    };
    if !ctx.authorize(AclOperation::Delete, ResourceType::Topic, &name) {
        let hidden =
            by_id && !ctx.authorize_quietly(AclOperation::Describe, ResourceType::Topic, &name);
        let error = match hidden {
            true => ResponseError::UnknownTopicId,
            false => ResponseError::TopicAuthorizationFailed,
        };
        let result = match hidden {
            true => result.with_name(None),
            false => result,
        };
        return result.with_error_code(error.code());
    }
    if !broker.config().delete_topic_enable {
        return result.with_error_code(ResponseError::TopicDeletionDisabled.code());
    }
    // The topic's partitions count against the client's controller mutation quota.
    let partitions = broker
        .controller
        .topic(&name)
        .map_or(0, |t| t.partitions.len());
    if quota.record(partitions as f64).is_err() {
        let e = crate::quota::throttled();
        return result
            .with_error_code(e.code())
            .with_error_message(Some(str_bytes(e.message)));
    }
    match broker.delete_topic(&name).await {
        Ok(info) => {
            tracing::info!(topic = %name, "deleted topic");
            result.with_topic_id(info.topic_id)
        }
        Err(e) => {
            let code = if by_id && e.error == ResponseError::UnknownTopicOrPartition {
                ResponseError::UnknownTopicId.code()
            } else {
                e.code()
            };
            result
                .with_error_code(code)
                .with_error_message(Some(str_bytes(e.message)))
        }
    }
}
