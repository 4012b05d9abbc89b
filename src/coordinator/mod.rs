//! Coordinators: state kept in internal topics and served by this broker for the
//! partitions of those topics it leads.
//!
//! - `runtime/`: the coordinator runtime, one owner per partition of an internal topic
//!   running that partition's operations one at a time; its records are the state.
//! - `group/`: consumer groups and committed offsets (`__consumer_offsets`), the first
//!   user of the runtime;
//! - `txn/`: transactions (`__transaction_state`), the second.
//! - `share/`: the records of `__share_group_state` and the share-partition state they
//!   replay to (KIP-932); the share coordinator's runtime shard is still to come.
//! - `partition_log.rs`: how the runtime reaches the replica layer.

pub mod group;
pub mod partition_log;
pub mod runtime;
pub mod share;
pub mod txn;
pub mod wire;

/// `__transaction_state`, the transaction coordinator's topic.
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

/// Kafka's internal topics: written by their coordinators only, never by clients.
pub fn is_internal_topic(name: &str) -> bool {
    name == group::OFFSETS_TOPIC
        || name == TRANSACTION_STATE_TOPIC
        || name == share::SHARE_GROUP_STATE_TOPIC
}
