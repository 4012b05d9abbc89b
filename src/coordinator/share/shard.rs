//! ShareCoordinatorShard: the share-partitions' state kept in one `__share_group_state`
//! partition, as the coordinator runtime serves it (Kafka's `ShareCoordinatorShard`).
//!
//! Every operation answers from the state replayed so far and returns the record that
//! changes it; the state changes only when that record is replayed after the append,
//! exactly as a load replays the partition. An operation refused (a fenced epoch, a
//! share-partition never initialized) writes nothing and carries its Kafka error in the
//! response, as the RPCs answer per partition.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use tokio::time::Instant;

use super::persister::{PersistedState, StateWrite};
use super::records::{
    decode_key, decode_snapshot_value, decode_update_value, encode_key, encode_snapshot_value,
    encode_update_value, SharePartitionKey, ShareStateKey, ShareUpdateValue,
};
use super::state::{ShareStateRecord, ShareStateStore};
use crate::coordinator::group::records::partition_for as java_string_partition;
use crate::coordinator::runtime::{Shard, Written};
use crate::error::ApiError;
use crate::log::uuid_to_kafka_string;

/// Kafka's message for a ReadShareGroupState of a share-partition without state
/// (`ShareCoordinatorShard.READ_UNINITIALIZED_SHARE_PARTITION`), which its
/// share-partition leader passes on to the member's ShareFetch.
pub const READ_UNINITIALIZED_SHARE_PARTITION: &str =
    "Read operation on uninitialized share partition not allowed.";

/// One record of `__share_group_state`: a snapshot or an update, or the tombstone that
/// deletes a share-partition's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShareStateEntry {
    Record(ShareStateRecord),
    Tombstone(SharePartitionKey),
}

/// The `__share_group_state` partition holding a share-partition's state: Kafka's
/// `abs(hashCode("group:topicId:partition")) % partitions`, the topic id in Kafka's text
/// form. FindCoordinator with key type SHARE names the same key.
pub fn partition_for(key: &SharePartitionKey, partitions: i32) -> i32 {
    java_string_partition(&coordinator_key(key), partitions)
}

/// Kafka's `SharePartitionKey.asCoordinatorKey`.
pub fn coordinator_key(key: &SharePartitionKey) -> String {
    format!(
        "{}:{}:{}",
        key.group_id,
        uuid_to_kafka_string(key.topic_id),
        key.partition
    )
}

pub struct ShareCoordinatorShard {
    store: ShareStateStore,
}

impl ShareCoordinatorShard {
    /// `updates_per_snapshot`: `share.coordinator.snapshot.update.records.per.snapshot`.
    pub fn new(updates_per_snapshot: u32) -> Self {
        ShareCoordinatorShard {
            store: ShareStateStore::new(updates_per_snapshot),
        }
    }

    pub fn store(&self) -> &ShareStateStore {
        &self.store
    }

    /// InitializeShareGroupState for one share-partition.
    pub fn initialize(
        &self,
        key: &SharePartitionKey,
        state_epoch: i32,
        start_offset: i64,
        now_ms: i64,
    ) -> Written<ShareStateEntry, Result<(), ResponseError>> {
        match self
            .store
            .initialize_record(key, state_epoch, start_offset, now_ms)
        {
            Ok(record) => Written::new(vec![ShareStateEntry::Record(record)], Ok(())),
            Err(e) => Written::response(Err(e)),
        }
    }

    /// WriteShareGroupState for one share-partition.
    pub fn write(
        &self,
        key: &SharePartitionKey,
        write: &StateWrite,
        now_ms: i64,
    ) -> Written<ShareStateEntry, Result<(), ResponseError>> {
        match self.store.write_record(key, write, now_ms) {
            Ok(record) => Written::new(vec![ShareStateEntry::Record(record)], Ok(())),
            Err(e) => Written::response(Err(e)),
        }
    }

