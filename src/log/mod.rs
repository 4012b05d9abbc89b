//! The storage engine: Kafka's on-disk log, byte for byte.
//!
//! ```text
//! LogManager (one or more log.dirs, meta.properties, checkpoints, clean-shutdown marker)
//!   └─ Log (one partition: <topic>-<partition>/)
//!        ├─ LogSegment × n   <20-digit base offset>.log / .index / .timeindex / .txnindex
//!        ├─ LeaderEpochFileCache   leader-epoch-checkpoint
//!        ├─ ProducerStateManager   <20-digit offset>.snapshot
//!        └─ partition.metadata     topic id
//! ```
//!
//! Record batches are stored as producers sent them; `baseOffset` and
//! `partitionLeaderEpoch` (both outside the CRC) are patched on append, and only a batch's
//! max timestamp (with its CRC) is rewritten when it is wrong or the topic stamps
//! LogAppendTime. A batch is re-encoded only when the topic's `compression.type` names
//! another codec. Every file format is described in the doc comment of the type that owns
//! it; the records inside a batch are read by `records` (bounded by `compression`).

mod append_bytes;
mod batch;
mod checkpoint;
pub mod cleaner;
pub mod compression;
pub mod control;
mod delayed_delete;
mod dir_lock;
mod disk_space;
pub(crate) mod faults;
mod fd_limit;
mod file_slice;
mod future_logs;
mod index_file;
mod leader_epoch;
mod loader;
#[allow(clippy::module_inception)]
mod log;
mod log_dir_health;
mod log_dirs;
mod log_manager;
mod meta_properties;
mod new_logs;
mod offset_index;
mod partition_dirs;
mod partition_key;
mod partition_metadata;
mod producer_state;
pub mod records;
mod segment;
mod snappy;
mod time_index;
mod timestamp_search;
mod txn_index;
mod validation;
mod write_at;

use std::fmt;

use kafka_protocol::error::ResponseError;

pub use self::batch::{whole_batches_len, RecordBatchHeader, HEADER_SIZE, LOG_OVERHEAD};
pub(crate) use self::checkpoint::sync_dir as sync_directory;
pub use self::checkpoint::{
    parse_leader_epoch_checkpoint, parse_offset_checkpoint, read_bounded,
    read_leader_epoch_checkpoint, read_offset_checkpoint, write_atomic,
    write_leader_epoch_checkpoint, write_offset_checkpoint, CLEANER_OFFSET_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
};
pub use self::delayed_delete::DelayedDeletes;
pub use self::dir_lock::DirLock;
pub use self::file_slice::FileSlice;
pub use self::leader_epoch::{EpochEntry, LeaderEpochFileCache};
pub use self::log::{delete_cleaned, now_ms, CleanerView, Log, SegmentView};
pub use self::log_dir_health::{is_fd_exhaustion, LogDirHealth};
pub use self::log_dirs::{CheckedDir, Identity, LogDirs, METADATA_LOG_DIR};
pub use self::log_manager::{
    absolute_path, previous_broker_epoch, Assignment, LogDirDescription, LogDirStatus, LogManager,
    ReplicaLogDescription, CLEAN_SHUTDOWN_FILE,
};
pub use self::meta_properties::{new_kafka_uuid, MetaProperties};
pub use self::partition_key::PartitionKey;
pub use self::partition_metadata::{
    kafka_string_to_uuid, read_partition_metadata, uuid_to_kafka_string,
    write_partition_metadata as write_partition_metadata_file,
};
pub use self::producer_state::{parse_producer_snapshot, ProducerStateEntry};
pub use self::timestamp_search::TimestampAndOffset;
pub use self::txn_index::AbortedTxn;
pub use self::validation::check_produce_records;

/// A partition of a topic. Its log lives in the directory named by `Display`: `topic-0`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }

    /// Parses a partition directory name `<topic>-<partition>`. Topic names may contain `-`,
    /// so the partition is whatever follows the last one.
    pub fn from_dir_name(name: &str) -> Option<Self> {
        let (topic, partition) = name.rsplit_once('-')?;
        if topic.is_empty() || partition.starts_with('+') {
            return None;
        }
        let partition: i32 = partition.parse().ok()?;
        (partition >= 0).then(|| TopicPartition::new(topic, partition))
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// `message.timestamp.type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TimestampType {
    #[default]
    CreateTime,
    LogAppendTime,
}

