//! KIP-848 consumer groups over TCP: ConsumerGroupHeartbeat and ConsumerGroupDescribe.

use crate::common;

use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

async fn heartbeat(
    c: &mut Client,
    member: &str,
    epoch: i32,
    owned: Option<Vec<TopicPartitions>>,
) -> ConsumerGroupHeartbeatResponse {
    let mut req = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("kip848")))
        .with_member_id(s(member))
        .with_member_epoch(epoch)
        .with_topic_partitions(owned);
    if epoch == 0 {
        req = req
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]))
            .with_topic_partitions(Some(vec![]));
    }
    c.send(&req, 1).await
}

/// The partitions of an assignment, as the owned list of the next heartbeat.
fn owned(resp: &ConsumerGroupHeartbeatResponse) -> Vec<TopicPartitions> {
    resp.assignment
        .as_ref()
        .map(|a| {
            a.topic_partitions
                .iter()
                .map(|tp| {
                    TopicPartitions::default()
                        .with_topic_id(tp.topic_id)
                        .with_partitions(tp.partitions.clone())
                })
                .collect()
        })
        .unwrap_or_default()
}

fn count(tps: &[TopicPartitions]) -> usize {
    tps.iter().map(|t| t.partitions.len()).sum()
}

/// A broker with topic "t" of `partitions` partitions and a client that found `group`'s
/// coordinator.
async fn start_with_group(
    dir: &std::path::Path,
    config: &[(&str, &str)],
    partitions: i32,
    group: &str,
) -> (TestBroker, Client) {
    let b = TestBroker::start(dir, config).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("t", partitions).await, 0);
    let find = FindCoordinatorRequest::default().with_coordinator_keys(vec![s(group)]);
    assert_eq!(c.send(&find, 6).await.coordinators[0].error_code, 0);
    (b, c)
}

