//! The replica layer with real logs and a fake follower (fetches with its replica id, no
//! network): roles, the high-watermark rule, and the delayed produce and fetch waking on
//! the right notification or timing out.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use tokio::time::Instant;
use uuid::Uuid;

use super::delayed_fetch::{self, FetchAttempt};
use super::*;
use crate::controller::LeaderAndIsr;
use crate::log::test_util::batch_bytes;
use crate::log::{Log, LogConfig, TopicPartition};

const ME: i32 = 1;
const FOLLOWER: i32 = 2;
const LONG: Duration = Duration::from_secs(10);

fn announced(leader: i32, epoch: i32, isr: &[i32]) -> LeaderAndIsr {
    LeaderAndIsr::elected(leader, epoch, isr)
}

/// A partition on broker `ME` with `replicas`, as metadata announces it.
fn partition(
    root: &tempfile::TempDir,
    replicas: &[i32],
    leader: i32,
    isr: &[i32],
) -> Arc<Partition> {
    let tp = TopicPartition::new("t", 0);
    let log = Log::open(
        &root.path().join("t-0"),
        tp.clone(),
        LogConfig::default(),
        0,
        0,
        false,
    )
    .unwrap();
    let p = Partition::new(tp, Uuid::new_v4(), Arc::new(log), 0);
    p.apply_leadership(ME, replicas, &announced(leader, 1, isr), 0);
    Arc::new(p)
}

async fn append(p: &Partition, n: usize) -> i64 {
    let values: Vec<&[u8]> = vec![b"v"; n];
    p.append(batch_bytes(&values, 1_000, None), 0)
        .await
        .unwrap()
        .last_offset
}

fn consumer() -> FetchParams {
    FetchParams::new(-1, Duration::ZERO, 0, 1 << 20, false)
}

/// A follower's fetch from `offset`: the bytes it got.
fn follower_fetch(p: &Arc<Partition>, replica_id: i32, offset: i64) -> usize {
    let params = FetchParams::new(replica_id, Duration::ZERO, 0, 1 << 20, false);
    p.check_fetch(-1, replica_id).unwrap();
    let data = p.fetch_records(&params, offset, 1 << 20, true, 0).unwrap();
    data.records.map_or(0, |s| s.len())
}

fn consumer_bytes(p: &Arc<Partition>) -> usize {
    let data = p.fetch_records(&consumer(), 0, 1 << 20, true, 0).unwrap();
    data.records.map_or(0, |s| s.len())
}

#[tokio::test]
async fn a_sole_replica_commits_each_append_at_once() {
    let root = tempfile::tempdir().unwrap();
    let p = partition(&root, &[ME], ME, &[ME]);
    assert!(p.is_leader());
    append(&p, 3).await;
    assert_eq!((p.log_end_offset(), p.high_watermark()), (3, 3));
    assert!(consumer_bytes(&p) > 0);
    assert_eq!(p.check_leader(1), Ok(()));
    assert_eq!(
        p.check_leader(0).unwrap_err().error,
        ResponseError::FencedLeaderEpoch
    );
    assert_eq!(
        p.check_leader(2).unwrap_err().error,
        ResponseError::UnknownLeaderEpoch
    );
}

#[tokio::test]
async fn a_follower_refuses_appends_and_leader_requests() {
    let root = tempfile::tempdir().unwrap();
    let p = partition(&root, &[ME, FOLLOWER], FOLLOWER, &[ME, FOLLOWER]);
    assert_eq!(p.role(), Role::Follower { leader: FOLLOWER });
    let err = p
        .append(batch_bytes(&[b"v"], 1_000, None), 0)
        .await
        .unwrap_err();
    assert_eq!(err.error().error, ResponseError::NotLeaderOrFollower);
    assert_eq!(p.log_end_offset(), 0, "nothing was written");
    assert_eq!(
        p.check_leader(-1).unwrap_err().error,
        ResponseError::NotLeaderOrFollower
    );
    assert_eq!(
        p.check_fetch(-1, -1),
        Err(ResponseError::NotLeaderOrFollower)
    );
    // Elected: it leads from the new epoch on.
    p.apply_leadership(ME, &[ME, FOLLOWER], &announced(ME, 2, &[ME]), 0);
    assert!(p.is_leader());
    assert_eq!(p.leader_epoch(), 2);
    append(&p, 1).await;
    assert_eq!(p.high_watermark(), 1);
}

