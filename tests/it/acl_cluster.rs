//! ACLs shared by Apache Kafka 3.9.1 and skua in one ZooKeeper-mode cluster
//! (`scripts/cluster start 2 --skua 1`: skua as broker 1, Kafka as broker 2, both with
//! `authorizer.class.name=kafka.security.authorizer.AclAuthorizer`): an ACL created
//! through the Kafka broker is enforced by skua within seconds, and one created through
//! skua by Kafka; each lists what the other wrote, and a deletion through either lifts the
//! denial on both. Skipped, with a message, only when java is not installed.
//!
//! The clients are `User:ANONYMOUS` on PLAINTEXT; `allow.everyone.if.no.acl.found=true`
//! leaves every resource without ACLs open (the brokers' own requests included).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;

use skua::zk::session::{ZkConfig, ZkSession};

use crate::common::cluster::{rt, Cluster, ONE_AT_A_TIME};
use crate::common::{self, Client};

const OVERRIDES: &[&str] = &[
    "--override",
    "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
    "--override",
    "allow.everyone.if.no.acl.found=true",
];

const SKUA: usize = 0;
const KAFKA: usize = 1;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// DENY WRITE for `User:ANONYMOUS` on the topics starting with `prefix`.
async fn deny_writes(c: &mut Client, prefix: &str) {
    let creation = create_acls_request::AclCreation::default()
        .with_resource_type(2)
        .with_resource_name(s(prefix))
        .with_resource_pattern_type(4)
        .with_principal(s("User:ANONYMOUS"))
        .with_host(s("*"))
        .with_operation(4)
        .with_permission_type(2);
    let resp = c
        .send(
            &CreateAclsRequest::default().with_creations(vec![creation]),
            2,
        )
        .await;
    assert_eq!(resp.results[0].error_code, 0, "{:?}", resp.results[0]);
}

/// Deletes the ACLs on the prefix `prefix`; returns how many went.
async fn delete_prefix(c: &mut Client, prefix: &str) -> usize {
    let filter = delete_acls_request::DeleteAclsFilter::default()
        .with_resource_type_filter(2)
        .with_resource_name_filter(Some(s(prefix)))
        .with_pattern_type_filter(4)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(1)
        .with_permission_type(1);
    let resp = c
        .send(&DeleteAclsRequest::default().with_filters(vec![filter]), 2)
        .await;
    assert_eq!(resp.filter_results[0].error_code, 0);
    resp.filter_results[0].matching_acls.len()
}

/// The names of the prefixed topic ACLs a broker lists.
async fn listed(c: &mut Client) -> Vec<String> {
    let req = DescribeAclsRequest::default()
        .with_resource_type_filter(2)
        .with_resource_name_filter(None)
        .with_pattern_type_filter(4)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(1)
        .with_permission_type(1);
    let resp = c.send(&req, 2).await;
    assert_eq!(resp.error_code, 0);
    let mut names: Vec<String> = resp
        .resources
        .iter()
        .map(|r| r.resource_name.to_string())
        .collect();
    names.sort();
    names
}

/// The produce's error code for `topic` partition 0 through this broker (its leader or
/// not: the authorization comes first).
async fn produce_code(c: &mut Client, topic: &str) -> i16 {
    let records = common::batch(&["v"], None, Compression::None);
    c.produce(topic, 0, records, 1).await.0
}

