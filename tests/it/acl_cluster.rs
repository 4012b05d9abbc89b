//! ACLs and client quotas shared by Apache Kafka 3.9.1 and skua in one ZooKeeper-mode
//! cluster (`scripts/cluster start 2 --skua 1`: skua as broker 1, Kafka as broker 2, both
//! with `authorizer.class.name=kafka.security.authorizer.AclAuthorizer`). An ACL created
//! through the Kafka broker is enforced by skua within seconds, and one created through
//! skua by Kafka; each lists what the other wrote, and a deletion through either lifts the
//! denial on both. The same for `producer_byte_rate` and `consumer_byte_rate` quotas of a
//! user and client id (`/config/users/<user>/clients/<client-id>` and `/config/changes`):
//! each broker throttles near the rate a quota created through the other kind sets.
//! Skipped, with a message, only when java is not installed.
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
    // Two windows of a second: a rate is measured over one to two seconds, so a few
    // seconds of traffic show the bound.
    "--override",
    "quota.window.num=2",
    "--override",
    "quota.window.size.seconds=1",
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

fn addrs(cluster: &Cluster) -> Vec<SocketAddr> {
    cluster
        .bootstrap
        .iter()
        .map(|a| a.parse().unwrap())
        .collect()
}

/// Clients of skua and of the Kafka broker, once the topics `from-kafka-t` (led by skua)
/// and `from-skua-t` (led by Kafka) are writable through their leaders. The topics are
/// created through the controller (ZooKeeper mode: only it creates topics).
async fn with_topics(cluster: &Cluster) -> (Client, Client) {
    let addrs = addrs(cluster);
    let mut skua = Client::connect(addrs[SKUA]).await;
    let mut kafka = Client::connect(addrs[KAFKA]).await;
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
    (skua, kafka)
}

