//! Transactions in the log: open transactions hold back the last stable offset, markers
//! end them, aborts are indexed in `.txnindex`, and all of it survives a restart.

use std::path::Path;

use super::*;
use crate::log::control::{EndTxnMarker, TxnResult};
use crate::log::test_util::*;
use crate::log::AbortedTxn;

fn open(dir: &Path, clean: bool) -> Log {
    let config = LogConfig {
        producer_id_expiration_ms: i64::MAX,
        ..LogConfig::default()
    };
    Log::open(dir, TopicPartition::new("t", 0), config, 0, 0, clean).unwrap()
}

fn marker(result: TxnResult) -> EndTxnMarker {
    EndTxnMarker {
        result,
        coordinator_epoch: 0,
    }
}

#[test]
fn markers_end_transactions_and_aborts_are_indexed() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), false);
    log.append_as_leader(batch_bytes(&[b"plain"], 1_000, None), 0, 5_000)
        .unwrap(); // 0
    log.append_as_leader(txn_batch_bytes(&[b"a1", b"a2"], 1_000, (7, 0, 0)), 0, 5_000)
        .unwrap(); // 1..=2
    log.append_as_leader(txn_batch_bytes(&[b"b1"], 1_000, (8, 0, 0)), 0, 5_000)
        .unwrap(); // 3
    assert_eq!(log.first_unstable_offset(), Some(1));
    assert!(log.has_ongoing_txn(7, 0) && !log.has_ongoing_txn(7, 1));

    let info = log
        .append_marker(7, 0, marker(TxnResult::Abort), 0, 5_000)
        .unwrap();
    assert_eq!(info.first_offset, 4);
    assert_eq!(log.first_unstable_offset(), Some(3), "8's is still open");
    let aborted = AbortedTxn {
        producer_id: 7,
        first_offset: 1,
        last_offset: 4,
        last_stable_offset: 3,
    };
    assert_eq!(log.aborted_txns(0, 10), vec![aborted]);
    assert_eq!(
        log.aborted_txns(5, 10),
        vec![],
        "ended before the fetch offset"
    );
    assert_eq!(log.aborted_txns(0, 1), vec![], "began at the bound");

    log.append_marker(8, 0, marker(TxnResult::Commit), 0, 5_000)
        .unwrap(); // 5
    assert_eq!(log.first_unstable_offset(), None);
    assert_eq!(
        log.aborted_txns(0, 10),
        vec![aborted],
        "commits are not indexed"
    );

    // A deposed coordinator and a fenced producer epoch are refused.
    log.append_as_leader(txn_batch_bytes(&[b"c"], 1_000, (9, 2, 0)), 0, 5_000)
        .unwrap(); // 6
    let stale = EndTxnMarker {
        result: TxnResult::Commit,
        coordinator_epoch: -2,
    };
    assert!(matches!(
        log.append_marker(9, 2, stale, 0, 5_000),
        Err(LogError::TransactionCoordinatorFenced { .. })
    ));
    assert!(matches!(
        log.append_marker(9, 1, marker(TxnResult::Abort), 0, 5_000),
        Err(LogError::InvalidProducerEpoch { .. })
    ));
    assert_eq!(log.first_unstable_offset(), Some(6));

    // The .txnindex holds Kafka's 34-byte entry.
    let raw = std::fs::read(dir.path().join("00000000000000000000.txnindex")).unwrap();
    assert_eq!(raw.len(), 34);
    assert_eq!(&raw[2..10], &7i64.to_be_bytes());

    // After a crash: the open transaction and the index come back from the log.
    drop(log);
    std::fs::remove_file(dir.path().join("00000000000000000000.txnindex")).unwrap();
    for snapshot in crate::log::producer_state::list_snapshots(dir.path())
        .unwrap()
        .values()
    {
        std::fs::remove_file(snapshot).unwrap();
    }
    let log = open(dir.path(), false);
    assert_eq!(log.first_unstable_offset(), Some(6));
    assert!(log.has_ongoing_txn(9, 2));
    assert_eq!(log.aborted_txns(0, 10), vec![aborted]);

    // A clean close and reopen keeps both.
    log.close().unwrap();
    drop(log);
    let log = open(dir.path(), true);
    assert_eq!(log.first_unstable_offset(), Some(6));
    assert_eq!(log.aborted_txns(0, 10), vec![aborted]);

    // Truncating below the marker forgets the abort and reopens the transaction.
    log.truncate_to(4).unwrap();
    assert_eq!(log.aborted_txns(0, 10), vec![]);
    assert_eq!(log.first_unstable_offset(), Some(1));
}

