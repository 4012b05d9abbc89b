//! Decompression bombs in every codec: small batches whose records decompress to far more
//! than a batch may (128 x its size, at least 128 MiB). On produce they are refused with
//! INVALID_RECORD; on disk (written past the broker, found by recovery) a ListOffsets that
//! lands on them answers at batch level. Either way the work stops at the bound: peak
//! memory stays a few MiB above the batch, and time stays short.
//!
//! Neither the validation nor the lookup holds the log's lock while it decompresses.
//!
//! One test, so that the process's peak RSS (reset through /proc/self/clear_refs) belongs
//! to the bomb being measured.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use skua::log::{Log, LogConfig, LogError, TopicPartition};

const T: i64 = 1_700_000_000_000;
/// What one record of a bomb claims to hold.
const CLAIMED_VALUE_BYTES: i64 = 1 << 30;
/// gzip and zstd bombs decompress to this much (twice the bound for a small batch).
const BOMB_BYTES: usize = 256 << 20;

fn zigzag(v: i64) -> Vec<u8> {
    let mut u = ((v << 1) ^ (v >> 63)) as u64;
    let mut out = Vec::new();
    loop {
        let b = (u & 0x7f) as u8;
        u >>= 7;
        if u == 0 {
            out.push(b);
            return out;
        }
        out.push(b | 0x80);
    }
}

/// The start of one valid record whose value is `CLAIMED_VALUE_BYTES` long: every byte of
/// a bomb's output after this is (a prefix of) that value.
fn record_prefix() -> Vec<u8> {
    let mut head = vec![0u8]; // attributes
    head.extend(zigzag(0)); // timestamp delta
    head.extend(zigzag(0)); // offset delta
    head.extend(zigzag(-1)); // null key
    head.extend(zigzag(CLAIMED_VALUE_BYTES));
    let body = head.len() as i64 + CLAIMED_VALUE_BYTES + 1; // + header count
    let mut out = zigzag(body);
    out.extend(head);
    out
}

/// A real one-record batch of `codec`, whose header the bombs borrow.
fn header_of(codec: Compression) -> Vec<u8> {
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: T,
        key: None,
        value: Some(Bytes::from_static(b"v")),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        [&record],
        &RecordEncodeOptions {
            version: 2,
            compression: codec,
        },
    )
    .unwrap();
    buf[..61].to_vec()
}

