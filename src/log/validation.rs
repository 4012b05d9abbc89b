//! Validation of a produce request's records before they are appended: Kafka's
//! `ProduceRequest.validateRecords`, `UnifiedLog.analyzeAndValidateRecords` and
//! `LogValidator` for magic v2.
//!
//! One batch per partition. Its header, size and CRC are checked, then every inner record is
//! walked (decompressed as a bounded stream when the batch is compressed: one code path for
//! both): record framing, offset deltas 0..n-1, a count that matches the records present, and
//! CreateTime timestamps within `message.timestamp.before/after.max.ms`. Offsets are assigned
//! later by patching the header; the header's max timestamp is corrected when it is wrong
//! (or stamped under LogAppendTime). Only when `compression.type` names another codec are the
//! records re-encoded (`rebuild`). All of it runs before the log's lock is taken.

use std::io::{self, BufRead, Read, Write};

use bytes::Bytes;

use super::append_bytes::AppendBytes;
use super::batch::{self, RecordBatchHeader, HEADER_SIZE, MAGIC_V2};
use super::compression::{self, CappedBuf, Codec, Compressor};
use super::records::RecordWalk;
use super::{LogConfig, LogError, RecordError, TimestampType, TopicPartition};

/// A client's validated batch, ready for its offsets, plus what the append needs to know.
#[derive(Debug)]
pub struct ValidatedRecords {
    /// The one batch, its max timestamp corrected, its header patched apart from the
    /// request's records (see [`AppendBytes`]).
    pub bytes: AppendBytes,
    pub header: RecordBatchHeader,
    pub records_count: u64,
    /// The broker time stamped in, or -1 under CreateTime.
    pub log_append_time: i64,
}

/// Produce requests from this version on may use zstd.
const ZSTD_MIN_PRODUCE_VERSION: i16 = 7;
/// The smallest batch length Kafka's batch iterator accepts (`RECORD_OVERHEAD_V0`).
const BATCH_LENGTH_MIN: i32 = 14;

/// Kafka's `ProduceRequest.validateRecords` (v3+), run on each partition's records before
/// anything else: exactly one record batch, of magic 2, and zstd only from v7. Like Kafka's
/// batch iterator, a trailing partial batch is not counted here; the log refuses it.
pub fn check_produce_records(version: i16, records: &[u8]) -> Result<(), LogError> {
    let mut batches = 0;
    let mut position = 0usize;
    while let Some(rest) = records.get(position..).filter(|r| r.len() >= 17) {
        let length = i32::from_be_bytes([rest[8], rest[9], rest[10], rest[11]]);
        if length < BATCH_LENGTH_MIN {
            return Err(LogError::CorruptMessage(format!(
                "Record size {length} is less than the minimum record overhead ({BATCH_LENGTH_MIN})"
            )));
        }
        let size = length as usize + batch::LOG_OVERHEAD;
        if size > rest.len() {
            break;
        }
        if batches == 0 {
            let magic = rest[16] as i8;
            if magic != MAGIC_V2 {
                return Err(LogError::InvalidRecord(format!(
                    "Produce requests with version {version} are only allowed to contain record batches with magic version 2"
                )));
            }
            let zstd = rest.len() >= 23 && rest[22] & 0x07 == Codec::Zstd.id();
            if version < ZSTD_MIN_PRODUCE_VERSION && zstd {
                return Err(LogError::UnsupportedCompressionType(format!(
                    "Produce requests with version {version} are not allowed to use ZStandard compression"
                )));
            }
        }
        batches += 1;
        position += size;
    }
    match batches {
        0 => Err(LogError::InvalidRecord(format!(
            "Produce requests with version {version} must have at least one record batch per partition"
        ))),
        1 => Ok(()),
        _ => Err(LogError::InvalidRecord(format!(
            "Produce requests with version {version} are only allowed to contain exactly one record batch per partition"
        ))),
    }
}

