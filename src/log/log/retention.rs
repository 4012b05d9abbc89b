//! Retention: whole segments leave the log from its start, and the log start offset moves
//! (Kafka's `UnifiedLog.deleteOldSegments` and `maybeIncrementLogStartOffset`).
//!
//! A segment is deleted only when every offset in it is below the high watermark, so the
//! log start offset never passes it. Segments go in order from the oldest and stop at the
//! first one that must stay. When every segment qualifies, a new empty segment is rolled at
//! the log end first, so the log always has one and the active segment is never deleted
//! while it takes appends. A deleted segment's files are renamed `.deleted` under the
//! lock, and removed `file.delete.delay.ms` later (`DelayedDeletes`); a reader that planned
//! a read of it before holds the open file and finishes its read.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{Log, LogInner};
use crate::log::producer_state::list_snapshots;
use crate::log::segment::{LogSegment, DELETED_SUFFIX};
use crate::log::LogError;

/// Which limit segments were deleted for (Kafka's `SegmentDeletionReason`), for the log line.
#[derive(Clone, Copy, Debug)]
enum Reason {
    LogStartOffset,
    RetentionSize,
    RetentionMs,
}

impl Log {
    /// Kafka's `deleteOldSegments`: segments wholly below the log start offset go; with
    /// `cleanup.policy` including `delete`, so do the oldest segments while the log is larger
    /// than `retention.bytes`, and those whose largest timestamp is more than `retention.ms`
    /// before `now_ms`. Returns how many segments were deleted. Blocking.
    pub fn delete_old_segments(&self, now_ms: i64, high_watermark: i64) -> Result<usize, LogError> {
        self.check_online()?;
        let config = self.config();
        let mut deleted = self.delete_segments_below_log_start(now_ms, high_watermark)?;
        if !config.cleanup_policy.delete {
            return Ok(deleted);
        }
        let size = self.size_bytes() as i64;
        if config.retention_bytes >= 0 && size >= config.retention_bytes {
            let mut excess = size - config.retention_bytes;
            deleted += self.delete_segments_where(
                high_watermark,
                now_ms,
                Reason::RetentionSize,
                |segment, _, _| {
                    let segment_size = segment.size() as i64;
                    let delete = excess - segment_size >= 0;
                    if delete {
                        excess -= segment_size;
                    }
                    delete
                },
            )?;
        }
        if config.retention_ms >= 0 {
            deleted += self.delete_segments_where(
                high_watermark,
                now_ms,
                Reason::RetentionMs,
                |segment, _, _| {
                    now_ms.saturating_sub(segment.largest_timestamp()) > config.retention_ms
                },
            )?;
        }
        Ok(deleted)
    }

