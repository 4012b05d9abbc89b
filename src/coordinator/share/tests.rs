//! The `__share_group_state` record bytes and the state the share coordinator keeps.

use bytes::Bytes;

use super::combine::combine_state_batches;
use super::records::*;
use super::state::{ShareStateRecord, ShareStateStore};
use super::{PersistedState, StateWrite};

fn key() -> SharePartitionKey {
    SharePartitionKey {
        group_id: "g".into(),
        topic_id: uuid::Uuid::from_u128(0x0102),
        partition: 3,
    }
}

#[test]
fn key_bytes_follow_kafkas_schema() {
    let bytes = encode_key(&ShareStateKey::Update(key()));
    let mut expected = vec![0, 1, 0, 1, b'g'];
    expected.extend_from_slice(&0x0102u128.to_be_bytes());
    expected.extend_from_slice(&[0, 0, 0, 3]);
    assert_eq!(&bytes[..], &expected[..]);
    assert_eq!(decode_key(bytes).unwrap(), ShareStateKey::Update(key()));
}

#[test]
fn update_value_bytes_follow_kafkas_schema() {
    let v = ShareUpdateValue {
        snapshot_epoch: 1,
        leader_epoch: 2,
        start_offset: 5,
        delivery_complete_count: 7,
        state_batches: vec![StateBatch::new(5, 9, 2, 1)],
    };
    let bytes = encode_update_value(&v);
    let mut expected = vec![0, 0, 0, 0, 0, 1, 0, 0, 0, 2];
    expected.extend_from_slice(&5i64.to_be_bytes());
    expected.push(2); // one batch, compact array
    expected.extend_from_slice(&5i64.to_be_bytes());
    expected.extend_from_slice(&9i64.to_be_bytes());
    expected.extend_from_slice(&[2, 0, 1, 0]);
    expected.extend_from_slice(&[1, 0, 4, 0, 0, 0, 7]); // tag 0, 4 bytes: 7
    assert_eq!(&bytes[..], &expected[..]);
    assert_eq!(decode_update_value(bytes).unwrap(), v);
    // An unknown count is left out, and reads back as -1.
    let unknown = ShareUpdateValue {
        delivery_complete_count: UNKNOWN_DELIVERY_COMPLETE_COUNT,
        ..v
    };
    let bytes = encode_update_value(&unknown);
    assert_eq!(bytes.last(), Some(&0));
    assert_eq!(decode_update_value(bytes).unwrap(), unknown);
}

#[test]
fn corrupt_values_are_errors_not_allocations() {
    // A batch count of 2^28 with no bytes behind it.
    let mut bytes = vec![0u8; 2 + 4 + 4 + 8];
    bytes.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x01]);
    assert!(decode_update_value(Bytes::from(bytes)).is_err());
    assert!(decode_snapshot_value(Bytes::from_static(&[0, 1])).is_err());
    assert!(decode_key(Bytes::from_static(&[0, 9, 0, 1, b'g'])).is_err());
}

#[test]
fn combining_keeps_the_furthest_state_of_each_offset() {
    let so_far = [StateBatch::new(0, 9, 0, 1)];
    let new = [StateBatch::new(3, 4, 2, 1), StateBatch::new(6, 6, 0, 2)];
    assert_eq!(
        combine_state_batches(&so_far, &new, 0),
        vec![
            StateBatch::new(0, 2, 0, 1),
            StateBatch::new(3, 4, 2, 1),
            StateBatch::new(5, 5, 0, 1),
            StateBatch::new(6, 6, 0, 2),
            StateBatch::new(7, 9, 0, 1),
        ]
    );
    // Order of arrival does not matter; below the start offset is dropped.
    assert_eq!(
        combine_state_batches(&new, &so_far, 4),
        vec![
            StateBatch::new(4, 4, 2, 1),
            StateBatch::new(5, 5, 0, 1),
            StateBatch::new(6, 6, 0, 2),
            StateBatch::new(7, 9, 0, 1),
        ]
    );
}

fn write(leader_epoch: i32, start: i64, batches: Vec<StateBatch>) -> StateWrite {
    StateWrite {
        state_epoch: 0,
        leader_epoch,
        start_offset: start,
        delivery_complete_count: -1,
        state_batches: batches,
    }
}

#[test]
fn writes_become_updates_then_a_snapshot() {
    let mut store = ShareStateStore::new(2);
    assert_eq!(
        store.read(&key()),
        None,
        "no state before its initialization"
    );
    let w = write(0, 0, vec![StateBatch::new(0, 0, 2, 1)]);
    assert_eq!(
        store.write_record(&key(), &w, 0),
        Err(kafka_protocol::error::ResponseError::InvalidRequest),
        "never initialized"
    );
    store.replay(&store.initialize_record(&key(), 0, 0, 0).unwrap());
    let mut kinds = Vec::new();
    for i in 0..3 {
        let w = write(0, 0, vec![StateBatch::new(i, i, 2, 1)]);
        let record = store.write_record(&key(), &w, 1).unwrap();
        kinds.push(matches!(record, ShareStateRecord::Snapshot(..)));
        store.replay(&record);
    }
    assert_eq!(kinds, vec![false, false, true]);
    assert_eq!(
        store.read(&key()),
        Some(PersistedState {
            state_epoch: 0,
            start_offset: 0,
            state_batches: vec![StateBatch::new(0, 2, 2, 1)],
        })
    );
    // A leader epoch older than one written is fenced.
    store.replay(&store.write_record(&key(), &write(3, 0, vec![]), 2).unwrap());
    assert_eq!(
        store.write_record(&key(), &write(2, 0, vec![]), 3),
        Err(kafka_protocol::error::ResponseError::FencedLeaderEpoch)
    );
}

