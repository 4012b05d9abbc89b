//! Consumer groups over TCP: the classic group protocol and committed offsets, as
//! Kafka clients drive them.

use crate::common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const FAST: &[(&str, &str)] = &[
    ("group.initial.rebalance.delay.ms", "0"),
    ("group.min.session.timeout.ms", "100"),
    ("offsets.topic.num.partitions", "5"),
];

const SESSION_MS: i32 = 1000;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

fn gid(v: &str) -> GroupId {
    GroupId(s(v))
}

fn code(e: ResponseError) -> i16 {
    e.code()
}

async fn find_coordinator(c: &mut Client, group: &str) -> find_coordinator_response::Coordinator {
    let req = FindCoordinatorRequest::default()
        .with_key_type(0)
        .with_coordinator_keys(vec![s(group)]);
    let resp = c.send(&req, 4).await;
    resp.coordinators[0].clone()
}

fn join_request(group: &str, member_id: &str, version: i16) -> JoinGroupRequest {
    let mut req = JoinGroupRequest::default()
        .with_group_id(gid(group))
        .with_session_timeout_ms(SESSION_MS)
        .with_member_id(s(member_id))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
        )
        .with_name(s("range"))
        .with_metadata(Bytes::from_static(b"\x00\x00\x00\x00\x00\x01\x00\x01t"))]);
    if version >= 1 {
        req = req.with_rebalance_timeout_ms(5000);
    }
    req
}

/// Joins as a new member: the MEMBER_ID_REQUIRED round trip from v4, then the join.
async fn join(c: &mut Client, group: &str, version: i16) -> JoinGroupResponse {
    let resp = c.send(&join_request(group, "", version), version).await;
    if version < 4 {
        return resp;
    }
    assert_eq!(resp.error_code, code(ResponseError::MemberIdRequired));
    let member_id = resp.member_id.to_string();
    c.send(&join_request(group, &member_id, version), version)
        .await
}

async fn rejoin(c: &mut Client, group: &str, member_id: &str) -> JoinGroupResponse {
    c.send(&join_request(group, member_id, 9), 9).await
}

async fn sync(
    c: &mut Client,
    group: &str,
    member_id: &str,
    generation: i32,
    assignments: &[(&str, &str)],
    version: i16,
) -> SyncGroupResponse {
    let mut req = SyncGroupRequest::default()
        .with_group_id(gid(group))
        .with_generation_id(generation)
        .with_member_id(s(member_id))
        .with_assignments(
            assignments
                .iter()
                .map(|(m, a)| {
                    sync_group_request::SyncGroupRequestAssignment::default()
                        .with_member_id(s(m))
                        .with_assignment(Bytes::from(a.to_string()))
                })
                .collect(),
        );
    if version >= 5 {
        req = req
            .with_protocol_type(Some(s("consumer")))
            .with_protocol_name(Some(s("range")));
    }
    c.send(&req, version).await
}

async fn heartbeat(c: &mut Client, group: &str, member_id: &str, generation: i32) -> i16 {
    let req = HeartbeatRequest::default()
        .with_group_id(gid(group))
        .with_generation_id(generation)
        .with_member_id(s(member_id));
    c.send(&req, 4).await.error_code
}

async fn commit(
    c: &mut Client,
    group: &str,
    generation: i32,
    member_id: &str,
    offsets: &[(&str, i32, i64, &str)],
) -> Vec<i16> {
    let topics = offsets
        .iter()
        .map(|(t, p, o, m)| {
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(TopicName(s(t)))
                .with_partitions(vec![
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_partition_index(*p)
                        .with_committed_offset(*o)
                        .with_committed_metadata(Some(s(m))),
                ])
        })
        .collect();
    let req = OffsetCommitRequest::default()
        .with_group_id(gid(group))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(s(member_id))
        .with_topics(topics);
    let resp = c.send(&req, 8).await;
    resp.topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect()
}