#[tokio::test]
async fn two_members_converge_revoking_before_assigning() {
    let dir = tempfile::tempdir().unwrap();
    let (b, mut c) = start_with_group(
        dir.path(),
        &[("offsets.topic.num.partitions", "3")],
        4,
        "kip848",
    )
    .await;

    let r = heartbeat(&mut c, "a", 0, None).await;
    assert_eq!((r.error_code, r.member_epoch), (0, 1));
    assert_eq!(r.heartbeat_interval_ms, 5000);
    let a_all = owned(&r);
    assert_eq!(count(&a_all), 4);

    let r = heartbeat(&mut c, "b", 0, None).await;
    assert_eq!((r.error_code, r.member_epoch), (0, 2));
    assert_eq!(count(&owned(&r)), 0, "b waits until a releases partitions");

    let r = heartbeat(&mut c, "a", 1, Some(a_all.clone())).await;
    assert_eq!(r.member_epoch, 1, "a keeps its epoch until it revokes");
    let a_kept = owned(&r);
    assert_eq!(count(&a_kept), 2);
    let r = heartbeat(&mut c, "a", 1, Some(a_kept.clone())).await;
    assert_eq!(r.member_epoch, 2);
    let r = heartbeat(&mut c, "b", 2, Some(vec![])).await;
    assert_eq!(count(&owned(&r)), 2);

    // Commits carry the member epoch (OffsetCommit v9).
    let commit = |epoch: i32| {
        OffsetCommitRequest::default()
            .with_group_id(GroupId(s("kip848")))
            .with_member_id(s("a"))
            .with_generation_id_or_member_epoch(epoch)
            .with_topics(vec![
                offset_commit_request::OffsetCommitRequestTopic::default()
                    .with_name(TopicName(s("t")))
                    .with_partitions(vec![
                        offset_commit_request::OffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(1),
                    ]),
            ])
    };
    let resp = c.send(&commit(2), 9).await;
    assert_eq!(resp.topics[0].partitions[0].error_code, 0);
    let resp = c.send(&commit(1), 9).await;
    assert_eq!(
        resp.topics[0].partitions[0].error_code,
        ResponseError::StaleMemberEpoch.code()
    );

    let describe = ConsumerGroupDescribeRequest::default()
        .with_group_ids(vec![GroupId(s("kip848")), GroupId(s("nope"))]);
    for v in 0..=1 {
        let resp = c.send(&describe, v).await;
        let g = &resp.groups[0];
        assert_eq!((g.error_code, g.group_state.as_str()), (0, "Stable"));
        assert_eq!((g.group_epoch, g.assignment_epoch), (2, 2));
        assert_eq!(g.members.len(), 2);
        assert_eq!(
            resp.groups[1].error_code,
            ResponseError::GroupIdNotFound.code()
        );
    }
    let listed = c
        .send(
            &ListGroupsRequest::default().with_types_filter(vec![s("consumer")]),
            5,
        )
        .await;
    assert_eq!(listed.groups.len(), 1);
    assert_eq!(listed.groups[0].group_type.as_str(), "consumer");

    // A group with live members keeps its offsets and cannot be deleted.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    b.broker
        .groups
        .expire_offsets(now + 30 * 24 * 3_600_000)
        .await;
    let delete = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s("kip848"))]);
    assert_eq!(
        c.send(&delete, 2).await.results[0].error_code,
        ResponseError::NonEmptyGroup.code()
    );
    let od = OffsetDeleteRequest::default()
        .with_group_id(GroupId(s("kip848")))
        .with_topics(vec![
            offset_delete_request::OffsetDeleteRequestTopic::default()
                .with_name(TopicName(s("t")))
                .with_partitions(vec![
                    offset_delete_request::OffsetDeleteRequestPartition::default()
                        .with_partition_index(0),
                ]),
        ]);
    assert_eq!(
        c.send(&od, 0).await.topics[0].partitions[0].error_code,
        ResponseError::GroupSubscribedToTopic.code()
    );
    let fetch = OffsetFetchRequest::default().with_groups(vec![
        offset_fetch_request::OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(s("kip848")))
            .with_topics(None),
    ]);
    assert_eq!(c.send(&fetch, 9).await.groups[0].topics.len(), 1);

    // A stale epoch is fenced; leaving hands the partitions back.
    let r = heartbeat(&mut c, "b", 7, Some(vec![])).await;
    assert_eq!(r.error_code, ResponseError::FencedMemberEpoch.code());
    let r = heartbeat(&mut c, "b", -1, None).await;
    assert_eq!((r.error_code, r.member_epoch), (0, -1));
    let r = heartbeat(&mut c, "a", 2, Some(a_kept)).await;
    assert_eq!(r.member_epoch, 3);
    assert_eq!(count(&owned(&r)), 4);

    // Once the last member leaves, the empty group stays until it is deleted.
    let r = heartbeat(&mut c, "a", -1, None).await;
    assert_eq!(r.error_code, 0);
    let listed = c.send(&ListGroupsRequest::default(), 5).await;
    assert_eq!(listed.groups[0].group_state.as_str(), "Empty");
    assert_eq!(c.send(&delete, 2).await.results[0].error_code, 0);
    b.stop().await;
}

#[tokio::test]
async fn version_0_gets_a_member_id_from_the_broker_and_v1_must_bring_one() {
    let dir = tempfile::tempdir().unwrap();
    let (b, mut c) = start_with_group(
        dir.path(),
        &[("offsets.topic.num.partitions", "1")],
        2,
        "v0",
    )
    .await;
    let join = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("v0")))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]))
        .with_topic_partitions(Some(vec![]));
    let r = c.send(&join, 0).await;
    assert_eq!((r.error_code, r.member_epoch), (0, 1));
    assert!(!r.member_id.as_deref().unwrap_or_default().is_empty());
    assert_eq!(count(&owned(&r)), 2);
    let r = c.send(&join, 1).await;
    assert_eq!(r.error_code, ResponseError::InvalidRequest.code());
    let bad_regex = join
        .clone()
        .with_member_id(s("m"))
        .with_subscribed_topic_names(None)
        .with_subscribed_topic_regex(Some(s("(")));
    assert_eq!(
        c.send(&bad_regex, 1).await.error_code,
        ResponseError::InvalidRegularExpression.code()
    );
    let bad_assignor = join
        .with_member_id(s("m"))
        .with_server_assignor(Some(s("nope")));
    assert_eq!(
        c.send(&bad_assignor, 1).await.error_code,
        ResponseError::UnsupportedAssignor.code()
    );
    b.stop().await;
}

/// The partitions of an assignment, sorted, for comparing across heartbeats.
fn flat(tps: &[TopicPartitions]) -> Vec<(uuid::Uuid, i32)> {
    let mut out: Vec<_> = tps
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, *p)))
        .collect();
    out.sort();
    out
}

