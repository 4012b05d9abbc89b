//! Partition reassignment, as Kafka's `KafkaController` runs it (`onPartitionReassignment`
//! and its callers). With RS the full replica set, ORS the original replicas, TRS the
//! target, AR = TRS − ORS being added and RR = ORS − TRS being removed:
//!
//! - U: RS = TRS ++ ORS, AR and RR are written to `/brokers/topics/<t>` first (ZooKeeper
//!   is where the original replicas survive a controller failover), then taken into the
//!   context; replicas a replaced reassignment was adding and no longer needs are stopped.
//! - A (TRS not all in the ISR): the leader epoch is bumped and LeaderAndIsr with RS, AR
//!   and RR goes to every replica (the new ones as new replicas, which create their logs
//!   and follow the leader until the leader adds them to the ISR).
//! - B (TRS all in the ISR; checked again after every ISR change AlterPartition makes):
//!   RS = TRS in the context, a new leader from TRS when the leader is not in it (or
//!   dead), else a bumped epoch; RR go offline (out of the ISR, StopReplica) and are
//!   deleted (StopReplica with delete); RS = TRS is written to ZooKeeper last; the
//!   partition leaves `/admin/reassign_partitions`; every broker gets the metadata.
//!
//! Triggers: AlterPartitionReassignments, `/admin/reassign_partitions` being created, a
//! successful AlterPartition of a moving partition, a broker of a target set starting,
//! and a controller failover (which resumes whatever the znodes say is moving).

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;

use super::context::TopicPartition;
use super::event_loop::{ControllerLoop, Event, ZkResult};
use super::leader_election::Strategy;
use super::reassignment::{self, ReassignmentError, ReplicaAssignment, REASSIGN_PARTITIONS};
use super::states::{PartitionState, ReplicaState};
use super::store::{self, UpdateOutcome};
use crate::zk::session::{Op, WatchEvent, ZkError};
use crate::zk::znodes::{self, paths};

/// Per partition, whether its reassignment was started (or cancelled).
pub type ReassignmentResults = BTreeMap<TopicPartition, Result<(), ReassignmentError>>;
/// The partitions moving, with their full assignment.
pub type OngoingReassignments = BTreeMap<TopicPartition, ReplicaAssignment>;

fn does_not_exist() -> ReassignmentError {
    (
        ResponseError::UnknownTopicOrPartition,
        Some("The partition does not exist.".to_string()),
    )
}

impl ControllerLoop {
    /// AlterPartitionReassignments (Kafka's `processApiPartitionReassignment`): a target
    /// per partition, or None to cancel. A reassignment asked for here replaces one the
    /// partition had through `/admin/reassign_partitions`.
    pub(super) async fn process_api_partition_reassignment(
        &mut self,
        asked: BTreeMap<TopicPartition, Option<Vec<i32>>>,
    ) -> ZkResult<Result<ReassignmentResults, ResponseError>> {
        if !self.is_active() {
            return Ok(Err(ResponseError::NotController));
        }
        let live = self.ctx.live_broker_ids();
        let mut results = ReassignmentResults::new();
        let mut to_reassign = BTreeMap::new();
        for (tp, target) in asked {
            let current = self.ctx.full_assignment(&tp);
            if let Some(t) = &target {
                if let Err(e) = reassignment::validate_target(&current, t, &live) {
                    results.insert(tp, Err(e));
                    continue;
                }
            }
            match current.build(target.as_deref()) {
                Some(a) => {
                    to_reassign.insert(tp, a);
                }
                None => {
                    results.insert(tp, Err((ResponseError::NoReassignmentInProgress, None)));
                }
            }
        }
        let replaced: BTreeSet<TopicPartition> = to_reassign.keys().cloned().collect();
        self.maybe_remove_from_zk_reassignment(|tp, _| replaced.contains(tp))
            .await?;
        results.extend(
            self.maybe_trigger_partition_reassignment(to_reassign)
                .await?,
        );
        Ok(Ok(results))
    }