/// (topic, partition, offset, metadata) of every committed offset, via OffsetFetch v8.
async fn fetch_all(c: &mut Client, group: &str) -> Vec<(String, i32, i64, String)> {
    let req = OffsetFetchRequest::default().with_groups(vec![
        offset_fetch_request::OffsetFetchRequestGroup::default()
            .with_group_id(gid(group))
            .with_topics(None),
    ]);
    let resp = c.send(&req, 8).await;
    assert_eq!(resp.groups[0].error_code, 0);
    let mut out: Vec<_> = resp.groups[0]
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    t.name.to_string(),
                    p.partition_index,
                    p.committed_offset,
                    p.metadata.as_deref().unwrap_or_default().to_string(),
                )
            })
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn two_members_share_the_work_and_one_takes_over_after_a_session_expires() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), FAST).await;
    let mut a = b.client().await;
    let coordinator = find_coordinator(&mut a, "workers").await;
    assert_eq!(coordinator.error_code, 0);
    assert_eq!(coordinator.port, b.addr.port() as i32);

    // The first member is alone: it leads generation 1.
    let ja = join(&mut a, "workers", 9).await;
    assert_eq!(ja.error_code, 0);
    let member_a = ja.member_id.to_string();
    assert_eq!(ja.leader.to_string(), member_a);
    assert_eq!(ja.generation_id, 1);
    assert_eq!(ja.protocol_name.as_deref(), Some("range"));
    let sa = sync(&mut a, "workers", &member_a, 1, &[(&member_a, "all")], 5).await;
    assert_eq!((sa.error_code, &sa.assignment[..]), (0, &b"all"[..]));

    // A second member joins (its JoinGroup waits); the leader learns from its heartbeat.
    let mut bc = b.client().await;
    let joining = tokio::spawn(async move {
        let jb = join(&mut bc, "workers", 9).await;
        (bc, jb)
    });
    let mut hb = 0;
    for _ in 0..50 {
        hb = heartbeat(&mut a, "workers", &member_a, 1).await;
        if hb != 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(hb, code(ResponseError::RebalanceInProgress));
    let ja = rejoin(&mut a, "workers", &member_a).await;
    let (mut bc, jb) = joining.await.unwrap();
    let member_b = jb.member_id.to_string();
    assert_eq!((ja.generation_id, jb.generation_id), (2, 2));
    assert_eq!(ja.members.len(), 2, "the leader sees both members");
    assert!(jb.members.is_empty());

    let follower = tokio::spawn(async move {
        let sb = sync(&mut bc, "workers", &member_b, 2, &[], 5).await;
        (bc, member_b, sb)
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let sa = sync(
        &mut a,
        "workers",
        &member_a,
        2,
        &[(&member_a, "p0"), (&jb.member_id, "p1")],
        5,
    )
    .await;
    let (mut bc, member_b, sb) = follower.await.unwrap();
    assert_eq!(&sa.assignment[..], b"p0");
    assert_eq!(&sb.assignment[..], b"p1");
    assert_eq!(heartbeat(&mut bc, "workers", &member_b, 2).await, 0);

    // b goes silent; a keeps heartbeating until told to rejoin, then owns everything.
    let mut hb = 0;
    for _ in 0..100 {
        hb = heartbeat(&mut a, "workers", &member_a, 2).await;
        if hb != 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(hb, code(ResponseError::RebalanceInProgress));
    let ja = rejoin(&mut a, "workers", &member_a).await;
    assert_eq!(ja.generation_id, 3);
    assert_eq!(ja.members.len(), 1);
    assert_eq!(
        heartbeat(&mut bc, "workers", &member_b, 2).await,
        code(ResponseError::UnknownMemberId)
    );
    b.stop().await;
}

/// Issue: the fault harness's group left partitions unread for minutes. A Java consumer
/// closed while its JoinGroup waited for a rebalance sends its LeaveGroup behind the
/// JoinGroup on the same connection, gives up on both after `request.timeout.ms` and
/// closes the connection. Kafka handles what it read before the close: once the
/// rebalance completes the member leaves (its log: the generation stabilized with the
/// member, then "Removing member ... on LeaveGroup"). skua dropped the LeaveGroup with
/// the closed connection, so the member, gone, kept the partitions the next generation
/// gave it until its session ran out, and was in every rebalance meanwhile.
#[tokio::test]
async fn a_leave_group_sent_behind_a_waiting_join_still_takes_its_member_out() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), FAST).await;
    let mut a = b.client().await;
    assert_eq!(find_coordinator(&mut a, "leavers").await.error_code, 0);
    // Both members have long sessions: only a LeaveGroup takes either out in this test.
    let long_session =
        |member: &str| join_request("leavers", member, 9).with_session_timeout_ms(30_000);
    let first = a.send(&long_session(""), 9).await;
    assert_eq!(first.error_code, code(ResponseError::MemberIdRequired));
    let member_a = first.member_id.to_string();
    let ja = a.send(&long_session(&member_a), 9).await;
    assert_eq!((ja.error_code, ja.generation_id), (0, 1));
    let sa = sync(&mut a, "leavers", &member_a, 1, &[(&member_a, "all")], 5).await;
    assert_eq!(sa.error_code, 0);

    // b joins; its JoinGroup waits for a to rejoin.
    let mut bc = b.client().await;
    let first = bc.send(&long_session(""), 9).await;
    assert_eq!(first.error_code, code(ResponseError::MemberIdRequired));
    let member_b = first.member_id.to_string();
    bc.write_request(&long_session(&member_b), 9).await;
    let mut hb = 0;
    for _ in 0..100 {
        hb = heartbeat(&mut a, "leavers", &member_a, 1).await;
        if hb != 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        hb,
        code(ResponseError::RebalanceInProgress),
        "b's join is in"
    );
    // b's consumer closes: a LeaveGroup behind the waiting JoinGroup, then the close.
    let leave = LeaveGroupRequest::default()
        .with_group_id(gid("leavers"))
        .with_members(vec![
            leave_group_request::MemberIdentity::default().with_member_id(s(&member_b))
        ]);
    bc.write_request(&leave, 5).await;
    tokio::io::AsyncWriteExt::shutdown(&mut bc.stream)
        .await
        .unwrap();
    drop(bc);
    tokio::time::sleep(Duration::from_millis(200)).await;

    // a rejoins: generation 2 has b in it (its JoinGroup was in), then b's LeaveGroup
    // runs and the group goes on without it, long before its 30 s session would end.
    let ja = a.send(&long_session(&member_a), 9).await;
    assert_eq!((ja.error_code, ja.generation_id), (0, 2));
    assert_eq!(ja.members.len(), 2, "b's join counted");
    // a leads it and hands b a share (refused if b's leave has already begun the next).
    let sa = sync(
        &mut a,
        "leavers",
        &member_a,
        2,
        &[(&member_a, "p0"), (&member_b, "p1")],
        5,
    )
    .await;
    assert!(
        [0, code(ResponseError::RebalanceInProgress)].contains(&sa.error_code),
        "{sa:?}"
    );
    let describe = DescribeGroupsRequest::default().with_groups(vec![gid("leavers")]);
    let mut members = Vec::new();
    for _ in 0..100 {
        let resp = a.send(&describe, 5).await;
        members = resp.groups[0]
            .members
            .iter()
            .map(|m| m.member_id.to_string())
            .collect::<Vec<_>>();
        if members == [member_a.clone()] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        members,
        vec![member_a.clone()],
        "b left through its LeaveGroup"
    );
    let ja = a.send(&long_session(&member_a), 9).await;
    assert_eq!(
        (ja.generation_id, ja.members.len()),
        (3, 1),
        "a generation of a alone"
    );
    b.stop().await;
}

