//! What the log cleaner needs of a `Log`: a view of its segments, the producers' last
//! offsets, the first dirty offset, and the crash-safe swap of cleaned segments (Kafka's
//! `LocalLog.replaceSegments`).
//!
//! The swap, under the log lock:
//! 1. the cleaned segment's files go from `.cleaned` to `.swap`, and the directory is
//!    fsynced: from here on a restart completes the swap (the loader renames `.swap` files
//!    into place and drops the segments they cover);
//! 2. the segments it replaces are renamed `.deleted` (removed after
//!    `file.delete.delay.ms`);
//! 3. the `.swap` files take their final names, and the directory is fsynced again.
//!
//! A crash before step 1 completes leaves `.cleaned` files (or `.swap` files beside a
//! `.cleaned` one), which the loader deletes: the old segments stay. Readers holding an old
//! segment's file keep reading it.

use std::collections::HashMap;
use std::fs::File;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::{now_ms, Log};
use crate::log::checkpoint::sync_dir;
use crate::log::faults::{self, Fault};
use crate::log::producer_state::{list_snapshots, LastRecord};
use crate::log::segment::{
    change_suffixes, with_suffix, LogSegment, CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX,
};
use crate::log::LogError;

/// A segment as the cleaner sees it. Only segments below the active one are cleaned, and
/// those never change in place: the file handle reads the same bytes for as long as the
/// view lives, even once the segment has left the log.
#[derive(Clone)]
pub struct SegmentView {
    pub base_offset: i64,
    pub size: u64,
    pub file: Arc<File>,
    /// The next segment's base offset, or the log end offset for the active segment.
    pub next_offset: i64,
    pub largest_timestamp: i64,
    /// Max timestamp of its first batch (where `max.compaction.lag.ms` counts from).
    pub first_batch_timestamp: Option<i64>,
    pub offset_index_bytes: u64,
    pub time_index_bytes: u64,
    pub last_modified: Option<std::time::SystemTime>,
    pub active: bool,
}

/// The cleaner's view of a log at one moment.
pub struct CleanerView {
    pub segments: Vec<SegmentView>,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
}

impl CleanerView {
    pub fn active_base(&self) -> i64 {
        self.segments
            .last()
            .map_or(self.log_end_offset, |s| s.base_offset)
    }

    /// Kafka's `logSegments(from, to)`: the segment holding `from` and every later one
    /// starting before `to`.
    pub fn segments_between(&self, from: i64, to: i64) -> impl Iterator<Item = &SegmentView> {
        self.segments
            .iter()
            .filter(move |s| s.next_offset > from && s.base_offset < to)
    }
}

impl Log {
    /// The segments as they are now.
    pub fn cleaner_view(&self) -> CleanerView {
        let inner = self.inner.lock();
        let log_end_offset = self.log_end_offset();
        let max_index = u64::from(self.config().max_index_size);
        let mut segments: Vec<SegmentView> = Vec::with_capacity(inner.segments.len());
        let mut it = inner.segments.values().peekable();
        while let Some(s) = it.next() {
            let next = it.peek().map(|n| n.base_offset());
            segments.push(SegmentView {
                base_offset: s.base_offset(),
                size: s.size(),
                file: s.log_file().clone(),
                next_offset: next.unwrap_or(log_end_offset),
                largest_timestamp: s.largest_timestamp(),
                first_batch_timestamp: s.first_batch_timestamp(),
                // An index that cannot be read counts as full, so the segment is cleaned
                // alone.
                offset_index_bytes: s
                    .offset_index()
                    .map_or(max_index, |i| i.entries() as u64 * 8),
                time_index_bytes: s
                    .time_index()
                    .map_or(max_index, |i| i.entries() as u64 * 12),
                last_modified: s.last_modified(),
                active: next.is_none(),
            });
        }
        CleanerView {
            segments,
            log_start_offset: self.log_start_offset(),
            log_end_offset,
        }
    }

    /// The last record of every producer in the producer state (Kafka's
    /// `lastRecordsOfActiveProducers`): the batch holding it keeps its header.
    pub fn producers_last_records(&self) -> HashMap<i64, LastRecord> {
        self.inner.lock().producer_state.last_records()
    }

    /// The first offset the cleaner may not compact (Kafka's `lastStableOffset`): the
    /// high watermark, or the first offset of the oldest open transaction if lower, so
    /// an open transaction's records are never compacted while it may still abort.
    pub fn last_stable_offset(&self, high_watermark: i64) -> i64 {
        self.first_unstable_offset()
            .map_or(high_watermark, |o| o.min(high_watermark))
    }

