//! A log dir that fails with an I/O error, on a ZooKeeper-mode broker with two `log.dirs`
//! (real ZooKeeper 3.8): its partitions answer KAFKA_STORAGE_ERROR, the other dir keeps
//! serving, nothing of the failed dir is deleted, and the broker writes Kafka's
//! `/log_dir_event_notification/log_dir_event_<seq>` for the controller. Skipped, with a
//! message, only when java is not installed.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::zookeeper::ZooKeeper;
use common::{batch, values, wait_for, Client, TestBroker};
use kafka_protocol::records::Compression;
use skua::controller::zk::broker::log_dir_events::{LogDirEvent, LOG_DIR_FAILURE};
use skua::zk::session::ZkSession;
use skua::zk::znodes;

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

    // Kafka's notification, for whichever controller runs.
    let observer = ZkSession::connect(&zk.config("/ldf")).await.unwrap();
    let start = std::time::Instant::now();
    let children = loop {
        let found = observer
            .children("/log_dir_event_notification")
            .await
            .unwrap()
            .unwrap_or_default();
        if !found.is_empty() {
            break found;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "a log dir event notification within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(children, vec!["log_dir_event_0000000000".to_string()]);
    let (data, _) = observer
        .get("/log_dir_event_notification/log_dir_event_0000000000")
        .await
        .unwrap()
        .unwrap();
    let event: LogDirEvent = znodes::decode(&data).unwrap();
    assert_eq!(
        event,
        LogDirEvent {
            version: 1,
            broker: 1,
            event: LOG_DIR_FAILURE
        }
    );
    assert_eq!(
        String::from_utf8_lossy(&data),
        r#"{"version":1,"broker":1,"event":1}"#
    );

    // Nothing of the offline dir is deleted.
    assert_eq!(std::fs::read(&segment).unwrap(), stored);
    broker.stop().await;
    assert_eq!(std::fs::read(&segment).unwrap(), stored);
}
