//! The transaction coordinator (Kafka's `TransactionCoordinator`), the second user of
//! the coordinator runtime: transactional ids and their transactions, kept in
//! `__transaction_state`.
//!
//! - `records.rs`: `TransactionLogKey`/`TransactionLogValue` with Kafka's schemas;
//! - `shard.rs`: one partition's transactional ids and their state transitions;
//! - `coordinator.rs`: what the handlers call, leadership, completing transactions;
//! - `markers.rs`: writing the commit/abort markers to the transaction's partitions;
//! - `marker_sender.rs`: each other broker's markers queued and sent in one request;
//! - `peers.rs`: the connections to other brokers.

pub mod coordinator;
pub mod marker_sender;
pub mod markers;
pub mod peers;
pub mod records;
pub mod shard;

pub use coordinator::TransactionCoordinator;
pub use records::TxnState;
