//! A log dir that fails with an I/O error, on a ZooKeeper-mode broker with two `log.dirs`
//! (real ZooKeeper 3.8): its partitions answer KAFKA_STORAGE_ERROR, the other dir keeps
//! serving, nothing of the failed dir is deleted, and the broker writes Kafka's
//! `/log_dir_event_notification/log_dir_event_<seq>` for the controller; and in a cluster
//! of three, the controller acting on that notification: the partitions of the failed dir
//! get other leaders within seconds, the broker keeps leading those of its other dir.
//! Skipped, with a message, only when java is not installed.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::zookeeper::ZooKeeper;
use common::{batch, values, wait_for, Client, TestBroker};
use kafka_protocol::records::Compression;
use skua::zk::session::ZkSession;

const KAFKA_STORAGE_ERROR: i16 = 56;

/// The one of `dirs` holding `t-<partition>`.
fn dir_of(dirs: &[PathBuf], partition: i32) -> PathBuf {
    dirs.iter()
        .find(|d| d.join(format!("t-{partition}")).is_dir())
        .unwrap_or_else(|| panic!("t-{partition} in a log dir"))
        .clone()
}

/// Makes the next high-watermark checkpoint of `dir` fail: a non-empty directory where
/// the checkpoint file is renamed to.
fn break_checkpoint(dir: &Path) {
    let checkpoint = dir.join("replication-offset-checkpoint");
    let _ = std::fs::remove_file(&checkpoint);
    std::fs::create_dir_all(checkpoint.join("in-the-way")).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_log_dir_goes_offline_and_the_other_keeps_serving() {
    let Some(zk) = ZooKeeper::start() else { return };
    let root = tempfile::tempdir().unwrap();
    let dirs = vec![root.path().join("d1"), root.path().join("d2")];
    let log_dirs = format!("{},{}", dirs[0].display(), dirs[1].display());
    let connect = format!("{}/ldf", zk.connect);
    let broker = TestBroker::start(
        &dirs[0],
        &[
            ("log.dirs", &log_dirs),
            ("zookeeper.connect", &connect),
            ("broker.id", "1"),
            ("offsets.topic.replication.factor", "1"),
            ("replica.high.watermark.checkpoint.interval.ms", "200"),
        ],
    )
    .await;
    broker.broker.handle_log_dir_failures();
    let mut client = broker.client().await;
    // The broker answers before it is the controller (NOT_CONTROLLER until then).
    wait_for("t created", Duration::from_secs(20), || {
        let addr = broker.addr;
        async move {
            let code = Client::connect(addr).await.create_topic("t", 2).await;
            code == 0 || code == 36
        }
    })
    .await;
    for p in 0..2 {
        wait_for(
            &format!("t-{p} takes records"),
            Duration::from_secs(20),
            || {
                let addr = broker.addr;
                async move {
                    let mut c = Client::connect(addr).await;
                    let (code, _) = c
                        .produce("t", p, batch(&["a"], None, Compression::None), 1)
                        .await;
                    code == 0
                }
            },
        )
        .await;
    }
    let (failed, healthy) = (dir_of(&dirs, 0), dir_of(&dirs, 1));
    assert_ne!(failed, healthy, "the two partitions are in different dirs");
    let segment = failed.join("t-0/00000000000000000000.log");

    break_checkpoint(&failed);
    wait_for(
        "t-0 refuses with KAFKA_STORAGE_ERROR",
        Duration::from_secs(20),
        || {
            let addr = broker.addr;
            async move {
                let mut c = Client::connect(addr).await;
                let (code, _) = c
                    .produce("t", 0, batch(&["b"], None, Compression::None), 1)
                    .await;
                code == KAFKA_STORAGE_ERROR
            }
        },
    )
    .await;
    let fetched = client.fetch("t", 0, 0, 0, 0).await;
    assert_eq!(fetched.error_code, KAFKA_STORAGE_ERROR);
    // What the offline dir holds now (the records acknowledged before it failed).
    let stored = std::fs::read(&segment).unwrap();
    assert!(!stored.is_empty());

    // The other dir serves on.
    let (code, offset) = client
        .produce("t", 1, batch(&["c"], None, Compression::None), 1)
        .await;
    assert_eq!((code, offset), (0, 1));
    let fetched = client.fetch("t", 1, 0, 0, 0).await;
    assert_eq!(fetched.error_code, 0);
    let got = values(fetched.records.as_ref().unwrap());
    assert_eq!(got, vec![(0, "a".to_string()), (1, "c".to_string())]);

    // Kafka's notification, for whichever controller runs: this broker is the controller
    // here, which takes it (its format is checked in `broker/log_dir_events.rs`): the
    // parent's children changed twice (created, deleted) and none is left.
    let observer = ZkSession::connect(&zk.config("/ldf")).await.unwrap();
    let start = std::time::Instant::now();
    loop {
        let (_, stat) = observer
            .get("/log_dir_event_notification")
            .await
            .unwrap()
            .unwrap();
        let children = observer
            .children("/log_dir_event_notification")
            .await
            .unwrap()
            .unwrap_or_default();
        if stat.cversion >= 2 && children.is_empty() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "a log dir event notification written and taken within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // t-1, in the healthy dir, is still led here.
    assert_eq!(state(&observer, 1).await.0, 1);

    // Nothing of the offline dir is deleted.
    assert_eq!(std::fs::read(&segment).unwrap(), stored);
    broker.stop().await;
    assert_eq!(std::fs::read(&segment).unwrap(), stored);
}

/// Creates `t` with partition 0 on brokers [1, 2, 3] and partition 1 on [1, 3, 2] (both
/// led by broker 1), through whichever broker is the controller.
async fn create_assigned(brokers: &[&TestBroker]) {
    use kafka_protocol::messages::create_topics_request::{
        CreatableReplicaAssignment, CreatableTopic,
    };
    use kafka_protocol::messages::{BrokerId, CreateTopicsRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let assignment = |p: i32, replicas: &[i32]| {
        CreatableReplicaAssignment::default()
            .with_partition_index(p)
            .with_broker_ids(replicas.iter().map(|&b| BrokerId(b)).collect())
    };
    let req = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string("t".into())))
            .with_num_partitions(-1)
            .with_replication_factor(-1)
            .with_assignments(vec![
                assignment(0, &[1, 2, 3]),
                assignment(1, &[1, 3, 2]),
            ])])
        .with_timeout_ms(5000);
    let addrs: Vec<_> = brokers.iter().map(|b| b.addr).collect();
    wait_for("t created", Duration::from_secs(30), || {
        let (addrs, req) = (addrs.clone(), req.clone());
        async move {
            for addr in addrs {
                let code = Client::connect(addr).await.send(&req, 7).await.topics[0].error_code;
                if code == 0 || code == 36 {
                    return true;
                }
            }
            false
        }
    })
    .await;
}