#[tokio::test]
async fn commits_survive_a_restart_with_their_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), FAST).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("orders", 2).await, 0);
    assert_eq!(find_coordinator(&mut c, "billing").await.error_code, 0);
    let errors = commit(
        &mut c,
        "billing",
        -1,
        "",
        &[
            ("orders", 0, 42, "hello"),
            ("orders", 1, 7, ""),
            ("nope", 0, 1, ""),
        ],
    )
    .await;
    assert_eq!(
        errors,
        vec![0, 0, code(ResponseError::UnknownTopicOrPartition)]
    );
    // A later commit of the same partition wins.
    assert_eq!(
        commit(&mut c, "billing", -1, "", &[("orders", 1, 9, "x")]).await,
        vec![0]
    );
    let expected = vec![
        ("orders".to_string(), 0, 42, "hello".to_string()),
        ("orders".to_string(), 1, 9, "x".to_string()),
    ];
    assert_eq!(fetch_all(&mut c, "billing").await, expected);

    // Single-group OffsetFetch (v1–v7) of named partitions, one never committed.
    let req = OffsetFetchRequest::default()
        .with_group_id(gid("billing"))
        .with_topics(Some(vec![
            offset_fetch_request::OffsetFetchRequestTopic::default()
                .with_name(TopicName(s("orders")))
                .with_partition_indexes(vec![0, 5]),
        ]));
    let resp = c.send(&req, 7).await;
    assert_eq!(resp.error_code, 0);
    let parts = &resp.topics[0].partitions;
    assert_eq!(
        (parts[0].committed_offset, parts[0].metadata.as_deref()),
        (42, Some("hello"))
    );
    assert_eq!(
        (parts[1].committed_offset, parts[1].metadata.as_deref()),
        (-1, Some(""))
    );
    drop(c);
    b.stop().await;

    let b = TestBroker::start(dir.path(), FAST).await;
    let mut c = b.client().await;
    assert_eq!(fetch_all(&mut c, "billing").await, expected);
    b.stop().await;
}

