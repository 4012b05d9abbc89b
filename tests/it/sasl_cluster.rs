//! Two ZooKeeper-mode skua brokers whose inter-broker listener is SASL_SSL with
//! SCRAM-SHA-512 (`security.inter.broker.protocol=SASL_SSL`,
//! `sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512`): the broker's own user is
//! written to `/config/users/admin` as Kafka's `kafka-configs.sh --zookeeper` writes it,
//! before the brokers start. The controller's LeaderAndIsr reaches the other broker over
//! SASL_SSL and an acks=all produce with `min.insync.replicas=2` is answered only once
//! the follower fetched over SASL_SSL. A user added through one broker
//! (AlterUserScramCredentials) authenticates on the other, which learnt it from the
//! `/config/changes` notification.
//!
//! `a_kafka_broker_and_a_skua_broker_over_sasl_ssl_scram`: the same listener in a mixed
//! cluster of Apache Kafka 3.9.1 and skua (scripts/cluster), replicating, failing over and
//! handing controllership over both ways.

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;

use common::replicated_topic::{create_on_either, leader_with_both_in_sync, waited_too_long};
use common::tls::TestCa;
use common::zookeeper::ZooKeeper;
use common::{batch, values, Client, TestBroker};
use skua::sasl::scram::{ScramCredential, ScramMechanism};
use skua::sasl::settings::{ClientCredentials, Mechanism};
use skua::tls::settings::Secret;

