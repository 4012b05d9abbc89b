//! ReplicaManager: the table of partitions hosted here, kept in step with metadata by
//! following its deltas (Kafka's `ReplicaManager.applyDelta`): each partition assigned
//! here is created, and takes the role, leader epoch and ISR the metadata announces.
//! Handlers reach a partition only through `leader`.
//!
//! Once replication is started (`start_replication`), every partition this broker
//! follows is replicated by a fetcher from its leader, and every partition it leads sends
//! its ISR changes to the controller.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use dashmap::DashMap;

use kafka_protocol::error::ResponseError;

use super::append::TransactionVerifier;
use super::cluster_view::ClusterView;
use super::fetcher::endpoint::{EndpointFactory, NetworkEndpoints};
use super::fetcher::{FetcherSettings, ReplicaFetcherManager};
use super::isr::{self, ControllerChannel, IsrChanges, NetworkControllerChannel};
use super::throttle::ReplicationQuotas;
use super::{Partition, Role};
use crate::client::ClientConfig;
use crate::config::{topic, SharedConfig};
use crate::controller::delta::{ApplyError, MetadataDelta, MetadataListener, TopicDelta};
use crate::controller::image::MetadataImage;
use crate::controller::TopicInfo;
use crate::error::ApiError;
use crate::log::cleaner::{Candidate, LogCleaner};
use crate::log::{now_ms, LogError, LogManager, PartitionKey, TopicPartition};
use crate::metrics::{Metrics, TopicCounters};

pub struct ReplicaManager {
    broker_id: i32,
    config: Arc<SharedConfig>,
    pub logs: LogManager,
    /// Compaction of the logs with `cleanup.policy=compact` (run by the scheduler's
    /// cleaner jobs, see `clean_filthiest`).
    pub cleaner: Arc<LogCleaner>,
    partitions: DashMap<TopicPartition, Arc<Partition>>,
    /// The partition count of every topic in the metadata, to tell a partition led by
    /// another broker (NOT_LEADER_OR_FOLLOWER) from one that does not exist.
    topics: DashMap<String, usize>,
    /// The other brokers, the controller and this broker's epoch, from the metadata.
    pub cluster: Arc<ClusterView>,
    /// Replication throttles, of this broker's leaders and of its fetchers.
    pub quotas: Arc<ReplicationQuotas>,
    replication: OnceLock<Replication>,
    /// The high watermarks of `replication-offset-checkpoint` as found at startup (read at
    /// the first partition created); each is taken by its partition once, when it is first
    /// hosted, so a log created later never inherits an older one's.
    checkpointed_high_watermarks: parking_lot::Mutex<Option<HashMap<TopicPartition, i64>>>,
    /// Partitions a StopReplica without deletion stopped, with the leader epoch they had
    /// then: hosted still, but not fetched until a newer leader epoch comes.
    stopped: DashMap<TopicPartition, i32>,
    /// The broker's metrics; each hosted partition keeps its topic's counters from it.
    pub metrics: Arc<Metrics>,
    /// The transaction coordinator, for KIP-890's check of a transaction's first batch.
    /// Weak: the transaction coordinator appends through this replica manager, and a
    /// strong reference back would keep both (and the log dirs' locks) alive forever.
    txn_verifier: OnceLock<std::sync::Weak<dyn TransactionVerifier>>,
    /// A KRaft broker's channel for telling its controller a moved replica's new log dir
    /// (`log_dir_move`); unset elsewhere, where a move switches as soon as it caught up.
    pub(super) dir_assigner: OnceLock<Arc<dyn super::log_dir_move::DirAssigner>>,
}

/// The fetchers and the ISR-change queue, once started.
struct Replication {
    fetchers: ReplicaFetcherManager,
    isr_changes: IsrChanges,
    isr_task: tokio::task::JoinHandle<()>,
}