async fn describe_epochs(c: &mut Client) -> (String, i32, i32) {
    let describe =
        ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("kip848"))]);
    let g = &c.send(&describe, 0).await.groups[0];
    assert_eq!(g.error_code, 0);
    (g.group_state.to_string(), g.group_epoch, g.assignment_epoch)
}

#[tokio::test]
async fn a_converged_group_survives_a_restart_at_the_same_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let config = &[("offsets.topic.num.partitions", "3")];
    let (b, mut c) = start_with_group(dir.path(), config, 4, "kip848").await;

    // Converge a and b to two partitions each at epoch 2.
    let a_all = owned(&heartbeat(&mut c, "a", 0, None).await);
    heartbeat(&mut c, "b", 0, None).await;
    let a_kept = owned(&heartbeat(&mut c, "a", 1, Some(a_all)).await);
    assert_eq!(
        heartbeat(&mut c, "a", 1, Some(a_kept.clone()))
            .await
            .member_epoch,
        2
    );
    let r = heartbeat(&mut c, "b", 2, Some(vec![])).await;
    let b_owned = owned(&r);
    assert_eq!(count(&b_owned), 2);
    let r = heartbeat(&mut c, "b", 2, Some(b_owned.clone())).await;
    assert_eq!((r.error_code, r.member_epoch), (0, 2));
    assert_eq!(describe_epochs(&mut c).await, ("Stable".to_string(), 2, 2));
    drop(c);
    b.stop().await;

    let b = TestBroker::start(dir.path(), config).await;
    let mut c = b.client().await;
    assert_eq!(
        describe_epochs(&mut c).await,
        ("Stable".to_string(), 2, 2),
        "the group comes back at its epochs"
    );
    // Both members carry on at epoch 2 with the partitions they had: nobody is fenced
    // and nothing moves.
    let r = heartbeat(&mut c, "a", 2, Some(a_kept.clone())).await;
    assert_eq!((r.error_code, r.member_epoch), (0, 2));
    assert_eq!(flat(&owned(&r)), flat(&a_kept));
    let r = heartbeat(&mut c, "b", 2, Some(b_owned.clone())).await;
    assert_eq!((r.error_code, r.member_epoch), (0, 2));
    assert_eq!(flat(&owned(&r)), flat(&b_owned));
    assert_eq!(
        describe_epochs(&mut c).await.1,
        2,
        "no rebalance after the restart"
    );

    // Commits at the member epoch are accepted by the restarted coordinator.
    let commit = OffsetCommitRequest::default()
        .with_group_id(GroupId(s("kip848")))
        .with_member_id(s("b"))
        .with_generation_id_or_member_epoch(2)
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(TopicName(s("t")))
                .with_partitions(vec![
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_partition_index(b_owned[0].partitions[0])
                        .with_committed_offset(5),
                ]),
        ]);
    assert_eq!(
        c.send(&commit, 9).await.topics[0].partitions[0].error_code,
        0
    );

    // b leaves; after another restart only a is left, owning everything at epoch 3.
    assert_eq!(heartbeat(&mut c, "b", -1, None).await.error_code, 0);
    let r = heartbeat(&mut c, "a", 2, Some(a_kept)).await;
    assert_eq!(r.member_epoch, 3);
    let a_all = owned(&r);
    assert_eq!(count(&a_all), 4);
    drop(c);
    b.stop().await;

    let b = TestBroker::start(dir.path(), config).await;
    let mut c = b.client().await;
    let r = heartbeat(&mut c, "b", 2, Some(vec![])).await;
    assert_eq!(r.error_code, ResponseError::UnknownMemberId.code());
    let r = heartbeat(&mut c, "a", 3, Some(a_all.clone())).await;
    assert_eq!((r.error_code, r.member_epoch), (0, 3));
    assert_eq!(flat(&owned(&r)), flat(&a_all));

    // An emptied and deleted group stays deleted across a restart.
    assert_eq!(heartbeat(&mut c, "a", -1, None).await.error_code, 0);
    let delete = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s("kip848"))]);
    assert_eq!(c.send(&delete, 2).await.results[0].error_code, 0);
    drop(c);
    b.stop().await;
    let b = TestBroker::start(dir.path(), config).await;
    let mut c = b.client().await;
    let describe =
        ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("kip848"))]);
    assert_eq!(
        c.send(&describe, 0).await.groups[0].error_code,
        ResponseError::GroupIdNotFound.code()
    );
    assert!(c
        .send(&ListGroupsRequest::default(), 5)
        .await
        .groups
        .is_empty());
    b.stop().await;
}

