//! Transactions over TCP, as a transactional producer and a read_committed consumer
//! drive them: the coordinator's answers, what a read_committed fetch returns (records up
//! to the last stable offset, the aborted transactions in them), ListOffsets, fencing
//! of an older epoch, and a restart in the middle of a transaction.

mod common;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use common::{produce_request, Client, TestBroker};

const TOPIC: &str = "txn-topic";
const OVERRIDES: &[(&str, &str)] = &[
    ("transaction.state.log.num.partitions", "3"),
    ("offsets.topic.num.partitions", "3"),
];

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn txn_batch(values: &[&str], producer: (i64, i16, i32)) -> Bytes {
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

async fn find_txn_coordinator(c: &mut Client, id: &str) -> FindCoordinatorResponse {
    let req = FindCoordinatorRequest::default()
        .with_key_type(1)
        .with_coordinator_keys(vec![s(id)]);
    c.send(&req, 4).await
}

async fn init(c: &mut Client, id: &str, expected: (i64, i16)) -> InitProducerIdResponse {
    let req = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(s(id))))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(expected.0))
        .with_producer_epoch(expected.1);
    c.send(&req, 4).await
}

async fn add_partition(c: &mut Client, id: &str, pid: i64, epoch: i16, partition: i32) -> i16 {
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

async fn produce(c: &mut Client, id: &str, records: Bytes) -> (i16, i64) {
    let req =
        produce_request(TOPIC, 0, records, -1).with_transactional_id(Some(TransactionalId(s(id))));
    let resp = c.send(&req, 9).await;
    let p = &resp.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

async fn end(c: &mut Client, id: &str, pid: i64, epoch: i16, commit: bool) -> i16 {
    let req = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(s(id)))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(commit);
    c.send(&req, 3).await.error_code
}

/// A read_committed (or not) fetch from offset 0.
async fn fetch(c: &mut Client, read_committed: bool) -> fetch_response::PartitionData {
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

async fn latest(c: &mut Client, read_committed: bool) -> i64 {
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
fn records(data: &fetch_response::PartitionData) -> Vec<(i64, String, bool)> {
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
fn batches(data: &fetch_response::PartitionData) -> Vec<(i64, bool)> {
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

fn aborted(data: &fetch_response::PartitionData) -> Option<Vec<(i64, i64)>> {
    data.aborted_transactions.as_ref().map(|a| {
        a.iter()
            .map(|t| (t.producer_id.0, t.first_offset))
            .collect()
    })
}

#[tokio::test]
async fn commit_abort_and_read_committed() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), OVERRIDES).await;
    let mut c = broker.client().await;
    assert_eq!(c.create_topic(TOPIC, 1).await, 0);
    let found = find_txn_coordinator(&mut c, "tx").await;
    assert_eq!(found.coordinators[0].error_code, 0, "{found:?}");
    assert_eq!(found.coordinators[0].port, broker.addr.port() as i32);

    let r = init(&mut c, "tx", (-1, -1)).await;
    assert_eq!(r.error_code, 0);
    let (pid, epoch) = (r.producer_id.0, r.producer_epoch);
    assert_eq!(epoch, 0);

    // A committed transaction of three records.
    assert_eq!(add_partition(&mut c, "tx", pid, epoch, 0).await, 0);
    let (err, base) = produce(
        &mut c,
        "tx",
        txn_batch(&["c0", "c1", "c2"], (pid, epoch, 0)),
    )
    .await;
    assert_eq!((err, base), (0, 0));
    let open = fetch(&mut c, true).await;
    assert_eq!(open.high_watermark, 3);
    assert_eq!(
        open.last_stable_offset, 0,
        "the open transaction holds the LSO"
    );
    assert!(records(&open).is_empty());
    assert_eq!(latest(&mut c, true).await, 0);
    assert_eq!(latest(&mut c, false).await, 3);
    assert_eq!(records(&fetch(&mut c, false).await).len(), 3);

    assert_eq!(end(&mut c, "tx", pid, epoch, true).await, 0);
    let committed = fetch(&mut c, true).await;
    assert_eq!(
        committed.last_stable_offset, 4,
        "after the commit marker at 3"
    );
    assert_eq!(aborted(&committed), Some(vec![]));
    let got = records(&committed);
    let data: Vec<&str> = got.iter().filter(|r| !r.2).map(|r| r.1.as_str()).collect();
    assert_eq!(data, ["c0", "c1", "c2"]);
    assert_eq!(
        batches(&committed),
        vec![(0, false), (3, true)],
        "then the commit marker"
    );

    // An aborted transaction: its records are returned with the transaction named.
    assert_eq!(add_partition(&mut c, "tx", pid, epoch, 0).await, 0);
    let (err, base) = produce(&mut c, "tx", txn_batch(&["a0", "a1"], (pid, epoch, 3))).await;
    assert_eq!((err, base), (0, 4));
    assert_eq!(end(&mut c, "tx", pid, epoch, false).await, 0);
    let after_abort = fetch(&mut c, true).await;
    assert_eq!(after_abort.last_stable_offset, 7);
    assert_eq!(aborted(&after_abort), Some(vec![(pid, 4)]));
    assert_eq!(latest(&mut c, true).await, 7);
    assert_eq!(
        aborted(&fetch(&mut c, false).await),
        None,
        "read_uncommitted: null"
    );

    // A retried EndTxn is answered as before; the other outcome is INVALID_TXN_STATE.
    assert_eq!(end(&mut c, "tx", pid, epoch, false).await, 0);
    assert_eq!(end(&mut c, "tx", pid, epoch, true).await, 48);

    // A second instance bumps the epoch and fences the first.
    let r2 = init(&mut c, "tx", (-1, -1)).await;
    assert_eq!(
        (r2.error_code, r2.producer_id.0, r2.producer_epoch),
        (0, pid, 1)
    );
    assert_eq!(
        add_partition(&mut c, "tx", pid, epoch, 0).await,
        90,
        "PRODUCER_FENCED"
    );
    // KIP-890: the partition has not seen the new epoch, but the coordinator says the
    // zombie's transaction does not hold it.
    let (err, _) = produce(&mut c, "tx", txn_batch(&["zombie"], (pid, epoch, 5))).await;
    assert_eq!(err, 47, "INVALID_PRODUCER_EPOCH");
    // Nor is a partition a live producer did not add accepted.
    let (pid2, epoch2) = (r2.producer_id.0, r2.producer_epoch);
    let (err, _) = produce(&mut c, "tx", txn_batch(&["unadded"], (pid2, epoch2, 0))).await;
    assert_eq!(err, 48, "INVALID_TXN_STATE");
    assert_eq!(
        fetch(&mut c, false).await.high_watermark,
        7,
        "nothing was appended"
    );
    broker.stop().await;
}

#[tokio::test]
async fn a_new_instance_aborts_the_open_transaction_of_the_old_one() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), OVERRIDES).await;
    let mut c = broker.client().await;
    assert_eq!(c.create_topic(TOPIC, 1).await, 0);
    assert_eq!(
        find_txn_coordinator(&mut c, "app").await.coordinators[0].error_code,
        0
    );
    let r = init(&mut c, "app", (-1, -1)).await;
    let (pid, epoch) = (r.producer_id.0, r.producer_epoch);
    assert_eq!(add_partition(&mut c, "app", pid, epoch, 0).await, 0);
    assert_eq!(
        produce(&mut c, "app", txn_batch(&["x"], (pid, epoch, 0)))
            .await
            .0,
        0
    );

    // The new instance is told to retry while the old transaction is aborted under a
    // bumped epoch; the retry bumps once more.
    let first = init(&mut c, "app", (-1, -1)).await;
    assert_eq!(first.error_code, 51, "CONCURRENT_TRANSACTIONS");
    let mut again = init(&mut c, "app", (-1, -1)).await;
    for _ in 0..50 {
        if again.error_code != 51 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        again = init(&mut c, "app", (-1, -1)).await;
    }
    assert_eq!(
        (again.error_code, again.producer_id.0, again.producer_epoch),
        (0, pid, 2)
    );
    let data = fetch(&mut c, true).await;
    assert_eq!(aborted(&data), Some(vec![(pid, 0)]));
    assert_eq!(data.last_stable_offset, 2);
    // The old epoch's records are refused by the partition now.
    let (err, _) = produce(&mut c, "app", txn_batch(&["late"], (pid, epoch, 1))).await;
    assert_eq!(err, 47, "INVALID_PRODUCER_EPOCH");
    broker.stop().await;
}

