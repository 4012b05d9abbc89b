//! `Log`: one partition's log (Kafka's `UnifiedLog` + `LocalLog`, local storage only).

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{Condvar, Mutex, RwLock};

use super::checkpoint::sync_dir;
use super::faults::{self, Fault};
use super::leader_epoch::LeaderEpochFileCache;
use super::loader::{self, replay_producer_state, SnapshotOnDisk};
use super::log_dir_health::LogDirHealth;
use super::producer_state::{ProducerStateEntry, ProducerStateManager};
use super::segment::{read_header, whole_batches_len, LogSegment, SyncTarget};
use super::timestamp_search::{self, TimestampAndOffset};
use super::txn_index::AbortedTxn;
use super::{DelayedDeletes, FetchData, FileSlice, LogConfig, LogError, TopicPartition};

mod append;
mod cleaning;
mod retention;
mod retried_batches;

pub use cleaning::{delete_cleaned, CleanerView, SegmentView};

/// One partition's log: a directory of segments plus the leader epoch cache and producer
/// state.
///
/// Concurrency: one `Mutex` guards the segments and caches; it is held only for in-memory
/// work, index lookups and page-cache writes, never for an fsync, so readers never wait on a
/// flush. The log end offset is published through an atomic after each append, so it can be
/// read without the lock. Reads copy bytes with `pread` after releasing the lock; segment
/// files only grow at their end, so bytes below a size seen under the lock stay valid.
pub struct Log {
    dir: PathBuf,
    topic_partition: TopicPartition,
    config: RwLock<LogConfig>,
    inner: Mutex<LogInner>,
    log_end_offset: AtomicI64,
    log_start_offset: AtomicI64,
    /// The first offset of the oldest open transaction (`NO_UNSTABLE_OFFSET`: none),
    /// published with the log end offset after each append.
    first_unstable_offset: AtomicI64,
    /// Every offset below this is on disk (fsynced).
    recovery_point: AtomicI64,
    unflushed_messages: AtomicU64,
    /// When the last flush pass finished (wall clock ms), for `flush.ms`.
    last_flush_ms: AtomicI64,
    /// True while one caller's fsync is in progress; others wait on `flush_done` and then
    /// find their offset already durable (group commit).
    flushing: Mutex<bool>,
    flush_done: Condvar,
    /// Set when a segment file was created; the directory itself needs an fsync.
    dir_dirty: AtomicBool,
    /// Set when this open created the log's directory: its entry in the log dir and its
    /// `partition.metadata` are made durable by the first flush, not at creation (as Kafka
    /// defers them), so creating many partitions costs no fsync per partition. Until
    /// then a crash may lose the empty directory or the file; both are rebuilt from the
    /// metadata, which names the partition and its topic id.
    created_unsynced: AtomicBool,
    /// The log dir this log lives in: once it is offline, so is this log.
    dir_health: Arc<LogDirHealth>,
    /// Held while a producer snapshot is written outside `inner`, and by truncation.
    snapshot_lock: Mutex<()>,
    /// Where the producer state on disk is complete, and whether durably. A clean stop
    /// writes a snapshot only when the log end is past it, then makes it durable with one
    /// sync of the whole file system (`close_unsynced`); `close` writes one with fsync
    /// unless a durable one at the log end exists.
    snapshot_on_disk: Mutex<SnapshotOnDisk>,
    /// Bumped by every truncation, so a snapshot serialised before one is not written.
    truncations: AtomicU64,
    /// Set by an owner that runs `complete_roll` in the background after each append
    /// (`Partition`): the roll's snapshot write and fsync then leave the appending thread.
    defer_roll_work: AtomicBool,
    /// The newest roll whose snapshot and flush are still to be done.
    pending_roll: Mutex<Option<PendingSnapshot>>,
    /// Where segments leaving the log wait out `file.delete.delay.ms`.
    delayed_deletes: Arc<DelayedDeletes>,
    /// `cleaner-offset-checkpoint`: the first offset the cleaner has not cleaned; -1 before
    /// the first cleaning.
    cleaner_checkpoint: AtomicI64,
    /// Held by the cleaner while it cleans this log.
    cleaning: Mutex<()>,
    /// Set when the log is being deleted: the cleaner stops and does not come back.
    cleaning_aborted: AtomicBool,
    /// Set before the log's directory is renamed for deletion (`retire`): from then on an
    /// I/O error on this log comes from its directory having gone, not from the disk.
    retired: AtomicBool,
    /// The segments' total size and count as of the last change, set under `inner` by
    /// every change to the segments: what the metrics read without taking the lock an
    /// append waits on.
    published_size_bytes: AtomicU64,
    published_segments: AtomicUsize,
}

/// A producer snapshot serialised under the lock, to be written after it is released.
struct PendingSnapshot {
    offset: i64,
    bytes: Vec<u8>,
    truncations: u64,
}

struct LogInner {
    segments: BTreeMap<i64, LogSegment>,
    leader_epoch_cache: LeaderEpochFileCache,
    producer_state: ProducerStateManager,
}

impl LogInner {
    fn active(&mut self) -> Result<&mut LogSegment, LogError> {
        self.segments
            .values_mut()
            .next_back()
            .ok_or_else(|| LogError::KafkaStorage(std::io::Error::other("log has no segments")))
    }
}