    /// ListPartitionReassignments: the named partitions that are moving, or all of them.
    pub(super) fn process_list_partition_reassignments(
        &self,
        partitions: Option<BTreeSet<TopicPartition>>,
    ) -> Result<OngoingReassignments, ResponseError> {
        if !self.is_active() {
            return Err(ResponseError::NotController);
        }
        let asked = partitions.unwrap_or_else(|| self.ctx.partitions_being_reassigned.clone());
        Ok(asked
            .into_iter()
            .filter_map(|tp| {
                let a = self.ctx.full_assignment(&tp);
                a.is_being_reassigned().then_some((tp, a))
            })
            .collect())
    }

    /// Starts each reassignment of a partition that exists outside a topic deletion.
    async fn maybe_trigger_partition_reassignment(
        &mut self,
        reassignments: BTreeMap<TopicPartition, ReplicaAssignment>,
    ) -> ZkResult<ReassignmentResults> {
        let mut results = ReassignmentResults::new();
        for (tp, a) in reassignments {
            let result = if self.ctx.is_topic_queued_for_deletion(&tp.topic) {
                tracing::info!(partition = %tp, "not reassigning a partition of a topic being deleted");
                Err(does_not_exist())
            } else if self.ctx.replicas(&tp).is_empty() {
                Err(does_not_exist())
            } else if self.would_strand_the_isr(&tp, &a) {
                tracing::warn!(partition = %tp, replicas = ?a.replicas, "refusing a reassignment that would remove every in-sync replica");
                Err((
                    ResponseError::InvalidReplicaAssignment,
                    Some("The reassignment would remove every in-sync replica.".to_string()),
                ))
            } else {
                match self.on_partition_reassignment(&tp, a).await {
                    Ok(true) => Ok(()),
                    Ok(false) => Err((ResponseError::UnknownServerError, None)),
                    Err(e @ (ZkError::Fenced { .. } | ZkError::SessionExpired)) => return Err(e),
                    Err(e) => {
                        tracing::error!(partition = %tp, error = %e, "reassignment failed");
                        Err((ResponseError::UnknownServerError, None))
                    }
                }
            };
            results.insert(tp, result);
        }
        Ok(results)
    }

    /// Whether `a` drops every replica of the partition's ISR: cancelling (or replacing)
    /// a reassignment whose only in-sync replicas are ones it was adding. Kafka 3.9's
    /// ZooKeeper controller goes ahead, leaving an ISR outside the replicas and the
    /// partition without a leader, and stops the one replica with every acknowledged
    /// record; its KRaft controller refuses, as this one does (found by the simulation,
    /// `sim`, seed 658).
    fn would_strand_the_isr(&self, tp: &TopicPartition, a: &ReplicaAssignment) -> bool {
        let Some(l) = self.ctx.leadership.get(tp) else {
            return false;
        };
        let isr = &l.leader_and_isr.isr;
        !isr.is_empty() && isr.iter().all(|r| !a.replicas.contains(r))
    }

    /// Kafka's `onPartitionReassignment` (phases U, A and B above). False when a step
    /// could not be taken (logged); the reassignment stays recorded and resumes later.
    pub(super) async fn on_partition_reassignment(
        &mut self,
        tp: &TopicPartition,
        a: ReplicaAssignment,
    ) -> ZkResult<bool> {
        if self.ctx.is_topic_queued_for_deletion(&tp.topic) {
            self.ctx
                .topics_ineligible_for_deletion
                .insert(tp.topic.clone());
        }
        self.update_current_reassignment(tp, &a).await?;
        if !self.is_reassignment_complete(tp, &a).await? {
            tracing::info!(partition = %tp, replicas = ?a.replicas, adding = ?a.adding, removing = ?a.removing, "reassignment under way");
            if !self.update_leader_epoch_and_send(tp, &a).await? {
                return Ok(false);
            }
            let new: Vec<(TopicPartition, i32)> = a
                .adding
                .iter()
                .filter(|&&r| self.ctx.replica_state(tp, r) == ReplicaState::NonExistent)
                .map(|&r| (tp.clone(), r))
                .collect();
            self.replica_changes(&new, ReplicaState::New).await?;
            return Ok(true);
        }
        let adding: Vec<(TopicPartition, i32)> =
            a.adding.iter().map(|&r| (tp.clone(), r)).collect();
        self.replica_changes(&adding, ReplicaState::Online).await?;
        let completed = ReplicaAssignment::settled(a.target());
        self.ctx.set_full_assignment(tp, completed.clone());
        let moved = self
            .move_reassigned_partition_leader_if_required(tp, &completed)
            .await?;
        self.stop_removed_replicas(tp, &a.removing).await?;
        self.write_topic_znode(&tp.topic).await?;
        self.ctx.partitions_being_reassigned.remove(tp);
        self.maybe_remove_from_zk_reassignment(|t, r| {
            t == tp && r == completed.replicas.as_slice()
        })
        .await?;
        let all: Vec<i32> = self.ctx.live_or_shutting_down_ids().into_iter().collect();
        self.batch
            .add_update_metadata(&self.ctx, &all, std::slice::from_ref(tp));
        self.flush();
        tracing::info!(partition = %tp, replicas = ?completed.replicas, leader_moved = moved, "reassignment completed");
        self.resume_deletion_for_topics(&BTreeSet::from([tp.topic.clone()]))
            .await?;
        Ok(true)
    }

