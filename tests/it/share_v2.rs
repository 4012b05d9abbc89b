//! ShareFetch and ShareAcknowledge v2 over TCP (KIP-1206, KIP-1222): the record-limit
//! acquire mode hands out exactly `MaxRecords` records, cutting inside a log batch;
//! RENEW acknowledgements keep a member's records held (from v2 only, in a request with
//! `IsRenewAck`, as Kafka's KafkaApis checks: INVALID_REQUEST for the partition without
//! it; and only while the group's `share.renew.acknowledge.enable` is true, else Kafka
//! 4.4's INVALID_RECORD_STATE); a renewing ShareFetch only
//! acknowledges, and its fetch parameters must be 0; ShareAcknowledge v2 answers the
//! acquisition lock's duration.

use crate::common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::share::{ack_error, acquired};
use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use skua::coordinator::group::records::share::{
    ShareKey, ShareValue, StatePartitionMetadata, TopicPartitionsInfo,
};
use skua::coordinator::group::records::{self as group_records, RecordKey, RecordValue};
use skua::coordinator::share::records::{
    self as state_records, SharePartitionKey, ShareSnapshotValue, ShareStateKey,
};
use uuid::Uuid;

const GROUP: &str = "queue2";
const ACCEPT: i8 = 1;
const RELEASE: i8 = 2;
const RENEW: i8 = 4;
const GROUP_RESOURCE: i8 = 32;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

/// What a v2 ShareFetch of partition 0 asks.
struct Fetch {
    epoch: i32,
    acks: Vec<(i64, i64, i8)>,
    max_records: i32,
    mode: i8,
    renew: bool,
    max_wait_ms: i32,
}

impl Fetch {
    fn records(epoch: i32, max_records: i32, mode: i8) -> Fetch {
        Fetch {
            epoch,
            acks: Vec::new(),
            max_records,
            mode,
            renew: false,
            max_wait_ms: 500,
        }
    }

    /// A renewing request: acknowledgements only, every fetch parameter 0.
    fn renewing(epoch: i32, acks: Vec<(i64, i64, i8)>) -> Fetch {
        Fetch {
            epoch,
            acks,
            max_records: 0,
            mode: 0,
            renew: true,
            max_wait_ms: 0,
        }
    }
}

async fn share_fetch(c: &mut Client, member: &str, q: Uuid, f: &Fetch) -> ShareFetchResponse {
    let batches = f
        .acks
        .iter()
        .map(|&(first, last, t)| {
            share_fetch_request::AcknowledgementBatch::default()
                .with_first_offset(first)
                .with_last_offset(last)
                .with_acknowledge_types(vec![t])
        })
        .collect();
    let fetching = !f.renew;
    let req = ShareFetchRequest::default()
        .with_group_id(Some(GroupId(s(GROUP))))
        .with_member_id(Some(s(member)))
        .with_share_session_epoch(f.epoch)
        .with_max_wait_ms(f.max_wait_ms)
        .with_min_bytes(i32::from(fetching))
        .with_max_bytes(if fetching { 1 << 20 } else { 0 })
        .with_max_records(f.max_records)
        .with_batch_size(f.max_records)
        .with_share_acquire_mode(f.mode)
        .with_is_renew_ack(f.renew)
        .with_topics(vec![share_fetch_request::FetchTopic::default()
            .with_topic_id(q)
            .with_partitions(vec![
                share_fetch_request::FetchPartition::default()
                    .with_partition_index(0)
                    .with_acknowledgement_batches(batches),
            ])]);
    c.send(&req, 2).await
}

/// A ShareAcknowledge of one range, with `IsRenewAck` set (from v2) when it renews.
async fn acknowledge(
    c: &mut Client,
    version: i16,
    member: &str,
    epoch: i32,
    q: Uuid,
    range: (i64, i64, i8),
) -> ShareAcknowledgeResponse {
    let renew_ack = range.2 == RENEW && version >= 2;
    acknowledge_with(c, version, member, epoch, q, range, renew_ack).await
}

