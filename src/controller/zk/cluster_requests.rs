//! The ZooKeeper-mode APIs as the `Controller` trait's typed methods reach this
//! controller: the brokers' requests to it (AlterPartition, ControlledShutdown,
//! AllocateProducerIds) go to the active controller's event loop, the controller's
//! requests to brokers (LeaderAndIsr, UpdateMetadata, StopReplica) to the broker side.
//! Handlers translate the protocol only and build no event of their own.
//!
//! The controller's requests are applied on a blocking thread, not on a runtime worker:
//! one can name a hundred thousand partitions and create their logs, and the workers
//! meanwhile answer every other client (an ApiVersions must not wait on a controller's
//! UpdateMetadata).

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    AlterPartitionRequest, AlterPartitionResponse, LeaderAndIsrRequest, LeaderAndIsrResponse,
    StopReplicaRequest, StopReplicaResponse, UpdateMetadataRequest, UpdateMetadataResponse,
};

use super::context::TopicPartition;
use super::event_loop::Event;
use super::{Shared, ZkController};

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

impl ZkController {
    pub(super) async fn alter_partition_request(
        &self,
        request: AlterPartitionRequest,
        version: i16,
    ) -> AlterPartitionResponse {
        let not_controller = || {
            AlterPartitionResponse::default().with_error_code(ResponseError::NotController.code())
        };
        let (reply, answer) = tokio::sync::oneshot::channel();
        if !self.submit(|| Event::AlterPartition {
            request,
            version,
            reply,
        }) {
            return not_controller();
        }
        answer.await.unwrap_or_else(|_| not_controller())
    }

    pub(super) async fn controlled_shutdown_request(
        &self,
        broker_id: i32,
        broker_epoch: i64,
    ) -> Result<Vec<TopicPartition>, ResponseError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        if !self.submit(|| Event::ControlledShutdown {
            broker_id,
            broker_epoch,
            reply,
        }) {
            return Err(ResponseError::NotController);
        }
        answer.await.unwrap_or(Err(ResponseError::NotController))
    }

    pub(super) async fn allocate_producer_ids_request(
        &self,
        broker_id: i32,
        broker_epoch: i64,
    ) -> Result<(i64, i32), ResponseError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        if !self.submit(|| Event::AllocateProducerIds {
            broker_id,
            broker_epoch,
            reply,
        }) {
            return Err(ResponseError::NotController);
        }
        answer.await.unwrap_or(Err(ResponseError::NotController))
    }

    pub(super) async fn leader_and_isr_request(
        &self,
        req: LeaderAndIsrRequest,
        version: i16,
    ) -> LeaderAndIsrResponse {
        // The config overrides of the topics whose logs this request creates, read before
        // the logs are created with them; a request the broker refuses reads none.
        let shared = self.shared().clone();
        let topics = shared
            .broker
            .topics_to_configure(&req, shared.broker_epoch());
        let configs = self.read_topic_configs(topics).await;
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

    pub(super) async fn update_metadata_request(
        &self,
        req: UpdateMetadataRequest,
    ) -> UpdateMetadataResponse {
        let r = off_the_workers(
            self.shared().clone(),
            move |s| s.broker.update_metadata(&req, s.broker_epoch()),
            || UpdateMetadataResponse::default().with_error_code(unknown_server_error()),
        )
        .await;
        self.metadata_changed();
        r
    }

    pub(super) async fn stop_replica_request(
        &self,
        req: StopReplicaRequest,
    ) -> StopReplicaResponse {
        off_the_workers(
            self.shared().clone(),
            move |s| s.broker.stop_replica(&req, s.broker_epoch()),
            || StopReplicaResponse::default().with_error_code(unknown_server_error()),
        )
        .await
    }
}
