use std::fs;
use std::path::Path;

use bytes::Bytes;

use super::*;
use crate::log::batch::RecordBatchHeader;
use crate::log::test_util::*;
use crate::log::AppendInfo;
use crate::log::TimestampType;

fn tp() -> TopicPartition {
    TopicPartition::new("t", 0)
}

fn open(dir: &Path, config: LogConfig, clean: bool) -> Log {
    Log::open(dir, tp(), config, 0, 0, clean).unwrap()
}

fn small_config() -> LogConfig {
    LogConfig {
        index_interval_bytes: 100,
        max_index_size: 4096,
        // Test batches carry timestamps near 1970, which the wall clock would expire.
        producer_id_expiration_ms: i64::MAX,
        ..LogConfig::default()
    }
}

/// ListOffsets by timestamp, as (timestamp, offset).
fn by_time(log: &Log, ts: i64) -> Option<(i64, i64)> {
    log.fetch_offset_by_timestamp(ts)
        .map(|f| (f.timestamp, f.offset))
}

fn headers(bytes: &Bytes) -> Vec<RecordBatchHeader> {
    crate::log::batch::BatchIter::new(bytes)
        .map(|r| r.unwrap().1)
        .collect()
}

fn append(log: &Log, values: &[&[u8]]) -> AppendInfo {
    log.append_as_leader(batch_bytes(values, 1_000, None), 0, 5_000)
        .unwrap()
}

#[test]
fn append_assigns_offsets_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), small_config(), false);
    assert_eq!(log.log_end_offset(), 0);
    assert_eq!(
        append(&log, &[b"a", b"b", b"c"]),
        AppendInfo {
            first_offset: 0,
            last_offset: 2,
            log_append_time: -1,
            log_start_offset: 0,
            duplicate: false
        }
    );
    assert_eq!(append(&log, &[b"d"]).first_offset, 3);
    // A client's append holds exactly one batch; two are refused and nothing is written.
    let mut two = batch_bytes(&[b"e", b"f"], 1, None).to_vec();
    two.extend_from_slice(&batch_bytes(&[b"g"], 2, None));
    let refused = log
        .append_as_leader(Bytes::from(two), 7, 5_000)
        .unwrap_err();
    assert_eq!(refused.error_code(), 87);
    assert_eq!(log.log_end_offset(), 4);
    let info = log
        .append_as_leader(batch_bytes(&[b"e", b"f"], 1, None), 7, 5_000)
        .unwrap();
    assert_eq!((info.first_offset, info.last_offset), (4, 5));
    let info = log
        .append_as_leader(batch_bytes(&[b"g"], 2, None), 7, 5_000)
        .unwrap();
    assert_eq!((info.first_offset, info.last_offset), (6, 6));
    assert_eq!(log.log_end_offset(), 7);

    let data = log.read(0, 1 << 20, i64::MAX, false).unwrap();
    let sets = decode_all(&data.records);
    let offsets: Vec<i64> = sets
        .iter()
        .flat_map(|s| s.records.iter().map(|r| r.offset))
        .collect();
    assert_eq!(offsets, (0..7).collect::<Vec<_>>());
    assert_eq!(sets[3].records[0].partition_leader_epoch, 7);
    assert_eq!(data.log_end_offset, 7);
    // An offset inside a batch returns the whole batch that contains it.
    let mid = log.read(1, 1 << 20, i64::MAX, false).unwrap();
    assert_eq!(headers(&mid.records)[0].base_offset(), 0);
    assert_eq!(
        log.read(5, 1 << 20, i64::MAX, false).unwrap().records.len(),
        data.records.len()
            - headers(&data.records)[..2]
                .iter()
                .map(|h| h.size_in_bytes())
                .sum::<usize>()
    );
    assert_eq!(log.latest_epoch(), Some(7));
    assert_eq!(log.end_offset_for_epoch(0), Some((0, 4)));
    assert_eq!(log.end_offset_for_epoch(7), Some((7, 7)));
}

#[test]
fn read_limits_and_range() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), small_config(), false);
    let batches = many_batches(5, 50);
    for b in &batches {
        log.append_as_leader(b.clone(), 0, 0).unwrap();
    }
    let size = batches[0].len();
    assert!(log
        .read(0, size - 1, i64::MAX, false)
        .unwrap()
        .records
        .is_empty());
    assert_eq!(
        log.read(0, size - 1, i64::MAX, true).unwrap().records.len(),
        size
    );
    assert_eq!(log.read(0, 0, i64::MAX, true).unwrap().records.len(), size);
    assert_eq!(
        log.read(0, 2 * size + 10, i64::MAX, false)
            .unwrap()
            .records
            .len(),
        2 * size
    );
    // The high watermark bounds what is returned.
    assert_eq!(
        headers(&log.read(0, 1 << 20, 3, false).unwrap().records).len(),
        3
    );
    assert!(log.read(3, 1 << 20, 3, true).unwrap().records.is_empty());
    assert!(log
        .read(5, 1 << 20, i64::MAX, true)
        .unwrap()
        .records
        .is_empty());
    assert!(matches!(
        log.read(6, 100, i64::MAX, true),
        Err(LogError::OffsetOutOfRange {
            offset: 6,
            log_start: 0,
            log_end: 5
        })
    ));
    assert!(matches!(
        log.read(-1, 100, i64::MAX, true),
        Err(LogError::OffsetOutOfRange { .. })
    ));
}

