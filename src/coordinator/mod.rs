//! Coordinators: state kept in internal topics and served by this broker for the
//! partitions of those topics it leads.
//!
//! - `runtime/`: the coordinator runtime, one owner per partition of an internal topic
//!   running that partition's operations one at a time; its records are the state.
//! - `group/`: consumer groups and committed offsets (`__consumer_offsets`), the first
//!   user of the runtime;
//! - `txn/`: transactions (`__transaction_state`), the second.
//! - `partition_log.rs`: how the runtime reaches the replica layer.

pub mod group;
pub mod partition_log;
pub mod runtime;
pub mod txn;
pub mod wire;

/// `__transaction_state`, the transaction coordinator's topic.
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

/// Kafka's internal topics: written by their coordinators only, never by clients.
pub fn is_internal_topic(name: &str) -> bool {
    name == group::OFFSETS_TOPIC || name == TRANSACTION_STATE_TOPIC
}
