//! OffsetForLeaderEpoch: the end offset of a leader epoch, from the leader-epoch cache.
//! Followers ask it before they truncate (KIP-101: v0 from inter-broker protocol 0.11.0,
//! v1 from 2.0, whose answers add the epoch, v2 from 2.1, which fences by the asker's
//! current leader epoch); consumers use it to detect log truncation after a leader change
//! (KIP-320). Every version is answered alike: a request below v2 carries no current epoch
//! (-1, so not fenced), and a v0 answer leaves the epoch out.
//!
//! Kafka's checks: a replica's request (any replica id but the consumer's -1, so every
//! v0–2 request) needs CLUSTER_ACTION, else every partition answers
//! CLUSTER_AUTHORIZATION_FAILED; a consumer's needs DESCRIBE on each topic, else its
//! partitions answer TOPIC_AUTHORIZATION_FAILED.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use crate::auth::authorizer::CLUSTER_NAME;
use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::log::TopicPartition;
use crate::router::RequestContext;

/// The replica id of a consumer's request (`OffsetsForLeaderEpochRequest.CONSUMER_REPLICA_ID`).
const CONSUMER_REPLICA_ID: i32 = -1;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let cluster_denied = req.replica_id.0 != CONSUMER_REPLICA_ID
        && !ctx.authorize(
            AclOperation::ClusterAction,
            ResourceType::Cluster,
            CLUSTER_NAME,
        );
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let denied = if cluster_denied {
                Some(ResponseError::ClusterAuthorizationFailed)
            } else if req.replica_id.0 == CONSUMER_REPLICA_ID
                && !ctx.authorize(AclOperation::Describe, ResourceType::Topic, &t.topic)
            {
                Some(ResponseError::TopicAuthorizationFailed)
            } else {
                None
            };
            let partitions = t
                .partitions
                .iter()
                .map(|op| {
                    let result = EpochEndOffset::default().with_partition(op.partition);
                    if let Some(e) = denied {
                        return undefined(result, e);
                    }
                    let tp = TopicPartition::new(t.topic.0.as_str(), op.partition);
                    let p = match broker.replicas.leader(&tp, op.current_leader_epoch) {
                        Ok(p) => p,
                        Err(e) => return undefined(result, e.error),
                    };
                    match p.end_offset_for_epoch(op.leader_epoch) {
                        Some((e, offset)) => result.with_leader_epoch(e).with_end_offset(offset),
                        None => result.with_leader_epoch(-1).with_end_offset(-1),
                    }
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(t.topic)
                .with_partitions(partitions)
        })
        .collect();
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}

fn undefined(result: EpochEndOffset, e: ResponseError) -> EpochEndOffset {
    result
        .with_error_code(e.code())
        .with_leader_epoch(-1)
        .with_end_offset(-1)
}
