//! Restarts: indexes of segments below the active one are mapped on first use, and
//! checked (rebuilt from the log if bad) then; a close writes only what changed.

use std::fs;
use std::path::Path;

use bytes::Bytes;

use super::*;
use crate::log::test_util::*;

fn tp() -> TopicPartition {
    TopicPartition::new("t", 0)
}

/// 40 batches of one 60-byte record, timestamps 1000.., four batches per segment: ten
/// segments, an index entry every 100 bytes.
fn ten_segments(dir: &Path) -> LogConfig {
    let batches = many_batches(40, 60);
    let config = LogConfig {
        segment_bytes: (batches[0].len() * 4) as u64,
        index_interval_bytes: 100,
        max_index_size: 4096,
        producer_id_expiration_ms: i64::MAX,
        ..LogConfig::default()
    };
    let log = Log::open(dir, tp(), config.clone(), 0, 0, false).unwrap();
    for b in batches {
        log.append_as_leader(b, 0, 0).unwrap();
    }
    assert_eq!(log.segment_count(), 10);
    log.close().unwrap();
    config
}

fn segment_file(dir: &Path, base: i64, suffix: &str) -> std::path::PathBuf {
    dir.join(crate::log::offset_file_name(base, suffix))
}

/// Whether this process has `path` mapped (its line in /proc/self/maps).
fn is_mapped(path: &Path) -> bool {
    let maps = fs::read_to_string("/proc/self/maps").unwrap();
    let name = path.to_str().unwrap();
    maps.lines().any(|l| l.ends_with(name))
}

fn first_base_offset(log: &Log, offset: i64) -> i64 {
    let records = log.read(offset, 1, i64::MAX, true).unwrap().records;
    let (_, header) = crate::log::batch::BatchIter::new(&records)
        .next()
        .unwrap()
        .unwrap();
    header.base_offset()
}

fn by_time(log: &Log, ts: i64) -> Option<(i64, i64)> {
    log.fetch_offset_by_timestamp(ts)
        .map(|f| (f.timestamp, f.offset))
}

#[test]
fn old_segments_indexes_are_mapped_on_first_use_and_serve_lookups() {
    for clean in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let config = ten_segments(dir.path());
        let index_of = |base| segment_file(dir.path(), base, ".index");
        // After kill -9 recovery starts at the recovery point's segment (the last one).
        let log = Log::open(dir.path(), tp(), config, 36, 0, clean).unwrap();
        assert_eq!(log.log_end_offset(), 40);
        for base in (0..36).step_by(4) {
            assert!(
                !is_mapped(&index_of(base)),
                "segment {base} (clean: {clean})"
            );
        }
        assert!(is_mapped(&index_of(36)), "the active segment's index");
        // A read in segment 8 maps its indexes, and only its.
        assert_eq!(first_base_offset(&log, 10), 10);
        assert!(is_mapped(&index_of(8)));
        assert!(!is_mapped(&index_of(4)));
        for offset in 0..40 {
            assert_eq!(first_base_offset(&log, offset), offset, "clean: {clean}");
        }
        // Time lookups go by the time indexes read back from disk.
        assert_eq!(by_time(&log, 1_013), Some((1_013, 13)));
        assert_eq!(by_time(&log, 999), Some((1_000, 0)));
        assert_eq!(by_time(&log, 1_039), Some((1_039, 39)));
        assert_eq!(by_time(&log, 1_040), None);
        // The segments still roll and append after the restart.
        log.append_as_leader(batch_bytes(&[b"x"], 2_000, None), 0, 0)
            .unwrap();
        assert_eq!(first_base_offset(&log, 40), 40);
    }
}

