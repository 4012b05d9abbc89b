//! The runtime's `PartitionLog` over the replica manager: appends to a partition of an
//! internal topic this broker leads, waits for its high watermark through the
//! partition's notification, and reads it back for loading.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use kafka_protocol::error::ResponseError;

use super::runtime::{Appended, PartitionLog};
use crate::log::LogError;
use crate::replica::{Partition, ReplicaManager};

const RECHECK: std::time::Duration = std::time::Duration::from_secs(1);

pub struct ReplicaPartitionLog {
    replicas: Arc<ReplicaManager>,
    topic: &'static str,
}

impl ReplicaPartitionLog {
    pub fn new(replicas: Arc<ReplicaManager>, topic: &'static str) -> Self {
        ReplicaPartitionLog { replicas, topic }
    }

    fn partition(&self, partition: i32) -> Option<Arc<Partition>> {
        self.replicas.partition(self.topic, partition)
    }
}

#[async_trait]
impl PartitionLog for ReplicaPartitionLog {
    async fn append(
        &self,
        partition: i32,
        batch: Bytes,
        now_ms: i64,
    ) -> Result<Appended, ResponseError> {
        let p = self
            .partition(partition)
            .ok_or(ResponseError::NotCoordinator)?;
        match p.append(batch, now_ms).await {
            Ok(info) => Ok(Appended {
                first_offset: info.first_offset,
                last_offset: info.last_offset,
            }),
            Err(e) => {
                tracing::error!(partition = %p.tp, error = %e, "cannot append to {}", self.topic);
                Err(match e {
                    LogError::MessageTooLarge { .. } | LogError::RecordListTooLarge => {
                        ResponseError::InvalidCommitOffsetSize
                    }
                    _ => ResponseError::CoordinatorNotAvailable,
                })
            }
        }
    }

    fn leader_epoch(&self, partition: i32) -> Option<i32> {
        self.partition(partition).map(|p| p.leader_epoch())
    }

    fn high_watermark(&self, partition: i32) -> Option<i64> {
        self.partition(partition).map(|p| p.high_watermark())
    }

    async fn committed(&self, partition: i32, offset: i64) -> Result<(), ResponseError> {
        let p = self
            .partition(partition)
            .ok_or(ResponseError::NotCoordinator)?;
        loop {
            // Registered before the check, so an advance in between is not missed.
            let advanced = p.appended();
            tokio::pin!(advanced);
            advanced.as_mut().enable();
            if p.high_watermark() > offset {
                return Ok(());
            }
            // Checked again at least every second, so a partition no longer hosted
            // (deleted, or led elsewhere) ends the wait.
            let _ = tokio::time::timeout(RECHECK, advanced).await;
            if self.partition(partition).is_none() {
                return Err(ResponseError::NotCoordinator);
            }
        }
    }

    fn log_start_offset(&self, partition: i32) -> Result<i64, String> {
        let p = self
            .partition(partition)
            .ok_or_else(|| format!("{}-{partition} is not hosted here", self.topic))?;
        Ok(p.log.log_start_offset())
    }

    fn read(&self, partition: i32, offset: i64, max_bytes: usize) -> Result<Bytes, String> {
        let p = self
            .partition(partition)
            .ok_or_else(|| format!("{}-{partition} is not hosted here", self.topic))?;
        p.read(offset, max_bytes, true)
            .map(|data| data.records)
            .map_err(|e| e.to_string())
    }
}
