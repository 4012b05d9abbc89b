//! A mutation smoke test of every decoder that reads bytes from the network or back from
//! disk: the frame reader, request decoding, the record-batch validator (through
//! `Log::append_as_leader`), the stored-batch record reader (`log::records`), and the
//! broker as a whole over TCP.
//!
//! Seeds are the captured client frames in `protocol-tests/fixtures`. A deterministic PRNG
//! flips bits, truncates, sets length and count fields to huge or negative values and splices
//! frames together, for a bounded number of iterations and a bounded time, so the test is
//! fast and the same on every run (`SKUA_FUZZ_SEED` and `SKUA_FUZZ_SECS` widen it). Longer
//! coverage-guided sessions: the cargo-fuzz targets in `fuzz/` (see protocol-tests/README.md).
//!
//! Besides "no panic", allocations are bounded: a counting global allocator records the
//! largest single allocation made while decoding, which must stay proportional to the frame.

#[path = "it/common/mod.rs"]
mod common;
#[path = "it/fuzzing/mod.rs"]
mod fuzzing;
use fuzzing::{budget, Rng, NASTY_I32};
#[path = "it/replay/mod.rs"]
mod replay;

use std::alloc::{GlobalAlloc, Layout, System};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestKind};
use kafka_protocol::records::{Compression, RecordBatchDecoder};

use skua::log::{records, Log, LogConfig, TopicPartition};
use skua::protocol::frame::{self, Check};

/// Tracks the largest single allocation, so a hostile count cannot go unnoticed.
struct PeakAlloc;

static LARGEST_ALLOC: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only records sizes.
unsafe impl GlobalAlloc for PeakAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST_ALLOC.fetch_max(layout.size(), Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST_ALLOC.fetch_max(new_size, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: PeakAlloc = PeakAlloc;

/// The largest allocation decoding a frame of `len` bytes may make. Arrays are preallocated
/// at most one element per remaining byte (vendor/kafka-protocol/PATCHES.md), and the
/// largest decoded element types are a few hundred bytes.
fn alloc_bound(len: usize) -> usize {
    1024 * len + (1 << 20)
}

/// One mutation of `input`; `other` is a second seed to splice from. The first 8 bytes
/// (api key, version, correlation id) are mostly kept so decoding reaches the body.
fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    let rounds = 1 + rng.below(4);
    for _ in 0..rounds {
        let len = out.len();
        let floor = if rng.below(8) == 0 { 0 } else { 8.min(len) };
        let at = floor + rng.below(len.saturating_sub(floor));
        match rng.below(8) {
            0 if len > 0 => out[at.min(len - 1)] ^= 1 << rng.below(8),
            1 if len > 0 => out[at.min(len - 1)] = rng.next() as u8,
            2 => out.truncate(at),
            3 if at + 4 <= len => {
                let v = NASTY_I32[rng.below(NASTY_I32.len())];
                out[at..at + 4].copy_from_slice(&v.to_be_bytes());
            }
            4 if at + 2 <= len => {
                let v = NASTY_I32[rng.below(NASTY_I32.len())] as i16;
                out[at..at + 2].copy_from_slice(&v.to_be_bytes());
            }
            5 => {
                // A maximal unsigned varint, as compact arrays and strings use.
                let v: &[u8] =
                    [&[0xff, 0xff, 0xff, 0xff, 0x0f][..], &[0x80; 6], &[0]][rng.below(3)];
                out.splice(at.min(len)..(at + v.len()).min(len), v.iter().copied());
            }
            6 => {
                let from = rng.below(other.len());
                out.truncate(at);
                out.extend_from_slice(&other[from..]);
            }
            _ => {
                let end = (at + 1 + rng.below(32)).min(len);
                let chunk = out[at.min(end)..end].to_vec();
                out.splice(at..at, chunk);
            }
        }
    }
    out
}

fn seeds() -> Vec<Bytes> {
    replay::manifest().iter().map(|f| f.request()).collect()
}

/// Runs `f` on one input; a panic fails the test with the input in hex, to reproduce it.
fn no_panic<T>(what: &str, input: &[u8], f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|_| panic!("{what} panicked on {} bytes: {}", input.len(), hex(input)))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn frame_check_is_consistent() {
    let mut rng = Rng::from_env(0x5ca1_ab1e);
    let seeds = seeds();
    let deadline = Instant::now() + budget(1.5);
    for i in 0..200_000 {
        if Instant::now() > deadline {
            break;
        }
        let body = &seeds[i % seeds.len()];
        let mut buf = (body.len() as i32).to_be_bytes().to_vec();
        buf.extend_from_slice(body);
        let buf = mutate(&mut rng, &buf, body);
        let max = [0, 8, 100, 1 << 20, 100 * 1024 * 1024][rng.below(5)];
        let declared =
            (buf.len() >= 4).then(|| i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]));
        match no_panic("frame::check", &buf, || frame::check(&buf, max)) {
            Ok(Check::Complete(n)) => {
                assert_eq!(Some(n as i32), declared);
                assert!(n <= max && 4 + n <= buf.len());
                let mut b = BytesMut::from(&buf[..]);
                assert_eq!(frame::split(&mut b, n).len(), n);
            }
            Ok(Check::Incomplete(total)) => assert!(total > buf.len() && total <= 4 + max),
            Err(_) => assert!(declared.is_some_and(|d| d < 0 || d as usize > max)),
        }
    }
}