#[tokio::test]
async fn an_open_transaction_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (pid, epoch) = {
        let broker = TestBroker::start(dir.path(), OVERRIDES).await;
        let mut c = broker.client().await;
        assert_eq!(c.create_topic(TOPIC, 1).await, 0);
        assert_eq!(
            find_txn_coordinator(&mut c, "keep").await.coordinators[0].error_code,
            0
        );
        let r = init(&mut c, "keep", (-1, -1)).await;
        let (pid, epoch) = (r.producer_id.0, r.producer_epoch);
        assert_eq!(add_partition(&mut c, "keep", pid, epoch, 0).await, 0);
        assert_eq!(
            produce(&mut c, "keep", txn_batch(&["k0", "k1"], (pid, epoch, 0)))
                .await
                .0,
            0
        );
        broker.stop().await;
        (pid, epoch)
    };
    let broker = TestBroker::start(dir.path(), OVERRIDES).await;
    let mut c = broker.client().await;
    let held = fetch(&mut c, true).await;
    assert_eq!((held.high_watermark, held.last_stable_offset), (2, 0));
    assert_eq!(end(&mut c, "keep", pid, epoch, true).await, 0);
    let done = fetch(&mut c, true).await;
    assert_eq!(done.last_stable_offset, 3);
    let got: Vec<String> = records(&done)
        .into_iter()
        .filter(|r| !r.2)
        .map(|r| r.1)
        .collect();
    assert_eq!(got, vec!["k0", "k1"]);
    broker.stop().await;
}