#[test]
fn a_bad_index_of_an_old_segment_is_rebuilt_when_first_used() {
    let dir = tempfile::tempdir().unwrap();
    let config = ten_segments(dir.path());
    let index = segment_file(dir.path(), 12, ".index");
    let time_index = segment_file(dir.path(), 12, ".timeindex");
    let good_index = fs::read(&index).unwrap();
    let good_time_index = fs::read(&time_index).unwrap();
    assert!(good_index.len() >= 16, "two entries or more");
    // Entries still in order, but the last one points into the middle of a batch, and
    // the time index is garbage.
    let mut bad_index = good_index.clone();
    let last = bad_index.len() - 1;
    bad_index[last] = bad_index[last].wrapping_add(1);
    fs::write(&index, &bad_index).unwrap();
    fs::write(&time_index, [0xffu8; 24]).unwrap();

    let log = Log::open(dir.path(), tp(), config.clone(), 40, 0, true).unwrap();
    assert_eq!(log.log_end_offset(), 40);
    assert_eq!(
        fs::read(&index).unwrap(),
        bad_index,
        "not read at the restart"
    );
    for offset in 12..16 {
        assert_eq!(first_base_offset(&log, offset), offset);
    }
    assert_eq!(
        fs::read(&index).unwrap(),
        good_index,
        "rebuilt from the log"
    );
    assert_eq!(fs::read(&time_index).unwrap(), good_time_index);
    assert_eq!(by_time(&log, 1_014), Some((1_014, 14)));
    // And the rebuilt files are what the next start reads.
    log.close().unwrap();
    drop(log);
    let log = Log::open(dir.path(), tp(), config, 40, 0, true).unwrap();
    assert_eq!(by_time(&log, 1_015), Some((1_015, 15)));
    let records: Bytes = log.read(13, 1, i64::MAX, true).unwrap().records;
    assert!(!records.is_empty());
}

/// (inode, modification time) of `path`: changed by any rewrite of the file.
fn identity(path: &Path) -> (u64, std::time::SystemTime) {
    use std::os::unix::fs::MetadataExt;
    let m = fs::metadata(path).unwrap();
    (m.ino(), m.modified().unwrap())
}

#[test]
fn closing_an_unchanged_log_rewrites_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = ten_segments(dir.path());
    let snapshot = segment_file(dir.path(), 40, ".snapshot");
    let files = [
        snapshot.clone(),
        segment_file(dir.path(), 36, ".index"),
        segment_file(dir.path(), 36, ".timeindex"),
        segment_file(dir.path(), 36, ".log"),
    ];
    let before: Vec<_> = files.iter().map(|f| identity(f)).collect();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let log = Log::open(dir.path(), tp(), config.clone(), 40, 0, true).unwrap();
    assert_eq!(first_base_offset(&log, 38), 38);
    log.close().unwrap();
    drop(log);
    let after: Vec<_> = files.iter().map(|f| identity(f)).collect();
    assert_eq!(before, after, "a clean restart and close wrote no file");

    // After a crash the snapshot found may never have been synced: close writes it again.
    let log = Log::open(dir.path(), tp(), config.clone(), 40, 0, false).unwrap();
    log.close().unwrap();
    drop(log);
    assert_ne!(identity(&snapshot), before[0]);

    // A log that took an append since its start writes its snapshot and trims its indexes.
    let log = Log::open(dir.path(), tp(), config, 40, 0, true).unwrap();
    log.append_as_leader(batch_bytes(&[b"x"], 2_000, None), 0, 0)
        .unwrap();
    log.close().unwrap();
    assert!(segment_file(dir.path(), 41, ".snapshot").exists());
    let index_len = fs::metadata(segment_file(dir.path(), 40, ".index"))
        .unwrap()
        .len();
    assert_eq!(index_len % 8, 0);
    assert!(index_len < 4096, "trimmed at close: {index_len}");
}

/// Every file under `dir` with its bytes, sorted by path.
fn tree(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(tree(&path));
        } else {
            let bytes = fs::read(&path).unwrap();
            out.push((path.strip_prefix(dir).unwrap().to_path_buf(), bytes));
        }
    }
    out.sort();
    out
}

/// Producer 9's batches with sequences `from..from + n`, 60-byte values.
fn idempotent(log: &Log, from: i32, n: i32) {
    for seq in from..from + n {
        let batch = batch_bytes(&[&[b'v'; 60][..]], 1000 + i64::from(seq), Some((9, 0, seq)));
        log.append_as_leader(batch, 0, 0).unwrap();
    }
}

fn small_segments() -> LogConfig {
    LogConfig {
        segment_bytes: 400,
        index_interval_bytes: 100,
        max_index_size: 4096,
        producer_id_expiration_ms: i64::MAX,
        ..LogConfig::default()
    }
}

