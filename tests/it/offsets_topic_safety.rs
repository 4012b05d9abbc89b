//! `__consumer_offsets` belongs to the group coordinator: clients cannot append to it,
//! and a partition whose records cannot be read back is not served rather than served
//! empty, so committed offsets never silently vanish.

use crate::common;

use bytes::{Bytes, BytesMut};
use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, RecordBatchDecoder};

const CONFIG: &[(&str, &str)] = &[("offsets.topic.num.partitions", "1")];

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

async fn find_coordinator(c: &mut Client, group: &str) -> i16 {
    let req = FindCoordinatorRequest::default().with_key(s(group));
    c.send(&req, 3).await.error_code
}

/// The offsets of every record in `__consumer_offsets` partition 0.
async fn offsets_topic(c: &mut Client) -> Vec<i64> {
    let data = c.fetch("__consumer_offsets", 0, 0, 100, 1).await;
    let mut records = data.records.unwrap_or_default();
    let mut out = Vec::new();
    while !records.is_empty() {
        let Ok(set) = RecordBatchDecoder::decode(&mut records) else {
            break;
        };
        out.extend(set.records.iter().map(|r| r.offset));
    }
    out
}

#[tokio::test]
async fn client_appends_to_internal_topics_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), CONFIG).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("orders", 1).await, 0);
    assert_eq!(find_coordinator(&mut c, "billing").await, 0);
    assert_eq!(c.commit_offset("billing", "orders", 42, None).await, 0);
    let written = offsets_topic(&mut c).await;
    assert_eq!(written.len(), 1);

    // What a client would append: a well-formed batch Kafka's loader could not replay.
    let batch = batch(&["not a group record"], None, Compression::None);
    let req = produce_request("__consumer_offsets", 0, batch, -1);
    for version in [3, 9] {
        let resp = c.send(&req, version).await;
        let p = &resp.responses[0].partition_responses[0];
        assert_eq!(
            p.error_code,
            ResponseError::InvalidTopicException.code(),
            "v{version}"
        );
        assert_eq!((p.base_offset, p.error_message.as_ref()), (-1, None));
    }
    assert_eq!(offsets_topic(&mut c).await, written, "nothing was appended");
    // Ordinary topics are unaffected.
    let (code, _) = c
        .produce(
            "orders",
            0,
            common::batch(&["x"], None, Compression::None),
            -1,
        )
        .await;
    assert_eq!(code, 0);
    drop(c);
    b.stop().await;

    let b = TestBroker::start(dir.path(), CONFIG).await;
    let mut c = b.client().await;
    assert_eq!(c.committed_offsets("billing").await, (0, vec![42]));
    b.stop().await;
}

/// A batch marked gzip whose payload is not gzip, with a valid CRC: log recovery keeps
/// it (its framing and checksum are sound), and the coordinator cannot read it.
fn corrupt_batch(base_offset: i64) -> Bytes {
    let good = batch(&["garbage"], None, Compression::None);
    let mut bad = BytesMut::from(&good[..]);
    bad[..8].copy_from_slice(&base_offset.to_be_bytes());
    bad[22] |= 1;
    let crc = crc32c::crc32c(&bad[21..]);
    bad[17..21].copy_from_slice(&crc.to_be_bytes());
    bad.freeze()
}

#[tokio::test]
async fn a_corrupt_batch_in_the_offsets_topic_never_makes_committed_offsets_vanish() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), CONFIG).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("orders", 1).await, 0);
    assert_eq!(find_coordinator(&mut c, "billing").await, 0);
    assert_eq!(c.commit_offset("billing", "orders", 42, None).await, 0);
    assert_eq!(c.commit_offset("billing", "orders", 43, None).await, 0);
    let written = offsets_topic(&mut c).await;
    let log_end = written.last().unwrap() + 1;
    drop(c);
    b.stop().await;

    // Written straight into the segment, after the last batch.
    let segment = dir
        .path()
        .join("__consumer_offsets-0")
        .join("00000000000000000000.log");
    let mut bytes = std::fs::read(&segment).unwrap();
    bytes.extend_from_slice(&corrupt_batch(log_end));
    std::fs::write(&segment, &bytes).unwrap();

    let b = TestBroker::start(dir.path(), CONFIG).await;
    let mut c = b.client().await;
    // The partition is not served: its groups answer NOT_COORDINATOR, never an empty
    // group whose offsets are gone.
    let not_coordinator = ResponseError::NotCoordinator.code();
    assert_eq!(
        c.committed_offsets("billing").await,
        (not_coordinator, vec![])
    );
    assert_eq!(
        c.commit_offset("billing", "orders", 44, None).await,
        not_coordinator
    );
    let join = JoinGroupRequest::default()
        .with_group_id(GroupId(s("billing")))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
        )
        .with_name(s("range"))]);
    assert_eq!(c.send(&join, 9).await.error_code, not_coordinator);
    // The coordinator still names this broker: it leads the partition.
    assert_eq!(find_coordinator(&mut c, "billing").await, 0);
    // Nothing was dropped from the log: the commits are there to load once the batch
    // is dealt with.
    let mut kept = offsets_topic(&mut c).await;
    kept.truncate(written.len());
    assert_eq!(kept, written);
    b.stop().await;
}

/// A data dir whose `__consumer_offsets` has another partition count than
/// `offsets.topic.num.partitions` (say, adopted from a Kafka configured otherwise): groups
/// are placed by the topic's own count, as Kafka does, so their offsets are still found.
#[tokio::test]
async fn an_existing_offsets_topic_keeps_its_partition_count() {
    use skua::coordinator::group::records::partition_for;
    // A group the configured count would place on another partition.
    let group = (0..)
        .map(|i| format!("group-{i}"))
        .find(|g| partition_for(g, 3) != partition_for(g, 50))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[("offsets.topic.num.partitions", "3")]).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("orders", 1).await, 0);
    assert_eq!(find_coordinator(&mut c, &group).await, 0);
    assert_eq!(c.commit_offset(&group, "orders", 42, None).await, 0);
    drop(c);
    b.stop().await;

    // Kafka's default, 50 partitions, in the config now.
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    assert_eq!(find_coordinator(&mut c, &group).await, 0);
    assert_eq!(c.committed_offsets(&group).await, (0, vec![42]));
    assert_eq!(c.commit_offset(&group, "orders", 43, None).await, 0);
    assert_eq!(c.committed_offsets(&group).await, (0, vec![43]));
    let offsets = b.broker.controller.topic("__consumer_offsets").unwrap();
    assert_eq!(
        offsets.partitions.len(),
        3,
        "the topic keeps its partitions"
    );
    b.stop().await;
}
