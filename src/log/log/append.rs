//! Appending to a `Log`: one core shared by leader and follower appends.
//!
//! Both paths come down to the same steps, in this order:
//! 1. validate the batches (outside the lock);
//! 2. under the lock: find duplicates (leader), assign offsets (leader) or check them
//!    (follower), and stage producer state without changing it;
//! 3. roll the segment if needed;
//! 4. write the bytes to the active segment and update its indexes;
//! 5. record new leader epochs in the epoch cache (a checkpoint write);
//! 6. commit the staged producer state and publish the new log end offset.
//!
//! Nothing before step 6 is visible to readers: they read below the published log end
//! offset. A failure in steps 4–5 cuts the segment back to where the append began, so
//! the bytes of an append that was not acknowledged are never read, never survive a
//! restart, and their offsets go to the next append instead. A failure that leaves the
//! log in doubt (an I/O error other than running out of file descriptors, or a rollback
//! that fails) takes the log dir offline.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use parking_lot::MutexGuard;

use super::retried_batches::find_retried_batch;
use super::{now_ms, Log, LogInner, PendingSnapshot};
use crate::log::append_bytes::AppendBytes;
use crate::log::batch::{self, RecordBatchHeader, MAGIC_V2};
use crate::log::control::{self, EndTxnMarker, TxnResult};
use crate::log::log_dir_health::is_fd_exhaustion;
use crate::log::producer_state::{AppendOrigin, StagedProducers};
use crate::log::txn_index::AbortedTxn;
use crate::log::validation::validate_records;
use crate::log::{AppendInfo, LogConfig, LogError};

/// An append ready for the segment: batches with their final offsets, and what the log's
/// caches learn from them once they are written.
struct PendingAppend {
    records: AppendBytes,
    first_offset: i64,
    /// The log end offset after the append.
    next_offset: i64,
    max_timestamp: i64,
    offset_of_max_timestamp: i64,
    records_count: u64,
    /// `(epoch, start offset)` for each leader epoch these batches begin.
    epochs: Vec<(i32, i64)>,
    producers: StagedProducers,
    /// Transactions these batches abort, for the active segment's `.txnindex`.
    aborted: Vec<AbortedTxn>,
}

