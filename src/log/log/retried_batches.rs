//! A producer's retry of a batch older than the five its producer state remembers, found
//! in the log itself.
//!
//! An idempotent producer whose leader hangs (paused, cut off) keeps its requests to it
//! open until its request timeout. Meanwhile the controller moves the leadership, and the
//! producer sends its next batches to the new leader. When the new leader had already
//! replicated every batch the hung one took, the next sequence is in order and is
//! acknowledged. The hung requests then time out and the producer retries them to the new
//! leader, after dozens of later batches: the five remembered no longer hold them, and
//! OUT_OF_ORDER_SEQUENCE_NUMBER is an answer the Java producer retries forever (the batch
//! is not the next after its last acknowledged sequence), stalling the partition. Kafka
//! 3.9's leaders answer just that. The log holds the proof that such a retry was written:
//! a batch with the same producer id, epoch and sequence range. Found there, the retry is
//! a duplicate acknowledged with its original offsets; otherwise it stays out of order, so
//! nothing that was never written is acknowledged.

use super::LogInner;
use crate::log::batch::RecordBatchHeader;
use crate::log::producer_state::BatchMetadata;
use crate::log::segment::read_header;
use crate::log::LogError;

/// How far below the highest offset it can be at the lookup searches for a retried batch.
/// Every batch takes at least one offset, so this bounds the headers read (under the
/// log's lock) for a batch that is not there.
pub(super) const LOOKBACK_OFFSETS: i64 = 8192;

/// The batch `h` retries, if the log holds it: same producer id, epoch and sequence range,
/// entirely before the producer's last batch. `log_start_offset`: nothing below it is read.
pub(super) fn find_retried_batch(
    inner: &LogInner,
    h: &RecordBatchHeader,
    log_start_offset: i64,
) -> Result<Option<BatchMetadata>, LogError> {
    let Some(entry) = inner.producer_state.entry(h.producer_id()) else {
        return Ok(None);
    };
    let Some(last) = entry.batches.back() else {
        return Ok(None);
    };
    let (first_seq, last_seq) = (h.base_sequence(), h.last_sequence());
    // An earlier range of the current epoch, with no wrap of the sequence since.
    let earlier = entry.epoch == h.producer_epoch()
        && first_seq >= 0
        && first_seq <= last_seq
        && last_seq < last.first_seq;
    if !earlier || h.is_control() {
        return Ok(None);
    }
    // Every sequence from `first_seq` up to the last batch took its own offset, in order:
    // the retried batch starts this far below the last one, or further.
    let highest = last.first_offset - i64::from(last.first_seq - first_seq);
    if highest < log_start_offset {
        return Ok(None);
    }
    let lowest = log_start_offset.max(highest - LOOKBACK_OFFSETS);
    let first_segment = inner
        .segments
        .range(..=lowest)
        .next_back()
        .map_or(i64::MIN, |(&base, _)| base);
    for segment in inner.segments.range(first_segment..).map(|(_, s)| s) {
        let Some(found) = segment.translate_offset(lowest)? else {
            continue;
        };
        let mut position = found.position;
        while let Some(b) = read_header(segment.log_file(), position, segment.size())? {
            if b.base_offset() > highest {
                return Ok(None);
            }
            let same = b.producer_id() == h.producer_id()
                && b.producer_epoch() == h.producer_epoch()
                && b.base_sequence() == first_seq
                && b.last_sequence() == last_seq
                && !b.is_control();
            if same {
                return Ok(Some(BatchMetadata {
                    first_seq,
                    last_seq,
                    first_offset: b.base_offset(),
                    last_offset: b.last_offset(),
                    timestamp: b.max_timestamp(),
                }));
            }
            let available = usize::try_from(segment.size() - position).unwrap_or(usize::MAX);
            position += b.check_length(available)? as u64;
        }
    }
    Ok(None)
}