#[test]
fn a_close_without_fsync_writes_the_bytes_a_synced_close_writes() {
    let (synced, unsynced) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for (dir, sync) in [(synced.path(), true), (unsynced.path(), false)] {
        let log = Log::open(dir, tp(), small_segments(), 0, 0, false).unwrap();
        idempotent(&log, 0, 12);
        assert!(log.segment_count() > 2, "rolled segments and an active one");
        if sync {
            log.close().unwrap();
        } else {
            assert_eq!(log.close_unsynced().unwrap(), 12);
        }
    }
    let (a, b) = (tree(synced.path()), tree(unsynced.path()));
    assert!(a
        .iter()
        .any(|(p, _)| p.to_string_lossy() == "00000000000000000012.snapshot"));
    assert_eq!(a, b, "the same files with the same bytes");

    // It reads back as a clean shutdown: every record, and producer 9's sequences.
    let log = Log::open(unsynced.path(), tp(), small_segments(), 0, 0, true).unwrap();
    assert_eq!(log.log_end_offset(), 12);
    let dup = batch_bytes(&[&[b'v'; 60][..]], 1011, Some((9, 0, 11)));
    assert!(log.append_as_leader(dup, 0, 0).unwrap().duplicate);
}

mod stop {
    use std::os::unix::fs::MetadataExt;
    use std::path::{Path, PathBuf};

    use uuid::Uuid;

    use super::{idempotent, small_segments, tree};
    use crate::log::faults::{self, Fault};
    use crate::log::test_util::batch_bytes;
    use crate::log::{
        DirLock, LogManager, TopicPartition, CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_CHECKPOINT,
    };

    fn start(dir: &Path) -> LogManager {
        std::fs::create_dir_all(dir).unwrap();
        let lock = DirLock::acquire(dir).unwrap();
        LogManager::startup(
            vec![(dir.to_path_buf(), lock)],
            |_: &TopicPartition, _: Option<Uuid>| true,
            |_| small_segments(),
            60_000,
        )
        .unwrap()
    }

    fn snapshots(dir: &Path) -> Vec<(PathBuf, u64)> {
        let mut out: Vec<(PathBuf, u64)> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "snapshot"))
            .map(|p| {
                let inode = std::fs::metadata(&p).unwrap().ino();
                (p, inode)
            })
            .collect();
        out.sort();
        out
    }

    /// A restart after kill -9 loads the producer snapshot at each log end; the clean stop
    /// after it must not write those again (thousands of partitions made it take seconds),
    /// and a log that never had a record gets no snapshot (as Kafka's, whose snapshot is
    /// written only past the last one, the log start at first).
    #[test]
    fn a_stop_after_kill9_rewrites_no_unchanged_snapshot_and_an_empty_log_gets_none() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("d");
        let lm = start(&dir);
        let id = Uuid::new_v4();
        let (full, empty) = (TopicPartition::new("t", 0), TopicPartition::new("t", 1));
        let log = lm.get_or_create_log(&full, id, small_segments()).unwrap();
        let idle = lm.get_or_create_log(&empty, id, small_segments()).unwrap();
        idempotent(&log, 0, 5);
        lm.shutdown().unwrap();
        let (log_dir, idle_dir) = (log.dir().to_path_buf(), idle.dir().to_path_buf());
        drop((log, idle, lm));
        assert_eq!(
            snapshots(&idle_dir),
            vec![],
            "an empty log has no producer state"
        );
        let written = snapshots(&log_dir);
        assert!(written
            .last()
            .unwrap()
            .0
            .ends_with("00000000000000000005.snapshot"));

        // A start (which takes the marker), then kill -9: the next start is unclean.
        drop(start(&dir));
        assert!(!dir.join(CLEAN_SHUTDOWN_FILE).exists());
        let lm = start(&dir);
        let before = tree(&log_dir);
        lm.shutdown().unwrap();
        assert!(dir.join(CLEAN_SHUTDOWN_FILE).exists());
        assert_eq!(snapshots(&log_dir), written, "the same file, not rewritten");
        assert_eq!(snapshots(&idle_dir), vec![]);
        assert_eq!(
            tree(&log_dir),
            before,
            "a stop with nothing new writes nothing"
        );
        drop(lm);

        // The clean start after it still knows producer 9.
        let lm = start(&dir);
        let log = lm.get_log(&full).unwrap();
        assert_eq!(log.log_end_offset(), 5);
        let dup = batch_bytes(&[&[b'v'; 60][..]], 1004, Some((9, 0, 4)));
        assert!(log.append_as_leader(dup, 0, 0).unwrap().duplicate);
        lm.shutdown().unwrap();
    }

    /// The clean stop syncs the file system once; if that sync fails nothing claims the
    /// dir is whole: no marker, no recovery point moved, and the next start recovers it.
    #[test]
    fn a_failed_sync_writes_no_clean_shutdown_marker() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("d");
        let lm = start(&dir);
        let tp = TopicPartition::new("t", 0);
        let log = lm
            .get_or_create_log(&tp, Uuid::new_v4(), small_segments())
            .unwrap();
        idempotent(&log, 0, 3);
        log.flush().unwrap();
        lm.checkpoint_recovery_points().unwrap();
        let checkpoint = std::fs::read_to_string(dir.join(RECOVERY_POINT_CHECKPOINT)).unwrap();
        assert_eq!(checkpoint, "0\n1\nt 0 3\n");
        idempotent(&log, 3, 4);

        faults::arm(&dir, Fault::SyncFs, libc::EIO, Some(1));
        let stopped = lm.shutdown();
        faults::disarm(&dir);
        assert_eq!(stopped.unwrap_err().error_code(), 56, "KAFKA_STORAGE_ERROR");
        assert!(!dir.join(CLEAN_SHUTDOWN_FILE).exists());
        assert_eq!(
            std::fs::read_to_string(dir.join(RECOVERY_POINT_CHECKPOINT)).unwrap(),
            checkpoint,
            "the recovery point stays where the last fsync left it"
        );
        drop((log, lm));
        let lm = start(&dir);
        let log = lm.get_log(&tp).unwrap();
        assert_eq!(log.log_end_offset(), 7, "recovered from offset 3 on");
        let dup = batch_bytes(&[&[b'v'; 60][..]], 1006, Some((9, 0, 6)));
        assert!(log.append_as_leader(dup, 0, 0).unwrap().duplicate);
        lm.shutdown().unwrap();
        assert!(dir.join(CLEAN_SHUTDOWN_FILE).exists());
    }
}

