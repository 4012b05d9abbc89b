//! SharePartitionManager: the share-partitions this broker leads, each loaded from its
//! persisted state on first use and persisting every change through the [`Persister`]
//! (Kafka's `SharePartitionManager`, without the ShareFetch sessions and the log reads,
//! which its callers bring).
//!
//! A share-partition is locked only while its state machine runs, never across a write
//! to the persister: an acknowledgement's records sit in an open transition meanwhile
//! (nobody else can take them), and the write's outcome commits or rolls them back.
//! Loading is the exception: one caller reads the persisted state while the others wait
//! for it, so a share-partition is initialized once.

use std::collections::HashMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use parking_lot::Mutex;

use super::{
    AcknowledgementBatch, AcquireRequest, PendingWrite, ShareAcquiredRecords, ShareError,
    SharePartition, SharePartitionConfig,
};
use crate::coordinator::share::{Persister, SharePartitionKey};
use crate::error::ApiError;

/// The error a member gets for a share-partition whose persister refused a read or a
/// write (Kafka's `SharePartition.fetchPersisterError`): the coordinator being away is
/// COORDINATOR_NOT_AVAILABLE, a fenced epoch NOT_LEADER_OR_FOLLOWER (the member looks
/// for the leader again), a missing group or partition as it is, anything else
/// UNKNOWN_SERVER_ERROR with the persister's message (for a share-partition not
/// initialized yet, "Read operation on uninitialized share partition not allowed.",
/// which clients log and fetch again after).
pub fn persister_error(e: ApiError) -> ApiError {
    let error = match e.error {
        ResponseError::NotCoordinator
        | ResponseError::CoordinatorNotAvailable
        | ResponseError::CoordinatorLoadInProgress => ResponseError::CoordinatorNotAvailable,
        ResponseError::FencedLeaderEpoch | ResponseError::FencedStateEpoch => {
            ResponseError::NotLeaderOrFollower
        }
        e @ (ResponseError::GroupIdNotFound | ResponseError::UnknownTopicOrPartition) => e,
        ResponseError::SaslAuthenticationFailed | ResponseError::UnsupportedVersion => {
            return ApiError::new(
                ResponseError::UnknownServerError,
                "Unable to complete operation due to server error.",
            )
        }
        _ => ResponseError::UnknownServerError,
    };
    ApiError {
        error,
        message: e.message,
    }
}

/// One share-partition slot: loaded once, then shared.
struct Slot {
    /// Held by the one caller loading the share-partition.
    loading: Arc<tokio::sync::Mutex<()>>,
    partition: Mutex<Option<SharePartition>>,
}

/// How to start a share-partition the persister holds no start offset for.
pub struct Load {
    pub leader_epoch: i32,
    pub config: SharePartitionConfig,
    /// The start offset `share.auto.offset.reset` gives, asked only when needed.
    pub initial_start_offset: Box<dyn FnOnce() -> Result<i64, ShareError> + Send>,
}

pub struct SharePartitionManager {
    persister: Arc<dyn Persister>,
    partitions: Mutex<HashMap<SharePartitionKey, Arc<Slot>>>,
}

impl SharePartitionManager {
    pub fn new(persister: Arc<dyn Persister>) -> Self {
        SharePartitionManager {
            persister,
            partitions: Mutex::new(HashMap::new()),
        }
    }

    /// The share-partitions loaded here.
    pub fn keys(&self) -> Vec<SharePartitionKey> {
        self.partitions.lock().keys().cloned().collect()
    }

