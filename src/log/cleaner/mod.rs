//! The log cleaner: compaction of logs whose `cleanup.policy` includes `compact` (Kafka's
//! `LogCleaner` and `LogCleanerManager`).
//!
//! ```text
//! LogCleaner      picks the filthiest compacted log, holds its cleaning lock, cleans it
//!   clean.rs      the dirty section: offset map, groups of segments, swap   (doClean)
//!   filter.rs     one batch: kept, rebuilt, cut to its header, or dropped   (filterTo)
//!   offset_map.rs key digest → latest offset, within the dedupe buffer      (SkimpyOffsetMap)
//!   reader.rs     whole batches of a segment file, one I/O buffer at a time
//!   txn.rs        transactions met on the way: aborted, committed, markers  (CleanedTransactionMetadata)
//!   throttler.rs  log.cleaner.io.max.bytes.per.second, shared by the threads
//! ```
//!
//! Each of the `log.cleaner.threads` threads is a scheduler job run every
//! `log.cleaner.backoff.ms`; a run cleans logs until none is dirty enough. Memory is
//! bounded: one offset map of `log.cleaner.dedupe.buffer.size / threads` bytes per running
//! thread, one I/O buffer, and the records of the batch being rebuilt (bounded as every
//! stored batch's records are, see `compression`). Where the next cleaning of a log starts
//! is its `cleaner-offset-checkpoint` entry, written by the log manager after each run.

mod clean;
mod filter;
mod offset_map;
mod reader;
mod throttler;
mod txn;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use self::clean::{plan, CleanError};
use self::throttler::Throttler;
use crate::log::{Log, LogError, TopicPartition};

pub use self::offset_map::OffsetMap;

/// The broker's cleaner settings (`log.cleaner.*`), with Kafka's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct CleanerConfig {
    /// `log.cleaner.enable`.
    pub enable: bool,
    /// `log.cleaner.threads`.
    pub threads: usize,
    /// `log.cleaner.dedupe.buffer.size`: offset-map memory of all threads together.
    pub dedupe_buffer_size: u64,
    /// `log.cleaner.io.buffer.size`.
    pub io_buffer_size: usize,
    /// `log.cleaner.io.buffer.load.factor`: how full an offset map may get.
    pub io_buffer_load_factor: f64,
    /// `log.cleaner.io.max.bytes.per.second`.
    pub io_max_bytes_per_second: f64,
    /// `log.cleaner.backoff.ms`: the pause when no log needs cleaning.
    pub backoff_ms: u64,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        CleanerConfig {
            enable: true,
            threads: 1,
            dedupe_buffer_size: 128 * 1024 * 1024,
            io_buffer_size: 512 * 1024,
            io_buffer_load_factor: 0.9,
            io_max_bytes_per_second: f64::MAX,
            backoff_ms: 15_000,
        }
    }
}

impl CleanerConfig {
    /// One thread's share of the dedupe buffer (Kafka caps it at 2 GiB).
    pub fn offset_map_bytes(&self) -> usize {
        let share = self.dedupe_buffer_size / self.threads.max(1) as u64;
        usize::try_from(share.min(i32::MAX as u64)).unwrap_or(i32::MAX as usize)
    }
}

/// What one cleaning did, for the log line and the benchmarks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CleanSummary {
    pub first_dirty_offset: i64,
    /// The next cleaning starts here.
    pub end_offset: i64,
    pub segments_cleaned: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub records_read: u64,
    pub records_kept: u64,
    pub map_keys: u64,
    /// The offset map's slots.
    pub map_slots: u64,
    pub map_ms: u64,
    pub elapsed_ms: u64,
}

/// A log the cleaner may look at, with its high watermark (nothing at or past it is
/// cleaned).
pub struct Candidate {
    pub log: Arc<Log>,
    pub high_watermark: i64,
}

pub struct LogCleaner {
    config: RwLock<CleanerConfig>,
    throttler: Throttler,
    stopped: AtomicBool,
    /// Logs whose cleaning failed on something other than an I/O error (a corrupt batch):
    /// left alone until restart, as Kafka's `uncleanablePartitions`.
    uncleanable: Mutex<HashSet<TopicPartition>>,
    /// The last cleaning done, for Kafka's `LogCleaner` gauges.
    last: Mutex<Option<CleanSummary>>,
}

impl LogCleaner {
    pub fn new(config: CleanerConfig) -> Self {
        LogCleaner {
            throttler: Throttler::new(config.io_max_bytes_per_second),
            config: RwLock::new(config),
            stopped: AtomicBool::new(false),
            uncleanable: Mutex::new(HashSet::new()),
            last: Mutex::new(None),
        }
    }

    /// The last cleaning done (None before the first).
    pub fn last_cleaning(&self) -> Option<CleanSummary> {
        self.last.lock().clone()
    }

    pub fn config(&self) -> CleanerConfig {
        self.config.read().clone()
    }

