//! Rebuilding groups and committed offsets from `__consumer_offsets` at startup.
//!
//! Every batch of every hosted partition is replayed in offset order: the last value
//! per key wins and a tombstone (null value) deletes. Batches are read whole; control
//! batches and record types of other group kinds (share, streams) are skipped. A group
//! is classic or KIP-848 by its latest metadata record: Kafka tombstones one kind
//! before writing the other.

use std::collections::HashMap;

use bytes::Bytes;
use kafka_protocol::records::RecordBatchDecoder;
use tokio::time::Instant;

use super::consumer::{ConsumerGroup, TopicView};
use super::offsets_topic::consumer_group::ConsumerKey;
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

/// Replays every hosted partition; `topics` maps the topic ids of KIP-848 assignments
/// back to names.
pub fn load_all(replicas: &ReplicaManager, partitions: i32, topics: &dyn TopicView) -> Loaded {
    let mut loaded = Loaded::default();
    let now = Instant::now();
    for p in 0..partitions {
        let Some(partition) = replicas.partition(OFFSETS_TOPIC, p) else {
            continue;
        };
        if let Err(e) = load_partition(&partition, &mut loaded, topics, now) {
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
    topics: &dyn TopicView,
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
                let (key, value) = (r.key.as_ref(), r.value.as_ref());
                match apply(loaded, key, value, r.offset, topics, now) {
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
    topics: &dyn TopicView,
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
                if g.consumer.is_none() {
                    let offsets = std::mem::take(&mut g.offsets);
                    *g = dead_placeholder(&group_id);
                    g.offsets = offsets;
                }
            }
        }
        (
            RecordKey::Consumer {
                kind: ConsumerKey::Metadata,
                ..
            },
            None,
        ) => {
            // The consumer group is deleted; its offsets have tombstones of their own.
            if let Some(g) = groups.get_mut(&group_id) {
                if g.consumer.is_some() {
                    let offsets = std::mem::take(&mut g.offsets);
                    *g = dead_placeholder(&group_id);
                    g.offsets = offsets;
                }
            }
        }
        (RecordKey::Consumer { kind, .. }, None) => {
            if let Some(c) = groups.get_mut(&group_id).and_then(|g| g.consumer.as_mut()) {
                c.replay(kind, None, topics)?;
            }
        }
        (RecordKey::Consumer { kind, .. }, Some(RecordValue::Consumer(v))) => {
            let g = groups
                .entry(group_id.clone())
                .or_insert_with(|| dead_placeholder(&group_id));
            if g.consumer.is_none() {
                // Whatever classic state came before is replaced (and was tombstoned).
                let offsets = std::mem::take(&mut g.offsets);
                *g = Group::new(&group_id, 0);
                g.offsets = offsets;
                g.consumer = Some(ConsumerGroup::default());
            }
            if let Some(c) = &mut g.consumer {
                c.replay(kind, Some(v), topics)?;
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

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;
    use crate::coordinator::group::offsets_topic::consumer_group::ConsumerValue;
    use crate::coordinator::group::offsets_topic::GroupValue;

    struct NoTopics;

    impl TopicView for NoTopics {
        fn partitions(&self, _: &str) -> Option<i32> {
            None
        }
        fn names(&self) -> Vec<String> {
            Vec::new()
        }
        fn topic_id(&self, _: &str) -> Option<Uuid> {
            None
        }
        fn topic_name(&self, _: Uuid) -> Option<String> {
            None
        }
    }

    fn consumer_key(kind: ConsumerKey) -> Bytes {
        RecordKey::Consumer {
            group: "g".into(),
            kind,
        }
        .encode()
    }

    fn put(loaded: &mut Loaded, key: Bytes, value: Option<Bytes>) -> Result<(), String> {
        apply(
            loaded,
            Some(&key),
            value.as_ref(),
            0,
            &NoTopics,
            Instant::now(),
        )
    }

    #[test]
    fn the_latest_kind_of_metadata_decides_the_group() {
        let mut loaded = Loaded::default();
        let classic = GroupValue {
            protocol_type: "consumer".into(),
            generation: 3,
            protocol: None,
            leader: None,
            current_state_timestamp: 0,
            members: vec![],
        };
        let group_key = RecordKey::Group { group: "g".into() }.encode();
        put(&mut loaded, group_key.clone(), Some(classic.encode())).unwrap();
        // The classic record is tombstoned, then the consumer group is written.
        put(&mut loaded, group_key, None).unwrap();
        let epoch = ConsumerValue::Metadata { epoch: 4 }.encode();
        put(
            &mut loaded,
            consumer_key(ConsumerKey::Metadata),
            Some(epoch),
        )
        .unwrap();
        let c = loaded.groups["g"].consumer.as_ref().unwrap();
        assert_eq!(c.group_epoch, 4);
        assert_eq!(loaded.groups["g"].generation_id, 0);

        // The consumer group's own tombstone deletes it.
        put(&mut loaded, consumer_key(ConsumerKey::Metadata), None).unwrap();
        assert!(loaded.groups["g"].consumer.is_none());
        assert_eq!(loaded.groups["g"].state, GroupState::Dead);
    }

    #[test]
    fn corrupt_consumer_records_are_refused_without_creating_a_group() {
        let mut loaded = Loaded::default();
        let key = consumer_key(ConsumerKey::CurrentAssignment("m".into()));
        // Version 0, then an array count far past the end of the value.
        let garbage = Bytes::from_static(&[0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0xff, 0x7f]);
        assert!(put(&mut loaded, key.clone(), Some(garbage)).is_err());
        assert!(put(&mut loaded, key, Some(Bytes::from_static(&[0, 7]))).is_err());
        assert!(loaded.groups.is_empty());
        // A tombstone for a group never seen is simply nothing to do.
        assert!(put(&mut loaded, consumer_key(ConsumerKey::Metadata), None).is_ok());
        assert!(loaded.groups.is_empty());
    }
}