    /// Loads `key`'s share-partition from the persister unless it is loaded already.
    /// A read the persister refuses (no state yet: the group coordinator has not
    /// initialized it; a newer leader's epoch; the coordinator unavailable), or state
    /// that cannot be a share-partition's, leaves it out of this manager and answers
    /// the error the member gets (Kafka's `handleInitializationException`): the next
    /// fetch loads it again.
    pub async fn load(&self, key: &SharePartitionKey, load: Load) -> Result<(), ApiError> {
        let (slot, _loading) = loop {
            let slot = self
                .partitions
                .lock()
                .entry(key.clone())
                .or_insert_with(|| {
                    Arc::new(Slot {
                        loading: Arc::new(tokio::sync::Mutex::new(())),
                        partition: Mutex::new(None),
                    })
                })
                .clone();
            if slot.partition.lock().is_some() {
                return Ok(());
            }
            let loading = slot.loading.clone().lock_owned().await;
            if slot.partition.lock().is_some() {
                return Ok(());
            }
            // The load this one waited for failed and dropped the slot: start again
            // with the current one.
            let current = self
                .partitions
                .lock()
                .get(key)
                .is_some_and(|s| Arc::ptr_eq(s, &slot));
            if current {
                break (slot, loading);
            }
        };
        let loaded = match self.persister.read(key.clone(), load.leader_epoch).await {
            Ok(persisted) => SharePartition::initialize(
                load.config,
                load.leader_epoch,
                &persisted,
                load.initial_start_offset,
            )
            .map_err(|e| {
                tracing::warn!(group = %key.group_id, topic_id = %key.topic_id,
                    partition = key.partition, error = %e, "share-partition failed to load");
                ApiError::from(e)
            }),
            Err(e) => {
                tracing::debug!(group = %key.group_id, topic_id = %key.topic_id,
                    partition = key.partition, error = %e,
                    "share-partition's persisted state could not be read");
                Err(persister_error(e))
            }
        };
        match loaded {
            Ok(sp) => {
                *slot.partition.lock() = Some(sp);
                Ok(())
            }
            Err(e) => {
                self.remove_slot(key, &slot);
                Err(e)
            }
        }
    }

    /// Drops `key`'s share-partition if `slot` is still the one held for it (not one a
    /// later load made meanwhile).
    fn remove_slot(&self, key: &SharePartitionKey, slot: &Arc<Slot>) {
        let mut partitions = self.partitions.lock();
        if partitions.get(key).is_some_and(|s| Arc::ptr_eq(s, slot)) {
            partitions.remove(key);
        }
    }

    /// This broker no longer leads the share-partition (or the group is gone): it is
    /// dropped, and loads again from the persisted state if it comes back.
    pub fn remove(&self, key: &SharePartitionKey) {
        self.partitions.lock().remove(key);
    }

    /// Runs `f` on a loaded share-partition; UNKNOWN_TOPIC_OR_PARTITION when it is not.
    fn with<R>(
        &self,
        key: &SharePartitionKey,
        f: impl FnOnce(&mut SharePartition) -> R,
    ) -> Result<R, ResponseError> {
        let slot = self
            .partitions
            .lock()
            .get(key)
            .cloned()
            .ok_or(ResponseError::UnknownTopicOrPartition)?;
        let mut guard = slot.partition.lock();
        let sp = guard
            .as_mut()
            .ok_or(ResponseError::UnknownTopicOrPartition)?;
        Ok(f(sp))
    }

    /// Where the next fetch from the log starts for this share-partition, and whether
    /// anything may be acquired at all.
    pub fn next_fetch(&self, key: &SharePartitionKey) -> Result<Option<i64>, ResponseError> {
        self.with(key, |sp| {
            sp.can_acquire_records().then(|| sp.next_fetch_offset())
        })
    }

    /// Where the next fetch reads from, and the last offset an acquisition of at most
    /// `max_records` can reach from there: records in the window are acquired again only
    /// below its end offset, new ones only from it on (new records of batch-optimized
    /// acquisition end in the batch holding this offset). None while nothing is acquirable.
    pub fn next_fetch_span(
        &self,
        key: &SharePartitionKey,
        max_records: u32,
    ) -> Result<Option<(i64, i64)>, ResponseError> {
        self.with(key, |sp| {
            sp.can_acquire_records().then(|| {
                let next = sp.next_fetch_offset();
                let last = next
                    .max(sp.end_offset())
                    .saturating_add(i64::from(max_records));
                (next, last)
            })
        })
    }