/// Validates a client's records for appending (see the module doc). The records are not
/// copied: only their header is patched, in [`AppendBytes`]; a batch rebuilt because
/// `compression.type` asks for another codec replaces them.
pub fn validate_records(
    records: Bytes,
    config: &LogConfig,
    now_ms: i64,
    topic_partition: &TopicPartition,
) -> Result<ValidatedRecords, LogError> {
    let (header, size) = analyze(&records, config)?;
    validate_batch(&header)?;
    let compacted = config.cleanup_policy.compact.then_some(topic_partition);
    let source = Codec::from_id(header.compression_codec()).ok_or_else(|| {
        LogError::InvalidRecord(format!(
            "Unknown compression type id: {}",
            header.compression_codec()
        ))
    })?;
    let target = config.compression_type.target(source);
    let (mut bytes, walked) = if target == source {
        let walked = walk_in_place(&records[..size], &header, config, now_ms, compacted)?;
        (AppendBytes::with_header(records), walked)
    } else {
        let (rebuilt, walked) = rebuild(
            &records[..size],
            &header,
            (source, target),
            config,
            now_ms,
            compacted,
        )?;
        (AppendBytes::with_header(Bytes::from(rebuilt)), walked)
    };
    let (head, body) = bytes.header_mut();
    let log_append_time = match config.message_timestamp_type {
        TimestampType::LogAppendTime => {
            batch::set_max_timestamp_apart(head, body, TimestampType::LogAppendTime, now_ms);
            now_ms
        }
        TimestampType::CreateTime => {
            let max = walked.max_timestamp;
            batch::set_max_timestamp_apart(head, body, TimestampType::CreateTime, max);
            -1
        }
    };
    let header = RecordBatchHeader::parse(bytes.header())?;
    Ok(ValidatedRecords {
        bytes,
        header,
        records_count: header.records_count() as u64,
        log_append_time,
    })
}

/// `analyzeAndValidateRecords`: every batch whole, at base offset 0, of magic 2, within
/// `max.message.bytes`, with a valid CRC; then `LogValidator`'s one-batch rule.
fn analyze(buf: &[u8], config: &LogConfig) -> Result<(RecordBatchHeader, usize), LogError> {
    let mut first = None;
    for item in batch::BatchIter::new(buf) {
        let (position, header) = item?;
        if header.base_offset() != 0 {
            return Err(LogError::InvalidRecord(format!(
                "The baseOffset of the record batch in the append should be 0, but it is {}",
                header.base_offset()
            )));
        }
        if header.magic() != MAGIC_V2 {
            return Err(LogError::InvalidRecord(format!(
                "magic {} is not supported, only 2",
                header.magic()
            )));
        }
        let size = header.size_in_bytes();
        if size > config.max_message_bytes as usize {
            return Err(LogError::MessageTooLarge {
                size,
                max: config.max_message_bytes as usize,
            });
        }
        batch::verify_crc(&buf[position..position + size])?;
        first.get_or_insert((header, size));
    }
    let (header, size) = first
        .ok_or_else(|| LogError::InvalidRecord("Record batch has no batches at all".into()))?;
    if size != buf.len() {
        return Err(LogError::InvalidRecord(
            "Compressed outer record has more than one batch".into(),
        ));
    }
    Ok((header, size))
}

/// `LogValidator.validateBatch` for a client's v2 batch.
fn validate_batch(header: &RecordBatchHeader) -> Result<(), LogError> {
    let (base, last) = (header.base_offset(), header.last_offset());
    let count = header.records_count();
    if header.last_offset_delta() < 0 {
        return Err(LogError::InvalidRecord(format!(
            "Batch has an invalid offset range: [{base}, {last}]"
        )));
    }
    if count <= 0 {
        return Err(LogError::InvalidRecord(format!(
            "Invalid reported count for record batch: {count}"
        )));
    }
    if i64::from(header.last_offset_delta()) + 1 != i64::from(count) {
        return Err(LogError::InvalidRecord(format!(
            "Inconsistent batch offset range [{base}, {last}] and count of records {count}"
        )));
    }
    if header.is_control() {
        return Err(LogError::InvalidRecord(
            "Clients are not allowed to write control records".into(),
        ));
    }
    if header.producer_id() >= 0 && header.base_sequence() < 0 {
        return Err(LogError::InvalidRecord(format!(
            "Invalid sequence number {} in record batch with producerId {}",
            header.base_sequence(),
            header.producer_id()
        )));
    }
    Ok(())
}

