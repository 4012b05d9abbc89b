//! ReplicaManager: the table of partitions hosted here, kept in step with metadata by
//! following its deltas (Kafka's `ReplicaManager.applyDelta`): each partition assigned
//! here is created, and takes the role, leader epoch and ISR the metadata announces.
//! Handlers reach a partition only through `leader`.

use std::sync::Arc;

use dashmap::DashMap;

use kafka_protocol::error::ResponseError;

use super::Partition;
use crate::config::{topic, SharedConfig};
use crate::controller::delta::{ApplyError, MetadataDelta, MetadataListener, TopicDelta};
use crate::controller::image::MetadataImage;
use crate::controller::TopicInfo;
use crate::error::ApiError;
use crate::log::cleaner::{Candidate, LogCleaner};
use crate::log::{now_ms, LogError, LogManager, TopicPartition};

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
}

impl ReplicaManager {
    pub fn new(broker_id: i32, config: Arc<SharedConfig>, logs: LogManager) -> Self {
        let cleaner = Arc::new(LogCleaner::new(config.current().cleaner.clone()));
        ReplicaManager {
            broker_id,
            config,
            logs,
            cleaner,
            partitions: DashMap::new(),
            topics: DashMap::new(),
        }
    }

    /// Makes this broker host the partitions of `topic` assigned to it, creating their
    /// logs, applies the topic's config to them, and gives each the role, leader epoch and
    /// ISR the metadata announces. A hosted partition of an older topic of the same name
    /// (deleted and created again) is deleted first.
    fn apply_topic(&self, topic: &TopicInfo) -> Result<(), LogError> {
        self.topics
            .insert(topic.name.clone(), topic.partitions.len());
        let log_config = topic::log_config(&self.config.current(), &topic.configs);
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
                    continue;
                }
                Some(older) => {
                    self.partitions.remove(&tp);
                    older.resign();
                    self.logs.delete_log(&tp)?;
                }
                None => {}
            }
            let log = self
                .logs
                .get_or_create_log(&tp, topic.topic_id, log_config.clone())?;
            log.update_config(log_config.clone());
            let partition = Partition::new(tp.clone(), topic.topic_id, log, p.state.leader_epoch);
            partition.apply_leadership(self.broker_id, &p.assignment.replicas, &p.state, now_ms());
            self.partitions.insert(tp, Arc::new(partition));
        }
        Ok(())
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
        let Some(p) = self.partitions.get(tp).map(|p| p.clone()) else {
            let known = self
                .topics
                .get(&tp.topic)
                .is_some_and(|count| usize::try_from(tp.partition).is_ok_and(|i| i < *count));
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
        self.logs.shutdown()
    }
}

impl MetadataListener for ReplicaManager {
    /// Creates the logs of partitions assigned here, applies topic configs, and deletes
    /// the logs of deleted topics.
    fn on_delta(&self, _image: &MetadataImage, delta: &MetadataDelta) -> Vec<ApplyError> {
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
