//! Validation of a produce request's records before they are appended (Kafka's `LogValidator`
//! for magic v2, in-place path: offsets are assigned by patching, never by re-encoding).

use super::batch::{self, RecordBatchHeader, HEADER_SIZE, MAGIC_V2};
use super::{LogConfig, LogError, TimestampType};

/// One batch of a validated blob.
#[derive(Clone, Copy, Debug)]
pub struct ValidatedBatch {
    /// Byte position of the batch within the blob.
    pub position: usize,
    pub size: usize,
    pub header: RecordBatchHeader,
}

/// Validated batches plus what the append needs to know about them.
#[derive(Debug)]
pub struct ValidatedRecords {
    pub batches: Vec<ValidatedBatch>,
    /// Sum of `records_count` over the batches.
    pub records_count: u64,
    /// The broker time stamped in, or -1 under CreateTime.
    pub log_append_time: i64,
}

/// Checks every batch of `buf` (magic, lengths, size limit, CRC, record count, and for
/// uncompressed batches each record's framing and offset delta). Under LogAppendTime the
/// batches are stamped with `now_ms` and their CRC recomputed. Several batches are allowed.
pub fn validate_records(
    buf: &mut [u8],
    config: &LogConfig,
    now_ms: i64,
) -> Result<ValidatedRecords, LogError> {
    let mut batches = Vec::new();
    let mut records_count = 0u64;
    let mut position = 0usize;
    while position < buf.len() {
        let rest = &buf[position..];
        let header = RecordBatchHeader::parse(rest)?;
        let size = header.check_length(rest.len())?;
        if size > config.max_message_bytes as usize {
            return Err(LogError::MessageTooLarge {
                size,
                max: config.max_message_bytes as usize,
            });
        }
        if header.magic() != MAGIC_V2 {
            return Err(LogError::InvalidRecord(format!(
                "magic {} is not supported, only 2",
                header.magic()
            )));
        }
        let bytes = &rest[..size];
        batch::verify_crc(bytes)?;
        check_counts(&header)?;
        if header.compression_codec() == 0 {
            check_records(&bytes[HEADER_SIZE..], header.records_count())?;
        } else if header.compression_codec() > 4 {
            return Err(LogError::InvalidRecord(format!(
                "unknown compression codec {}",
                header.compression_codec()
            )));
        }
        records_count += header.records_count() as u64;
        batches.push(ValidatedBatch {
            position,
            size,
            header,
        });
        position += size;
    }
    if batches.is_empty() {
        return Err(LogError::InvalidRecord("no record batches".into()));
    }
    let mut log_append_time = -1;
    if config.message_timestamp_type == TimestampType::LogAppendTime {
        log_append_time = now_ms;
        for b in &mut batches {
            let bytes = &mut buf[b.position..b.position + b.size];
            batch::set_log_append_time(bytes, now_ms);
            b.header = RecordBatchHeader::parse(bytes)?;
        }
    }
    Ok(ValidatedRecords {
        batches,
        records_count,
        log_append_time,
    })
}

/// Kafka's `validateBatch`: a positive count that matches the offset range.
fn check_counts(header: &RecordBatchHeader) -> Result<(), LogError> {
    let count = header.records_count();
    if count <= 0 {
        return Err(LogError::InvalidRecord(format!(
            "invalid record count {count}"
        )));
    }
    if header.last_offset_delta() < 0
        || i64::from(header.last_offset_delta()) + 1 != i64::from(count)
    {
        return Err(LogError::InvalidRecord(format!(
            "record count {count} does not match last offset delta {}",
            header.last_offset_delta()
        )));
    }
    Ok(())
}

/// Walks `count` uncompressed v2 records: each length must fit, each record must parse to
/// exactly its length, offset deltas must run 0..count, and no bytes may be left over.
pub fn check_records(records: &[u8], count: i32) -> Result<(), LogError> {
    let mut cursor = Cursor {
        buf: records,
        pos: 0,
    };
    for expected_delta in 0..count {
        let record = cursor.record()?;
        if record.offset_delta != expected_delta {
            return Err(LogError::InvalidRecord(format!(
                "record offset delta {} where {expected_delta} was expected",
                record.offset_delta
            )));
        }
    }
    if cursor.pos != records.len() {
        return Err(LogError::InvalidRecord(format!(
            "{} bytes after the last record",
            records.len() - cursor.pos
        )));
    }
    Ok(())
}

/// The first record of an uncompressed batch whose timestamp is >= `target`, as
/// `(timestamp, offset_delta)`. Used by ListOffsets; `None` if the records do not parse.
pub fn first_record_at_or_after(
    records: &[u8],
    count: i32,
    base_timestamp: i64,
    target: i64,
) -> Option<(i64, i32)> {
    let mut cursor = Cursor {
        buf: records,
        pos: 0,
    };
    for _ in 0..count {
        let record = cursor.record().ok()?;
        let timestamp = base_timestamp.saturating_add(record.timestamp_delta);
        if timestamp >= target {
            return Some((timestamp, record.offset_delta));
        }
    }
    None
}

