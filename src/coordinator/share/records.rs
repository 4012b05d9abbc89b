//! The records of `__share_group_state`, with Kafka's exact schemas
//! (share-coordinator `ShareSnapshotKey/Value`, `ShareUpdateKey/Value`, Kafka 4.2+).
//!
//! Key: `i16 record type` (0 ShareSnapshot, 1 ShareUpdate; the schemas' `apiKey`), then
//! version-0 non-flexible fields `GroupId string, TopicId uuid, Partition i32`.
//!
//! Value: `i16 version (0)`, then flexible fields:
//! - ShareSnapshotValue: `SnapshotEpoch i32, StateEpoch i32, LeaderEpoch i32,
//!   StartOffset i64, CreateTimestamp i64, WriteTimestamp i64, StateBatches[]`;
//! - ShareUpdateValue: `SnapshotEpoch i32, LeaderEpoch i32, StartOffset i64 (-1: not
//!   moved), StateBatches[]`;
//! - both: tagged field 0 `DeliveryCompleteCount i32` (KIP-1226, default -1, written only
//!   when set);
//! - StateBatch: `FirstOffset i64, LastOffset i64, DeliveryState i8 (0 available,
//!   2 acknowledged, 4 archived), DeliveryCount i16` and its own (empty) tagged fields.
//!
//! A null value is a tombstone: the share-partition's state was deleted.

use bytes::{BufMut, Bytes, BytesMut};
use uuid::Uuid;

pub use crate::coordinator::wire::SchemaError;
use crate::coordinator::wire::{put_str, put_uvarint, Reader};

pub const SHARE_SNAPSHOT_RECORD_TYPE: i16 = 0;
pub const SHARE_UPDATE_RECORD_TYPE: i16 = 1;
const VALUE_VERSION: i16 = 0;
const DELIVERY_COMPLETE_COUNT_TAG: u32 = 0;
/// KIP-1226's default: the count is not known.
pub const UNKNOWN_DELIVERY_COMPLETE_COUNT: i32 = -1;

/// One range of offsets in one delivery state (Kafka's `PersisterStateBatch`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StateBatch {
    pub first_offset: i64,
    pub last_offset: i64,
    pub delivery_state: i8,
    pub delivery_count: i16,
}

impl StateBatch {
    pub fn new(
        first_offset: i64,
        last_offset: i64,
        delivery_state: i8,
        delivery_count: i16,
    ) -> Self {
        StateBatch {
            first_offset,
            last_offset,
            delivery_state,
            delivery_count,
        }
    }
}

/// Which share-partition a record is about (Kafka's `SharePartitionKey`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SharePartitionKey {
    pub group_id: String,
    pub topic_id: Uuid,
    pub partition: i32,
}

/// A record key: a full snapshot or an update of the share-partition's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShareStateKey {
    Snapshot(SharePartitionKey),
    Update(SharePartitionKey),
}

