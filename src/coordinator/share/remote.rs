//! The persister of a broker in a cluster (Kafka's `DefaultStatePersister` with its
//! `PersisterStateManager`): each share-partition key goes to the share coordinator
//! serving its `__share_group_state` partition, the partition's leader in the metadata
//! (what FindCoordinator key type SHARE answers for "group:topicId:partition"). When that
//! is this broker, the local share coordinator is called in process; otherwise the
//! request (InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState,
//! DeleteShareGroupState, ReadShareGroupStateSummary) goes to that broker on a
//! connection kept per broker.
//!
//! WriteShareGroupState and ReadShareGroupStateSummary are sent at the highest version
//! both brokers speak, as Kafka's `NetworkClient` picks it from the peer's ApiVersions.
//!
//! A coordinator that cannot be reached, or that answers NOT_COORDINATOR or
//! COORDINATOR_LOAD_IN_PROGRESS, is retried after a short backoff for a few seconds, as
//! leadership of `__share_group_state` moves (Kafka's persister finds the coordinator
//! again and retries); the caller gets the last error after that.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    delete_share_group_state_request as delete_req,
    initialize_share_group_state_request as init_req, read_share_group_state_request as read_req,
    read_share_group_state_summary_request as summary_req,
    write_share_group_state_request as write_req, DeleteShareGroupStateRequest,
    InitializeShareGroupStateRequest, ReadShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest, WriteShareGroupStateRequest,
};
use kafka_protocol::protocol::{Request, StrBytes};

use super::coordinator::ShareCoordinator;
use super::persister::{PersistedState, Persister, StateSummary, StateWrite};
use super::records::{SharePartitionKey, StateBatch};
use crate::client::reconnecting::negotiate;
use crate::client::Client;
use crate::coordinator::txn::peers::Clients;
use crate::error::ApiError;
use crate::replica::cluster_view::ClusterView;

/// Which broker leads a `__share_group_state` partition, as the metadata says now.
pub type StateLeader = Arc<dyn Fn(i32) -> Option<i32> + Send + Sync>;

/// How long a key's coordinator is looked for again before its error is answered.
const RETRY_FOR: Duration = Duration::from_secs(5);
const RETRY_BACKOFF: Duration = Duration::from_millis(100);

/// WriteShareGroupState and ReadShareGroupStateSummary go at v1 (KIP-1226's delivery
/// complete count) to a coordinator that speaks it, at v0 (the count unknown) otherwise.
const STATE_RPC_MAX_VERSION: i16 = 1;

pub struct ClusterPersister {
    local: Arc<ShareCoordinator>,
    leader_of: StateLeader,
    cluster: Arc<ClusterView>,
    clients: Clients,
}

/// Where a key's state is served.
enum Target {
    Local,
    Remote(Arc<Client>),
}

impl ClusterPersister {
    pub fn new(
        local: Arc<ShareCoordinator>,
        leader_of: StateLeader,
        cluster: Arc<ClusterView>,
        clients: Clients,
    ) -> Self {
        ClusterPersister {
            local,
            leader_of,
            cluster,
            clients,
        }
    }

    fn target(&self, key: &SharePartitionKey) -> Result<Target, ResponseError> {
        let partition = self.local.partition_for(key);
        match (self.leader_of)(partition) {
            // No topic yet (the first heartbeat creates it): the local coordinator answers
            // what it knows, NOT_COORDINATOR until the partition is led somewhere.
            None => Ok(Target::Local),
            Some(id) if id == self.cluster.local_id() => Ok(Target::Local),
            Some(id) => self
                .clients
                .client(&self.cluster, id)
                .map(Target::Remote)
                .ok_or(ResponseError::CoordinatorNotAvailable),
        }
    }

    /// Runs `op` against the key's coordinator, finding it again while it moves.
    async fn with_retry<T, E, F, Fut>(&self, key: &SharePartitionKey, op: F) -> Result<T, E>
    where
        E: From<ResponseError> + KafkaError,
        F: Fn(Target) -> Fut,
        Fut: std::future::Future<Output = Result<T, E>>,
    {
        let deadline = tokio::time::Instant::now() + RETRY_FOR;
        loop {
            let result = match self.target(key) {
                Ok(target) => op(target).await,
                Err(e) => Err(e.into()),
            };
            match result {
                Err(e)
                    if matches!(
                        e.error(),
                        ResponseError::NotCoordinator
                            | ResponseError::CoordinatorNotAvailable
                            | ResponseError::CoordinatorLoadInProgress
                    ) =>
                {
                    if tokio::time::Instant::now() >= deadline {
                        return Err(e);
                    }
                    tokio::time::sleep(RETRY_BACKOFF).await;
                }
                other => return other,
            }
        }
    }
}

