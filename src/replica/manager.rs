//! ReplicaManager: the table of partitions hosted here, kept in step with metadata.

use std::sync::Arc;

use dashmap::DashMap;

use super::Partition;
use crate::config::{topic, BrokerConfig};
use crate::controller::TopicInfo;
use crate::log::{LogError, LogManager, TopicPartition};

pub struct ReplicaManager {
    broker_id: i32,
    config: Arc<BrokerConfig>,
    pub logs: LogManager,
    partitions: DashMap<TopicPartition, Arc<Partition>>,
}

impl ReplicaManager {
    pub fn new(broker_id: i32, config: Arc<BrokerConfig>, logs: LogManager) -> Self {
        ReplicaManager {
            broker_id,
            config,
            logs,
            partitions: DashMap::new(),
        }
    }

    /// Makes this broker host the partitions of `topic` assigned to it, creating their
    /// logs, and applies the topic's config to them. Called after every metadata change.
    pub fn apply_topic(&self, topic: &TopicInfo) -> Result<(), LogError> {
        let log_config = topic::log_config(&self.config, &topic.configs);
        for p in topic
            .partitions
            .iter()
            .filter(|p| p.replicas.contains(&self.broker_id))
        {
            let tp = TopicPartition {
                topic: topic.name.clone(),
                partition: p.partition,
            };
            if let Some(existing) = self.partitions.get(&tp) {
                existing.log.update_config(log_config.clone());
                continue;
            }
            let log = self
                .logs
                .get_or_create_log(&tp, topic.topic_id, log_config.clone())?;
            log.update_config(log_config.clone());
            let partition = Partition::new(tp.clone(), topic.topic_id, log, p.leader_epoch);
            self.partitions.insert(tp, Arc::new(partition));
        }
        Ok(())
    }

    /// Stops hosting every partition of a deleted topic and removes its files.
    pub fn remove_topic(&self, topic: &TopicInfo) -> Result<(), LogError> {
        for p in &topic.partitions {
            let tp = TopicPartition {
                topic: topic.name.clone(),
                partition: p.partition,
            };
            if self.partitions.remove(&tp).is_some() || self.logs.get_log(&tp).is_some() {
                self.logs.delete_log(&tp)?;
            }
        }
        Ok(())
    }

    /// Deletes logs found on disk that no topic in metadata assigns here (for example a
    /// topic deleted while this broker was down).
    pub fn remove_strays(&self, topics: &[Arc<TopicInfo>]) {
        for log in self.logs.all_logs() {
            let tp = log.topic_partition().clone();
            let known = topics.iter().any(|t| {
                t.name == tp.topic && t.partitions.iter().any(|p| p.partition == tp.partition)
            });
            if !known {
                tracing::info!(partition = %tp, "removing log of a partition no longer in metadata");
                if let Err(e) = self.logs.delete_log(&tp) {
                    tracing::error!(partition = %tp, error = %e, "cannot remove stray log");
                }
            }
        }
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
