//! How the controller reacts to the cluster, as Kafka's `ControllerIntegrationTest`
//! exercises it, on an in-memory ZooKeeper: topics and partitions created, brokers
//! failing and coming back, controller failover, unclean elections, preferred
//! elections through ZooKeeper, controlled shutdown and ISR changes.

use super::super::event_loop::Event;
use super::super::testkit::{leader_and_isr_to, update_metadata_to, Cluster};
use crate::zk::znodes::{self, paths};

fn leader_epoch_isr(c: &Cluster, topic: &str, p: i32) -> (i32, i32, Vec<i32>) {
    let z = c.state(topic, p).expect("a state znode");
    (z.leader, z.leader_epoch, z.isr)
}

#[tokio::test]
async fn topic_creation_elects_the_first_replica_and_tells_every_broker() {
    let mut c = Cluster::start(&[1, 2, 3], |_| {}).await;
    c.sent();
    c.create_topic("t", &[(0, &[2, 3]), (1, &[3, 1])]).await;
    assert_eq!(leader_epoch_isr(&c, "t", 0), (2, 0, vec![2, 3]));
    assert_eq!(leader_epoch_isr(&c, "t", 1), (3, 0, vec![3, 1]));
    let sent = c.sent();
    let to_3 = leader_and_isr_to(&sent, 3);
    assert_eq!(to_3.len(), 2);
    assert!(to_3.iter().all(|s| s.is_new));
    for b in [1, 2, 3] {
        let um = update_metadata_to(&sent, b);
        assert!(
            um.iter().any(|s| s.partition_index == 1 && s.leader.0 == 3),
            "{b}"
        );
    }
}

#[tokio::test]
async fn topic_creation_with_an_offline_replica_leaves_it_out_of_the_isr() {
    let mut c = Cluster::start(&[1, 2], |_| {}).await;
    c.kill(2).await;
    c.create_topic("t", &[(0, &[2, 1])]).await;
    assert_eq!(leader_epoch_isr(&c, "t", 0), (1, 0, vec![1]));
}

#[tokio::test]
async fn partitions_added_to_a_topic_come_online() {
    let mut c = Cluster::start(&[1, 2], |_| {}).await;
    let id = c.create_topic("t", &[(0, &[1, 2])]).await;
    let a = znodes::TopicAssignment::new(
        crate::log::uuid_to_kafka_string(id),
        [(0, vec![1, 2]), (1, vec![2, 1])].into_iter().collect(),
    );
    c.admin
        .set(&paths::topic("t"), &znodes::encode(&a), None)
        .await
        .unwrap();
    c.settle().await;
    assert_eq!(leader_epoch_isr(&c, "t", 1), (2, 0, vec![2, 1]));
}

#[tokio::test]
async fn a_failed_leader_is_replaced_from_the_isr_and_leaves_it() {
    let mut c = Cluster::start(&[1, 2, 3], |_| {}).await;
    c.create_topic("t", &[(0, &[2, 3, 1])]).await;
    let rounds = c.l.shared.controller_stats.election_rounds();
    c.kill(2).await;
    let (leader, epoch, isr) = leader_epoch_isr(&c, "t", 0);
    assert_eq!((leader, isr), (3, vec![3, 1]));
    let stats = &c.l.shared.controller_stats;
    assert!(stats.election_rounds() > rounds, "the election was timed");
    assert_eq!(stats.unclean_elections(), 0);
    assert_eq!(epoch, 1, "one election; the dead leader was already out");
    c.sent();
    c.restart(2).await;
    let sent = c.sent();
    let to_2 = leader_and_isr_to(&sent, 2);
    assert_eq!(
        (to_2[0].leader.0, to_2[0].leader_epoch),
        (3, 1),
        "told on its return"
    );
}

#[tokio::test]
async fn the_whole_isr_offline_leaves_no_leader_until_its_last_member_returns() {
    let mut c = Cluster::start(&[1, 2, 3], |_| {}).await;
    c.create_topic("t", &[(0, &[2, 3])]).await;
    c.kill(3).await;
    assert_eq!(leader_epoch_isr(&c, "t", 0), (2, 1, vec![2]));
    c.kill(2).await;
    assert_eq!(
        leader_epoch_isr(&c, "t", 0),
        (-1, 2, vec![2]),
        "the last ISR member stays in it"
    );
    c.restart(3).await;
    assert_eq!(leader_epoch_isr(&c, "t", 0).0, -1, "3 is not in the ISR");
    c.restart(2).await;
    assert_eq!(leader_epoch_isr(&c, "t", 0), (2, 3, vec![2]));
}

#[tokio::test]
async fn unclean_election_enabled_elects_outside_the_isr() {
    let mut c = Cluster::start(&[1, 2, 3], |s| s.unclean_leader_election = true).await;
    c.create_topic("t", &[(0, &[2, 3])]).await;
    c.kill(3).await;
    c.kill(2).await;
    c.restart(3).await;
    let z = c.state("t", 0).unwrap();
    assert_eq!((z.leader, z.isr.clone()), (3, vec![3]));
    assert!(z.recovering());
    let stats = &c.l.shared.controller_stats;
    assert_eq!(stats.unclean_elections(), 1);
}