/// Polls until `check` holds, within `limit`.
async fn within(what: &str, limit: Duration, mut check: impl AsyncFnMut() -> bool) {
    let start = Instant::now();
    while !check().await {
        assert!(start.elapsed() < limit, "not within {limit:?}: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("{what}: after {:?}", start.elapsed());
}

#[test]
fn acls_created_through_either_kind_of_broker_are_enforced_by_both() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(cluster) = Cluster::start_brokers(2, "1", OVERRIDES) else {
        return;
    };
    let addrs: Vec<SocketAddr> = cluster
        .bootstrap
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
    rt().block_on(async {
        let mut skua = Client::connect(addrs[SKUA]).await;
        let mut kafka = Client::connect(addrs[KAFKA]).await;
        // Topics led by each kind of broker, open to everyone so far, created through the
        // controller (ZooKeeper mode: only it creates topics).
        let meta = kafka
            .send(&MetadataRequest::default().with_topics(Some(vec![])), 12)
            .await;
        let mut controller = Client::connect(addrs[meta.controller_id.0 as usize - 1]).await;
        for (topic, broker) in [("from-kafka-t", 1), ("from-skua-t", 2)] {
            let req = CreateTopicsRequest::default()
                .with_topics(vec![create_topics_request::CreatableTopic::default()
                    .with_name(TopicName(s(topic)))
                    .with_num_partitions(-1)
                    .with_replication_factor(-1)
                    .with_assignments(vec![
                        create_topics_request::CreatableReplicaAssignment::default()
                            .with_partition_index(0)
                            .with_broker_ids(vec![BrokerId(broker)]),
                    ])])
                .with_timeout_ms(30_000);
            let resp = controller.send(&req, 5).await;
            assert_eq!(resp.topics[0].error_code, 0, "{:?}", resp.topics[0]);
        }
        within(
            "both topics writable through their leaders",
            Duration::from_secs(30),
            async || {
                produce_code(&mut skua, "from-kafka-t").await == 0
                    && produce_code(&mut kafka, "from-skua-t").await == 0
            },
        )
        .await;
        let denied = ResponseError::TopicAuthorizationFailed.code();

        // Created through Kafka: skua follows `/kafka-acl-extended-changes`.
        deny_writes(&mut kafka, "from-kafka").await;
        within(
            "skua enforces the ACL Kafka wrote",
            Duration::from_secs(5),
            async || produce_code(&mut skua, "from-kafka-t").await == denied,
        )
        .await;
        assert_eq!(produce_code(&mut kafka, "from-kafka-t").await, denied);

        // Created through skua: Kafka follows the notification skua wrote.
        deny_writes(&mut skua, "from-skua").await;
        assert_eq!(produce_code(&mut skua, "from-skua-t").await, denied);
        within(
            "Kafka enforces the ACL skua wrote",
            Duration::from_secs(5),
            async || produce_code(&mut kafka, "from-skua-t").await == denied,
        )
        .await;

        // Both list both, from the same znodes.
        let both = vec!["from-kafka".to_string(), "from-skua".to_string()];
        assert_eq!(listed(&mut skua).await, both);
        within("Kafka lists both", Duration::from_secs(5), async || {
            listed(&mut kafka).await == both
        })
        .await;
        let config = ZkConfig::new(&cluster.zk_connect(), Duration::from_secs(10), None).unwrap();
        let zk = ZkSession::connect(&config).await.unwrap();
        let (json, _) = zk
            .get("/kafka-acl-extended/prefixed/Topic/from-skua")
            .await
            .unwrap()
            .expect("skua's ACL is in Kafka's znode");
        let text = String::from_utf8(json).unwrap();
        assert!(
            text.contains(r#""principal":"User:ANONYMOUS""#)
                && text.contains(r#""permissionType":"Deny""#),
            "{text}"
        );

        // Deleted through the other kind: the denial lifts on both.
        assert_eq!(delete_prefix(&mut skua, "from-kafka").await, 1);
        assert_eq!(delete_prefix(&mut kafka, "from-skua").await, 1);
        within(
            "both topics writable again",
            Duration::from_secs(5),
            async || {
                produce_code(&mut skua, "from-kafka-t").await == 0
                    && produce_code(&mut kafka, "from-kafka-t").await != denied
                    && produce_code(&mut skua, "from-skua-t").await != denied
                    && produce_code(&mut kafka, "from-skua-t").await == 0
            },
        )
        .await;
    });
}