#[tokio::test]
async fn group_metadata_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), FAST).await;
    let mut c = b.client().await;
    assert_eq!(find_coordinator(&mut c, "g").await.error_code, 0);
    let j = join(&mut c, "g", 9).await;
    let member = j.member_id.to_string();
    let sa = sync(&mut c, "g", &member, 1, &[(&member, "mine")], 5).await;
    assert_eq!(sa.error_code, 0);
    drop(c);
    b.stop().await;

    let b = TestBroker::start(dir.path(), FAST).await;
    let mut c = b.client().await;
    // The member, back within its session, carries on in the same generation.
    assert_eq!(heartbeat(&mut c, "g", &member, 1).await, 0);
    let sa = sync(&mut c, "g", &member, 1, &[], 5).await;
    assert_eq!(&sa.assignment[..], b"mine");
    b.stop().await;
}

#[tokio::test]
async fn list_describe_and_delete_groups() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), FAST).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("t", 1).await, 0);
    assert_eq!(find_coordinator(&mut c, "idle").await.error_code, 0);
    assert_eq!(
        commit(&mut c, "idle", -1, "", &[("t", 0, 5, "")]).await,
        vec![0]
    );
    let j = join(&mut c, "busy", 9).await;
    let member = j.member_id.to_string();
    assert_eq!(
        sync(&mut c, "busy", &member, 1, &[(&member, "a")], 5)
            .await
            .error_code,
        0
    );

    let resp = c.send(&ListGroupsRequest::default(), 5).await;
    let mut listed: Vec<_> = resp
        .groups
        .iter()
        .map(|g| {
            (
                g.group_id.to_string(),
                g.group_state.to_string(),
                g.group_type.to_string(),
            )
        })
        .collect();
    listed.sort();
    assert_eq!(
        listed,
        vec![
            ("busy".into(), "Stable".into(), "classic".into()),
            ("idle".into(), "Empty".into(), "classic".into())
        ]
    );
    let stable = ListGroupsRequest::default().with_states_filter(vec![s("stable")]);
    let resp = c.send(&stable, 4).await;
    assert_eq!(resp.groups.len(), 1);
    assert_eq!(resp.groups[0].group_id.to_string(), "busy");
    let consumer_type = ListGroupsRequest::default().with_types_filter(vec![s("consumer")]);
    assert!(c.send(&consumer_type, 5).await.groups.is_empty());

    let describe = DescribeGroupsRequest::default().with_groups(vec![gid("busy"), gid("ghost")]);
    let resp = c.send(&describe, 5).await;
    let busy = &resp.groups[0];
    assert_eq!((busy.error_code, busy.group_state.as_str()), (0, "Stable"));
    assert_eq!(
        (busy.protocol_type.as_str(), busy.protocol_data.as_str()),
        ("consumer", "range")
    );
    assert_eq!(busy.members.len(), 1);
    assert_eq!(&busy.members[0].member_assignment[..], b"a");
    assert_eq!(busy.members[0].client_id.as_str(), "skua-test");
    assert_eq!(busy.members[0].client_host.as_str(), "/127.0.0.1");
    assert_eq!(
        (
            resp.groups[1].error_code,
            resp.groups[1].group_state.as_str()
        ),
        (0, "Dead")
    );
    let resp = c.send(&describe, 6).await;
    assert_eq!(
        resp.groups[1].error_code,
        code(ResponseError::GroupIdNotFound)
    );

    let delete = DeleteGroupsRequest::default().with_groups_names(vec![
        gid("busy"),
        gid("idle"),
        gid("ghost"),
    ]);
    let resp = c.send(&delete, 2).await;
    let errors: Vec<i16> = resp.results.iter().map(|r| r.error_code).collect();
    assert_eq!(
        errors,
        vec![
            code(ResponseError::NonEmptyGroup),
            0,
            code(ResponseError::GroupIdNotFound)
        ]
    );
    assert!(fetch_all(&mut c, "idle").await.is_empty());

    // OffsetDelete: refused for a topic the Stable group consumes.
    let od = OffsetDeleteRequest::default()
        .with_group_id(gid("busy"))
        .with_topics(vec![
            offset_delete_request::OffsetDeleteRequestTopic::default()
                .with_name(TopicName(s("t")))
                .with_partitions(vec![
                    offset_delete_request::OffsetDeleteRequestPartition::default()
                        .with_partition_index(0),
                ]),
        ]);
    let resp = c.send(&od, 0).await;
    assert_eq!(resp.error_code, 0);
    assert_eq!(
        resp.topics[0].partitions[0].error_code,
        code(ResponseError::GroupSubscribedToTopic)
    );

    // After the member leaves, the group is Empty and can be deleted.
    let leave = LeaveGroupRequest::default()
        .with_group_id(gid("busy"))
        .with_members(vec![
            leave_group_request::MemberIdentity::default().with_member_id(s(&member))
        ]);
    let resp = c.send(&leave, 5).await;
    assert_eq!((resp.error_code, resp.members[0].error_code), (0, 0));
    let resp = c.send(&od, 0).await;
    assert_eq!(resp.topics[0].partitions[0].error_code, 0);
    let resp = c.send(&delete, 2).await;
    assert_eq!(resp.results[0].error_code, 0);
    b.stop().await;
}

