//! Produce validation of record batches and ListOffsets by time, over TCP: forged and
//! malformed batches are refused with Kafka's errors (and, when one is already on disk, do
//! not take the broker down), a partition's records come as exactly one batch, CreateTime
//! is bounded, `compression.type` is applied, and MAX_TIMESTAMP names the record that holds
//! the largest timestamp.

use crate::common;

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_offsets_response::ListOffsetsPartitionResponse;
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use common::{batch, produce_request, values, Client, TestBroker};

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// One v2 batch holding a record per timestamp, values "r0", "r1", ...
fn batch_at(
    timestamps: &[i64],
    compression: Compression,
    producer: Option<(i64, i16, i32)>,
) -> Bytes {
    let (pid, epoch, seq) = producer.unwrap_or((-1, -1, -1));
    let records: Vec<Record> = timestamps
        .iter()
        .enumerate()
        .map(|(i, &timestamp)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: pid,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: if seq < 0 {
                i as i32 - 1
            } else {
                seq + i as i32
            },
            timestamp,
            key: None,
            value: Some(Bytes::from(format!("r{i}"))),
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
    buf.freeze()
}

/// Recomputes a batch's CRC after a test edited it, so the edit is all that is wrong.
fn resign(batch: &mut [u8]) {
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// The batch from the report: gzip, about a hundred bytes, claiming 2^31-1 records (count and
/// last offset delta agree, the CRC holds) while holding two.
fn forged_gzip_batch(timestamp: i64) -> Bytes {
    let mut b = batch_at(&[timestamp, timestamp + 1], Compression::Gzip, None).to_vec();
    b[23..27].copy_from_slice(&(i32::MAX - 1).to_be_bytes());
    b[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
    resign(&mut b);
    Bytes::from(b)
}

async fn produce(c: &mut Client, topic: &str, records: Bytes) -> PartitionProduceResponse {
    let resp = c.send(&produce_request(topic, 0, records, -1), 9).await;
    resp.responses[0].partition_responses[0].clone()
}

async fn list_offsets(c: &mut Client, topic: &str, timestamp: i64) -> ListOffsetsPartitionResponse {
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![list_offsets_request::ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(vec![
                list_offsets_request::ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_current_leader_epoch(-1)
                    .with_timestamp(timestamp),
            ])]);
    let resp = c.send(&req, 8).await;
    resp.topics[0].partitions[0].clone()
}

async fn create_topic_with(c: &mut Client, name: &str, configs: &[(&str, &str)]) -> i16 {
    let configs = configs
        .iter()
        .map(|(k, v)| {
            create_topics_request::CreatableTopicConfig::default()
                .with_name(StrBytes::from_string(k.to_string()))
                .with_value(Some(StrBytes::from_string(v.to_string())))
        })
        .collect();
    let req = CreateTopicsRequest::default()
        .with_topics(vec![create_topics_request::CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.into())))
            .with_num_partitions(1)
            .with_replication_factor(1)
            .with_configs(configs)])
        .with_timeout_ms(5000);
    c.send(&req, 7).await.topics[0].error_code
}

fn message(p: &PartitionProduceResponse) -> String {
    p.error_message
        .as_ref()
        .map(|m| m.to_string())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_forged_record_count_is_refused_on_produce() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("forged", 1).await, 0);
    let forged = forged_gzip_batch(now_ms());
    assert!(forged.len() < 128, "{} bytes", forged.len());
    let p = produce(&mut c, "forged", forged).await;
    assert_eq!(p.error_code, ResponseError::InvalidRecord.code());
    assert!(
        message(&p).contains("Incorrect declared batch size, premature EOF reached"),
        "{}",
        message(&p)
    );
    // Nothing was stored, and the partition takes the next good batch at offset 0.
    let ok = produce(&mut c, "forged", batch(&["fine"], None, Compression::Gzip)).await;
    assert_eq!((ok.error_code, ok.base_offset), (0, 0));
    b.stop().await;
}

