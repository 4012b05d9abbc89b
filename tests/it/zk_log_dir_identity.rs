//! A log dir skua starts empty in ZooKeeper mode must be one a Kafka 3.9 ZooKeeper-mode
//! broker of the same cluster can start on: `meta.properties` version 0 naming the node
//! `broker.id` (Kafka 3.9 refuses version 1 there: "ZK-based brokers that are not
//! migrating only support version 0"), with ZooKeeper's cluster id. Against a real
//! ZooKeeper (`scripts/zk`); skipped, with a message, only without java.

use crate::common;

use std::time::Duration;

use common::zookeeper::ZooKeeper;
use skua::zk::session::{ZkConfig, ZkSession};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_dir_gets_the_meta_properties_kafka_39_reads_in_zookeeper_mode() {
    let Some(zk) = ZooKeeper::start() else { return };
    let chroot = format!("{}/identity", zk.connect);
    let dir = tempfile::tempdir().unwrap();
    let broker = common::TestBroker::start(
        dir.path(),
        &[
            ("broker.id", "2"),
            ("zookeeper.connect", &chroot),
            ("zookeeper.session.timeout.ms", "6000"),
        ],
    )
    .await;
    let session =
        ZkSession::connect(&ZkConfig::new(&chroot, Duration::from_secs(10), None).unwrap())
            .await
            .unwrap();
    let (cluster, _) = session.get("/cluster/id").await.unwrap().unwrap();
    let cluster = String::from_utf8(cluster.to_vec()).unwrap();

    let meta = std::fs::read_to_string(dir.path().join("meta.properties")).unwrap();
    let lines: Vec<&str> = meta.lines().collect();
    assert!(lines.contains(&"version=0"), "{meta}");
    assert!(lines.contains(&"broker.id=2"), "{meta}");
    assert!(!meta.contains("node.id"), "{meta}");
    let cluster_line = lines
        .iter()
        .find_map(|l| l.strip_prefix("cluster.id="))
        .unwrap_or_else(|| panic!("no cluster.id in {meta}"));
    assert!(
        cluster.contains(&format!("\"id\":\"{cluster_line}\"")),
        "meta.properties names cluster {cluster_line}, /cluster/id holds {cluster}"
    );
    broker.stop().await;
}
