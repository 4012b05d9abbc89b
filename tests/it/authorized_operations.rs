//! Authorized operations over TCP. skua has no authorizer, so it answers what Apache Kafka
//! answers without one (or to a super user): every operation an ACL can name for the
//! resource type, as a bit field of `AclOperation` codes, and i32::MIN when not asked.
//! The values were read from Kafka 4.1.2 with the Java Admin client: cluster 8096,
//! topic 3576, group 3400.

use crate::common;

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use common::{Client, TestBroker};

/// CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE.
const CLUSTER_OPS: i32 = 8096;
/// READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS.
const TOPIC_OPS: i32 = 3576;
/// READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS.
const GROUP_OPS: i32 = 3400;
const NOT_REQUESTED: i32 = i32::MIN;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

async fn broker_with_topic(dir: &std::path::Path) -> (TestBroker, Client) {
    let broker = TestBroker::start(dir, &[]).await;
    let mut c = broker.client().await;
    assert_eq!(c.create_topic("ops", 1).await, 0);
    (broker, c)
}

#[tokio::test]
async fn describe_cluster_answers_cluster_operations_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, mut c) = broker_with_topic(dir.path()).await;
    for v in 0..=2 {
        let asked =
            DescribeClusterRequest::default().with_include_cluster_authorized_operations(true);
        let resp = c.send(&asked, v).await;
        assert_eq!(resp.cluster_authorized_operations, CLUSTER_OPS, "v{v}");
        let resp = c.send(&DescribeClusterRequest::default(), v).await;
        assert_eq!(resp.cluster_authorized_operations, NOT_REQUESTED, "v{v}");
    }
    broker.stop().await;
}

#[tokio::test]
async fn metadata_answers_cluster_operations_v8_to_v10_and_topic_operations_v8_on() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, mut c) = broker_with_topic(dir.path()).await;
    let topic = |name: &str| {
        metadata_request::MetadataRequestTopic::default().with_name(Some(TopicName(s(name))))
    };
    for v in 8..=12 {
        let req = MetadataRequest::default()
            .with_topics(Some(vec![topic("ops"), topic("no-such-topic")]))
            .with_include_cluster_authorized_operations(v <= 10)
            .with_include_topic_authorized_operations(true);
        let resp = c.send(&req, v).await;
        let want_cluster = if v <= 10 { CLUSTER_OPS } else { NOT_REQUESTED };
        assert_eq!(resp.cluster_authorized_operations, want_cluster, "v{v}");
        assert_eq!(resp.topics.len(), 2);
        for t in &resp.topics {
            // Kafka answers for an unknown name as well.
            assert_eq!(
                t.topic_authorized_operations, TOPIC_OPS,
                "v{v} {:?}",
                t.name
            );
        }
        let req = MetadataRequest::default().with_topics(Some(vec![topic("ops")]));
        let resp = c.send(&req, v).await;
        assert_eq!(resp.cluster_authorized_operations, NOT_REQUESTED, "v{v}");
        assert_eq!(
            resp.topics[0].topic_authorized_operations, NOT_REQUESTED,
            "v{v}"
        );
    }
    broker.stop().await;
}

#[tokio::test]
async fn describe_topic_partitions_always_answers_topic_operations() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, mut c) = broker_with_topic(dir.path()).await;
    let req = DescribeTopicPartitionsRequest::default()
        .with_topics(vec![
            describe_topic_partitions_request::TopicRequest::default()
                .with_name(TopicName(s("ops"))),
            describe_topic_partitions_request::TopicRequest::default()
                .with_name(TopicName(s("no-such-topic"))),
        ])
        .with_response_partition_limit(100);
    let resp = c.send(&req, 0).await;
    let got: Vec<(String, i16, i32)> = resp
        .topics
        .iter()
        .map(|t| {
            let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
            (name, t.error_code, t.topic_authorized_operations)
        })
        .collect();
    // As Kafka 4.1.2 answers: the unknown topic also carries the operations.
    assert_eq!(
        got,
        vec![
            ("no-such-topic".to_string(), 3, TOPIC_OPS),
            ("ops".to_string(), 0, TOPIC_OPS)
        ]
    );
    broker.stop().await;
}

#[tokio::test]
async fn describe_groups_answers_group_operations_for_groups_found() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, mut c) = broker_with_topic(dir.path()).await;
    let found = c
        .send(
            &FindCoordinatorRequest::default().with_key(s("ops-group")),
            3,
        )
        .await;
    assert_eq!(found.error_code, 0, "{found:?}");
    // An admin-style commit (no generation) makes an Empty group, as Admin's
    // alterConsumerGroupOffsets does.
    let commit = OffsetCommitRequest::default()
        .with_group_id(GroupId(s("ops-group")))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(s(""))
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(TopicName(s("ops")))
                .with_partitions(vec![
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(0),
                ]),
        ]);
    let resp = c.send(&commit, 8).await;
    assert_eq!(resp.topics[0].partitions[0].error_code, 0);

    let describe = |include: bool| {
        DescribeGroupsRequest::default()
            .with_groups(vec![GroupId(s("ops-group")), GroupId(s("no-such-group"))])
            .with_include_authorized_operations(include)
    };
    for v in 3..=5 {
        let resp = c.send(&describe(true), v).await;
        // Below v6 an unknown group is a Dead group without error: Kafka answers it too.
        let got: Vec<(i16, i32)> = resp
            .groups
            .iter()
            .map(|g| (g.error_code, g.authorized_operations))
            .collect();
        assert_eq!(got, vec![(0, GROUP_OPS), (0, GROUP_OPS)], "v{v}");
        let resp = c.send(&describe(false), v).await;
        assert!(
            resp.groups
                .iter()
                .all(|g| g.authorized_operations == NOT_REQUESTED),
            "v{v}"
        );
    }
    // v6: an unknown group is GROUP_ID_NOT_FOUND, and errors carry no operations.
    let resp = c.send(&describe(true), 6).await;
    let got: Vec<(i16, i32)> = resp
        .groups
        .iter()
        .map(|g| (g.error_code, g.authorized_operations))
        .collect();
    assert_eq!(got, vec![(0, GROUP_OPS), (69, NOT_REQUESTED)]);
    broker.stop().await;
}
