use std::path::PathBuf;
use std::time::Duration;

use super::*;
use crate::controller::delta::ApplyError;
use crate::controller::metadata_log::METADATA_LOG_DIR;
use crate::controller::records::batch::records_of;
use crate::controller::records::control;
use crate::controller::records::PartitionRecord;
use crate::log::{kafka_string_to_uuid, RecordBatchHeader};

fn broker() -> BrokerInfo {
    BrokerInfo {
        id: 1,
        host: "localhost".into(),
        port: 9092,
        rack: None,
    }
}

fn config(num_partitions: i32) -> ControllerConfig {
    ControllerConfig {
        broker: broker(),
        cluster_id: "MkU3OEVBNTcwNTJENDM2Qk".into(),
        directory_ids: vec![Uuid::from_u128(0x77)],
        num_partitions,
        default_replication_factor: 1,
    }
}

fn new_topic(name: &str, n: i32, rf: i16) -> NewTopic {
    NewTopic {
        name: name.into(),
        num_partitions: n,
        replication_factor: rf,
        assignments: BTreeMap::new(),
        configs: BTreeMap::new(),
    }
}

fn segment(dir: &Path) -> PathBuf {
    dir.join(METADATA_LOG_DIR).join("00000000000000000000.log")
}

/// Every batch of the metadata log: (leader epoch, is control, values or control types).
/// Every segment, in order: a log whose first batch is older than `metadata.log.segment.ms`
/// (Kafka's fixture, a week after it was made) rolls at its next append.
fn batches(dir: &Path) -> Vec<(i32, bool, Vec<Vec<u8>>)> {
    let mut segments: Vec<PathBuf> = std::fs::read_dir(dir.join(METADATA_LOG_DIR))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    segments.sort();
    let mut bytes = Vec::new();
    for s in segments {
        bytes.extend(std::fs::read(s).unwrap());
    }
    let mut out = Vec::new();
    let mut position = 0;
    while position < bytes.len() {
        let size = RecordBatchHeader::parse(&bytes[position..])
            .unwrap()
            .size_in_bytes();
        let (h, records) = records_of(&bytes[position..position + size]).unwrap();
        position += size;
        let items = records
            .iter()
            .map(|r| {
                if h.is_control() {
                    control::control_type(r.key).unwrap().to_be_bytes().to_vec()
                } else {
                    r.value.unwrap().to_vec()
                }
            })
            .collect();
        out.push((h.partition_leader_epoch(), h.is_control(), items));
    }
    out
}

#[tokio::test]
async fn topics_configs_and_producer_ids_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let c = open(dir.path(), config(1), None).unwrap();
    let mut new = new_topic("orders", 3, 1);
    new.configs
        .insert("cleanup.policy".into(), "compact".into());
    let t = c.create_topic(new, false).await.unwrap();
    assert_eq!(t.partitions.len(), 3);
    assert_eq!(
        t.partitions[2].assignment.directories,
        vec![Uuid::from_u128(0x77)]
    );
    let id1 = c.next_producer_id().await.unwrap();
    let id2 = c.next_producer_id().await.unwrap();
    assert_eq!((id1, id2), (0, 1));
    let mut configs = BTreeMap::new();
    configs.insert("retention.ms".to_string(), "1000".to_string());
    c.set_topic_configs("orders", configs).await.unwrap();
    c.create_topic(new_topic("gone", 1, 1), false)
        .await
        .unwrap();
    c.delete_topic("gone").await.unwrap();
    c.shutdown();
    drop(c);

    let c = open(dir.path(), config(1), None).unwrap();
    let back = c.topic("orders").unwrap();
    assert_eq!(back.topic_id, t.topic_id);
    assert_eq!(back.partitions, t.partitions);
    assert_eq!(
        back.configs.iter().collect::<Vec<_>>(),
        vec![(&"retention.ms".to_string(), &"1000".to_string())],
        "the removed key stays removed"
    );
    assert!(c.topic("gone").is_none(), "a deleted topic stays deleted");
    assert_eq!(
        c.next_producer_id().await.unwrap(),
        1000,
        "the whole reserved block is skipped"
    );
    assert_eq!(c.image().metadata_version(), Some(25));
}

