//! The group coordinator: classic groups (JoinGroup/SyncGroup/Heartbeat/LeaveGroup),
//! KIP-848 consumer groups (ConsumerGroupHeartbeat) and committed offsets, kept in
//! `__consumer_offsets` and served by the coordinator runtime, one owner per partition.
//!
//! - `coordinator.rs`: [`GroupCoordinator`], what handlers call; it routes each group to
//!   its partition's owner.
//! - `shard/`: [`GroupShard`](shard::GroupShard), one partition's groups and offsets,
//!   the operations on them and the replay of their records.
//! - `classic.rs`: the classic group state machine, pure (time is passed in).
//! - `consumer/`: KIP-848 groups: heartbeats as records, replay, the uniform assignor.
//! - `offsets.rs`: committed offsets, kept apart from the groups.
//! - `records/`: Kafka's record schemas of `__consumer_offsets`, and the group →
//!   partition mapping.
//! - `topics.rs`: the topics as groups see them (partition counts, names, ids).
//! - `settings.rs`: the broker's group settings in force, and each group's own.

pub mod classic;
pub mod consumer;
pub mod coordinator;
#[cfg(test)]
mod coordinator_tests;
pub mod offsets;
pub mod records;
pub mod settings;
pub mod shard;
pub mod share;
pub mod topics;

pub use coordinator::GroupCoordinator;
pub use records::OFFSETS_TOPIC;