const TOPIC: &str = "sasl-replicated";
const SCRAM_JAAS: &str = r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="admin-scram";"#;

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
            ("listeners", "EXTERNAL://127.0.0.1:0,SASL_SSL://127.0.0.1:0"),
            (
                "advertised.listeners",
                "EXTERNAL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            ),
            (
                "listener.security.protocol.map",
                "SASL_SSL:SASL_SSL,EXTERNAL:PLAINTEXT",
            ),
            ("security.inter.broker.protocol", "SASL_SSL"),
            ("sasl.enabled.mechanisms", "SCRAM-SHA-512"),
            ("sasl.mechanism.inter.broker.protocol", "SCRAM-SHA-512"),
            (
                "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config",
                SCRAM_JAAS,
            ),
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

/// skua's client config over SASL_SSL as `user`, trusting the cluster's CA.
fn sasl_ssl_client(ca: &TestCa, user: &str, password: &str) -> skua::client::ClientConfig {
    let settings = common::tls::client_settings(ca, None);
    skua::client::ClientConfig {
        tls: Some(skua::tls::OutboundTls::build(&settings).unwrap()),
        server_name: Some("localhost".into()),
        sasl: Some(ClientCredentials {
            mechanism: Mechanism::Scram(ScramMechanism::Sha512),
            username: user.into(),
            password: Secret(password.into()),
        }),
        connect_timeout: Duration::from_secs(5),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brokers_replicate_over_a_sasl_ssl_scram_inter_broker_listener() {
    let Some(zk) = ZooKeeper::start() else { return };
    let connect = format!("{}/sasl", zk.connect);
    // The brokers' own user, as `kafka-configs.sh --zookeeper .. --alter --add-config
    // 'SCRAM-SHA-512=[iterations=4096,password=admin-scram]' --entity-type users
    // --entity-name admin` writes it.
    let session = skua::zk::session::ZkSession::connect(&zk.config("/sasl"))
        .await
        .unwrap();
    session
        .create_recursive("/config/changes", b"")
        .await
        .unwrap();
    let admin = ScramCredential::new(
        ScramMechanism::Sha512,
        "admin-scram",
        b"0123456789abcdef",
        4096,
    );
    let configs = [("SCRAM-SHA-512".to_string(), admin.to_kafka_string())].into();
    skua::controller::zk::broker::config_changes::write_entity_config(
        &session,
        "users/admin",
        &configs,
    )
    .await
    .unwrap();
    let certs = tempfile::tempdir().unwrap();
    let ca = TestCa::new(certs.path());
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let b1 = start(1, &connect, dirs[0].path(), &ca).await;
    let b2 = start(2, &connect, dirs[1].path(), &ca).await;
    let external = |b: &TestBroker| SocketAddr::from(([127, 0, 0, 1], port(b, "EXTERNAL")));
    let sasl_ssl = |b: &TestBroker| SocketAddr::from(([127, 0, 0, 1], port(b, "SASL_SSL")));
    assert!(b1.broker.shared_config.outbound_sasl().is_some());

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
            batch(&["over", "sasl", "ssl"], None, Compression::None),
            -1,
        )
        .await;
    assert_eq!((error, offset), (0, 0));
    let follower_end = follower
        .broker
        .replicas
        .partition(TOPIC, 0)
        .map(|p| p.log_end_offset());
    assert_eq!(follower_end, Some(3), "the follower fetched over SASL_SSL");
    let fetched = producer.fetch(TOPIC, 0, 0, 100, 1).await;
    assert_eq!(values(fetched.records.as_ref().unwrap()).len(), 3);

    // A user made through broker 1 authenticates on broker 2.
    let salt = b"another-salt-16b".to_vec();
    let mut salted = vec![0u8; 64];
    ring::pbkdf2::derive(
        ring::pbkdf2::PBKDF2_HMAC_SHA512,
        std::num::NonZeroU32::new(8192).unwrap(),
        &salt,
        b"alice-scram",
        &mut salted,
    );
    let upsert = AlterUserScramCredentialsRequest::default().with_upsertions(vec![
        alter_user_scram_credentials_request::ScramCredentialUpsertion::default()
            .with_name(StrBytes::from_static_str("alice"))
            .with_mechanism(2)
            .with_iterations(8192)
            .with_salt(Bytes::from(salt))
            .with_salted_password(Bytes::from(salted)),
    ]);
    let made = client.send(&upsert, 0).await;
    assert_eq!(made.results[0].error_code, 0, "{made:?}");
    let described = other
        .send(&DescribeUserScramCredentialsRequest::default(), 0)
        .await;
    let users: Vec<&str> = described.results.iter().map(|r| r.user.as_str()).collect();
    assert!(users.contains(&"admin"), "{users:?}");
    let since = Instant::now();
    loop {
        let config = sasl_ssl_client(&ca, "alice", "alice-scram");
        match skua::client::Connection::connect(sasl_ssl(&b2), &config).await {
            Ok(c) => {
                c.send(&MetadataRequest::default(), 12).await.unwrap();
                break;
            }
            Err(e) => {
                waited_too_long(since, &format!("alice known on broker 2 ({e})"));
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    let wrong = sasl_ssl_client(&ca, "alice", "nope");
    assert!(skua::client::Connection::connect(sasl_ssl(&b2), &wrong)
        .await
        .is_err());
    b1.stop().await;
    b2.stop().await;
}

/// How many whole record batches a segment file holds (each: base offset, then its
/// length, then that many bytes); `None` for a torn tail.
fn batches_in(segment: &[u8]) -> Option<usize> {
    let (mut at, mut count) = (0, 0);
    while at < segment.len() {
        let length = segment.get(at + 8..at + 12)?;
        at += 12 + i32::from_be_bytes(length.try_into().ok()?) as usize;
        count += 1;
    }
    (at == segment.len()).then_some(count)
}

/// The overrides both kinds of broker run with: one SASL_SSL listener (scripts/cluster's
/// `--listener`) that is also the inter-broker one, SCRAM-SHA-512 with `admin`'s
/// credentials from the listener's JAAS config, PEM stores.
fn mixed_cluster_options(keystore: &str, truststore: &str) -> Vec<String> {
    let mut options = vec![
        "--listener".to_string(),
        "SASL_SSL".to_string(),
        "--scram-user".to_string(),
        "admin=admin-scram".to_string(),
    ];
    for kv in [
        "security.inter.broker.protocol=SASL_SSL".to_string(),
        "sasl.enabled.mechanisms=SCRAM-SHA-512".to_string(),
        "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512".to_string(),
        format!("listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={SCRAM_JAAS}"),
        "ssl.keystore.type=PEM".to_string(),
        format!("ssl.keystore.location={keystore}"),
        "ssl.truststore.type=PEM".to_string(),
        format!("ssl.truststore.location={truststore}"),
    ] {
        options.push("--override".to_string());
        options.push(kv);
    }
    options
}

/// An Apache Kafka 3.9.1 broker (2) and a skua broker (1, the first controller) whose only
/// listener is SASL_SSL with SCRAM-SHA-512, the `admin` user written to ZooKeeper by
/// Kafka's `kafka-configs.sh --zookeeper` before either starts. Every connection between
/// them (controller channel, fetchers, AlterPartition) authenticates with SCRAM over TLS:
/// - each kind leads a partition the other follows: acks=all writes, and the followers'
///   segment files byte-identical to the leaders';
/// - kill -9 of skua: Kafka takes controllership and the partition skua led, takes writes;
///   skua restarted catches up from Kafka to the same bytes and rejoins the ISR;
/// - kill -9 of Kafka: skua takes controllership back and the partitions Kafka led, takes
///   writes; Kafka restarted catches up from skua to the same bytes.
#[test]
fn a_kafka_broker_and_a_skua_broker_over_sasl_ssl_scram() {
    use common::cluster::{eventually, rt, Cluster, ONE_AT_A_TIME};
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let certs = tempfile::tempdir().unwrap();
    let ca = TestCa::new(certs.path());
    let keystore = ca.broker("brokers.pem").keystore.display().to_string();
    let truststore = ca.truststore().display().to_string();
    let options = mixed_cluster_options(&keystore, &truststore);
    let options: Vec<&str> = options.iter().map(String::as_str).collect();
    let Some(cluster) = Cluster::start_brokers(2, "1", &options) else {
        return;
    };
    let (skua_id, kafka_id) = (1, 2);
    let client = |i: usize| {
        let mut config = sasl_ssl_client(&ca, "admin", "admin-scram");
        config.server_name = Some("127.0.0.1".into());
        config.reconnect_backoff_max = Duration::from_millis(200);
        skua::client::Client::new(cluster.bootstrap[i - 1].parse().unwrap(), config)
    };
    let (skua, kafka) = (client(1), client(2));
    let limit = Duration::from_secs(60);

    let topics = [
        ("by-skua", [skua_id, kafka_id]),
        ("by-kafka", [kafka_id, skua_id]),
    ];
    let create = CreateTopicsRequest::default()
        .with_topics(
            topics
                .iter()
                .map(|(name, replicas)| {
                    CreatableTopic::default()
                        .with_name(TopicName(StrBytes::from_static_str(name)))
                        .with_num_partitions(-1)
                        .with_replication_factor(-1)
                        .with_assignments(vec![
                            create_topics_request::CreatableReplicaAssignment::default()
                                .with_partition_index(0)
                                .with_broker_ids(replicas.iter().map(|b| BrokerId(*b)).collect()),
                        ])
                })
                .collect(),
        )
        .with_timeout_ms(30_000);
    let created = rt().block_on(skua.send(&create, 7)).unwrap();
    assert!(
        created.topics.iter().all(|t| t.error_code == 0),
        "{created:?}"
    );

    // (leader, ISR size) of `topic`-0 as `via` answers Metadata.
    let leader_and_isr = |via: &skua::client::Client, topic: &str| {
        let req = MetadataRequest::default()
            .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
            )
            .with_name(Some(TopicName(StrBytes::from_string(topic.into()))))]));
        let resp = rt().block_on(via.send(&req, 12)).ok()?;
        let p = resp.topics.first()?.partitions.first()?;
        (p.error_code == 0).then_some((p.leader_id.0, p.isr_nodes.len()))
    };
    let segment = |broker: i32, topic: &str| {
        let path = cluster.dir.path().join(format!(
            "broker-{broker}/data/{topic}-0/00000000000000000000.log"
        ));
        std::fs::read(path).unwrap_or_default()
    };
    // Both replicas in the ISR with byte-identical first segments holding `records`.
    let in_sync_alike = |topic: &str, records: usize| {
        eventually(
            &format!("{topic}: both replicas in the ISR with the same {records} records"),
            limit,
            || {
                let (_, isr) = leader_and_isr(&skua, topic)?;
                let bytes = segment(skua_id, topic);
                let alike = isr == 2 && bytes == segment(kafka_id, topic);
                let count = alike.then(|| batches_in(&bytes))??;
                (count == records).then_some(())
            },
        )
    };
    let produce = |via: &skua::client::Client, topic: &str, values: &[&str]| {
        let req = common::produce_request(topic, 0, batch(values, None, Compression::None), -1);
        let resp = rt().block_on(via.send(&req, 9)).unwrap();
        let p = &resp.responses[0].partition_responses[0];
        assert_eq!(p.error_code, 0, "acks=all to {topic}: {resp:?}");
    };
    let controller = || {
        let session = cluster.zk_session();
        let (data, _) = rt().block_on(session.get("/controller")).ok()??;
        let r: skua::zk::znodes::ControllerRegistration = skua::zk::znodes::decode(&data).ok()?;
        Some(r.brokerid)
    };

    for (topic, replicas) in &topics {
        for via in [&skua, &kafka] {
            eventually(&format!("{topic} led by {}", replicas[0]), limit, || {
                (leader_and_isr(via, topic)? == (replicas[0], 2)).then_some(())
            });
        }
    }
    produce(&skua, "by-skua", &["skua", "leads"]);
    produce(&kafka, "by-kafka", &["kafka", "leads"]);
    in_sync_alike("by-skua", 1);
    in_sync_alike("by-kafka", 1);
    assert_eq!(controller(), Some(skua_id));

    // skua crashes: Kafka becomes controller and leads by-skua.
    cluster.signal("kill", skua_id as usize);
    eventually("Kafka the controller", limit, || {
        (controller()? == kafka_id).then_some(())
    });
    eventually("Kafka leads by-skua", limit, || {
        (leader_and_isr(&kafka, "by-skua")?.0 == kafka_id).then_some(())
    });
    produce(&kafka, "by-skua", &["after", "skua", "failed"]);
    cluster.signal("restart", skua_id as usize);
    in_sync_alike("by-skua", 2);
    in_sync_alike("by-kafka", 1);

    // Kafka crashes: skua becomes controller again and leads both topics.
    cluster.signal("kill", kafka_id as usize);
    eventually("skua the controller", limit, || {
        (controller()? == skua_id).then_some(())
    });
    for (topic, _) in &topics {
        eventually(&format!("skua leads {topic}"), limit, || {
            (leader_and_isr(&skua, topic)?.0 == skua_id).then_some(())
        });
    }
    produce(&skua, "by-kafka", &["after", "kafka", "failed"]);
    cluster.signal("restart", kafka_id as usize);
    in_sync_alike("by-kafka", 2);
    in_sync_alike("by-skua", 2);
    drop(cluster);
}
