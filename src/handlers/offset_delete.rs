//! OffsetDelete: removes a group's committed offsets for topics it no longer consumes.
//! Kafka's checks: DELETE on the group (else GROUP_AUTHORIZATION_FAILED), READ on each
//! topic (else its partitions answer TOPIC_AUTHORIZATION_FAILED).

use std::sync::Arc;

use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};

use kafka_protocol::error::ResponseError;

use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    if !ctx.authorize(AclOperation::Delete, ResourceType::Group, &req.group_id) {
        return OffsetDeleteResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    let readable: Vec<bool> = req
        .topics
        .iter()
        .map(|t| ctx.authorize(AclOperation::Read, ResourceType::Topic, &t.name))
        .collect();
    let partitions: Vec<(String, i32)> = req
        .topics
        .iter()
        .zip(&readable)
        .filter(|(_, readable)| **readable)
        .flat_map(|(t, _)| {
            t.partitions
                .iter()
                .map(|p| (t.name.to_string(), p.partition_index))
        })
        .collect();
    let errors = match broker
        .groups
        .delete_offsets(&req.group_id, partitions)
        .await
    {
        Ok(errors) => errors,
        Err(e) => return OffsetDeleteResponse::default().with_error_code(e.code()),
    };
    let mut errors = errors.into_iter();
    let topics = req
        .topics
        .into_iter()
        .zip(readable)
        .map(|(t, readable)| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let e = match readable {
                        true => errors.next().flatten(),
                        false => Some(ResponseError::TopicAuthorizationFailed),
                    };
                    OffsetDeleteResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(e.map_or(0, |e| e.code()))
                })
                .collect();
            OffsetDeleteResponseTopic::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    OffsetDeleteResponse::default().with_topics(topics)
}
