use std::collections::HashMap;

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions,
    TimestampType as KTimestampType,
};

use super::*;
use crate::log::batch;

/// A batch at `base` of (key, value) records stamped 1000 + i; `producer` is
/// (id, epoch, base sequence).
fn keyed(
    base: i64,
    entries: &[(&str, Option<&str>)],
    producer: Option<(i64, i16, i32)>,
    compression: Compression,
) -> Vec<u8> {
    let (pid, epoch, seq) = producer.unwrap_or((-1, -1, -1));
    let records: Vec<Record> = entries
        .iter()
        .enumerate()
        .map(|(i, (k, v))| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 7,
            producer_id: pid,
            producer_epoch: epoch,
            timestamp_type: KTimestampType::Creation,
            offset: base + i as i64,
            sequence: if pid >= 0 {
                seq + i as i32
            } else {
                i as i32 - 1
            },
            timestamp: 1000 + i as i64,
            key: Some(Bytes::copy_from_slice(k.as_bytes())),
            value: v.map(|v| Bytes::copy_from_slice(v.as_bytes())),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .unwrap();
    let mut out = buf.to_vec();
    batch::set_base_offset(&mut out, base);
    out
}

/// (offset, key, value) of every record in `bytes`.
fn decoded(bytes: &[u8]) -> Vec<(i64, String, Option<String>)> {
    let mut b = Bytes::copy_from_slice(bytes);
    RecordBatchDecoder::decode_all(&mut b)
        .unwrap()
        .into_iter()
        .flat_map(|set| set.records)
        .map(|r| {
            let s = |b: &Bytes| String::from_utf8_lossy(b).into_owned();
            (
                r.offset,
                s(r.key.as_ref().unwrap()),
                r.value.as_ref().map(s),
            )
        })
        .collect()
}

struct Fixture {
    map: OffsetMap,
    producers: HashMap<i64, i64>,
    aborted: AbortedRanges,
}

impl Fixture {
    fn new(latest: &[(&str, i64)], map_end: i64) -> Self {
        let mut map = OffsetMap::new(1 << 16, 0.9);
        for (k, o) in latest {
            map.put(k.as_bytes(), *o);
        }
        map.update_latest_offset(map_end);
        Fixture {
            map,
            producers: HashMap::new(),
            aborted: AbortedRanges::default(),
        }
    }

    fn round(&self, now_ms: i64) -> Round<'_> {
        Round {
            map: &self.map,
            now_ms,
            delete_retention_ms: 1_000,
            producers_last_offsets: &self.producers,
            upper_bound_offset: 1_000,
            aborted: &self.aborted,
        }
    }
}

#[test]
fn only_the_latest_record_of_each_key_stays() {
    let f = Fixture::new(&[("a", 12), ("b", 11)], 20);
    // Nothing superseded: copied as it is.
    let whole = keyed(
        11,
        &[("b", Some("b1")), ("a", Some("a2"))],
        None,
        Compression::None,
    );
    let out = filter_batch(&whole, &f.round(0)).unwrap();
    assert_eq!(out.outcome, Outcome::Whole);
    assert_eq!((out.records_read, out.records_kept), (2, 2));
    // "a" at 10 is superseded by 12: the batch is rebuilt around "c".
    let mixed = keyed(
        9,
        &[("c", Some("c0")), ("a", Some("a1")), ("z", Some("z"))],
        None,
        Compression::None,
    );
    let f = Fixture::new(&[("a", 12), ("z", 30)], 20);
    let Outcome::Rebuilt(bytes) = filter_batch(&mixed, &f.round(0)).unwrap().outcome else {
        panic!("expected a rebuilt batch");
    };
    assert_eq!(decoded(&bytes), vec![(9, "c".into(), Some("c0".into()))]);
    let h = RecordBatchHeader::parse(&bytes).unwrap();
    let original = RecordBatchHeader::parse(&mixed).unwrap();
    assert_eq!((h.base_offset(), h.last_offset()), (9, 11), "offsets kept");
    assert_eq!(
        h.partition_leader_epoch(),
        original.partition_leader_epoch()
    );
    assert_eq!(h.records_count(), 1);
    assert_eq!(h.max_timestamp(), 1000);
    batch::verify_crc(&bytes).unwrap();
    // All superseded, nobody needs the header: dropped.
    let f = Fixture::new(&[("c", 50), ("a", 50), ("z", 50)], 60);
    assert_eq!(
        filter_batch(&mixed, &f.round(0)).unwrap().outcome,
        Outcome::Dropped
    );
}

#[test]
fn records_past_the_map_stay_whatever_their_key() {
    let batch = keyed(
        3,
        &[("a", Some("x")), ("a", Some("y")), ("a", Some("z"))],
        None,
        Compression::None,
    );
    // The map ends at 4, where "a" was last seen: 3 goes, 4 stays, 5 is past the map.
    let f = Fixture::new(&[("a", 4)], 4);
    let Outcome::Rebuilt(bytes) = filter_batch(&batch, &f.round(0)).unwrap().outcome else {
        panic!()
    };
    assert_eq!(
        decoded(&bytes),
        vec![
            (4, "a".into(), Some("y".into())),
            (5, "a".into(), Some("z".into()))
        ]
    );
}