/// Every advertised version of every group API is answered with a response that
/// decodes, on both the success and the error path.
#[tokio::test]
async fn every_version_of_the_group_apis_answers() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), FAST).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("t", 1).await, 0);
    for v in 0..=6 {
        let mut req = FindCoordinatorRequest::default().with_key_type(0);
        req = if v >= 4 {
            req.with_coordinator_keys(vec![s("g"), s("h")])
        } else {
            req.with_key(s("g"))
        };
        let resp = c.send(&req, v).await;
        let ok = if v >= 4 {
            resp.coordinators.iter().all(|c| c.error_code == 0)
        } else {
            resp.error_code == 0
        };
        assert!(ok, "FindCoordinator v{v}");
        if v == 0 {
            continue; // v0 has no key type
        }
        let txn = if v >= 4 {
            FindCoordinatorRequest::default()
                .with_key_type(1)
                .with_coordinator_keys(vec![s("tx")])
        } else {
            FindCoordinatorRequest::default()
                .with_key_type(1)
                .with_key(s("tx"))
        };
        let resp = c.send(&txn, v).await;
        let e = if v >= 4 {
            resp.coordinators[0].error_code
        } else {
            resp.error_code
        };
        // Transaction keys name this broker, the leader of the key's partition of
        // __transaction_state.
        assert_eq!(e, 0, "FindCoordinator v{v} txn");
    }
    for v in 0..=9 {
        let group = format!("v{v}");
        let j = join(&mut c, &group, v).await;
        assert_eq!(j.error_code, 0, "JoinGroup v{v}");
        let member = j.member_id.to_string();
        let sv = v.min(5);
        let sr = sync(
            &mut c,
            &group,
            &member,
            j.generation_id,
            &[(&member, "x")],
            sv,
        )
        .await;
        assert_eq!(
            (sr.error_code, &sr.assignment[..]),
            (0, &b"x"[..]),
            "SyncGroup v{sv}"
        );
        let bad = sync(&mut c, &group, "nobody", 1, &[], sv).await;
        assert_eq!(bad.error_code, code(ResponseError::UnknownMemberId));
        let hv = v.min(4);
        let hb = HeartbeatRequest::default()
            .with_group_id(gid(&group))
            .with_generation_id(j.generation_id)
            .with_member_id(s(&member));
        assert_eq!(c.send(&hb, hv).await.error_code, 0, "Heartbeat v{hv}");
        let lv = v.min(5);
        let leave = if lv >= 3 {
            LeaveGroupRequest::default()
                .with_group_id(gid(&group))
                .with_members(vec![
                    leave_group_request::MemberIdentity::default().with_member_id(s(&member))
                ])
        } else {
            LeaveGroupRequest::default()
                .with_group_id(gid(&group))
                .with_member_id(s(&member))
        };
        assert_eq!(c.send(&leave, lv).await.error_code, 0, "LeaveGroup v{lv}");
    }
    for v in 2..=9 {
        let mut p = offset_commit_request::OffsetCommitRequestPartition::default()
            .with_partition_index(0)
            .with_committed_offset(v as i64)
            .with_committed_metadata(Some(s("m")));
        if v >= 6 {
            p = p.with_committed_leader_epoch(3);
        }
        let mut req = OffsetCommitRequest::default()
            .with_group_id(gid("commits"))
            .with_topics(vec![
                offset_commit_request::OffsetCommitRequestTopic::default()
                    .with_name(TopicName(s("t")))
                    .with_partitions(vec![p]),
            ]);
        if v <= 4 {
            req = req.with_retention_time_ms(60_000);
        }
        let resp = c.send(&req, v).await;
        assert_eq!(
            resp.topics[0].partitions[0].error_code, 0,
            "OffsetCommit v{v}"
        );
    }
    for v in 1..=9 {
        let resp = if v >= 8 {
            let req = OffsetFetchRequest::default().with_groups(vec![
                offset_fetch_request::OffsetFetchRequestGroup::default()
                    .with_group_id(gid("commits"))
                    .with_topics(Some(vec![
                        offset_fetch_request::OffsetFetchRequestTopics::default()
                            .with_name(TopicName(s("t")))
                            .with_partition_indexes(vec![0]),
                    ])),
            ]);
            let resp = c.send(&req, v).await;
            resp.groups[0].topics[0].partitions[0].committed_offset
        } else {
            let req = OffsetFetchRequest::default()
                .with_group_id(gid("commits"))
                .with_topics(Some(vec![
                    offset_fetch_request::OffsetFetchRequestTopic::default()
                        .with_name(TopicName(s("t")))
                        .with_partition_indexes(vec![0]),
                ]));
            let resp = c.send(&req, v).await;
            resp.topics[0].partitions[0].committed_offset
        };
        assert_eq!(resp, 9, "OffsetFetch v{v}");
    }
    for v in 0..=5 {
        let resp = c.send(&ListGroupsRequest::default(), v).await;
        assert!(
            resp.groups.iter().any(|g| g.group_id.as_str() == "commits"),
            "ListGroups v{v}"
        );
    }
    for v in 0..=6 {
        let req = DescribeGroupsRequest::default().with_groups(vec![gid("commits"), gid("none")]);
        let resp = c.send(&req, v).await;
        assert_eq!(
            resp.groups[0].group_state.as_str(),
            "Empty",
            "DescribeGroups v{v}"
        );
    }
    for v in 0..=2 {
        let req = DeleteGroupsRequest::default().with_groups_names(vec![gid(&format!("v{v}"))]);
        assert_eq!(
            c.send(&req, v).await.results[0].error_code,
            0,
            "DeleteGroups v{v}"
        );
    }
    b.stop().await;
}

