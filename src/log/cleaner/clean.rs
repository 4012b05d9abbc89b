//! Cleaning one log (Kafka's `LogCleanerManager.cleanableOffsets` and `Cleaner.doClean`).
//!
//! The dirty section runs from the first dirty offset (`cleaner-offset-checkpoint`, or the
//! log start) to the first uncleanable offset: the last stable offset (the high watermark,
//! or the first offset of the oldest open transaction), the active segment, or the first
//! segment whose records are younger than `min.compaction.lag.ms`, whichever comes first.
//! Every transaction below it has ended, so its records are compacted (committed) or
//! removed (aborted), see `txn`. The offset map takes the latest offset of each key in the
//! dirty section, as far as it has room; every segment below where the map ended is then
//! rewritten, in groups that fit one segment, keeping what the map says is latest (see
//! `filter`), and swapped in by `Log::replace_segments`. The next cleaning starts where
//! the map ended.

use std::sync::Arc;
use std::time::Instant;

use super::filter::{filter_batch, Outcome, Round};
use super::offset_map::OffsetMap;
use super::reader::BatchReader;
use super::txn::TxnTracker;
use super::{CleanSummary, CleanerConfig, LogCleaner};
use crate::log::records::{Keep, RecordWalk};
use crate::log::segment::LogSegment;
use crate::log::{delete_cleaned, CleanerView, Log, LogConfig, LogError, SegmentView};

/// A log that may be cleaned, and how dirty it is (Kafka's `LogToClean`).
pub struct ToClean {
    pub view: CleanerView,
    pub first_dirty_offset: i64,
    /// Where this round stops: nothing at or past it is compacted.
    pub first_uncleanable_offset: i64,
    pub clean_bytes: u64,
    pub cleanable_bytes: u64,
    /// `max.compaction.lag.ms` has passed for a dirty record.
    pub needs_compaction_now: bool,
}

impl ToClean {
    pub fn cleanable_ratio(&self) -> f64 {
        let total = self.clean_bytes + self.cleanable_bytes;
        match total {
            0 => 0.0,
            _ => self.cleanable_bytes as f64 / total as f64,
        }
    }

    /// Dirty enough to clean now: past `min.cleanable.dirty.ratio`, or holding a record
    /// older than `max.compaction.lag.ms`.
    pub fn is_due(&self, config: &LogConfig) -> bool {
        (self.needs_compaction_now && self.cleanable_bytes > 0)
            || self.cleanable_ratio() > config.min_cleanable_dirty_ratio
    }
}

/// Kafka's `cleanableOffsets` and `calculateCleanableBytes`.
pub fn plan(log: &Log, high_watermark: i64, now_ms: i64) -> Option<ToClean> {
    let config = log.config();
    let view = log.cleaner_view();
    let first_dirty_offset = match log.cleaner_checkpoint() {
        Some(o) if o >= view.log_start_offset && o <= view.log_end_offset => o,
        _ => view.log_start_offset,
    };
    let dirty_non_active = || {
        view.segments_between(first_dirty_offset, i64::MAX)
            .filter(|s| !s.active)
    };
    // An open transaction's records may still abort: nothing from its first offset on is
    // compacted (Kafka cleans below the last stable offset).
    let mut uncleanable = log
        .last_stable_offset(high_watermark)
        .min(view.active_base());
    if config.min_compaction_lag_ms > 0 {
        let young = dirty_non_active()
            .find(|s| s.largest_timestamp > now_ms.saturating_sub(config.min_compaction_lag_ms));
        if let Some(s) = young {
            uncleanable = uncleanable.min(s.base_offset);
        }
    }
    let uncleanable = uncleanable.max(first_dirty_offset);
    // The segment holding the first uncleanable offset (or the active one) and everything
    // after it stays as it is.
    let first_uncleanable_segment = view
        .segments_between(uncleanable, i64::MAX)
        .find(|s| !s.active)
        .map_or(view.active_base(), |s| s.base_offset);
    let clean_bytes = view
        .segments_between(i64::MIN, first_dirty_offset)
        .map(|s| s.size)
        .sum();
    let cleanable_bytes = view
        .segments_between(
            first_dirty_offset.min(first_uncleanable_segment),
            first_uncleanable_segment,
        )
        .map(|s| s.size)
        .sum();
    let max_lag = config.max_compaction_lag_ms.max(0);
    let earliest_dirty = dirty_non_active()
        .filter_map(|s| s.first_batch_timestamp)
        .filter(|&t| t > 0)
        .min();
    let needs_compaction_now = earliest_dirty.is_some_and(|t| t < now_ms.saturating_sub(max_lag));
    let plan = ToClean {
        first_dirty_offset,
        first_uncleanable_offset: first_uncleanable_segment,
        clean_bytes,
        cleanable_bytes,
        needs_compaction_now,
        view,
    };
    (plan.clean_bytes + plan.cleanable_bytes > 0).then_some(plan)
}