    /// New settings (dynamic broker configs): the I/O rate at once, the buffers from the
    /// next cleaning, a different thread count at the cleaner jobs' next turn (`jobs.rs`
    /// keeps jobs ready for up to double the count at startup).
    pub fn update_config(&self, config: CleanerConfig) {
        self.throttler.set_rate(config.io_max_bytes_per_second);
        *self.config.write() = config;
    }

    /// Stops cleaning: a cleaning in progress ends at its next batch, leaving its log as it
    /// was, and none starts again.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
    }

    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// The partitions the cleaner has given up on.
    pub fn uncleanable_partitions(&self) -> Vec<TopicPartition> {
        self.uncleanable.lock().iter().cloned().collect()
    }

    fn check_done(&self, log: &Log) -> Result<(), CleanError> {
        match self.is_stopped() || log.cleaning_aborted() || log.is_offline() {
            true => Err(CleanError::Aborted),
            false => Ok(()),
        }
    }

    fn throttle(&self, bytes: u64, log: &Log) {
        self.throttler
            .maybe_throttle(bytes, || self.is_stopped() || log.cleaning_aborted());
    }

    /// One cleaner thread's turn (Kafka's `cleanFilthiestLog`): cleans the compacted log
    /// with the highest dirty ratio among those due, if any and if no other thread holds
    /// it, then applies retention to the compacted logs that also have `delete`. Returns
    /// the log cleaned and what was done. Blocking.
    pub fn clean_filthiest(
        &self,
        logs: &[Candidate],
        now_ms: i64,
    ) -> Option<(TopicPartition, CleanSummary)> {
        if self.is_stopped() {
            return None;
        }
        let cleaned = self.clean_one(logs, now_ms);
        for c in logs.iter().filter(|c| {
            let policy = c.log.config().cleanup_policy;
            policy.compact && policy.delete && !c.log.is_offline()
        }) {
            // A log being cleaned has its retention applied once the cleaning is done.
            if let Some(_cleaning) = c.log.try_lock_cleaning() {
                if let Err(e) = c.log.delete_old_segments(now_ms, c.high_watermark) {
                    tracing::error!(partition = %c.log.topic_partition(), error = %e, "retention of a compacted log failed");
                }
            }
        }
        cleaned
    }

    fn clean_one(&self, logs: &[Candidate], now_ms: i64) -> Option<(TopicPartition, CleanSummary)> {
        let uncleanable = self.uncleanable.lock().clone();
        let mut due: Vec<(f64, &Candidate)> = logs
            .iter()
            .filter(|c| {
                c.log.config().cleanup_policy.compact
                    && !c.log.is_offline()
                    && !c.log.cleaning_aborted()
                    && !uncleanable.contains(c.log.topic_partition())
            })
            .filter_map(|c| {
                let p = plan(&c.log, c.high_watermark, now_ms)?;
                p.is_due(&c.log.config()).then(|| (p.cleanable_ratio(), c))
            })
            .collect();
        due.sort_by(|a, b| b.0.total_cmp(&a.0));
        for (_, c) in due {
            let Some(_cleaning) = c.log.try_lock_cleaning() else {
                continue;
            };
            // Planned again under the lock: another thread may have just cleaned it.
            let Some(p) = plan(&c.log, c.high_watermark, now_ms) else {
                continue;
            };
            if !p.is_due(&c.log.config()) {
                continue;
            }
            let tp = c.log.topic_partition().clone();
            return match clean::clean(self, &c.log, &p, now_ms) {
                Ok(summary) => {
                    log_summary(&tp, &summary);
                    *self.last.lock() = Some(summary.clone());
                    Some((tp, summary))
                }
                Err(CleanError::Aborted) => {
                    tracing::info!(partition = %tp, "cleaning aborted; the log is as it was");
                    None
                }
                Err(CleanError::Failed(e)) => {
                    self.failed(&c.log, e);
                    None
                }
            };
        }
        None
    }

    /// An I/O error takes the log dir offline (the log's own failure rule); anything else
    /// means a batch the cleaner cannot read, and the log is not cleaned again until
    /// restart.
    fn failed(&self, log: &Log, e: LogError) {
        let tp = log.topic_partition().clone();
        if let LogError::KafkaStorage(_) = e {
            let e = log.storage_failure("cleaning", e);
            tracing::error!(partition = %tp, error = %e, "cleaning failed");
            return;
        }
        tracing::error!(partition = %tp, error = %e, "cleaning failed; the log is not cleaned again until restart");
        self.uncleanable.lock().insert(tp);
    }
}

fn log_summary(tp: &TopicPartition, s: &CleanSummary) {
    let seconds = (s.elapsed_ms.max(1) as f64) / 1000.0;
    tracing::info!(
        partition = %tp,
        dirty = %format!("[{}, {})", s.first_dirty_offset, s.end_offset),
        segments = s.segments_cleaned,
        map_keys = s.map_keys,
        read_mb = s.bytes_read as f64 / 1e6,
        written_mb = s.bytes_written as f64 / 1e6,
        records_read = s.records_read,
        records_kept = s.records_kept,
        mb_per_sec = s.bytes_read as f64 / 1e6 / seconds,
        elapsed_ms = s.elapsed_ms,
        "cleaned log"
    );
}
