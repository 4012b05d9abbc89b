//! ReplicaManager: the table of partitions hosted here, kept in step with metadata by
//! following its deltas (Kafka's `ReplicaManager.applyDelta`).

use std::sync::Arc;

use dashmap::DashMap;

use super::Partition;
use crate::config::broker::DynamicConfigs;
use crate::config::cleaner::cleaner_config;
use crate::config::{topic, BrokerConfig};
use crate::controller::delta::{ApplyError, MetadataDelta, MetadataListener, TopicDelta};
use crate::controller::image::MetadataImage;
use crate::controller::TopicInfo;
use crate::log::cleaner::{Candidate, LogCleaner};
use crate::log::{LogError, LogManager, TopicPartition};

pub struct ReplicaManager {
    broker_id: i32,
    config: Arc<BrokerConfig>,
    pub logs: LogManager,
    /// Compaction of the logs with `cleanup.policy=compact` (run by the scheduler's
    /// cleaner jobs, see `clean_filthiest`).
    pub cleaner: Arc<LogCleaner>,
    partitions: DashMap<TopicPartition, Arc<Partition>>,
}

impl ReplicaManager {
    pub fn new(broker_id: i32, config: Arc<BrokerConfig>, logs: LogManager) -> Self {
        let cleaner = Arc::new(LogCleaner::new(cleaner_config(&config)));
        ReplicaManager {
            broker_id,
            config,
            logs,
            cleaner,
            partitions: DashMap::new(),
        }
    }

    /// Makes this broker host the partitions of `topic` assigned to it, creating their
    /// logs, and applies the topic's config to them. A hosted partition of an older topic
    /// of the same name (deleted and created again) is deleted first.
    fn apply_topic(&self, topic: &TopicInfo) -> Result<(), LogError> {
        let log_config = topic::log_config(&self.config, &topic.configs);
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
                    existing.log.update_config(log_config.clone());
                    continue;
                }
                Some(_) => {
                    self.partitions.remove(&tp);
                    self.logs.delete_log(&tp)?;
                }
                None => {}
            }
            let log = self
                .logs
                .get_or_create_log(&tp, topic.topic_id, log_config.clone())?;
            log.update_config(log_config.clone());
            let partition = Partition::new(tp.clone(), topic.topic_id, log, p.state.leader_epoch);
            self.partitions.insert(tp, Arc::new(partition));
        }
        Ok(())
    }

    /// Takes the dynamic broker configs of `image`: the config every log's defaults come
    /// from sees them at once, each hosted log gets its config again, and the cleaner its
    /// settings (Kafka's `DynamicLogConfig` and `LogCleaner.reconfigure`).
    fn apply_broker_configs(&self, image: &MetadataImage) {
        self.config.set_dynamic(DynamicConfigs {
            broker: image.broker_configs(&self.broker_id.to_string()),
            default: image.broker_configs(""),
        });
        for p in self.partitions.iter() {
            let overrides = image
                .topic(&p.tp.topic)
                .map(|t| t.configs.clone())
                .unwrap_or_default();
            p.log.update_config(topic::log_config(&self.config, &overrides));
        }
        self.cleaner.update_config(cleaner_config(&self.config));
    }

    /// Stops hosting every partition of a deleted topic; each log's directory is renamed
    /// for deletion at once and removed after `file.delete.delay.ms`.
    fn remove_topic(&self, topic: &TopicInfo) -> Result<(), LogError> {
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
            self.partitions.remove(&tp);
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
        for p in partitions.iter().filter(|p| !p.log.is_offline()) {
            if let Err(e) = p.log.roll_if_idle(now_ms) {
                tracing::error!(partition = %p.tp, error = %e, "cannot roll an idle segment");
            }
            // A compacted log is not changed under its cleaner: its retention waits for the
            // cleaner, which applies it after each cleaning.
            let _cleaning = match p.log.config().cleanup_policy.compact {
                true => match p.log.try_lock_cleaning() {
                    Some(guard) => Some(guard),
                    None => continue,
                },
                false => None,
            };
            match p.log.delete_old_segments(now_ms, p.high_watermark()) {
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
            .filter(|p| p.log.config().cleanup_policy.compact)
            .map(|p| Candidate {
                log: p.log.clone(),
                high_watermark: p.high_watermark(),
            })
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
    fn on_delta(&self, image: &MetadataImage, delta: &MetadataDelta) -> Vec<ApplyError> {
        let mut failed = Vec::new();
        if delta.broker_configs {
            self.apply_broker_configs(image);
        }
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
