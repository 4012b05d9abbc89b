//! The partition state machine's effects (Kafka's `ZkPartitionStateMachine`): a new
//! partition gets its first leader and ISR written to its `state` znode; an offline or
//! online one gets a leader elected by a strategy, read fresh from ZooKeeper and written
//! back conditional on its partition epoch (retried when another write got there
//! first). Every success is announced with LeaderAndIsr and UpdateMetadata.

use std::collections::BTreeSet;

use super::context::{Leadership, TopicPartition};
use super::event_loop::{ControllerLoop, ZkResult};
use super::leader_and_isr::LeaderAndIsr;
use super::leader_election::{self, Strategy};
use super::states::PartitionState;
use super::store::{self, UpdateOutcome};

impl ControllerLoop {
    /// Moves partitions to `target` (with `strategy` for elections) and sends what that
    /// decided; returns the partitions that got a leader.
    pub(super) async fn partition_changes(
        &mut self,
        partitions: &[TopicPartition],
        target: PartitionState,
        strategy: Option<Strategy>,
    ) -> ZkResult<Vec<TopicPartition>> {
        if partitions.is_empty() {
            return Ok(Vec::new());
        }
        let mut valid = Vec::new();
        for tp in partitions {
            let from = self.ctx.partition_state(tp);
            if target.can_follow(from) {
                valid.push(tp.clone());
            } else {
                tracing::error!(partition = %tp, ?from, to = ?target, "illegal partition state change refused");
            }
        }
        let mut elected = Vec::new();
        match target {
            PartitionState::Online => {
                let (new, existing): (Vec<_>, Vec<_>) = valid
                    .into_iter()
                    .partition(|tp| self.ctx.partition_state(tp) == PartitionState::New);
                elected.extend(self.initialize_leader_and_isr(&new).await?);
                if !existing.is_empty() {
                    let strategy = strategy.unwrap_or(Strategy::Offline {
                        allow_unclean: false,
                    });
                    elected.extend(self.elect_leaders(&existing, strategy).await?);
                }
            }
            _ => {
                for tp in valid {
                    self.ctx.partition_states.insert(tp, target);
                }
            }
        }
        self.flush();
        Ok(elected)
    }

    /// The first leader (first live replica) and ISR (all live replicas) of new partitions.
    async fn initialize_leader_and_isr(
        &mut self,
        partitions: &[TopicPartition],
    ) -> ZkResult<Vec<TopicPartition>> {
        let mut states = Vec::new();
        for tp in partitions {
            let live: Vec<i32> = self
                .ctx
                .replicas(tp)
                .iter()
                .copied()
                .filter(|&r| self.ctx.is_replica_online(r, tp, false))
                .collect();
            match live.first() {
                Some(&leader) => states.push((tp.clone(), LeaderAndIsr::initial(leader, live))),
                None => {
                    tracing::error!(partition = %tp, replicas = ?self.ctx.replicas(tp), "no assigned replica is alive; the new partition stays leaderless")
                }
            }
        }
        if states.is_empty() {
            return Ok(Vec::new());
        }
        let created = store::create_partition_states(&self.s, self.fence()?, &states).await?;
        let created_set: BTreeSet<&TopicPartition> = created.iter().collect();
        for (tp, l) in states.iter().filter(|(tp, _)| created_set.contains(tp)) {
            let leadership = Leadership {
                leader_and_isr: l.clone(),
                controller_epoch: self.ctx.epoch,
            };
            self.ctx.leadership.insert(tp.clone(), leadership.clone());
            self.batch
                .add_leader_and_isr(&self.ctx, &l.isr, tp, &leadership, true);
            self.ctx
                .partition_states
                .insert(tp.clone(), PartitionState::Online);
            tracing::info!(partition = %tp, leader = l.leader, isr = ?l.isr, "partition online");
        }
        Ok(created)
    }

