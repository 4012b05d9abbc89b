//! Rebuilding groups and committed offsets from `__consumer_offsets` at startup.
//!
//! Every batch of every hosted partition is replayed in offset order: the last value
//! per key wins and a tombstone (null value) deletes. Batches are read whole; control
//! batches and record types other than offsets and group metadata are skipped.

use std::collections::HashMap;

use bytes::Bytes;
use kafka_protocol::records::RecordBatchDecoder;
use tokio::time::Instant;

use super::offsets_topic::{decode_key, decode_value, RecordKey, RecordValue, OFFSETS_TOPIC};
use super::state::{Committed, Group, GroupState};
use crate::log::{LogError, RecordBatchHeader, HEADER_SIZE};
use crate::replica::{Partition, ReplicaManager};

/// Bytes read per step of the replay.
const READ_BYTES: usize = 1024 * 1024;

/// The replayed state of one or more partitions.
#[derive(Default)]
pub struct Loaded {
    pub groups: HashMap<String, Group>,
    pub records: u64,
    pub skipped: u64,
}

pub fn load_all(replicas: &ReplicaManager, partitions: i32) -> Loaded {
    let mut loaded = Loaded::default();
    let now = Instant::now();
    for p in 0..partitions {
        let Some(partition) = replicas.partition(OFFSETS_TOPIC, p) else {
            continue;
        };
        if let Err(e) = load_partition(&partition, &mut loaded, now) {
            tracing::error!(partition = %partition.tp, error = %e,
                "cannot load the offsets topic partition; its groups start empty");
        }
    }
    // Groups whose last record was a tombstone and that kept no offsets are gone.
    loaded
        .groups
        .retain(|_, g| g.state != GroupState::Dead || !g.offsets.is_empty());
    for g in loaded.groups.values_mut() {
        if g.state == GroupState::Dead {
            g.state = GroupState::Empty;
        }
    }
    loaded
}

fn load_partition(
    partition: &Partition,
    loaded: &mut Loaded,
    now: Instant,
) -> Result<(), LogError> {
    let mut offset = partition.log.log_start_offset();
    loop {
        let data = partition.read(offset, READ_BYTES, true)?;
        if data.records.is_empty() {
            return Ok(());
        }
        let next = next_offset(&data.records)?;
        if next <= offset {
            return Ok(());
        }
        let mut buf = data.records.clone();
        let sets = RecordBatchDecoder::decode_all(&mut buf)
            .map_err(|e| LogError::CorruptMessage(e.to_string()))?;
        for set in sets {
            for r in set.records {
                if r.control || r.offset < offset {
                    continue;
                }
                match apply(loaded, r.key.as_ref(), r.value.as_ref(), r.offset, now) {
                    Ok(()) => loaded.records += 1,
                    Err(why) => {
                        loaded.skipped += 1;
                        tracing::warn!(partition = %partition.tp, offset = r.offset, "skipping record: {why}");
                    }
                }
            }
        }
        offset = next;
    }
}

/// The offset after the last whole batch in `records`.
fn next_offset(records: &Bytes) -> Result<i64, LogError> {
    let mut pos = 0;
    let mut next = -1;
    while records.len() - pos >= HEADER_SIZE {
        let h = RecordBatchHeader::parse(&records[pos..])?;
        let size = h.size_in_bytes();
        if size == 0 || pos + size > records.len() {
            break;
        }
        next = h.next_offset();
        pos += size;
    }
    Ok(next)
}

/// Applies one record to the replayed state.
pub fn apply(
    loaded: &mut Loaded,
    key: Option<&Bytes>,
    value: Option<&Bytes>,
    record_offset: i64,
    now: Instant,
) -> Result<(), String> {
    let key = key.ok_or("record without a key")?;
    let Some(key) = decode_key(key).map_err(|e| e.to_string())? else {
        return Ok(());
    };
    let group_id = key.group().to_string();
    let value = match value {
        Some(v) => Some(decode_value(&key, v).map_err(|e| e.to_string())?),
        None => None,
    };
    let groups = &mut loaded.groups;
    match (key, value) {
        (
            RecordKey::Offset {
                topic, partition, ..
            },
            Some(RecordValue::Offset(v)),
        ) => {
            let g = groups
                .entry(group_id.clone())
                .or_insert_with(|| dead_placeholder(&group_id));
            g.apply_commit(
                &topic,
                partition,
                Committed {
                    value: v,
                    record_offset,
                },
            );
        }
        (
            RecordKey::Offset {
                topic, partition, ..
            },
            None,
        ) => {
            if let Some(g) = groups.get_mut(&group_id) {
                g.offsets.remove(&(topic, partition));
            }
        }
        (RecordKey::Group { .. }, Some(RecordValue::Group(v))) => {
            let offsets = groups
                .remove(&group_id)
                .map(|g| g.offsets)
                .unwrap_or_default();
            let mut g = Group::restore(&group_id, v, now);
            g.offsets = offsets;
            groups.insert(group_id, g);
        }
        (RecordKey::Group { .. }, None) => {
            if let Some(g) = groups.get_mut(&group_id) {
                let offsets = std::mem::take(&mut g.offsets);
                *g = dead_placeholder(&group_id);
                g.offsets = offsets;
            }
        }
        _ => return Err("value does not match its key".into()),
    }
    Ok(())
}

/// A group known only from its offsets so far (or whose metadata was deleted).
fn dead_placeholder(group_id: &str) -> Group {
    // Timestamp 0: until metadata says otherwise, offsets expire by their commit time.
    let mut g = Group::new(group_id, 0);
    g.state = GroupState::Dead;
    g
}
