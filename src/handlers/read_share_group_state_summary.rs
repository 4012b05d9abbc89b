//! ReadShareGroupStateSummary (KIP-932, v0–1): a group coordinator on another broker
//! reads share-partitions' start offsets and epochs (DescribeShareGroupOffsets) from
//! this broker's share coordinator, fencing nobody. Broker to broker: CLUSTER_ACTION on
//! the cluster (the route's needs). NOT_COORDINATOR when this broker does not serve the
//! key's `__share_group_state` partition; UNSUPPORTED_VERSION while share groups are off.
//!
//! v1 adds KIP-1226's DeliveryCompleteCount, which DescribeShareGroupOffsets v1's lag
//! needs (-1, unknown, when the last write was a v0 one or on an error).

use std::sync::Arc;

use kafka_protocol::messages::read_share_group_state_summary_response::{
    PartitionResult, ReadStateSummaryResult,
};
use kafka_protocol::messages::{
    ReadShareGroupStateSummaryRequest, ReadShareGroupStateSummaryResponse,
};

use super::share_state_key::key;
use crate::broker::Broker;
use crate::coordinator::share::Persister;
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    _ctx: RequestContext,
    req: ReadShareGroupStateSummaryRequest,
) -> ReadShareGroupStateSummaryResponse {
    let enabled = broker.groups.share_groups_enabled();
    let coordinator = broker.shares.coordinator.as_ref();
    let mut results = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in t.partitions {
            let answer = PartitionResult::default().with_partition(p.partition);
            let outcome = match key(enabled, &req.group_id, t.topic_id, p.partition) {
                Err(e) => Err(e),
                Ok(key) => Persister::read_summary(coordinator, key).await,
            };
            partitions.push(match outcome {
                Ok(s) => answer
                    .with_state_epoch(s.state_epoch)
                    .with_leader_epoch(s.leader_epoch)
                    .with_start_offset(s.start_offset)
                    .with_delivery_complete_count(s.delivery_complete_count),
                Err(e) => answer
                    .with_error_code(e.code())
                    .with_leader_epoch(-1)
                    .with_start_offset(-1),
            });
        }
        results.push(
            ReadStateSummaryResult::default()
                .with_topic_id(t.topic_id)
                .with_partitions(partitions),
        );
    }
    ReadShareGroupStateSummaryResponse::default().with_results(results)
}
