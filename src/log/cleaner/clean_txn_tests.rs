//! Compaction of transactional data, record by record: what survives each round, what a
//! restart reads back, and what producers can still do after it.

use std::sync::Arc;

use super::tests::{batch, batch_of, cleaner, open, read_all, write_unique, NOW};
use crate::log::cleaner::{Candidate, LogCleaner};
use crate::log::control::{EndTxnMarker, TxnResult};
use crate::log::{AbortedTxn, Log, LogError};

fn kv(k: &str, v: &str) -> Vec<(String, Option<String>)> {
    vec![(k.to_string(), Some(v.to_string()))]
}

fn end_txn(log: &Log, producer_id: i64, result: TxnResult) -> i64 {
    let marker = EndTxnMarker {
        result,
        coordinator_epoch: 0,
    };
    log.append_marker(producer_id, 0, marker, 0, NOW)
        .unwrap()
        .first_offset
}

fn txn(log: &Log, producer_id: i64, seq: i32, entries: &[(String, Option<String>)]) -> i64 {
    let b = batch_of(entries, Some((producer_id, 0, seq)), true);
    log.append_as_leader(b, 0, NOW).unwrap().first_offset
}

fn plain(log: &Log, k: &str, v: &str) -> i64 {
    log.append_as_leader(batch(&kv(k, v), None), 0, NOW)
        .unwrap()
        .first_offset
}

fn clean_at(cleaner: &LogCleaner, log: &Arc<Log>, now_ms: i64) -> bool {
    let candidates = [Candidate {
        log: log.clone(),
        high_watermark: log.log_end_offset(),
    }];
    cleaner.clean_filthiest(&candidates, now_ms).is_some()
}

/// The offsets that hold a record (data or marker).
fn offsets(log: &Log) -> Vec<i64> {
    read_all(log).iter().map(|r| r.0).collect()
}

fn value_at(log: &Log, offset: i64) -> Option<String> {
    read_all(log)
        .into_iter()
        .find(|r| r.0 == offset)
        .and_then(|r| r.2)
}

#[test]
fn committed_records_compact_aborted_ones_go_and_open_ones_wait_for_the_lso() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), false);
    // Producer 7 commits a and b; a is written again by a plain producer; producer 8
    // aborts a newer b.
    let mut ab = kv("a", "a-txn");
    ab.extend(kv("b", "b-txn"));
    assert_eq!(txn(&log, 7, 0, &ab), 0);
    assert_eq!(end_txn(&log, 7, TxnResult::Commit), 2);
    assert_eq!(plain(&log, "a", "a-plain"), 3);
    assert_eq!(txn(&log, 8, 0, &kv("b", "b-aborted")), 4);
    assert_eq!(end_txn(&log, 8, TxnResult::Abort), 5);
    let abort8 = AbortedTxn {
        producer_id: 8,
        first_offset: 4,
        last_offset: 5,
        last_stable_offset: 6,
    };
    write_unique(&log, 0, 200);
    // Producer 9 opens a transaction in a later segment; d is written twice after it.
    let open_at = txn(&log, 9, 0, &kv("c", "c-open"));
    assert!(log.segment_count() > 1 && open_at > 6);
    assert_eq!(log.first_unstable_offset(), Some(open_at));
    let d1 = plain(&log, "d", "d1");
    write_unique(&log, 1000, 100);
    let d2 = plain(&log, "d", "d2");
    write_unique(&log, 2000, 100);

    let cleaner = cleaner();
    assert!(clean_at(&cleaner, &log, NOW));
    let kept = offsets(&log);
    assert!(!kept.contains(&0), "a committed record superseded: gone");
    assert!(
        kept.contains(&1),
        "b-txn stays: the aborted b does not supersede it"
    );
    assert!(kept.contains(&2) && kept.contains(&5), "both markers stay");
    assert!(!kept.contains(&4), "the aborted record is gone");
    assert!(
        kept.contains(&d1) && kept.contains(&d2),
        "nothing at or past the open transaction is compacted"
    );
    assert_eq!(value_at(&log, open_at).as_deref(), Some("c-open"));
    assert_eq!(log.aborted_txns(0, i64::MAX), vec![abort8]);

    // The transaction commits: the last stable offset moves and d1 goes.
    end_txn(&log, 9, TxnResult::Commit);
    assert_eq!(log.first_unstable_offset(), None);
    write_unique(&log, 3000, 100);
    assert!(clean_at(&cleaner, &log, NOW));
    let kept = offsets(&log);
    assert!(!kept.contains(&d1) && kept.contains(&d2));
    assert_eq!(value_at(&log, 1).as_deref(), Some("b-txn"));
    assert_eq!(value_at(&log, 3).as_deref(), Some("a-plain"));
    assert_eq!(value_at(&log, open_at).as_deref(), Some("c-open"));
    // Producer 8's batch is its last: its header stays (no record), so its abort marker
    // and index entry stay with it.
    assert!(kept.contains(&5));
    assert_eq!(log.aborted_txns(0, i64::MAX), vec![abort8]);

    // A restart (unclean, so every segment is recovered) reads back the same.
    let expected = read_all(&log);
    drop(log);
    let log = open(dir.path(), false);
    assert_eq!(read_all(&log), expected);
    assert_eq!(log.aborted_txns(0, i64::MAX), vec![abort8]);
    assert_eq!(log.first_unstable_offset(), None);
    for pid in [7, 8, 9] {
        assert!(!log.has_ongoing_txn(pid, 0), "producer {pid}");
    }
}

