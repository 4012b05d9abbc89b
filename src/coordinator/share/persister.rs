//! What a share-partition leader and the share coordinator exchange about one
//! share-partition (Kafka's persister types, the partition data of
//! `ReadShareGroupState` and `WriteShareGroupState`).

use super::records::StateBatch;

/// What `ReadShareGroupState` returns for one share-partition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PersistedState {
    pub state_epoch: i32,
    /// -1 when the share-partition was never initialized (Kafka's
    /// `UNINITIALIZED_START_OFFSET`).
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
