//! One hosted partition (Kafka's `Partition`): its log, which only this type touches; its
//! role and ISR (`state.rs`); the high watermark; and two notifications, one when the log
//! end advances (what followers wait for) and one when the high watermark does (what
//! consumers and acks=all producers wait for).
//!
//! The high watermark moves by one rule: the smallest log end offset among the leader
//! and the followers in the ISR, never backwards. With one replica that is the leader's
//! own log end, so it advances with every append, as it always has; with followers it
//! advances as their fetches report their log ends.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use parking_lot::RwLock;
use tokio::sync::futures::Notified;
use tokio::sync::Notify;
use uuid::Uuid;

use super::delayed_fetch::{FetchIsolation, FetchParams};
use super::state::{PartitionState, Role};
use crate::controller::LeaderAndIsr;
use crate::error::ApiError;
use crate::log::control::EndTxnMarker;
use crate::log::{
    AbortedTxn, AppendInfo, FetchData, FileSlice, Log, LogConfig, LogError, RecordError,
    TimestampAndOffset, TopicPartition,
};

/// ListOffsets' special timestamps (Kafka's `ListOffsetsRequest`).
pub const LATEST_TIMESTAMP: i64 = -1;
pub const EARLIEST_TIMESTAMP: i64 = -2;
pub const MAX_TIMESTAMP: i64 = -3;
pub const EARLIEST_LOCAL_TIMESTAMP: i64 = -4;
pub const LATEST_TIERED_TIMESTAMP: i64 = -5;
pub const EARLIEST_PENDING_UPLOAD_TIMESTAMP: i64 = -6;

pub struct Partition {
    pub tp: TopicPartition,
    pub topic_id: Uuid,
    log: Arc<Log>,
    /// Role, epochs, ISR and followers. Held for reading across a leader's append (not its
    /// fsync), so a batch carries the epoch under which it was checked; written only when
    /// metadata changes the partition.
    state: RwLock<PartitionState>,
    /// Offsets below this are committed (on every replica in the ISR) and visible to
    /// consumers.
    high_watermark: AtomicI64,
    log_end_advanced: Notify,
    high_watermark_advanced: Notify,
}

/// Why an append to a leader failed: this broker may not append, or the log refused.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    #[error("{0}")]
    Refused(ApiError),
    #[error(transparent)]
    Log(#[from] LogError),
}

impl AppendError {
    pub fn error(&self) -> ApiError {
        match self {
            AppendError::Refused(e) => e.clone(),
            AppendError::Log(e) => ApiError::from(e),
        }
    }

    pub fn error_code(&self) -> i16 {
        self.error().code()
    }

    /// The records of the batch refused for their content, and why (Produce v8+).
    pub fn record_errors(&self) -> &[RecordError] {
        match self {
            AppendError::Refused(_) => &[],
            AppendError::Log(e) => e.record_errors(),
        }
    }
}

impl From<AppendError> for ApiError {
    fn from(e: AppendError) -> Self {
        e.error()
    }
}

impl Partition {
    /// A partition this broker leads alone at `leader_epoch` (it is the whole ISR) until
    /// `apply_leadership` says otherwise.
    pub fn new(tp: TopicPartition, topic_id: Uuid, log: Arc<Log>, leader_epoch: i32) -> Self {
        let high_watermark = AtomicI64::new(log.log_end_offset());
        // Appends run on the runtime; a roll's fsync and snapshot go to the blocking pool.
        log.defer_roll_work();
        Partition {
            tp,
            topic_id,
            log,
            state: RwLock::new(PartitionState::sole_leader(leader_epoch)),
            high_watermark,
            log_end_advanced: Notify::new(),
            high_watermark_advanced: Notify::new(),
        }
    }

