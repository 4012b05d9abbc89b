use std::collections::HashMap;

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions,
    TimestampType as KTimestampType,
};

use super::*;
use crate::log::batch;
use crate::log::control::{marker_batch, EndTxnMarker, TxnResult};

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

/// One batch through a pass that saw no transaction before it.
fn filter(batch: &[u8], round: &Round<'_>) -> Result<Filtered, LogError> {
    filter_batch(batch, round, &mut TxnTracker::default())
}

fn last_data(offset: i64) -> LastRecord {
    LastRecord {
        last_data_offset: Some(offset),
        producer_epoch: 0,
    }
}

struct Fixture {
    map: OffsetMap,
    producers: HashMap<i64, LastRecord>,
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
        }
    }

    fn round(&self, now_ms: i64) -> Round<'_> {
        Round {
            map: &self.map,
            now_ms,
            delete_retention_ms: 1_000,
            producers_last_records: &self.producers,
            upper_bound_offset: 1_000,
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
    let out = filter(&whole, &f.round(0)).unwrap();
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
    let Outcome::Rebuilt(bytes) = filter(&mixed, &f.round(0)).unwrap().outcome else {
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
        filter(&mixed, &f.round(0)).unwrap().outcome,
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
    let Outcome::Rebuilt(bytes) = filter(&batch, &f.round(0)).unwrap().outcome else {
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
    let Outcome::Rebuilt(first) = filter(&batch, &f.round(10_000)).unwrap().outcome else {
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
        filter(&first, &f.round(10_999)).unwrap().outcome,
        Outcome::Whole
    );
    let Outcome::Rebuilt(second) = filter(&first, &f.round(11_000)).unwrap().outcome else {
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
        filter(&batch, &f.round(0)).unwrap().outcome,
        Outcome::Dropped
    );
    f.producers.insert(42, last_data(4));
    let Outcome::Rebuilt(empty) = filter(&batch, &f.round(0)).unwrap().outcome else {
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
    f.producers.insert(42, last_data(9));
    assert_eq!(
        filter(&batch, &f.round(0)).unwrap().outcome,
        Outcome::Dropped
    );
    // The last batch before where the round stops keeps its header too.
    let mut round = f.round(0);
    round.upper_bound_offset = 5;
    assert!(
        matches!(filter(&batch, &round).unwrap().outcome, Outcome::Rebuilt(b) if b.len() == batch::HEADER_SIZE)
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
        let Outcome::Rebuilt(bytes) = filter(&batch, &f.round(0)).unwrap().outcome else {
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

/// `keyed` with the transactional bit set (and the CRC fixed).
fn transactional(
    base: i64,
    entries: &[(&str, Option<&str>)],
    producer: (i64, i16, i32),
) -> Vec<u8> {
    let mut batch = keyed(base, entries, Some(producer), Compression::None);
    batch[22] |= 0x10;
    batch::set_codec_and_length(&mut batch, 0);
    batch
}

fn marker(base: i64, producer_id: i64, result: TxnResult) -> Vec<u8> {
    let m = EndTxnMarker {
        result,
        coordinator_epoch: 3,
    };
    let mut b = marker_batch(producer_id, 0, m, 1_000).to_vec();
    batch::set_base_offset(&mut b, base);
    b
}

#[test]
fn committed_records_are_compacted_and_a_marker_waits_for_its_horizon() {
    let mut f = Fixture::new(&[("a", 50), ("b", 1)], 50);
    let data = transactional(0, &[("a", Some("old")), ("b", Some("kept"))], (1, 0, 0));
    let commit = marker(2, 1, TxnResult::Commit);
    // First pass: "a" is superseded, "b" stays; the marker stays with its data.
    let mut txns = TxnTracker::default();
    let Outcome::Rebuilt(bytes) = filter_batch(&data, &f.round(0), &mut txns).unwrap().outcome
    else {
        panic!("a committed batch is compacted");
    };
    assert_eq!(decoded(&bytes), vec![(1, "b".into(), Some("kept".into()))]);
    assert!(RecordBatchHeader::parse(&bytes).unwrap().is_transactional());
    let kept = filter_batch(&commit, &f.round(0), &mut txns).unwrap();
    assert_eq!(kept.outcome, Outcome::Whole);
    // Once "b" is superseded too, the batch goes, and the marker (seen in the same pass
    // after it) still stays: this pass saw a batch of its transaction.
    let f2 = Fixture::new(&[("a", 50), ("b", 50)], 50);
    let mut txns = TxnTracker::default();
    assert_eq!(
        filter_batch(&data, &f2.round(0), &mut txns)
            .unwrap()
            .outcome,
        Outcome::Dropped
    );
    assert_eq!(
        filter_batch(&commit, &f2.round(0), &mut txns)
            .unwrap()
            .outcome,
        Outcome::Whole
    );
    // The next pass finds it alone: stamped with now + delete.retention.ms.
    let Outcome::Rebuilt(stamped) = filter(&commit, &f2.round(5_000)).unwrap().outcome else {
        panic!("the marker gets a delete horizon");
    };
    let h = RecordBatchHeader::parse(&stamped).unwrap();
    assert_eq!(h.delete_horizon_ms(), Some(6_000));
    assert!(h.is_control() && h.is_transactional());
    assert_eq!((h.base_offset(), h.records_count()), (2, 1));
    batch::verify_crc(&stamped).unwrap();
    assert_eq!(
        crate::log::control::read_marker(&stamped)
            .unwrap()
            .map(|m| m.result),
        Some(TxnResult::Commit),
        "the marker still reads as a commit"
    );
    // Before the horizon it stays; from it on it goes, unless it is the producer's last
    // record (then its header carries the producer's epoch).
    assert_eq!(
        filter(&stamped, &f2.round(5_999)).unwrap().outcome,
        Outcome::Whole
    );
    assert_eq!(
        filter(&stamped, &f2.round(6_000)).unwrap().outcome,
        Outcome::Dropped
    );
    f.producers.insert(
        1,
        LastRecord {
            last_data_offset: None,
            producer_epoch: 0,
        },
    );
    let mut last = Fixture::new(&[], 50);
    last.producers = f.producers;
    let Outcome::Rebuilt(empty) = filter(&stamped, &last.round(6_000)).unwrap().outcome else {
        panic!("the producer's last marker keeps its header");
    };
    assert_eq!(empty.len(), batch::HEADER_SIZE);
    let h = RecordBatchHeader::parse(&empty).unwrap();
    assert!(h.is_control() && h.records_count() == 0);
}

#[test]
fn an_aborted_transaction_goes_whole_and_its_marker_keeps_its_index_entry() {
    let f = Fixture::new(&[("a", 0)], 50);
    let abort = AbortedTxn {
        producer_id: 2,
        first_offset: 0,
        last_offset: 1,
        last_stable_offset: 2,
    };
    let data = transactional(0, &[("a", Some("aborted"))], (2, 0, 0));
    let end = marker(1, 2, TxnResult::Abort);
    let mut txns = TxnTracker::new([abort]);
    let out = filter_batch(&data, &f.round(0), &mut txns).unwrap();
    assert_eq!(
        out.outcome,
        Outcome::Dropped,
        "the latest record of its key, but aborted"
    );
    let kept = filter_batch(&end, &f.round(0), &mut txns).unwrap();
    assert_eq!(
        (kept.outcome, kept.aborted_txn),
        (Outcome::Whole, Some(abort))
    );
    // A later pass: nothing of it left, so the marker is stamped and loses its entry.
    let mut txns = TxnTracker::new([abort]);
    let later = filter_batch(&end, &f.round(0), &mut txns).unwrap();
    assert!(matches!(later.outcome, Outcome::Rebuilt(_)));
    assert_eq!(later.aborted_txn, None);
}