/// The Kafka error of a persister operation's failure, with or without its message.
trait KafkaError {
    fn error(&self) -> ResponseError;
}

impl KafkaError for ResponseError {
    fn error(&self) -> ResponseError {
        *self
    }
}

impl KafkaError for ApiError {
    fn error(&self) -> ResponseError {
        self.error
    }
}

/// A partition's error code as the caller takes it; a request that got no answer is
/// COORDINATOR_NOT_AVAILABLE (the coordinator is looked for again).
fn code_to_result(code: i16) -> Result<(), ResponseError> {
    match ResponseError::try_from_code(code) {
        None => Ok(()),
        Some(e) => Err(e),
    }
}

fn unreachable_coordinator(e: impl std::fmt::Display, what: &str) -> ResponseError {
    tracing::debug!(error = %e, "{what} got no answer from the share coordinator");
    ResponseError::CoordinatorNotAvailable
}

/// The version of a share state RPC to send `client`'s broker: the highest both speak,
/// or v0 when its ApiVersions leaves the API out (share groups off there when the
/// connection opened), so that it answers with its own error code as before.
async fn state_rpc_version<R: Request>(client: &Client) -> i16 {
    match client.api_versions().await {
        Ok(versions) => negotiate(&versions, R::KEY, 0, STATE_RPC_MAX_VERSION).unwrap_or(0),
        Err(_) => 0,
    }
}

fn group(key: &SharePartitionKey) -> StrBytes {
    StrBytes::from_string(key.group_id.clone())
}

#[async_trait::async_trait]
impl Persister for ClusterPersister {
    async fn initialize(
        &self,
        key: SharePartitionKey,
        state_epoch: i32,
        start_offset: i64,
    ) -> Result<(), ResponseError> {
        self.with_retry(&key, |target| {
            let key = key.clone();
            async move {
                let client = match target {
                    Target::Local => {
                        return Persister::initialize(&*self.local, key, state_epoch, start_offset)
                            .await
                    }
                    Target::Remote(c) => c,
                };
                let req = InitializeShareGroupStateRequest::default()
                    .with_group_id(group(&key))
                    .with_topics(vec![init_req::InitializeStateData::default()
                        .with_topic_id(key.topic_id)
                        .with_partitions(vec![init_req::PartitionData::default()
                            .with_partition(key.partition)
                            .with_state_epoch(state_epoch)
                            .with_start_offset(start_offset)])]);
                let resp = client
                    .send(&req, 0)
                    .await
                    .map_err(|e| unreachable_coordinator(e, "InitializeShareGroupState"))?;
                let code = resp
                    .results
                    .first()
                    .and_then(|t| t.partitions.first())
                    .map_or(ResponseError::UnknownServerError.code(), |p| p.error_code);
                code_to_result(code)
            }
        })
        .await
    }

    async fn read(
        &self,
        key: SharePartitionKey,
        leader_epoch: i32,
    ) -> Result<PersistedState, ApiError> {
        self.with_retry(&key, |target| {
            let key = key.clone();
            async move {
                let client = match target {
                    Target::Local => return Persister::read(&*self.local, key, leader_epoch).await,
                    Target::Remote(c) => c,
                };
                let req = ReadShareGroupStateRequest::default()
                    .with_group_id(group(&key))
                    .with_topics(vec![read_req::ReadStateData::default()
                        .with_topic_id(key.topic_id)
                        .with_partitions(vec![read_req::PartitionData::default()
                            .with_partition(key.partition)
                            .with_leader_epoch(leader_epoch)])]);
                let resp = client
                    .send(&req, 0)
                    .await
                    .map_err(|e| unreachable_coordinator(e, "ReadShareGroupState"))?;
                let p = resp
                    .results
                    .into_iter()
                    .next()
                    .and_then(|t| t.partitions.into_iter().next())
                    .ok_or(ResponseError::UnknownServerError)?;
                if let Err(error) = code_to_result(p.error_code) {
                    return Err(ApiError {
                        error,
                        message: p.error_message.map(|m| m.to_string()),
                    });
                }
                Ok(PersistedState {
                    state_epoch: p.state_epoch,
                    start_offset: p.start_offset,
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
                })
            }
        })
        .await
    }