#[test]
fn tombstones_get_a_delete_horizon_and_go_after_it() {
    let f = Fixture::new(&[("a", 0), ("b", 1)], 1);
    let batch = keyed(0, &[("a", None), ("b", Some("b"))], None, Compression::None);
    let Outcome::Rebuilt(first) = filter_batch(&batch, &f.round(10_000)).unwrap().outcome else {
        panic!("a tombstone's batch is stamped");
    };
    let h = RecordBatchHeader::parse(&first).unwrap();
    assert_eq!(h.delete_horizon_ms(), Some(11_000));
    assert_eq!(h.max_timestamp(), 1001);
    assert_eq!(
        decoded(&first),
        vec![(0, "a".into(), None), (1, "b".into(), Some("b".into()))],
        "record timestamps survive the new base timestamp"
    );
    // Before the horizon it stays as it is; after, the tombstone goes.
    assert_eq!(
        filter_batch(&first, &f.round(10_999)).unwrap().outcome,
        Outcome::Whole
    );
    let Outcome::Rebuilt(second) = filter_batch(&first, &f.round(11_000)).unwrap().outcome else {
        panic!()
    };
    assert_eq!(decoded(&second), vec![(1, "b".into(), Some("b".into()))]);
    let h = RecordBatchHeader::parse(&second).unwrap();
    assert_eq!(
        h.delete_horizon_ms(),
        Some(11_000),
        "the horizon stays with the batch"
    );
}

#[test]
fn an_active_producers_last_batch_and_the_rounds_last_keep_their_headers() {
    let mut f = Fixture::new(&[("a", 100)], 100);
    let batch = keyed(
        3,
        &[("a", Some("x")), ("a", Some("y"))],
        Some((42, 5, 17)),
        Compression::Lz4,
    );
    assert_eq!(
        filter_batch(&batch, &f.round(0)).unwrap().outcome,
        Outcome::Dropped
    );
    f.producers.insert(42, 4);
    let Outcome::Rebuilt(empty) = filter_batch(&batch, &f.round(0)).unwrap().outcome else {
        panic!("the producer's last batch keeps its header");
    };
    let h = RecordBatchHeader::parse(&empty).unwrap();
    assert_eq!(empty.len(), batch::HEADER_SIZE);
    assert_eq!(
        (h.base_offset(), h.last_offset(), h.records_count()),
        (3, 4, 0)
    );
    assert_eq!((h.producer_id(), h.producer_epoch()), (42, 5));
    assert_eq!((h.base_sequence(), h.last_sequence()), (17, 18));
    assert_eq!(h.compression_codec(), 0);
    batch::verify_crc(&empty).unwrap();
    // Not the producer's last batch: gone.
    f.producers.insert(42, 9);
    assert_eq!(
        filter_batch(&batch, &f.round(0)).unwrap().outcome,
        Outcome::Dropped
    );
    // The last batch before where the round stops keeps its header too.
    let mut round = f.round(0);
    round.upper_bound_offset = 5;
    assert!(
        matches!(filter_batch(&batch, &round).unwrap().outcome, Outcome::Rebuilt(b) if b.len() == batch::HEADER_SIZE)
    );
}

#[test]
fn rebuilt_batches_keep_their_codec() {
    let f = Fixture::new(&[("a", 2)], 2);
    for compression in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let batch = keyed(
            0,
            &[("a", Some("old")), ("b", Some("keep")), ("a", Some("new"))],
            Some((1, 0, 0)),
            compression,
        );
        let Outcome::Rebuilt(bytes) = filter_batch(&batch, &f.round(0)).unwrap().outcome else {
            panic!()
        };
        let h = RecordBatchHeader::parse(&bytes).unwrap();
        assert_eq!(
            h.compression_codec(),
            RecordBatchHeader::parse(&batch)
                .unwrap()
                .compression_codec()
        );
        assert_eq!(
            decoded(&bytes),
            vec![
                (1, "b".into(), Some("keep".into())),
                (2, "a".into(), Some("new".into()))
            ],
            "{compression:?}"
        );
        assert_eq!((h.base_sequence(), h.last_offset()), (0, 2));
    }
}

#[test]
fn transactional_batches_are_kept_whole() {
    let f = Fixture::new(&[("a", 50)], 50);
    let mut batch = keyed(0, &[("a", Some("x"))], Some((1, 0, 0)), Compression::None);
    // Set the transactional bit and fix the CRC.
    batch[22] |= 0x10;
    batch::set_codec_and_length(&mut batch, 0);
    assert_eq!(
        filter_batch(&batch, &f.round(0)).unwrap().outcome,
        Outcome::Whole
    );
}