#[tokio::test]
async fn a_forged_batch_on_disk_does_not_abort_list_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let t = now_ms() - 60_000;
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("stored", 1).await, 0);
    let p = produce(&mut c, "stored", batch_at(&[t], Compression::None, None)).await;
    assert_eq!((p.error_code, p.base_offset), (0, 0));
    drop(c);
    b.stop().await;

    // The forged batch lands on disk as a batch of an older broker would have stored it: at
    // offset 1, after the good one. Without the clean-shutdown marker the segment is
    // recovered, which checks the CRC (it holds) and indexes the batch's timestamp.
    let mut forged = forged_gzip_batch(t + 1_000).to_vec();
    forged[0..8].copy_from_slice(&1i64.to_be_bytes());
    let log = dir.path().join("stored-0/00000000000000000000.log");
    let mut bytes = std::fs::read(&log).unwrap();
    bytes.extend_from_slice(&forged);
    std::fs::write(&log, bytes).unwrap();
    std::fs::remove_file(dir.path().join(".kafka_cleanshutdown")).unwrap();

    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    // The lookup lands in the forged batch and reads its two real records, no more.
    let found = list_offsets(&mut c, "stored", t + 500).await;
    assert_eq!(found.error_code, 0);
    assert_eq!((found.timestamp, found.offset), (t + 1_000, 1));
    let max = list_offsets(&mut c, "stored", -3).await;
    assert_eq!((max.timestamp, max.offset), (t + 1_001, 2));
    // The broker is still up and answers the earlier record too.
    let first = list_offsets(&mut c, "stored", t).await;
    assert_eq!((first.timestamp, first.offset), (t, 0));
    b.stop().await;
}

#[tokio::test]
async fn several_batches_for_one_partition_are_refused_and_none_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("idem", 1).await, 0);
    let pid = c
        .send(
            &InitProducerIdRequest::default().with_transaction_timeout_ms(60000),
            4,
        )
        .await;
    assert_eq!(pid.error_code, 0);
    let id = pid.producer_id.0;
    let first = batch(&["a", "b"], Some((id, 0, 0)), Compression::None);
    let p = produce(&mut c, "idem", first.clone()).await;
    assert_eq!((p.error_code, p.base_offset), (0, 0));
    // A retry of the first batch and a new one in the same partition's records: Kafka
    // refuses the whole partition's records (before, the new batch vanished behind the
    // duplicate's offsets).
    let second = batch(&["c"], Some((id, 0, 2)), Compression::None);
    let mut both = first.to_vec();
    both.extend_from_slice(&second);
    let p = produce(&mut c, "idem", Bytes::from(both)).await;
    assert_eq!(p.error_code, ResponseError::InvalidRecord.code());
    assert_eq!(
        message(&p),
        "Produce requests with version 9 are only allowed to contain exactly one record batch per partition"
    );
    assert_eq!(p.base_offset, -1);
    let fetched = c.fetch("idem", 0, 0, 0, 1).await;
    assert_eq!(values(fetched.records.as_ref().unwrap()).len(), 2);
    // The new batch, sent on its own, is appended where it belongs.
    let p = produce(&mut c, "idem", second).await;
    assert_eq!((p.error_code, p.base_offset), (0, 2));
    b.stop().await;
}

