//! Replication between two skua brokers over TCP: broker 2's fetcher replicates from
//! broker 1 with real Fetch requests (v17, as Kafka 3.9's followers send) answered by
//! broker 1's Fetch handler. Roles come from metadata deltas handed to each replica
//! manager, as the cluster's controller would announce them.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use common::two_brokers::{
    self, committed, eventually, leader_and_isr, partition_info, TwoBrokers,
};
use common::{batch, values, TestBroker};
use kafka_protocol::records::Compression;
use skua::controller::TopicInfo;
use uuid::Uuid;

/// Topic `r` (min.insync.replicas=2) as one partition on `replicas`, led by `leader`.
fn announce(
    b: &TestBroker,
    topic_id: Uuid,
    replicas: &[i32],
    leader: i32,
    epoch: i32,
    isr: &[i32],
) {
    let state = leader_and_isr(leader, epoch, isr);
    two_brokers::announce(
        b,
        TopicInfo {
            name: "r".into(),
            topic_id,
            partitions: vec![partition_info(0, replicas, state)],
            configs: BTreeMap::from([("min.insync.replicas".to_string(), "2".to_string())]),
        },
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_replicates_over_tcp_and_takes_over_with_every_acknowledged_record() {
    let pair = TwoBrokers::start("100", "r", 1).await;
    pair.introduce(pair.b1.addr);
    let TwoBrokers {
        b1,
        b2,
        topic_id,
        epoch,
        ..
    } = pair;
    let mut c1 = b1.client().await;
    announce(&b1, topic_id, &[1, 2], 1, epoch, &[1, 2]);
    announce(&b2, topic_id, &[1, 2], 1, epoch, &[1, 2]);
    let (leader, follower) = (
        b1.broker.replicas.partition("r", 0).unwrap(),
        b2.broker.replicas.partition("r", 0).unwrap(),
    );
    assert!(!follower.is_leader());

    // acks=all with min.insync.replicas=2: each answer means broker 2 has the batch.
    let mut acked = Vec::new();
    for i in 0..30 {
        let v = format!("v{i}");
        let (err, offset) = c1
            .produce("r", 0, batch(&[&v], Some((9, 0, i)), Compression::None), -1)
            .await;
        assert_eq!(err, 0, "record {i}");
        assert!(
            follower.log_end_offset() > offset,
            "acknowledged before replicated"
        );
        acked.push((offset, v));
    }
    eventually("the follower's high watermark follows", || {
        follower.high_watermark() == 30
    })
    .await;
    assert_eq!(leader.high_watermark(), 30);
    assert_eq!(committed(&follower), committed(&leader), "the same batches");
    assert_eq!(follower.end_offset_for_epoch(epoch), Some((epoch, 30)));

    // Broker 1 goes away; broker 2 is elected and serves every acknowledged record once.
    b1.stop().await;
    announce(&b2, topic_id, &[1, 2], 2, epoch + 1, &[2]);
    let mut c2 = b2.client().await;
    let fetched = c2.fetch("r", 0, 0, 0, 1).await;
    assert_eq!(fetched.error_code, 0);
    let got: Vec<(i64, String)> = values(fetched.records.as_ref().unwrap());
    assert_eq!(got, acked);
    // ISR below min.insync.replicas: acks=all refused before the append, acks=1 works.
    let (err, _) = c2
        .produce("r", 0, batch(&["x"], None, Compression::None), -1)
        .await;
    assert_eq!(err, 19, "NOT_ENOUGH_REPLICAS");
    let (err, offset) = c2
        .produce("r", 0, batch(&["y"], None, Compression::None), 1)
        .await;
    assert_eq!((err, offset), (0, 30));
    // The producer's retry of its last batch gets its original offset from the new leader.
    let (err, offset) = c2
        .produce(
            "r",
            0,
            batch(&["v29"], Some((9, 0, 29)), Compression::None),
            1,
        )
        .await;
    assert_eq!((err, offset), (0, 29));
    b2.stop().await;
}

/// A follower's Fetch v17 as Kafka 3.9 sends it, for one partition of topic `topic_id`.
fn follower_fetch(
    topic_id: Uuid,
    epoch: i32,
    fetch_offset: i64,
    last_fetched_epoch: i32,
    max_wait_ms: i32,
) -> kafka_protocol::messages::FetchRequest {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ReplicaState};
    use kafka_protocol::messages::{BrokerId, FetchRequest};
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_replica_state(
            ReplicaState::default()
                .with_replica_id(BrokerId(2))
                .with_replica_epoch(42),
        )
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic_id(topic_id)
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_current_leader_epoch(epoch)
                .with_fetch_offset(fetch_offset)
                .with_last_fetched_epoch(last_fetched_epoch)
                .with_log_start_offset(0)
                .with_partition_max_bytes(1 << 20)])])
}