async fn acknowledge_with(
    c: &mut Client,
    version: i16,
    member: &str,
    epoch: i32,
    q: Uuid,
    (first, last, t): (i64, i64, i8),
    is_renew_ack: bool,
) -> ShareAcknowledgeResponse {
    let req = ShareAcknowledgeRequest::default()
        .with_group_id(Some(GroupId(s(GROUP))))
        .with_member_id(Some(s(member)))
        .with_share_session_epoch(epoch)
        .with_is_renew_ack(is_renew_ack)
        .with_topics(vec![share_acknowledge_request::AcknowledgeTopic::default()
            .with_topic_id(q)
            .with_partitions(vec![
                share_acknowledge_request::AcknowledgePartition::default()
                    .with_partition_index(0)
                    .with_acknowledgement_batches(vec![
                        share_acknowledge_request::AcknowledgementBatch::default()
                            .with_first_offset(first)
                            .with_last_offset(last)
                            .with_acknowledge_types(vec![t]),
                    ]),
            ])]);
    c.send(&req, version).await
}

/// Joins `member` and heartbeats until it is assigned partition 0 of `q`.
async fn join_until_assigned(c: &mut Client, member: &str, q: Uuid) {
    let mut epoch = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut req = ShareGroupHeartbeatRequest::default()
            .with_group_id(GroupId(s(GROUP)))
            .with_member_id(s(member))
            .with_member_epoch(epoch);
        if epoch == 0 {
            req = req.with_subscribed_topic_names(Some(vec![TopicName(s("q2"))]));
        }
        let r = c.send(&req, 1).await;
        assert_eq!(r.error_code, 0, "{:?}", r.error_message);
        epoch = r.member_epoch;
        let assigned: Vec<(Uuid, Vec<i32>)> = r
            .assignment
            .iter()
            .flat_map(|a| a.topic_partitions.iter())
            .map(|tp| (tp.topic_id, tp.partitions.clone()))
            .collect();
        if assigned == vec![(q, vec![0])] {
            return;
        }
        assert!(Instant::now() < deadline, "never assigned: epoch {epoch}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn set_group_config(c: &mut Client, key: &str, value: &str) {
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        incremental_alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(GROUP_RESOURCE)
            .with_resource_name(s(GROUP))
            .with_configs(vec![
                incremental_alter_configs_request::AlterableConfig::default()
                    .with_name(s(key))
                    .with_config_operation(0)
                    .with_value(Some(s(value))),
            ]),
    ]);
    let r = c.send(&req, 1).await.responses.remove(0);
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
}

