//! Storage limits a client meets over TCP: Kafka 4's topic config validators (KIP-1030's
//! 1 MiB floor on `segment.bytes` and the rest), answered as INVALID_CONFIG with Kafka's
//! message, and the broker refusing to start on a broker value Kafka would refuse.

use crate::common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;

use common::{Client, TestBroker};

fn create_with(topic: &str, key: &str, value: &str) -> CreateTopicsRequest {
    CreateTopicsRequest::default()
        .with_topics(vec![create_topics_request::CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_num_partitions(1)
            .with_replication_factor(1)
            .with_configs(vec![
                create_topics_request::CreatableTopicConfig::default()
                    .with_name(StrBytes::from_string(key.into()))
                    .with_value(Some(StrBytes::from_string(value.into()))),
            ])])
        .with_timeout_ms(5000)
}

fn alter(topic: &str, key: &str, value: &str) -> AlterConfigsRequest {
    AlterConfigsRequest::default().with_resources(vec![
        alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_string(topic.into()))
            .with_configs(vec![alter_configs_request::AlterableConfig::default()
                .with_name(StrBytes::from_string(key.into()))
                .with_value(Some(StrBytes::from_string(value.into())))]),
    ])
}

fn incremental(topic: &str, key: &str, value: &str) -> IncrementalAlterConfigsRequest {
    IncrementalAlterConfigsRequest::default().with_resources(vec![
        incremental_alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_string(topic.into()))
            .with_configs(vec![
                incremental_alter_configs_request::AlterableConfig::default()
                    .with_name(StrBytes::from_string(key.into()))
                    .with_config_operation(0)
                    .with_value(Some(StrBytes::from_string(value.into()))),
            ]),
    ])
}

#[tokio::test]
async fn too_small_segment_bytes_is_refused_with_kafkas_message() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;

    let resp = c
        .send(&create_with("tiny", "segment.bytes", "100"), 7)
        .await;
    let t = &resp.topics[0];
    assert_eq!(t.error_code, ResponseError::InvalidConfig.code());
    assert_eq!(
        t.error_message.as_deref(),
        Some("Invalid value 100 for configuration segment.bytes: Value must be at least 1048576")
    );
    assert!(
        b.broker.controller.topic("tiny").is_none(),
        "nothing created"
    );
    let ok = c
        .send(&create_with("tiny", "segment.bytes", "1048576"), 7)
        .await;
    assert_eq!(ok.topics[0].error_code, 0);

    let resp = c.send(&alter("tiny", "segment.bytes", "1048575"), 2).await;
    let r = &resp.responses[0];
    assert_eq!(r.error_code, ResponseError::InvalidConfig.code());
    assert_eq!(
        r.error_message.as_deref(),
        Some(
            "Invalid value 1048575 for configuration segment.bytes: Value must be at least 1048576"
        )
    );
    let resp = c.send(&incremental("tiny", "segment.bytes", "14"), 1).await;
    assert_eq!(
        resp.responses[0].error_code,
        ResponseError::InvalidConfig.code()
    );
    b.stop().await;
}

#[tokio::test]
async fn kafka_validators_for_ranges_enums_and_types() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    let cases = [
        ("retention.ms", "-2", "Value must be at least -1"),
        ("segment.ms", "0", "Value must be at least 1"),
        ("flush.messages", "0", "Value must be at least 1"),
        ("segment.index.bytes", "3", "Value must be at least 4"),
        ("min.insync.replicas", "0", "Value must be at least 1"),
        ("max.message.bytes", "-1", "Value must be at least 0"),
        (
            "min.cleanable.dirty.ratio",
            "1.5",
            "Value must be no more than 1",
        ),
        (
            "compression.type",
            "none",
            "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer",
        ),
        (
            "cleanup.policy",
            "delete,shred",
            "String must be one of: compact, delete",
        ),
        (
            "message.timestamp.type",
            "Later",
            "String must be one of: CreateTime, LogAppendTime",
        ),
        ("retention.ms", "soon", "Not a number of type LONG"),
        ("segment.bytes", "1e9", "Not a number of type INT"),
        (
            "preallocate",
            "yes",
            "Expected value to be either true or false",
        ),
    ];
    for (i, (key, value, why)) in cases.iter().enumerate() {
        let resp = c.send(&create_with(&format!("t{i}"), key, value), 7).await;
        let t = &resp.topics[0];
        assert_eq!(
            t.error_code,
            ResponseError::InvalidConfig.code(),
            "{key}={value}"
        );
        assert_eq!(
            t.error_message.as_deref(),
            Some(format!("Invalid value {value} for configuration {key}: {why}").as_str())
        );
    }
    let resp = c
        .send(
            &CreateTopicsRequest::default()
                .with_topics(vec![create_topics_request::CreatableTopic::default()
                    .with_name(TopicName(StrBytes::from_static_str("lags")))
                    .with_num_partitions(1)
                    .with_replication_factor(1)
                    .with_configs(vec![
                        create_topics_request::CreatableTopicConfig::default()
                            .with_name(StrBytes::from_static_str("min.compaction.lag.ms"))
                            .with_value(Some(StrBytes::from_static_str("5000"))),
                        create_topics_request::CreatableTopicConfig::default()
                            .with_name(StrBytes::from_static_str("max.compaction.lag.ms"))
                            .with_value(Some(StrBytes::from_static_str("4000"))),
                    ])])
                .with_timeout_ms(5000),
            7,
        )
        .await;
    assert_eq!(
        resp.topics[0].error_message.as_deref(),
        Some("conflict topic config setting min.compaction.lag.ms (5000) > max.compaction.lag.ms (4000)")
    );
    b.stop().await;
}

