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
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use parking_lot::RwLock;
use tokio::sync::futures::Notified;
use tokio::sync::Notify;
use uuid::Uuid;

use super::delayed_fetch::{FetchIsolation, FetchParams};
use super::isr::{IsrChange, IsrChanges};
use super::state::{IsrOutcome, ReplicationState, Role};
use crate::controller::LeaderAndIsr;
use crate::error::ApiError;
use crate::log::cleaner::Candidate;
use crate::log::control::EndTxnMarker;
use crate::log::{
    AbortedTxn, AppendInfo, FetchData, FileSlice, Log, LogConfig, LogError, RecordError,
    TimestampAndOffset, TopicPartition,
};
use crate::metrics::TopicCounters;

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
    /// Replaced only by `switch_log` (a move to another log dir), with `state` held for
    /// writing: an append, which holds `state` for reading, sees one log throughout.
    log: RwLock<Arc<Log>>,
    /// Role, epochs, ISR and followers. Held for reading across a leader's append (not its
    /// fsync), so a batch carries the epoch under which it was checked; written only when
    /// metadata changes the partition.
    state: RwLock<ReplicationState>,
    /// Offsets below this are committed (on every replica in the ISR) and visible to
    /// consumers.
    high_watermark: AtomicI64,
    log_end_advanced: Notify,
    high_watermark_advanced: Notify,
    /// As leader: the log end offset when this leader epoch began (Kafka's
    /// `leaderEpochStartOffsetOpt`); a follower joins the ISR only once it has reached it.
    leader_epoch_start_offset: AtomicI64,
    /// As follower: the leader's high watermark less this log's end at the last fetch
    /// (Kafka's `FetcherLagMetrics`), for the fetchers' `MaxLag`.
    follower_lag: AtomicI64,
    /// Where ISR changes go to reach the controller (`isr.rs`); without it (a broker
    /// alone) no change is proposed.
    isr_changes: OnceLock<IsrChanges>,
    /// The topic's byte and record counters, resolved when the partition is hosted.
    pub counters: TopicCounters,
    /// `replica.lag.time.max.ms`: how recently a follower outside the ISR must have been
    /// caught up for the high watermark to wait for it.
    replica_lag_time_max_ms: i64,
}

/// Kafka's default `replica.lag.time.max.ms`.
const DEFAULT_REPLICA_LAG_TIME_MAX_MS: i64 = 30_000;

/// A partition's replication as the metrics see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicationSummary {
    pub leader: bool,
    /// Replicas assigned (1 for a partition led alone, with no metadata naming them).
    pub replicas: usize,
    /// The committed ISR's size.
    pub isr: usize,
}

