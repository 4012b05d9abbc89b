//! A view of the RecordBatch v2 header.
//!
//! Layout (big-endian), from Kafka's `DefaultRecordBatch`:
//!
//! ```text
//! 0  baseOffset i64          8  batchLength i32 (size - 12)   12 partitionLeaderEpoch i32
//! 16 magic i8 (2)            17 crc u32 (CRC-32C of bytes 21..end)
//! 21 attributes i16          23 lastOffsetDelta i32           27 baseTimestamp i64
//! 35 maxTimestamp i64        43 producerId i64                51 producerEpoch i16
//! 53 baseSequence i32        57 recordsCount i32              61 records…
//! ```
//!
//! `baseOffset` and `partitionLeaderEpoch` lie before byte 21, so the broker patches them in
//! place without touching the CRC.

use super::LogError;

/// Bytes before `batchLength` counts: baseOffset + batchLength.
pub const LOG_OVERHEAD: usize = 12;
/// Size of the v2 batch header; the smallest valid batch.
pub const HEADER_SIZE: usize = 61;
pub const MAGIC_V2: i8 = 2;

const BATCH_LENGTH_OFFSET: usize = 8;
const PARTITION_LEADER_EPOCH_OFFSET: usize = 12;
const MAGIC_OFFSET: usize = 16;
const CRC_OFFSET: usize = 17;
pub(crate) const ATTRIBUTES_OFFSET: usize = 21;
const LAST_OFFSET_DELTA_OFFSET: usize = 23;
const BASE_TIMESTAMP_OFFSET: usize = 27;
const MAX_TIMESTAMP_OFFSET: usize = 35;
const PRODUCER_ID_OFFSET: usize = 43;
const PRODUCER_EPOCH_OFFSET: usize = 51;
const BASE_SEQUENCE_OFFSET: usize = 53;
const RECORDS_COUNT_OFFSET: usize = 57;

const COMPRESSION_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_MASK: i16 = 0x08;
const TRANSACTIONAL_MASK: i16 = 0x10;
const CONTROL_MASK: i16 = 0x20;
const DELETE_HORIZON_MASK: i16 = 0x40;

/// A copy of one batch's 61-byte header with typed accessors. Parsing checks only that 61
/// bytes are present; `check_length` and `verify_crc` judge whether the batch is sound.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct RecordBatchHeader {
    raw: [u8; HEADER_SIZE],
}

impl std::fmt::Debug for RecordBatchHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordBatchHeader")
            .field("base_offset", &self.base_offset())
            .field("batch_length", &self.batch_length())
            .field("magic", &self.magic())
            .field("last_offset_delta", &self.last_offset_delta())
            .field("producer_id", &self.producer_id())
            .field("base_sequence", &self.base_sequence())
            .finish()
    }
}