mod on_the_runtime {
    //! The share coordinator's shard on the coordinator runtime over an in-memory log.

    use std::sync::Arc;

    use kafka_protocol::error::ResponseError;

    use super::super::shard::{coordinator_key, partition_for, ShareCoordinatorShard};
    use super::*;
    use crate::coordinator::runtime::memory_log::MemoryLog;
    use crate::coordinator::runtime::{CoordinatorRuntime, ShardStatus};

    type Runtime = CoordinatorRuntime<ShareCoordinatorShard>;

    fn runtime(log: &Arc<MemoryLog>) -> Runtime {
        let rt = CoordinatorRuntime::new("share coordinator", log.clone(), |_| {
            ShareCoordinatorShard::new(2)
        });
        assert_eq!(rt.load_now(0, 0), ShardStatus::Active);
        rt
    }

    fn write(leader_epoch: i32, start: i64, batches: Vec<StateBatch>) -> StateWrite {
        StateWrite {
            state_epoch: 0,
            leader_epoch,
            start_offset: start,
            delivery_complete_count: 0,
            state_batches: batches,
        }
    }

    async fn put(rt: &Runtime, w: StateWrite) -> Result<(), ResponseError> {
        rt.write(0, move |s: &mut ShareCoordinatorShard| {
            Ok(s.write(&key(), &w, 1))
        })
        .await
        .unwrap()
    }

    async fn read(rt: &Runtime, leader_epoch: i32) -> Result<PersistedState, ResponseError> {
        read_with_message(rt, leader_epoch)
            .await
            .map_err(|e| e.error)
    }

    async fn read_with_message(
        rt: &Runtime,
        leader_epoch: i32,
    ) -> Result<PersistedState, crate::error::ApiError> {
        rt.write(0, move |s: &mut ShareCoordinatorShard| {
            Ok(s.read(&key(), leader_epoch))
        })
        .await
        .unwrap()
    }

    /// Kafka 4.2's answer for a share-partition the group coordinator has not
    /// initialized: INVALID_REQUEST with its message, and nothing written (not even the
    /// reading leader's epoch), so the leader cannot start ahead of the initialization.
    #[tokio::test]
    async fn reading_a_share_partition_without_state_is_refused() {
        let log = Arc::new(MemoryLog::default());
        let rt = runtime(&log);
        for leader_epoch in [-1, 0, 5] {
            let refused = read_with_message(&rt, leader_epoch).await.unwrap_err();
            assert_eq!(refused.error, ResponseError::InvalidRequest);
            assert_eq!(
                refused.message.as_deref(),
                Some("Read operation on uninitialized share partition not allowed.")
            );
        }
        assert_eq!(log.log_end(0), 0, "a refused read writes nothing");
        // Once initialized (at the group's state epoch 2), the leader starts from it.
        rt.write(0, |s: &mut ShareCoordinatorShard| {
            Ok(s.initialize(&key(), 2, -1, 0))
        })
        .await
        .unwrap()
        .unwrap();
        let state = read(&rt, 0).await.unwrap();
        assert_eq!((state.state_epoch, state.start_offset), (2, -1));
    }

    #[test]
    fn the_coordinator_partition_is_kafkas() {
        // Computed with Kafka 4.4's SharePartitionKey and Utils.abs over 50 partitions.
        let k = |group: &str, partition| SharePartitionKey {
            group_id: group.into(),
            topic_id: uuid::Uuid::from_u128(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10),
            partition,
        };
        assert_eq!(coordinator_key(&k("g", 0)), "g:AQIDBAUGBwgJCgsMDQ4PEA:0");
        assert_eq!(partition_for(&k("g", 0), 50), 46);
        assert_eq!(partition_for(&k("g", 7), 50), 3);
        assert_eq!(partition_for(&k("share-group-1", 0), 50), 44);
        assert_eq!(partition_for(&k("share-group-1", 7), 50), 1);
    }

