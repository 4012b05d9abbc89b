//! KIP-74 over TCP: a fetch always makes progress. The first partition with data returns
//! its first batch whole however small `partition_max_bytes` or `max_bytes` are; a later
//! partition whose first batch does not fit what is left is answered with no records (as
//! Kafka does from Fetch v3 on), never with a cut-off piece of a batch alone. For both
//! record paths (batches under 16 KiB are copied into the response, larger ones sent from
//! the file), both isolation levels, and inside fetch sessions.

use crate::common;

use bytes::Bytes;
use common::*;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;

/// Batch sizes for the two record paths: copied into the response, and sent from the file.
const COPIED: usize = 8 * 1024;
const SENT_FROM_FILE: usize = 64 * 1024;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// One uncompressed batch of `records` values of `value_len` bytes each.
fn big_batch(records: usize, value_len: usize) -> Bytes {
    let value = Bytes::from(vec![b'v'; value_len]);
    plain_batch(
        (0..records).map(|i| (Some(Bytes::from(format!("k{i}"))), Some(value.clone()))),
        1_700_000_000_000,
        Compression::None,
    )
}

struct Limits {
    max_bytes: i32,
    partition_max_bytes: i32,
    read_committed: bool,
    /// Session id and epoch (0, 0 asks for a new session; 0, -1 is sessionless).
    session: (i32, i32),
}

fn fetch(topic: &str, partitions: &[(i32, i64)], l: &Limits) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(l.max_bytes)
        .with_isolation_level(i8::from(l.read_committed))
        .with_session_id(l.session.0)
        .with_session_epoch(l.session.1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(
                partitions
                    .iter()
                    .map(|&(p, offset)| {
                        FetchPartition::default()
                            .with_partition(p)
                            .with_fetch_offset(offset)
                            .with_partition_max_bytes(l.partition_max_bytes)
                    })
                    .collect(),
            )])
}

/// The batches of a partition's records as (base offset, records in it), and the length
/// of a partial batch after them (0 when the records end on a batch boundary).
fn batches(records: &Bytes) -> (Vec<(i64, i32)>, usize) {
    let mut out = Vec::new();
    let mut at = 0;
    while records.len() - at >= 61 {
        let base = i64::from_be_bytes(records[at..at + 8].try_into().unwrap());
        let len = i32::from_be_bytes(records[at + 8..at + 12].try_into().unwrap()) as usize;
        if records.len() - at < 12 + len {
            break;
        }
        let count = i32::from_be_bytes(records[at + 57..at + 61].try_into().unwrap());
        out.push((base, count));
        at += 12 + len;
    }
    (out, records.len() - at)
}

/// The record bytes of each answered partition, by partition index.
fn answered(resp: &FetchResponse) -> Vec<(i32, Bytes)> {
    assert_eq!(resp.error_code, 0);
    resp.responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| {
            assert_eq!(p.error_code, 0, "partition {}", p.partition_index);
            (p.partition_index, p.records.clone().unwrap_or_default())
        })
        .collect()
}

/// Topic `t` with partition 0 holding one small batch (offset 0) and partitions 1 and 2
/// each holding two batches of one record of `size` bytes (offsets 0 and 1).
async fn setup(c: &mut Client, t: &str, size: usize) {
    assert_eq!(c.create_topic(t, 3).await, 0);
    assert_eq!(c.produce(t, 0, big_batch(1, 100), 1).await, (0, 0));
    for p in 1..3 {
        assert_eq!(c.produce(t, p, big_batch(1, size), 1).await, (0, 0));
        assert_eq!(c.produce(t, p, big_batch(1, size), 1).await, (0, 1));
    }
}

#[tokio::test]
async fn the_first_batch_is_whole_and_later_partitions_are_skipped_not_cut() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    for (t, size) in [("copied", COPIED), ("from-file", SENT_FROM_FILE)] {
        setup(&mut c, t, size).await;
        for read_committed in [false, true] {
            // The partition limit, the request limit, and both, below one batch.
            let cases = [(50 << 20, 1024), (1024, 1 << 20), (1024, 1024)];
            for (max_bytes, partition_max_bytes) in cases {
                let l = Limits {
                    max_bytes,
                    partition_max_bytes,
                    read_committed,
                    session: (0, -1),
                };
                let what = format!("{t}, max_bytes {max_bytes}, partition {partition_max_bytes}, read_committed {read_committed}");
                // First partition with data: its first batch whole, only that one.
                let got = answered(&c.send(&fetch(t, &[(1, 0), (2, 0)], &l), 12).await);
                assert_eq!(got[0].0, 1);
                assert_eq!(batches(&got[0].1), (vec![(0, 1)], 0), "{what}");
                // The later partition's batch does not fit what is left: no records.
                assert_eq!(got[1].0, 2);
                assert!(got[1].1.is_empty(), "{what}: {} bytes", got[1].1.len());

                // A small batch first: then the big first batch of the later partition
                // is skipped rather than cut, whichever limit it exceeds.
                let got = answered(&c.send(&fetch(t, &[(0, 0), (1, 1)], &l), 12).await);
                assert_eq!(batches(&got[0].1), (vec![(0, 1)], 0), "{what}");
                assert!(got[1].1.is_empty(), "{what}: {} bytes", got[1].1.len());

                // Alone, it is read whole: the consumer makes progress.
                let got = answered(&c.send(&fetch(t, &[(1, 1)], &l), 12).await);
                assert_eq!(batches(&got[0].1), (vec![(1, 1)], 0), "{what}");
            }
        }
    }
    b.stop().await;
}