/// What the walk over a batch's records found.
struct Walked {
    max_timestamp: i64,
}

/// Walks the records of a batch that is stored as it came.
fn walk_in_place(
    batch: &[u8],
    header: &RecordBatchHeader,
    config: &LogConfig,
    now_ms: i64,
    compacted: Option<&TopicPartition>,
) -> Result<Walked, LogError> {
    if header.compression_codec() == 0 {
        // The uncompressed records are read straight from the request's bytes.
        let walk = RecordWalk::new(*header, &batch[HEADER_SIZE..], None)?;
        return walk_records(walk, config, now_ms, compacted).map(|(walked, _)| walked);
    }
    let walk = RecordWalk::open(batch, Some(config.max_decompressed_message_bytes as usize))?;
    walk_records(walk, config, now_ms, compacted).map(|(walked, _)| walked)
}

/// Kafka's record loop: offset deltas in order, every record's key (a compacted topic's
/// records need one) and timestamp checked (all of them, so the response lists each
/// refused record), the max timestamp taken.
fn walk_records<R: BufRead>(
    mut walk: RecordWalk<R>,
    config: &LogConfig,
    now_ms: i64,
    compacted: Option<&TopicPartition>,
) -> Result<(Walked, R), LogError> {
    let log_append_batch = walk.header.timestamp_type() == TimestampType::LogAppendTime;
    let mut max_timestamp = -1i64;
    let mut record_errors = Vec::new();
    let mut invalid_timestamp = false;
    let mut index = 0i32;
    while let Some(r) = walk.next_fields()? {
        if r.offset_delta != index {
            return Err(LogError::InvalidRecord(format!(
                "Inner record offset delta {} where {index} was expected",
                r.offset_delta
            )));
        }
        let timestamp_ok = match config.message_timestamp_type {
            TimestampType::CreateTime if r.timestamp != -1 => {
                check_timestamp(r.timestamp, r.offset, config, now_ms)
            }
            _ if log_append_batch => Err(format!(
                "Invalid timestamp type in message DefaultRecord(offset={}, timestamp={}, key={} bytes, value={} bytes). Producer should not set timestamp type to LogAppendTime.",
                r.offset,
                r.timestamp,
                r.key_size.max(0),
                r.value_size.max(0)
            )),
            _ => Ok(()),
        };
        let key_missing = compacted.filter(|_| r.key_size < 0);
        if let Some(tp) = key_missing {
            record_errors.push(RecordError {
                batch_index: index,
                message: format!(
                    "Compacted topic cannot accept message without key in topic partition {tp}"
                ),
            });
        } else if let Err(message) = timestamp_ok {
            invalid_timestamp = true;
            record_errors.push(RecordError {
                batch_index: index,
                message,
            });
        }
        max_timestamp = max_timestamp.max(r.timestamp);
        index += 1;
    }
    // Kafka's `processRecordErrors`: one timestamp error makes it INVALID_TIMESTAMP.
    match (record_errors.is_empty(), invalid_timestamp) {
        (true, _) => {}
        (false, true) => return Err(LogError::InvalidTimestamp { record_errors }),
        (false, false) => return Err(LogError::InvalidRecords { record_errors }),
    }
    Ok((Walked { max_timestamp }, walk.into_source()))
}