#[tokio::test]
async fn a_leader_answers_a_divergent_follower_at_once_with_its_epoch_end() {
    let d1 = tempfile::tempdir().unwrap();
    let b1 = TestBroker::start(d1.path(), &[("broker.id", "1")]).await;
    let mut c = b1.client().await;
    assert_eq!(c.create_topic("r", 1).await, 0);
    let topic_id = b1.broker.controller.topic("r").unwrap().topic_id;
    let written_at = b1.broker.replicas.partition("r", 0).unwrap().leader_epoch();
    for v in ["a", "b", "c"] {
        assert_eq!(
            c.produce("r", 0, batch(&[v], None, Compression::None), 1)
                .await
                .0,
            0
        );
    }
    // Broker 2 is a replica, announced but with no fetcher of its own here; the leader
    // is at a later epoch than the one its records were written in.
    let epoch = written_at + 2;
    announce(&b1, topic_id, &[1, 2], 1, epoch, &[1]);

    // Its log claims 5 offsets in the epoch that ended at 3 here.
    let started = tokio::time::Instant::now();
    let resp = c
        .send(&follower_fetch(topic_id, epoch, 5, written_at, 5_000), 17)
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "not a long poll"
    );
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    let diverging = (p.diverging_epoch.epoch, p.diverging_epoch.end_offset);
    assert_eq!(diverging, (written_at, 3));
    assert_eq!(p.records.as_ref().map_or(0, Bytes::len), 0, "no records");
    let leader = b1.broker.replicas.partition("r", 0).unwrap();
    assert_eq!(leader.follower_log_end_offset(2), Some(-1), "not recorded");

    // From the epoch's end it reads on, and its log end is recorded.
    let resp = c
        .send(&follower_fetch(topic_id, epoch, 3, written_at, 0), 17)
        .await;
    let p = &resp.responses[0].partitions[0];
    assert_eq!((p.error_code, p.diverging_epoch.epoch), (0, -1));
    assert_eq!(leader.follower_log_end_offset(2), Some(3));

    // A stale leader epoch is fenced, and the answer says who leads (KIP-951, from the
    // metadata of this broker's controller).
    let resp = c
        .send(&follower_fetch(topic_id, epoch - 1, 3, written_at, 0), 17)
        .await;
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, 74, "FENCED_LEADER_EPOCH");
    assert_eq!(p.current_leader.leader_id.0, 1);
    assert_eq!(resp.node_endpoints.len(), 1);
    assert_eq!(resp.node_endpoints[0].port, i32::from(b1.addr.port()));
    b1.stop().await;
}

/// ListOffsets LATEST as `replica_id` asks it (v7): (error code, offset).
async fn latest(c: &mut common::Client, replica_id: i32) -> (i16, i64) {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, TopicName};
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(replica_id))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName("r".into()))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_current_leader_epoch(-1)
                .with_timestamp(-1)])]);
    let resp = c.send(&req, 7).await;
    let p = &resp.topics[0].partitions[0];
    (p.error_code, p.offset)
}

/// A replica asking ListOffsets is told the leader's log end (where its own log may end),
/// a consumer the high watermark; a new leader whose high watermark has not reached its
/// epoch's start answers consumers OFFSET_NOT_AVAILABLE (KIP-207) until it has.
#[tokio::test]
async fn list_offsets_answers_replicas_with_the_log_end_and_consumers_with_the_high_watermark() {
    let d1 = tempfile::tempdir().unwrap();
    let b1 = TestBroker::start(d1.path(), &[("broker.id", "1")]).await;
    let mut c = b1.client().await;
    assert_eq!(c.create_topic("r", 1).await, 0);
    let topic_id = b1.broker.controller.topic("r").unwrap().topic_id;
    let first = b1.broker.replicas.partition("r", 0).unwrap().leader_epoch();
    let produce = |v: &'static str| batch(&[v], None, Compression::None);
    for v in ["a", "b", "c"] {
        assert_eq!(c.produce("r", 0, produce(v), 1).await.0, 0);
    }
    // Broker 2 joins the ISR (no fetcher of its own here): two more records are on the
    // leader only.
    announce(&b1, topic_id, &[1, 2], 1, first + 1, &[1, 2]);
    for v in ["d", "e"] {
        assert_eq!(c.produce("r", 0, produce(v), 1).await.0, 0);
    }
    assert_eq!(latest(&mut c, 2).await, (0, 5));
    assert_eq!(latest(&mut c, -1).await, (0, 3));

    // A new epoch starts at 5 while the high watermark is 3.
    announce(&b1, topic_id, &[1, 2], 1, first + 2, &[1, 2]);
    assert_eq!(latest(&mut c, -1).await, (78, -1), "OFFSET_NOT_AVAILABLE");
    assert_eq!(latest(&mut c, 2).await, (0, 5));
    // The follower reports offset 5: committed, and consumers are answered again.
    let resp = c
        .send(&follower_fetch(topic_id, first + 2, 5, first + 1, 0), 17)
        .await;
    assert_eq!(resp.responses[0].partitions[0].error_code, 0);
    assert_eq!(latest(&mut c, -1).await, (0, 5));
    b1.stop().await;
}