#[test]
fn slices_cut_at_the_size_limit_and_stop_before_the_high_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), small_config(), false);
    let batches = many_batches(5, 50);
    for b in &batches {
        log.append_as_leader(b.clone(), 0, 0).unwrap();
    }
    let size = batches[0].len();
    let slice = |offset, max_bytes, max_offset, min_one| {
        log.read_slice(offset, max_bytes, max_offset, min_one)
            .unwrap()
            .records
    };
    // Like Kafka's FileRecords.slice: the last batch may be partial...
    let cut = slice(1, size + 7, i64::MAX, false).unwrap();
    assert_eq!((cut.position(), cut.len()), (size as u64, size + 7));
    let whole = log.read(1, size, i64::MAX, false).unwrap().records;
    assert_eq!(
        &cut.read().unwrap()[..size],
        &whole[..],
        "the batch at offset 1 first"
    );
    // ...the first is whole with min_one, and without it a first batch that does not fit
    // is not read at all (never a cut-off piece alone), and nothing at or past the high
    // watermark.
    assert_eq!(slice(0, 1, i64::MAX, true).unwrap().len(), size);
    assert!(slice(0, size - 1, i64::MAX, false).is_none());
    assert!(slice(2, 1, i64::MAX, false).is_none());
    assert_eq!(slice(2, size, i64::MAX, false).unwrap().len(), size);
    assert_eq!(slice(0, 1 << 20, 3, false).unwrap().len(), 3 * size);
    assert_eq!(slice(2, 1 << 20, 3, true).unwrap().len(), size);
    assert!(slice(3, 1 << 20, 3, true).is_none());
    assert!(slice(5, 1 << 20, i64::MAX, true).is_none());
    // Reads keep whole batches only.
    assert_eq!(
        log.read(1, size + 7, i64::MAX, false)
            .unwrap()
            .records
            .len(),
        size
    );
}

#[test]
fn rolls_segments_and_reads_across_them() {
    let dir = tempfile::tempdir().unwrap();
    let batches = many_batches(30, 100);
    let config = LogConfig {
        segment_bytes: (batches[0].len() * 4) as u64,
        ..small_config()
    };
    let log = open(dir.path(), config.clone(), false);
    for b in &batches {
        log.append_as_leader(b.clone(), 0, 0).unwrap();
    }
    assert!(log.segment_count() >= 7, "{}", log.segment_count());
    assert!(dir.path().join("00000000000000000004.log").exists());
    assert!(dir.path().join("00000000000000000004.snapshot").exists());
    // A rolled segment's indexes are trimmed; the active one is preallocated.
    assert_eq!(
        fs::metadata(dir.path().join("00000000000000000000.index"))
            .unwrap()
            .len()
            % 8,
        0
    );
    assert!(
        fs::metadata(dir.path().join("00000000000000000000.index"))
            .unwrap()
            .len()
            < 4096
    );
    assert!(log.recovery_point() >= 24, "rolled segments are flushed");
    for offset in 0..30 {
        let data = log.read(offset, 1, i64::MAX, true).unwrap();
        assert_eq!(headers(&data.records)[0].base_offset(), offset);
    }
    let all = log.read(0, 1 << 20, i64::MAX, false).unwrap();
    assert_eq!(
        headers(&all.records).len(),
        4,
        "a read stays within one segment"
    );
    log.close().unwrap();
    drop(log);
    let log = open(dir.path(), config, true);
    assert_eq!(log.log_end_offset(), 30);
    assert_eq!(
        log.size_bytes(),
        batches.iter().map(|b| b.len() as u64).sum::<u64>()
    );
    assert_eq!(
        log.append_as_leader(batches[0].clone(), 0, 0)
            .unwrap()
            .first_offset,
        30
    );
}

#[test]
fn rolls_on_segment_ms() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_ms: 1_000,
        ..small_config()
    };
    let log = open(dir.path(), config, false);
    log.append_as_leader(batch_bytes(&[b"a"], 10_000, None), 0, 10_000)
        .unwrap();
    log.append_as_leader(batch_bytes(&[b"b"], 10_500, None), 0, 10_500)
        .unwrap();
    assert_eq!(log.segment_count(), 1);
    log.append_as_leader(batch_bytes(&[b"c"], 11_500, None), 0, 11_500)
        .unwrap();
    assert_eq!(log.segment_count(), 2);
}

#[test]
fn rejects_record_list_larger_than_a_segment() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 50,
        ..small_config()
    };
    let log = open(dir.path(), config, false);
    assert!(matches!(
        log.append_as_leader(batch_bytes(&[b"aaaa"], 1, None), 0, 0),
        Err(LogError::RecordListTooLarge)
    ));
    assert_eq!(log.log_end_offset(), 0);
}

/// Writes `n` batches, leaves the log without a clean close, and returns each batch's
/// (start position, base offset) and the `.log` bytes.
fn build_unclean(dir: &Path, n: usize) -> (Vec<(usize, i64)>, Vec<u8>) {
    let log = open(dir, small_config(), false);
    let mut positions = Vec::new();
    let mut position = 0;
    for (i, b) in many_batches(n, 20).into_iter().enumerate() {
        let values: Vec<&[u8]> = if i % 2 == 0 {
            vec![&b[..1]]
        } else {
            vec![&b[..1], &b[..2]]
        };
        let bytes = batch_bytes(&values, 1_000 + i as i64, None);
        let info = log.append_as_leader(bytes.clone(), 0, 0).unwrap();
        positions.push((position, info.first_offset));
        position += bytes.len();
    }
    drop(log);
    (
        positions,
        fs::read(dir.join("00000000000000000000.log")).unwrap(),
    )
}

#[test]
fn torn_last_batch_recovers_to_previous_batches_at_every_byte() {
    let src = tempfile::tempdir().unwrap();
    let (positions, log_bytes) = build_unclean(src.path(), 6);
    let (last_start, last_base) = *positions.last().unwrap();
    for cut in last_start..log_bytes.len() {
        let dir = tempfile::tempdir().unwrap();
        for entry in fs::read_dir(src.path()).unwrap() {
            let entry = entry.unwrap();
            fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
        }
        fs::write(
            dir.path().join("00000000000000000000.log"),
            &log_bytes[..cut],
        )
        .unwrap();
        let log = open(dir.path(), small_config(), false);
        assert_eq!(log.log_end_offset(), last_base, "cut at {cut}");
        assert_eq!(log.size_bytes(), last_start as u64, "cut at {cut}");
        let all = log.read(0, 1 << 20, i64::MAX, false).unwrap();
        assert_eq!(&all.records[..], &log_bytes[..last_start], "cut at {cut}");
        let info = log
            .append_as_leader(batch_bytes(&[b"next"], 1, None), 0, 0)
            .unwrap();
        assert_eq!(info.first_offset, last_base, "cut at {cut}");
        assert_eq!(
            headers(&log.read(last_base, 1000, i64::MAX, false).unwrap().records)[0].base_offset(),
            last_base
        );
    }
}

