//! LeaderAndIsr, UpdateMetadata and StopReplica (ZooKeeper mode): the controller's
//! requests, answered by the broker side `controller::zk::broker` (metadata cache,
//! hosted replicas). A broker outside a cluster answers UNSUPPORTED_VERSION.

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
    let Some(zk) = broker.controller.zk() else {
        return LeaderAndIsrResponse::default()
            .with_error_code(ResponseError::UnsupportedVersion.code());
    };
    // The topics' config overrides, read before the logs are created with them.
    let topics: std::collections::BTreeSet<String> = req
        .topic_states
        .iter()
        .map(|t| t.topic_name.0.to_string())
        .chain(
            req.ungrouped_partition_states
                .iter()
                .map(|p| p.topic_name.0.to_string()),
        )
        .collect();
    let configs = zk.read_topic_configs(topics).await;
    zk.shared()
        .broker
        .leader_and_isr(&req, ctx.api_version, zk.shared().broker_epoch(), &configs)
}

pub async fn update_metadata(
    broker: Arc<Broker>,
    _ctx: RequestContext,
    req: UpdateMetadataRequest,
) -> UpdateMetadataResponse {
    match broker.controller.zk() {
        Some(zk) => {
            let r = zk
                .shared()
                .broker
                .update_metadata(&req, zk.shared().broker_epoch());
            zk.metadata_changed();
            r
        }
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
            .broker
            .stop_replica(&req, zk.shared().broker_epoch()),
        None => {
            StopReplicaResponse::default().with_error_code(ResponseError::UnsupportedVersion.code())
        }
    }
}
