//! Scenarios against a broker started in-process, over real TCP connections.

use crate::common;

use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, StrBytes};
use kafka_protocol::records::Compression;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.into()))
}

#[tokio::test]
async fn api_versions_lists_routes_and_answers_unknown_versions_with_v0() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    let resp = c.send(&ApiVersionsRequest::default(), 3).await;
    assert_eq!(resp.error_code, 0);
    let produce = resp
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::Produce as i16)
        .unwrap();
    assert_eq!((produce.min_version, produce.max_version), (0, 13));
    let join = resp
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::JoinGroup as i16)
        .unwrap();
    assert_eq!((join.min_version, join.max_version), (0, 9));

    // A version from the future: v0 response (header v0), error 35, our ranges.
    let mut raw = BytesMut::new();
    raw.put_i16(ApiKey::ApiVersions as i16);
    raw.put_i16(99);
    raw.put_i32(7);
    raw.put_i16(-1);
    c.write_frame(&raw).await;
    let mut frame = c.read_frame().await.unwrap();
    let header = ResponseHeader::decode(&mut frame, 0).unwrap();
    assert_eq!(header.correlation_id, 7);
    let v0 = ApiVersionsResponse::decode(&mut frame, 0).unwrap();
    assert_eq!(v0.error_code, 35);
    assert!(!v0.api_keys.is_empty());
    b.stop().await;
}

#[tokio::test]
async fn produce_then_fetch_returns_the_same_batches() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("orders", 2).await, 0);
    let (err, base) = c
        .produce(
            "orders",
            1,
            batch(&["a", "b", "c"], None, Compression::None),
            -1,
        )
        .await;
    assert_eq!((err, base), (0, 0));
    let (err, base) = c
        .produce("orders", 1, batch(&["d"], None, Compression::Lz4), 1)
        .await;
    assert_eq!((err, base), (0, 3));
    let p = c.fetch("orders", 1, 0, 0, 1).await;
    assert_eq!(p.error_code, 0);
    assert_eq!(p.high_watermark, 4);
    let got = values(p.records.as_ref().unwrap());
    assert_eq!(
        got,
        vec![
            (0, "a".into()),
            (1, "b".into()),
            (2, "c".into()),
            (3, "d".into())
        ]
    );
    // From offset 1: whole batches from the one holding offset 1 (the client skips
    // anything before the offset it asked for).
    let p = c.fetch("orders", 1, 1, 0, 1).await;
    let v = values(p.records.as_ref().unwrap());
    assert!(v[0].0 <= 1, "{v:?}");
    assert_eq!(v.last().map(|r| r.0), Some(3), "{v:?}");
    // Past the end: OFFSET_OUT_OF_RANGE.
    let p = c.fetch("orders", 1, 99, 0, 1).await;
    assert_eq!(p.error_code, ResponseError::OffsetOutOfRange.code());
    b.stop().await;
}

#[tokio::test]
async fn records_survive_a_clean_restart() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("kept", 1).await, 0);
    for i in 0..10 {
        let v = format!("v{i}");
        let (err, base) = c
            .produce("kept", 0, batch(&[&v], None, Compression::None), -1)
            .await;
        assert_eq!((err, base), (0, i));
    }
    drop(c);
    b.stop().await;
    assert!(
        dir.path().join(".kafka_cleanshutdown").exists(),
        "clean-shutdown marker written"
    );
    assert!(dir.path().join("recovery-point-offset-checkpoint").exists());
    let index_len = std::fs::metadata(dir.path().join("kept-0/00000000000000000000.index"))
        .unwrap()
        .len();
    assert!(index_len < 10 * 1024 * 1024, "index trimmed at close");
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    let p = c.fetch("kept", 0, 0, 0, 1).await;
    let got = values(p.records.as_ref().unwrap());
    assert_eq!(got.len(), 10);
    assert_eq!(got[9], (9, "v9".into()));
    let (err, base) = c
        .produce("kept", 0, batch(&["after"], None, Compression::None), -1)
        .await;
    assert_eq!((err, base), (0, 10));
    b.stop().await;
}

#[tokio::test]
async fn metadata_auto_creates_topics_and_rejects_bad_names() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[("num.partitions", "3")]).await;
    let mut c = b.client().await;
    let req = MetadataRequest::default()
        .with_topics(Some(vec![
            metadata_request::MetadataRequestTopic::default().with_name(Some(name("fresh"))),
            metadata_request::MetadataRequestTopic::default().with_name(Some(name("bad name"))),
        ]))
        .with_allow_auto_topic_creation(true);
    let resp = c.send(&req, 12).await;
    assert_eq!(resp.topics[0].error_code, 0);
    assert_eq!(resp.topics[0].partitions.len(), 3);
    assert_eq!(resp.topics[0].partitions[0].leader_id.0, 1);
    assert_eq!(
        resp.topics[1].error_code,
        ResponseError::InvalidTopicException.code()
    );
    assert_eq!(resp.brokers[0].port, b.addr.port() as i32);
    let req = MetadataRequest::default()
        .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
        )
        .with_name(Some(name("other")))]))
        .with_allow_auto_topic_creation(false);
    let resp = c.send(&req, 12).await;
    assert_eq!(
        resp.topics[0].error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
    b.stop().await;
}