#[test]
fn garbage_after_the_last_batch_is_truncated_on_reopen() {
    for clean in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (positions, log_bytes) = build_unclean(dir.path(), 4);
        let mut damaged = log_bytes.clone();
        damaged.extend_from_slice(&[0xde; 100]);
        fs::write(dir.path().join("00000000000000000000.log"), &damaged).unwrap();
        let log = open(dir.path(), small_config(), clean);
        let leo = positions.last().unwrap().1 + 2;
        assert_eq!(log.log_end_offset(), leo, "clean={clean}");
        assert_eq!(
            fs::metadata(dir.path().join("00000000000000000000.log"))
                .unwrap()
                .len(),
            log_bytes.len() as u64
        );
        assert_eq!(
            log.append_as_leader(batch_bytes(&[b"x"], 1, None), 0, 0)
                .unwrap()
                .first_offset,
            leo
        );
    }
}

#[test]
fn corrupt_batch_in_the_middle_cuts_there_and_drops_later_segments() {
    let dir = tempfile::tempdir().unwrap();
    let batches = many_batches(12, 30);
    let config = LogConfig {
        segment_bytes: (batches[0].len() * 4) as u64,
        ..small_config()
    };
    let log = open(dir.path(), config.clone(), false);
    for b in &batches {
        log.append_as_leader(b.clone(), 0, 0).unwrap();
    }
    drop(log);
    // Flip a byte inside the second batch of segment 4.
    let path = dir.path().join("00000000000000000004.log");
    let mut bytes = fs::read(&path).unwrap();
    bytes[batches[0].len() + 40] ^= 0xff;
    fs::write(&path, bytes).unwrap();
    let log = Log::open(dir.path(), tp(), config, 4, 0, false).unwrap();
    assert_eq!(log.log_end_offset(), 5);
    assert_eq!(log.segment_count(), 2);
    assert!(!dir.path().join("00000000000000000008.log").exists());
}

#[test]
fn missing_index_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), small_config(), false);
    for b in many_batches(20, 60) {
        log.append_as_leader(b, 0, 0).unwrap();
    }
    log.close().unwrap();
    let index = fs::read(dir.path().join("00000000000000000000.index")).unwrap();
    assert!(index.len() >= 8 * 5, "entries every 100 bytes");
    drop(log);
    fs::remove_file(dir.path().join("00000000000000000000.index")).unwrap();
    fs::write(
        dir.path().join("00000000000000000000.timeindex"),
        [0xffu8; 24],
    )
    .unwrap();
    let log = open(dir.path(), small_config(), true);
    assert_eq!(log.log_end_offset(), 20);
    log.close().unwrap();
    assert_eq!(
        fs::read(dir.path().join("00000000000000000000.index")).unwrap(),
        index
    );
    for offset in 0..20 {
        assert_eq!(
            headers(&log.read(offset, 1, i64::MAX, true).unwrap().records)[0].base_offset(),
            offset
        );
    }
}

#[test]
fn clean_reopen_keeps_indexes_and_timestamps() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), small_config(), false);
    for i in 0..10i64 {
        log.append_as_leader(
            batch_bytes(
                &[b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", b"b", b"c"],
                1_000 * (i + 1),
                None,
            ),
            0,
            0,
        )
        .unwrap();
    }
    let expect = |log: &Log| {
        assert_eq!(by_time(log, 0), Some((1_000, 0)));
        assert_eq!(by_time(log, 1_000), Some((1_000, 0)));
        assert_eq!(by_time(log, 1_001), Some((1_001, 1)));
        assert_eq!(by_time(log, 1_003), Some((2_000, 3)));
        assert_eq!(by_time(log, 7_002), Some((7_002, 20)));
        assert_eq!(by_time(log, 10_002), Some((10_002, 29)));
        assert_eq!(by_time(log, 10_003), None);
        assert_eq!(
            log.max_timestamp_and_offset()
                .map(|f| (f.timestamp, f.offset)),
            Some((10_002, 29))
        );
    };
    expect(&log);
    log.close().unwrap();
    drop(log);
    let raw = fs::read(dir.path().join("00000000000000000000.timeindex")).unwrap();
    assert_eq!(raw.len() % 12, 0);
    assert_eq!(
        &raw[raw.len() - 12..],
        &[0, 0, 0, 0, 0, 0, 0x27, 0x12, 0, 0, 0, 29],
        "final entry (10002, 29)"
    );
    let log = open(dir.path(), small_config(), true);
    expect(&log);
}

#[test]
fn log_append_time_is_stamped() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        message_timestamp_type: TimestampType::LogAppendTime,
        ..small_config()
    };
    let log = open(dir.path(), config, false);
    let info = log
        .append_as_leader(batch_bytes(&[b"a"], 5, None), 0, 123_456)
        .unwrap();
    assert_eq!(info.log_append_time, 123_456);
    let data = log.read(0, 1000, i64::MAX, false).unwrap();
    assert_eq!(headers(&data.records)[0].max_timestamp(), 123_456);
    decode_all(&data.records);
}

fn idem(pid: i64, epoch: i16, seq: i32, n: usize) -> Bytes {
    let values: Vec<&[u8]> = vec![b"v"; n];
    batch_bytes(&values, 1_000, Some((pid, epoch, seq)))
}

