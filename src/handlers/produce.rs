//! Produce: append each partition's record batches and report their base offsets.
//!
//! The records stay the `Bytes` slice of the request frame all the way into the log;
//! only batch headers are parsed. With acks=0 the connection sends no response at all.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};

use super::{now_ms, str_bytes};
use crate::broker::Broker;
use crate::coordinator::is_internal_topic;
use crate::log::{check_produce_records, LogError};
use crate::router::RequestContext;

/// Produce requests carry topic ids instead of names from this version on.
const TOPIC_ID_VERSION: i16 = 13;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: ProduceRequest,
) -> ProduceResponse {
    let refusal = if !matches!(req.acks, -1..=1) {
        Some((
            ResponseError::InvalidRequiredAcks,
            "acks must be -1, 0 or 1",
        ))
    } else if req.transactional_id.is_some() {
        Some((
            ResponseError::TransactionalIdAuthorizationFailed,
            "transactions are not supported yet",
        ))
    } else {
        None
    };
    let mut responses = Vec::with_capacity(req.topic_data.len());
    for topic in req.topic_data {
        let name = resolve_name(&broker, &topic, ctx.api_version);
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for p in topic.partition_data {
            let resp = match (refusal, &name) {
                (Some((e, why)), _) => error(p.index, e, why),
                (None, Err(e)) => error(p.index, *e, "unknown topic"),
                (None, Ok(name))
                    if is_internal_topic(name) && broker.controller.topic(name).is_some() =>
                {
                    internal_topic(p.index, name)
                }
                (None, Ok(name)) => append(&broker, name, p, ctx.api_version).await,
            };
            partitions.push(resp);
        }
        responses.push(
            TopicProduceResponse::default()
                .with_name(topic.name)
                .with_topic_id(topic.topic_id)
                .with_partition_responses(partitions),
        );
    }
    ProduceResponse::default().with_responses(responses)
}

fn resolve_name(
    broker: &Broker,
    topic: &TopicProduceData,
    version: i16,
) -> Result<String, ResponseError> {
    if version >= TOPIC_ID_VERSION {
        broker
            .controller
            .topic_by_id(topic.topic_id)
            .map(|t| t.name.clone())
            .ok_or(ResponseError::UnknownTopicId)
    } else {
        Ok(topic.name.0.to_string())
    }
}

async fn append(
    broker: &Broker,
    topic: &str,
    p: PartitionProduceData,
    version: i16,
) -> PartitionProduceResponse {
    let Some(partition) = broker.replicas.partition(topic, p.index) else {
        let e = if broker
            .controller
            .topic(topic)
            .is_some_and(|t| (p.index as usize) < t.partitions.len())
        {
            ResponseError::NotLeaderOrFollower
        } else {
            ResponseError::UnknownTopicOrPartition
        };
        return error(
            p.index,
            e,
            "This server does not host this topic-partition.",
        );
    };
    let Some(records) = p.records else {
        return error(p.index, ResponseError::InvalidRecord, "no records");
    };
    let checked = check_produce_records(version, &records);
    let appended = match checked {
        Ok(()) => partition.append(records, now_ms()).await,
        Err(e) => Err(e),
    };
    match appended {
        Ok(info) => PartitionProduceResponse::default()
            .with_index(p.index)
            .with_base_offset(info.first_offset)
            .with_log_append_time_ms(info.log_append_time)
            .with_log_start_offset(info.log_start_offset),
        Err(e) => {
            let code = e.error_code();
            if code == ResponseError::KafkaStorageError.code() {
                tracing::error!(partition = %partition.tp, error = %e, "append failed");
            } else {
                tracing::debug!(partition = %partition.tp, error = %e, "produce refused");
            }
            PartitionProduceResponse::default()
                .with_index(p.index)
                .with_error_code(code)
                .with_base_offset(-1)
                .with_log_append_time_ms(-1)
                .with_log_start_offset(partition.log.log_start_offset())
                .with_record_errors(record_errors(&e))
                .with_error_message(Some(str_bytes(e.to_string())))
        }
    }
}

/// Which records of the batch were refused and why (Produce v8+; older versions drop them).
fn record_errors(e: &LogError) -> Vec<BatchIndexAndErrorMessage> {
    e.record_errors()
        .iter()
        .map(|r| {
            BatchIndexAndErrorMessage::default()
                .with_batch_index(r.batch_index)
                .with_batch_index_error_message(Some(str_bytes(r.message.clone())))
        })
        .collect()
}

/// Only the coordinators write their internal topics: a client's batch there could
/// make their partitions unloadable. Kafka answers INVALID_TOPIC_EXCEPTION with no
/// message ("Cannot append to internal topic" is its exception's text, not sent).
fn internal_topic(index: i32, topic: &str) -> PartitionProduceResponse {
    tracing::debug!(
        topic,
        partition = index,
        "Cannot append to internal topic {topic}"
    );
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(ResponseError::InvalidTopicException.code())
        .with_base_offset(-1)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(-1)
}

fn error(index: i32, e: ResponseError, message: &str) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(e.code())
        .with_base_offset(-1)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(-1)
        .with_error_message(Some(str_bytes(message)))
}
