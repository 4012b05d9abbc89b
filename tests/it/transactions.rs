//! Transactions over TCP, as a transactional producer and a read_committed consumer
//! drive them: the coordinator's answers, what a read_committed fetch returns (records up
//! to the last stable offset, the aborted transactions in them), ListOffsets, fencing
//! of an older epoch, and a restart in the middle of a transaction.

use crate::common;

use common::txn::*;
use common::TestBroker;
use kafka_protocol::messages::*;

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

#[tokio::test]
async fn kafka_transactions_sh_views_list_describe_and_producers() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), OVERRIDES).await;
    let mut c = broker.client().await;
    assert_eq!(c.create_topic(TOPIC, 1).await, 0);
    assert_eq!(
        find_txn_coordinator(&mut c, "view").await.coordinators[0].error_code,
        0
    );
    let r = init(&mut c, "view", (-1, -1)).await;
    let (pid, epoch) = (r.producer_id.0, r.producer_epoch);
    assert_eq!(add_partition(&mut c, "view", pid, epoch, 0).await, 0);
    let (err, _) = produce(&mut c, "view", txn_batch(&["v"], (pid, epoch, 0))).await;
    assert_eq!(err, 0);

    let listed = c
        .send(
            &ListTransactionsRequest::default()
                .with_state_filters(vec![s("Ongoing"), s("NoSuchState")])
                .with_transactional_id_pattern(Some(s("vi.*"))),
            2,
        )
        .await;
    assert_eq!(listed.error_code, 0);
    assert_eq!(listed.unknown_state_filters, vec![s("NoSuchState")]);
    let ids: Vec<_> = listed
        .transaction_states
        .iter()
        .map(|t| (t.transactional_id.0.to_string(), t.producer_id.0))
        .collect();
    assert_eq!(ids, vec![("view".to_string(), pid)]);

    let described = c
        .send(
            &DescribeTransactionsRequest::default().with_transactional_ids(vec![
                TransactionalId(s("view")),
                TransactionalId(s("unknown")),
            ]),
            0,
        )
        .await;
    let v = &described.transaction_states[0];
    assert_eq!((v.error_code, v.transaction_state.as_str()), (0, "Ongoing"));
    assert_eq!(v.topics[0].partitions, vec![0]);
    assert!(v.transaction_start_time_ms > 0);
    assert_eq!(
        described.transaction_states[1].error_code, 105,
        "TRANSACTIONAL_ID_NOT_FOUND"
    );

    let producers = c
        .send(
            &DescribeProducersRequest::default().with_topics(vec![
                describe_producers_request::TopicRequest::default()
                    .with_name(TopicName(s(TOPIC)))
                    .with_partition_indexes(vec![0]),
            ]),
            0,
        )
        .await;
    let p = &producers.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    let open: Vec<_> = p
        .active_producers
        .iter()
        .map(|a| (a.producer_id.0, a.current_txn_start_offset))
        .collect();
    assert_eq!(open, vec![(pid, 0)], "the open transaction's first offset");
    broker.stop().await;
}

