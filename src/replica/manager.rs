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

    /// Stops hosting every partition of a deleted topic; each log's directory is renamed
    /// for deletion at once and removed after `file.delete.delay.ms`.
    pub fn remove_topic(&self, topic: &TopicInfo) -> Result<(), LogError> {
        for p in &topic.partitions {
            let tp = TopicPartition {
                topic: topic.name.clone(),
                partition: p.partition,
            };
            self.partitions.remove(&tp);
            self.logs.delete_log(&tp)?;
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
