//! The share coordinator's state of each share-partition, built by replaying
//! `__share_group_state` (Kafka's `ShareCoordinatorShard` maps and `ShareGroupOffset`), and
//! the record each write becomes.
//!
//! A ShareSnapshot replaces a share-partition's state; a ShareUpdate is merged into it
//! (its start offset if it moved, its batches combined). Writes become updates until
//! `share.coordinator.snapshot.update.records.per.snapshot` of them follow a snapshot;
//! then the next write is a snapshot of the merged state. Writing and loading are the same
//! replay, so a coordinator that takes over after a failover reads back exactly what the
//! share-partitions wrote.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;

use super::combine::combine_state_batches;
use super::persister::{PersistedState, StateWrite};
use super::records::{
    SharePartitionKey, ShareSnapshotValue, ShareStateKey, ShareUpdateValue, StateBatch,
    UNKNOWN_DELIVERY_COMPLETE_COUNT,
};

pub const SNAPSHOT_UPDATE_RECORDS_PER_SNAPSHOT_CONFIG: &str =
    "share.coordinator.snapshot.update.records.per.snapshot";
pub const SNAPSHOT_UPDATE_RECORDS_PER_SNAPSHOT_DEFAULT: u32 = 500;

/// One share-partition's persisted state (Kafka's `ShareGroupOffset`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareGroupOffset {
    pub snapshot_epoch: i32,
    pub state_epoch: i32,
    pub leader_epoch: i32,
    pub start_offset: i64,
    pub delivery_complete_count: i32,
    pub create_timestamp: i64,
    pub write_timestamp: i64,
    pub state_batches: Vec<StateBatch>,
}

impl ShareGroupOffset {
    fn from_snapshot(v: ShareSnapshotValue) -> Self {
        ShareGroupOffset {
            snapshot_epoch: v.snapshot_epoch,
            state_epoch: v.state_epoch,
            leader_epoch: v.leader_epoch,
            start_offset: v.start_offset,
            delivery_complete_count: v.delivery_complete_count,
            create_timestamp: v.create_timestamp,
            write_timestamp: v.write_timestamp,
            state_batches: v.state_batches,
        }
    }

    fn to_snapshot(&self) -> ShareSnapshotValue {
        ShareSnapshotValue {
            snapshot_epoch: self.snapshot_epoch,
            state_epoch: self.state_epoch,
            leader_epoch: self.leader_epoch,
            start_offset: self.start_offset,
            delivery_complete_count: self.delivery_complete_count,
            create_timestamp: self.create_timestamp,
            write_timestamp: self.write_timestamp,
            state_batches: self.state_batches.clone(),
        }
    }

    /// Kafka's `merge`: an update applied to the state so far.
    fn merge(&mut self, u: &ShareUpdateValue) {
        if u.start_offset != -1 {
            self.start_offset = u.start_offset;
        }
        if u.leader_epoch != -1 {
            self.leader_epoch = u.leader_epoch;
        }
        self.delivery_complete_count = u.delivery_complete_count;
        self.state_batches =
            combine_state_batches(&self.state_batches, &u.state_batches, self.start_offset);
    }
}

/// A record value to append, keyed as it will be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShareStateRecord {
    Snapshot(SharePartitionKey, ShareSnapshotValue),
    Update(SharePartitionKey, ShareUpdateValue),
}

impl ShareStateRecord {
    pub fn key(&self) -> ShareStateKey {
        match self {
            ShareStateRecord::Snapshot(k, _) => ShareStateKey::Snapshot(k.clone()),
            ShareStateRecord::Update(k, _) => ShareStateKey::Update(k.clone()),
        }
    }
}

#[derive(Clone, Debug)]
struct Entry {
    offset: ShareGroupOffset,
    updates_since_snapshot: u32,
}

/// The state of the share-partitions whose keys one `__share_group_state` partition
/// holds.
#[derive(Clone, Debug)]
pub struct ShareStateStore {
    entries: BTreeMap<SharePartitionKey, Entry>,
    /// The highest leader and state epochs seen per key, which fence stale writers.
    leader_epochs: BTreeMap<SharePartitionKey, i32>,
    state_epochs: BTreeMap<SharePartitionKey, i32>,
    updates_per_snapshot: u32,
}

impl ShareStateStore {
    pub fn new(updates_per_snapshot: u32) -> Self {
        ShareStateStore {
            entries: BTreeMap::new(),
            leader_epochs: BTreeMap::new(),
            state_epochs: BTreeMap::new(),
            updates_per_snapshot,
        }
    }

    pub fn get(&self, key: &SharePartitionKey) -> Option<&ShareGroupOffset> {
        self.entries.get(key).map(|e| &e.offset)
    }

    /// Applies one record, as written or as loaded.
    pub fn replay(&mut self, record: &ShareStateRecord) {
        match record {
            ShareStateRecord::Snapshot(key, v) => self.replay_snapshot(key, v.clone()),
            ShareStateRecord::Update(key, v) => self.replay_update(key, v),
        }
    }

    /// Applies a tombstone: the share-partition's state was deleted.
    pub fn replay_tombstone(&mut self, key: &SharePartitionKey) {
        self.entries.remove(key);
        self.leader_epochs.remove(key);
        self.state_epochs.remove(key);
    }

