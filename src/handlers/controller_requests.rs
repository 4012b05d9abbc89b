//! LeaderAndIsr, UpdateMetadata and StopReplica (ZooKeeper mode), answered by the
//! internal seam `controller::zk::self_requests` until skua's broker side exists: it
//! fences by controller and broker epoch and hosts nothing (see there).

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
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
    match broker.controller.zk() {
        Some(zk) => zk.shared().self_requests.leader_and_isr(
            &req,
            ctx.api_version,
            zk.shared().broker_epoch(),
        ),
        None => LeaderAndIsrResponse::default()
            .with_error_code(ResponseError::UnsupportedVersion.code()),
    }
}

pub async fn update_metadata(
    broker: Arc<Broker>,
    _ctx: RequestContext,
    req: UpdateMetadataRequest,
) -> UpdateMetadataResponse {
    match broker.controller.zk() {
        Some(zk) => zk
            .shared()
            .self_requests
            .update_metadata(&req, zk.shared().broker_epoch()),
        None => UpdateMetadataResponse::default()
            .with_error_code(ResponseError::UnsupportedVersion.code()),
    }
}

pub async fn stop_replica(
    broker: Arc<Broker>,
    _ctx: RequestContext,
    req: StopReplicaRequest,
) -> StopReplicaResponse {
    match broker.controller.zk() {
        Some(zk) => zk
            .shared()
            .self_requests
            .stop_replica(&req, zk.shared().broker_epoch()),
        None => {
            StopReplicaResponse::default().with_error_code(ResponseError::UnsupportedVersion.code())
        }
    }
}
