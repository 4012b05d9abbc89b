//! Every origin of an append and of a read moves its topic's counters, once, in the
//! replica manager: a client's produce, a coordinator's write, a transaction marker, a
//! follower's append; a consumer's fetch and a follower's.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::TopicName;
use uuid::Uuid;

use super::append::{self, AppendData, AppendEntry, AppendOrigin, AppendOutcome};
use super::read::TopicReads;
use super::*;
use crate::controller::delta::{MetadataDelta, MetadataListener, TopicDelta};
use crate::controller::image::MetadataImage;
use crate::controller::{LeaderAndIsr, PartitionAssignment, PartitionInfo, TopicInfo};
use crate::log::control::{EndTxnMarker, TxnResult};
use crate::log::test_util::{batch_bytes, txn_batch_bytes};
use crate::log::{DirLock, LogConfig, LogManager, TopicPartition};

const ME: i32 = 1;
const FOLLOWER: i32 = 2;
const TOPIC_ID: u128 = 7;

/// A replica manager hosting t-0 with replicas [ME, FOLLOWER], led by `leader`.
fn manager(root: &tempfile::TempDir, leader: i32) -> ReplicaManager {
    let dir = root.path().to_path_buf();
    let lock = DirLock::acquire(&dir).unwrap();
    let logs = LogManager::startup(
        vec![(dir, lock)],
        |_: &TopicPartition, _: Option<Uuid>| true,
        |_| LogConfig::default(),
        60_000,
    )
    .unwrap();
    let config = crate::config::from_args(&[]).unwrap();
    let m = ReplicaManager::new(ME, crate::config::SharedConfig::new(config), logs);
    let topic = Arc::new(TopicInfo {
        name: "t".into(),
        topic_id: Uuid::from_u128(TOPIC_ID),
        partitions: vec![PartitionInfo {
            partition: 0,
            assignment: PartitionAssignment {
                replicas: vec![ME, FOLLOWER],
                directories: vec![Uuid::nil(); 2],
            },
            state: LeaderAndIsr::elected(leader, 1, &[ME, FOLLOWER]),
        }],
        configs: BTreeMap::new(),
    });
    let delta = MetadataDelta {
        topics: BTreeMap::from([("t".to_string(), TopicDelta::Changed(topic))]),
        ..Default::default()
    };
    assert!(m.on_delta(&MetadataImage::default(), &delta).is_empty());
    m
}

async fn append_one(
    m: &ReplicaManager,
    origin: AppendOrigin<'_>,
    data: AppendData,
) -> AppendOutcome {
    m.append_one(origin, AppendEntry::new("t", 0, data)).await
}

fn client() -> AppendOrigin<'static> {
    AppendOrigin::Client {
        required_acks: 1,
        api_version: 9,
        transactional_id: None,
        timeout: Duration::from_secs(5),
    }
}

/// `replica_id`'s fetch of t-0 from `offset`: the record bytes it got.
async fn fetch(m: &ReplicaManager, replica_id: i32, offset: i64) -> usize {
    let plan = [TopicReads {
        name: TopicName("t".into()),
        topic_id: Uuid::from_u128(TOPIC_ID),
        resolved: Some("t".into()),
        unknown: kafka_protocol::error::ResponseError::UnknownTopicOrPartition,
        partitions: vec![(
            FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20),
            m.leader(&TopicPartition::new("t", 0), -1),
        )],
    }];
    let params = FetchParams::new(replica_id, Duration::ZERO, 0, 1 << 20, false);
    let (_stop, stopping) = tokio::sync::watch::channel(false);
    let read = m.fetch(&params, &plan, stopping).await;
    let data = &read.responses[0].partitions[0];
    assert_eq!(data.error_code, 0);
    data.records.as_ref().map_or(0, |r| r.len())
}