    fn replay_snapshot(&mut self, key: &SharePartitionKey, v: ShareSnapshotValue) {
        raise(&mut self.leader_epochs, key, v.leader_epoch);
        raise(&mut self.state_epochs, key, v.state_epoch);
        let updates = self
            .entries
            .get(key)
            .map_or(0, |e| e.updates_since_snapshot);
        let updates = if updates >= self.updates_per_snapshot {
            0
        } else {
            updates
        };
        self.entries.insert(
            key.clone(),
            Entry {
                offset: ShareGroupOffset::from_snapshot(v),
                updates_since_snapshot: updates,
            },
        );
    }

    fn replay_update(&mut self, key: &SharePartitionKey, v: &ShareUpdateValue) {
        raise(&mut self.leader_epochs, key, v.leader_epoch);
        match self.entries.get_mut(key) {
            Some(e) => {
                e.offset.merge(v);
                e.updates_since_snapshot += 1;
            }
            None => {
                // An update without a snapshot before it (the snapshot was compacted
                // away mid-load): the update is all that is known.
                let offset = ShareGroupOffset {
                    snapshot_epoch: v.snapshot_epoch,
                    state_epoch: 0,
                    leader_epoch: v.leader_epoch,
                    start_offset: v.start_offset,
                    delivery_complete_count: v.delivery_complete_count,
                    create_timestamp: 0,
                    write_timestamp: 0,
                    state_batches: combine_state_batches(&[], &v.state_batches, v.start_offset),
                };
                self.entries.insert(
                    key.clone(),
                    Entry {
                        offset,
                        updates_since_snapshot: 0,
                    },
                );
            }
        }
    }

    /// InitializeShareGroupState: a snapshot starting the share-partition at
    /// `start_offset` with no in-flight records, its fields as Kafka 4.4's share
    /// coordinator writes them: leader epoch 0 (no leader yet), the delivery-complete
    /// count 0 from a known start offset and unknown (-1, left out of the record) from
    /// -1, both timestamps now.
    pub fn initialize_record(
        &self,
        key: &SharePartitionKey,
        state_epoch: i32,
        start_offset: i64,
        now_ms: i64,
    ) -> Result<ShareStateRecord, ResponseError> {
        if let Some(current) = self.state_epochs.get(key) {
            if *current > state_epoch {
                return Err(ResponseError::FencedStateEpoch);
            }
        }
        let snapshot_epoch = self.get(key).map_or(0, |o| o.snapshot_epoch + 1);
        Ok(ShareStateRecord::Snapshot(
            key.clone(),
            ShareSnapshotValue {
                snapshot_epoch,
                state_epoch,
                leader_epoch: 0,
                start_offset,
                delivery_complete_count: match start_offset {
                    -1 => UNKNOWN_DELIVERY_COMPLETE_COUNT,
                    _ => 0,
                },
                create_timestamp: now_ms,
                write_timestamp: now_ms,
                state_batches: Vec::new(),
            },
        ))
    }

    /// WriteShareGroupState for one share-partition: the record to append, or Kafka's
    /// error (a write from an older leader or state epoch is fenced; a share-partition
    /// never initialized cannot be written).
    pub fn write_record(
        &self,
        key: &SharePartitionKey,
        write: &StateWrite,
        now_ms: i64,
    ) -> Result<ShareStateRecord, ResponseError> {
        if write.leader_epoch != -1
            && self
                .leader_epochs
                .get(key)
                .is_some_and(|e| *e > write.leader_epoch)
        {
            return Err(ResponseError::FencedLeaderEpoch);
        }
        if write.state_epoch != -1
            && self
                .state_epochs
                .get(key)
                .is_some_and(|e| *e > write.state_epoch)
        {
            return Err(ResponseError::FencedStateEpoch);
        }
        let Some(entry) = self.entries.get(key) else {
            return Err(ResponseError::InvalidRequest);
        };
        let current = &entry.offset;
        if entry.updates_since_snapshot >= self.updates_per_snapshot {
            let start_offset = if write.start_offset == -1 {
                current.start_offset
            } else {
                write.start_offset
            };
            let snapshot = ShareGroupOffset {
                snapshot_epoch: current.snapshot_epoch + 1,
                state_epoch: if write.state_epoch == -1 {
                    current.state_epoch
                } else {
                    write.state_epoch
                },
                leader_epoch: if write.leader_epoch == -1 {
                    current.leader_epoch
                } else {
                    write.leader_epoch
                },
                start_offset,
                delivery_complete_count: write.delivery_complete_count,
                create_timestamp: current.create_timestamp,
                write_timestamp: now_ms,
                state_batches: combine_state_batches(
                    &current.state_batches,
                    &write.state_batches,
                    start_offset,
                ),
            };
            return Ok(ShareStateRecord::Snapshot(
                key.clone(),
                snapshot.to_snapshot(),
            ));
        }
        Ok(ShareStateRecord::Update(
            key.clone(),
            ShareUpdateValue {
                snapshot_epoch: current.snapshot_epoch,
                leader_epoch: write.leader_epoch,
                start_offset: write.start_offset,
                delivery_complete_count: write.delivery_complete_count,
                state_batches: combine_state_batches(&[], &write.state_batches, write.start_offset),
            },
        ))
    }

    /// ReadShareGroupState for one share-partition: what a new leader initializes from;
    /// None for one never initialized (or whose state was deleted).
    pub fn read(&self, key: &SharePartitionKey) -> Option<PersistedState> {
        self.get(key).map(|o| PersistedState {
            state_epoch: o.state_epoch,
            start_offset: o.start_offset,
            state_batches: o.state_batches.clone(),
        })
    }
}

fn raise(map: &mut BTreeMap<SharePartitionKey, i32>, key: &SharePartitionKey, epoch: i32) {
    let e = map.entry(key.clone()).or_insert(epoch);
    *e = (*e).max(epoch);
}
