//! Group configs (resource type GROUP, 32) over TCP: DescribeConfigs,
//! IncrementalAlterConfigs and AlterConfigs answer as Apache Kafka 4.4 does, the configs
//! are ConfigRecords in the metadata log that survive a restart, and the KIP-848
//! coordinator runs each group with its own session timeout and heartbeat interval.
//!
//! `kafka_answers` runs against Apache Kafka 4.4 too, with its default group settings:
//! `SKUA_TEST_BOOTSTRAP=127.0.0.1:PORT cargo test --test it group_configs::kafka_answers`
//! (`compat/kafka-broker.sh --version 4.4.0 --daemon` starts one).

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;

const GROUP: i8 = 32;
const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SOURCE_DEFAULT: i8 = 5;
const SOURCE_GROUP: i8 = 8;
const INT: i8 = 3;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

/// One described config: value, source, type and synonyms (name, value, source).
type Described = (String, i8, i8, Vec<(String, String, i8)>);

/// DescribeConfigs v4 of `group` (all keys with `keys` None): the error, its message,
/// and the configs by name.
async fn describe(
    c: &mut Client,
    group: &str,
    keys: Option<&[&str]>,
) -> (i16, Option<String>, BTreeMap<String, Described>) {
    let req = DescribeConfigsRequest::default()
        .with_include_synonyms(true)
        .with_resources(vec![
            describe_configs_request::DescribeConfigsResource::default()
                .with_resource_type(GROUP)
                .with_resource_name(s(group))
                .with_configuration_keys(keys.map(|k| k.iter().map(|k| s(k)).collect())),
        ]);
    let r = c.send(&req, 4).await.results.remove(0);
    assert_eq!((r.resource_type, r.resource_name.as_str()), (GROUP, group));
    let configs = r
        .configs
        .into_iter()
        .map(|e| {
            assert!(!e.read_only && !e.is_sensitive, "{}", e.name.as_str());
            let synonyms = e
                .synonyms
                .into_iter()
                .map(|y| {
                    let value = y.value.map(|v| v.to_string()).unwrap_or_default();
                    (y.name.to_string(), value, y.source)
                })
                .collect();
            let value = e.value.map(|v| v.to_string()).unwrap_or_default();
            (
                e.name.to_string(),
                (value, e.config_source, e.config_type, synonyms),
            )
        })
        .collect();
    let message = r.error_message.map(|m| m.to_string());
    (r.error_code, message, configs)
}

/// IncrementalAlterConfigs v1 of `group`: the error and its message.
async fn alter(
    c: &mut Client,
    group: &str,
    ops: &[(&str, i8, Option<&str>)],
    validate_only: bool,
) -> (i16, Option<String>) {
    let configs = ops
        .iter()
        .map(|(k, op, v)| {
            incremental_alter_configs_request::AlterableConfig::default()
                .with_name(s(k))
                .with_config_operation(*op)
                .with_value(v.map(s))
        })
        .collect();
    let req = IncrementalAlterConfigsRequest::default()
        .with_validate_only(validate_only)
        .with_resources(vec![
            incremental_alter_configs_request::AlterConfigsResource::default()
                .with_resource_type(GROUP)
                .with_resource_name(s(group))
                .with_configs(configs),
        ]);
    let r = c.send(&req, 1).await.responses.remove(0);
    assert_eq!((r.resource_type, r.resource_name.as_str()), (GROUP, group));
    (r.error_code, r.error_message.map(|m| m.to_string()))
}

/// AlterConfigs v2 of `group`: the error and its message.
async fn replace(
    c: &mut Client,
    group: &str,
    configs: &[(&str, Option<&str>)],
) -> (i16, Option<String>) {
    let configs = configs
        .iter()
        .map(|(k, v)| {
            alter_configs_request::AlterableConfig::default()
                .with_name(s(k))
                .with_value(v.map(s))
        })
        .collect();
    let req = AlterConfigsRequest::default().with_resources(vec![
        alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(GROUP)
            .with_resource_name(s(group))
            .with_configs(configs),
    ]);
    let r = c.send(&req, 2).await.responses.remove(0);
    (r.error_code, r.error_message.map(|m| m.to_string()))
}