/// A batch of `codec` around `payload`, with its length and CRC made right.
fn batch(codec: Compression, payload: &[u8]) -> Vec<u8> {
    let mut b = header_of(codec);
    b.extend_from_slice(payload);
    let len = (b.len() - 12) as i32;
    b[8..12].copy_from_slice(&len.to_be_bytes());
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// Prefix plus zeros, split so that the zeros repeat: `first` holds the record prefix.
fn chunks(chunk: usize) -> (Vec<u8>, Vec<u8>) {
    let mut first = record_prefix();
    first.resize(chunk, 0);
    (first, vec![0u8; chunk])
}

/// Concatenated gzip members (Java's GZIPInputStream and skua both read them as one stream).
fn gzip_bomb() -> Vec<u8> {
    let (first, zeros) = chunks(1 << 20);
    let mut payload = gzip(&first);
    let member = gzip(&zeros);
    for _ in 1..BOMB_BYTES >> 20 {
        payload.extend_from_slice(&member);
    }
    batch(Compression::Gzip, &payload)
}

/// Concatenated zstd frames.
fn zstd_bomb() -> Vec<u8> {
    let (first, zeros) = chunks(1 << 20);
    let mut payload = zstd::encode_all(&first[..], 19).unwrap();
    let frame = zstd::encode_all(&zeros[..], 19).unwrap();
    for _ in 1..BOMB_BYTES >> 20 {
        payload.extend_from_slice(&frame);
    }
    batch(Compression::Zstd, &payload)
}

/// One LZ4 frame of a single 4 MiB block, split into its header and the block.
fn lz4_frame(data: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut e = lz4::EncoderBuilder::new()
        .block_size(lz4::BlockSize::Max4MB)
        .block_mode(lz4::BlockMode::Independent)
        .checksum(lz4::ContentChecksum::NoChecksum)
        .level(9)
        .build(Vec::new())
        .unwrap();
    e.write_all(data).unwrap();
    let (frame, result) = e.finish();
    result.unwrap();
    // magic, FLG, BD, HC; then one block (u32 LE size, data, checksum if FLG bit 4) and
    // the end mark.
    let size = u32::from_le_bytes(frame[7..11].try_into().unwrap()) as usize;
    assert_eq!(size & 0x8000_0000, 0, "a compressed block");
    let checksum = if frame[4] & 0x10 != 0 { 4 } else { 0 };
    assert_eq!(frame.len(), 7 + 4 + size + checksum + 4, "one block");
    (frame[..7].to_vec(), frame[7..11 + size + checksum].to_vec())
}

/// One LZ4 frame of many identical independent blocks (Kafka reads one frame).
fn lz4_bomb() -> Vec<u8> {
    let (first, zeros) = chunks(4 << 20);
    let (header, first_block) = lz4_frame(&first);
    let (_, block) = lz4_frame(&zeros);
    let mut payload = header;
    payload.extend_from_slice(&first_block);
    // 48 blocks of 4 MiB: 192 MiB, as much as fits in max.message.bytes at LZ4's ratio.
    for _ in 1..48 {
        payload.extend_from_slice(&block);
    }
    payload.extend_from_slice(&[0; 4]);
    batch(Compression::Lz4, &payload)
}

/// Xerial-framed snappy, as large as `max.message.bytes` lets it be: snappy cannot expand
/// more than ~21:1, so the record runs out of bytes long before any bound.
fn snappy_blocks() -> Vec<u8> {
    let (first, zeros) = chunks(32 << 10);
    let mut payload = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01".to_vec();
    let block = |data: &[u8]| {
        let c = snap::raw::Encoder::new().compress_vec(data).unwrap();
        let mut out = (c.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(&c);
        out
    };
    payload.extend(block(&first));
    let zero_block = block(&zeros);
    while payload.len() + zero_block.len() < 1_000_000 {
        payload.extend_from_slice(&zero_block);
    }
    batch(Compression::Snappy, &payload)
}

/// The 87-byte batch of the report: raw snappy declaring a 4 GiB block.
fn snappy_declared_length() -> Vec<u8> {
    let mut payload = vec![0xff, 0xff, 0xff, 0xff, 0x0f];
    payload.resize(26, 0);
    let b = batch(Compression::Snappy, &payload);
    assert_eq!(b.len(), 87);
    b
}

fn bombs() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("gzip", gzip_bomb()),
        ("zstd", zstd_bomb()),
        ("lz4", lz4_bomb()),
        ("snappy blocks", snappy_blocks()),
        ("snappy declared length", snappy_declared_length()),
    ]
}

/// Peak resident memory since the last reset, in bytes.
fn peak_rss() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: usize = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

fn current_rss() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: usize = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

/// Runs `f`, returning its result, how long it took and how far the peak RSS rose above
/// the RSS at the start.
fn measured<T>(f: impl FnOnce() -> T) -> (T, Duration, usize) {
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let before = current_rss();
    let start = Instant::now();
    let out = f();
    (out, start.elapsed(), peak_rss().saturating_sub(before))
}

/// The most memory, above the batch itself, one bomb may cost: a zstd window or an LZ4
/// block buffer, a few read buffers. A bomb that was decompressed whole costs 256 MiB.
const EXTRA_RSS_MAX: usize = 48 << 20;
/// Generous for an unoptimised build on a shared machine; inflating 128 MiB takes about a
/// second there, and an unbounded bomb a multiple of it.
const TIME_MAX: Duration = Duration::from_secs(20);

fn open(dir: &Path, config: LogConfig, clean: bool) -> Log {
    Log::open(dir, TopicPartition::new("bombs", 0), config, 0, 0, clean).unwrap()
}