/// `first_unstable_offset` when no transaction is open.
const NO_UNSTABLE_OFFSET: i64 = i64::MAX;

pub use crate::clock::now_ms;

impl Log {
    /// Opens (or creates) the log in `dir`, recovering it as `LogLoader` does. `recovery_point`
    /// and `log_start_offset` come from the log dir's checkpoints (0 when unknown).
    pub fn open(
        dir: &Path,
        topic_partition: TopicPartition,
        config: LogConfig,
        recovery_point: i64,
        log_start_offset: i64,
        clean_shutdown: bool,
    ) -> Result<Log, LogError> {
        let created = !dir.exists();
        std::fs::create_dir_all(dir)?;
        let log = Self::open_found(
            dir,
            topic_partition,
            config,
            recovery_point,
            log_start_offset,
            clean_shutdown,
        )?;
        // A directory made just now is durable only once the first flush syncs it.
        log.created_unsynced.store(created, Ordering::Release);
        Ok(log)
    }

    /// `open` of a directory found by listing its log dir at start: it exists, so it is
    /// neither looked up nor made again (with thousands of partitions, three calls each).
    pub fn open_found(
        dir: &Path,
        topic_partition: TopicPartition,
        config: LogConfig,
        recovery_point: i64,
        log_start_offset: i64,
        clean_shutdown: bool,
    ) -> Result<Log, LogError> {
        let loaded = loader::load(
            dir,
            &config,
            recovery_point,
            log_start_offset,
            clean_shutdown,
            now_ms(),
        )?;
        Ok(Self::from_loaded(
            dir,
            topic_partition,
            config,
            loaded,
            false,
        ))
    }

    /// A new, empty log in `dir`, which the caller has just made (so it is empty): nothing
    /// is listed, probed or recovered (see `loader::create`). Nothing is synced either; the
    /// first flush makes the directory and its files durable (`sync_creation`), and until
    /// then a crash leaves a directory that loads as an empty log (or none at all).
    pub fn create(
        dir: &Path,
        topic_partition: TopicPartition,
        config: LogConfig,
    ) -> Result<Log, LogError> {
        let created = loader::create(dir, &config, now_ms())?;
        Ok(Self::from_loaded(
            dir,
            topic_partition,
            config,
            created,
            true,
        ))
    }

    fn from_loaded(
        dir: &Path,
        topic_partition: TopicPartition,
        config: LogConfig,
        loaded: loader::LoadedLog,
        created: bool,
    ) -> Log {
        let first_unstable = loaded
            .producer_state
            .first_unstable_offset()
            .unwrap_or(NO_UNSTABLE_OFFSET);
        let published_size_bytes =
            AtomicU64::new(loaded.segments.values().map(LogSegment::size).sum());
        let published_segments = AtomicUsize::new(loaded.segments.len());
        Log {
            published_size_bytes,
            published_segments,
            dir: dir.to_path_buf(),
            topic_partition,
            config: RwLock::new(config),
            first_unstable_offset: AtomicI64::new(first_unstable),
            log_end_offset: AtomicI64::new(loaded.log_end_offset),
            log_start_offset: AtomicI64::new(loaded.log_start_offset),
            recovery_point: AtomicI64::new(loaded.recovery_point),
            unflushed_messages: AtomicU64::new(0),
            last_flush_ms: AtomicI64::new(now_ms()),
            inner: Mutex::new(LogInner {
                segments: loaded.segments,
                leader_epoch_cache: loaded.leader_epoch_cache,
                producer_state: loaded.producer_state,
            }),
            flushing: Mutex::new(false),
            flush_done: Condvar::new(),
            dir_dirty: AtomicBool::new(true),
            created_unsynced: AtomicBool::new(created),
            dir_health: Arc::new(LogDirHealth::new(dir.parent().unwrap_or(dir), None)),
            snapshot_lock: Mutex::new(()),
            snapshot_on_disk: Mutex::new(loaded.snapshot_on_disk),
            truncations: AtomicU64::new(0),
            defer_roll_work: AtomicBool::new(false),
            pending_roll: Mutex::new(None),
            delayed_deletes: Arc::new(DelayedDeletes::new()),
            cleaner_checkpoint: AtomicI64::new(-1),
            cleaning: Mutex::new(()),
            cleaning_aborted: AtomicBool::new(false),
            retired: AtomicBool::new(false),
        }
    }

    /// From now on, a roll's producer snapshot write and segment flush are left for
    /// `complete_roll`, which the caller runs on the blocking pool after any append that
    /// `has_pending_roll()` (Kafka schedules the same work in the background). `close`
    /// and the recovery-point checkpoint also complete it, so it is never lost.
    pub fn defer_roll_work(&self) {
        self.defer_roll_work.store(true, Ordering::Release);
    }

    pub fn has_pending_roll(&self) -> bool {
        self.pending_roll.lock().is_some()
    }

    /// Writes the newest rolled segment's producer snapshot and flushes everything below
    /// it. Failures are logged (an I/O error has taken the dir offline). Blocking.
    pub fn complete_roll(&self) {
        let Some(roll) = self.pending_roll.lock().take() else {
            return;
        };
        if let Err(e) = self.after_roll(roll) {
            tracing::error!(partition = %self.topic_partition, error = %e, "flushing a rolled segment failed");
        }
    }