#[tokio::test]
async fn v2_limits_records_renews_locks_and_answers_the_lock_duration() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(
        dir.path(),
        &[
            ("offsets.topic.num.partitions", "1"),
            ("share.coordinator.state.topic.num.partitions", "1"),
        ],
    )
    .await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("q2", 1).await, 0);
    // The group's coordinator loads its partition of __consumer_offsets.
    let find = FindCoordinatorRequest::default().with_coordinator_keys(vec![s(GROUP)]);
    assert_eq!(c.send(&find, 6).await.coordinators[0].error_code, 0);
    set_group_config(&mut c, "share.auto.offset.reset", "earliest").await;
    let q = {
        let req =
            MetadataRequest::default()
                .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
                )
                .with_name(Some(TopicName(s("q2"))))]));
        c.send(&req, 12).await.topics[0].topic_id
    };
    // Two log batches: 0-9 and 10-19.
    for round in 0..2 {
        let values: Vec<String> = (0..10).map(|i| format!("r{round}-{i}")).collect();
        let refs: Vec<&str> = values.iter().map(String::as_str).collect();
        let (err, _) = c
            .produce("q2", 0, batch(&refs, None, Compression::None), -1)
            .await;
        assert_eq!(err, 0);
    }
    join_until_assigned(&mut c, "m1", q).await;
    join_until_assigned(&mut c, "m2", q).await;

    // Record-limit: exactly 4 of log batch 0-9, the whole batch sent but only 0-3 acquired.
    let r = share_fetch(&mut c, "m1", q, &Fetch::records(0, 4, 1)).await;
    assert_eq!(acquired(&r), vec![(0, 3, 1)]);
    assert_eq!(r.acquisition_lock_timeout_ms, 30_000);
    // Batch-optimized at v2 takes the rest of the log batch whole, past its MaxRecords.
    let r = share_fetch(&mut c, "m2", q, &Fetch::records(0, 2, 0)).await;
    assert_eq!(acquired(&r), vec![(4, 9, 1)]);
    // An acquire mode Kafka does not know, and a renewing fetch that asks for records.
    let r = share_fetch(&mut c, "m2", q, &Fetch::records(1, 2, 7)).await;
    assert_eq!(r.error_code, ResponseError::InvalidRequest.code());
    let mut asking = Fetch::renewing(1, vec![(4, 9, RENEW)]);
    asking.max_wait_ms = 100;
    let r = share_fetch(&mut c, "m2", q, &asking).await;
    assert_eq!(r.error_code, ResponseError::InvalidRequest.code());
    // Kafka's error response carries no message (the broker logs "maxWaitMs must be
    // set to 0, if isRenewAck is true.").
    assert_eq!(r.error_message, None);

    // RENEW below v2 is an unknown type.
    let r = acknowledge(&mut c, 1, "m1", 1, q, (0, 3, RENEW)).await;
    assert_eq!(ack_error(&r), ResponseError::InvalidRequest.code());
    // At v2 a RENEW needs IsRenewAck (Kafka's validateAcknowledgementBatches): without it
    // the partition alone is refused INVALID_REQUEST, with no message, and nothing
    // changes (m1's records are still its own below).
    let r = acknowledge_with(&mut c, 2, "m1", 2, q, (0, 3, RENEW), false).await;
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    let p = &r.responses[0].partitions[0];
    assert_eq!(p.error_code, ResponseError::InvalidRequest.code());
    assert_eq!(p.error_message, None);
    // Piggybacked on a fetching ShareFetch without IsRenewAck, the same: the partition's
    // AcknowledgeErrorCode is INVALID_REQUEST, and the fetch itself goes on (m2 holds
    // 4-9, so it acquires 10-19, the next log batch, whole).
    let mut fetching = Fetch::records(1, 10, 0);
    fetching.acks = vec![(4, 9, RENEW)];
    let r = share_fetch(&mut c, "m2", q, &fetching).await;
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    let p = &r.responses[0].partitions[0];
    assert_eq!(
        p.acknowledge_error_code,
        ResponseError::InvalidRequest.code()
    );
    assert_eq!(p.acknowledge_error_message, None);
    assert_eq!(acquired(&r), vec![(10, 19, 1)]);
    // m2 gives 10-19 back for the record-limit fetch below.
    let r = acknowledge(&mut c, 2, "m2", 2, q, (10, 19, RELEASE)).await;
    assert_eq!(ack_error(&r), 0);
    // With IsRenewAck it keeps m1's records held, and the response says for how long.
    let r = acknowledge(&mut c, 2, "m1", 3, q, (0, 3, RENEW)).await;
    assert_eq!(ack_error(&r), 0);
    assert_eq!(r.acquisition_lock_timeout_ms, 30_000);
    // A renewing ShareFetch acknowledges only: m2's 4-9 renewed, nothing fetched though
    // 10-19 are there to acquire, and no waiting.
    let started = Instant::now();
    let r = share_fetch(&mut c, "m2", q, &Fetch::renewing(3, vec![(4, 9, RENEW)])).await;
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    assert!(acquired(&r).is_empty(), "{r:?}");
    assert_eq!(r.responses[0].partitions[0].acknowledge_error_code, 0);
    assert!(started.elapsed() < Duration::from_secs(2));
    // The renewed records are still the members' own: each accepts its records.
    let r = acknowledge(&mut c, 2, "m1", 4, q, (0, 3, ACCEPT)).await;
    assert_eq!(ack_error(&r), 0);
    let r = share_fetch(&mut c, "m2", q, &Fetch::renewing(4, vec![(4, 9, ACCEPT)])).await;
    assert_eq!(r.responses[0].partitions[0].acknowledge_error_code, 0);
    // Record-limit again, in the log batch m2 released: 10-16, their second delivery.
    let r = share_fetch(&mut c, "m1", q, &Fetch::records(5, 7, 1)).await;
    assert_eq!(acquired(&r), vec![(10, 16, 2)]);

    // A group with RENEW turned off refuses it, with IsRenewAck too: Kafka 4.4's
    // share-partition answers INVALID_RECORD_STATE and says why.
    set_group_config(&mut c, "share.renew.acknowledge.enable", "false").await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut epoch = 6;
    loop {
        let r = acknowledge(&mut c, 2, "m1", epoch, q, (10, 16, RENEW)).await;
        epoch += 1;
        let p = &r.responses[0].partitions[0];
        if p.error_code == ResponseError::InvalidRecordState.code() {
            assert_eq!(
                p.error_message.as_deref(),
                Some("Renewing acquisition locks is not enabled for the group.")
            );
            break;
        }
        assert_eq!(ack_error(&r), 0);
        assert!(Instant::now() < deadline, "the group config never applied");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The refused RENEW changed nothing: m1 still holds 10-16.
    let r = acknowledge(&mut c, 2, "m1", epoch, q, (10, 16, ACCEPT)).await;
    assert_eq!(ack_error(&r), 0);
    b.stop().await;
}

