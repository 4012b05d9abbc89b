use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::log::test_util::*;
use crate::log::{Log, LogConfig, LogError, TopicPartition};

const DAY_MS: i64 = 86_400_000;

fn config(retention_ms: i64, retention_bytes: i64) -> LogConfig {
    LogConfig {
        // Four 80-byte batches per segment.
        segment_bytes: 4 * 80,
        index_interval_bytes: 100,
        max_index_size: 4096,
        producer_id_expiration_ms: i64::MAX,
        retention_ms,
        retention_bytes,
        file_delete_delay_ms: 0,
        segment_ms: i64::MAX,
        ..LogConfig::default()
    }
}

fn open(dir: &Path, config: LogConfig) -> Log {
    Log::open(dir, TopicPartition::new("t", 0), config, 0, 0, false).unwrap()
}

/// Appends one 80-byte batch (one record, keyed so compacted logs take it) stamped `ts`.
fn append_at(log: &Log, ts: i64) -> i64 {
    let value = [b'v'; 11];
    let mut record = records(&[&value], ts, None);
    record[0].key = Some(Bytes::from_static(b"k"));
    let batch = encode(&record, kafka_protocol::records::Compression::None);
    assert_eq!(batch.len(), 80);
    log.append_as_leader(batch, 0, ts).unwrap().first_offset
}

fn files(dir: &Path, suffix: &str) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(suffix))
        .collect();
    names.sort();
    names
}

fn first_offset(data: &Bytes) -> i64 {
    decode_all(data)[0].records[0].offset
}

#[test]
fn time_retention_deletes_whole_expired_segments_by_their_largest_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), config(DAY_MS, -1));
    let now = 100 * DAY_MS;
    // Segments [0..4) and [4..8) are old; [8..12) has one recent batch at its end.
    for i in 0..11 {
        append_at(&log, now - 10 * DAY_MS + i);
    }
    append_at(&log, now - 1_000);
    append_at(&log, now - 500);
    assert_eq!(log.segment_count(), 4);
    assert_eq!(
        log.delete_old_segments(now, log.log_end_offset()).unwrap(),
        2
    );
    assert_eq!(log.log_start_offset(), 8);
    assert_eq!(log.segment_count(), 2);
    assert_eq!(
        files(dir.path(), ".deleted"),
        vec![
            "00000000000000000000.index.deleted",
            "00000000000000000000.log.deleted",
            "00000000000000000000.timeindex.deleted",
            "00000000000000000004.index.deleted",
            "00000000000000000004.log.deleted",
            "00000000000000000004.snapshot.deleted",
            "00000000000000000004.timeindex.deleted",
        ]
    );
    // Not yet due: file.delete.delay.ms counts from the deletion.
    assert_eq!(log.delayed_deletes().remove_due(Instant::now()), 7);
    assert!(files(dir.path(), ".deleted").is_empty());
    assert!(matches!(
        log.read(7, 1 << 20, i64::MAX, true),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    assert_eq!(
        first_offset(&log.read(8, 1 << 20, i64::MAX, true).unwrap().records),
        8
    );
    // A second check deletes nothing more.
    assert_eq!(
        log.delete_old_segments(now, log.log_end_offset()).unwrap(),
        0
    );
}

#[test]
fn an_expired_active_segment_is_rolled_away_before_it_is_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), config(DAY_MS, -1));
    let now = 100 * DAY_MS;
    for i in 0..6 {
        append_at(&log, now - 10 * DAY_MS + i);
    }
    assert_eq!(log.segment_count(), 2);
    assert_eq!(log.delete_old_segments(now, 6).unwrap(), 2);
    // What took appends is gone, but never while it was active: an empty segment at the log
    // end took over first.
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (6, 6));
    assert_eq!(log.segment_count(), 1);
    assert!(dir.path().join("00000000000000000006.log").exists());
    assert!(dir.path().join("00000000000000000006.snapshot").exists());
    assert_eq!(append_at(&log, now), 6);
    // The empty-then-new active segment stays, however old retention thinks it is.
    assert_eq!(log.delete_old_segments(now + 10 * DAY_MS, 7).unwrap(), 1);
    assert_eq!((log.log_start_offset(), log.segment_count()), (7, 1));
    assert_eq!(log.delete_old_segments(now + 20 * DAY_MS, 7).unwrap(), 0);
}

#[test]
fn nothing_at_or_above_the_high_watermark_is_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), config(DAY_MS, -1));
    let now = 100 * DAY_MS;
    for i in 0..10 {
        append_at(&log, i);
    }
    // Segment [4..8) holds offset 6, not yet committed.
    assert_eq!(log.delete_old_segments(now, 6).unwrap(), 1);
    assert_eq!(log.log_start_offset(), 4);
    assert_eq!(log.delete_old_segments(now, 10).unwrap(), 2);
    assert_eq!(log.log_start_offset(), 10);
}

#[test]
fn size_retention_keeps_the_log_under_retention_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), config(-1, 500));
    for i in 0..14 {
        append_at(&log, i);
    }
    // 14 batches of 80 bytes = 1120. As in Kafka, a segment goes only if at least
    // retention.bytes remain without it: the log ends at most one segment above the limit.
    assert_eq!(log.size_bytes(), 1120);
    assert_eq!(log.delete_old_segments(0, 14).unwrap(), 1);
    assert_eq!(log.size_bytes(), 800);
    assert_eq!(log.log_start_offset(), 4);
    for i in 14..20 {
        append_at(&log, i);
    }
    assert_eq!(log.delete_old_segments(0, 20).unwrap(), 2);
    assert_eq!((log.size_bytes(), log.log_start_offset()), (640, 12));
    // Exactly at the limit: nothing to do.
    let log2_dir = tempfile::tempdir().unwrap();
    let exact = open(log2_dir.path(), config(-1, 320));
    for i in 0..4 {
        append_at(&exact, i);
    }
    assert_eq!(exact.delete_old_segments(0, 4).unwrap(), 0);
}