#[tokio::test]
async fn a_new_controller_has_a_higher_epoch_and_keeps_the_leaderships() {
    let mut c = Cluster::start(&[1, 2], |_| {}).await;
    c.create_topic("t", &[(0, &[2, 1])]).await;
    let epoch = c.l.ctx.epoch;
    c.sent();
    c.admin.delete(paths::CONTROLLER, None).await.unwrap();
    c.settle().await;
    assert!(c.l.is_active());
    assert_eq!(c.l.ctx.epoch, epoch + 1);
    assert_eq!(
        crate::zk::znodes::controller_epoch::decode(
            &c.ensemble.read(paths::CONTROLLER_EPOCH).unwrap()
        ),
        Some(epoch + 1)
    );
    assert_eq!(leader_epoch_isr(&c, "t", 0), (2, 0, vec![2, 1]));
    let sent = c.sent();
    let to_2 = leader_and_isr_to(&sent, 2);
    assert!(!to_2.is_empty(), "every replica is told again");
    for s in sent.iter().filter(|s| s.to == 2) {
        if let super::super::requests::ControlRequest::LeaderAndIsr { request, .. } = &s.request {
            assert_eq!(request.controller_epoch, epoch + 1);
        }
    }
}

#[tokio::test]
async fn a_stale_controller_is_fenced_and_resigns() {
    let mut c = Cluster::start(&[1, 2], |_| {}).await;
    c.create_topic("t", &[(0, &[1, 2])]).await;
    // Another controller was elected meanwhile: the epoch znode moved on.
    let data = znodes::controller_epoch::encode(c.l.ctx.epoch + 1);
    c.admin
        .set(paths::CONTROLLER_EPOCH, &data, None)
        .await
        .unwrap();
    c.kill(1 + 1).await;
    assert!(!c.l.is_active(), "its write was fenced");
    assert_eq!(
        leader_epoch_isr(&c, "t", 0),
        (1, 0, vec![1, 2]),
        "nothing written"
    );
}

#[tokio::test]
async fn a_topic_without_an_id_gets_one_written_back() {
    let mut c = Cluster::start(&[1], |_| {}).await;
    let mut a = znodes::TopicAssignment::new(String::new(), [(0, vec![1])].into_iter().collect());
    a.topic_id = None;
    c.admin
        .create_recursive(&paths::topic("old"), &znodes::encode(&a))
        .await
        .unwrap();
    c.settle().await;
    let z: znodes::TopicAssignment =
        znodes::decode(&c.ensemble.read(&paths::topic("old")).unwrap()).unwrap();
    let id = z.topic_id.expect("an id written");
    assert_eq!(
        crate::log::kafka_string_to_uuid(&id),
        c.l.ctx.topic_ids.get("old").copied()
    );
}

#[tokio::test]
async fn a_preferred_election_asked_through_zookeeper_moves_the_leader_back() {
    let mut c = Cluster::start(&[1, 2], |_| {}).await;
    c.create_topic("t", &[(0, &[2, 1])]).await;
    c.kill(2).await;
    c.restart(2).await;
    assert_eq!(c.alter_isr(1, "t", 0, &[1, 2]).await, 0);
    assert_eq!(leader_epoch_isr(&c, "t", 0).0, 1);
    c.admin
        .create_recursive(
            "/admin/preferred_replica_election",
            br#"{"version":1,"partitions":[{"topic":"t","partition":0}]}"#,
        )
        .await
        .unwrap();
    c.settle().await;
    assert_eq!(leader_epoch_isr(&c, "t", 0).0, 2);
    assert!(c
        .ensemble
        .read("/admin/preferred_replica_election")
        .is_none());
}

#[tokio::test]
async fn controlled_shutdown_moves_leaderships_away_and_out_of_the_isr() {
    let mut c = Cluster::start(&[1, 2, 3], |_| {}).await;
    c.create_topic("t", &[(0, &[2, 3]), (1, &[3, 2])]).await;
    let epoch = c.l.ctx.live_brokers[&2].epoch;
    let (reply, answer) = tokio::sync::oneshot::channel();
    let event = Event::ControlledShutdown {
        broker_id: 2,
        broker_epoch: epoch,
        reply,
    };
    assert!(c.l.handle(event).await.is_none());
    c.settle().await;
    assert_eq!(
        answer.await.unwrap().unwrap(),
        vec![],
        "2 leads nothing now"
    );
    assert_eq!(leader_epoch_isr(&c, "t", 0), (3, 1, vec![3]));
    assert_eq!(leader_epoch_isr(&c, "t", 1), (3, 1, vec![3]));
}

#[tokio::test]
async fn alter_partition_is_accepted_only_at_the_current_epochs_and_live_replicas() {
    let mut c = Cluster::start(&[1, 2, 3], |_| {}).await;
    c.create_topic("t", &[(0, &[1, 2, 3])]).await;
    assert_eq!(c.alter_isr(1, "t", 0, &[1, 2]).await, 0);
    assert_eq!(leader_epoch_isr(&c, "t", 0), (1, 0, vec![1, 2]));
    let tp = super::super::context::TopicPartition::new("t", 0);
    assert_eq!(c.l.ctx.leadership[&tp].leader_and_isr.partition_epoch, 1);
    c.kill(3).await;
    let ineligible = kafka_protocol::error::ResponseError::IneligibleReplica.code();
    assert_eq!(c.alter_isr(1, "t", 0, &[1, 2, 3]).await, ineligible);
    // A leader that knows a newer epoch than this controller: this one was deposed.
    let not_controller = kafka_protocol::error::ResponseError::NotController.code();
    assert_eq!(c.alter_isr_at(1, &tp, 1, 1, &[1]).await, not_controller);
    // A change made from a stale copy of the state.
    let stale = kafka_protocol::error::ResponseError::InvalidUpdateVersion.code();
    assert_eq!(c.alter_isr_at(1, &tp, 0, 0, &[1]).await, stale);
    assert_eq!(leader_epoch_isr(&c, "t", 0), (1, 0, vec![1, 2]));
}