impl ShareStateKey {
    pub fn partition_key(&self) -> &SharePartitionKey {
        match self {
            ShareStateKey::Snapshot(k) | ShareStateKey::Update(k) => k,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareSnapshotValue {
    pub snapshot_epoch: i32,
    pub state_epoch: i32,
    pub leader_epoch: i32,
    pub start_offset: i64,
    pub delivery_complete_count: i32,
    pub create_timestamp: i64,
    pub write_timestamp: i64,
    pub state_batches: Vec<StateBatch>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareUpdateValue {
    pub snapshot_epoch: i32,
    pub leader_epoch: i32,
    /// -1 when the start offset did not move.
    pub start_offset: i64,
    pub delivery_complete_count: i32,
    pub state_batches: Vec<StateBatch>,
}

pub fn encode_key(key: &ShareStateKey) -> Bytes {
    let (kind, k) = match key {
        ShareStateKey::Snapshot(k) => (SHARE_SNAPSHOT_RECORD_TYPE, k),
        ShareStateKey::Update(k) => (SHARE_UPDATE_RECORD_TYPE, k),
    };
    let mut b = BytesMut::with_capacity(2 + 2 + k.group_id.len() + 16 + 4);
    b.put_i16(kind);
    put_str(&mut b, &k.group_id);
    b.put_slice(k.topic_id.as_bytes());
    b.put_i32(k.partition);
    b.freeze()
}

pub fn decode_key(buf: Bytes) -> Result<ShareStateKey, SchemaError> {
    let mut r = Reader::new(buf, false);
    let kind = r.i16()?;
    let key = SharePartitionKey {
        group_id: r.str()?,
        topic_id: r.uuid()?,
        partition: r.i32()?,
    };
    match kind {
        SHARE_SNAPSHOT_RECORD_TYPE => Ok(ShareStateKey::Snapshot(key)),
        SHARE_UPDATE_RECORD_TYPE => Ok(ShareStateKey::Update(key)),
        other => Err(SchemaError::UnknownVersion {
            what: "share state key",
            version: other,
        }),
    }
}

pub fn encode_snapshot_value(v: &ShareSnapshotValue) -> Bytes {
    let mut b = BytesMut::with_capacity(48 + 21 * v.state_batches.len());
    b.put_i16(VALUE_VERSION);
    b.put_i32(v.snapshot_epoch);
    b.put_i32(v.state_epoch);
    b.put_i32(v.leader_epoch);
    b.put_i64(v.start_offset);
    b.put_i64(v.create_timestamp);
    b.put_i64(v.write_timestamp);
    put_batches(&mut b, &v.state_batches);
    put_delivery_complete_count(&mut b, v.delivery_complete_count);
    b.freeze()
}

pub fn encode_update_value(v: &ShareUpdateValue) -> Bytes {
    let mut b = BytesMut::with_capacity(32 + 21 * v.state_batches.len());
    b.put_i16(VALUE_VERSION);
    b.put_i32(v.snapshot_epoch);
    b.put_i32(v.leader_epoch);
    b.put_i64(v.start_offset);
    put_batches(&mut b, &v.state_batches);
    put_delivery_complete_count(&mut b, v.delivery_complete_count);
    b.freeze()
}

pub fn decode_snapshot_value(buf: Bytes) -> Result<ShareSnapshotValue, SchemaError> {
    let mut r = value_reader(buf, "ShareSnapshotValue")?;
    let snapshot_epoch = r.i32()?;
    let state_epoch = r.i32()?;
    let leader_epoch = r.i32()?;
    let start_offset = r.i64()?;
    let create_timestamp = r.i64()?;
    let write_timestamp = r.i64()?;
    let state_batches = read_batches(&mut r)?;
    let delivery_complete_count = read_delivery_complete_count(&mut r)?;
    Ok(ShareSnapshotValue {
        snapshot_epoch,
        state_epoch,
        leader_epoch,
        start_offset,
        delivery_complete_count,
        create_timestamp,
        write_timestamp,
        state_batches,
    })
}

pub fn decode_update_value(buf: Bytes) -> Result<ShareUpdateValue, SchemaError> {
    let mut r = value_reader(buf, "ShareUpdateValue")?;
    let snapshot_epoch = r.i32()?;
    let leader_epoch = r.i32()?;
    let start_offset = r.i64()?;
    let state_batches = read_batches(&mut r)?;
    let delivery_complete_count = read_delivery_complete_count(&mut r)?;
    Ok(ShareUpdateValue {
        snapshot_epoch,
        leader_epoch,
        start_offset,
        delivery_complete_count,
        state_batches,
    })
}

fn value_reader(buf: Bytes, what: &'static str) -> Result<Reader, SchemaError> {
    let mut r = Reader::new(buf, true);
    match r.i16()? {
        VALUE_VERSION => Ok(r),
        version => Err(SchemaError::UnknownVersion { what, version }),
    }
}

fn put_batches(b: &mut BytesMut, batches: &[StateBatch]) {
    put_uvarint(b, u32::try_from(batches.len() + 1).unwrap_or(u32::MAX));
    for s in batches {
        b.put_i64(s.first_offset);
        b.put_i64(s.last_offset);
        b.put_i8(s.delivery_state);
        b.put_i16(s.delivery_count);
        b.put_u8(0); // no tagged fields
    }
}

/// The top-level tagged-field section: tag 0 when the count is known.
fn put_delivery_complete_count(b: &mut BytesMut, count: i32) {
    if count == UNKNOWN_DELIVERY_COMPLETE_COUNT {
        b.put_u8(0);
        return;
    }
    b.put_u8(1);
    put_uvarint(b, DELIVERY_COMPLETE_COUNT_TAG);
    put_uvarint(b, 4);
    b.put_i32(count);
}

/// Reads a state-batch array; its length is checked against the bytes left before
/// anything is allocated (a batch is at least 20 bytes).
fn read_batches(r: &mut Reader) -> Result<Vec<StateBatch>, SchemaError> {
    let n = r.array_len()?;
    let mut out = Vec::with_capacity(n.min(1 << 16));
    for _ in 0..n {
        out.push(StateBatch {
            first_offset: r.i64()?,
            last_offset: r.i64()?,
            delivery_state: r.i8()?,
            delivery_count: r.i16()?,
        });
        r.skip_tags()?;
    }
    Ok(out)
}

fn read_delivery_complete_count(r: &mut Reader) -> Result<i32, SchemaError> {
    let mut count = UNKNOWN_DELIVERY_COMPLETE_COUNT;
    for (tag, data) in r.tagged_fields()? {
        if tag == DELIVERY_COMPLETE_COUNT_TAG {
            let bytes: [u8; 4] = data[..]
                .try_into()
                .map_err(|_| SchemaError::Invalid("DeliveryCompleteCount tagged field"))?;
            count = i32::from_be_bytes(bytes);
        }
    }
    Ok(count)
}