impl ReplicaManager {
    pub fn new(broker_id: i32, config: Arc<SharedConfig>, logs: LogManager) -> Self {
        let cleaner = Arc::new(LogCleaner::new(config.current().cleaner.clone()));
        let r = &config.current().replication;
        let quotas = Arc::new(ReplicationQuotas::new(
            r.replication_quota_window_num,
            std::time::Duration::from_secs(r.replication_quota_window_size_seconds),
        ));
        ReplicaManager {
            broker_id,
            config,
            logs,
            cleaner,
            partitions: DashMap::new(),
            topics: DashMap::new(),
            cluster: Arc::new(ClusterView::new(broker_id)),
            quotas,
            replication: OnceLock::new(),
            checkpointed_high_watermarks: parking_lot::Mutex::new(None),
            stopped: DashMap::new(),
            metrics: Arc::new(Metrics::new()),
            txn_verifier: OnceLock::new(),
            dir_assigner: OnceLock::new(),
        }
    }

    /// Makes every log dir move wait for the controller to accept the replica's new dir
    /// before it switches (set once, when a KRaft broker starts following).
    pub fn set_dir_assigner(&self, assigner: Arc<dyn super::log_dir_move::DirAssigner>) {
        let _ = self.dir_assigner.set(assigner);
    }

    /// Gives the replica manager the transaction coordinator to verify transactional
    /// batches with (set once, when the coordinator starts).
    pub fn set_transaction_verifier(&self, verifier: &Arc<dyn TransactionVerifier>) {
        let _ = self.txn_verifier.set(Arc::downgrade(verifier));
    }

    pub(super) fn transaction_verifier(&self) -> Option<Arc<dyn TransactionVerifier>> {
        self.txn_verifier.get()?.upgrade()
    }

    /// Whether the metadata knows `topic`.
    pub fn knows_topic(&self, topic: &str) -> bool {
        self.topics.contains_key(topic)
    }

    /// The high watermark checkpointed for `tp` before this start, taken once.
    fn take_checkpointed_high_watermark(&self, tp: &TopicPartition) -> Option<i64> {
        self.checkpointed_high_watermarks
            .lock()
            .get_or_insert_with(|| self.logs.checkpointed_high_watermarks())
            .remove(tp)
    }

    /// Writes every hosted partition's high watermark to its log dir's
    /// `replication-offset-checkpoint`; run periodically and at shutdown.
    pub fn checkpoint_high_watermarks(&self) {
        let written = self
            .logs
            .checkpoint_high_watermarks(|tp| self.partitions.get(tp).map(|p| p.high_watermark()));
        if let Err(e) = written {
            tracing::error!(error = %e, "cannot write the high watermark checkpoints");
        }
    }

    /// Starts replicating: followers fetch from their leaders through `endpoints`, leaders
    /// send ISR changes through `controller`. Partitions hosted already take their places
    /// at once. Runs inside a tokio runtime; a second call changes nothing.
    pub fn start_replication(
        &self,
        endpoints: Arc<dyn EndpointFactory>,
        controller: Arc<dyn ControllerChannel>,
    ) {
        let settings = FetcherSettings::from_config(&self.config.current().replication);
        if self.replication.get().is_some() {
            return;
        }
        let (isr_changes, isr_task) =
            isr::start(controller, self.cluster.clone(), self.metrics.clone());
        let started = self.replication.set(Replication {
            fetchers: ReplicaFetcherManager::new(
                settings,
                endpoints,
                self.cluster.clone(),
                self.quotas.clone(),
            ),
            isr_changes,
            isr_task,
        });
        if let Err(unused) = started {
            unused.isr_task.abort();
            return;
        }
        let hosted: Vec<Arc<Partition>> = self.partitions.iter().map(|p| p.clone()).collect();
        for p in hosted {
            self.take_place(&p);
        }
    }