#[test]
fn idempotent_producer_rules() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), small_config(), false);
    log.append_as_leader(batch_bytes(&[b"x"], 1, None), 0, 0)
        .unwrap();
    let first = log.append_as_leader(idem(42, 0, 0, 3), 0, 0).unwrap();
    assert_eq!((first.first_offset, first.last_offset), (1, 3));
    log.append_as_leader(idem(42, 0, 3, 1), 0, 0).unwrap();
    let retry = log.append_as_leader(idem(42, 0, 0, 3), 0, 0).unwrap();
    assert!(retry.duplicate);
    assert_eq!((retry.first_offset, retry.last_offset), (1, 3));
    assert_eq!(log.log_end_offset(), 5);
    assert!(matches!(
        log.append_as_leader(idem(42, 0, 9, 1), 0, 0),
        Err(LogError::OutOfOrderSequence { .. })
    ));
    log.append_as_leader(idem(42, 1, 0, 1), 0, 0).unwrap();
    let err = log.append_as_leader(idem(42, 0, 4, 1), 0, 0).unwrap_err();
    assert!(matches!(err, LogError::InvalidProducerEpoch { .. }));
    assert_eq!(err.error_code(), 47);
    assert_eq!(log.log_end_offset(), 6);
}

#[test]
fn producer_state_survives_clean_and_unclean_reopen() {
    for clean in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let log = open(dir.path(), small_config(), false);
        log.append_as_leader(idem(7, 2, 0, 2), 0, 0).unwrap();
        log.append_as_leader(batch_bytes(&[b"plain"], 1, None), 0, 0)
            .unwrap();
        log.append_as_leader(idem(7, 2, 2, 2), 0, 0).unwrap();
        if clean {
            log.close().unwrap();
            assert!(dir.path().join("00000000000000000005.snapshot").exists());
        }
        drop(log);
        let log = open(dir.path(), small_config(), clean);
        let retry = log.append_as_leader(idem(7, 2, 2, 2), 0, 0).unwrap();
        assert!(retry.duplicate, "clean={clean}");
        assert_eq!((retry.first_offset, retry.last_offset), (3, 4));
        assert!(matches!(
            log.append_as_leader(idem(7, 2, 5, 1), 0, 0),
            Err(LogError::OutOfOrderSequence { .. })
        ));
        assert!(matches!(
            log.append_as_leader(idem(7, 1, 4, 1), 0, 0),
            Err(LogError::InvalidProducerEpoch { .. })
        ));
        assert_eq!(
            log.append_as_leader(idem(7, 2, 4, 1), 0, 0)
                .unwrap()
                .first_offset,
            5
        );
    }
}

#[test]
fn truncate_to_rewinds_everything() {
    let dir = tempfile::tempdir().unwrap();
    let batches = many_batches(10, 40);
    let config = LogConfig {
        segment_bytes: (batches[0].len() * 3) as u64,
        ..small_config()
    };
    let log = open(dir.path(), config, false);
    log.append_as_leader(idem(1, 0, 0, 1), 1, 0).unwrap();
    for b in &batches {
        log.append_as_leader(b.clone(), 2, 0).unwrap();
    }
    log.append_as_leader(idem(1, 0, 1, 1), 3, 0).unwrap();
    assert_eq!(log.log_end_offset(), 12);
    log.truncate_to(5).unwrap();
    assert_eq!(log.log_end_offset(), 5);
    assert_eq!(log.latest_epoch(), Some(2));
    assert!(log.recovery_point() <= 5);
    assert_eq!(
        headers(&log.read(4, 1 << 20, i64::MAX, false).unwrap().records)
            .last()
            .unwrap()
            .last_offset(),
        4
    );
    // The producer's batch at offset 11 is gone, so sequence 1 is accepted again.
    assert_eq!(
        log.append_as_leader(idem(1, 0, 1, 1), 3, 0)
            .unwrap()
            .first_offset,
        5
    );
    log.truncate_to(0).unwrap();
    assert_eq!(
        (
            log.log_start_offset(),
            log.log_end_offset(),
            log.segment_count()
        ),
        (0, 0, 1)
    );
}

#[test]
fn follower_append_keeps_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let leader_dir = tempfile::tempdir().unwrap();
    let leader = open(leader_dir.path(), small_config(), false);
    for b in many_batches(5, 10) {
        leader.append_as_leader(b, 4, 0).unwrap();
    }
    let fetched = leader.read(0, 1 << 20, i64::MAX, false).unwrap().records;
    let follower = open(dir.path(), small_config(), false);
    let info = follower.append_as_follower(fetched.clone()).unwrap();
    assert_eq!((info.first_offset, info.last_offset), (0, 4));
    assert_eq!(follower.log_end_offset(), 5);
    assert_eq!(follower.latest_epoch(), Some(4));
    assert_eq!(
        follower.read(0, 1 << 20, i64::MAX, false).unwrap().records,
        fetched
    );
    assert!(
        follower.append_as_follower(fetched).is_err(),
        "offsets below the log end"
    );
}