    /// Acquires for a member among the batches the log returned.
    pub fn acquire(
        &self,
        key: &SharePartitionKey,
        req: &AcquireRequest<'_>,
        now_ms: i64,
    ) -> Result<ShareAcquiredRecords, ResponseError> {
        self.with(key, |sp| sp.acquire(req, now_ms))
    }

    /// A member's acknowledgements, persisted before they count: INVALID_RECORD_STATE
    /// or INVALID_REQUEST for what the share-partition refuses, the persister's error
    /// when the write fails (the records then go back to the member, or to AVAILABLE if
    /// their lock ran out meanwhile).
    pub async fn acknowledge(
        &self,
        key: &SharePartitionKey,
        member_id: &str,
        batches: &[AcknowledgementBatch],
        now_ms: i64,
    ) -> Result<(), ResponseError> {
        let pending = self
            .with(key, |sp| sp.acknowledge(member_id, batches, now_ms))?
            .map_err(|e| e.response_error())?;
        self.persist(key, pending, now_ms).await
    }

    /// Releases every record `member_id` holds (its share session closed, or it left).
    pub async fn release_member(
        &self,
        key: &SharePartitionKey,
        member_id: &str,
        now_ms: i64,
    ) -> Result<(), ResponseError> {
        let pending = self
            .with(key, |sp| sp.release_acquired_records(member_id, now_ms))?
            .map_err(|e| e.response_error())?;
        self.persist(key, pending, now_ms).await
    }

    /// Releases the records whose acquisition locks ran out, in every share-partition,
    /// and persists that; returns the earliest lock deadline left, for the caller's timer.
    pub async fn expire_locks(&self, now_ms: i64) -> Option<i64> {
        for key in self.keys() {
            let pending = self.with(&key, |sp| sp.expire_locks(now_ms)).ok().flatten();
            if let Some(pending) = pending {
                // The release stands whatever the write's outcome; a failed write only
                // means the persisted state is behind until the next one.
                if let Err(e) = self.persist(&key, pending, now_ms).await {
                    tracing::debug!(group = %key.group_id, partition = key.partition,
                        error = ?e, "persisting expired acquisition locks failed");
                }
            }
        }
        self.keys()
            .iter()
            .filter_map(|k| self.with(k, |sp| sp.next_lock_deadline()).ok().flatten())
            .min()
    }

    /// Writes a pending change and reports the outcome to the share-partition. A write
    /// refused as the persister refuses a stale share-partition (a newer leader or
    /// state epoch, the group or the partition gone) drops it here, so the next fetch
    /// loads the current state, as Kafka's `fencedSharePartitionHandler` does; the
    /// error is the one the member gets (Kafka's `fetchPersisterError`).
    async fn persist(
        &self,
        key: &SharePartitionKey,
        pending: PendingWrite,
        now_ms: i64,
    ) -> Result<(), ResponseError> {
        if pending.is_empty() {
            return Ok(());
        }
        let slot = self.partitions.lock().get(key).cloned();
        let result = self
            .persister
            .write(key.clone(), pending.write.clone())
            .await
            .map_err(|e| persister_error(e.into()).error);
        // The share-partition may have been dropped meanwhile (leadership moved): the
        // outcome then concerns nobody here.
        let _ = self.with(key, |sp| {
            sp.complete_write(
                &pending,
                result.as_ref().map(|_| ()).map_err(|_| ()),
                now_ms,
            )
        });
        if let (
            Err(
                e @ (ResponseError::NotLeaderOrFollower
                | ResponseError::GroupIdNotFound
                | ResponseError::UnknownTopicOrPartition),
            ),
            Some(slot),
        ) = (&result, &slot)
        {
            tracing::info!(group = %key.group_id, topic_id = %key.topic_id,
                partition = key.partition, error = ?e,
                "share-partition fenced by its persister: dropped, to load again");
            self.remove_slot(key, slot);
        }
        result
    }

    /// Runs `f` on a loaded share-partition's state, for views and tests.
    pub fn inspect<R>(
        &self,
        key: &SharePartitionKey,
        f: impl FnOnce(&SharePartition) -> R,
    ) -> Result<R, ResponseError> {
        self.with(key, |sp| f(sp))
    }
}