#[tokio::test]
async fn offsets_of_an_empty_group_expire_after_the_retention() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), FAST).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("t", 1).await, 0);
    assert_eq!(find_coordinator(&mut c, "old").await.error_code, 0);
    assert_eq!(
        commit(&mut c, "old", -1, "", &[("t", 0, 5, "")]).await,
        vec![0]
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    // Not yet: the default retention is seven days.
    b.broker.groups.expire_offsets(now + 60_000).await;
    assert_eq!(fetch_all(&mut c, "old").await.len(), 1);
    b.broker
        .groups
        .expire_offsets(now + 7 * 24 * 3_600_000 + 1)
        .await;
    assert!(fetch_all(&mut c, "old").await.is_empty());
    let resp = c.send(&ListGroupsRequest::default(), 4).await;
    assert!(
        resp.groups.is_empty(),
        "the group went with its last offset"
    );
    drop(c);
    b.stop().await;
    // The tombstones are what a restart replays.
    let b = TestBroker::start(dir.path(), FAST).await;
    let mut c = b.client().await;
    assert!(fetch_all(&mut c, "old").await.is_empty());
    b.stop().await;
}

#[tokio::test]
async fn join_limits_and_static_members() {
    let dir = tempfile::tempdir().unwrap();
    let mut overrides = FAST.to_vec();
    overrides.push(("group.max.size", "1"));
    let b = TestBroker::start(dir.path(), &overrides).await;
    let mut c = b.client().await;
    assert_eq!(find_coordinator(&mut c, "g").await.error_code, 0);

    let short = join_request("g", "", 9).with_session_timeout_ms(50);
    assert_eq!(
        c.send(&short, 9).await.error_code,
        code(ResponseError::InvalidSessionTimeout)
    );
    let empty_id = join_request("", "", 9);
    assert_eq!(
        c.send(&empty_id, 9).await.error_code,
        code(ResponseError::InvalidGroupId)
    );

    // A static member joins without the MEMBER_ID_REQUIRED round trip.
    let static_join = join_request("g", "", 9).with_group_instance_id(Some(s("host-1")));
    let j = c.send(&static_join, 9).await;
    assert_eq!(j.error_code, 0);
    let first_id = j.member_id.to_string();
    assert!(first_id.starts_with("host-1-"));
    let sr = sync(&mut c, "g", &first_id, 1, &[(&first_id, "p0")], 5).await;
    assert_eq!(sr.error_code, 0);

    // The group is full for anyone else.
    let mut other = b.client().await;
    assert_eq!(
        other.send(&join_request("g", "", 9), 9).await.error_code,
        code(ResponseError::GroupMaxSizeReached)
    );

    // The same instance restarts: new member id, same generation and assignment.
    let mut restarted = b.client().await;
    let j = restarted.send(&static_join, 9).await;
    assert_eq!((j.error_code, j.generation_id), (0, 1));
    assert!(j.skip_assignment, "the leader keeps the assignment it made");
    let new_id = j.member_id.to_string();
    assert_ne!(new_id, first_id);
    let sr = sync(&mut restarted, "g", &new_id, 1, &[], 5).await;
    assert_eq!(&sr.assignment[..], b"p0");
    let old = HeartbeatRequest::default()
        .with_group_id(gid("g"))
        .with_generation_id(1)
        .with_member_id(s(&first_id))
        .with_group_instance_id(Some(s("host-1")));
    assert_eq!(
        c.send(&old, 4).await.error_code,
        code(ResponseError::FencedInstanceId)
    );
    b.stop().await;
}