/// AlterShareGroupOffsets on a share group that does not exist creates it, empty, with
/// the share-partition starting where asked (Kafka 4.2+; franz-go's
/// TestShareGroupOffsetsAdmin); DescribeShareGroupOffsets then reads that start offset,
/// also for all of the group's partitions, and the group survives a restart.
#[tokio::test]
async fn alter_share_group_offsets_creates_a_missing_group() {
    let test_started_ms = now_ms();
    let dir = tempfile::tempdir().unwrap();
    let overrides = [
        ("offsets.topic.num.partitions", "1"),
        ("share.coordinator.state.topic.num.partitions", "1"),
    ];
    let b = TestBroker::start(dir.path(), &overrides).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("q3", 1).await, 0);
    let values: Vec<String> = (0..20).map(|i| format!("v{i}")).collect();
    let refs: Vec<&str> = values.iter().map(String::as_str).collect();
    let (err, _) = c
        .produce("q3", 0, batch(&refs, None, Compression::None), -1)
        .await;
    assert_eq!(err, 0);
    let find = FindCoordinatorRequest::default().with_coordinator_keys(vec![s("fresh")]);
    assert_eq!(c.send(&find, 6).await.coordinators[0].error_code, 0);

    let alter = AlterShareGroupOffsetsRequest::default()
        .with_group_id(GroupId(s("fresh")))
        .with_topics(vec![
            alter_share_group_offsets_request::AlterShareGroupOffsetsRequestTopic::default()
                .with_topic_name(TopicName(s("q3")))
                .with_partitions(vec![
                    alter_share_group_offsets_request::AlterShareGroupOffsetsRequestPartition::default()
                        .with_partition_index(0)
                        .with_start_offset(8),
                ]),
        ]);
    // On a fresh broker: the alter creates __share_group_state, as Kafka's persister
    // finds (so creates) the share coordinator; NOT_COORDINATOR while its partition loads.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = c.send(&alter, 0).await;
        assert_eq!(r.error_code, 0, "{:?}", r.error_message);
        let e = r.responses[0].partitions[0].error_code;
        if e == 0 {
            break;
        }
        assert_eq!(e, ResponseError::NotCoordinator.code());
        assert!(
            Instant::now() < deadline,
            "the share coordinator never loaded"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let describe = |all: bool| {
        let topics = (!all).then(|| {
            vec![
                describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestTopic::default()
                    .with_topic_name(TopicName(s("q3")))
                    .with_partitions(vec![0]),
            ]
        });
        DescribeShareGroupOffsetsRequest::default().with_groups(vec![
            describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup::default()
                .with_group_id(GroupId(s("fresh")))
                .with_topics(topics),
        ])
    };
    let start_offset = |r: DescribeShareGroupOffsetsResponse| {
        let g = &r.groups[0];
        assert_eq!(g.error_code, 0, "{:?}", g.error_message);
        let p = &g.topics[0].partitions[0];
        assert_eq!(p.error_code, 0, "{:?}", p.error_message);
        p.start_offset
    };
    assert_eq!(start_offset(c.send(&describe(false), 0).await), 8);
    assert_eq!(start_offset(c.send(&describe(true), 0).await), 8);
    let d = ShareGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("fresh"))]);
    let g = c.send(&d, 1).await.groups.remove(0);
    assert_eq!((g.error_code, g.group_state.as_str()), (0, "Empty"));

    // The records written, as Kafka 4.2+ writes them for a group that did not exist.
    // __consumer_offsets: no ShareGroupMetadata, only ShareGroupStatePartitionMetadata,
    // first with the partition initializing (written before the share coordinator is
    // asked, again on each retry above), last with it initialized.
    let q3 = {
        let req =
            MetadataRequest::default()
                .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
                )
                .with_name(Some(TopicName(s("q3"))))]));
        c.send(&req, 12).await.topics[0].topic_id
    };
    let q3_0 = vec![TopicPartitionsInfo {
        topic_id: q3,
        topic_name: "q3".into(),
        partitions: vec![0],
    }];
    let group_records = internal_records(&mut c, "__consumer_offsets").await;
    let share_records: Vec<(ShareKey, Option<ShareValue>)> = group_records
        .iter()
        .filter_map(|(k, v)| {
            let (key, value) = group_records::decode_record(Some(k), v.as_ref()).unwrap()?;
            match (key, value) {
                (RecordKey::Share { group, kind }, Some(RecordValue::Share(v))) => {
                    assert_eq!(group, "fresh");
                    Some((kind, Some(v)))
                }
                (RecordKey::Share { kind, .. }, None) => Some((kind, None)),
                _ => None,
            }
        })
        .collect();
    let initializing = ShareValue::StatePartitionMetadata(StatePartitionMetadata {
        initializing: q3_0.clone(),
        ..Default::default()
    });
    let initialized = ShareValue::StatePartitionMetadata(StatePartitionMetadata {
        initialized: q3_0.clone(),
        ..Default::default()
    });
    assert!(!share_records.is_empty());
    assert!(
        share_records
            .iter()
            .all(|(k, _)| *k == ShareKey::StatePartitionMetadata),
        "{share_records:?}"
    );
    assert_eq!(share_records[0].1.as_ref(), Some(&initializing));
    assert_eq!(share_records.last().unwrap().1.as_ref(), Some(&initialized));
    // __share_group_state: one ShareSnapshot, as Kafka 4.4's share coordinator
    // initializes: snapshot epoch 0, the group's epoch (0) as state epoch, leader epoch
    // 0, the start offset asked, no batches, 0 records complete, both timestamps the
    // time of the write.
    let state_records = internal_records(&mut c, "__share_group_state").await;
    assert_eq!(state_records.len(), 1, "{state_records:?}");
    let (k, v) = &state_records[0];
    let key = SharePartitionKey {
        group_id: "fresh".into(),
        topic_id: q3,
        partition: 0,
    };
    assert_eq!(
        state_records::decode_key(k.clone()).unwrap(),
        ShareStateKey::Snapshot(key)
    );
    let snapshot = state_records::decode_snapshot_value(v.clone().unwrap()).unwrap();
    let written = snapshot.create_timestamp;
    assert!(
        written >= test_started_ms && written <= now_ms(),
        "{snapshot:?}"
    );
    assert_eq!(
        snapshot,
        ShareSnapshotValue {
            snapshot_epoch: 0,
            state_epoch: 0,
            leader_epoch: 0,
            start_offset: 8,
            delivery_complete_count: 0,
            create_timestamp: written,
            write_timestamp: written,
            state_batches: Vec::new(),
        }
    );

    // The group is in __consumer_offsets: it is there after a restart.
    b.stop().await;
    let b = TestBroker::start(dir.path(), &overrides).await;
    let mut c = b.client().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = c.send(&describe(true), 0).await;
        if r.groups[0].error_code == 0 {
            assert_eq!(start_offset(r), 8);
            break;
        }
        assert!(Instant::now() < deadline, "{r:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    b.stop().await;
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The key and value of every record (no control records) in partition 0 of an
/// internal topic.
async fn internal_records(c: &mut Client, topic: &str) -> Vec<(Bytes, Option<Bytes>)> {
    let data = c.fetch(topic, 0, 0, 100, 1).await;
    assert_eq!(data.error_code, 0, "{topic}");
    let mut buf = data.records.unwrap_or_default();
    let batches = kafka_protocol::records::RecordBatchDecoder::decode_all(&mut buf).unwrap();
    batches
        .into_iter()
        .flat_map(|b| b.records)
        .filter(|r| !r.control)
        .map(|r| (r.key.unwrap(), r.value))
        .collect()
}