impl RecordBatchHeader {
    /// Copies the header from the start of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self, LogError> {
        let raw: [u8; HEADER_SIZE] = buf
            .get(..HEADER_SIZE)
            .and_then(|h| h.try_into().ok())
            .ok_or_else(|| {
                LogError::CorruptMessage(format!(
                    "batch header needs {HEADER_SIZE} bytes, have {}",
                    buf.len()
                ))
            })?;
        Ok(RecordBatchHeader { raw })
    }

    fn i16_at(&self, at: usize) -> i16 {
        i16::from_be_bytes([self.raw[at], self.raw[at + 1]])
    }
    fn i32_at(&self, at: usize) -> i32 {
        let mut b = [0u8; 4];
        b.copy_from_slice(&self.raw[at..at + 4]);
        i32::from_be_bytes(b)
    }
    fn i64_at(&self, at: usize) -> i64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.raw[at..at + 8]);
        i64::from_be_bytes(b)
    }

    pub fn base_offset(&self) -> i64 {
        self.i64_at(0)
    }
    pub fn batch_length(&self) -> i32 {
        self.i32_at(BATCH_LENGTH_OFFSET)
    }
    pub fn partition_leader_epoch(&self) -> i32 {
        self.i32_at(PARTITION_LEADER_EPOCH_OFFSET)
    }
    pub fn magic(&self) -> i8 {
        self.raw[MAGIC_OFFSET] as i8
    }
    pub fn crc(&self) -> u32 {
        self.i32_at(CRC_OFFSET) as u32
    }
    pub fn attributes(&self) -> i16 {
        self.i16_at(ATTRIBUTES_OFFSET)
    }
    /// 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
    pub fn compression_codec(&self) -> u8 {
        (self.attributes() & COMPRESSION_MASK) as u8
    }
    pub fn timestamp_type(&self) -> super::TimestampType {
        if self.attributes() & TIMESTAMP_TYPE_MASK != 0 {
            super::TimestampType::LogAppendTime
        } else {
            super::TimestampType::CreateTime
        }
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes() & TRANSACTIONAL_MASK != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes() & CONTROL_MASK != 0
    }
    /// KIP-534: the cleaner set when this batch's tombstones may go; `baseTimestamp` then
    /// holds that time instead of the first record's timestamp.
    pub fn delete_horizon_ms(&self) -> Option<i64> {
        (self.attributes() & DELETE_HORIZON_MASK != 0).then(|| self.base_timestamp())
    }
    pub fn last_offset_delta(&self) -> i32 {
        self.i32_at(LAST_OFFSET_DELTA_OFFSET)
    }
    pub fn base_timestamp(&self) -> i64 {
        self.i64_at(BASE_TIMESTAMP_OFFSET)
    }
    pub fn max_timestamp(&self) -> i64 {
        self.i64_at(MAX_TIMESTAMP_OFFSET)
    }
    pub fn producer_id(&self) -> i64 {
        self.i64_at(PRODUCER_ID_OFFSET)
    }
    pub fn producer_epoch(&self) -> i16 {
        self.i16_at(PRODUCER_EPOCH_OFFSET)
    }
    pub fn base_sequence(&self) -> i32 {
        self.i32_at(BASE_SEQUENCE_OFFSET)
    }
    pub fn records_count(&self) -> i32 {
        self.i32_at(RECORDS_COUNT_OFFSET)
    }

    /// Whole batch size on disk, including the 12-byte log overhead. Only meaningful once
    /// `check_length` has passed; saturates rather than overflowing on a garbage length.
    pub fn size_in_bytes(&self) -> usize {
        (self.batch_length().max(0) as usize).saturating_add(LOG_OVERHEAD)
    }
    pub fn last_offset(&self) -> i64 {
        self.base_offset()
            .saturating_add(i64::from(self.last_offset_delta()))
    }
    pub fn next_offset(&self) -> i64 {
        self.last_offset().saturating_add(1)
    }
    /// Last sequence number, wrapping at i32::MAX as Kafka's `incrementSequence` does.
    pub fn last_sequence(&self) -> i32 {
        increment_sequence(self.base_sequence(), self.last_offset_delta())
    }

    /// The batch's declared size is at least a header and at most `available` bytes.
    pub fn check_length(&self, available: usize) -> Result<usize, LogError> {
        let length = self.batch_length();
        if length < (HEADER_SIZE - LOG_OVERHEAD) as i32 {
            return Err(LogError::CorruptMessage(format!(
                "batch length {length} is smaller than a header"
            )));
        }
        let size = self.size_in_bytes();
        if size > available {
            return Err(LogError::CorruptMessage(format!(
                "batch of {size} bytes truncated to {available}"
            )));
        }
        Ok(size)
    }
}

/// Kafka's `DefaultRecordBatch.incrementSequence`: sequences wrap from i32::MAX to 0.
/// The length of the whole batches at the start of `buf`: a fetch response may end in a
/// batch cut at its size limit, which is fetched again whole.
pub fn whole_batches_len(buf: &[u8]) -> usize {
    let mut position = 0usize;
    while let Some(rest) = buf.get(position..) {
        let Some(length) = rest.get(8..LOG_OVERHEAD) else {
            break;
        };
        let length = i32::from_be_bytes([length[0], length[1], length[2], length[3]]);
        let Some(size) = usize::try_from(length)
            .ok()
            .and_then(|l| l.checked_add(LOG_OVERHEAD))
        else {
            break;
        };
        if size > rest.len() {
            break;
        }
        position += size;
    }
    position
}

pub fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    if sequence > i32::MAX - increment {
        increment - (i32::MAX - sequence) - 1
    } else {
        sequence + increment
    }
}

