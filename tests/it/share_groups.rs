//! KIP-932 share groups over TCP: a member joins with ShareGroupHeartbeat and is assigned
//! the partition once its share-partition state exists, ShareFetch acquires records
//! under its share session and long polls, and every bad acknowledgement answers Kafka's
//! error code without changing any record's state (the records are acknowledged or
//! released correctly afterwards, and a released record goes to another member with
//! delivery count 2); a member's final request, its fetching connection closing, or its
//! leaving the group without a share session releases what it held at once; a leaving
//! member's share session waits for its final request, as on Kafka.

use crate::common;

use std::time::{Duration, Instant};

use common::share::{ack_error, acquired};
use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use uuid::Uuid;

const GROUP: &str = "queue";
const ACCEPT: i8 = 1;
const RELEASE: i8 = 2;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

async fn heartbeat(c: &mut Client, member: &str, epoch: i32) -> ShareGroupHeartbeatResponse {
    let mut req = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_member_id(s(member))
        .with_member_epoch(epoch);
    if epoch == 0 {
        req = req.with_subscribed_topic_names(Some(vec![TopicName(s("q"))]));
    }
    c.send(&req, 1).await
}

/// A ShareFetch of partition 0 of `topic_id` at `epoch`, carrying `acks`
/// (first, last, type).
async fn share_fetch(
    c: &mut Client,
    member: &str,
    epoch: i32,
    topic_id: Uuid,
    acks: &[(i64, i64, i8)],
    max_wait_ms: i32,
) -> ShareFetchResponse {
    share_fetch_records(c, member, epoch, topic_id, acks, max_wait_ms, 500).await
}

/// [`share_fetch`] acquiring at most about `max_records` records (batch-optimized: whole
/// log batches).
async fn share_fetch_records(
    c: &mut Client,
    member: &str,
    epoch: i32,
    topic_id: Uuid,
    acks: &[(i64, i64, i8)],
    max_wait_ms: i32,
    max_records: i32,
) -> ShareFetchResponse {
    let batches = acks
        .iter()
        .map(|&(first, last, t)| {
            share_fetch_request::AcknowledgementBatch::default()
                .with_first_offset(first)
                .with_last_offset(last)
                .with_acknowledge_types(vec![t])
        })
        .collect();
    let req = ShareFetchRequest::default()
        .with_group_id(Some(GroupId(s(GROUP))))
        .with_member_id(Some(s(member)))
        .with_share_session_epoch(epoch)
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_max_records(max_records)
        .with_batch_size(max_records)
        .with_topics(vec![share_fetch_request::FetchTopic::default()
            .with_topic_id(topic_id)
            .with_partitions(vec![
                share_fetch_request::FetchPartition::default()
                    .with_partition_index(0)
                    .with_acknowledgement_batches(batches),
            ])]);
    c.send(&req, 1).await
}

/// A ShareAcknowledge of partition 0 of `topic_id`: each inner list is one batch's
/// (first, last, types).
async fn acknowledge(
    c: &mut Client,
    member: &str,
    epoch: i32,
    topic_id: Uuid,
    batches: &[(i64, i64, Vec<i8>)],
) -> ShareAcknowledgeResponse {
    let batches = batches
        .iter()
        .map(|(first, last, types)| {
            share_acknowledge_request::AcknowledgementBatch::default()
                .with_first_offset(*first)
                .with_last_offset(*last)
                .with_acknowledge_types(types.clone())
        })
        .collect();
    let req = ShareAcknowledgeRequest::default()
        .with_group_id(Some(GroupId(s(GROUP))))
        .with_member_id(Some(s(member)))
        .with_share_session_epoch(epoch)
        .with_topics(vec![share_acknowledge_request::AcknowledgeTopic::default()
            .with_topic_id(topic_id)
            .with_partitions(vec![
                share_acknowledge_request::AcknowledgePartition::default()
                    .with_partition_index(0)
                    .with_acknowledgement_batches(batches),
            ])]);
    c.send(&req, 1).await
}

async fn topic_id(c: &mut Client, topic: &str) -> Uuid {
    let req = MetadataRequest::default().with_topics(Some(vec![
        metadata_request::MetadataRequestTopic::default().with_name(Some(TopicName(s(topic)))),
    ]));
    c.send(&req, 12).await.topics[0].topic_id
}

/// Joins `member` and heartbeats until it is assigned partition 0 of `topic_id`; returns
/// its member epoch.
/// A broker with one partition of each internal topic and a topic `q` of one
/// partition, its client, `q`'s id, and GROUP's coordinator found (loaded).
async fn broker_with_queue(dir: &std::path::Path) -> (TestBroker, Client, Uuid) {
    let b = TestBroker::start(
        dir,
        &[
            ("offsets.topic.num.partitions", "1"),
            ("share.coordinator.state.topic.num.partitions", "1"),
        ],
    )
    .await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("q", 1).await, 0);
    let q = topic_id(&mut c, "q").await;
    let find = FindCoordinatorRequest::default().with_coordinator_keys(vec![s(GROUP)]);
    assert_eq!(c.send(&find, 6).await.coordinators[0].error_code, 0);
    (b, c, q)
}