    /// Takes the leadership and ISR that metadata announces for this broker (`local_id`).
    /// Returns whether the role or the leader epoch changed. Everything waiting on this
    /// partition is woken to look again: a leader that became a follower answers them.
    pub fn apply_leadership(
        &self,
        local_id: i32,
        replicas: &[i32],
        announced: &LeaderAndIsr,
        now_ms: i64,
    ) -> bool {
        let changed = self
            .state
            .write()
            .apply(local_id, replicas, announced, now_ms);
        self.maybe_increment_high_watermark();
        self.wake_all();
        changed
    }

    /// This broker no longer hosts the partition (its topic was deleted): it leads nothing,
    /// and whatever waits on it is told so.
    pub fn resign(&self) {
        self.state.write().role = Role::Follower { leader: -1 };
        self.wake_all();
    }

    fn wake_all(&self) {
        self.log_end_advanced.notify_waiters();
        self.high_watermark_advanced.notify_waiters();
    }

    pub fn leader_epoch(&self) -> i32 {
        self.state.read().leader_epoch
    }

    pub fn role(&self) -> Role {
        self.state.read().role
    }

    pub fn is_leader(&self) -> bool {
        self.state.read().is_leader()
    }

    /// The in-sync replicas as last announced.
    pub fn isr(&self) -> Vec<i32> {
        self.state.read().isr.clone()
    }

    /// A follower's log end offset as its fetches reported it (None: not a follower of
    /// this leader).
    pub fn follower_log_end_offset(&self, replica_id: i32) -> Option<i64> {
        self.state
            .read()
            .follower(replica_id)
            .map(|f| f.log_end_offset)
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

    /// Whether requests meant for the leader may be served here (Kafka's
    /// `localLogWithEpochOrThrow` with `requireLeader`): the log is online, the client's
    /// leader epoch is ours (or -1), and this broker leads.
    pub fn check_leader(&self, current_leader_epoch: i32) -> Result<(), ApiError> {
        if let Err(e) = self.log.check_online() {
            return Err(ApiError::from(e));
        }
        self.check_leader_epoch(current_leader_epoch)?;
        if !self.is_leader() {
            return Err(ApiError::new(
                ResponseError::NotLeaderOrFollower,
                format!("Leader not local for partition {}", self.tp),
            ));
        }
        Ok(())
    }

    /// Whether a fetch from `replica_id` (-1: a consumer) may be served here.
    pub fn check_fetch(
        &self,
        current_leader_epoch: i32,
        replica_id: i32,
    ) -> Result<(), ResponseError> {
        self.check_leader_epoch(current_leader_epoch)?;
        self.state.read().check_fetch(replica_id)
    }

    pub fn high_watermark(&self) -> i64 {
        self.high_watermark.load(Ordering::Acquire)
    }

    pub fn log_end_offset(&self) -> i64 {
        self.log.log_end_offset()
    }

    /// Offsets below this are committed and belong to no open transaction: what a
    /// read_committed consumer may read (Kafka's `lastStableOffset`, the log's first
    /// unstable offset bounded by the high watermark; the unstable part is the log's).
    pub fn last_stable_offset(&self) -> i64 {
        let hw = self.high_watermark();
        self.log.first_unstable_offset().map_or(hw, |o| o.min(hw))
    }

    /// The aborted transactions a read_committed fetch from `fetch_offset` skips
    /// below `upper_bound`.
    pub fn aborted_txns(&self, fetch_offset: i64, upper_bound: i64) -> Vec<AbortedTxn> {
        self.log.aborted_txns(fetch_offset, upper_bound)
    }

    /// Open transactions: (producer id, epoch, first offset).
    pub fn ongoing_transactions(&self) -> Vec<(i64, i16, i64)> {
        self.log.ongoing_transactions()
    }

    /// Whether `producer_id` at `epoch` has a transaction open here.
    pub fn has_ongoing_txn(&self, producer_id: i64, epoch: i16) -> bool {
        self.log.has_ongoing_txn(producer_id, epoch)
    }

    /// The producers this partition remembers (DescribeProducers).
    pub fn producer_states(&self) -> Vec<crate::log::ProducerStateEntry> {
        self.log.producer_states()
    }

    /// Writes a transaction marker as leader (WriteTxnMarkers), as durable as a produce.
    pub async fn append_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        marker: EndTxnMarker,
        now_ms: i64,
    ) -> Result<AppendInfo, AppendError> {
        let info = {
            let state = self.state.read();
            if !state.is_leader() {
                return Err(AppendError::Refused(ApiError::new(
                    ResponseError::NotLeaderOrFollower,
                    format!("Leader not local for partition {}", self.tp),
                )));
            }
            self.log.append_marker(
                producer_id,
                producer_epoch,
                marker,
                state.leader_epoch,
                now_ms,
            )?
        };
        self.after_append(&info).await?;
        Ok(info)
    }