#[test]
fn decode_request_survives_mutations() {
    let mut rng = Rng::from_env(0x5ca1_ab1e);
    let seeds = seeds();
    let deadline = Instant::now() + budget(1.5);
    let (mut n, mut decoded) = (0u64, 0u64);
    while Instant::now() < deadline && n < 2_000_000 {
        let a = &seeds[rng.below(seeds.len())];
        let b = &seeds[rng.below(seeds.len())];
        let input = mutate(&mut rng, a, b);
        let frame = Bytes::from(input.clone());
        LARGEST_ALLOC.store(0, Ordering::Relaxed);
        let result = no_panic("decode_request", &input, || {
            skua::protocol::decode_request(frame)
        });
        let largest = LARGEST_ALLOC.load(Ordering::Relaxed);
        assert!(
            largest <= alloc_bound(input.len()),
            "decoding {} bytes allocated {largest} at once: {}",
            input.len(),
            hex(&input)
        );
        decoded += result.is_ok() as u64;
        n += 1;
    }
    eprintln!("decode_request: {n} mutated frames, {decoded} still decoded");
    assert!(n >= 1000, "too few iterations ({n}) to mean anything");
}

/// Record batches from the captured produce requests. Every client compressed, so a few
/// uncompressed batches (plain and idempotent) are added to reach the per-record checks.
fn captured_batches() -> Vec<Bytes> {
    let mut out = vec![
        common::batch(&["a", "bb", "ccc"], None, Compression::None),
        common::batch(&["x"; 5], Some((7, 0, 0)), Compression::None),
    ];
    for f in replay::manifest() {
        if f.api_key != ApiKey::Produce || f.version < 3 {
            continue;
        }
        let Ok(req) = skua::protocol::decode_request(f.request()) else {
            continue;
        };
        let RequestKind::Produce(p) = req.body else {
            continue;
        };
        for t in p.topic_data {
            for part in t.partition_data {
                out.extend(part.records.filter(|r| !r.is_empty()));
            }
        }
    }
    out
}

/// Recomputes a v2 batch's CRC so that mutations reach the checks behind it.
fn fix_crc(batch: &mut [u8]) {
    if batch.len() >= 61 {
        let crc = crc32c::crc32c(&batch[21..]);
        batch[17..21].copy_from_slice(&crc.to_be_bytes());
    }
}

#[test]
fn record_validation_survives_mutations() {
    let mut rng = Rng::from_env(0x5ca1_ab1e);
    let batches = captured_batches();
    assert!(!batches.is_empty(), "no produce fixtures with records");
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(
        dir.path(),
        TopicPartition::new("fuzz", 0),
        LogConfig::default(),
        0,
        0,
        true,
    )
    .expect("log opens");
    let deadline = Instant::now() + budget(1.5);
    let (mut n, mut accepted, mut read_back) = (0u64, 0u64, 0u64);
    while Instant::now() < deadline && n < 200_000 {
        // Half from the two uncompressed seeds, which reach the per-record checks.
        let a = &batches[if rng.below(2) == 0 {
            rng.below(2)
        } else {
            rng.below(batches.len())
        }];
        let b = &batches[rng.below(batches.len())];
        let mut input = mutate(&mut rng, a, b);
        if rng.below(4) != 0 {
            fix_crc(&mut input);
        }
        let records = Bytes::from(input.clone());
        let result = no_panic("append_as_leader", &input, || {
            log.append_as_leader(records, 0, 1_700_000_000_000)
        });
        n += 1;
        let Ok(info) = result else { continue };
        accepted += 1;
        // What the validator let in reads back, and decodes record by record, compressed
        // or not: produce walks every inner record, so what it stores is what consumers
        // (here the crate's decoder) and skua's own reader can read.
        if !info.duplicate {
            let data = log
                .read(info.first_offset, 1 << 20, i64::MAX, true)
                .expect("an accepted batch reads back");
            let mut fetched = data.records.clone();
            RecordBatchDecoder::decode_all(&mut fetched).unwrap_or_else(|e| {
                panic!("accepted batch does not decode ({e}): {}", hex(&input))
            });
            for (_, batch) in records::whole_batches(&data.records) {
                for r in records::records(batch).expect("stored batch opens") {
                    r.unwrap_or_else(|e| {
                        panic!("accepted batch unreadable ({e}): {}", hex(&input))
                    });
                }
            }
            read_back += 1;
        }
    }
    eprintln!("append_as_leader: {n} mutated batches, {accepted} accepted, {read_back} read back");
}

