//! LeaderAndIsr, UpdateMetadata and StopReplica (ZooKeeper mode): the controller's
//! requests, answered by the broker side `controller::zk::broker` (metadata cache,
//! hosted replicas). A broker outside a cluster answers UNSUPPORTED_VERSION.
//!
//! Each request is applied on a blocking thread, not on a runtime worker: one can name a
//! hundred thousand partitions and create their logs, and the workers meanwhile answer
//! every other client (an ApiVersions must not wait on a controller's UpdateMetadata).

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    LeaderAndIsrRequest, LeaderAndIsrResponse, StopReplicaRequest, StopReplicaResponse,
    UpdateMetadataRequest, UpdateMetadataResponse,
};

use crate::broker::Broker;
use crate::controller::zk::Shared;
use crate::router::RequestContext;

/// `apply` on a blocking thread; `failed` if that thread panicked.
async fn off_the_workers<R: Send + 'static>(
    shared: Arc<Shared>,
    apply: impl FnOnce(&Shared) -> R + Send + 'static,
    failed: impl FnOnce() -> R,
) -> R {
    match tokio::task::spawn_blocking(move || apply(&shared)).await {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = %e, "a controller request failed to apply");
            failed()
        }
    }
}

fn unknown_server_error() -> i16 {
    ResponseError::UnknownServerError.code()
}

pub async fn leader_and_isr(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: LeaderAndIsrRequest,
) -> LeaderAndIsrResponse {
    let Some(zk) = broker.controller.zk() else {
        return LeaderAndIsrResponse::default()
            .with_error_code(ResponseError::UnsupportedVersion.code());
    };
    // The config overrides of the topics whose logs this request creates, read before
    // the logs are created with them; a request the broker refuses reads none.
    let shared = zk.shared().clone();
    let topics = shared
        .broker
        .topics_to_configure(&req, shared.broker_epoch());
    let configs = zk.read_topic_configs(topics).await;
    let version = ctx.api_version;
    off_the_workers(
        shared,
        move |s| {
            s.broker
                .leader_and_isr(&req, version, s.broker_epoch(), &configs)
        },
        || LeaderAndIsrResponse::default().with_error_code(unknown_server_error()),
    )
    .await
}

pub async fn update_metadata(
    broker: Arc<Broker>,
    _ctx: RequestContext,
    req: UpdateMetadataRequest,
) -> UpdateMetadataResponse {
    let Some(zk) = broker.controller.zk() else {
        return UpdateMetadataResponse::default()
            .with_error_code(ResponseError::UnsupportedVersion.code());
    };
    let r = off_the_workers(
        zk.shared().clone(),
        move |s| s.broker.update_metadata(&req, s.broker_epoch()),
        || UpdateMetadataResponse::default().with_error_code(unknown_server_error()),
    )
    .await;
    zk.metadata_changed();
    r
}

pub async fn stop_replica(
    broker: Arc<Broker>,
    _ctx: RequestContext,
    req: StopReplicaRequest,
) -> StopReplicaResponse {
    let Some(zk) = broker.controller.zk() else {
        return StopReplicaResponse::default()
            .with_error_code(ResponseError::UnsupportedVersion.code());
    };
    off_the_workers(
        zk.shared().clone(),
        move |s| s.broker.stop_replica(&req, s.broker_epoch()),
        || StopReplicaResponse::default().with_error_code(unknown_server_error()),
    )
    .await
}