impl Log {
    /// Appends a producer's records (see the module contract): validate, detect duplicates,
    /// check producer state, assign offsets in the batch header (patched apart from
    /// the records, which are written from the request's buffer), then the shared core.
    ///
    /// Durability: the bytes are in the page cache when this returns. When
    /// `flush_interval_messages` is reached (`flush_needed()`), the caller calls
    /// `flush_to(info.last_offset + 1)` in `spawn_blocking` before acknowledging; concurrent
    /// producers then share one fsync. A duplicate is acknowledged with its original
    /// offsets; the caller makes sure those are durable too (`flush_to`).
    pub fn append_as_leader(
        &self,
        records: Bytes,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendInfo, LogError> {
        self.append_with_origin(records, leader_epoch, now_ms, AppendOrigin::Client)
    }

    /// `append_as_leader` for a coordinator writing its own internal topic (Kafka's
    /// origin `COORDINATOR`): a transactional offset commit carries the producer's id and
    /// epoch but no sequence, so the epoch is checked and sequences and duplicates are
    /// not.
    pub fn append_as_coordinator(
        &self,
        records: Bytes,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendInfo, LogError> {
        self.append_with_origin(records, leader_epoch, now_ms, AppendOrigin::Coordinator)
    }

    fn append_with_origin(
        &self,
        records: Bytes,
        leader_epoch: i32,
        now_ms: i64,
        origin: AppendOrigin,
    ) -> Result<AppendInfo, LogError> {
        self.check_online()?;
        let config = self.config();
        let validated = validate_records(records, &config, now_ms, &self.topic_partition)?;
        if validated.bytes.len() as u64 > config.segment_bytes {
            return Err(LogError::RecordListTooLarge);
        }
        let inner = self.inner.lock();
        let log_start_offset = self.log_start_offset();
        let producer_id = validated.header.producer_id();
        if producer_id >= 0 && origin != AppendOrigin::Coordinator {
            // The last five batches first, as Kafka; then, for a retry of an older one,
            // the log (`retried_batches`).
            let duplicate = match inner.producer_state.find_duplicate(&validated.header) {
                Some(dup) => Some(dup),
                None => find_retried_batch(&inner, &validated.header, log_start_offset)?,
            };
            if let Some(dup) = duplicate {
                return Ok(AppendInfo {
                    first_offset: dup.first_offset,
                    last_offset: dup.last_offset,
                    log_append_time: -1,
                    log_start_offset,
                    duplicate: true,
                });
            }
        }
        let first_offset = self.log_end_offset();
        let mut bytes = validated.bytes;
        let (head, _) = bytes.header_mut();
        batch::set_base_offset(head, first_offset);
        batch::set_partition_leader_epoch(head, leader_epoch);
        let header = RecordBatchHeader::parse(bytes.header())?;
        let mut pending = PendingAppend {
            records: bytes,
            first_offset,
            next_offset: first_offset,
            max_timestamp: -1,
            offset_of_max_timestamp: first_offset,
            records_count: validated.records_count,
            epochs: Vec::new(),
            producers: StagedProducers::new(),
            aborted: Vec::new(),
        };
        if leader_epoch >= 0 {
            pending.epochs.push((leader_epoch, first_offset));
        }
        if header.producer_id() >= 0 {
            inner
                .producer_state
                .stage(&mut pending.producers, &header, origin)?;
        }
        pending.note_batch(&header);
        let (first_offset, last_offset) = self.append_core(inner, &config, pending, now_ms)?;
        Ok(AppendInfo {
            first_offset,
            last_offset,
            log_append_time: validated.log_append_time,
            log_start_offset,
            duplicate: false,
        })
    }

    /// Appends batches that already carry offsets (a follower copying its leader). Each
    /// batch must be sound (length, magic, CRC) and start at or after the previous one's
    /// end, the first at or after the log end offset.
    pub fn append_as_follower(&self, records: Bytes) -> Result<AppendInfo, LogError> {
        self.check_online()?;
        let config = self.config();
        let batches = check_follower_batches(&records, self.log_end_offset())?;
        let inner = self.inner.lock();
        let log_start_offset = self.log_start_offset();
        let log_end_offset = self.log_end_offset();
        let Some((_, first)) = batches.first() else {
            return Ok(AppendInfo {
                first_offset: log_end_offset,
                last_offset: log_end_offset - 1,
                log_append_time: -1,
                log_start_offset,
                duplicate: false,
            });
        };
        if first.base_offset() < log_end_offset {
            return Err(LogError::InvalidRecord(
                "append below the log end offset".into(),
            ));
        }
        let mut pending = PendingAppend {
            records: AppendBytes::whole(records.clone()),
            first_offset: first.base_offset(),
            next_offset: first.base_offset(),
            max_timestamp: -1,
            offset_of_max_timestamp: first.base_offset(),
            records_count: 0,
            epochs: Vec::new(),
            producers: StagedProducers::new(),
            aborted: Vec::new(),
        };
        for (position, h) in &batches {
            let epoch = h.partition_leader_epoch();
            if epoch >= 0 && pending.epochs.last().is_none_or(|&(e, _)| e < epoch) {
                pending.epochs.push((epoch, h.base_offset()));
            }
            let ended = inner.producer_state.stage_replay(&mut pending.producers, h);
            if let Some(first_offset) = ended {
                let raw = &records[*position..*position + h.size_in_bytes()];
                if let Some(marker) = control::read_marker(raw)? {
                    pending.note_end(&inner, h, first_offset, marker);
                }
            }
            pending.records_count += h.records_count().max(0) as u64;
            pending.note_batch(h);
        }
        let (first_offset, last_offset) = self.append_core(inner, &config, pending, now_ms())?;
        Ok(AppendInfo {
            first_offset,
            last_offset,
            log_append_time: -1,
            log_start_offset,
            duplicate: false,
        })
    }

    /// Appends a transaction marker as the transaction coordinator's WriteTxnMarkers asks
    /// (Kafka's append with origin Coordinator): it ends `producer_id`'s open
    /// transaction here, and an abort is recorded in the active segment's `.txnindex`.
    /// An older producer epoch is INVALID_PRODUCER_EPOCH, an older coordinator epoch
    /// TRANSACTION_COORDINATOR_FENCED.
    pub fn append_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        marker: EndTxnMarker,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendInfo, LogError> {
        self.check_online()?;
        let config = self.config();
        let mut bytes = AppendBytes::with_header(control::marker_batch(
            producer_id,
            producer_epoch,
            marker,
            now_ms,
        ));
        let inner = self.inner.lock();
        let log_start_offset = self.log_start_offset();
        let first_offset = self.log_end_offset();
        let (head, _) = bytes.header_mut();
        batch::set_base_offset(head, first_offset);
        batch::set_partition_leader_epoch(head, leader_epoch);
        let header = RecordBatchHeader::parse(bytes.header())?;
        let mut pending = PendingAppend {
            records: bytes,
            first_offset,
            next_offset: first_offset,
            max_timestamp: -1,
            offset_of_max_timestamp: first_offset,
            records_count: 1,
            epochs: Vec::new(),
            producers: StagedProducers::new(),
            aborted: Vec::new(),
        };
        if leader_epoch >= 0 {
            pending.epochs.push((leader_epoch, first_offset));
        }
        let ended = inner
            .producer_state
            .stage_marker(&mut pending.producers, &header, marker)?;
        if let Some(txn_first) = ended {
            pending.note_end(&inner, &header, txn_first, marker);
        }
        pending.note_batch(&header);
        let (first_offset, last_offset) = self.append_core(inner, &config, pending, now_ms)?;
        Ok(AppendInfo {
            first_offset,
            last_offset,
            log_append_time: -1,
            log_start_offset,
            duplicate: false,
        })
    }

    /// Steps 3–6 of the module contract; releases the lock before flushing a rolled
    /// segment and writing its producer snapshot. Returns the first and last offsets.
    fn append_core(
        &self,
        mut inner: MutexGuard<'_, LogInner>,
        config: &LogConfig,
        pending: PendingAppend,
        now_ms: i64,
    ) -> Result<(i64, i64), LogError> {
        let last_offset = pending.next_offset - 1;
        // Offsets only grow: an append starts at the log end or past it (a follower's
        // compacted batch may skip offsets) and holds at least one offset.
        debug_assert!(
            pending.first_offset >= self.log_end_offset(),
            "append at {} below the log end {}",
            pending.first_offset,
            self.log_end_offset()
        );
        debug_assert!(last_offset >= pending.first_offset);
        let rolled = self
            .roll_if_needed(
                &mut inner,
                config,
                pending.records.len() as u64,
                pending.max_timestamp,
                last_offset,
                pending.first_offset,
                now_ms,
            )
            .map_err(|e| self.on_failure("roll a new segment", e))?;
        if let Err(e) = self.write_and_index(&mut inner, &pending) {
            let error = self.roll_back(&mut inner, pending.first_offset, e);
            self.publish_shape(&inner);
            return Err(error);
        }
        // The roll, if any, published the segments before these bytes.
        self.published_size_bytes
            .fetch_add(pending.records.len() as u64, Ordering::Relaxed);
        inner
            .producer_state
            .commit(pending.producers, pending.next_offset);
        self.publish_first_unstable_offset(&inner);
        self.log_end_offset
            .store(pending.next_offset, Ordering::Release);
        self.unflushed_messages
            .fetch_add(pending.records_count, Ordering::AcqRel);
        drop(inner);
        if let Some(roll) = rolled {
            // The append itself is complete and published; what is left is the rolled
            // segment's (Kafka does it in the background), and a failure in it has already
            // taken the dir offline if it was an I/O error.
            let mut pending_roll = self.pending_roll.lock();
            if pending_roll.as_ref().is_none_or(|p| p.offset < roll.offset) {
                *pending_roll = Some(roll);
            }
            drop(pending_roll);
            if !self.defer_roll_work.load(Ordering::Acquire) {
                self.complete_roll();
            }
        }
        Ok((pending.first_offset, last_offset))
    }

    /// Steps 4 and 5: the bytes into the active segment with its indexes, then the epochs.
    fn write_and_index(
        &self,
        inner: &mut LogInner,
        pending: &PendingAppend,
    ) -> Result<(), LogError> {
        let active = inner.active()?;
        active.append_parts(
            pending.next_offset - 1,
            pending.max_timestamp,
            pending.offset_of_max_timestamp,
            pending.records.parts(),
        )?;
        for &txn in &pending.aborted {
            active.append_aborted_txn(txn)?;
        }
        for &(epoch, start_offset) in &pending.epochs {
            if inner
                .leader_epoch_cache
                .latest_epoch()
                .is_none_or(|e| e < epoch)
            {
                inner.leader_epoch_cache.assign(epoch, start_offset)?;
            }
        }
        Ok(())
    }

    /// Undoes a failed append from `first_offset` on: the segment is cut back and the epoch
    /// cache forgets epochs starting there. Producer state and the log end offset were not
    /// yet changed. Returns the error to report.
    fn roll_back(&self, inner: &mut LogInner, first_offset: i64, error: LogError) -> LogError {
        let undone = inner.active().and_then(|active| {
            active.truncate_to(first_offset)?;
            Ok(())
        });
        // Put the cache back even if its checkpoint cannot be written: the loader drops
        // epochs past the log end at the next start.
        let epochs = inner.leader_epoch_cache.truncate_from_end(first_offset);
        match undone {
            Ok(()) => {
                tracing::warn!(partition = %self.topic_partition, offset = first_offset, error = %error, "append failed; its bytes were removed from the segment");
                if let Err(e) = epochs {
                    tracing::warn!(partition = %self.topic_partition, error = %e, "leader epoch checkpoint not rewritten after a failed append");
                }
                self.on_failure("append", error)
            }
            Err(_) if self.is_retired() => self.on_failure("append", error),
            Err(cut) => {
                // The unacknowledged bytes may still be in the segment: only a restart's
                // recovery can be trusted with this log now.
                self.dir_health.mark_offline(
                    &format!("removing a failed append from {}", self.topic_partition),
                    &cut,
                );
                self.on_failure("append", error)
            }
        }
    }

    /// Maps a failed operation's error to what the caller reports, taking the log dir
    /// offline for an I/O error that may have lost data. Running out of file descriptors
    /// fails just this operation.
    pub(super) fn on_failure(&self, what: &str, error: LogError) -> LogError {
        let LogError::KafkaStorage(io) = &error else {
            return error;
        };
        if is_fd_exhaustion(io) {
            tracing::error!(partition = %self.topic_partition, error = %io, "{what} failed: out of file descriptors (raise `ulimit -n`); the log is unchanged");
            return error;
        }
        if self.is_retired() {
            tracing::info!(partition = %self.topic_partition, error = %io, "{what} failed on a log being deleted; its log dir stays online");
            return error;
        }
        self.dir_health
            .mark_offline(&format!("{what} of {}", self.topic_partition), io);
        error
    }

    /// Kafka flushes a rolled segment; done outside the lock so readers proceed, and the
    /// producer snapshot is written (fsync included) outside it too.
    pub(super) fn after_roll(&self, roll: PendingSnapshot) -> Result<(), LogError> {
        let base = roll.offset;
        self.write_producer_snapshot(roll)?;
        self.flush_to(base)
    }
}

impl PendingAppend {
    /// `h`, a marker, ends the transaction that began at `first_offset`; an abort goes to
    /// the transaction index with the last stable offset it leaves.
    fn note_end(
        &mut self,
        inner: &LogInner,
        h: &RecordBatchHeader,
        first_offset: i64,
        marker: EndTxnMarker,
    ) {
        if marker.result == TxnResult::Abort {
            let last_stable_offset = inner
                .producer_state
                .last_stable_offset_after(h.producer_id(), h.base_offset());
            self.aborted.push(AbortedTxn {
                producer_id: h.producer_id(),
                first_offset,
                last_offset: h.base_offset(),
                last_stable_offset,
            });
        }
    }

    fn note_batch(&mut self, h: &RecordBatchHeader) {
        if h.max_timestamp() > self.max_timestamp {
            (self.max_timestamp, self.offset_of_max_timestamp) =
                (h.max_timestamp(), h.last_offset());
        }
        self.next_offset = h.next_offset();
    }
}

/// A follower's batches (position and header): whole, magic v2, CRC intact, offsets
/// increasing from `from`.
fn check_follower_batches(
    buf: &[u8],
    from: i64,
) -> Result<Vec<(usize, RecordBatchHeader)>, LogError> {
    let mut headers = Vec::new();
    let mut expected = from;
    for item in batch::BatchIter::new(buf) {
        let (position, header) = item?;
        if header.magic() != MAGIC_V2 {
            return Err(LogError::InvalidRecord(format!(
                "magic {} is not supported",
                header.magic()
            )));
        }
        batch::verify_crc(&buf[position..position + header.size_in_bytes()])?;
        if header.base_offset() < expected || header.last_offset_delta() < 0 {
            return Err(LogError::InvalidRecord(format!(
                "batch at offset {} where {expected} or later was expected",
                header.base_offset()
            )));
        }
        expected = header.next_offset();
        headers.push((position, header));
    }
    Ok(headers)
}
