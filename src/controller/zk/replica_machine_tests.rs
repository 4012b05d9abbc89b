//! The replica state machine's transitions, as Kafka's `ReplicaStateMachineTest` checks
//! them, on an in-memory ZooKeeper: states kept, ISR changes written, and the
//! LeaderAndIsr and StopReplica requests sent.

use std::collections::BTreeMap;

use super::super::context::{Leadership, TopicPartition};
use super::super::leader_and_isr::LeaderAndIsr;
use super::super::states::ReplicaState;
use super::super::testkit::{leader_and_isr_to, stop_replica_to, Cluster};
use crate::zk::znodes::{self, paths};

use ReplicaState::*;

/// `t-0` with `replicas`, led by `leader` with `isr` (written to ZooKeeper), and
/// `replica` at `state`.
async fn replica(
    c: &mut Cluster,
    replicas: &[i32],
    leadership: Option<(i32, &[i32])>,
    replica: i32,
    state: ReplicaState,
) -> TopicPartition {
    let tp = TopicPartition::new("t", 0);
    c.admin.ensure_path(&paths::topic("t")).await.unwrap();
    c.l.ctx
        .assignments
        .insert("t".into(), BTreeMap::from([(0, replicas.to_vec())]));
    if let Some((leader, isr)) = leadership {
        let l = LeaderAndIsr::initial(leader, isr.to_vec());
        let data = znodes::encode(&l.to_znode(c.l.ctx.epoch));
        c.admin
            .create_recursive(&paths::partition_state("t", 0), &data)
            .await
            .unwrap();
        let leadership = Leadership {
            leader_and_isr: l,
            controller_epoch: c.l.ctx.epoch,
        };
        c.l.ctx.leadership.insert(tp.clone(), leadership);
    }
    if state != NonExistent {
        c.l.ctx.replica_states.insert((tp.clone(), replica), state);
    }
    c.sent();
    tp
}

async fn change(c: &mut Cluster, tp: &TopicPartition, r: i32, to: ReplicaState) {
    c.l.replica_changes(&[(tp.clone(), r)], to).await.unwrap();
}

#[tokio::test]
async fn startup_puts_replicas_on_live_brokers_online_and_the_others_offline() {
    let mut c = Cluster::start(&[1, 2], |_| {}).await;
    c.create_topic("t", &[(0, &[1, 2])]).await;
    c.kill(2).await;
    // `/controller` goes: the controller resigns, is elected again and reads it all.
    let epoch = c.l.ctx.epoch;
    c.admin.delete(paths::CONTROLLER, None).await.unwrap();
    c.settle().await;
    assert_eq!(c.l.ctx.epoch, epoch + 1);
    let tp = TopicPartition::new("t", 0);
    assert_eq!(c.l.ctx.replica_state(&tp, 1), Online);
    assert_eq!(c.l.ctx.replica_state(&tp, 2), Offline);
}

#[tokio::test]
async fn nonexistent_to_new_tells_the_replica_its_leader() {
    let mut c = Cluster::start(&[1, 2], |_| {}).await;
    let tp = replica(&mut c, &[1, 2], Some((1, &[1])), 2, NonExistent).await;
    change(&mut c, &tp, 2, New).await;
    assert_eq!(c.l.ctx.replica_state(&tp, 2), New);
    let states = leader_and_isr_to(&c.sent(), 2);
    assert_eq!(states.len(), 1);
    assert!(states[0].is_new);
    assert_eq!(states[0].leader.0, 1);
}

#[tokio::test]
async fn a_new_replica_cannot_be_the_leader() {
    let mut c = Cluster::start(&[1, 2], |_| {}).await;
    let tp = replica(&mut c, &[1, 2], Some((2, &[2])), 2, NonExistent).await;
    change(&mut c, &tp, 2, New).await;
    assert_eq!(c.l.ctx.replica_state(&tp, 2), NonExistent);
    assert!(leader_and_isr_to(&c.sent(), 2).is_empty());
}

#[tokio::test]
async fn nonexistent_goes_nowhere_but_new() {
    let mut c = Cluster::start(&[1], |_| {}).await;
    let tp = replica(&mut c, &[1], Some((1, &[1])), 1, NonExistent).await;
    for to in [
        Online,
        Offline,
        DeletionStarted,
        DeletionSuccessful,
        DeletionIneligible,
    ] {
        change(&mut c, &tp, 1, to).await;
        assert_eq!(c.l.ctx.replica_state(&tp, 1), NonExistent, "to {to:?}");
    }
    assert!(c.sent().is_empty());
}

