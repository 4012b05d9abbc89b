//! Requests of a transactional producer and a read_committed consumer, for the
//! transaction scenarios.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use super::{produce_request, Client};

pub const TOPIC: &str = "txn-topic";
pub const OVERRIDES: &[(&str, &str)] = &[
    ("transaction.state.log.num.partitions", "3"),
    ("offsets.topic.num.partitions", "3"),
];

pub fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

pub fn txn_batch(values: &[&str], producer: (i64, i16, i32)) -> Bytes {
    let (pid, epoch, seq) = producer;
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional: true,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: pid,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: seq + i as i32,
            // Now: an old timestamp would roll the segment (segment.ms) at each batch.
            timestamp: now_ms(),
            key: None,
            value: Some(Bytes::copy_from_slice(v.as_bytes())),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, records.iter(), &options).unwrap();
    buf.freeze()
}

pub async fn find_txn_coordinator(c: &mut Client, id: &str) -> FindCoordinatorResponse {
    let req = FindCoordinatorRequest::default()
        .with_key_type(1)
        .with_coordinator_keys(vec![s(id)]);
    c.send(&req, 4).await
}

pub async fn init(c: &mut Client, id: &str, expected: (i64, i16)) -> InitProducerIdResponse {
    let req = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(s(id))))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(expected.0))
        .with_producer_epoch(expected.1);
    c.send(&req, 4).await
}

pub async fn add_partition(c: &mut Client, id: &str, pid: i64, epoch: i16, partition: i32) -> i16 {
    let req = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(s(id)))
        .with_v3_and_below_producer_id(ProducerId(pid))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(vec![
            add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                .with_name(TopicName(s(TOPIC)))
                .with_partitions(vec![partition]),
        ]);
    let resp = c.send(&req, 3).await;
    resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
}

pub async fn produce(c: &mut Client, id: &str, records: Bytes) -> (i16, i64) {
    let req =
        produce_request(TOPIC, 0, records, -1).with_transactional_id(Some(TransactionalId(s(id))));
    let resp = c.send(&req, 9).await;
    let p = &resp.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

pub async fn end(c: &mut Client, id: &str, pid: i64, epoch: i16, commit: bool) -> i16 {
    let req = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(s(id)))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(commit);
    c.send(&req, 3).await.error_code
}

/// A read_committed (or not) fetch from offset 0.
pub async fn fetch(c: &mut Client, read_committed: bool) -> fetch_response::PartitionData {
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1 << 20)
        .with_isolation_level(read_committed as i8)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(TopicName(s(TOPIC)))
            .with_partitions(vec![fetch_request::FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    c.send(&req, 12).await.responses[0].partitions[0].clone()
}

pub async fn latest(c: &mut Client, read_committed: bool) -> i64 {
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(read_committed as i8)
        .with_topics(vec![list_offsets_request::ListOffsetsTopic::default()
            .with_name(TopicName(s(TOPIC)))
            .with_partitions(vec![
                list_offsets_request::ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(-1),
            ])]);
    c.send(&req, 5).await.topics[0].partitions[0].offset
}

/// (offset, value, is control) of every record fetched.
pub fn records(data: &fetch_response::PartitionData) -> Vec<(i64, String, bool)> {
    let mut buf = data.records.clone().unwrap_or_default();
    let mut out = Vec::new();
    for set in RecordBatchDecoder::decode_all(&mut buf).unwrap() {
        for r in set.records {
            let v = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned();
            out.push((r.offset, v, r.control));
        }
    }
    out
}

/// (base offset, is control) of each fetched batch, from the raw headers.
pub fn batches(data: &fetch_response::PartitionData) -> Vec<(i64, bool)> {
    let raw = data.records.clone().unwrap_or_default();
    let mut out = Vec::new();
    let mut at = 0;
    while at + 61 <= raw.len() {
        let base = i64::from_be_bytes(raw[at..at + 8].try_into().unwrap());
        let len = i32::from_be_bytes(raw[at + 8..at + 12].try_into().unwrap()) as usize;
        let attributes = i16::from_be_bytes(raw[at + 21..at + 23].try_into().unwrap());
        out.push((base, attributes & 0x20 != 0));
        at += 12 + len;
    }
    out
}

pub fn aborted(data: &fetch_response::PartitionData) -> Option<Vec<(i64, i64)>> {
    data.aborted_transactions.as_ref().map(|a| {
        a.iter()
            .map(|t| (t.producer_id.0, t.first_offset))
            .collect()
    })
}

/// AddOffsetsToTxn (v3) of `group` to the transaction: its error code.
pub async fn add_offsets(c: &mut Client, id: &str, group: &str, producer: (i64, i16)) -> i16 {
    let req = AddOffsetsToTxnRequest::default()
        .with_transactional_id(TransactionalId(s(id)))
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_group_id(GroupId(s(group)));
    c.send(&req, 3).await.error_code
}

/// TxnOffsetCommit (v3) of TOPIC-0 at `offset` for `group`: the partition's error code.
pub async fn txn_offset_commit(
    c: &mut Client,
    id: &str,
    group: &str,
    producer: (i64, i16),
    offset: i64,
) -> i16 {
    let req = TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(s(id)))
        .with_group_id(GroupId(s(group)))
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_generation_id(-1)
        .with_member_id(s(""))
        .with_topics(vec![
            txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                .with_name(TopicName(s(TOPIC)))
                .with_partitions(vec![
                    txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(offset)
                        .with_committed_leader_epoch(-1),
                ]),
        ]);
    let resp: TxnOffsetCommitResponse = c.send(&req, 3).await;
    resp.topics[0].partitions[0].error_code
}

/// OffsetFetch (v7) of TOPIC-0 for `group`: (error, committed offset).
pub async fn fetch_offset(c: &mut Client, group: &str, require_stable: bool) -> (i16, i64) {
    let req = OffsetFetchRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_require_stable(require_stable)
        .with_topics(Some(vec![
            offset_fetch_request::OffsetFetchRequestTopic::default()
                .with_name(TopicName(s(TOPIC)))
                .with_partition_indexes(vec![0]),
        ]));
    let resp: OffsetFetchResponse = c.send(&req, 7).await;
    assert_eq!(resp.error_code, 0, "{resp:?}");
    let p = &resp.topics[0].partitions[0];
    (p.error_code, p.committed_offset)
}
