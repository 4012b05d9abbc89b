//! The group coordinator serves the `__consumer_offsets` partitions this broker leads, as
//! the metadata says: partitions created by an admin request are served without any
//! FindCoordinator, and a deleted offsets topic takes its groups with it.

use crate::common;

use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const CONFIG: &[(&str, &str)] = &[("offsets.topic.num.partitions", "1")];

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
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
        match c.commit_offset(group, "orders", offset, None).await {
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
    assert_eq!(c.committed_offsets("billing").await, (0, vec![7]));
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
    assert_eq!(c.commit_offset("billing", "orders", 42, None).await, 0);
    assert_eq!(c.committed_offsets("billing").await, (0, vec![42]));

    assert_eq!(delete_topic(&mut c, "__consumer_offsets").await, 0);
    // Its partition is no longer led here: nothing is answered from what was loaded.
    let (code, offsets) = c.committed_offsets("billing").await;
    assert_eq!(code, ResponseError::NotCoordinator.code());
    assert!(offsets.is_empty());

    // The next FindCoordinator creates the topic afresh, and its empty partition is served.
    assert_eq!(c.send(&req, 3).await.error_code, 0);
    assert_eq!(c.committed_offsets("billing").await, (0, vec![]));
    assert_eq!(c.commit_offset("billing", "orders", 5, None).await, 0);
    assert_eq!(c.committed_offsets("billing").await, (0, vec![5]));
    b.stop().await;
}
