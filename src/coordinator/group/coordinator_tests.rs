//! The group coordinator's share groups with the share coordinator as their persister,
//! both on the coordinator runtime over in-memory logs: a member joins, the subscribed
//! share-partitions' state is initialized in `__share_group_state`, and the next
//! heartbeat assigns them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use super::coordinator::GroupCoordinator;
use super::settings::GroupSettings;
use super::share::ShareHeartbeat;
use super::topics::TopicImage;
use crate::coordinator::runtime::memory_log::MemoryLog;
use crate::coordinator::runtime::ShardStatus;
use crate::coordinator::share::coordinator::ShareCoordinator;
use crate::coordinator::share::SharePartitionKey;

const TOPIC: Uuid = Uuid::from_u128(0x77);

fn broker_config() -> Arc<crate::config::SharedConfig> {
    let props = BTreeMap::from([
        ("offsets.topic.num.partitions".to_string(), "1".to_string()),
        (
            "share.coordinator.state.topic.num.partitions".to_string(),
            "1".to_string(),
        ),
    ]);
    crate::config::SharedConfig::new(crate::config::BrokerConfig::from_properties(props).unwrap())
}

fn hb(epoch: i32, topics: Option<&[&str]>) -> ShareHeartbeat {
    ShareHeartbeat {
        member_id: "m1".into(),
        member_epoch: epoch,
        subscribed: topics.map(|ts| ts.iter().map(|t| t.to_string()).collect()),
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_share_member_is_assigned_once_the_share_coordinator_initialized_its_partitions() {
    let config = broker_config();
    let topics: Arc<TopicImage> = Arc::new(TopicImage::new([("t".to_string(), TOPIC, 2)]));
    let shares = Arc::new(ShareCoordinator::new(
        config.clone(),
        Arc::new(MemoryLog::default()),
        Arc::new(topics.clone()),
    ));
    assert_eq!(shares.load_now(0, 0), ShardStatus::Active);
    let groups = Arc::new(GroupCoordinator::new(
        GroupSettings::new(config),
        Arc::new(MemoryLog::default()),
        Arc::new(topics),
    ));
    assert_eq!(groups.on_elected(0, 0).await.unwrap(), ShardStatus::Active);
    groups.set_share_persister(shares.clone());

    let first = groups
        .share_heartbeat("sg", hb(0, Some(&["t"])))
        .await
        .unwrap();
    assert_eq!((first.member_epoch, first.assignment), (1, Some(vec![])));

    // The initialization runs after the answer; the next heartbeats assign both
    // partitions once it is recorded.
    let mut assigned = None;
    for _ in 0..100 {
        let r = groups.share_heartbeat("sg", hb(1, None)).await.unwrap();
        if r.assignment.is_some() {
            assigned = Some(r);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let r = assigned.expect("assigned after initialization");
    assert_eq!(r.member_epoch, 2);
    assert_eq!(r.assignment, Some(vec![(TOPIC, vec![0, 1])]));

    // The share coordinator holds both share-partitions, at the group epoch that asked
    // (a share-partition without state is refused a read), starting where
    // share.auto.offset.reset will say.
    for partition in [0, 1] {
        let state = shares.read(key(partition), -1).await.unwrap();
        assert_eq!((state.state_epoch, state.start_offset), (1, -1));
    }

    // A group with members is not deleted, and its state stays.
    assert_eq!(
        groups.delete_group("sg").await,
        Err(kafka_protocol::error::ResponseError::NonEmptyGroup)
    );
    assert_eq!(shares.read(key(0), -1).await.unwrap().state_epoch, 1);
    let reset = [(TOPIC, "t".to_string(), 0, 7)];
    assert_eq!(
        groups.alter_share_group_offsets("sg", &reset).await,
        Err(kafka_protocol::error::ResponseError::NonEmptyGroup),
        "offsets of a group with members"
    );
    groups.share_heartbeat("sg", hb(-1, None)).await.unwrap();

    // Empty: partition 0 starts again at 7 under the group's epoch, as Kafka's (3: the
    // member's leaving bumped it), higher than the state's, which fences a write made
    // under the old one.
    let outcomes = groups
        .alter_share_group_offsets("sg", &reset)
        .await
        .unwrap();
    assert_eq!(outcomes, vec![Ok(())]);
    let summary = shares.read_summary(key(0)).await.unwrap();
    assert_eq!((summary.state_epoch, summary.start_offset), (3, 7));
    let stale = crate::coordinator::share::StateWrite {
        state_epoch: 1,
        leader_epoch: 0,
        start_offset: 0,
        delivery_complete_count: 0,
        state_batches: Vec::new(),
    };
    assert_eq!(
        shares.write(key(0), stale).await,
        Err(kafka_protocol::error::ResponseError::FencedStateEpoch)
    );
    let (_, initialized) = groups.share_state_partitions("sg").await.unwrap();
    assert_eq!(initialized[&TOPIC].1, [0, 1].into_iter().collect());

    // DeleteShareGroupOffsets: the topic's state goes and the group forgets it.
    let outcomes = groups
        .delete_share_group_offsets("sg", &[TOPIC, Uuid::from_u128(5)])
        .await
        .unwrap();
    assert_eq!(
        outcomes,
        vec![
            Ok(()),
            Err(kafka_protocol::error::ResponseError::UnknownTopicOrPartition)
        ]
    );
    assert_eq!(shares.read_summary(key(0)).await.unwrap().start_offset, -1);
    assert!(groups
        .share_state_partitions("sg")
        .await
        .unwrap()
        .1
        .is_empty());

    // Once empty, the group goes (with what share-partition state it has left).
    groups.delete_group("sg").await.unwrap();
    for partition in [0, 1] {
        let refused = shares.read(key(partition), -1).await.map_err(|e| e.error);
        assert_eq!(
            refused,
            Err(kafka_protocol::error::ResponseError::InvalidRequest),
            "deleted"
        );
    }
    assert!(groups.list_groups().await.unwrap().is_empty());
    shares.shutdown();
    groups.shutdown();
}

fn key(partition: i32) -> SharePartitionKey {
    SharePartitionKey {
        group_id: "sg".into(),
        topic_id: TOPIC,
        partition,
    }
}

/// The share-partitions learn of a member that left (after the records taking it out are
/// committed): one whose session ran out, and one that left with epoch -1.
#[tokio::test]
async fn share_members_whose_session_ran_out_or_who_left_are_reported() {
    let props = BTreeMap::from([
        ("offsets.topic.num.partitions".to_string(), "1".to_string()),
        (
            "group.share.min.session.timeout.ms".to_string(),
            "200".to_string(),
        ),
        (
            "group.share.session.timeout.ms".to_string(),
            "200".to_string(),
        ),
        (
            "group.share.min.heartbeat.interval.ms".to_string(),
            "50".to_string(),
        ),
        (
            "group.share.heartbeat.interval.ms".to_string(),
            "50".to_string(),
        ),
    ]);
    let config = crate::config::SharedConfig::new(
        crate::config::BrokerConfig::from_properties(props).unwrap(),
    );
    let topics: Arc<TopicImage> = Arc::new(TopicImage::new([("t".to_string(), TOPIC, 1)]));
    let groups = Arc::new(GroupCoordinator::new(
        GroupSettings::new(config),
        Arc::new(MemoryLog::default()),
        Arc::new(topics),
    ));
    let left = Arc::new(parking_lot::Mutex::new(Vec::<(String, String)>::new()));
    let seen = left.clone();
    groups.set_share_member_listener(Arc::new(move |g: &str, m: &str| {
        seen.lock().push((g.to_string(), m.to_string()))
    }));
    assert_eq!(groups.on_elected(0, 0).await.unwrap(), ShardStatus::Active);

    let joined = |id: &str| ShareHeartbeat {
        member_id: id.into(),
        ..hb(0, Some(&["t"]))
    };
    groups.share_heartbeat("sg", joined("quiet")).await.unwrap();
    groups
        .share_heartbeat("sg", joined("leaving"))
        .await
        .unwrap();
    let leave = ShareHeartbeat {
        member_id: "leaving".into(),
        ..hb(-1, None)
    };
    groups.share_heartbeat("sg", leave).await.unwrap();
    assert_eq!(*left.lock(), vec![("sg".into(), "leaving".into())]);

    // "quiet" never heartbeats again: its session runs out after 200 ms.
    for _ in 0..100 {
        if left.lock().len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        *left.lock(),
        vec![
            ("sg".into(), "leaving".into()),
            ("sg".into(), "quiet".into())
        ]
    );
    groups.shutdown();
}