fn ok() -> (i16, Option<String>) {
    (0, None)
}

fn refused(e: ResponseError, message: &str) -> (i16, Option<String>) {
    (e.code(), Some(message.to_string()))
}

fn syn(name: &str, value: &str, source: i8) -> (String, String, i8) {
    (name.to_string(), value.to_string(), source)
}

/// What Kafka 4.4 answers, key by key; the broker must run with Kafka's default group
/// settings. Runs against `SKUA_TEST_BOOTSTRAP` when set, else against skua.
#[tokio::test]
async fn kafka_answers() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = match std::env::var("SKUA_TEST_BOOTSTRAP") {
        Ok(a) => (None, a.parse().expect("SKUA_TEST_BOOTSTRAP is host:port")),
        Err(_) => {
            let b = TestBroker::start(dir.path(), &[]).await;
            let addr = b.addr;
            (Some(b), addr)
        }
    };
    let mut c = Client::connect(addr).await;
    // Group configs outlive groups, so each run takes fresh names.
    let run = uuid::Uuid::new_v4().simple().to_string();
    let g = format!("configs-{run}");
    let session = "consumer.session.timeout.ms";
    let heartbeat = "consumer.heartbeat.interval.ms";

    // Every public key with its default; the group need not exist.
    let (error, _, all) = describe(&mut c, &g, None).await;
    assert_eq!(error, 0);
    assert_eq!(all.len(), 21, "{:?}", all.keys());
    assert_eq!(
        all[session],
        (
            "45000".into(),
            SOURCE_DEFAULT,
            INT,
            vec![syn(
                "group.consumer.session.timeout.ms",
                "45000",
                SOURCE_DEFAULT
            )]
        )
    );
    assert_eq!(all["share.isolation.level"].0, "read_uncommitted");
    assert_eq!(
        all["share.auto.offset.reset"].3,
        vec![syn("share.auto.offset.reset", "latest", SOURCE_DEFAULT)]
    );
    assert_eq!(all["streams.assignor.name"].0, "sticky");
    assert!(
        !all.contains_key("consumer.assignor.offload.enable"),
        "internal"
    );
    let (error, message, _) = describe(&mut c, "", Some(&[session])).await;
    assert_eq!(
        (error, message.as_deref()),
        (
            ResponseError::InvalidRequest.code(),
            Some("Group name must not be empty")
        )
    );

    // Set, then described as the group's own with the broker's value as synonym.
    assert_eq!(
        alter(&mut c, &g, &[(session, SET, Some("50000"))], false).await,
        ok()
    );
    let (_, _, got) = describe(&mut c, &g, Some(&[session, "no.such.key"])).await;
    assert_eq!(
        got.into_iter().collect::<Vec<_>>(),
        vec![(
            session.to_string(),
            (
                "50000".into(),
                SOURCE_GROUP,
                INT,
                vec![
                    syn(session, "50000", SOURCE_GROUP),
                    syn("group.consumer.session.timeout.ms", "45000", SOURCE_DEFAULT)
                ]
            )
        )]
    );

    // Refusals, each in Kafka's words; none changes anything.
    let invalid = ResponseError::InvalidConfig;
    for (ops, answer) in [
        (
            vec![(session, SET, Some("1000"))],
            refused(invalid, "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."),
        ),
        (
            vec![(heartbeat, SET, Some("20000"))],
            refused(invalid, "consumer.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive."),
        ),
        (
            vec![(session, SET, Some("abc"))],
            refused(invalid, "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT"),
        ),
        (
            vec![(session, SET, Some("0"))],
            refused(invalid, "Invalid value 0 for configuration consumer.session.timeout.ms: Value must be at least 1"),
        ),
        (
            vec![("no.such.key", SET, Some("1"))],
            refused(invalid, "Unknown group config name: no.such.key"),
        ),
        (
            vec![("no.such.key", SET, Some("1")), (heartbeat, APPEND, Some("1"))],
            refused(invalid, "Can't APPEND to key consumer.heartbeat.interval.ms because its type is not LIST."),
        ),
        (
            vec![(heartbeat, SET, None), ("no.such.key", SET, Some("1"))],
            refused(
                ResponseError::InvalidRequest,
                "Null value not supported for : consumer.heartbeat.interval.ms",
            ),
        ),
        (
            vec![("share.isolation.level", SET, Some("bogus"))],
            refused(invalid, "Invalid value bogus for configuration share.isolation.level: String must be one of: read_committed, read_uncommitted"),
        ),
        (
            vec![("share.record.lock.duration.ms", SET, Some("500"))],
            refused(invalid, "Invalid value 500 for configuration share.record.lock.duration.ms: Value must be at least 1000"),
        ),
        (
            vec![("streams.num.standby.replicas", SET, Some("3"))],
            refused(invalid, "streams.num.standby.replicas must be less than or equal to 2"),
        ),
        (
            vec![("errors.deadletterqueue.topic.name", SET, Some("__dlq"))],
            refused(invalid, "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'"),
        ),
    ] {
        assert_eq!(alter(&mut c, &g, &ops, false).await, answer, "{ops:?}");
    }
    assert_eq!(
        alter(&mut c, "", &[(heartbeat, SET, Some("6000"))], false).await,
        refused(
            ResponseError::InvalidRequest,
            "Default group resources are not allowed."
        )
    );
    // validate_only checks and stores nothing.
    assert_eq!(
        alter(&mut c, &g, &[(heartbeat, SET, Some("6000"))], true).await,
        ok()
    );
    // Deleting a key the group does not set is no error.
    assert_eq!(
        alter(&mut c, &g, &[("no.such.key", DELETE, None)], false).await,
        ok()
    );
    let (_, _, got) = describe(&mut c, &g, Some(&[session, heartbeat])).await;
    assert_eq!(
        (got[session].0.as_str(), got[heartbeat].0.as_str()),
        ("50000", "5000")
    );

    // Values are kept trimmed; DELETE brings back the broker's.
    assert_eq!(
        alter(
            &mut c,
            &g,
            &[(heartbeat, SET, Some(" 6000 ")), (session, DELETE, None)],
            false
        )
        .await,
        ok()
    );
    let (_, _, got) = describe(&mut c, &g, Some(&[session, heartbeat])).await;
    assert_eq!(
        (got[session].0.as_str(), got[session].1),
        ("45000", SOURCE_DEFAULT)
    );
    assert_eq!(
        (got[heartbeat].0.as_str(), got[heartbeat].1),
        ("6000", SOURCE_GROUP)
    );

    // AlterConfigs replaces the whole set.
    assert_eq!(replace(&mut c, &g, &[(session, Some("55000"))]).await, ok());
    let (_, _, got) = describe(&mut c, &g, Some(&[session, heartbeat])).await;
    assert_eq!(
        (got[session].0.as_str(), got[heartbeat].0.as_str()),
        ("55000", "5000")
    );
    assert_eq!(
        replace(&mut c, &g, &[(session, Some("5"))]).await,
        refused(
            invalid,
            "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."
        )
    );
    assert_eq!(
        replace(&mut c, &g, &[(session, None)]).await,
        refused(
            ResponseError::InvalidRequest,
            "Null value not supported for : consumer.session.timeout.ms"
        )
    );
    assert_eq!(
        replace(&mut c, "", &[(session, Some("50000"))]).await,
        refused(
            ResponseError::InvalidRequest,
            "Default group resources are not allowed."
        )
    );
    if let Some(b) = broker {
        b.stop().await;
    }
}