    /// `start_replication` over the network: fetchers connect to the leaders' advertised
    /// addresses, ISR changes go to `controller`, or (`None`) to the controller the
    /// metadata names, over a client of its own.
    pub fn start_network_replication(&self, controller: Option<Arc<dyn ControllerChannel>>) {
        let config = self.config.current();
        let r = &config.replication;
        let fetch = ClientConfig {
            client_id: Some(format!("broker-{}-fetcher", self.broker_id)),
            request_timeout: std::time::Duration::from_millis(r.replica_socket_timeout_ms),
            reconnect_backoff: std::time::Duration::from_millis(r.replica_fetch_backoff_ms),
            reconnect_backoff_max: std::time::Duration::from_millis(
                r.replica_fetch_backoff_ms.max(1_000),
            ),
            tls: self.config.outbound_tls(),
            sasl: self.config.outbound_sasl(),
            ..ClientConfig::default()
        };
        let endpoints = Arc::new(NetworkEndpoints {
            cluster: self.cluster.clone(),
            local_id: self.broker_id,
            config: fetch,
            inter_broker_protocol: r.inter_broker_protocol_version,
        });
        let to_controller = ClientConfig {
            client_id: Some(format!("broker-{}-alter-partition", self.broker_id)),
            tls: self.config.outbound_tls(),
            sasl: self.config.outbound_sasl(),
            ..ClientConfig::default()
        };
        let controller = controller.unwrap_or_else(|| {
            Arc::new(NetworkControllerChannel::new(
                self.cluster.clone(),
                to_controller,
            ))
        });
        self.start_replication(endpoints, controller);
    }

    /// Puts a partition where its role says, once replication runs: a follower with a
    /// leader in a fetcher from that leader, any other out of the fetchers; a leader sends
    /// its ISR changes to the controller.
    fn take_place(&self, p: &Arc<Partition>) {
        let Some(replication) = self.replication.get() else {
            return;
        };
        p.send_isr_changes_to(replication.isr_changes.clone());
        if let Some(at) = self.stopped.get(&p.tp).map(|e| *e) {
            if p.leader_epoch() <= at {
                replication.fetchers.remove_partition(&p.tp);
                return;
            }
            self.stopped.remove(&p.tp);
        }
        match p.role() {
            Role::Follower { leader } if leader >= 0 => match self.cluster.address(leader) {
                Some(addr) => replication.fetchers.add_partition(
                    p.clone(),
                    p.topic_id,
                    leader,
                    addr,
                    p.leader_epoch(),
                ),
                None => {
                    tracing::warn!(partition = %p.tp, leader, "the leader's address is not known; not fetching");
                    replication.fetchers.remove_partition(&p.tp);
                }
            },
            _ => replication.fetchers.remove_partition(&p.tp),
        }
    }

    /// After the live brokers changed: every follower whose leader's address is known
    /// now fetches from it (one whose LeaderAndIsr came before its leader was known as
    /// live, or whose leader came back at another address). A follower whose leader is
    /// gone keeps its fetcher, which backs off until the controller names another.
    fn follow_known_leaders(&self) {
        let hosted: Vec<Arc<Partition>> = self.partitions.iter().map(|p| p.clone()).collect();
        for p in hosted {
            if let Role::Follower { leader } = p.role() {
                if leader >= 0 && self.cluster.address(leader).is_some() {
                    self.take_place(&p);
                }
            }
        }
    }

    fn stop_fetching(&self, tp: &TopicPartition) {
        if let Some(replication) = self.replication.get() {
            replication.fetchers.remove_partition(tp);
        }
    }

    /// Kafka's `stopReplicas` without deletion: the replica stays hosted with its log,
    /// and its fetcher stops until a LeaderAndIsr gives it a newer leader epoch (a
    /// reassignment removing this broker stops it this way before deleting it).
    pub fn stop_replica(&self, tp: &TopicPartition) {
        let Some(p) = self.partition(&tp.topic, tp.partition) else {
            return;
        };
        self.stopped.insert(tp.clone(), p.leader_epoch());
        self.stop_fetching(tp);
        // Kafka's "if we were the leader, we may have some operations still waiting for
        // completion": they look again now (an offline log answers them at once).
        p.wake_waiters();
    }

    /// The replica side of a log dir going offline (Kafka's
    /// `ReplicaManager.handleLogDirFailure`): the partitions whose logs were in it stop
    /// fetching, and what waits on them is answered now (KAFKA_STORAGE_ERROR to an
    /// acks=all append, NOT_COORDINATOR to a coordinator's write) instead of holding a
    /// request, and with it the connection and a clean shutdown, until its timeout.
    pub fn handle_log_dir_failure(&self, dir: &std::path::Path) {
        let offline: Vec<Arc<Partition>> = self
            .partitions
            .iter()
            .filter(|p| p.log().is_offline())
            .map(|p| p.clone())
            .collect();
        tracing::info!(
            dir = %dir.display(),
            partitions = offline.len(),
            "partitions of an offline log dir: their fetchers stopped, their waiting requests answered"
        );
        for p in offline {
            self.stop_fetching(&p.tp);
            p.wake_waiters();
        }
    }