/// (leader, isr) of `t-<partition>` in ZooKeeper.
async fn state(s: &ZkSession, partition: i32) -> (i64, Vec<i64>) {
    let path = format!("/brokers/topics/t/partitions/{partition}/state");
    let (data, _) = s.get(&path).await.unwrap().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&data).unwrap();
    let isr = v["isr"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_i64().unwrap())
        .collect();
    (v["leader"].as_i64().unwrap(), isr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_controller_moves_leadership_off_a_failed_log_dir() {
    let Some(zk) = ZooKeeper::start() else { return };
    let root = tempfile::tempdir().unwrap();
    let dirs = [root.path().join("b1-d1"), root.path().join("b1-d2")];
    let log_dirs = format!("{},{}", dirs[0].display(), dirs[1].display());
    let connect = format!("{}/ldc", zk.connect);
    let common = [
        ("zookeeper.connect", connect.as_str()),
        ("offsets.topic.replication.factor", "1"),
        ("replica.high.watermark.checkpoint.interval.ms", "200"),
        ("replica.fetch.backoff.ms", "50"),
        ("replica.fetch.wait.max.ms", "100"),
    ];
    let b1 = TestBroker::start(
        &dirs[0],
        &[
            &[("broker.id", "1"), ("log.dirs", log_dirs.as_str())][..],
            &common,
        ]
        .concat(),
    )
    .await;
    let b2 = TestBroker::start(
        &root.path().join("b2"),
        &[&[("broker.id", "2")][..], &common].concat(),
    )
    .await;
    let b3 = TestBroker::start(
        &root.path().join("b3"),
        &[&[("broker.id", "3")][..], &common].concat(),
    )
    .await;
    for b in [&b1, &b2, &b3] {
        b.broker.handle_log_dir_failures();
    }
    let brokers = [&b1, &b2, &b3];
    create_assigned(&brokers).await;
    let s = ZkSession::connect(&zk.config("/ldc")).await.unwrap();
    for p in 0..2 {
        wait_for(
            &format!("t-{p} takes acks=all records on broker 1"),
            Duration::from_secs(30),
            || {
                let addr = b1.addr;
                async move {
                    let mut c = Client::connect(addr).await;
                    let (code, _) = c
                        .produce("t", p, batch(&["a"], None, Compression::None), -1)
                        .await;
                    code == 0
                }
            },
        )
        .await;
    }
    let (failed, healthy) = (
        dirs.iter()
            .find(|d| d.join("t-0").is_dir())
            .unwrap()
            .clone(),
        dirs.iter()
            .find(|d| d.join("t-1").is_dir())
            .unwrap()
            .clone(),
    );
    assert_ne!(failed, healthy, "t-0 and t-1 in different dirs of broker 1");

    break_checkpoint(&failed);
    let start = std::time::Instant::now();
    let (leader, isr) = loop {
        let (leader, isr) = state(&s, 0).await;
        if leader != 1 && leader > 0 {
            break (leader, isr);
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "t-0's leadership moves within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(!isr.contains(&1), "broker 1 left t-0's ISR: {isr:?}");
    // Producers go on with the new leader, every acknowledged record still there.
    let new_leader = brokers[leader as usize - 1];
    wait_for(
        "t-0 takes records on its new leader",
        Duration::from_secs(20),
        || {
            let addr = new_leader.addr;
            async move {
                let mut c = Client::connect(addr).await;
                let (code, _) = c
                    .produce("t", 0, batch(&["b"], None, Compression::None), -1)
                    .await;
                code == 0
            }
        },
    )
    .await;
    let fetched = new_leader.client().await.fetch("t", 0, 0, 0, 0).await;
    let got: Vec<String> = values(fetched.records.as_ref().unwrap())
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    assert_eq!(got.first().map(String::as_str), Some("a"));
    assert_eq!(got.last().map(String::as_str), Some("b"));

    // Broker 1 keeps leading t-1, from its other dir, with acks=all.
    assert_eq!(state(&s, 1).await.0, 1);
    let (code, _) = b1
        .client()
        .await
        .produce("t", 1, batch(&["c"], None, Compression::None), -1)
        .await;
    assert_eq!(code, 0);
    // The controller deleted the notification.
    let left = s
        .children("/log_dir_event_notification")
        .await
        .unwrap()
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
    for b in [b3, b2, b1] {
        b.stop().await;
    }
}