/// The ConfigRecords of the metadata log (resource type, name, key, value).
fn config_records(dir: &std::path::Path) -> Vec<(i8, String, String, Option<String>)> {
    let log = dir.join("__cluster_metadata-0");
    let mut out = Vec::new();
    let mut segments: Vec<_> = std::fs::read_dir(&log)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    segments.sort();
    for segment in segments {
        let mut bytes = Bytes::from(std::fs::read(segment).unwrap());
        for batch in RecordBatchDecoder::decode_all(&mut bytes).unwrap() {
            for record in batch.records.iter().filter(|r| !r.control) {
                let value = record.value.as_ref().unwrap();
                if let Ok(skua::controller::records::MetadataRecord::Config {
                    resource_type,
                    resource_name,
                    name,
                    value,
                }) = skua::controller::records::MetadataRecord::decode(value)
                {
                    out.push((resource_type, resource_name, name, value));
                }
            }
        }
    }
    out
}

/// Stored as Kafka stores them: ConfigRecords of resource type GROUP in the metadata
/// log, a null value for a deleted key; read back after a restart.
#[tokio::test]
async fn group_configs_are_config_records_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    let ops = [
        ("consumer.session.timeout.ms", SET, Some("50000")),
        ("consumer.heartbeat.interval.ms", SET, Some("6000")),
    ];
    assert_eq!(alter(&mut c, "orders", &ops, false).await, ok());
    let deleted = [("consumer.heartbeat.interval.ms", DELETE, None)];
    assert_eq!(alter(&mut c, "orders", &deleted, false).await, ok());
    drop(c);
    b.stop().await;

    let group = |key: &str, value: Option<&str>| {
        (
            GROUP,
            "orders".to_string(),
            key.to_string(),
            value.map(str::to_string),
        )
    };
    assert_eq!(
        config_records(dir.path()),
        vec![
            group("consumer.heartbeat.interval.ms", Some("6000")),
            group("consumer.session.timeout.ms", Some("50000")),
            group("consumer.heartbeat.interval.ms", None),
        ]
    );

    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    let (_, _, got) = describe(
        &mut c,
        "orders",
        Some(&[
            "consumer.session.timeout.ms",
            "consumer.heartbeat.interval.ms",
        ]),
    )
    .await;
    assert_eq!(got["consumer.session.timeout.ms"].0, "50000");
    assert_eq!(got["consumer.session.timeout.ms"].1, SOURCE_GROUP);
    assert_eq!(got["consumer.heartbeat.interval.ms"].1, SOURCE_DEFAULT);
    b.stop().await;
}

