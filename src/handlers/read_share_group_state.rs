//! ReadShareGroupState (KIP-932, v0): a share-partition's leader on another broker
//! loads its persisted state from this broker's share coordinator; its leader epoch
//! fences the leaders before it (FENCED_LEADER_EPOCH for an older one). A
//! share-partition the group coordinator has not initialized (or whose state was
//! deleted) is INVALID_REQUEST with Kafka's message, as Kafka 4.2+ answers it. Broker to
//! broker: CLUSTER_ACTION on the cluster (the route's needs). NOT_COORDINATOR when this
//! broker does not serve the key's `__share_group_state` partition; UNSUPPORTED_VERSION
//! while share groups are off.

use std::sync::Arc;

use kafka_protocol::messages::read_share_group_state_response::{
    PartitionResult, ReadStateResult, StateBatch,
};
use kafka_protocol::messages::{ReadShareGroupStateRequest, ReadShareGroupStateResponse};

use super::share_state_key::key;
use super::str_bytes;
use crate::broker::Broker;
use crate::coordinator::share::Persister;
use crate::error::ApiError;
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    _ctx: RequestContext,
    req: ReadShareGroupStateRequest,
) -> ReadShareGroupStateResponse {
    let enabled = broker.groups.share_groups_enabled();
    let coordinator = broker.shares.coordinator.as_ref();
    let mut results = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in t.partitions {
            let answer = PartitionResult::default().with_partition(p.partition);
            let outcome = match key(enabled, &req.group_id, t.topic_id, p.partition) {
                Err(e) => Err(ApiError::from(e)),
                Ok(key) => Persister::read(coordinator, key, p.leader_epoch).await,
            };
            partitions.push(match outcome {
                Ok(state) => answer
                    .with_state_epoch(state.state_epoch)
                    .with_start_offset(state.start_offset)
                    .with_state_batches(
                        state
                            .state_batches
                            .iter()
                            .map(|b| {
                                StateBatch::default()
                                    .with_first_offset(b.first_offset)
                                    .with_last_offset(b.last_offset)
                                    .with_delivery_state(b.delivery_state)
                                    .with_delivery_count(b.delivery_count)
                            })
                            .collect(),
                    ),
                // As Kafka's `toErrorResponseData`: the code and the message, the other
                // fields left at their defaults.
                Err(e) => answer
                    .with_error_code(e.code())
                    .with_error_message(Some(str_bytes(e.message()))),
            });
        }
        results.push(
            ReadStateResult::default()
                .with_topic_id(t.topic_id)
                .with_partitions(partitions),
        );
    }
    ReadShareGroupStateResponse::default().with_results(results)
}