#[tokio::test]
async fn write_txn_markers_ends_a_hanging_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), OVERRIDES).await;
    let mut c = broker.client().await;
    assert_eq!(c.create_topic(TOPIC, 1).await, 0);
    assert_eq!(
        find_txn_coordinator(&mut c, "hang").await.coordinators[0].error_code,
        0
    );
    let r = init(&mut c, "hang", (-1, -1)).await;
    let (pid, epoch) = (r.producer_id.0, r.producer_epoch);
    assert_eq!(add_partition(&mut c, "hang", pid, epoch, 0).await, 0);
    let (err, _) = produce(&mut c, "hang", txn_batch(&["h0", "h1"], (pid, epoch, 0))).await;
    assert_eq!(err, 0);
    assert_eq!(fetch(&mut c, true).await.last_stable_offset, 0);

    // What `kafka-transactions.sh abort` sends once DescribeProducers found it.
    let marker = |epoch: i16| {
        WriteTxnMarkersRequest::default().with_markers(vec![
            write_txn_markers_request::WritableTxnMarker::default()
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_transaction_result(false)
                .with_coordinator_epoch(0)
                .with_topics(vec![
                    write_txn_markers_request::WritableTxnMarkerTopic::default()
                        .with_name(TopicName(s(TOPIC)))
                        .with_partition_indexes(vec![0]),
                ]),
        ])
    };
    let resp = c.send(&marker(epoch), 1).await;
    assert_eq!(resp.markers[0].topics[0].partitions[0].error_code, 0);
    let after = fetch(&mut c, true).await;
    assert_eq!(after.last_stable_offset, 3);
    assert_eq!(aborted(&after), Some(vec![(pid, 0)]));
    // An older epoch than the partition has seen is refused.
    let stale = c.send(&marker(epoch - 1), 1).await;
    assert_eq!(stale.markers[0].topics[0].partitions[0].error_code, 47);
    broker.stop().await;
}

/// WriteTxnMarkers over TCP naming partition 0 two hundred thousand times: for producer
/// id -1 every answer is INVALID_REQUEST, for a producer the partition never saw every
/// answer is NONE and nothing is written, and for the producer with the open
/// transaction exactly one marker is appended. Before, each listed partition was its
/// own marker append (a 3.9 MB request appended a million markers and held 512 MB).
#[tokio::test]
async fn write_txn_markers_writes_each_marker_once_and_only_for_known_producers() {
    const TIMES: usize = 200_000;
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), OVERRIDES).await;
    let mut c = broker.client().await;
    assert_eq!(c.create_topic(TOPIC, 1).await, 0);
    assert_eq!(
        find_txn_coordinator(&mut c, "many").await.coordinators[0].error_code,
        0
    );
    let r = init(&mut c, "many", (-1, -1)).await;
    let (pid, epoch) = (r.producer_id.0, r.producer_epoch);
    assert_eq!(add_partition(&mut c, "many", pid, epoch, 0).await, 0);
    let (err, _) = produce(&mut c, "many", txn_batch(&["m0", "m1"], (pid, epoch, 0))).await;
    assert_eq!(err, 0);
    assert_eq!(fetch(&mut c, false).await.high_watermark, 2);

    let marker = |pid: i64, epoch: i16| {
        WriteTxnMarkersRequest::default().with_markers(vec![
            write_txn_markers_request::WritableTxnMarker::default()
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_transaction_result(true)
                .with_coordinator_epoch(0)
                .with_topics(vec![
                    write_txn_markers_request::WritableTxnMarkerTopic::default()
                        .with_name(TopicName(s(TOPIC)))
                        .with_partition_indexes(vec![0; TIMES]),
                ]),
        ])
    };
    // (how many answers, the distinct codes among them)
    let codes = |r: &WriteTxnMarkersResponse| -> (usize, std::collections::BTreeSet<i16>) {
        let partitions = &r.markers[0].topics[0].partitions;
        let codes = partitions.iter().map(|p| p.error_code).collect();
        (partitions.len(), codes)
    };
    let only = |code: i16| (TIMES, std::collections::BTreeSet::from([code]));
    let none = c.send(&marker(-1, 0), 1).await;
    assert_eq!(codes(&none), only(42), "INVALID_REQUEST for each listing");
    assert_eq!(
        fetch(&mut c, false).await.high_watermark,
        2,
        "nothing written"
    );

    let stranger = c.send(&marker(pid + 1000, 0), 1).await;
    assert_eq!(codes(&stranger), only(0));
    assert_eq!(
        fetch(&mut c, false).await.high_watermark,
        2,
        "nothing written"
    );

    let real = c.send(&marker(pid, epoch), 1).await;
    assert_eq!(codes(&real), only(0));
    let after = fetch(&mut c, true).await;
    assert_eq!(
        (after.high_watermark, after.last_stable_offset),
        (3, 3),
        "one commit marker"
    );
    broker.stop().await;
}
