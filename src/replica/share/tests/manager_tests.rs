//! The share-partition manager persisting through the share coordinator on the
//! coordinator runtime: a new leader loads what the old one persisted, fences it, and
//! redelivers only what was not acknowledged.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;

use super::*;
use crate::coordinator::group::topics::TopicImage;
use crate::coordinator::runtime::memory_log::MemoryLog;
use crate::coordinator::share::coordinator::ShareCoordinator;
use crate::coordinator::share::shard::partition_for;
use crate::coordinator::share::SharePartitionKey;
use crate::replica::share::manager::{Load, SharePartitionManager};

fn coordinator(log: &Arc<MemoryLog>) -> Arc<ShareCoordinator> {
    let props = BTreeMap::from([(
        "share.coordinator.state.topic.num.partitions".to_string(),
        "1".to_string(),
    )]);
    let broker = crate::config::BrokerConfig::from_properties(props).unwrap();
    let topics: Arc<TopicImage> = Arc::new(TopicImage::default());
    let c = ShareCoordinator::new(
        crate::config::SharedConfig::new(broker),
        log.clone(),
        Arc::new(topics),
    );
    c.load_now(0, 0);
    Arc::new(c)
}

fn key() -> SharePartitionKey {
    SharePartitionKey {
        group_id: "g".into(),
        topic_id: uuid::Uuid::from_u128(9),
        partition: 0,
    }
}

fn load(leader_epoch: i32) -> Load {
    Load {
        leader_epoch,
        config: config(),
        initial_start_offset: Box::new(|| Ok(0)),
    }
}

fn acquire(
    m: &SharePartitionManager,
    member: &str,
    log: &[FetchedBatch],
    now: i64,
) -> Vec<(i64, i64, u16)> {
    let fetch_offset = m.next_fetch(&key()).unwrap().expect("room to acquire");
    let batches: Vec<FetchedBatch> = log
        .iter()
        .filter(|b| b.last_offset >= fetch_offset)
        .copied()
        .collect();
    let req = AcquireRequest {
        member_id: member,
        batch_size: 500,
        max_fetch_records: 500,
        mode: Default::default(),
        fetch_offset,
        batches: &batches,
        aborted_transactions: None,
    };
    ranges(&m.acquire(&key(), &req, now).unwrap())
}

fn batch(first: i64, last: i64, t: AcknowledgeType) -> Vec<AcknowledgementBatch> {
    vec![AcknowledgementBatch::new(first, last, t)]
}

