//! Record batches of an internal topic: the one batch an operation writes, and the
//! stored batches read back when a partition loads.
//!
//! `decode_stored` is the only place where the coordinators decode stored batches, with
//! the log's own bounded readers (`log::records`): batches are split by `whole_batches`,
//! every batch is checked (length, magic, CRC) and a count that the bytes present cannot
//! hold is refused before its records are walked; a compressed batch decompresses as a
//! stream bounded as every stored batch's is.

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use crate::log::control::{self, EndTxnMarker};
use crate::log::records::{self, whole_batches};
use crate::log::{RecordBatchHeader, HEADER_SIZE, LOG_OVERHEAD};

/// The only record batch format the coordinators read (v2).
const MAGIC_V2: i8 = 2;
/// The CRC covers a batch from its attributes (byte 21) to its end.
const CRC_FROM: usize = 21;

/// One record read back from the log.
#[derive(Debug)]
pub struct StoredRecord {
    pub offset: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
}

/// One batch read back: control batches (transaction markers) carry no coordinator
/// records; `next_offset` is where the next batch starts, also for an emptied batch.
#[derive(Debug)]
pub struct StoredBatch {
    pub control: bool,
    /// The batch's producer when it is transactional (a producer's offset commits, or a
    /// marker ending its transaction).
    pub transactional_producer: Option<i64>,
    /// What a control batch says, when it ends a transaction.
    pub marker: Option<EndTxnMarker>,
    pub base_offset: i64,
    pub next_offset: i64,
    pub records: Vec<StoredRecord>,
}

/// Bytes an uncompressed record takes at least (length, attributes, timestamp delta,
/// offset delta, key length, value length, header count: one byte each).
const MIN_RECORD_BYTES: usize = 7;
/// Records a compressed batch may claim per byte it holds: no codec Kafka uses
/// compresses a record below this.
const MAX_COMPRESSED_RECORDS_PER_BYTE: usize = 64;

/// Encodes key/value records (None: a tombstone) as one uncompressed v2 batch with
/// CreateTime `now_ms`, as Kafka's coordinators write them.
pub fn encode(records: Vec<(Bytes, Option<Bytes>)>, now_ms: i64) -> Result<Bytes, String> {
    encode_for(records, now_ms, None)
}