#[test]
fn decompression_bombs_stop_at_the_bound() {
    let bombs = bombs();
    let config = LogConfig {
        max_message_bytes: 1_048_588,
        ..LogConfig::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), config.clone(), false);
    for (name, bomb) in &bombs {
        assert!(bomb.len() <= 1_048_588, "{name}: {} bytes", bomb.len());
        let input = Bytes::from(bomb.clone());
        let (result, took, extra) = measured(|| log.append_as_leader(input, 0, T));
        match result {
            Err(LogError::InvalidRecord(why)) => {
                eprintln!("{name}: refused in {took:?}, +{} KiB: {why}", extra >> 10)
            }
            other => panic!("{name}: {other:?}"),
        }
        assert!(took < TIME_MAX, "{name}: {took:?}");
        assert!(
            extra < EXTRA_RSS_MAX,
            "{name}: peak RSS rose {} MiB",
            extra >> 20
        );
    }
    assert_eq!(log.log_end_offset(), 0);

    // The same bombs on disk, after a good batch, as a broker that did not validate would
    // have stored them: recovery keeps them (their CRCs hold), and ListOffsets lands on them.
    let mut segment = good_batch();
    for (i, (_, bomb)) in bombs.iter().enumerate() {
        let mut b = bomb.clone();
        b[0..8].copy_from_slice(&(1 + i as i64).to_be_bytes());
        // Each bomb's timestamp is later than the one before.
        b[35..43].copy_from_slice(&(T + 1 + i as i64).to_be_bytes());
        let crc = crc32c::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        segment.extend_from_slice(&b);
    }
    drop(log);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("00000000000000000000.log"), &segment).unwrap();
    let log = open(dir.path(), config, false);
    assert_eq!(
        log.log_end_offset(),
        1 + bombs.len() as i64,
        "recovery kept every batch"
    );
    for (i, (name, _)) in bombs.iter().enumerate() {
        let (found, took, extra) = measured(|| log.fetch_offset_by_timestamp(T + 1 + i as i64));
        let found = found.unwrap();
        assert_eq!(
            (found.timestamp, found.offset),
            (T + 1 + i as i64, 1 + i as i64),
            "{name}"
        );
        eprintln!(
            "{name} on disk: ListOffsets in {took:?}, +{} KiB",
            extra >> 10
        );
        assert!(took < TIME_MAX, "{name}: {took:?}");
        assert!(
            extra < EXTRA_RSS_MAX,
            "{name}: peak RSS rose {} MiB",
            extra >> 20
        );
    }

    // Neither decompression holds the log's lock: once a lookup on the gzip bomb and the
    // validation of another have started, appends to the same log complete while both are
    // still running. (Appends are retried rather than timed: on a loaded machine the first
    // one may be scheduled late, but with the lock held across a decompression none could
    // complete while both run.)
    let gzip = bombs[0].1.clone();
    let lookup_started = AtomicBool::new(false);
    let produce_started = AtomicBool::new(false);
    let lookup_done = AtomicBool::new(false);
    let produce_done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            lookup_started.store(true, SeqCst);
            log.fetch_offset_by_timestamp(T + 1);
            lookup_done.store(true, SeqCst);
        });
        s.spawn(|| {
            produce_started.store(true, SeqCst);
            assert!(log.append_as_leader(Bytes::from(gzip), 0, T).is_err());
            produce_done.store(true, SeqCst);
        });
        while !(lookup_started.load(SeqCst) && produce_started.load(SeqCst)) {
            std::thread::yield_now();
        }
        loop {
            let next = log.log_end_offset();
            let appended = log
                .append_as_leader(Bytes::from(good_batch()), 0, T)
                .unwrap();
            assert_eq!(appended.first_offset, next);
            let (lookup_busy, produce_busy) =
                (!lookup_done.load(SeqCst), !produce_done.load(SeqCst));
            if lookup_busy && produce_busy {
                break;
            }
            assert!(
                lookup_busy || produce_busy,
                "no append completed while both decompressions ran"
            );
        }
    });
}

/// One uncompressed record, value "v", timestamp T.
fn good_batch() -> Vec<u8> {
    let mut r = zigzag(7);
    r.extend_from_slice(&[0, 0, 0, 1, 2, b'v', 0]);
    batch(Compression::None, &r)
}
