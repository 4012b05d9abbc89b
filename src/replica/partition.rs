//! One hosted partition: its log, leader epoch, high watermark, and the notification
//! that wakes long-polling fetches when records are appended.

use std::sync::atomic::{AtomicI32, AtomicI64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use tokio::sync::Notify;
use uuid::Uuid;

use crate::log::{AppendInfo, FetchData, FileSlice, Log, LogError, TopicPartition};

pub struct Partition {
    pub tp: TopicPartition,
    pub topic_id: Uuid,
    pub log: Arc<Log>,
    leader_epoch: AtomicI32,
    /// Offsets below this are committed (replicated to the whole ISR) and visible to
    /// consumers. With one replica that is every appended record.
    high_watermark: AtomicI64,
    appended: Notify,
}

impl Partition {
    pub fn new(tp: TopicPartition, topic_id: Uuid, log: Arc<Log>, leader_epoch: i32) -> Self {
        let high_watermark = AtomicI64::new(log.log_end_offset());
        // Appends run on the runtime; a roll's fsync and snapshot go to the blocking pool.
        log.defer_roll_work();
        Partition {
            tp,
            topic_id,
            log,
            leader_epoch: AtomicI32::new(leader_epoch),
            high_watermark,
            appended: Notify::new(),
        }
    }

    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch.load(Ordering::Acquire)
    }

    /// Checks the leader epoch a client believes current (KIP-320); -1 skips the check.
    /// Older than ours: FENCED_LEADER_EPOCH; newer: UNKNOWN_LEADER_EPOCH (metadata lags).
    /// A partition whose log dir went offline answers KAFKA_STORAGE_ERROR to everything.
    pub fn check_leader_epoch(&self, current_leader_epoch: i32) -> Result<(), ResponseError> {
        if self.log.is_offline() {
            return Err(ResponseError::KafkaStorageError);
        }
        let epoch = self.leader_epoch();
        match current_leader_epoch {
            e if e < 0 || e == epoch => Ok(()),
            e if e < epoch => Err(ResponseError::FencedLeaderEpoch),
            _ => Err(ResponseError::UnknownLeaderEpoch),
        }
    }

    pub fn high_watermark(&self) -> i64 {
        self.high_watermark.load(Ordering::Acquire)
    }

    /// Appends a produce request's records as leader. Once `flush.messages` unflushed
    /// messages have piled up (with 1: every append) the append is made durable before
    /// returning; concurrent producers share one fsync (group commit in `Log::flush_to`).
    /// A retried duplicate is acknowledged only once its original is as durable as a
    /// fresh append would be: its flush may still be running, or may have failed.
    pub async fn append(&self, records: Bytes, now_ms: i64) -> Result<AppendInfo, LogError> {
        let info = self
            .log
            .append_as_leader(records, self.leader_epoch(), now_ms)?;
        if self.log.has_pending_roll() {
            let log = self.log.clone();
            tokio::task::spawn_blocking(move || log.complete_roll());
        }
        let flush = match info.duplicate {
            false => self.log.flush_needed(),
            true => {
                self.log.config().flush_interval_messages == 1
                    && self.log.recovery_point() <= info.last_offset
            }
        };
        if flush {
            let log = self.log.clone();
            let upto = info.last_offset + 1;
            tokio::task::spawn_blocking(move || log.flush_to(upto))
                .await
                .map_err(|e| LogError::KafkaStorage(std::io::Error::other(e)))??;
        }
        self.advance_high_watermark();
        Ok(info)
    }

    /// With a single replica the high watermark follows the log end offset.
    fn advance_high_watermark(&self) {
        let leo = self.log.log_end_offset();
        if self.high_watermark.fetch_max(leo, Ordering::AcqRel) < leo {
            self.appended.notify_waiters();
        }
    }

    /// Reads committed records (below the high watermark) from `offset`.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_message: bool,
    ) -> Result<FetchData<Bytes>, LogError> {
        self.log
            .read(offset, max_bytes, self.high_watermark(), min_one_message)
    }

    /// Where the committed records from `offset` lie, for a zero-copy send (see
    /// [`Log::read_slice`]).
    pub fn read_slice(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_message: bool,
    ) -> Result<FetchData<Option<FileSlice>>, LogError> {
        self.log
            .read_slice(offset, max_bytes, self.high_watermark(), min_one_message)
    }

    /// DeleteRecords on the leader (Kafka's `deleteRecordsOnLeader`): moves the log start
    /// offset to `offset` (-1: the high watermark) and deletes the segments below it.
    /// Returns the low watermark. A log whose `cleanup.policy` lacks `delete` refuses with
    /// POLICY_VIOLATION; an offset past the high watermark is OFFSET_OUT_OF_RANGE.
    pub async fn delete_records(&self, offset: i64) -> Result<i64, LogError> {
        /// DeleteRecordsRequest.HIGH_WATERMARK.
        const HIGH_WATERMARK: i64 = -1;
        if !self.log.config().cleanup_policy.delete {
            return Err(LogError::PolicyViolation(format!(
                "Records of partition {} can not be deleted due to the configured policy",
                self.tp
            )));
        }
        let high_watermark = self.high_watermark();
        let offset = match offset {
            HIGH_WATERMARK => high_watermark,
            o => o,
        };
        let log = self.log.clone();
        tokio::task::spawn_blocking(move || {
            log.delete_records_before(offset, high_watermark, crate::log::now_ms())
        })
        .await
        .map_err(|e| LogError::KafkaStorage(std::io::Error::other(e)))?
    }

    /// Resolves at the next advance of the high watermark. Create it (and `enable` it)
    /// before reading, so an append between the read and the wait is not missed.
    pub fn appended(&self) -> tokio::sync::futures::Notified<'_> {
        self.appended.notified()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::faults::{self, Fault};
    use crate::log::test_util::batch_bytes;
    use crate::log::LogConfig;

    #[tokio::test]
    async fn a_retry_after_a_failed_fsync_is_not_acknowledged() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("t-0");
        let config = LogConfig {
            flush_interval_messages: 1,
            ..LogConfig::default()
        };
        let log = Log::open(&dir, TopicPartition::new("t", 0), config, 0, 0, false).unwrap();
        let p = Partition::new(
            TopicPartition::new("t", 0),
            Uuid::new_v4(),
            Arc::new(log),
            0,
        );
        let batch = |seq| batch_bytes(&[b"v"], 1_000, Some((3, 0, seq)));
        p.append(batch(0), 0).await.unwrap();
        assert_eq!(p.high_watermark(), 1);

        faults::arm(&dir, Fault::Fsync, libc::EIO, Some(1));
        let err = p.append(batch(1), 0).await.unwrap_err();
        assert_eq!(err.error_code(), 56, "{err}");
        // The producer retries the batch whose fsync failed: it must not be acknowledged.
        let retry = p.append(batch(1), 0).await.unwrap_err();
        assert_eq!(retry.error_code(), 56, "{retry}");
        assert_eq!(p.log.recovery_point(), 1);
        assert_eq!(p.high_watermark(), 1, "nothing unflushed became visible");
        assert_eq!(
            p.check_leader_epoch(-1),
            Err(ResponseError::KafkaStorageError)
        );
        assert_eq!(p.read_slice(0, 1024, true).unwrap_err().error_code(), 56);
    }
}