#[test]
fn broker_refuses_a_log_segment_bytes_below_one_mib() {
    let args: Vec<String> = ["--override", "log.segment.bytes=1000"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let err = skua::config::from_args(&args).unwrap_err().to_string();
    assert!(
        err.contains("log.segment.bytes") && err.contains("Value must be at least 1048576"),
        "{err}"
    );
}

/// The skua binary under an open-files limit (soft, hard), killed on drop.
struct LimitedBroker {
    child: Child,
    addr: SocketAddr,
}

impl LimitedBroker {
    fn start(dir: &Path, (soft, hard): (u64, u64)) -> LimitedBroker {
        let mut command = Command::new(env!("CARGO_BIN_EXE_skua"));
        command
            .args(["--override", "listeners=PLAINTEXT://127.0.0.1:0"])
            .args(["--override", &format!("log.dirs={}", dir.display())])
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let limit = libc::rlimit {
            rlim_cur: soft,
            rlim_max: hard,
        };
        // SAFETY: runs in the forked child before exec and only calls setrlimit, which is
        // async-signal-safe, on a struct copied into the closure.
        unsafe {
            command.pre_exec(move || {
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = command.spawn().expect("skua starts");
        let logs = child.stdout.take().expect("piped stdout");
        let (found, bound) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(logs).lines().map_while(Result::ok) {
                let port = line
                    .find("skua started")
                    .and_then(|at| line[at..].split("listeners=[127.0.0.1:").nth(1))
                    .and_then(|rest| rest.split(']').next())
                    .and_then(|p| p.parse::<u16>().ok());
                if let Some(port) = port {
                    let _ = found.send(port);
                }
            }
        });
        let mut broker = LimitedBroker {
            child,
            addr: "127.0.0.1:0".parse().unwrap(),
        };
        let port = bound
            .recv_timeout(Duration::from_secs(60))
            .expect("skua did not start listening");
        broker.addr = format!("127.0.0.1:{port}").parse().unwrap();
        broker
    }
}

impl Drop for LimitedBroker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Creating topics until descriptors run short: the broker refuses with
/// KAFKA_STORAGE_ERROR, keeps serving, and after kill -9 starts again under the same limit
/// with every topic it acknowledged.
#[tokio::test]
async fn out_of_descriptors_refuses_new_logs_and_still_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let broker = LimitedBroker::start(dir.path(), (256, 256));
    let mut c = Client::connect(broker.addr).await;
    let mut created = Vec::new();
    let refusal = loop {
        let name = format!("t{}", created.len());
        let code = c.create_topic(&name, 1).await;
        if code != 0 {
            break code;
        }
        created.push(name);
        assert!(created.len() < 1000, "never refused");
    };
    assert_eq!(refusal, ResponseError::KafkaStorageError.code());
    let refused = format!("t{}", created.len());
    assert!(created.len() > 100, "only {} topics", created.len());
    let (code, _) = c
        .produce(
            &created[0],
            0,
            common::batch(&["still here"], None, Compression::None),
            1,
        )
        .await;
    assert_eq!(code, 0, "the broker keeps serving what it has");
    drop(c);
    drop(broker); // kill -9

    let broker = LimitedBroker::start(dir.path(), (256, 256));
    let mut c = Client::connect(broker.addr).await;
    let resp = c
        .send(&MetadataRequest::default().with_topics(None), 12)
        .await;
    for name in &created {
        let t = resp
            .topics
            .iter()
            .find(|t| t.name.as_ref().map(|n| n.as_str()) == Some(name.as_str()))
            .unwrap_or_else(|| panic!("{name} missing after restart"));
        assert_eq!(t.error_code, 0, "{name}");
    }
    assert!(
        !resp
            .topics
            .iter()
            .any(|t| t.name.as_ref().map(|n| n.as_str()) == Some(refused.as_str())),
        "the refused topic was not recorded"
    );
    let records = c.fetch(&created[0], 0, 0, 0, 0).await;
    assert_eq!(
        common::values(records.records.as_ref().unwrap()),
        vec![(0, "still here".to_string())]
    );
}

/// The soft open-files limit is raised to the hard one at startup.
#[tokio::test]
async fn startup_raises_the_open_files_limit() {
    let dir = tempfile::tempdir().unwrap();
    let broker = LimitedBroker::start(dir.path(), (300, 700));
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", broker.child.id())).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let numbers: Vec<&str> = line.split_whitespace().skip(3).take(2).collect();
    assert_eq!(numbers, vec!["700", "700"], "{line}");
}
