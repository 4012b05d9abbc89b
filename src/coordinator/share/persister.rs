//! What a share-partition leader and the share coordinator exchange about one
//! share-partition (Kafka's persister types, the partition data of
//! `ReadShareGroupState` and `WriteShareGroupState`).

use kafka_protocol::error::ResponseError;

use super::records::{SharePartitionKey, StateBatch};
use crate::error::ApiError;

/// What `ReadShareGroupState` returns for one share-partition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PersistedState {
    pub state_epoch: i32,
    /// -1 when the share-partition was initialized without one (Kafka's
    /// `UNINITIALIZED_START_OFFSET`): `share.auto.offset.reset` decides.
    pub start_offset: i64,
    pub state_batches: Vec<StateBatch>,
}

/// One `WriteShareGroupState` for one share-partition: its start offset and the batches
/// whose state changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateWrite {
    pub state_epoch: i32,
    pub leader_epoch: i32,
    pub start_offset: i64,
    pub delivery_complete_count: i32,
    pub state_batches: Vec<StateBatch>,
}

/// What `ReadShareGroupStateSummary` returns for one share-partition (the offsets a
/// describe shows, without the in-flight batches and without fencing any leader).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StateSummary {
    pub state_epoch: i32,
    /// -1 before any leader read it.
    pub leader_epoch: i32,
    /// -1 when never initialized.
    pub start_offset: i64,
    pub delivery_complete_count: i32,
}

/// Where share-partitions' state is persisted (Kafka's `Persister`): the share
/// coordinator in this process, or, in a cluster, the broker coordinating each key.
#[async_trait::async_trait]
pub trait Persister: Send + Sync + 'static {
    /// InitializeShareGroupState: the share-partition starts at `start_offset` (-1:
    /// where `share.auto.offset.reset` says when its leader first reads it).
    async fn initialize(
        &self,
        key: SharePartitionKey,
        state_epoch: i32,
        start_offset: i64,
    ) -> Result<(), ResponseError>;

    /// ReadShareGroupState by the share-partition's leader at `leader_epoch`, which
    /// fences the leaders before it. A share-partition without state is refused
    /// (INVALID_REQUEST, as Kafka's share coordinator): only the group coordinator's
    /// initialization gives it one. The error carries the coordinator's message, which
    /// the leader passes on to the member.
    async fn read(
        &self,
        key: SharePartitionKey,
        leader_epoch: i32,
    ) -> Result<PersistedState, ApiError>;

    /// WriteShareGroupState.
    async fn write(&self, key: SharePartitionKey, write: StateWrite) -> Result<(), ResponseError>;

    /// ReadShareGroupStateSummary.
    async fn read_summary(&self, key: SharePartitionKey) -> Result<StateSummary, ResponseError>;

    /// DeleteShareGroupState.
    async fn delete(&self, key: SharePartitionKey) -> Result<(), ResponseError>;
}