#[tokio::test]
async fn produce_errors_carry_kafka_codes() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(
        dir.path(),
        &[
            ("auto.create.topics.enable", "false"),
            ("message.max.bytes", "2000"),
        ],
    )
    .await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("t", 1).await, 0);
    let good = batch(&["x"], None, Compression::None);
    let (err, _) = c.produce("t", 0, good.clone(), 2).await;
    assert_eq!(err, ResponseError::InvalidRequiredAcks.code());
    let mut corrupt = BytesMut::from(&good[..]);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    let (err, _) = c.produce("t", 0, corrupt.freeze(), 1).await;
    assert_eq!(err, ResponseError::CorruptMessage.code());
    let big = "y".repeat(5000);
    let (err, _) = c
        .produce("t", 0, batch(&[&big], None, Compression::None), 1)
        .await;
    assert_eq!(err, ResponseError::MessageTooLarge.code());
    let (err, _) = c.produce("missing", 0, good.clone(), 1).await;
    assert_eq!(err, ResponseError::UnknownTopicOrPartition.code());
    // Nothing bad was written: the next good batch lands at offset 0.
    let (err, base) = c.produce("t", 0, good, 1).await;
    assert_eq!((err, base), (0, 0));
    b.stop().await;
}

#[tokio::test]
async fn idempotent_retry_gets_original_offsets_and_gaps_are_refused() {
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
    assert_eq!(c.produce("idem", 0, first.clone(), -1).await, (0, 0));
    assert_eq!(
        c.produce(
            "idem",
            0,
            batch(&["c"], Some((id, 0, 2)), Compression::None),
            -1
        )
        .await,
        (0, 2)
    );
    // The retried first batch: same offsets, no error, nothing appended.
    assert_eq!(c.produce("idem", 0, first, -1).await, (0, 0));
    let (err, _) = c
        .produce(
            "idem",
            0,
            batch(&["gap"], Some((id, 0, 9)), Compression::None),
            -1,
        )
        .await;
    assert_eq!(err, ResponseError::OutOfOrderSequenceNumber.code());
    let p = c.fetch("idem", 0, 0, 0, 1).await;
    assert_eq!(values(p.records.as_ref().unwrap()).len(), 3);
    let next = c
        .send(
            &InitProducerIdRequest::default().with_transaction_timeout_ms(60000),
            4,
        )
        .await;
    assert!(next.producer_id.0 > id);
    b.stop().await;
}

#[tokio::test]
async fn long_poll_wakes_on_append() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("poll", 1).await, 0);
    let addr = b.addr;
    let producer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut p = Client::connect(addr).await;
        p.produce("poll", 0, batch(&["wake"], None, Compression::None), 1)
            .await
    });
    let started = Instant::now();
    let p = c.fetch("poll", 0, 0, 10_000, 1).await;
    let waited = started.elapsed();
    assert_eq!(
        values(p.records.as_ref().unwrap()),
        vec![(0, "wake".into())]
    );
    assert!(
        waited < Duration::from_secs(5),
        "woken by the append, not the 10 s timeout: {waited:?}"
    );
    assert_eq!(producer.await.unwrap(), (0, 0));
    // Nothing arrives: the fetch returns empty once max_wait_ms passes.
    let p = c.fetch("poll", 0, 1, 200, 1).await;
    assert_eq!(p.records.as_ref().map(|r| r.len()), Some(0));
    b.stop().await;
}

#[tokio::test]
async fn acks_zero_gets_no_response_and_pipelined_requests_answer_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("quiet", 1).await, 0);
    c.write_request(
        &produce_request("quiet", 0, batch(&["q"], None, Compression::None), 0),
        9,
    )
    .await;
    // The next response on the wire belongs to the request after the acks=0 produce.
    let resp = c.send(&ApiVersionsRequest::default(), 0).await;
    assert_eq!(resp.error_code, 0);
    let p = c.fetch("quiet", 0, 0, 0, 1).await;
    assert_eq!(values(p.records.as_ref().unwrap()), vec![(0, "q".into())]);
    b.stop().await;
}