/// A log of `n` single-record batches of 60 bytes (timestamps 1000..), one segment, an
/// index entry every 100 bytes (at every append after the first).
fn one_segment(dir: &Path, n: usize) -> (Log, LogConfig, usize) {
    let batches = many_batches(n, 60);
    let batch_len = batches[0].len();
    let config = LogConfig {
        index_interval_bytes: 100,
        max_index_size: 1 << 20,
        producer_id_expiration_ms: i64::MAX,
        ..LogConfig::default()
    };
    let log = Log::open(dir, tp(), config.clone(), 0, 0, false).unwrap();
    for b in batches {
        log.append_as_leader(b, 0, 0).unwrap();
    }
    assert_eq!(log.segment_count(), 1);
    (log, config, batch_len)
}

/// Kafka's `.index` bytes for entries (offset, position), base offset 0.
fn kafka_offset_index(entries: impl Iterator<Item = (i64, usize)>) -> Vec<u8> {
    entries
        .flat_map(|(o, p)| [(o as i32).to_be_bytes(), (p as u32).to_be_bytes()].concat())
        .collect()
}

/// Kafka's `.timeindex` bytes for entries (timestamp, offset), base offset 0.
fn kafka_time_index(entries: impl Iterator<Item = (i64, i64)>) -> Vec<u8> {
    entries
        .flat_map(|(t, o)| [&t.to_be_bytes()[..], &(o as i32).to_be_bytes()].concat())
        .collect()
}

#[test]
fn the_active_segments_index_is_not_mapped_and_a_flush_writes_it_in_kafkas_format() {
    let dir = tempfile::tempdir().unwrap();
    let (log, config, len) = one_segment(dir.path(), 20);
    let (index, time_index) = (
        segment_file(dir.path(), 0, ".index"),
        segment_file(dir.path(), 0, ".timeindex"),
    );
    // Entries live in the heap, sized by what was written; no page of the files is mapped.
    assert!(!is_mapped(&index));
    assert!(!is_mapped(&time_index));
    // Append i (from 1) indexed its batch: offset i at position i * len, timestamp 1000 + i.
    let expected_index = kafka_offset_index((1..20).map(|i| (i, i as usize * len)));
    let expected_time = kafka_time_index((1..20).map(|i| (1_000 + i, i)));
    log.flush().unwrap();
    assert_eq!(
        fs::read(&index).unwrap(),
        expected_index,
        "exactly the entries"
    );
    assert_eq!(fs::read(&time_index).unwrap(), expected_time);
    // Kafka's reader of these formats reads them back.
    let copy = dir.path().join("copy.index");
    fs::copy(&index, &copy).unwrap();
    let read =
        crate::log::offset_index::OffsetIndex::open(&copy, 0, config.max_index_size).unwrap();
    read.sanity_check().unwrap();
    assert_eq!(read.entries(), 19);
    assert_eq!(read.lookup(7), (7, (7 * len) as u32));
    // Lookups are served from the buffer, and the files are the same after a clean close.
    for offset in 0..20 {
        assert_eq!(first_base_offset(&log, offset), offset);
    }
    assert_eq!(by_time(&log, 1_013), Some((1_013, 13)));
    log.close().unwrap();
    drop(log);
    assert_eq!(fs::read(&index).unwrap(), expected_index);
    assert_eq!(fs::read(&time_index).unwrap(), expected_time);
    let log = Log::open(dir.path(), tp(), config, 20, 0, true).unwrap();
    assert_eq!(by_time(&log, 1_005), Some((1_005, 5)));
    assert_eq!(first_base_offset(&log, 11), 11);
}