/// Kafka's `DefaultRecordBatch.decrementSequence`.
pub fn decrement_sequence(sequence: i32, decrement: i32) -> i32 {
    if sequence < decrement {
        i32::MAX - (decrement - sequence) + 1
    } else {
        sequence - decrement
    }
}

/// CRC-32C over bytes 21..end of a whole batch.
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(batch.get(ATTRIBUTES_OFFSET..).unwrap_or(&[]))
}

/// Whether the stored CRC matches the batch's bytes. `batch` is exactly one whole batch.
pub fn verify_crc(batch: &[u8]) -> Result<(), LogError> {
    let header = RecordBatchHeader::parse(batch)?;
    let actual = compute_crc(batch);
    if actual != header.crc() {
        return Err(LogError::CorruptMessage(format!(
            "batch at offset {} has CRC {:#010x}, computed {actual:#010x}",
            header.base_offset(),
            header.crc()
        )));
    }
    Ok(())
}

/// Patches `baseOffset` in place; not covered by the CRC.
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    if let Some(field) = batch.get_mut(0..8) {
        field.copy_from_slice(&base_offset.to_be_bytes());
    }
}

/// Patches `partitionLeaderEpoch` in place; not covered by the CRC.
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    if let Some(field) =
        batch.get_mut(PARTITION_LEADER_EPOCH_OFFSET..PARTITION_LEADER_EPOCH_OFFSET + 4)
    {
        field.copy_from_slice(&epoch.to_be_bytes());
    }
}

/// Kafka's `DefaultRecordBatch.setMaxTimestamp`: sets the timestamp-type bit and
/// `maxTimestamp`, then recomputes the CRC; nothing is written when both already hold.
/// `baseTimestamp` and the records are untouched; readers of a LogAppendTime batch take
/// every record's timestamp from `maxTimestamp`. (Appends patch the header apart:
/// `set_max_timestamp_apart`.)
#[cfg(test)]
pub fn set_max_timestamp(batch: &mut [u8], timestamp_type: super::TimestampType, timestamp: i64) {
    let (header, records) = batch.split_at_mut(HEADER_SIZE.min(batch.len()));
    set_max_timestamp_apart(header, records, timestamp_type, timestamp)
}

