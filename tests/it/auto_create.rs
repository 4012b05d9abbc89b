//! Metadata requests auto-create the topics they name, at most
//! `MAX_AUTO_CREATED_PARTITIONS_PER_REQUEST` partitions per request; the rest answer
//! LEADER_NOT_AVAILABLE and are created by the client's retry.

use crate::common;

use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use skua::handlers::metadata::MAX_AUTO_CREATED_PARTITIONS_PER_REQUEST;

fn request(names: &[&str]) -> MetadataRequest {
    MetadataRequest::default()
        .with_topics(Some(
            names
                .iter()
                .map(|n| {
                    metadata_request::MetadataRequestTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_string(n.to_string()))))
                })
                .collect(),
        ))
        .with_allow_auto_topic_creation(true)
}

#[tokio::test]
async fn one_request_creates_a_bounded_number_of_partitions() {
    let dir = tempfile::tempdir().unwrap();
    let per_topic = MAX_AUTO_CREATED_PARTITIONS_PER_REQUEST / 2;
    let b = TestBroker::start(
        dir.path(),
        &[
            ("num.partitions", &per_topic.to_string()),
            ("log.index.size.max.bytes", "4096"),
        ],
    )
    .await;
    let mut c = b.client().await;
    let names = ["auto-a", "auto-b", "auto-a", "auto-c", "bad name"];
    let resp = c.send(&request(&names), 12).await;
    let codes: Vec<i16> = resp.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(
        codes,
        vec![
            0,
            0,
            0, // named twice: answered like the first
            ResponseError::LeaderNotAvailable.code(),
            ResponseError::InvalidTopicException.code()
        ]
    );
    assert_eq!(resp.topics[1].partitions.len(), per_topic as usize);
    assert!(
        b.broker.controller.topic("auto-c").is_none(),
        "past the bound"
    );

    // The client retries and the next request creates the rest.
    let resp = c.send(&request(&names[..4]), 12).await;
    assert!(resp.topics.iter().all(|t| t.error_code == 0), "{resp:?}");
    assert_eq!(b.broker.controller.topics().len(), 3);
    b.stop().await;
}
