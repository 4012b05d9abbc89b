//! CreatePartitions: grow a topic's partition count. ALTER on each topic, else
//! TOPIC_AUTHORIZATION_FAILED.

use std::sync::Arc;

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};

use super::str_bytes;
use kafka_protocol::error::ResponseError;

use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::router::RequestContext;

/// From v3 a controller mutation quota refuses topics once exhausted (KIP-599).
const STRICT_QUOTA_SINCE: i16 = 3;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    mut req: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let mut results = Vec::with_capacity(req.topics.len());
    let (topics, denied): (Vec<_>, Vec<_>) = std::mem::take(&mut req.topics)
        .into_iter()
        .partition(|t| ctx.authorize(AclOperation::Alter, ResourceType::Topic, &t.name));
    for t in denied {
        results.push(
            CreatePartitionsTopicResult::default()
                .with_name(t.name)
                .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                .with_error_message(Some(str_bytes("The topic authorization is failed."))),
        );
    }
    let req = req.with_topics(topics);
    // The partitions the whole request adds are bounded, as CreateTopics'.
    if let Err(e) = crate::broker::check_request_partitions(
        req.topics
            .iter()
            .map(|t| broker.partitions_to_add(t.name.0.as_str(), t.count)),
    ) {
        for t in req.topics {
            results.push(
                CreatePartitionsTopicResult::default()
                    .with_name(t.name)
                    .with_error_code(e.code())
                    .with_error_message(Some(str_bytes(e.message.clone()))),
            );
        }
        return CreatePartitionsResponse::default().with_results(results);
    }
    let mut quota = broker.mutation_quota(&ctx, STRICT_QUOTA_SINCE);
    for t in req.topics {
        // The partitions added count against the client's controller mutation quota.
        let adding = broker.partitions_to_add(t.name.0.as_str(), t.count);
        if !req.validate_only && adding > 0 && quota.record(adding as f64).is_err() {
            let e = crate::quota::throttled();
            results.push(
                CreatePartitionsTopicResult::default()
                    .with_name(t.name)
                    .with_error_code(e.code())
                    .with_error_message(Some(str_bytes(e.message))),
            );
            continue;
        }
        let assignments = t.assignments.filter(|a| !a.is_empty()).map(|a| {
            a.into_iter()
                .map(|x| x.broker_ids.into_iter().map(|b| b.0).collect())
                .collect()
        });
        let result = CreatePartitionsTopicResult::default().with_name(t.name.clone());
        results.push(
            match broker
                .create_partitions(t.name.0.as_str(), t.count, assignments, req.validate_only)
                .await
            {
                Ok(info) => {
                    if !req.validate_only {
                        tracing::info!(topic = %info.name, partitions = info.partitions.len(), "partitions added");
                    }
                    result
                }
                Err(e) => result
                    .with_error_code(e.code())
                    .with_error_message(Some(str_bytes(e.message))),
            },
        );
    }
    CreatePartitionsResponse::default()
        .with_results(results)
        .with_throttle_time_ms(quota.throttle_time_ms())
}
