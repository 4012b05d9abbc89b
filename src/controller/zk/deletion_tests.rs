//! Topic deletion, as Kafka's `TopicDeletionManager` runs it and its tests check it, on
//! an in-memory ZooKeeper.

use super::super::context::TopicPartition;
use super::super::states::ReplicaState;
use super::super::testkit::{stop_replica_to, update_metadata_to, Cluster};
use crate::zk::znodes::paths;

async fn ask_deletion(c: &mut Cluster, topic: &str) {
    c.admin
        .create_recursive(&paths::delete_topic(topic), &[])
        .await
        .unwrap();
    c.settle().await;
}

#[tokio::test]
async fn a_topic_is_deleted_once_every_replica_confirms() {
    let mut c = Cluster::start(&[1, 2], |_| {}).await;
    c.create_topic("t", &[(0, &[1, 2])]).await;
    c.sent();
    ask_deletion(&mut c, "t").await;
    let sent = c.sent();
    for b in [1, 2] {
        let um = update_metadata_to(&sent, b);
        assert!(
            um.iter().any(|s| s.leader.0 == -2),
            "leader -2 tells {b} to drop it"
        );
        let stops = stop_replica_to(&sent, b);
        assert!(stops.contains(&("t".to_string(), 0, false)));
        assert!(stops.contains(&("t".to_string(), 0, true)));
    }
    assert!(
        c.ensemble.read(&paths::topic("t")).is_some(),
        "not before the answers"
    );
    c.answer_deletions(&sent).await;
    assert!(c.ensemble.read(&paths::topic("t")).is_none());
    assert!(c.ensemble.read(&paths::delete_topic("t")).is_none());
    assert!(!c.l.ctx.assignments.contains_key("t"));
}

#[tokio::test]
async fn an_offline_replica_halts_the_deletion_until_its_broker_returns() {
    let mut c = Cluster::start(&[1, 2], |_| {}).await;
    c.create_topic("t", &[(0, &[1, 2])]).await;
    c.kill(2).await;
    c.sent();
    ask_deletion(&mut c, "t").await;
    let tp = TopicPartition::new("t", 0);
    assert_eq!(
        c.l.ctx.replica_state(&tp, 2),
        ReplicaState::DeletionIneligible
    );
    assert!(c.l.ctx.topics_ineligible_for_deletion.contains("t"));
    let sent = c.sent();
    c.answer_deletions(&sent).await;
    assert!(
        c.ensemble.read(&paths::topic("t")).is_some(),
        "2 has not confirmed"
    );
    c.restart(2).await;
    let sent = c.sent();
    assert!(stop_replica_to(&sent, 2).contains(&("t".to_string(), 0, true)));
    c.answer_deletions(&sent).await;
    assert!(c.ensemble.read(&paths::topic("t")).is_none());
}

#[tokio::test]
async fn with_deletion_disabled_the_request_is_removed_and_nothing_deleted() {
    let mut c = Cluster::start(&[1], |s| s.delete_topic_enable = false).await;
    c.create_topic("t", &[(0, &[1])]).await;
    ask_deletion(&mut c, "t").await;
    assert!(c.ensemble.read(&paths::delete_topic("t")).is_none());
    assert!(c.ensemble.read(&paths::topic("t")).is_some());
    assert!(c.state("t", 0).is_some());
}

#[tokio::test]
async fn a_deletion_of_an_unknown_topic_is_dropped() {
    let mut c = Cluster::start(&[1], |_| {}).await;
    ask_deletion(&mut c, "nope").await;
    assert!(c.ensemble.read(&paths::delete_topic("nope")).is_none());
}