/// A deleted topic's committed offsets leave every group (Kafka's group coordinator
/// does this on topic deletion), so a topic created again under the name starts with
/// none; another topic's offsets stay, and a restart replays the removal.
#[tokio::test]
async fn offsets_of_a_deleted_topic_are_removed_from_groups() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), FAST).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("gone", 2).await, 0);
    assert_eq!(c.create_topic("kept", 1).await, 0);
    assert_eq!(find_coordinator(&mut c, "g").await.error_code, 0);
    assert_eq!(
        commit(
            &mut c,
            "g",
            -1,
            "",
            &[("gone", 0, 5, ""), ("gone", 1, 7, ""), ("kept", 0, 3, "")]
        )
        .await,
        vec![0, 0, 0]
    );
    let req = DeleteTopicsRequest::default()
        .with_topic_names(vec![TopicName(s("gone"))])
        .with_timeout_ms(5000);
    let resp = c.send(&req, 5).await;
    assert_eq!(resp.responses[0].error_code, 0);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let offsets = fetch_all(&mut c, "g").await;
        if offsets == vec![("kept".to_string(), 0, 3, String::new())] {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the deleted topic's offsets are gone: {offsets:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(c);
    b.stop().await;
    let b = TestBroker::start(dir.path(), FAST).await;
    let mut c = b.client().await;
    assert_eq!(
        fetch_all(&mut c, "g").await,
        vec![("kept".to_string(), 0, 3, String::new())]
    );
    b.stop().await;
}