/// Batches as read back from a segment, mutated (no CRC stands in the way: stored data is
/// read without one), through the bounded record reader that ListOffsets and the group
/// coordinator's loader use. The cargo-fuzz target `stored_batch` runs the same longer.
#[test]
fn stored_batch_reader_survives_mutations() {
    let mut rng = Rng(Rng::from_env(0x5ca1_ab1e).0 ^ 0x5707ed);
    let mut batches = captured_batches();
    for c in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        batches.push(common::batch(&["a", "bb", "ccc"], Some((3, 0, 0)), c));
    }
    let deadline = Instant::now() + budget(1.5);
    let (mut n, mut records_read) = (0u64, 0u64);
    while Instant::now() < deadline && n < 200_000 {
        let a = &batches[rng.below(batches.len())];
        let b = &batches[rng.below(batches.len())];
        let input = mutate(&mut rng, a, b);
        LARGEST_ALLOC.store(0, Ordering::Relaxed);
        no_panic("records", &input, || {
            for (header, batch) in records::whole_batches(&input) {
                let Ok(reader) = records::records(batch) else {
                    continue;
                };
                let mut count = 0i64;
                for record in reader {
                    let Ok(record) = record else { break };
                    count += 1;
                    assert!(count <= i64::from(header.records_count()));
                    assert!(record.offset >= header.base_offset());
                    assert!(record.offset <= header.last_offset());
                    records_read += 1;
                }
            }
        });
        let largest = LARGEST_ALLOC.load(Ordering::Relaxed);
        assert!(
            largest <= stored_alloc_bound(input.len()),
            "reading {} bytes allocated {largest} at once: {}",
            input.len(),
            hex(&input)
        );
        n += 1;
    }
    eprintln!("records: {n} mutated stored batches, {records_read} records read");
    assert!(n >= 1000, "too few iterations ({n}) to mean anything");
}

/// Reading a stored batch allocates read buffers (64 KiB), snappy blocks (at most 22 times
/// their compressed size) and keys and values as they are read, never a declared size.
fn stored_alloc_bound(len: usize) -> usize {
    32 * len + (1 << 20)
}

/// Mutated frames over TCP: the broker answers or closes the connection, and keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_survives_mutated_frames() {
    let dir = tempfile::tempdir().unwrap();
    let broker = common::TestBroker::start(dir.path(), &[]).await;
    let mut rng = Rng(Rng::from_env(0x5ca1_ab1e).0 ^ 0xb0b);
    // Not the admin requests: a mutated partition count (say 2^24) makes skua create that
    // many partitions, holding the controller for minutes (see protocol-tests/README.md,
    // "Known gaps"). decode_request_survives_mutations still covers their decoding.
    let seeds: Vec<Bytes> = replay::manifest()
        .iter()
        .filter(|f| !matches!(f.api_key, ApiKey::CreateTopics | ApiKey::CreatePartitions))
        .map(|f| f.request())
        .collect();
    let deadline = Instant::now() + budget(1.5);
    let mut sent = 0;
    while Instant::now() < deadline && sent < 3000 {
        let mut conn = broker.client().await;
        // A few frames per connection: a bad one usually closes it.
        for _ in 0..4 {
            let a = &seeds[rng.below(seeds.len())];
            let b = &seeds[rng.below(seeds.len())];
            let input = mutate(&mut rng, a, b);
            conn.write_frame(&input).await;
            sent += 1;
            let answered =
                tokio::time::timeout(Duration::from_millis(200), conn.read_frame()).await;
            if !matches!(answered, Ok(Some(_))) {
                break;
            }
        }
    }
    eprintln!("broker: {sent} mutated frames sent");
    let mut conn = broker.client().await;
    let resp = tokio::time::timeout(
        Duration::from_secs(5),
        conn.send(&kafka_protocol::messages::ApiVersionsRequest::default(), 3),
    )
    .await
    .expect("broker still answers ApiVersions");
    assert_eq!(resp.error_code, 0);
    // Not `broker.stop()`: graceful shutdown lets each connection answer what it accepted,
    // and a mutated Fetch may long-poll for up to a minute. The runtime drops the tasks.
    drop(broker);
}