    /// What this broker's replica fetchers have sent, once replication started.
    pub fn fetcher_stats(&self) -> Option<super::fetcher::stats::FetcherStatsSnapshot> {
        Some(self.replication.get()?.fetchers.stats())
    }

    /// The leader epoch `tp` is replicated at, if a fetcher replicates it.
    pub fn fetching(&self, tp: &TopicPartition) -> Option<i32> {
        self.replication.get()?.fetchers.fetching(tp)
    }

    /// Proposes ISR shrinks for every partition led here whose followers have not caught
    /// up for `replica.lag.time.max.ms` (Kafka's `isr-expiration` job, over its online
    /// partitions: one whose log dir went offline is led elsewhere once the controller
    /// hears of it, and its proposals would only be refused as fenced).
    pub fn maybe_shrink_isrs(&self, now_ms: i64) {
        let max_lag_ms = self.config.current().replication.replica_lag_time_max_ms;
        let led: Vec<Arc<Partition>> = self
            .partitions
            .iter()
            .filter(|p| p.is_leader() && !p.log().is_offline())
            .map(|p| p.clone())
            .collect();
        for p in led {
            p.maybe_shrink_isr(now_ms, max_lag_ms);
        }
    }

    /// Makes this broker host the partitions of `topic` assigned to it, creating their
    /// logs, applies the topic's config to them, and gives each the role, leader epoch and
    /// ISR the metadata announces. A hosted partition of an older topic of the same name
    /// (deleted and created again) is deleted first. The new logs are made together (on
    /// several threads, see `LogManager::get_or_create_logs`), and each partition is
    /// served only once its log exists; one that cannot be made leaves the others served.
    fn apply_topic(&self, topic: &TopicInfo) -> Result<(), LogError> {
        self.topics
            .insert(topic.name.clone(), topic.partitions.len());
        let log_config = topic::log_config(&self.config.current(), &topic.configs);
        self.quotas
            .update_topic(self.broker_id, &topic.name, &topic.configs);
        let mut new = Vec::new();
        for p in topic
            .partitions
            .iter()
            .filter(|p| p.assignment.replicas.contains(&self.broker_id))
        {
            let tp = TopicPartition {
                topic: topic.name.clone(),
                partition: p.partition,
            };
            let hosted = self.partitions.get(&tp).map(|e| e.clone());
            match hosted {
                Some(existing) if existing.topic_id == topic.topic_id => {
                    existing.update_log_config(log_config.clone());
                    existing.apply_leadership(
                        self.broker_id,
                        &p.assignment.replicas,
                        &p.state,
                        now_ms(),
                    );
                    self.take_place(&existing);
                    continue;
                }
                Some(older) => {
                    self.partitions.remove(&tp);
                    self.stop_fetching(&tp);
                    self.stopped.remove(&tp);
                    older.resign();
                    self.logs.delete_log(&tp)?;
                }
                None => {}
            }
            new.push((tp, p));
        }
        let tps: Vec<TopicPartition> = new.iter().map(|(tp, _)| tp.clone()).collect();
        // The dir the metadata names for this broker's replica, if any (KRaft, KIP-858).
        let targets: Vec<Option<uuid::Uuid>> = new
            .iter()
            .map(|(_, p)| {
                let a = &p.assignment;
                let i = a.replicas.iter().position(|r| *r == self.broker_id)?;
                a.directories.get(i).copied()
            })
            .collect();
        let logs = self
            .logs
            .get_or_create_logs_in(&tps, &targets, topic.topic_id, &log_config);
        let mut first_error = None;
        // Resolved once per topic, not per request: appends and reads mark them directly.
        let counters = (!new.is_empty()).then(|| self.metrics.topics.for_topic(&topic.name));
        let max_lag_ms = self.config.current().replication.replica_lag_time_max_ms;
        for ((tp, p), log) in new.into_iter().zip(logs) {
            let log = match log {
                Ok(log) => log,
                Err(e) => {
                    first_error.get_or_insert(e);
                    continue;
                }
            };
            log.update_config(log_config.clone());
            // What was committed before a restart stays committed (and no more: a leader
            // exposes nothing its followers may not have until they report it).
            let high_watermark = self.take_checkpointed_high_watermark(&tp).unwrap_or(0);
            let partition = Partition::new(tp.clone(), topic.topic_id, log, p.state.leader_epoch)
                .with_high_watermark(high_watermark)
                .with_counters(counters.clone().unwrap_or_else(TopicCounters::unregistered))
                .with_replica_lag_time_max_ms(max_lag_ms);
            partition.apply_leadership(self.broker_id, &p.assignment.replicas, &p.state, now_ms());
            let partition = Arc::new(partition);
            self.take_place(&partition);
            self.partitions.insert(tp, partition);
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Gives every hosted log its config again from the broker config in force and its
    /// topic's overrides in `image`: a dynamic broker config change acts at once.
    pub fn reconfigure_logs(&self, image: &MetadataImage) {
        let broker = self.config.current();
        for p in self.partitions.iter() {
            let overrides = image
                .topic(&p.tp.topic)
                .map(|t| t.configs.clone())
                .unwrap_or_default();
            p.update_log_config(topic::log_config(&broker, &overrides));
        }
    }

    /// Stops hosting every partition of a deleted topic; each log's directory is renamed
    /// for deletion at once and removed after `file.delete.delay.ms`.
    fn remove_topic(&self, topic: &TopicInfo) -> Result<(), LogError> {
        self.topics.remove(&topic.name);
        self.quotas.remove_topic(&topic.name);
        self.metrics.topics.remove_topic(&topic.name);
        for p in &topic.partitions {
            let tp = TopicPartition {
                topic: topic.name.clone(),
                partition: p.partition,
            };
            // A newer topic of the same name may be hosted already: only this topic's
            // logs go.
            let hosted = self.partitions.get(&tp).map(|p| p.topic_id);
            if hosted.is_some_and(|id| id != topic.topic_id) {
                continue;
            }
            if let Some((_, removed)) = self.partitions.remove(&tp) {
                self.stop_fetching(&tp);
                self.stopped.remove(&tp);
                removed.resign();
            }
            if self
                .logs
                .topic_id_of(&tp)
                .is_none_or(|id| id == topic.topic_id)
            {
                self.logs.delete_log(&tp)?;
            }
        }
        Ok(())
    }

    /// The partition `tp` for requests meant for its leader (Kafka's
    /// `getPartitionOrError` and `localLogWithEpochOrThrow`): hosted here, online, at the
    /// client's leader epoch (-1: any), and led by this broker. Otherwise the error to
    /// answer: UNKNOWN_TOPIC_OR_PARTITION for a partition the metadata does not know,
    /// NOT_LEADER_OR_FOLLOWER for one led elsewhere, KAFKA_STORAGE_ERROR, or
    /// FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH.
    pub fn leader(
        &self,
        tp: &TopicPartition,
        current_leader_epoch: i32,
    ) -> Result<Arc<Partition>, ApiError> {
        self.leader_of(&tp.topic, tp.partition, current_leader_epoch)
    }

    /// [`leader`](Self::leader) for a partition named by a borrowed topic name (a slice of
    /// the request), so finding it copies no name.
    pub fn leader_of(
        &self,
        topic: &str,
        partition: i32,
        current_leader_epoch: i32,
    ) -> Result<Arc<Partition>, ApiError> {
        let key = (topic, partition);
        let found = self
            .partitions
            .get(&key as &dyn PartitionKey)
            .map(|p| p.clone());
        let Some(p) = found else {
            let known = self
                .topics
                .get(topic)
                .is_some_and(|count| usize::try_from(partition).is_ok_and(|i| i < *count));
            let error = match known {
                true => ResponseError::NotLeaderOrFollower,
                false => ResponseError::UnknownTopicOrPartition,
            };
            return Err(ApiError::new(
                error,
                "This server does not host this topic-partition.",
            ));
        };
        p.check_leader(current_leader_epoch)?;
        Ok(p)
    }

    /// Every partition hosted here, whatever its role (for the metrics: a copy of the
    /// handles, so no map lock is held while they are read).
    pub fn hosted_partitions(&self) -> Vec<Arc<Partition>> {
        self.partitions.iter().map(|p| p.value().clone()).collect()
    }

    /// A partition hosted here, whatever its role (the broker's own bookkeeping; requests
    /// go through `leader`).
    pub fn partition(&self, topic: &str, partition: i32) -> Option<Arc<Partition>> {
        let tp = TopicPartition {
            topic: topic.to_string(),
            partition,
        };
        self.partitions.get(&tp).map(|p| p.clone())
    }

    /// The retention check (Kafka's `kafka-log-retention` task, every
    /// `log.retention.check.interval.ms`): in every online log, rolls an idle active
    /// segment that `segment.ms` says is due and deletes the segments retention lets go.
    /// The log-start checkpoint is written when any log start moved. Blocking.
    pub fn delete_old_segments(&self, now_ms: i64) -> usize {
        let partitions: Vec<Arc<Partition>> =
            self.partitions.iter().map(|p| p.value().clone()).collect();
        let mut deleted = 0;
        for p in &partitions {
            match p.delete_old_segments(now_ms) {
                Ok(n) => deleted += n,
                Err(e) => {
                    tracing::error!(partition = %p.tp, error = %e, "retention check failed")
                }
            }
        }
        if deleted > 0 {
            self.checkpoint_log_start_offsets();
        }
        deleted
    }

    /// One cleaner thread's turn (see `LogCleaner::clean_filthiest`): cleans the filthiest
    /// compacted log, if one is due, and writes the cleaner checkpoints. Returns whether
    /// a log was cleaned. Blocking.
    pub fn clean_filthiest(&self, now_ms: i64) -> bool {
        let candidates: Vec<Candidate> = self
            .partitions
            .iter()
            .filter_map(|p| p.cleaner_candidate())
            .collect();
        let cleaned = self.cleaner.clean_filthiest(&candidates, now_ms);
        if cleaned.is_some() {
            if let Err(e) = self.logs.checkpoint_cleaner_offsets() {
                tracing::error!(error = %e, "cannot write the cleaner offset checkpoints");
            }
        }
        cleaned.is_some()
    }

    /// Writes the log-start-offset checkpoints; run periodically and after DeleteRecords.
    pub fn checkpoint_log_start_offsets(&self) {
        if let Err(e) = self.logs.checkpoint_log_start_offsets() {
            tracing::error!(error = %e, "cannot write log start offset checkpoints");
        }
    }

    /// Writes recovery-point checkpoints; run periodically.
    pub fn checkpoint(&self) {
        if let Err(e) = self.logs.checkpoint_recovery_points() {
            tracing::error!(error = %e, "cannot write recovery point checkpoints");
        }
    }

    /// Clean shutdown of every log: flush, indexes trimmed, checkpoints, marker.
    pub fn shutdown(&self) -> Result<(), LogError> {
        if let Some(replication) = self.replication.get() {
            replication.fetchers.shutdown();
            replication.isr_task.abort();
        }
        self.checkpoint_high_watermarks();
        self.logs.shutdown()
    }
}

impl MetadataListener for ReplicaManager {
    /// Creates the logs of partitions assigned here, applies topic configs, and deletes
    /// the logs of deleted topics.
    fn on_delta(&self, image: &MetadataImage, delta: &MetadataDelta) -> Vec<ApplyError> {
        self.cluster.update(image);
        if delta.cluster {
            self.follow_known_leaders();
        }
        let mut failed = Vec::new();
        for (name, change) in &delta.topics {
            let applied = match change {
                TopicDelta::Changed(t) => self.apply_topic(t),
                TopicDelta::Removed(t) => self.remove_topic(t),
            };
            if let Err(e) = applied {
                failed.push(ApplyError {
                    topic: name.clone(),
                    message: e.to_string(),
                });
            }
        }
        failed
    }
}