async fn join_until_assigned(c: &mut Client, member: &str, topic_id: Uuid) -> i32 {
    let mut epoch = 0;
    let mut assigned = r_assignment(&heartbeat(c, member, 0).await, &mut epoch);
    let deadline = Instant::now() + Duration::from_secs(10);
    // An assignment is sent on joining and whenever it changes.
    while assigned != vec![(topic_id, vec![0])] {
        assert!(Instant::now() < deadline, "never assigned: epoch {epoch}");
        tokio::time::sleep(Duration::from_millis(100)).await;
        let r = heartbeat(c, member, epoch).await;
        let now = r_assignment(&r, &mut epoch);
        if r.assignment.is_some() {
            assigned = now;
        }
    }
    epoch
}

/// Sets a config of the share group `GROUP` (IncrementalAlterConfigs, resource type
/// GROUP).
async fn set_group_config(c: &mut Client, key: &str, value: &str) {
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        incremental_alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(32)
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

/// A heartbeat answer's assignment; moves `epoch` to the answer's.
fn r_assignment(r: &ShareGroupHeartbeatResponse, epoch: &mut i32) -> Vec<(Uuid, Vec<i32>)> {
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    *epoch = r.member_epoch;
    r.assignment
        .iter()
        .flat_map(|a| a.topic_partitions.iter())
        .map(|tp| (tp.topic_id, tp.partitions.clone()))
        .collect()
}

#[tokio::test]
async fn bad_acknowledgements_answer_kafkas_codes_and_change_nothing() {
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
    assert_eq!(c.create_topic("q", 1).await, 0);
    let q = topic_id(&mut c, "q").await;

    // The share APIs are advertised (share groups are served on a single node).
    let versions = c.send(&ApiVersionsRequest::default(), 3).await;
    for key in [
        ApiKey::ShareGroupHeartbeat,
        ApiKey::ShareFetch,
        ApiKey::ShareAcknowledge,
    ] {
        let v = versions.api_keys.iter().find(|k| k.api_key == key as i16);
        let max = if key == ApiKey::ShareGroupHeartbeat {
            1
        } else {
            2
        };
        assert_eq!(
            v.map(|v| (v.min_version, v.max_version)),
            Some((1, max)),
            "{key:?}"
        );
    }

    let find = FindCoordinatorRequest::default().with_coordinator_keys(vec![s(GROUP)]);
    assert_eq!(c.send(&find, 6).await.coordinators[0].error_code, 0);

    // Joining; the partition is assigned once its share-partition state exists.
    join_until_assigned(&mut c, "m1", q).await;
    let r = heartbeat(&mut c, "m2", 0).await;
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);

    // Opening sessions loads the share-partition at the latest offset (the default
    // `share.auto.offset.reset`); nothing to acquire yet, so the fetch waits its max.
    let started = Instant::now();
    let r = share_fetch(&mut c, "m1", 0, q, &[], 300).await;
    assert!(acquired(&r).is_empty());
    assert!(started.elapsed() >= Duration::from_millis(250), "long poll");
    assert_eq!(r.acquisition_lock_timeout_ms, 30_000);
    assert!(acquired(&share_fetch(&mut c, "m2", 0, q, &[], 0).await).is_empty());

    // A waiting fetch is answered when records arrive.
    let mut producer = b.client().await;
    let waiting = tokio::spawn(async move {
        let r = share_fetch(&mut c, "m1", 1, q, &[], 10_000).await;
        (c, r)
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let values: Vec<String> = (0..10).map(|i| format!("v{i}")).collect();
    let refs: Vec<&str> = values.iter().map(String::as_str).collect();
    let (err, _) = producer
        .produce("q", 0, batch(&refs, None, Compression::None), -1)
        .await;
    assert_eq!(err, 0);
    let (mut c, r) = waiting.await.unwrap();
    assert_eq!(acquired(&r), vec![(0, 9, 1)]);
    let records = r.responses[0].partitions[0].records.clone().unwrap();
    assert_eq!(values_of(&records), values);

    // Bad acknowledgements: Kafka's codes, and no state change.
    let mut m1 = 2;
    let mut ack = |batches: Vec<(i64, i64, Vec<i8>)>| {
        let e = m1;
        m1 += 1;
        (e, batches)
    };
    let refused = [
        // Past the acquired records (Kafka: "The first offset in request is past
        // acquired records").
        (
            ack(vec![(100, 105, vec![ACCEPT])]),
            ResponseError::InvalidRequest,
        ),
        // Overlapping batches.
        (
            ack(vec![(0, 4, vec![ACCEPT]), (3, 6, vec![ACCEPT])]),
            ResponseError::InvalidRequest,
        ),
        // First offset after last.
        (
            ack(vec![(5, 4, vec![ACCEPT])]),
            ResponseError::InvalidRequest,
        ),
        // Types not matching the offsets.
        (
            ack(vec![(0, 4, vec![ACCEPT, ACCEPT])]),
            ResponseError::InvalidRequest,
        ),
        // An unknown type (RENEW is v2's).
        (ack(vec![(0, 4, vec![4])]), ResponseError::InvalidRequest),
        // Partly past them.
        (
            ack(vec![(8, 12, vec![ACCEPT])]),
            ResponseError::InvalidRequest,
        ),
    ];
    for ((epoch, batches), expected) in refused {
        let r = acknowledge(&mut c, "m1", epoch, q, &batches).await;
        assert_eq!(ack_error(&r), expected.code(), "{batches:?}");
    }
    // Another member's records.
    let r = acknowledge(&mut c, "m2", 1, q, &[(0, 9, vec![ACCEPT])]).await;
    assert_eq!(ack_error(&r), ResponseError::InvalidRecordState.code());
    // Session epochs: a stale one, 0 on ShareAcknowledge, an unknown member.
    let r = acknowledge(&mut c, "m1", 1, q, &[(0, 9, vec![ACCEPT])]).await;
    assert_eq!(r.error_code, ResponseError::InvalidShareSessionEpoch.code());
    let r = acknowledge(&mut c, "m1", 0, q, &[(0, 9, vec![ACCEPT])]).await;
    assert_eq!(r.error_code, ResponseError::InvalidShareSessionEpoch.code());
    let r = acknowledge(&mut c, "nobody", 1, q, &[(0, 9, vec![ACCEPT])]).await;
    assert_eq!(r.error_code, ResponseError::ShareSessionNotFound.code());
    // Acknowledgements on an opening ShareFetch.
    let r = share_fetch(&mut c, "m1", 0, q, &[(0, 9, ACCEPT)], 0).await;
    assert_eq!(r.error_code, ResponseError::InvalidRequest.code());
    // That opened nothing: m1's session still runs at its epoch.

    // The records are untouched: m1 accepts 0-4 and releases 5-9 ...
    let r = acknowledge(
        &mut c,
        "m1",
        m1,
        q,
        &[(0, 4, vec![ACCEPT]), (5, 9, vec![RELEASE])],
    )
    .await;
    assert_eq!(ack_error(&r), 0);
    // ... accepting the released ones now is refused (m1 no longer holds them) ...
    let r = acknowledge(&mut c, "m1", m1 + 1, q, &[(5, 9, vec![ACCEPT])]).await;
    assert_eq!(ack_error(&r), ResponseError::InvalidRecordState.code());
    // ... and m2 gets the released ones, delivered for the second time.
    let r = share_fetch(&mut c, "m2", 2, q, &[], 1000).await;
    assert_eq!(acquired(&r), vec![(5, 9, 2)]);
    // m2 accepts them piggybacked on its next fetch, which then waits for nothing more.
    let r = share_fetch(&mut c, "m2", 3, q, &[(5, 9, ACCEPT)], 0).await;
    assert_eq!(r.responses[0].partitions[0].acknowledge_error_code, 0);
    assert!(acquired(&r).is_empty());

    // A member that leaves the group and closes its share session (its final request,
    // here a ShareAcknowledge acknowledging nothing) releases what it holds at once:
    // m1 gets m2's records without waiting for their 30 s locks.
    let (err, _) = producer
        .produce("q", 0, batch(&["x", "y", "z"], None, Compression::None), -1)
        .await;
    assert_eq!(err, 0);
    let r = share_fetch(&mut c, "m2", 4, q, &[], 1000).await;
    assert_eq!(acquired(&r), vec![(10, 12, 1)]);
    let r = heartbeat(&mut c, "m2", -1).await;
    assert_eq!((r.error_code, r.member_epoch), (0, -1));
    let last = ShareAcknowledgeRequest::default()
        .with_group_id(Some(GroupId(s(GROUP))))
        .with_member_id(Some(s("m2")))
        .with_share_session_epoch(-1);
    let r = c.send(&last, 1).await;
    assert_eq!(r.error_code, 0, "{r:?}");
    let started = Instant::now();
    let r = share_fetch(&mut c, "m1", m1 + 2, q, &[], 5000).await;
    assert_eq!(acquired(&r), vec![(10, 12, 2)]);
    assert!(started.elapsed() < Duration::from_secs(5));

    // A topic id no topic has is answered UNKNOWN_TOPIC_ID and does not join the session.
    let r = share_fetch(&mut c, "m1", m1 + 3, Uuid::from_u128(7), &[], 0).await;
    assert_eq!(r.error_code, 0);
    let p = &r.responses[0].partitions[0];
    assert_eq!(p.error_code, ResponseError::UnknownTopicId.code());
    let r = share_fetch(&mut c, "m1", m1 + 4, q, &[(10, 12, ACCEPT)], 0).await;
    assert_eq!(r.responses.len(), 1, "{r:?}");
    assert_eq!(r.responses[0].partitions[0].acknowledge_error_code, 0);

    // The share coordinator of the share-partition's state: FindCoordinator key type
    // SHARE (v6), "group:topicId:partition"; refused below v6 and for a malformed key.
    let key = format!("{GROUP}:{}:0", skua::log::uuid_to_kafka_string(q));
    let find = |v: &str| {
        FindCoordinatorRequest::default()
            .with_key_type(2)
            .with_coordinator_keys(vec![s(v)])
    };
    let found = c.send(&find(&key), 6).await.coordinators.remove(0);
    assert_eq!(
        (found.error_code, found.node_id.0),
        (0, 1),
        "{:?}",
        found.error_message
    );
    assert_eq!(found.port, i32::from(b.addr.port()));
    let refused = c.send(&find(&key), 5).await.coordinators.remove(0);
    assert_eq!(refused.error_code, ResponseError::InvalidRequest.code());
    let refused = c.send(&find("queue:q:0"), 6).await.coordinators.remove(0);
    assert_eq!(refused.error_code, ResponseError::InvalidRequest.code());

    // ShareGroupDescribe shows the member left, on the partition.
    let req = ShareGroupDescribeRequest::default().with_group_ids(vec![GroupId(s(GROUP))]);
    let d = c.send(&req, 1).await.groups.remove(0);
    assert_eq!((d.error_code, d.group_state.as_str()), (0, "Stable"));
    assert_eq!(d.assignor_name.as_str(), "simple");
    let members: Vec<&str> = d.members.iter().map(|m| m.member_id.as_str()).collect();
    assert_eq!(members, vec!["m1"]);
    let assigned = &d.members[0].assignment.topic_partitions;
    assert_eq!(
        (
            assigned.len(),
            assigned[0].topic_name.as_str(),
            &assigned[0].partitions
        ),
        (1, "q", &vec![0])
    );
    b.stop().await;
}

/// A share session belongs to the connection that opened it (Kafka's disconnect
/// listener): when a member's fetching connection closes, as a killed consumer's do, the
/// leader releases what it held at once, though the member is still in the group (its
/// heartbeats go on another connection, so the group coordinator has seen nothing). This
/// is what frees a dead member's records on a leader that is not its group coordinator.
#[tokio::test]
async fn a_closed_connection_releases_its_share_sessions_records_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (b, mut c, q) = broker_with_queue(dir.path()).await;
    let m1 = join_until_assigned(&mut c, "m1", q).await;
    join_until_assigned(&mut c, "m2", q).await;

    let mut f1 = b.client().await;
    assert!(acquired(&share_fetch(&mut f1, "m1", 0, q, &[], 0).await).is_empty());
    let (err, _) = c
        .produce("q", 0, batch(&["a", "b", "c"], None, Compression::None), -1)
        .await;
    assert_eq!(err, 0);
    assert_eq!(
        acquired(&share_fetch(&mut f1, "m1", 1, q, &[], 1000).await),
        vec![(0, 2, 1)]
    );
    // m2's session, on its own connection, finds nothing while m1 holds them.
    let mut f2 = b.client().await;
    assert!(acquired(&share_fetch(&mut f2, "m2", 0, q, &[], 200).await).is_empty());

    drop(f1);
    let started = Instant::now();
    let r = share_fetch(&mut f2, "m2", 1, q, &[], 5000).await;
    assert_eq!(acquired(&r), vec![(0, 2, 2)], "redelivered, count kept");
    // Well before the 30 s locks would run out.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // m1 is still a member: only its fetching connection went.
    let r = heartbeat(&mut c, "m1", m1).await;
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    // Its session went with the connection: a new connection must open another.
    let mut f3 = b.client().await;
    let r = share_fetch(&mut f3, "m1", 2, q, &[], 0).await;
    assert_eq!(r.error_code, ResponseError::ShareSessionNotFound.code());
    b.stop().await;
}

/// A closing consumer sends its leave heartbeat and its final ShareAcknowledge (share
/// session epoch -1) at once, on different connections (librdkafka does): served in
/// that order, the final acknowledgement still finds the member's share session, as on
/// Kafka, which closes a share session only on its final request, its connection's
/// close or its expiry. The acknowledged records are never delivered again.
#[tokio::test]
async fn a_final_acknowledgement_after_the_leave_heartbeat_finds_its_session() {
    let dir = tempfile::tempdir().unwrap();
    let (b, mut c, q) = broker_with_queue(dir.path()).await;
    join_until_assigned(&mut c, "m1", q).await;
    let mut f = b.client().await;
    assert!(acquired(&share_fetch(&mut f, "m1", 0, q, &[], 0).await).is_empty());
    let (err, _) = c
        .produce("q", 0, batch(&["a", "b", "c"], None, Compression::None), -1)
        .await;
    assert_eq!(err, 0);
    assert_eq!(
        acquired(&share_fetch(&mut f, "m1", 1, q, &[], 1000).await),
        vec![(0, 2, 1)]
    );

    let r = heartbeat(&mut c, "m1", -1).await;
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    let r = acknowledge(&mut f, "m1", -1, q, &[(0, 2, vec![ACCEPT])]).await;
    assert_eq!(ack_error(&r), 0, "{r:?}");

    // The session is closed by that final request.
    let r = share_fetch(&mut f, "m1", 2, q, &[], 0).await;
    assert_eq!(r.error_code, ResponseError::ShareSessionNotFound.code());
    // Another member gets nothing: the records were accepted, not released.
    join_until_assigned(&mut c, "m2", q).await;
    let mut f2 = b.client().await;
    let r = share_fetch(&mut f2, "m2", 0, q, &[], 500).await;
    assert!(acquired(&r).is_empty(), "{r:?}");
    b.stop().await;
}

/// A ShareFetch answer carries the log batches holding what it acquired and nothing
/// past them, however much its MaxBytes would allow: a member acquiring a few records of
/// a long backlog receives those (Kafka slices the fetched records the same way), and the
/// next member's answer starts at the batch holding its first acquired record.
#[tokio::test]
async fn a_share_fetch_answers_only_the_batches_holding_what_it_acquired() {
    let dir = tempfile::tempdir().unwrap();
    let (b, mut c, q) = broker_with_queue(dir.path()).await;
    join_until_assigned(&mut c, "m1", q).await;
    join_until_assigned(&mut c, "m2", q).await;
    let mut f1 = b.client().await;
    assert!(acquired(&share_fetch(&mut f1, "m1", 0, q, &[], 0).await).is_empty());
    // 20 batches of 10 records: offsets 0..=199.
    for i in 0..20 {
        let values: Vec<String> = (0..10).map(|j| format!("v{}", i * 10 + j)).collect();
        let refs: Vec<&str> = values.iter().map(String::as_str).collect();
        let (err, _) = c
            .produce("q", 0, batch(&refs, None, Compression::None), -1)
            .await;
        assert_eq!(err, 0);
    }
    let offsets = |r: &ShareFetchResponse| -> Vec<i64> {
        let records = r.responses[0].partitions[0].records.clone().unwrap();
        values(&records).into_iter().map(|(o, _)| o).collect()
    };
    let span = |r: &ShareFetchResponse| {
        let got = acquired(r);
        (got.first().unwrap().0, got.last().unwrap().1)
    };

    // 25 records asked: the three batches holding them are acquired, and only they come.
    let r = share_fetch_records(&mut f1, "m1", 1, q, &[], 1000, 25).await;
    assert_eq!(span(&r), (0, 29));
    assert_eq!(offsets(&r), (0..=29).collect::<Vec<i64>>());
    // The next member's answer starts where its records do.
    let mut f2 = b.client().await;
    let r = share_fetch_records(&mut f2, "m2", 0, q, &[], 1000, 25).await;
    assert_eq!(span(&r), (30, 59));
    assert_eq!(offsets(&r), (30..=59).collect::<Vec<i64>>());
    // Records released inside the window come back alone, the batches after them not.
    let r = share_fetch_records(&mut f1, "m1", 2, q, &[(10, 19, RELEASE)], 0, 10).await;
    assert_eq!(acquired(&r), vec![(10, 19, 2)]);
    assert_eq!(offsets(&r), (10..=19).collect::<Vec<i64>>());
    b.stop().await;
}

fn values_of(records: &bytes::Bytes) -> Vec<String> {
    values(records).into_iter().map(|(_, v)| v).collect()
}

/// Acknowledged records survive a restart in `__share_group_state`: the member, joining
/// again, is handed only what it had not acknowledged.
#[tokio::test]
async fn accepted_records_are_not_redelivered_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = [
        ("offsets.topic.num.partitions", "1"),
        ("share.coordinator.state.topic.num.partitions", "1"),
    ];
    let b = TestBroker::start(dir.path(), &config).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("q", 1).await, 0);
    let q = topic_id(&mut c, "q").await;
    let find = FindCoordinatorRequest::default().with_coordinator_keys(vec![s(GROUP)]);
    assert_eq!(c.send(&find, 6).await.coordinators[0].error_code, 0);
    join_until_assigned(&mut c, "m1", q).await;
    assert!(acquired(&share_fetch(&mut c, "m1", 0, q, &[], 0).await).is_empty());
    let values: Vec<String> = (0..10).map(|i| format!("v{i}")).collect();
    let refs: Vec<&str> = values.iter().map(String::as_str).collect();
    let (err, _) = c
        .produce("q", 0, batch(&refs, None, Compression::None), -1)
        .await;
    assert_eq!(err, 0);
    assert_eq!(
        acquired(&share_fetch(&mut c, "m1", 1, q, &[], 1000).await),
        vec![(0, 9, 1)]
    );
    let r = acknowledge(&mut c, "m1", 2, q, &[(0, 4, vec![ACCEPT])]).await;
    assert_eq!(ack_error(&r), 0);
    drop(c);
    b.stop().await;

    let b = TestBroker::start(dir.path(), &config).await;
    let mut c = b.client().await;
    assert_eq!(c.send(&find, 6).await.coordinators[0].error_code, 0);
    join_until_assigned(&mut c, "m1", q).await;
    let r = share_fetch(&mut c, "m1", 0, q, &[], 1000).await;
    let got = acquired(&r);
    assert_eq!(
        got.iter().map(|(f, l, _)| (*f, *l)).collect::<Vec<_>>(),
        vec![(5, 9)],
        "{got:?}"
    );
    let records = r.responses[0].partitions[0].records.clone().unwrap();
    assert!(values_of(&records).contains(&"v5".to_string()));
    b.stop().await;
}

