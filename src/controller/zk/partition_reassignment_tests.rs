//! Partition reassignment (KIP-455's phases as Kafka's controller runs them), on an
//! in-memory ZooKeeper: the full replica set written first, the new replicas told,
//! completion once the targets are in the ISR, and a new controller finishing it.

use std::collections::BTreeMap;

use super::super::context::TopicPartition;
use super::super::event_loop::Event;
use super::super::testkit::{leader_and_isr_to, stop_replica_to, Cluster};
use crate::zk::znodes::{self, paths};

fn assignment(c: &Cluster, topic: &str) -> znodes::TopicAssignment {
    znodes::decode(&c.ensemble.read(&paths::topic(topic)).unwrap()).unwrap()
}

async fn reassign(c: &mut Cluster, tp: &TopicPartition, target: Option<Vec<i32>>) {
    let (reply, answer) = tokio::sync::oneshot::channel();
    let event = Event::AlterPartitionReassignments {
        reassignments: BTreeMap::from([(tp.clone(), target)]),
        reply,
    };
    assert!(c.l.handle(event).await.is_none());
    c.settle().await;
    let results = answer.await.unwrap().unwrap();
    assert!(results[tp].is_ok(), "{results:?}");
}

#[tokio::test]
async fn a_reassignment_completes_when_the_targets_are_in_sync() {
    let mut c = Cluster::start(&[1, 2, 3], |_| {}).await;
    c.create_topic("t", &[(0, &[1, 2])]).await;
    let tp = TopicPartition::new("t", 0);
    c.sent();
    reassign(&mut c, &tp, Some(vec![3, 2])).await;
    let a = assignment(&c, "t");
    assert_eq!(
        a.partitions.0[&0],
        vec![3, 2, 1],
        "RS = TRS ++ ORS, written first"
    );
    assert_eq!(a.adding_replicas.0[&0], vec![3]);
    assert_eq!(a.removing_replicas.0[&0], vec![1]);
    let z = c.state("t", 0).unwrap();
    assert_eq!(
        (z.leader, z.leader_epoch),
        (1, 1),
        "the epoch bumped for the new set"
    );
    let to_3 = leader_and_isr_to(&c.sent(), 3);
    assert!(to_3[0].is_new);
    // The leader takes 3 into the ISR once it caught up: the move finishes.
    assert_eq!(c.alter_isr(1, "t", 0, &[1, 2, 3]).await, 0);
    let a = assignment(&c, "t");
    assert_eq!(a.partitions.0[&0], vec![3, 2]);
    assert!(a.adding_replicas.0.is_empty() && a.removing_replicas.0.is_empty());
    let z = c.state("t", 0).unwrap();
    assert_eq!(z.leader, 3, "the old leader is not a target");
    assert!(!z.isr.contains(&1));
    let sent = c.sent();
    assert!(stop_replica_to(&sent, 1).contains(&("t".to_string(), 0, true)));
    assert!(c.l.ctx.partitions_being_reassigned.is_empty());
}

#[tokio::test]
async fn a_cancelled_reassignment_goes_back_to_the_original_replicas() {
    let mut c = Cluster::start(&[1, 2, 3], |_| {}).await;
    c.create_topic("t", &[(0, &[1, 2])]).await;
    let tp = TopicPartition::new("t", 0);
    reassign(&mut c, &tp, Some(vec![3, 2])).await;
    reassign(&mut c, &tp, None).await;
    let a = assignment(&c, "t");
    // Kafka's `originReplicas` is RS minus AR: the original set, in RS's order.
    assert_eq!(a.partitions.0[&0], vec![2, 1]);
    assert!(a.adding_replicas.0.is_empty());
    assert!(stop_replica_to(&c.sent(), 3).contains(&("t".to_string(), 0, true)));
    assert_eq!(c.state("t", 0).unwrap().leader, 1);
}

#[tokio::test]
async fn a_new_controller_finishes_a_reassignment_the_znodes_show_under_way() {
    let mut c = Cluster::start(&[1, 2, 3], |_| {}).await;
    c.create_topic("t", &[(0, &[1, 2])]).await;
    let tp = TopicPartition::new("t", 0);
    reassign(&mut c, &tp, Some(vec![3, 2])).await;
    assert_eq!(
        c.alter_isr(1, "t", 0, &[1, 2]).await,
        0,
        "3 not caught up yet"
    );
    // The ISR grows while no controller acts on it; the next one finishes the move.
    let mut z = c.state("t", 0).unwrap();
    z.isr = vec![1, 2, 3];
    c.admin
        .set(&paths::partition_state("t", 0), &znodes::encode(&z), None)
        .await
        .unwrap();
    c.admin.delete(paths::CONTROLLER, None).await.unwrap();
    c.settle().await;
    assert_eq!(assignment(&c, "t").partitions.0[&0], vec![3, 2]);
    assert_eq!(c.state("t", 0).unwrap().leader, 3);
}

#[tokio::test]
async fn a_cancel_that_would_drop_every_in_sync_replica_is_refused() {
    let mut c = Cluster::start(&[1, 2, 3, 4], |_| {}).await;
    c.create_topic("t", &[(0, &[2, 3])]).await;
    let tp = TopicPartition::new("t", 0);
    reassign(&mut c, &tp, Some(vec![1, 4])).await;
    assert_eq!(
        c.alter_isr(2, "t", 0, &[2, 3, 1]).await,
        0,
        "4 not caught up yet"
    );
    c.kill(2).await;
    c.kill(3).await;
    let z = c.state("t", 0).unwrap();
    assert_eq!(
        (z.leader, z.isr.clone()),
        (1, vec![1]),
        "only an adding replica is in sync"
    );
    let (reply, answer) = tokio::sync::oneshot::channel();
    let event = Event::AlterPartitionReassignments {
        reassignments: BTreeMap::from([(tp.clone(), None)]),
        reply,
    };
    assert!(c.l.handle(event).await.is_none());
    c.settle().await;
    let results = answer.await.unwrap().unwrap();
    let invalid = kafka_protocol::error::ResponseError::InvalidReplicaAssignment;
    assert_eq!(results[&tp].as_ref().unwrap_err().0, invalid);
    let z = c.state("t", 0).unwrap();
    assert_eq!((z.leader, z.isr.clone()), (1, vec![1]), "nothing changed");
    assert_eq!(assignment(&c, "t").partitions.0[&0], vec![1, 4, 2, 3]);
}
