//! The record batches producers send: built once per run, since a broker assigns offsets
//! and a producer without an id sends no sequence, so the same bytes can be sent again
//! and again and the generator spends its CPU on the wire, not on encoding.

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

/// One batch of `count` records of `size`-byte values (no key), values of random letters
/// as Kafka's producer-perf-test sends them.
pub fn batch(count: usize, size: usize, compression: Compression, seed: u64) -> Bytes {
    let mut rng = seed | 1;
    let mut letter = || {
        // xorshift64: cheap, and letters compress like text rather than like zeros.
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        b'A' + (rng % 26) as u8
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // The encoder starts a new batch where sequences are not consecutive; from -1
            // they are, and the batch's base sequence is -1 (no producer id).
            sequence: i as i32 - 1,
            timestamp: now,
            key: None,
            value: Some((0..size).map(|_| letter()).collect::<Vec<u8>>().into()),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression,
    };
    RecordBatchEncoder::encode(&mut buf, records.iter(), &options)
        .expect("encoding records built here cannot fail");
    buf.freeze()
}

/// How many records the whole batches in `records` hold, and the offset after the last
/// one (None if there is no whole batch). Reads batch headers only: what a follower does,
/// so counting costs the consumer next to nothing.
pub fn count(records: &[u8]) -> (u64, Option<i64>) {
    let mut n = 0u64;
    let mut next = None;
    for (header, _) in skua::log::records::whole_batches(records) {
        n += u64::try_from(header.records_count()).unwrap_or(0);
        next = Some(header.next_offset());
    }
    (n, next)
}