/// The share coordinator's RPCs over TCP, as another broker sends them: a
/// share-partition initialized, read by a leader (which fences older leaders' reads and
/// writes), written, summarized and deleted, each answer what the state now holds.
#[tokio::test]
async fn the_share_coordinators_rpcs_serve_another_brokers_persister() {
    use kafka_protocol::messages::{
        delete_share_group_state_request as del, initialize_share_group_state_request as init,
        read_share_group_state_request as read, read_share_group_state_summary_request as sum,
        write_share_group_state_request as write,
    };
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(
        dir.path(),
        &[("share.coordinator.state.topic.num.partitions", "1")],
    )
    .await;
    let mut c = b.client().await;
    let topic = Uuid::from_u128(0x5eed);
    // FindCoordinator key type SHARE creates `__share_group_state` and names this broker.
    let find = FindCoordinatorRequest::default()
        .with_key_type(2)
        .with_coordinator_keys(vec![s(&format!(
            "{GROUP}:{}:0",
            // Kafka's text form of a Uuid: URL-safe base64 without padding.
            base64::Engine::encode(
                &base64::engine::general_purpose::URL_SAFE_NO_PAD,
                topic.as_bytes()
            )
        ))]);
    let found = c.send(&find, 6).await;
    assert_eq!(found.coordinators[0].error_code, 0, "{found:?}");

    let versions = c.send(&ApiVersionsRequest::default(), 3).await;
    // v1 of WriteShareGroupState and ReadShareGroupStateSummary carries KIP-1226's
    // delivery complete count.
    for (key, max) in [
        (ApiKey::InitializeShareGroupState, 0),
        (ApiKey::ReadShareGroupState, 0),
        (ApiKey::WriteShareGroupState, 1),
        (ApiKey::DeleteShareGroupState, 0),
        (ApiKey::ReadShareGroupStateSummary, 1),
    ] {
        let v = versions.api_keys.iter().find(|k| k.api_key == key as i16);
        let all: Vec<i16> = versions.api_keys.iter().map(|k| k.api_key).collect();
        assert_eq!(
            v.map(|v| (v.min_version, v.max_version)),
            Some((0, max)),
            "{key:?} among {all:?}"
        );
    }

    let read_at = |leader_epoch: i32| {
        ReadShareGroupStateRequest::default()
            .with_group_id(s(GROUP))
            .with_topics(vec![read::ReadStateData::default()
                .with_topic_id(topic)
                .with_partitions(vec![read::PartitionData::default()
                    .with_partition(0)
                    .with_leader_epoch(leader_epoch)])])
    };
    // Before its initialization the share-partition has no state to read: Kafka 4.2's
    // answer, which keeps a leader from starting ahead of the group coordinator.
    let r = c.send(&read_at(0), 0).await;
    let p = &r.results[0].partitions[0];
    assert_eq!(
        (p.error_code, p.error_message.as_deref()),
        (
            ResponseError::InvalidRequest.code(),
            Some(UNINITIALIZED_READ)
        )
    );

    let initialize = InitializeShareGroupStateRequest::default()
        .with_group_id(s(GROUP))
        .with_topics(vec![init::InitializeStateData::default()
            .with_topic_id(topic)
            .with_partitions(vec![init::PartitionData::default()
                .with_partition(0)
                .with_state_epoch(1)
                .with_start_offset(5)])]);
    let r = c.send(&initialize, 0).await;
    assert_eq!(r.results[0].partitions[0].error_code, 0);

    let r = c.send(&read_at(3), 0).await;
    let p = &r.results[0].partitions[0];
    assert_eq!((p.error_code, p.state_epoch, p.start_offset), (0, 1, 5));
    assert!(p.state_batches.is_empty());

    let write_at = |leader_epoch: i32| {
        WriteShareGroupStateRequest::default()
            .with_group_id(s(GROUP))
            .with_topics(vec![write::WriteStateData::default()
                .with_topic_id(topic)
                .with_partitions(vec![write::PartitionData::default()
                    .with_partition(0)
                    .with_state_epoch(1)
                    .with_leader_epoch(leader_epoch)
                    .with_start_offset(5)
                    .with_delivery_complete_count(3)
                    .with_state_batches(vec![write::StateBatch::default()
                        .with_first_offset(5)
                        .with_last_offset(7)
                        .with_delivery_state(2)
                        .with_delivery_count(1)])])])
    };
    let r = c.send(&write_at(3), 1).await;
    assert_eq!(r.results[0].partitions[0].error_code, 0);
    let r = c.send(&read_at(3), 0).await;
    let batches: Vec<(i64, i64, i8, i16)> = r.results[0].partitions[0]
        .state_batches
        .iter()
        .map(|b| {
            (
                b.first_offset,
                b.last_offset,
                b.delivery_state,
                b.delivery_count,
            )
        })
        .collect();
    assert_eq!(batches, vec![(5, 7, 2, 1)]);

    // A leader older than the last reader is fenced, reading and writing.
    let fenced = ResponseError::FencedLeaderEpoch.code();
    let r = c.send(&read_at(2), 0).await;
    assert_eq!(r.results[0].partitions[0].error_code, fenced);
    let r = c.send(&write_at(2), 0).await;
    assert_eq!(r.results[0].partitions[0].error_code, fenced);

    let summary = ReadShareGroupStateSummaryRequest::default()
        .with_group_id(s(GROUP))
        .with_topics(vec![sum::ReadStateSummaryData::default()
            .with_topic_id(topic)
            .with_partitions(vec![
                sum::PartitionData::default().with_partition(0)
            ])]);
    let r = c.send(&summary, 0).await;
    let p = &r.results[0].partitions[0];
    assert_eq!(
        (p.error_code, p.state_epoch, p.leader_epoch, p.start_offset),
        (0, 1, 3, 5)
    );
    // v1 answers the count the v1 write carried (v0 has no such field: -1 decoded).
    assert_eq!(p.delivery_complete_count, -1, "not on the wire at v0");
    let r = c.send(&summary, 1).await;
    let p = &r.results[0].partitions[0];
    assert_eq!(
        (p.error_code, p.start_offset, p.delivery_complete_count),
        (0, 5, 3)
    );
    // A v0 write carries no count: it is unknown (-1) after it, as on Kafka.
    let r = c.send(&write_at(3), 0).await;
    assert_eq!(r.results[0].partitions[0].error_code, 0);
    let r = c.send(&summary, 1).await;
    assert_eq!(r.results[0].partitions[0].delivery_complete_count, -1);

    let delete = DeleteShareGroupStateRequest::default()
        .with_group_id(s(GROUP))
        .with_topics(vec![del::DeleteStateData::default()
            .with_topic_id(topic)
            .with_partitions(vec![
                del::PartitionData::default().with_partition(0)
            ])]);
    let r = c.send(&delete, 0).await;
    assert_eq!(r.results[0].partitions[0].error_code, 0);
    let r = c.send(&summary, 0).await;
    assert_eq!(r.results[0].partitions[0].start_offset, -1, "deleted");
    let r = c.send(&read_at(4), 0).await;
    assert_eq!(
        r.results[0].partitions[0].error_code,
        ResponseError::InvalidRequest.code(),
        "deleted: nothing to read"
    );
    b.stop().await;
}