async fn join(c: &mut Client, group: &str, member: &str) -> ConsumerGroupHeartbeatResponse {
    let req = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(s(member))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]))
        .with_topic_partitions(Some(vec![]));
    c.send(&req, 1).await
}

async fn members(c: &mut Client, group: &str) -> usize {
    let req = ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s(group))]);
    let g = c.send(&req, 1).await.groups.remove(0);
    assert_eq!(g.error_code, 0);
    g.members.len()
}

/// The KIP-848 coordinator runs a group with its own configs: heartbeats carry the
/// group's interval, and a member that stops heartbeating leaves after the group's
/// session timeout, while a group without configs keeps the broker's.
#[tokio::test]
async fn a_group_runs_with_its_own_session_timeout_and_heartbeat_interval() {
    let dir = tempfile::tempdir().unwrap();
    let config = &[
        ("offsets.topic.num.partitions", "1"),
        ("group.consumer.min.session.timeout.ms", "500"),
        ("group.consumer.min.heartbeat.interval.ms", "100"),
    ];
    let b = TestBroker::start(dir.path(), config).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("t", 2).await, 0);
    let find = FindCoordinatorRequest::default().with_coordinator_keys(vec![s("fast")]);
    assert_eq!(c.send(&find, 6).await.coordinators[0].error_code, 0);
    let ops = [
        ("consumer.session.timeout.ms", SET, Some("1000")),
        ("consumer.heartbeat.interval.ms", SET, Some("300")),
    ];
    assert_eq!(alter(&mut c, "fast", &ops, false).await, ok());

    let r = join(&mut c, "fast", "f1").await;
    assert_eq!((r.error_code, r.heartbeat_interval_ms), (0, 300));
    let r = join(&mut c, "slow", "s1").await;
    assert_eq!((r.error_code, r.heartbeat_interval_ms), (0, 5000));

    // Neither member heartbeats again: the fast group's is gone after its 1 s session.
    let mut gone = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if members(&mut c, "fast").await == 0 {
            gone = true;
            break;
        }
    }
    assert!(gone, "the member left after the group's session timeout");
    assert_eq!(members(&mut c, "slow").await, 1, "45 s session by default");

    // A change applies from the next heartbeat.
    let ops = [("consumer.heartbeat.interval.ms", SET, Some("400"))];
    assert_eq!(alter(&mut c, "fast", &ops, false).await, ok());
    let r = join(&mut c, "fast", "f2").await;
    assert_eq!((r.error_code, r.heartbeat_interval_ms), (0, 400));
    b.stop().await;
}
