//! How the controller reacts to the cluster changing (Kafka's `KafkaController`
//! `onControllerFailover`, `processBrokerChange`, `onBrokerStartup`, `onBrokerFailure`,
//! `processTopicChange`, `processPartitionModifications`): it reads what changed in
//! ZooKeeper and drives the partition and replica state machines.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::LeaderAndIsrResponse;
use uuid::Uuid;

use super::context::{LiveBroker, TopicPartition};
use super::event_loop::{ControllerLoop, Event, ZkResult};
use super::leader_election::Strategy;
use super::states::{PartitionState, ReplicaState};
use super::store;
use crate::zk::session::Op;
use crate::zk::znodes::{self, paths, TopicAssignment};

impl ControllerLoop {
    /// Becoming the controller: read everything, tell every broker, elect what has no leader.
    pub(super) async fn on_controller_failover(&mut self) -> ZkResult<()> {
        let g = self.generation;
        // Watches first, then the reads: a change between the two is seen again, never missed.
        let (_, w) = self.s.children_and_watch(paths::TOPICS).await?;
        self.on_watch(w, Event::TopicChange(g));
        self.armed.topics = true;
        let (_, w) = self.s.children_and_watch(paths::DELETE_TOPICS).await?;
        self.on_watch(w, Event::TopicDeletion(g));
        self.armed.deletions = true;
        self.watch_log_dir_events().await?;
        self.watch_isr_change_events().await?;

        let fence = self.fence()?;
        self.ctx.epoch = fence.controller_epoch;
        self.ctx.epoch_zk_version = fence.epoch_zk_version;
        self.ctx.live_brokers = self.read_brokers_and_watch().await?;
        let topics = store::read_topic_names(&self.s).await?;
        for t in &topics {
            self.watch_topic(t).await?;
        }
        let assignments = store::read_assignments(&self.s, &topics).await?;
        self.load_assignments(assignments).await?;
        let partitions = self.ctx.all_partitions();
        self.ctx.leadership = store::read_partition_states(&self.s, &partitions).await?;
        let brokers: Vec<LiveBroker> = self.ctx.live_brokers.values().cloned().collect();
        for b in &brokers {
            self.channels.add_broker(b);
            self.watch_broker(b.id).await?;
        }
        self.ensure_feature_znode().await?;
        tracing::info!(live_brokers = ?self.ctx.live_brokers.keys().collect::<Vec<_>>(), topics = topics.len(), "controller context initialized");

        // Topic deletions pending from an earlier controller.
        let queued = self
            .s
            .children(paths::DELETE_TOPICS)
            .await?
            .unwrap_or_default();
        let ineligible = self.topics_ineligible_for_deletion();
        self.init_deletion(queued, ineligible).await?;

        // Brokers learn the live brokers before any LeaderAndIsr names them.
        let all: Vec<i32> = self.ctx.live_or_shutting_down_ids().into_iter().collect();
        self.batch.add_update_metadata(&self.ctx, &all, &[]);
        self.flush();

        self.replica_state_machine_startup().await?;
        self.partition_state_machine_startup().await?;
        tracing::info!(
            epoch = self.ctx.epoch,
            "ready to serve as the new controller"
        );
        // Reassignments asked for while nobody controlled, and those under way.
        self.initialize_partition_reassignments().await?;
        // Preferred elections asked for through ZooKeeper while nobody controlled.
        self.process_preferred_replica_election_znode().await?;
        // Kafka's first imbalance check comes 5 s after the failover.
        self.schedule_auto_leader_rebalance(std::time::Duration::from_secs(5));
        self.try_topic_deletion().await
    }

    /// Topics that cannot be deleted now: a replica offline, or a partition moving.
    fn topics_ineligible_for_deletion(&self) -> BTreeSet<String> {
        let ctx = &self.ctx;
        let offline_replica = |t: &String| {
            ctx.partitions_of(t).iter().any(|tp| {
                ctx.replicas(tp)
                    .iter()
                    .any(|&r| !ctx.is_replica_online(r, tp, false))
            })
        };
        ctx.assignments
            .keys()
            .filter(|t| offline_replica(t))
            .cloned()
            .chain(
                ctx.partitions_being_reassigned
                    .iter()
                    .map(|tp| tp.topic.clone()),
            )
            .collect()
    }

    /// Watches a topic's assignment znode (partitions added to it).
    pub(super) async fn watch_topic(&mut self, topic: &str) -> ZkResult<()> {
        if self.armed.topic.contains(topic) {
            return Ok(());
        }
        let (_, w) = self.s.get_and_watch(&paths::topic(topic)).await?;
        self.on_watch(
            w,
            Event::PartitionModifications(self.generation, topic.to_string()),
        );
        self.armed.topic.insert(topic.to_string());
        Ok(())
    }

