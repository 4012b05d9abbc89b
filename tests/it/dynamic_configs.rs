//! Configs that change at runtime, over TCP: DescribeConfigs reports every Kafka key with
//! its source, synonyms and documentation; AlterConfigs and IncrementalAlterConfigs change
//! topic and broker configs with Kafka's checks, and the change takes effect at once and
//! survives a restart.

use crate::common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;

use common::configs::{incremental_alter as alter, APPEND, BROKER, DELETE, SET, TOPIC};
use common::{plain_batch, produce_request, Client, TestBroker};
use skua::controller::ConfigResource;

const DYNAMIC_TOPIC: i8 = 1;
const DYNAMIC_BROKER: i8 = 2;
const DYNAMIC_DEFAULT: i8 = 3;
const STATIC: i8 = 4;
const DEFAULT: i8 = 5;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

/// One described entry: value, source, read-only, synonyms (name, value, source).
#[derive(Debug, PartialEq)]
struct Entry {
    value: Option<String>,
    source: i8,
    read_only: bool,
    synonyms: Vec<(String, Option<String>, i8)>,
    documentation: Option<String>,
    config_type: i8,
}

async fn describe(
    c: &mut Client,
    resource_type: i8,
    name: &str,
    keys: Option<&[&str]>,
) -> Result<Vec<(String, Entry)>, (i16, Option<String>)> {
    let req = DescribeConfigsRequest::default()
        .with_include_synonyms(true)
        .with_include_documentation(true)
        .with_resources(vec![
            describe_configs_request::DescribeConfigsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(s(name))
                .with_configuration_keys(keys.map(|k| k.iter().map(|k| s(k)).collect())),
        ]);
    let resp = c.send(&req, 4).await;
    let r = &resp.results[0];
    if r.error_code != 0 {
        return Err((
            r.error_code,
            r.error_message.as_ref().map(|m| m.to_string()),
        ));
    }
    Ok(r.configs
        .iter()
        .map(|e| {
            (
                e.name.to_string(),
                Entry {
                    value: e.value.as_ref().map(|v| v.to_string()),
                    source: e.config_source,
                    read_only: e.read_only,
                    synonyms: e
                        .synonyms
                        .iter()
                        .map(|y| {
                            (
                                y.name.to_string(),
                                y.value.as_ref().map(|v| v.to_string()),
                                y.source,
                            )
                        })
                        .collect(),
                    documentation: e.documentation.as_ref().map(|d| d.to_string()),
                    config_type: e.config_type,
                },
            )
        })
        .collect())
}

async fn entry(c: &mut Client, resource_type: i8, name: &str, key: &str) -> Entry {
    let mut got = describe(c, resource_type, name, Some(&[key]))
        .await
        .unwrap();
    assert_eq!(got.len(), 1, "{key}");
    got.remove(0).1
}

fn syn(name: &str, value: &str, source: i8) -> (String, Option<String>, i8) {
    (name.to_string(), Some(value.to_string()), source)
}