#[tokio::test]
async fn the_high_watermark_waits_for_a_follower_in_the_isr() {
    let root = tempfile::tempdir().unwrap();
    let p = partition(&root, &[ME, FOLLOWER], ME, &[ME, FOLLOWER]);
    append(&p, 3).await;
    assert_eq!(p.high_watermark(), 0, "the follower has nothing yet");
    assert_eq!(
        consumer_bytes(&p),
        0,
        "consumers see only committed records"
    );
    // The follower reads past the high watermark, up to the log end.
    assert!(follower_fetch(&p, FOLLOWER, 0) > 0);
    assert_eq!(p.follower_log_end_offset(FOLLOWER), Some(0));
    assert_eq!(p.high_watermark(), 0);
    // Its next fetch says it has the three records: they are committed.
    assert_eq!(follower_fetch(&p, FOLLOWER, 3), 0);
    assert_eq!(p.high_watermark(), 3);
    assert!(consumer_bytes(&p) > 0);
}

#[tokio::test]
async fn a_coordinators_load_reads_past_the_high_watermark() {
    // A newly elected leader's high watermark can lag records the old leader
    // acknowledged; a coordinator taking the partition over must load them all.
    let root = tempfile::tempdir().unwrap();
    let p = partition(&root, &[ME, FOLLOWER], ME, &[ME, FOLLOWER]);
    append(&p, 3).await;
    assert_eq!(p.high_watermark(), 0);
    assert!(p.read(0, 1 << 20, true).unwrap().records.is_empty());
    let loaded = p.read_to_log_end(0, 1 << 20, true).unwrap().records;
    let values: Vec<&[u8]> = vec![b"v"; 3];
    assert_eq!(loaded.len(), batch_bytes(&values, 1_000, None).len());
}

#[tokio::test]
async fn a_follower_out_of_the_isr_does_not_hold_the_high_watermark() {
    let root = tempfile::tempdir().unwrap();
    let p = partition(&root, &[ME, FOLLOWER], ME, &[ME]);
    append(&p, 2).await;
    assert_eq!(p.high_watermark(), 2);
    follower_fetch(&p, FOLLOWER, 0);
    assert_eq!(p.high_watermark(), 2, "never backwards");
    assert_eq!(p.follower_log_end_offset(FOLLOWER), Some(0));
}

#[tokio::test]
async fn the_high_watermark_never_goes_back() {
    let root = tempfile::tempdir().unwrap();
    let p = partition(&root, &[ME, FOLLOWER], ME, &[ME, FOLLOWER]);
    append(&p, 4).await;
    follower_fetch(&p, FOLLOWER, 4);
    assert_eq!(p.high_watermark(), 4);
    // A new leader epoch forgets the follower's log end: nothing new is committed until
    // it fetches again, but what was committed stays committed.
    p.apply_leadership(ME, &[ME, FOLLOWER], &announced(ME, 2, &[ME, FOLLOWER]), 0);
    append(&p, 1).await;
    assert_eq!(p.high_watermark(), 4);
    follower_fetch(&p, FOLLOWER, 2);
    assert_eq!(p.high_watermark(), 4);
    follower_fetch(&p, FOLLOWER, 5);
    assert_eq!(p.high_watermark(), 5);
}

#[tokio::test]
async fn only_replicas_fetch_as_followers() {
    let root = tempfile::tempdir().unwrap();
    let p = partition(&root, &[ME, FOLLOWER], ME, &[ME, FOLLOWER]);
    append(&p, 1).await;
    for stranger in [3, ME] {
        assert_eq!(
            p.check_fetch(-1, stranger),
            Err(ResponseError::NotLeaderOrFollower)
        );
        let params = FetchParams::new(stranger, Duration::ZERO, 0, 1 << 20, false);
        p.fetch_records(&params, 1, 1 << 20, true, 0).unwrap();
        assert_eq!(p.high_watermark(), 0, "a stranger's fetch commits nothing");
    }
}