#[tokio::test]
async fn a_new_leader_loads_the_persisted_state_and_fences_the_old_one() {
    let log = Arc::new(MemoryLog::default());
    let shares = coordinator(&log);
    assert_eq!(partition_for(&key(), 1), 0);
    // The group coordinator initialized the share-partition when it was assigned.
    shares.initialize(key(), 0, -1).await.unwrap();
    let records = plain(&[(0, 9)]);

    let old = SharePartitionManager::new(shares.clone());
    assert_eq!(
        old.next_fetch(&key()).unwrap_err(),
        ResponseError::UnknownTopicOrPartition,
        "not loaded"
    );
    old.load(&key(), load(0)).await.unwrap();
    assert_eq!(acquire(&old, "m1", &records, 0), vec![(0, 9, 1)]);
    old.acknowledge(&key(), "m1", &batch(0, 4, AcknowledgeType::Accept), 1)
        .await
        .unwrap();
    old.acknowledge(&key(), "m1", &batch(5, 6, AcknowledgeType::Release), 1)
        .await
        .unwrap();
    // Records the member does not hold: refused, nothing written.
    assert_eq!(
        old.acknowledge(&key(), "m2", &batch(7, 9, AcknowledgeType::Accept), 1)
            .await,
        Err(ResponseError::InvalidRecordState)
    );
    assert_eq!(old.inspect(&key(), |sp| sp.start_offset()).unwrap(), 5);

    // Leadership moves: the new leader (epoch 1) loads what was persisted.
    let new = SharePartitionManager::new(shares.clone());
    new.load(&key(), load(1)).await.unwrap();
    assert_eq!(new.inspect(&key(), |sp| sp.start_offset()).unwrap(), 5);
    let mut got = acquire(&new, "m2", &records, 10);
    got.sort();
    // 5-6 released once (second delivery); 7-9 acquired but never persisted (first).
    assert_eq!(got, vec![(5, 6, 2), (7, 9, 1)]);

    // The old leader's write is fenced: the member is told NOT_LEADER_OR_FOLLOWER (as
    // Kafka's share-partition tells it) and the stale share-partition is dropped there.
    assert_eq!(
        old.acknowledge(&key(), "m1", &batch(7, 9, AcknowledgeType::Accept), 11)
            .await,
        Err(ResponseError::NotLeaderOrFollower)
    );
    assert_eq!(
        old.inspect(&key(), |sp| sp.start_offset()).unwrap_err(),
        ResponseError::UnknownTopicOrPartition,
        "dropped"
    );
    // So is a load by a leader older than the last, which leaves nothing loaded.
    let stale = SharePartitionManager::new(shares.clone());
    assert_eq!(
        stale.load(&key(), load(0)).await.map_err(|e| e.error),
        Err(ResponseError::NotLeaderOrFollower)
    );
    assert!(stale.keys().is_empty());

    // The new leader's acknowledgements persist; a third leader starts past them.
    new.acknowledge(&key(), "m2", &batch(5, 9, AcknowledgeType::Accept), 12)
        .await
        .unwrap();
    let third = SharePartitionManager::new(shares.clone());
    third.load(&key(), load(2)).await.unwrap();
    let next = third.next_fetch(&key()).unwrap();
    assert_eq!(next, Some(10));
}

#[tokio::test]
async fn expired_locks_are_released_and_persisted() {
    let log = Arc::new(MemoryLog::default());
    let shares = coordinator(&log);
    shares.initialize(key(), 0, 0).await.unwrap();
    let m = SharePartitionManager::new(shares.clone());
    m.load(&key(), load(0)).await.unwrap();
    acquire(&m, "m1", &plain(&[(0, 4)]), 0);
    assert_eq!(m.expire_locks(1).await, Some(LOCK_MS));
    assert_eq!(m.expire_locks(LOCK_MS).await, None);
    // Persisted: a reader sees them available with one delivery.
    let persisted = shares.read(key(), 0).await.unwrap();
    assert_eq!(persisted.state_batches, vec![StateBatch::new(0, 4, 0, 1)]);
    assert_eq!(
        acquire(&m, "m2", &plain(&[(0, 4)]), LOCK_MS + 1),
        vec![(0, 4, 2)]
    );
    // A member closing its session gives its records back at once.
    m.release_member(&key(), "m2", LOCK_MS + 2).await.unwrap();
    assert_eq!(
        acquire(&m, "m3", &plain(&[(0, 4)]), LOCK_MS + 3),
        vec![(0, 4, 3)]
    );
}