fn commit_request(group: &str, member: &str, epoch: i32) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(s(member))
        .with_generation_id_or_member_epoch(epoch)
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(TopicName(s("t")))
                .with_partitions(vec![
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(3),
                ]),
        ])
}

fn fetch_request(member: Option<&str>, epoch: i32) -> OffsetFetchRequest {
    OffsetFetchRequest::default().with_groups(vec![
        offset_fetch_request::OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(s("kip848")))
            .with_member_id(member.map(s))
            .with_member_epoch(epoch)
            .with_topics(None),
    ])
}

#[tokio::test]
async fn offset_commit_and_fetch_check_the_member_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let (b, mut c) = start_with_group(
        dir.path(),
        &[("offsets.topic.num.partitions", "1")],
        1,
        "kip848",
    )
    .await;
    let r = heartbeat(&mut c, "a", 0, None).await;
    assert_eq!(r.member_epoch, 1);

    let code = |resp: OffsetCommitResponse| resp.topics[0].partitions[0].error_code;
    assert_eq!(code(c.send(&commit_request("kip848", "a", 1), 9).await), 0);
    for (member, epoch, version, error) in [
        ("a", 0, 9, ResponseError::StaleMemberEpoch),
        ("a", 2, 9, ResponseError::StaleMemberEpoch),
        ("x", 1, 9, ResponseError::UnknownMemberId),
        // From outside the group while it has a member.
        ("", -1, 9, ResponseError::UnknownMemberId),
        // KIP-848 members must commit with v9 or later.
        ("a", 1, 8, ResponseError::UnsupportedVersion),
    ] {
        let resp = c
            .send(&commit_request("kip848", member, epoch), version)
            .await;
        assert_eq!(code(resp), error.code(), "{member} at {epoch}, v{version}");
    }
    // A commit into a group that does not exist, at an epoch: v9 names the problem.
    let resp = c.send(&commit_request("nobody", "m", 3), 9).await;
    assert_eq!(code(resp), ResponseError::GroupIdNotFound.code());
    let resp = c.send(&commit_request("nobody", "m", 3), 8).await;
    assert_eq!(code(resp), ResponseError::IllegalGeneration.code());

    for (member, epoch, error) in [
        (Some("a"), 1, 0),
        (None, -1, 0),
        (Some("a"), 0, ResponseError::StaleMemberEpoch.code()),
        (Some("a"), 2, ResponseError::StaleMemberEpoch.code()),
        (Some("x"), 1, ResponseError::UnknownMemberId.code()),
    ] {
        let g = &c.send(&fetch_request(member, epoch), 9).await.groups[0];
        assert_eq!(g.error_code, error, "{member:?} at {epoch}");
        if error == 0 {
            let p = &g.topics[0].partitions[0];
            assert_eq!((p.partition_index, p.committed_offset), (0, 3));
        }
    }
    b.stop().await;
}

/// A classic member of group "kip848": joins (with the v4+ member id round trip) and
/// syncs as the leader of a one-member group; returns its member id and generation.
async fn classic_member(c: &mut Client) -> (String, i32) {
    let join = |member: &str| {
        JoinGroupRequest::default()
            .with_group_id(GroupId(s("kip848")))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(10_000)
            .with_member_id(s(member))
            .with_protocol_type(s("consumer"))
            .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
            )
            .with_name(s("range"))
            .with_metadata(bytes::Bytes::from_static(
                b"\x00\x00\x00\x00\x00\x01\x00\x01t",
            ))])
    };
    let first = c.send(&join(""), 9).await;
    assert_eq!(first.error_code, ResponseError::MemberIdRequired.code());
    let member = first.member_id.to_string();
    let joined = c.send(&join(&member), 9).await;
    assert_eq!(joined.error_code, 0);
    let sync = SyncGroupRequest::default()
        .with_group_id(GroupId(s("kip848")))
        .with_generation_id(joined.generation_id)
        .with_member_id(s(&member))
        .with_protocol_type(Some(s("consumer")))
        .with_protocol_name(Some(s("range")))
        .with_assignments(vec![
            sync_group_request::SyncGroupRequestAssignment::default()
                .with_member_id(s(&member))
                .with_assignment(bytes::Bytes::from_static(b"mine")),
        ]);
    assert_eq!(c.send(&sync, 5).await.error_code, 0);
    (member, joined.generation_id)
}