#[tokio::test]
async fn acks_all_is_immediate_with_one_replica() {
    let root = tempfile::tempdir().unwrap();
    let p = partition(&root, &[ME], ME, &[ME]);
    let last = append(&p, 2).await;
    let mut acks = DelayedProduce::new();
    acks.watch(p.clone(), last);
    let started = Instant::now();
    assert_eq!(acks.complete(LONG).await, vec![None]);
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[tokio::test]
async fn acks_all_waits_for_the_follower() {
    let root = tempfile::tempdir().unwrap();
    let p = partition(&root, &[ME, FOLLOWER], ME, &[ME, FOLLOWER]);
    let last = append(&p, 2).await;
    let mut acks = DelayedProduce::new();
    acks.watch(p.clone(), last);
    let waiting = tokio::spawn(acks.complete(LONG));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !waiting.is_finished(),
        "not acknowledged before the follower has it"
    );
    follower_fetch(&p, FOLLOWER, 1);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        !waiting.is_finished(),
        "the follower has only the first record"
    );
    let started = Instant::now();
    follower_fetch(&p, FOLLOWER, 2);
    assert_eq!(waiting.await.unwrap(), vec![None]);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "woken, not timed out"
    );
}

#[tokio::test]
async fn acks_all_times_out_or_learns_the_leader_moved() {
    let root = tempfile::tempdir().unwrap();
    let p = partition(&root, &[ME, FOLLOWER], ME, &[ME, FOLLOWER]);
    let last = append(&p, 1).await;
    let mut acks = DelayedProduce::new();
    acks.watch(p.clone(), last);
    let started = Instant::now();
    assert_eq!(
        acks.complete(Duration::from_millis(200)).await,
        vec![Some(ResponseError::RequestTimedOut)]
    );
    assert!(started.elapsed() >= Duration::from_millis(200));

    let mut acks = DelayedProduce::new();
    acks.watch(p.clone(), last);
    let waiting = tokio::spawn(acks.complete(LONG));
    tokio::time::sleep(Duration::from_millis(50)).await;
    p.apply_leadership(ME, &[ME, FOLLOWER], &announced(FOLLOWER, 2, &[FOLLOWER]), 0);
    let answered = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("woken by the role change")
        .unwrap();
    assert_eq!(answered, vec![Some(ResponseError::NotLeaderOrFollower)]);
}

/// A long poll on `p` for `params` that counts what it reads.
async fn long_poll(p: Arc<Partition>, params: FetchParams, offset: i64) -> usize {
    let (_tx, stopping) = tokio::sync::watch::channel(false);
    let partitions = vec![p.clone()];
    delayed_fetch::complete(&params, &partitions, stopping, || {
        let bytes = p
            .fetch_records(&params, offset, 1 << 20, true, 0)
            .map_or(0, |d| d.records.map_or(0, |s| s.len()));
        FetchAttempt {
            response: bytes,
            bytes,
            errored: false,
        }
    })
    .await
}

#[tokio::test]
async fn a_follower_long_poll_wakes_on_append_a_consumer_on_commit() {
    let root = tempfile::tempdir().unwrap();
    let p = partition(&root, &[ME, FOLLOWER], ME, &[ME, FOLLOWER]);
    let follower = FetchParams::new(FOLLOWER, LONG, 1, 1 << 20, false);
    let consumer = FetchParams::new(-1, LONG, 1, 1 << 20, false);
    let replicating = tokio::spawn(long_poll(p.clone(), follower, 0));
    let consuming = tokio::spawn(long_poll(p.clone(), consumer, 0));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    append(&p, 1).await;
    let got = tokio::time::timeout(Duration::from_secs(5), replicating)
        .await
        .expect("the follower's poll woke on the append")
        .unwrap();
    assert!(got > 0);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !consuming.is_finished(),
        "an uncommitted append does not answer a consumer"
    );
    follower_fetch(&p, FOLLOWER, 1);
    let got = tokio::time::timeout(Duration::from_secs(5), consuming)
        .await
        .expect("the consumer's poll woke on the commit")
        .unwrap();
    assert!(got > 0);
    assert!(started.elapsed() < LONG);
}