    /// U1–U3: ZooKeeper first, then the context; replicas no longer needed are stopped.
    async fn update_current_reassignment(
        &mut self,
        tp: &TopicPartition,
        a: &ReplicaAssignment,
    ) -> ZkResult<()> {
        let current = self.ctx.full_assignment(tp);
        if current != *a {
            self.ctx.set_full_assignment(tp, a.clone());
            if let Err(e) = self.write_topic_znode(&tp.topic).await {
                self.ctx.set_full_assignment(tp, current);
                return Err(e);
            }
            let unneeded: Vec<i32> = current
                .replicas
                .iter()
                .copied()
                .filter(|r| !a.replicas.contains(r))
                .collect();
            self.stop_removed_replicas(tp, &unneeded).await?;
        }
        self.ctx.partitions_being_reassigned.insert(tp.clone());
        Ok(())
    }

    /// Done when every target replica is in the ISR ZooKeeper holds now.
    async fn is_reassignment_complete(
        &self,
        tp: &TopicPartition,
        a: &ReplicaAssignment,
    ) -> ZkResult<bool> {
        if !a.is_being_reassigned() {
            return Ok(true);
        }
        let states = store::read_partition_states(&self.s, std::slice::from_ref(tp)).await?;
        Ok(states
            .get(tp)
            .is_some_and(|l| a.target().iter().all(|r| l.leader_and_isr.isr.contains(r))))
    }

    /// Bumps the leader epoch (leader and ISR unchanged) so that brokers take the new
    /// replica set, and sends LeaderAndIsr: to the original replicas, and to the ones
    /// being added as new replicas (Kafka's `updateLeaderEpochAndSendRequest`).
    async fn update_leader_epoch_and_send(
        &mut self,
        tp: &TopicPartition,
        a: &ReplicaAssignment,
    ) -> ZkResult<bool> {
        loop {
            let states = store::read_partition_states(&self.s, std::slice::from_ref(tp)).await?;
            let Some(cur) = states.get(tp) else {
                tracing::error!(partition = %tp, "no state znode; cannot reassign");
                return Ok(false);
            };
            if cur.controller_epoch > self.ctx.epoch {
                tracing::error!(partition = %tp, written_by = cur.controller_epoch, ours = self.ctx.epoch, "state written by a newer controller; not reassigning");
                return Ok(false);
            }
            let update = [(tp.clone(), cur.leader_and_isr.new_epoch())];
            let outcome = store::update_leader_and_isr(&self.s, self.fence()?, &update).await?;
            match outcome.into_iter().next().map(|(_, o)| o) {
                Some(UpdateOutcome::Done(l)) => {
                    let leadership = super::context::Leadership {
                        leader_and_isr: l,
                        controller_epoch: self.ctx.epoch,
                    };
                    self.ctx.leadership.insert(tp.clone(), leadership.clone());
                    self.batch
                        .add_leader_and_isr(&self.ctx, &a.origin(), tp, &leadership, false);
                    self.batch
                        .add_leader_and_isr(&self.ctx, &a.adding, tp, &leadership, true);
                    self.flush();
                    return Ok(true);
                }
                Some(UpdateOutcome::BadVersion) => continue,
                Some(UpdateOutcome::Failed(e)) => {
                    tracing::error!(partition = %tp, error = %e, "cannot bump the leader epoch");
                    return Ok(false);
                }
                None => return Ok(false),
            }
        }
    }

