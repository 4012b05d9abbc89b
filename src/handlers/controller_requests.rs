//! LeaderAndIsr, UpdateMetadata and StopReplica (ZooKeeper mode): the controller's
//! requests, answered by the controller's broker side through the `Controller` trait
//! (applied on a blocking thread there: see `controller::zk::cluster_requests`). A
//! broker outside a cluster answers UNSUPPORTED_VERSION.

use std::sync::Arc;

use kafka_protocol::messages::{
    LeaderAndIsrRequest, LeaderAndIsrResponse, StopReplicaRequest, StopReplicaResponse,
    UpdateMetadataRequest, UpdateMetadataResponse,
};

use crate::broker::Broker;
use crate::router::RequestContext;

pub async fn leader_and_isr(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: LeaderAndIsrRequest,
) -> LeaderAndIsrResponse {
    broker.controller.leader_and_isr(req, ctx.api_version).await
}

pub async fn update_metadata(
    broker: Arc<Broker>,
    _ctx: RequestContext,
    req: UpdateMetadataRequest,
) -> UpdateMetadataResponse {
    broker.controller.update_metadata(req).await
}

pub async fn stop_replica(
    broker: Arc<Broker>,
    _ctx: RequestContext,
    req: StopReplicaRequest,
) -> StopReplicaResponse {
    broker.controller.stop_replica(req).await
}