#[test]
fn a_marker_is_read_back_with_the_records() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), false);
    log.append_as_leader(txn_batch_bytes(&[b"a1", b"a2"], 1_000, (7, 0, 0)), 0, 5_000)
        .unwrap();
    log.append_marker(7, 0, marker(TxnResult::Commit), 0, 5_000)
        .unwrap();
    let read = log.read(0, 1 << 20, 3, true).unwrap();
    let offsets: Vec<i64> = crate::log::batch::BatchIter::new(&read.records)
        .map(|r| r.unwrap().1.base_offset())
        .collect();
    assert_eq!(offsets, vec![0, 2]);
}

/// The flush pass (what `flush.ms` / `flush.messages` and a clean shutdown run) syncs the
/// `.txnindex` with the segment whose aborted transactions it lists.
#[test]
fn the_flush_pass_syncs_the_transaction_index() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), false);
    let synced_txn_index = |log: &Log| {
        let inner = log.inner.lock();
        inner.segments.values().any(|s| {
            s.files_to_sync().iter().any(|f| {
                matches!(f, crate::log::segment::SyncTarget::Path(p) if p.to_string_lossy().ends_with(".txnindex"))
            })
        })
    };
    log.append_as_leader(txn_batch_bytes(&[b"a"], 1_000, (7, 0, 0)), 0, 5_000)
        .unwrap();
    assert!(!synced_txn_index(&log), "nothing aborted yet");
    log.append_marker(7, 0, marker(TxnResult::Abort), 0, 5_000)
        .unwrap();
    assert!(synced_txn_index(&log));
    log.flush().unwrap();
    let index = dir.path().join(format!("{:020}.txnindex", 0));
    assert_eq!(std::fs::metadata(index).unwrap().len(), 34);
}

/// A transaction index found corrupt at startup (a file system that went down left
/// zeros where its last entries were: `disk_eio` in the nemesis harness) is rebuilt from
/// its segment's markers, from the segment's start, whatever producer snapshot lies
/// beyond. Rebuilt only from the latest snapshot, it lost the aborts below it, and a
/// read_committed consumer was served those aborted records (the harness's mixed cluster
/// saw one).
#[test]
fn a_corrupt_transaction_index_is_rebuilt_from_the_segments_start() {
    for clean in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let log = open(dir.path(), false);
        log.append_as_leader(txn_batch_bytes(&[b"a1", b"a2"], 1_000, (7, 0, 0)), 0, 5_000)
            .unwrap(); // 0..=1
        log.append_marker(7, 0, marker(TxnResult::Abort), 0, 5_000)
            .unwrap(); // 2
        log.append_as_leader(batch_bytes(&[b"plain"], 1_000, None), 0, 5_000)
            .unwrap(); // 3
        let aborted = log.aborted_txns(0, 10);
        assert_eq!(
            aborted
                .iter()
                .map(|a| (a.producer_id, a.first_offset, a.last_offset))
                .collect::<Vec<_>>(),
            vec![(7, 0, 2)]
        );
        // A producer snapshot at the log end, past the abort.
        log.close().unwrap();
        drop(log);

        let index = dir.path().join("00000000000000000000.txnindex");
        let mut bytes = std::fs::read(&index).unwrap();
        bytes.extend_from_slice(&[0u8; 34]);
        std::fs::write(&index, bytes).unwrap();
        let log = open(dir.path(), clean);
        assert_eq!(
            log.aborted_txns(0, 10),
            aborted,
            "the abort is indexed again (clean shutdown: {clean})"
        );
        assert_eq!(log.log_end_offset(), 4);
    }
}