    /// B3: a leader outside the target set (or dead) is replaced by one from it;
    /// otherwise the epoch is bumped so the leader learns the smaller replica set.
    /// Returns whether the leader moved.
    async fn move_reassigned_partition_leader_if_required(
        &mut self,
        tp: &TopicPartition,
        completed: &ReplicaAssignment,
    ) -> ZkResult<bool> {
        let leader = self
            .ctx
            .leadership
            .get(tp)
            .map_or(-1, |l| l.leader_and_isr.leader);
        if completed.replicas.contains(&leader) && self.ctx.is_replica_online(leader, tp, false) {
            self.update_leader_epoch_and_send(tp, completed).await?;
            return Ok(false);
        }
        tracing::info!(partition = %tp, leader, target = ?completed.replicas, "leader not among the live target replicas; electing one of them");
        let elected = self
            .partition_changes(
                std::slice::from_ref(tp),
                PartitionState::Online,
                Some(Strategy::Reassign),
            )
            .await?;
        Ok(!elected.is_empty())
    }

    /// B4–B5: the replicas leave the ISR and stop, then their logs are deleted.
    async fn stop_removed_replicas(
        &mut self,
        tp: &TopicPartition,
        removed: &[i32],
    ) -> ZkResult<()> {
        if removed.is_empty() {
            return Ok(());
        }
        let replicas: Vec<(TopicPartition, i32)> =
            removed.iter().map(|&r| (tp.clone(), r)).collect();
        self.replica_changes(&replicas, ReplicaState::Offline)
            .await?;
        self.replica_changes(&replicas, ReplicaState::DeletionStarted)
            .await?;
        self.replica_changes(&replicas, ReplicaState::DeletionSuccessful)
            .await?;
        self.replica_changes(&replicas, ReplicaState::NonExistent)
            .await
    }

    /// Writes `/brokers/topics/<topic>` from the context, fenced (Kafka's
    /// `setTopicAssignmentRaw`).
    async fn write_topic_znode(&self, topic: &str) -> ZkResult<()> {
        let fence = self.fence()?;
        let data = znodes::encode(&self.ctx.topic_znode(topic));
        let path = paths::topic(topic);
        self.s
            .multi_checked(
                paths::CONTROLLER_EPOCH,
                fence.epoch_zk_version,
                &[Op::SetData {
                    path: &path,
                    data: &data,
                    version: None,
                }],
            )
            .await
            .map(|_| ())
    }

    /// Takes the partitions `remove` picks out of `/admin/reassign_partitions`; the znode
    /// goes when nothing is left in it (so the next request can be written).
    async fn maybe_remove_from_zk_reassignment(
        &mut self,
        remove: impl Fn(&TopicPartition, &[i32]) -> bool,
    ) -> ZkResult<()> {
        let Some((data, _)) = self.s.get(REASSIGN_PARTITIONS).await? else {
            return Ok(());
        };
        let asked = reassignment::parse_legacy(&data).unwrap_or_default();
        let remaining: BTreeMap<TopicPartition, Vec<i32>> = asked
            .iter()
            .filter(|(tp, r)| !remove(tp, r))
            .map(|(tp, r)| (tp.clone(), r.clone()))
            .collect();
        if remaining.len() == asked.len() && !asked.is_empty() {
            return Ok(());
        }
        let fence = self.fence()?;
        if remaining.is_empty() {
            tracing::info!("no more partitions to reassign; deleting {REASSIGN_PARTITIONS}");
            return store::delete_fenced(&self.s, fence, REASSIGN_PARTITIONS).await;
        }
        let data = reassignment::encode_legacy(&remaining);
        self.s
            .multi_checked(
                paths::CONTROLLER_EPOCH,
                fence.epoch_zk_version,
                &[Op::SetData {
                    path: REASSIGN_PARTITIONS,
                    data: &data,
                    version: None,
                }],
            )
            .await
            .map(|_| ())
    }