/// `set_max_timestamp` for a batch whose header is held apart from its records (an append
/// that writes the request's records where they are): only `header` changes, the CRC is
/// computed over both.
pub fn set_max_timestamp_apart(
    header: &mut [u8],
    records: &[u8],
    timestamp_type: super::TimestampType,
    timestamp: i64,
) {
    let Ok(parsed) = RecordBatchHeader::parse(header) else {
        return;
    };
    if parsed.timestamp_type() == timestamp_type && parsed.max_timestamp() == timestamp {
        return;
    }
    let attributes = match timestamp_type {
        super::TimestampType::LogAppendTime => parsed.attributes() | TIMESTAMP_TYPE_MASK,
        super::TimestampType::CreateTime => parsed.attributes() & !TIMESTAMP_TYPE_MASK,
    };
    header[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attributes.to_be_bytes());
    header[MAX_TIMESTAMP_OFFSET..MAX_TIMESTAMP_OFFSET + 8]
        .copy_from_slice(&timestamp.to_be_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&header[ATTRIBUTES_OFFSET..]), records);
    header[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Stamps a batch with the broker's time (LogAppendTime).
#[cfg(test)]
pub fn set_log_append_time(batch: &mut [u8], timestamp: i64) {
    set_max_timestamp(batch, super::TimestampType::LogAppendTime, timestamp)
}

/// After the records of a whole batch were replaced (recompressed): sets the codec bits and
/// `batchLength` to the batch's new size, and recomputes the CRC.
pub fn set_codec_and_length(batch: &mut [u8], codec: u8) {
    let Ok(header) = RecordBatchHeader::parse(batch) else {
        return;
    };
    let attributes =
        (header.attributes() & !COMPRESSION_MASK) | (i16::from(codec) & COMPRESSION_MASK);
    batch[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attributes.to_be_bytes());
    let length = i32::try_from(batch.len() - LOG_OVERHEAD).unwrap_or(i32::MAX);
    batch[BATCH_LENGTH_OFFSET..BATCH_LENGTH_OFFSET + 4].copy_from_slice(&length.to_be_bytes());
    write_crc(batch);
}

/// The header fields of a batch being written (the cleaner's rebuilt and empty batches).
#[derive(Clone, Copy, Debug)]
pub struct NewBatch {
    pub base_offset: i64,
    pub partition_leader_epoch: i32,
    pub codec: u8,
    pub timestamp_type: super::TimestampType,
    pub is_transactional: bool,
    pub is_control: bool,
    pub delete_horizon: bool,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

impl NewBatch {
    /// The fields of `h` unchanged (codec, offsets, producer, timestamps, count).
    pub fn like(h: &RecordBatchHeader) -> Self {
        NewBatch {
            base_offset: h.base_offset(),
            partition_leader_epoch: h.partition_leader_epoch(),
            codec: h.compression_codec(),
            timestamp_type: h.timestamp_type(),
            is_transactional: h.is_transactional(),
            is_control: h.is_control(),
            delete_horizon: h.delete_horizon_ms().is_some(),
            last_offset_delta: h.last_offset_delta(),
            base_timestamp: h.base_timestamp(),
            max_timestamp: h.max_timestamp(),
            producer_id: h.producer_id(),
            producer_epoch: h.producer_epoch(),
            base_sequence: h.base_sequence(),
            records_count: h.records_count(),
        }
    }

    /// The whole batch: this header, then `records` (encoded, and compressed with `codec`),
    /// with `batchLength` and the CRC filled in.
    pub fn encode(&self, records: &[u8]) -> Vec<u8> {
        let mut attributes = i16::from(self.codec) & COMPRESSION_MASK;
        for (set, mask) in [
            (
                self.timestamp_type == super::TimestampType::LogAppendTime,
                TIMESTAMP_TYPE_MASK,
            ),
            (self.is_transactional, TRANSACTIONAL_MASK),
            (self.is_control, CONTROL_MASK),
            (self.delete_horizon, DELETE_HORIZON_MASK),
        ] {
            if set {
                attributes |= mask;
            }
        }
        let mut out = Vec::with_capacity(HEADER_SIZE + records.len());
        out.extend_from_slice(&self.base_offset.to_be_bytes());
        let length = i32::try_from(HEADER_SIZE - LOG_OVERHEAD + records.len()).unwrap_or(i32::MAX);
        out.extend_from_slice(&length.to_be_bytes());
        out.extend_from_slice(&self.partition_leader_epoch.to_be_bytes());
        out.push(MAGIC_V2 as u8);
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&attributes.to_be_bytes());
        out.extend_from_slice(&self.last_offset_delta.to_be_bytes());
        out.extend_from_slice(&self.base_timestamp.to_be_bytes());
        out.extend_from_slice(&self.max_timestamp.to_be_bytes());
        out.extend_from_slice(&self.producer_id.to_be_bytes());
        out.extend_from_slice(&self.producer_epoch.to_be_bytes());
        out.extend_from_slice(&self.base_sequence.to_be_bytes());
        out.extend_from_slice(&self.records_count.to_be_bytes());
        debug_assert_eq!(out.len(), HEADER_SIZE);
        out.extend_from_slice(records);
        write_crc(&mut out);
        out
    }
}

fn write_crc(batch: &mut [u8]) {
    let crc = compute_crc(batch);
    batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Iterates the batches of an in-memory blob, checking only that each declared length fits.
/// Yields `(position, header)`; the first malformed batch yields an error and ends iteration.
pub struct BatchIter<'a> {
    buf: &'a [u8],
    position: usize,
    failed: bool,
}

impl<'a> BatchIter<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        BatchIter {
            buf,
            position: 0,
            failed: false,
        }
    }
}