#[test]
fn acls_created_through_either_kind_of_broker_are_enforced_by_both() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(cluster) = Cluster::start_brokers(2, "1", OVERRIDES) else {
        return;
    };
    rt().block_on(async {
        let (mut skua, mut kafka) = with_topics(&cluster).await;
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

/// The rate both byte quotas get: a few 20 KB requests a second.
const RATE: f64 = 100_000.0;

/// AlterClientQuotas through `c` on the entity (`User:ANONYMOUS`, `client`): both byte
/// rates set to RATE, or removed.
async fn set_quotas(c: &mut Client, client: &str, set: bool) {
    let entity = ["user", "client-id"].map(|t| {
        alter_client_quotas_request::EntityData::default()
            .with_entity_type(s(t))
            .with_entity_name(Some(s(if t == "user" { "ANONYMOUS" } else { client })))
    });
    let ops = ["producer_byte_rate", "consumer_byte_rate"].map(|key| {
        alter_client_quotas_request::OpData::default()
            .with_key(s(key))
            .with_value(if set { RATE } else { 0.0 })
            .with_remove(!set)
    });
    let req = AlterClientQuotasRequest::default().with_entries(vec![
        alter_client_quotas_request::EntryData::default()
            .with_entity(entity.to_vec())
            .with_ops(ops.to_vec()),
    ]);
    let resp = c.send(&req, 1).await;
    assert_eq!(resp.entries[0].error_code, 0, "{:?}", resp.entries[0]);
}

/// Every quota with a client id a broker lists: "client-id=C,user=U key=value", sorted.
async fn quotas_listed(c: &mut Client) -> Vec<String> {
    let req = DescribeClientQuotasRequest::default().with_components(vec![
        describe_client_quotas_request::ComponentData::default()
            .with_entity_type(s("client-id"))
            .with_match_type(2)
            .with_match(None),
    ]);
    let resp = c.send(&req, 1).await;
    assert_eq!(resp.error_code, 0, "{:?}", resp.error_message);
    let mut out = Vec::new();
    for e in resp.entries.unwrap_or_default() {
        let mut entity: Vec<String> = e
            .entity
            .iter()
            .map(|d| {
                let name = d.entity_name.as_ref().map(|n| n.to_string());
                format!("{}={}", d.entity_type, name.unwrap_or_default())
            })
            .collect();
        entity.sort();
        for v in e.values {
            out.push(format!("{} {}={}", entity.join(","), v.key, v.value));
        }
    }
    out.sort();
    out
}

/// A client of `broker` with the client id `client`.
async fn client_as(broker: SocketAddr, client: &str) -> Client {
    let mut c = Client::connect(broker).await;
    c.set_client_id(client);
    c
}

/// Sends `exchange`'s requests back to back for 3.5 s: the first 1.5 s spend the
/// allowance a fresh rate starts with, the rest shows the steady rate. Returns the bytes
/// per second moved after the first 1.5 s and how many answers carried a throttle time.
/// A broker holds each answer's successor back for the throttle its predecessor earned
/// (KIP-219), so back-to-back requests are held at the rate.
async fn rate(mut exchange: impl AsyncFnMut() -> (usize, i32)) -> (f64, usize) {
    let started = Instant::now();
    let (mut moved, mut throttled) = (0, 0);
    let mut measured_from = None;
    while started.elapsed() < Duration::from_millis(3500) {
        let (bytes, throttle_ms) = exchange().await;
        throttled += usize::from(throttle_ms > 0);
        match measured_from {
            None if started.elapsed() >= Duration::from_millis(1500) => {
                measured_from = Some(Instant::now())
            }
            None => {}
            Some(_) => moved += bytes,
        }
    }
    let rate = moved as f64 / measured_from.unwrap().elapsed().as_secs_f64();
    (rate, throttled)
}

/// Produces 20 KB requests to `topic` for `rate`.
async fn produce_rate(c: &mut Client, topic: &str) -> (f64, usize) {
    let value = "x".repeat(20_000);
    let request = common::produce_request(
        topic,
        0,
        common::batch(&[value.as_str()], None, Compression::None),
        1,
    );
    rate(async || {
        let resp = c.send(&request, 9).await;
        assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
        (20_000, resp.throttle_time_ms)
    })
    .await
}

/// Fetches `topic` from its start a batch at a time for `rate`, over again at its end.
async fn fetch_rate(c: &mut Client, topic: &str, tolerate_out_of_range: bool) -> (f64, usize) {
    let mut offset = 0;
    rate(async || {
        let req = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_max_bytes(20_000)
            .with_topics(vec![fetch_request::FetchTopic::default()
                .with_topic(TopicName(s(topic)))
                .with_partitions(vec![fetch_request::FetchPartition::default()
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(20_000)])]);
        let resp = c.send(&req, 12).await;
        // (Kafka answers a throttled fetch with no partitions at all.)
        let Some(p) = resp.responses.first().and_then(|t| t.partitions.first()) else {
            return (0, resp.throttle_time_ms);
        };
        // (Kafka 3.9 has been seen to answer OFFSET_OUT_OF_RANGE at an offset just past
        // batches it had served, high watermark -1; its reads start over. skua's may not.)
        if p.error_code == ResponseError::OffsetOutOfRange.code() && tolerate_out_of_range {
            eprintln!("fetch of {topic} at {offset}: OFFSET_OUT_OF_RANGE; from 0 again");
            offset = 0;
            return (0, resp.throttle_time_ms);
        }
        assert_eq!(
            p.error_code, 0,
            "fetch of {topic} at {offset}: high watermark {}, log start {}",
            p.high_watermark, p.log_start_offset
        );
        let (bytes, next) = whole_batches(p.records.as_deref().unwrap_or_default());
        offset = match next {
            Some(next) => next,
            None if p.high_watermark == offset => 0,
            None => offset,
        };
        (bytes, resp.throttle_time_ms)
    })
    .await
}

/// The bytes of the whole batches in `records` and the offset after the last (a fetch's
/// answer may end in part of a batch, as Kafka's do when the batch passes the fetch's
/// size limit).
fn whole_batches(records: &[u8]) -> (usize, Option<i64>) {
    let (mut at, mut next) = (0, None);
    while records.len() >= at + 27 {
        let field = |from: usize, n: usize| &records[at + from..at + from + n];
        let base_offset = i64::from_be_bytes(field(0, 8).try_into().unwrap());
        let length = i32::from_be_bytes(field(8, 4).try_into().unwrap()) as usize;
        let last_delta = i32::from_be_bytes(field(23, 4).try_into().unwrap());
        if records.len() < at + 12 + length {
            break;
        }
        at += 12 + length;
        next = Some(base_offset + i64::from(last_delta) + 1);
    }
    (at, next)
}

/// Asserts a measured rate within `slack` of RATE, with throttle times given.
fn assert_held(what: &str, (rate, throttled): (f64, usize), slack: f64) {
    eprintln!("{what}: {rate:.0} bytes/s against {RATE}, {throttled} throttled answers");
    assert!(throttled > 0, "{what}: no throttle time given");
    assert!(
        (RATE * (1.0 - slack)..=RATE * (1.0 + slack)).contains(&rate),
        "{what}: {rate:.0} bytes/s against a quota of {RATE}"
    );
}

#[test]
fn quotas_created_through_either_kind_of_broker_are_enforced_by_both() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(cluster) = Cluster::start_brokers(2, "1", OVERRIDES) else {
        return;
    };
    rt().block_on(async {
        let (mut skua, mut kafka) = with_topics(&cluster).await;
        // Each quota is created through one kind of broker and measured on the other,
        // with a client id of its own: `from-kafka-q` writes and reads skua's topic.
        set_quotas(&mut kafka, "from-kafka-q", true).await;
        set_quotas(&mut skua, "from-skua-q", true).await;
        let mut on_skua = client_as(addrs(&cluster)[SKUA], "from-kafka-q").await;
        let mut on_kafka = client_as(addrs(&cluster)[KAFKA], "from-skua-q").await;
        within(
            "skua throttles the quota Kafka wrote",
            Duration::from_secs(10),
            async || throttle_of_produce(&mut on_skua, "from-kafka-t").await > 0,
        )
        .await;
        within(
            "Kafka throttles the quota skua wrote",
            Duration::from_secs(10),
            async || throttle_of_produce(&mut on_kafka, "from-skua-t").await > 0,
        )
        .await;

        // Both brokers at once: skua under Kafka's quota, Kafka under skua's.
        let (skua_produce, kafka_produce) = tokio::join!(
            produce_rate(&mut on_skua, "from-kafka-t"),
            produce_rate(&mut on_kafka, "from-skua-t")
        );
        assert_held(
            "skua, producer_byte_rate set through Kafka",
            skua_produce,
            0.2,
        );
        assert_held(
            "Kafka, producer_byte_rate set through skua",
            kafka_produce,
            0.2,
        );
        let (skua_fetch, kafka_fetch) = tokio::join!(
            fetch_rate(&mut on_skua, "from-kafka-t", false),
            fetch_rate(&mut on_kafka, "from-skua-t", true)
        );
        // A fetch's bytes swing wider over two seconds of two one-second windows (Kafka
        // measured 146-154 KB/s, skua once 193 KB/s on a loaded machine, most runs within
        // 10 %): held under twice the rate, with throttle times given.
        assert_held(
            "skua, consumer_byte_rate set through Kafka",
            skua_fetch,
            0.95,
        );
        assert_held(
            "Kafka, consumer_byte_rate set through skua",
            kafka_fetch,
            0.95,
        );

        // Both list both, from the same znodes.
        let both: Vec<String> = ["from-kafka-q", "from-skua-q"]
            .iter()
            .flat_map(|c| {
                ["consumer_byte_rate", "producer_byte_rate"]
                    .map(|k| format!("client-id={c},user=ANONYMOUS {k}={RATE}"))
            })
            .collect();
        assert_eq!(quotas_listed(&mut skua).await, both);
        assert_eq!(quotas_listed(&mut kafka).await, both);

        // Deleted through the other kind: the throttling stops on both.
        set_quotas(&mut skua, "from-kafka-q", false).await;
        set_quotas(&mut kafka, "from-skua-q", false).await;
        // Each reads the znodes for every DescribeClientQuotas (Kafka's ZkAdminManager), so
        // neither lists what the other just deleted, notification followed or not.
        assert_eq!(quotas_listed(&mut skua).await, Vec::<String>::new());
        assert_eq!(quotas_listed(&mut kafka).await, Vec::<String>::new());
        within(
            "neither broker throttles any more",
            Duration::from_secs(5),
            async || {
                throttle_of_produce(&mut on_skua, "from-kafka-t").await == 0
                    && throttle_of_produce(&mut on_kafka, "from-skua-t").await == 0
            },
        )
        .await;
    });
}

/// One 20 KB produce to `topic`: its throttle time.
async fn throttle_of_produce(c: &mut Client, topic: &str) -> i32 {
    let value = "p".repeat(20_000);
    let records = common::batch(&[value.as_str()], None, Compression::None);
    let resp = c
        .send(&common::produce_request(topic, 0, records, 1), 9)
        .await;
    assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
    resp.throttle_time_ms
}
