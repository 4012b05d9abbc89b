//! Share-partitions (KIP-932): a share group's view of a partition this broker leads,
//! where records are handed out to many members at once, each under an acquisition lock,
//! and acknowledged one by one.
//!
//! Why here, beside the replica manager and not under `coordinator/`: as in Kafka, where
//! `SharePartition` and `SharePartitionManager` sit in `kafka.server.share` next to
//! `ReplicaManager`, a share-partition lives with the partition's leadership. ShareFetch
//! reads the log through `ReplicaManager::fetch` and acquires from what it read, the
//! window follows the log start offset and the last stable offset, and it moves to the new
//! leader when leadership moves. The share coordinator (`coordinator/share/`) only
//! persists what share-partitions write, in `__share_group_state`.
//!
//! The state machine is pure: no I/O, no clock of its own (every call takes `now_ms`), no
//! timers (the caller asks for `next_lock_deadline` and calls `expire_locks`). Changes
//! that must be persisted come out as a `PendingWrite` whose outcome the caller reports
//! with `complete_write`.
//!
//! - `config.rs`: the limits (`group.share.record.lock.duration.ms`,
//!   `group.share.delivery.count.limit`, `group.share.partition.max.record.locks`) and
//!   `share.auto.offset.reset`.
//! - `in_flight.rs`: record states, transitions, batches and their split per offset.
//! - `partition.rs`: the window, its start offset, lock expiry, releases, persisted state.
//! - `acquire.rs`: what a ShareFetch acquires; read_committed over aborted transactions.
//! - `acknowledge.rs`: ACCEPT, RELEASE, REJECT, GAP (and RENEW) on offset ranges.
//! - `session.rs`: share sessions, the epochs of a member's ShareFetch and
//!   ShareAcknowledge requests, bounded in number.
//! - `manager.rs`: the share-partitions led here, loaded from and persisting through the
//!   share coordinator (the one part that is not pure).
//! - `read.rs`: the batch headers a share fetch acquires from, and the bytes of the
//!   batches holding what it acquired (all a ShareFetch answer carries).
//! - `service.rs`: [`Shares`], what the ShareFetch and ShareAcknowledge handlers call:
//!   the log read and acquisition under the replica manager's delayed fetch, the
//!   acquisition lock timer, the share sessions.
//!
//! Bounds: the window (start offset to end offset) stops growing at `max_record_locks`
//! records, exceeded by less than one log batch since new records are acquired in whole
//! batches; records released inside a full window are acquired again without growing it.
//! Every per-record structure is within the window, so a member that acquires and never
//! acknowledges holds at most that many records, for at most the lock duration each, and
//! at most `delivery_count_limit` times.

pub mod acknowledge;
pub mod acquire;
pub mod config;
pub mod error;
pub mod in_flight;
pub mod manager;
pub mod partition;
pub mod read;
pub mod service;
pub mod session;

pub use acknowledge::{validate_acknowledgement_batches, AcknowledgeType, AcknowledgementBatch};
pub use acquire::{
    AbortedTransaction, AcquireRequest, AcquiredRecords, ControlMarker, FetchedBatch,
    ShareAcquireMode, ShareAcquiredRecords,
};
pub use config::{ShareAutoOffsetReset, SharePartitionConfig};
pub use error::ShareError;
pub use in_flight::RecordState;
pub use partition::{PendingWrite, SharePartition};
pub use service::Shares;

#[cfg(test)]
mod tests;