#[tokio::test]
async fn describe_reports_every_kafka_key_with_where_it_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[("log.retention.hours", "1")]).await;
    let mut c = b.client().await;
    let all = describe(&mut c, BROKER, "1", None).await.unwrap();
    assert!(all.len() > 300, "{} broker keys", all.len());
    let get = |name: &str| &all.iter().find(|(n, _)| n == name).unwrap().1;
    assert!(
        all.iter().all(|(n, _)| n != "zookeeper.connect"),
        "a Kafka 4 broker has no ZooKeeper keys"
    );
    let hours = get("log.retention.hours");
    assert_eq!(
        (hours.value.as_deref(), hours.source, hours.read_only),
        (Some("1"), STATIC, false)
    );
    assert_eq!(
        hours.synonyms,
        vec![
            syn("log.retention.hours", "1", STATIC),
            syn("log.retention.hours", "168", DEFAULT)
        ]
    );
    assert_eq!(hours.config_type, 3, "INT");
    assert!(hours
        .documentation
        .as_deref()
        .unwrap()
        .contains("hours to keep a log file"));
    let partitions = get("num.partitions");
    assert_eq!(
        (
            partitions.value.as_deref(),
            partitions.source,
            partitions.read_only
        ),
        (Some("1"), DEFAULT, true)
    );
    let ms = get("log.retention.ms");
    assert_eq!(
        (ms.value.as_deref(), ms.source),
        (None, DEFAULT),
        "unset, no default"
    );

    c.create_topic("described", 1).await;
    let topic = describe(&mut c, TOPIC, "described", None).await.unwrap();
    assert!(topic.len() >= 33, "{} topic keys", topic.len());
    let retention = &topic.iter().find(|(n, _)| n == "retention.ms").unwrap().1;
    // As Kafka: the value comes from log.retention.hours, but only log.retention.ms
    // entries count as the topic key's synonyms.
    assert_eq!(retention.value.as_deref(), Some("3600000"));
    assert_eq!((retention.source, retention.read_only), (DEFAULT, false));
    let segment = &topic.iter().find(|(n, _)| n == "segment.bytes").unwrap().1;
    assert_eq!(
        segment.synonyms,
        vec![syn("log.segment.bytes", "1073741824", DEFAULT)]
    );
    assert_eq!(
        describe(&mut c, TOPIC, "nosuch", None).await.unwrap_err(),
        (ResponseError::UnknownTopicOrPartition.code(), None)
    );
    assert_eq!(
        describe(&mut c, BROKER, "2", None).await.unwrap_err(),
        (
            ResponseError::InvalidRequest.code(),
            Some("Unexpected broker id, expected 1 or empty string, but received 2".into())
        )
    );
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_configs_change_at_runtime_take_effect_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    c.create_topic("follows", 1).await;
    assert_eq!(
        alter(
            &mut c,
            BROKER,
            "1",
            &[(SET, "log.retention.ms", Some("5000"))]
        )
        .await,
        (0, None)
    );
    let e = entry(&mut c, BROKER, "1", "log.retention.ms").await;
    assert_eq!(
        (e.value.as_deref(), e.source),
        (Some("5000"), DYNAMIC_BROKER)
    );
    let t = entry(&mut c, TOPIC, "follows", "retention.ms").await;
    assert_eq!(
        (t.value.as_deref(), t.source),
        (Some("5000"), DYNAMIC_BROKER)
    );
    assert_eq!(
        t.synonyms,
        vec![
            syn("log.retention.ms", "5000", DYNAMIC_BROKER),
            syn("log.retention.hours", "168", DEFAULT),
        ]
    );
    let log = b.log("follows");
    assert_eq!(
        log.config().retention_ms,
        5000,
        "the hosted log takes it at once"
    );

    // The cluster default, beneath this broker's own value.
    assert_eq!(
        alter(
            &mut c,
            BROKER,
            "",
            &[
                (SET, "message.max.bytes", Some("2000000")),
                (SET, "log.retention.ms", Some("7000"))
            ]
        )
        .await,
        (0, None)
    );
    let defaults = describe(&mut c, BROKER, "", None).await.unwrap();
    let names: Vec<&str> = defaults.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, vec!["log.retention.ms", "message.max.bytes"]);
    assert!(defaults.iter().all(|(_, e)| e.source == DYNAMIC_DEFAULT));
    let e = entry(&mut c, BROKER, "1", "message.max.bytes").await;
    assert_eq!(
        (e.value.as_deref(), e.source),
        (Some("2000000"), DYNAMIC_DEFAULT)
    );
    assert_eq!(log.config().max_message_bytes, 2_000_000);
    let e = entry(&mut c, BROKER, "1", "log.retention.ms").await;
    assert_eq!(
        e.synonyms,
        vec![
            syn("log.retention.ms", "5000", DYNAMIC_BROKER),
            syn("log.retention.ms", "7000", DYNAMIC_DEFAULT),
            syn("log.retention.hours", "168", DEFAULT),
        ]
    );
    // A topic override still wins.
    assert_eq!(
        alter(
            &mut c,
            TOPIC,
            "follows",
            &[(SET, "retention.ms", Some("9000"))]
        )
        .await,
        (0, None)
    );
    let t = entry(&mut c, TOPIC, "follows", "retention.ms").await;
    assert_eq!(
        (t.value.as_deref(), t.source),
        (Some("9000"), DYNAMIC_TOPIC)
    );
    assert_eq!(t.synonyms[0], syn("retention.ms", "9000", DYNAMIC_TOPIC));
    // Deleting this broker's value uncovers the default.
    assert_eq!(
        alter(&mut c, BROKER, "1", &[(DELETE, "log.retention.ms", None)]).await,
        (0, None)
    );
    assert_eq!(
        entry(&mut c, BROKER, "1", "log.retention.ms").await.source,
        DYNAMIC_DEFAULT
    );
    // The cleaner follows its dynamic settings too.
    assert_eq!(
        alter(
            &mut c,
            BROKER,
            "",
            &[(
                SET,
                "log.cleaner.io.max.bytes.per.second",
                Some("5000000.0")
            )]
        )
        .await,
        (0, None)
    );
    assert_eq!(
        b.broker.replicas.cleaner.config().io_max_bytes_per_second,
        5e6
    );
    // The cleaner's threads grow at most twofold per change, as in Kafka.
    assert_eq!(
        alter(
            &mut c,
            BROKER,
            "",
            &[(SET, "log.cleaner.threads", Some("3"))]
        )
        .await,
        (
            ResponseError::InvalidRequest.code(),
            Some(
                "Log cleaner threads cannot be increased to more than double the current value 1"
                    .into()
            )
        )
    );
    assert_eq!(
        alter(
            &mut c,
            BROKER,
            "",
            &[(SET, "log.cleaner.threads", Some("2"))]
        )
        .await,
        (0, None)
    );
    assert_eq!(b.broker.replicas.cleaner.config().threads, 2);
    assert_eq!(b.broker.config().cleaner.threads, 2);
    drop(log);
    b.stop().await;

    // Stored in the metadata log: back after a restart.
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    let e = entry(&mut c, BROKER, "1", "message.max.bytes").await;
    assert_eq!(
        (e.value.as_deref(), e.source),
        (Some("2000000"), DYNAMIC_DEFAULT)
    );
    let log = b.log("follows");
    assert_eq!(
        (log.config().max_message_bytes, log.config().retention_ms),
        (2_000_000, 9000)
    );
    assert_eq!(
        b.broker.replicas.cleaner.config().io_max_bytes_per_second,
        5e6
    );
    drop(log);
    b.stop().await;
}