#[test]
fn flush_to_is_shared_by_concurrent_callers() {
    let dir = tempfile::tempdir().unwrap();
    let log = std::sync::Arc::new(open(dir.path(), small_config(), false));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let log = log.clone();
            std::thread::spawn(move || {
                for _ in 0..10 {
                    let info = log
                        .append_as_leader(batch_bytes(&[b"x"], 1, None), 0, 0)
                        .unwrap();
                    log.flush_to(info.last_offset + 1).unwrap();
                    assert!(log.recovery_point() > info.last_offset);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(log.recovery_point(), 40);
    assert_eq!(log.unflushed_messages(), 0);
}

#[test]
fn log_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Log>();
    check::<crate::log::LogManager>();
}

/// A tiny deterministic generator so damaged-file tests are reproducible.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

#[test]
fn damaged_files_never_panic() {
    let mut rng = Lcg(7);
    let good = {
        let dir = tempfile::tempdir().unwrap();
        build_unclean(dir.path(), 5).1
    };
    for round in 0..40 {
        let dir = tempfile::tempdir().unwrap();
        let mut log_bytes = good.clone();
        // Overwrite a random stretch, sometimes including a header field.
        let at = (rng.next() as usize) % log_bytes.len();
        let len = 1 + (rng.next() as usize) % 16;
        for (i, b) in rng.bytes(len).into_iter().enumerate() {
            if let Some(slot) = log_bytes.get_mut(at + i) {
                *slot = b;
            }
        }
        fs::write(dir.path().join("00000000000000000000.log"), &log_bytes).unwrap();
        let n = (rng.next() as usize) % 64;
        fs::write(dir.path().join("00000000000000000000.index"), rng.bytes(n)).unwrap();
        let n = (rng.next() as usize) % 64;
        fs::write(
            dir.path().join("00000000000000000000.timeindex"),
            rng.bytes(n),
        )
        .unwrap();
        let n = (rng.next() as usize) % 100;
        fs::write(
            dir.path().join("00000000000000000002.snapshot"),
            rng.bytes(n),
        )
        .unwrap();
        fs::write(dir.path().join("leader-epoch-checkpoint"), rng.bytes(20)).unwrap();
        let clean = round % 2 == 0;
        if let Ok(log) = Log::open(dir.path(), tp(), small_config(), 0, 0, clean) {
            let leo = log.log_end_offset();
            let _ = log.read(0, 1 << 20, i64::MAX, true);
            let _ = by_time(&log, 1_002);
            let info = log
                .append_as_leader(batch_bytes(&[b"after"], 1, None), 0, 0)
                .unwrap();
            assert_eq!(info.first_offset, leo, "round {round}");
        }
    }
}

#[test]
fn random_garbage_segment_recovers_to_empty() {
    let mut rng = Lcg(99);
    for _ in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let n = (rng.next() as usize) % 4096;
        fs::write(dir.path().join("00000000000000000000.log"), rng.bytes(n)).unwrap();
        let log = open(dir.path(), small_config(), false);
        assert_eq!(log.log_end_offset(), 0);
        assert_eq!(log.size_bytes(), 0);
    }
}

#[test]
fn flush_needed_follows_flush_messages() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(
        dir.path(),
        LogConfig {
            flush_interval_messages: 1,
            ..small_config()
        },
        false,
    );
    assert!(!log.flush_needed());
    let info = append(&log, &[b"a"]);
    assert!(log.flush_needed());
    log.flush_to(info.last_offset + 1).unwrap();
    assert!(!log.flush_needed());
    assert_eq!(log.recovery_point(), 1);
    let dir2 = tempfile::tempdir().unwrap();
    let log2 = open(dir2.path(), small_config(), false);
    append(&log2, &[b"a"]);
    assert!(!log2.flush_needed(), "default leaves flushing to the OS");
}

#[test]
fn compressed_batches_round_trip() {
    use kafka_protocol::records::Compression;
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        message_timestamp_type: TimestampType::LogAppendTime,
        ..small_config()
    };
    let log = open(dir.path(), config, false);
    for c in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        log.append_as_leader(
            encode(&records(&[b"one", b"two", b"three"], 10, None), c),
            2,
            77,
        )
        .unwrap();
    }
    let data = log.read(0, 1 << 20, i64::MAX, false).unwrap();
    let sets = decode_all(&data.records);
    assert_eq!(sets.len(), 4);
    let offsets: Vec<i64> = sets
        .iter()
        .flat_map(|s| s.records.iter().map(|r| r.offset))
        .collect();
    assert_eq!(offsets, (0..12).collect::<Vec<_>>());
    assert!(headers(&data.records)
        .iter()
        .all(|h| h.max_timestamp() == 77 && h.partition_leader_epoch() == 2));
    // Under LogAppendTime every record has its batch's timestamp: the batch's first offset.
    assert_eq!(by_time(&log, 50), Some((77, 0)));
}

#[test]
fn full_index_forces_a_roll() {
    let dir = tempfile::tempdir().unwrap();
    // Two offset-index slots; one index entry per append once 1 byte has gone by.
    let config = LogConfig {
        index_interval_bytes: 1,
        max_index_size: 24,
        ..small_config()
    };
    let log = open(dir.path(), config, false);
    for b in many_batches(10, 5) {
        log.append_as_leader(b, 0, 0).unwrap();
    }
    assert!(log.segment_count() >= 3, "{}", log.segment_count());
    for offset in 0..10 {
        assert_eq!(
            headers(&log.read(offset, 1, i64::MAX, true).unwrap().records)[0].base_offset(),
            offset
        );
    }
}

#[test]
fn unclean_recovery_starts_at_the_recovery_point_segment() {
    let dir = tempfile::tempdir().unwrap();
    let batches = many_batches(12, 30);
    let config = LogConfig {
        segment_bytes: (batches[0].len() * 4) as u64,
        ..small_config()
    };
    let log = open(dir.path(), config.clone(), false);
    for b in &batches {
        log.append_as_leader(b.clone(), 0, 0).unwrap();
    }
    drop(log);
    // Damage below the recovery point is not scanned (Kafka trusts flushed data)...
    let first = dir.path().join("00000000000000000000.log");
    let mut bytes = fs::read(&first).unwrap();
    bytes[40] ^= 0xff;
    fs::write(&first, bytes).unwrap();
    // ...while a torn tail above it is cut.
    let last = dir.path().join("00000000000000000008.log");
    let len = fs::metadata(&last).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&last)
        .unwrap()
        .set_len(len - 3)
        .unwrap();
    let log = Log::open(dir.path(), tp(), config, 8, 0, false).unwrap();
    assert_eq!(log.log_end_offset(), 11);
    assert_eq!(log.recovery_point(), 8);
    assert_eq!(log.segment_count(), 3);
}

#[test]
fn loader_cleans_temporary_and_orphan_files() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), small_config(), false);
    for b in many_batches(3, 10) {
        log.append_as_leader(b, 0, 0).unwrap();
    }
    log.close().unwrap();
    drop(log);
    let p = |n: &str| dir.path().join(n);
    fs::write(p("00000000000000000000.log.deleted"), b"x").unwrap();
    fs::write(p("00000000000000000050.log.cleaned"), b"x").unwrap();
    fs::write(p("00000000000000000060.log.swap"), b"x").unwrap();
    fs::write(p("00000000000000000100.index"), [0u8; 8]).unwrap();
    fs::write(p("00000000000000000100.timeindex"), [0u8; 12]).unwrap();
    fs::write(p("leader-epoch-checkpoint.tmp"), b"x").unwrap();
    fs::write(p("00000000000000000002.checkpoint.deleted"), b"kraft").unwrap();
    let log = open(dir.path(), small_config(), true);
    assert_eq!(log.log_end_offset(), 3);
    for gone in [
        "00000000000000000000.log.deleted",
        "00000000000000000050.log.cleaned",
        "00000000000000000060.log.swap",
        "00000000000000000100.index",
        "00000000000000000100.timeindex",
        "leader-epoch-checkpoint.tmp",
    ] {
        assert!(!p(gone).exists(), "{gone}");
    }
    assert!(p("00000000000000000002.checkpoint.deleted").exists());
}