/// What went wrong in a cleaning round.
pub enum CleanError {
    /// The log changed under the cleaner, or it was asked to stop: nothing was lost, the
    /// round can be tried again.
    Aborted,
    Failed(LogError),
}

impl From<LogError> for CleanError {
    fn from(e: LogError) -> Self {
        CleanError::Failed(e)
    }
}

impl From<std::io::Error> for CleanError {
    fn from(e: std::io::Error) -> Self {
        CleanError::Failed(e.into())
    }
}

/// Cleans `plan`'s dirty section (Kafka's `doClean`). Returns what it did; the caller
/// holds the log's cleaning lock.
pub fn clean(
    cleaner: &LogCleaner,
    log: &Arc<Log>,
    plan: &ToClean,
    now_ms: i64,
) -> Result<CleanSummary, CleanError> {
    let started = Instant::now();
    let config = log.config();
    let cleaner_config = cleaner.config();
    let mut summary = CleanSummary {
        first_dirty_offset: plan.first_dirty_offset,
        ..CleanSummary::default()
    };
    let mut map = OffsetMap::new(
        cleaner_config.offset_map_bytes(),
        cleaner_config.io_buffer_load_factor,
    );
    build_offset_map(cleaner, log, plan, &mut map, &mut summary)?;
    let end_offset = map.latest_offset() + 1;
    if end_offset <= plan.first_dirty_offset {
        if map.is_full() {
            return Err(CleanError::Failed(LogError::CorruptMessage(format!(
                "the offset map ({} keys, log.cleaner.dedupe.buffer.size) holds no whole batch of the dirty section",
                map.capacity()
            ))));
        }
        return Ok(summary);
    }
    summary.end_offset = end_offset;
    summary.map_keys = map.len() as u64;
    summary.map_slots = map.slots() as u64;
    summary.map_ms = started.elapsed().as_millis() as u64;
    let producers = log.producers_last_records();
    let to_clean: Vec<SegmentView> = plan
        .view
        .segments
        .iter()
        .filter(|s| s.base_offset < end_offset && !s.active)
        .cloned()
        .collect();
    // The aborts a cleaned batch may belong to, wherever their markers are; one pass
    // over every group in offset order follows the transactions (Kafka's
    // `CleanedTransactionMetadata` of a round).
    let from = to_clean.first().map_or(end_offset, |s| s.base_offset);
    let mut txns = TxnTracker::new(log.aborted_txns(from, plan.first_uncleanable_offset));
    let round = Round {
        map: &map,
        now_ms,
        delete_retention_ms: config.delete_retention_ms,
        producers_last_records: &producers,
        upper_bound_offset: plan.first_uncleanable_offset,
    };
    for group in group_by_size(&to_clean, &config, plan.first_uncleanable_offset) {
        let pass = Pass {
            round: &round,
            config: &cleaner_config,
        };
        clean_group(cleaner, log, &group, &pass, &mut txns, &mut summary)?;
    }
    log.set_cleaner_checkpoint(end_offset);
    summary.elapsed_ms = started.elapsed().as_millis() as u64;
    Ok(summary)
}