/// `encode`, as `producer`'s (id, epoch) transactional batch when given: a
/// transactional offset commit, stored as Kafka's coordinator stores it (base sequence 0,
/// which the log does not check for a coordinator's append).
pub fn encode_for(
    records: Vec<(Bytes, Option<Bytes>)>,
    now_ms: i64,
    producer: Option<(i64, i16)>,
) -> Result<Bytes, String> {
    let (producer_id, producer_epoch, first_sequence) = match producer {
        Some((id, epoch)) => (id, epoch, 0),
        None => (-1, -1, -1),
    };
    let records: Vec<Record> = records
        .into_iter()
        .enumerate()
        .map(|(i, (key, value))| Record {
            transactional: producer.is_some(),
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // The encoder starts a new batch wherever offset - sequence changes; a
            // sequence a fixed distance from the offset keeps every record in one batch
            // whose base sequence is -1 (no producer) or 0 (a transactional commit).
            sequence: first_sequence + i as i32,
            timestamp: now_ms,
            key: Some(key),
            value,
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, records.iter(), &options).map_err(|e| e.to_string())?;
    Ok(buf.freeze())
}

/// Decodes the whole batches in `bytes` (a trailing partial batch, as a size-limited
/// read may end with, is left for the next read). An error names the offset of the
/// first batch that is not sound.
pub fn decode_stored(bytes: &Bytes) -> Result<Vec<StoredBatch>, String> {
    let mut out = Vec::new();
    let mut consumed = 0;
    for (header, raw) in whole_batches(bytes) {
        consumed += raw.len();
        out.push(decode_batch(&header, raw)?);
    }
    // `whole_batches` stops at a partial batch, and at a length no batch can have.
    let rest = &bytes[consumed..];
    if rest.len() >= HEADER_SIZE {
        let header = RecordBatchHeader::parse(rest).map_err(|e| e.to_string())?;
        if header.batch_length() < (HEADER_SIZE - LOG_OVERHEAD) as i32 {
            return Err(format!(
                "batch at offset {}: length {} is smaller than a header",
                header.base_offset(),
                header.batch_length()
            ));
        }
    }
    Ok(out)
}

/// One whole batch: its header checked, then its records walked.
fn decode_batch(header: &RecordBatchHeader, raw: &[u8]) -> Result<StoredBatch, String> {
    let at = header.base_offset();
    if header.magic() != MAGIC_V2 {
        return Err(format!("batch at offset {at}: magic {}", header.magic()));
    }
    if crc32c::crc32c(&raw[CRC_FROM..]) != header.crc() {
        return Err(format!("batch at offset {at}: CRC mismatch"));
    }
    let count = usize::try_from(header.records_count())
        .map_err(|_| format!("batch at offset {at}: negative record count"))?;
    let size = raw.len();
    let room = size - HEADER_SIZE;
    let plausible = match header.compression_codec() {
        0 => room / MIN_RECORD_BYTES,
        _ => room.saturating_mul(MAX_COMPRESSED_RECORDS_PER_BYTE),
    };
    if count > plausible {
        return Err(format!(
            "batch at offset {at}: {count} records cannot fit in {size} bytes"
        ));
    }
    // Control batches (transaction markers) hold no coordinator records.
    let mut stored = Vec::new();
    if !header.is_control() {
        let walk = records::records(raw).map_err(|e| format!("batch at offset {at}: {e}"))?;
        for record in walk {
            let r = record.map_err(|e| format!("batch at offset {at}: {e}"))?;
            stored.push(StoredRecord {
                offset: r.offset,
                key: r.key,
                value: r.value,
            });
        }
    }
    let marker = match header.is_control() {
        true => control::read_marker(raw).map_err(|e| format!("batch at offset {at}: {e}"))?,
        false => None,
    };
    Ok(StoredBatch {
        control: header.is_control(),
        transactional_producer: header.is_transactional().then(|| header.producer_id()),
        marker,
        base_offset: at,
        next_offset: header.next_offset(),
        records: stored,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(n: usize) -> Bytes {
        let records = (0..n)
            .map(|i| (Bytes::from(format!("k{i}")), Some(Bytes::from("v"))))
            .collect();
        encode(records, 1_700_000_000_000).unwrap()
    }

    #[test]
    fn written_batches_read_back_with_their_offsets() {
        let mut two = BytesMut::from(&batch(3)[..]);
        let mut second = BytesMut::from(&batch(1)[..]);
        second[..8].copy_from_slice(&3i64.to_be_bytes());
        two.extend_from_slice(&second);
        let decoded = decode_stored(&two.freeze()).unwrap();
        assert_eq!(decoded.len(), 2);
        assert_eq!(decoded[0].next_offset, 3);
        assert_eq!(decoded[1].records[0].offset, 3);
        assert_eq!(decoded[1].next_offset, 4);
        assert_eq!(decoded[0].records[2].key.as_deref(), Some(&b"k2"[..]));
    }

    #[test]
    fn a_trailing_partial_batch_waits_for_the_next_read() {
        let whole = batch(2);
        let mut bytes = BytesMut::from(&whole[..]);
        bytes.extend_from_slice(&whole[..whole.len() - 5]);
        assert_eq!(decode_stored(&bytes.freeze()).unwrap().len(), 1);
    }

    #[test]
    fn compressed_batches_read_back_through_the_bounded_reader() {
        use crate::log::test_util;
        let mut rs = test_util::records(&[b"v0", b"v1"], 1_000, None);
        rs[0].key = Some(Bytes::from_static(b"k0"));
        for codec in [Compression::Gzip, Compression::Zstd] {
            let decoded = decode_stored(&test_util::encode(&rs, codec)).unwrap();
            let records = &decoded[0].records;
            assert_eq!(records.len(), 2, "{codec:?}");
            assert_eq!(records[0].key.as_deref(), Some(&b"k0"[..]));
            assert_eq!(records[1].value.as_deref(), Some(&b"v1"[..]));
            assert_eq!(records[1].offset, 1);
        }
    }

    #[test]
    fn corrupt_batches_are_errors_not_panics() {
        let good = batch(2);
        // A flipped payload byte: the CRC no longer matches.
        let mut flipped = BytesMut::from(&good[..]);
        let last = flipped.len() - 1;
        flipped[last] ^= 0xff;
        assert!(decode_stored(&flipped.freeze()).is_err());
        // A record count far beyond the bytes, under a recomputed CRC.
        let mut forged = BytesMut::from(&good[..]);
        forged[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
        let crc = crc32c::crc32c(&forged[21..]);
        forged[17..21].copy_from_slice(&crc.to_be_bytes());
        let err = decode_stored(&forged.freeze()).unwrap_err();
        assert!(err.contains("cannot fit"), "{err}");
        // Marked gzip, but not gzip.
        let mut gzip = BytesMut::from(&good[..]);
        gzip[22] |= 1;
        let crc = crc32c::crc32c(&gzip[21..]);
        gzip[17..21].copy_from_slice(&crc.to_be_bytes());
        assert!(decode_stored(&gzip.freeze()).is_err());
    }
}
