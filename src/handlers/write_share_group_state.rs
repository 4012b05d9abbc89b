//! WriteShareGroupState (KIP-932, v0–1): a share-partition's leader on another broker
//! persists changed delivery states in this broker's share coordinator. Broker to
//! broker: CLUSTER_ACTION on the cluster (the route's needs). The share coordinator
//! answers each partition: FENCED_LEADER_EPOCH or FENCED_STATE_EPOCH for a write from a
//! leader or state before the latest, INVALID_REQUEST for a share-partition never
//! initialized, NOT_COORDINATOR when this broker does not serve its
//! `__share_group_state` partition. UNSUPPORTED_VERSION while share groups are off.
//!
//! v1 carries KIP-1226's DeliveryCompleteCount (the records at or above the start offset
//! whose delivery is complete), kept beside the state for DescribeShareGroupOffsets'
//! lag; a v0 write carries none and it is kept as -1 (unknown), Kafka's default.

use std::sync::Arc;

use kafka_protocol::messages::write_share_group_state_response::{
    PartitionResult, WriteStateResult,
};
use kafka_protocol::messages::{WriteShareGroupStateRequest, WriteShareGroupStateResponse};

use super::share_state_key::key;
use crate::broker::Broker;
use crate::coordinator::share::{Persister, StateBatch, StateWrite};
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    _ctx: RequestContext,
    req: WriteShareGroupStateRequest,
) -> WriteShareGroupStateResponse {
    let enabled = broker.groups.share_groups_enabled();
    let coordinator = broker.shares.coordinator.as_ref();
    let mut results = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in t.partitions {
            let outcome = match key(enabled, &req.group_id, t.topic_id, p.partition) {
                Err(e) => Err(e),
                Ok(key) => {
                    let write = StateWrite {
                        state_epoch: p.state_epoch,
                        leader_epoch: p.leader_epoch,
                        start_offset: p.start_offset,
                        delivery_complete_count: p.delivery_complete_count,
                        state_batches: p
                            .state_batches
                            .iter()
                            .map(|b| StateBatch {
                                first_offset: b.first_offset,
                                last_offset: b.last_offset,
                                delivery_state: b.delivery_state,
                                delivery_count: b.delivery_count,
                            })
                            .collect(),
                    };
                    Persister::write(coordinator, key, write).await
                }
            };
            partitions.push(
                PartitionResult::default()
                    .with_partition(p.partition)
                    .with_error_code(outcome.err().map_or(0, |e| e.code())),
            );
        }
        results.push(
            WriteStateResult::default()
                .with_topic_id(t.topic_id)
                .with_partitions(partitions),
        );
    }
    WriteShareGroupStateResponse::default().with_results(results)
}
