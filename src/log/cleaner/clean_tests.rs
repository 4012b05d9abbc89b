use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions,
    TimestampType as KTimestampType,
};

use crate::log::cleaner::{Candidate, CleanerConfig, LogCleaner};
use crate::log::faults::{self, Fault};
use crate::log::{CleanupPolicy, Log, LogConfig, LogError, TopicPartition};

pub(super) const NOW: i64 = 1_700_000_000_000;

pub(super) fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        segment_ms: i64::MAX,
        index_interval_bytes: 256,
        max_index_size: 4096,
        producer_id_expiration_ms: i64::MAX,
        retention_ms: -1,
        cleanup_policy: CleanupPolicy {
            delete: false,
            compact: true,
        },
        min_cleanable_dirty_ratio: 0.0,
        delete_retention_ms: 60_000,
        file_delete_delay_ms: 0,
        ..LogConfig::default()
    }
}

pub(super) fn open(dir: &Path, clean: bool) -> Arc<Log> {
    Arc::new(Log::open(dir, TopicPartition::new("c", 0), config(), 0, 0, clean).unwrap())
}

/// One batch of (key, value) records; `producer` = (id, epoch, base sequence).
pub(super) fn batch(
    entries: &[(String, Option<String>)],
    producer: Option<(i64, i16, i32)>,
) -> Bytes {
    batch_of(entries, producer, false)
}

pub(super) fn batch_of(
    entries: &[(String, Option<String>)],
    producer: Option<(i64, i16, i32)>,
    transactional: bool,
) -> Bytes {
    let (pid, epoch, seq) = producer.unwrap_or((-1, -1, -1));
    let records: Vec<Record> = entries
        .iter()
        .enumerate()
        .map(|(i, (k, v))| Record {
            transactional,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: pid,
            producer_epoch: epoch,
            timestamp_type: KTimestampType::Creation,
            offset: i as i64,
            sequence: if pid >= 0 {
                seq + i as i32
            } else {
                i as i32 - 1
            },
            timestamp: NOW,
            key: Some(Bytes::from(k.clone())),
            value: v.clone().map(Bytes::from),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf.freeze()
}

/// Appends `n` updates over `keys` keys (`k<i % keys>` = `v<i>`), four per batch.
pub(super) fn write_updates(log: &Log, from: usize, n: usize, keys: usize) {
    let mut i = from;
    while i < from + n {
        let entries: Vec<(String, Option<String>)> = (i..(i + 4).min(from + n))
            .map(|j| (format!("k{}", j % keys), Some(format!("v{j}"))))
            .collect();
        log.append_as_leader(batch(&entries, None), 0, NOW).unwrap();
        i += entries.len();
    }
}

/// Appends `n` records with keys never used before (`u<j>`), four per batch.
pub(super) fn write_unique(log: &Log, from: usize, n: usize) {
    for chunk in (from..from + n).collect::<Vec<_>>().chunks(4) {
        let entries: Vec<(String, Option<String>)> = chunk
            .iter()
            .map(|j| (format!("u{j}"), Some(format!("v{j}"))))
            .collect();
        log.append_as_leader(batch(&entries, None), 0, NOW).unwrap();
    }
}

/// Every record from the log start: offset, key, value.
pub(super) fn read_all(log: &Log) -> Vec<(i64, String, Option<String>)> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let data = log.read(offset, 1 << 20, i64::MAX, true).unwrap();
        let mut bytes = data.records.clone();
        let sets = RecordBatchDecoder::decode_all(&mut bytes).unwrap();
        let mut next = offset;
        for set in sets {
            for r in set.records {
                if r.offset >= offset {
                    let s = |b: &Bytes| String::from_utf8_lossy(b).into_owned();
                    out.push((
                        r.offset,
                        s(r.key.as_ref().unwrap()),
                        r.value.as_ref().map(s),
                    ));
                }
                next = next.max(r.offset + 1);
            }
        }
        // Empty batches and gaps: continue after the last batch read.
        let last = crate::log::batch::BatchIter::new(&data.records)
            .filter_map(Result::ok)
            .last()
            .map(|(_, h)| h.next_offset());
        offset = last.unwrap_or(next).max(next);
    }
    out
}