    pub fn log_start_offset(&self) -> i64 {
        self.log.log_start_offset()
    }

    pub fn update_log_config(&self, config: LogConfig) {
        self.log.update_config(config);
    }

    /// Appends a produce request's records as leader. Once `flush.messages` unflushed
    /// messages have piled up (with 1: every append) the append is made durable before
    /// returning; concurrent producers share one fsync (group commit in `Log::flush_to`).
    /// A retried duplicate is acknowledged only once its original is as durable as a
    /// fresh append would be: its flush may still be running, or may have failed.
    pub async fn append(&self, records: Bytes, now_ms: i64) -> Result<AppendInfo, AppendError> {
        let info = {
            let state = self.state.read();
            if !state.is_leader() {
                return Err(AppendError::Refused(ApiError::new(
                    ResponseError::NotLeaderOrFollower,
                    format!("Leader not local for partition {}", self.tp),
                )));
            }
            self.log
                .append_as_leader(records, state.leader_epoch, now_ms)?
        };
        self.after_append(&info).await?;
        Ok(info)
    }

    /// What follows a leader's append: followers are woken, a roll's work goes to the
    /// blocking pool, `flush.messages` is honoured, and the high watermark moves.
    async fn after_append(&self, info: &AppendInfo) -> Result<(), AppendError> {
        if !info.duplicate {
            self.log_end_advanced.notify_waiters();
        }
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
        self.maybe_increment_high_watermark();
        Ok(())
    }

    /// Moves the high watermark to what the replicas allow, never back; wakes its
    /// waiters when it moved.
    fn maybe_increment_high_watermark(&self) -> bool {
        let candidate = self
            .state
            .read()
            .high_watermark_candidate(self.log.log_end_offset());
        let Some(candidate) = candidate else {
            return false;
        };
        let advanced = self.high_watermark.fetch_max(candidate, Ordering::AcqRel) < candidate;
        if advanced {
            self.high_watermark_advanced.notify_waiters();
        }
        advanced
    }

    /// Whether an acks=all append ending below `required_offset` is settled (Kafka's
    /// `checkEnoughReplicasReachOffset`): `None` while the high watermark is below it,
    /// NOT_LEADER_OR_FOLLOWER once this broker no longer leads.
    pub fn check_enough_replicas_reach_offset(
        &self,
        required_offset: i64,
    ) -> Option<Result<(), ResponseError>> {
        if !self.is_leader() {
            return Some(Err(ResponseError::NotLeaderOrFollower));
        }
        (self.high_watermark() >= required_offset).then_some(Ok(()))
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

    /// One partition of a Fetch, after `check_fetch`: where the records from `offset` lie,
    /// up to the high watermark for consumers and the log end for followers. A follower's
    /// fetch offset is its log end offset: it is recorded (with its log start offset) and
    /// may move the high watermark.
    pub fn fetch_records(
        &self,
        params: &FetchParams,
        offset: i64,
        max_bytes: usize,
        min_one_message: bool,
        follower_log_start_offset: i64,
    ) -> Result<FetchData<Option<FileSlice>>, LogError> {
        let max_offset = match params.isolation {
            FetchIsolation::LogEnd => self.log.log_end_offset(),
            FetchIsolation::HighWatermark => self.high_watermark(),
            FetchIsolation::TxnCommitted => self.last_stable_offset(),
        };
        let data = self
            .log
            .read_slice(offset, max_bytes, max_offset, min_one_message)?;
        if params.is_from_follower() {
            let recorded = self.state.write().update_follower(
                params.replica_id,
                offset,
                follower_log_start_offset,
                data.log_end_offset,
                crate::log::now_ms(),
            );
            match recorded {
                Ok(()) => {
                    self.maybe_increment_high_watermark();
                }
                Err(e) => {
                    tracing::debug!(partition = %self.tp, replica = params.replica_id, error = %e, "follower fetch not recorded")
                }
            }
        }
        Ok(data)
    }

    /// Resolves at the next advance of the log end offset (or change of role). Create it
    /// (and `enable` it) before reading, so an append between the read and the wait is not
    /// missed.
    pub fn log_end_advanced(&self) -> Notified<'_> {
        self.log_end_advanced.notified()
    }