    /// Takes topics' assignments and ids into the context; a topic without an id (made
    /// before Kafka 2.8) gets one written back, as Kafka's controller does.
    async fn load_assignments(
        &mut self,
        assignments: BTreeMap<String, TopicAssignment>,
    ) -> ZkResult<()> {
        for (topic, mut a) in assignments {
            let id = match a
                .topic_id
                .as_deref()
                .and_then(crate::log::kafka_string_to_uuid)
            {
                Some(id) => id,
                None => {
                    let id = Uuid::new_v4();
                    a.topic_id = Some(crate::log::uuid_to_kafka_string(id));
                    let fence = self.fence()?;
                    let data = znodes::encode(&a);
                    let path = paths::topic(&topic);
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
                        .await?;
                    id
                }
            };
            let configs = store::read_topic_config(&self.s, &topic).await?;
            self.ctx.topic_configs.insert(topic.clone(), configs);
            self.ctx.topic_ids.insert(topic.clone(), id);
            // A reassignment under way (started by this or another controller).
            for (&p, replicas) in &a.partitions.0 {
                let tp = TopicPartition::new(topic.clone(), p);
                let adding = a.adding_replicas.0.get(&p).cloned().unwrap_or_default();
                let removing = a.removing_replicas.0.get(&p).cloned().unwrap_or_default();
                let full = super::reassignment::ReplicaAssignment {
                    replicas: replicas.clone(),
                    adding,
                    removing,
                };
                if full.is_being_reassigned() {
                    self.ctx.partitions_being_reassigned.insert(tp.clone());
                }
                self.ctx.set_full_assignment(&tp, full);
            }
            self.ctx.assignments.entry(topic).or_default();
        }
        Ok(())
    }

    /// Kafka's `ReplicaStateMachine.startup`: replicas on live brokers are told their
    /// partitions' leadership; the others go offline.
    async fn replica_state_machine_startup(&mut self) -> ZkResult<()> {
        let mut online = Vec::new();
        let mut offline = Vec::new();
        for tp in self.ctx.all_partitions() {
            for &r in self.ctx.replicas(&tp).to_vec().iter() {
                let state = if self.ctx.is_replica_online(r, &tp, false) {
                    online.push((tp.clone(), r));
                    ReplicaState::Online
                } else {
                    offline.push((tp.clone(), r));
                    ReplicaState::DeletionIneligible
                };
                self.ctx.replica_states.insert((tp.clone(), r), state);
            }
        }
        self.replica_changes(&online, ReplicaState::Online).await?;
        self.replica_changes(&offline, ReplicaState::Offline).await
    }

    /// Kafka's `PartitionStateMachine.startup`: partitions without a live leader are elected.
    async fn partition_state_machine_startup(&mut self) -> ZkResult<()> {
        for tp in self.ctx.all_partitions() {
            let state = match self.ctx.leadership.get(&tp) {
                Some(l)
                    if self
                        .ctx
                        .is_replica_online(l.leader_and_isr.leader, &tp, false) =>
                {
                    PartitionState::Online
                }
                Some(_) => PartitionState::Offline,
                None => PartitionState::New,
            };
            self.ctx.partition_states.insert(tp, state);
        }
        self.trigger_online_partition_state_change()
            .await
            .map(|_| ())
    }

    /// Elects leaders for every new or offline partition outside deletions; returns
    /// how many got one.
    pub(super) async fn trigger_online_partition_state_change(&mut self) -> ZkResult<usize> {
        let partitions: Vec<TopicPartition> = self
            .ctx
            .partition_states
            .iter()
            .filter(|(tp, s)| {
                matches!(s, PartitionState::New | PartitionState::Offline)
                    && !self.ctx.is_topic_queued_for_deletion(&tp.topic)
            })
            .map(|(tp, _)| tp.clone())
            .collect();
        let elected = self
            .partition_changes(
                &partitions,
                PartitionState::Online,
                Some(Strategy::Offline {
                    allow_unclean: false,
                }),
            )
            .await?;
        Ok(elected.len())
    }

    // ---- brokers ----