    /// ReadShareGroupState from a leader at `leader_epoch` (-1: no fencing): a newer
    /// leader's epoch is recorded first, so the writes of the leaders before it are
    /// fenced from then on; an older one is itself fenced (Kafka's
    /// `readStateAndMaybeUpdateLeaderEpoch`). A share-partition without state (never
    /// initialized, or deleted) is refused as Kafka's `maybeGetReadStateError` refuses
    /// it, INVALID_REQUEST: its leader must not start before the group coordinator
    /// initialized it at the group's state epoch, or its first write after that
    /// initialization would be fenced.
    pub fn read(
        &self,
        key: &SharePartitionKey,
        leader_epoch: i32,
    ) -> Written<ShareStateEntry, Result<PersistedState, ApiError>> {
        let (Some(current), Some(state)) = (self.store.get(key), self.store.read(key)) else {
            tracing::debug!(group = %key.group_id, topic_id = %key.topic_id,
                partition = key.partition, "read on uninitialized share partition");
            return Written::response(Err(ApiError::new(
                ResponseError::InvalidRequest,
                READ_UNINITIALIZED_SHARE_PARTITION,
            )));
        };
        if leader_epoch == -1 || leader_epoch == current.leader_epoch {
            return Written::response(Ok(state));
        }
        if leader_epoch < current.leader_epoch {
            return Written::response(Err(ResponseError::FencedLeaderEpoch.into()));
        }
        let update = ShareUpdateValue {
            snapshot_epoch: current.snapshot_epoch,
            leader_epoch,
            start_offset: -1,
            delivery_complete_count: current.delivery_complete_count,
            state_batches: Vec::new(),
        };
        let record = ShareStateRecord::Update(key.clone(), update);
        Written::new(vec![ShareStateEntry::Record(record)], Ok(state))
    }

    /// DeleteShareGroupState for one share-partition: a tombstone, whether or not it
    /// had state.
    pub fn delete(&self, key: &SharePartitionKey) -> Written<ShareStateEntry, ()> {
        Written::new(vec![ShareStateEntry::Tombstone(key.clone())], ())
    }
}

impl Shard for ShareCoordinatorShard {
    type Record = ShareStateEntry;

    fn encode(record: &ShareStateEntry) -> (Bytes, Option<Bytes>) {
        match record {
            ShareStateEntry::Record(r) => {
                let value = match r {
                    ShareStateRecord::Snapshot(_, v) => encode_snapshot_value(v),
                    ShareStateRecord::Update(_, v) => encode_update_value(v),
                };
                (encode_key(&r.key()), Some(value))
            }
            // Kafka tombstones the snapshot key.
            ShareStateEntry::Tombstone(k) => {
                (encode_key(&ShareStateKey::Snapshot(k.clone())), None)
            }
        }
    }

    fn decode(
        key: Option<&Bytes>,
        value: Option<&Bytes>,
    ) -> Result<Option<ShareStateEntry>, String> {
        let key = key.ok_or("record without a key")?;
        let key = decode_key(key.clone()).map_err(|e| e.to_string())?;
        let Some(value) = value else {
            return Ok(Some(ShareStateEntry::Tombstone(
                key.partition_key().clone(),
            )));
        };
        let record = match key {
            ShareStateKey::Snapshot(k) => ShareStateRecord::Snapshot(
                k,
                decode_snapshot_value(value.clone()).map_err(|e| e.to_string())?,
            ),
            ShareStateKey::Update(k) => ShareStateRecord::Update(
                k,
                decode_update_value(value.clone()).map_err(|e| e.to_string())?,
            ),
        };
        Ok(Some(ShareStateEntry::Record(record)))
    }

    fn replay(&mut self, _offset: i64, record: ShareStateEntry) -> Result<(), String> {
        match record {
            ShareStateEntry::Record(r) => self.store.replay(&r),
            ShareStateEntry::Tombstone(k) => self.store.replay_tombstone(&k),
        }
        Ok(())
    }

    fn on_loaded(&mut self, _now: Instant) {}

    fn on_unloaded(&mut self) {}

    fn next_deadline(&self) -> Option<Instant> {
        None
    }

    fn on_deadline(&mut self, _now: Instant) -> Written<ShareStateEntry, ()> {
        Written::response(())
    }
}