    /// Where the next cleaning starts (`cleaner-offset-checkpoint`); `None` before the
    /// first.
    pub fn cleaner_checkpoint(&self) -> Option<i64> {
        let offset = self.cleaner_checkpoint.load(Ordering::Acquire);
        (offset >= 0).then_some(offset)
    }

    pub fn set_cleaner_checkpoint(&self, offset: i64) {
        self.cleaner_checkpoint.store(offset, Ordering::Release);
    }

    /// The cleaner's hold on this log: held for a whole cleaning, so two cleaner threads
    /// never clean one log and retention waits or skips while it is cleaned. `None` when
    /// someone else holds it.
    pub fn try_lock_cleaning(&self) -> Option<parking_lot::MutexGuard<'_, ()>> {
        self.cleaning.try_lock()
    }

    /// Stops any cleaning of this log for good (the log is being deleted): a cleaning in
    /// progress stops at its next batch and this returns once it has.
    pub fn abort_cleaning(&self) {
        self.cleaning_aborted.store(true, Ordering::Release);
        drop(self.cleaning.lock());
    }

    pub fn cleaning_aborted(&self) -> bool {
        self.cleaning_aborted.load(Ordering::Acquire)
    }

    /// The log is leaving this broker: its directory is about to be renamed for deletion
    /// (a deleted topic, StopReplica with delete, a replica moved to another dir). Cleaning
    /// stops, and jobs that still hold the log (a retention check, a flush, a produce in
    /// flight) may fail on the directory's old path: those failures stay this log's and
    /// never take the log dir offline.
    pub fn retire(&self) {
        self.retired.store(true, Ordering::Release);
        self.abort_cleaning();
    }

    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Acquire)
    }

    /// Swaps `cleaned` (written as `.cleaned` files, flushed, its indexes trimmed) in for
    /// the segments `replaced`, as the module describes. Returns false, changing nothing,
    /// when one of them left the log since the cleaner saw it (retention or DeleteRecords
    /// got there first); the caller then deletes the `.cleaned` files.
    pub fn replace_segments(
        &self,
        cleaned: LogSegment,
        replaced: &[SegmentView],
    ) -> Result<bool, LogError> {
        let config = self.config();
        let base = cleaned.base_offset();
        let mut inner = self.inner.lock();
        let unchanged = replaced.iter().all(|old| {
            inner
                .segments
                .get(&old.base_offset)
                .is_some_and(|s| Arc::ptr_eq(s.log_file(), &old.file) && s.size() == old.size)
        });
        if !unchanged || replaced.first().map(|s| s.base_offset) != Some(base) {
            return Ok(false);
        }
        drop(cleaned);
        let swapped = (|| {
            faults::check(&self.dir, Fault::CleanerSwapStart)?;
            change_suffixes(&self.dir, base, CLEANED_SUFFIX, SWAP_SUFFIX)?;
            sync_dir(&self.dir)?;
            faults::check(&self.dir, Fault::CleanerSwapped)?;
            let mut deleted = Vec::new();
            for old in replaced {
                if let Some(segment) = inner.segments.remove(&old.base_offset) {
                    deleted.extend(segment.rename_to_deleted(&self.dir)?);
                }
            }
            // Producer snapshots at the bases of segments that no longer exist.
            let bases: Vec<i64> = replaced.iter().map(|s| s.base_offset).collect();
            for (offset, path) in list_snapshots(&self.dir)? {
                if offset != base && bases.contains(&offset) {
                    let target = with_suffix(&path, DELETED_SUFFIX);
                    std::fs::rename(&path, &target)?;
                    deleted.push(target);
                }
            }
            faults::check(&self.dir, Fault::CleanerOldDeleted)?;
            change_suffixes(&self.dir, base, SWAP_SUFFIX, "")?;
            sync_dir(&self.dir)?;
            let segment = LogSegment::open(&self.dir, base, &config, false, now_ms())?;
            inner.segments.insert(base, segment);
            Ok::<_, LogError>(deleted)
        })();
        self.publish_shape(&inner);
        let deleted = swapped.map_err(|e| self.on_failure("swapping in a cleaned segment", e))?;
        drop(inner);
        self.delayed_deletes
            .schedule(deleted, Duration::from_millis(config.file_delete_delay_ms));
        Ok(true)
    }
}

/// Deletes the files of a cleaned segment that was not swapped in.
pub fn delete_cleaned(dir: &std::path::Path, base_offset: i64) {
    for path in LogSegment::file_paths(dir, base_offset) {
        let _ = std::fs::remove_file(with_suffix(&path, CLEANED_SUFFIX));
    }
}

impl Log {
    /// The log's failure rule for an error the cleaner met (see `on_failure`).
    pub fn storage_failure(&self, what: &str, error: LogError) -> LogError {
        self.on_failure(what, error)
    }
}
