//! The coordinator over an in-memory log: a transaction whose markers could not be
//! written before the coordinator went away is completed by the next one, from its
//! Prepare record.

use std::sync::atomic::AtomicBool;

use parking_lot::Mutex;

use super::*;
use crate::config::BrokerConfig;
use crate::coordinator::runtime::memory_log::MemoryLog;
use crate::coordinator::txn::TxnState;
use crate::log::control::TxnResult;

type Written = (TopicPartition, i64, i16, EndTxnMarker);

#[derive(Default)]
struct Markers {
    /// Partitions refuse markers while set (their leader is away).
    refuse: AtomicBool,
    written: Mutex<Vec<Written>>,
    /// How many partitions each call was handed.
    calls: Mutex<Vec<usize>>,
}

impl MarkerWriter for Markers {
    fn write_markers(
        &self,
        partitions: &[TopicPartition],
        producer_id: i64,
        producer_epoch: i16,
        marker: EndTxnMarker,
    ) -> Vec<MarkerWrite> {
        self.calls.lock().push(partitions.len());
        partitions
            .iter()
            .map(|tp| -> MarkerWrite {
                if self.refuse.load(Ordering::Acquire) {
                    return Box::pin(std::future::ready(Err(ResponseError::NotLeaderOrFollower)));
                }
                self.written
                    .lock()
                    .push((tp.clone(), producer_id, producer_epoch, marker));
                Box::pin(std::future::ready(Ok(())))
            })
            .collect()
    }
}

fn coordinator(log: Arc<MemoryLog>, markers: Arc<Markers>) -> Arc<TransactionCoordinator> {
    let mut config = BrokerConfig::default().transaction;
    config.state_log_partitions = 1;
    TransactionCoordinator::new(1, config, log, markers, None)
}

