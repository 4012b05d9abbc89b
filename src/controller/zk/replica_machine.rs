//! The replica state machine's effects (Kafka's `ZkReplicaStateMachine`): an online
//! replica is told its partition's leadership; an offline one is sent StopReplica and
//! taken out of the ISR (leader -1 if it led, the last ISR member kept so the partition
//! can come back clean); deletion sends StopReplica with delete and tracks the answers.

use super::context::{Leadership, TopicPartition};
use super::event_loop::{ControllerLoop, ZkResult};
use super::leader_and_isr::NO_LEADER;
use super::states::ReplicaState;
use super::store::{self, UpdateOutcome};

impl ControllerLoop {
    pub(super) async fn replica_changes(
        &mut self,
        replicas: &[(TopicPartition, i32)],
        target: ReplicaState,
    ) -> ZkResult<()> {
        if replicas.is_empty() {
            return Ok(());
        }
        let mut valid = Vec::new();
        for (tp, r) in replicas {
            let from = self.ctx.replica_state(tp, *r);
            if target.can_follow(from) {
                valid.push((tp.clone(), *r));
            } else {
                tracing::error!(partition = %tp, replica = r, ?from, to = ?target, "illegal replica state change refused");
            }
        }
        match target {
            ReplicaState::New => self.replicas_new(valid),
            ReplicaState::Online => self.replicas_online(valid),
            ReplicaState::Offline => self.replicas_offline(valid).await?,
            ReplicaState::DeletionStarted => {
                for (tp, r) in valid {
                    self.batch.add_stop_replica(&[r], &tp, true);
                    self.ctx
                        .replica_states
                        .insert((tp, r), ReplicaState::DeletionStarted);
                }
            }
            ReplicaState::DeletionIneligible | ReplicaState::DeletionSuccessful => {
                for (tp, r) in valid {
                    self.ctx.replica_states.insert((tp, r), target);
                }
            }
            ReplicaState::NonExistent => {
                for (tp, r) in valid {
                    if let Some(replicas) = self
                        .ctx
                        .assignments
                        .get_mut(&tp.topic)
                        .and_then(|t| t.get_mut(&tp.partition))
                    {
                        replicas.retain(|&x| x != r);
                    }
                    self.ctx.replica_states.remove(&(tp, r));
                }
            }
        }
        self.flush();
        Ok(())
    }

    /// New replicas of a partition with a leader are told it (they create their logs).
    fn replicas_new(&mut self, replicas: Vec<(TopicPartition, i32)>) {
        for (tp, r) in replicas {
            match self.ctx.leadership.get(&tp).cloned() {
                Some(l) if l.leader_and_isr.leader == r => {
                    tracing::error!(partition = %tp, replica = r, "a new replica cannot be the leader");
                    continue;
                }
                Some(l) => self
                    .batch
                    .add_leader_and_isr(&self.ctx, &[r], &tp, &l, true),
                None => {}
            }
            self.ctx.replica_states.insert((tp, r), ReplicaState::New);
        }
    }

    /// Replicas coming online are told the leadership (new ones were told already).
    fn replicas_online(&mut self, replicas: Vec<(TopicPartition, i32)>) {
        for (tp, r) in replicas {
            if self.ctx.replica_state(&tp, r) != ReplicaState::New {
                if let Some(l) = self.ctx.leadership.get(&tp).cloned() {
                    self.batch
                        .add_leader_and_isr(&self.ctx, &[r], &tp, &l, false);
                }
            }
            self.ctx
                .replica_states
                .insert((tp, r), ReplicaState::Online);
        }
    }