#[test]
fn a_commit_marker_goes_delete_retention_ms_after_its_last_record() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), false);
    assert_eq!(txn(&log, 7, 0, &kv("b", "b-txn")), 0);
    assert_eq!(end_txn(&log, 7, TxnResult::Commit), 1);
    // Producer 7 commits again (its last batch moves on), and b is written again.
    let later = txn(&log, 7, 1, &kv("e", "e-txn"));
    end_txn(&log, 7, TxnResult::Commit);
    plain(&log, "b", "b-plain");
    write_unique(&log, 0, 100);
    let cleaner = cleaner();
    // Round 1 removes the superseded record; its marker was seen after it and stays.
    assert!(clean_at(&cleaner, &log, NOW));
    let kept = offsets(&log);
    assert!(!kept.contains(&0) && kept.contains(&1));
    // Round 2 finds the marker alone and stamps it; it stays until the horizon passes.
    write_unique(&log, 100, 100);
    assert!(clean_at(&cleaner, &log, NOW));
    assert!(offsets(&log).contains(&1));
    write_unique(&log, 200, 100);
    assert!(clean_at(&cleaner, &log, NOW + 59_000));
    assert!(
        offsets(&log).contains(&1),
        "kept for delete.retention.ms (60 s)"
    );
    write_unique(&log, 300, 100);
    assert!(clean_at(&cleaner, &log, NOW + 61_000));
    let kept = offsets(&log);
    assert!(!kept.contains(&1), "the marker is gone");
    assert!(
        kept.contains(&later) && kept.contains(&(later + 1)),
        "the later transaction and its marker stay"
    );

    // A crash forgetting the snapshots: producer 7's state comes back from what is left,
    // and its next sequence is still checked.
    let expected = read_all(&log);
    drop(log);
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "snapshot") {
            std::fs::remove_file(path).unwrap();
        }
    }
    let log = open(dir.path(), false);
    assert_eq!(read_all(&log), expected);
    assert!(!log.has_ongoing_txn(7, 0));
    let gap = batch_of(&kv("e", "gap"), Some((7, 0, 5)), true);
    assert!(matches!(
        log.append_as_leader(gap, 0, NOW),
        Err(LogError::OutOfOrderSequence { .. })
    ));
    txn(&log, 7, 2, &kv("e", "next"));
}