#[test]
fn kill_9_mid_append_leaves_a_prefix_of_the_index_and_recovery_rebuilds_it_exactly() {
    // 700 appends: the offset index's file is written once 512 entries (a page) are
    // pending, the time index's at 341; a flush at 600 writes both; 100 more stay in the
    // heap when the process dies.
    let reference = tempfile::tempdir().unwrap();
    let (log, config, _) = one_segment(reference.path(), 700);
    log.close().unwrap();
    drop(log);
    let index_of = |dir: &Path, suffix| fs::read(segment_file(dir, 0, suffix)).unwrap();
    let (good_index, good_time) = (
        index_of(reference.path(), ".index"),
        index_of(reference.path(), ".timeindex"),
    );
    assert_eq!(good_index.len(), 699 * 8);

    let dir = tempfile::tempdir().unwrap();
    let batches = many_batches(700, 60);
    let log = Log::open(dir.path(), tp(), config.clone(), 0, 0, false).unwrap();
    for (i, b) in batches.into_iter().enumerate() {
        if i == 520 {
            // 519 entries: a page of each written behind, the rest in the heap.
            assert_eq!(index_of(dir.path(), ".index"), good_index[..512 * 8]);
            assert_eq!(index_of(dir.path(), ".timeindex"), good_time[..342 * 12]);
        }
        if i == 600 {
            log.flush().unwrap();
            assert_eq!(index_of(dir.path(), ".index"), good_index[..599 * 8]);
            assert_eq!(index_of(dir.path(), ".timeindex"), good_time[..599 * 12]);
        }
        log.append_as_leader(b, 0, 0).unwrap();
    }
    let recovery_point = log.recovery_point();
    // kill -9: nothing more is written.
    drop(log);
    assert_eq!(index_of(dir.path(), ".index"), good_index[..599 * 8]);
    assert_eq!(index_of(dir.path(), ".timeindex"), good_time[..599 * 12]);

    let log = Log::open(dir.path(), tp(), config, recovery_point, 0, false).unwrap();
    assert_eq!(log.log_end_offset(), 700);
    for offset in [0, 1, 341, 512, 599, 600, 650, 699] {
        assert_eq!(first_base_offset(&log, offset), offset);
    }
    assert_eq!(by_time(&log, 1_650), Some((1_650, 650)));
    log.close().unwrap();
    assert_eq!(
        index_of(dir.path(), ".index"),
        good_index,
        "rebuilt exactly"
    );
    assert_eq!(index_of(dir.path(), ".timeindex"), good_time);
}

/// A truncation below the newest producer snapshot deletes it, and no snapshot exists at
/// the truncation offset: a synced close must then write one there, or a clean start finds
/// none, starts with no producers and takes a retried batch still in the log as new.
#[test]
fn a_clean_close_after_truncating_below_a_snapshot_keeps_the_producer_state() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        producer_id_expiration_ms: i64::MAX,
        ..LogConfig::default()
    };
    let log = Log::open(dir.path(), tp(), config.clone(), 0, 0, false).unwrap();
    idempotent(&log, 0, 6);
    log.producer_state_snapshot().unwrap();
    assert!(segment_file(dir.path(), 6, ".snapshot").exists());
    log.truncate_to(3).unwrap();
    assert!(!segment_file(dir.path(), 6, ".snapshot").exists());
    log.close().unwrap();
    drop(log);

    let log = Log::open(dir.path(), tp(), config, 0, 0, true).unwrap();
    assert_eq!(log.log_end_offset(), 3);
    let retry = batch_bytes(&[&[b'v'; 60][..]], 1002, Some((9, 0, 2)));
    let retried = log.append_as_leader(retry, 0, 0).unwrap();
    assert!(retried.duplicate, "sequence 2 is at offset 2 already");
    assert_eq!(log.log_end_offset(), 3);
    let next = batch_bytes(&[&[b'v'; 60][..]], 1003, Some((9, 0, 3)));
    assert_eq!(log.append_as_leader(next, 0, 0).unwrap().first_offset, 3);
}