#[tokio::test]
async fn a_long_poll_ends_at_max_wait_with_what_it_has() {
    let root = tempfile::tempdir().unwrap();
    let p = partition(&root, &[ME, FOLLOWER], ME, &[ME, FOLLOWER]);
    append(&p, 1).await;
    let consumer = FetchParams::new(-1, Duration::from_millis(200), 1, 1 << 20, false);
    let started = Instant::now();
    assert_eq!(long_poll(p.clone(), consumer, 0).await, 0);
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(200) && waited < Duration::from_secs(5));
}

mod manager {
    use std::collections::BTreeMap;

    use super::*;
    use crate::controller::delta::{MetadataDelta, MetadataListener, TopicDelta};
    use crate::controller::image::MetadataImage;
    use crate::controller::{PartitionAssignment, PartitionInfo, TopicInfo};
    use crate::log::{DirLock, LogManager};

    fn manager(root: &tempfile::TempDir) -> ReplicaManager {
        let dir = root.path().to_path_buf();
        let lock = DirLock::acquire(&dir).unwrap();
        let logs = LogManager::startup(
            vec![(dir, lock)],
            |_: &TopicPartition, _: Option<Uuid>| true,
            |_| LogConfig::default(),
            60_000,
        )
        .unwrap();
        let config = crate::config::from_args(&[]).unwrap();
        ReplicaManager::new(ME, crate::config::SharedConfig::new(config), logs)
    }

    /// Topic `t` with one partition per entry: (replicas, leader, leader epoch).
    fn topic(id: u128, partitions: &[(&[i32], i32, i32)]) -> Arc<TopicInfo> {
        let partitions = partitions
            .iter()
            .enumerate()
            .map(|(i, (replicas, leader, epoch))| PartitionInfo {
                partition: i as i32,
                assignment: PartitionAssignment {
                    replicas: replicas.to_vec(),
                    directories: vec![Uuid::nil(); replicas.len()],
                },
                state: announced(*leader, *epoch, replicas),
            })
            .collect();
        Arc::new(TopicInfo {
            name: "t".into(),
            topic_id: Uuid::from_u128(id),
            partitions,
            configs: BTreeMap::new(),
        })
    }

    fn apply(m: &ReplicaManager, change: TopicDelta) {
        let delta = MetadataDelta {
            topics: BTreeMap::from([("t".to_string(), change)]),
            ..Default::default()
        };
        assert!(m.on_delta(&MetadataImage::default(), &delta).is_empty());
    }

    fn leader(m: &ReplicaManager, partition: i32, epoch: i32) -> Result<i32, ResponseError> {
        m.leader(&TopicPartition::new("t", partition), epoch)
            .map(|p| p.leader_epoch())
            .map_err(|e| e.error)
    }