#[tokio::test]
async fn bad_frames_close_only_that_connection() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[("socket.request.max.bytes", "1000")]).await;
    let cases: Vec<Vec<u8>> = vec![
        (-5i32).to_be_bytes().to_vec(), // negative size
        5000i32.to_be_bytes().to_vec(), // over socket.request.max.bytes
        [
            &10i32.to_be_bytes()[..],
            &[0x7f, 0x00, 0, 0, 0, 0, 0, 1, 0, 0],
        ]
        .concat(), // unknown api key
        [&8i32.to_be_bytes()[..], &[0, 3, 0, 12, 0, 0, 0, 1]].concat(), // Metadata v12 cut short
        // Metadata v1 whose topic array claims 2^31-1 entries in a 14-byte body.
        [
            &14i32.to_be_bytes()[..],
            &[0, 3, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff],
        ]
        .concat(),
    ];
    for bytes in cases {
        let mut c = b.client().await;
        use tokio::io::AsyncWriteExt;
        c.stream.write_all(&bytes).await.unwrap();
        let closed = tokio::time::timeout(Duration::from_secs(5), c.read_frame())
            .await
            .expect("closed promptly");
        assert!(closed.is_none(), "connection closed for {bytes:?}");
    }
    let mut c = b.client().await;
    assert_eq!(
        c.send(&ApiVersionsRequest::default(), 3).await.error_code,
        0
    );
    b.stop().await;
}

#[tokio::test]
async fn produce_v2_is_answered_unsupported_version() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    let mut raw = BytesMut::new();
    raw.put_i16(0); // Produce
    raw.put_i16(2);
    raw.put_i32(42);
    raw.put_i16(-1); // client id
    raw.put_i16(1); // acks
    raw.put_i32(1000);
    raw.put_i32(1);
    raw.put_i16(1);
    raw.put_slice(b"t");
    raw.put_i32(1);
    raw.put_i32(0);
    raw.put_i32(-1);
    c.write_frame(&raw).await;
    let frame: Bytes = c.read_frame().await.unwrap();
    assert_eq!(&frame[..4], &42i32.to_be_bytes());
    // topics(1) name "t" partitions(1) index 0 error 35
    assert_eq!(
        &frame[4..21],
        &[0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 0, 0, 35]
    );
    b.stop().await;
}

#[tokio::test]
async fn topic_admin_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("adm", 1).await, 0);
    assert_eq!(
        c.create_topic("adm", 1).await,
        ResponseError::TopicAlreadyExists.code()
    );
    let req = CreatePartitionsRequest::default().with_topics(vec![
        create_partitions_request::CreatePartitionsTopic::default()
            .with_name(name("adm"))
            .with_count(4),
    ]);
    assert_eq!(c.send(&req, 3).await.results[0].error_code, 0);
    let req = DescribeConfigsRequest::default().with_resources(vec![
        describe_configs_request::DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_static_str("adm")),
    ]);
    let resp = c.send(&req, 4).await;
    let seg = resp.results[0]
        .configs
        .iter()
        .find(|c| c.name.as_str() == "segment.bytes")
        .unwrap();
    assert_eq!(seg.value.as_deref(), Some("1073741824"));
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        incremental_alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_static_str("adm"))
            .with_configs(vec![
                incremental_alter_configs_request::AlterableConfig::default()
                    .with_name(StrBytes::from_static_str("retention.ms"))
                    .with_config_operation(0)
                    .with_value(Some(StrBytes::from_static_str("3600000"))),
            ]),
    ]);
    let resp = c.send(&req, 1).await;
    assert_eq!(resp.responses[0].error_code, 0);
    // A second request: Kafka refuses a resource named twice in one request.
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        incremental_alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_static_str("adm"))
            .with_configs(vec![
                incremental_alter_configs_request::AlterableConfig::default()
                    .with_name(StrBytes::from_static_str("retention.ms"))
                    .with_config_operation(0)
                    .with_value(Some(StrBytes::from_static_str("soon"))),
            ]),
    ]);
    let resp = c.send(&req, 1).await;
    assert_eq!(
        resp.responses[0].error_code,
        ResponseError::InvalidConfig.code()
    );
    let req = DescribeConfigsRequest::default().with_resources(vec![
        describe_configs_request::DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_static_str("adm"))
            .with_configuration_keys(Some(vec![StrBytes::from_static_str("retention.ms")])),
    ]);
    let resp = c.send(&req, 4).await;
    let configs = &resp.results[0].configs;
    assert_eq!(configs.len(), 1);
    assert_eq!(configs[0].value.as_deref(), Some("3600000"));
    assert_eq!(configs[0].config_source, 1, "DYNAMIC_TOPIC_CONFIG");
    let req = DescribeTopicPartitionsRequest::default()
        .with_topics(vec![
            describe_topic_partitions_request::TopicRequest::default().with_name(name("adm")),
        ])
        .with_response_partition_limit(3);
    let resp = c.send(&req, 0).await;
    assert_eq!(resp.topics[0].partitions.len(), 3);
    assert_eq!(
        resp.next_cursor.as_ref().map(|c| c.partition_index),
        Some(3)
    );
    let partition_dir = dir.path().join("adm-3");
    assert!(partition_dir.is_dir());
    let req = DeleteTopicsRequest::default().with_topic_names(vec![name("adm")]);
    assert_eq!(c.send(&req, 5).await.responses[0].error_code, 0);
    assert!(!partition_dir.exists(), "partition files removed");
    let md = c
        .send(&MetadataRequest::default().with_topics(None), 12)
        .await;
    assert!(md.topics.is_empty());
    b.stop().await;
}

