//! Retention and DeleteRecords as a client sees them over TCP: expired segments leave the
//! log on the scheduled check while the rest stays readable, `retention.bytes` bounds the
//! log, and DeleteRecords moves the low watermark for fetches and ListOffsets, across a
//! crash too.

use crate::common;

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;

use common::{plain_batch, values, wait_for, Client, TestBroker};

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.into()))
}

/// One batch of `n` records `"{prefix}-{i}"` stamped `ts`.
fn batch_at(prefix: &str, n: usize, ts: i64, value_len: usize) -> Bytes {
    let values = (0..n).map(|i| {
        let value = format!("{prefix}-{i:0>width$}", width = value_len);
        (None, Some(Bytes::from(value)))
    });
    plain_batch(values, ts, Compression::None)
}

fn now_ms() -> i64 {
    skua::log::now_ms()
}

async fn list_offset(c: &mut Client, topic: &str, timestamp: i64) -> i64 {
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![list_offsets_request::ListOffsetsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![
                list_offsets_request::ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(timestamp),
            ])]);
    let resp = c.send(&req, 7).await;
    let p = &resp.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    p.offset
}

async fn delete_records(c: &mut Client, topic: &str, offset: i64, version: i16) -> (i16, i64) {
    let req = DeleteRecordsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![delete_records_request::DeleteRecordsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![
                delete_records_request::DeleteRecordsPartition::default()
                    .with_partition_index(0)
                    .with_offset(offset),
            ])]);
    let resp = c.send(&req, version).await;
    let p = &resp.topics[0].partitions[0];
    (p.error_code, p.low_watermark)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_segments_go_within_one_check_while_the_rest_stays_readable() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(
        dir.path(),
        &[
            ("log.retention.check.interval.ms", "300"),
            ("log.segment.delete.delay.ms", "0"),
        ],
    )
    .await;
    let mut c = b.client().await;
    // segment.ms rolls at the jump from old to new timestamps.
    c.create_topic_with(
        "expiring",
        &[("retention.ms", "10000"), ("segment.ms", "1000")],
    )
    .await;
    let old = now_ms() - 60_000;
    for i in 0..5 {
        let (err, _) = c
            .produce("expiring", 0, batch_at("old", 10, old + i, 4), 1)
            .await;
        assert_eq!(err, 0);
    }
    let fresh = now_ms();
    for i in 0..3 {
        let (err, base) = c
            .produce("expiring", 0, batch_at("new", 10, fresh + i, 4), 1)
            .await;
        assert_eq!((err, base), (0, 50 + 10 * i));
    }
    let partition = b.broker.replicas.partition("expiring", 0).unwrap();
    wait_for(
        "the expired segment is deleted",
        Duration::from_secs(10),
        || {
            let start = partition.log_start_offset();
            async move { start == 50 }
        },
    )
    .await;
    assert_eq!(list_offset(&mut c, "expiring", -2).await, 50);
    let gone = c.fetch("expiring", 0, 0, 0, 1).await;
    assert_eq!(gone.error_code, ResponseError::OffsetOutOfRange.code());
    assert_eq!(gone.log_start_offset, 50);
    let rest = c.fetch("expiring", 0, 50, 0, 1).await;
    assert_eq!(rest.error_code, 0);
    let got = values(rest.records.as_ref().unwrap());
    assert_eq!(got.len(), 30);
    assert_eq!(got[0], (50, "new-0000".to_string()));
    assert_eq!(got[29], (79, "new-0009".to_string()));
    // The files are gone from disk, not just from the log.
    let part_dir = b.log("expiring").dir().to_path_buf();
    wait_for(
        "the deleted files are removed",
        Duration::from_secs(10),
        || {
            let leftover = std::fs::read_dir(&part_dir)
                .unwrap()
                .filter_map(|e| e.ok())
                .any(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    n.ends_with(".deleted") || n.starts_with("00000000000000000000.")
                });
            async move { !leftover }
        },
    )
    .await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_bytes_bounds_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[("log.retention.check.interval.ms", "300")]).await;
    let mut c = b.client().await;
    const MIB: i64 = 1 << 20;
    c.create_topic_with(
        "bounded",
        &[
            ("segment.bytes", &MIB.to_string()),
            ("retention.bytes", &(2 * MIB).to_string()),
        ],
    )
    .await;
    // 6 MiB in batches of about 100 KiB.
    for i in 0..60 {
        let (err, _) = c
            .produce("bounded", 0, batch_at("v", 100, now_ms(), 1000), 1)
            .await;
        assert_eq!(err, 0, "batch {i}");
    }
    let log = b.log("bounded");
    assert_eq!(log.log_end_offset(), 6000);
    wait_for("the log shrinks", Duration::from_secs(10), || {
        let size = log.size_bytes() as i64;
        async move { size <= 3 * MIB }
    })
    .await;
    // As in Kafka, what remains is at least retention.bytes: whole segments only.
    assert!(log.size_bytes() as i64 >= 2 * MIB, "{}", log.size_bytes());
    let start = list_offset(&mut c, "bounded", -2).await;
    assert!(start > 0);
    let rest = c.fetch("bounded", 0, start, 0, 1).await;
    assert_eq!(rest.error_code, 0);
    assert_eq!(values(rest.records.as_ref().unwrap())[0].0, start);
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_records_moves_the_low_watermark_and_survives_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    c.create_topic_with("purged", &[]).await;
    c.create_topic_with("compacted", &[("cleanup.policy", "compact")])
        .await;
    for _ in 0..4 {
        assert_eq!(
            c.produce("purged", 0, batch_at("r", 5, now_ms(), 2), 1)
                .await
                .0,
            0
        );
    }
    for version in 0..=2 {
        let (err, low) = delete_records(&mut c, "purged", 3 + version as i64, version).await;
        assert_eq!((err, low), (0, 3 + version as i64), "v{version}");
    }
    assert_eq!(list_offset(&mut c, "purged", -2).await, 5);
    let below = c.fetch("purged", 0, 4, 0, 1).await;
    assert_eq!(below.error_code, ResponseError::OffsetOutOfRange.code());
    assert_eq!(below.log_start_offset, 5);
    // The batch holding offset 5 starts at 5 here: the answer starts at the low watermark.
    let at = c.fetch("purged", 0, 5, 0, 1).await;
    assert_eq!(values(at.records.as_ref().unwrap())[0].0, 5);
    assert_eq!(
        delete_records(&mut c, "purged", 21, 2).await,
        (ResponseError::OffsetOutOfRange.code(), -1),
        "past the high watermark"
    );
    assert_eq!(
        delete_records(&mut c, "compacted", 0, 2).await,
        (ResponseError::PolicyViolation.code(), -1)
    );
    assert_eq!(
        delete_records(&mut c, "nosuch", 0, 2).await,
        (ResponseError::UnknownTopicOrPartition.code(), -1)
    );
    assert_eq!(delete_records(&mut c, "purged", 7, 2).await, (0, 7));

    // A crash right after the answer: no clean shutdown, no periodic checkpoint.
    b.stop_serving().await;
    b.broker.scheduler().shutdown().await;
    drop(c);
    drop(b);
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    assert_eq!(list_offset(&mut c, "purged", -2).await, 7);
    assert_eq!(list_offset(&mut c, "purged", -1).await, 20);
    // -1 means the high watermark.
    assert_eq!(delete_records(&mut c, "purged", -1, 2).await, (0, 20));
    let empty = c.fetch("purged", 0, 20, 0, 1).await;
    assert_eq!(empty.error_code, 0);
    assert_eq!(
        c.produce("purged", 0, batch_at("r", 1, now_ms(), 2), 1)
            .await,
        (0, 20)
    );
    b.stop().await;
}
