//! ListOffsets: earliest, latest, max-timestamp, or the first offset at or after a time.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_offsets_request::ListOffsetsPartition;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::log::{TimestampAndOffset, TopicPartition};
use crate::replica::{FetchIsolation, Partition};
use crate::router::RequestContext;

const LEADER_EPOCH_VERSION: i16 = 4;
/// `isolation_level` 1: offsets past the last stable offset are not listed (v2+).
const READ_COMMITTED: i8 = 1;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: ListOffsetsRequest,
) -> ListOffsetsResponse {
    // A replica (a follower whose fetch offset is out of range) is told the leader's log
    // end; consumers what their isolation level lets them read (Kafka ignores the level
    // of a replica's request).
    let isolation = match (req.replica_id.0 >= 0, req.isolation_level) {
        (true, _) => FetchIsolation::LogEnd,
        (false, READ_COMMITTED) => FetchIsolation::TxnCommitted,
        (false, _) => FetchIsolation::HighWatermark,
    };
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let allowed = ctx.authorize(AclOperation::Describe, ResourceType::Topic, &t.name);
            let partitions = t
                .partitions
                .iter()
                .map(|lp| {
                    if !allowed {
                        return error(lp.partition_index, ResponseError::TopicAuthorizationFailed);
                    }
                    let tp = TopicPartition::new(t.name.0.as_str(), lp.partition_index);
                    match broker.replicas.leader(&tp, lp.current_leader_epoch) {
                        Ok(p) => lookup(&p, lp, ctx.api_version, isolation),
                        Err(e) => error(lp.partition_index, e.error),
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

fn lookup(
    p: &Partition,
    lp: &ListOffsetsPartition,
    version: i16,
    isolation: FetchIsolation,
) -> ListOffsetsPartitionResponse {
    let found = match p.fetch_offset_for_timestamp(lp.timestamp, isolation) {
        Ok(found) => found,
        Err(e) => return error(lp.partition_index, e),
    };
    let found = found.unwrap_or(TimestampAndOffset {
        timestamp: -1,
        offset: -1,
        leader_epoch: None,
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