#[tokio::test]
async fn create_time_outside_the_topic_bounds_is_invalid_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    // The broker-wide bound behind; Kafka 4's default (one hour) ahead.
    let b = TestBroker::start(
        dir.path(),
        &[("log.message.timestamp.before.max.ms", "600000")],
    )
    .await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("times", 1).await, 0);
    let now = now_ms();
    let p = produce(
        &mut c,
        "times",
        batch_at(
            &[now, now + 2 * 3_600_000, now - 3_600_000],
            Compression::Lz4,
            None,
        ),
    )
    .await;
    assert_eq!(p.error_code, ResponseError::InvalidTimestamp.code());
    assert_eq!(
        message(&p),
        "One or more records have been rejected due to invalid timestamp"
    );
    let refused: Vec<i32> = p.record_errors.iter().map(|e| e.batch_index).collect();
    assert_eq!(refused, vec![1, 2]);
    let why = p.record_errors[0]
        .batch_index_error_message
        .as_ref()
        .unwrap()
        .to_string();
    assert!(
        why.starts_with(&format!(
            "Timestamp {} of message with offset 1 is out of range.",
            now + 2 * 3_600_000
        )),
        "{why}"
    );
    let p = produce(
        &mut c,
        "times",
        batch_at(&[now, now + 60_000], Compression::Lz4, None),
    )
    .await;
    assert_eq!((p.error_code, p.base_offset), (0, 0));
    // A topic's own bound.
    assert_eq!(
        create_topic_with(
            &mut c,
            "strict",
            &[("message.timestamp.after.max.ms", "1000")]
        )
        .await,
        0
    );
    let p = produce(
        &mut c,
        "strict",
        batch_at(&[now + 60_000], Compression::None, None),
    )
    .await;
    assert_eq!(p.error_code, ResponseError::InvalidTimestamp.code());
    b.stop().await;
}

/// The codec bits of each whole batch in fetched records.
fn codecs(records: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = 0;
    while records.len() - at >= 61 {
        let len = i32::from_be_bytes(records[at + 8..at + 12].try_into().unwrap()) as usize;
        out.push(records[at + 22] & 0x07);
        at += 12 + len;
    }
    out
}

#[tokio::test]
async fn topic_compression_type_is_what_consumers_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    assert_eq!(
        create_topic_with(&mut c, "zt", &[("compression.type", "zstd")]).await,
        0
    );
    assert_eq!(
        create_topic_with(&mut c, "plain", &[("compression.type", "uncompressed")]).await,
        0
    );
    let sent = [
        (Compression::None, ["a", "b"]),
        (Compression::Gzip, ["c", "d"]),
        (Compression::Snappy, ["e", "f"]),
        (Compression::Lz4, ["g", "h"]),
        (Compression::Zstd, ["i", "j"]),
    ];
    for topic in ["zt", "plain"] {
        for (i, (codec, vals)) in sent.iter().enumerate() {
            let p = produce(&mut c, topic, batch(vals, None, *codec)).await;
            assert_eq!(
                (p.error_code, p.base_offset),
                (0, 2 * i as i64),
                "{topic} {codec:?}"
            );
        }
        let fetched = c.fetch(topic, 0, 0, 0, 1).await;
        let records = fetched.records.unwrap();
        let want = if topic == "zt" { 4 } else { 0 };
        assert_eq!(codecs(&records), vec![want; 5], "{topic}");
        let got: Vec<String> = values(&records).into_iter().map(|(_, v)| v).collect();
        assert_eq!(got, ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]);
    }
    b.stop().await;
}

#[tokio::test]
async fn max_timestamp_is_the_record_that_carries_it() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    let t = now_ms() - 60_000;
    for (topic, codec) in [("mts", Compression::None), ("mtsz", Compression::Zstd)] {
        assert_eq!(c.create_topic(topic, 1).await, 0);
        // The largest timestamp is on the second of three records.
        let p = produce(&mut c, topic, batch_at(&[t, t + 10, t + 5], codec, None)).await;
        assert_eq!(p.error_code, 0);
        let p = produce(&mut c, topic, batch_at(&[t + 1, t + 2], codec, None)).await;
        assert_eq!(p.base_offset, 3);
        let max = list_offsets(&mut c, topic, -3).await;
        assert_eq!(
            (max.error_code, max.timestamp, max.offset),
            (0, t + 10, 1),
            "{topic}"
        );
        assert_eq!(max.leader_epoch, 0);
        let at = list_offsets(&mut c, topic, t + 6).await;
        assert_eq!((at.timestamp, at.offset), (t + 10, 1), "{topic}");
        let none = list_offsets(&mut c, topic, t + 11).await;
        assert_eq!((none.timestamp, none.offset), (-1, -1), "{topic}");
    }
    b.stop().await;
}