/// `LogValidator.validateTimestamp` for one CreateTime record; the message is Kafka's,
/// bounds computed with Java's wrapping arithmetic.
fn check_timestamp(
    timestamp: i64,
    offset: i64,
    config: &LogConfig,
    now_ms: i64,
) -> Result<(), String> {
    let (before, after) = (
        config.message_timestamp_before_max_ms,
        config.message_timestamp_after_max_ms,
    );
    let diff = i128::from(now_ms) - i128::from(timestamp);
    if diff <= i128::from(before) && -diff <= i128::from(after) {
        return Ok(());
    }
    Err(format!(
        "Timestamp {timestamp} of message with offset {offset} is out of range. The timestamp should be within [{}, {}]",
        now_ms.wrapping_sub(before),
        now_ms.wrapping_add(after)
    ))
}

/// Kafka's `buildRecordsAndAssignOffsets` for a codec change: the records are decompressed
/// (if they were compressed), walked and validated as they stream through, and written to
/// the target codec; the new batch keeps the header's producer fields, offsets and base
/// timestamp. The output is refused once it exceeds `max.message.bytes`.
fn rebuild(
    batch: &[u8],
    header: &RecordBatchHeader,
    (source, target): (Codec, Codec),
    config: &LogConfig,
    now_ms: i64,
    compacted: Option<&TopicPartition>,
) -> Result<(Vec<u8>, Walked), LogError> {
    let max = config.max_message_bytes as usize;
    let mut out = Vec::with_capacity(batch.len().min(max));
    out.extend_from_slice(&batch[..HEADER_SIZE]);
    let sink = Compressor::new(target, CappedBuf::new(out, max)).map_err(storage)?;
    let payload = &batch[HEADER_SIZE..];
    let src = compression::decompress(
        source,
        payload,
        compression::decompressed_bytes_max(batch.len()),
    )
    .map_err(|e| LogError::InvalidRecord(format!("Failed to decompress record stream: {e}")))?;
    let record_bytes_max =
        (source != Codec::None).then_some(config.max_decompressed_message_bytes as usize);
    let walk = RecordWalk::new(*header, Tee::new(src, sink), record_bytes_max)?;
    let (walked, tee) = walk_records(walk, config, now_ms, compacted)?;
    let out = tee.finish().map_err(storage)?;
    if out.overflowed() {
        return Err(LogError::MessageTooLarge {
            size: out.written(),
            max,
        });
    }
    let mut rebuilt = out.buf;
    batch::set_codec_and_length(&mut rebuilt, target.id());
    Ok((rebuilt, walked))
}

fn storage(e: io::Error) -> LogError {
    LogError::KafkaStorage(e)
}

/// A reader that copies every byte its consumer takes into a writer: the record walk reads
/// the records once, and the compressor gets exactly those bytes. A write error (none
/// is expected from an in-memory compressor) is kept and reported by `finish`.
struct Tee<R, W: Write> {
    src: R,
    sink: Compressor<W>,
    error: Option<io::Error>,
}

impl<R: BufRead, W: Write> Tee<R, W> {
    fn new(src: R, sink: Compressor<W>) -> Self {
        Tee {
            src,
            sink,
            error: None,
        }
    }

    fn finish(self) -> io::Result<W> {
        match self.error {
            Some(e) => Err(e),
            None => self.sink.finish(),
        }
    }
}

impl<R: BufRead, W: Write> Read for Tee<R, W> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(out.len());
        out[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl<R: BufRead, W: Write> BufRead for Tee<R, W> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.src.fill_buf()
    }

    fn consume(&mut self, n: usize) {
        // `fill_buf` again returns the same, not yet consumed, bytes.
        if self.error.is_none() {
            if let Ok(taken) = self.src.fill_buf() {
                if let Err(e) = self.sink.write_all(&taken[..n.min(taken.len())]) {
                    self.error = Some(e);
                }
            }
        }
        self.src.consume(n);
    }
}

#[cfg(test)]
#[path = "validation_tests.rs"]
mod tests;