    /// Elections under `strategy`, from the partitions' current `state` znodes.
    async fn elect_leaders(
        &mut self,
        partitions: &[TopicPartition],
        strategy: Strategy,
    ) -> ZkResult<Vec<TopicPartition>> {
        let started = std::time::Instant::now();
        let mut remaining = partitions.to_vec();
        let mut elected = Vec::new();
        while !remaining.is_empty() {
            let current = store::read_partition_states(&self.s, &remaining).await?;
            let mut updates = Vec::new();
            let mut recipients = std::collections::BTreeMap::new();
            for tp in &remaining {
                let Some(cur) = current.get(tp) else {
                    tracing::error!(partition = %tp, "no state znode; cannot elect a leader");
                    continue;
                };
                if cur.controller_epoch > self.ctx.epoch {
                    tracing::error!(partition = %tp, written_by = cur.controller_epoch, ours = self.ctx.epoch, "state written by a newer controller; aborting the election");
                    continue;
                }
                match self.elect_one(tp, &cur.leader_and_isr, strategy).await? {
                    Some((l, to)) => {
                        recipients.insert(tp.clone(), to);
                        updates.push((tp.clone(), l));
                    }
                    None => {
                        tracing::error!(partition = %tp, ?strategy, isr = ?cur.leader_and_isr.isr, "no leader could be elected")
                    }
                }
            }
            let results = store::update_leader_and_isr(&self.s, self.fence()?, &updates).await?;
            remaining = Vec::new();
            for (tp, outcome) in results {
                match outcome {
                    UpdateOutcome::Done(l) => {
                        let leadership = Leadership {
                            leader_and_isr: l.clone(),
                            controller_epoch: self.ctx.epoch,
                        };
                        self.ctx.leadership.insert(tp.clone(), leadership.clone());
                        let to: Vec<i32> = recipients.remove(&tp).unwrap_or_default();
                        self.batch
                            .add_leader_and_isr(&self.ctx, &to, &tp, &leadership, false);
                        self.ctx
                            .partition_states
                            .insert(tp.clone(), PartitionState::Online);
                        tracing::info!(partition = %tp, leader = l.leader, leader_epoch = l.leader_epoch, isr = ?l.isr, "leader elected");
                        // Only an election from outside the ISR leaves the leader
                        // recovering.
                        if l.recovering() {
                            self.shared.controller_stats.unclean_election();
                        }
                        elected.push(tp);
                    }
                    UpdateOutcome::BadVersion => remaining.push(tp),
                    UpdateOutcome::Failed(e) => {
                        tracing::error!(partition = %tp, error = %e, "cannot write the new leader")
                    }
                }
            }
        }
        self.shared.controller_stats.elected(started.elapsed());
        Ok(elected)
    }

    /// One partition's new leadership under `strategy`, and the brokers to tell.
    async fn elect_one(
        &self,
        tp: &TopicPartition,
        current: &LeaderAndIsr,
        strategy: Strategy,
    ) -> ZkResult<Option<(LeaderAndIsr, Vec<i32>)>> {
        let assignment = self.ctx.replicas(tp).to_vec();
        Ok(match strategy {
            Strategy::Offline { allow_unclean } => {
                let live = self.ctx.live_replicas(tp);
                let unclean = if current.isr.iter().any(|r| live.contains(r)) {
                    false
                } else {
                    allow_unclean || self.unclean_enabled(&tp.topic).await?
                };
                let to: Vec<i32> = assignment
                    .iter()
                    .copied()
                    .filter(|r| live.contains(r))
                    .collect();
                leader_election::offline(&assignment, current, &live, unclean).map(|l| (l, to))
            }
            Strategy::Preferred => {
                let live = self.ctx.live_replicas(tp);
                leader_election::preferred(&assignment, current, &live)
                    .map(|l| (l, assignment.clone()))
            }
            Strategy::Reassign => {
                let target = self.ctx.full_assignment(tp).target();
                let live = self.ctx.live_replicas(tp);
                leader_election::reassign(&target, current, &live).map(|l| (l, target))
            }
            Strategy::ControlledShutdown => {
                let live_or_shutting: BTreeSet<i32> = assignment
                    .iter()
                    .copied()
                    .filter(|&r| self.ctx.is_replica_online(r, tp, true))
                    .collect();
                let to = assignment
                    .iter()
                    .copied()
                    .filter(|r| live_or_shutting.contains(r))
                    .collect();
                leader_election::controlled_shutdown(
                    &assignment,
                    current,
                    &live_or_shutting,
                    &self.ctx.shutting_down,
                )
                .map(|l| (l, to))
            }
        })
    }

    /// `unclean.leader.election.enable` for a topic: its override, else the broker's.
    async fn unclean_enabled(&self, topic: &str) -> ZkResult<bool> {
        let overrides = store::read_topic_config(&self.s, topic).await?;
        Ok(overrides
            .get("unclean.leader.election.enable")
            .map_or(self.settings.unclean_leader_election, |v| {
                v.eq_ignore_ascii_case("true")
            }))
    }
}

#[cfg(test)]
#[path = "partition_machine_tests.rs"]
mod tests;
