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
use crate::router::RequestContext;

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
    for (name, id) in targets {
        responses.push(delete(&broker, &ctx, name, id).await);
    }
    DeleteTopicsResponse::default().with_responses(responses)
}

async fn delete(
    broker: &Broker,
    ctx: &RequestContext,
    name: Option<String>,
    id: Uuid,
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