#[tokio::test]
async fn a_leader_epoch_from_the_future_is_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("epochs", 1).await, 0);
    let fetch = |epoch: i32| {
        FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_bytes(1 << 20)
            .with_topics(vec![fetch_request::FetchTopic::default()
                .with_topic(name("epochs"))
                .with_partitions(vec![fetch_request::FetchPartition::default()
                    .with_partition(0)
                    .with_current_leader_epoch(epoch)
                    .with_partition_max_bytes(1 << 20)])])
    };
    let resp = c.send(&fetch(0), 12).await;
    assert_eq!(
        resp.responses[0].partitions[0].error_code, 0,
        "the current epoch (0) is accepted"
    );
    let resp = c.send(&fetch(5), 12).await;
    assert_eq!(
        resp.responses[0].partitions[0].error_code,
        ResponseError::UnknownLeaderEpoch.code()
    );
    b.stop().await;
}

/// Lengths of the whole batches at the start of `records` (a trailing partial batch,
/// which Kafka may send at the size limit, is left out).
fn whole_batches(records: &[u8]) -> usize {
    let mut at = 0;
    while records.len() - at >= 12 {
        let len = i32::from_be_bytes(records[at + 8..at + 12].try_into().unwrap());
        let end = at + 12 + len as usize;
        if end > records.len() {
            break;
        }
        at = end;
    }
    at
}

#[tokio::test]
async fn large_fetches_come_from_the_segment_file_and_end_at_the_size_limit() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("big", 2).await, 0);
    // 400 records of ~500 bytes: ~200 KiB, well over the size sent by sendfile
    // instead of a copy.
    let value = |i: usize| format!("{i:06}-{}", "x".repeat(493));
    for n in 0..40 {
        let vals: Vec<String> = (n * 10..n * 10 + 10).map(value).collect();
        let refs: Vec<&str> = vals.iter().map(String::as_str).collect();
        let (err, base) = c
            .produce("big", 1, batch(&refs, None, Compression::None), 1)
            .await;
        assert_eq!((err, base), (0, n as i64 * 10));
    }
    let p = c.fetch("big", 1, 0, 0, 1).await;
    let got = values(p.records.as_ref().unwrap());
    assert_eq!(got.len(), 400);
    for (i, (offset, v)) in got.iter().enumerate() {
        assert_eq!((*offset, v.as_str()), (i as i64, value(i).as_str()));
    }

    // Two partitions in one answer, the first cut at 50,000 bytes: the cut batch is
    // partial, the bytes before it are whole batches from offset 0, and the second
    // partition's records follow intact.
    let (err, _) = c
        .produce("big", 0, batch(&["other"], None, Compression::None), 1)
        .await;
    assert_eq!(err, 0);
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_bytes(1 << 20)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(name("big"))
            .with_partitions(vec![
                fetch_request::FetchPartition::default()
                    .with_partition(1)
                    .with_partition_max_bytes(50_000),
                fetch_request::FetchPartition::default()
                    .with_partition(0)
                    .with_partition_max_bytes(1 << 20),
            ])]);
    let resp = c.send(&req, 12).await;
    let cut = resp.responses[0].partitions[0].records.clone().unwrap();
    assert_eq!(
        cut.len(),
        50_000,
        "cut at the partition's limit, as Kafka does"
    );
    let whole = cut.slice(..whole_batches(&cut));
    assert!(whole.len() < cut.len(), "the last batch is partial");
    let got = values(&whole);
    assert!(got.len() > 50, "{} records", got.len());
    assert_eq!(got.first().map(|r| r.0), Some(0));
    assert_eq!(got.last().map(|r| r.0), Some(got.len() as i64 - 1));
    assert_eq!(got[17].1, value(17));
    let other = values(resp.responses[0].partitions[1].records.as_ref().unwrap());
    assert_eq!(other, vec![(0, "other".to_string())]);
    b.stop().await;
}