#[tokio::test]
async fn sessions_make_progress_with_limits_below_a_batch() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    for (t, size) in [("s-copied", COPIED), ("s-from-file", SENT_FROM_FILE)] {
        setup(&mut c, t, size).await;
        let mut l = Limits {
            max_bytes: 50 << 20,
            partition_max_bytes: 1024,
            read_committed: true,
            session: (0, 0),
        };
        // A full fetch opening a session: partition 1's first batch whole, 2 skipped.
        let resp = c.send(&fetch(t, &[(1, 0), (2, 0)], &l), 12).await;
        let id = resp.session_id;
        assert_ne!(id, 0, "a session is offered");
        let got = answered(&resp);
        assert_eq!(batches(&got[0].1), (vec![(0, 1)], 0));
        assert!(got[1].1.is_empty());
        // Incremental fetches, each moving partition 1 on: every batch of both
        // partitions arrives whole, one per response.
        let mut next = [1i64, 0];
        let mut seen = Vec::new();
        for epoch in 1..=8 {
            l.session = (id, epoch);
            let resp = c
                .send(&fetch(t, &[(1, next[0]), (2, next[1])], &l), 12)
                .await;
            for (p, records) in answered(&resp) {
                let (whole, partial) = batches(&records);
                assert!(whole.len() == 1 || records.is_empty(), "{t}: {whole:?}");
                assert_eq!(partial, 0, "{t}: a cut batch alone");
                for (base, count) in whole {
                    seen.push((p, base));
                    next[(p - 1) as usize] = base + i64::from(count);
                }
            }
            if next == [2, 2] {
                break;
            }
        }
        seen.sort();
        assert_eq!(seen, vec![(1, 1), (2, 0), (2, 1)], "{t}");
    }
    b.stop().await;
}

#[tokio::test]
async fn read_committed_stops_at_the_last_stable_offset_on_a_batch_boundary() {
    use common::txn::{
        add_partition, find_txn_coordinator, init, produce as produce_in_txn, txn_batch, OVERRIDES,
        TOPIC,
    };
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), OVERRIDES).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic(TOPIC, 1).await, 0);
    let found = find_txn_coordinator(&mut c, "tx").await;
    assert_eq!(found.coordinators[0].error_code, 0, "{found:?}");
    // Offsets 0 and 1: two big committed batches; then an open transaction from 2.
    assert_eq!(
        c.produce(TOPIC, 0, big_batch(1, SENT_FROM_FILE), 1).await,
        (0, 0)
    );
    assert_eq!(
        c.produce(TOPIC, 0, big_batch(1, SENT_FROM_FILE), 1).await,
        (0, 1)
    );
    let producer = init(&mut c, "tx", (-1, -1)).await;
    let (pid, epoch) = (producer.producer_id.0, producer.producer_epoch);
    assert_eq!(add_partition(&mut c, "tx", pid, epoch, 0).await, 0);
    let open = txn_batch(&["open"], (pid, epoch, 0));
    assert_eq!(produce_in_txn(&mut c, "tx", open).await, (0, 2));
    let l = Limits {
        max_bytes: 100 << 20,
        partition_max_bytes: 100 << 20,
        read_committed: true,
        session: (0, -1),
    };
    let got = answered(&c.send(&fetch(TOPIC, &[(0, 0)], &l), 12).await);
    assert_eq!(batches(&got[0].1), (vec![(0, 1), (1, 1)], 0));
    // With a partition limit inside the second batch: the first whole, nothing cut
    // behind it at the stable offset; from offset 1, that batch whole.
    let l = Limits {
        partition_max_bytes: (SENT_FROM_FILE + SENT_FROM_FILE / 2) as i32,
        ..l
    };
    let got = answered(&c.send(&fetch(TOPIC, &[(0, 0)], &l), 12).await);
    assert_eq!(batches(&got[0].1).0, vec![(0, 1)]);
    let got = answered(&c.send(&fetch(TOPIC, &[(0, 1)], &l), 12).await);
    assert_eq!(batches(&got[0].1), (vec![(1, 1)], 0));
    // At the stable offset nothing is read, though records lie past it.
    let got = answered(&c.send(&fetch(TOPIC, &[(0, 2)], &l), 12).await);
    assert!(got[0].1.is_empty());
    b.stop().await;
}
