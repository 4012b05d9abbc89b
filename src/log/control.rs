//! Transaction markers: the control batches that end a transaction in a partition
//! (Kafka's `EndTransactionMarker` and `ControlRecordType`).
//!
//! A marker batch has the control and transactional attribute bits set, the
//! transaction's producer id and epoch, no sequence, and one record: key
//! `i16 version (0), i16 type (0 ABORT, 1 COMMIT)`, value
//! `i16 version (0), i32 coordinatorEpoch`.

use bytes::{BufMut, Bytes, BytesMut};

use super::batch::{compute_crc, HEADER_SIZE, MAGIC_V2};
use super::records;
use super::LogError;

const ATTR_TRANSACTIONAL: i16 = 0x10;
const ATTR_CONTROL: i16 = 0x20;
const TYPE_ABORT: i16 = 0;
const TYPE_COMMIT: i16 = 1;

/// How a transaction ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnResult {
    Commit,
    Abort,
}

/// What a marker says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndTxnMarker {
    pub result: TxnResult,
    pub coordinator_epoch: i32,
}

/// One marker batch at offset 0 (the log assigns its offset), CreateTime `timestamp`.
pub fn marker_batch(
    producer_id: i64,
    producer_epoch: i16,
    marker: EndTxnMarker,
    timestamp: i64,
) -> Bytes {
    let kind = match marker.result {
        TxnResult::Abort => TYPE_ABORT,
        TxnResult::Commit => TYPE_COMMIT,
    };
    // The record: attributes, timestamp delta 0, offset delta 0, a 4-byte key, a 6-byte
    // value and no headers; varints are zigzag (4 → 8, 6 → 12).
    let mut body = BytesMut::with_capacity(16);
    body.put_u8(0);
    body.put_u8(0);
    body.put_u8(0);
    body.put_u8(8);
    body.put_i16(0);
    body.put_i16(kind);
    body.put_u8(12);
    body.put_i16(0);
    body.put_i32(marker.coordinator_epoch);
    body.put_u8(0);
    let mut b = BytesMut::with_capacity(HEADER_SIZE + 1 + body.len());
    b.put_i64(0); // base offset
    b.put_i32((HEADER_SIZE - 12 + 1 + body.len()) as i32);
    b.put_i32(-1); // partition leader epoch, stamped by the log
    b.put_i8(MAGIC_V2);
    b.put_u32(0); // CRC, below
    b.put_i16(ATTR_TRANSACTIONAL | ATTR_CONTROL);
    b.put_i32(0); // last offset delta
    b.put_i64(timestamp);
    b.put_i64(timestamp);
    b.put_i64(producer_id);
    b.put_i16(producer_epoch);
    b.put_i32(-1); // base sequence
    b.put_i32(1); // records
    b.put_u8((body.len() as u8) << 1);
    b.extend_from_slice(&body);
    let crc = compute_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b.freeze()
}

/// The marker a stored control batch holds; `None` for other control records (KRaft's),
/// which end no transaction, and for a control batch the log cleaner emptied (its
/// transaction's records are all gone, see `cleaner::txn`).
pub fn read_marker(batch: &[u8]) -> Result<Option<EndTxnMarker>, LogError> {
    let bad = |why: &str| LogError::CorruptMessage(format!("control batch: {why}"));
    let Some(record) = records::records(batch)?.next() else {
        return Ok(None);
    };
    let record = record?;
    let key = record.key.ok_or_else(|| bad("no key"))?;
    if key.len() < 4 {
        return Err(bad("key shorter than 4 bytes"));
    }
    if i16::from_be_bytes([key[0], key[1]]) < 0 {
        return Err(bad("negative key version"));
    }
    let result = match i16::from_be_bytes([key[2], key[3]]) {
        TYPE_ABORT => TxnResult::Abort,
        TYPE_COMMIT => TxnResult::Commit,
        _ => return Ok(None),
    };
    let value = record.value.ok_or_else(|| bad("no value"))?;
    if value.len() < 6 {
        return Err(bad("marker value shorter than 6 bytes"));
    }
    Ok(Some(EndTxnMarker {
        result,
        coordinator_epoch: i32::from_be_bytes([value[2], value[3], value[4], value[5]]),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::{verify_crc, RecordBatchHeader};
    use crate::log::test_util::decode_all;

    #[test]
    fn a_marker_reads_back_as_kafka_decodes_it() {
        let marker = EndTxnMarker {
            result: TxnResult::Abort,
            coordinator_epoch: 7,
        };
        let b = marker_batch(42, 3, marker, 1_000);
        verify_crc(&b).unwrap();
        let h = RecordBatchHeader::parse(&b).unwrap();
        assert!(h.is_control() && h.is_transactional());
        assert_eq!(
            (h.producer_id(), h.producer_epoch(), h.records_count()),
            (42, 3, 1)
        );
        assert_eq!(h.size_in_bytes(), b.len());
        assert_eq!(read_marker(&b).unwrap(), Some(marker));
        // kafka-protocol's decoder (Kafka's own layout) sees one control record.
        let sets = decode_all(&b);
        let r = &sets[0].records[0];
        assert!(r.control && r.transactional);
        assert_eq!(r.key.as_deref(), Some(&[0u8, 0, 0, 0][..]));
        assert_eq!(r.value.as_deref(), Some(&[0u8, 0, 0, 0, 0, 7][..]));
    }

    /// The cleaner cuts a marker whose transaction is gone down to its header when it is
    /// its producer's last record: no marker to read, and nothing for producer state to
    /// replay (a coordinator loading a compacted `__consumer_offsets` meets such batches).
    #[test]
    fn a_control_batch_the_cleaner_emptied_ends_nothing() {
        use crate::log::batch::{set_base_offset, NewBatch};
        use crate::log::producer_state::ProducerStateManager;
        use crate::log::test_util::txn_batch_bytes;
        let dir = tempfile::tempdir().unwrap();
        let marker = EndTxnMarker {
            result: TxnResult::Commit,
            coordinator_epoch: 1,
        };
        let full = marker_batch(42, 3, marker, 1_000);
        let mut empty = NewBatch {
            records_count: 0,
            ..NewBatch::like(&RecordBatchHeader::parse(&full).unwrap())
        }
        .encode(&[]);
        set_base_offset(&mut empty, 1);
        assert_eq!(read_marker(&empty).unwrap(), None);
        let mut state = ProducerStateManager::new(dir.path(), 0);
        let data = txn_batch_bytes(&[b"x"], 1_000, (42, 3, 0));
        state.replay(&RecordBatchHeader::parse(&data).unwrap());
        assert!(state.has_ongoing_txn(42, 3));
        assert_eq!(
            state.replay(&RecordBatchHeader::parse(&empty).unwrap()),
            None
        );
        assert!(state.has_ongoing_txn(42, 3), "still open");
    }
}