#[tokio::test]
async fn a_prepared_transaction_is_completed_by_the_next_coordinator() {
    let log = Arc::new(MemoryLog::default());
    let away = Arc::new(Markers::default());
    away.refuse.store(true, Ordering::Release);
    let first = coordinator(log.clone(), away.clone());
    first.set_completion_wait(Duration::from_millis(200));
    assert_eq!(first.load_now(0, 0), ShardStatus::Active);
    let (pid, epoch) = first
        .init_producer_id("tx", 60_000, None, || async { Ok(42) })
        .await
        .unwrap();
    let tp = TopicPartition::new("t", 0);
    first
        .add_partitions("tx", pid, epoch, vec![tp.clone()])
        .await
        .unwrap();
    // The markers cannot be written: EndTxn answers once its wait is over (the outcome
    // was decided by the Prepare record), and the coordinator then goes away.
    first.end_txn("tx", pid, epoch, true).await.unwrap();
    let d = first.describe("tx").await.unwrap().unwrap();
    assert_eq!(d.value.state, TxnState::PrepareCommit);
    first.shutdown();
    assert!(away.written.lock().is_empty());

    let markers = Arc::new(Markers::default());
    let next = coordinator(log, markers.clone());
    assert_eq!(next.load_now(0, 1), ShardStatus::Active);
    let mut state = TxnState::PrepareCommit;
    for _ in 0..100 {
        state = next.describe("tx").await.unwrap().unwrap().value.state;
        if state != TxnState::PrepareCommit {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(state, TxnState::CompleteCommit);
    let written = markers.written.lock().clone();
    assert_eq!(written.len(), 1);
    let (at, p, e, m) = &written[0];
    assert_eq!((at, *p, *e, m.result), (&tp, pid, epoch, TxnResult::Commit));
}

/// Every partition's first marker is handed over in one call (so a broker's markers can
/// leave in one request); a partition refused is retried on its own.
#[tokio::test]
async fn a_transactions_markers_start_together_and_retry_alone() {
    let markers = Arc::new(Markers::default());
    let c = coordinator(Arc::new(MemoryLog::default()), markers.clone());
    assert_eq!(c.load_now(0, 0), ShardStatus::Active);
    let (pid, epoch) = c
        .init_producer_id("tx", 60_000, None, || async { Ok(42) })
        .await
        .unwrap();
    let partitions: Vec<TopicPartition> = (0..3).map(|p| TopicPartition::new("t", p)).collect();
    c.add_partitions("tx", pid, epoch, partitions.clone())
        .await
        .unwrap();
    c.end_txn("tx", pid, epoch, true).await.unwrap();
    assert_eq!(*markers.calls.lock(), vec![3]);
    let mut written: Vec<TopicPartition> =
        markers.written.lock().iter().map(|w| w.0.clone()).collect();
    written.sort();
    assert_eq!(written, partitions);

    markers.refuse.store(true, Ordering::Release);
    c.set_completion_wait(Duration::from_millis(300));
    c.add_partitions("tx", pid, epoch, partitions.clone())
        .await
        .unwrap();
    c.end_txn("tx", pid, epoch, false).await.unwrap();
    markers.refuse.store(false, Ordering::Release);
    for _ in 0..200 {
        if c.describe("tx").await.unwrap().unwrap().value.state == TxnState::CompleteAbort {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        c.describe("tx").await.unwrap().unwrap().value.state,
        TxnState::CompleteAbort
    );
    let calls = markers.calls.lock().clone();
    assert_eq!(calls[..2], [3, 3]);
    assert!(
        calls[2..].iter().all(|&n| n == 1),
        "retries one partition each: {calls:?}"
    );
    assert_eq!(markers.written.lock().len(), 6);
}

/// Marks the log failing once the markers are written: the Prepare record went in, the
/// Complete record cannot until the log recovers (an ISR below min.insync.replicas).
struct LogFailsAfterMarkers {
    log: Arc<MemoryLog>,
}

impl MarkerWriter for LogFailsAfterMarkers {
    fn write_markers(
        &self,
        partitions: &[TopicPartition],
        _producer_id: i64,
        _producer_epoch: i16,
        _marker: EndTxnMarker,
    ) -> Vec<MarkerWrite> {
        self.log.fail_appends.store(true, Ordering::Release);
        partitions
            .iter()
            .map(|_| -> MarkerWrite { Box::pin(std::future::ready(Ok(()))) })
            .collect()
    }
}

/// A Complete record refused by the log is written again while this broker still
/// coordinates the partition: the transaction does not stay prepared (and its producer
/// at CONCURRENT_TRANSACTIONS) when leadership does not move.
#[tokio::test]
async fn a_complete_record_the_log_refused_is_written_once_the_log_recovers() {
    let log = Arc::new(MemoryLog::default());
    let markers = Arc::new(LogFailsAfterMarkers { log: log.clone() });
    let c = TransactionCoordinator::new(
        1,
        {
            let mut config = BrokerConfig::default().transaction;
            config.state_log_partitions = 1;
            config
        },
        log.clone(),
        markers,
        None,
    );
    c.set_completion_wait(Duration::from_millis(100));
    assert_eq!(c.load_now(0, 0), ShardStatus::Active);
    let (pid, epoch) = c
        .init_producer_id("tx", 60_000, None, || async { Ok(42) })
        .await
        .unwrap();
    c.add_partitions("tx", pid, epoch, vec![TopicPartition::new("t", 0)])
        .await
        .unwrap();
    c.end_txn("tx", pid, epoch, true).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        c.describe("tx").await.unwrap().unwrap().value.state,
        TxnState::PrepareCommit
    );
    log.fail_appends.store(false, Ordering::Release);
    let mut state = TxnState::PrepareCommit;
    for _ in 0..200 {
        state = c.describe("tx").await.unwrap().unwrap().value.state;
        if state != TxnState::PrepareCommit {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(state, TxnState::CompleteCommit);
}

/// A loaded coordinator with transaction "tx" begun (`data` added when given), asked to
/// verify the group's offsets partition the transaction does not hold: INVALID_TXN_STATE,
/// the answer a coordinator must not give from a past it no longer owns.
async fn with_a_stale_verification(
    log: &Arc<MemoryLog>,
    data: Option<&TopicPartition>,
) -> (Arc<TransactionCoordinator>, i64, i16, TopicPartition) {
    let c = coordinator(log.clone(), Arc::new(Markers::default()));
    assert_eq!(c.load_now(0, 0), ShardStatus::Active);
    let (pid, epoch) = c
        .init_producer_id("tx", 60_000, None, || async { Ok(42) })
        .await
        .unwrap();
    if let Some(data) = data {
        c.add_partitions("tx", pid, epoch, vec![data.clone()])
            .await
            .unwrap();
    }
    let offsets = TopicPartition::new("__consumer_offsets", 1);
    let stale = c
        .verify_partitions("tx", pid, epoch, vec![offsets.clone()])
        .await
        .unwrap();
    assert_eq!(
        stale,
        vec![(offsets.clone(), Some(ResponseError::InvalidTxnState))]
    );
    (c, pid, epoch, offsets)
}

/// A coordinator whose `__transaction_state` partition's log dir went offline holds the
/// state of the moment of the failure, while the broker that leads the partition next
/// goes on (it added the group's offsets partition to the transaction, say). Asked to
/// verify that partition, it must not answer from its past (INVALID_TXN_STATE, which the
/// Java producer takes as fatal) but say it no longer coordinates, so the verification
/// goes to the leader the metadata names, or the client retries.
#[tokio::test]
async fn a_coordinator_whose_log_dir_went_offline_answers_no_verification_from_its_past() {
    let log = Arc::new(MemoryLog::default());
    let data = TopicPartition::new("t", 0);
    let (c, pid, epoch, offsets) = with_a_stale_verification(&log, Some(&data)).await;

    log.offline.lock().insert(0);
    for tp in [data, offsets] {
        assert_eq!(
            c.verify_partitions("tx", pid, epoch, vec![tp]).await,
            Err(ResponseError::NotCoordinator)
        );
    }
    assert!(
        c.describe("tx").await.is_err(),
        "nor any other read of its state"
    );
}

/// The fault harness's `split`: a broker cut off from ZooKeeper past its session timeout
/// has lost its leaderships at the controller, which moved `__transaction_state-0` to
/// another broker where the producer began a new transaction. Asked (by its own group
/// coordinator, for a TxnOffsetCommit) to verify a partition of that transaction, it must
/// not answer from the state it holds (INVALID_TXN_STATE, fatal to the producer) but say
/// it does not coordinate, until the controller has spoken to its new registration.
#[tokio::test]
async fn a_coordinator_whose_leaderships_are_in_doubt_answers_no_verification_from_its_past() {
    let log = Arc::new(MemoryLog::default());
    let (c, pid, epoch, offsets) = with_a_stale_verification(&log, None).await;

    log.in_doubt.store(true, Ordering::Release);
    assert_eq!(
        c.verify_partitions("tx", pid, epoch, vec![offsets.clone()])
            .await,
        Err(ResponseError::NotCoordinator)
    );
    assert!(
        c.describe("tx").await.is_err(),
        "nor any other read of its state"
    );
    assert_eq!(
        c.add_partitions("tx", pid, epoch, vec![offsets.clone()])
            .await
            .err(),
        Some(ResponseError::NotCoordinator),
        "nor any write"
    );

    // The controller spoke to the new registration and left the partition here.
    log.in_doubt.store(false, Ordering::Release);
    assert!(c.describe("tx").await.is_ok());
}

/// No marker is written before the Prepare record is committed. The shard replays the
/// record as soon as it is appended; had the markers left then, a leader cut off before
/// the record reached the other replicas (it aborted a timed-out transaction, say)
/// would have written ABORT markers for a record the next leader truncates, and that
/// leader's coordinator, knowing the transaction as ongoing, would have committed it:
/// partitions that took the ABORT refuse the COMMIT (an older producer epoch) and the
/// transaction is split (the nemesis harness's long form found it).
#[tokio::test]
async fn markers_wait_until_the_prepare_record_is_committed() {
    let log = Arc::new(MemoryLog::default());
    let markers = Arc::new(Markers::default());
    let c = coordinator(log.clone(), markers.clone());
    assert_eq!(c.load_now(0, 0), ShardStatus::Active);
    let (pid, epoch) = c
        .init_producer_id("tx", 60_000, None, || async { Ok(42) })
        .await
        .unwrap();
    let tp = TopicPartition::new("t", 0);
    c.add_partitions("tx", pid, epoch, vec![tp.clone()])
        .await
        .unwrap();
    let prepared_at = log.log_end(0);

    log.manual_high_watermark.store(true, Ordering::Release);
    log.set_high_watermark(0, prepared_at);
    let ending = {
        let c = c.clone();
        tokio::spawn(async move { c.end_txn("tx", pid, epoch, true).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        log.log_end(0),
        prepared_at + 1,
        "the Prepare record is appended"
    );
    assert!(
        markers.written.lock().is_empty(),
        "no marker before the Prepare record is committed"
    );

    log.set_high_watermark(0, prepared_at + 1);
    ending.await.unwrap().unwrap();
    for _ in 0..200 {
        if !markers.written.lock().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let written = markers.written.lock().clone();
    assert_eq!(written.len(), 1);
    assert_eq!(
        (&written[0].0, written[0].1, written[0].3.result),
        (&tp, pid, TxnResult::Commit)
    );
}

/// Verification asks the coordinator the broker's metadata cache names. The deltas
/// behind the `leaders` map carry a leadership change only to a broker hosting a replica
/// of `__transaction_state` (or with a LeaderAndIsr), so on the others it kept naming a
/// broker that coordinated no more: every verification it asked was NOT_COORDINATOR, and
/// a producer's batch for a partition led there was refused for over a minute, until its
/// transaction timed out (the nemesis harness's long form, after a `bridge`).
#[tokio::test]
async fn verification_goes_to_the_coordinator_the_metadata_cache_names() {
    let c = coordinator(Arc::new(MemoryLog::default()), Arc::new(Markers::default()));
    c.leaders.lock().insert(0, 2);
    assert_eq!(c.leader_of(0), Some(2), "the last delta's, without a cache");
    c.follow_metadata_leaders(Box::new(|p| (p == 0).then_some(3)));
    assert_eq!(
        c.leader_of(0),
        Some(3),
        "the cache's, though a delta said 2"
    );
    c.leaders.lock().insert(1, 2);
    assert_eq!(
        c.leader_of(1),
        Some(2),
        "a partition the cache does not know"
    );
}

/// An EndTxn waiting for markers that cannot be written is answered once the broker
/// begins shutting down, not at the end of its wait: it held the connection, and the
/// listener's drain, 7 s in the nemesis harness's long form.
#[tokio::test]
async fn an_end_txn_waiting_for_markers_is_answered_when_shutdown_begins() {
    let markers = Arc::new(Markers::default());
    markers.refuse.store(true, Ordering::Release);
    let c = coordinator(Arc::new(MemoryLog::default()), markers);
    c.set_completion_wait(Duration::from_secs(60));
    assert_eq!(c.load_now(0, 0), ShardStatus::Active);
    let (pid, epoch) = c
        .init_producer_id("tx", 60_000, None, || async { Ok(42) })
        .await
        .unwrap();
    c.add_partitions("tx", pid, epoch, vec![TopicPartition::new("t", 0)])
        .await
        .unwrap();
    let ending = {
        let c = c.clone();
        tokio::spawn(async move { c.end_txn("tx", pid, epoch, true).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!ending.is_finished(), "waits for the markers");
    c.begin_shutdown();
    let answered = tokio::time::timeout(Duration::from_secs(5), ending)
        .await
        .expect("answered at once, not after 60 s")
        .unwrap();
    assert_eq!(answered, Ok(()), "decided: its Prepare record is committed");
}