    pub(super) async fn process_broker_change(&mut self) -> ZkResult<()> {
        let current = self.read_brokers_and_watch().await?;
        if !self.is_active() {
            return Ok(());
        }
        let known = self.ctx.live_or_shutting_down_ids();
        let now: BTreeSet<i32> = current.keys().copied().collect();
        let new: Vec<i32> = now.difference(&known).copied().collect();
        let dead: Vec<i32> = known.difference(&now).copied().collect();
        let bounced: Vec<i32> = now
            .intersection(&known)
            .copied()
            .filter(|b| current[b].epoch > self.ctx.live_brokers[b].epoch)
            .collect();
        tracing::info!(?new, ?dead, ?bounced, live = ?now, "brokers changed");
        for b in &new {
            self.channels.add_broker(&current[b]);
        }
        for b in &bounced {
            self.channels.remove_broker(*b);
            self.channels.add_broker(&current[b]);
        }
        for b in &dead {
            self.channels.remove_broker(*b);
        }
        if !new.is_empty() {
            for b in &new {
                self.ctx.live_brokers.insert(*b, current[b].clone());
                self.watch_broker(*b).await?;
            }
            self.on_broker_startup(&new).await?;
        }
        if !bounced.is_empty() {
            for b in &bounced {
                self.ctx.live_brokers.remove(b);
            }
            self.on_broker_failure(&bounced).await?;
            for b in &bounced {
                self.ctx.live_brokers.insert(*b, current[b].clone());
            }
            self.on_broker_startup(&bounced).await?;
        }
        if !dead.is_empty() {
            for b in &dead {
                self.ctx.live_brokers.remove(b);
            }
            self.on_broker_failure(&dead).await?;
        }
        Ok(())
    }

    /// Watches a live broker's registration for changes of its data, and takes in the
    /// registration it reads: a change made between the read that made the broker live
    /// and this watch is one the watch will never report. Whether the registration this
    /// controller knew changed.
    async fn watch_broker(&mut self, id: i32) -> ZkResult<bool> {
        let read = match self.armed.broker.insert(id) {
            true => {
                let (read, w) = self.s.get_and_watch(&paths::broker(id)).await?;
                self.on_watch(w, Event::BrokerModification(self.generation, id));
                read
            }
            false => self.s.get(&paths::broker(id)).await?,
        };
        Ok(match read {
            Some((data, stat)) => self.take_registration(id, &data, stat.czxid),
            None => false, // gone: the broker change handles it
        })
    }

    /// Takes in a live broker's registration read from its znode, if it names other
    /// endpoints or another rack under the same registration (a new registration is a
    /// bounce, for the broker change). Whether it did.
    fn take_registration(&mut self, id: i32, data: &[u8], czxid: i64) -> bool {
        let Some(old) = self.ctx.live_brokers.get(&id) else {
            return false;
        };
        let Some(updated) = znodes::decode::<znodes::BrokerRegistration>(data)
            .ok()
            .and_then(|r| LiveBroker::from_registration(id, czxid, &r))
        else {
            tracing::warn!(broker = id, "unreadable broker registration; ignored");
            return false;
        };
        if old.epoch != updated.epoch
            || (old.endpoints == updated.endpoints && old.rack == updated.rack)
        {
            return false;
        }
        tracing::info!(broker = id, endpoints = ?updated.endpoints, "broker registration updated");
        self.ctx.live_brokers.insert(id, updated.clone());
        self.channels.remove_broker(id);
        self.channels.add_broker(&updated);
        true
    }

    /// Kafka's `processBrokerModification`: a live broker re-registered with other
    /// endpoints or rack; every broker learns them.
    pub(super) async fn process_broker_modification(&mut self, id: i32) -> ZkResult<()> {
        if !self.ctx.live_brokers.contains_key(&id) {
            return Ok(()); // gone: the broker change handles it
        }
        if self.watch_broker(id).await? {
            let all: Vec<i32> = self.ctx.live_or_shutting_down_ids().into_iter().collect();
            self.batch.add_update_metadata(&self.ctx, &all, &[]);
            self.flush();
        }
        Ok(())
    }

    /// `/feature` as Kafka 3.9's controller leaves it (versioning enabled, no finalized
    /// features), so brokers that read it find what a Kafka controller would write.
    async fn ensure_feature_znode(&mut self) -> ZkResult<()> {
        let enabled = znodes::FeatureZNode::enabled();
        match self.s.get(paths::FEATURE).await? {
            None => match self
                .s
                .create_recursive(paths::FEATURE, &znodes::encode(&enabled))
                .await
            {
                Ok(_) | Err(crate::zk::session::ZkError::NodeExists(_)) => Ok(()),
                Err(e) => Err(e),
            },
            Some((data, stat)) => {
                let current = znodes::decode::<znodes::FeatureZNode>(&data).ok();
                if current.is_some_and(|f| f.status != enabled.status) {
                    let mut f = znodes::decode::<znodes::FeatureZNode>(&data)
                        .unwrap_or_else(|_| enabled.clone());
                    f.status = enabled.status;
                    let set = self
                        .s
                        .set(paths::FEATURE, &znodes::encode(&f), Some(stat.version))
                        .await;
                    if let Err(e) = set {
                        tracing::warn!(error = %e, "could not enable feature versioning in /feature");
                    }
                }
                Ok(())
            }
        }
    }