#[test]
fn swap_segment_replaces_the_segments_it_covers() {
    let dir = tempfile::tempdir().unwrap();
    let batches = many_batches(6, 10);
    let config = LogConfig {
        segment_bytes: (batches[0].len() * 2) as u64,
        ..small_config()
    };
    let log = open(dir.path(), config.clone(), false);
    for b in &batches {
        log.append_as_leader(b.clone(), 0, 0).unwrap();
    }
    log.close().unwrap();
    drop(log);
    // A cleaner's output for offsets 0..4 (segments 0 and 2), ready to swap in.
    let mut swap = fs::read(dir.path().join("00000000000000000000.log")).unwrap();
    swap.extend(fs::read(dir.path().join("00000000000000000002.log")).unwrap());
    fs::write(dir.path().join("00000000000000000000.log.swap"), &swap).unwrap();
    let log = open(dir.path(), config, true);
    assert!(!dir.path().join("00000000000000000002.log").exists());
    assert!(!dir.path().join("00000000000000000000.log.swap").exists());
    assert_eq!(log.segment_count(), 2);
    assert_eq!(log.log_end_offset(), 6);
    assert_eq!(
        headers(&log.read(3, 1, i64::MAX, true).unwrap().records)[0].base_offset(),
        3
    );
}

#[test]
fn readers_see_whole_batches_while_a_writer_appends() {
    let dir = tempfile::tempdir().unwrap();
    let log = std::sync::Arc::new(open(
        dir.path(),
        LogConfig {
            segment_bytes: 4096,
            ..small_config()
        },
        false,
    ));
    let writer = {
        let log = log.clone();
        std::thread::spawn(move || {
            for b in many_batches(300, 40) {
                log.append_as_leader(b, 0, 0).unwrap();
            }
        })
    };
    let mut reads = 0;
    while !writer.is_finished() || reads < 10 {
        let leo = log.log_end_offset();
        let from = leo / 2;
        let data = log.read(from, 2048, leo, true).unwrap();
        for h in headers(&data.records) {
            assert!(h.last_offset() < leo);
        }
        decode_all(&data.records);
        reads += 1;
    }
    writer.join().unwrap();
    assert_eq!(log.log_end_offset(), 300);
}

#[test]
fn offset_by_timestamp_inside_a_compressed_batch() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), small_config(), false);
    let recs = records(&[b"a", b"b", b"c", b"d"], 5_000, None);
    log.append_as_leader(
        encode(&recs, kafka_protocol::records::Compression::Lz4),
        0,
        0,
    )
    .unwrap();
    // Record timestamps are 5_000.. one per record: the answer is the record, not the batch.
    assert_eq!(by_time(&log, 5_002), Some((5_002, 2)));
    assert_eq!(by_time(&log, 0), Some((5_000, 0)));
    assert_eq!(by_time(&log, 5_004), None);
}

#[test]
fn idle_producers_expire_and_a_late_batch_starts_afresh() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        producer_id_expiration_ms: 60_000,
        ..small_config()
    };
    let log = Log::open(dir.path(), tp(), config.clone(), 0, 0, false).unwrap();
    // Batch timestamps are the producer's clock; expiry compares them with the broker's.
    let batch = |pid, seq, ts| batch_bytes(&[b"v"], ts, Some((pid, 0, seq)));
    log.append_as_leader(batch(1, 0, 1_000), 0, 1_000).unwrap();
    log.append_as_leader(batch(1, 1, 2_000), 0, 2_000).unwrap();
    log.append_as_leader(batch(2, 0, 50_000), 0, 50_000)
        .unwrap();

    assert_eq!(log.remove_expired_producers(61_999), 0, "not yet 60 s idle");
    assert_eq!(
        log.remove_expired_producers(62_000),
        1,
        "producer 1 expires"
    );
    // Its retry of batch 1 is no longer known: Kafka appends it again as new data.
    let retry = log.append_as_leader(batch(1, 1, 2_000), 0, 62_000).unwrap();
    assert!(!retry.duplicate);
    assert_eq!(retry.first_offset, 3);
    // And a late batch with any sequence is accepted, as from an unknown producer.
    let mut other = batch_bytes(&[b"v"], 62_000, Some((2, 0, 7)));
    assert!(matches!(
        log.append_as_leader(std::mem::take(&mut other), 0, 62_000),
        Err(LogError::OutOfOrderSequence { .. })
    ));
    // Producer 2 (last batch at 50 s) and producer 1 again (its retry carried 2 s).
    assert_eq!(log.remove_expired_producers(110_000), 2);
    let late = log
        .append_as_leader(batch_bytes(&[b"v"], 110_000, Some((2, 0, 7))), 0, 110_000)
        .unwrap();
    assert_eq!(late.first_offset, 4);

    // The state after expiry is what a restart sees (with expiry at load turned off: these
    // timestamps are decades old by the wall clock).
    log.close().unwrap();
    drop(log);
    let never = LogConfig {
        producer_id_expiration_ms: i64::MAX,
        ..config
    };
    let log = Log::open(dir.path(), tp(), never, 0, 0, true).unwrap();
    assert!(
        log.append_as_leader(batch_bytes(&[b"v"], 110_000, Some((2, 0, 7))), 0, 0)
            .unwrap()
            .duplicate
    );
    assert!(
        !log.append_as_leader(batch_bytes(&[b"v"], 2_000, Some((1, 0, 1))), 0, 0)
            .unwrap()
            .duplicate,
        "producer 1 stayed expired"
    );
}