async fn group_type(c: &mut Client) -> String {
    let listed = c.send(&ListGroupsRequest::default(), 5).await;
    assert_eq!(listed.groups.len(), 1);
    listed.groups[0].group_type.to_string()
}

#[tokio::test]
async fn an_empty_group_changes_protocol_and_stays_changed_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = &[
        ("offsets.topic.num.partitions", "1"),
        ("group.initial.rebalance.delay.ms", "0"),
    ];
    let (b, mut c) = start_with_group(dir.path(), config, 2, "kip848").await;

    // A classic group commits, then its only member leaves: an empty classic group.
    let (member, generation) = classic_member(&mut c).await;
    let commit = commit_request("kip848", &member, generation);
    assert_eq!(
        c.send(&commit, 8).await.topics[0].partitions[0].error_code,
        0
    );
    let leave = LeaveGroupRequest::default()
        .with_group_id(GroupId(s("kip848")))
        .with_members(vec![
            leave_group_request::MemberIdentity::default().with_member_id(s(&member))
        ]);
    assert_eq!(c.send(&leave, 3).await.error_code, 0);
    assert_eq!(group_type(&mut c).await, "classic");

    // A consumer-protocol member takes the empty group over.
    let r = heartbeat(&mut c, "a", 0, None).await;
    assert_eq!((r.error_code, r.member_epoch), (0, 1));
    let a_all = owned(&r);
    drop(c);
    b.stop().await;

    let b = TestBroker::start(dir.path(), config).await;
    let mut c = b.client().await;
    assert_eq!(group_type(&mut c).await, "consumer");
    let r = heartbeat(&mut c, "a", 1, Some(a_all)).await;
    assert_eq!((r.error_code, r.member_epoch), (0, 1));
    let fetched = &c.send(&fetch_request(Some("a"), 1), 9).await.groups[0];
    assert_eq!(
        fetched.topics[0].partitions[0].committed_offset, 3,
        "offsets kept"
    );

    // Empty again, the group goes back to the classic protocol with a JoinGroup.
    assert_eq!(heartbeat(&mut c, "a", -1, None).await.error_code, 0);
    classic_member(&mut c).await;
    assert_eq!(group_type(&mut c).await, "classic");
    drop(c);
    b.stop().await;

    let b = TestBroker::start(dir.path(), config).await;
    let mut c = b.client().await;
    assert_eq!(group_type(&mut c).await, "classic");
    let describe =
        ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("kip848"))]);
    assert_eq!(
        c.send(&describe, 0).await.groups[0].error_code,
        ResponseError::GroupIdNotFound.code()
    );
    let fetched = &c.send(&fetch_request(None, -1), 9).await.groups[0];
    assert_eq!(
        fetched.topics[0].partitions[0].committed_offset, 3,
        "offsets kept"
    );

    // In the log, each change of protocol first deletes the other kind's records.
    let records = offsets_topic_records(&mut c).await;
    let first_consumer = records.iter().position(|r| r.0 == 3).unwrap();
    assert!(
        records[..first_consumer].contains(&(2, false)),
        "classic tombstone"
    );
    let last_classic = records.iter().rposition(|r| *r == (2, true)).unwrap();
    let epoch_tombstone = records.iter().position(|r| *r == (3, false)).unwrap();
    assert!(
        epoch_tombstone < last_classic,
        "consumer group tombstoned first"
    );
    b.stop().await;
}

/// (record type, has a value) of every record in `__consumer_offsets` partition 0.
async fn offsets_topic_records(c: &mut Client) -> Vec<(i16, bool)> {
    let data = c.fetch("__consumer_offsets", 0, 0, 100, 1).await;
    let mut buf = data.records.unwrap_or_default();
    let batches = kafka_protocol::records::RecordBatchDecoder::decode_all(&mut buf).unwrap();
    batches
        .into_iter()
        .flat_map(|b| b.records)
        .filter(|r| !r.control)
        .map(|r| {
            let key = r.key.unwrap();
            (i16::from_be_bytes([key[0], key[1]]), r.value.is_some())
        })
        .collect()
}