    /// Kafka's `onBrokerStartup`: metadata to everyone, leadership to the new brokers'
    /// replicas, and elections for partitions that were waiting for them.
    async fn on_broker_startup(&mut self, new: &[i32]) -> ZkResult<()> {
        let new_set: BTreeSet<i32> = new.iter().copied().collect();
        for b in new {
            self.ctx.offline_replicas.remove(b);
        }
        let existing: Vec<i32> = self
            .ctx
            .live_or_shutting_down_ids()
            .difference(&new_set)
            .copied()
            .collect();
        self.batch.add_update_metadata(&self.ctx, &existing, &[]);
        let with_leaders: Vec<TopicPartition> = self.ctx.leadership.keys().cloned().collect();
        self.batch
            .add_update_metadata(&self.ctx, new, &with_leaders);
        self.flush();
        let replicas = self.ctx.replicas_on_brokers(&new_set);
        self.replica_changes(&replicas, ReplicaState::Online)
            .await?;
        self.trigger_online_partition_state_change().await?;
        self.maybe_resume_reassignments(&new_set).await?;
        let topics: BTreeSet<String> = replicas
            .iter()
            .filter(|(tp, _)| self.ctx.is_topic_queued_for_deletion(&tp.topic))
            .map(|(tp, _)| tp.topic.clone())
            .collect();
        if !topics.is_empty() {
            self.resume_deletion_for_topics(&topics).await?;
        }
        Ok(())
    }

    async fn on_broker_failure(&mut self, dead: &[i32]) -> ZkResult<()> {
        for b in dead {
            self.ctx.offline_replicas.remove(b);
            self.ctx.shutting_down.remove(b);
        }
        let replicas = self
            .ctx
            .replicas_on_brokers(&dead.iter().copied().collect());
        self.on_replicas_become_offline(replicas).await
    }

    /// Kafka's `onReplicasBecomeOffline`: partitions they led get new leaders, the
    /// replicas leave ISRs, deletions involving them halt.
    pub(super) async fn on_replicas_become_offline(
        &mut self,
        replicas: Vec<(TopicPartition, i32)>,
    ) -> ZkResult<()> {
        let (for_deletion, others): (Vec<_>, Vec<_>) = replicas
            .into_iter()
            .partition(|(tp, _)| self.ctx.is_topic_queued_for_deletion(&tp.topic));
        let offline_leader = self.ctx.partitions_with_offline_leader();
        self.partition_changes(&offline_leader, PartitionState::Offline, None)
            .await?;
        let elected = self.trigger_online_partition_state_change().await?;
        self.replica_changes(&others, ReplicaState::Offline).await?;
        if !for_deletion.is_empty() {
            self.fail_replica_deletion(&for_deletion).await?;
        }
        if others.is_empty() && elected == 0 {
            let all: Vec<i32> = self.ctx.live_or_shutting_down_ids().into_iter().collect();
            self.batch.add_update_metadata(&self.ctx, &all, &[]);
            self.flush();
        }
        Ok(())
    }

    /// A broker reports replicas it cannot host (KAFKA_STORAGE_ERROR): they are offline.
    pub(super) async fn process_leader_and_isr_response(
        &mut self,
        broker: i32,
        response: LeaderAndIsrResponse,
    ) -> ZkResult<()> {
        if !self.is_active() {
            return Ok(());
        }
        if response.error_code != 0 {
            tracing::error!(
                broker,
                error = response.error_code,
                "LeaderAndIsr answered with an error"
            );
            return Ok(());
        }
        let storage = ResponseError::KafkaStorageError.code();
        let mut offline = Vec::new();
        let mut online = Vec::new();
        // Below v5 the errors are listed by topic name, from v5 grouped by topic id.
        let by_name = response.partition_errors.iter().map(|p| {
            let tp = TopicPartition::new(p.topic_name.0.to_string(), p.partition_index);
            (tp, p.error_code)
        });
        let by_id = response.topics.iter().flat_map(|t| {
            let topic = self.ctx.topic_name(t.topic_id).map(str::to_string);
            t.partition_errors.iter().filter_map(move |p| {
                let tp = TopicPartition::new(topic.clone()?, p.partition_index);
                Some((tp, p.error_code))
            })
        });
        for (tp, error_code) in by_name.chain(by_id) {
            if error_code == storage {
                offline.push(tp);
            } else if error_code == 0 {
                online.push(tp);
            }
        }
        let known = self.ctx.offline_replicas.entry(broker).or_default();
        for tp in &online {
            known.remove(tp);
        }
        let new: Vec<(TopicPartition, i32)> = offline
            .into_iter()
            .filter(|tp| known.insert(tp.clone()))
            .map(|tp| (tp, broker))
            .collect();
        if !new.is_empty() {
            tracing::info!(broker, replicas = ?new.iter().map(|(tp, _)| tp.to_string()).collect::<Vec<_>>(), "replicas reported offline");
            self.on_replicas_become_offline(new).await?;
        }
        Ok(())
    }