    /// DeleteRecords (Kafka's `deleteRecordsOnLeader`): moves the log start offset up to
    /// `offset`, which may not pass the high watermark, and deletes the segments now wholly
    /// below it. Returns the log start offset after the call (the low watermark). Blocking.
    pub fn delete_records_before(
        &self,
        offset: i64,
        high_watermark: i64,
        now_ms: i64,
    ) -> Result<i64, LogError> {
        self.check_online()?;
        if offset < 0 || offset > high_watermark {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start: self.log_start_offset(),
                log_end: high_watermark,
            });
        }
        {
            let mut inner = self.inner.lock();
            self.increment_log_start_offset(&mut inner, offset)
                .map_err(|e| self.on_failure("moving the log start offset", e))?;
        }
        self.delete_segments_below_log_start(now_ms, high_watermark)?;
        Ok(self.log_start_offset())
    }

    /// Rolls the active segment once `segment.ms` (for a compacted log also
    /// `max.compaction.lag.ms`) has passed since its first batch, as the next append would.
    /// Kafka rolls only on an append; the retention check does it for an idle partition
    /// too, so its last records can be cleaned, and deleted by time without waiting for
    /// every segment to expire. Returns whether it rolled. Blocking.
    pub fn roll_if_idle(&self, now_ms: i64) -> Result<bool, LogError> {
        self.check_online()?;
        let config = self.config();
        let roll = {
            let mut inner = self.inner.lock();
            let log_end = self.log_end_offset();
            let active = inner.active()?;
            if active.size() == 0 || !active.should_roll(&config, 0, now_ms, log_end - 1, now_ms) {
                return Ok(false);
            }
            self.roll_at(&mut inner, &config, log_end, now_ms)
                .map_err(|e| self.on_failure("rolling an idle segment", e))?
        };
        self.after_roll(roll)?;
        Ok(true)
    }

    fn delete_segments_below_log_start(
        &self,
        now_ms: i64,
        high_watermark: i64,
    ) -> Result<usize, LogError> {
        self.delete_segments_where(
            high_watermark,
            now_ms,
            Reason::LogStartOffset,
            |_, next, log_start| next.is_some_and(|n| n.base_offset() <= log_start),
        )
    }

    /// Deletes segments from the oldest while `predicate(segment, next segment, log start)`
    /// holds (Kafka's `deletableSegments` + `deleteSegments`).
    fn delete_segments_where(
        &self,
        high_watermark: i64,
        now_ms: i64,
        reason: Reason,
        mut predicate: impl FnMut(&LogSegment, Option<&LogSegment>, i64) -> bool,
    ) -> Result<usize, LogError> {
        let config = self.config();
        let (paths, roll, count) = {
            let mut inner = self.inner.lock();
            let bases = self.deletable_segments(&inner, high_watermark, &mut predicate);
            if bases.is_empty() {
                return Ok(0);
            }
            let roll = match bases.len() == inner.segments.len() {
                true => Some(
                    self.roll_at(&mut inner, &config, self.log_end_offset(), now_ms)
                        .map_err(|e| self.on_failure("rolling before deleting every segment", e))?,
                ),
                false => None,
            };
            let paths = self
                .remove_segments(&mut inner, &bases)
                .map_err(|e| self.on_failure("deleting segments", e))?;
            (paths, roll, bases.len())
        };
        tracing::info!(
            partition = %self.topic_partition,
            reason = ?reason,
            segments = count,
            log_start_offset = self.log_start_offset(),
            delay_ms = config.file_delete_delay_ms,
            "deleting segments"
        );
        self.delayed_deletes
            .schedule(paths, Duration::from_millis(config.file_delete_delay_ms));
        if let Some(roll) = roll {
            self.after_roll(roll)?;
        }
        Ok(count)
    }

    /// The base offsets of the segments to delete: from the oldest, while the predicate
    /// holds, each wholly below the high watermark; never a last segment that is empty.
    fn deletable_segments(
        &self,
        inner: &LogInner,
        high_watermark: i64,
        predicate: &mut impl FnMut(&LogSegment, Option<&LogSegment>, i64) -> bool,
    ) -> Vec<i64> {
        let (log_start, log_end) = (self.log_start_offset(), self.log_end_offset());
        let mut deletable = Vec::new();
        let mut segments = inner.segments.values().peekable();
        while let Some(segment) = segments.next() {
            let next = segments.peek().copied();
            let upper_bound = next.map_or(log_end, LogSegment::base_offset);
            let last_and_empty = next.is_none() && segment.size() == 0;
            if high_watermark < upper_bound
                || last_and_empty
                || !predicate(segment, next, log_start)
            {
                break;
            }
            deletable.push(segment.base_offset());
        }
        deletable
    }

    /// Takes the segments at `bases` (the oldest ones, not all) out of the log: the log
    /// start offset moves to the first segment left, then their files and the producer
    /// snapshots below it are renamed `.deleted`. Returns the renamed paths.
    fn remove_segments(
        &self,
        inner: &mut LogInner,
        bases: &[i64],
    ) -> Result<Vec<PathBuf>, LogError> {
        let last = bases.last().copied().unwrap_or(i64::MIN);
        let first_kept = inner
            .segments
            .range(last + 1..)
            .next()
            .map(|(&base, _)| base)
            .ok_or_else(|| LogError::corrupt_file(&self.dir, "no segment left after deletion"))?;
        self.increment_log_start_offset(inner, first_kept)?;
        let mut paths = Vec::new();
        for base in bases {
            if let Some(segment) = inner.segments.remove(base) {
                self.publish_shape(inner);
                paths.extend(segment.rename_to_deleted(&self.dir)?);
            }
        }
        for (offset, path) in list_snapshots(&self.dir)? {
            if offset < first_kept {
                let mut deleted = path.clone().into_os_string();
                deleted.push(DELETED_SUFFIX);
                std::fs::rename(&path, &deleted)?;
                paths.push(PathBuf::from(deleted));
            }
        }
        self.dir_dirty.store(true, Ordering::Release);
        Ok(paths)
    }

    /// Kafka's `maybeIncrementLogStartOffset`: a later log start offset is published, the
    /// recovery point follows it, and leader epochs wholly below it are dropped.
    fn increment_log_start_offset(
        &self,
        inner: &mut LogInner,
        new_log_start: i64,
    ) -> Result<bool, LogError> {
        if new_log_start <= self.log_start_offset() {
            return Ok(false);
        }
        self.log_start_offset
            .store(new_log_start, Ordering::Release);
        self.recovery_point
            .fetch_max(new_log_start, Ordering::AcqRel);
        inner
            .leader_epoch_cache
            .truncate_from_start(new_log_start)?;
        tracing::info!(partition = %self.topic_partition, log_start_offset = new_log_start, "incremented log start offset");
        Ok(true)
    }
}

#[cfg(test)]
#[path = "retention_tests.rs"]
mod tests;
