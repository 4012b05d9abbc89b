//! Builders for real record batches (via kafka-protocol's encoder) used by the tests.

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, RecordSet,
    TimestampType as KTimestampType,
};

/// Records with offsets 0..n and timestamps base_ts + i. `producer` is
/// `(producer_id, epoch, base_sequence)` for an idempotent batch.
pub fn records(values: &[&[u8]], base_ts: i64, producer: Option<(i64, i16, i32)>) -> Vec<Record> {
    let (pid, epoch, base_seq) = producer.unwrap_or((-1, -1, -1));
    values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: pid,
            producer_epoch: epoch,
            timestamp_type: KTimestampType::Creation,
            offset: i as i64,
            // The encoder derives baseSequence from the first record and splits batches where
            // offset - sequence changes, so non-idempotent records still need a stepping value.
            sequence: if producer.is_some() {
                base_seq + i as i32
            } else {
                i as i32 - 1
            },
            timestamp: base_ts + i as i64,
            key: None,
            value: Some(Bytes::copy_from_slice(v)),
            headers: Default::default(),
        })
        .collect()
}

pub fn encode(records: &[Record], compression: Compression) -> Bytes {
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .expect("encode test batch");
    buf.freeze()
}

/// One uncompressed batch.
pub fn batch_bytes(values: &[&[u8]], base_ts: i64, producer: Option<(i64, i16, i32)>) -> Bytes {
    encode(&records(values, base_ts, producer), Compression::None)
}

pub fn decode_all(bytes: &Bytes) -> Vec<RecordSet> {
    let mut b = bytes.clone();
    RecordBatchDecoder::decode_all(&mut b).expect("decode")
}

/// `n` single-record batches of `value_len` bytes each, concatenated.
pub fn many_batches(n: usize, value_len: usize) -> Vec<Bytes> {
    (0..n)
        .map(|i| {
            batch_bytes(
                &[&vec![b'a' + (i % 26) as u8; value_len]],
                1_000 + i as i64,
                None,
            )
        })
        .collect()
}

/// One uncompressed transactional batch of `producer` = (producer id, epoch, base sequence).
pub fn txn_batch_bytes(values: &[&[u8]], base_ts: i64, producer: (i64, i16, i32)) -> Bytes {
    let mut records = records(values, base_ts, Some(producer));
    for r in &mut records {
        r.transactional = true;
    }
    encode(&records, Compression::None)
}