pub(super) fn latest(
    records: &[(i64, String, Option<String>)],
) -> BTreeMap<String, Option<String>> {
    records
        .iter()
        .map(|(_, k, v)| (k.clone(), v.clone()))
        .collect()
}

pub(super) fn clean(cleaner: &LogCleaner, log: &Arc<Log>) -> bool {
    let candidates = [Candidate {
        log: log.clone(),
        high_watermark: log.log_end_offset(),
    }];
    cleaner.clean_filthiest(&candidates, NOW).is_some()
}

pub(super) fn cleaner() -> LogCleaner {
    LogCleaner::new(CleanerConfig {
        io_buffer_size: 4096,
        ..CleanerConfig::default()
    })
}

#[test]
fn cleaning_keeps_the_latest_value_of_every_key() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), false);
    write_updates(&log, 0, 2000, 20);
    let before = read_all(&log);
    assert_eq!(before.len(), 2000);
    let segments = log.segment_count();
    let size = log.size_bytes();
    let cleaner = cleaner();
    assert!(clean(&cleaner, &log));
    let after = read_all(&log);
    assert_eq!(latest(&after), latest(&before), "every key's latest value");
    // The active segment is never cleaned; everything below it has one record per key.
    assert!(after.len() < 20 + 40, "{} records left", after.len());
    assert!(after.windows(2).all(|w| w[0].0 < w[1].0), "offsets ascend");
    assert_eq!(log.log_end_offset(), 2000, "the log end does not move");
    assert!(log.size_bytes() < size / 10);
    let checkpoint = log.cleaner_checkpoint().unwrap();
    assert!(checkpoint > 1900 && checkpoint <= 2000, "{checkpoint}");
    // Nothing dirty: nothing to do.
    assert!(!clean(&cleaner, &log));
    // More updates, another round; and all of it survives a restart.
    write_updates(&log, 2000, 500, 20);
    assert!(clean(&cleaner, &log));
    // The first round cleans each full segment on its own; the next merges the small
    // segments it left into one (the new, full ones stay apart, as in Kafka).
    assert!(
        log.segment_count() < segments / 2,
        "{} of {segments}",
        log.segment_count()
    );
    let expected = read_all(&log);
    log.close().unwrap();
    drop(log);
    let log = open(dir.path(), true);
    assert_eq!(read_all(&log), expected);
    assert_eq!(
        latest(&expected).get("k7").unwrap().as_deref(),
        Some("v2487")
    );
}

#[test]
fn tombstones_go_once_their_delete_horizon_passed() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), false);
    write_updates(&log, 0, 400, 10);
    let tombstones: Vec<(String, Option<String>)> =
        (0..5).map(|k| (format!("k{k}"), None)).collect();
    log.append_as_leader(batch(&tombstones, None), 0, NOW)
        .unwrap();
    write_unique(&log, 405, 400);
    let cleaner = cleaner();
    assert!(clean(&cleaner, &log));
    let first = latest(&read_all(&log));
    assert_eq!(
        first.get("k3"),
        Some(&None),
        "the tombstone stays for delete.retention.ms"
    );
    assert_eq!(first.get("k7").unwrap().as_deref(), Some("v397"));
    // After delete.retention.ms, the next round (more dirt) drops them.
    write_unique(&log, 805, 2000);
    let later = [Candidate {
        log: log.clone(),
        high_watermark: log.log_end_offset(),
    }];
    assert!(cleaner.clean_filthiest(&later, NOW + 61_000).is_some());
    let second = latest(&read_all(&log));
    assert_eq!(
        second.get("k3"),
        None,
        "no tombstone older than delete.retention.ms"
    );
    assert_eq!(second.get("k7").unwrap().as_deref(), Some("v397"));
}