#[test]
fn expired_producers_are_dropped_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        producer_id_expiration_ms: 1_000,
        ..small_config()
    };
    let log = Log::open(dir.path(), tp(), config.clone(), 0, 0, false).unwrap();
    // A timestamp far in the past: idle for longer than a second by any clock.
    log.append_as_leader(batch_bytes(&[b"v"], 5, Some((8, 0, 0))), 0, 5)
        .unwrap();
    log.close().unwrap();
    drop(log);
    let log = Log::open(dir.path(), tp(), config, 0, 0, true).unwrap();
    assert!(
        !log.append_as_leader(batch_bytes(&[b"v"], 5, Some((8, 0, 0))), 0, 5)
            .unwrap()
            .duplicate,
        "producer 8 expired while loading, so its retry is new data"
    );
}

/// Open descriptors of this process on files under `dir`.
fn fds_under(dir: &Path) -> usize {
    fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.starts_with(dir))
        .count()
}

#[test]
fn a_segment_holds_one_file_descriptor() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 300,
        ..small_config()
    };
    let log = Log::open(dir.path(), tp(), config.clone(), 0, 0, false).unwrap();
    for i in 0..20 {
        log.append_as_leader(batch_bytes(&[&[b'x'; 100]], i, None), 0, 0)
            .unwrap();
    }
    let segments = log.segment_count();
    assert!(segments >= 5, "{segments} segments");
    assert_eq!(fds_under(dir.path()), segments, "only each .log stays open");
    // Indexes still work without their descriptors: lookups, flush, reopen.
    log.flush().unwrap();
    let data = log.read(7, 1 << 20, i64::MAX, false).unwrap();
    assert_eq!(headers(&data.records)[0].base_offset(), 7);
    log.close().unwrap();
    drop(log);
    let log = Log::open(dir.path(), tp(), config, 0, 0, true).unwrap();
    assert_eq!(fds_under(dir.path()), log.segment_count());
    assert_eq!(log.log_end_offset(), 20);
}

#[test]
fn flush_ms_is_honoured_by_the_scheduled_flusher() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        flush_ms: 60_000,
        ..small_config()
    };
    let log = Log::open(dir.path(), tp(), config, 0, 0, false).unwrap();
    append(&log, &[b"a"]);
    let opened = now_ms();
    log.flush_if_due(opened).unwrap();
    assert_eq!(log.recovery_point(), 0, "flushed less than flush.ms ago");
    log.flush_if_due(opened + 60_000).unwrap();
    assert_eq!(log.recovery_point(), 1);
    append(&log, &[b"b"]);
    log.flush_if_due(now_ms() + 59_000).unwrap();
    assert_eq!(
        log.recovery_point(),
        1,
        "the clock restarted at the last flush"
    );
}

/// The longest anyone waits for the partition lock while appends roll segments with
/// `SKUA_PRODUCERS` (300,000) idempotent producers in the partition, whose snapshot is
/// written at every roll. `cargo test --release --lib append_stall -- --ignored --nocapture`
#[test]
#[ignore = "a measurement, not a check"]
fn append_stall_at_roll_with_many_producers() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let n: i64 = std::env::var("SKUA_PRODUCERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300_000);
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 8 * 1024 * 1024,
        ..small_config()
    };
    let log = Arc::new(Log::open(dir.path(), tp(), config, 0, 0, false).unwrap());
    let mut raw = batch_bytes(&[b"v"], 1, Some((0, 0, 0))).to_vec();
    for pid in 0..n {
        raw[43..51].copy_from_slice(&pid.to_be_bytes());
        crate::log::batch::set_base_offset(&mut raw, 0);
        let crc = crc32c::crc32c(&raw[21..]);
        raw[17..21].copy_from_slice(&crc.to_be_bytes());
        log.append_as_leader(Bytes::copy_from_slice(&raw), 0, 0)
            .unwrap();
    }
    let segments = log.segment_count();
    let stop = Arc::new(AtomicBool::new(false));
    // Waits for the partition lock alone (segment_count takes it and does nothing else).
    let waiter = {
        let (log, stop) = (log.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut worst = std::time::Duration::ZERO;
            while !stop.load(Ordering::Relaxed) {
                let t = std::time::Instant::now();
                let _ = log.segment_count();
                worst = worst.max(t.elapsed());
            }
            worst
        })
    };
    let big = batch_bytes(&[&vec![b'x'; 900 * 1024]], 1, None);
    let mut roll_times = Vec::new();
    while log.segment_count() < segments + 5 {
        let t = std::time::Instant::now();
        log.append_as_leader(big.clone(), 0, 0).unwrap();
        roll_times.push(t.elapsed());
    }
    stop.store(true, Ordering::Relaxed);
    let worst = waiter.join().unwrap();
    eprintln!(
        "{n} producers: longest wait for the partition lock {worst:?}; a rolling append \
         (snapshot write and segment fsync included) took up to {:?}",
        roll_times.iter().max().unwrap()
    );
}

#[test]
fn deferred_roll_work_is_done_by_complete_roll_or_close() {
    let dir = tempfile::tempdir().unwrap();
    let batches = many_batches(9, 100);
    let config = LogConfig {
        segment_bytes: (batches[0].len() * 4) as u64,
        ..small_config()
    };
    let log = open(dir.path(), config, false);
    log.defer_roll_work();
    for b in &batches[..5] {
        log.append_as_leader(b.clone(), 0, 0).unwrap();
    }
    assert_eq!(log.segment_count(), 2);
    assert!(log.has_pending_roll());
    assert_eq!(
        log.recovery_point(),
        0,
        "the appending thread did not fsync"
    );
    assert!(!dir.path().join("00000000000000000004.snapshot").exists());
    log.complete_roll();
    assert!(!log.has_pending_roll());
    assert!(
        log.recovery_point() >= 4,
        "everything below the new segment is durable"
    );
    assert!(dir.path().join("00000000000000000004.snapshot").exists());
    // Two rolls before the work runs: the newest covers both.
    for b in &batches[5..] {
        log.append_as_leader(b.clone(), 0, 0).unwrap();
    }
    assert!(log.has_pending_roll());
    log.close().unwrap();
    assert!(!log.has_pending_roll());
    assert!(dir.path().join("00000000000000000008.snapshot").exists());
}