    /// Makes this log part of a log dir whose health it shares (see `LogDirHealth`).
    pub fn in_log_dir(mut self, health: Arc<LogDirHealth>) -> Self {
        self.dir_health = health;
        self
    }

    /// Makes segments this log deletes wait in `deletes` (the log manager's queue, shared
    /// by every log) for `file.delete.delay.ms`.
    pub fn with_delayed_deletes(mut self, deletes: Arc<DelayedDeletes>) -> Self {
        self.delayed_deletes = deletes;
        self
    }

    /// The queue this log's deleted segments wait in.
    pub fn delayed_deletes(&self) -> &Arc<DelayedDeletes> {
        &self.delayed_deletes
    }

    /// Whether the log's dir went offline; an offline log refuses every read and write.
    pub fn is_offline(&self) -> bool {
        self.dir_health.is_offline()
    }

    /// `LogDirOffline` once the log's dir went offline.
    pub fn check_online(&self) -> Result<(), LogError> {
        if !self.dir_health.is_offline() {
            return Ok(());
        }
        Err(LogError::LogDirOffline {
            dir: self.dir_health.path().to_path_buf(),
            cause: self.dir_health.cause().unwrap_or_default(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn topic_partition(&self) -> &TopicPartition {
        &self.topic_partition
    }
    /// `min.insync.replicas` in force, without copying the whole config.
    pub fn min_insync_replicas(&self) -> i32 {
        self.config.read().min_insync_replicas
    }
    pub fn config(&self) -> LogConfig {
        self.config.read().clone()
    }
    pub fn update_config(&self, config: LogConfig) {
        let interval = config.index_interval_bytes;
        *self.config.write() = config;
        for segment in self.inner.lock().segments.values_mut() {
            segment.set_index_interval(interval);
        }
    }
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset.load(Ordering::Acquire)
    }
    /// The first offset of the oldest transaction still open in this partition.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        let o = self.first_unstable_offset.load(Ordering::Acquire);
        (o != NO_UNSTABLE_OFFSET).then_some(o)
    }

    fn publish_first_unstable_offset(&self, inner: &LogInner) {
        let o = inner
            .producer_state
            .first_unstable_offset()
            .unwrap_or(NO_UNSTABLE_OFFSET);
        self.first_unstable_offset.store(o, Ordering::Release);
    }

    /// The aborted transactions a read_committed fetch from `fetch_offset` must skip
    /// below `upper_bound` (Kafka's `collectAbortedTransactions`): those whose marker is
    /// at or after `fetch_offset` and which began below `upper_bound`, from the segment
    /// holding `fetch_offset` on.
    pub fn aborted_txns(&self, fetch_offset: i64, upper_bound: i64) -> Vec<AbortedTxn> {
        let inner = self.inner.lock();
        let first = inner
            .segments
            .range(..=fetch_offset)
            .next_back()
            .map_or(i64::MIN, |(&b, _)| b);
        let mut out = Vec::new();
        for segment in inner.segments.range(first..).map(|(_, s)| s) {
            for txn in segment.aborted_txns() {
                if txn.last_offset >= fetch_offset && txn.first_offset < upper_bound {
                    out.push(*txn);
                }
            }
            // Kafka stops once an entry's last stable offset reaches the bound: no later
            // entry can have begun below it.
            if segment
                .aborted_txns()
                .last()
                .is_some_and(|t| t.last_stable_offset >= upper_bound)
            {
                break;
            }
        }
        out
    }

    /// Open transactions here: (producer id, epoch, first offset).
    pub fn ongoing_transactions(&self) -> Vec<(i64, i16, i64)> {
        self.inner.lock().producer_state.ongoing_transactions()
    }

    /// Whether `producer_id` at `epoch` has a transaction open in this partition.
    pub fn has_ongoing_txn(&self, producer_id: i64, epoch: i16) -> bool {
        self.inner
            .lock()
            .producer_state
            .has_ongoing_txn(producer_id, epoch)
    }

    /// Whether this partition remembers `producer_id` (it wrote here, and has not
    /// expired).
    pub fn knows_producer(&self, producer_id: i64) -> bool {
        self.inner
            .lock()
            .producer_state
            .entry(producer_id)
            .is_some()
    }

    /// Every producer this partition remembers, for DescribeProducers.
    pub fn producer_states(&self) -> Vec<ProducerStateEntry> {
        self.inner
            .lock()
            .producer_state
            .producers()
            .cloned()
            .collect()
    }

    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset.load(Ordering::Acquire)
    }
    pub fn recovery_point(&self) -> i64 {
        self.recovery_point.load(Ordering::Acquire)
    }
    /// Messages appended since the last flush. With `flush.messages = N` the caller runs
    /// `flush_to(last_offset + 1)` once this reaches N (N = 1: before every ack).
    pub fn unflushed_messages(&self) -> u64 {
        self.unflushed_messages.load(Ordering::Acquire)
    }
    /// Whether `flush.messages` has been reached: the caller should `flush_to` the end of its
    /// append (in `spawn_blocking`) before acknowledging it.
    pub fn flush_needed(&self) -> bool {
        self.unflushed_messages() >= self.config.read().flush_interval_messages
    }
    pub fn size_bytes(&self) -> u64 {
        self.inner
            .lock()
            .segments
            .values()
            .map(LogSegment::size)
            .sum()
    }
    pub fn segment_count(&self) -> usize {
        self.inner.lock().segments.len()
    }

    /// [`Log::size_bytes`] as of the segments' last change, read without the lock.
    pub fn published_size_bytes(&self) -> u64 {
        self.published_size_bytes.load(Ordering::Relaxed)
    }

    /// [`Log::segment_count`] as of the segments' last change, read without the lock.
    pub fn published_segment_count(&self) -> usize {
        self.published_segments.load(Ordering::Relaxed)
    }

    /// Publishes the segments' size and count; called under `inner` after every change
    /// to the segments (an append adds its bytes instead: see `append_core`).
    fn publish_shape(&self, inner: &LogInner) {
        let size: u64 = inner.segments.values().map(LogSegment::size).sum();
        self.published_size_bytes.store(size, Ordering::Relaxed);
        self.published_segments
            .store(inner.segments.len(), Ordering::Relaxed);
    }

    /// Rolls to a new segment at `new_base` when the active one says so. Returns the
    /// producer snapshot to write at the new base once the lock is released (everything
    /// below it should then be flushed). A roll that fails leaves the old segment active.
    #[allow(clippy::too_many_arguments)]
    fn roll_if_needed(
        &self,
        inner: &mut LogInner,
        config: &LogConfig,
        size: u64,
        max_ts: i64,
        last_offset: i64,
        new_base: i64,
        now_ms: i64,
    ) -> Result<Option<PendingSnapshot>, LogError> {
        let active = inner.active()?;
        if !active.should_roll(config, size, max_ts, last_offset, now_ms) {
            return Ok(None);
        }
        if active.size() == 0 && active.base_offset() == new_base {
            // Nothing to roll away from (e.g. an index full from its first entry).
            return Ok(None);
        }
        self.roll_at(inner, config, new_base, now_ms).map(Some)
    }

    /// Rolls to a new active segment at `new_base`; returns the producer snapshot to write
    /// there once the lock is released. A roll that fails leaves the old segment active.
    fn roll_at(
        &self,
        inner: &mut LogInner,
        config: &LogConfig,
        new_base: i64,
        now_ms: i64,
    ) -> Result<PendingSnapshot, LogError> {
        // A roll that fails after trimming the old segment's indexes leaves them trimmed:
        // its next append grows them again.
        self.open_next_segment(inner, config, new_base, now_ms)?;
        inner.producer_state.set_map_end_offset(new_base);
        let snapshot = PendingSnapshot {
            offset: new_base,
            bytes: inner.producer_state.snapshot_bytes(),
            truncations: self.truncations.load(Ordering::Acquire),
        };
        self.dir_dirty.store(true, Ordering::Release);
        tracing::info!(partition = %self.topic_partition, base = new_base, "rolled new log segment");
        Ok(snapshot)
    }

    fn open_next_segment(
        &self,
        inner: &mut LogInner,
        config: &LogConfig,
        new_base: i64,
        now_ms: i64,
    ) -> Result<(), LogError> {
        inner.active()?.on_become_inactive()?;
        if let Some(existing) = inner.segments.get(&new_base) {
            if existing.size() > 0 {
                return Err(LogError::corrupt_file(
                    &self.dir,
                    format!("segment {new_base} already exists"),
                ));
            }
        }
        if let Some(existing) = inner.segments.remove(&new_base) {
            existing.delete(&self.dir)?;
        }
        let segment = LogSegment::open(&self.dir, new_base, config, true, now_ms)?;
        inner.segments.insert(new_base, segment);
        self.publish_shape(inner);
        Ok(())
    }

    /// Writes a producer snapshot serialised under the lock, unless the log was truncated
    /// since (its offset may then lie past the log end).
    fn write_producer_snapshot(&self, snapshot: PendingSnapshot) -> Result<(), LogError> {
        self.check_online()?;
        let _writing = self.snapshot_lock.lock();
        if self.truncations.load(Ordering::Acquire) != snapshot.truncations {
            return Ok(());
        }
        ProducerStateManager::write_snapshot(&self.dir, snapshot.offset, &snapshot.bytes)
            .map_err(|e| self.on_failure("producer snapshot", e))?;
        let mut on_disk = self.snapshot_on_disk.lock();
        *on_disk = on_disk.synced_at(snapshot.offset);
        Ok(())
    }

    /// Reads whole batches from the one containing `offset`: at most `max_bytes` (but the
    /// first batch regardless when `min_one_message`, KIP-74), only batches wholly below
    /// `max_offset` (the high watermark for consumers). `offset` = log end → empty.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_message: bool,
    ) -> Result<FetchData<Bytes>, LogError> {
        let data = self.read_slice(offset, max_bytes, max_offset, min_one_message)?;
        let mut bytes = match &data.records {
            Some(slice) => slice.read()?,
            None => Bytes::new(),
        };
        bytes.truncate(whole_batches_len(&bytes, max_offset));
        Ok(FetchData {
            records: bytes,
            log_end_offset: data.log_end_offset,
            log_start_offset: data.log_start_offset,
        })
    }