#[tokio::test]
async fn changes_are_checked_as_kafka_checks_them() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    c.create_topic("checked", 1).await;
    let invalid_request = ResponseError::InvalidRequest.code();
    let cases: Vec<Case> = vec![
        (BROKER, "1", vec![(SET, "num.partitions", Some("3"))], invalid_request,
            "Cannot update these configs dynamically: Set(num.partitions)"),
        (BROKER, "", vec![(SET, "listeners", Some("PLAINTEXT://:1"))], invalid_request,
            "Cannot update these configs at default cluster level, broker id must be specified: Set(listeners)"),
        (BROKER, "2", vec![(SET, "log.retention.ms", Some("1"))], invalid_request,
            "Unexpected broker id, expected 1, but received 2"),
        (BROKER, "x", vec![(SET, "log.retention.ms", Some("1"))], invalid_request,
            "Node id must be an integer, but it is: x"),
        (BROKER, "1", vec![(SET, "log.segment.bytes", Some("1000"))], invalid_request,
            "Invalid value 1000 for configuration log.segment.bytes: Value must be at least 1048576"),
        (BROKER, "1", vec![(APPEND, "log.retention.ms", Some("1"))], invalid_request,
            "Config value append is not allowed for config key: log.retention.ms"),
        (BROKER, "1", vec![(SET, "log.retention.ms", None)], invalid_request,
            "Null value not supported for : log.retention.ms"),
        (TOPIC, "checked", vec![(APPEND, "retention.ms", Some("1"))], ResponseError::InvalidConfig.code(),
            "Can't APPEND to key retention.ms because its type is not LIST."),
        (TOPIC, "checked", vec![(SET, "retention.ms", Some("1")), (SET, "retention.ms", Some("2"))], invalid_request,
            "Error due to duplicate config keys"),
        (TOPIC, "checked", vec![(SET, "segment.bytes", Some("10"))], ResponseError::InvalidConfig.code(),
            "Invalid value 10 for configuration segment.bytes: Value must be at least 1048576"),
    ];
    for (kind, name, ops, code, message) in cases {
        assert_eq!(
            alter(&mut c, kind, name, &ops).await,
            (code, Some(message.to_string())),
            "{ops:?}"
        );
    }
    // cleanup.policy is a list: APPEND adds to it.
    assert_eq!(
        alter(
            &mut c,
            TOPIC,
            "checked",
            &[(APPEND, "cleanup.policy", Some("compact"))]
        )
        .await,
        (0, None)
    );
    let e = entry(&mut c, TOPIC, "checked", "cleanup.policy").await;
    assert_eq!(e.value.as_deref(), Some("compact"));
    assert!(
        b.broker
            .controller
            .resource_configs(&ConfigResource {
                resource_type: BROKER,
                name: "1".into(),
            })
            .is_empty(),
        "nothing refused was stored"
    );
    b.stop().await;
}

/// A resource type and name, the operations, and the error code and message expected.
type Case<'a> = (
    i8,
    &'a str,
    Vec<(i8, &'a str, Option<&'a str>)>,
    i16,
    &'a str,
);

fn batch(n: usize, value_len: usize) -> Bytes {
    let values = (0..n).map(|_| (None, Some(Bytes::from(vec![b'x'; value_len]))));
    plain_batch(values, skua::log::now_ms(), Compression::None)
}