    // ---- topics ----

    pub(super) async fn process_topic_change(&mut self) -> ZkResult<()> {
        let (topics, w) = self.s.children_and_watch(paths::TOPICS).await?;
        if !self.armed.topics {
            self.on_watch(w, Event::TopicChange(self.generation));
            self.armed.topics = true;
        }
        let now: BTreeSet<String> = super::znode_checks::legal_topic_names(topics)
            .into_iter()
            .collect();
        let known: BTreeSet<String> = self.ctx.assignments.keys().cloned().collect();
        let new: Vec<String> = now.difference(&known).cloned().collect();
        for t in known.difference(&now) {
            self.ctx.remove_topic(t);
        }
        for t in &new {
            self.watch_topic(t).await?;
        }
        let assignments = store::read_assignments(&self.s, &new).await?;
        let added: Vec<TopicPartition> = assignments
            .iter()
            .flat_map(|(t, a)| {
                a.partitions
                    .0
                    .keys()
                    .map(move |&p| TopicPartition::new(t.clone(), p))
            })
            .collect();
        self.load_assignments(assignments).await?;
        if !added.is_empty() {
            tracing::info!(topics = ?new, partitions = added.len(), "new topics");
            self.on_new_partition_creation(&added).await?;
        }
        Ok(())
    }

    pub(super) async fn process_partition_modifications(&mut self, topic: &str) -> ZkResult<()> {
        let (found, w) = self.s.get_and_watch(&paths::topic(topic)).await?;
        let Some((data, _)) = found else {
            return Ok(()); // deleted: the topic change handles it
        };
        if self.armed.topic.insert(topic.to_string()) {
            self.on_watch(
                w,
                Event::PartitionModifications(self.generation, topic.to_string()),
            );
        }
        let Ok(a) = znodes::decode::<TopicAssignment>(&data) else {
            tracing::warn!(topic, "unreadable topic assignment");
            return Ok(());
        };
        let a = super::znode_checks::checked_assignment(topic, a);
        let known = self.ctx.assignments.get(topic).cloned().unwrap_or_default();
        let added: BTreeMap<i32, Vec<i32>> = a
            .partitions
            .0
            .into_iter()
            .filter(|(p, _)| !known.contains_key(p))
            .collect();
        if added.is_empty() {
            return Ok(());
        }
        if self.ctx.is_topic_queued_for_deletion(topic) {
            tracing::warn!(topic, "not adding partitions to a topic being deleted");
            return Ok(());
        }
        tracing::info!(topic, partitions = ?added.keys().collect::<Vec<_>>(), "partitions added");
        let tps: Vec<TopicPartition> = added
            .keys()
            .map(|&p| TopicPartition::new(topic, p))
            .collect();
        self.ctx
            .assignments
            .entry(topic.to_string())
            .or_default()
            .extend(added);
        self.on_new_partition_creation(&tps).await
    }

    /// Kafka's `onNewPartitionCreation`: first leader and ISR from the live replicas.
    async fn on_new_partition_creation(&mut self, partitions: &[TopicPartition]) -> ZkResult<()> {
        let replicas: Vec<(TopicPartition, i32)> = partitions
            .iter()
            .flat_map(|tp| self.ctx.replicas(tp).iter().map(move |&r| (tp.clone(), r)))
            .collect();
        self.partition_changes(partitions, PartitionState::New, None)
            .await?;
        self.replica_changes(&replicas, ReplicaState::New).await?;
        self.partition_changes(
            partitions,
            PartitionState::Online,
            Some(Strategy::Offline {
                allow_unclean: false,
            }),
        )
        .await?;
        self.replica_changes(&replicas, ReplicaState::Online).await
    }
}

#[cfg(test)]
#[path = "cluster_events_tests.rs"]
mod tests;