/// Kafka's `buildOffsetMap`: the keys of the dirty section, from its first offset, until
/// the map is full.
fn build_offset_map(
    cleaner: &LogCleaner,
    log: &Log,
    plan: &ToClean,
    map: &mut OffsetMap,
    summary: &mut CleanSummary,
) -> Result<(), CleanError> {
    let start = plan.first_dirty_offset;
    let end = plan.first_uncleanable_offset;
    let config = cleaner.config();
    let max_batch = log.config().max_message_bytes as usize;
    // Aborted transactions' keys stay out of the map: a record they overwrote is still
    // the latest that counts.
    let mut txns = TxnTracker::new(log.aborted_txns(start, end));
    for segment in plan.view.segments_between(start, end) {
        let mut reader = BatchReader::new(
            &segment.file,
            segment.size,
            config.io_buffer_size,
            max_batch,
        );
        loop {
            cleaner.check_done(log)?;
            let next = reader.next_batch(|n| cleaner.throttle(n, log))?;
            let Some((_, header, batch)) = next else {
                break;
            };
            summary.bytes_read += batch.len() as u64;
            if header.last_offset() < start {
                continue;
            }
            let skip = match header.is_control() {
                true => {
                    txns.on_control(&header, batch)?;
                    true
                }
                false => txns.on_batch(&header),
            };
            if !skip {
                let mut walk = RecordWalk::open(batch, None)?;
                while let Some(record) = walk.next(Keep::Key)? {
                    let Some(key) = record.key else {
                        continue;
                    };
                    if record.offset >= start && !map.put(&key, record.offset) {
                        return Ok(());
                    }
                }
            }
            map.update_latest_offset(header.last_offset());
        }
        // Offsets the segment skips (compacted before) are covered too.
        map.update_latest_offset(segment.next_offset.min(end) - 1);
    }
    Ok(())
}

/// Kafka's `groupSegmentsBySize`: consecutive segments whose data and indexes fit one
/// segment, and whose offsets fit the first one's relative range.
fn group_by_size(
    segments: &[SegmentView],
    config: &LogConfig,
    first_uncleanable_offset: i64,
) -> Vec<Vec<SegmentView>> {
    let max_index = u64::from(config.max_index_size);
    let mut groups = Vec::new();
    let mut rest = segments;
    while let Some((first, tail)) = rest.split_first() {
        let mut group = vec![first.clone()];
        let (mut log_size, mut index, mut time_index) =
            (first.size, first.offset_index_bytes, first.time_index_bytes);
        rest = tail;
        while let Some((next, tail)) = rest.split_first() {
            let last_offset = match tail.first() {
                Some(after) => after.base_offset - 1,
                None => first_uncleanable_offset - 1,
            };
            let fits = log_size + next.size <= config.segment_bytes
                && index + next.offset_index_bytes <= max_index
                && time_index + next.time_index_bytes <= max_index
                && (next.size == 0 || last_offset - first.base_offset <= i64::from(i32::MAX));
            if !fits {
                break;
            }
            log_size += next.size;
            index += next.offset_index_bytes;
            time_index += next.time_index_bytes;
            group.push(next.clone());
            rest = tail;
        }
        groups.push(group);
    }
    groups
}

/// Batches kept so far, written to the cleaned segment one buffer at a time (an index
/// entry per write, as Kafka's cleaner appends).
struct Pending {
    bytes: Vec<u8>,
    last_offset: i64,
    max_timestamp: i64,
    offset_of_max_timestamp: i64,
}

impl Pending {
    fn push(&mut self, batch: &[u8], last_offset: i64, max_timestamp: i64) {
        self.bytes.extend_from_slice(batch);
        self.last_offset = last_offset;
        if max_timestamp > self.max_timestamp {
            (self.max_timestamp, self.offset_of_max_timestamp) = (max_timestamp, last_offset);
        }
    }