    /// `/admin/reassign_partitions` (Kafka's `processZkPartitionReassignment`): watched
    /// (unless a watch is armed); when `act` (the znode was created, or this controller
    /// just took over) the reassignments it asks for start, and those that cannot are
    /// taken out of it. Returns the partitions started.
    pub(super) async fn process_zk_partition_reassignment(
        &mut self,
        act: bool,
    ) -> ZkResult<BTreeSet<TopicPartition>> {
        if !self.is_active() {
            return Ok(BTreeSet::new());
        }
        let found = if self.armed.reassign_partitions {
            self.s.get(REASSIGN_PARTITIONS).await?
        } else {
            let (found, watch) = self.s.get_and_watch(REASSIGN_PARTITIONS).await?;
            let tx = self.tx.clone();
            let generation = self.generation;
            tokio::spawn(async move {
                let created = match watch.changed().await {
                    WatchEvent::Session(_) => return,
                    WatchEvent::Created(_) => true,
                    _ => false,
                };
                let _ = tx.send(Event::ZkPartitionReassignment {
                    generation,
                    created,
                });
            });
            self.armed.reassign_partitions = true;
            found
        };
        let Some((data, _)) = found.filter(|_| act) else {
            return Ok(BTreeSet::new());
        };
        let Some(asked) = reassignment::parse_legacy(&data) else {
            tracing::error!(data = %String::from_utf8_lossy(&data), "unreadable {REASSIGN_PARTITIONS}; deleting it");
            store::delete_fenced(&self.s, self.fence()?, REASSIGN_PARTITIONS).await?;
            return Ok(BTreeSet::new());
        };
        let to_reassign: BTreeMap<TopicPartition, ReplicaAssignment> = asked
            .into_iter()
            .map(|(tp, target)| {
                let a = self.ctx.full_assignment(&tp).reassign_to(&target);
                (tp, a)
            })
            .collect();
        let results = self
            .maybe_trigger_partition_reassignment(to_reassign)
            .await?;
        let (started, failed): (Vec<_>, Vec<_>) = results.into_iter().partition(|(_, r)| r.is_ok());
        if !failed.is_empty() {
            tracing::warn!(failed = ?failed, "reassignments through {REASSIGN_PARTITIONS} failed");
            let failed: BTreeSet<TopicPartition> = failed.into_iter().map(|(tp, _)| tp).collect();
            self.maybe_remove_from_zk_reassignment(|tp, _| failed.contains(tp))
                .await?;
        }
        Ok(started.into_iter().map(|(tp, _)| tp).collect())
    }

    /// On failover: what `/admin/reassign_partitions` asks for, then every reassignment
    /// the topic znodes show under way (Kafka's `initializePartitionReassignments`).
    pub(super) async fn initialize_partition_reassignments(&mut self) -> ZkResult<()> {
        let resumed = self.process_zk_partition_reassignment(true).await?;
        let others: Vec<TopicPartition> = self
            .ctx
            .partitions_being_reassigned
            .iter()
            .filter(|tp| !resumed.contains(*tp))
            .cloned()
            .collect();
        for tp in others {
            let a = self.ctx.full_assignment(&tp);
            self.on_partition_reassignment(&tp, a).await?;
        }
        Ok(())
    }

    /// A broker came up: the reassignments whose targets include it go on.
    pub(super) async fn maybe_resume_reassignments(&mut self, new: &BTreeSet<i32>) -> ZkResult<()> {
        let moving: Vec<TopicPartition> = self
            .ctx
            .partitions_being_reassigned
            .iter()
            .cloned()
            .collect();
        for tp in moving {
            let a = self.ctx.full_assignment(&tp);
            if a.target().iter().any(|r| new.contains(r)) {
                self.on_partition_reassignment(&tp, a).await?;
            }
        }
        Ok(())
    }

    /// After an ISR change: a moving partition whose target replicas are all in sync
    /// now finishes.
    pub(super) async fn maybe_complete_reassignments(
        &mut self,
        partitions: &[TopicPartition],
    ) -> ZkResult<()> {
        for tp in partitions {
            if !self.ctx.partitions_being_reassigned.contains(tp) {
                continue;
            }
            let a = self.ctx.full_assignment(tp);
            if self.is_reassignment_complete(tp, &a).await? {
                tracing::info!(partition = %tp, target = ?a.target(), "target replicas caught up with the leader");
                self.on_partition_reassignment(tp, a).await?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "partition_reassignment_tests.rs"]
mod tests;
