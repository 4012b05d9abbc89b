//! ListOffsets: earliest, latest, max-timestamp, or the first offset at or after a time.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_offsets_request::ListOffsetsPartition;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use crate::broker::Broker;
use crate::log::TimestampAndOffset;
use crate::replica::Partition;
use crate::router::RequestContext;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;
const EARLIEST_PENDING_UPLOAD: i64 = -6;
const LEADER_EPOCH_VERSION: i16 = 4;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: ListOffsetsRequest,
) -> ListOffsetsResponse {
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|lp| {
                    match broker
                        .replicas
                        .partition(t.name.0.as_str(), lp.partition_index)
                    {
                        Some(p) => lookup(&p, lp, ctx.api_version),
                        None => error(lp.partition_index, ResponseError::UnknownTopicOrPartition),
                    }
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}

fn lookup(p: &Partition, lp: &ListOffsetsPartition, version: i16) -> ListOffsetsPartitionResponse {
    let epoch = p.leader_epoch();
    if let Err(e) = p.check_leader_epoch(lp.current_leader_epoch) {
        return error(lp.partition_index, e);
    }
    let hw = p.high_watermark();
    let at = |offset| TimestampAndOffset {
        timestamp: -1,
        offset,
        leader_epoch: Some(epoch),
    };
    let found = match lp.timestamp {
        EARLIEST | EARLIEST_LOCAL => Some(at(p.log.log_start_offset())),
        LATEST => Some(at(hw)),
        // No tiered storage: nothing is tiered or pending upload.
        LATEST_TIERED | EARLIEST_PENDING_UPLOAD => Some(TimestampAndOffset {
            leader_epoch: None,
            ..at(-1)
        }),
        MAX_TIMESTAMP => p.log.max_timestamp_and_offset().filter(|f| f.offset < hw),
        ts if ts >= 0 => p
            .log
            .fetch_offset_by_timestamp(ts)
            .filter(|f| f.offset < hw),
        _ => return error(lp.partition_index, ResponseError::InvalidRequest),
    };
    let found = found.unwrap_or(TimestampAndOffset {
        leader_epoch: None,
        ..at(-1)
    });
    ListOffsetsPartitionResponse::default()
        .with_partition_index(lp.partition_index)
        .with_timestamp(found.timestamp)
        .with_offset(found.offset)
        // The epoch exists from v4 on; the codec refuses to drop a set value silently.
        // Lookups by time answer with the epoch of the batch holding the record, as Kafka.
        .with_leader_epoch(match found.leader_epoch {
            Some(e) if found.offset >= 0 && version >= LEADER_EPOCH_VERSION => e,
            _ => -1,
        })
}

fn error(partition: i32, e: ResponseError) -> ListOffsetsPartitionResponse {
    ListOffsetsPartitionResponse::default()
        .with_partition_index(partition)
        .with_error_code(e.code())
        .with_timestamp(-1)
        .with_offset(-1)
        .with_leader_epoch(-1)
}