/// Kafka's message for a ReadShareGroupState of a share-partition without state, which
/// the share-partition's leader passes on to the member's ShareFetch.
const UNINITIALIZED_READ: &str = "Read operation on uninitialized share partition not allowed.";

/// A ShareFetch that reaches a share-partition before the group coordinator initialized
/// its state (here: before the member's first heartbeat) is answered as Kafka 4.2
/// answers it, UNKNOWN_SERVER_ERROR with the share coordinator's message, on which the
/// Java, librdkafka and franz-go share consumers fetch again; the leader keeps nothing
/// of it. Once the state is initialized at the group's epoch, the same session's next
/// fetch delivers the records and their acknowledgement is persisted at that state
/// epoch, nothing fenced (a leader that started at state epoch 0 had its first write
/// fenced once the initialization landed).
#[tokio::test]
async fn a_fetch_before_the_share_partition_is_initialized_is_refused_then_delivers() {
    use kafka_protocol::messages::read_share_group_state_summary_request as sum;
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
    assert_eq!(c.create_topic("q", 1).await, 0);
    let q = topic_id(&mut c, "q").await;
    let (err, _) = c
        .produce("q", 0, batch(&["a", "b", "c"], None, Compression::None), -1)
        .await;
    assert_eq!(err, 0);
    set_group_config(&mut c, "share.auto.offset.reset", "earliest").await;
    let find = FindCoordinatorRequest::default().with_coordinator_keys(vec![s(GROUP)]);
    assert_eq!(c.send(&find, 6).await.coordinators[0].error_code, 0);
    // The share coordinator's topic exists (FindCoordinator key type SHARE makes it, as
    // the first heartbeat of any share group would), the share-partition's state not.
    let share_key = format!("{GROUP}:{}:0", skua::log::uuid_to_kafka_string(q));
    let find_share = FindCoordinatorRequest::default()
        .with_key_type(2)
        .with_coordinator_keys(vec![s(&share_key)]);
    assert_eq!(c.send(&find_share, 6).await.coordinators[0].error_code, 0);

    let mut f = b.client().await;
    for epoch in [0, 1] {
        let r = share_fetch(&mut f, "m1", epoch, q, &[], 0).await;
        assert_eq!(r.error_code, 0, "{r:?}");
        let p = &r.responses[0].partitions[0];
        assert_eq!(
            (p.error_code, p.error_message.as_deref()),
            (
                ResponseError::UnknownServerError.code(),
                Some(UNINITIALIZED_READ)
            ),
            "fetch at session epoch {epoch}"
        );
        assert!(p.acquired_records.is_empty());
    }

    // The member joins; the group coordinator initializes the share-partition at the
    // group's epoch (1) and assigns it.
    join_until_assigned(&mut c, "m1", q).await;
    let r = share_fetch(&mut f, "m1", 2, q, &[], 1000).await;
    assert_eq!(r.responses[0].partitions[0].error_code, 0, "{r:?}");
    assert_eq!(acquired(&r), vec![(0, 2, 1)]);
    let r = acknowledge(&mut f, "m1", 3, q, &[(0, 2, vec![ACCEPT])]).await;
    assert_eq!(ack_error(&r), 0, "not fenced: {r:?}");

    let summary = ReadShareGroupStateSummaryRequest::default()
        .with_group_id(s(GROUP))
        .with_topics(vec![sum::ReadStateSummaryData::default()
            .with_topic_id(q)
            .with_partitions(vec![
                sum::PartitionData::default().with_partition(0)
            ])]);
    let r = c.send(&summary, 1).await;
    let p = &r.results[0].partitions[0];
    assert_eq!(
        (p.error_code, p.state_epoch),
        (0, 1),
        "the acknowledgement persisted at the initialization's state epoch"
    );
    // Nothing is delivered again.
    let r = share_fetch(&mut f, "m1", 4, q, &[], 200).await;
    assert!(acquired(&r).is_empty(), "{r:?}");
    b.stop().await;
}

