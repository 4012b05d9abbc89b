//! The 10,000-partition bound of one CreateTopics or CreatePartitions, over TCP: it
//! counts the whole request, as Kafka's controller bounds one operation's records, and
//! a request above it creates nothing (each topic answered POLICY_VIOLATION). Before,
//! each topic was checked alone: 3 topics of 4,000 made 12,000 partitions (12,013 open
//! files in 0.9 s), and `validate_only` accepted 50 of 10,000.

use crate::common;

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use common::TestBroker;

const POLICY_VIOLATION: i16 = 44;

fn topics(prefix: &str, count: usize, partitions: i32, validate_only: bool) -> CreateTopicsRequest {
    CreateTopicsRequest::default()
        .with_validate_only(validate_only)
        .with_timeout_ms(30_000)
        .with_topics(
            (0..count)
                .map(|i| {
                    create_topics_request::CreatableTopic::default()
                        .with_name(TopicName(StrBytes::from_string(format!("{prefix}-{i}"))))
                        .with_num_partitions(partitions)
                        .with_replication_factor(1)
                })
                .collect(),
        )
}

/// Partition directories under the broker's log dir.
fn partition_dirs(dir: &std::path::Path) -> usize {
    walk(dir)
        .into_iter()
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("wide-") || n.starts_with("grow-"))
        })
        .count()
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = e.path();
        if path.is_dir() {
            out.extend(walk(&path));
            out.push(path);
        }
    }
    out
}

#[tokio::test]
async fn one_request_creates_at_most_ten_thousand_partitions() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]).await;
    let mut c = broker.client().await;

    for (request, what) in [
        (topics("wide", 3, 4_000, false), "3 x 4,000"),
        (
            topics("wide", 50, 10_000, true),
            "50 x 10,000, validate_only",
        ),
        (topics("wide", 10_001, -1, true), "10,001 x the default 1"),
    ] {
        let r = c.send(&request, 7).await;
        assert_eq!(r.topics.len(), request.topics.len(), "{what}");
        for t in &r.topics {
            assert_eq!(
                t.error_code,
                POLICY_VIOLATION,
                "{what}: {}",
                t.name.as_str()
            );
            assert_eq!(
                t.error_message.as_deref(),
                Some("Unable to perform excessively large batch operation."),
                "{what}"
            );
        }
    }
    assert_eq!(partition_dirs(dir.path()), 0, "nothing created");
    let listed = c
        .send(&MetadataRequest::default().with_topics(None), 9)
        .await;
    assert!(
        listed
            .topics
            .iter()
            .all(|t| !t.name.as_ref().is_some_and(|n| n.starts_with("wide-"))),
        "no topic in the metadata"
    );

    // Within the bound the request goes through; CreatePartitions counts what it adds
    // over the whole request the same way.
    let r = c.send(&topics("grow", 2, 2, false), 7).await;
    assert!(r.topics.iter().all(|t| t.error_code == 0));
    let grow = |count: i32| {
        CreatePartitionsRequest::default()
            .with_timeout_ms(30_000)
            .with_validate_only(true)
            .with_topics(
                (0..2)
                    .map(|i| {
                        create_partitions_request::CreatePartitionsTopic::default()
                            .with_name(TopicName(StrBytes::from_string(format!("grow-{i}"))))
                            .with_count(count)
                    })
                    .collect(),
            )
    };
    let over = c.send(&grow(6_000), 3).await;
    assert!(
        over.results
            .iter()
            .all(|t| t.error_code == POLICY_VIOLATION),
        "2 x 5,998 added"
    );
    let within = c.send(&grow(4_000), 3).await;
    assert!(
        within.results.iter().all(|t| t.error_code == 0),
        "2 x 3,998 added"
    );
    assert_eq!(partition_dirs(dir.path()), 4);
    broker.stop().await;
}