impl Iterator for BatchIter<'_> {
    type Item = Result<(usize, RecordBatchHeader), LogError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.position >= self.buf.len() {
            return None;
        }
        let rest = &self.buf[self.position..];
        let result = RecordBatchHeader::parse(rest)
            .and_then(|h| h.check_length(rest.len()).map(|size| (h, size)));
        match result {
            Ok((header, size)) => {
                let position = self.position;
                self.position += size;
                Some(Ok((position, header)))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::test_util::*;

    #[test]
    fn parses_a_real_batch_header() {
        let bytes = batch_bytes(&[b"a", b"bb", b"ccc"], 1_000, None);
        let h = RecordBatchHeader::parse(&bytes).unwrap();
        assert_eq!(h.base_offset(), 0);
        assert_eq!(h.size_in_bytes(), bytes.len());
        assert_eq!(h.magic(), 2);
        assert_eq!(h.last_offset_delta(), 2);
        assert_eq!(h.records_count(), 3);
        assert_eq!(h.base_timestamp(), 1_000);
        assert_eq!(h.max_timestamp(), 1_002);
        assert_eq!(h.producer_id(), -1);
        assert_eq!(h.producer_epoch(), -1);
        assert_eq!(h.base_sequence(), -1);
        assert_eq!(h.compression_codec(), 0);
        assert!(!h.is_transactional() && !h.is_control());
        assert_eq!(h.timestamp_type(), crate::log::TimestampType::CreateTime);
        verify_crc(&bytes).unwrap();
    }

    #[test]
    fn idempotent_header_fields() {
        let bytes = batch_bytes(&[b"a", b"b"], 5, Some((77, 3, 10)));
        let h = RecordBatchHeader::parse(&bytes).unwrap();
        assert_eq!(
            (h.producer_id(), h.producer_epoch(), h.base_sequence()),
            (77, 3, 10)
        );
        assert_eq!(h.last_sequence(), 11);
    }

    #[test]
    fn patching_offset_and_epoch_keeps_crc_valid() {
        let mut bytes = batch_bytes(&[b"x"], 1, None).to_vec();
        set_base_offset(&mut bytes, 123_456);
        set_partition_leader_epoch(&mut bytes, 9);
        let h = RecordBatchHeader::parse(&bytes).unwrap();
        assert_eq!(h.base_offset(), 123_456);
        assert_eq!(h.partition_leader_epoch(), 9);
        assert_eq!(h.last_offset(), 123_456);
        verify_crc(&bytes).unwrap();
    }

    #[test]
    fn crc_detects_any_flipped_byte_after_21() {
        let bytes = batch_bytes(&[b"hello"], 1, None).to_vec();
        for i in ATTRIBUTES_OFFSET..bytes.len() {
            let mut copy = bytes.clone();
            copy[i] ^= 0x40;
            assert!(verify_crc(&copy).is_err(), "flip at {i} undetected");
        }
    }

    #[test]
    fn short_header_is_an_error_not_a_panic() {
        let bytes = batch_bytes(&[b"x"], 1, None);
        for len in 0..HEADER_SIZE {
            assert!(RecordBatchHeader::parse(&bytes[..len]).is_err());
        }
    }

    #[test]
    fn check_length_rejects_small_and_truncated() {
        let bytes = batch_bytes(&[b"x"], 1, None).to_vec();
        let h = RecordBatchHeader::parse(&bytes).unwrap();
        assert_eq!(h.check_length(bytes.len()).unwrap(), bytes.len());
        assert!(h.check_length(bytes.len() - 1).is_err());
        let mut small = bytes.clone();
        small[8..12].copy_from_slice(&10i32.to_be_bytes());
        assert!(RecordBatchHeader::parse(&small)
            .unwrap()
            .check_length(small.len())
            .is_err());
        let mut negative = bytes;
        negative[8..12].copy_from_slice(&(-1i32).to_be_bytes());
        assert!(RecordBatchHeader::parse(&negative)
            .unwrap()
            .check_length(usize::MAX)
            .is_err());
    }

    #[test]
    fn sequence_wraps_like_kafka() {
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
        assert_eq!(decrement_sequence(1, 3), i32::MAX - 1);
        assert_eq!(decrement_sequence(10, 3), 7);
    }

    #[test]
    fn batch_iter_walks_and_stops_at_garbage() {
        let mut blob = batch_bytes(&[b"a"], 1, None).to_vec();
        let first = blob.len();
        blob.extend_from_slice(&batch_bytes(&[b"b", b"c"], 2, None));
        let items: Vec<_> = BatchIter::new(&blob).collect::<Result<_, _>>().unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[1].0, first);
        blob.extend_from_slice(&[0xff; 20]);
        let results: Vec<_> = BatchIter::new(&blob).collect();
        assert_eq!(results.len(), 3);
        assert!(results[2].is_err());
    }
}