/// A member that left the group: while its share session is open here, its final
/// request is awaited (session and records kept); without one, its records in the
/// group's share-partitions here are available again at once, the delivery count kept;
/// one released as many times as `delivery_count_limit` is archived. Another group's
/// records stay with their member.
#[tokio::test]
async fn a_departed_members_records_are_released_at_once_up_to_the_delivery_limit() {
    use crate::replica::share::session::ShareSessionKey;
    use crate::replica::share::Shares;
    let log = Arc::new(MemoryLog::default());
    let coordinator = coordinator(&log);
    let other = SharePartitionKey {
        group_id: "other".into(),
        ..key()
    };
    coordinator.initialize(key(), 0, 0).await.unwrap();
    coordinator.initialize(other.clone(), 0, 0).await.unwrap();
    let shares = Shares::new(coordinator.clone(), coordinator, 10);
    let m = &shares.partitions;
    let limited = || Load {
        config: SharePartitionConfig {
            delivery_count_limit: 2,
            ..config()
        },
        ..load(0)
    };
    m.load(&key(), limited()).await.unwrap();
    m.load(&other, limited()).await.unwrap();
    let session = ShareSessionKey {
        group_id: "g".into(),
        member_id: "m1".into(),
    };
    shares
        .sessions
        .lock()
        .fetch_context(&session, 0, &[(key().topic_id, 0)], &[], false, 0)
        .unwrap();
    assert_eq!(acquire(m, "m1", &plain(&[(0, 4)]), 0), vec![(0, 4, 1)]);
    let req = AcquireRequest {
        member_id: "m1",
        batch_size: 500,
        max_fetch_records: 500,
        mode: Default::default(),
        fetch_offset: 0,
        batches: &plain(&[(0, 4)]),
        aborted_transactions: None,
    };
    assert_eq!(
        ranges(&m.acquire(&other, &req, 0).unwrap()),
        vec![(0, 4, 1)]
    );

    let held = |k: &SharePartitionKey| {
        m.inspect(k, |sp| sp.record_state(0).map(|s| s.state()))
            .unwrap()
    };
    // With its share session still open, the member's final request is on its way:
    // the session and the member's records stay for it.
    shares.member_left("g", "m1").await;
    assert!(
        shares.sessions.lock().get(&session).is_some(),
        "session kept"
    );
    assert_eq!(held(&key()), Some(RecordState::Acquired));
    // Without a session here, what it holds is released.
    shares.sessions.lock().remove(&session);
    shares.member_left("g", "m1").await;
    assert_eq!(held(&key()), Some(RecordState::Available));
    assert_eq!(held(&other), Some(RecordState::Acquired), "another group's");
    // Well before the lock would run out, with the delivery count kept.
    assert_eq!(acquire(m, "m2", &plain(&[(0, 4)]), 1), vec![(0, 4, 2)]);
    // Released a second time: the limit (2) is reached, the records are archived (and
    // the start offset moves past them).
    shares.member_left("g", "m2").await;
    assert_eq!(m.inspect(&key(), |sp| sp.start_offset()).unwrap(), 5);
    assert_eq!(m.next_fetch(&key()).unwrap(), Some(5));
}

/// A leader that reaches a share-partition before the group coordinator initialized it
/// loads nothing (Kafka's UNKNOWN_SERVER_ERROR with the share coordinator's message) and
/// keeps nothing; once initialized at the group's state epoch, the next load starts
/// there and its writes are not fenced.
#[tokio::test]
async fn a_share_partition_is_loaded_only_once_initialized() {
    let log = Arc::new(MemoryLog::default());
    let shares = coordinator(&log);
    let m = SharePartitionManager::new(shares.clone());
    let refused = m.load(&key(), load(0)).await.unwrap_err();
    assert_eq!(refused.error, ResponseError::UnknownServerError);
    assert_eq!(
        refused.message.as_deref(),
        Some("Read operation on uninitialized share partition not allowed.")
    );
    assert!(
        m.keys().is_empty(),
        "nothing kept of a share-partition not loaded"
    );

    // The group coordinator's initialization, at the group's epoch (3).
    shares.initialize(key(), 3, -1).await.unwrap();
    m.load(&key(), load(0)).await.unwrap();
    assert_eq!(acquire(&m, "m1", &plain(&[(0, 9)]), 0), vec![(0, 9, 1)]);
    m.acknowledge(&key(), "m1", &batch(0, 9, AcknowledgeType::Accept), 1)
        .await
        .unwrap();
    // Persisted at the initialization's state epoch (the start offset lags one write
    // behind, as in Kafka: the batch is persisted acknowledged).
    let persisted = shares.read(key(), 0).await.unwrap();
    assert_eq!(persisted.state_epoch, 3);
    assert_eq!(persisted.state_batches, vec![StateBatch::new(0, 9, 2, 1)]);
}