    #[tokio::test]
    async fn state_survives_a_load_and_a_new_leader_fences_the_old_one() {
        let log = Arc::new(MemoryLog::default());
        let rt = runtime(&log);
        // Writing before initialization is refused and writes nothing.
        assert!(put(&rt, write(0, 0, vec![])).await.is_err());
        rt.write(0, |s: &mut ShareCoordinatorShard| {
            Ok(s.initialize(&key(), 0, -1, 0))
        })
        .await
        .unwrap()
        .unwrap();
        assert_eq!(read(&rt, 0).await.unwrap().start_offset, -1);
        put(&rt, write(0, 0, vec![StateBatch::new(0, 4, 2, 1)]))
            .await
            .unwrap();
        put(&rt, write(0, 0, vec![StateBatch::new(5, 9, 0, 2)]))
            .await
            .unwrap();
        put(&rt, write(0, 3, vec![StateBatch::new(5, 6, 4, 2)]))
            .await
            .unwrap();
        let before = read(&rt, -1).await.unwrap();
        assert_eq!(before.start_offset, 3);
        assert_eq!(
            before.state_batches,
            vec![
                StateBatch::new(3, 4, 2, 1),
                StateBatch::new(5, 6, 4, 2),
                StateBatch::new(7, 9, 0, 2)
            ]
        );

        // A coordinator loading the same log reads the same state.
        let reloaded = runtime(&log);
        assert_eq!(read(&reloaded, -1).await.unwrap(), before);

        // The new leader (epoch 1) reads: from then on the old one's writes are fenced,
        // and so are its reads.
        assert_eq!(read(&reloaded, 1).await.unwrap(), before);
        assert_eq!(
            put(&reloaded, write(0, 5, vec![])).await,
            Err(ResponseError::FencedLeaderEpoch)
        );
        assert_eq!(
            read(&reloaded, 0).await,
            Err(ResponseError::FencedLeaderEpoch)
        );
        put(&reloaded, write(1, 10, vec![])).await.unwrap();
        // ... which a third load still knows.
        let third = runtime(&log);
        assert_eq!(read(&third, -1).await.unwrap().start_offset, 10);
        assert_eq!(
            put(&third, write(0, 11, vec![])).await,
            Err(ResponseError::FencedLeaderEpoch)
        );

        // Deleting the state leaves the share-partition uninitialized, after a load too:
        // reads are refused until it is initialized again.
        third
            .write(0, |s: &mut ShareCoordinatorShard| Ok(s.delete(&key())))
            .await
            .unwrap();
        assert_eq!(read(&third, -1).await, Err(ResponseError::InvalidRequest));
        assert_eq!(
            read(&runtime(&log), 2).await,
            Err(ResponseError::InvalidRequest)
        );
    }
}

mod coordinator {
    //! The share coordinator routes each share-partition key to its partition's owner.

    use std::collections::BTreeMap;
    use std::sync::Arc;

    use kafka_protocol::error::ResponseError;

    use super::super::coordinator::ShareCoordinator;
    use super::super::shard::partition_for;
    use super::*;
    use crate::coordinator::group::topics::TopicImage;
    use crate::coordinator::runtime::memory_log::MemoryLog;
    use crate::coordinator::runtime::ShardStatus;

    fn coordinator(log: &Arc<MemoryLog>) -> ShareCoordinator {
        let props = BTreeMap::from([(
            "share.coordinator.state.topic.num.partitions".to_string(),
            "3".to_string(),
        )]);
        let broker = crate::config::BrokerConfig::from_properties(props).unwrap();
        let topics: Arc<TopicImage> = Arc::new(TopicImage::default());
        ShareCoordinator::new(
            crate::config::SharedConfig::new(broker),
            log.clone(),
            Arc::new(topics),
        )
    }

    fn key_in(partition: i32) -> SharePartitionKey {
        (0..)
            .map(|p| SharePartitionKey {
                group_id: "g".into(),
                topic_id: uuid::Uuid::from_u128(7),
                partition: p,
            })
            .find(|k| partition_for(k, 3) == partition)
            .unwrap()
    }

    #[tokio::test]
    async fn keys_are_served_by_the_owner_of_their_partition_only() {
        let log = Arc::new(MemoryLog::default());
        let c = coordinator(&log);
        let (served, other) = (key_in(1), key_in(2));
        assert_eq!(c.partition_for(&served), 1);
        assert_eq!(c.load_now(1, 0), ShardStatus::Active);
        assert_eq!(
            c.initialize(other.clone(), 0, -1).await,
            Err(ResponseError::NotCoordinator)
        );
        c.initialize(served.clone(), 3, 42).await.unwrap();
        let state = c.read(served.clone(), 0).await.unwrap();
        assert_eq!((state.state_epoch, state.start_offset), (3, 42));
        let write = StateWrite {
            state_epoch: 3,
            leader_epoch: 0,
            start_offset: 45,
            delivery_complete_count: 0,
            state_batches: vec![StateBatch::new(45, 46, 0, 1)],
        };
        c.write(served.clone(), write).await.unwrap();
        assert_eq!(c.read(served.clone(), 0).await.unwrap().start_offset, 45);
        c.delete(served.clone()).await.unwrap();
        assert_eq!(
            c.read(served, 0).await.map_err(|e| e.error),
            Err(ResponseError::InvalidRequest)
        );
        c.shutdown();
    }
}