#[tokio::test]
async fn every_leader_append_and_every_read_moves_the_topics_counters() {
    let root = tempfile::tempdir().unwrap();
    let m = manager(&root, ME);
    let c = m.partition("t", 0).unwrap().counters.clone();

    let produced = batch_bytes(&[b"a", b"b", b"c"], 1_000, None);
    let outcome = append_one(&m, client(), AppendData::Records(produced.clone())).await;
    assert!(matches!(outcome, AppendOutcome::Appended(_)), "{outcome:?}");
    assert_eq!(c.topic.total(|s| &s.bytes_in), produced.len() as u64);
    assert_eq!(c.topic.total(|s| &s.messages_in), 3);

    // A coordinator's transactional write (as a TxnOffsetCommit's), then its marker.
    let coordinator = txn_batch_bytes(&[b"offsets"], 1_000, (42, 0, 0));
    let outcome = append_one(
        &m,
        AppendOrigin::Coordinator,
        AppendData::Records(coordinator.clone()),
    )
    .await;
    assert!(matches!(outcome, AppendOutcome::Appended(_)), "{outcome:?}");
    assert_eq!(
        c.topic.total(|s| &s.bytes_in),
        (produced.len() + coordinator.len()) as u64
    );
    assert_eq!(c.topic.total(|s| &s.messages_in), 4);
    let marker = AppendData::Marker {
        producer_id: 42,
        producer_epoch: 0,
        marker: EndTxnMarker {
            result: TxnResult::Commit,
            coordinator_epoch: 0,
        },
    };
    let outcome = append_one(&m, AppendOrigin::Marker, marker).await;
    assert!(matches!(outcome, AppendOutcome::Appended(_)), "{outcome:?}");
    assert_eq!(c.topic.total(|s| &s.messages_in), 5);
    let log_bytes = m.partition("t", 0).unwrap().log().size_bytes();
    assert_eq!(
        c.topic.total(|s| &s.bytes_in),
        log_bytes,
        "every byte in the log counted once"
    );

    // The follower reads everything (replication out; a read returns one segment's
    // batches, and the log holds two by now), then reports its log end, which commits
    // it for consumers (bytes out).
    assert_eq!(m.partition("t", 0).unwrap().log().segment_count(), 2);
    let first = fetch(&m, FOLLOWER, 0).await as u64;
    assert_eq!(c.all.total(|s| &s.replication_bytes_out), first);
    let rest = fetch(&m, FOLLOWER, 4).await as u64;
    assert_eq!(first + rest, log_bytes);
    assert_eq!(c.all.total(|s| &s.replication_bytes_out), log_bytes);
    assert_eq!(fetch(&m, FOLLOWER, 5).await, 0);
    assert_eq!(fetch(&m, -1, 0).await as u64, first);
    assert_eq!(c.topic.total(|s| &s.bytes_out), first);
    assert_eq!(c.all.total(|s| &s.replication_bytes_out), log_bytes);

    // A retried duplicate appends nothing and counts nothing.
    let producer = batch_bytes(&[b"idem"], 1_000, Some((9, 0, 0)));
    for _ in 0..2 {
        append_one(&m, client(), AppendData::Records(producer.clone())).await;
    }
    assert_eq!(
        c.topic.total(|s| &s.bytes_in),
        log_bytes + producer.len() as u64
    );

    // Each partition of each append and of each fetch is one request; none failed.
    assert_eq!(c.topic.total(|s| &s.total_produce_requests), 5);
    assert_eq!(c.topic.total(|s| &s.total_fetch_requests), 4);
    assert_eq!(c.all.total(|s| &s.total_fetch_requests), 4);
    assert_eq!(c.all.total(|s| &s.failed_produce_requests), 0);
    assert_eq!(c.all.total(|s| &s.failed_fetch_requests), 0);
    // The log's size and segments as published for the metrics, read without its lock.
    let log = m.partition("t", 0).unwrap().log();
    assert_eq!(log.published_size_bytes(), log.size_bytes());
    assert_eq!(log.published_segment_count(), log.segment_count());
    log.truncate_to(1).unwrap();
    assert_eq!(log.published_size_bytes(), log.size_bytes());
    assert_eq!(log.published_segment_count(), 1);

    let text = m.metrics.encode_text().await;
    assert!(
        text.contains("kafka_server_brokertopicmetrics_bytesin_total{topic=\"t\"}"),
        "{text}"
    );
}

#[tokio::test]
async fn a_follower_append_counts_replication_bytes_in() {
    let root = tempfile::tempdir().unwrap();
    let m = manager(&root, FOLLOWER);
    let p = m.partition("t", 0).unwrap();
    // As the leader wrote it: offsets from 0.
    let leaders = batch_bytes(&[b"x", b"y"], 1_000, None);
    append::append_as_follower(&p, 1, leaders.clone())
        .await
        .unwrap();
    assert_eq!(
        p.counters.all.total(|s| &s.replication_bytes_in),
        leaders.len() as u64
    );
    assert_eq!(
        p.counters.topic.total(|s| &s.bytes_in),
        0,
        "a follower's append is not bytes in"
    );
}

#[tokio::test]
async fn refused_appends_count_nothing() {
    let root = tempfile::tempdir().unwrap();
    let m = manager(&root, ME);
    let data = AppendData::Records(batch_bytes(&[b"a"], 1_000, None));
    // Unknown to this metadata: refused as a partition not hosted, not as internal.
    let outcome = m
        .append_one(client(), AppendEntry::new("__consumer_offsets", 0, data))
        .await;
    assert!(
        matches!(outcome, AppendOutcome::Refused { .. }),
        "{outcome:?}"
    );
    let bad_acks = AppendOrigin::Client {
        required_acks: 2,
        api_version: 9,
        transactional_id: None,
        timeout: Duration::ZERO,
    };
    let outcome = append_one(
        &m,
        bad_acks,
        AppendData::Records(batch_bytes(&[b"a"], 1_000, None)),
    )
    .await;
    assert_eq!(
        outcome.error_code(),
        kafka_protocol::error::ResponseError::InvalidRequiredAcks.code()
    );
    let c = m.partition("t", 0).unwrap().counters.clone();
    assert_eq!(c.topic.total(|s| &s.bytes_in), 0);
    // The partition not hosted counts one produce request for all topics only.
    assert_eq!(c.all.total(|s| &s.total_produce_requests), 1);
    assert_eq!(c.topic.total(|s| &s.total_produce_requests), 0);

    // A batch over max.message.bytes: its bytes are rejected, an expected refusal.
    let big = batch_bytes(&[&vec![7u8; 1_100_000]], 1_000, None);
    let outcome = append_one(&m, client(), AppendData::Records(big.clone())).await;
    assert_eq!(
        outcome.error_code(),
        kafka_protocol::error::ResponseError::MessageTooLarge.code()
    );
    assert_eq!(c.topic.total(|s| &s.bytes_rejected), big.len() as u64);
    assert_eq!(c.all.total(|s| &s.bytes_rejected), big.len() as u64);
    assert_eq!(c.topic.total(|s| &s.total_produce_requests), 1);
    assert_eq!(c.topic.total(|s| &s.failed_produce_requests), 0);
}
