//! One stored batch through the cleaner (Kafka's `MemoryRecords.filterTo` with the
//! cleaner's `RecordFilter`): kept as it is, rebuilt with the records to keep, cut down to
//! its header, or dropped.
//!
//! A record stays when the offset map has not reached it yet, or when it is the latest for
//! its key and either has a value or is a tombstone whose delete horizon has not passed.
//! The first cleaning that keeps a tombstone stamps its batch with a delete horizon
//! (`now + delete.retention.ms`, KIP-534); a later cleaning after that time drops it. A
//! rebuilt batch keeps its base offset, last offset delta, producer id, epoch and base
//! sequence, codec and leader epoch, so offsets and the producer's last sequence read back
//! the same. A batch left with no records still keeps its header when it is the last batch
//! of a producer that is still active (its epoch and last sequence are what an idempotent
//! producer's next batch is checked against after a restart) or the last of the round.
//!
//! Transactions (Kafka's `checkBatchRetention`, with `txn::TxnTracker`): a batch of an
//! aborted transaction is removed whole, its header kept when it is the producer's last
//! batch; a committed transaction's records are compacted by key like any others; a
//! marker stays until no batch of its transaction is left (see `txn`), is then stamped
//! with a delete horizon (`now + delete.retention.ms`, the KIP-534 bit and base timestamp
//! Kafka uses for tombstones), and a round after that time removes it, keeping its header
//! only when it is the producer's last record (it carries the producer's epoch).

use std::collections::HashMap;
use std::io::Write;

use super::offset_map::OffsetMap;
use super::txn::TxnTracker;
use crate::log::batch::{NewBatch, RecordBatchHeader};
use crate::log::compression::{Codec, Compressor};
use crate::log::producer_state::LastRecord;
use crate::log::records::{Keep, RecordWalk, WalkedRecord};
use crate::log::{AbortedTxn, LogError, TimestampType};

/// What a cleaning round knows when it filters batches.
pub struct Round<'a> {
    pub map: &'a OffsetMap,
    pub now_ms: i64,
    pub delete_retention_ms: i64,
    /// The last record of each producer still in the producer state.
    pub producers_last_records: &'a HashMap<i64, LastRecord>,
    /// The offset this round cleans up to: the batch ending there keeps its header.
    pub upper_bound_offset: i64,
}

impl Round<'_> {
    /// Kafka's `isBatchLastRecordOfProducer`, and the round's last batch: the header stays
    /// even when no record does, so the producer's sequence and epoch, and the offsets
    /// the round covered, read back the same.
    fn keeps_header(&self, h: &RecordBatchHeader) -> bool {
        let last_of_producer = h.producer_id() >= 0
            && self
                .producers_last_records
                .get(&h.producer_id())
                .is_some_and(|last| match last.last_data_offset {
                    Some(offset) => h.last_offset() == offset,
                    None => h.is_control() && h.producer_epoch() == last.producer_epoch,
                });
        last_of_producer || h.next_offset() == self.upper_bound_offset
    }
}

/// What became of a batch.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every record stays and nothing needs stamping: the stored bytes are copied.
    Whole,
    /// A new batch: the records kept, or only the header.
    Rebuilt(Vec<u8>),
    Dropped,
}

/// The outcome with what the segment's indexes need to know about it.
#[derive(Debug)]
pub struct Filtered {
    pub outcome: Outcome,
    pub records_read: u64,
    pub records_kept: u64,
    /// For the time index: the kept batch's max timestamp and its last offset.
    pub max_timestamp: i64,
    /// The kept abort marker's entry for the cleaned segment's aborted-transaction index.
    pub aborted_txn: Option<AbortedTxn>,
}

impl Filtered {
    fn without_records(outcome: Outcome, h: &RecordBatchHeader, read: u64) -> Self {
        let max_timestamp = match outcome {
            Outcome::Dropped => -1,
            _ => h.max_timestamp(),
        };
        Filtered {
            outcome,
            records_read: read,
            records_kept: 0,
            max_timestamp,
            aborted_txn: None,
        }
    }
}

/// Filters the whole stored batch `batch` (header included); `txns` follows the
/// transactions of the pass, which sees every batch in offset order.
pub fn filter_batch(
    batch: &[u8],
    round: &Round<'_>,
    txns: &mut TxnTracker,
) -> Result<Filtered, LogError> {
    let h = RecordBatchHeader::parse(batch)?;
    let count = u64::try_from(h.records_count()).unwrap_or(0);
    let (discardable, aborted_txn) = match h.is_control() {
        true => {
            let read = txns.on_control(&h, batch)?;
            (read.discardable, read.index_entry)
        }
        false => (txns.on_batch(&h), None),
    };
    // A data batch of an aborted transaction goes at once; a marker of a transaction with
    // nothing left goes once its delete horizon has passed.
    let discard_records = match h.is_control() {
        true => discardable && h.delete_horizon_ms().is_some_and(|t| t <= round.now_ms),
        false => discardable,
    };
    let keep_header = round.keeps_header(&h);
    if discard_records {
        let outcome = match keep_header {
            true => Outcome::Rebuilt(empty_batch(&h)),
            false => Outcome::Dropped,
        };
        return Ok(Filtered::without_records(outcome, &h, count));
    }
    if h.is_control() {
        // Kept whole, or stamped with the horizon its removal waits for.
        let outcome = match discardable && h.delete_horizon_ms().is_none() {
            true => {
                let all: Vec<u64> = (0..count).collect();
                let horizon = round.now_ms.saturating_add(round.delete_retention_ms);
                rebuild(batch, &h, &all, Some(horizon))?.0
            }
            false => Outcome::Whole,
        };
        return Ok(Filtered {
            outcome,
            records_read: count,
            records_kept: count,
            max_timestamp: h.max_timestamp(),
            aborted_txn,
        });
    }
    // Decided on keys and value sizes alone; values are read only for a batch to rebuild.
    let mut walk = RecordWalk::open(batch, None)?;
    let (mut kept, mut read, mut tombstones) = (Vec::new(), 0u64, false);
    while let Some(record) = walk.next(Keep::Key)? {
        let has_value = record.value_size >= 0;
        if retain(record.offset, record.key.as_deref(), has_value, &h, round) {
            tombstones |= !has_value;
            kept.push(read);
        }
        read += 1;
    }
    let records_kept = kept.len() as u64;
    let needs_horizon = tombstones && h.delete_horizon_ms().is_none();
    let (outcome, max_timestamp) = if kept.is_empty() {
        match keep_header {
            true => (Outcome::Rebuilt(empty_batch(&h)), h.max_timestamp()),
            false => (Outcome::Dropped, -1),
        }
    } else if records_kept == read && !needs_horizon {
        (Outcome::Whole, h.max_timestamp())
    } else {
        let horizon = match needs_horizon {
            true => Some(round.now_ms.saturating_add(round.delete_retention_ms)),
            false => h.delete_horizon_ms(),
        };
        rebuild(batch, &h, &kept, horizon)?
    };
    Ok(Filtered {
        outcome,
        records_read: read,
        records_kept,
        max_timestamp,
        aborted_txn: None,
    })
}

