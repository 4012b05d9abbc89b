//! The partitions this broker hosts: their roles (leader or follower), ISR and high
//! watermark, and the requests that wait on them.
//!
//! - `manager.rs`: the table of hosted partitions, following metadata deltas; handlers
//!   reach a partition through `ReplicaManager::leader`.
//! - `append.rs`: `ReplicaManager::append_records`, every leader append (client,
//!   coordinator, marker) and the follower's, counted per topic.
//! - `read.rs`: `ReplicaManager::fetch`, every read for consumers and followers, with
//!   delayed fetch, isolation levels and the replication throttle, counted per topic.
//! - `partition.rs`: one partition, the only owner of its log; its notifications (log end
//!   advanced, high watermark advanced).
//! - `state.rs`: role, ISR, followers' log end offsets and the high-watermark rule, as
//!   pure state.
//! - `delayed_produce.rs`, `delayed_fetch.rs`: acks=all produce and long-poll fetch,
//!   waiting on those notifications (Kafka's purgatory).
//! - `fetch_session.rs`: incremental fetch sessions (KIP-227) and their bounded cache.
//! - `fetcher/`: followers replicating from their leaders (Kafka's replica fetchers).
//! - `isr.rs`: leaders' ISR changes sent to the controller with AlterPartition.
//! - `cluster_view.rs`: the other brokers' addresses, the controller, this broker's epoch.
//! - `throttle.rs`: replication throttles (KIP-73), applied by leaders and followers.
//! - `share/`: share-partitions (KIP-932), the in-flight records a share group's members
//!   acquire and acknowledge (pure state), their share sessions, and the manager that
//!   loads and persists them through the share coordinator; not yet reachable from
//!   ShareFetch.

pub mod append;
pub mod cluster_view;
pub mod delayed_fetch;
pub mod delayed_produce;
pub mod fetch_session;
pub mod fetcher;
pub mod isr;
pub mod log_dir_move;
pub mod manager;
pub mod partition;
pub mod read;
pub mod share;
pub mod state;
pub mod throttle;

pub use append::{AppendData, AppendEntry, AppendOrigin, AppendOutcome};
pub use delayed_fetch::{FetchIsolation, FetchParams};
pub use delayed_produce::DelayedProduce;
pub use manager::ReplicaManager;
pub use partition::{AppendError, Partition};
pub use state::Role;

#[cfg(test)]
mod counting_tests;
#[cfg(test)]
mod replication_tests;
#[cfg(test)]
mod tests;
