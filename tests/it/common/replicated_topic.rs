//! A topic of one partition replicated on two ZooKeeper-mode brokers, created the way a
//! client following the cluster's controller would create it, and its leader once both
//! replicas are in sync.

use std::time::{Duration, Instant};

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::Client;

/// Fails the test once `since` is 30 s ago, naming what it waited for.
pub fn waited_too_long(since: Instant, what: &str) {
    assert!(
        since.elapsed() < Duration::from_secs(30),
        "timed out waiting for {what}"
    );
}

/// Creates `topic` (one partition, replication factor 2) through `first` and `second` in
/// turn until one accepts it: in ZooKeeper mode only the active controller creates topics,
/// and until both brokers are registered a replication factor of 2 is refused, so
/// NOT_CONTROLLER (41) and INVALID_REPLICATION_FACTOR (38) are asked again.
pub async fn create_on_either(first: &mut Client, second: &mut Client, topic: &'static str) {
    let create = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_static_str(topic)))
            .with_num_partitions(1)
            .with_replication_factor(2)])
        .with_timeout_ms(15_000);
    let since = Instant::now();
    for attempt in 0.. {
        let to = if attempt % 2 == 0 {
            &mut *first
        } else {
            &mut *second
        };
        let created = to.send(&create, 7).await;
        match created.topics[0].error_code {
            0 => return,
            38 | 41 => {}
            e => panic!("{created:?} ({e})"),
        }
        waited_too_long(since, "both brokers registered");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The leader of `topic`'s partition 0 as `client`'s broker's metadata shows it, once both
/// replicas are in the ISR.
pub async fn leader_with_both_in_sync(client: &mut Client, topic: &'static str) -> i32 {
    let since = Instant::now();
    loop {
        let req = MetadataRequest::default()
            .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
            )
            .with_name(Some(TopicName(StrBytes::from_static_str(topic))))]));
        let resp = client.send(&req, 12).await;
        if let Some(p) = resp.topics.first().and_then(|t| t.partitions.first()) {
            if p.error_code == 0 && p.isr_nodes.len() == 2 {
                return p.leader_id.0;
            }
        }
        waited_too_long(since, "a leader with both replicas in the ISR");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
