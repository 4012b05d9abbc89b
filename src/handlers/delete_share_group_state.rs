//! DeleteShareGroupState (KIP-932, v0): a group coordinator on another broker deletes
//! share-partitions' state (a share group or its offsets deleted) in this broker's share
//! coordinator. Broker to broker: CLUSTER_ACTION on the cluster (the route's needs).
//! NOT_COORDINATOR when this broker does not serve the key's `__share_group_state`
//! partition; UNSUPPORTED_VERSION while share groups are off.

use std::sync::Arc;

use kafka_protocol::messages::delete_share_group_state_response::{
    DeleteStateResult, PartitionResult,
};
use kafka_protocol::messages::{DeleteShareGroupStateRequest, DeleteShareGroupStateResponse};

use super::share_state_key::key;
use crate::broker::Broker;
use crate::coordinator::share::Persister;
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    _ctx: RequestContext,
    req: DeleteShareGroupStateRequest,
) -> DeleteShareGroupStateResponse {
    let enabled = broker.groups.share_groups_enabled();
    let coordinator = broker.shares.coordinator.as_ref();
    let mut results = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in t.partitions {
            let outcome = match key(enabled, &req.group_id, t.topic_id, p.partition) {
                Err(e) => Err(e),
                Ok(key) => Persister::delete(coordinator, key).await,
            };
            partitions.push(
                PartitionResult::default()
                    .with_partition(p.partition)
                    .with_error_code(outcome.err().map_or(0, |e| e.code())),
            );
        }
        results.push(
            DeleteStateResult::default()
                .with_topic_id(t.topic_id)
                .with_partitions(partitions),
        );
    }
    DeleteShareGroupStateResponse::default().with_results(results)
}