#[tokio::test]
async fn the_store_is_kafka_s_metadata_log_appended_never_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let c = open(dir.path(), config(1), None).unwrap();
    c.create_topic(new_topic("a", 1, 1), false).await.unwrap();
    let before = std::fs::read(segment(dir.path())).unwrap();
    c.create_topic(new_topic("b", 2, 1), false).await.unwrap();
    let after = std::fs::read(segment(dir.path())).unwrap();
    assert_eq!(
        &after[..before.len()],
        &before[..],
        "earlier bytes untouched"
    );
    c.shutdown();
    drop(c);
    let c = open(dir.path(), config(1), None).unwrap();
    c.shutdown();

    let b = batches(dir.path());
    // Epoch 1: the LeaderChange and the features written at creation; epoch 2: the first
    // start's LeaderChange and one batch per topic; epoch 3: the second start.
    let shape: Vec<(i32, bool, usize)> = b.iter().map(|(e, c, v)| (*e, *c, v.len())).collect();
    assert_eq!(
        shape,
        vec![
            (1, true, 1),
            (1, false, 3),
            (2, true, 1),
            (2, false, 2),
            (2, false, 3),
            (3, true, 1)
        ]
    );
    assert_eq!(b[0].2[0], control::LEADER_CHANGE.to_be_bytes().to_vec());
    let decoded: Vec<MetadataRecord> = b[4]
        .2
        .iter()
        .map(|v| MetadataRecord::decode(v).unwrap())
        .collect();
    assert!(matches!(&decoded[0], MetadataRecord::Topic { name, .. } if name == "b"));
    assert!(
        matches!(&decoded[2], MetadataRecord::Partition(p) if p.partition_id == 1 && p.leader == 1)
    );
    let qs =
        std::fs::read_to_string(dir.path().join(METADATA_LOG_DIR).join("quorum-state")).unwrap();
    assert!(
        qs.contains(r#""leaderEpoch":3"#) && qs.contains(r#""leaderId":1"#),
        "{qs}"
    );
    let pm = std::fs::read_to_string(dir.path().join(METADATA_LOG_DIR).join("partition.metadata"))
        .unwrap();
    assert_eq!(pm, "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ");
}

#[tokio::test]
async fn refusals_carry_kafka_errors() {
    let dir = tempfile::tempdir().unwrap();
    let c = open(dir.path(), config(2), None).unwrap();
    let e = c
        .create_topic(new_topic("x", 1, 3), false)
        .await
        .unwrap_err();
    assert_eq!(e.error, ResponseError::InvalidReplicationFactor);
    let e = c
        .create_topic(new_topic("bad name", 1, 1), false)
        .await
        .unwrap_err();
    assert_eq!(e.error, ResponseError::InvalidTopicException);
    let t = c.create_topic(new_topic("d", -1, -1), true).await.unwrap();
    assert_eq!(t.partitions.len(), 2);
    assert!(c.topic("d").is_none(), "validate_only must not create");
    c.create_topic(new_topic("a.b", 1, 1), false).await.unwrap();
    let e = c
        .create_topic(new_topic("a.b", 1, 1), false)
        .await
        .unwrap_err();
    assert_eq!(e.error, ResponseError::TopicAlreadyExists);
    let e = c
        .create_topic(new_topic("a_b", 1, 1), false)
        .await
        .unwrap_err();
    assert_eq!(e.error, ResponseError::InvalidTopicException);
    let e = c
        .create_partitions("a.b", 1, None, false)
        .await
        .unwrap_err();
    assert_eq!(e.error, ResponseError::InvalidPartitions);
    let t = c.create_partitions("a.b", 4, None, true).await.unwrap();
    assert_eq!(t.partitions.len(), 4);
    assert_eq!(c.topic("a.b").unwrap().partitions.len(), 1);
    let t = c.create_partitions("a.b", 4, None, false).await.unwrap();
    assert_eq!(t.partitions.len(), 4);
    let e = c.delete_topic("nope").await.unwrap_err();
    assert_eq!(e.error, ResponseError::UnknownTopicOrPartition);
}

#[tokio::test]
async fn creations_queued_together_are_checked_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let c = open(dir.path(), config(1), None).unwrap();
    let results = c
        .create_topics(vec![
            new_topic("t1", 1, 1),
            new_topic("t1", 1, 1),
            new_topic("t.2", 1, 1),
            new_topic("t_2", 1, 1),
        ])
        .await;
    assert!(results[0].is_ok());
    assert_eq!(
        results[1].as_ref().unwrap_err().error,
        ResponseError::TopicAlreadyExists
    );
    assert!(results[2].is_ok());
    assert_eq!(
        results[3].as_ref().unwrap_err().error,
        ResponseError::InvalidTopicException
    );
    assert_eq!(c.topics().len(), 2);
}