    #[tokio::test]
    async fn handlers_get_only_partitions_led_here() {
        let root = tempfile::tempdir().unwrap();
        let m = manager(&root);
        // t-0 led here, t-1 replicated here but led by 2, t-2 not assigned here.
        let t = topic(
            1,
            &[
                (&[ME], ME, 5),
                (&[ME, FOLLOWER], FOLLOWER, 5),
                (&[FOLLOWER], FOLLOWER, 5),
            ],
        );
        apply(&m, TopicDelta::Changed(t));
        assert_eq!(leader(&m, 0, -1), Ok(5));
        assert_eq!(leader(&m, 0, 5), Ok(5));
        assert_eq!(leader(&m, 0, 4), Err(ResponseError::FencedLeaderEpoch));
        assert_eq!(leader(&m, 0, 6), Err(ResponseError::UnknownLeaderEpoch));
        assert_eq!(leader(&m, 1, -1), Err(ResponseError::NotLeaderOrFollower));
        assert_eq!(
            m.partition("t", 1).map(|p| p.role()),
            Some(Role::Follower { leader: FOLLOWER })
        );
        assert_eq!(leader(&m, 2, -1), Err(ResponseError::NotLeaderOrFollower));
        assert!(m.partition("t", 2).is_none(), "not assigned here: no log");
        assert_eq!(
            leader(&m, 3, -1),
            Err(ResponseError::UnknownTopicOrPartition)
        );
        let other = m.leader(&TopicPartition::new("u", 0), -1).map(|_| ());
        assert_eq!(
            other.map_err(|e| e.error),
            Err(ResponseError::UnknownTopicOrPartition)
        );

        // Leadership of t-1 moves here.
        let t = topic(
            1,
            &[
                (&[ME], ME, 5),
                (&[ME, FOLLOWER], ME, 6),
                (&[FOLLOWER], FOLLOWER, 5),
            ],
        );
        apply(&m, TopicDelta::Changed(t.clone()));
        assert_eq!(leader(&m, 1, 6), Ok(6));

        // Deleted: the partitions resign, so whatever still holds one stops leading it.
        let held = m.leader(&TopicPartition::new("t", 0), -1).unwrap();
        apply(&m, TopicDelta::Removed(t));
        assert!(!held.is_leader());
        assert_eq!(
            leader(&m, 0, -1),
            Err(ResponseError::UnknownTopicOrPartition)
        );
    }

    /// What was committed before a restart is what is committed after it: the high
    /// watermark goes to `replication-offset-checkpoint` (Kafka's format) and comes back
    /// from it, not from the log end, which may hold what no follower has.
    #[tokio::test]
    async fn the_high_watermark_survives_a_restart_through_its_checkpoint() {
        let root = tempfile::tempdir().unwrap();
        let m = manager(&root);
        // t-0 led here with a follower; t-1 led here alone.
        apply(
            &m,
            TopicDelta::Changed(topic(1, &[(&[ME, FOLLOWER], ME, 5), (&[ME], ME, 5)])),
        );
        let (p0, p1) = (m.partition("t", 0).unwrap(), m.partition("t", 1).unwrap());
        append(&p0, 5).await;
        follower_fetch(&p0, FOLLOWER, 3);
        append(&p1, 4).await;
        assert_eq!((p0.log_end_offset(), p0.high_watermark()), (5, 3));
        assert_eq!(p1.high_watermark(), 4);
        m.shutdown().unwrap();
        drop((m, p0, p1));
        assert_eq!(
            std::fs::read_to_string(root.path().join("replication-offset-checkpoint")).unwrap(),
            "0\n2\nt 0 3\nt 1 4\n"
        );

        // Restarted as t-0's follower: its high watermark is the checkpointed one until
        // the leader says more.
        let m = manager(&root);
        apply(
            &m,
            TopicDelta::Changed(topic(1, &[(&[ME, FOLLOWER], FOLLOWER, 6), (&[ME], ME, 6)])),
        );
        let p0 = m.partition("t", 0).unwrap();
        assert_eq!((p0.log_end_offset(), p0.high_watermark()), (5, 3));
        assert_eq!(m.partition("t", 1).unwrap().high_watermark(), 4);
        m.shutdown().unwrap();
        drop((m, p0));

        // Restarted as t-0's leader: consumers read nothing the follower has not
        // reported having.
        let m = manager(&root);
        apply(
            &m,
            TopicDelta::Changed(topic(1, &[(&[ME, FOLLOWER], ME, 7), (&[ME], ME, 7)])),
        );
        let p0 = m.partition("t", 0).unwrap();
        assert_eq!(p0.high_watermark(), 3);
        follower_fetch(&p0, FOLLOWER, 5);
        assert_eq!(p0.high_watermark(), 5);
    }

    /// A controller stand-in for log dir moves: refuses the first `refuse` assignments,
    /// records every one asked.
    #[derive(Default)]
    struct Assigner {
        calls: parking_lot::Mutex<Vec<(Uuid, i32, Uuid)>>,
        refuse: std::sync::atomic::AtomicUsize,
    }