/// One partition's effective configuration: broker defaults overlaid by topic configs.
#[derive(Clone, Debug)]
pub struct LogConfig {
    /// `segment.bytes`: roll when the active segment would grow past this.
    pub segment_bytes: u64,
    /// `segment.ms`: roll when the active segment's first batch is this old.
    pub segment_ms: i64,
    /// `index.interval.bytes`: bytes of batches between two offset-index entries.
    pub index_interval_bytes: u32,
    /// `segment.index.bytes`: preallocated size of `.index` and `.timeindex`.
    pub max_index_size: u32,
    /// `max.message.bytes`: the largest batch accepted.
    pub max_message_bytes: u32,
    pub message_timestamp_type: TimestampType,
    /// `message.timestamp.before.max.ms`: how far behind the broker's clock a CreateTime
    /// record may be.
    pub message_timestamp_before_max_ms: i64,
    /// `message.timestamp.after.max.ms`: how far ahead of the broker's clock a CreateTime
    /// record may be.
    pub message_timestamp_after_max_ms: i64,
    /// `compression.type`: the codec batches are stored with.
    pub compression_type: compression::CompressionType,
    /// `max.decompressed.message.bytes`: the largest record read out of a compressed batch.
    pub max_decompressed_message_bytes: u32,
    /// `flush.messages`: fsync once this many messages are unflushed (`u64::MAX`-like
    /// default leaves durability to replication and the page cache).
    pub flush_interval_messages: u64,
    /// `file.delete.delay.ms`.
    pub file_delete_delay_ms: u64,
    /// `flush.ms`: the scheduler's log flusher fsyncs a log whose last flush is this old
    /// (`i64::MAX`: never; durability is left to replication and the page cache).
    pub flush_ms: i64,
    /// `producer.id.expiration.ms` (a broker setting): a producer whose last batch is this
    /// old, with no open transaction, is forgotten.
    pub producer_id_expiration_ms: i64,
    /// `retention.ms`: segments whose largest timestamp is older than this are deleted
    /// (-1: kept forever).
    pub retention_ms: i64,
    /// `retention.bytes`: the oldest segments are deleted while the log is larger than
    /// this (-1: no limit).
    pub retention_bytes: i64,
    pub cleanup_policy: CleanupPolicy,
    /// `delete.retention.ms`: how long the cleaner keeps tombstones (and transaction
    /// markers) once the segment holding them has been cleaned.
    pub delete_retention_ms: i64,
    /// `min.cleanable.dirty.ratio`.
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms`: records younger than this are not compacted.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a dirty record older than this makes the log cleanable
    /// whatever its dirty ratio.
    pub max_compaction_lag_ms: i64,
    /// `min.insync.replicas`: an acks=all produce needs at least this many in-sync
    /// replicas.
    pub min_insync_replicas: i32,
}

/// `cleanup.policy`: a list of `delete` and `compact`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CleanupPolicy {
    pub delete: bool,
    pub compact: bool,
}

impl CleanupPolicy {
    /// Parses Kafka's list value (`compact,delete`); unknown entries are ignored (the
    /// config validators refuse them before they get here).
    pub fn parse(value: &str) -> Self {
        let has = |p: &str| value.split(',').any(|e| e.trim() == p);
        CleanupPolicy {
            delete: has("delete"),
            compact: has("compact"),
        }
    }
}

impl LogConfig {
    /// Kafka's `LogConfig.maxSegmentMs`: a compacted log rolls by `max.compaction.lag.ms`
    /// too, so its records can be cleaned within that lag.
    pub fn max_segment_ms(&self) -> i64 {
        if self.cleanup_policy.compact && self.max_compaction_lag_ms > 0 {
            self.segment_ms.min(self.max_compaction_lag_ms)
        } else {
            self.segment_ms
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1024 * 1024 * 1024,
            segment_ms: 7 * 24 * 60 * 60 * 1000,
            index_interval_bytes: 4096,
            max_index_size: 10 * 1024 * 1024,
            max_message_bytes: 1024 * 1024 + 12,
            message_timestamp_type: TimestampType::CreateTime,
            message_timestamp_before_max_ms: i64::MAX,
            message_timestamp_after_max_ms: 3_600_000,
            compression_type: compression::CompressionType::Producer,
            max_decompressed_message_bytes: i32::MAX as u32 - 8,
            flush_interval_messages: i64::MAX as u64,
            file_delete_delay_ms: 60_000,
            flush_ms: i64::MAX,
            producer_id_expiration_ms: 86_400_000,
            retention_ms: 7 * 24 * 60 * 60 * 1000,
            retention_bytes: -1,
            cleanup_policy: CleanupPolicy {
                delete: true,
                compact: false,
            },
            delete_retention_ms: 86_400_000,
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            min_insync_replicas: 1,
        }
    }
}

/// What an append did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    /// Base offset assigned to the first batch (for a duplicate: the original's).
    pub first_offset: i64,
    pub last_offset: i64,
    /// The broker time stamped into the batches, or -1 unless LogAppendTime.
    pub log_append_time: i64,
    pub log_start_offset: i64,
    /// A retried idempotent batch already in the log: nothing was written.
    pub duplicate: bool,
}

/// The result of a read: batches as stored on disk, as bytes or as where they lie.
#[derive(Clone, Debug)]
pub struct FetchData<R> {
    pub records: R,
    pub log_end_offset: i64,
    pub log_start_offset: i64,
}

/// One refused record of a batch: its index in the batch and why (Kafka's `RecordError`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordError {
    pub batch_index: i32,
    pub message: String,
}

/// Storage errors. `error_code` maps each to Kafka's wire error code in one place.
#[derive(thiserror::Error, Debug)]
pub enum LogError {
    #[error("corrupt message: {0}")]
    CorruptMessage(String),
    #[error("message of {size} bytes exceeds the maximum of {max}")]
    MessageTooLarge { size: usize, max: usize },
    #[error("record list exceeds the segment size")]
    RecordListTooLarge,
    /// Kafka's `InvalidRecordException`; the message is what Kafka says.
    #[error("{0}")]
    InvalidRecord(String),
    /// Kafka's `RecordValidationException` around an `InvalidTimestampException`: which
    /// records, and why, go back in the produce response's `record_errors`.
    #[error("One or more records have been rejected due to invalid timestamp")]
    InvalidTimestamp { record_errors: Vec<RecordError> },
    /// Kafka's `RecordValidationException` around an `InvalidRecordException` (a compacted
    /// topic's record without a key); its message lists at most three of the records.
    #[error("One or more records have been rejected due to {} record errors in total, and only showing the first three errors at most: [{}]", record_errors.len(), record_errors.iter().take(3).map(|e| format!("RecordError(batchIndex={}, message='{}')", e.batch_index, e.message)).collect::<Vec<_>>().join(", "))]
    InvalidRecords { record_errors: Vec<RecordError> },
    #[error("{0}")]
    UnsupportedCompressionType(String),
    #[error("out of order sequence for producer {producer_id}: expected after {last_sequence}, got {first_sequence}")]
    OutOfOrderSequence {
        producer_id: i64,
        last_sequence: i32,
        first_sequence: i32,
    },
    #[error(
        "producer {producer_id} epoch {epoch} is older than the current epoch {current_epoch}"
    )]
    InvalidProducerEpoch {
        producer_id: i64,
        epoch: i16,
        current_epoch: i16,
    },
    #[error("unknown producer id")]
    UnknownProducerId,
    #[error("marker of producer {producer_id} from coordinator epoch {coordinator_epoch}, older than {current}")]
    TransactionCoordinatorFenced {
        producer_id: i64,
        coordinator_epoch: i32,
        current: i32,
    },
    /// A transactional batch for a transaction this partition was not added to (KIP-890).
    #[error("{0}")]
    InvalidTxnState(String),
    #[error("offset {offset} is out of range [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        offset: i64,
        log_start: i64,
        log_end: i64,
    },
    /// The topic's `cleanup.policy` forbids the operation (DeleteRecords on a log
    /// without `delete`).
    #[error("{0}")]
    PolicyViolation(String),
    #[error("topic id {found} in partition.metadata differs from {expected}")]
    InconsistentTopicId {
        expected: uuid::Uuid,
        found: uuid::Uuid,
    },
    #[error("corrupt file {path}: {reason}")]
    CorruptFile {
        path: std::path::PathBuf,
        reason: String,
    },
    /// A partition directory the log layer will not make: its topic name is not a legal
    /// one, or the name is not one plain directory name (see `partition_dirs`).
    #[error("{0}")]
    InvalidPartitionDir(String),
    /// An I/O failure; shown as the I/O error itself (it names what failed).
    #[error(transparent)]
    KafkaStorage(#[from] std::io::Error),
    /// The log lives in a dir that an earlier I/O error took offline.
    #[error("log dir {} is offline ({cause})", dir.display())]
    LogDirOffline {
        dir: std::path::PathBuf,
        cause: String,
    },
}

impl LogError {
    /// The Kafka error each storage error is answered with: the one mapping from storage
    /// errors to Kafka's (`crate::error::ApiError` carries it to the handlers).
    pub fn response_error(&self) -> ResponseError {
        match self {
            LogError::CorruptMessage(_) => ResponseError::CorruptMessage,
            LogError::MessageTooLarge { .. } => ResponseError::MessageTooLarge,
            LogError::RecordListTooLarge => ResponseError::RecordListTooLarge,
            LogError::InvalidRecord(_) => ResponseError::InvalidRecord,
            LogError::InvalidTimestamp { .. } => ResponseError::InvalidTimestamp,
            LogError::InvalidRecords { .. } => ResponseError::InvalidRecord,
            LogError::UnsupportedCompressionType(_) => ResponseError::UnsupportedCompressionType,
            LogError::OutOfOrderSequence { .. } => ResponseError::OutOfOrderSequenceNumber,
            LogError::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch,
            LogError::UnknownProducerId => ResponseError::UnknownProducerId,
            LogError::TransactionCoordinatorFenced { .. } => {
                ResponseError::TransactionCoordinatorFenced
            }
            LogError::InvalidTxnState(_) => ResponseError::InvalidTxnState,
            LogError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
            LogError::PolicyViolation(_) => ResponseError::PolicyViolation,
            LogError::InconsistentTopicId { .. } => ResponseError::InconsistentTopicId,
            LogError::InvalidPartitionDir(_) => ResponseError::InvalidTopicException,
            LogError::CorruptFile { .. }
            | LogError::KafkaStorage(_)
            | LogError::LogDirOffline { .. } => ResponseError::KafkaStorageError,
        }
    }

    /// Kafka's numeric error code for this error.
    pub fn error_code(&self) -> i16 {
        self.response_error().code()
    }

    /// The per-record errors of a batch refused for its records' content.
    pub fn record_errors(&self) -> &[RecordError] {
        match self {
            LogError::InvalidTimestamp { record_errors }
            | LogError::InvalidRecords { record_errors } => record_errors,
            _ => &[],
        }
    }

    pub(crate) fn corrupt_file(path: &std::path::Path, reason: impl Into<String>) -> Self {
        LogError::CorruptFile {
            path: path.to_path_buf(),
            reason: reason.into(),
        }
    }
}

/// `<20-digit zero-padded offset><suffix>`, Kafka's name for segment, index and snapshot files.
pub(crate) fn offset_file_name(offset: i64, suffix: &str) -> String {
    format!("{offset:020}{suffix}")
}

/// The offset in a file name written by `offset_file_name`, if it has that suffix.
pub(crate) fn parse_offset_file_name(name: &str, suffix: &str) -> Option<i64> {
    let digits = name.strip_suffix(suffix)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
pub(crate) mod test_util;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_partition_display_and_parse() {
        let tp = TopicPartition::new("my-topic", 7);
        assert_eq!(tp.to_string(), "my-topic-7");
        assert_eq!(TopicPartition::from_dir_name("my-topic-7"), Some(tp));
        assert_eq!(TopicPartition::from_dir_name("nodash"), None);
        assert_eq!(TopicPartition::from_dir_name("t-x"), None);
        assert_eq!(TopicPartition::from_dir_name("-3"), None);
    }

    #[test]
    fn offset_file_names() {
        assert_eq!(offset_file_name(42, ".log"), "00000000000000000042.log");
        assert_eq!(
            parse_offset_file_name("00000000000000000042.log", ".log"),
            Some(42)
        );
        assert_eq!(parse_offset_file_name("42.log", ".log"), None);
        assert_eq!(
            parse_offset_file_name("00000000000000000042.index", ".log"),
            None
        );
    }

    #[test]
    fn error_codes_match_kafka() {
        assert_eq!(LogError::CorruptMessage(String::new()).error_code(), 2);
        assert_eq!(
            LogError::MessageTooLarge { size: 1, max: 0 }.error_code(),
            10
        );
        assert_eq!(
            LogError::OffsetOutOfRange {
                offset: 0,
                log_start: 0,
                log_end: 0
            }
            .error_code(),
            1
        );
        assert_eq!(LogError::UnknownProducerId.error_code(), 59);
        assert_eq!(
            LogError::KafkaStorage(std::io::Error::other("x")).error_code(),
            56
        );
    }
}
