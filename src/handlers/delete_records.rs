//! DeleteRecords: moves each partition's log start offset up to the offset asked for (-1:
//! the high watermark) and answers with the new low watermark. Records below it are gone
//! for every reader: fetches below it get OFFSET_OUT_OF_RANGE and ListOffsets earliest
//! answers it; the segments wholly below it are deleted. DELETE on each topic, else its
//! partitions answer TOPIC_AUTHORIZATION_FAILED.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};

use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::router::RequestContext;

/// `DeleteRecordsResponse.INVALID_LOW_WATERMARK`.
const INVALID_LOW_WATERMARK: i64 = -1;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    let mut topics = Vec::with_capacity(req.topics.len());
    let mut moved = false;
    for t in req.topics {
        let mut partitions = Vec::with_capacity(t.partitions.len());
        let deletable = ctx.authorize(AclOperation::Delete, ResourceType::Topic, &t.name);
        for p in t.partitions {
            let result = match broker.replicas.partition(&t.name, p.partition_index) {
                _ if !deletable => Err(ResponseError::TopicAuthorizationFailed.code()),
                None => Err(ResponseError::UnknownTopicOrPartition.code()),
                Some(partition) => match partition.check_leader_epoch(-1) {
                    Err(e) => Err(e.code()),
                    Ok(()) => partition.delete_records(p.offset).await.map_err(|e| {
                        tracing::debug!(partition = %partition.tp, offset = p.offset, error = %e, "delete records refused");
                        e.error_code()
                    }),
                },
            };
            moved |= result.is_ok();
            let (low_watermark, error_code) = match result {
                Ok(low_watermark) => (low_watermark, 0),
                Err(code) => (INVALID_LOW_WATERMARK, code),
            };
            partitions.push(
                DeleteRecordsPartitionResult::default()
                    .with_partition_index(p.partition_index)
                    .with_low_watermark(low_watermark)
                    .with_error_code(error_code),
            );
        }
        topics.push(
            DeleteRecordsTopicResult::default()
                .with_name(t.name)
                .with_partitions(partitions),
        );
    }
    if moved {
        // Kafka leaves this to its next periodic checkpoint; writing it now means a crash
        // right after the answer cannot bring the deleted records back.
        let replicas = broker.replicas.clone();
        let _ = tokio::task::spawn_blocking(move || replicas.checkpoint_log_start_offsets()).await;
    }
    DeleteRecordsResponse::default().with_topics(topics)
}