    /// Where a read from `offset` lies in a segment file, without reading it: as [`Log::read`]
    /// but, like Kafka's `FileRecords.slice`, the last batch may be cut at `max_bytes`
    /// (clients drop a partial trailing batch and fetch it again from its start). The first
    /// batch is always whole: read regardless of `max_bytes` when `min_one_message`
    /// (KIP-74), and otherwise, when it does not fit, nothing is read. No batch reaching
    /// `max_offset` is included. `None` when there is nothing to read.
    pub fn read_slice(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_message: bool,
    ) -> Result<FetchData<Option<FileSlice>>, LogError> {
        self.check_online()?;
        let (log_start, log_end) = (self.log_start_offset(), self.log_end_offset());
        if offset < log_start || offset > log_end {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start,
                log_end,
            });
        }
        let slice = if offset == log_end || offset >= max_offset {
            None
        } else {
            self.plan_slice(offset, max_bytes, max_offset, min_one_message)?
        };
        Ok(FetchData {
            records: slice,
            log_end_offset: log_end,
            log_start_offset: log_start,
        })
    }

    fn plan_slice(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_message: bool,
    ) -> Result<Option<FileSlice>, LogError> {
        let inner = self.inner.lock();
        let log_start = self.log_start_offset();
        if offset < log_start {
            // Retention or DeleteRecords moved the log start since the range check.
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start,
                log_end: self.log_end_offset(),
            });
        }
        let first = inner
            .segments
            .range(..=offset)
            .next_back()
            .map_or(i64::MIN, |(&b, _)| b);
        for (&base, segment) in inner.segments.range(first..) {
            let Some(bp) = segment.translate_offset(offset)? else {
                continue;
            };
            // Batches at or past `max_offset` stay out: when it falls in this segment,
            // the slice ends where the batch holding it starts.
            let next_base = inner.segments.range(base + 1..).next().map(|(&b, _)| b);
            let whole_segment =
                next_base.is_some_and(|b| b <= max_offset) || max_offset >= self.log_end_offset();
            let limit = match whole_segment {
                true => segment.size(),
                false => segment
                    .translate_offset(max_offset)?
                    .map_or(segment.size(), |end| end.position),
            };
            let available = usize::try_from(limit.saturating_sub(bp.position)).unwrap_or(0);
            let first_batch = bp.header.size_in_bytes();
            let want = if min_one_message {
                max_bytes.max(first_batch)
            } else {
                max_bytes
            };
            let len = want.min(available);
            // A read that cannot hold its first batch whole holds nothing (Kafka answers
            // such a partition empty from Fetch v3 on): a cut-off piece as the only content
            // is a response the client can make no progress with.
            if len < first_batch {
                return Ok(None);
            }
            let file = segment.log_file().clone();
            return Ok(Some(FileSlice::new(file, bp.position, len)));
        }
        Ok(None)
    }

    /// `found`, or `None` with the error logged: for the timestamp searches, which answer
    /// "no such offset" rather than fail when a segment's index cannot be read.
    fn readable<T>(&self, found: Result<T, LogError>) -> Option<T> {
        found
            .inspect_err(|e| {
                tracing::warn!(partition = %self.topic_partition, error = %e, "cannot read a segment's index");
            })
            .ok()
    }

    /// ListOffsets by timestamp (Kafka's `searchOffsetInLocalLog`): the first record with a
    /// timestamp >= `ts` and an offset >= the log start offset, searched in the first segment
    /// whose max timestamp reaches `ts`, from the time index's entry below `ts`.
    ///
    /// Only the index lookups hold the lock. Batch headers and the candidate batch are then
    /// read below the segment size seen under it (bytes there never change), and the batch's
    /// records are searched, decompressing if need be, with no lock held. A batch whose
    /// records cannot be read is answered at batch level: its max timestamp and first offset.
    pub fn fetch_offset_by_timestamp(&self, ts: i64) -> Option<TimestampAndOffset> {
        let log_start = self.log_start_offset();
        let (file, mut position, end) = {
            let inner = self.inner.lock();
            let segment = inner.segments.values().find(|s| {
                self.readable(s.max_timestamp_and_offset())
                    .is_some_and(|m| m.0 >= ts)
            })?;
            let (_, ts_offset) = self.readable(segment.time_index())?.lookup(ts);
            let (_, start) = self
                .readable(segment.offset_index())?
                .lookup(ts_offset.max(log_start));
            (segment.log_file().clone(), u64::from(start), segment.size())
        };
        while let Ok(Some(h)) = read_header(&file, position, end) {
            let size = h.check_length(usize::try_from(end - position).ok()?).ok()?;
            if h.max_timestamp() >= ts && h.last_offset() >= log_start {
                let found = self
                    .read_stored_batch(&file, position, size)
                    .and_then(|b| timestamp_search::first_at_or_after(&b, ts, log_start));
                match found {
                    Ok(Some(found)) => return Some(found),
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!(partition = %self.topic_partition, offset = h.base_offset(), error = %e,
                            "cannot read the records of a stored batch; answering at batch level");
                        return Some(TimestampAndOffset {
                            timestamp: h.max_timestamp(),
                            offset: h.base_offset().max(log_start),
                            leader_epoch: Some(h.partition_leader_epoch()).filter(|&e| e >= 0),
                        });
                    }
                }
            }
            position += size as u64;
        }
        None
    }

    /// ListOffsets MAX_TIMESTAMP (Kafka ≥ 3.8, KAFKA-16310): the record with the largest
    /// timestamp, the earliest such. The segment and the time index know the batch carrying
    /// it (by its last offset, as Kafka's time index does); its records give the record.
    pub fn max_timestamp_and_offset(&self) -> Option<TimestampAndOffset> {
        let (file, mut position, end, max_ts) = {
            let inner = self.inner.lock();
            let mut best: Option<(&LogSegment, (i64, i64))> = None;
            for s in inner.segments.values() {
                let Some(max) = self.readable(s.max_timestamp_and_offset()) else {
                    continue;
                };
                if max.0 >= 0 && best.is_none_or(|(_, b)| max.0 > b.0) {
                    best = Some((s, max));
                }
            }
            let (segment, (ts, offset)) = best?;
            let (_, start) = self.readable(segment.offset_index())?.lookup(offset);
            (
                segment.log_file().clone(),
                u64::from(start),
                segment.size(),
                ts,
            )
        };
        while let Ok(Some(h)) = read_header(&file, position, end) {
            let size = h.check_length(usize::try_from(end - position).ok()?).ok()?;
            if h.max_timestamp() == max_ts {
                let found = self
                    .read_stored_batch(&file, position, size)
                    .and_then(|b| timestamp_search::offset_of_max_timestamp(&b));
                if let Ok(Some(found)) = found {
                    return Some(found);
                }
                // A header whose max timestamp no record carries (or unreadable records):
                // the batch's last offset, as the time index has it.
                tracing::warn!(partition = %self.topic_partition, offset = h.base_offset(),
                    "no record of a stored batch carries its max timestamp; answering at batch level");
                return Some(TimestampAndOffset {
                    timestamp: max_ts,
                    offset: h.last_offset(),
                    leader_epoch: Some(h.partition_leader_epoch()).filter(|&e| e >= 0),
                });
            }
            position += size as u64;
        }
        None
    }

    /// The bytes of one stored batch for a record-level lookup. `size` was checked against
    /// the bytes present; past `max.message.bytes` (at least 1 MiB) a lookup reads nothing,
    /// so a forged length cannot make it read a whole segment into memory.
    fn read_stored_batch(
        &self,
        file: &File,
        position: u64,
        size: usize,
    ) -> Result<Vec<u8>, LogError> {
        let read_max = (self.config.read().max_message_bytes as usize).max(1 << 20);
        if size > read_max {
            return Err(LogError::CorruptMessage(format!(
                "stored batch of {size} bytes exceeds the {read_max} bytes a lookup reads"
            )));
        }
        let mut buf = vec![0u8; size];
        std::os::unix::fs::FileExt::read_exact_at(file, &mut buf, position)?;
        Ok(buf)
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.inner.lock().leader_epoch_cache.latest_epoch()
    }

    /// OffsetForLeaderEpoch: `(epoch, end offset)`; `None` when the epoch is unknown.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, i64)> {
        let leo = self.log_end_offset();
        self.inner
            .lock()
            .leader_epoch_cache
            .end_offset_for(epoch, leo)
    }

    /// Makes every offset below `offset` (at most the log end) durable. Concurrent callers
    /// share one fsync pass (group commit): whoever finds a flush running waits for it and
    /// is usually done when it completes. Blocking: run it in `spawn_blocking`.
    ///
    /// A failed fsync takes the log dir offline (see `LogDirHealth`): the recovery point
    /// stays where the last good fsync left it, and no later flush can move it.
    pub fn flush_to(&self, offset: i64) -> Result<(), LogError> {
        loop {
            self.check_online()?;
            let target = offset.min(self.log_end_offset());
            let mut flushing = self.flushing.lock();
            if self.recovery_point() >= target {
                return Ok(());
            }
            if *flushing {
                self.flush_done.wait(&mut flushing);
                continue;
            }
            *flushing = true;
            drop(flushing);
            let result = self.flush_pass().map_err(|e| self.on_failure("fsync", e));
            *self.flushing.lock() = false;
            self.flush_done.notify_all();
            result?;
        }
    }

    /// Makes the creation of this log's directory durable: its `partition.metadata` (when
    /// written) and its entry in the log dir.
    fn sync_creation(&self) -> Result<(), LogError> {
        let metadata = self
            .dir
            .join(super::partition_metadata::PARTITION_METADATA_FILE);
        if metadata.exists() {
            std::fs::File::open(&metadata)?.sync_all()?;
        }
        match self.dir.parent() {
            Some(parent) => sync_dir(parent),
            None => Ok(()),
        }
    }

    /// One fsync of every segment holding data at or above the recovery point, up to the log
    /// end offset as of the start of the pass.
    fn flush_pass(&self) -> Result<(), LogError> {
        let (files, end, messages) = {
            let inner = self.inner.lock();
            let end = self.log_end_offset();
            let messages = self.unflushed_messages();
            let rp = self.recovery_point();
            let first = inner
                .segments
                .range(..=rp)
                .next_back()
                .map_or(i64::MIN, |(&b, _)| b);
            let files: Vec<SyncTarget> = inner
                .segments
                .range(first..)
                .flat_map(|(_, s)| s.files_to_sync())
                .collect();
            (files, end, messages)
        };
        for file in files {
            faults::check(&self.dir, Fault::Fsync)?;
            file.sync()?;
        }
        if self.dir_dirty.swap(false, Ordering::AcqRel) {
            if let Err(e) = sync_dir(&self.dir) {
                self.dir_dirty.store(true, Ordering::Release);
                return Err(e);
            }
        }
        if self.created_unsynced.swap(false, Ordering::AcqRel) {
            if let Err(e) = self.sync_creation() {
                self.created_unsynced.store(true, Ordering::Release);
                return Err(e);
            }
        }
        // A truncation during the pass may have moved the log end below `end`.
        self.recovery_point
            .fetch_max(end.min(self.log_end_offset()), Ordering::AcqRel);
        self.unflushed_messages
            .fetch_sub(messages.min(self.unflushed_messages()), Ordering::AcqRel);
        self.last_flush_ms.store(now_ms(), Ordering::Release);
        Ok(())
    }

    /// The scheduler's log flusher (Kafka's `flushDirtyLogs`): flushes when the last flush
    /// is at least `flush.ms` old and something is unflushed. Blocking.
    pub fn flush_if_due(&self, now_ms: i64) -> Result<(), LogError> {
        let flush_ms = self.config.read().flush_ms;
        let since = now_ms.saturating_sub(self.last_flush_ms.load(Ordering::Acquire));
        if since < flush_ms || self.recovery_point() >= self.log_end_offset() {
            return Ok(());
        }
        self.flush()
    }

    /// Forgets producers idle for `producer.id.expiration.ms` (see
    /// `ProducerStateManager::remove_expired_producers`). Returns how many.
    pub fn remove_expired_producers(&self, now_ms: i64) -> usize {
        let expiration_ms = self.config.read().producer_id_expiration_ms;
        self.inner
            .lock()
            .producer_state
            .remove_expired_producers(now_ms, expiration_ms)
    }

    pub fn flush(&self) -> Result<(), LogError> {
        self.flush_to(self.log_end_offset())
    }

    /// Removes every offset >= `offset` (a follower diverged from its leader).
    pub fn truncate_to(&self, offset: i64) -> Result<(), LogError> {
        self.check_online()?;
        let _snapshots = self.snapshot_lock.lock();
        let mut inner = self.inner.lock();
        self.truncations.fetch_add(1, Ordering::AcqRel);
        let truncated = self.truncate_locked(&mut inner, offset);
        self.publish_shape(&inner);
        truncated.map_err(|e| self.on_failure("truncation", e))
    }

    /// Moves the log start offset up to `offset` (at most the log end), as a follower does
    /// when its leader's log start moved (Kafka's `maybeIncrementLogStartOffset`): offsets
    /// below it are no longer read; the segments wholly below it go with retention.
    /// Returns whether it moved.
    pub fn maybe_increment_log_start_offset(&self, offset: i64) -> Result<bool, LogError> {
        self.check_online()?;
        let mut inner = self.inner.lock();
        let offset = offset.min(self.log_end_offset());
        if offset <= self.log_start_offset() {
            return Ok(false);
        }
        self.log_start_offset.store(offset, Ordering::Release);
        inner
            .leader_epoch_cache
            .truncate_from_start(offset)
            .map_err(|e| self.on_failure("leader epoch checkpoint", e))?;
        Ok(true)
    }

    /// Empties the log and makes it start at `offset` (Kafka's `truncateFullyAndStartAt`):
    /// a follower whose log end is below its leader's log start copies nothing it has.
    pub fn truncate_fully_and_start_at(&self, offset: i64) -> Result<(), LogError> {
        self.check_online()?;
        if offset < 0 {
            return Err(LogError::InvalidRecord(format!(
                "a log cannot start at offset {offset}"
            )));
        }
        let _snapshots = self.snapshot_lock.lock();
        let mut inner = self.inner.lock();
        self.truncations.fetch_add(1, Ordering::AcqRel);
        let emptied = self.start_empty_at(&mut inner, offset);
        self.publish_shape(&inner);
        emptied.map_err(|e| self.on_failure("truncation", e))
    }

    fn start_empty_at(&self, inner: &mut LogInner, offset: i64) -> Result<(), LogError> {
        let config = self.config();
        let bases: Vec<i64> = inner.segments.keys().copied().collect();
        for base in bases {
            if let Some(s) = inner.segments.remove(&base) {
                s.delete(&self.dir)?;
            }
        }
        inner.segments.insert(
            offset,
            LogSegment::open(&self.dir, offset, &config, true, now_ms())?,
        );
        self.dir_dirty.store(true, Ordering::Release);
        self.log_start_offset.store(offset, Ordering::Release);
        self.log_end_offset.store(offset, Ordering::Release);
        self.recovery_point.store(offset, Ordering::Release);
        self.unflushed_messages.store(0, Ordering::Release);
        inner.leader_epoch_cache.truncate_from_end(i64::MIN)?;
        inner.producer_state.delete_snapshots_above(-1)?;
        // Empty at its start, as after a load that found no snapshot.
        *self.snapshot_on_disk.lock() = SnapshotOnDisk {
            offset,
            synced: false,
        };
        let (state, _) = ProducerStateManager::load(&self.dir, offset, offset)?;
        inner.producer_state = state;
        Ok(())
    }

    fn truncate_locked(&self, inner: &mut LogInner, offset: i64) -> Result<(), LogError> {
        let leo = self.log_end_offset();
        if offset >= leo {
            return Ok(());
        }
        let log_start = self.log_start_offset();
        if offset < 0 {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start,
                log_end: leo,
            });
        }
        let config = self.config();
        let first_base = inner.segments.keys().next().copied().unwrap_or(0);
        let doomed: Vec<i64> = if offset <= first_base {
            inner.segments.keys().copied().collect()
        } else {
            inner.segments.range(offset..).map(|(&b, _)| b).collect()
        };
        for base in doomed {
            if let Some(s) = inner.segments.remove(&base) {
                s.delete(&self.dir)?;
            }
        }
        if inner.segments.is_empty() {
            inner.segments.insert(
                offset,
                LogSegment::open(&self.dir, offset, &config, true, now_ms())?,
            );
            self.log_start_offset.store(offset, Ordering::Release);
            self.dir_dirty.store(true, Ordering::Release);
        } else {
            inner.active()?.truncate_to(offset)?;
        }
        self.log_end_offset.store(offset, Ordering::Release);
        self.recovery_point.fetch_min(offset, Ordering::AcqRel);
        // Snapshots above `offset` are deleted below; one at `offset` itself stays. The
        // mark may then not name an offset past it: no snapshot need exist at `offset`, and
        // a close that believed one did would write none, so a clean start would find none
        // and lose the producers (a retried batch then appended twice).
        {
            let mut on_disk = self.snapshot_on_disk.lock();
            if on_disk.offset > offset {
                *on_disk = SnapshotOnDisk::UNKNOWN;
            }
        }
        inner.leader_epoch_cache.truncate_from_end(offset)?;
        let log_start = self.log_start_offset();
        inner.producer_state.delete_snapshots_above(offset)?;
        let (mut state, _) = ProducerStateManager::load(&self.dir, log_start, offset)?;
        replay_producer_state(&mut inner.segments, &mut state, offset)?;
        inner.producer_state = state;
        self.publish_first_unstable_offset(inner);
        Ok(())
    }

    /// Writes `<log end offset>.snapshot` of the producer state.
    pub fn producer_state_snapshot(&self) -> Result<(), LogError> {
        self.check_online()?;
        let snapshot = {
            let mut inner = self.inner.lock();
            let leo = self.log_end_offset();
            inner.producer_state.set_map_end_offset(leo);
            PendingSnapshot {
                offset: leo,
                bytes: inner.producer_state.snapshot_bytes(),
                truncations: self.truncations.load(Ordering::Acquire),
            }
        };
        self.write_producer_snapshot(snapshot)
    }

    /// Clean close: flush, write a producer snapshot, and trim the active segment's indexes
    /// (with its final time-index entry) so the files read back exactly.
    /// An offline log is left as it is: the next start recovers it.
    ///
    /// A log that changed nothing since its last flush, snapshot and trim costs no write
    /// and no sync here (a broker with thousands of idle partitions stops at once): the
    /// flush is skipped at the recovery point, the snapshot when a durable one at the log
    /// end exists (truncation deletes the snapshots above its offset, so one there
    /// describes this log), the trim when the indexes have no slack, and the sync of
    /// indexes nothing wrote since their last.
    pub fn close(&self) -> Result<(), LogError> {
        self.complete_roll();
        self.flush()?;
        let on_disk = *self.snapshot_on_disk.lock();
        if !(on_disk.synced && on_disk.offset == self.log_end_offset()) {
            self.producer_state_snapshot()?;
        }
        let targets = {
            let mut inner = self.inner.lock();
            let active = inner.active().map_err(|e| self.on_failure("close", e))?;
            active
                .on_become_inactive()
                .map_err(|e| self.on_failure("close", e))?;
            active.index_sync_targets()
        };
        for target in targets {
            target
                .sync()
                .map_err(|e| self.on_failure("close", e.into()))?;
        }
        Ok(())
    }
}

