//! The runtime's `PartitionLog` over the replica manager: appends to a partition of an
//! internal topic this broker leads, waits for its high watermark through the
//! partition's notification, and reads it back for loading.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use kafka_protocol::error::ResponseError;

use super::runtime::{Appended, PartitionLog};
use crate::error::ApiError;
use crate::log::control::EndTxnMarker;
use crate::log::TopicPartition;
use crate::replica::{
    AppendData, AppendEntry, AppendOrigin, AppendOutcome, Partition, ReplicaManager,
};

pub struct ReplicaPartitionLog {
    replicas: Arc<ReplicaManager>,
    topic: &'static str,
}

impl ReplicaPartitionLog {
    pub fn new(replicas: Arc<ReplicaManager>, topic: &'static str) -> Self {
        ReplicaPartitionLog { replicas, topic }
    }

    /// The partition, when this broker leads it.
    fn leader(&self, partition: i32) -> Result<Arc<Partition>, ApiError> {
        self.replicas
            .leader(&TopicPartition::new(self.topic, partition), -1)
    }
}

/// What a coordinator's client is told when its records could not be written (Kafka's
/// coordinators do the same): a write too large for the log is an offset commit too
/// large (UNKNOWN_SERVER_ERROR for transactions); anything else means the coordinator cannot serve now, and the client looks
/// it up again.
fn coordinator_error(topic: &str, e: &ApiError) -> ResponseError {
    match e.error {
        // Kafka's transaction coordinator has no offset-size error to give.
        ResponseError::MessageTooLarge | ResponseError::RecordListTooLarge
            if topic == super::TRANSACTION_STATE_TOPIC =>
        {
            ResponseError::UnknownServerError
        }
        ResponseError::MessageTooLarge | ResponseError::RecordListTooLarge => {
            ResponseError::InvalidCommitOffsetSize
        }
        ResponseError::NotLeaderOrFollower | ResponseError::UnknownTopicOrPartition => {
            ResponseError::NotCoordinator
        }
        _ => ResponseError::CoordinatorNotAvailable,
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
        let _ = now_ms; // the replica manager stamps the append's time itself
        let entry = AppendEntry::new(self.topic, partition, AppendData::Records(batch));
        let outcome = Some(
            self.replicas
                .append_one(AppendOrigin::Coordinator, entry)
                .await,
        );
        match outcome {
            Some(AppendOutcome::Appended(info)) => Ok(Appended {
                first_offset: info.first_offset,
                last_offset: info.last_offset,
            }),
            Some(AppendOutcome::Refused {
                log_start_offset: -1,
                ..
            }) => Err(ResponseError::NotCoordinator),
            Some(AppendOutcome::Refused { error, .. }) => {
                tracing::error!(partition, error = %error, "cannot append to {}", self.topic);
                Err(coordinator_error(self.topic, &error.error()))
            }
            other => {
                tracing::error!(partition, outcome = ?other, "cannot append to {}", self.topic);
                Err(ResponseError::CoordinatorNotAvailable)
            }
        }
    }

    async fn append_marker(
        &self,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        marker: EndTxnMarker,
        now_ms: i64,
    ) -> Result<Appended, ResponseError> {
        let _ = now_ms; // the replica manager stamps the append's time itself
        if self.leader(partition).is_err() {
            return Err(ResponseError::NotCoordinator);
        }
        let data = AppendData::Marker {
            producer_id,
            producer_epoch,
            marker,
        };
        let entry = AppendEntry::new(self.topic, partition, data);
        let outcome = Some(self.replicas.append_one(AppendOrigin::Marker, entry).await);
        match outcome {
            Some(AppendOutcome::Appended(info)) => Ok(Appended {
                first_offset: info.first_offset,
                last_offset: info.last_offset,
            }),
            // The marker writer needs the log's own answer (an old producer epoch, a
            // fenced coordinator) to decide whether to retry.
            Some(AppendOutcome::Refused { error, .. }) => Err(error.error().error),
            _ => Err(ResponseError::CoordinatorNotAvailable),
        }
    }

    fn leader_epoch(&self, partition: i32) -> Option<i32> {
        self.leader(partition).ok().map(|p| p.leader_epoch())
    }

    fn is_offline(&self, partition: i32) -> bool {
        self.replicas
            .partition(self.topic, partition)
            .is_some_and(|p| p.log().is_offline())
    }

    fn leaderships_in_doubt(&self) -> bool {
        self.replicas.cluster.leaderships_in_doubt()
    }

    fn high_watermark(&self, partition: i32) -> Option<i64> {
        self.leader(partition).ok().map(|p| p.high_watermark())
    }

    async fn committed(&self, partition: i32, offset: i64) -> Result<(), ResponseError> {
        let p = self
            .leader(partition)
            .map_err(|_| ResponseError::NotCoordinator)?;
        loop {
            // Registered before the check, so an advance in between is not missed. A
            // partition that stops being led here (deleted, or led elsewhere) or whose log
            // dir goes offline wakes it too. An offline log's high watermark never passes
            // the write (no follower can fetch it): Kafka's coordinator gets
            // KAFKA_STORAGE_ERROR for it and answers NOT_COORDINATOR.
            let advanced = p.high_watermark_advanced();
            tokio::pin!(advanced);
            advanced.as_mut().enable();
            if !p.is_leader() || p.log().is_offline() {
                return Err(ResponseError::NotCoordinator);
            }
            if p.high_watermark() > offset {
                return Ok(());
            }
            advanced.await;
        }
    }

    fn log_start_offset(&self, partition: i32) -> Result<i64, ApiError> {
        Ok(self.hosted(partition)?.log_start_offset())
    }

    fn read(&self, partition: i32, offset: i64, max_bytes: usize) -> Result<Bytes, ApiError> {
        let p = self.hosted(partition)?;
        // To the log end, not the high watermark: a newly elected leader learns the
        // high watermark one fetch after the records, so the last records the old
        // leader acknowledged can lie above it here; loading them is what keeps a
        // transaction's last AddPartitionsToTxn (or an offset commit) from being lost.
        Ok(p.read_to_log_end(offset, max_bytes, true)?.records)
    }
}

impl ReplicaPartitionLog {
    /// The partition for loading: hosted here, whatever the client's epoch.
    fn hosted(&self, partition: i32) -> Result<Arc<Partition>, ApiError> {
        self.replicas
            .partition(self.topic, partition)
            .ok_or_else(|| {
                ApiError::new(
                    ResponseError::NotLeaderOrFollower,
                    format!("{}-{partition} is not hosted here", self.topic),
                )
            })
    }
}