/// Kafka's `Cleaner.shouldRetainRecord`.
fn retain(
    offset: i64,
    key: Option<&[u8]>,
    has_value: bool,
    h: &RecordBatchHeader,
    round: &Round<'_>,
) -> bool {
    if offset > round.map.latest_offset() {
        return true;
    }
    // A record without a key cannot be in a compacted log (produce refuses it); one that
    // predates the topic's compaction goes, as in Kafka.
    let Some(key) = key else {
        return false;
    };
    let latest = offset >= round.map.get(key);
    let live = has_value || h.delete_horizon_ms().is_none_or(|t| round.now_ms < t);
    latest && live
}

/// Kafka's `buildRetainedRecordsInto`: the records at the indexes `kept_at` (ascending) in
/// a batch like the original, with `horizon` as its delete horizon when there is one.
/// Returns the batch and its max timestamp.
fn rebuild(
    batch: &[u8],
    h: &RecordBatchHeader,
    kept_at: &[u64],
    horizon: Option<i64>,
) -> Result<(Outcome, i64), LogError> {
    let mut walk = RecordWalk::open(batch, None)?;
    let mut kept = Vec::with_capacity(kept_at.len());
    let (mut index, mut wanted) = (0u64, kept_at.iter().peekable());
    loop {
        let take = wanted.peek() == Some(&&index);
        let keep = if take { Keep::All } else { Keep::Positions };
        let Some(record) = walk.next(keep)? else {
            break;
        };
        if take {
            wanted.next();
            kept.push(record);
        }
        index += 1;
    }
    let first_timestamp = kept.first().map_or(-1, |r| r.timestamp);
    let base_timestamp = horizon.unwrap_or(first_timestamp);
    let max_timestamp = match h.timestamp_type() {
        TimestampType::LogAppendTime => h.max_timestamp(),
        TimestampType::CreateTime => kept.iter().map(|r| r.timestamp).max().unwrap_or(-1),
    };
    let codec = Codec::from_id(h.compression_codec()).unwrap_or(Codec::None);
    let mut sink = Compressor::new(codec, Vec::new())?;
    let mut record = Vec::new();
    for r in &kept {
        record.clear();
        encode_record(
            &mut record,
            r.timestamp.wrapping_sub(base_timestamp),
            (r.offset - h.base_offset()) as i32,
            r,
        );
        sink.write_all(&record)?;
    }
    let records = sink.finish()?;
    let batch = NewBatch {
        delete_horizon: horizon.is_some(),
        base_timestamp,
        max_timestamp,
        records_count: kept.len() as i32,
        ..NewBatch::like(h)
    };
    Ok((Outcome::Rebuilt(batch.encode(&records)), max_timestamp))
}

/// Kafka's `DefaultRecordBatch.writeEmptyHeader`: the batch's offsets, producer fields and
/// max timestamp, no records.
fn empty_batch(h: &RecordBatchHeader) -> Vec<u8> {
    NewBatch {
        codec: 0,
        delete_horizon: false,
        base_timestamp: -1,
        records_count: 0,
        ..NewBatch::like(h)
    }
    .encode(&[])
}

/// Kafka's `DefaultRecord.writeTo`: length, attributes (0), timestamp and offset deltas,
/// key, value, headers; lengths as zigzag varints, -1 for null.
fn encode_record(out: &mut Vec<u8>, timestamp_delta: i64, offset_delta: i32, r: &WalkedRecord) {
    let mut body = Vec::with_capacity(16);
    body.push(0);
    put_varlong(&mut body, timestamp_delta);
    put_varlong(&mut body, i64::from(offset_delta));
    put_nullable(&mut body, r.key.as_deref());
    put_nullable(&mut body, r.value.as_deref());
    put_varlong(&mut body, r.headers.len() as i64);
    for header in &r.headers {
        put_nullable(&mut body, Some(&header.key));
        put_nullable(&mut body, header.value.as_deref());
    }
    put_varlong(out, body.len() as i64);
    out.extend_from_slice(&body);
}

fn put_nullable(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        None => put_varlong(out, -1),
        Some(b) => {
            put_varlong(out, b.len() as i64);
            out.extend_from_slice(b);
        }
    }
}

/// A zigzag varint (varint and varlong share the encoding; an i32 never takes more
/// than 5 bytes).
fn put_varlong(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

#[cfg(test)]
#[path = "filter_tests.rs"]
mod tests;