    async fn write(&self, key: SharePartitionKey, write: StateWrite) -> Result<(), ResponseError> {
        self.with_retry(&key, |target| {
            let (key, write) = (key.clone(), write.clone());
            async move {
                let client = match target {
                    Target::Local => return Persister::write(&*self.local, key, write).await,
                    Target::Remote(c) => c,
                };
                let batches = write
                    .state_batches
                    .iter()
                    .map(|b| {
                        write_req::StateBatch::default()
                            .with_first_offset(b.first_offset)
                            .with_last_offset(b.last_offset)
                            .with_delivery_state(b.delivery_state)
                            .with_delivery_count(b.delivery_count)
                    })
                    .collect();
                let req = WriteShareGroupStateRequest::default()
                    .with_group_id(group(&key))
                    .with_topics(vec![write_req::WriteStateData::default()
                        .with_topic_id(key.topic_id)
                        .with_partitions(vec![write_req::PartitionData::default()
                            .with_partition(key.partition)
                            .with_state_epoch(write.state_epoch)
                            .with_leader_epoch(write.leader_epoch)
                            .with_start_offset(write.start_offset)
                            .with_delivery_complete_count(write.delivery_complete_count)
                            .with_state_batches(batches)])]);
                let version = state_rpc_version::<WriteShareGroupStateRequest>(&client).await;
                let resp = client
                    .send(&req, version)
                    .await
                    .map_err(|e| unreachable_coordinator(e, "WriteShareGroupState"))?;
                let code = resp
                    .results
                    .first()
                    .and_then(|t| t.partitions.first())
                    .map_or(ResponseError::UnknownServerError.code(), |p| p.error_code);
                code_to_result(code)
            }
        })
        .await
    }

    async fn read_summary(&self, key: SharePartitionKey) -> Result<StateSummary, ResponseError> {
        self.with_retry(&key, |target| {
            let key = key.clone();
            async move {
                let client = match target {
                    Target::Local => return Persister::read_summary(&*self.local, key).await,
                    Target::Remote(c) => c,
                };
                let req = ReadShareGroupStateSummaryRequest::default()
                    .with_group_id(group(&key))
                    .with_topics(vec![summary_req::ReadStateSummaryData::default()
                        .with_topic_id(key.topic_id)
                        .with_partitions(vec![summary_req::PartitionData::default()
                            .with_partition(key.partition)
                            .with_leader_epoch(-1)])]);
                let version = state_rpc_version::<ReadShareGroupStateSummaryRequest>(&client).await;
                let resp = client
                    .send(&req, version)
                    .await
                    .map_err(|e| unreachable_coordinator(e, "ReadShareGroupStateSummary"))?;
                let p = resp
                    .results
                    .into_iter()
                    .next()
                    .and_then(|t| t.partitions.into_iter().next())
                    .ok_or(ResponseError::UnknownServerError)?;
                code_to_result(p.error_code)?;
                Ok(StateSummary {
                    state_epoch: p.state_epoch,
                    leader_epoch: p.leader_epoch,
                    start_offset: p.start_offset,
                    // -1 (unknown) from a v0 coordinator.
                    delivery_complete_count: p.delivery_complete_count,
                })
            }
        })
        .await
    }

    async fn delete(&self, key: SharePartitionKey) -> Result<(), ResponseError> {
        self.with_retry(&key, |target| {
            let key = key.clone();
            async move {
                let client = match target {
                    Target::Local => return Persister::delete(&*self.local, key).await,
                    Target::Remote(c) => c,
                };
                let req = DeleteShareGroupStateRequest::default()
                    .with_group_id(group(&key))
                    .with_topics(vec![delete_req::DeleteStateData::default()
                        .with_topic_id(key.topic_id)
                        .with_partitions(vec![
                            delete_req::PartitionData::default().with_partition(key.partition)
                        ])]);
                let resp = client
                    .send(&req, 0)
                    .await
                    .map_err(|e| unreachable_coordinator(e, "DeleteShareGroupState"))?;
                let code = resp
                    .results
                    .first()
                    .and_then(|t| t.partitions.first())
                    .map_or(ResponseError::UnknownServerError.code(), |p| p.error_code);
                code_to_result(code)
            }
        })
        .await
    }
}