    /// Resolves at the next advance of the high watermark (or change of role); as
    /// `log_end_advanced`, create it before looking.
    pub fn high_watermark_advanced(&self) -> Notified<'_> {
        self.high_watermark_advanced.notified()
    }

    /// The notification a read bounded by `isolation` waits on.
    pub fn advanced(&self, isolation: FetchIsolation) -> Notified<'_> {
        match isolation {
            FetchIsolation::LogEnd => self.log_end_advanced(),
            // The last stable offset moves only with the high watermark or with a marker
            // below it, and a marker's append moves the high watermark too.
            FetchIsolation::HighWatermark | FetchIsolation::TxnCommitted => {
                self.high_watermark_advanced()
            }
        }
    }

    /// ListOffsets for one partition (Kafka's `fetchOffsetForTimestamp`): the log start
    /// for EARLIEST, the high watermark for LATEST, else the record with the largest
    /// timestamp or the first at or after `timestamp`, among the committed records.
    /// EARLIEST and LATEST carry the current leader epoch; `None` when nothing matches;
    /// INVALID_REQUEST for an unknown special timestamp.
    pub fn fetch_offset_for_timestamp(
        &self,
        timestamp: i64,
        read_committed: bool,
    ) -> Result<Option<TimestampAndOffset>, ResponseError> {
        // read_committed clients see up to the last stable offset (Kafka's
        // `fetchOffsetForTimestamp` with IsolationLevel.READ_COMMITTED).
        let hw = match read_committed {
            true => self.last_stable_offset(),
            false => self.high_watermark(),
        };
        let at = |offset| TimestampAndOffset {
            timestamp: -1,
            offset,
            leader_epoch: Some(self.leader_epoch()),
        };
        let found = match timestamp {
            EARLIEST_TIMESTAMP | EARLIEST_LOCAL_TIMESTAMP => Some(at(self.log.log_start_offset())),
            LATEST_TIMESTAMP => Some(at(hw)),
            // No tiered storage: nothing is tiered or pending upload.
            LATEST_TIERED_TIMESTAMP | EARLIEST_PENDING_UPLOAD_TIMESTAMP => {
                Some(TimestampAndOffset {
                    leader_epoch: None,
                    ..at(-1)
                })
            }
            MAX_TIMESTAMP => self
                .log
                .max_timestamp_and_offset()
                .filter(|f| f.offset < hw),
            ts if ts >= 0 => self
                .log
                .fetch_offset_by_timestamp(ts)
                .filter(|f| f.offset < hw),
            _ => return Err(ResponseError::InvalidRequest),
        };
        Ok(found)
    }

    /// OffsetForLeaderEpoch: the largest epoch at most `epoch` and the offset where it
    /// ended (the log end for the latest); `None` when no such epoch is known.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, i64)> {
        self.log.end_offset_for_epoch(epoch)
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
