//! Two ZooKeeper-mode brokers that speak TLS to each other: `SSL` is an SSL listener with
//! `ssl.client.auth=required` (each broker presents its own certificate, signed by the
//! cluster's CA), made the inter-broker listener by `security.inter.broker.protocol=SSL`;
//! clients use `EXTERNAL` (PLAINTEXT, listed first). The controller's LeaderAndIsr reaches
//! the other broker over SSL, and an acks=all produce with `min.insync.replicas=2` is
//! answered only once the follower fetched the batch over SSL: replication works only if
//! every outbound connection speaks TLS with the broker's keystore and verifies the peer.

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;

use common::replicated_topic::{create_on_either, leader_with_both_in_sync};
use common::tls::TestCa;
use common::zookeeper::ZooKeeper;
use common::{batch, values, Client, TestBroker};

const TOPIC: &str = "tls-replicated";

async fn start(id: i32, zk: &str, dir: &std::path::Path, ca: &TestCa) -> TestBroker {
    let keystore = ca.broker(&format!("broker-{id}.pem"));
    let id = id.to_string();
    let keystore = keystore.keystore.display().to_string();
    let truststore = ca.truststore().display().to_string();
    TestBroker::start(
        dir,
        &[
            ("broker.id", &id),
            ("zookeeper.connect", zk),
            ("listeners", "EXTERNAL://127.0.0.1:0,SSL://127.0.0.1:0"),
            (
                "advertised.listeners",
                "EXTERNAL://127.0.0.1:0,SSL://127.0.0.1:0",
            ),
            (
                "listener.security.protocol.map",
                "SSL:SSL,EXTERNAL:PLAINTEXT",
            ),
            ("security.inter.broker.protocol", "SSL"),
            ("listener.name.ssl.ssl.client.auth", "required"),
            ("ssl.keystore.type", "PEM"),
            ("ssl.keystore.location", &keystore),
            ("ssl.truststore.type", "PEM"),
            ("ssl.truststore.location", &truststore),
            ("min.insync.replicas", "2"),
            ("offsets.topic.replication.factor", "1"),
        ],
    )
    .await
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brokers_replicate_over_an_mtls_inter_broker_listener() {
    let Some(zk) = ZooKeeper::start() else { return };
    let connect = format!("{}/tls", zk.connect);
    let certs = tempfile::tempdir().unwrap();
    let ca = TestCa::new(certs.path());
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let b1 = start(1, &connect, dirs[0].path(), &ca).await;
    let b2 = start(2, &connect, dirs[1].path(), &ca).await;
    let external = |b: &TestBroker| SocketAddr::from(([127, 0, 0, 1], port(b, "EXTERNAL")));
    assert!(b1.broker.shared_config.outbound_tls().is_some());

    let mut client = Client::connect(external(&b1)).await;
    let mut other = Client::connect(external(&b2)).await;
    create_on_either(&mut client, &mut other, TOPIC).await;
    let leader = leader_with_both_in_sync(&mut client, TOPIC).await;
    let (leader, follower) = if leader == 1 { (&b1, &b2) } else { (&b2, &b1) };

    let mut producer = Client::connect(external(leader)).await;
    let (error, offset) = producer
        .produce(
            TOPIC,
            0,
            batch(&["over", "mutual", "tls"], None, Compression::None),
            -1,
        )
        .await;
    assert_eq!((error, offset), (0, 0));
    let follower_end = follower
        .broker
        .replicas
        .partition(TOPIC, 0)
        .map(|p| p.log_end_offset());
    assert_eq!(follower_end, Some(3), "the follower fetched over TLS");
    let fetched = producer.fetch(TOPIC, 0, 0, 100, 1).await;
    assert_eq!(
        values(fetched.records.as_ref().unwrap()),
        vec![
            (0, "over".to_string()),
            (1, "mutual".to_string()),
            (2, "tls".to_string())
        ]
    );
    // A password config is never written to ZooKeeper in clear: without
    // password.encoder.secret it is refused with Kafka 3.9's message.
    let (code, message) = common::configs::incremental_alter(
        &mut client,
        common::configs::BROKER,
        "1",
        &[(
            common::configs::SET,
            "listener.name.ssl.ssl.keystore.password",
            Some("hunter2"),
        )],
    )
    .await;
    let message = message.unwrap_or_default();
    assert_ne!(code, 0);
    assert!(
        message.contains("Password encoder secret not configured") && !message.contains("hunter2"),
        "{message}"
    );
    b1.stop().await;
    b2.stop().await;
}

/// A Kafka 3.9.1 broker and a skua broker in one ZooKeeper-mode cluster whose only
/// listener is SSL with `ssl.client.auth=required`: skua is the controller, each leads one
/// partition with the other as follower, so Kafka's controller channel and fetcher speak
/// TLS to skua, and skua's fetcher and controller channel speak TLS to Kafka (verifying its
/// certificate against its advertised 127.0.0.1). Acks=all writes with
/// `min.insync.replicas=2` succeed on both leaders.
#[test]
fn a_kafka_broker_and_a_skua_broker_replicate_over_mtls() {
    use common::cluster::{eventually, rt, Cluster, ONE_AT_A_TIME};
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let certs = tempfile::tempdir().unwrap();
    let ca = TestCa::new(certs.path());
    let broker_cert = ca.broker("brokers.pem");
    let client_cert = ca.issue("client.pem", &[], &[(rcgen::DnType::CommonName, "admin")]);
    let keystore = format!("ssl.keystore.location={}", broker_cert.keystore.display());
    let truststore = format!("ssl.truststore.location={}", ca.truststore().display());
    let extra = [
        "--listener",
        "SSL",
        "--override",
        "security.inter.broker.protocol=SSL",
        "--override",
        "ssl.keystore.type=PEM",
        "--override",
        &keystore,
        "--override",
        "ssl.truststore.type=PEM",
        "--override",
        &truststore,
        "--override",
        "ssl.client.auth=required",
        "--override",
        "min.insync.replicas=2",
    ];
    let Some(cluster) = Cluster::start_brokers(2, "1", &extra) else {
        return;
    };
    let addr = |i: usize| cluster.bootstrap[i].parse::<SocketAddr>().unwrap();
    let settings = common::tls::client_settings(&ca, Some(&client_cert));
    let skua = common::tls::tls_client(addr(0), &settings, "127.0.0.1");
    let kafka = common::tls::tls_client(addr(1), &settings, "127.0.0.1");

    let assignment = |p: i32, replicas: &[i32]| {
        create_topics_request::CreatableReplicaAssignment::default()
            .with_partition_index(p)
            .with_broker_ids(replicas.iter().map(|b| BrokerId(*b)).collect())
    };
    let create = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("mixed-tls")))
            .with_num_partitions(-1)
            .with_replication_factor(-1)
            .with_assignments(vec![
                assignment(0, &[1, 2]),
                assignment(1, &[2, 1]),
            ])])
        .with_timeout_ms(30_000);
    let created = rt().block_on(skua.send(&create, 7)).unwrap();
    assert_eq!(created.topics[0].error_code, 0, "{created:?}");

    let metadata = MetadataRequest::default()
        .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
        )
        .with_name(Some(TopicName(StrBytes::from_static_str("mixed-tls"))))]));
    for client in [&skua, &kafka] {
        eventually(
            "both partitions led with full ISRs",
            Duration::from_secs(60),
            || {
                let resp = rt().block_on(client.send(&metadata, 12)).ok()?;
                let parts = &resp.topics.first()?.partitions;
                let ready = parts.len() == 2
                    && parts.iter().all(|p| {
                        p.error_code == 0
                            && p.isr_nodes.len() == 2
                            && p.leader_id.0 == if p.partition_index == 0 { 1 } else { 2 }
                    });
                ready.then_some(())
            },
        );
    }
    for (leader, partition, values) in
        [(&skua, 0, ["from", "skua"]), (&kafka, 1, ["from", "kafka"])]
    {
        let req = common::produce_request(
            "mixed-tls",
            partition,
            batch(&values, None, Compression::None),
            -1,
        );
        let resp = rt().block_on(leader.send(&req, 9)).unwrap();
        let p = &resp.responses[0].partition_responses[0];
        assert_eq!(
            (p.error_code, p.base_offset),
            (0, 0),
            "acks=all on partition {partition}: the follower fetched over TLS"
        );
    }
    drop(cluster);
}