struct RecordSummary {
    timestamp_delta: i64,
    offset_delta: i32,
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

fn invalid(what: &str) -> LogError {
    LogError::InvalidRecord(format!("malformed record: {what}"))
}

impl Cursor<'_> {
    fn byte(&mut self) -> Result<u8, LogError> {
        let b = *self.buf.get(self.pos).ok_or_else(|| invalid("truncated"))?;
        self.pos += 1;
        Ok(b)
    }

    /// Protobuf-style zigzag varint of at most `max_bytes` bytes.
    fn zigzag(&mut self, max_bytes: u32) -> Result<i64, LogError> {
        let mut value = 0u64;
        for i in 0..max_bytes {
            let b = self.byte()?;
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(((value >> 1) as i64) ^ -((value & 1) as i64));
            }
        }
        Err(invalid("varint too long"))
    }

    fn varint(&mut self) -> Result<i32, LogError> {
        let v = self.zigzag(5)?;
        i32::try_from(v).map_err(|_| invalid("varint out of range"))
    }

    fn skip(&mut self, len: i32, nullable: bool) -> Result<(), LogError> {
        if len == -1 && nullable {
            return Ok(());
        }
        let len = usize::try_from(len).map_err(|_| invalid("negative length"))?;
        if len > self.buf.len() - self.pos {
            return Err(invalid("length past the end"));
        }
        self.pos += len;
        Ok(())
    }

    /// One record (DefaultRecord): length, attributes, timestampDelta, offsetDelta, key,
    /// value, headers. The record must consume exactly its declared length.
    fn record(&mut self) -> Result<RecordSummary, LogError> {
        let length = self.varint()?;
        let length = usize::try_from(length).map_err(|_| invalid("negative record length"))?;
        if length > self.buf.len() - self.pos {
            return Err(invalid("record length past the end"));
        }
        let end = self.pos + length;
        let mut body = Cursor {
            buf: &self.buf[..end],
            pos: self.pos,
        };
        body.byte()?; // attributes: unused in v2
        let timestamp_delta = body.zigzag(10)?;
        let offset_delta = body.varint()?;
        let key_len = body.varint()?;
        body.skip(key_len, true)?;
        let value_len = body.varint()?;
        body.skip(value_len, true)?;
        let headers = body.varint()?;
        if headers < 0 {
            return Err(invalid("negative header count"));
        }
        for _ in 0..headers {
            let key_len = body.varint()?;
            body.skip(key_len, false)?;
            let value_len = body.varint()?;
            body.skip(value_len, true)?;
        }
        if body.pos != end {
            return Err(invalid("record length does not match its content"));
        }
        self.pos = end;
        Ok(RecordSummary {
            timestamp_delta,
            offset_delta,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::test_util::*;
    use kafka_protocol::records::Compression;

    fn cfg() -> LogConfig {
        LogConfig::default()
    }

    #[test]
    fn accepts_several_real_batches() {
        let mut blob = batch_bytes(&[b"a", b"b"], 10, None).to_vec();
        blob.extend_from_slice(&batch_bytes(&[b"c"], 20, Some((5, 0, 0))));
        let v = validate_records(&mut blob, &cfg(), 0).unwrap();
        assert_eq!(v.batches.len(), 2);
        assert_eq!(v.records_count, 3);
        assert_eq!(v.log_append_time, -1);
        assert_eq!(v.batches[1].header.producer_id(), 5);
    }

    #[test]
    fn accepts_compressed_batches() {
        for c in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let mut blob = encode(&records(&[b"aaaa", b"bbbb", b"cccc"], 1, None), c).to_vec();
            let v = validate_records(&mut blob, &cfg(), 0).unwrap();
            assert_eq!(v.batches[0].header.compression_codec(), c as u8);
            assert_eq!(v.records_count, 3);
        }
    }

    #[test]
    fn bad_crc_is_corrupt_message() {
        let mut blob = batch_bytes(&[b"hello"], 1, None).to_vec();
        let last = blob.len() - 1;
        blob[last] ^= 1;
        assert!(matches!(
            validate_records(&mut blob, &cfg(), 0),
            Err(LogError::CorruptMessage(_))
        ));
    }

    #[test]
    fn bad_magic_is_invalid_record() {
        let mut blob = batch_bytes(&[b"hello"], 1, None).to_vec();
        blob[16] = 1;
        assert!(matches!(
            validate_records(&mut blob, &cfg(), 0),
            Err(LogError::InvalidRecord(_))
        ));
    }

    #[test]
    fn every_truncation_is_rejected() {
        let blob = batch_bytes(&[b"hello", b"world"], 1, None).to_vec();
        for len in 1..blob.len() {
            let mut cut = blob[..len].to_vec();
            let err = validate_records(&mut cut, &cfg(), 0).unwrap_err();
            assert_eq!(err.error_code(), 2, "len {len}: {err}");
        }
        assert!(matches!(
            validate_records(&mut [], &cfg(), 0),
            Err(LogError::InvalidRecord(_))
        ));
    }

    #[test]
    fn too_large_batch() {
        let mut blob = batch_bytes(&[&[0u8; 200]], 1, None).to_vec();
        let config = LogConfig {
            max_message_bytes: 100,
            ..cfg()
        };
        match validate_records(&mut blob, &config, 0) {
            Err(LogError::MessageTooLarge { size, max }) => {
                assert_eq!((size, max), (blob.len(), 100))
            }
            other => panic!("{other:?}"),
        }
    }

    /// Re-signs a batch after a test edits it, so only the edited property is wrong.
    fn resign(blob: &mut [u8]) {
        let crc = batch::compute_crc(blob);
        blob[17..21].copy_from_slice(&crc.to_be_bytes());
    }

    #[test]
    fn count_must_match_last_offset_delta() {
        let mut blob = batch_bytes(&[b"a", b"b"], 1, None).to_vec();
        blob[57..61].copy_from_slice(&3i32.to_be_bytes());
        resign(&mut blob);
        assert!(matches!(
            validate_records(&mut blob, &cfg(), 0),
            Err(LogError::InvalidRecord(_))
        ));
        let mut blob = batch_bytes(&[b"a"], 1, None).to_vec();
        blob[57..61].copy_from_slice(&(-1i32).to_be_bytes());
        resign(&mut blob);
        assert!(matches!(
            validate_records(&mut blob, &cfg(), 0),
            Err(LogError::InvalidRecord(_))
        ));
    }

    #[test]
    fn record_offset_deltas_must_be_in_order() {
        // Two one-byte values; the second record's offset delta varint is rewritten to 0.
        let mut blob = batch_bytes(&[b"a", b"b"], 1, None).to_vec();
        let second = HEADER_SIZE + 1 + usize::from(blob[HEADER_SIZE]) / 2;
        // length, attributes, timestampDelta (1 byte each for small values), then offsetDelta.
        assert_eq!(blob[second + 3], 2, "zigzag(1)");
        blob[second + 3] = 0;
        resign(&mut blob);
        assert!(matches!(
            validate_records(&mut blob, &cfg(), 0),
            Err(LogError::InvalidRecord(_))
        ));
    }

    #[test]
    fn trailing_bytes_inside_batch_rejected() {
        let mut blob = batch_bytes(&[b"a"], 1, None).to_vec();
        blob.push(0);
        let len = (blob.len() - 12) as i32;
        blob[8..12].copy_from_slice(&len.to_be_bytes());
        resign(&mut blob);
        assert!(matches!(
            validate_records(&mut blob, &cfg(), 0),
            Err(LogError::InvalidRecord(_))
        ));
    }

    #[test]
    fn log_append_time_rewrites_header_with_valid_crc() {
        for c in [Compression::None, Compression::Lz4] {
            let mut blob = encode(&records(&[b"a", b"b"], 1_000, None), c).to_vec();
            let config = LogConfig {
                message_timestamp_type: TimestampType::LogAppendTime,
                ..cfg()
            };
            let v = validate_records(&mut blob, &config, 99_999).unwrap();
            assert_eq!(v.log_append_time, 99_999);
            let h = v.batches[0].header;
            assert_eq!(h.max_timestamp(), 99_999);
            assert_eq!(h.timestamp_type(), TimestampType::LogAppendTime);
            batch::verify_crc(&blob).unwrap();
            // An independent decoder agrees that the CRC holds.
            let sets = decode_all(&bytes::Bytes::from(blob));
            assert_eq!(sets[0].records.len(), 2);
            assert_eq!(
                sets[0].records[0].timestamp_type,
                kafka_protocol::records::TimestampType::LogAppend
            );
        }
    }

    #[test]
    fn finds_first_record_by_timestamp() {
        let blob = batch_bytes(&[b"a", b"b", b"c"], 100, None);
        let h = RecordBatchHeader::parse(&blob).unwrap();
        let recs = &blob[HEADER_SIZE..];
        assert_eq!(
            first_record_at_or_after(recs, 3, h.base_timestamp(), 101),
            Some((101, 1))
        );
        assert_eq!(
            first_record_at_or_after(recs, 3, h.base_timestamp(), 0),
            Some((100, 0))
        );
        assert_eq!(
            first_record_at_or_after(recs, 3, h.base_timestamp(), 103),
            None
        );
    }
}