/// A request's records arrive as a slice of a frame that other requests and fields still
/// share: the append patches its header apart and writes the records from where they are,
/// so the frame is left as it came and the log holds the batch with its offsets and epoch.
#[test]
fn an_append_from_a_shared_frame_leaves_the_frame_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), small_config(), false);
    append(&log, &[b"a", b"b"]);
    let batch = batch_bytes(&[b"c", b"d", b"e"], 1_000, None);
    let mut frame = b"header-and-fields".to_vec();
    frame.extend_from_slice(&batch);
    frame.extend_from_slice(b"next-request");
    let frame = Bytes::from(frame);
    let records = frame.slice(17..17 + batch.len());
    let info = log.append_as_leader(records, 9, 5_000).unwrap();
    assert_eq!((info.first_offset, info.last_offset), (2, 4));
    assert_eq!(
        &frame[17..17 + batch.len()],
        &batch[..],
        "the frame was patched"
    );
    let read = log.read(2, 1 << 20, i64::MAX, true).unwrap().records;
    let h = headers(&read);
    assert_eq!(h.len(), 1);
    assert_eq!((h[0].base_offset(), h[0].partition_leader_epoch()), (2, 9));
    crate::log::batch::verify_crc(&read).unwrap();
    let header_size = crate::log::HEADER_SIZE;
    assert_eq!(&read[header_size..], &batch[header_size..]);
    let values: Vec<_> = decode_all(&read)[0]
        .records
        .iter()
        .map(|r| (r.offset, r.value.clone().unwrap()))
        .collect();
    assert_eq!(
        values,
        vec![
            (2, Bytes::from("c")),
            (3, Bytes::from("d")),
            (4, Bytes::from("e"))
        ]
    );
}

/// A leader that hung with a producer's requests open: the new leader took the producer's
/// later batches, and the hung requests come back as retries after more than five batches.
/// Each retried batch is found in the log (here across segments, with another producer's
/// batches between) and acknowledged at its original offsets; a range never written as one
/// batch, and an epoch or producer the batch does not carry, stay out of order.
#[test]
fn a_retry_older_than_the_remembered_batches_is_found_in_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 400,
        ..small_config()
    };
    let log = open(dir.path(), config, false);
    let mut written = Vec::new();
    for seq in (0..40).step_by(4) {
        let info = log.append_as_leader(idem(42, 0, seq, 4), 0, 0).unwrap();
        written.push((seq, info.first_offset, info.last_offset));
        log.append_as_leader(idem(7, 3, seq / 4, 1), 0, 0).unwrap();
    }
    assert!(log.segment_count() > 3, "the batches span segments");
    let end = log.log_end_offset();
    for &(seq, first, last) in &written[..5] {
        let retry = log.append_as_leader(idem(42, 0, seq, 4), 0, 0).unwrap();
        assert!(retry.duplicate, "seq {seq}");
        assert_eq!((retry.first_offset, retry.last_offset), (first, last));
    }
    for never_one_batch in [idem(42, 0, 2, 4), idem(42, 0, 4, 2), idem(42, 1, 4, 4)] {
        assert!(matches!(
            log.append_as_leader(never_one_batch, 0, 0),
            Err(LogError::OutOfOrderSequence { .. })
        ));
    }
    assert!(matches!(
        log.append_as_leader(idem(42, 0, 40, 4), 0, 0),
        Ok(AppendInfo {
            duplicate: false,
            ..
        })
    ));
    assert_eq!(
        log.log_end_offset(),
        end + 4,
        "only the next batch was written"
    );
}

/// Below the log start nothing is looked up: a retry of a batch retention removed stays
/// out of order.
#[test]
fn a_retry_of_a_batch_below_the_log_start_is_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), small_config(), false);
    for seq in (0..32).step_by(4) {
        log.append_as_leader(idem(42, 0, seq, 4), 0, 0).unwrap();
    }
    log.maybe_increment_log_start_offset(8).unwrap();
    assert!(matches!(
        log.append_as_leader(idem(42, 0, 4, 4), 0, 0),
        Err(LogError::OutOfOrderSequence { .. })
    ));
    let retry = log.append_as_leader(idem(42, 0, 8, 4), 0, 0).unwrap();
    assert!(retry.duplicate);
    assert_eq!((retry.first_offset, retry.last_offset), (8, 11));
}

/// The stall scripts/faults saw, at the log: the old leader took five batches whose
/// requests it never answered, a follower replicated them and became leader, took the
/// producer's later batches in sequence, and then the five come back as retries. Each is
/// acknowledged at the offsets the follower copied it to.
#[test]
fn a_new_leader_acknowledges_retries_of_the_batches_it_replicated() {
    let old_dir = tempfile::tempdir().unwrap();
    let old_leader = open(old_dir.path(), small_config(), false);
    for seq in (0..20).step_by(4) {
        old_leader
            .append_as_leader(idem(42, 0, seq, 4), 0, 0)
            .unwrap();
    }
    let replicated = old_leader
        .read(0, 1 << 20, i64::MAX, false)
        .unwrap()
        .records;
    let new_dir = tempfile::tempdir().unwrap();
    let new_leader = open(new_dir.path(), small_config(), false);
    new_leader.append_as_follower(replicated).unwrap();
    for seq in (20..60).step_by(4) {
        let next = new_leader
            .append_as_leader(idem(42, 0, seq, 4), 1, 0)
            .unwrap();
        assert_eq!(next.first_offset, i64::from(seq), "in sequence");
    }
    for seq in (0..20).step_by(4) {
        let retry = new_leader
            .append_as_leader(idem(42, 0, seq, 4), 1, 0)
            .unwrap();
        assert!(retry.duplicate, "seq {seq}");
        let first = i64::from(seq);
        assert_eq!((retry.first_offset, retry.last_offset), (first, first + 3));
    }
    assert_eq!(new_leader.log_end_offset(), 60);
}