impl Log {
    /// The first half of a clean stop (see `LogManager::shutdown`): the rolled segment's
    /// work, a producer snapshot when the log end is past the one on disk, and the active
    /// segment's indexes trimmed, all written without fsync. The log manager then syncs
    /// each log dir's file system once and only then writes the clean-shutdown marker, so
    /// stopping costs no fsync per file. The recovery point is not moved: until that sync
    /// succeeds, a start recovers from where the last fsync left it. Returns the log end
    /// it covers (see `synced_to`).
    pub fn close_unsynced(&self) -> Result<i64, LogError> {
        self.check_online()?;
        self.complete_roll();
        let _writing = self.snapshot_lock.lock();
        let mut inner = self.inner.lock();
        let leo = self.log_end_offset();
        if self.snapshot_on_disk.lock().offset != leo {
            inner.producer_state.set_map_end_offset(leo);
            let bytes = inner.producer_state.snapshot_bytes();
            ProducerStateManager::write_snapshot_unsynced(&self.dir, leo, &bytes)
                .map_err(|e| self.on_failure("producer snapshot", e))?;
            *self.snapshot_on_disk.lock() = SnapshotOnDisk {
                offset: leo,
                synced: false,
            };
        }
        inner
            .active()
            .and_then(|active| active.on_become_inactive())
            .map_err(|e| self.on_failure("close", e))?;
        Ok(leo)
    }

    /// The file system holding this log was synced after `close_unsynced` returned `end`:
    /// every offset below it is durable.
    pub fn synced_to(&self, end: i64) {
        self.recovery_point
            .fetch_max(end.min(self.log_end_offset()), Ordering::AcqRel);
    }
}

#[cfg(test)]
#[path = "log_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "log_failure_tests.rs"]
mod failure_tests;

#[cfg(test)]
#[path = "txn_tests.rs"]
mod txn_tests;

#[cfg(test)]
#[path = "restart_tests.rs"]
mod restart_tests;