    async fn replicas_offline(&mut self, replicas: Vec<(TopicPartition, i32)>) -> ZkResult<()> {
        for (tp, r) in &replicas {
            self.batch.add_stop_replica(&[*r], tp, false);
        }
        let (with_leader, without): (Vec<_>, Vec<_>) = replicas
            .into_iter()
            .partition(|(tp, _)| self.ctx.leadership.contains_key(tp));
        let mut by_replica: std::collections::BTreeMap<i32, Vec<TopicPartition>> =
            Default::default();
        for (tp, r) in with_leader {
            by_replica.entry(r).or_default().push(tp);
        }
        for (r, partitions) in by_replica {
            for (tp, leadership) in self.remove_from_isr(r, &partitions).await? {
                if !self.ctx.is_topic_queued_for_deletion(&tp.topic) {
                    let to: Vec<i32> = self
                        .ctx
                        .replicas(&tp)
                        .iter()
                        .copied()
                        .filter(|&x| x != r)
                        .collect();
                    self.batch
                        .add_leader_and_isr(&self.ctx, &to, &tp, &leadership, false);
                }
                self.ctx
                    .replica_states
                    .insert((tp, r), ReplicaState::Offline);
            }
        }
        let all: Vec<i32> = self.ctx.live_or_shutting_down_ids().into_iter().collect();
        for (tp, r) in without {
            self.batch
                .add_update_metadata(&self.ctx, &all, std::slice::from_ref(&tp));
            self.ctx
                .replica_states
                .insert((tp, r), ReplicaState::Offline);
        }
        Ok(())
    }

    /// Takes `replica` out of each partition's ISR in ZooKeeper (Kafka's
    /// `removeReplicasFromIsr`), retrying partitions whose znode moved meanwhile.
    async fn remove_from_isr(
        &mut self,
        replica: i32,
        partitions: &[TopicPartition],
    ) -> ZkResult<Vec<(TopicPartition, Leadership)>> {
        let mut out = Vec::new();
        let mut remaining = partitions.to_vec();
        while !remaining.is_empty() {
            let current = store::read_partition_states(&self.s, &remaining).await?;
            let mut updates = Vec::new();
            for tp in &remaining {
                let Some(cur) = current.get(tp) else {
                    if !self.ctx.is_topic_queued_for_deletion(&tp.topic) {
                        tracing::error!(partition = %tp, replica, "no state znode; cannot remove the replica from the ISR");
                    }
                    continue;
                };
                if cur.controller_epoch > self.ctx.epoch {
                    tracing::error!(partition = %tp, "state written by a newer controller; not changing it");
                    continue;
                }
                let l = &cur.leader_and_isr;
                if !l.isr.contains(&replica) {
                    let leadership = Leadership {
                        leader_and_isr: l.clone(),
                        controller_epoch: self.ctx.epoch,
                    };
                    self.ctx.leadership.insert(tp.clone(), leadership.clone());
                    out.push((tp.clone(), leadership));
                    continue;
                }
                let leader = if l.leader == replica {
                    NO_LEADER
                } else {
                    l.leader
                };
                // The last ISR member stays: it is the one a clean election must wait for.
                let isr = if l.isr.len() == 1 {
                    l.isr.clone()
                } else {
                    l.isr.iter().copied().filter(|&x| x != replica).collect()
                };
                updates.push((tp.clone(), l.new_leader_and_isr(leader, isr)));
            }
            remaining = Vec::new();
            for (tp, outcome) in
                store::update_leader_and_isr(&self.s, self.fence()?, &updates).await?
            {
                match outcome {
                    UpdateOutcome::Done(l) => {
                        tracing::info!(partition = %tp, replica, leader = l.leader, isr = ?l.isr, "replica left the ISR");
                        let leadership = Leadership {
                            leader_and_isr: l,
                            controller_epoch: self.ctx.epoch,
                        };
                        self.ctx.leadership.insert(tp.clone(), leadership.clone());
                        out.push((tp, leadership));
                    }
                    UpdateOutcome::BadVersion => remaining.push(tp),
                    UpdateOutcome::Failed(e) => {
                        tracing::error!(partition = %tp, error = %e, "cannot shrink the ISR")
                    }
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
#[path = "replica_machine_tests.rs"]
mod tests;