/// What a leader appends.
pub enum LeaderAppend {
    /// A producer's batches, as its Produce request sent them.
    Client { records: Bytes, required_acks: i16 },
    /// A coordinator's batch to its internal topic (no sequence to check: a
    /// transactional offset commit carries none).
    Coordinator(Bytes),
    /// A transaction marker.
    Marker {
        producer_id: i64,
        producer_epoch: i16,
        marker: EndTxnMarker,
    },
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
            log: RwLock::new(log),
            state: RwLock::new(ReplicationState::sole_leader(leader_epoch)),
            high_watermark,
            log_end_advanced: Notify::new(),
            high_watermark_advanced: Notify::new(),
            leader_epoch_start_offset: AtomicI64::new(0),
            follower_lag: AtomicI64::new(0),
            isr_changes: OnceLock::new(),
            counters: TopicCounters::unregistered(),
            replica_lag_time_max_ms: DEFAULT_REPLICA_LAG_TIME_MAX_MS,
        }
    }

    /// With the broker's `replica.lag.time.max.ms` (the high-watermark rule's).
    pub fn with_replica_lag_time_max_ms(mut self, max_lag_ms: i64) -> Self {
        self.replica_lag_time_max_ms = max_lag_ms;
        self
    }

    /// Counts into `counters` (the broker's series for this partition's topic).
    pub fn with_counters(mut self, counters: TopicCounters) -> Self {
        self.counters = counters;
        self
    }

    /// Starts from `offset` as the high watermark, kept within the log (Kafka's
    /// `updateHighWatermark` with the checkpointed value): what a restarted broker knew
    /// was committed, never more than its log holds. The first leadership applied may
    /// raise it (a leader alone commits its whole log).
    pub fn with_high_watermark(self, offset: i64) -> Self {
        let hw = offset
            .min(self.log().log_end_offset())
            .max(self.log().log_start_offset());
        self.high_watermark.store(hw, Ordering::Release);
        self
    }

    /// The partition's log (another one after a move to another log dir).
    pub fn log(&self) -> Arc<Log> {
        self.log.read().clone()
    }

    /// Runs `switch` with the partition's current log while every append, truncation and
    /// leadership change waits (its state held for writing); the log `switch` returns, if
    /// any, replaces the current one. The last step of a move to another log dir.
    pub fn switch_log<E>(
        &self,
        switch: impl FnOnce(&Arc<Log>) -> Result<Option<Arc<Log>>, E>,
    ) -> Result<(), E> {
        let _state = self.state.write();
        let current = self.log();
        if let Some(new) = switch(&current)? {
            new.defer_roll_work();
            *self.log.write() = new;
        }
        Ok(())
    }

    /// Sends this partition's ISR changes to `changes` (set once, by the replica manager).
    pub fn send_isr_changes_to(&self, changes: IsrChanges) {
        let _ = self.isr_changes.set(changes);
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
        let changed = {
            let mut state = self.state.write();
            let changed = state.apply(local_id, replicas, announced, now_ms);
            if changed && state.is_leader() {
                let log_end = self.log().log_end_offset();
                self.leader_epoch_start_offset
                    .store(log_end, Ordering::Release);
                // Kafka's `Partition.makeLeader` line (a follower's is the fetcher's).
                tracing::info!(partition = %self.tp, leader_epoch = state.leader_epoch, log_end, isr = ?state.isr, "leading the partition from this leader epoch");
            }
            changed
        };
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

    /// Has everything waiting on the partition (acks=all appends, coordinator writes,
    /// fetches) look at it again: Kafka's `completeDelayedFetchOrProduceRequests`, for a
    /// partition whose log dir went offline or whose replica was stopped, so what waits on
    /// it is answered now rather than at its timeout.
    pub fn wake_waiters(&self) {
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

    /// What the metrics read of the partition's replication, in one read of its state
    /// (appends read it too; only a metadata change writes it).
    pub fn replication_summary(&self) -> ReplicationSummary {
        let state = self.state.read();
        ReplicationSummary {
            leader: state.is_leader(),
            replicas: state.replicas.len().max(1),
            isr: state.isr_size(),
        }
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
        if self.log().is_offline() {
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
        if let Err(e) = self.log().check_online() {
            return Err(ApiError::from(e));
        }
        self.check_leader_epoch(current_leader_epoch)?;
        if !self.is_leader() {
            return Err(self.not_leader());
        }
        Ok(())
    }

    /// NOT_LEADER_OR_FOLLOWER with Kafka's message, for a request only a leader serves.
    fn not_leader(&self) -> ApiError {
        ApiError::new(
            ResponseError::NotLeaderOrFollower,
            format!("Leader not local for partition {}", self.tp),
        )
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
        self.log().log_end_offset()
    }

    /// Offsets below this are committed and belong to no open transaction: what a
    /// read_committed consumer may read (Kafka's `lastStableOffset`, the log's first
    /// unstable offset bounded by the high watermark; the unstable part is the log's).
    pub fn last_stable_offset(&self) -> i64 {
        let hw = self.high_watermark();
        self.log().first_unstable_offset().map_or(hw, |o| o.min(hw))
    }

    /// The aborted transactions a read_committed fetch from `fetch_offset` skips
    /// below `upper_bound`.
    pub fn aborted_txns(&self, fetch_offset: i64, upper_bound: i64) -> Vec<AbortedTxn> {
        self.log().aborted_txns(fetch_offset, upper_bound)
    }

    /// Open transactions: (producer id, epoch, first offset).
    pub fn ongoing_transactions(&self) -> Vec<(i64, i16, i64)> {
        self.log().ongoing_transactions()
    }

    /// Whether `producer_id` at `epoch` has a transaction open here.
    pub fn has_ongoing_txn(&self, producer_id: i64, epoch: i16) -> bool {
        self.log().has_ongoing_txn(producer_id, epoch)
    }

    /// Whether this partition remembers `producer_id`.
    pub fn knows_producer(&self, producer_id: i64) -> bool {
        self.log().knows_producer(producer_id)
    }

    /// The producers this partition remembers (DescribeProducers).
    pub fn producer_states(&self) -> Vec<crate::log::ProducerStateEntry> {
        self.log().producer_states()
    }

    pub fn log_start_offset(&self) -> i64 {
        self.log().log_start_offset()
    }

    pub fn update_log_config(&self, config: LogConfig) {
        self.log().update_config(config);
    }

    /// Appends as leader: a client's records, a coordinator's, or a transaction marker
    /// (the one leader append path; `ReplicaManager::append_records` is its caller).
    /// With acks=all (and always for coordinators and markers, which Kafka writes with
    /// acks=all) an ISR smaller than `min.insync.replicas` refuses the append with
    /// NOT_ENOUGH_REPLICAS (Kafka's `appendRecordsToLeader`). Once `flush.messages`
    /// unflushed messages have piled up (with 1: every append) the append is made
    /// durable before returning; concurrent producers share one fsync (group commit in
    /// `Log::flush_to`). A retried duplicate is acknowledged only once its original is
    /// as durable as a fresh append would be: its flush may still be running, or may
    /// have failed.
    pub async fn append_as_leader(
        &self,
        data: LeaderAppend,
        now_ms: i64,
    ) -> Result<AppendInfo, AppendError> {
        let info = {
            let state = self.state.read();
            if !state.is_leader() {
                return Err(AppendError::Refused(self.not_leader()));
            }
            let epoch = state.leader_epoch;
            match data {
                LeaderAppend::Client {
                    records,
                    required_acks,
                } => {
                    if required_acks == -1 {
                        self.check_min_isr(state.isr_size())?;
                    }
                    self.log().append_as_leader(records, epoch, now_ms)?
                }
                LeaderAppend::Coordinator(records) => {
                    self.check_min_isr(state.isr_size())?;
                    self.log().append_as_coordinator(records, epoch, now_ms)?
                }
                LeaderAppend::Marker {
                    producer_id,
                    producer_epoch,
                    marker,
                } => {
                    self.check_min_isr(state.isr_size())?;
                    self.log()
                        .append_marker(producer_id, producer_epoch, marker, epoch, now_ms)?
                }
            }
        };
        self.after_append(&info).await?;
        Ok(info)
    }

    /// A client's append with acks=1 (tests).
    #[cfg(test)]
    pub async fn append(&self, records: Bytes, now_ms: i64) -> Result<AppendInfo, AppendError> {
        self.append_records(records, now_ms, 1).await
    }

    /// A client's append with `required_acks` (tests).
    #[cfg(test)]
    pub async fn append_records(
        &self,
        records: Bytes,
        now_ms: i64,
        required_acks: i16,
    ) -> Result<AppendInfo, AppendError> {
        let data = LeaderAppend::Client {
            records,
            required_acks,
        };
        self.append_as_leader(data, now_ms).await
    }

    /// NOT_ENOUGH_REPLICAS for an acks=all append while the ISR is smaller than
    /// `min.insync.replicas`.
    fn check_min_isr(&self, isr_size: usize) -> Result<(), AppendError> {
        let min_isr = self.log().config().min_insync_replicas;
        if isr_size < min_isr as usize {
            return Err(AppendError::Refused(ApiError::new(
                ResponseError::NotEnoughReplicas,
                format!(
                    "The size of the current ISR {isr_size} is insufficient to satisfy the min.isr requirement of {min_isr} for partition {}",
                    self.tp
                ),
            )));
        }
        Ok(())
    }

    /// What follows a leader's append: followers are woken, a roll's work goes to the
    /// blocking pool, `flush.messages` is honoured, and the high watermark moves.
    async fn after_append(&self, info: &AppendInfo) -> Result<(), AppendError> {
        if !info.duplicate {
            tracing::debug!(target: "replica_latency", tp = %self.tp, end = info.last_offset + 1, "leader appended");
            self.log_end_advanced.notify_waiters();
        }
        if self.log().has_pending_roll() {
            let log = self.log();
            tokio::task::spawn_blocking(move || log.complete_roll());
        }
        let flush = match info.duplicate {
            false => self.log().flush_needed(),
            true => {
                self.log().config().flush_interval_messages == 1
                    && self.log().recovery_point() <= info.last_offset
            }
        };
        if flush {
            let log = self.log();
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
        let log_end = self.log().log_end_offset();
        let candidate = self.state.read().high_watermark_candidate(
            log_end,
            crate::log::now_ms(),
            self.replica_lag_time_max_ms,
            self.isr_changes.get().map(IsrChanges::cluster),
        );
        let Some(candidate) = candidate else {
            return false;
        };
        // Kafka's invariant: nothing above the leader's own log end is committed.
        debug_assert!(
            candidate <= log_end,
            "high watermark {candidate} above log end {log_end}"
        );
        let advanced = self.high_watermark.fetch_max(candidate, Ordering::AcqRel) < candidate;
        if advanced {
            tracing::debug!(target: "replica_latency", tp = %self.tp, hw = candidate, "high watermark advanced");
            self.high_watermark_advanced.notify_waiters();
        }
        advanced
    }

    /// Whether an acks=all append ending below `required_offset` is settled (Kafka's
    /// `checkEnoughReplicasReachOffset`): `None` while the high watermark is below it,
    /// NOT_LEADER_OR_FOLLOWER once this broker no longer leads, KAFKA_STORAGE_ERROR once
    /// its log dir went offline (Kafka's `DelayedProduce` finds the partition offline): no
    /// follower can fetch from that log again, so the high watermark never gets there.
    pub fn check_enough_replicas_reach_offset(
        &self,
        required_offset: i64,
    ) -> Option<Result<(), ResponseError>> {
        if self.log().is_offline() {
            return Some(Err(ResponseError::KafkaStorageError));
        }
        let isr_size = {
            let state = self.state.read();
            if !state.is_leader() {
                return Some(Err(ResponseError::NotLeaderOrFollower));
            }
            state.isr_size()
        };
        if self.high_watermark() < required_offset {
            return None;
        }
        match isr_size < self.log().config().min_insync_replicas as usize {
            true => Some(Err(ResponseError::NotEnoughReplicasAfterAppend)),
            false => Some(Ok(())),
        }
    }

    /// Reads committed records (below the high watermark) from `offset`.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_message: bool,
    ) -> Result<FetchData<Bytes>, LogError> {
        self.log()
            .read(offset, max_bytes, self.high_watermark(), min_one_message)
    }

    /// `read` up to the log end, past the high watermark: what a coordinator loads when
    /// it takes the partition over (Kafka's `FetchIsolation.LOG_END`).
    pub fn read_to_log_end(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_message: bool,
    ) -> Result<FetchData<Bytes>, LogError> {
        self.log().read(
            offset,
            max_bytes,
            self.log().log_end_offset(),
            min_one_message,
        )
    }

    /// Where the committed records from `offset` lie, for a zero-copy send (see
    /// [`Log::read_slice`]).
    pub fn read_slice(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_message: bool,
    ) -> Result<FetchData<Option<FileSlice>>, LogError> {
        self.log()
            .read_slice(offset, max_bytes, self.high_watermark(), min_one_message)
    }

    /// This partition's turn in the retention check: rolls an idle active segment that
    /// `segment.ms` says is due, then deletes the segments retention lets go (never past
    /// the high watermark). A compacted log is not changed under its cleaner: while it is
    /// cleaned its retention waits for the cleaner, which applies it after the cleaning.
    /// Returns how many segments went. Blocking.
    pub fn delete_old_segments(&self, now_ms: i64) -> Result<usize, LogError> {
        let log = self.log();
        if log.is_offline() {
            return Ok(0);
        }
        log.roll_if_idle(now_ms)?;
        let _cleaning = match log.config().cleanup_policy.compact {
            true => match log.try_lock_cleaning() {
                Some(guard) => Some(guard),
                None => return Ok(0),
            },
            false => None,
        };
        log.delete_old_segments(now_ms, self.high_watermark())
    }

    /// What the log cleaner needs of a compacted partition; None when it is not compacted.
    pub fn cleaner_candidate(&self) -> Option<Candidate> {
        self.log()
            .config()
            .cleanup_policy
            .compact
            .then(|| Candidate {
                log: self.log(),
                high_watermark: self.high_watermark(),
            })
    }

    /// DeleteRecords on the leader (Kafka's `deleteRecordsOnLeader`): moves the log start
    /// offset to `offset` (-1: the high watermark) and deletes the segments below it.
    /// Returns the low watermark. A log whose `cleanup.policy` lacks `delete` refuses with
    /// POLICY_VIOLATION; an offset past the high watermark is OFFSET_OUT_OF_RANGE.
    pub async fn delete_records(&self, offset: i64) -> Result<i64, LogError> {
        /// DeleteRecordsRequest.HIGH_WATERMARK.
        const HIGH_WATERMARK: i64 = -1;
        if !self.log().config().cleanup_policy.delete {
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
        let log = self.log();
        let deleted = {
            let log = log.clone();
            tokio::task::spawn_blocking(move || {
                log.delete_records_before(offset, high_watermark, crate::log::now_ms())
            })
            .await
            .map_err(|e| LogError::KafkaStorage(std::io::Error::other(e)))??
        };
        // A move to another log dir switched logs meanwhile: the new one starts there too.
        let now = self.log();
        if !Arc::ptr_eq(&log, &now) {
            now.maybe_increment_log_start_offset(deleted)?;
        }
        Ok(deleted)
    }

    /// One partition of a Fetch, after `check_fetch`: where the records from `offset` lie,
    /// up to the high watermark for consumers and the log end for followers. A follower's
    /// fetch offset is its log end offset: it is recorded (with its log start offset) and
    /// may move the high watermark.
    pub fn fetch_records(
        self: &Arc<Self>,
        params: &FetchParams,
        offset: i64,
        max_bytes: usize,
        min_one_message: bool,
        follower_log_start_offset: i64,
    ) -> Result<FetchData<Option<FileSlice>>, LogError> {
        let max_offset = match params.isolation {
            FetchIsolation::LogEnd => self.log().log_end_offset(),
            FetchIsolation::HighWatermark => self.high_watermark(),
            FetchIsolation::TxnCommitted => self.last_stable_offset(),
        };
        let data = self
            .log()
            .read_slice(offset, max_bytes, max_offset, min_one_message)?;
        if params.is_from_follower() {
            tracing::debug!(target: "replica_latency", tp = %self.tp, replica = params.replica_id, offset, "follower fetch read");
            let recorded = {
                let mut state = self.state.write();
                let recorded = state.update_follower(
                    params.replica_id,
                    offset,
                    follower_log_start_offset,
                    data.log_end_offset,
                    crate::log::now_ms(),
                );
                if recorded.is_ok() && params.replica_epoch >= 0 {
                    state.set_follower_broker_epoch(params.replica_id, params.replica_epoch);
                }
                recorded
            };
            match recorded {
                Ok(()) => {
                    self.maybe_expand_isr(params.replica_id);
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

    /// ListOffsets (Kafka's `fetchOffsetForTimestamp`): the log start, the end of what
    /// `isolation` may read, the record with the largest timestamp or the first at or after
    /// `timestamp`, among the offsets `isolation` may read. Consumers read up to the high
    /// watermark or the last stable offset; a replica (`LogEnd`) up to the log end, as a
    /// follower asks when its fetch offset is out of range. EARLIEST and LATEST carry the
    /// current leader epoch; `None` when nothing matches; INVALID_REQUEST for an unknown
    /// special timestamp. A leader whose high watermark has not reached the start of its
    /// epoch answers a consumer's LATEST (or a lookup that finds nothing yet) with
    /// OFFSET_NOT_AVAILABLE (KIP-207), so the client retries instead of resetting to an
    /// offset below what the previous leader exposed.
    pub fn fetch_offset_for_timestamp(
        &self,
        timestamp: i64,
        isolation: FetchIsolation,
    ) -> Result<Option<TimestampAndOffset>, ResponseError> {
        let last_fetchable = match isolation {
            FetchIsolation::LogEnd => self.log().log_end_offset(),
            FetchIsolation::HighWatermark => self.high_watermark(),
            FetchIsolation::TxnCommitted => self.last_stable_offset(),
        };
        let not_available = isolation != FetchIsolation::LogEnd
            && self.is_leader()
            && self.leader_epoch_start_offset.load(Ordering::Acquire) > self.high_watermark();
        let at = |offset| TimestampAndOffset {
            timestamp: -1,
            offset,
            leader_epoch: Some(self.leader_epoch()),
        };
        let found = match timestamp {
            EARLIEST_TIMESTAMP | EARLIEST_LOCAL_TIMESTAMP => {
                return Ok(Some(at(self.log().log_start_offset())))
            }
            LATEST_TIMESTAMP if not_available => return Err(ResponseError::OffsetNotAvailable),
            LATEST_TIMESTAMP => return Ok(Some(at(last_fetchable))),
            // No tiered storage: nothing is tiered or pending upload.
            LATEST_TIERED_TIMESTAMP | EARLIEST_PENDING_UPLOAD_TIMESTAMP => {
                return Ok(Some(TimestampAndOffset {
                    leader_epoch: None,
                    ..at(-1)
                }))
            }
            MAX_TIMESTAMP => self.log().max_timestamp_and_offset(),
            ts if ts >= 0 => self.log().fetch_offset_by_timestamp(ts),
            _ => return Err(ResponseError::InvalidRequest),
        };
        match found.filter(|f| f.offset < last_fetchable) {
            None if not_available => Err(ResponseError::OffsetNotAvailable),
            found => Ok(found),
        }
    }

    /// OffsetForLeaderEpoch: the largest epoch at most `epoch` and the offset where it
    /// ended (the log end for the latest); `None` when no such epoch is known.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, i64)> {
        self.log().end_offset_for_epoch(epoch)
    }

    /// As leader, for a follower's fetch that names the epoch of its last batch (Fetch
    /// v12+, KIP-320; Kafka's `validateFetchOffsetAndMaybeGetDivergingEpoch`): where its
    /// log diverges from this one, as `(epoch, end offset)`, when this log's
    /// `last_fetched_epoch` ends before `fetch_offset` or is older. OFFSET_OUT_OF_RANGE
    /// when this log knows no epoch at or below it (the follower then asks ListOffsets).
    pub fn diverging_epoch(
        &self,
        last_fetched_epoch: i32,
        fetch_offset: i64,
    ) -> Result<Option<(i32, i64)>, ResponseError> {
        if last_fetched_epoch < 0 {
            return Ok(None);
        }
        let (epoch, end_offset) = self
            .log()
            .end_offset_for_epoch(last_fetched_epoch)
            .ok_or(ResponseError::OffsetOutOfRange)?;
        if epoch < 0 || end_offset < 0 {
            return Err(ResponseError::OffsetOutOfRange);
        }
        Ok(
            (end_offset < fetch_offset || epoch < last_fetched_epoch)
                .then_some((epoch, end_offset)),
        )
    }

    /// Proposes adding `replica_id` to the ISR once it has caught up (see
    /// `ReplicationState::propose_expand`).
    fn maybe_expand_isr(self: &Arc<Self>, replica_id: i32) {
        let Some(changes) = self.isr_changes.get() else {
            return;
        };
        let hw = self.high_watermark();
        let epoch_start = self.leader_epoch_start_offset.load(Ordering::Acquire);
        let proposal =
            self.state
                .write()
                .propose_expand(replica_id, hw, epoch_start, changes.cluster());
        if let Some(proposal) = proposal {
            tracing::info!(partition = %self.tp, replica = replica_id, isr = ?proposal.new_isr, "expanding the ISR");
            changes.send(IsrChange {
                partition: self.clone(),
                proposal,
            });
        }
    }

    /// Proposes dropping the followers in the ISR that have not caught up for
    /// `max_lag_ms` (`replica.lag.time.max.ms`); run periodically on every leader.
    pub fn maybe_shrink_isr(self: &Arc<Self>, now_ms: i64, max_lag_ms: i64) {
        let Some(changes) = self.isr_changes.get() else {
            return;
        };
        let leo = self.log().log_end_offset();
        let proposal =
            self.state
                .write()
                .propose_shrink(leo, now_ms, max_lag_ms, changes.cluster());
        if let Some(proposal) = proposal {
            tracing::info!(partition = %self.tp, isr = ?proposal.new_isr, max_lag_ms, "shrinking the ISR");
            changes.send(IsrChange {
                partition: self.clone(),
                proposal,
            });
        }
    }

    /// Takes the controller's answer to an ISR change proposed at `proposed_at` (leader
    /// epoch). A committed shrink may let the high watermark move; everything waiting is
    /// woken to look again. Returns the ISR's size before and after, when it changed.
    pub fn complete_isr_change(
        &self,
        proposed_at: i32,
        outcome: &IsrOutcome,
    ) -> Option<(usize, usize)> {
        let sizes = {
            let mut state = self.state.write();
            let before = state.isr.len();
            let changed = state.complete_isr_change(proposed_at, outcome);
            changed.then_some((before, state.isr.len()))
        };
        if sizes.is_some() {
            tracing::info!(partition = %self.tp, isr = ?self.isr(), "ISR updated");
        }
        if let IsrOutcome::Refused(e) = outcome {
            tracing::info!(partition = %self.tp, error = ?e, "ISR change refused; waiting for metadata");
        }
        self.maybe_increment_high_watermark();
        // Waiters look again only when the ISR changed. A refusal changes nothing; waking
        // the follower's parked fetch on it would have the follower fetch again at once,
        // the leader propose the same expansion, the controller refuse it again: a loop
        // of hundreds of requests a second for as long as the controller deems the
        // replica ineligible. Left parked, the follower's next fetch retries it.
        if sizes.is_some() {
            self.wake_all();
        }
        sizes
    }

    #[cfg(test)]
    pub(crate) fn state_for_tests(&self) -> ReplicationState {
        self.state.read().clone()
    }

    #[cfg(test)]
    pub(crate) fn log_for_tests(&self) -> Arc<Log> {
        self.log()
    }

    /// Whether an ISR change is waiting for the controller.
    pub fn isr_change_pending(&self) -> bool {
        self.state.read().pending_isr.is_some()
    }

    /// The leader epoch the partition is at, if this broker follows `leader` in it.
    fn check_follower_of(&self, leader_epoch: i32) -> Result<(), AppendError> {
        let state = self.state.read();
        match state.role {
            Role::Follower { leader } if leader >= 0 && state.leader_epoch == leader_epoch => {
                Ok(())
            }
            _ => Err(AppendError::Refused(ApiError::new(
                ResponseError::NotLeaderOrFollower,
                format!(
                    "{} is no longer a follower at leader epoch {leader_epoch}",
                    self.tp
                ),
            ))),
        }
    }

    /// Where a follower fetches from (Kafka's `PartitionFetchState`): its log end offset,
    /// the epoch of its last batch (-1: none known) and its log start offset.
    pub fn follower_fetch_position(&self) -> (i64, i32, i64) {
        (
            self.log().log_end_offset(),
            self.log().latest_epoch().unwrap_or(-1),
            self.log().log_start_offset(),
        )
    }

    /// As follower at `leader_epoch`: appends the leader's batches as they are (offsets,
    /// epochs and CRCs untouched; the epoch cache learns the epochs they begin). Refused
    /// once the partition left that epoch or role, so a fetch answered by an old leader
    /// never lands after a newer leader's truncation.
    pub async fn append_as_follower(
        &self,
        leader_epoch: i32,
        records: Bytes,
    ) -> Result<AppendInfo, AppendError> {
        let info = {
            let _state = self.state.read();
            self.check_follower_of(leader_epoch)?;
            self.log().append_as_follower(records)?
        };
        if info.last_offset >= info.first_offset {
            self.log_end_advanced.notify_waiters();
        }
        if self.log().has_pending_roll() {
            let log = self.log();
            tokio::task::spawn_blocking(move || log.complete_roll());
        }
        if self.log().flush_needed() {
            let log = self.log();
            let upto = info.last_offset + 1;
            tokio::task::spawn_blocking(move || log.flush_to(upto))
                .await
                .map_err(|e| LogError::KafkaStorage(std::io::Error::other(e)))??;
        }
        Ok(info)
    }

    /// As follower: the high watermark is the leader's, bounded by what this log holds.
    pub fn update_follower_high_watermark(&self, leader_high_watermark: i64) {
        if self.is_leader() {
            return;
        }
        let log_end = self.log().log_end_offset();
        self.follower_lag
            .store((leader_high_watermark - log_end).max(0), Ordering::Relaxed);
        let hw = leader_high_watermark
            .min(log_end)
            .max(self.log().log_start_offset());
        let old = self.high_watermark.swap(hw, Ordering::AcqRel);
        if hw > old {
            self.high_watermark_advanced.notify_waiters();
        }
    }

    /// As follower: how far this log was behind the leader's high watermark at the last
    /// fetch; 0 as leader.
    pub fn follower_lag(&self) -> i64 {
        match self.is_leader() {
            true => 0,
            false => self.follower_lag.load(Ordering::Relaxed),
        }
    }

    /// As follower: the log start follows the leader's.
    pub fn update_follower_log_start_offset(
        &self,
        leader_log_start_offset: i64,
    ) -> Result<(), LogError> {
        if self.is_leader() {
            return Ok(());
        }
        self.log()
            .maybe_increment_log_start_offset(leader_log_start_offset)
            .map(|_| ())
    }

    /// As follower at `leader_epoch`: removes every offset from `offset` on (the log
    /// diverged from the leader's); the high watermark follows it down.
    pub fn truncate_to(&self, leader_epoch: i32, offset: i64) -> Result<(), AppendError> {
        let _state = self.state.read();
        self.check_follower_of(leader_epoch)?;
        tracing::info!(partition = %self.tp, offset, log_end = self.log().log_end_offset(), "truncating a divergent tail");
        self.log().truncate_to(offset)?;
        self.high_watermark.fetch_min(offset, Ordering::AcqRel);
        Ok(())
    }

    /// As follower at `leader_epoch`: empties the log and starts it at `offset` (below
    /// the leader's log start, nothing here can be fetched onto).
    pub fn truncate_fully_and_start_at(
        &self,
        leader_epoch: i32,
        offset: i64,
    ) -> Result<(), AppendError> {
        let _state = self.state.read();
        self.check_follower_of(leader_epoch)?;
        tracing::info!(partition = %self.tp, offset, "emptying the log to start at the leader's log start");
        self.log().truncate_fully_and_start_at(offset)?;
        self.high_watermark.store(offset, Ordering::Release);
        Ok(())
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
        assert_eq!(p.log().recovery_point(), 1);
        assert_eq!(p.high_watermark(), 1, "nothing unflushed became visible");
        assert_eq!(
            p.check_leader_epoch(-1),
            Err(ResponseError::KafkaStorageError)
        );
        assert_eq!(p.read_slice(0, 1024, true).unwrap_err().error_code(), 56);
    }

    #[tokio::test]
    async fn a_followers_lag_is_the_leaders_high_watermark_past_its_log_end() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("t-0");
        let log = Log::open(
            &dir,
            TopicPartition::new("t", 0),
            LogConfig::default(),
            0,
            0,
            false,
        )
        .unwrap();
        let p = Partition::new(
            TopicPartition::new("t", 0),
            Uuid::new_v4(),
            Arc::new(log),
            0,
        );
        let announced = |leader| crate::controller::LeaderAndIsr {
            leader,
            leader_epoch: 1,
            partition_epoch: 1,
            isr: vec![1, 2],
            eligible_leader_replicas: Vec::new(),
            last_known_elr: Vec::new(),
            leader_recovery_state: 0,
        };
        p.apply_leadership(2, &[1, 2], &announced(1), 0);
        p.update_follower_high_watermark(5);
        assert_eq!(p.follower_lag(), 5);
        crate::replica::append::append_as_follower(
            &p,
            1,
            batch_bytes(&[b"a", b"b", b"c"], 1_000, None),
        )
        .await
        .unwrap();
        p.update_follower_high_watermark(5);
        assert_eq!(p.follower_lag(), 2);
        p.update_follower_high_watermark(3);
        assert_eq!(p.follower_lag(), 0);
        // A leader lags nobody.
        p.update_follower_high_watermark(9);
        p.apply_leadership(
            2,
            &[1, 2],
            &crate::controller::LeaderAndIsr {
                leader_epoch: 2,
                ..announced(2)
            },
            0,
        );
        assert_eq!(p.follower_lag(), 0);
    }
}