/// A write stuck on the disk must not hold up readers: the image is published apart from
/// the log, so metadata lookups answer while a creation waits for its fsync.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(
    clippy::await_holding_lock,
    reason = "the held log lock stands for a disk that does not answer"
)]
async fn readers_do_not_wait_for_a_write() {
    let dir = tempfile::tempdir().unwrap();
    let c = Arc::new(open(dir.path(), config(1), None).unwrap());
    c.create_topic(new_topic("before", 1, 1), false)
        .await
        .unwrap();
    let stuck_disk = c.inner.log.lock();
    let writer = {
        let c = c.clone();
        tokio::spawn(async move { c.create_topic(new_topic("during", 1, 1), false).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = std::time::Instant::now();
    for _ in 0..1000 {
        assert!(c.topic("before").is_some());
        assert_eq!(c.topics().len(), 1);
    }
    assert!(started.elapsed() < Duration::from_secs(1));
    assert!(!writer.is_finished(), "the creation waits for the log");
    assert!(
        c.topic("during").is_none(),
        "not visible before it is written"
    );
    drop(stuck_disk);
    writer.await.unwrap().unwrap();
    assert!(c.topic("during").is_some());
}

#[tokio::test]
async fn an_unfinished_metadata_transaction_is_aborted_not_applied() {
    let dir = tempfile::tempdir().unwrap();
    let c = open(dir.path(), config(1), None).unwrap();
    let version = c.inner.partition_version;
    {
        let log = c.inner.log.lock();
        let log = log.as_ref().unwrap();
        let topic_id = Uuid::from_u128(0xfeed);
        log.append(
            &[vec![
                MetadataRecord::BeginTransaction,
                MetadataRecord::Topic {
                    name: "half".into(),
                    topic_id,
                },
            ]],
            version,
        )
        .unwrap();
    }
    c.shutdown();
    drop(c);
    let c = open(dir.path(), config(1), None).unwrap();
    assert!(c.topic("half").is_none());
    c.create_topic(new_topic("whole", 1, 1), false)
        .await
        .unwrap();
    c.shutdown();
    drop(c);
    let c = open(dir.path(), config(1), None).unwrap();
    assert!(c.topic("half").is_none(), "aborted for good");
    assert!(c.topic("whole").is_some(), "later changes apply");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn kafka_fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kafka-4.4-kraft");
    copy_dir(
        &fixture.join(METADATA_LOG_DIR),
        &dir.path().join(METADATA_LOG_DIR),
    );
    dir
}

/// Apache Kafka 4.4's metadata log (tests/fixtures/kafka-4.4-kraft.md), read as it is:
/// its controlled shutdown left every partition leaderless with the broker only in the
/// ELR; skua takes each over with a new leader epoch, as Kafka's controller would.
#[tokio::test]
async fn reads_kafka_s_metadata_log_and_takes_leadership() {
    let dir = kafka_fixture();
    let c = open(dir.path(), config(1), None).unwrap();
    let image = c.image();
    assert_eq!(image.metadata_version(), Some(33));
    assert_eq!(image.feature("group.version"), Some(1));
    let orders = c.topic("orders").unwrap();
    assert_eq!(
        orders.topic_id,
        kafka_string_to_uuid("beWQG3FXQiKY02bl60WmyA").unwrap()
    );
    assert_eq!(orders.partitions.len(), 3);
    assert_eq!(orders.configs["retention.ms"], "86400000");
    let compacted = c.topic("compacted").unwrap();
    assert_eq!(compacted.configs["cleanup.policy"], "compact");
    assert_eq!(compacted.configs["min.compaction.lag.ms"], "3600000");
    assert_eq!(c.topic("__consumer_offsets").unwrap().partitions.len(), 3);
    for t in c.topics() {
        for p in &t.partitions {
            assert_eq!(
                (p.state.leader, p.state.isr.clone()),
                (1, vec![1]),
                "{}-{}",
                t.name,
                p.partition
            );
            assert_eq!((p.state.leader_epoch, p.state.partition_epoch), (2, 2));
            assert!(
                p.state.eligible_leader_replicas.is_empty() && p.state.last_known_elr.is_empty()
            );
        }
    }
    assert_eq!(c.broker_epoch(), 13, "Kafka's registration of this broker");
    assert_eq!(
        c.next_producer_id().await.unwrap(),
        1000,
        "after Kafka's block"
    );
    c.create_topic(new_topic("from-skua", 1, 1), false)
        .await
        .unwrap();
    c.shutdown();
    drop(c);

    // Kafka's records are still there, skua's follow at a higher epoch; a restart finds
    // the partitions settled and writes no more leadership changes.
    let b = batches(dir.path());
    let epochs: Vec<i32> = b.iter().map(|(e, _, _)| *e).collect();
    assert!(epochs.windows(2).all(|w| w[0] <= w[1]), "{epochs:?}");
    assert_eq!(epochs.first(), Some(&1));
    assert_eq!(epochs.last(), Some(&2));
    let c = open(dir.path(), config(1), None).unwrap();
    assert_eq!(
        c.topic("orders").unwrap().partitions[0].state.leader_epoch,
        2
    );
    assert!(c.topic("from-skua").is_some());
    c.shutdown();
    let after = batches(dir.path());
    assert_eq!(
        after.len(),
        b.len() + 1,
        "only the new epoch's LeaderChange"
    );
}

#[tokio::test]
async fn refuses_records_it_cannot_read() {
    let dir = tempfile::tempdir().unwrap();
    let c = open(dir.path(), config(1), None).unwrap();
    {
        let log = c.inner.log.lock();
        let log = log.as_ref().unwrap();
        log.append(
            &[vec![MetadataRecord::Partition(PartitionRecord {
                partition_id: 0,
                topic_id: Uuid::from_u128(5),
                replicas: vec![1],
                isr: vec![1],
                removing_replicas: vec![],
                adding_replicas: vec![],
                leader: 1,
                leader_recovery_state: 0,
                leader_epoch: 0,
                partition_epoch: 0,
                directories: vec![Uuid::nil()],
                eligible_leader_replicas: vec![],
                last_known_elr: vec![],
            })]],
            2,
        )
        .unwrap();
    }
    c.shutdown();
    drop(c);
    let err = open(dir.path(), config(1), None).err().unwrap().to_string();
    assert!(err.contains("unknown topic id"), "{err}");
}

fn snapshot_fixture(with_log: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kafka-4.4-snapshot");
    let log_dir = dir.path().join(METADATA_LOG_DIR);
    std::fs::create_dir_all(&log_dir).unwrap();
    for f in [
        "00000000000000000088-0000000002.checkpoint",
        "partition.metadata",
        "quorum-state",
    ] {
        std::fs::copy(fixture.join(f), log_dir.join(f)).unwrap();
    }
    if with_log {
        std::fs::copy(
            fixture.join("00000000000000000000.log"),
            log_dir.join("00000000000000000000.log"),
        )
        .unwrap();
    } else {
        // What Kafka leaves once it has deleted the segments its snapshot covers.
        std::fs::write(log_dir.join("00000000000000000088.log"), b"").unwrap();
    }
    dir
}

/// Name, id, (partition, leader epoch) and configs of a topic.
type TopicSummary = (String, Uuid, Vec<(i32, i32)>, BTreeMap<String, String>);

/// A KRaft snapshot Kafka 4.4 took (tests/fixtures/kafka-4.4-snapshot.md) stands for the
/// records below its end offset: with those records gone, the image is the same.
#[tokio::test]
async fn reads_kafka_s_snapshots() {
    let mut images = Vec::new();
    for with_log in [true, false] {
        let dir = snapshot_fixture(with_log);
        let c = open(dir.path(), config(1), None).unwrap();
        let orders = c.topic("orders").unwrap();
        assert_eq!(orders.partitions.len(), 3);
        assert_eq!(orders.configs["retention.ms"], "86400000");
        assert_eq!(
            c.topic("compacted").unwrap().configs["cleanup.policy"],
            "compact"
        );
        assert_eq!(c.topic("__consumer_offsets").unwrap().partitions.len(), 3);
        assert_eq!(c.image().metadata_version(), Some(33));
        assert_eq!(c.next_producer_id().await.unwrap(), 1000);
        let mut summary: Vec<TopicSummary> = c
            .topics()
            .iter()
            .map(|t| {
                let parts = t
                    .partitions
                    .iter()
                    .map(|p| (p.partition, p.state.leader_epoch))
                    .collect();
                (t.name.clone(), t.topic_id, parts, t.configs.clone())
            })
            .collect();
        summary.sort();
        images.push(summary);
        c.create_topic(new_topic("after-snapshot", 1, 1), false)
            .await
            .unwrap();
        c.shutdown();
        drop(c);
        let c = open(dir.path(), config(1), None).unwrap();
        assert!(c.topic("after-snapshot").is_some());
        assert!(c.topic("orders").is_some());
        c.shutdown();
    }
    assert_eq!(images[0], images[1]);
}

#[test]
fn a_snapshot_past_the_log_end_is_refused() {
    let dir = snapshot_fixture(false);
    let log_dir = dir.path().join(METADATA_LOG_DIR);
    std::fs::remove_file(log_dir.join("00000000000000000088.log")).unwrap();
    let err = MetadataLog::open(dir.path(), 1).err().unwrap().to_string();
    assert!(err.contains("ends at offset 88"), "{err}");
}

/// Records every delta it is handed; fails on topics named "fail-*".
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<Vec<(String, bool)>>>,
}

impl MetadataListener for Recorder {
    fn on_delta(&self, _image: &MetadataImage, delta: &MetadataDelta) -> Vec<ApplyError> {
        let mut entry = Vec::new();
        let mut failed = Vec::new();
        for (name, change) in &delta.topics {
            let removed = matches!(change, crate::controller::delta::TopicDelta::Removed(_));
            entry.push((name.clone(), removed));
            if name.starts_with("fail-") {
                failed.push(ApplyError {
                    topic: name.clone(),
                    message: "disk full".into(),
                });
            }
        }
        self.seen.lock().push(entry);
        failed
    }
}

#[tokio::test]
async fn listeners_get_the_image_then_every_change_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let c = open(dir.path(), config(1), None).unwrap();
    c.create_topic(new_topic("before", 1, 1), false)
        .await
        .unwrap();
    let recorder = Arc::new(Recorder::default());
    assert!(c.subscribe(recorder.clone()).is_empty());
    c.create_topic(new_topic("after", 2, 1), false)
        .await
        .unwrap();
    c.create_partitions("after", 3, None, false).await.unwrap();
    c.delete_topic("before").await.unwrap();
    c.next_producer_id().await.unwrap(); // no topic changed: no delta
    let e = c
        .create_topic(new_topic("fail-me", 1, 1), false)
        .await
        .unwrap_err();
    assert_eq!(e.error, ResponseError::KafkaStorageError);
    assert!(e.message.contains("disk full"), "{}", e.message);
    assert!(c.topic("fail-me").is_some(), "the change itself stands");
    let seen = recorder.seen.lock().clone();
    let topic = |n: &str, removed| vec![(n.to_string(), removed)];
    assert_eq!(
        seen,
        vec![
            topic("before", false),
            topic("after", false),
            topic("after", false),
            topic("before", true),
            topic("fail-me", false),
        ]
    );
}

#[test]
fn a_multi_broker_cluster_s_metadata_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let topic_id = Uuid::from_u128(0xc1);
    let mut records = bootstrap_records();
    records.push(MetadataRecord::Topic {
        name: "shared".into(),
        topic_id,
    });
    records.push(MetadataRecord::Partition(PartitionRecord {
        partition_id: 0,
        topic_id,
        replicas: vec![1, 2, 3],
        isr: vec![2, 3],
        removing_replicas: vec![],
        adding_replicas: vec![],
        leader: 2,
        leader_recovery_state: 0,
        leader_epoch: 7,
        partition_epoch: 9,
        directories: vec![Uuid::nil(); 3],
        eligible_leader_replicas: vec![],
        last_known_elr: vec![],
    }));
    MetadataLog::create(dir.path(), 1, &records, 2).unwrap();
    let before = std::fs::read(segment(dir.path())).unwrap();
    let qs = dir.path().join(METADATA_LOG_DIR).join("quorum-state");
    let qs_before = std::fs::read(&qs).unwrap();
    let err = open(dir.path(), config(1), None).err().unwrap().to_string();
    assert!(err.contains("shared-0 has a replica on broker 2"), "{err}");
    assert_eq!(
        std::fs::read(segment(dir.path())).unwrap(),
        before,
        "nothing appended"
    );
    assert_eq!(std::fs::read(&qs).unwrap(), qs_before);
}
