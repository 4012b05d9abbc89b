//! Topic deletion (Kafka's `TopicDeletionManager`). A topic named under
//! `/admin/delete_topics` is deleted in steps: its partitions go offline and every
//! broker is told (UpdateMetadata with leader -2); each replica is sent StopReplica,
//! first without deletion, then with; only when every replica has confirmed its
//! deletion are the topic's znodes removed. A replica on a dead broker halts the
//! topic's deletion until the broker is back. With `delete.topic.enable=false` the
//! request znodes are removed and nothing is deleted.

use std::collections::BTreeSet;

use kafka_protocol::messages::StopReplicaResponse;

use super::context::TopicPartition;
use super::event_loop::{ControllerLoop, Event, ZkResult};
use super::states::{PartitionState, ReplicaState};
use super::store;
use crate::zk::znodes::paths;

impl ControllerLoop {
    pub(super) async fn init_deletion(
        &mut self,
        queued: Vec<String>,
        ineligible: BTreeSet<String>,
    ) -> ZkResult<()> {
        if !self.settings.delete_topic_enable {
            for t in queued {
                store::delete_fenced(&self.s, self.fence()?, &paths::delete_topic(&t)).await?;
            }
            return Ok(());
        }
        let queued: BTreeSet<String> = queued.into_iter().collect();
        self.ctx.topics_ineligible_for_deletion =
            ineligible.intersection(&queued).cloned().collect();
        self.ctx.topics_to_delete = queued;
        Ok(())
    }

    pub(super) async fn process_topic_deletion(&mut self) -> ZkResult<()> {
        let (topics, w) = self.s.children_and_watch(paths::DELETE_TOPICS).await?;
        if !self.armed.deletions {
            self.on_watch(w, Event::TopicDeletion(self.generation));
            self.armed.deletions = true;
        }
        let fence = self.fence()?;
        let mut to_delete = BTreeSet::new();
        for t in topics {
            if !self.ctx.assignments.contains_key(&t) {
                tracing::warn!(topic = %t, "ignoring the deletion of a topic that does not exist");
                store::delete_fenced(&self.s, fence, &paths::delete_topic(&t)).await?;
            } else if !self.settings.delete_topic_enable {
                tracing::info!(topic = %t, "delete.topic.enable is false; removing the deletion request");
                store::delete_fenced(&self.s, fence, &paths::delete_topic(&t)).await?;
            } else {
                to_delete.insert(t);
            }
        }
        if to_delete.is_empty() {
            return Ok(());
        }
        tracing::info!(topics = ?to_delete, "starting topic deletion");
        self.ctx.topics_to_delete.extend(to_delete);
        self.resume_deletions().await
    }

    pub(super) async fn try_topic_deletion(&mut self) -> ZkResult<()> {
        if self.settings.delete_topic_enable {
            self.resume_deletions().await?;
        }
        Ok(())
    }

    pub(super) async fn resume_deletion_for_topics(
        &mut self,
        topics: &BTreeSet<String>,
    ) -> ZkResult<()> {
        let resumed: Vec<String> = topics
            .iter()
            .filter(|t| self.ctx.topics_to_delete.contains(*t))
            .cloned()
            .collect();
        if resumed.is_empty() {
            return Ok(());
        }
        for t in &resumed {
            self.ctx.topics_ineligible_for_deletion.remove(t);
        }
        self.resume_deletions().await
    }

    pub(super) async fn fail_replica_deletion(
        &mut self,
        replicas: &[(TopicPartition, i32)],
    ) -> ZkResult<()> {
        let failed: Vec<(TopicPartition, i32)> = replicas
            .iter()
            .filter(|(tp, _)| self.ctx.is_topic_queued_for_deletion(&tp.topic))
            .cloned()
            .collect();
        if failed.is_empty() {
            return Ok(());
        }
        self.replica_changes(&failed, ReplicaState::DeletionIneligible)
            .await?;
        for (tp, _) in &failed {
            self.ctx
                .topics_ineligible_for_deletion
                .insert(tp.topic.clone());
        }
        tracing::info!(replicas = ?failed.iter().map(|(tp, r)| format!("{tp}@{r}")).collect::<Vec<_>>(), "deletion halted: replica deletion failed");
        self.resume_deletions().await
    }

    /// A broker's answer to StopReplica with delete.
    pub(super) async fn process_stop_replica_response(
        &mut self,
        broker: i32,
        response: StopReplicaResponse,
        deleting: BTreeSet<TopicPartition>,
    ) -> ZkResult<()> {
        if !self.is_active() {
            return Ok(());
        }
        let mut failed = Vec::new();
        let mut done = Vec::new();
        for p in &response.partition_errors {
            let tp = TopicPartition::new(p.topic_name.0.to_string(), p.partition_index);
            if !deleting.contains(&tp) || !self.ctx.is_topic_queued_for_deletion(&tp.topic) {
                continue;
            }
            if response.error_code != 0 || p.error_code != 0 {
                failed.push((tp, broker));
            } else {
                done.push((tp, broker));
            }
        }
        self.fail_replica_deletion(&failed).await?;
        if !done.is_empty() {
            self.replica_changes(&done, ReplicaState::DeletionSuccessful)
                .await?;
            self.resume_deletions().await?;
        }
        Ok(())
    }