#[tokio::test]
async fn new_to_online_sends_nothing_more() {
    let mut c = Cluster::start(&[1, 2], |_| {}).await;
    let tp = replica(&mut c, &[1, 2], Some((1, &[1, 2])), 2, New).await;
    change(&mut c, &tp, 2, Online).await;
    assert_eq!(c.l.ctx.replica_state(&tp, 2), Online);
    assert!(leader_and_isr_to(&c.sent(), 2).is_empty());
}

#[tokio::test]
async fn online_to_online_sends_the_leadership_again() {
    let mut c = Cluster::start(&[1, 2], |_| {}).await;
    let tp = replica(&mut c, &[1, 2], Some((1, &[1, 2])), 2, Online).await;
    change(&mut c, &tp, 2, Online).await;
    let states = leader_and_isr_to(&c.sent(), 2);
    assert_eq!(states.len(), 1);
    assert!(!states[0].is_new);
}

#[tokio::test]
async fn online_to_offline_stops_the_replica_and_takes_it_out_of_the_isr() {
    let mut c = Cluster::start(&[1, 2], |_| {}).await;
    let tp = replica(&mut c, &[1, 2], Some((2, &[2, 1])), 2, Online).await;
    change(&mut c, &tp, 2, Offline).await;
    assert_eq!(c.l.ctx.replica_state(&tp, 2), Offline);
    let z = c.state("t", 0).unwrap();
    assert_eq!(
        (z.leader, z.leader_epoch, z.isr.clone()),
        (-1, 1, vec![1]),
        "it led: no leader until an election"
    );
    let sent = c.sent();
    assert_eq!(stop_replica_to(&sent, 2), vec![("t".to_string(), 0, false)]);
    let to_1 = leader_and_isr_to(&sent, 1);
    assert_eq!((to_1[0].leader.0, to_1[0].leader_epoch), (-1, 1));
    assert!(leader_and_isr_to(&sent, 2).is_empty());
}

#[tokio::test]
async fn the_last_isr_member_stays_in_the_isr() {
    let mut c = Cluster::start(&[1, 2], |_| {}).await;
    let tp = replica(&mut c, &[1, 2], Some((2, &[2])), 2, Online).await;
    change(&mut c, &tp, 2, Offline).await;
    let z = c.state("t", 0).unwrap();
    assert_eq!((z.leader, z.isr.clone()), (-1, vec![2]));
}

#[tokio::test]
async fn deletion_goes_from_offline_through_started_and_successful_to_nonexistent() {
    let mut c = Cluster::start(&[1, 2], |_| {}).await;
    let tp = replica(&mut c, &[1, 2], Some((1, &[1, 2])), 2, Online).await;
    change(&mut c, &tp, 2, DeletionStarted).await;
    assert_eq!(c.l.ctx.replica_state(&tp, 2), Online, "not from online");
    change(&mut c, &tp, 2, Offline).await;
    c.sent();
    change(&mut c, &tp, 2, DeletionStarted).await;
    assert_eq!(c.l.ctx.replica_state(&tp, 2), DeletionStarted);
    assert_eq!(
        stop_replica_to(&c.sent(), 2),
        vec![("t".to_string(), 0, true)]
    );
    change(&mut c, &tp, 2, NonExistent).await;
    assert_eq!(c.l.ctx.replica_state(&tp, 2), DeletionStarted, "not yet");
    change(&mut c, &tp, 2, DeletionSuccessful).await;
    change(&mut c, &tp, 2, NonExistent).await;
    assert_eq!(c.l.ctx.replica_state(&tp, 2), NonExistent);
    assert_eq!(c.l.ctx.replicas(&tp), &[1], "gone from the assignment");
}

#[tokio::test]
async fn an_ineligible_deletion_can_come_back_online() {
    let mut c = Cluster::start(&[1, 2], |_| {}).await;
    let tp = replica(&mut c, &[1, 2], Some((1, &[1, 2])), 2, DeletionStarted).await;
    change(&mut c, &tp, 2, DeletionIneligible).await;
    assert_eq!(c.l.ctx.replica_state(&tp, 2), DeletionIneligible);
    change(&mut c, &tp, 2, Online).await;
    assert_eq!(c.l.ctx.replica_state(&tp, 2), Online);
    assert_eq!(leader_and_isr_to(&c.sent(), 2).len(), 1);
}