#[test]
fn an_idempotent_producer_carries_on_after_its_batches_are_compacted() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), false);
    // Producer 9 writes key "p" again and again; others write after it.
    for seq in 0..50 {
        let b = batch(&[("p".into(), Some(format!("p{seq}")))], Some((9, 0, seq)));
        log.append_as_leader(b, 0, NOW).unwrap();
    }
    write_updates(&log, 50, 400, 5);
    let cleaner = cleaner();
    assert!(clean(&cleaner, &log));
    assert_eq!(
        latest(&read_all(&log)).get("p").unwrap().as_deref(),
        Some("p49")
    );
    // Every producer-9 batch below the last was dropped; a crash forgets the in-memory
    // state and the snapshots, so the state comes back from the batches left.
    drop(log);
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "snapshot") {
            std::fs::remove_file(path).unwrap();
        }
    }
    let log = open(dir.path(), false);
    let retry = batch(&[("p".into(), Some("p49".into()))], Some((9, 0, 49)));
    let dup = log.append_as_leader(retry, 0, NOW).unwrap();
    assert!(
        dup.duplicate,
        "the last batch is still known: a retry is a duplicate"
    );
    assert_eq!(dup.first_offset, 49);
    let next = batch(&[("p".into(), Some("p50".into()))], Some((9, 0, 50)));
    assert!(!log.append_as_leader(next, 0, NOW).unwrap().duplicate);
    let gap = batch(&[("p".into(), Some("p52".into()))], Some((9, 0, 52)));
    assert!(matches!(
        log.append_as_leader(gap, 0, NOW),
        Err(LogError::OutOfOrderSequence { .. })
    ));
}

#[test]
fn an_empty_batch_kept_for_a_producer_reads_back_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), false);
    let b = batch(&[("p".into(), Some("first".into()))], Some((5, 0, 0)));
    log.append_as_leader(b, 0, NOW).unwrap();
    write_updates(&log, 1, 600, 3);
    // Key "p" once more from someone else: producer 5's only batch is superseded.
    log.append_as_leader(batch(&[("p".into(), Some("later".into()))], None), 0, NOW)
        .unwrap();
    write_updates(&log, 602, 300, 3);
    assert!(clean(&cleaner(), &log));
    let first_batch = log.read(0, 1 << 20, i64::MAX, true).unwrap().records;
    let h = crate::log::batch::RecordBatchHeader::parse(&first_batch).unwrap();
    assert_eq!(
        (h.base_offset(), h.records_count(), h.producer_id()),
        (0, 0, 5)
    );
    // An unclean restart scans it like any batch.
    drop(log);
    let log = open(dir.path(), false);
    assert_eq!(log.log_end_offset(), 902);
    assert_eq!(
        latest(&read_all(&log)).get("p").unwrap().as_deref(),
        Some("later")
    );
}

#[test]
fn a_crash_at_any_step_of_the_swap_loses_nothing() {
    for fault in [
        Fault::CleanerSwapStart,
        Fault::CleanerSwapped,
        Fault::CleanerOldDeleted,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let log = open(dir.path(), false);
        write_updates(&log, 0, 1500, 30);
        let expected = latest(&read_all(&log));
        faults::arm(dir.path(), fault, libc::EIO, Some(1));
        assert!(!clean(&cleaner(), &log), "{fault:?}");
        assert!(
            log.is_offline(),
            "an I/O error in the swap takes the dir offline"
        );
        faults::disarm(dir.path());
        drop(log);
        // What the crash left is what the next start loads.
        let log = open(dir.path(), false);
        let after = read_all(&log);
        assert_eq!(latest(&after), expected, "{fault:?}");
        assert_eq!(log.log_end_offset(), 1500);
        let leftovers: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".cleaned") || n.ends_with(".swap") || n.ends_with(".deleted"))
            .collect();
        assert!(leftovers.is_empty(), "{fault:?}: {leftovers:?}");
        // And it can be cleaned again.
        assert!(clean(&cleaner(), &log), "{fault:?}");
        assert_eq!(latest(&read_all(&log)), expected);
    }
}