    async fn resume_deletions(&mut self) -> ZkResult<()> {
        let queued: Vec<String> = self.ctx.topics_to_delete.iter().cloned().collect();
        let mut retry = Vec::new();
        let mut eligible = Vec::new();
        for topic in queued {
            let replicas = self.ctx.replicas_of_topic(&topic);
            let all_deleted = replicas
                .iter()
                .all(|(tp, r)| self.ctx.replica_state(tp, *r) == ReplicaState::DeletionSuccessful);
            if all_deleted {
                self.complete_delete_topic(&topic).await?;
                tracing::info!(%topic, "topic deleted");
                continue;
            }
            let started = !self
                .ctx
                .replicas_in_state(&topic, ReplicaState::DeletionStarted)
                .is_empty();
            if !started
                && !self
                    .ctx
                    .replicas_in_state(&topic, ReplicaState::DeletionIneligible)
                    .is_empty()
            {
                retry.push(topic.clone());
            }
            if !started && !self.ctx.topics_ineligible_for_deletion.contains(&topic) {
                eligible.push(topic);
            }
        }
        for topic in &retry {
            let failed = self
                .ctx
                .replicas_in_state(topic, ReplicaState::DeletionIneligible);
            self.replica_changes(&failed, ReplicaState::Offline).await?;
        }
        if !eligible.is_empty() {
            self.on_topic_deletion(&eligible).await?;
        }
        Ok(())
    }

    async fn on_topic_deletion(&mut self, topics: &[String]) -> ZkResult<()> {
        let unseen: Vec<String> = topics
            .iter()
            .filter(|t| !self.ctx.topics_with_deletion_started.contains(*t))
            .cloned()
            .collect();
        if !unseen.is_empty() {
            let partitions: Vec<TopicPartition> = unseen
                .iter()
                .flat_map(|t| self.ctx.partitions_of(t))
                .collect();
            self.partition_changes(&partitions, PartitionState::Offline, None)
                .await?;
            self.partition_changes(&partitions, PartitionState::NonExistent, None)
                .await?;
            self.ctx.topics_with_deletion_started.extend(unseen);
        }
        let partitions: Vec<TopicPartition> = topics
            .iter()
            .flat_map(|t| self.ctx.partitions_of(t))
            .collect();
        let all: Vec<i32> = self.ctx.live_or_shutting_down_ids().into_iter().collect();
        self.batch.add_update_metadata(&self.ctx, &all, &partitions);
        self.flush();

        let mut dead = Vec::new();
        let mut retry = Vec::new();
        let mut halted = BTreeSet::new();
        for topic in topics {
            for (tp, r) in self.ctx.replicas_of_topic(topic) {
                if !self.ctx.is_replica_online(r, &tp, false) {
                    dead.push((tp, r));
                    halted.insert(topic.clone());
                } else if self.ctx.replica_state(&tp, r) != ReplicaState::DeletionSuccessful {
                    retry.push((tp, r));
                }
            }
        }
        self.replica_changes(&dead, ReplicaState::DeletionIneligible)
            .await?;
        self.replica_changes(&retry, ReplicaState::Offline).await?;
        self.replica_changes(&retry, ReplicaState::DeletionStarted)
            .await?;
        if !halted.is_empty() {
            tracing::info!(topics = ?halted, "deletion halted: offline replicas");
            self.ctx.topics_ineligible_for_deletion.extend(halted);
        }
        Ok(())
    }

    /// Every replica confirmed: remove the topic's znodes, its configs and the request.
    async fn complete_delete_topic(&mut self, topic: &str) -> ZkResult<()> {
        let replicas = self
            .ctx
            .replicas_in_state(topic, ReplicaState::DeletionSuccessful);
        self.replica_changes(&replicas, ReplicaState::NonExistent)
            .await?;
        let fence = self.fence()?;
        store::delete_recursive_fenced(&self.s, fence, &paths::topic(topic)).await?;
        store::delete_fenced(
            &self.s,
            fence,
            &paths::entity_config(&format!("topics/{topic}")),
        )
        .await?;
        store::delete_fenced(&self.s, fence, &paths::delete_topic(topic)).await?;
        self.ctx.remove_topic(topic);
        self.shared.forget_topic_configs(topic);
        Ok(())
    }
}

#[cfg(test)]
#[path = "deletion_tests.rs"]
mod tests;
