//! Share groups in the group shard: a heartbeat's records go through the log, the
//! initialization's answer makes partitions assignable, a load of the same log rebuilds
//! the same group, and a share group's id is not another kind of group's.

use super::*;
use crate::coordinator::group::share::{ShareHeartbeat, TopicPartitionsById};

const GROUP: &str = "sg";

fn hb(member: &str, epoch: i32, topics: Option<&[&str]>) -> ShareHeartbeat {
    ShareHeartbeat {
        member_id: member.into(),
        member_epoch: epoch,
        subscribed: topics.map(|ts| ts.iter().map(|t| t.to_string()).collect()),
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        ..Default::default()
    }
}

async fn beat(rt: &Runtime, hb: ShareHeartbeat) -> Result<ShareHeartbeatAnswer, ResponseError> {
    let image = default_image();
    rt.write(0, move |s: &mut GroupShard| {
        s.share_heartbeat(GROUP, hb, image, Instant::now(), now_ms())
    })
    .await
}

async fn initialized(rt: &Runtime, topics: TopicPartitionsById, succeeded: bool) {
    rt.write(0, move |s: &mut GroupShard| {
        Ok(s.share_initialized(GROUP, &topics, succeeded))
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn members_share_partitions_once_initialized_and_a_load_rebuilds_the_group() {
    let log = Arc::new(MemoryLog::default());
    let rt = runtime(&log, default_image());
    let first = beat(&rt, hb("m1", 0, Some(&["t"]))).await.unwrap();
    assert_eq!(first.result.member_epoch, 1);
    assert_eq!(first.result.assignment, Some(vec![]));
    let req = first
        .initialize
        .expect("t's share-partitions to initialize");
    assert_eq!(req.topics[&Uuid::from_u128(1)].1.len(), 4);

    // A failed initialization is asked for again at the next heartbeat.
    initialized(&rt, req.topics.clone(), false).await;
    let again = beat(&rt, hb("m1", 1, None)).await.unwrap();
    let req = again.initialize.expect("asked again");
    initialized(&rt, req.topics, true).await;

    let m1 = beat(&rt, hb("m1", 1, None)).await.unwrap();
    assert_eq!(m1.result.member_epoch, 2);
    assert_eq!(
        m1.result.assignment,
        Some(vec![(Uuid::from_u128(1), vec![0, 1, 2, 3])])
    );
    assert!(m1.initialize.is_none());
    let m2 = beat(&rt, hb("m2", 0, Some(&["t"]))).await.unwrap();
    assert_eq!(m2.result.member_epoch, 3);
    let m1 = beat(&rt, hb("m1", 2, None)).await.unwrap();
    let (a, b) = (m1.result.assignment.unwrap(), m2.result.assignment.unwrap());
    assert_eq!(a[0].1.len() + b[0].1.len(), 4, "{a:?} {b:?}");

    let listed = rt.read(0, |s: &GroupShard| s.list_groups()).await.unwrap();
    assert_eq!(
        (
            listed[0].group_type,
            listed[0].state,
            listed[0].protocol_type.as_str()
        ),
        ("share", "Stable", "share")
    );
    let before = snapshot(&rt).await;
    let reloaded = runtime(&log, default_image());
    assert_eq!(snapshot(&reloaded).await, before);

    // The last member leaving empties the group; the group stays, Empty.
    beat(&reloaded, hb("m1", 3, None).clone()).await.unwrap();
    let left = beat(&reloaded, hb("m1", -1, None)).await.unwrap();
    assert_eq!(left.result.member_epoch, -1);
    beat(&reloaded, hb("m2", -1, None)).await.unwrap();
    let listed = reloaded
        .read(0, |s: &GroupShard| s.list_groups())
        .await
        .unwrap();
    assert_eq!(listed[0].state, "Empty");
}

#[tokio::test]
async fn a_share_group_id_is_not_another_kind_of_group() {
    let log = Arc::new(MemoryLog::default());
    let rt = runtime(&log, default_image());
    assert_eq!(
        beat(&rt, hb("m1", 1, None)).await.unwrap_err(),
        ResponseError::GroupIdNotFound,
        "no such group"
    );
    assert_eq!(
        beat(&rt, hb("m1", 0, None)).await.unwrap_err(),
        ResponseError::InvalidRequest,
        "joining without a subscription"
    );
    beat(&rt, hb("m1", 0, Some(&["t"]))).await.unwrap();
    // Offsets cannot be committed to a share group.
    let who = Committer {
        member_id: String::new(),
        instance: None,
        generation_id_or_member_epoch: -1,
        api_version: 9,
    };
    let commit = vec![CommitRequest {
        topic: "t".into(),
        partition: 0,
        offset: 1,
        leader_epoch: -1,
        metadata: None,
    }];
    let refused = rt
        .write(0, move |s: &mut GroupShard| {
            s.commit_offsets(GROUP, &who, None, commit, 0)
        })
        .await;
    assert_eq!(refused.unwrap_err(), ResponseError::GroupIdNotFound);
    // A consumer group's id cannot join as a share group.
    let image = default_image();
    let consumer = Heartbeat {
        member_id: "c1".into(),
        subscribed: Some(vec!["t".into()]),
        ..Default::default()
    };
    rt.write(0, move |s: &mut GroupShard| {
        s.consumer_heartbeat("cg", consumer, image, Instant::now(), now_ms())
    })
    .await
    .unwrap();
    let image = default_image();
    let refused = rt
        .write(0, move |s: &mut GroupShard| {
            s.share_heartbeat(
                "cg",
                hb("m1", 0, Some(&["t"])),
                image,
                Instant::now(),
                now_ms(),
            )
        })
        .await;
    assert_eq!(refused.unwrap_err(), ResponseError::GroupIdNotFound);
}