/// The check: segment.bytes and retention.ms changed on a live topic govern the
/// next roll and the next retention check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_topics_segment_bytes_and_retention_ms_take_effect() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(
        dir.path(),
        &[
            ("log.retention.check.interval.ms", "200"),
            ("log.segment.delete.delay.ms", "0"),
        ],
    )
    .await;
    let mut c = b.client().await;
    c.create_topic("live", 1).await;
    let log = b.log("live");
    for _ in 0..15 {
        produce(&mut c).await;
    }
    assert_eq!(log.segment_count(), 1, "1 GiB segments by default");
    assert_eq!(
        alter(
            &mut c,
            TOPIC,
            "live",
            &[(SET, "segment.bytes", Some("1048576"))]
        )
        .await,
        (0, None)
    );
    for _ in 0..15 {
        produce(&mut c).await;
    }
    // The next append rolls (1.5 MB is past 1 MiB), and each new segment takes 10
    // batches of about 100 KB.
    assert_eq!(
        log.segment_count(),
        3,
        "the next roll obeys the new segment.bytes"
    );
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(
        alter(
            &mut c,
            TOPIC,
            "live",
            &[(SET, "retention.ms", Some("1000"))]
        )
        .await,
        (0, None)
    );
    let start = Instant::now();
    while log.log_start_offset() < 3000 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the next retention check did not act"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(log);
    b.stop().await;
}

async fn produce(c: &mut Client) {
    let req = produce_request("live", 0, batch(100, 1000), 1);
    assert_eq!(
        c.send(&req, 9).await.responses[0].partition_responses[0].error_code,
        0
    )
}

/// The legacy AlterConfigs replaces a broker's whole set of dynamic configs, as Kafka's
/// does, and refuses a resource named twice in one request.
#[tokio::test]
async fn legacy_alter_configs_replaces_the_whole_set() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    let legacy = |pairs: &[(&str, &str)], twice: bool| {
        let resource = alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(BROKER)
            .with_resource_name(s(""))
            .with_configs(
                pairs
                    .iter()
                    .map(|(k, v)| {
                        alter_configs_request::AlterableConfig::default()
                            .with_name(s(k))
                            .with_value(Some(s(v)))
                    })
                    .collect(),
            );
        let mut resources = vec![resource.clone()];
        if twice {
            resources.push(resource);
        }
        AlterConfigsRequest::default().with_resources(resources)
    };
    let resp = c
        .send(
            &legacy(
                &[
                    ("message.max.bytes", "2000000"),
                    ("log.cleaner.backoff.ms", "16000"),
                ],
                false,
            ),
            2,
        )
        .await;
    assert_eq!(resp.responses[0].error_code, 0);
    assert_eq!(b.broker.config().log.message_max_bytes, 2_000_000);
    // The second set has no message.max.bytes: it goes back to its default.
    let resp = c
        .send(&legacy(&[("log.cleaner.backoff.ms", "17000")], false), 2)
        .await;
    assert_eq!(resp.responses[0].error_code, 0);
    let config = b.broker.config();
    assert_eq!(config.log.message_max_bytes, 1_048_588);
    assert_eq!(config.cleaner.backoff_ms, 17_000);
    let resp = c
        .send(&legacy(&[("log.cleaner.backoff.ms", "18000")], true), 2)
        .await;
    for r in &resp.responses {
        assert_eq!(
            (r.error_code, r.error_message.as_deref()),
            (
                ResponseError::InvalidRequest.code(),
                Some("Each resource must appear at most once.")
            )
        );
    }
    assert_eq!(b.broker.config().cleaner.backoff_ms, 17_000);
    b.stop().await;
}

/// `min.insync.replicas` in force decides acks=all produces: above the ISR (one broker)
/// they are refused with NOT_ENOUGH_REPLICAS and nothing is appended, acks=1 still
/// appends, and lowering it lets the next acks=all produce through.
#[tokio::test]
async fn min_insync_replicas_changed_on_a_live_topic_decides_the_next_produce() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    c.create_topic("strict", 1).await;
    assert_eq!(
        alter(
            &mut c,
            TOPIC,
            "strict",
            &[(SET, "min.insync.replicas", Some("2"))]
        )
        .await,
        (0, None)
    );
    let produce = |acks: i16| produce_request("strict", 0, batch(1, 10), acks);
    let code = |r: ProduceResponse| r.responses[0].partition_responses[0].error_code;
    assert_eq!(
        code(c.send(&produce(-1), 9).await),
        ResponseError::NotEnoughReplicas.code()
    );
    assert_eq!(b.log("strict").log_end_offset(), 0, "nothing appended");
    assert_eq!(code(c.send(&produce(1), 9).await), 0);
    assert_eq!(
        alter(
            &mut c,
            TOPIC,
            "strict",
            &[(DELETE, "min.insync.replicas", None)]
        )
        .await,
        (0, None)
    );
    assert_eq!(code(c.send(&produce(-1), 9).await), 0);
    assert_eq!(b.log("strict").log_end_offset(), 2);
    b.stop().await;
}