    fn write_to(&mut self, segment: &mut LogSegment) -> Result<u64, LogError> {
        if self.bytes.is_empty() {
            return Ok(0);
        }
        segment.append(
            self.last_offset,
            self.max_timestamp,
            self.offset_of_max_timestamp,
            &self.bytes,
        )?;
        let written = self.bytes.len() as u64;
        self.bytes.clear();
        self.max_timestamp = -1;
        Ok(written)
    }
}

/// What every group of a round is cleaned with.
struct Pass<'a> {
    round: &'a Round<'a>,
    config: &'a CleanerConfig,
}

/// Kafka's `cleanSegments`: one group into one `.cleaned` segment, swapped in.
fn clean_group(
    cleaner: &LogCleaner,
    log: &Log,
    group: &[SegmentView],
    pass: &Pass<'_>,
    txns: &mut TxnTracker,
    summary: &mut CleanSummary,
) -> Result<(), CleanError> {
    let config = log.config();
    let base = group[0].base_offset;
    let mut cleaned = LogSegment::create_cleaned(log.dir(), base, &config, pass.round.now_ms)?;
    let written = write_group(cleaner, log, group, pass, txns, &mut cleaned, summary);
    let swapped = written.and_then(|()| {
        cleaned.on_become_inactive()?;
        cleaned.flush()?;
        if let Some(modified) = group.last().and_then(|s| s.last_modified) {
            cleaned.set_last_modified(modified)?;
        }
        Ok(log.replace_segments(cleaned, group)?)
    });
    match swapped {
        Ok(true) => {
            summary.segments_cleaned += group.len() as u64;
            Ok(())
        }
        Ok(false) => {
            delete_cleaned(log.dir(), base);
            Err(CleanError::Aborted)
        }
        Err(e) => {
            delete_cleaned(log.dir(), base);
            Err(e)
        }
    }
}

fn write_group(
    cleaner: &LogCleaner,
    log: &Log,
    group: &[SegmentView],
    pass: &Pass<'_>,
    txns: &mut TxnTracker,
    cleaned: &mut LogSegment,
    summary: &mut CleanSummary,
) -> Result<(), CleanError> {
    let cleaner_config = pass.config;
    let max_batch = log.config().max_message_bytes as usize;
    let mut pending = Pending {
        bytes: Vec::with_capacity(cleaner_config.io_buffer_size),
        last_offset: -1,
        max_timestamp: -1,
        offset_of_max_timestamp: -1,
    };
    for segment in group {
        let mut reader = BatchReader::new(
            &segment.file,
            segment.size,
            cleaner_config.io_buffer_size,
            max_batch,
        );
        loop {
            cleaner.check_done(log)?;
            let next = reader.next_batch(|n| cleaner.throttle(n, log))?;
            let Some((_, header, batch)) = next else {
                break;
            };
            summary.bytes_read += batch.len() as u64;
            let filtered = filter_batch(batch, pass.round, txns)?;
            summary.records_read += filtered.records_read;
            summary.records_kept += filtered.records_kept;
            // An abort marker kept for its transaction's batches keeps its index entry.
            if let Some(txn) = filtered.aborted_txn {
                cleaned.append_aborted_txn(txn)?;
            }
            match &filtered.outcome {
                Outcome::Whole => pending.push(batch, header.last_offset(), filtered.max_timestamp),
                Outcome::Rebuilt(bytes) => {
                    pending.push(bytes, header.last_offset(), filtered.max_timestamp)
                }
                Outcome::Dropped => {}
            }
            if pending.bytes.len() >= cleaner_config.io_buffer_size {
                let n = pending.write_to(cleaned)?;
                summary.bytes_written += n;
                cleaner.throttle(n, log);
            }
        }
    }
    let n = pending.write_to(cleaned)?;
    summary.bytes_written += n;
    Ok(())
}

#[cfg(test)]
#[path = "clean_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "clean_txn_tests.rs"]
mod txn_tests;