/// Kafka's leader loads a member's new share-partitions each on its own and answers a
/// ShareFetch as soon as one of them is loaded with records to acquire (its persister
/// sends the first ReadShareGroupState alone and the others once that one is answered):
/// a first fetch of two new share-partitions, both holding records, gets the first
/// one's, the next fetch the other's (librdkafka's share consumer test 0179 expects
/// this). Nothing is held back: the second fetch also gets what was produced to the
/// first partition meanwhile.
#[tokio::test]
async fn a_first_fetch_of_new_share_partitions_answers_the_first_loaded() {
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
    assert_eq!(c.create_topic("q", 2).await, 0);
    let q = topic_id(&mut c, "q").await;
    for p in [0, 1] {
        let (err, _) = c
            .produce("q", p, batch(&["a", "b", "c"], None, Compression::None), -1)
            .await;
        assert_eq!(err, 0);
    }
    set_group_config(&mut c, "share.auto.offset.reset", "earliest").await;
    let find = FindCoordinatorRequest::default().with_coordinator_keys(vec![s(GROUP)]);
    assert_eq!(c.send(&find, 6).await.coordinators[0].error_code, 0);
    let mut epoch = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    while r_assignment(&heartbeat(&mut c, "m1", epoch).await, &mut epoch) != vec![(q, vec![0, 1])] {
        assert!(Instant::now() < deadline, "never assigned both partitions");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let fetch = |epoch: i32| {
        ShareFetchRequest::default()
            .with_group_id(Some(GroupId(s(GROUP))))
            .with_member_id(Some(s("m1")))
            .with_share_session_epoch(epoch)
            .with_max_wait_ms(1000)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_max_records(500)
            .with_batch_size(500)
            .with_topics(match epoch {
                0 => vec![share_fetch_request::FetchTopic::default()
                    .with_topic_id(q)
                    .with_partitions(
                        [0, 1]
                            .map(|p| {
                                share_fetch_request::FetchPartition::default()
                                    .with_partition_index(p)
                            })
                            .to_vec(),
                    )],
                _ => Vec::new(),
            })
    };
    let by_partition = |r: &ShareFetchResponse| -> Vec<(i32, Vec<(i64, i64)>)> {
        assert_eq!(r.error_code, 0, "{r:?}");
        r.responses
            .iter()
            .flat_map(|t| t.partitions.iter())
            .filter(|p| !p.acquired_records.is_empty() || p.error_code != 0)
            .map(|p| {
                assert_eq!(p.error_code, 0, "{p:?}");
                let ranges = p
                    .acquired_records
                    .iter()
                    .map(|a| (a.first_offset, a.last_offset))
                    .collect();
                (p.partition_index, ranges)
            })
            .collect()
    };
    let f = &mut b.client().await;
    let r = f.send(&fetch(0), 1).await;
    assert_eq!(
        by_partition(&r),
        vec![(0, vec![(0, 2)])],
        "the first loaded only"
    );
    let (err, _) = c
        .produce("q", 0, batch(&["d"], None, Compression::None), -1)
        .await;
    assert_eq!(err, 0);
    let r = f.send(&fetch(1), 1).await;
    assert_eq!(
        by_partition(&r),
        vec![(0, vec![(3, 3)]), (1, vec![(0, 2)])],
        "the other loaded since"
    );
    b.stop().await;
}
