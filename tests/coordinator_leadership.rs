//! The group coordinator serves the `__consumer_offsets` partitions this broker leads, as
//! the metadata says: partitions created by an admin request are served without any
//! FindCoordinator, and a deleted offsets topic takes its groups with it.

mod common;

use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const CONFIG: &[(&str, &str)] = &[("offsets.topic.num.partitions", "1")];

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

/// Commits `offset` for orders-0 from outside any generation; the partition's error.
async fn commit(c: &mut Client, group: &str, offset: i64) -> i16 {
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(TopicName(s("orders")))
                .with_partitions(vec![
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(offset),
                ]),
        ]);
    c.send(&req, 8).await.topics[0].partitions[0].error_code
}

/// OffsetFetch v8 of every offset of `group`: the group's error and what it returned.
async fn fetch(c: &mut Client, group: &str) -> (i16, Vec<i64>) {
    let req = OffsetFetchRequest::default().with_groups(vec![
        offset_fetch_request::OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(s(group)))
            .with_topics(None),
    ]);
    let g = c.send(&req, 8).await.groups.remove(0);
    let offsets = g
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.committed_offset))
        .collect();
    (g.error_code, offsets)
}

async fn delete_topic(c: &mut Client, name: &str) -> i16 {
    let req = DeleteTopicsRequest::default()
        .with_topic_names(vec![TopicName(s(name))])
        .with_timeout_ms(10_000);
    c.send(&req, 4).await.responses[0].error_code
}

/// Commits as `commit` does, again while the partition is still loading (it loads in
/// the background once the metadata names this broker its leader).
async fn commit_once_loaded(c: &mut Client, group: &str, offset: i64) -> i16 {
    let loading = ResponseError::CoordinatorLoadInProgress.code();
    for _ in 0..100 {
        match commit(c, group, offset).await {
            code if code == loading => {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await
            }
            code => return code,
        }
    }
    loading
}

#[tokio::test]
async fn offsets_partitions_created_by_an_admin_request_are_served_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), CONFIG).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("orders", 1).await, 0);
    assert_eq!(c.create_topic("__consumer_offsets", 1).await, 0);
    // No FindCoordinator: the topic's creation made this broker its partition's leader.
    assert_eq!(commit_once_loaded(&mut c, "billing", 7).await, 0);
    assert_eq!(fetch(&mut c, "billing").await, (0, vec![7]));
    b.stop().await;
}

#[tokio::test]
async fn a_deleted_offsets_topic_takes_its_groups_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), CONFIG).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("orders", 1).await, 0);
    let req = FindCoordinatorRequest::default().with_key(s("billing"));
    assert_eq!(c.send(&req, 3).await.error_code, 0);
    assert_eq!(commit(&mut c, "billing", 42).await, 0);
    assert_eq!(fetch(&mut c, "billing").await, (0, vec![42]));

    assert_eq!(delete_topic(&mut c, "__consumer_offsets").await, 0);
    // Its partition is no longer led here: nothing is answered from what was loaded.
    let (code, offsets) = fetch(&mut c, "billing").await;
    assert_eq!(code, ResponseError::NotCoordinator.code());
    assert!(offsets.is_empty());

    // The next FindCoordinator creates the topic afresh, and its empty partition is served.
    assert_eq!(c.send(&req, 3).await.error_code, 0);
    assert_eq!(fetch(&mut c, "billing").await, (0, vec![]));
    assert_eq!(commit(&mut c, "billing", 5).await, 0);
    assert_eq!(fetch(&mut c, "billing").await, (0, vec![5]));
    b.stop().await;
}
