//! Failures in the middle of appends and flushes, injected with `faults`: what stays
//! readable, what survives a crash, and when the log dir goes offline.

use std::path::Path;

use bytes::Bytes;

use super::*;
use crate::log::faults::{self, Fault};
use crate::log::test_util::*;

fn tp() -> TopicPartition {
    TopicPartition::new("t", 0)
}

fn config() -> LogConfig {
    LogConfig {
        index_interval_bytes: 100,
        max_index_size: 4096,
        ..LogConfig::default()
    }
}

/// A partition directory inside its own log dir, so faults armed for it touch no other test.
fn partition_dir(root: &Path) -> std::path::PathBuf {
    root.join("t-0")
}

fn values(log: &Log) -> Vec<(i64, Vec<u8>)> {
    let data = log.read(0, 1 << 20, i64::MAX, false).unwrap();
    decode_all(&data.records)
        .into_iter()
        .flat_map(|set| set.records)
        .map(|r| (r.offset, r.value.map(|v| v.to_vec()).unwrap_or_default()))
        .collect()
}

fn one(value: &[u8]) -> Bytes {
    batch_bytes(&[value], 1_000, None)
}

/// A crash (nothing closed, no clean-shutdown marker) and a restart from recovery point 0.
fn crash_and_reopen(log: Log, dir: &Path) -> Log {
    drop(log);
    Log::open(dir, tp(), config(), 0, 0, false).unwrap()
}

#[test]
fn failed_epoch_checkpoint_removes_the_append_and_takes_the_dir_offline() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let log = Log::open(&dir, tp(), config(), 0, 0, false).unwrap();
    assert_eq!(
        log.append_as_leader(one(b"acked"), 0, 0)
            .unwrap()
            .first_offset,
        0
    );
    let segment = dir.join("00000000000000000000.log");
    let size = std::fs::metadata(&segment).unwrap().len();

    // A new leader epoch is written to leader-epoch-checkpoint after the segment write.
    faults::arm(&dir, Fault::WriteCheckpoint, libc::EIO, Some(1));
    let err = log.append_as_leader(one(b"never acked"), 1, 0).unwrap_err();
    assert_eq!(err.error_code(), 56, "{err}");
    assert_eq!(log.log_end_offset(), 1);
    assert_eq!(
        std::fs::metadata(&segment).unwrap().len(),
        size,
        "the failed append's bytes were cut from the segment"
    );
    assert!(log.is_offline(), "an I/O error takes the log dir offline");
    let refused = log.read(0, 1 << 20, i64::MAX, false).unwrap_err();
    assert_eq!(refused.error_code(), 56);
    let refused = log.append_as_leader(one(b"later"), 1, 0).unwrap_err();
    assert!(
        matches!(refused, LogError::LogDirOffline { .. }),
        "{refused}"
    );

    // After a crash and restart exactly the acknowledged record is there, and the next
    // append takes the offset the failed one never owned.
    let log = crash_and_reopen(log, &dir);
    assert_eq!(values(&log), vec![(0, b"acked".to_vec())]);
    assert_eq!(log.latest_epoch(), Some(0));
    assert_eq!(
        log.append_as_leader(one(b"next"), 1, 0)
            .unwrap()
            .first_offset,
        1
    );
    assert_eq!(
        values(&log),
        vec![(0, b"acked".to_vec()), (1, b"next".to_vec())]
    );
}

#[test]
fn out_of_fds_after_the_write_rolls_back_and_stays_online() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let log = Log::open(&dir, tp(), config(), 0, 0, false).unwrap();
    log.append_as_leader(one(b"a"), 0, 0).unwrap();
    faults::arm(&dir, Fault::WriteCheckpoint, libc::EMFILE, Some(1));
    let err = log.append_as_leader(one(b"lost"), 1, 0).unwrap_err();
    assert_eq!(err.error_code(), 56, "{err}");
    assert!(!log.is_offline(), "running out of fds is not a disk fault");
    assert_eq!(
        values(&log),
        vec![(0, b"a".to_vec())],
        "nothing unacked is read"
    );
    assert_eq!(log.latest_epoch(), Some(0), "the epoch cache was put back");
    // The retry gets offset 1; no reader ever saw the failed append there.
    assert_eq!(
        log.append_as_leader(one(b"b"), 1, 0).unwrap().first_offset,
        1
    );
    assert_eq!(log.end_offset_for_epoch(0), Some((0, 1)));
    let log = crash_and_reopen(log, &dir);
    assert_eq!(values(&log), vec![(0, b"a".to_vec()), (1, b"b".to_vec())]);
}

#[test]
fn failed_idempotent_append_leaves_no_producer_state() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let log = Log::open(&dir, tp(), config(), 0, 0, false).unwrap();
    let batch = |seq| batch_bytes(&[b"v"], 1_000, Some((7, 0, seq)));
    log.append_as_leader(batch(0), 0, 0).unwrap();
    faults::arm(&dir, Fault::WriteCheckpoint, libc::EMFILE, Some(1));
    assert!(log.append_as_leader(batch(1), 1, 0).is_err());
    // Not a duplicate (it was never written), and its sequence is still the next one.
    let retry = log.append_as_leader(batch(1), 1, 0).unwrap();
    assert!(!retry.duplicate);
    assert_eq!(retry.first_offset, 1);
}

#[test]
fn failed_follower_append_is_removed_too() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let log = Log::open(&dir, tp(), config(), 0, 0, false).unwrap();
    let mut leader_batch = one(b"from leader").to_vec();
    crate::log::batch::set_partition_leader_epoch(&mut leader_batch, 4);
    faults::arm(&dir, Fault::WriteCheckpoint, libc::EMFILE, Some(1));
    assert!(log
        .append_as_follower(Bytes::from(leader_batch.clone()))
        .is_err());
    assert_eq!(log.log_end_offset(), 0);
    assert_eq!(log.size_bytes(), 0);
    log.append_as_follower(Bytes::from(leader_batch)).unwrap();
    assert_eq!(log.latest_epoch(), Some(4));
    assert_eq!(values(&log), vec![(0, b"from leader".to_vec())]);
}

#[test]
fn failed_fsync_takes_the_dir_offline_and_holds_the_recovery_point() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let log = Log::open(&dir, tp(), config(), 0, 0, false).unwrap();
    log.append_as_leader(one(b"a"), 0, 0).unwrap();
    log.flush().unwrap();
    assert_eq!(log.recovery_point(), 1);
    log.append_as_leader(one(b"b"), 0, 0).unwrap();

    faults::arm(&dir, Fault::Fsync, libc::EIO, Some(1));
    let err = log.flush_to(2).unwrap_err();
    assert_eq!(err.error_code(), 56, "{err}");
    assert!(log.is_offline());
    assert_eq!(log.recovery_point(), 1);
    // Linux clears a writeback error once reported, so a second fsync would succeed: it
    // must not be attempted.
    assert!(matches!(
        log.flush_to(2),
        Err(LogError::LogDirOffline { .. })
    ));
    assert!(
        log.close().is_err(),
        "an offline log is not closed as if clean"
    );
    assert_eq!(log.recovery_point(), 1);
    assert_eq!(
        log.append_as_leader(one(b"c"), 0, 0)
            .unwrap_err()
            .error_code(),
        56
    );
    faults::disarm(&dir);
}
