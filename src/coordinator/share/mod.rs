//! The share coordinator's data: `__share_group_state`, where share-partition leaders
//! persist the delivery state of their in-flight records (KIP-932).
//!
//! - `records.rs`: Kafka's ShareSnapshot and ShareUpdate record schemas, byte-exact.
//! - `combine.rs`: merging state batches (Kafka's `PersisterStateBatchCombiner`).
//! - `state.rs`: the per-share-partition state replayed from those records, and the record
//!   each initialize or write becomes.
//! - `persister.rs`: what a share-partition reads at load and writes as records change.
//! - `shard.rs`: one `__share_group_state` partition on the coordinator runtime, and
//!   which partition holds a share-partition's state.
//! - `latest_offsets.rs`: a partition's latest offset and the share-partition lag
//!   (DescribeShareGroupOffsets v1) measured against it.
//! - `coordinator.rs`: [`ShareCoordinator`](coordinator::ShareCoordinator), what callers
//!   use; it routes each share-partition key to its partition's owner and follows the
//!   topic's leadership.
//!
//! The broker starts one share coordinator (`broker.rs`), following
//! `__share_group_state`'s leadership in both modes; FindCoordinator key type SHARE names
//! the broker serving a key. It is the persister of this broker's share-partitions and of
//! the group coordinator's initializations and deletions through `remote.rs`'s
//! [`ClusterPersister`](remote::ClusterPersister): in process when this broker serves the
//! key, else with the share coordinator's RPCs (InitializeShareGroupState,
//! ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState,
//! ReadShareGroupStateSummary) to the broker that does, whose handlers call its
//! coordinator here.

pub mod combine;
pub mod coordinator;
pub mod latest_offsets;
pub mod persister;
pub mod records;
pub mod remote;
pub mod shard;
pub mod state;

pub use persister::{PersistedState, Persister, StateSummary, StateWrite};
pub use records::{SharePartitionKey, StateBatch};

/// `__share_group_state`, the share coordinator's topic.
pub const SHARE_GROUP_STATE_TOPIC: &str = "__share_group_state";

#[cfg(test)]
mod tests;