#[test]
fn a_deleted_log_stops_its_cleaning_and_segments_removed_meanwhile_abort_the_swap() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), false);
    write_updates(&log, 0, 1000, 10);
    log.abort_cleaning();
    assert!(!clean(&cleaner(), &log), "an aborted log is not cleaned");

    let dir = tempfile::tempdir().unwrap();
    let mut c = config();
    c.cleanup_policy.delete = true;
    let log = Arc::new(Log::open(dir.path(), TopicPartition::new("c", 0), c, 0, 0, false).unwrap());
    write_updates(&log, 0, 1000, 10);
    let view = log.cleaner_view();
    // DeleteRecords removes the first segments after the cleaner saw them.
    log.delete_records_before(300, 1000, NOW).unwrap();
    let cleaned = crate::log::segment::LogSegment::create_cleaned(
        dir.path(),
        view.segments[0].base_offset,
        &log.config(),
        NOW,
    )
    .unwrap();
    assert!(!log.replace_segments(cleaned, &view.segments[..2]).unwrap());
    crate::log::delete_cleaned(dir.path(), view.segments[0].base_offset);
    assert_eq!(read_all(&log).first().map(|r| r.0), Some(300));
}

/// An aborted transaction's records go with compaction; its abort marker stays, and so
/// does its entry in the aborted-transaction index (read_committed fetches of what the
/// marker's segment holds still name the abort), as Kafka's cleaner keeps them.
#[test]
fn aborted_transactional_records_are_removed_and_their_marker_kept() {
    use crate::log::control::{EndTxnMarker, TxnResult};
    use crate::log::AbortedTxn;
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), false);
    let kv = |k: &str, v: &str| vec![(k.to_string(), Some(v.to_string()))];
    log.append_as_leader(batch(&kv("a", "committed"), None), 0, NOW)
        .unwrap(); // 0
    log.append_as_leader(batch_of(&kv("a", "aborted"), Some((7, 0, 0)), true), 0, NOW)
        .unwrap(); // 1
    log.append_as_leader(batch_of(&kv("b", "aborted"), Some((7, 0, 1)), true), 0, NOW)
        .unwrap(); // 2
    let marker = EndTxnMarker {
        result: TxnResult::Abort,
        coordinator_epoch: 0,
    };
    log.append_marker(7, 0, marker, 0, NOW).unwrap(); // 3
    let abort = AbortedTxn {
        producer_id: 7,
        first_offset: 1,
        last_offset: 3,
        last_stable_offset: 4,
    };
    assert_eq!(log.aborted_txns(0, i64::MAX), vec![abort]);
    // Enough other records to roll those four into a cleanable segment.
    write_unique(&log, 0, 200);
    assert!(log.segment_count() > 2);

    assert!(clean(&cleaner(), &log));
    let after = read_all(&log);
    let values: Vec<&str> = after.iter().filter_map(|(_, _, v)| v.as_deref()).collect();
    assert!(values.contains(&"committed"));
    assert!(
        !values.contains(&"aborted"),
        "aborted records removed: {:?}",
        &after[..4]
    );
    assert!(after.iter().any(|(o, _, _)| *o == 3), "the marker stays");
    assert_eq!(
        log.aborted_txns(0, i64::MAX),
        vec![abort],
        "its index entry too"
    );
    drop(log);
    let reopened = open(dir.path(), false);
    assert_eq!(reopened.aborted_txns(0, i64::MAX), vec![abort]);
    assert!(
        !reopened.has_ongoing_txn(7, 0),
        "recovery finds the transaction ended"
    );
}
