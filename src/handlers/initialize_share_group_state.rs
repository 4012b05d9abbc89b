//! InitializeShareGroupState (KIP-932, v0): a group coordinator on another broker asks
//! this broker's share coordinator to start share-partitions at a start offset under a
//! state epoch. Broker to broker: CLUSTER_ACTION on the cluster (the route's needs).
//! Each partition is answered by the share coordinator: NOT_COORDINATOR when this broker
//! does not serve its `__share_group_state` partition, FENCED_STATE_EPOCH for an older
//! state epoch. UNSUPPORTED_VERSION while share groups are off.

use std::sync::Arc;

use kafka_protocol::messages::initialize_share_group_state_response::{
    InitializeStateResult, PartitionResult,
};
use kafka_protocol::messages::{
    InitializeShareGroupStateRequest, InitializeShareGroupStateResponse,
};

use super::share_state_key::key;
use crate::broker::Broker;
use crate::coordinator::share::Persister;
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    _ctx: RequestContext,
    req: InitializeShareGroupStateRequest,
) -> InitializeShareGroupStateResponse {
    let enabled = broker.groups.share_groups_enabled();
    let coordinator = broker.shares.coordinator.as_ref();
    let mut results = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in t.partitions {
            let outcome = match key(enabled, &req.group_id, t.topic_id, p.partition) {
                Err(e) => Err(e),
                Ok(key) => {
                    Persister::initialize(coordinator, key, p.state_epoch, p.start_offset).await
                }
            };
            partitions.push(
                PartitionResult::default()
                    .with_partition(p.partition)
                    .with_error_code(outcome.err().map_or(0, |e| e.code())),
            );
        }
        results.push(
            InitializeStateResult::default()
                .with_topic_id(t.topic_id)
                .with_partitions(partitions),
        );
    }
    InitializeShareGroupStateResponse::default().with_results(results)
}