/// A ConsumerGroupHeartbeat v1 of a static member (`group.instance.id`).
fn static_heartbeat(
    member: &str,
    instance: &str,
    epoch: i32,
    owned: Option<Vec<TopicPartitions>>,
) -> ConsumerGroupHeartbeatRequest {
    let mut req = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("static")))
        .with_member_id(s(member))
        .with_instance_id(Some(s(instance)))
        .with_member_epoch(epoch)
        .with_topic_partitions(owned);
    if epoch == 0 {
        req = req
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]))
            .with_topic_partitions(Some(vec![]));
    }
    req
}

async fn describe_static(c: &mut Client) -> (i32, Vec<(String, i32)>) {
    let describe =
        ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("static"))]);
    let g = c.send(&describe, 1).await.groups.remove(0);
    assert_eq!(g.error_code, 0);
    let members = g
        .members
        .iter()
        .map(|m| (m.member_id.to_string(), m.member_epoch))
        .collect();
    (g.group_epoch, members)
}

/// KIP-848 static membership as Kafka 4.x's GroupMetadataManager enforces it: an
/// instance id held by an active member is UNRELEASED_INSTANCE_ID for anyone else; the
/// member leaving with epoch -2 keeps its place and partitions for its next instance,
/// which takes over without a rebalance; a member that never comes back is removed
/// when its session expires.
#[tokio::test]
async fn static_members_hand_their_place_to_their_next_instance() {
    let dir = tempfile::tempdir().unwrap();
    let config = &[
        ("offsets.topic.num.partitions", "1"),
        ("group.consumer.session.timeout.ms", "1000"),
    ];
    let (b, mut c) = start_with_group(dir.path(), config, 2, "static").await;

    let r = c.send(&static_heartbeat("a1", "app-1", 0, None), 1).await;
    assert_eq!((r.error_code, r.member_epoch), (0, 1));
    let a1_owned = owned(&r);
    assert_eq!(count(&a1_owned), 2);

    // Another member with the same instance id while a1 is active.
    let r = c.send(&static_heartbeat("a2", "app-1", 0, None), 1).await;
    assert_eq!(r.error_code, ResponseError::UnreleasedInstanceId.code());
    // Heartbeating as the instance under another member id is fenced.
    let r = c
        .send(
            &static_heartbeat("a2", "app-1", 1, Some(a1_owned.clone())),
            1,
        )
        .await;
    assert_eq!(r.error_code, ResponseError::FencedInstanceId.code());

    // a1 leaves for now: epoch -2, still a member, nothing moves.
    let r = c.send(&static_heartbeat("a1", "app-1", -2, None), 1).await;
    assert_eq!((r.error_code, r.member_epoch), (0, -2));
    assert_eq!(
        describe_static(&mut c).await,
        (1, vec![("a1".to_string(), -2)])
    );

    // Its next instance takes over at once, with the same partitions, no rebalance.
    let r = c.send(&static_heartbeat("a2", "app-1", 0, None), 1).await;
    assert_eq!((r.error_code, r.member_epoch), (0, 1));
    assert_eq!(flat(&owned(&r)), flat(&a1_owned));
    assert_eq!(
        describe_static(&mut c).await,
        (1, vec![("a2".to_string(), 1)])
    );
    let r = c
        .send(
            &static_heartbeat("a1", "app-1", 1, Some(a1_owned.clone())),
            1,
        )
        .await;
    assert_eq!(r.error_code, ResponseError::FencedInstanceId.code());

    // a2 leaves for now and never comes back: its session expires and it is removed.
    let r = c.send(&static_heartbeat("a2", "app-1", -2, None), 1).await;
    assert_eq!((r.error_code, r.member_epoch), (0, -2));
    let mut expired = false;
    for _ in 0..50 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        if describe_static(&mut c).await == (2, vec![]) {
            expired = true;
            break;
        }
    }
    assert!(expired, "the static member's session expired");
    // The instance id is free: a new member joins at a new group epoch.
    let r = c.send(&static_heartbeat("a3", "app-1", 0, None), 1).await;
    assert_eq!((r.error_code, r.member_epoch), (0, 3));
    assert_eq!(count(&owned(&r)), 2);
    b.stop().await;
}