    #[async_trait::async_trait]
    impl crate::replica::log_dir_move::DirAssigner for Assigner {
        async fn assign(&self, topic_id: Uuid, partition: i32, dir: Uuid) -> bool {
            self.calls.lock().push((topic_id, partition, dir));
            use std::sync::atomic::Ordering;
            self.refuse
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
                .is_err()
        }
    }

    async fn eventually(what: &str, f: impl Fn() -> bool) {
        let deadline = Instant::now() + LONG;
        while !f() {
            assert!(Instant::now() < deadline, "{what} within {LONG:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// KRaft, two log dirs: new logs go in the dir the metadata names (both in d2, where
    /// the fewest-logs rule would have spread them). A move (AlterReplicaLogDirs) switches
    /// only once the controller accepted the replica's new dir, as Kafka's
    /// `ReplicaAlterLogDirsThread` promotes a future replica: refused, the caught-up copy
    /// waits and the replica stays where it was; accepted, it switches. While it moves, the
    /// placement task reports nothing for it (it would put it back in the old dir); after,
    /// the new dir.
    #[tokio::test]
    async fn a_log_dir_move_switches_only_once_the_controller_accepted_its_new_dir() {
        let root = tempfile::tempdir().unwrap();
        let dirs = [root.path().join("d1"), root.path().join("d2")];
        let locked = dirs
            .iter()
            .map(|d| {
                std::fs::create_dir_all(d).unwrap();
                (d.clone(), DirLock::acquire(d).unwrap())
            })
            .collect();
        let logs = LogManager::startup(
            locked,
            |_: &TopicPartition, _: Option<Uuid>| true,
            |_| LogConfig::default(),
            60_000,
        )
        .unwrap();
        let (d1, d2) = (Uuid::from_u128(0xd1), Uuid::from_u128(0xd2));
        logs.set_directory_ids(&[(dirs[0].clone(), d1), (dirs[1].clone(), d2)]);
        let config = crate::config::from_args(&[]).unwrap();
        let m = Arc::new(ReplicaManager::new(
            ME,
            crate::config::SharedConfig::new(config),
            logs,
        ));
        let assigner = Arc::new(Assigner::default());
        assigner
            .refuse
            .store(1, std::sync::atomic::Ordering::Release);
        m.set_dir_assigner(assigner.clone());
        let topic_id = Uuid::from_u128(1);
        let partitions = (0..2)
            .map(|i| PartitionInfo {
                partition: i,
                assignment: PartitionAssignment {
                    replicas: vec![ME],
                    directories: vec![d2],
                },
                state: announced(ME, 5, &[ME]),
            })
            .collect();
        apply(
            &m,
            TopicDelta::Changed(Arc::new(TopicInfo {
                name: "t".into(),
                topic_id,
                partitions,
                configs: BTreeMap::new(),
            })),
        );
        let (t0, t1) = (TopicPartition::new("t", 0), TopicPartition::new("t", 1));
        assert_eq!(m.logs.dir_of(&t0), Some(1), "the dir the metadata names");
        assert_eq!(m.logs.dir_of(&t1), Some(1));
        assert_eq!(m.logs.placement_of(&t0), Some(d2));

        let p = m.partition("t", 0).unwrap();
        append(&p, 10).await;
        m.alter_replica_log_dir(&t0, 0).unwrap();
        assert_eq!(m.logs.placement_of(&t0), None, "moving: the move reports");
        eventually("the new dir asked for", || {
            !assigner.calls.lock().is_empty()
        })
        .await;
        // Refused: the copy has caught up but does not switch (the next ask is 1 s later).
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(m.logs.dir_of(&t0), Some(1), "refused: not switched");
        assert!(m.logs.future_log(&t0).is_some());
        eventually("the switch", || m.logs.dir_of(&t0) == Some(0)).await;
        assert_eq!(
            *assigner.calls.lock(),
            vec![(topic_id, 0, d1), (topic_id, 0, d1)],
            "the future's dir, asked again after the refusal"
        );
        assert_eq!(m.logs.placement_of(&t0), Some(d1));
        assert_eq!(m.partition("t", 0).unwrap().log().log_end_offset(), 10);
        assert!(dirs[0].join("t-0").is_dir() && !dirs[1].join("t-0").exists());
    }
}