#[test]
fn compact_only_logs_keep_their_segments_but_not_below_the_log_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(1, 1);
    c.cleanup_policy.delete = false;
    c.cleanup_policy.compact = true;
    let log = open(dir.path(), c);
    for i in 0..10 {
        append_at(&log, i);
    }
    assert_eq!(log.delete_old_segments(100 * DAY_MS, 10).unwrap(), 0);
    assert_eq!(log.log_start_offset(), 0);
}

#[test]
fn delete_records_moves_the_log_start_and_drops_the_segments_below() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), config(-1, -1));
    for i in 0..10 {
        append_at(&log, i);
    }
    assert!(matches!(
        log.delete_records_before(11, 10, 0),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    assert_eq!(log.delete_records_before(5, 10, 0).unwrap(), 5);
    assert_eq!(
        log.segment_count(),
        2,
        "segment [0..4) deleted, [4..8) kept"
    );
    assert!(matches!(
        log.read(4, 1 << 20, i64::MAX, true),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    // A fetch from the low watermark gets the batch holding it.
    assert_eq!(
        first_offset(&log.read(5, 1 << 20, i64::MAX, true).unwrap().records),
        5
    );
    let found = log.fetch_offset_by_timestamp(0).unwrap();
    assert_eq!((found.timestamp, found.offset), (5, 5));
    // Lower is a no-op, not an error; the high watermark itself empties the log.
    assert_eq!(log.delete_records_before(3, 10, 0).unwrap(), 5);
    assert_eq!(log.delete_records_before(10, 10, 0).unwrap(), 10);
    assert_eq!(log.read(10, 100, i64::MAX, true).unwrap().records.len(), 0);
    assert_eq!(append_at(&log, 20), 10);
    // Reopened with the checkpointed log start, the log starts there.
    log.close().unwrap();
    drop(log);
    let log = Log::open(
        dir.path(),
        TopicPartition::new("t", 0),
        config(-1, -1),
        0,
        10,
        true,
    )
    .unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (10, 11));
}

#[test]
fn renamed_segments_are_removed_at_the_next_start_if_the_delay_did_not_pass() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), config(-1, -1));
    for i in 0..10 {
        append_at(&log, i);
    }
    log.delete_records_before(8, 10, 0).unwrap();
    assert!(!files(dir.path(), ".deleted").is_empty());
    drop(log);
    // A crash before the delay: the checkpoint never learnt offset 8.
    let log = open(dir.path(), config(-1, -1));
    assert!(files(dir.path(), ".deleted").is_empty());
    assert_eq!(log.log_start_offset(), 8, "the first segment left");
    assert_eq!(log.log_end_offset(), 10);
}

#[test]
fn idle_segments_roll_once_segment_ms_has_passed() {
    let dir = tempfile::tempdir().unwrap();
    let c = LogConfig {
        segment_ms: 1_000,
        ..config(-1, -1)
    };
    let log = open(dir.path(), c);
    append_at(&log, 10_000);
    assert!(!log.roll_if_idle(10_500).unwrap());
    assert!(log.roll_if_idle(11_001).unwrap());
    assert_eq!(log.segment_count(), 2);
    // The new active segment is empty: nothing to roll away from.
    assert!(!log.roll_if_idle(50_000).unwrap());
    assert!(dir.path().join("00000000000000000001.snapshot").exists());
    // max.compaction.lag.ms shortens the wait for a compacted log.
    let dir = tempfile::tempdir().unwrap();
    let mut c = LogConfig {
        max_compaction_lag_ms: 100,
        ..config(-1, -1)
    };
    c.cleanup_policy.compact = true;
    let log = open(dir.path(), c);
    append_at(&log, 10_000);
    assert!(log.roll_if_idle(10_101).unwrap());
}

/// A reader that found a segment before it was deleted gets every byte it planned to send,
/// through the rename and the unlink: its `FileSlice` holds the open file.
#[tokio::test]
async fn a_read_in_flight_finishes_after_its_segment_is_deleted() {
    use tokio::io::AsyncReadExt;
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), config(-1, -1));
    for i in 0..10 {
        append_at(&log, i);
    }
    let slice = log
        .read_slice(0, 1 << 20, i64::MAX, true)
        .unwrap()
        .records
        .unwrap();
    let copy = log
        .read_slice(0, 1 << 20, i64::MAX, true)
        .unwrap()
        .records
        .unwrap();
    assert_eq!(slice.len(), 320, "the whole first segment");
    log.delete_records_before(9, 10, 0).unwrap();
    assert_eq!(log.delayed_deletes().remove_due(Instant::now()), 7);
    assert!(!dir.path().join("00000000000000000000.log").exists());
    assert!(!dir.path().join("00000000000000000000.log.deleted").exists());

    // Copied into memory...
    let bytes = copy.read().unwrap();
    assert_eq!(bytes.len(), 320);
    assert_eq!(
        decode_all(&bytes)
            .iter()
            .map(|s| s.records[0].offset)
            .collect::<Vec<_>>(),
        vec![0, 1, 2, 3]
    );
    // ...and sent with sendfile, as a fetch response is.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let sender = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        crate::network::sendfile::send_file(&stream, &slice).await
    });
    let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), client.read_to_end(&mut got))
        .await
        .unwrap()
        .unwrap();
    sender.await.unwrap().unwrap();
    assert_eq!(got, bytes.to_vec());
}
