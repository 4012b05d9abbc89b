//! Two ZooKeeper-mode brokers with two named listeners each, as docker/compose.yaml runs
//! them: `INTERNAL` (between brokers, `inter.broker.listener.name`) and `EXTERNAL`
//! (advertised as `localhost`), both mapped to PLAINTEXT by
//! `listener.security.protocol.map`. Metadata answers each listener with that listener's
//! addresses, and acks=all with `min.insync.replicas=2` succeeds only once the follower
//! has fetched over INTERNAL.

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;

use common::replicated_topic::{leader_with_both_in_sync, waited_too_long};
use common::zookeeper::ZooKeeper;
use common::{batch, Client, TestBroker};

const TOPIC: &str = "named-listeners";

async fn start(id: i32, zk: &str, dir: &std::path::Path) -> TestBroker {
    let id = id.to_string();
    TestBroker::start(
        dir,
        &[
            ("broker.id", &id),
            ("zookeeper.connect", zk),
            ("listeners", "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0"),
            (
                "advertised.listeners",
                "INTERNAL://127.0.0.1:0,EXTERNAL://localhost:0",
            ),
            (
                "listener.security.protocol.map",
                "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
            ),
            ("inter.broker.listener.name", "INTERNAL"),
            ("min.insync.replicas", "2"),
            ("offsets.topic.replication.factor", "1"),
        ],
    )
    .await
}

/// The port `broker` advertises for `listener`.
fn port(broker: &TestBroker, listener: &str) -> u16 {
    broker
        .broker
        .config()
        .advertised_listeners
        .iter()
        .find(|l| l.name == listener)
        .map(|l| l.port)
        .unwrap()
}

/// (broker id, host, port) of every broker, as Metadata answers on `client`'s listener.
async fn brokers(client: &mut Client) -> Vec<(i32, String, i32)> {
    let resp = client
        .send(&MetadataRequest::default().with_topics(Some(vec![])), 12)
        .await;
    let mut all: Vec<_> = resp
        .brokers
        .iter()
        .map(|b| (b.node_id.0, b.host.to_string(), b.port))
        .collect();
    all.sort();
    all
}

/// Fails the test once `since` is 30 s ago.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_listener_advertises_its_own_addresses_and_brokers_replicate_over_internal() {
    let Some(zk) = ZooKeeper::start() else { return };
    let connect = format!("{}/named", zk.connect);
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let b1 = start(1, &connect, dirs[0].path()).await;
    let b2 = start(2, &connect, dirs[1].path()).await;
    let external = |b: &TestBroker| SocketAddr::from(([127, 0, 0, 1], port(b, "EXTERNAL")));
    let internal = |b: &TestBroker| SocketAddr::from(([127, 0, 0, 1], port(b, "INTERNAL")));
    assert_ne!(external(&b1), internal(&b1));

    let want_external = vec![
        (1, "localhost".to_string(), port(&b1, "EXTERNAL") as i32),
        (2, "localhost".to_string(), port(&b2, "EXTERNAL") as i32),
    ];
    let mut client = Client::connect(external(&b1)).await;
    let since = Instant::now();
    while brokers(&mut client).await != want_external {
        waited_too_long(since, "both brokers in EXTERNAL's metadata");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut inside = Client::connect(internal(&b2)).await;
    assert_eq!(
        brokers(&mut inside).await,
        vec![
            (1, "127.0.0.1".to_string(), port(&b1, "INTERNAL") as i32),
            (2, "127.0.0.1".to_string(), port(&b2, "INTERNAL") as i32),
        ]
    );

    let create = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
            .with_num_partitions(1)
            .with_replication_factor(2)])
        .with_timeout_ms(15_000);
    let created = client.send(&create, 7).await;
    assert_eq!(created.topics[0].error_code, 0, "{created:?}");

    // The leader, as seen from the EXTERNAL listener, with both replicas in sync.
    let leader = leader_with_both_in_sync(&mut client, TOPIC).await;
    let (leader, follower) = if leader == 1 { (&b1, &b2) } else { (&b2, &b1) };

    // acks=all with min.insync.replicas=2: answered only when the follower has the batch,
    // which it fetched over INTERNAL.
    let mut producer = Client::connect(external(leader)).await;
    let (error, offset) = producer
        .produce(
            TOPIC,
            0,
            batch(&["a", "b", "c"], None, Compression::None),
            -1,
        )
        .await;
    assert_eq!((error, offset), (0, 0));
    let follower_end = follower
        .broker
        .replicas
        .partition(TOPIC, 0)
        .map(|p| p.log_end_offset());
    assert_eq!(
        follower_end,
        Some(3),
        "the follower has the acknowledged batch"
    );
    b1.stop().await;
    b2.stop().await;
}
