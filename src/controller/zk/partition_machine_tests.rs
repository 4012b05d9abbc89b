//! The partition state machine's transitions, as Kafka's `PartitionStateMachineTest`
//! checks them, on an in-memory ZooKeeper: the `state` znodes written, the states kept,
//! and the LeaderAndIsr requests sent.

use std::collections::BTreeMap;

use super::super::context::{Leadership, TopicPartition};
use super::super::leader_and_isr::LeaderAndIsr;
use super::super::leader_election::Strategy;
use super::super::states::PartitionState;
use super::super::testkit::{leader_and_isr_to, Cluster};
use crate::zk::znodes::{self, paths};

use PartitionState::*;

/// `t-0` with `replicas` in the controller's context at `state`; with `leadership`
/// (leader, ISR, leader epoch) its `state` znode is written first, as an earlier
/// controller of this epoch left it.
async fn partition(
    c: &mut Cluster,
    replicas: &[i32],
    leadership: Option<(i32, &[i32], i32)>,
    state: PartitionState,
) -> TopicPartition {
    let tp = TopicPartition::new("t", 0);
    // The topic's znode (its events are left queued: the test drives the machine).
    c.admin.ensure_path(&paths::topic("t")).await.unwrap();
    c.l.ctx
        .assignments
        .insert("t".into(), BTreeMap::from([(0, replicas.to_vec())]));
    if let Some((leader, isr, leader_epoch)) = leadership {
        let l = LeaderAndIsr {
            leader_epoch,
            ..LeaderAndIsr::initial(leader, isr.to_vec())
        };
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
    c.l.ctx.partition_states.insert(tp.clone(), state);
    c.sent();
    tp
}

async fn change(c: &mut Cluster, tp: &TopicPartition, to: PartitionState, s: Option<Strategy>) {
    c.l.partition_changes(std::slice::from_ref(tp), to, s)
        .await
        .unwrap();
}

#[tokio::test]
async fn nonexistent_to_new() {
    let mut c = Cluster::start(&[1], |_| {}).await;
    let tp = partition(&mut c, &[1], None, NonExistent).await;
    change(&mut c, &tp, New, None).await;
    assert_eq!(c.l.ctx.partition_state(&tp), New);
    assert!(
        c.state("t", 0).is_none(),
        "a new partition has no state znode yet"
    );
}

#[tokio::test]
async fn nonexistent_to_online_or_offline_is_refused() {
    let mut c = Cluster::start(&[1], |_| {}).await;
    let tp = partition(&mut c, &[1], None, NonExistent).await;
    change(&mut c, &tp, Online, None).await;
    assert_eq!(c.l.ctx.partition_state(&tp), NonExistent);
    change(&mut c, &tp, Offline, None).await;
    assert_eq!(c.l.ctx.partition_state(&tp), NonExistent);
    assert!(c.state("t", 0).is_none());
    assert!(c.sent().is_empty());
}

#[tokio::test]
async fn new_to_online_writes_the_first_leader_and_isr() {
    let mut c = Cluster::start(&[1, 2, 3], |_| {}).await;
    c.kill(2).await;
    let tp = partition(&mut c, &[2, 1, 3], None, New).await;
    change(&mut c, &tp, Online, None).await;
    assert_eq!(c.l.ctx.partition_state(&tp), Online);
    let z = c.state("t", 0).unwrap();
    assert_eq!(
        (z.leader, z.leader_epoch, z.isr.clone(), z.controller_epoch),
        (1, 0, vec![1, 3], c.l.ctx.epoch),
        "the first live replica leads, the live replicas are in sync"
    );
    let sent = c.sent();
    for b in [1, 3] {
        let states = leader_and_isr_to(&sent, b);
        assert_eq!(states.len(), 1, "broker {b}");
        assert!(states[0].is_new);
        assert_eq!(states[0].leader.0, 1);
    }
    assert!(leader_and_isr_to(&sent, 2).is_empty(), "2 is offline");
}

#[tokio::test]
async fn new_to_online_with_a_state_znode_there_already_stays_new() {
    let mut c = Cluster::start(&[1, 2], |_| {}).await;
    let tp = partition(&mut c, &[1, 2], Some((2, &[2], 3)), New).await;
    change(&mut c, &tp, Online, None).await;
    assert_eq!(c.l.ctx.partition_state(&tp), New);
    assert_eq!(c.state("t", 0).unwrap().leader, 2, "not overwritten");
    assert!(leader_and_isr_to(&c.sent(), 1).is_empty());
}

#[tokio::test]
async fn new_with_no_live_replica_stays_new() {
    let mut c = Cluster::start(&[1, 2], |_| {}).await;
    c.kill(2).await;
    let tp = partition(&mut c, &[2], None, New).await;
    change(&mut c, &tp, Online, None).await;
    assert_eq!(c.l.ctx.partition_state(&tp), New);
    assert!(c.state("t", 0).is_none());
}

#[tokio::test]
async fn new_to_offline_and_not_to_nonexistent() {
    let mut c = Cluster::start(&[1], |_| {}).await;
    let tp = partition(&mut c, &[1], None, New).await;
    change(&mut c, &tp, NonExistent, None).await;
    assert_eq!(c.l.ctx.partition_state(&tp), New);
    change(&mut c, &tp, Offline, None).await;
    assert_eq!(c.l.ctx.partition_state(&tp), Offline);
}

#[tokio::test]
async fn online_to_online_elects_the_preferred_replica() {
    let mut c = Cluster::start(&[1, 2], |_| {}).await;
    let tp = partition(&mut c, &[2, 1], Some((1, &[1, 2], 4)), Online).await;
    change(&mut c, &tp, Online, Some(Strategy::Preferred)).await;
    let z = c.state("t", 0).unwrap();
    assert_eq!(
        (z.leader, z.leader_epoch, z.isr.clone()),
        (2, 5, vec![1, 2])
    );
    let l = &c.l.ctx.leadership[&tp].leader_and_isr;
    assert_eq!(l.partition_epoch, 1, "the znode's version after the write");
    let sent = c.sent();
    for b in [1, 2] {
        let states = leader_and_isr_to(&sent, b);
        assert_eq!(states.len(), 1);
        assert_eq!((states[0].leader.0, states[0].leader_epoch), (2, 5));
        assert!(!states[0].is_new);
    }
}

#[tokio::test]
async fn online_to_online_for_controlled_shutdown_moves_the_leader_and_shrinks_the_isr() {
    let mut c = Cluster::start(&[1, 2], |_| {}).await;
    c.l.ctx.shutting_down.insert(2);
    let tp = partition(&mut c, &[2, 1], Some((2, &[2, 1], 0)), Online).await;
    change(&mut c, &tp, Online, Some(Strategy::ControlledShutdown)).await;
    let z = c.state("t", 0).unwrap();
    assert_eq!((z.leader, z.leader_epoch, z.isr.clone()), (1, 1, vec![1]));
    assert_eq!(c.l.ctx.partition_state(&tp), Online);
}

#[tokio::test]
async fn online_to_offline_and_not_to_new_or_nonexistent() {
    let mut c = Cluster::start(&[1], |_| {}).await;
    let tp = partition(&mut c, &[1], Some((1, &[1], 0)), Online).await;
    change(&mut c, &tp, NonExistent, None).await;
    change(&mut c, &tp, New, None).await;
    assert_eq!(c.l.ctx.partition_state(&tp), Online);
    change(&mut c, &tp, Offline, None).await;
    assert_eq!(c.l.ctx.partition_state(&tp), Offline);
    assert_eq!(
        c.state("t", 0).unwrap().leader,
        1,
        "going offline writes nothing"
    );
}

#[tokio::test]
async fn offline_to_online_elects_a_live_isr_member() {
    let mut c = Cluster::start(&[1, 2, 3], |_| {}).await;
    c.kill(2).await;
    let tp = partition(&mut c, &[2, 3, 1], Some((2, &[2, 3, 1], 7)), Offline).await;
    change(
        &mut c,
        &tp,
        Online,
        Some(Strategy::Offline {
            allow_unclean: false,
        }),
    )
    .await;
    let z = c.state("t", 0).unwrap();
    assert_eq!(
        (z.leader, z.leader_epoch, z.isr.clone()),
        (3, 8, vec![3, 1])
    );
    assert!(!z.recovering());
    let sent = c.sent();
    assert_eq!(leader_and_isr_to(&sent, 3)[0].leader.0, 3);
    assert_eq!(leader_and_isr_to(&sent, 1)[0].leader.0, 3);
    assert!(leader_and_isr_to(&sent, 2).is_empty());
}

#[tokio::test]
async fn offline_to_online_with_no_live_isr_member_stays_offline() {
    let mut c = Cluster::start(&[1, 2], |_| {}).await;
    c.kill(2).await;
    let tp = partition(&mut c, &[2, 1], Some((2, &[2], 0)), Offline).await;
    change(&mut c, &tp, Online, None).await;
    assert_eq!(c.l.ctx.partition_state(&tp), Offline);
    assert_eq!(c.state("t", 0).unwrap().leader_epoch, 0, "nothing written");
}

#[tokio::test]
async fn offline_to_online_unclean_when_the_topic_allows_it() {
    let mut c = Cluster::start(&[1, 2], |_| {}).await;
    c.kill(2).await;
    let tp = partition(&mut c, &[2, 1], Some((2, &[2], 0)), Offline).await;
    let config = znodes::EntityConfig::new(BTreeMap::from([(
        "unclean.leader.election.enable".to_string(),
        "true".to_string(),
    )]));
    c.admin
        .create_recursive(&paths::entity_config("topics/t"), &znodes::encode(&config))
        .await
        .unwrap();
    change(&mut c, &tp, Online, None).await;
    let z = c.state("t", 0).unwrap();
    assert_eq!((z.leader, z.leader_epoch, z.isr.clone()), (1, 1, vec![1]));
    assert!(
        z.recovering(),
        "a leader from outside the ISR recovers first"
    );
    assert_eq!(c.l.ctx.partition_state(&tp), Online);
}

#[tokio::test]
async fn offline_to_online_without_a_state_znode_stays_offline() {
    let mut c = Cluster::start(&[1], |_| {}).await;
    let tp = partition(&mut c, &[1], None, Offline).await;
    change(&mut c, &tp, Online, None).await;
    assert_eq!(c.l.ctx.partition_state(&tp), Offline);
}

#[tokio::test]
async fn a_state_written_by_a_newer_controller_is_not_overwritten() {
    let mut c = Cluster::start(&[1, 2], |_| {}).await;
    c.kill(2).await;
    let tp = partition(&mut c, &[2, 1], None, Offline).await;
    let newer = LeaderAndIsr::initial(2, vec![2, 1]).to_znode(c.l.ctx.epoch + 1);
    c.admin
        .create_recursive(&paths::partition_state("t", 0), &znodes::encode(&newer))
        .await
        .unwrap();
    change(&mut c, &tp, Online, None).await;
    assert_eq!(c.l.ctx.partition_state(&tp), Offline);
    assert_eq!(c.state("t", 0).unwrap().leader, 2);
}

#[tokio::test]
async fn offline_to_nonexistent_and_not_to_new() {
    let mut c = Cluster::start(&[1], |_| {}).await;
    let tp = partition(&mut c, &[1], Some((1, &[1], 0)), Offline).await;
    change(&mut c, &tp, New, None).await;
    assert_eq!(c.l.ctx.partition_state(&tp), Offline);
    change(&mut c, &tp, NonExistent, None).await;
    assert_eq!(c.l.ctx.partition_state(&tp), NonExistent);
}

#[tokio::test]
async fn an_election_retries_when_the_znode_moved_since_it_was_read() {
    let mut c = Cluster::start(&[1, 2], |_| {}).await;
    let tp = partition(&mut c, &[2, 1], Some((1, &[1, 2], 0)), Online).await;
    // A write the controller did not make (an ISR change) moves the znode's version.
    let moved = LeaderAndIsr::initial(1, vec![1, 2]).to_znode(c.l.ctx.epoch);
    c.admin
        .set(
            &paths::partition_state("t", 0),
            &znodes::encode(&moved),
            None,
        )
        .await
        .unwrap();
    change(&mut c, &tp, Online, Some(Strategy::Preferred)).await;
    let z = c.state("t", 0).unwrap();
    assert_eq!((z.leader, z.leader_epoch), (2, 1));
    assert_eq!(c.l.ctx.leadership[&tp].leader_and_isr.partition_epoch, 2);
}
